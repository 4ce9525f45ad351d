//! The Debian package (hack/package-deb.sh), installed by the real dpkg into a fresh Debian root
//! (hack/systemd-root.sh) booted as a container with systemd as PID 1: the maintainer scripts make
//! the hardshift user; `create` run from /usr/bin embeds /usr/bin/hardshift-agent; the collector's
//! unit starts as that user inside its sandbox, with the settings of its conffile, listens and
//! answers /metrics, comes back after a crash, is restarted by an upgrade, stops cleanly; `dpkg -r`
//! and `--purge` leave what they should. And lintian reports nothing that is not explained.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

const UNIT: &str = "hardshift-collector.service";
/// The dashboard's address the test writes into the conffile (the package's default is :9444).
const WEB: &str = "127.0.0.1:9555";

/// A Debian root booted under podman, systemd as PID 1; removed when dropped.
struct Container {
    name: String,
    env: Vec<(String, String)>,
    _work: tempfile::TempDir,
}

impl Container {
    /// Boot `root` through an overlay (the cached root is never changed), `mounts` read-only.
    fn boot(root: &Path, mounts: &[(&Path, &str)]) -> Container {
        let work = tempfile::tempdir().unwrap();
        let env = podman::env(work.path());
        let name = format!("hardshift-deb-{}", std::process::id());
        let mut args: Vec<String> = ["run", "-d", "--name", &name, "--systemd=always", "--network", "none"]
            .map(String::from)
            .to_vec();
        // The unit's sandbox (ProtectSystem=, ProtectHome=, PrivateTmp=) is mount namespaces, which
        // systemd in a container skips without a word when it lacks CAP_SYS_ADMIN: the test checks
        // the sandbox is in force, so systemd gets it.
        args.extend(["--cap-add".into(), "SYS_ADMIN".into()]);
        for (host, inside) in mounts {
            args.extend(["-v".into(), format!("{}:{inside}:ro", host.display())]);
        }
        args.extend(["--rootfs".into(), format!("{}:O", root.display()), "/sbin/init".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, out) = podman::run(&env, &args);
        assert!(ok, "podman run: {out}");
        let c = Container { name, env, _work: work };
        wait_for("systemd in the container to finish booting", 120, || {
            let s = c.sh("systemctl is-system-running").1;
            s.contains("running") || s.contains("degraded")
        });
        c
    }

    /// `sh -c script` inside: (success, stdout and stderr).
    fn sh(&self, script: &str) -> (bool, String) {
        podman::run(&self.env, &["exec", &self.name, "sh", "-c", script])
    }

    /// `sh -c script` inside, asserting success; its output, trimmed.
    fn ok(&self, script: &str) -> String {
        let (ok, out) = self.sh(script);
        assert!(ok, "in the container: {script}\n{out}\njournal:\n{}", self.journal());
        out.trim().to_string()
    }

    fn prop(&self, name: &str) -> String {
        self.ok(&format!("systemctl show -P {name} {UNIT}"))
    }

    fn journal(&self) -> String {
        self.sh(&format!("journalctl -u {UNIT} --no-pager | tail -30")).1
    }

    /// /metrics on the address the conffile names, when it answers.
    fn metrics(&self) -> Option<String> {
        let (ok, out) = self.sh(&format!("curl -fsS http://{WEB}/metrics"));
        ok.then_some(out)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman::run(&self.env, &["rm", "-f", "-t", "0", &self.name]);
    }
}

/// The last line of a hack/ script's stdout, asserting success.
fn hack(script: &str, args: &[&str]) -> PathBuf {
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("hack").join(script))
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("hack/{script}: {e}"));
    assert!(out.status.success(), "hack/{script} failed: {}", text(&out.stdout));
    PathBuf::from(text(&out.stdout).lines().last().unwrap_or_default().trim())
}

fn lintian(deb: &Path) -> Child {
    // Every tag lintian shows, info included, fails: each one left is overridden, with its reason,
    // in deploy/debian/lintian-overrides.
    Command::new("lintian")
        .args(["--info", "--fail-on", "error,warning,info", "--no-tag-display-limit"])
        .arg(deb)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lintian (hack/setup.sh --tests installs it)")
}

fn took(what: &str, since: &mut Instant) {
    eprintln!("deb: {what} took {:.1} s", since.elapsed().as_secs_f64());
    *since = Instant::now();
}

