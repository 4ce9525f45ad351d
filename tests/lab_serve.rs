//! `hardshift lab serve` for real: the bundle's own dnsmasq and HAProxy under the helper, in a
//! network namespace holding the lab's helper address and VIPs, and a "node" in another
//! namespace on the same bridge that asks for DHCP with its inventory MAC (busybox udhcpc), for
//! TFTP (busybox tftp) and over HTTP (curl); then a machine with a MAC not in the inventory.
//! Each step must be an event of the right node in the store, `status` must say what the helper
//! saw, and SIGTERM must leave nothing running.

mod common;
use common::netns::Netns;
use common::*;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const MASTER0_MAC: &str = "52:54:00:00:00:65";
const MASTER0_IP: &str = "192.168.126.101";

/// busybox's DHCP client on the lab's node namespace (`tries` requests, `timeout` s apart, no
/// script): (whether it got an address, what it said).
fn udhcpc(net: &Netns, tries: &str, timeout: &str) -> (bool, String) {
    net.exec(
        "node",
        "busybox",
        &["udhcpc", "-i", "eth0", "-n", "-q", "-t", tries, "-T", timeout, "-s", "/bin/true"],
    )
}

fn inventory_mac(dir: &Path, node: &str) -> String {
    let inv: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("inventory.json")).unwrap()).unwrap();
    inv["nodes"].as_array().unwrap().iter().find(|n| n["name"] == node).unwrap()["mac"]
        .as_str()
        .unwrap()
        .to_string()
}

/// RHCOS's live files, stand-ins of the right names (the server reads them as bytes).
fn rhcos(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("rhcos-live-kernel-x86_64"), vec![7u8; 4096]).unwrap();
    std::fs::write(dir.join("rhcos-live-initramfs.x86_64.img"), vec![8u8; 8192]).unwrap();
    std::fs::write(dir.join("rhcos-live-rootfs.x86_64.img"), vec![9u8; 3 << 20]).unwrap();
}

fn sigterm(c: &Child) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::Signal::SIGTERM);
}

fn wait_exit(c: &mut Child, secs: u64) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "lab serve did not stop within {secs} s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The processes in a namespace, by command name.
fn processes_in(ns: &str) -> Vec<String> {
    let (_, pids) = run("ip", &["netns", "pids", ns]);
    pids.split_whitespace()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).ok())
        .map(|c| c.trim().to_string())
        .collect()
}

/// `hardshift lab serve` on the bundle in `dir` (RHCOS's files in `dir/rhcos`), in the helper's
/// namespace on its eth0, with `extra` flags; its stderr in `dir/serve.err`. When `answers`, it
/// returns once the boot files answer over HTTP (or fails saying why the helper stopped).
fn serve(net: &Netns, dir: &Path, extra: &[&str], answers: bool) -> Kill {
    let (d, r) = (dir.to_str().unwrap(), dir.join("rhcos"));
    let mut child = net
        .command("helper", env!("CARGO_BIN_EXE_hardshift"))
        .args(["lab", "serve", "--dir", d, "--rhcos", r.to_str().unwrap(), "--interface", "eth0"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("serve.err")).unwrap())
        .spawn()
        .unwrap();
    if answers {
        wait_for("lab serve answers HTTP", 120, || {
            assert!(
                child.try_wait().unwrap().is_none(),
                "lab serve stopped: {}",
                std::fs::read_to_string(dir.join("serve.err")).unwrap_or_default()
            );
            let url = "http://192.168.126.1:8080/pxe/boot.ipxe";
            net.exec("helper", "curl", &["-s", "-o", "/dev/null", "-w", "%{http_code}", url]).1 == "200"
        });
    }
    // Killed on drop, pass or fail: its programs go with it.
    Kill(child)
}

