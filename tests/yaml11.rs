//! What hardshift writes as YAML reads back the same by a YAML 1.1 reader (PyYAML, as older Go
//! and Java tools read YAML): strings that 1.1 would take for a bool, null, integer, float or a
//! sexagesimal number (`Yes`, `OFF`, `Y`, `~`, `1_000`, `0b101`, `0o17`, `12:30`, a MAC address)
//! are quoted; and the example bundle's manifests and static pods read back unchanged.

mod common;

use common::*;
use serde_json::{json, Value};

/// `text` as a YAML 1.1 reader sees it (every document), as JSON.
fn yaml11(text: &str) -> Vec<Value> {
    use std::io::Write;
    let mut child = std::process::Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys, json, yaml; print(json.dumps(list(yaml.safe_load_all(sys.stdin.read())), default=str))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3 with PyYAML (python3-yaml, which hack/setup.sh installs)");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text_of(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn text_of(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

#[test]
fn strings_a_yaml_1_1_reader_would_misread_are_quoted() {
    let words = [
        "Yes",
        "YES",
        "yes",
        "No",
        "NO",
        "On",
        "ON",
        "Off",
        "OFF",
        "Y",
        "y",
        "N",
        "n",
        "True",
        "FALSE",
        "~",
        "Null",
        "NULL",
        "null",
        "1_000",
        "0b101",
        "0o17",
        "017",
        "0x1F",
        "12:30",
        "190:20:30",
        "1e3",
        "+12",
        "-7",
        ".inf",
        "-.Inf",
        ".NaN",
        "52:54:00:00:00:64",
        "1.5",
        "0",
        "",
        "2026-11-27",
        "2026-11-27T05:04:00Z",
    ];
    let v = json!({"list": words.to_vec(), "map": words.iter().map(|w| (w.to_string(), json!(w))).collect::<serde_json::Map<_, _>>()});
    let text = hardshift_generator::yamlout::to_yaml(&v);
    let back = yaml11(&text);
    assert_eq!(back, vec![v.clone()], "YAML 1.1 read it differently:\n{text}");
    // Ordinary words stay plain (readable): quoting is only where it is needed.
    let plain = hardshift_generator::yamlout::to_yaml(&json!({"a": "master-0", "b": "4.18.0", "c": "192.168.126.1", "d": "fd00::1"}));
    assert!(!plain.contains('"') && !plain.contains('\''), "{plain}");
}

#[test]
fn the_bundles_yaml_reads_back_the_same_by_yaml_1_1() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let boot: hardshift_generator::ignition::Config =
        serde_json::from_slice(&std::fs::read(d.path().join("ignition/bootstrap.ign")).unwrap()).unwrap();
    let mut n = 0;
    for f in boot.storage.files.iter().filter(|f| f.path.ends_with(".yaml")) {
        let bytes = hardshift_generator::ignition::decode(f.contents.as_ref().unwrap()).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let ours: Vec<Value> = hardshift_generator::crd::split_documents(&text)
            .into_iter()
            .map(|doc| hardshift_generator::config::yaml::parse(doc).unwrap().value)
            .collect();
        assert_eq!(
            yaml11(&text).into_iter().filter(|v| !v.is_null()).collect::<Vec<_>>(),
            ours,
            "{}",
            f.path
        );
        n += 1;
    }
    assert!(n >= 15, "only {n} YAML files judged");
}
