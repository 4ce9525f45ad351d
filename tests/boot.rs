//! A real boot of a bundle through its own lab (hardshift-boot-lab: the generated dnsmasq DHCP
//! and DNS, HAProxy, the HTTP server and `hardshift collector` on a bridge in network namespaces):
//! VMs PXE-boot under QEMU, the real Ignition applies their generated configs, and their agents
//! report. Then the faults a real lab has: a config that is not the one `create` wrote, a MAC the
//! inventory has wrong, a name missing from the lab's DNS, the collector down while nodes boot.
//!
//! The machine is not RHCOS (no registry reachable here ships it): hack/boot-image.sh builds a
//! Debian 12 kernel, a dracut initramfs with Debian's Ignition 2.14 and a root disk with systemd,
//! NetworkManager and sshd. What differs from a real RHCOS PXE boot: no coreos-installer (the
//! disk is already there, so the live rootfs image is not fetched and Ignition runs on the disk's
//! first boot instead of the installed system's), no rpm-ostree, no SELinux, no kubelet or CRI-O
//! binaries; Ignition 2.14 accepts config spec up to 3.3.0 (the bundle writes 3.2.0).

mod common;

use common::*;
use hardshift_boot_lab::lab::{Lab, Machine, Options};
use sha2::{Digest, Sha256, Sha512};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// The two labs run at once (their namespaces are named by their tags): the second boots one
// machine, which alone leaves a core idle, and CI's hour is short. Three machines boot at once
// on two cores; the deadlines below allow for it.

/// The bytes of an Ignition `contents` (a data URL, maybe gzip-compressed), decoded as the
/// generator's own reader does; the test compares them with what the real Ignition wrote.
fn contents(c: &serde_json::Value) -> Vec<u8> {
    let c: hardshift_generator::ignition::Contents = serde_json::from_value(c.clone()).expect("Ignition contents");
    hardshift_generator::ignition::decode(&c).expect("a data URL")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `cmd` on the node at `ip` over SSH. Under load (TCG VMs on a busy machine) sshd can be slow to
/// greet ("Connection timed out during banner exchange"): a failure of ssh itself (exit 255) is
/// tried again, up to 5 times, and only the last try's words are kept; the command's own result
/// is returned as it is. The calls to one node share one connection (ssh's ControlMaster): each
/// new connection costs the emulated machine a key exchange, a signature and a fork of sshd,
/// which took tens of seconds a call under TCG on a busy machine.
fn ssh(lab: &Lab, key: &Path, ip: &str, cmd: &str) -> (bool, String) {
    const RETRY: &str = r#"err=$(mktemp)
for i in 1 2 3 4 5; do
  ssh "$@" 2>"$err"; rc=$?
  [ $rc -ne 255 ] && break
  sleep 2
done
cat "$err" >&2; rm -f "$err"; exit $rc"#;
    let target = format!("core@{ip}");
    let key = key.to_str().unwrap();
    let opts = [
        "BatchMode=yes",
        "StrictHostKeyChecking=no",
        "UserKnownHostsFile=/dev/null",
        "LogLevel=ERROR",
        "ConnectTimeout=15",
        "ControlMaster=auto",
        "ControlPersist=30",
    ];
    // Per lab (two labs may give the same address to different machines); a socket path is
    // limited to 107 bytes, and %C is 40.
    let control = format!("ControlPath={}/ssh-%C", lab.work.display());
    assert!(control.len() < 100, "{control}: too long for a socket path");
    let mut args = vec!["-c", RETRY, "ssh", "-i", key, "-o", &control];
    for o in &opts {
        args.extend(["-o", o]);
    }
    args.extend([target.as_str(), cmd]);
    lab.exec("sh", &args)
}

fn phase(start: &mut Instant, what: &str) {
    eprintln!("boot: {what}: {:.0?}", start.elapsed());
    *start = Instant::now();
}

/// The machine image, built or reused (keyed by its packages' versions).
fn image() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/boot-image.sh");
    let out = Command::new(&script).stderr(Stdio::inherit()).output().unwrap();
    assert!(out.status.success(), "hack/boot-image.sh failed");
    PathBuf::from(text(&out.stdout).trim().lines().last().unwrap())
}

/// The example bundle with the test's own SSH key for core, created with `extra` flags. Its nodes
/// boot the image with their configs directly (`lab.liveAgent: false`): the live install has its
/// own test (`the_live_agent_installs_and_names_each_stage`).
fn bundle(extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let d = example_copy();
    edit(d.path(), "hardshift.yaml", "lab:\n", "lab:\n  liveAgent: false\n");
    bundle_of(d, extra)
}

/// As `bundle`, from the inputs in `d`.
fn bundle_of(d: tempfile::TempDir, extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
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
    create(dir, extra);
    (d, key)
}

fn lab(dir: &Path, image: &Path, tag: &str, drop_dns: &[&str], faults: &[&str], collector: bool, web: Option<u16>) -> Lab {
    let work = dir.join("run");
    std::fs::create_dir_all(&work).unwrap();
    let lab = Lab::start(Options {
        dir: dir.to_path_buf(),
        image: image.to_path_buf(),
        hardshift: env!("CARGO_BIN_EXE_hardshift").into(),
        work,
        tag: tag.into(),
        drop_dns: drop_dns.iter().map(|s| s.to_string()).collect(),
        faults: faults.iter().map(|f| f.parse().unwrap()).collect(),
        collector,
        web,
    })
    .expect("the lab starts");
    eprintln!("boot: accelerator {}", lab.accel);
    lab
}

