//! A real boot of a bundle: the bootstrap and master-0 PXE-boot under QEMU from the lab's own
//! dnsmasq DHCP config and iPXE script, Ignition applies their generated configs, and their agents
//! report to `hardshift collector`; a third node, served a config that is not the one `create` wrote,
//! is refused by Ignition and never reports.
//!
//! The machine is not RHCOS (no registry reachable here ships it): hack/boot-image.sh builds a
//! Debian 12 kernel, a dracut initramfs with Debian's Ignition 2.14 and a root disk with systemd,
//! NetworkManager and sshd. What differs from a real RHCOS PXE boot: no coreos-installer (the
//! disk is already there, so the live rootfs image is not fetched and Ignition runs on the disk's
//! first boot instead of the installed system's), no rpm-ostree, no SELinux, no kubelet or CRI-O
//! binaries; Ignition 2.14 accepts config spec up to 3.3.0 (the bundle writes 3.2.0).

mod common;

use common::netns::Netns;
use common::*;
use sha2::{Digest, Sha256, Sha512};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const HELPER: &str = "192.168.126.1";

struct Node {
    name: String,
    ip: String,
    mac: String,
}

/// The inventory as the bundle's lab README lists it: `| node | role | IP | MAC |`.
fn inventory(dir: &Path) -> Vec<Node> {
    let readme = std::fs::read_to_string(dir.join("lab/README.md")).unwrap();
    readme
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('|').map(str::trim).collect();
            (f.len() == 6 && f[4].len() == 17 && f[4].chars().nth(2) == Some(':')).then(|| Node {
                name: f[1].to_string(),
                ip: f[3].to_string(),
                mac: f[4].to_string(),
            })
        })
        .collect()
}

