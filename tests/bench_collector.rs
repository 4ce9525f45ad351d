//! `hack/bench-collector.sh`'s path at a small size, so that the bench keeps working: a lab of
//! workers written by `hack/gen-lab.py`, made by `hardshift create`, its collector (which admits
//! only the inventory's nodes), and the bench's own simulated agents presenting the certificates
//! create issued them. Every agent must get through and every report sent be stored once.

mod common;
#[allow(dead_code)]
#[path = "../collector/examples/simulate_agents.rs"]
mod simulate;

use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const AGENTS: usize = 50;

/// A lab of `workers` workers as the bench makes it, created like the bench does.
fn bench_bundle(workers: usize) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let gen = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/gen-lab.py");
    let out = Command::new("python3")
        .arg(gen)
        .arg(t.path())
        .arg(workers.to_string())
        .output()
        .expect("python3");
    assert!(out.status.success(), "gen-lab.py: {}", text(&out.stderr));
    let d = t.path().to_str().unwrap();
    let (ok, log) = run("cp", &["-r", &format!("{EXAMPLE}/release"), &format!("{EXAMPLE}/crds"), d]);
    assert!(ok, "{log}");
    let out = hardshift(&[
        "create",
        "--dir",
        d,
        "--key-algorithm",
        "ecdsa-p256",
        "--no-agent",
        "--self-contained-nodes",
    ]);
    assert!(out.status.success(), "create: {}\n{}", text(&out.stdout), text(&out.stderr));
    t
}

#[test]
fn the_bench_agents_are_the_inventory_and_every_report_is_stored_once() {
    let b = bench_bundle(AGENTS);
    let dir = b.path();
    let port = free_port();
    let collector = collector_with(dir, port, &["--no-api-watch"]);
    let addr = format!("127.0.0.1:{port}");
    wait_for("the collector to listen", 180, || std::net::TcpStream::connect(&addr).is_ok());

    let nodes = simulate::nodes(dir, AGENTS).unwrap();
    let ca = std::fs::read_to_string(dir.join("agent-pki/agent-ca.crt")).unwrap();
    let s = simulate::run(nodes, &ca, &addr, Duration::from_millis(500), Duration::from_secs(3));
    drop(collector);

    let log = std::fs::read_to_string(dir.join("collector.log")).unwrap_or_default();
    assert!(
        s.failures.is_empty(),
        "{} of {AGENTS} agents failed: {:?}\ncollector log:\n{log}",
        s.failures.len(),
        s.failures
    );
    assert_eq!(s.sent_by_node.len(), AGENTS);
    assert_eq!(s.acked, s.sent, "every report sent acknowledged");
    let mut total = 0;
    for (node, sent) in &s.sent_by_node {
        assert!(*sent > 0, "{node} sent nothing in 3 s at one report per 500 ms");
        assert_eq!(stored(dir, node), (1..=*sent).collect::<Vec<_>>(), "{node}: stored seqs, each once");
        total += sent;
    }
    assert_eq!(total, s.sent);

    // More agents than the inventory holds (50 workers, 3 masters): said, not simulated.
    let err = simulate::nodes(dir, AGENTS + 4)
        .err()
        .expect("54 agents from 53 nodes refused")
        .to_string();
    assert!(
        err.contains("holds 53 nodes besides the bootstrap, 54 agents asked for") && err.contains("gen-lab.py"),
        "{err}"
    );
}
