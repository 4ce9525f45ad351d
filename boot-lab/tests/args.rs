//! `hardshift-boot-lab` and hack/boot-lab.sh check every argument before they touch anything: a
//! `--work` holding what the tool did not make is refused (never emptied), an unknown node is
//! refused before the work directory is made, and the script parses its arguments before it
//! installs, builds or runs cargo, and finds the binaries where cargo put them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_hardshift-boot-lab");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// A directory of the test's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("boot-lab-args-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// A bundle as `hardshift create` leaves it, as far as boot-lab reads it before anything is
/// made: the live generation's inventory (the example's nodes: bootstrap, master-0..2,
/// worker-0..1).
fn example_bundle(dir: &Path) {
    let generation = dir.join(".hardshift/gen-test");
    std::fs::create_dir_all(&generation).unwrap();
    std::os::unix::fs::symlink("gen-test", dir.join(".hardshift/current")).unwrap();
    let node = |name: &str, role: &str, last: u8| {
        format!(
            r#"{{"name": "{name}", "role": "{role}", "interface": "enp1s0", "mac": "52:54:00:00:00:{last:02x}", "ip": "192.168.126.{last}", "prefix": 24, "gateway": "192.168.126.1"}}"#
        )
    };
    let nodes = [
        node("bootstrap", "bootstrap", 100),
        node("master-0", "master", 101),
        node("master-1", "master", 102),
        node("master-2", "master", 103),
        node("worker-0", "worker", 110),
        node("worker-1", "worker", 111),
    ];
    let inventory = format!(
        r#"{{"format": 1, "name": "ocp4", "baseDomain": "example.com",
  "release": {{"image": "quay.io/openshift-release-dev/ocp-release@sha256:00", "version": "4.18.0", "kubernetes": null}},
  "fips": false, "singleNode": false,
  "machineNetworks": ["192.168.126.0/24"], "clusterNetworks": ["10.128.0.0/14"], "serviceNetworks": ["172.30.0.0/16"],
  "apiVip": "192.168.126.10", "ingressVip": "192.168.126.11", "helperIp": "192.168.126.1",
  "collectorAddress": "192.168.126.1", "collectorPort": 9443, "httpBaseUrl": "http://192.168.126.1:8080",
  "nodes": [{}]}}"#,
        nodes.join(", ")
    );
    std::fs::write(generation.join("inventory.json"), inventory).unwrap();
}

/// An image directory with the three files the tool looks for (never booted here).
fn image(s: &Scratch) -> PathBuf {
    let img = s.0.join("image");
    std::fs::create_dir_all(&img).unwrap();
    for f in ["vmlinuz", "initramfs.img", "disk.raw"] {
        std::fs::write(img.join(f), b"").unwrap();
    }
    img
}

fn boot_lab(dir: &Path, image: &Path, nodes: &str, work: Option<&Path>) -> Output {
    let mut c = Command::new(BIN);
    c.arg("--dir").arg(dir).arg("--image").arg(image);
    c.args(["--hardshift", BIN, "--nodes", nodes]);
    if let Some(w) = work {
        c.arg("--work").arg(w);
    }
    c.output().unwrap()
}

#[test]
fn a_work_dir_it_did_not_make_is_refused_and_left_alone() {
    let s = Scratch::new("work");
    let dir = s.0.join("bundle");
    std::fs::create_dir_all(&dir).unwrap();
    example_bundle(&dir);
    // The node's config, as `hardshift create` leaves it (never served here).
    std::fs::create_dir_all(dir.join("ignition")).unwrap();
    std::fs::write(dir.join("ignition/master-0.ign"), b"{}").unwrap();
    let img = image(&s);
    // A tree of the user's (a typo: `--work .`): refused, every file still there.
    let work = s.0.join("home");
    std::fs::create_dir_all(work.join("src")).unwrap();
    std::fs::write(work.join("precious.txt"), b"keep me").unwrap();
    let out = boot_lab(&dir, &img, "master-0", Some(&work));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&work.display().to_string()) && err.contains("precious.txt") && err.contains(".hardshift-boot-lab"),
        "{err}"
    );
    assert_eq!(std::fs::read(work.join("precious.txt")).unwrap(), b"keep me");
    assert!(work.join("src").is_dir());

    // A symlink as --work is refused too (never followed to what it points at).
    let link = s.0.join("link");
    std::os::unix::fs::symlink(&work, &link).unwrap();
    let out = boot_lab(&dir, &img, "master-0", Some(&link));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("symlink"), "{err}");
    assert_eq!(std::fs::read(work.join("precious.txt")).unwrap(), b"keep me");

    // A regular file as --work: refused, not replaced.
    let file = s.0.join("notes.txt");
    std::fs::write(&file, b"notes").unwrap();
    let out = boot_lab(&dir, &img, "master-0", Some(&file));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&file).unwrap(), b"notes");
}