fn hs(args: &[&str]) -> (bool, String) {
    run(env!("CARGO_BIN_EXE_hardshift"), args)
}

/// `hardshift diagnose NODE` again every second until `done` holds of what it says or `limit`
/// passes: what it said last.
fn diagnose_until(dir: &str, node: &str, limit: Duration, done: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let (_, diag) = hs(&["diagnose", node, "--dir", dir]);
        if done(&diag) || start.elapsed() > limit {
            return diag;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// `hardshift status -o json`: one object per node.
/// The rule ids `hardshift diagnose` names for `node`, in its order (worst first, causes
/// before consequences).
fn ids(diag: &str, node: &str) -> Vec<String> {
    let prefix = format!("{node} HS");
    diag.lines()
        .filter_map(|l| Some(format!("HS{}", l.strip_prefix(&prefix)?.split(' ').next()?)))
        .collect()
}

/// What `hardshift diagnose` says under rule `id` for `node`: its line and those after it, up to
/// the next rule's.
fn finding(diag: &str, node: &str, id: &str) -> Option<String> {
    let head = format!("{node} {id}");
    let mut lines = diag.lines().skip_while(|l| !l.starts_with(&head));
    let first = lines.next()?;
    let rest: Vec<&str> = lines.take_while(|l| !l.starts_with(&format!("{node} HS"))).collect();
    Some(std::iter::once(first).chain(rest).collect::<Vec<_>>().join("\n"))
}

fn status_rows(dir: &Path) -> Vec<serde_json::Value> {
    let (ok, status) = hs(&["status", "--dir", dir.to_str().unwrap(), "-o", "json"]);
    assert!(ok, "{status}");
    serde_json::from_str(&status).unwrap_or_else(|e| panic!("{e}: {status}"))
}

fn row<'a>(rows: &'a [serde_json::Value], node: &str) -> &'a serde_json::Value {
    rows.iter()
        .find(|r| r["node"] == node)
        .unwrap_or_else(|| panic!("{node} not in status: {rows:?}"))
}