#[test]
fn the_helper_serves_a_boot_and_every_step_is_an_event() {
    let lab = example_copy();
    let dir = lab.path();
    create(dir, &[]);
    assert_eq!(inventory_mac(dir, "master-0"), MASTER0_MAC, "the example's master-0");
    let r = dir.join("rhcos");
    rhcos(&r);
    let d = dir.to_str().unwrap();
    let hs = env!("CARGO_BIN_EXE_hardshift");

    // Without RHCOS's files: named, exit 2, nothing started.
    let out = hardshift(&["lab", "serve", "--dir", d, "--no-collector"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--rhcos DIR"), "{}", text(&out.stderr));
    // --dry-run: what would run, from where.
    let out = hardshift(&["lab", "serve", "--dir", d, "--rhcos", r.to_str().unwrap(), "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan = text(&out.stdout);
    assert!(
        plan.contains("would run: dnsmasq") && plan.contains("haproxy -db -f") && plan.contains("http://192.168.126.1:8080/"),
        "{plan}"
    );

    let net = Netns::new(
        "ls",
        &[
            ("helper", &["192.168.126.1/24", "192.168.126.10/24", "192.168.126.11/24"]),
            ("node", &[]),
        ],
    );
    let helper_ns = net.ns("helper");
    let mut serve = serve(&net, dir, &["--web", "127.0.0.1:19444"], true);
    let node = |args: &[&str]| net.exec("node", args[0], &args[1..]);
    let url = |p: &str| format!("http://192.168.126.1:8080/{p}");

    // A second helper for the same bundle: its ports are held, by whom.
    let out = net
        .command("helper", hs)
        .args([
            "lab",
            "serve",
            "--dir",
            d,
            "--rhcos",
            r.to_str().unwrap(),
            "--interface",
            "eth0",
            "--no-collector",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("(dnsmasq)") && text(&out.stderr).contains("(hardshift)"),
        "{}",
        text(&out.stderr)
    );

    // master-0's MAC: DHCP gives it its reserved address.
    let (ok, said) = node(&["ip", "link", "set", "eth0", "address", MASTER0_MAC]);
    assert!(ok, "{said}");
    let (ok, said) = udhcpc(&net, "5", "2");
    assert!(ok && said.contains(MASTER0_IP), "{said}");
    node(&["ip", "addr", "add", &format!("{MASTER0_IP}/24"), "dev", "eth0"]);
    // TFTP: the BIOS iPXE binary, and a file that is not there.
    let (ok, said) = node(&["busybox", "tftp", "-g", "-r", "undionly.kpxe", "-l", "/dev/null", "192.168.126.1"]);
    assert!(ok, "{said}");
    node(&["busybox", "tftp", "-g", "-r", "no-such.efi", "-l", "/dev/null", "192.168.126.1"]);
    // HTTP: its own config (whole), the rootfs, a file the bundle does not have.
    let code = |p: &str| node(&["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", &url(p)]).1;
    assert_eq!(code("ignition/master-0.ign"), "200");
    let (_, got) = node(&["curl", "-s", &url("ignition/master-0.ign")]);
    assert_eq!(
        got.as_bytes(),
        std::fs::read(dir.join("ignition/master-0.ign")).unwrap(),
        "the config whole"
    );
    assert_eq!(code("rhcos/rhcos-live-rootfs.x86_64.img"), "200");
    assert_eq!(code("rhcos/rhcos-live-rootfs.img"), "404");
    // Another node's config from master-0's address: refused.
    assert_eq!(code("ignition/bootstrap.ign"), "403");
    assert_eq!(code("ignition/../auth/kubeconfig"), "404");

    // The machine-config server through HAProxy (22623 on the API VIP), to master-0's own (a
    // busybox httpd there): HAProxy takes it in once its checks pass, and its log of the request
    // is master-0's event.
    let mcs = net
        .command("node", "busybox")
        .args(["httpd", "-f", "-p", "192.168.126.101:22623", "-h", r.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Kill)
        .unwrap();
    let events = || text(&hardshift(&["events", "--dir", d]).stdout);
    // Asked again until HAProxy sends it to master-0 (its checks of the others, which answer
    // nothing, take them out of the backend within seconds).
    let deadline = Instant::now() + Duration::from_secs(120);
    while !events().contains("mcs to master-0: ") {
        assert!(
            Instant::now() < deadline,
            "no request through HAProxy reached master-0:\n{}",
            events()
        );
        node(&["curl", "-s", "--max-time", "10", "http://192.168.126.10:22623/config/master"]);
        std::thread::sleep(Duration::from_secs(1));
    }
    drop(mcs);

    // A machine the inventory does not know: no address, and recorded.
    node(&["ip", "addr", "flush", "dev", "eth0"]);
    node(&["ip", "link", "set", "eth0", "address", "52:54:00:00:00:99"]);
    let (ok, _) = udhcpc(&net, "2", "1");
    assert!(!ok, "an unknown MAC got an address");

    // Every step is in the store: wait for the last one, then stop.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !events().contains("unknown 52:54:00:00:00:99") {
        assert!(
            Instant::now() < deadline,
            "the unknown machine's request never stored:\n{}\n{}\n{}",
            events(),
            std::fs::read_to_string(dir.join("serve.err")).unwrap_or_default(),
            std::fs::read_to_string(dir.join(".hardshift/helper/dnsmasq.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The dashboard of the collector in the same process: master-0's page has its boot steps,
    // and its row in the grid the last of them.
    let web = |path: &str| {
        net.exec(
            "helper",
            "curl",
            &["-s", "--max-time", "30", &format!("http://127.0.0.1:19444{path}")],
        )
        .1
    };
    let page = web("/node/master-0");
    assert!(
        page.contains("dhcp-ack") && page.contains("GET /ignition/master-0.ign 200"),
        "{page}"
    );
    assert!(web("/").contains("boot: "), "the grid has no boot step");

    // The pivot: refused before pivot-ready, then forced: HAProxy starts again on the other config.
    let out = hardshift(&["lab", "pivot", "--dir", d]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not pivot-ready") && text(&out.stderr).contains("--force"),
        "{}",
        text(&out.stderr)
    );
    let out = hardshift(&["lab", "pivot", "--dir", d, "--force"]);
    assert!(
        out.status.success() && text(&out.stdout).contains("HAProxy starts again"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    wait_for("HAProxy on the post-pivot config", 60, || {
        events().contains("haproxy started again as asked: haproxy -db -f") && events().contains("haproxy-post-pivot.cfg")
    });

    sigterm(&serve.0);
    let status = wait_exit(&mut serve.0, 60);
    assert!(
        status.success(),
        "{status}: {}",
        std::fs::read_to_string(dir.join("serve.err")).unwrap_or_default()
    );
    // A lock that names another process (pid 1 here), held by no helper: nothing is signalled.
    std::fs::write(dir.join(".hardshift/helper/lock"), "pid 1 (lab serve)\n").unwrap();
    let out = hardshift(&["lab", "pivot", "--dir", d, "--force"]);
    assert!(
        out.status.success() && text(&out.stdout).contains("lab serve is not running"),
        "{}",
        text(&out.stdout)
    );
    let left = processes_in(&helper_ns);
    assert!(
        !left.iter().any(|c| c == "dnsmasq" || c == "haproxy" || c == "hardshift"),
        "left running: {left:?}"
    );

    let ev = events();
    let master0: Vec<&str> = ev.lines().filter(|l| l.contains(" master-0 ")).collect();
    let order = [
        "dhcp-discover",
        "dhcp-offer",
        "dhcp-request",
        "dhcp-ack",
        "tftp-sent",
        "tftp-missing",
        "http GET /ignition/master-0.ign 200",
    ];
    let mut at = 0;
    for step in order {
        let i = master0[at..]
            .iter()
            .position(|l| l.contains(step))
            .unwrap_or_else(|| panic!("{step} missing after line {at}:\n{ev}"));
        at += i;
    }
    assert!(ev.contains("http GET /rhcos/rhcos-live-rootfs.x86_64.img 200 3145728 B"), "{ev}");
    assert!(ev.contains("http GET /rhcos/rhcos-live-rootfs.img 404"), "{ev}");
    assert!(
        ev.contains("http-refused GET /ignition/bootstrap.ign 403: bootstrap's config asked for by 192.168.126.101 (master-0)"),
        "{ev}"
    );
    assert!(ev.contains("dhcp-no-address"), "{ev}");
    assert!(
        master0.iter().any(|l| l.contains("mcs to master-0: ") && l.contains("answered")),
        "{ev}"
    );

    let st = text(&hardshift(&["status", "--dir", d]).stdout);
    assert!(st.contains("UNKNOWN MACHINE 52:54:00:00:00:99 asked for DHCP"), "{st}");
    let line = st.lines().find(|l| l.starts_with("BOOT master-0: ")).unwrap_or_default();
    assert!(
        line.contains("dhcp-ack ") && line.contains("tftp undionly.kpxe") && line.contains("master-0.ign 200 "),
        "{st}"
    );
    let m0 = st.lines().find(|l| l.starts_with("master-0 ")).unwrap_or_default();
    assert!(m0.contains("NEVER REPORTED; last boot step"), "{st}");
    let boot = st.lines().find(|l| l.starts_with("bootstrap ")).unwrap_or_default();
    assert!(boot.contains("the helper never saw it"), "{st}");

    // diagnose names each node's stop by what the helper saw.
    let out = hardshift(&["diagnose", "master-0", "--dir", d]);
    let said = text(&out.stdout);
    assert!(
        said.contains("HS009") && said.contains("master-0 fetched its config (") && said.contains("but its agent never reported"),
        "{said}"
    );
    let said = text(&hardshift(&["diagnose", "bootstrap", "--dir", d]).stdout);
    assert!(
        said.contains("HS004") && said.contains("52:54:00:00:00:99 asked for DHCP"),
        "{said}"
    );
    drop(net);
}

/// A helper killed with -9 leaves no program of its running: each dies with it.
#[test]
fn a_killed_helper_leaves_nothing_running() {
    let lab = example_copy();
    let dir = lab.path();
    create(dir, &[]);
    let r = dir.join("rhcos");
    rhcos(&r);
    let net = Netns::new("lk", &[("helper", &["192.168.126.1/24"])]);
    let ns = net.ns("helper");
    let mut serve = serve(&net, dir, &["--no-collector"], false);
    wait_for("dnsmasq and haproxy running", 120, || {
        let p = processes_in(&ns);
        p.iter().any(|c| c == "dnsmasq") && p.iter().any(|c| c == "haproxy")
    });
    serve.0.kill().unwrap();
    let _ = serve.0.wait();
    wait_for("every program of the helper gone", 60, || {
        let p = processes_in(&ns);
        !p.iter().any(|c| c == "dnsmasq" || c == "haproxy")
    });
    drop(net);
}

/// The helper stores its boot events itself: a collector killed with -9 in the middle of a boot
/// and started again loses none of them, and they stay in the order they happened.
#[test]
fn boot_events_outlive_a_collector_killed_mid_boot() {
    let lab = example_copy();
    let dir = lab.path();
    create(dir, &[]);
    let r = dir.join("rhcos");
    rhcos(&r);
    let d = dir.to_str().unwrap();
    let hs = env!("CARGO_BIN_EXE_hardshift");
    let net = Netns::new("lc", &[("helper", &["192.168.126.1/24"]), ("node", &[])]);
    let collector = || {
        net.command("helper", hs)
            .args([
                "collector",
                "--dir",
                d,
                "--listen",
                "192.168.126.1:9443",
                "--no-web",
                "--no-api-watch",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(Kill)
            .unwrap()
    };
    let mut first = collector();
    let mut serve = serve(&net, dir, &["--no-collector"], true);
    let node = |args: &[&str]| net.exec("node", args[0], &args[1..]);
    let url = |p: &str| format!("http://192.168.126.1:8080/{p}");
    node(&["ip", "link", "set", "eth0", "address", MASTER0_MAC]);
    let dhcp = || {
        let (ok, said) = udhcpc(&net, "5", "2");
        assert!(ok && said.contains(MASTER0_IP), "{said}");
    };
    dhcp();
    node(&["ip", "addr", "add", &format!("{MASTER0_IP}/24"), "dev", "eth0"]);
    // The collector dies mid-boot; the node goes on.
    first.0.kill().unwrap();
    let _ = first.0.wait();
    let code = |p: &str| node(&["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", &url(p)]).1;
    assert_eq!(code("ignition/master-0.ign"), "200");
    dhcp();
    let second = collector();
    assert_eq!(code("pxe/boot.ipxe"), "200");
    let steps = || {
        let out = hardshift(&["events", "master-0", "--dir", d, "-o", "json"]);
        let v: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v.iter()
            // HAProxy's checks of master-0's backends come as they come: the node's own steps.
            .filter(|e| e["component"] == "boot" && !e["to"].as_str().unwrap_or_default().starts_with("backend"))
            .map(|e| {
                e["to"]
                    .as_str()
                    .unwrap_or_default()
                    .split(' ')
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<String>>()
    };
    wait_for("every boot step stored", 60, || steps().len() >= 10);
    let got = steps();
    let want = [
        "dhcp-discover",
        "dhcp-offer",
        "dhcp-request",
        "dhcp-ack master-0",
        "http GET /ignition/master-0.ign",
        "dhcp-discover",
        "dhcp-offer",
        "dhcp-request",
        "dhcp-ack master-0",
        "http GET /pxe/boot.ipxe",
    ];
    assert_eq!(got, want, "every step, in order, none lost");
    sigterm(&serve.0);
    wait_exit(&mut serve.0, 60);
    drop(second);
    drop(net);
}
