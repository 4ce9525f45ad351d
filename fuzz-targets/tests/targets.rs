//! The fuzz targets, one engine for all: under `cargo test` bolero replays each target's corpus
//! (tests/__fuzz__/<name>/corpus, the name without `fuzz_`) and random inputs; under hack/fuzz.sh
//! the same targets run coverage-guided (libFuzzer, sanitizer coverage on stable Rust) for
//! HARDSHIFT_FUZZ_SECS each, and a crash fails the run with its input saved.
//!
//! Each target must never panic, and states what must hold of what it accepts.

use hardshift_collector::{events, store::Store, summary};
use hardshift_generator::config::{self, yaml};
use hardshift_generator::pipeline::rendered;
use hardshift_proto::v1::agent_message::Body;
use hardshift_proto::v1::{AgentMessage, NodeReport};
use hardshift_registry::{extract, release};
use prost::Message;
use std::path::Path;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/ocp4");

/// A manifest's layer list never becomes a path outside the blob cache.
#[test]
fn fuzz_manifest_layer_paths() {
    let blobs = Path::new("/cache/blobs");
    bolero::check!().for_each(|input: &[u8]| {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(input) else {
            return;
        };
        if let Ok((layers, paths)) = release::layer_paths(&v, blobs, &"fuzz") {
            assert_eq!(layers.len(), paths.len());
            for p in &paths {
                assert_eq!(p.parent(), Some(blobs), "{p:?} is outside the blob cache");
                let name = p.file_name().unwrap().to_string_lossy();
                assert!(name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()), "{p:?}");
            }
        }
    });
}

/// A layer's bytes, whatever they are, never make extraction panic or write outside its root.
#[test]
fn fuzz_layer_extraction() {
    bolero::check!().for_each(|input: &[u8]| {
        let t = tempfile::tempdir().unwrap();
        let (root, layer) = (t.path().join("root"), t.path().join("layer"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(&layer, input).unwrap();
        let _ = extract::apply_layer(&layer, &root, &|p: &str| p.starts_with("release-manifests"));
        let mut names: Vec<String> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["layer", "root"], "a layer wrote outside its root");
        assert!(root.is_dir(), "the root itself was removed");
    });
}

/// The YAML front end and everything `create` does with what it parses: errors point inside
/// the file, as each of the three input files (the others left good).
#[test]
fn fuzz_yaml_front_end() {
    let example = config::read_sources(Path::new(EXAMPLE), None).unwrap();
    bolero::check!().for_each(|input: &[u8]| {
        let text = String::from_utf8_lossy(input);
        let lines = text.lines().count() + 1;
        if let Err(e) = yaml::parse(&text) {
            assert!(e.pos.line >= 1 && e.pos.line <= lines + 1, "{e:?} outside {lines} lines");
        }
        for which in 0..3 {
            let mut s = example.clone();
            match which {
                0 => s.install_config = text.to_string(),
                1 => s.agent_config = text.to_string(),
                _ => s.hardshift = Some(text.to_string()),
            }
            let name = ["install-config.yaml", "agent-config.yaml", "hardshift.yaml"][which];
            if let Err(e) = config::build(&s, &config::Overrides::default()) {
                assert!(!e.diagnostics.is_empty(), "an error must say something");
                for d in e.diagnostics.iter().filter(|d| d.file == name) {
                    if let Some(p) = d.pos {
                        assert!(p.line >= 1 && p.line <= lines + 1, "{d} outside {lines} lines");
                    }
                }
            }
        }
    });
}

thread_local! {
    static STORE: (tempfile::TempDir, Store) = {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("db")).unwrap();
        s.hello("fuzz", "master", "b1", "0", 0).unwrap();
        (d, s)
    };
}