#[test]
fn bundle_boots_and_reports() {
    let mut t = Instant::now();
    let total = Instant::now();
    let image = image();
    phase(&mut t, "image");
    let (d, key) = bundle(&[]);
    let dir = d.path();
    let s = dir.to_str().unwrap();
    phase(&mut t, "create");

    let mut lab = lab(dir, &image, "bt", &[], &["dns-wildcard", "mtu:bootstrap"], true, Some(9090));
    let good = ["bootstrap", "master-0"];
    let bad = "master-1";
    // master-1 is served its config with one byte added after `create`: the same JSON, so only
    // Ignition's hash check can tell. What it is served merges that file pinned by the SHA-512 of
    // the one `create` wrote, as coreos-installer's --ignition-hash pins it on a real install
    // (lab/scripts/coreos-installer.sh).
    let written = std::fs::read(dir.join(format!("ignition/{bad}.ign"))).unwrap();
    let mut tampered = written.clone();
    tampered.push(b'\n');
    std::fs::write(lab.www.join(format!("http/{bad}-written.ign")), &tampered).unwrap();
    let pin = serde_json::json!({"ignition": {"version": "3.2.0", "config": {"merge": [{
        "source": format!("http://{}:8080/{bad}-written.ign", lab.helper),
        "verification": {"hash": format!("sha512-{}", hex(&Sha512::digest(&written)))}}]}}});
    std::fs::write(lab.www.join(format!("ignition/{bad}.ign")), pin.to_string()).unwrap();
    for n in good.iter().chain([&bad]) {
        lab.boot(n, None).unwrap();
    }
    // The generated HAProxy took its config and listens for the API and the machine-config server.
    let (ok, listening) = lab.exec("ss", &["-ltnH"]);
    assert!(
        ok && [":6443 ", ":22623 ", ":443 "].iter().all(|p| listening.contains(p)),
        "{listening}\n{}",
        lab.tails()
    );
    phase(&mut t, "lab up");

    // Booted: the collector stored the agent's reports, sshd answers, and master-1 stopped. A boot that ends in
    // the emergency shell fails at once, with its console.
    let done = lab.wait_until(Duration::from_secs(900), |lab| {
        for n in good {
            assert!(lab.vm(n).seen.failed.is_none(), "{n} failed to boot\n{}", lab.tails());
        }
        lab.vm(bad).seen.failed.is_some()
            && good
                .iter()
                .all(|n| lab.vm(n).seen.report.is_some() && ssh(lab, &key, &lab.machine(n).unwrap().ip, "true").0)
    });
    assert!(done, "not booted\n{}", lab.tails());
    // master-0's disk is not throttled (lab 2 throttles master-2's): its etcd directory appears
    // as etcd's static pod would make it, and the agent measures it within a minute. Printed at
    // the end, not judged: an emulated machine's fdatasync is not a datacenter's.
    ssh(&lab, &key, &lab.machine("master-0").unwrap().ip, "sudo mkdir -p /var/lib/etcd");
    let config =
        |n: &str| -> serde_json::Value { serde_json::from_slice(&std::fs::read(dir.join(format!("ignition/{n}.ign"))).unwrap()).unwrap() };
    for n in good {
        let seen = &lab.vm(n).seen;
        eprintln!("boot: {n}: {seen:?}");
        // Every step was seen, in order: a lease from the generated reservation, the config
        // fetched, Ignition's stages complete, then the agent's report.
        let (l, f, i, r) = (
            seen.lease.unwrap(),
            seen.fetched.unwrap(),
            seen.ignition_done.unwrap(),
            seen.report.unwrap(),
        );
        assert!(l <= f && f <= i && i <= r, "{n}: {seen:?}");
    }
    phase(&mut t, "boot to reports");

    for n in good {
        check_node(&lab, &key, lab.machine(n).unwrap(), &config(n));
    }
    phase(&mut t, "checks over ssh");

    // The collector's view: both nodes with the boot and addresses the machine has, their agent's
    // journal, and master-1 named as a node that never reported.
    let rows = status_rows(dir);
    for n in good {
        let m = lab.machine(n).unwrap();
        let row = row(&rows, n);
        assert_eq!(row["reported"], true, "{row}");
        assert_eq!(row["hostname"], n, "{row}");
        assert!(row["uptime_s"].as_u64().unwrap() > 0, "{row}");
        let (_, boot_id) = ssh(&lab, &key, &m.ip, "cat /proc/sys/kernel/random/boot_id");
        assert_eq!(row["boot_id"].as_str(), Some(boot_id.trim()), "{n}");
        assert!(
            row["addresses"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a.as_str().unwrap().starts_with(&m.ip)),
            "{row}"
        );
        // No kubelet or CRI-O on this image: the agent must say so, not call it healthy.
        let kubelet = row["components"].as_array().unwrap().iter().find(|c| c["name"] == "kubelet");
        let kubelet = kubelet.unwrap_or_else(|| panic!("no kubelet component for {n}: {row}"));
        eprintln!("boot: {n} kubelet as reported: {kubelet}");
        assert_ne!(kubelet["health"], "ok", "{kubelet}");
        assert!(row["kubelet"] != "ok", "{row}");
    }
    // The kubelet's and CRI-O's programs are not on this machine: a real systemd says so
    // (status 203/EXEC, unit not found) and diagnose names it, rather than blame the config. The
    // kubelet's unit restarts forever (RestartSec), so a report can catch it between two tries:
    // the test waits for a report that shows the failure (the agent reports each change of the
    // unit's state), up to a deadline, rather than judge one snapshot.
    let diag = diagnose_until(s, "master-0", Duration::from_secs(300), |d| {
        d.contains("HS020") && d.contains("203/EXEC") && d.contains("HS022")
    });
    assert!(diag.contains("HS020") && diag.contains("203/EXEC"), "{diag}");
    assert!(diag.contains("HS022") && diag.contains("crio.service is not installed"), "{diag}");
    // What a real VM meets, named from the machine itself: the lab's DNS answers every name
    // under the cluster (--fault dns-wildcard); the image runs no NTP client; its disk is the
    // image's 2 GiB. master-0 has its PTR record: no HS108.
    let rules = ["HS107", "HS104", "HS120"];
    let diag = diagnose_until(s, "master-0", Duration::from_secs(120), |d| rules.iter().all(|r| d.contains(r)));
    eprintln!("boot: diagnose master-0:\n{diag}");
    assert!(diag.contains("HS107") && diag.contains("wildcard"), "{diag}");
    assert!(diag.contains("HS104") && diag.contains("NTP"), "{diag}");
    assert!(diag.contains("HS120") && diag.contains("at least 100 GB"), "{diag}");
    assert!(!diag.contains("HS108"), "{diag}");
    assert_eq!(ids(&diag, "master-0")[0], "HS107", "the lab's fault first: {diag}");
    // The bootstrap's NIC is set for jumbo frames on the lab's 1500-byte bridge (--fault
    // mtu:bootstrap): its don't-fragment echo of 9000 bytes to master-0, the one peer up, is lost
    // while small ones answer. (master-0 measures only the other masters and the workers, none
    // of which answers here: not measured, no finding.)
    let diag = diagnose_until(s, "bootstrap", Duration::from_secs(120), |d| d.contains("HS106"));
    eprintln!("boot: diagnose bootstrap:\n{diag}");
    assert!(
        diag.contains("HS106") && diag.contains("9000-byte") && diag.contains("master-0"),
        "{diag}"
    );
    let (_, diag) = hs(&["diagnose", "master-0", "--dir", s]);
    assert!(!diag.contains("HS106"), "{diag}");
    // Latency between the nodes, made in the bootstrap's own kernel (this host's has no netem;
    // Debian's has): a prio qdisc whose third band, where only master-0's address goes, delays by
    // 250 ms. The bootstrap measures master-0 as a master does: over 100 ms fails (HS105). No loss
    // here: on the same path it also takes the small echoes the MTU verdict (HS106) needs (a run
    // with a third lost missed HS106 in a report); loss is judged by the same code, on recorded
    // samples.
    let boot_ip = lab.machine("bootstrap").unwrap().ip.clone();
    let m0_ip = lab.machine("master-0").unwrap().ip.clone();
    let (ok, out) = ssh(
        &lab,
        &key,
        &boot_ip,
        &format!(
            "sudo sh -c 'set -e; modprobe sch_netem; dev=$(ip -o route get {m0_ip} | sed -n \"s/.* dev \\([^ ]*\\).*/\\1/p\"); \
             tc qdisc add dev $dev root handle 1: prio; tc qdisc add dev $dev parent 1:3 handle 30: netem delay 250ms; \
             tc filter add dev $dev parent 1: protocol ip u32 match ip dst {m0_ip}/32 flowid 1:3; tc qdisc show dev $dev'"
        ),
    );
    assert!(ok && out.contains("netem"), "{out}");
    let netem = Instant::now();
    // Waited for as asserted: HS105 naming master-0's round trip (under load it may first fire
    // for an echo lost to another peer) and the three faults leading.
    let latency_named = |d: &str| {
        finding(d, "bootstrap", "HS105").is_some_and(|f| f.contains("master-0") && f.contains("ms round trip"))
            && ids(d, "bootstrap").get(..3) == Some(&["HS106".to_string(), "HS105".into(), "HS107".into()][..])
    };
    let diag = diagnose_until(s, "bootstrap", Duration::from_secs(300), latency_named);
    eprintln!("boot: latency named {:.0?} after netem:\n{diag}", netem.elapsed());
    assert!(latency_named(&diag), "{diag}");
    // Named first: the lab's three faults on the bootstrap (its MTU, the latency, the wildcard)
    // lead its findings, before all that this image lacks (kubelet, CRI-O, etcd, a big disk).
    assert_eq!(ids(&diag, "bootstrap")[..3], ["HS106", "HS105", "HS107"], "{diag}");
    let (ok, table) = hs(&["status", "--dir", s]);
    assert!(ok, "{table}");
    eprintln!("boot: hardshift status:\n{table}");
    assert!(table.lines().any(|l| l.starts_with(bad) && l.contains("NEVER REPORTED")), "{table}");
    // The dashboard's rows come from the same reports: a row per booted node with its boot, and
    // master-1 still waiting for its first report.
    let (ok, view) = lab.web_get("/api/view.json");
    assert!(ok, "{view}");
    let view: serde_json::Value = serde_json::from_str(&view).unwrap();
    let node_view = |n: &str| {
        view["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} not on the dashboard: {view}"))
    };
    for n in good {
        let v = node_view(n);
        assert!(v["reports"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(v["boot_id"], row(&rows, n)["boot_id"], "{v}");
        assert_ne!(v["health"], "ok", "no kubelet here: {v}");
    }
    // What the helper saw last of it stands in its row.
    let shown = node_view(bad)["phase"].as_str().unwrap_or_default().to_string();
    assert!(shown.starts_with("boot: http GET /"), "{shown}");
    let etcd_disk = row(&status_rows(dir), "master-0")["components"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "etcd-disk").cloned());
    eprintln!("boot: master-0's etcd disk, unthrottled: {etcd_disk:?}");
    let (ok, page) = lab.web_get("/");
    assert!(
        ok && good.iter().chain([&bad]).all(|n| page.contains(&format!("data-node=\"{n}\""))),
        "{page}"
    );
    let (ok, logs) = hs(&["logs", "--dir", s, "master-0", "hardshift-agent", "-n", "20"]);
    assert!(ok, "{logs}");
    assert!(logs.lines().count() > 0 && logs.contains("hardshift-agent"), "{logs}");
    phase(&mut t, "collector views");

    // master-1 was served a config that is not the one `create` wrote: Ignition refused it and
    // the machine stopped in the initramfs, so it never reports.
    let vm = lab.vm(bad);
    assert!(
        vm.seen.failed.as_deref().unwrap().contains("hash verification failed"),
        "{:?}",
        vm.seen
    );
    assert!(lab.last_seen(vm).starts_with("Ignition failed"), "{}", lab.last_seen(vm));
    // Stuck for good, it was powered off rather than left spinning beside the others.
    assert!(vm.halted, "{bad} still runs");
    assert!(stored(dir, bad).is_empty());
    assert_eq!(row(&status_rows(dir), bad)["reported"], false);
    // The helper saw it fetch its config: HS009 (the config reached it, its first boot stopped in
    // Ignition), with the hash named as the likely cause.
    let (_, diag) = hs(&["diagnose", bad, "--dir", s]);
    assert!(
        diag.contains(&format!("{bad} HS009")) && diag.contains("hash verification failed"),
        "{diag}"
    );
    phase(&mut t, "refused config");
    eprintln!("boot: total {:.0?}", total.elapsed());
}

