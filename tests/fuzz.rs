//! Fuzzing under `cargo test` (see fuzz/src/lib.rs for why not cargo-fuzz): the YAML front end and
//! everything `create` does with what it parses, and the collector's path for a message off the
//! wire (protobuf decode, the store, the summary and the events). Each runs for
//! HARDSHIFT_FUZZ_SECS (default 10) from the corpus in fuzz/corpus/ and must never panic; errors
//! must point inside the file.

mod common;

use hardshift_collector::{events, store::Store, summary};
use hardshift_generator::config::{self, yaml};
use hardshift_proto::v1::agent_message::Body;
use hardshift_proto::v1::{AgentMessage, ComponentState, ContainerInfo, DebugResponse, Health, Hello, HostState, NodeReport, PodInfo};
use prost::Message;
use std::collections::HashMap;

const YAML_TOKENS: &[&[u8]] = &[
    b"&a ",
    b"*a",
    b"---\n",
    b"...\n",
    b": ",
    b"- ",
    b"[",
    b"]",
    b"{",
    b"}",
    b"\"",
    b"'",
    b"!!str ",
    b"!!binary ",
    b"? ",
    b"|\n  ",
    b">-\n  ",
    b"\t",
    b"\n  ",
    b"~",
    b"0x",
    b"1e999",
    b"-9223372036854775809",
    b"<<: *a\n",
    b"\xef\xbb\xbf",
    b"apiVersion: v1\n",
    b"networking:\n  machineNetwork:\n  - cidr: ",
    b"hosts:\n- hostname: ",
    b"  - ip: 192.168.126.",
    b"prefix-length: 33",
    b"replicas: -1",
    b"hostPrefix: 64",
    b"::ffff:",
    b"/33",
    b"macAddress: 52:54:00:00:00:64\n",
    b"role: bootstrap\n",
    b"apiVIP: ",
];

#[test]
fn fuzz_yaml_front_end() {
    let example = config::read_sources(std::path::Path::new(common::EXAMPLE), None).unwrap();
    hardshift_fuzz::run("yaml", YAML_TOKENS, |input| {
        let text = String::from_utf8_lossy(input);
        let lines = text.lines().count() + 1;
        match yaml::parse(&text) {
            Ok(_) => {}
            Err(e) => assert!(e.pos.line >= 1 && e.pos.line <= lines + 1, "{e:?} outside {lines} lines"),
        }
        // The same text as each of the three input files, the others left good.
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

fn seeds() -> Vec<Vec<u8>> {
    let comp = |n: &str, h: Health| ComponentState {
        name: n.into(),
        health: h as i32,
        state: "active/running".into(),
        reason: "waiting for CSR approval".into(),
        details: HashMap::from([("NRestarts".into(), "3".into())]),
    };
    let report = NodeReport {
        seq: 7,
        time_ms: 1_700_000_000_000,
        dropped_before: 2,
        components: vec![
            comp("kubelet", Health::Failing),
            comp("etcd", Health::Ok),
            comp("cri", Health::Warning),
        ],
        host: Some(HostState {
            hostname: "master-0".into(),
            boot_id: "b1".into(),
            clock_offset_ms: -90_000,
            clock_offset_known: true,
            ..Default::default()
        }),
        pods: vec![PodInfo {
            id: "p".into(),
            namespace: "openshift-etcd".into(),
            name: "etcd".into(),
            ready: false,
            created_ms: 1,
        }],
        containers: vec![ContainerInfo {
            id: "c".into(),
            pod: "openshift-etcd/etcd".into(),
            name: "etcd".into(),
            state: "exited".into(),
            exit_code: 1,
            ..Default::default()
        }],
    };
    [
        Body::Hello(Hello {
            agent_version: "0.1.0".into(),
            node: "master-0".into(),
            boot_id: "b1".into(),
            role: "master".into(),
            last_seq: 6,
        }),
        Body::Report(report),
        Body::DebugResponse(DebugResponse {
            id: 3,
            lines: vec!["a".into(), "b".into()],
            ..Default::default()
        }),
    ]
    .into_iter()
    .map(|b| AgentMessage { body: Some(b) }.encode_to_vec())
    .collect()
}

thread_local! {
    static STORE: (tempfile::TempDir, Store) = {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("db")).unwrap();
        s.hello("fuzz", "master", "b1", "0", 0).unwrap();
        (d, s)
    };
}

#[test]
fn fuzz_collector_message_path() {
    hardshift_fuzz::run_with(
        "agent-message",
        seeds(),
        &[b"\x12\x04", b"\x22\x00", b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\x01"],
        |input| {
            let Ok(msg) = AgentMessage::decode(input) else { return };
            let Some(Body::Report(r)) = msg.body else { return };
            STORE.with(|(_, s)| {
                s.insert("fuzz", "b1", &r, 1).unwrap();
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
        },
    );
}