/// The bytes of an Ignition `contents` (a data URL, maybe gzip-compressed), decoded as the
/// generator's own reader does; the test compares them with what the real Ignition wrote.
fn contents(c: &serde_json::Value) -> Vec<u8> {
    let c: hardshift_generator::ignition::Contents = serde_json::from_value(c.clone()).expect("Ignition contents");
    hardshift_generator::ignition::decode(&c).expect("a data URL")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The generated iPXE script with the test image in place of RHCOS's live images: the kernel and
/// initramfs come from the image; `coreos.live.rootfs_url` and `coreos.inst.install_dev` go (no
/// installer, the disk is ready); the node's `coreos.inst.ignition_url` becomes
/// `ignition.config.url` (Ignition on this boot, not the installer's); the rest (the static `ip=`,
/// `nameserver=`, consoles) is the bundle's. Added: the root disk, Ignition's first-boot flags,
/// and errors on the serial console (to say why a boot failed).
fn test_ipxe(generated: &str) -> String {
    let base = format!("http://{HELPER}:8080");
    let mut kernels = 0;
    let out: Vec<String> = generated
        .lines()
        .map(|l| {
            if let Some(args) = l.strip_prefix("kernel ") {
                kernels += 1;
                let mut a = vec![format!("kernel {base}/image/vmlinuz")];
                for w in args.split_whitespace().skip(1) {
                    if w.starts_with("coreos.live.rootfs_url=") || w.starts_with("coreos.inst.install_dev=") {
                        continue;
                    }
                    match w.strip_prefix("coreos.inst.ignition_url=") {
                        Some(url) => a.push(format!("ignition.config.url={url}")),
                        None => a.push(w.to_string()),
                    }
                }
                a.push("root=LABEL=root rw rd.neednet=1 ignition.firstboot ignition.platform.id=metal".into());
                a.push("systemd.journald.forward_to_console=1 systemd.journald.max_level_console=err".into());
                a.join(" ")
            } else if l.starts_with("initrd ") {
                format!("initrd --name main {base}/image/initramfs.img")
            } else {
                l.to_string()
            }
        })
        .collect();
    assert!(kernels > 0, "no kernel line in boot.ipxe:\n{generated}");
    assert!(!out.iter().any(|l| l.contains("rhcos")), "RHCOS left in:\n{}", out.join("\n"));
    out.join("\n") + "\n"
}

/// A VM booting from its NIC (the iPXE ROM), on a tap of the lab bridge. q35 with the NIC behind a
/// PCIe root port, as libvirt lays it out: the guest names it enp1s0, the name the bundle's
/// keyfile and `ip=` use. The disk is the image, written through a throw-away overlay.
fn vm(net: &Netns, image: &Path, accel: &str, tap: &str, node: &Node, serial: &Path) -> Kill {
    let br = format!("{}-br", net.prefix);
    for args in [
        vec!["-n", &br, "tuntap", "add", tap, "mode", "tap"],
        vec!["-n", &br, "link", "set", tap, "master", "br0"],
        vec!["-n", &br, "link", "set", tap, "up"],
    ] {
        let (ok, out) = run("ip", &args);
        assert!(ok, "ip {args:?}: {out}");
    }
    let cpu = if accel == "kvm" { "host" } else { "max" };
    let accel = if accel == "kvm" { "kvm" } else { "tcg,tb-size=256" };
    let disk = format!("if=none,id=d0,format=raw,snapshot=on,file={}", image.join("disk.raw").display());
    Kill(
        Command::new("ip")
            .args(["netns", "exec", &br, "qemu-system-x86_64", "-nodefaults", "-name", &node.name])
            .args(["-machine", "q35", "-accel", accel, "-cpu", cpu, "-m", "512", "-smp", "1"])
            .args(["-display", "none", "-serial", &format!("file:{}", serial.display())])
            .args(["-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1"])
            .args(["-netdev", &format!("tap,id=n0,ifname={tap},script=no,downscript=no")])
            .args(["-device", &format!("virtio-net-pci,bus=rp1,netdev=n0,mac={},bootindex=1", node.mac)])
            .args(["-drive", &disk, "-device", "virtio-blk-pci,drive=d0", "-device", "virtio-rng-pci"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("qemu-system-x86_64"),
    )
}

/// KVM when it runs the VMs' firmware, else TCG (slower, same result). /dev/kvm is not enough: under
/// nested virtualisation KVM may fail in the iPXE ROM's real-mode code ("KVM internal error ...
/// emulation failure") and the VM stops there. So the probe runs that ROM until it sends its
/// first DHCP packet (captured to a file), it fails, or 30 s pass.
fn accelerator(scratch: &Path) -> &'static str {
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_err() {
        return "tcg";
    }
    let (pcap, log) = (scratch.join("kvm-probe.pcap"), scratch.join("kvm-probe.log"));
    let mut probe = Kill(
        Command::new("qemu-system-x86_64")
            .args([
                "-nodefaults",
                "-machine",
                "q35",
                "-accel",
                "kvm",
                "-cpu",
                "host",
                "-m",
                "128",
                "-display",
                "none",
            ])
            .args(["-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0", "-boot", "n"])
            .args(["-object", &format!("filter-dump,id=f0,netdev=n0,file={}", pcap.display())])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("qemu-system-x86_64"),
    );
    let start = Instant::now();
    let ok = loop {
        // A pcap file is a 24-byte header, then packets.
        if std::fs::metadata(&pcap).map(|m| m.len() > 24).unwrap_or(false) {
            break true;
        }
        let err = std::fs::read_to_string(&log).unwrap_or_default();
        if !err.is_empty() || probe.0.try_wait().unwrap().is_some() || start.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "boot: KVM does not run the firmware here ({}): TCG",
                err.lines().next().unwrap_or("no packet")
            );
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(probe);
    if ok {
        "kvm"
    } else {
        "tcg"
    }
}

fn ssh(net: &Netns, key: &Path, ip: &str, cmd: &str) -> (bool, String) {
    let target = format!("core@{ip}");
    net.exec(
        "helper",
        "ssh",
        &[
            "-i",
            key.to_str().unwrap(),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "ConnectTimeout=5",
            &target,
            cmd,
        ],
    )
}

fn tail(p: &Path) -> String {
    let s = String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).to_string();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

fn phase(start: &mut Instant, what: &str) {
    eprintln!("boot: {what}: {:.0?}", start.elapsed());
    *start = Instant::now();
}

#[test]
fn bundle_boots_and_reports() {
    let mut t = Instant::now();
    let total = Instant::now();
    // The image, built or reused (keyed by its packages' versions).
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/boot-image.sh");
    let out = Command::new(&script).stderr(Stdio::inherit()).output().unwrap();
    assert!(out.status.success(), "hack/boot-image.sh failed");
    let image = PathBuf::from(text(&out.stdout).trim().lines().last().unwrap());
    phase(&mut t, "image");

    // The bundle, with the test's own SSH key for core.
    let d = example_copy();
    let dir = d.path();
    let key = dir.join("id_ed25519");
    let (ok, o) = run(
        "ssh-keygen",
        &["-q", "-t", "ed25519", "-N", "", "-C", "boot-test", "-f", key.to_str().unwrap()],
    );
    assert!(ok, "ssh-keygen: {o}");
    let pubkey = std::fs::read_to_string(dir.join("id_ed25519.pub")).unwrap();
    let ic = std::fs::read_to_string(dir.join("install-config.yaml")).unwrap();
    let old = ic.lines().find(|l| l.starts_with("sshKey:")).expect("sshKey line").to_string();
    edit(dir, "install-config.yaml", &old, &format!("sshKey: {}", pubkey.trim()));
    create(dir, &[]);
    phase(&mut t, "create");

    let nodes = inventory(dir);
    let node = |n: &str| {
        nodes
            .iter()
            .find(|x| x.name == n)
            .unwrap_or_else(|| panic!("{n} not in lab/README.md"))
    };
    let (good, bad) = ([node("bootstrap"), node("master-0")], node("master-1"));
    let config =
        |n: &str| -> serde_json::Value { serde_json::from_slice(&std::fs::read(dir.join(format!("ignition/{n}.ign"))).unwrap()).unwrap() };
    // Where the agents report: what the bundle told them.
    let agent_toml = config("master-0")["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/etc/hardshift/agent.toml")
        .map(|f| contents(&f["contents"]))
        .expect("agent.toml in master-0.ign");
    let agent_toml: toml::Table = text(&agent_toml).parse().unwrap();
    let collector_addr = agent_toml["collector"].as_str().unwrap().to_string();
    assert!(collector_addr.starts_with(&format!("{HELPER}:")), "{collector_addr}");

    // What the helper serves over HTTP: the bundle's configs under /ignition/, the iPXE script
    // under /pxe/, the test image under /image/. master-1 gets its config with one byte added after
    // `create`: the same JSON, so only Ignition's hash check can tell. Its served config merges
    // that file pinned by the SHA-512 of the one `create` wrote, as coreos-installer's
    // --ignition-hash pins it on a real install (lab/scripts/coreos-installer.sh).
    let www = dir.join("www");
    for sub in ["ignition", "pxe", "image"] {
        std::fs::create_dir_all(www.join(sub)).unwrap();
    }
    for n in &good {
        std::fs::copy(
            dir.join(format!("ignition/{}.ign", n.name)),
            www.join(format!("ignition/{}.ign", n.name)),
        )
        .unwrap();
    }
    let written = std::fs::read(dir.join(format!("ignition/{}.ign", bad.name))).unwrap();
    let mut tampered = written.clone();
    tampered.push(b'\n');
    std::fs::write(www.join(format!("ignition/{}-written.ign", bad.name)), &tampered).unwrap();
    let pin = serde_json::json!({"ignition": {"version": "3.2.0", "config": {"merge": [{
        "source": format!("http://{HELPER}:8080/ignition/{}-written.ign", bad.name),
        "verification": {"hash": format!("sha512-{}", hex(&Sha512::digest(&written)))}}]}}});
    std::fs::write(www.join(format!("ignition/{}.ign", bad.name)), pin.to_string()).unwrap();
    let generated = std::fs::read_to_string(dir.join("lab/pxe/boot.ipxe")).unwrap();
    std::fs::write(www.join("pxe/boot.ipxe"), test_ipxe(&generated)).unwrap();
    for f in ["vmlinuz", "initramfs.img"] {
        std::os::unix::fs::symlink(image.join(f), www.join("image").join(f)).unwrap();
    }

    // The lab: the helper's addresses (and the VIPs) on a bridge in namespaces, the VMs' taps on it.
    let mut net = Netns::new("bt", &[("helper", &["192.168.126.1/24", "192.168.126.10/24", "192.168.126.11/24"])]);
    let run_dir = dir.join("run");
    std::fs::create_dir_all(run_dir.join("tftp")).unwrap();
    // The generated DHCP config, as is but for its TFTP root (a directory of the test's: the VMs'
    // iPXE ROM asks for the iPXE script straight away, so nothing is fetched over TFTP). The
    // generated DNS config is included as is, so the nodes' resolver (the helper) answers the
    // cluster's names. On the command line, what differs on a helper of the test's: the interface
    // (the namespace's eth0), the lease and log files, no /etc/hosts or upstream resolvers, root.
    let dhcp = std::fs::read_to_string(dir.join("lab/dnsmasq/ocp4-dhcp.conf")).unwrap();
    assert!(dhcp.contains("tftp-root=/var/lib/tftpboot\n"), "{dhcp}");
    let dhcp = dhcp.replace(
        "tftp-root=/var/lib/tftpboot\n",
        &format!("tftp-root={}\n", run_dir.join("tftp").display()),
    );
    let conf = run_dir.join("dnsmasq.conf");
    std::fs::write(
        &conf,
        format!("{dhcp}conf-file={}\n", dir.join("lab/dnsmasq/ocp4-dns.conf").display()),
    )
    .unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    net.spawn_logged(
        "helper",
        "dnsmasq",
        &[
            "-k".into(),
            format!("--conf-file={}", s(&conf)),
            "--interface=eth0".into(),
            "--bind-interfaces".into(),
            "--no-resolv".into(),
            "--no-hosts".into(),
            "--pid-file=".into(),
            "--user=root".into(),
            "--log-dhcp".into(),
            "--log-facility=-".into(),
            format!("--dhcp-leasefile={}", s(&run_dir.join("leases"))),
        ],
        &[],
        &run_dir.join("dnsmasq.log"),
    );
    net.spawn_logged(
        "helper",
        "python3",
        &["-m", "http.server", "8080", "--bind", HELPER, "--directory", &s(&www)].map(String::from),
        &[],
        &run_dir.join("http.log"),
    );
    net.spawn_logged(
        "helper",
        env!("CARGO_BIN_EXE_hardshift"),
        &[
            "collector",
            "--dir",
            &s(dir),
            "--listen",
            &collector_addr,
            "--no-web",
            "--no-api-watch",
        ]
        .map(String::from),
        &[],
        &dir.join("collector.log"),
    );

    let accel = accelerator(&run_dir);
    eprintln!("boot: accelerator {accel}");
    let serial = |n: &Node| run_dir.join(format!("{}.serial", n.name));
    let _vms: Vec<Kill> = good
        .iter()
        .chain([&bad])
        .enumerate()
        .map(|(i, n)| vm(&net, &image, accel, &format!("tap{i}"), n, &serial(n)))
        .collect();
    phase(&mut t, "lab up");

    // Booted: sshd answers and the collector stored the agent's reports. A boot that ends in the
    // emergency shell fails at once, with its console.
    let tails = || {
        good.iter()
            .chain([&bad])
            .map(|n| format!("== {} console:\n{}", n.name, tail(&serial(n))))
            .collect::<Vec<_>>()
            .join("\n")
            + &format!(
                "\n== collector:\n{}\n== dnsmasq:\n{}",
                tail(&dir.join("collector.log")),
                tail(&run_dir.join("dnsmasq.log"))
            )
    };
    let mut up = [false, false];
    let start = Instant::now();
    while up.iter().any(|u| !u) {
        for (i, n) in good.iter().enumerate() {
            let console = String::from_utf8_lossy(&std::fs::read(serial(n)).unwrap_or_default()).to_string();
            assert!(
                !console.contains("emergency mode"),
                "{} is in the emergency shell\n{}",
                n.name,
                tails()
            );
            up[i] = up[i] || (!stored(dir, &n.name).is_empty() && ssh(&net, &key, &n.ip, "true").0);
        }
        assert!(start.elapsed() < Duration::from_secs(900), "not booted: {up:?}\n{}", tails());
        std::thread::sleep(Duration::from_secs(2));
    }
    phase(&mut t, "boot to reports");

    for n in &good {
        check_node(&net, &key, n, &config(&n.name));
    }
    phase(&mut t, "checks over ssh");

    // The collector's view: both nodes with the boot the machine has, and their agent's journal.
    let (ok, status) = run(env!("CARGO_BIN_EXE_hardshift"), &["status", "--dir", &s(dir), "-o", "json"]);
    assert!(ok, "{status}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&status).unwrap();
    for n in &good {
        let row = rows
            .iter()
            .find(|r| r["node"] == n.name.as_str())
            .unwrap_or_else(|| panic!("{} not in status: {status}", n.name));
        let (_, boot_id) = ssh(&net, &key, &n.ip, "cat /proc/sys/kernel/random/boot_id");
        assert_eq!(row["boot_id"].as_str(), Some(boot_id.trim()), "{}", n.name);
        // No kubelet or CRI-O on this image: the agent must say so, not call it healthy.
        let kubelet = row["components"].as_array().unwrap().iter().find(|c| c["name"] == "kubelet");
        let kubelet = kubelet.unwrap_or_else(|| panic!("no kubelet component for {}: {row}", n.name));
        eprintln!("boot: {} kubelet as reported: {kubelet}", n.name);
        assert_ne!(kubelet["health"], "ok", "{kubelet}");
        assert!(row["kubelet"] != "ok", "{row}");
    }
    let (ok, table) = run(env!("CARGO_BIN_EXE_hardshift"), &["status", "--dir", &s(dir)]);
    assert!(ok, "{table}");
    eprintln!("boot: hardshift status:\n{table}");
    let (ok, logs) = run(
        env!("CARGO_BIN_EXE_hardshift"),
        &["logs", "--dir", &s(dir), "master-0", "hardshift-agent", "-n", "20"],
    );
    assert!(ok, "{logs}");
    assert!(logs.lines().count() > 0 && logs.contains("hardshift-agent"), "{logs}");
    phase(&mut t, "collector views");

    // master-1 was served a config that is not the one `create` wrote: Ignition refuses it and the
    // machine stops in the initramfs, so it never reports. (It booted with the others: by now it
    // has long reached the point it stops at.)
    wait_for("master-1's refusal", 300, || {
        String::from_utf8_lossy(&std::fs::read(serial(bad)).unwrap_or_default()).contains("hash verification failed")
    });
    assert!(stored(dir, &bad.name).is_empty());
    assert!(!rows.iter().any(|r| r["node"] == bad.name.as_str()), "{status}");
    // `status` has no row for a node that never reported; `diagnose` names it.
    let (_, diag) = run(env!("CARGO_BIN_EXE_hardshift"), &["diagnose", &bad.name, "--dir", &s(dir)]);
    assert!(diag.contains(&format!("no reports from \"{}\"", bad.name)), "{diag}");
    phase(&mut t, "refused config");
    eprintln!("boot: total {:.0?}", total.elapsed());
}

/// What Ignition was to do on node `n`, checked on the machine over SSH.
fn check_node(net: &Netns, key: &Path, n: &Node, cfg: &serde_json::Value) {
    let sh = |cmd: &str| {
        let (ok, out) = ssh(net, key, &n.ip, cmd);
        assert!(ok, "{}: {cmd}: {out}", n.name);
        out
    };
    assert_eq!(sh("cat /etc/hostname").trim(), n.name);
    // The keyfile's static address, on the interface with the node's MAC, from the keyfile's
    // connection (not the initramfs's DHCP or ip= one).
    let iface = sh(&format!("grep -l -x {} /sys/class/net/*/address", n.mac.to_lowercase()));
    let iface = iface
        .trim()
        .trim_start_matches("/sys/class/net/")
        .trim_end_matches("/address")
        .to_string();
    let addrs = sh(&format!("ip -4 -o addr show dev {iface}"));
    assert!(addrs.contains(&format!(" {}/24 ", n.ip)), "{}: {addrs}", n.name);
    let conn = sh(&format!("nmcli -g GENERAL.CONNECTION device show {iface}"));
    eprintln!("boot: {} {iface} {} via connection {:?}", n.name, n.ip, conn.trim());
    assert_eq!(
        conn.trim(),
        iface,
        "{}: the bundle's keyfile names its connection after the interface",
        n.name
    );

    // Every file and directory of the config: mode, owner, group (and a file's content).
    let files = cfg["storage"]["files"].as_array().unwrap();
    let dirs: Vec<&serde_json::Value> = cfg["storage"]["directories"].as_array().into_iter().flatten().collect();
    let owned = |e: &serde_json::Value| {
        let p = e["path"].as_str().unwrap();
        let (u, g) = (e["user"]["name"].as_str(), e["group"]["name"].as_str());
        format!(
            "{p} {:o} {} {}",
            e["mode"].as_u64().unwrap(),
            u.unwrap_or("root"),
            g.unwrap_or("root")
        )
    };
    let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    let all: Vec<&str> = paths
        .iter()
        .copied()
        .chain(dirs.iter().map(|d| d["path"].as_str().unwrap()))
        .collect();
    let stat = sh(&format!("sudo stat -c '%n %a %U %G' {}", all.join(" ")));
    let sums = sh(&format!("sudo sha256sum {}", paths.join(" ")));
    for e in files.iter().chain(dirs.iter().copied()) {
        let want = owned(e);
        assert!(stat.lines().any(|l| l == want), "{}: want {want}, have:\n{stat}", n.name);
    }
    for f in files {
        let p = f["path"].as_str().unwrap();
        let sum = hex(&Sha256::digest(contents(&f["contents"])));
        assert!(sums.lines().any(|l| l == format!("{sum}  {p}")), "{}: {p} differs", n.name);
    }
    eprintln!(
        "boot: {}: {} files, {} directories as the config says",
        n.name,
        files.len(),
        dirs.len()
    );

    // Units: the enabled ones are, the agent runs.
    let units: Vec<&str> = cfg["systemd"]["units"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["enabled"] == true)
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert!(units.contains(&"hardshift-agent.service"), "{units:?}");
    let enabled = sh(&format!("systemctl is-enabled {} || true", units.join(" ")));
    assert_eq!(
        enabled.lines().collect::<Vec<_>>(),
        vec!["enabled"; units.len()],
        "{}: {units:?}",
        n.name
    );
    assert_eq!(sh("systemctl is-active hardshift-agent || true").trim(), "active", "{}", n.name);
    // What failed on the machine, said (the bundle's kubelet and bootkube have no programs here).
    eprintln!(
        "boot: {} failed units: {}",
        n.name,
        sh("systemctl list-units --failed --plain --no-legend | cut -d' ' -f1 | tr '\\n' ' '").trim()
    );
    eprintln!(
        "boot: {} kubelet.service: {}",
        n.name,
        sh("systemctl is-active kubelet || true").trim()
    );
}
