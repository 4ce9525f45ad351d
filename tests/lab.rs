//! The lab's configs, checked and run by the real programs: haproxy, dnsmasq, named-checkzone,
//! dhcpd, dig; HAProxy forwarding between namespaces holding the lab's addresses.

mod common;

use common::netns::Netns;
use common::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

const NODES: [(&str, &str, &str); 6] = [
    ("bootstrap", "192.168.126.100", "52:54:00:00:00:64"),
    ("master-0", "192.168.126.101", "52:54:00:00:00:65"),
    ("master-1", "192.168.126.102", "52:54:00:00:00:66"),
    ("master-2", "192.168.126.103", "52:54:00:00:00:67"),
    ("worker-0", "192.168.126.110", "52:54:00:00:00:6e"),
    ("worker-1", "192.168.126.111", "52:54:00:00:00:6f"),
];

fn lab(d: &Path, f: &str) -> String {
    d.join("lab").join(f).to_string_lossy().to_string()
}

/// An Ignition `contents`' bytes (a data URL, maybe gzip-compressed).
fn decoded(c: &serde_json::Value) -> Vec<u8> {
    let c: hardshift_generator::ignition::Contents = serde_json::from_value(c.clone()).unwrap();
    hardshift_generator::ignition::decode(&c).unwrap()
}

fn bundle() -> tempfile::TempDir {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    d
}

#[test]
fn validators_accept_every_generated_config() {
    let d = bundle();
    let p = d.path();
    for f in ["haproxy/haproxy.cfg", "haproxy/haproxy-post-pivot.cfg"] {
        let (ok, out) = run("haproxy", &["-c", "-f", &lab(p, f)]);
        assert!(ok && out.contains("Configuration file is valid"), "{f}: {out}");
    }
    for f in ["dnsmasq/ocp4-dns.conf", "dnsmasq/ocp4-dhcp.conf"] {
        let (ok, out) = run("dnsmasq", &["--test", "-C", &lab(p, f)]);
        assert!(ok && out.contains("syntax check OK"), "{f}: {out}");
    }
    for (zone, f) in [
        ("ocp4.example.com", "bind/db.ocp4.example.com"),
        ("126.168.192.in-addr.arpa", "bind/db.126.168.192.in-addr.arpa"),
    ] {
        let (ok, out) = run("named-checkzone", &[zone, &lab(p, f)]);
        assert!(ok && out.contains("OK"), "{f}: {out}");
    }
    let (ok, out) = run("dhcpd", &["-t", "-cf", &lab(p, "dhcpd/dhcpd.conf")]);
    assert!(ok, "dhcpd: {out}");
    // dhcpd -t lets a bare `bogus;` pass, so read the host blocks back too.
    let conf = std::fs::read_to_string(lab(p, "dhcpd/dhcpd.conf")).unwrap();
    let mut hosts = BTreeSet::new();
    for block in conf.split("host ").skip(1) {
        let name = block.split_whitespace().next().unwrap().to_string();
        let field = |k: &str| {
            block
                .lines()
                .find_map(|l| l.trim().strip_prefix(k))
                .map(|v| v.trim().trim_end_matches(';').trim_matches('"').to_string())
        };
        hosts.insert((
            name,
            field("fixed-address").unwrap(),
            field("hardware ethernet").unwrap(),
            field("option host-name").unwrap(),
        ));
    }
    let want: BTreeSet<_> = NODES
        .iter()
        .map(|(h, ip, mac)| (h.to_string(), ip.to_string(), mac.to_string(), h.to_string()))
        .collect();
    assert_eq!(hosts, want);
    let (ok, out) = run(
        "python3",
        &[
            "-c",
            "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])",
            &lab(p, "libvirt/ocp4-network.xml"),
        ],
    );
    assert!(ok, "libvirt XML: {out}");
    // A broken config is caught by the same checks (so the checks mean something).
    let bad = p.join("bad.cfg");
    std::fs::write(
        &bad,
        std::fs::read_to_string(lab(p, "haproxy/haproxy.cfg"))
            .unwrap()
            .replace("balance roundrobin", "balance nonsense"),
    )
    .unwrap();
    assert!(!run("haproxy", &["-c", "-f", bad.to_str().unwrap()]).0);
}

