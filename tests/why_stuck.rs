//! Why a node is stuck, each cause made real: the node agent runs with master-0's own Ignition
//! config (its agent.toml with the DNS checks the bundle derived from its zones) in master-0's
//! network namespace, and resolves through the lab's dnsmasq on the helper, as a node does.
//! A zone with a typo; then the bundle's own zone with HAProxy down while the bootstrap's API
//! port answers; then the bundle's HAProxy; then a node that booted as "localhost": each reaches
//! `hardshift diagnose` as its own root cause, and goes when it is fixed.

mod common;

use common::control_plane::{load_ign, NodeRoot, HELPER_IP};
use common::netns::Netns;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn findings(dir: &Path) -> Vec<Value> {
    let out = hardshift(&["diagnose", "master-0", "--dir", dir.to_str().unwrap(), "-o", "json"]);
    if !out.status.success() {
        return vec![];
    }
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

fn ids(f: &[Value]) -> Vec<String> {
    f.iter().map(|x| x["id"].as_str().unwrap_or("").to_string()).collect()
}

fn dnsmasq(net: &mut Netns, conf: &Path, log: &Path) -> u32 {
    let args: Vec<String> = [
        "-d",
        "-C",
        conf.to_str().unwrap(),
        "--no-resolv",
        "--no-hosts",
        "--pid-file=",
        "--user=root",
        "--listen-address",
        HELPER_IP,
        "--bind-interfaces",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    net.spawn_logged("helper", "dnsmasq", &args, &[], log)
}

/// The agent as master-0 with `hostname` in its own UTS namespace.
fn agent(net: &mut Netns, cfg: &Path, hostname: &str, log: &Path) -> u32 {
    let args: Vec<String> = vec![
        "--uts".into(),
        "sh".into(),
        "-c".into(),
        "hostname \"$0\" && exec \"$@\"".into(),
        hostname.into(),
        agent_bin().to_string_lossy().into(),
        "--config".into(),
        cfg.to_string_lossy().into(),
    ];
    net.spawn_logged("master-0", "unshare", &args, &[], log)
}

#[test]
fn dns_and_hostname_faults_are_named_as_root_causes() {
    agent_bin();
    let d = example_copy();
    let dir = d.path();
    let out = create(dir, &["--key-algorithm", "ecdsa-p256"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let work = tempfile::tempdir().unwrap();
    let w = work.path();

    // The helper holds the API VIP (.10) as scripts/helper-network.sh sets it up.
    let mut net = Netns::new(
        "ws",
        &[
            ("helper", &["192.168.126.1/24", "192.168.126.10/24"]),
            ("master-0", &["192.168.126.101/24"]),
            ("bootstrap", &["192.168.126.100/24"]),
        ],
    );
    // The bootstrap's API port: something that accepts, as kube-apiserver does.
    net.spawn(
        "bootstrap",
        "python3",
        &[
            "-c",
            "import socket\ns=socket.create_server(('0.0.0.0',6443))\nwhile True: s.accept()[0].close()",
        ],
    );
    // master-0 has no /etc/hosts entry for the lab: every name goes to the helper's dnsmasq.
    net.hosts("master-0", HELPER_IP, &[]);
    net.hosts("helper", "127.0.0.1", &[]);

    // The bundle's zone, with a typo in api-int's address: the kind of mistake made by hand.
    let good = dir.join("lab/dnsmasq/ocp4-dns.conf");
    let zone = std::fs::read_to_string(&good).unwrap();
    let typo = zone.replace(
        "/api-int.ocp4.example.com/192.168.126.10",
        "/api-int.ocp4.example.com/192.168.126.19",
    );
    assert_ne!(typo, zone, "the zone names api-int:\n{zone}");
    let bad = w.join("typo.conf");
    std::fs::write(&bad, typo).unwrap();
    let dns = dnsmasq(&mut net, &bad, &w.join("dnsmasq.log"));

    net.spawn_logged(
        "helper",
        env!("CARGO_BIN_EXE_hardshift"),
        &[
            "collector".into(),
            "--dir".into(),
            dir.to_string_lossy().into(),
            "--listen".into(),
            format!("{HELPER_IP}:9443"),
            "--no-api-watch".into(),
        ],
        &[],
        &w.join("collector.log"),
    );

    // master-0's agent config exactly as its Ignition config has it, with paths under the
    // scratch root, no systemd bus and no runtime, reporting every half second.
    let m0 = NodeRoot::lay(load_ign(dir, "master-0"), &w.join("master-0"));
    let main = m0.map("/etc/hardshift/agent.toml");
    let mut text = std::fs::read_to_string(&main).unwrap();
    for f in ["/etc/hardshift/", "/etc/kubernetes/", "/var/lib/kubelet/"] {
        text = text.replace(&format!("\"{f}"), &format!("\"{}", m0.map(f)));
    }
    assert!(
        text.contains("[[dns]]\nname = \"api-int.ocp4.example.com\"\nexpect = [\"192.168.126.10\"]"),
        "{text}"
    );
    assert!(
        text.contains("name = \"master-0.ocp4.example.com\"\nexpect = [\"192.168.126.101\"]"),
        "{text}"
    );
    std::fs::write(&main, text).unwrap();
    set_agent_keys(
        Path::new(&main),
        &[
            ("interval_ms", 500.into()),
            ("units", toml::Value::Array(vec![])),
            ("cri_socket", "".into()),
            ("state_dir", w.join("agent-state").display().to_string().into()),
            ("kubelet_cert", m0.map("/var/lib/kubelet/pki/kubelet-client-current.pem").into()),
        ],
    );
    let agent_log = w.join("agent.log");
    let a = agent(&mut net, Path::new(&main), "master-0", &agent_log);

    // The typo: the node resolves api-int to the wrong address, and that is the first finding.
    let start = Instant::now();
    wait_for("HS071 in diagnose", 180, || {
        ids(&findings(dir)).first().map(String::as_str) == Some("HS071")
    });
    let f = findings(dir);
    let ev = f[0]["evidence"].to_string();
    assert!(
        ev.contains("api-int.ocp4.example.com → 192.168.126.19, but the zone says 192.168.126.10"),
        "{ev}"
    );
    assert!(!ev.contains("master-0.ocp4.example.com"), "the other names are right: {ev}");
    // The kubelet's CSR cannot be posted to a wrong api-int: a consequence, not shown.
    assert!(!ids(&f).contains(&"HS030".to_string()), "{:?}", ids(&f));
    eprintln!(
        "timing: agent start → HS071 at the collector: {:.2} s",
        start.elapsed().as_secs_f64()
    );

    // The bundle's own zone: the finding goes, and the DNS component says every name is right.
    net.kill(dns);
    let fixed = Instant::now();
    dnsmasq(&mut net, &good, &w.join("dnsmasq-good.log"));
    wait_for("HS071 to clear", 180, || {
        let f = findings(dir);
        !f.is_empty() && !ids(&f).contains(&"HS071".to_string())
    });
    eprintln!("timing: zone fixed → HS071 gone: {:.2} s", fixed.elapsed().as_secs_f64());
    let out = hardshift(&["status", "--dir", dir.to_str().unwrap(), "-o", "json"]);
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    let dns_state = s[0]["components"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "dns"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(dns_state["health"], "ok", "{dns_state}");
    assert_eq!(dns_state["details"]["hardshift-probe.apps.ocp4.example.com"], "192.168.126.11");
    // HAProxy is not running yet: api-int is refused on the VIP while the bootstrap answers.
    wait_for("HS072 in diagnose", 120, || ids(&findings(dir)).contains(&"HS072".to_string()));
    let f = findings(dir);
    let ev = f.iter().find(|x| x["id"] == "HS072").unwrap()["evidence"].to_string();
    assert!(
        ev.contains("api-int:6443 (api-int.ocp4.example.com:6443)")
            && ev.contains("directly, bootstrap:6443 (192.168.126.100:6443) answers"),
        "{ev}"
    );
    assert!(
        !ids(&f).contains(&"HS030".to_string()),
        "the CSR cannot be posted without the LB: {:?}",
        ids(&f)
    );
    // The bundle's HAProxy on the helper: the finding goes.
    let lb_up = Instant::now();
    net.spawn(
        "helper",
        "haproxy",
        &["-db", "-f", dir.join("lab/haproxy/haproxy.cfg").to_str().unwrap()],
    );
    wait_for("HS072 to clear", 120, || {
        let f = findings(dir);
        !f.is_empty() && !ids(&f).contains(&"HS072".to_string())
    });
    eprintln!("timing: HAProxy started → HS072 gone: {:.2} s", lb_up.elapsed().as_secs_f64());
    assert!(ids(&findings(dir)).contains(&"HS030".to_string()), "now the CSR is the finding");
    // The install's phase heads `status`: no bootstrap has reported in this lab.
    let table = common::text(&hardshift(&["status", "--dir", dir.to_str().unwrap()]).stdout);
    assert!(
        table.starts_with("PHASE 0/14: waiting for the bootstrap reports: bootstrap has never reported"),
        "{table}"
    );

    // The node booted without its name: the kubelet would register as "localhost".
    net.kill(a);
    let renamed = Instant::now();
    agent(&mut net, Path::new(&main), "localhost", &w.join("agent-localhost.log"));
    wait_for("HS070 in diagnose", 180, || {
        ids(&findings(dir)).first().map(String::as_str) == Some("HS070")
    });
    eprintln!("timing: hostname localhost → HS070: {:.2} s", renamed.elapsed().as_secs_f64());
    let f = findings(dir);
    assert!(f[0]["title"].as_str().unwrap().contains("\"localhost\""), "{}", f[0]);
    assert!(!ids(&f).contains(&"HS030".to_string()), "{:?}", ids(&f));
}

/// The host's own limits and clock, made real: the agent runs with a 64 MiB tmpfs as its /var
/// (its own mount namespace) and a clock 45 s ahead (libfaketime), on this machine's CPUs.
#[test]
fn a_full_var_a_skewed_clock_and_too_few_cpus_are_named() {
    let agent = agent_bin();
    let d = example_copy();
    let dir = d.path();
    let out = create(dir, &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let port = free_port();
    let _c = collector_with(dir, port, &["--no-api-watch"]);
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("agent.toml");
    let pki = dir.join("agent-pki");
    let mut c = agent_config(port, "master-0", &pki, "master-0");
    c.role = "master".into();
    c.interval_ms = 300;
    c.units = vec![];
    c.cri_socket = PathBuf::new();
    c.kubelet_cert = PathBuf::new();
    c.state_dir = work.path().join("state");
    write_agent_config(&cfg, &c);
    let _agent = Kill(
        std::process::Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                "mount -t tmpfs -o size=64m tmpfs /var && exec \"$0\" \"$@\"",
            ])
            .arg(&agent)
            .args(["--config", cfg.to_str().unwrap()])
            .env("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
            .env("FAKETIME", "+45s")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(work.path().join("agent.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    wait_for("HS010 and HS060", 120, || {
        let f = ids(&findings(dir));
        f.contains(&"HS010".to_string()) && f.contains(&"HS060".to_string())
    });
    eprintln!("timing: agent start → HS010 and HS060: {:.2} s", start.elapsed().as_secs_f64());
    let f = findings(dir);
    assert_eq!(ids(&f)[0], "HS010", "the clock comes first: {:?}", ids(&f));
    let get = |id: &str| f.iter().find(|x| x["id"] == id).unwrap().to_string();
    let skew = get("HS010");
    assert!(skew.contains("clock offset to the collector: +4"), "{skew}");
    assert!(get("HS060").contains("/var has 6"), "{}", get("HS060"));
    // This machine's CPUs: the agent counts them as OpenShift does, and a master needs 4.
    let cpus = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    assert_eq!(ids(&f).contains(&"HS062".to_string()), cpus < 4, "{cpus} CPUs: {:?}", ids(&f));
}
