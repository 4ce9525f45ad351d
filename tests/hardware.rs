//! The machine's own problems through the real path: the real agent on this machine, with a
//! kernel journal holding real kernels' messages for this boot (written by systemd-journal-remote),
//! a boot history of a reboot loop, and a bundle address and machine network this machine does
//! not have, reports to a real collector; `hardshift diagnose` names each cause with its rule,
//! `diagnose --rules` lists what each rule covers, and `status` shows the hardware per node.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

/// Real kernels' messages, one of each kind whose rule nothing else explains.
const KERNEL: &[&str] = &[
    "Out of memory: Killed process 4242 (etcd) total-vm:10653324kB, anon-rss:8283612kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:16828kB oom_score_adj:-999",
    "INFO: task etcd:2211 blocked for more than 120 seconds.",
    "unregister_netdevice: waiting for eth0 to become free. Usage count = 1",
    "BUG: kernel NULL pointer dereference, address: 0000000000000008",
    "mce: [Hardware Error]: Machine check events logged",
    "XFS (vda4): Corruption of in-memory data detected.  Shutting down filesystem",
    "ixgbe 0000:03:00.0 ens1f0: NIC Link is Down",
    "EXT4-fs (vda): mounted filesystem with ordered data mode. Quota mode: none.",
];

fn journal(dir: &Path, boot: &str) -> std::path::PathBuf {
    let export: String = KERNEL
        .iter()
        .enumerate()
        .map(|(i, m)| {
            format!(
                "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={}\n_BOOT_ID={boot}\n_HOSTNAME=master-0\n_TRANSPORT=kernel\nSYSLOG_IDENTIFIER=kernel\nPRIORITY=3\nMESSAGE={m}\n\n",
                1795684442000000u64 + i as u64 * 1000,
                1000000 + i * 1000
            )
        })
        .collect();
    let src = dir.join("kernel.export");
    std::fs::write(&src, export).unwrap();
    let j = dir.join("journal");
    std::fs::create_dir_all(&j).unwrap();
    let out = std::process::Command::new("/lib/systemd/systemd-journal-remote")
        .args([
            "-o",
            j.join("k.journal").to_str().unwrap(),
            "--split-mode=none",
            src.to_str().unwrap(),
        ])
        .output()
        .expect("systemd-journal-remote (hack/setup.sh installs it)");
    assert!(out.status.success(), "{}", text(&out.stderr));
    j
}

