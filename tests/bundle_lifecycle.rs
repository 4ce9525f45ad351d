//! Re-running `create`: byte-identical when nothing changed, only the affected leaves re-issued
//! when an input changes, CAs never replaced without `--rotate-ca`; `verify` on good and bad bundles.

mod common;

use sha2::Digest;

use common::*;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn changed(a: &std::collections::BTreeMap<String, Vec<u8>>, b: &std::collections::BTreeMap<String, Vec<u8>>) -> BTreeSet<String> {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).cloned().collect()
}

fn generations(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join(".hardshift"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("gen-"))
        .collect();
    v.sort();
    v
}

#[test]
fn rerun_with_the_same_inputs_is_byte_identical_and_writes_nothing() {
    let d = example_copy();
    create(d.path(), &[]);
    let first = snapshot(d.path());
    let gens = generations(d.path());
    let out = create(d.path(), &[]);
    assert!(
        text(&out.stdout).contains("0 created, 39 reused, 0 re-issued"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stdout).contains("bundle unchanged"), "{}", text(&out.stdout));
    assert_eq!(first, snapshot(d.path()));
    assert_eq!(gens, generations(d.path()));
    // The inputs were neither moved nor changed.
    for f in ["install-config.yaml", "agent-config.yaml", "hardshift.yaml"] {
        assert_eq!(
            std::fs::read(d.path().join(f)).unwrap(),
            std::fs::read(Path::new(EXAMPLE).join(f)).unwrap(),
            "{f}"
        );
    }
}

#[test]
fn changing_a_master_ip_reissues_only_the_leaves_that_name_it() {
    let d = example_copy();
    create(d.path(), &[]);
    let before = snapshot(d.path());
    edit(d.path(), "agent-config.yaml", "- ip: 192.168.126.102", "- ip: 192.168.126.104");
    let out = create(d.path(), &[]);
    let stdout = text(&out.stdout);
    let after = snapshot(d.path());
    // The bootstrap carries the re-issued certificates, master-1 its new address, and every node's
    // agent the new address among the API servers it checks directly (the load balancer probe);
    // no other file changes.
    let want: BTreeSet<String> = [
        "agent-config.yaml",
        "pki/etcd-peer-master-1.crt",
        "pki/etcd-server.crt",
        "ignition/bootstrap.ign",
        "ignition/master-0.ign",
        "ignition/master-1.ign",
        "ignition/master-2.ign",
        "ignition/worker-0.ign",
        "ignition/worker-1.ign",
        "cluster.json",
        "inventory.json",
        "SHA256SUMS",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let all = changed(&before, &after);
    // The lab follows the address too (DNS, DHCP, PXE, HAProxy); nothing else changes.
    assert!(
        all.contains("lab/haproxy/haproxy.cfg") && all.contains("lab/bind/db.ocp4.example.com"),
        "{all:?}"
    );
    // Each live config pins its node's config by its hash: they follow with the lab.
    assert!(all.contains("live/worker-0.ign"), "{all:?}");
    let outside_lab: BTreeSet<String> = all
        .into_iter()
        .filter(|p| !p.starts_with("lab/") && !p.starts_with("live/"))
        .collect();
    assert_eq!(outside_lab, want, "{stdout}");
    assert!(
        stdout.contains("re-issued pki/etcd-peer-master-1: SANs changed (added: [192.168.126.104], removed: [192.168.126.102])"),
        "{stdout}"
    );
    assert!(stdout.contains("0 created, 37 reused, 2 re-issued"), "{stdout}");
    // The new leaves still chain to the unchanged CAs.
    let (ok, out) = run(
        "openssl",
        &[
            "verify",
            "-CAfile",
            pki(d.path(), "root-ca.crt").to_str().unwrap(),
            "-untrusted",
            pki(d.path(), "etcd-ca.crt").to_str().unwrap(),
            pki(d.path(), "etcd-peer-master-1.crt").to_str().unwrap(),
        ],
    );
    assert!(ok, "{out}");
    let (_, sans) = run(
        "openssl",
        &[
            "x509",
            "-noout",
            "-ext",
            "subjectAltName",
            "-in",
            pki(d.path(), "etcd-server.crt").to_str().unwrap(),
        ],
    );
    assert!(
        sans.contains("IP Address:192.168.126.104") && !sans.contains("IP Address:192.168.126.102"),
        "{sans}"
    );
    // The generation before the change is kept as a backup; unchanged files are shared with it
    // (hard links), changed ones are not.
    assert!(d.path().join(".hardshift/previous").exists());
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(pki(d.path(), "root-ca.key")).unwrap().nlink(), 2);
    assert_eq!(std::fs::metadata(pki(d.path(), "etcd-server.crt")).unwrap().nlink(), 1);
    assert_eq!(generations(d.path()).len(), 2);
}