/// The faults of a real lab, on one boot: master-2 fetches its agent from the helper
/// (`--agent-url`, pinned by SHA-512), boots while the collector is down, and resolves through a
/// DNS that lacks api-int; worker-0's VM has a MAC the inventory does not list.
#[test]
fn faults_a_real_lab_has() {
    let image = image();
    let url = "http://192.168.126.1:8080/hardshift-agent";
    let (d, key) = bundle(&["--agent-url", url]);
    let dir = d.path();
    let s = dir.to_str().unwrap();
    let cfg: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("ignition/master-2.ign")).unwrap()).unwrap();
    let agent = cfg["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/usr/local/bin/hardshift-agent")
        .expect("the agent in master-2.ign");
    assert_eq!(agent["contents"]["source"], url, "{agent}");
    let served = std::fs::read(dir.join("http/hardshift-agent")).unwrap();
    assert_eq!(
        agent["contents"]["verification"]["hash"],
        format!("sha512-{}", hex(&Sha512::digest(&served))).as_str()
    );

    let api_int = "api-int.ocp4.example.com";
    let mut lab = lab(
        dir,
        &image,
        "bf",
        &[api_int],
        &["slow-disk:master-2", "no-ptr:master-2"],
        false,
        None,
    );
    let wrong_mac = "52:54:00:00:0e:ee";
    lab.boot("master-2", None).unwrap();
    lab.boot("worker-0", Some(wrong_mac)).unwrap();

    // master-2 boots and its agent runs, with nowhere to report yet.
    let m2 = lab.machine("master-2").unwrap().ip.clone();
    let up = lab.wait_until(Duration::from_secs(900), |lab| {
        assert!(lab.vm("master-2").seen.failed.is_none(), "master-2 failed\n{}", lab.tails());
        lab.vm("master-2").seen.ignition_done.is_some() && ssh(lab, &key, &m2, "systemctl is-active hardshift-agent").0
    });
    assert!(up, "master-2 did not come up\n{}", lab.tails());
    // master-2's disk takes 25 writes a second (--fault slow-disk:master-2); its etcd directory
    // appears as etcd's static pod would make it, and the agent measures it within a minute.
    let (ok, out) = ssh(&lab, &key, &m2, "sudo mkdir -p /var/lib/etcd");
    assert!(ok, "{out}");
    let etcd_dir = Instant::now();
    // The helper's own record of the agent's download (a boot event in the collector's store,
    // there before the collector runs).
    let events = hardshift_collector::store::Store::read(&dir.join("collector/reports.db"))
        .and_then(|s| s.boot_events(None))
        .unwrap_or_default();
    assert!(
        events
            .iter()
            .any(|e| e.step == hardshift_collector::boot::Step::Http && e.detail.starts_with("GET /hardshift-agent 200 ")),
        "Ignition never fetched the agent:\n{events:?}"
    );
    // Long enough for reports to queue: the agent reports every few seconds.
    std::thread::sleep(Duration::from_secs(20));
    assert!(stored(dir, "master-2").is_empty());
    let collector_start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    lab.start_collector();

    // The reports made while the collector was down arrive, none lost: from seq 1, no gap, the
    // first one made before the collector started.
    // The deadline is master-2's own progress (its QEMU's CPU time): a fixed 300 s ran out on a
    // machine loaded to 8-14, the guest's kernel too starved to go on (its console showed a
    // stalled task), not stuck.
    let reported = lab.wait_until_progress("master-2", Duration::from_secs(150), Duration::from_secs(1200), |lab| {
        lab.vm("master-2").seen.report.is_some()
    });
    assert!(reported, "no report from master-2\n{}", lab.tails());
    wait_for("master-2's DNS findings", 120, || {
        let (_, diag) = hs(&["diagnose", "master-2", "--dir", s]);
        diag.contains("HS071") && diag.contains("HS108")
    });
    let seqs = stored(dir, "master-2");
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "seqs from 1 without a gap");
    let db = hardshift_collector::store::Store::open(&dir.join("collector/reports.db")).unwrap();
    let reports = db.reports("master-2").unwrap();
    let first = &reports.first().unwrap().1;
    assert!(
        first.time_ms < collector_start,
        "the first report ({}) was made before the collector started ({collector_start})",
        first.time_ms
    );
    assert_eq!(first.dropped_before, 0);

    // The lab's DNS has no api-int: a real node says so, and diagnose names it.
    let (_, diag) = hs(&["diagnose", "master-2", "--dir", s]);
    eprintln!("boot: diagnose master-2:\n{diag}");
    assert!(diag.contains("HS071") && diag.contains(api_int), "{diag}");
    // Its address resolves to no name (--fault no-ptr:master-2: no PTR in the zone, no name on
    // its lease): HS108.
    assert!(diag.contains("HS108") && diag.contains("192.168.126.103"), "{diag}");
    // This lab's DNS has no wildcard: no HS107.
    assert!(!diag.contains("HS107"), "{diag}");
    assert!(
        !diag.contains("HS117") && !diag.contains("HS116") && !diag.contains("HS102"),
        "{diag}"
    );

    // The kernel's own problems, made real on master-2: its memory cgroup's OOM killer kills a
    // process, and a filesystem meets an error and goes read-only (errors=remount-ro; ext4's
    // trigger_fs_error raises a real ext4_error). Each is named from the kernel's journal.
    // systemd-run fails: its unit was killed, which is the point.
    ssh(
        &lab,
        &key,
        &m2,
        "sudo systemd-run --wait --quiet -p MemoryMax=16M -p MemorySwapMax=0 tail /dev/zero",
    );
    let (ok, out) = ssh(
        &lab,
        &key,
        &m2,
        "sudo sh -c 'set -e; truncate -s 32M /root/fault.img; mkfs.ext4 -q /root/fault.img; mkdir -p /mnt/fault; \
         mount -o loop,errors=remount-ro /root/fault.img /mnt/fault; \
         echo hardshift-boot-test > /sys/fs/ext4/$(basename $(findmnt -no SOURCE /mnt/fault))/trigger_fs_error; \
         touch /mnt/fault/written 2>&1 || true'",
    );
    // The superblock went read-only (the mount's own flags still say rw): writes are refused.
    assert!(
        ok && out.contains("Read-only file system"),
        "the filesystem did not go read-only: {out}"
    );
    // And its default route goes (the lab's collector and DNS are on its own subnet: it still
    // reports).
    let (ok, out) = ssh(&lab, &key, &m2, "sudo ip route del default && ip route");
    assert!(ok && !out.contains("default"), "{out}");
    let faulted = Instant::now();
    // A wait, not a measure: under TCG beside the other tests a report can take minutes (a run
    // at load 8 did not see the kernel's lines in 120 s); the time is printed below.
    let made = ["HS117", "HS115", "HS102"];
    let diag = diagnose_until(s, "master-2", Duration::from_secs(300), |d| made.iter().all(|r| d.contains(r)));
    eprintln!(
        "boot: master-2's faults named {:.0?} after the last was made:\n{diag}",
        faulted.elapsed()
    );
    assert!(diag.contains("HS102") && diag.contains("default route"), "{diag}");
    // Named first: the lab's and the test's critical faults (its DNS, the route, the filesystem)
    // lead, before what this image lacks; the OOM kill and the slow disk are warnings.
    assert_eq!(ids(&diag, "master-2")[..3], ["HS071", "HS102", "HS115"], "{diag}");
    assert!(diag.contains("HS117") && diag.contains("tail"), "{diag}");
    assert!(diag.contains("HS115") && diag.contains("EXT4-fs error"), "{diag}");
    // The read-only remount was seen too (HS116), and is shown as what it is here: the
    // filesystem error's consequence, which HS115 explains.
    assert!(!diag.contains("HS116"), "{diag}");
    // The throttled disk, measured as etcd writes its WAL: HS051 with the numbers.
    let diag = diagnose_until(s, "master-2", Duration::from_secs(120), |d| d.contains("HS051"));
    eprintln!(
        "boot: slow disk seen within {:.0?} of etcd's directory appearing:\n{diag}",
        etcd_dir.elapsed()
    );
    assert!(diag.contains("HS051") && diag.contains("fdatasync p99"), "{diag}");
    // An emulated disk's tail is slow anyway (master-0's, unthrottled, had a p99 of 74 ms but a
    // p50 of 2.5 ms under TCG), so the fault is judged by its median: at 25 writes a second, each
    // fdatasync waits for at least one write slot, 40 ms.
    let rows = status_rows(dir);
    let disk = row(&rows, "master-2")["components"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "etcd-disk").cloned())
        .unwrap_or_default();
    let p50: f64 = disk["details"]["p50_ms"].as_str().and_then(|v| v.parse().ok()).unwrap_or(0.0);
    assert!(p50 >= 40.0, "the throttled disk's median fdatasync: {disk}");
    let kernel = row(&rows, "master-2")["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "kernel")
        .cloned()
        .unwrap_or_default();
    assert!(
        kernel["details"]["read-only"]
            .as_str()
            .is_some_and(|d| d.contains("Remounting filesystem read-only")),
        "{kernel}"
    );

    // A reboot loop, made on master-2: three resets with no clean shutdown (as a panic or a
    // watchdog reboots), each waited for until its agent reports from the new boot (the VM boots
    // through the lab again: iPXE, DHCP, Ignition). The fourth boot within 30 minutes is a loop
    // (HS119), named from the agent's own boot history on the node's disk.
    let boot_now = |dir: &Path| {
        hardshift_collector::store::Store::open(&dir.join("collector/reports.db"))
            .ok()
            .and_then(|db| db.boot_of("master-2").ok().flatten())
    };
    for n in 1..=3 {
        let before = boot_now(dir);
        let t = Instant::now();
        // In two seconds, so the SSH session ends first (ssh() retries a dropped connection).
        let (ok, out) = ssh(
            &lab,
            &key,
            &m2,
            "sudo systemd-run --quiet --on-active=2 systemctl reboot --force --force",
        );
        assert!(ok, "reset {n}: {out}");
        // Waited for by the VM's own progress (its QEMU's CPU time), not the wall clock: a
        // machine loaded by a parallel build gives an emulated boot a fraction of a core.
        let back = lab.wait_until_progress("master-2", Duration::from_secs(400), Duration::from_secs(1800), |_| {
            boot_now(dir) != before
        });
        assert!(back, "master-2 did not report from a new boot after reset {n}\n{}", lab.tails());
        eprintln!("boot: master-2 reset {n}: reporting from its new boot {:.0?} later", t.elapsed());
    }
    let diag = diagnose_until(s, "master-2", Duration::from_secs(120), |d| d.contains("HS119"));
    eprintln!("boot: diagnose master-2 after three resets:\n{diag}");
    assert!(diag.contains("HS119") && diag.contains("boots within 30 minutes"), "{diag}");

    // worker-0's VM asked for an address the lab's DHCP has no reservation for: no lease, no
    // config, no report, and the boot lab says why.
    let vm = lab.vm("worker-0");
    assert!(
        vm.seen.unserved && vm.seen.lease.is_none() && vm.seen.fetched.is_none(),
        "{:?}\n{}",
        vm.seen,
        lab.tails()
    );
    let said = lab.last_seen(vm);
    assert!(
        said.starts_with("no DHCP") && said.contains(wrong_mac) && said.contains("52:54:00:00:00:6e"),
        "{said}"
    );
    assert!(stored(dir, "worker-0").is_empty());
    assert!(vm.halted, "worker-0 still spins in iPXE's DHCP retries");
    assert_eq!(row(&status_rows(dir), "worker-0")["reported"], false);
    // diagnose names the typo from what the helper saw: a machine of worker-0's vendor, not in
    // the inventory, asked for DHCP, and worker-0's own MAC never did.
    let (_, diag) = hs(&["diagnose", "worker-0", "--dir", s]);
    assert!(diag.contains("worker-0 HS004") && diag.contains(wrong_mac), "{diag}");
}