#[test]
fn an_unknown_node_is_refused_before_anything_is_made() {
    let s = Scratch::new("nodes");
    let dir = s.0.join("bundle");
    std::fs::create_dir_all(&dir).unwrap();
    example_bundle(&dir);
    let img = image(&s);
    let before: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    // The default work dir (DIR/boot-lab) and an explicit one: neither is made.
    let work = s.0.join("run");
    for w in [None, Some(work.as_path())] {
        let out = boot_lab(&dir, &img, "master-0,master-9", w);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("\"master-9\" is not a node of this bundle") && err.contains("master-0, master-1"),
            "{err}"
        );
        let after: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(before, after, "something was made in DIR");
        assert!(!work.exists(), "--work was made");
    }
    // The same node twice would be two VMs with one MAC.
    let out = boot_lab(&dir, &img, "master-0,master-0", Some(&work));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("master-0") && err.contains("twice"), "{err}");
    assert!(!work.exists());
    // A fault on a node that is not one: named as given, not as Rust's Debug form.
    let out = Command::new(BIN)
        .arg("--dir")
        .arg(&dir)
        .arg("--image")
        .arg(&img)
        .args(["--hardshift", BIN, "--nodes", "master-0", "--fault", "no-default-route:master-9"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--fault no-default-route:master-9: master-9 is not a node of this bundle (its nodes: ")
            && !err.contains("NoDefaultRoute"),
        "{err}"
    );
    let out = Command::new(BIN)
        .arg("--dir")
        .arg(&dir)
        .args(["--image", "x", "--hardshift", BIN, "--nodes", "master-0", "--hold", "soon"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("seconds (e.g. 300) or `forever`"), "{err}");
}

/// Stand-ins for what hack/boot-lab.sh may run only after its arguments are parsed: each records
/// its name in `log` and fails (nothing is installed or built), but for `cargo metadata`, which
/// the real cargo answers (it only reads the workspace).
fn stand_ins(s: &Scratch) -> (PathBuf, PathBuf) {
    let bin = s.0.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = s.0.join("called.log");
    for name in ["apt-get", "apt-cache", "dpkg", "mmdebstrap", "cargo", "rustc"] {
        let p = bin.join(name);
        let real = if name == "cargo" {
            format!("[ \"$1\" = metadata ] && exec '{}' \"$@\"\n", env!("CARGO"))
        } else {
            String::new()
        };
        std::fs::write(&p, format!("#!/bin/sh\necho {name} \"$@\" >> '{}'\n{real}exit 1\n", log.display())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (bin, log)
}

fn script(path: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("bash");
    c.arg(Path::new(ROOT).join("hack/boot-lab.sh")).args(args);
    c.env("PATH", format!("{}:{}", path.display(), std::env::var("PATH").unwrap_or_default()));
    c.env_remove("CARGO_TARGET_DIR");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn the_script_parses_its_arguments_before_it_installs_or_builds() {
    let s = Scratch::new("script");
    let (bin, log) = stand_ins(&s);
    let out = script(&bin, &["--help"], &[]);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}{}", text(&out.stderr));
    assert!(
        said.contains("--dir") && said.contains("--nodes") && said.contains("--work"),
        "{said}"
    );
    assert!(
        !log.exists(),
        "ran before parsing: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );

    for bad in [&["--bogus"][..], &["--dir"][..], &["--nodes", "master-0"][..]] {
        let out = script(&bin, bad, &[]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert!(err.contains("boot-lab.sh:"), "{bad:?}: {err}");
        assert!(
            !log.exists(),
            "{bad:?} ran before parsing: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    let out = script(&bin, &["--bogus"], &[]);
    assert!(text(&out.stderr).contains("--bogus"), "{}", text(&out.stderr));
}

#[test]
fn the_script_finds_the_binaries_where_cargo_put_them() {
    let s = Scratch::new("target");
    // Nothing is installed or built here either (an old script would have).
    let (bin, _) = stand_ins(&s);
    let target = s.0.join("elsewhere");
    let t = target.to_str().unwrap();
    // CARGO_TARGET_DIR set: the binaries are under it, not under the checkout's target/.
    let out = script(&bin, &["--print-binaries"], &[("CARGO_TARGET_DIR", t)]);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    let want: Vec<String> = ["hardshift-boot-lab", "hardshift"]
        .iter()
        .map(|b| format!("{t}/debug/{b}"))
        .collect();
    assert_eq!(said.lines().collect::<Vec<_>>(), want, "{said}");
    // A relative one is relative to the checkout (the script runs cargo there).
    let out = script(&bin, &["--print-binaries"], &[("CARGO_TARGET_DIR", "tgt")]);
    let root = std::fs::canonicalize(ROOT).unwrap();
    assert_eq!(
        text(&out.stdout).lines().next(),
        Some(format!("{}/tgt/debug/hardshift-boot-lab", root.display()).as_str()),
        "{}",
        text(&out.stderr)
    );
    // Unset: the checkout's target/.
    let out = script(&bin, &["--print-binaries"], &[]);
    assert_eq!(
        text(&out.stdout).lines().next(),
        Some(format!("{}/target/debug/hardshift-boot-lab", root.display()).as_str()),
        "{}",
        text(&out.stderr)
    );
}
