//! For `hack/bench-diagnose.sh`: a store holding NODES nodes' reports (REPORTS each, a mix of
//! healthy and failing ones), then the time to read every node's newest report and diagnose it,
//! as `hardshift diagnose` does, and the time of one CSR decision.
//!
//!   bench_diagnose NODES REPORTS

use hardshift_collector::approver::{self, Csr, Inventory, InventoryNode};
use hardshift_collector::{diagnose, store::Store};
use hardshift_proto::v1::{ComponentState, Health, HostState, NodeReport};
use std::time::Instant;

fn comp(n: &str, h: Health, state: &str, reason: &str) -> ComponentState {
    ComponentState {
        name: n.into(),
        health: h as i32,
        state: state.into(),
        reason: reason.into(),
        details: Default::default(),
    }
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("a number")).collect();
    let (nodes, reports) = (args.first().copied().unwrap_or(5000), args.get(1).copied().unwrap_or(3));
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("reports.db")).unwrap();
    let t = Instant::now();
    store
        .batch(|s| {
            for i in 0..nodes {
                let node = format!("worker-{i}");
                s.hello(&node, "worker", "b1", "bench", 0)?;
                for seq in 1..=reports as u64 {
                    let broken = i % 7 == 0;
                    let r = NodeReport {
                        seq,
                        time_ms: 0,
                        components: vec![
                            if broken {
                                comp("kubelet.service", Health::Failing, "failed/failed", "exit 1")
                            } else {
                                comp("kubelet.service", Health::Ok, "active/running", "")
                            },
                            comp("kubelet", Health::Ok, "healthy", ""),
                            comp("kubelet-cert", Health::Warning, "bootstrapping", "absent"),
                            comp("cri", Health::Warning, "ready", "NetworkReady=false: no CNI"),
                        ],
                        host: Some(HostState {
                            memory_total_bytes: 16 << 30,
                            var_free_bytes: 80 << 30,
                            clock_offset_known: true,
                            clock_offset_ms: if i % 11 == 0 { 9000 } else { 10 },
                            ..Default::default()
                        }),
                        ..Default::default()
                    };
                    s.insert(&node, "b1", &r, hardshift_collector::now_ms())?;
                }
            }
            Ok(())
        })
        .unwrap();
    let fill = t.elapsed();
    let now = hardshift_collector::now_ms();
    let t = Instant::now();
    let rows = store.nodes().unwrap();
    let read = t.elapsed();
    let t = Instant::now();
    let findings: usize = rows
        .iter()
        .filter_map(|r| {
            r.last
                .as_ref()
                .map(|l| diagnose::diagnose(&r.node, &r.role, l, now - r.last_seen_ms).len())
        })
        .sum();
    let judge = t.elapsed();

    // One CSR decision, as approve-csrs makes it for each pending CSR.
    let mut inv = Inventory::default();
    for i in 0..nodes {
        inv.nodes.insert(
            format!("worker-{i}"),
            InventoryNode {
                ips: vec![format!("10.0.{}.{}", i / 250, i % 250 + 1).parse().unwrap()],
                dns: vec![format!("worker-{i}")],
            },
        );
    }
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name.push(rcgen::DnType::OrganizationName, "system:nodes");
    p.distinguished_name.push(rcgen::DnType::CommonName, "system:node:worker-1");
    let csr = Csr {
        name: "csr".into(),
        signer: approver::CLIENT_SIGNER.into(),
        username: approver::BOOTSTRAPPER.into(),
        groups: vec![],
        usages: vec!["digital signature".into(), "client auth".into()],
        request_pem: p.serialize_request(&key).unwrap().pem().unwrap().into_bytes(),
    };
    let registered = Default::default();
    let n = 1000;
    let t = Instant::now();
    for _ in 0..n {
        let _ = approver::decide(&inv, &csr, &registered, 1);
    }
    let decide = t.elapsed() / n;
    println!(
        "nodes={nodes} reports={} fill_s={:.2} read_newest_s={:.3} diagnose_s={:.3} findings={findings} csr_decision_us={:.1}",
        nodes * reports,
        fill.as_secs_f64(),
        read.as_secs_f64(),
        judge.as_secs_f64(),
        decide.as_secs_f64() * 1e6
    );
}