/// What Ignition was to do on node `n`, checked on the machine over SSH.
fn check_node(lab: &Lab, key: &Path, n: &Machine, cfg: &serde_json::Value) {
    let sh = |cmd: &str| {
        let (ok, out) = ssh(lab, key, &n.ip, cmd);
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
    // Where an emulated boot's time goes (CI's budget rests on it).
    eprintln!(
        "boot: {} slowest units:\n{}",
        n.name,
        sh("systemd-analyze blame --no-pager 2>&1 | head -n 12 || true")
    );
    eprintln!(
        "boot: {} kubelet.service: {}",
        n.name,
        sh("systemctl is-active kubelet || true").trim()
    );
}

/// A single node (issue 40) boots through the lab into its live system from its one config (no
/// bootstrap host, no VIPs: api and *.apps are the node's own address), its agent reports under
/// the node's name as a master, and its install-to-disk step judges the installation disk first:
/// this VM's /dev/vda holds 2 GB, under OpenShift's 120, so it stops there and `diagnose` names
/// HS090 with the step's own words. (On RHCOS with a disk that size and more, the step waits for
/// bootkube, then writes the disk with coreos-installer, which Debian's image does not have.)
#[test]
fn a_single_node_boots_its_live_system_and_reports() {
    let total = Instant::now();
    let image = image();
    let d = single_node(example_copy());
    edit(
        d.path(),
        "install-config.yaml",
        "/dev/disk/by-id/wwn-0x64cd98f04fde100024684cf3034da5c2",
        "/dev/vda",
    );
    let (d, key) = bundle_of(d, &[]);
    let dir = d.path();
    let s = dir.to_str().unwrap();
    let ign: Vec<String> = std::fs::read_dir(dir.join("ignition"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(ign, ["master-0.ign"]);
    let mut lab = lab(dir, &image, "sn", &[], &[], true, None);
    let t = Instant::now();
    lab.boot("master-0", None).unwrap();
    let done = lab.wait_until(Duration::from_secs(600), |lab| {
        assert!(lab.vm("master-0").seen.failed.is_none(), "master-0 failed to boot\n{}", lab.tails());
        lab.vm("master-0").seen.report.is_some()
    });
    assert!(done, "no report\n{}", lab.tails());
    eprintln!("single node: boot to first report {:.0} s", t.elapsed().as_secs_f64());
    let ip = lab.machine("master-0").unwrap().ip.clone();
    let (ok, units) = ssh(
        &lab,
        &key,
        &ip,
        "systemctl is-enabled hardshift-install-to-disk.service bootkube.service hardshift-agent.service",
    );
    assert!(ok, "{units}");
    let diag = diagnose_until(s, "master-0", Duration::from_secs(180), |d| d.contains("HS090"));
    eprintln!("{diag}");
    assert!(ids(&diag, "master-0").contains(&"HS090".to_string()), "{diag}\n{}", lab.tails());
    assert!(
        diag.contains("installation disk /dev/vda holds") && diag.contains("at least 120 GB"),
        "{diag}"
    );
    let (_, rec) = ssh(&lab, &key, &ip, "sudo cat /var/lib/hardshift/in-place.json");
    assert!(rec.contains("\"stage\":\"installation-disk\"") && rec.contains("failed"), "{rec}");
    // Nothing past the disk check ran: etcd's pod is where bootkube would find it.
    let (ok, _) = ssh(
        &lab,
        &key,
        &ip,
        "test -e /etc/kubernetes/manifests/etcd-bootstrap.yaml && ! test -e /opt/openshift/hardshift/etcd-pod.yaml",
    );
    assert!(ok, "install-to-disk went past the disk check");
    let rows = status_rows(dir);
    assert_eq!(row(&rows, "master-0")["role"], "master", "{rows:?}");
    let (_, phase) = hs(&["status", "--dir", s]);
    eprintln!("{phase}");
    eprintln!("single node lab: {:.0} s", total.elapsed().as_secs_f64());
}

/// The live install, on real VMs: each node PXE-boots its live system with its live config
/// (`live/NODE.ign`); the agent there writes the installation disk with the real coreos-installer
/// (built by hack/boot-image.sh) from the image's metal image, reporting each stage, and reboots;
/// the disk's first boot applies the node's config from its boot partition, and its agent reports.
/// And the faults of that stage, each named by `diagnose` with the stage it stopped at: a disk
/// that does not exist (master-1, HS011), a config changed after `create` (master-2: coreos-
/// installer's hash check, HS012), firmware that boots the network again after the install
/// (worker-1, HS015) and firmware that boots its disk and never the network (master-0, HS005).
#[test]
fn the_live_agent_installs_and_names_each_stage() {
    let total = Instant::now();
    let image = image();
    let d = example_copy();
    let base = "http://192.168.126.1:8080";
    edit(
        d.path(),
        "hardshift.yaml",
        "lab:\n",
        &format!("lab:\n  installImageURL: {base}/rhcos/metal.raw.zst\n  installImageUnsigned: true\n"),
    );
    edit(
        d.path(),
        "agent-config.yaml",
        "- hostname: master-1\n  role: master\n",
        "- hostname: master-1\n  role: master\n  rootDeviceHints:\n    deviceName: /dev/disk/by-id/virtio-no-such-disk\n",
    );
    let (d, _key) = bundle_of(d, &[]);
    let dir = d.path();
    let s = dir.to_str().unwrap();
    let live: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("live/worker-0.ign")).unwrap()).unwrap();
    let toml = live["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "/etc/hardshift/agent.toml")
        .map(|f| String::from_utf8(contents(&f["contents"])).unwrap())
        .unwrap();
    let written = std::fs::read(dir.join("ignition/worker-0.ign")).unwrap();
    assert!(
        toml.contains(&format!("config_hash = \"sha256-{}\"", hex(&Sha256::digest(&written)))),
        "{toml}"
    );
    let faults = ["live-again:worker-1", "disk-first:master-0"];
    let mut lab = lab(dir, &image, "lv", &[], &faults, true, None);
    // master-2 is served a config with one byte added after `create`: coreos-installer refuses it
    // by the hash its live config pins.
    let mut tampered = std::fs::read(dir.join("ignition/master-2.ign")).unwrap();
    tampered.push(b'\n');
    std::fs::write(lab.www.join("ignition/master-2.ign"), &tampered).unwrap();
    for n in ["worker-0", "worker-1", "master-1", "master-2", "master-0"] {
        lab.boot(n, None).unwrap();
    }
    let t = Instant::now();
    // worker-0: live system, disk written, rebooted, the installed system's report.
    let done = lab.wait_until(Duration::from_secs(1500), |lab| {
        let vm = lab.vm("worker-0");
        assert!(vm.seen.failed.is_none(), "worker-0 failed to boot\n{}", lab.tails());
        vm.seen.report.is_some()
    });
    assert!(done, "worker-0 did not report from its installed system\n{}", lab.tails());
    let seen = lab.vm("worker-0").seen.clone();
    eprintln!("live: worker-0: {seen:?} ({:.0?} after power-on)", t.elapsed());
    let (l, lr, rb, r) = (
        seen.lease.unwrap(),
        seen.live_report.unwrap(),
        seen.rebooted.unwrap(),
        seen.report.unwrap(),
    );
    assert!(l <= lr && lr <= rb && rb <= r, "{seen:?}");
    let (ok, table) = hs(&["status", "--dir", s]);
    assert!(ok, "{table}");
    eprintln!("live: hardshift status:\n{table}");
    let line = table
        .lines()
        .find(|l| l.starts_with("BOOT worker-0:"))
        .unwrap_or_else(|| panic!("{table}"));
    for step in [
        "boot.ipxe 200",
        "worker-0.ign 200",
        "live agent reported",
        "starting installation",
        "metal.raw.zst 200",
        "writing image to disk 100%",
        "rebooting",
        "agent reported",
    ] {
        assert!(line.contains(step), "{step} not in {line}");
    }
    assert!(
        line.find("live agent reported") < line.rfind("rebooting") && line.rfind("rebooting") < line.rfind(" agent reported"),
        "{line}"
    );
    // Its installed system: the config's own files, from the boot partition through Ignition.
    let rows = status_rows(dir);
    let w0 = row(&rows, "worker-0");
    assert_eq!(w0["reported"], true, "{w0}");
    assert!(
        !w0["components"].as_array().unwrap().iter().any(|c| c["name"] == "live-install"),
        "the installed system's report: {w0}"
    );

    // The faults, each named by its rule.
    let named = |node: &str, id: &str, limit: u64, words: &[&str]| {
        let diag = diagnose_until(s, node, Duration::from_secs(limit), |d| {
            finding(d, node, id).is_some_and(|f| words.iter().all(|w| f.contains(w)))
        });
        eprintln!("live: diagnose {node}:\n{diag}");
        assert!(
            finding(&diag, node, id).is_some_and(|f| words.iter().all(|w| f.contains(w))),
            "{node}: {id} with {words:?}\n{diag}\n{}",
            lab.tails()
        );
    };
    named(
        "master-1",
        "HS011",
        600,
        &["/dev/disk/by-id/virtio-no-such-disk", "this machine's disks: vda"],
    );
    named("master-2", "HS012", 600, &["digest", "hardshift verify"]);
    named("worker-1", "HS015", 900, &["booted its live system again", "rebooting"]);
    named("master-0", "HS005", 60, &["never asked"]);
    eprintln!("live lab: {:.0} s", total.elapsed().as_secs_f64());
}