/// A port free for both UDP and TCP (dnsmasq serves both).
fn free_dns_port() -> u16 {
    // free_port's: outside the ephemeral range, so no outgoing socket takes it meanwhile.
    let port = free_port();
    if std::net::UdpSocket::bind(("127.0.0.1", port)).is_err() {
        return free_dns_port();
    }
    port
}

/// dnsmasq serving the DNS config at `conf` on a free loopback port, answering already.
fn dnsmasq(conf: &str) -> (Kill, u16) {
    let port = free_dns_port();
    let dns = Kill(
        std::process::Command::new("dnsmasq")
            .args([
                "-d",
                "-C",
                conf,
                &format!("--port={port}"),
                "--listen-address=127.0.0.1",
                "--bind-interfaces",
            ])
            .args(["--no-resolv", "--no-hosts", "--pid-file=", "--user=root"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Until dnsmasq has bound its port, dig is refused: wait for a first answer, not a first try.
    let start = Instant::now();
    loop {
        let p = port.to_string();
        let (ok, out) = run(
            "dig",
            &[
                "@127.0.0.1",
                "-p",
                p.as_str(),
                "+short",
                "+time=1",
                "+tries=1",
                "api.ocp4.example.com",
            ],
        );
        if ok && !out.trim().is_empty() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "dnsmasq did not answer: {out}");
        std::thread::sleep(Duration::from_millis(100));
    }
    (dns, port)
}

/// What dig says, sorted, asking the dnsmasq on `port`.
fn dig(port: u16, args: &[&str]) -> Vec<String> {
    let p = port.to_string();
    let mut all = vec!["@127.0.0.1", "-p", p.as_str(), "+short", "+time=2", "+tries=3"];
    all.extend_from_slice(args);
    let (ok, out) = run("dig", &all);
    assert!(ok, "dig {args:?}: {out}");
    let mut lines: Vec<String> = out.lines().map(String::from).collect();
    lines.sort();
    lines
}

#[test]
fn dnsmasq_serves_every_record() {
    let d = bundle();
    let conf = lab(d.path(), "dnsmasq/ocp4-dns.conf");
    let (_dns, port) = dnsmasq(&conf);
    let dig = |args: &[&str]| dig(port, args);
    assert_eq!(dig(&["api.ocp4.example.com"]), vec!["192.168.126.10"]);
    assert_eq!(dig(&["api-int.ocp4.example.com"]), vec!["192.168.126.10"]);
    assert_eq!(dig(&["console-openshift-console.apps.ocp4.example.com"]), vec!["192.168.126.11"]);
    for (host, ip, _) in NODES {
        assert_eq!(dig(&[&format!("{host}.ocp4.example.com")]), vec![ip], "{host}");
        assert_eq!(dig(&["-x", ip]), vec![format!("{host}.ocp4.example.com.")], "PTR of {ip}");
    }
    for i in 0..3 {
        assert_eq!(
            dig(&[&format!("etcd-{i}.ocp4.example.com")]),
            vec![format!("192.168.126.{}", 101 + i)]
        );
    }
    assert_eq!(
        dig(&["SRV", "_etcd-server-ssl._tcp.ocp4.example.com"]),
        vec![
            "0 10 2380 etcd-0.ocp4.example.com.",
            "0 10 2380 etcd-1.ocp4.example.com.",
            "0 10 2380 etcd-2.ocp4.example.com."
        ]
    );
    // Names outside the cluster are not invented, nor are names inside it.
    assert!(dig(&["nothing.example.org"]).is_empty());
    assert!(dig(&["no-such-name.ocp4.example.com"]).is_empty());
}

/// The boot lab's DNS faults, served by the real dnsmasq: with a wildcard a random name under the
/// cluster resolves while every record keeps its own answer; without master-2's PTR its name
/// still resolves and its address no longer does.
#[test]
fn the_boot_labs_dns_faults_are_what_dnsmasq_serves() {
    use hardshift_boot_lab::fault::{apply_dns, Fault};
    let d = bundle();
    let dns = std::fs::read_to_string(lab(d.path(), "dnsmasq/ocp4-dns.conf")).unwrap();
    let faulted = apply_dns(&dns, &[Fault::DnsWildcard, Fault::NoPtr("master-2".into())]).unwrap();
    let conf = d.path().join("faulted-dns.conf");
    std::fs::write(&conf, faulted).unwrap();
    let (_dns, port) = dnsmasq(conf.to_str().unwrap());
    let dig = |args: &[&str]| dig(port, args);
    assert_eq!(dig(&["no-such-name.ocp4.example.com"]), vec!["192.168.126.250"]);
    assert_eq!(dig(&["api.ocp4.example.com"]), vec!["192.168.126.10"]);
    assert_eq!(dig(&["api-int.ocp4.example.com"]), vec!["192.168.126.10"]);
    assert_eq!(dig(&["console-openshift-console.apps.ocp4.example.com"]), vec!["192.168.126.11"]);
    for (host, ip, _) in NODES {
        assert_eq!(dig(&[&format!("{host}.ocp4.example.com")]), vec![ip], "{host}");
        let ptr = if host == "master-2" {
            vec![]
        } else {
            vec![format!("{host}.ocp4.example.com.")]
        };
        assert_eq!(dig(&["-x", ip]), ptr, "PTR of {ip}");
    }
}

/// A TCP responder on the node's ports that answers with the node's name.
const RESPONDER: &str = r#"
import socket, sys, threading
name = sys.argv[1]
def serve(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(64)
    while True:
        c, _ = s.accept(); c.sendall((name + "\n").encode()); c.close()
for p in sys.argv[2:]:
    threading.Thread(target=serve, args=(int(p),), daemon=True).start()
threading.Event().wait()
"#;

const CLIENT: &str = r#"
import socket, sys
seen = []
for _ in range(int(sys.argv[3])):
    try:
        c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
        seen.append(c.recv(100).decode().strip()); c.close()
    except OSError as e:
        seen.append("error:" + type(e).__name__)
print(",".join(seen))
"#;

#[test]
fn haproxy_forwards_to_the_right_nodes_before_and_after_the_pivot() {
    let d = bundle();
    let mut hosts: Vec<(&str, Vec<String>)> = vec![
        (
            "helper",
            vec!["192.168.126.1/24".into(), "192.168.126.10/24".into(), "192.168.126.11/24".into()],
        ),
        ("client", vec!["192.168.126.99/24".into()]),
    ];
    for (h, ip, _) in NODES {
        hosts.push((h, vec![format!("{ip}/24")]));
    }
    let spec: Vec<(&str, Vec<&str>)> = hosts.iter().map(|(h, a)| (*h, a.iter().map(String::as_str).collect())).collect();
    let spec: Vec<(&str, &[&str])> = spec.iter().map(|(h, a)| (*h, a.as_slice())).collect();
    let mut net = Netns::new("lb", &spec);
    for (h, _, _) in NODES {
        net.spawn(h, "python3", &["-c", RESPONDER, h, "6443", "22623", "80", "443"]);
    }

    let through = |net: &Netns, vip: &str, port: u16| -> BTreeSet<String> {
        let (ok, out) = net.exec("client", "python3", &["-c", CLIENT, vip, &port.to_string(), "24"]);
        assert!(ok, "{out}");
        out.trim().split(',').map(String::from).collect()
    };
    let wait_ready = |net: &Netns| {
        let start = Instant::now();
        loop {
            let (ok, out) = net.exec("client", "python3", &["-c", CLIENT, "192.168.126.10", "6443", "1"]);
            if ok && !out.contains("error") && !out.trim().is_empty() {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(15), "haproxy did not start: {out}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    // Every backend answers directly before HAProxy is judged.
    let backends_up = |net: &Netns| {
        for (h, ip, _) in NODES {
            for port in ["6443", "22623", "80", "443"] {
                let start = Instant::now();
                loop {
                    let (ok, out) = net.exec("client", "python3", &["-c", CLIENT, ip, port, "1"]);
                    if ok && out.trim() == h {
                        break;
                    }
                    assert!(start.elapsed() < Duration::from_secs(20), "{h}:{port} did not come up: {out}");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    };
    backends_up(&net);
    let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let cp = set(&["bootstrap", "master-0", "master-1", "master-2"]);
    let masters = set(&["master-0", "master-1", "master-2"]);
    let workers = set(&["worker-0", "worker-1"]);

    // Before the pivot: the bootstrap serves the API and machine-config with the masters.
    net.spawn("helper", "haproxy", &["-db", "-f", &lab(d.path(), "haproxy/haproxy.cfg")]);
    wait_ready(&net);
    assert_eq!(through(&net, "192.168.126.10", 6443), cp);
    assert_eq!(through(&net, "192.168.126.10", 22623), cp);
    assert_eq!(through(&net, "192.168.126.11", 80), workers);
    assert_eq!(through(&net, "192.168.126.11", 443), workers);

    // After it: never the bootstrap.
    net.kill_all();
    for (h, _, _) in NODES {
        net.spawn(h, "python3", &["-c", RESPONDER, h, "6443", "22623", "80", "443"]);
    }
    backends_up(&net);
    net.spawn(
        "helper",
        "haproxy",
        &["-db", "-f", &lab(d.path(), "haproxy/haproxy-post-pivot.cfg")],
    );
    wait_ready(&net);
    assert_eq!(through(&net, "192.168.126.10", 6443), masters);
    assert_eq!(through(&net, "192.168.126.10", 22623), masters);
    assert_eq!(through(&net, "192.168.126.11", 443), workers);
}

#[test]
fn install_commands_pin_each_ignition_by_its_sha256() {
    let d = bundle();
    let script = std::fs::read_to_string(lab(d.path(), "scripts/coreos-installer.sh")).unwrap();
    let (ok, out) = run("bash", &["-n", &lab(d.path(), "scripts/coreos-installer.sh")]);
    assert!(ok, "{out}");
    for (host, ip, mac) in NODES {
        let ign = d.path().join(format!("ignition/{host}.ign"));
        let (ok, sum) = run("sha256sum", &[ign.to_str().unwrap()]);
        assert!(ok);
        let hex = sum.split_whitespace().next().unwrap();
        let block = script.split(&format!("  {host})")).nth(1).unwrap().split(";;").next().unwrap();
        assert!(block.contains(&format!("--ignition-hash sha256-{hex}")), "{host}: {block}");
        // The node's command, word by word as bash splits it (the device and URL are quoted).
        let words = block.replace("sudo coreos-installer", "printf '%s\\n'");
        let (ok, out) = run("bash", &["-c", &words]);
        assert!(ok, "{host}: {out}");
        let url = format!("http://192.168.126.1:8080/ignition/{host}.ign");
        let hash = format!("sha256-{hex}");
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            [
                "install",
                "/dev/vda",
                "--ignition-url",
                url.as_str(),
                "--ignition-hash",
                hash.as_str()
            ],
            "{host}: {block}"
        );
        // PXE: a config per MAC with the node's static ip= and its live config, whose agent
        // installs the node's config pinned by the same hash.
        let pxe = std::fs::read_to_string(lab(d.path(), &format!("pxe/pxelinux.cfg/01-{}", mac.replace(':', "-")))).unwrap();
        assert!(
            pxe.contains(&format!("ip={ip}::192.168.126.1:255.255.255.0:{host}:enp1s0:none")),
            "{pxe}"
        );
        assert!(
            pxe.contains(&format!("ignition.config.url=http://192.168.126.1:8080/live/{host}.ign")),
            "{pxe}"
        );
        assert!(pxe.contains("coreos.live.rootfs_url=") && !pxe.contains("coreos.inst."), "{pxe}");
        let live: serde_json::Value = serde_json::from_slice(&std::fs::read(d.path().join(format!("live/{host}.ign"))).unwrap()).unwrap();
        let toml = live["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == "/etc/hardshift/agent.toml")
            .map(|f| decoded(&f["contents"]))
            .unwrap();
        let toml = String::from_utf8(toml).unwrap();
        assert!(
            toml.contains(&format!("config_hash = \"{hash}\"")) && toml.contains(&format!("config_url = \"{url}\"")),
            "{toml}"
        );
        assert!(toml.contains("disk = \"/dev/vda\""), "{toml}");
    }
    // Without the live agent: RHCOS's own arguments install the node.
    let plain = example_copy();
    create(plain.path(), &["--key-algorithm", "ecdsa-p256", "--no-live-agent"]);
    let pxe = std::fs::read_to_string(lab(plain.path(), "pxe/pxelinux.cfg/01-52-54-00-00-00-6e")).unwrap();
    assert!(
        pxe.contains("coreos.inst.ignition_url=http://192.168.126.1:8080/ignition/worker-0.ign")
            && pxe.contains("coreos.inst.install_dev=/dev/vda"),
        "{pxe}"
    );
    assert!(!plain.path().join("live").exists());
    let virt = std::fs::read_to_string(lab(d.path(), "scripts/virt-install.sh")).unwrap();
    assert!(
        virt.contains("--vcpus 4 --memory 16384 --disk size=100") && virt.contains("mac=52:54:00:00:00:65"),
        "{virt}"
    );
    let ipxe = std::fs::read_to_string(lab(d.path(), "pxe/boot.ipxe")).unwrap();
    assert!(ipxe.starts_with("#!ipxe") && ipxe.contains(":mac-52-54-00-00-00-6f"), "{ipxe}");
}

#[test]
fn hardshift_lab_regenerates_only_the_lab() {
    let d = bundle();
    let before = snapshot(d.path());
    edit(
        d.path(),
        "hardshift.yaml",
        "  diskGiB: 100",
        "  diskGiB: 120\n  httpBaseUrl: http://192.168.126.1:8081",
    );
    let out = hardshift(&["lab", "--dir", d.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let after = snapshot(d.path());
    let changed: BTreeSet<String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .cloned()
        .collect();
    assert!(
        changed.contains("lab/scripts/virt-install.sh") && changed.contains("lab/pxe/boot.ipxe"),
        "{changed:?}"
    );
    for c in &changed {
        assert!(
            c.starts_with("lab/")
                || c.starts_with("live/")
                || ["SHA256SUMS", "hardshift.yaml", "cluster.json", "inventory.json"].contains(&c.as_str()),
            "hardshift lab changed {c}"
        );
    }
    // The inventory says where the helper serves the configs: its readers (boot-lab, `lab serve`)
    // follow the new address.
    assert!(String::from_utf8_lossy(&after["inventory.json"]).contains("\"httpBaseUrl\": \"http://192.168.126.1:8081\""));
    assert!(String::from_utf8_lossy(&after["lab/scripts/virt-install.sh"]).contains("--disk size=120"));
    // The live configs name the helper's new address for the node's config (what `verify` below
    // compares with a fresh build, byte for byte).
    assert!(changed.contains("live/worker-0.ign"), "{changed:?}");
    let verify = hardshift(&["verify", "--dir", d.path().to_str().unwrap()]);
    assert!(verify.status.success(), "{}", text(&verify.stdout));
}

/// Does `host:port` accept a TCP connection from namespace `from`?
fn connects(net: &Netns, from: &str, host: &str, port: u16) -> bool {
    let code = format!("import socket; socket.create_connection(('{host}', {port}), timeout=2).close()");
    net.exec(from, "python3", &["-c", &code]).0
}

#[test]
fn helper_network_script_sets_up_the_helper_once_and_haproxy_answers_on_the_vip() {
    let d = bundle();
    let script = lab(d.path(), "scripts/helper-network.sh");
    let net = Netns::new("hn", &[("helper", &["192.168.126.1/24"]), ("client", &["192.168.126.99/24"])]);
    // The helper's lab bridge, named as libvirt names it (the cluster's name), holding its address.
    let h = net.ns("helper");
    for args in [
        vec!["-n", &h, "link", "add", "ocp4", "type", "bridge"],
        vec!["-n", &h, "link", "set", "eth0", "master", "ocp4"],
        vec!["-n", &h, "addr", "del", "192.168.126.1/24", "dev", "eth0"],
        vec!["-n", &h, "addr", "add", "192.168.126.1/24", "dev", "ocp4"],
        vec!["-n", &h, "link", "set", "ocp4", "up"],
    ] {
        let (ok, out) = run("ip", &args);
        assert!(ok, "ip {}: {out}", args.join(" "));
    }
    let state = |net: &Netns| {
        let (_, addrs) = net.exec("helper", "ip", &["-o", "-4", "addr", "show", "dev", "ocp4"]);
        let (_, rules) = net.exec("helper", "nft", &["list", "ruleset"]);
        let (_, fwd) = net.exec("helper", "sysctl", &["-n", "net.ipv4.ip_forward"]);
        (addrs, rules, fwd)
    };
    let before = state(&net);

    // --dry-run says what it would do and does nothing.
    let (ok, out) = net.exec("helper", "bash", &[&script, "--dry-run"]);
    assert!(ok, "{out}");
    assert!(out.contains("would change: VIP 192.168.126.10/24 on ocp4"), "{out}");
    assert!(out.contains("would change: VIP 192.168.126.11/24 on ocp4"), "{out}");
    assert!(out.contains("would change: nftables table inet hardshift"), "{out}");
    assert_eq!(state(&net), before, "a dry run changed something");
    assert!(!connects(&net, "client", "192.168.126.10", 6443));

    // The real run: VIPs, ports, masquerade, forwarding.
    let (ok, out) = net.exec("helper", "bash", &[&script]);
    assert!(ok, "{out}");
    let (addrs, rules, fwd) = state(&net);
    assert!(
        addrs.contains("inet 192.168.126.10/24") && addrs.contains("inet 192.168.126.11/24"),
        "{addrs}"
    );
    assert!(rules.contains("tcp dport { 80, 443, 6443, 22623 } accept"), "{rules}");
    assert!(
        rules.contains("ip saddr 192.168.126.0/24 ip daddr != 192.168.126.0/24 masquerade"),
        "{rules}"
    );
    assert_eq!(fwd.trim(), "1");

    // Later runs change nothing (several: a check that reads a pipe could fail at random).
    let after = state(&net);
    for _ in 0..5 {
        let (ok, out) = net.exec("helper", "bash", &[&script]);
        assert!(ok, "{out}");
        assert!(out.contains("helper-network.sh: 0 change(s)") && !out.contains("changed:"), "{out}");
        assert_eq!(state(&net), after);
    }
    let (ok, out) = net.exec("helper", "bash", &[&script, "--bogus"]);
    assert!(!ok && out.contains("unknown argument --bogus"), "{out}");

    // HAProxy with the generated config answers on the API and ingress VIPs from another host.
    let mut net = net;
    net.spawn("helper", "haproxy", &["-db", "-f", &lab(d.path(), "haproxy/haproxy.cfg")]);
    let start = Instant::now();
    while !connects(&net, "client", "192.168.126.10", 6443) {
        assert!(start.elapsed() < Duration::from_secs(15), "HAProxy does not answer on the API VIP");
        std::thread::sleep(Duration::from_millis(200));
    }
    for port in [22623, 80, 443] {
        let vip = if port == 22623 { "192.168.126.10" } else { "192.168.126.11" };
        assert!(connects(&net, "client", vip, port), "{vip}:{port}");
    }
}

/// A mirror named inside the cluster's zone needs a record in the lab's DNS, which serves that zone
/// alone: without one, nodes cannot pull (what a real boot found with the example's mirror).
#[test]
fn a_mirror_inside_the_zone_without_a_record_is_named() {
    // The example gives its mirror an address (dns.records): served, and nothing to warn of.
    let d = example_copy();
    let err = text(&create(d.path(), &["--no-agent"]).stderr);
    assert!(!err.contains("warning: mirror"), "{err}");
    let conf = std::fs::read_to_string(d.path().join("lab/dnsmasq/ocp4-dns.conf")).unwrap();
    assert!(conf.contains("address=/registry.ocp4.example.com/192.168.126.1\n"), "{conf}");
    let zone = std::fs::read_dir(d.path().join("lab/bind"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect::<String>();
    assert!(zone.contains("\nregistry IN A 192.168.126.1\n"), "{zone}");
    // Without that record, the warning, once.
    let d = example_copy();
    let hs = std::fs::read_to_string(d.path().join("hardshift.yaml")).unwrap();
    let start = hs.find("dns:\n").unwrap();
    let end = hs.find("release:").unwrap();
    std::fs::write(d.path().join("hardshift.yaml"), format!("{}{}", &hs[..start], &hs[end..])).unwrap();
    let err = text(&create(d.path(), &["--no-agent"]).stderr);
    let want =
        "warning: mirror registry.ocp4.example.com is inside ocp4.example.com, which the lab's DNS serves alone, and has no record there";
    assert_eq!(err.matches(want).count(), 1, "once, though two sources name it:\n{err}");
    // The zone really has no answer for it: the generated dnsmasq config, served and asked.
    let conf = std::fs::read_to_string(d.path().join("lab/dnsmasq/ocp4-dns.conf")).unwrap();
    assert!(
        conf.contains("local=/ocp4.example.com/") && !conf.contains("registry.ocp4.example.com"),
        "{conf}"
    );
    // Outside the zone: nothing to say.
    let d = example_copy();
    for _ in 0..2 {
        edit(
            d.path(),
            "install-config.yaml",
            "registry.ocp4.example.com:5000/",
            "mirror.example.net:5000/",
        );
    }
    let err = text(&create(d.path(), &["--no-agent"]).stderr);
    assert!(!err.contains("warning: mirror"), "{err}");
}
