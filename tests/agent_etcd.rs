//! The agent's etcd probe against a real 3-member etcd (loopback, the bundle's certificates):
//! health, members, leader; a stopped member is reported unreachable.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn etcd_probe_reports_a_healthy_cluster_and_a_stopped_member() {
    let bin = agent_bin();
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let pki = d.path().join("pki");
    let f = |n: &str| pki.join(n).to_string_lossy().to_string();
    let data = tempfile::tempdir().unwrap();
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let names = ["master-0", "master-1", "master-2"];
    let cluster: Vec<String> = names
        .iter()
        .zip(&ports)
        .map(|(n, (_, p))| format!("{n}=https://127.0.0.1:{p}"))
        .collect();
    let mut members: Vec<Option<Kill>> = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let (c, p) = ports[i];
        members.push(Some(Kill(
            Command::new("etcd")
                .args(["--name", n, "--data-dir", &data.path().join(n).to_string_lossy()])
                .args([
                    "--listen-client-urls",
                    &format!("https://127.0.0.1:{c}"),
                    "--advertise-client-urls",
                    &format!("https://127.0.0.1:{c}"),
                ])
                .args([
                    "--listen-peer-urls",
                    &format!("https://127.0.0.1:{p}"),
                    "--initial-advertise-peer-urls",
                    &format!("https://127.0.0.1:{p}"),
                ])
                .args(["--initial-cluster", &cluster.join(","), "--initial-cluster-state", "new"])
                .args([
                    "--cert-file",
                    &f("etcd-server.crt"),
                    "--key-file",
                    &f("etcd-server.key"),
                    "--trusted-ca-file",
                    &f("etcd-ca.crt"),
                    "--client-cert-auth",
                ])
                .args([
                    "--peer-cert-file",
                    &f(&format!("etcd-peer-{n}.crt")),
                    "--peer-key-file",
                    &f(&format!("etcd-peer-{n}.key")),
                ])
                .args([
                    "--peer-trusted-ca-file",
                    &f("etcd-ca.crt"),
                    "--peer-client-cert-auth",
                    "--logger",
                    "zap",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("etcd"),
        )));
    }
    let work = tempfile::tempdir().unwrap();
    let probe = |port: u16| {
        let cfg = work.path().join(format!("agent-{port}.toml"));
        let mut c = probe_config("master-0");
        c.units = vec![];
        c.etcd = Some(hardshift_agent_config::EtcdConfig {
            endpoint: format!("127.0.0.1:{port}"),
            ca: f("etcd-ca.crt").into(),
            cert: f("etcd-client.crt").into(),
            key: f("etcd-client.key").into(),
        });
        write_agent_config(&cfg, &c);
        let (ok, out) = run(bin.to_str().unwrap(), &["--config", cfg.to_str().unwrap(), "status", "--json"]);
        assert!(ok, "{out}");
        let v: serde_json::Value =
            serde_json::from_str(out.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("{out}"))).unwrap();
        v["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "etcd")
            .unwrap()
            .clone()
    };
    let start = Instant::now();
    let healthy = loop {
        let e = probe(ports[0].0);
        if e["health"] == "ok" {
            break e;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "etcd never healthy: {e}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(healthy["state"].as_str().unwrap().split(' ').next(), Some("3"), "{healthy}");
    let listed = healthy["details"]["members"].as_str().unwrap();
    for n in names {
        assert!(listed.contains(n), "{healthy}");
    }
    assert_ne!(healthy["details"]["leader"], "", "{healthy}");
    assert_eq!(healthy["details"]["alarms"], "0");

    // Stop master-2: its endpoint is reported unreachable; the others still have a quorum.
    members[2] = None;
    let down = probe(ports[2].0);
    assert_eq!(down["health"], "failing", "{down}");
    assert_eq!(down["state"], "unreachable", "{down}");
    // If master-2 led, the others first elect a new leader (etcd answers nothing meanwhile,
    // which the probe rightly reports as a timeout); then the quorum of two is healthy.
    let start = Instant::now();
    let still = loop {
        let e = probe(ports[0].0);
        if e["health"] == "ok" {
            break e;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no healthy quorum after a member stopped: {e}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(still["state"].as_str().unwrap().split(' ').next(), Some("3"), "{still}");
    assert_ne!(still["details"]["leader"], "", "{still}");
}