#[test]
fn a_ca_is_never_replaced_silently() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    // Lose the root CA's key: the run must refuse, name the file and say how to proceed.
    let key = std::fs::canonicalize(pki(d.path(), "root-ca.key")).unwrap();
    std::fs::remove_file(&key).unwrap();
    let before = snapshot(d.path());
    let out = hardshift(&["create", "--dir", d.path().to_str().unwrap(), "--self-contained-nodes"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("pki/root-ca: the CA certificate exists but its key is missing"),
        "{err}"
    );
    assert!(err.contains("--rotate-ca"), "{err}");
    assert_eq!(before, snapshot(d.path()), "a refused run must not touch the bundle");

    // A CA swapped for another one is refused too.
    std::fs::write(&key, b"").unwrap();
    let out = hardshift(&["create", "--dir", d.path().to_str().unwrap(), "--self-contained-nodes"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));

    // With --rotate-ca, every CA and every certificate is new.
    let out = create(d.path(), &["--rotate-ca"]);
    let after = snapshot(d.path());
    let stdout = text(&out.stdout);
    assert!(stdout.contains("re-issued pki/root-ca: --rotate-ca"), "{stdout}");
    for (path, bytes) in &before {
        if path.ends_with(".crt") {
            assert_ne!(Some(bytes), after.get(path), "{path} must be re-issued after --rotate-ca");
        }
    }
    let verify = hardshift(&["verify", "--dir", d.path().to_str().unwrap()]);
    assert!(verify.status.success(), "{}", text(&verify.stdout));
}