/// A message off the wire: protobuf decode, the store, the summary and the events.
#[test]
fn fuzz_collector_message_path() {
    bolero::check!().for_each(|input: &[u8]| {
        let Ok(msg) = AgentMessage::decode(input) else { return };
        let Some(Body::Report(r)) = msg.body else { return };
        STORE.with(|(_, s)| {
            // A seq the store cannot hold is refused before it (the session does); the rest stored.
            if r.seq > 0 && r.seq < i64::MAX as u64 {
                s.insert("fuzz", "b1", &r, 1).unwrap();
            }
            for row in s.nodes().unwrap() {
                let _ = summary::summarize(&row, 2);
            }
            let _ = events::changes(
                "fuzz",
                &[
                    ("b1".to_string(), r.clone()),
                    ("b1".to_string(), NodeReport::default()),
                    ("b1".to_string(), r),
                ],
            );
        });
    });
}

/// Whatever bytes the agent's config files hold, it says what is wrong and never panics.
#[test]
fn fuzz_agent_config() {
    const MAIN: &str = "collector = \"192.168.126.1:9443\"\nnode = \"master-0\"\nrole = \"master\"\nca = \"/etc/hardshift/agent-ca.crt\"\ncert = \"/etc/hardshift/agent.crt\"\nkey = \"/etc/hardshift/agent.key\"\ninterval_ms = 5000\n";
    bolero::check!().for_each(|input: &[u8]| {
        let text = String::from_utf8_lossy(input);
        if let Ok(c) = hardshift_agent_config::parse(("agent.toml", &text), &[]) {
            let _ = c.server_name();
        }
        let _ = hardshift_agent_config::parse(("agent.toml", MAIN), &[("10.toml".into(), text.to_string())]);
    });
}

/// renders.json, whatever its bytes: read, or refused saying where it stops reading (create names
/// it with that); what reads is written back the same.
#[test]
fn fuzz_renders_record() {
    bolero::check!().for_each(|input: &[u8]| match rendered::parse_record(input) {
        Ok(r) => {
            let again = rendered::parse_record(&serde_json::to_vec(&r).unwrap()).unwrap();
            assert_eq!(serde_json::to_value(&again).unwrap(), serde_json::to_value(&r).unwrap());
        }
        Err(e) => assert!(e.0.line() > 0 && e.to_string().contains(" column "), "{e}"),
    });
}

thread_local! {
    /// The example cluster, its release as a real one names it (every render's image, the
    /// Kubernetes version): the renders' steps, whose copies say what create takes, are known.
    static RENDERED_CLUSTER: hardshift_generator::cluster::Cluster = {
        let mut s = config::read_sources(Path::new(EXAMPLE), None).unwrap();
        let mut refs: serde_json::Value = serde_json::from_str(&s.release_refs.1).unwrap();
        let tags = refs["spec"]["tags"].as_array_mut().unwrap();
        for t in tags.iter_mut().filter(|t| t["name"] == "hyperkube") {
            t["annotations"]["io.openshift.build.versions"] = "kubernetes=1.31.5".into();
        }
        let mut cpc = tags[0].clone();
        cpc["name"] = "cluster-policy-controller".into();
        tags.push(cpc);
        s.release_refs.1 = refs.to_string();
        config::build(&s, &config::Overrides::default()).unwrap()
    };
}