#[test]
fn deb_installs_and_runs_the_collector_under_systemd() {
    let mut t = Instant::now();
    // The package of this build: the debug binaries, the agent beside hardshift.
    let bin_dir = agent_bin().parent().unwrap().to_path_buf();
    let out = tempfile::tempdir().unwrap();
    let deb = hack(
        "package-deb.sh",
        &[
            "--bin-dir",
            bin_dir.to_str().unwrap(),
            "--out",
            out.path().to_str().unwrap(),
            "--fast",
        ],
    );
    assert!(deb.is_file() && deb.starts_with(out.path()), "{}", deb.display());
    let deb_name = deb.file_name().unwrap().to_str().unwrap().to_string();
    assert!(deb_name.starts_with("hardshift_") && deb_name.ends_with("_amd64.deb"), "{deb_name}");
    took("packaging", &mut t);
    // lintian reads the package while the container runs it.
    let lint = lintian(&deb);
    let root = hack("systemd-root.sh", &[]);
    took("the Debian root", &mut t);
    let inputs = example_copy();
    let c = Container::boot(&root, &[(out.path(), "/mnt/deb"), (inputs.path(), "/mnt/inputs")]);
    took("booting", &mut t);

    // Installed by dpkg: the user, its home, the unit known but neither enabled nor started.
    c.ok(&format!("dpkg -i /mnt/deb/{deb_name}"));
    let user = c.ok("getent passwd hardshift");
    assert!(user.ends_with(":/var/lib/hardshift:/usr/sbin/nologin"), "{user}");
    assert_eq!(c.ok("stat -c '%U %a' /var/lib/hardshift"), "hardshift 750");
    assert_eq!(c.sh(&format!("systemctl is-enabled {UNIT}")).1.trim(), "disabled");
    assert_eq!(c.prop("ActiveState"), "inactive");
    // Completions and man pages: once this hardshift can write them, the package carries them.
    if hardshift(&["completions", "--help"]).status.success() {
        c.ok("test -s /usr/share/zsh/vendor-completions/_hardshift && test -s /usr/share/fish/vendor_completions.d/hardshift.fish");
        let bash = c.ok("bash -c '. /usr/share/bash-completion/completions/hardshift && complete -p hardshift'");
        assert!(bash.ends_with(" hardshift"), "{bash}");
    }
    if hardshift(&["man", "--help"]).status.success() {
        c.ok("test -s /usr/share/man/man1/hardshift.1.gz");
    }
    // systemd's own check of the unit (its man page comes with `hardshift man`, not checked here).
    c.ok(&format!("systemd-analyze verify --man=no /lib/systemd/system/{UNIT}"));

    // A bundle in the default place, made by the packaged hardshift as the service's user: create
    // finds the agent beside /usr/bin/hardshift.
    let created = c.ok("install -d -o hardshift -g hardshift -m 0750 /var/lib/hardshift/bundle && \
         cp -r /mnt/inputs/. /var/lib/hardshift/bundle/ && chown -R hardshift:hardshift /var/lib/hardshift/bundle && \
         cd /var/lib/hardshift && runuser -u hardshift -- hardshift create --dir /var/lib/hardshift/bundle \
           --key-algorithm ecdsa-p256 --self-contained-nodes 2>&1");
    assert!(
        created.contains("hardshift-agent (") && created.contains("on every node"),
        "{created}"
    );
    assert!(!created.contains("no hardshift-agent"), "{created}");
    took("dpkg -i and create", &mut t);

    // The conffile's settings reach the collector: another dashboard address, no API watch.
    c.ok(&format!(
        "sed -i -e 's/^HARDSHIFT_WEB=.*/HARDSHIFT_WEB={WEB}/' -e 's/^HARDSHIFT_ARGS=.*/HARDSHIFT_ARGS=--no-api-watch/' \
         /etc/hardshift/collector.env && systemctl enable --now {UNIT}"
    ));
    wait_for("/metrics of the started collector", 180, || c.metrics().is_some());
    let metrics = c.metrics().unwrap();
    // The bundle's inventory is what it serves.
    assert!(
        metrics.contains("hardshift_node_health{cluster=\"ocp4\",base_domain=\"example.com\",") && metrics.contains("node=\"master-0\""),
        "{metrics}"
    );
    assert_eq!(c.prop("ActiveState"), "active");
    let pid = c.prop("MainPID");
    let uid = c.ok("id -u hardshift");
    let status = c.ok(&format!("cat /proc/{pid}/status"));
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no {k} in {status}"))
    };
    assert_eq!(field("Uid:"), vec![uid.as_str(); 4], "the collector runs as hardshift");
    assert_eq!(field("NoNewPrivs:"), vec!["1"]);
    assert_eq!(field("CapEff:"), vec!["0000000000000000"]);
    let listening = c.ok("ss -Hltn");
    for addr in ["0.0.0.0:9443", WEB] {
        assert!(listening.contains(addr), "nothing listens on {addr}:\n{listening}");
    }
    // The sandbox: the system read-only, the state directory writable, no /home, a private /tmp.
    let mounts = c.ok(&format!("cat /proc/{pid}/mountinfo"));
    let mount = |at: &str| {
        mounts
            .lines()
            .map(|l| l.split(' ').collect::<Vec<_>>())
            // The last mount on a path is the one in force.
            .rfind(|f| f.len() > 5 && f[4] == at)
            .unwrap_or_else(|| panic!("no mount on {at}:\n{mounts}"))
    };
    assert!(
        mount("/")[5].split(',').any(|o| o == "ro"),
        "/ is writable for the collector:\n{mounts}"
    );
    assert!(mount("/var/lib/hardshift")[5].split(',').any(|o| o == "rw"), "{mounts}");
    assert!(mount("/home")[3].contains("inaccessible"), "{mounts}");
    assert!(mount("/tmp")[3].contains("systemd-private"), "{mounts}");
    assert_eq!(c.ok("stat -c %U /var/lib/hardshift/bundle/collector/reports.db"), "hardshift");
    took("starting the collector and the checks", &mut t);

    // Restart=on-failure: killed, it comes back.
    c.ok(&format!("systemctl kill -s KILL {UNIT}"));
    wait_for("the collector restarted after SIGKILL", 180, || {
        c.prop("NRestarts") == "1" && c.prop("ActiveState") == "active" && c.metrics().is_some()
    });
    // An upgrade (here the same version again) restarts the running collector on the new files.
    let before = c.prop("MainPID");
    c.ok(&format!("dpkg -i /mnt/deb/{deb_name}"));
    wait_for("the collector running after the upgrade", 180, || c.metrics().is_some());
    assert_eq!(c.prop("ActiveState"), "active");
    assert_ne!(c.prop("MainPID"), before, "the upgrade did not restart the collector");
    assert_eq!(c.sh(&format!("systemctl is-enabled {UNIT}")).1.trim(), "enabled");

    // A clean stop: SIGTERM drains, the collector exits 0.
    c.ok(&format!("systemctl stop {UNIT}"));
    assert_eq!(c.prop("ActiveState"), "inactive");
    assert_eq!(c.prop("Result"), "success", "{}", c.journal());
    assert_eq!(c.prop("ExecMainStatus"), "0", "{}", c.journal());
    took("restart, upgrade and stop", &mut t);

    // dpkg -r stops a running collector; the conffile, the bundle and the user stay.
    c.ok(&format!("systemctl start {UNIT}"));
    wait_for("the collector before removal", 180, || c.metrics().is_some());
    c.ok("dpkg -r hardshift");
    assert_eq!(c.prop("ActiveState"), "inactive");
    for gone in [
        "/usr/bin/hardshift",
        "/usr/bin/hardshift-agent",
        "/lib/systemd/system/hardshift-collector.service",
    ] {
        assert!(!c.sh(&format!("test -e {gone}")).0, "{gone} is left after dpkg -r");
    }
    assert!(
        c.ok("cat /etc/hardshift/collector.env").contains(WEB),
        "the admin's settings are lost"
    );
    assert_eq!(
        c.ok(&format!("readlink /etc/systemd/system/{UNIT}")),
        "/dev/null",
        "not masked after removal"
    );
    // --purge: the settings and the unit's enablement go; the bundle (a cluster's keys) and the user stay.
    let purged = c.ok("dpkg --purge hardshift 2>&1");
    assert!(purged.contains("kept /var/lib/hardshift"), "{purged}");
    for gone in [
        "/etc/hardshift".to_string(),
        format!("/etc/systemd/system/{UNIT}"),
        format!("/etc/systemd/system/multi-user.target.wants/{UNIT}"),
    ] {
        assert!(
            !c.sh(&format!("test -e {gone} || test -L {gone}")).0,
            "{gone} is left after --purge"
        );
    }
    c.ok("test -f /var/lib/hardshift/bundle/pki/admin.key && getent passwd hardshift");
    assert!(!c.sh("dpkg -s hardshift").0, "dpkg still knows hardshift after --purge");
    took("remove and purge", &mut t);

    let lint = lint.wait_with_output().unwrap();
    assert!(lint.status.success(), "lintian:\n{}{}", text(&lint.stdout), text(&lint.stderr));
    took("waiting for lintian", &mut t);
}