#[test]
fn a_removed_pki_directory_is_not_silently_replaced_by_new_cas() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let dir = d.path().to_str().unwrap();
    // `rm -rf pki/` through the bundle's link empties the live generation's pki directory.
    let (ok, out) = run("sh", &["-c", &format!("rm -rf {dir}/pki/")]);
    assert!(ok, "{out}");
    assert!(std::fs::read_dir(d.path().join(".hardshift/current/pki")).map_or(true, |mut r| r.next().is_none()));
    let before = snapshot(d.path());
    let out = hardshift(&[
        "create",
        "--dir",
        dir,
        "--key-algorithm",
        "ecdsa-p256",
        "--no-agent",
        "--self-contained-nodes",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("pki/root-ca") && err.contains("pki/etcd-ca") && err.contains("their files are gone"),
        "{err}"
    );
    // One create so far: there is no earlier generation to point at, and the hint says so.
    assert!(!d.path().join(".hardshift/previous").exists());
    assert!(
        !err.contains(".hardshift/previous") && err.contains("your backup") && err.contains("--rotate-ca"),
        "{err}"
    );
    assert_eq!(before, snapshot(d.path()), "a refused run must not touch the bundle");
    // With an earlier generation that still holds the CAs, the hint names it.
    let d3 = example_copy();
    create(d3.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    edit(d3.path(), "agent-config.yaml", "192.168.126.102", "192.168.126.104");
    create(d3.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let dir3 = d3.path().to_str().unwrap();
    let (ok, out) = run("sh", &["-c", &format!("rm -rf {dir3}/pki/")]);
    assert!(ok, "{out}");
    let out = hardshift(&[
        "create",
        "--dir",
        dir3,
        "--key-algorithm",
        "ecdsa-p256",
        "--no-agent",
        "--self-contained-nodes",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(".hardshift/previous, holds them"), "{err}");

    // A CA that is new in the plan (a bundle from before it existed) is simply created: here the
    // sums no longer list the operators' kubelet-signer, as in a bundle of an older version.
    let d2 = example_copy();
    create(d2.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let gen = std::fs::canonicalize(d2.path().join(".hardshift/current")).unwrap();
    for f in ["pki/kubelet-signer.crt", "pki/kubelet-signer.key"] {
        std::fs::remove_file(gen.join(f)).unwrap();
    }
    let sums = std::fs::read_to_string(gen.join("SHA256SUMS")).unwrap();
    let kept: String = sums
        .lines()
        .filter(|l| !l.contains("pki/kubelet-signer."))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(gen.join("SHA256SUMS"), kept).unwrap();
    let out = create(d2.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(text(&out.stdout).contains("1 created"), "{}", text(&out.stdout));
}

#[test]
fn verify_passes_a_good_bundle_and_names_what_is_wrong_in_a_bad_one() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let out = hardshift(&["verify", "--dir", d.path().to_str().unwrap(), "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let crd = checks.as_array().unwrap().iter().filter(|c| c["name"] == "crd").count();
    assert_eq!(
        crd, 12,
        "one check per custom resource bootkube applies (the 99-<role>-ssh MachineConfigs among them)"
    );
    assert_eq!(
        checks.as_array().unwrap().len() - crd,
        1 + 1 + 39 + 9 + 1 + 1 + 1,
        "sums + the sums `sha256sum -c` reads + PKI entries + kubeconfigs + regeneration + agent + crypto"
    );
    let crypto = checks.as_array().unwrap().iter().find(|c| c["name"] == "crypto").unwrap();
    let module = hardshift_crypto::module().name();
    assert_eq!(
        crypto["detail"],
        format!("fips: false; keys and certificates made by {module}"),
        "{crypto}"
    );
    // MachineConfigs are judged by the release's CRDs (`verify --crds`, tests/crds.rs): the CVO
    // installs theirs, the bundle carries none.
    let after_cvo = |c: &serde_json::Value| c["status"] == "warn" && c["subject"].as_str().unwrap().starts_with("MachineConfig/");
    assert!(
        checks.as_array().unwrap().iter().all(|c| c["status"] == "ok" || after_cvo(c)),
        "{checks}"
    );

    // Tamper with a certificate and loosen a key's mode.
    let crt = std::fs::canonicalize(pki(d.path(), "etcd-server.crt")).unwrap();
    let key = std::fs::canonicalize(pki(d.path(), "admin.key")).unwrap();
    std::fs::copy(pki(d.path(), "etcd-client.crt"), &crt).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = hardshift(&["verify", "--dir", d.path().to_str().unwrap()]);
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}");
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row {name}\n{table}"))
            .to_string()
    };
    assert!(row("SHA256SUMS").contains("pki/etcd-server.crt was modified"), "{table}");
    let etcd = row("pki/etcd-server ");
    assert!(
        etcd.contains("FAIL") && etcd.contains("the key does not belong to the certificate"),
        "{etcd}"
    );
    assert!(row("pki/admin ").contains("private keys must be 0600"), "{table}");
}

/// Rewrite `rel` of the live bundle with `f`, and SHA256SUMS to match, as an attacker would.
fn tamper(dir: &Path, rel: &str, f: impl FnOnce(&mut serde_json::Value)) {
    let path = std::fs::canonicalize(dir.join(rel)).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    f(&mut v);
    // A fresh inode: the file may be a hard link shared with the previous generation.
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let hash = sha2::Sha256::digest(std::fs::read(&path).unwrap());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    let sums_path = std::fs::canonicalize(dir.join("SHA256SUMS")).unwrap();
    let sums: String = std::fs::read_to_string(&sums_path)
        .unwrap()
        .lines()
        .map(|l| match l.split_once("  ") {
            Some((_, p)) if p == rel => format!("{hex}  {p}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    std::fs::remove_file(&sums_path).unwrap();
    std::fs::write(&sums_path, sums).unwrap();
}

#[test]
fn verify_rebuilds_and_finds_an_edit_that_sha256sums_hides() {
    // Before: an injected SSH key plus a rewritten SHA256SUMS passed `verify`.
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    tamper(d.path(), "ignition/master-0.ign", |v| {
        v["passwd"]["users"][0]["sshAuthorizedKeys"]
            .as_array_mut()
            .unwrap()
            .push("ssh-rsa AAAAB3NzaEVIL attacker@elsewhere".into());
    });
    let out = hardshift(&["verify", "--dir", d.path().to_str().unwrap()]);
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}");
    let sums = table.lines().find(|l| l.starts_with("SHA256SUMS")).unwrap();
    assert!(sums.contains(" ok "), "the sums file was made to match: {sums}");
    let row = table
        .lines()
        .find(|l| l.starts_with("ignition/master-0.ign"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        row.contains("FAIL") && row.contains("passwd.users[core].sshAuthorizedKeys[1] (added)"),
        "{row}"
    );
    assert!(!table.contains("EVIL"), "what was injected is named by path, not printed");
}

#[test]
fn create_repairs_a_damaged_live_bundle_and_says_so() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let before = snapshot(d.path());
    tamper(d.path(), "ignition/bootstrap.ign", |v| {
        v["storage"]["files"].as_array_mut().unwrap().pop();
    });
    std::fs::remove_file(std::fs::canonicalize(d.path().join("ignition/worker-0.ign")).unwrap()).unwrap();
    // Before: "bundle unchanged", and the damage stayed live.
    let out = create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("repaired the live bundle (3 problems"), "{stdout}");
    for line in [
        "  SHA256SUMS was edited",
        "  ignition/bootstrap.ign was edited",
        "  ignition/worker-0.ign is missing",
    ] {
        assert!(stdout.contains(line), "{line:?}\n{stdout}");
    }
    assert_eq!(snapshot(d.path()), before, "the same bytes as the first run");
    let out = hardshift(&["verify", "--dir", d.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    // The damaged copy is kept for a look; a further run changes nothing.
    let kept = std::fs::read_dir(d.path().join(".hardshift"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("damaged-"))
        .count();
    assert_eq!(kept, 1);
    let out = create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(text(&out.stdout).contains("bundle unchanged"), "{}", text(&out.stdout));
}

#[test]
fn a_user_directory_in_the_way_is_never_overwritten() {
    let d = example_copy();
    std::fs::create_dir(d.path().join("auth")).unwrap();
    std::fs::write(d.path().join("auth/kubeconfig"), b"mine").unwrap();
    let out = hardshift(&[
        "create",
        "--dir",
        d.path().to_str().unwrap(),
        "--key-algorithm",
        "ecdsa-p256",
        "--self-contained-nodes",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("auth exists and is not a hardshift link"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(d.path().join("auth/kubeconfig")).unwrap(), b"mine");
    // No generation and no links: only the writer's lock file was made.
    let state: Vec<String> = std::fs::read_dir(d.path().join(".hardshift"))
        .map(|r| r.flatten().map(|e| e.file_name().to_string_lossy().to_string()).collect())
        .unwrap_or_default();
    assert!(state.iter().all(|n| n == "lock"), "{state:?}");
    assert!(!d.path().join("pki").exists());
}

#[test]
fn one_writer_at_a_time_a_second_run_names_the_lock_and_writes_nothing() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let dir = d.path().to_str().unwrap();
    // Force the race: hold the bundle's lock from another process, as a run in progress does.
    let lock = d.path().join(".hardshift/lock");
    let holder = Kill(
        // -o: the lock stays with flock itself, not with sleep, so killing flock releases it.
        std::process::Command::new("flock")
            .arg("-o")
            .arg(&lock)
            .args(["sleep", "60"])
            .spawn()
            .expect("flock (util-linux)"),
    );
    let start = std::time::Instant::now();
    while run("flock", &["-n", lock.to_str().unwrap(), "true"]).0 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "the holder never took the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let before = snapshot(d.path());
    let gens = generations(d.path());
    edit(d.path(), "hardshift.yaml", "diskGiB: 100", "diskGiB: 120");
    for cmd in ["create", "lab", "mco"] {
        let mut args = vec![cmd, "--dir", dir];
        if cmd == "create" {
            args.extend(["--key-algorithm", "ecdsa-p256", "--no-agent", "--self-contained-nodes"]);
        }
        let out = hardshift(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {err}");
        assert!(err.contains("another hardshift run is writing this bundle"), "{cmd}: {err}");
    }
    let mut after = snapshot(d.path());
    after.remove("hardshift.yaml");
    let mut before = before;
    before.remove("hardshift.yaml");
    assert_eq!(before, after, "a refused run writes nothing");
    assert_eq!(gens, generations(d.path()));
    assert!(!d.path().join("mco").exists());

    // Once the holder is gone, the next run goes ahead and names who holds it while it runs.
    drop(holder);
    let out = create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(text(&out.stdout).contains("wrote"), "{}", text(&out.stdout));
    let owner = std::fs::read_to_string(&lock).unwrap();
    assert!(owner.starts_with("pid ") && owner.contains("(create)"), "{owner}");

    // Three runs at once on a fresh directory: each either writes or is refused by name, and what
    // is live afterwards is one whole generation.
    let d = example_copy();
    let dir = d.path().to_str().unwrap().to_string();
    let runs: Vec<_> = (0..3)
        .map(|_| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                hardshift(&[
                    "create",
                    "--dir",
                    &dir,
                    "--key-algorithm",
                    "ecdsa-p256",
                    "--no-agent",
                    "--self-contained-nodes",
                ])
            })
        })
        .collect();
    let outs: Vec<_> = runs.into_iter().map(|r| r.join().unwrap()).collect();
    assert!(outs.iter().any(|o| o.status.success()));
    for o in &outs {
        assert!(
            o.status.success() || text(&o.stderr).contains("another hardshift run is writing this bundle"),
            "{}",
            text(&o.stderr)
        );
    }
    let out = hardshift(&["verify", "--dir", &dir]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    // One password: a run that read none before another wrote the bundle keeps the bundle's.
    let made = outs.iter().filter(|o| text(&o.stdout).contains("console login")).count();
    assert_eq!(made, 1, "a new kubeadmin password shown {made} times");
}

#[test]
fn a_create_killed_at_any_moment_leaves_a_complete_bundle_and_its_leftovers_are_cleaned() {
    // kill -9 at 16 points spread over a run that writes a new generation (an input changes each
    // time): whatever the moment, the live bundle is the old one or the new one, whole.
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let started = std::time::Instant::now();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let run_ms = started.elapsed().as_millis() as u64;
    for i in 0..16u64 {
        edit(
            d.path(),
            "hardshift.yaml",
            &format!("diskGiB: {}", 100 + i),
            &format!("diskGiB: {}", 101 + i),
        );
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hardshift"))
            .args(["create", "--dir", dir, "--key-algorithm", "ecdsa-p256", "--no-agent"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(run_ms * i / 16));
        let _ = child.kill();
        let _ = child.wait();
        let out = hardshift(&["verify", "--dir", dir]);
        let table = text(&out.stdout);
        // The live generation is whole (every file as its SHA256SUMS lists, every cert good);
        // it is the new bundle, or the old one when the kill came first, which differs from a
        // fresh build only where the changed input shows (cluster.json's lab.disk_gib, lab/).
        let sums = table.lines().find(|l| l.starts_with("SHA256SUMS")).unwrap();
        assert!(sums.contains(" ok "), "kill after {} ms: {sums}", run_ms * i / 16);
        let failed: Vec<&str> = table
            .lines()
            .filter(|l| l.contains(" FAIL "))
            .filter(|l| !(l.starts_with("cluster.json ") && l.ends_with("differs from a fresh build at lab.disk_gib")))
            .filter(|l| !l.starts_with("lab/"))
            .collect();
        assert!(failed.is_empty(), "kill after {} ms: {failed:?}", run_ms * i / 16);
    }
    // A leftover of an interrupted run is removed by the next one.
    let stale = d.path().join(".hardshift/tmp-999999-1");
    std::fs::create_dir_all(stale.join("pki")).unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(!stale.exists(), "a stale temp generation must be cleaned");
}

/// `create` on `dir` with `cache` as the user's cache directory; it must succeed.
fn create_with_cache(dir: &Path, cache: &Path) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hardshift"))
        .args([
            "create",
            "--dir",
            dir.to_str().unwrap(),
            "--key-algorithm",
            "ecdsa-p256",
            "--self-contained-nodes",
        ])
        .env("XDG_CACHE_HOME", cache)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn the_agent_encoding_cache_keeps_only_the_recent_entries() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("hardshift");
    std::fs::create_dir_all(&dir).unwrap();
    // Four encodings of older agents, an hour apart, and a file that is not ours.
    let now = std::time::SystemTime::now();
    for age in 1..=4u64 {
        let p = dir.join(format!("agent-{:064x}.contents.json", age));
        std::fs::write(&p, b"{}").unwrap();
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(now - std::time::Duration::from_secs(3600 * age)).unwrap();
    }
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    agent_bin();
    let a = example_copy();
    create_with_cache(a.path(), cache.path());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // This agent's entry and the two most recent others; the user's file untouched.
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names.contains(&"notes.txt".to_string()), "{names:?}");
    assert!(names.contains(&format!("agent-{:064x}.contents.json", 1)), "{names:?}");
    assert!(names.contains(&format!("agent-{:064x}.contents.json", 2)), "{names:?}");
    assert!(!names.contains(&format!("agent-{:064x}.contents.json", 3)), "{names:?}");
    assert!(!names.contains(&format!("agent-{:064x}.contents.json", 4)), "{names:?}");
}

#[test]
fn the_agent_encoding_is_cached_by_hash_and_a_bad_entry_is_never_trusted() {
    let cache = tempfile::tempdir().unwrap();
    let run = |d: &Path| create_with_cache(d, cache.path());
    agent_bin();
    let a = example_copy();
    run(a.path());
    let entries: Vec<PathBuf> = std::fs::read_dir(cache.path().join("hardshift"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].to_string_lossy().ends_with(".contents.json"));
    // A second bundle, with the cache warm, embeds the same bytes.
    let b = example_copy();
    run(b.path());
    let agent_of = |d: &Path| {
        let ign: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("ignition/worker-0.ign")).unwrap()).unwrap();
        ign["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == "/usr/local/bin/hardshift-agent")
            .unwrap()
            .clone()
    };
    assert_eq!(agent_of(a.path()), agent_of(b.path()));
    // A forged entry (another binary's encoding under this hash) is not used.
    let forged = serde_json::json!({"compression": null, "source": "data:;base64,ZXZpbA=="});
    std::fs::write(&entries[0], serde_json::to_vec(&forged).unwrap()).unwrap();
    let c = example_copy();
    run(c.path());
    assert_eq!(
        agent_of(c.path()),
        agent_of(a.path()),
        "the forged cache entry must not reach a node"
    );
}

/// `verify` hashes the agent it rebuilds with: a foreign binary stored under the kept agent's
/// name, with the configs and sums made to match it, no longer passes.
#[test]
fn verify_refuses_a_kept_agent_that_does_not_hash_to_its_name() {
    let d = example_copy();
    let ds = d.path().to_str().unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let record_path = d.path().join(".hardshift/create.json");
    let original: serde_json::Value = serde_json::from_slice(&std::fs::read(&record_path).unwrap()).unwrap();
    let sha = original["agent_sha256"]
        .as_str()
        .expect("create records the agent's hash")
        .to_string();
    // The attacker's bundle: the same PKI, another agent embedded, the record pointing back at
    // the original hash and the foreign bytes stored under it.
    let foreign = std::fs::read("/bin/true").unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--agent-binary", "/bin/true"]);
    let mut record: serde_json::Value = serde_json::from_slice(&std::fs::read(&record_path).unwrap()).unwrap();
    let foreign_sha = record["agent_sha256"].as_str().unwrap().to_string();
    assert_eq!(foreign_sha, format!("{:x}", sha2::Sha256::digest(&foreign)));
    record["agent_sha256"] = serde_json::Value::String(sha.clone());
    std::fs::write(&record_path, serde_json::to_vec(&record).unwrap()).unwrap();
    let kept = d.path().join(".hardshift/agents").join(&sha);
    let _ = std::fs::remove_file(&kept);
    std::fs::write(&kept, &foreign).unwrap();
    let out = hardshift(&["verify", "--dir", ds]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains(&format!("hashes to {foreign_sha}, not {sha}")), "{all}");
}

/// verify names the agent each node's config embeds and compares it with the hardshift-agent
/// built beside hardshift, or the one given (issue 36, item 2): a foreign agent kept under its
/// own hash, with create.json to match, no longer passes; with no agent to compare with, it is
/// said, as a warning, never a pass.
#[test]
fn verify_compares_the_embedded_agent_with_the_one_beside_hardshift() {
    let agent = agent_bin();
    let d = example_copy();
    let ds = d.path().to_str().unwrap();
    let sha = |p: &Path| format!("{:x}", sha2::Sha256::digest(std::fs::read(p).unwrap()));
    let verify = |bin: &Path, extra: &[&str]| {
        let out = std::process::Command::new(bin)
            .args(["verify", "--dir", ds])
            .args(extra)
            .output()
            .unwrap();
        (out.status.code(), format!("{}{}", text(&out.stdout), text(&out.stderr)))
    };
    let hs = Path::new(env!("CARGO_BIN_EXE_hardshift"));
    // The foreign bundle: /bin/true embedded, kept under its own hash, the record to match.
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--agent-binary", "/bin/true"]);
    let foreign = sha(Path::new("/bin/true"));
    let (code, all) = verify(hs, &[]);
    assert_eq!(code, Some(1), "{all}");
    assert!(
        all.contains(&format!(
            "embed hardshift-agent sha256 {foreign}, not the hardshift-agent beside hardshift ({}, sha256 {})",
            agent.display(),
            sha(&agent)
        )),
        "{all}"
    );
    assert!(
        all.contains("ignition/master-0.ign") && all.contains("ignition/bootstrap.ign"),
        "{all}"
    );
    // Compared with the agent it was meant to carry, it passes, saying which.
    let (code, all) = verify(hs, &["--agent-binary", "/bin/true"]);
    assert_eq!(code, Some(0), "{all}");
    assert!(
        all.contains(&format!("embed hardshift-agent sha256 {foreign}: the --agent-binary /bin/true")),
        "{all}"
    );
    // As create makes it by default: the agent beside hardshift.
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let (code, all) = verify(hs, &[]);
    assert_eq!(code, Some(0), "{all}");
    assert!(all.contains(": the hardshift-agent beside hardshift ("), "{all}");
    // A hardshift with no hardshift-agent beside it: not compared, a warning.
    let lone = tempfile::tempdir().unwrap();
    let copy = lone.path().join("hardshift");
    std::fs::copy(hs, &copy).unwrap();
    let (code, all) = verify(&copy, &[]);
    assert_eq!(code, Some(0), "{all}");
    let line = all
        .lines()
        .find(|l| l.contains("not compared: no hardshift-agent beside hardshift"))
        .unwrap_or_else(|| panic!("{all}"));
    assert!(line.contains("WARN") && line.contains(&sha(&agent)), "{line}");
}

/// verify checks DIR/SHA256SUMS, the file a user runs `sha256sum -c` on (issue 36, low): garbage,
/// a FIFO or a directory in its place fails, named, and a FIFO never blocks it.
#[test]
fn verify_checks_the_sums_a_user_would_check() {
    let d = example_copy();
    let ds = d.path().to_str().unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let sums = d.path().join("SHA256SUMS");
    let link = std::fs::read_link(&sums).expect("SHA256SUMS is linked into the bundle");
    let (ok, out) = run("sh", &["-c", &format!("cd {ds} && sha256sum --quiet -c SHA256SUMS")]);
    assert!(ok, "{out}");
    let fifo = |p: &Path| nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    type Make = Box<dyn Fn(&Path)>;
    let cases: [(&str, Make, &str); 4] = [
        ("garbage", Box::new(|p| std::fs::write(p, "not a sum\n").unwrap()), "line 1 is not"),
        (
            "a bad hash",
            Box::new(|p| std::fs::write(p, format!("{}  pki/root-ca.crt\n", "0".repeat(64))).unwrap()),
            "differs from the bundle's own",
        ),
        ("a FIFO", Box::new(fifo), "a FIFO"),
        ("a directory", Box::new(|p| std::fs::create_dir(p).unwrap()), "a directory"),
    ];
    for (name, make, said) in cases {
        std::fs::remove_file(&sums).unwrap();
        make(&sums);
        let out = hardshift(&["verify", "--dir", ds]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{name}: {all}");
        let line = all
            .lines()
            .find(|l| l.contains(&sums.display().to_string()))
            .unwrap_or_else(|| panic!("{name}: {all}"));
        assert!(line.contains("FAIL") && line.contains(said), "{name}: {line}");
        let _ = std::fs::remove_dir(&sums);
        let _ = std::fs::remove_file(&sums);
        std::os::unix::fs::symlink(&link, &sums).unwrap();
    }
    let out = hardshift(&["verify", "--dir", ds]);
    assert!(out.status.success(), "{}", text(&out.stdout));
}

/// Under umask 000 the state and cache directories are still this user's only (0700): the kept
/// agents, the agent encoding cache, the lock.
#[test]
fn caches_are_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let d = example_copy();
    let cache = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 000; exec '{}' create --dir '{}' --key-algorithm ecdsa-p256 --self-contained-nodes",
            env!("CARGO_BIN_EXE_hardshift"),
            d.path().display()
        ))
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    for p in [
        d.path().join(".hardshift"),
        d.path().join(".hardshift/agents"),
        cache.path().join("hardshift"),
    ] {
        let mode = std::fs::metadata(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o700, "{}", p.display());
    }
}

/// A disk that fills up mid-write (a 600 KiB tmpfs, in a private mount namespace): create fails
/// with the error, and leaves no `.hardshift/tmp-*` behind; the inputs are untouched.
#[test]
fn a_full_disk_leaves_no_temporary_generation_behind() {
    let outer = tempfile::tempdir().unwrap();
    let mnt = outer.path().join("small");
    std::fs::create_dir_all(&mnt).unwrap();
    let src = example_copy();
    let script = format!(
        "set -e; mount -t tmpfs -o size=600k tmpfs '{m}'; cp -r '{s}/.' '{m}/'; \
         '{bin}' create --dir '{m}' --key-algorithm ecdsa-p256 --no-agent --self-contained-nodes > '{o}/out' 2>&1 && echo ok > '{o}/rc' || echo $? > '{o}/rc'; \
         ls -a '{m}/.hardshift' > '{o}/state' 2>/dev/null || true",
        m = mnt.display(),
        s = src.path().display(),
        bin = env!("CARGO_BIN_EXE_hardshift"),
        o = outer.path().display()
    );
    let (ok, out) = run("unshare", &["-m", "--propagation", "private", "sh", "-c", &script]);
    assert!(ok, "{out}");
    let rc = std::fs::read_to_string(outer.path().join("rc")).unwrap();
    let said = std::fs::read_to_string(outer.path().join("out")).unwrap();
    let state = std::fs::read_to_string(outer.path().join("state")).unwrap_or_default();
    assert_ne!(rc.trim(), "ok", "the bundle cannot fit in 600 KiB: {said}");
    assert!(said.contains("No space left on device"), "{said}");
    assert!(!state.lines().any(|l| l.starts_with("tmp-")), "left behind: {state}\n{said}");
}

/// A reader that stops early (`| head`, `| true`) ends the command quietly, as with any Unix
/// tool, instead of a panic on the broken pipe; `wait-for -o json` says the outcome as JSON.
#[test]
fn a_closed_pipe_ends_quietly_and_wait_for_speaks_json() {
    let d = example_copy();
    create(d.path(), &["--no-agent", "--key-algorithm", "ecdsa-p256"]);
    let dir = d.path().to_str().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("'{}' verify --dir '{dir}' | true", env!("CARGO_BIN_EXE_hardshift")))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
    let out = hardshift(&[
        "wait-for",
        "bootstrap-complete",
        "--dir",
        dir,
        "--timeout",
        "1s",
        "--interval",
        "100ms",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    assert_eq!(
        (v["target"].as_str(), v["reached"].as_bool()),
        (Some("bootstrap-complete"), Some(false)),
        "{v}"
    );
}