/// A render's output tree, whatever a render leaves (input: entries split by 0xff, each a path
/// line then its bytes; a path starting `@` is a link, `=` a second name for a file, `|` a
/// socket): create reads it as data, refusing a link, a second name or a socket by its path and
/// following nothing; otherwise makes the bootstrap's control plane from it or says what is
/// missing, never panics.
#[test]
fn fuzz_render_outputs() {
    const RECORD: &str = r#"{"release":"r","version":"4.18.0","kubernetes":"1.31.5","steps":[],"layout":{}}"#;
    // One scratch directory for every input, in memory when there is a tmpfs (each input makes
    // and removes a tree: on a disk that discards, 20,000 inputs took 3.5 min, on tmpfs 30 s):
    // the bundle directory `dir`, and `outside` with a file a render must never reach.
    let scratch = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
    let (dir, outside) = (scratch.path().join("dir"), scratch.path().join("outside"));
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "HOST").unwrap();
    bolero::check!().for_each(|input: &[u8]| {
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.join("render");
        std::fs::create_dir_all(root.join("assets")).unwrap();
        std::fs::write(root.join("renders.json"), RECORD).unwrap();
        let mut planted = false;
        for entry in input.split(|b| *b == 0xff).take(24) {
            let (head, body) = match entry.iter().position(|b| *b == b'\n') {
                Some(i) => (&entry[..i], &entry[i + 1..]),
                None => (entry, &[][..]),
            };
            let head = String::from_utf8_lossy(head);
            let (kind, name) = match head.chars().next() {
                Some(k @ ('@' | '=' | '|')) => (k, &head[1..]),
                _ => (' ', &head[..]),
            };
            let Some(p) = place(&root.join("assets"), name) else { continue };
            planted |= match kind {
                '@' => std::os::unix::fs::symlink(outside.join(String::from_utf8_lossy(body).replace('/', "_")), &p).is_ok(),
                '=' => std::fs::hard_link(outside.join("secret"), &p).is_ok(),
                '|' => std::os::unix::net::UnixListener::bind(&p).is_ok(),
                // Never through what is there: a new file or none.
                _ => {
                    let _ = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&p)
                        .and_then(|mut f| std::io::Write::write_all(&mut f, body));
                    false
                }
            };
        }
        let loaded = rendered::load(&dir);
        assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"HOST");
        match loaded {
            Err(e) => {
                assert!(planted, "refused with nothing planted: {e}");
                let m = e.to_string();
                assert!(m.contains("render/assets/") && m.contains(": a "), "{m}");
            }
            Ok(r) => {
                assert!(!planted, "a link, a second name or a socket was read");
                let r = r.expect("the record is there");
                RENDERED_CLUSTER.with(|c| {
                    if let Err(e) = rendered::read_bootstrap(&dir, &r, c) {
                        assert!(matches!(e, hardshift_generator::pipeline::Error::Input(_)), "{e}");
                    }
                });
                for bytes in r.files.values() {
                    let _ = rendered::documents(&String::from_utf8_lossy(bytes));
                }
            }
        }
    });
}

/// `root/name` with only plain components (letters, digits, `.`, `-`, `_`; no `..`), at most
/// eight deep, its directories made as directories (never through a link): None if it cannot be.
fn place(root: &Path, name: &str) -> Option<std::path::PathBuf> {
    let parts: Vec<&str> = name.split('/').filter(|c| !c.is_empty()).collect();
    let plain = |c: &&str| *c != "." && *c != ".." && c.chars().all(|ch| ch.is_ascii_alphanumeric() || "._-".contains(ch));
    if parts.is_empty() || parts.len() > 8 || !parts.iter().all(plain) {
        return None;
    }
    let mut p = root.to_path_buf();
    for dir in &parts[..parts.len() - 1] {
        p.push(dir);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return None,
            Err(_) => std::fs::create_dir(&p).ok()?,
        }
    }
    Some(p.join(parts[parts.len() - 1]))
}

/// Whatever a `--crds` file holds, loading it says what is wrong or gives CRDs that judge an
/// object without panicking.
#[test]
fn fuzz_crd_files() {
    use hardshift_generator::crd::CrdSet;
    bolero::check!().for_each(|input: &[u8]| {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("x.crd.yaml"), input).unwrap();
        match CrdSet::load_dir(t.path()) {
            Ok(set) => {
                let obj = serde_json::json!({"apiVersion": "example.openshift.io/v1", "kind": "Widget",
                    "metadata": {"name": "w"}, "spec": {"a": [1, "b", {"c": null}]}});
                let _ = set.check(&obj);
            }
            Err(e) => assert!(e.to_string().contains("x.crd.yaml"), "an error must name the file: {e}"),
        }
    });
}