fn findings(dir: &Path) -> Vec<Value> {
    let out = hardshift(&["diagnose", "master-0", "--dir", dir.to_str().unwrap(), "-o", "json"]);
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

/// The boot id the agent recorded beside the test's four (`earlier-boot-N`).
fn boot_id_of_agent(kept: &str) -> String {
    kept.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .find(|id| !id.starts_with("earlier-boot-"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_machines_problems_reach_diagnose_and_status() {
    let agent = agent_bin();
    let d = example_copy();
    let dir = d.path();
    let out = create(dir, &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let port = free_port();
    let _c = collector_with(dir, port, &["--no-api-watch"]);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .replace('-', "");
    let j = journal(w, &boot);
    // Four other boots in the last ten minutes: with this one, a loop.
    let now = hardshift_proto::now_ms() / 1000;
    let history = w.join("history");
    std::fs::create_dir_all(&history).unwrap();
    let boots: String = (1..=4).map(|i| format!("{} earlier-boot-{i}\n", now - 600 + i * 60)).collect();
    std::fs::write(history.join("boots"), boots).unwrap();
    let pki = dir.join("agent-pki");
    let cfg = w.join("agent.toml");
    let mut c = agent_config(port, "master-0", &pki, "master-0");
    c.role = "master".into();
    c.interval_ms = 500;
    c.units = vec![];
    c.cri_socket = "".into();
    c.kubelet_cert = "".into();
    c.state_dir = w.join("state");
    c.history_dir = history.clone();
    c.journal_directory = Some(j.clone());
    c.address = Some("10.99.0.5".parse().unwrap());
    c.machine_network = vec!["10.99.0.0/16".parse().unwrap()];
    c.peers = vec![hardshift_agent_config::Peer {
        name: "master-1".into(),
        role: "master".into(),
        addr: "127.0.0.1".parse().unwrap(),
    }];
    write_agent_config(&cfg, &c);
    let _agent = Kill(
        std::process::Command::new(&agent)
            .args(["--config", cfg.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(w.join("agent.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let want = ["HS103", "HS110", "HS111", "HS112", "HS113", "HS116", "HS117", "HS118", "HS119"];
    wait_for("the machine's findings", 180, || {
        let ids: Vec<String> = findings(dir).iter().map(|f| f["id"].as_str().unwrap_or("").to_string()).collect();
        want.iter().all(|w| ids.iter().any(|i| i == w))
    });
    let f = findings(dir);
    let get = |id: &str| f.iter().find(|x| x["id"] == id).unwrap().to_string();
    assert!(get("HS103").contains("gives this node 10.99.0.5"), "{}", get("HS103"));
    assert!(get("HS111").contains("etcd:2211 blocked"), "{}", get("HS111"));
    assert!(get("HS117").contains("Killed process 4242 (etcd)"), "{}", get("HS117"));
    // The four recorded boots make the loop, and this boot counts too when the machine booted
    // less than 30 minutes ago (a freshly booted CI machine): the count follows the host's
    // uptime, read from the history the agent kept (this boot, when it began).
    let kept = std::fs::read_to_string(history.join("boots")).unwrap();
    assert_eq!(kept.lines().count(), 5, "the history holds this boot too: {kept}");
    let booted: i64 = kept
        .lines()
        .find(|l| l.ends_with(&format!(" {}", boot_id_of_agent(&kept))))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap();
    let age = hardshift_proto::now_ms() / 1000 - booted;
    let hs119 = get("HS119");
    let counted = if age < 30 * 60 - 120 {
        vec!["5 boots within 30 minutes"]
    } else if age > 30 * 60 + 120 {
        vec!["4 boots within 30 minutes"]
    } else {
        // At the window's edge while the test ran: either is right.
        vec!["4 boots within 30 minutes", "5 boots within 30 minutes"]
    };
    assert!(counted.iter().any(|c| hs119.contains(c)), "this boot is {age} s old: {hs119}");

    // status: the hardware per node, in the table and in JSON.
    let out = hardshift(&["status", "--dir", dir.to_str().unwrap()]);
    let table = text(&out.stdout);
    assert!(table.contains("HARDWARE") && table.contains("kernel"), "{table}");
    let out = hardshift(&["status", "--dir", dir.to_str().unwrap(), "-o", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let comps = v[0]["components"].as_array().unwrap();
    for name in [
        "nic",
        "route",
        "machine-network",
        "peers",
        "path-mtu",
        "kernel",
        "boots",
        "fips",
        "swap",
        "time-sync",
    ] {
        assert!(comps.iter().any(|c| c["name"] == name), "{name} missing: {comps:?}");
    }
    let peers = comps.iter().find(|c| c["name"] == "peers").unwrap();
    assert_eq!(peers["health"], "ok", "loopback answers: {peers}");
}

#[test]
fn diagnose_lists_every_rule_with_what_it_covers() {
    let out = hardshift(&["diagnose", "--rules", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.len(), hardshift_collector::diagnose::RULES.len());
    let covers = |id: &str| v.iter().find(|r| r["id"] == id).unwrap()["covers"].to_string();
    assert!(covers("HS104").contains("ntp-synced"));
    assert!(covers("HS111").contains("KernelDeadlock"));
    assert!(covers("HS116").contains("ReadonlyFilesystem"));
    let out = hardshift(&["diagnose", "--rules"]);
    let t = text(&out.stdout);
    assert!(
        t.lines().next().unwrap().starts_with("ID") && t.contains("dns-wildcard-not-configured"),
        "{t}"
    );
}