/// Any CEL rule, on an object of every kind of value: evaluated within the cost budget, or
/// named as not evaluated; never a panic, never a run past libFuzzer's timeout.
#[test]
fn fuzz_cel_rules() {
    use hardshift_generator::crd::CrdSet;
    bolero::check!().for_each(|input: &[u8]| {
        let rule = String::from_utf8_lossy(input);
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.openshift.io"},
            "spec": {"group": "example.openshift.io", "names": {"kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                        "x-kubernetes-validations": [{"rule": rule, "message": "m"}]}}}}}]}
        });
        let set = CrdSet::select(vec![("f.yaml".into(), crd)]).unwrap();
        let obj = serde_json::json!({"apiVersion": "example.openshift.io/v1", "kind": "Widget",
            "metadata": {"name": "w"}, "spec": {"list": [1, 2, 3], "s": "text", "m": {"k": "v"}, "n": 1.5}});
        let r = set.check(&obj);
        assert_eq!(r.rules_checked + r.rules_unchecked.len(), 1, "the one rule is counted once");
    });
}

/// A data URL, whatever its bytes (any UTF-8, `%` anywhere, gzip or not), never makes the
/// decoder panic nor hand back more than its cap; what `encode` writes decodes to itself.
#[test]
fn fuzz_data_url() {
    use hardshift_generator::ignition::{decode_bounded, encode, Contents, MAX_DECODED};
    bolero::check!().for_each(|input: &[u8]| {
        let Some((&flags, rest)) = input.split_first() else {
            return;
        };
        let text = String::from_utf8_lossy(rest);
        let c = Contents {
            compression: (flags & 1 == 1).then(|| "gzip".to_string()),
            source: Some(
                if flags & 2 == 2 {
                    format!("data:;base64,{text}")
                } else {
                    format!("data:,{text}")
                }
                .into(),
            ),
            ..Default::default()
        };
        if let Ok(d) = decode_bounded(&c) {
            assert!(d.len() as u64 <= MAX_DECODED);
            if flags & 3 == 0 {
                // Percent-decoding never grows its input.
                assert!(d.len() <= text.len(), "{} bytes from {}", d.len(), text.len());
            }
        }
        let round = decode_bounded(&encode(rest)).expect("encode's output decodes");
        assert_eq!(round, rest);
    });
}

/// A CSR's subject, whatever its DER: the strict reader never panics, and what it accepts is
/// what the lenient one reads too (one CN, one O, the same strings): nothing it reads differs
/// from what another reader would see.
#[test]
fn fuzz_csr_subject() {
    use hardshift_collector::approver::request::read_subject;
    use x509_parser::prelude::{FromDer, X509Name};
    bolero::check!().for_each(|input: &[u8]| {
        let Ok((cn, o)) = read_subject(input) else {
            return;
        };
        let (_, name) = X509Name::from_der(input).expect("read_subject accepted it");
        let cns: Vec<&str> = name.iter_common_name().map(|a| a.as_str().expect("a plain string")).collect();
        let os: Vec<&str> = name.iter_organization().map(|a| a.as_str().expect("a plain string")).collect();
        assert_eq!(cns, [cn.as_str()]);
        assert_eq!(os, [o.as_str()]);
        assert_eq!(name.iter_attributes().count(), 2, "only CN and O");
    });
}

/// An inventory's bytes, whatever they are (a hand-edited or truncated inventory.json): read or
/// refused, never a panic; a refusal names the file and a line and column within the bytes; what
/// is read writes back to what reads as the same inventory.
#[test]
fn fuzz_inventory() {
    use hardshift_bundle::inventory::{Error, Inventory};
    let path = Path::new("DIR/inventory.json");
    bolero::check!().for_each(|input: &[u8]| match Inventory::from_json(path, input) {
        Ok(inv) => {
            let again = Inventory::from_json(path, inv.to_json().as_bytes()).expect("its own JSON reads");
            assert_eq!(again, inv);
        }
        Err(Error::Invalid { line, column, .. }) => {
            let lines = input.split(|b| *b == b'\n').count();
            assert!(line <= lines.max(1) && (line > 0 || column == 0), "line {line} of {lines}");
        }
        Err(e @ Error::Newer { .. }) => assert!(e.to_string().starts_with("DIR/inventory.json: inventory format")),
        Err(e) => panic!("a read of bytes said {e}"),
    });
}
