//! `hardshift render` with real podman and a stand-in for the release's images (busybox and a
//! script per program that checks what it is handed and writes what the real one writes): the
//! renders run in bootkube.sh's order over the bundle's installer layout, bootkube's copies
//! between them, the etcd render at the bootstrap's name and address, the outputs and the record
//! kept; a missing asset is refused before the render that reads it; a failing render is named.

mod common;

use common::renders::{self, strip_render_inputs};
use common::*;
use serde_json::Value;
use std::path::Path;

const IMAGE: &str = "localhost/hardshift-render-standin:test";
use hardshift_generator::render::steps::TAGS;

/// The bundle's bootstrap node, as cluster.json records it.
fn bootstrap(dir: &Path) -> Value {
    let cluster: Value = serde_json::from_slice(&std::fs::read(dir.join("cluster.json")).unwrap()).unwrap();
    cluster["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["role"] == "bootstrap")
        .unwrap()
        .clone()
}

/// A `$PODMAN` at `path` that hands every container `env` and is podman otherwise.
fn wrapper(path: &Path, env: &str) -> std::path::PathBuf {
    podman_script(path, ":", Some(env))
}

/// A `$PODMAN` at `path` that runs `pre` (sh, with `$v` the host side of the assets volume)
/// before each `podman run`, hands every container `env` (VAR=VALUE, no single quote) if given,
/// and is podman otherwise.
fn podman_script(path: &Path, pre: &str, env: Option<&str>) -> std::path::PathBuf {
    let env = env.map(|e| format!(" '--env={e}'")).unwrap_or_default();
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = run ]; then\n  for a; do case \"$a\" in --volume=*) v=${{a#--volume=}}; v=${{v%%:*}} ;; esac; done\n  {pre}\n  shift; exec podman run{env} \"$@\"\nfi\nexec podman \"$@\"\n"
    );
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// podman's configuration in `w`, with the stand-in image built there (busybox with these
/// applets beside the ones every stand-in needs).
fn standin(w: &Path, more: &[&str]) -> Vec<(String, String)> {
    let env = common::podman::env(w);
    let programs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/render-standin");
    let mut applets = vec![
        "sh", "hostname", "ip", "awk", "grep", "base64", "printf", "cp", "mkdir", "head", "cat", "basename", "echo", "sed",
    ];
    applets.extend_from_slice(more);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mco/worker-machineconfig.json");
    common::podman::standin_image(&env, &w.join("image"), IMAGE, &programs, &applets, &[(&fixture, "fixture.json")]);
    env
}

/// Every entry under `root`, never following a link: path → the bytes of a regular file, or
/// what else it is.
fn tree(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
            let t = std::fs::symlink_metadata(&p).unwrap().file_type();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() {
                out.insert(rel, std::fs::read(&p).unwrap());
            } else {
                out.insert(rel, format!("{t:?}").into_bytes());
            }
        }
    }
    out
}

/// Whether process `pid` is gone (or dead, waiting to be reaped).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// The process IDs written one a line into `file`.
fn pids(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

/// One test at a time in this file: each runs the etcd render on a podman network of the
/// example's machine network, which podman refuses to create twice (tests run in parallel).
static ONE_RENDER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_RENDER.lock().unwrap_or_else(|e| e.into_inner())
}

fn render(dir: &str, env: &[(String, String)], podman: Option<&Path>) -> std::process::Output {
    let mut args = vec!["render".to_string(), "--dir".into(), dir.into()];
    for t in TAGS {
        args.push(format!("--image={t}={IMAGE}"));
    }
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_hardshift"));
    cmd.args(&args).envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(p) = podman {
        cmd.env("PODMAN", p);
    }
    cmd.output().unwrap()
}

#[test]
fn the_releases_renders_run_in_bootkubes_order_over_the_bundle() {
    let _one = one_at_a_time();
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);

    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let env = standin(w, &[]);

    // No diff before there are renders to compare with.
    let out = hardshift(&["render", "--dir", dir, "--diff"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no renders yet") && err.contains("hardshift render --dir"), "{err}");

    // Before a bundle's renders can run, the release must name what they need.
    let bare = example_copy();
    strip_render_inputs(bare.path());
    create(bare.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let out = render(bare.path().to_str().unwrap(), &env, None);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cluster-policy-controller") && err.contains("Kubernetes version"),
        "{err}"
    );
    // Without renders, their control plane is refused when asked for (also by the old flag), and
    // the default is hardshift's own, said so.
    let bare_dir = bare.path().to_str().unwrap();
    for ask in [&["--bootstrap-control-plane", "renders"][..], &["--bootstrap-from-renders"]] {
        let mut args = vec![
            "create",
            "--dir",
            bare_dir,
            "--key-algorithm",
            "ecdsa-p256",
            "--no-agent",
            "--self-contained-nodes",
        ];
        args.extend_from_slice(ask);
        let out = hardshift(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("has no renders") && err.contains("hardshift render --dir"), "{err}");
    }
    let out = create(bare.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(
        text(&out.stdout).contains("hardshift's own static pods, not the release's renders"),
        "{}",
        text(&out.stdout)
    );

    let out = render(dir, &env, None);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    let r = d.path().join("render");
    let record: Value = serde_json::from_slice(&std::fs::read(r.join("renders.json")).unwrap()).unwrap();
    let names: Vec<&str> = record["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "api",
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "mco",
            "mcc"
        ]
    );
    // Progress, a line per step on stderr when it is not a terminal (stdout is the answer).
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("] render: ")).collect();
    assert_eq!(said.len(), 7, "{stderr}");
    assert!(
        said[0].starts_with("[1/7] render: api (") && said[6].starts_with("[7/7] render: mcc ("),
        "{stderr}"
    );
    assert_eq!(record["version"], "4.18.0");
    assert_eq!(record["kubernetes"], "1.31.6");
    for s in record["steps"].as_array().unwrap() {
        let argv: Vec<&str> = s["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(argv[..2], ["podman", "run"], "{argv:?}");
        assert!(argv.contains(&IMAGE), "{argv:?}");
        let log_path = r.join(s["log"].as_str().unwrap());
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&log_path).unwrap().permissions()) & 0o777;
        assert_eq!(mode, 0o600, "{}: a render's output is this user's only", log_path.display());
        let log = std::fs::read_to_string(&log_path).unwrap();
        assert!(log.contains("stand-in "), "{}: {log}", s["name"]);
    }

    // The etcd render ran at the bootstrap's name and address; its client certificate reached
    // tls/ before the kube-apiserver render (which checks it), as bootkube copies it.
    let a = r.join("assets");
    let boot = bootstrap(d.path());
    let etcd_pod = std::fs::read_to_string(a.join("etcd-bootstrap/etc-kubernetes/manifests/etcd-member-pod.yaml")).unwrap();
    let (host, ip) = (boot["hostname"].as_str().unwrap(), boot["ip"].as_str().unwrap());
    assert!(
        etcd_pod.contains(&format!("standin/node: \"{host}\"")) && etcd_pod.contains(&format!("standin/ip: \"{ip}\"")),
        "{etcd_pod}"
    );
    assert!(a.join("tls/etcd-client.key").is_file());
    // The signer the kube-apiserver render loaded is the bundle's own (front-proxy-ca).
    let secret = std::fs::read_to_string(a.join("manifests/aggregator-client-signer.yaml")).unwrap();
    let ca = std::fs::read(d.path().join("pki/front-proxy-ca.crt")).unwrap();
    use base64::Engine;
    assert!(secret.contains(&base64::engine::general_purpose::STANDARD.encode(&ca)), "{secret}");
    for pod in [
        "kube-apiserver-pod.yaml",
        "kube-controller-manager-pod.yaml",
        "kube-scheduler-pod.yaml",
    ] {
        assert!(a.join("bootstrap-manifests").join(pod).is_file(), "{pod}");
    }
    assert!(a.join("mcc-output/machine-configs/rendered-master-standin.yaml").is_file());
    assert!(
        a.join("manifests/0000_10_standin.crd.yaml").is_file(),
        "the api render's CRDs are copied"
    );
    // No podman network, and no work directory, is left behind.
    let (_, nets) = common::podman::run(&env, &["network", "ls", "--format", "{{.Name}}"]);
    assert!(!nets.contains("hardshift-render"), "{nets}");
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".render"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // The diff: the stand-in's kube-apiserver runs none of hardshift's flags; the signer Secret
    // it loaded from the layout holds the certificate hardshift seeds (only the key and type,
    // which the stand-in leaves out, differ); in JSON, the same.
    let out = hardshift(&["render", "--dir", dir, "--diff"]);
    let diff = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        diff.contains("  kube-apiserver:\n") && diff.contains("    - --etcd-servers="),
        "{diff}"
    );
    assert!(
        diff.contains("  ~ Secret openshift-kube-apiserver-operator/aggregator-client-signer: .data.tls.key, .type\n"),
        "{diff}"
    );
    assert!(diff.contains("= Namespace openshift-config"), "{diff}");
    let out = hardshift(&["render", "--dir", dir, "--diff", "-o", "json"]);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(j["differences"].as_u64().unwrap() > 0);
    let kas = j["diff"]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["component"] == "kube-apiserver")
        .unwrap();
    assert!(
        kas["only_native"].as_array().unwrap().iter().any(|f| f[0] == "etcd-servers"),
        "{kas}"
    );

    // Asked for hardshift's own control plane, the next create still merges the masters and
    // workers into the renders' MachineConfigs, says whose the bootstrap runs, and verify makes
    // the same bundle again (native: the record says what was chosen).
    let out = create(
        d.path(),
        &["--key-algorithm", "ecdsa-p256", "--no-agent", "--bootstrap-control-plane", "native"],
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("merged into the release's own rendered MachineConfigs"), "{stdout}");
    assert!(stdout.contains("hardshift's own static pods, as asked"), "{stdout}");
    assert!(node_files(d.path(), "bootstrap").contains_key("/etc/kubernetes/manifests/kube-apiserver-bootstrap.yaml"));
    assert!(
        stdout.contains("merged into the MCO master base") && stdout.contains("merged into the MCO worker base"),
        "{stdout}"
    );
    let out = hardshift(&["verify", "--dir", dir]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stderr).contains(" 0 failed"), "{}", text(&out.stderr));
    // Renders made from another layout (here: their record says so) are refused, nothing written.
    let record = r.join("renders.json");
    let good = std::fs::read(&record).unwrap();
    let mut stale: Value = serde_json::from_slice(&good).unwrap();
    stale["layout"]["tls/root-ca.crt"] = "0".repeat(64).into();
    std::fs::write(&record, serde_json::to_vec(&stale).unwrap()).unwrap();
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
        err.contains("the renders were made from another bundle") && err.contains("tls/root-ca.crt"),
        "{err}"
    );
    assert_eq!(before, snapshot(d.path()), "nothing written");
    std::fs::write(&record, good).unwrap();

    // By default, with renders beside it: the bootstrap runs the renders' control plane (their
    // pods, configs, secrets, etcd's resources and manifests), the etcd render's CA where every
    // etcd client of the bundle reads it; the real Ignition takes the config; verify agrees; the
    // diff is empty.
    let out = create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("bootstrap control plane: the release's renders"), "{stdout}");
    // The change of hands since the last create is said, with how to keep it as it was.
    let err = text(&out.stderr);
    assert!(
        err.contains("it was hardshift's own at the last create") && err.contains("--bootstrap-control-plane native"),
        "{err}"
    );
    let files = node_files(d.path(), "bootstrap");
    let rendered = |p: &str| std::fs::read(a.join(p)).unwrap();
    assert_eq!(
        files["/etc/kubernetes/manifests/kube-apiserver-pod.yaml"],
        rendered("bootstrap-manifests/kube-apiserver-pod.yaml")
    );
    assert_eq!(
        files["/etc/kubernetes/manifests/etcd-member-pod.yaml"],
        rendered("etcd-bootstrap/etc-kubernetes/manifests/etcd-member-pod.yaml")
    );
    assert!(
        !files.contains_key("/etc/kubernetes/manifests/kube-apiserver-bootstrap.yaml"),
        "hardshift's own pod is gone"
    );
    assert_eq!(
        files["/etc/kubernetes/bootstrap-secrets/etcd-ca.crt"],
        rendered("tls/etcd-ca-bundle.crt")
    );
    assert_eq!(
        files["/etc/kubernetes/bootstrap-secrets/etcd-client.key"],
        rendered("tls/etcd-client.key")
    );
    assert_eq!(
        files["/etc/kubernetes/bootstrap-secrets/kubeconfig"],
        rendered("auth/kubeconfig-loopback")
    );
    assert_eq!(
        files["/etc/kubernetes/bootstrap-configs/kube-apiserver-config.yaml"],
        rendered("kube-apiserver-bootstrap/config")
    );
    assert!(files.contains_key("/etc/kubernetes/static-pod-resources/etcd-member/ca.crt"));
    let (ok, out) = run("ignition-validate", &[d.path().join("ignition/bootstrap.ign").to_str().unwrap()]);
    assert!(ok, "{out}");
    let out = hardshift(&["verify", "--dir", dir]);
    assert!(
        text(&out.stderr).contains(" 0 failed"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = hardshift(&["render", "--dir", dir, "--diff"]);
    let diff = text(&out.stdout);
    assert!(diff.contains("\n0 differences between the bundle and the renders"), "{diff}");
    assert!(
        !diff.contains("Secret openshift-config/etcd-client"),
        "the bundle's etcd seeds give way: {diff}"
    );

    // A render that does not make what the next one reads: refused before that one runs, naming
    // the asset; the renders of the last good run stay in DIR/render.
    let omit = wrapper(&w.join("podman-omit"), "STANDIN_OMIT=etcd-client.key");
    let out = render(dir, &env, Some(&omit));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the kube-apiserver render reads tls/etcd-client.key, which is missing"),
        "{err}"
    );
    assert!(
        r.join("renders.json").is_file() && a.join("tls/etcd-client.key").is_file(),
        "the last good renders stay"
    );

    // A render that fails: named, with its own words and where its whole output is.
    let fail = wrapper(&w.join("podman-fail"), "STANDIN_FAIL=cluster-kube-scheduler-operator");
    let out = render(dir, &env, Some(&fail));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the kube-scheduler render") && err.contains("failing as asked"),
        "{err}"
    );
    assert!(
        err.contains("logs/kube-scheduler.log") && err.contains("the renders' work is kept in"),
        "{err}"
    );
    // Only the last failed run's work is kept beside the bundle.
    let left = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".render.new-"))
        .count();
    assert_eq!(left, 1);

    // kill -9 in the middle of the etcd step (its podman network made, its container about to
    // run): DIR/render keeps the last good renders, untouched; the next run clears the dead
    // run's work and network (podman would refuse the same subnet twice) and succeeds.
    let good = std::fs::read(r.join("renders.json")).unwrap();
    let marker = w.join("slow-step.pid");
    let slow = w.join("podman-slow");
    std::fs::write(
        &slow,
        format!(
            "#!/bin/sh\ncase \"$*\" in *--network=*) echo $$ > {m}; sleep 120;; esac\nexec podman \"$@\"\n",
            m = marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&slow, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut args = vec!["render".to_string(), "--dir".into(), dir.into()];
    args.extend(TAGS.iter().map(|t| format!("--image={t}={IMAGE}")));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hardshift"))
        .args(&args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("PODMAN", &slow)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !marker.is_file() || std::fs::read_to_string(&marker).unwrap().trim().is_empty() {
        assert!(start.elapsed().as_secs() < 120, "the slow etcd step never started");
        assert!(child.try_wait().unwrap().is_none(), "render ended before its etcd step");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let dead = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    let step: i32 = std::fs::read_to_string(&marker).unwrap().trim().parse().unwrap();
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(step), nix::sys::signal::Signal::SIGKILL);
    assert_eq!(std::fs::read(r.join("renders.json")).unwrap(), good, "the last good renders stay");
    assert!(d.path().join(format!(".render.new-{dead}")).is_dir());
    let (_, nets) = common::podman::run(&env, &["network", "ls", "--format", "{{.Name}}"]);
    assert!(nets.contains(&format!("hardshift-render-{dead}")), "{nets}");
    let out = render(dir, &env, None);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let (_, nets) = common::podman::run(&env, &["network", "ls", "--format", "{{.Name}}"]);
    assert!(!nets.contains("hardshift-render"), "{nets}");
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(".render"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let again: Value = serde_json::from_slice(&std::fs::read(r.join("renders.json")).unwrap()).unwrap();
    assert_eq!(again["steps"].as_array().unwrap().len(), 7);
    let _ = common::podman::run(&env, &["rmi", "-f", IMAGE]);
}

/// A render's output is data (issue 36, items 1 and 2): a link (to a host file, to a directory
/// outside, or where bootkube's copy writes), a second name for a file or a FIFO a render leaves
/// fails the render with exit 2, naming it, nothing read or written through it, the last good
/// renders kept; a link planted in DIR/render after the render is refused by create; every output
/// is hashed in renders.json and verify names a file changed, added or removed since; a render's
/// child is dead when render returns; a render's output not in UTF-8 still shows; a corrupt
/// renders.json is named by create.
#[test]
fn a_renders_output_is_data_never_a_path_to_follow() {
    let _one = one_at_a_time();
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let env = standin(w, &["ln", "rm", "mkfifo"]);
    let r = d.path().join("render");
    let a = r.join("assets");

    // Every podman run leaves a child in its process group that would write into the renders'
    // work later: each is killed when its step ends, before render returns.
    let children = w.join("children");
    let linger = podman_script(
        &w.join("podman-linger"),
        &format!("(sleep 1000; echo late > \"$v/late\") & echo $! >> {}", children.display()),
        None,
    );
    let out = render(dir, &env, Some(&linger));
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let left = pids(&children);
    assert_eq!(left.len(), 7, "{left:?}");
    for pid in left {
        assert!(gone(pid), "a render's child ({pid}) outlived render");
    }
    let good = tree(&r);

    // What a tampered render leaves: refused after its step, by name, exit 2.
    let secret = w.join("host-secret");
    std::fs::write(&secret, "HOST SECRET").unwrap();
    let outside = w.join("outside");
    std::fs::create_dir(&outside).unwrap();
    let (s, o) = (secret.display(), outside.display());
    let cases = [
        // A host file, which bootkube's copy of etcd-bootstrap/tls/ to tls/ would read.
        (
            format!("ln -s {s} /assets/etcd-bootstrap/tls/leak.crt"),
            "assets/etcd-bootstrap/tls/leak.crt",
            "a symbolic link (to ",
        ),
        // A directory outside, the same.
        (
            format!("ln -s {o} /assets/etcd-bootstrap/tls/more"),
            "assets/etcd-bootstrap/tls/more",
            "a symbolic link",
        ),
        // tls/ itself outside: bootkube's copy into it would write there.
        (
            format!("rm -rf /assets/tls && ln -s {o} /assets/tls"),
            "assets/tls",
            "a symbolic link",
        ),
        (
            "ln /assets/etcd-bootstrap/tls/etcd-client.crt /assets/etcd-bootstrap/tls/twice.crt".into(),
            "assets/etcd-bootstrap/tls/etcd-client.crt",
            "a hard link (2 names",
        ),
        ("mkfifo /assets/pipe.yaml".into(), "assets/pipe.yaml", "a FIFO"),
    ];
    for (cmd, named, what) in &cases {
        let tampered = podman_script(
            &w.join("podman-tampered"),
            ":",
            Some(&format!("STANDIN_DO=cluster-etcd-operator|{cmd}")),
        );
        let out = render(dir, &env, Some(&tampered));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains(&format!("the etcd render ({IMAGE}) left {named}: {what}")),
            "{cmd}: {err}"
        );
        assert!(std::fs::read_dir(&outside).unwrap().next().is_none(), "{cmd}: written outside");
        assert_eq!(tree(&r), good, "{cmd}: DIR/render keeps the last good renders");
        let leaked: Vec<String> = tree(d.path())
            .into_iter()
            .filter(|(_, b)| b.windows(11).any(|w| w == b"HOST SECRET"))
            .map(|(p, _)| p)
            .collect();
        assert!(leaked.is_empty(), "{cmd}: the host's file was read into {leaked:?}");
    }

    // A link planted in DIR/render after the render: create refuses it by name, nothing written.
    std::os::unix::fs::symlink(&secret, a.join("tls/planted.crt")).unwrap();
    let before = tree(d.path());
    let out = hardshift(&["create", "--dir", dir, "--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("render/assets/tls/planted.crt: a symbolic link (to "), "{err}");
    assert_eq!(before, tree(d.path()), "nothing written");
    std::fs::remove_file(a.join("tls/planted.crt")).unwrap();

    // Every output's hash is recorded; verify agrees with a bundle made from them.
    let record: Value = serde_json::from_slice(&std::fs::read(r.join("renders.json")).unwrap()).unwrap();
    let outputs = record["outputs"].as_object().expect("renders.json records the outputs");
    assert_eq!(
        outputs["assets/bootstrap-manifests/kube-apiserver-pod.yaml"],
        hardshift_generator::bundle::sha256_hex(&std::fs::read(a.join("bootstrap-manifests/kube-apiserver-pod.yaml")).unwrap())
    );
    assert!(outputs.contains_key("logs/etcd.log") && !outputs.contains_key("renders.json"));
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let out = hardshift(&["verify", "--dir", dir]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success() && all.contains(" 0 failed"), "{all}");
    assert!(all.contains("files as the renders made them"), "{all}");

    // A static pod added, one changed and a log removed after the render, and the bundle made
    // again from them: verify names each.
    let (pod, log) = (a.join("bootstrap-manifests/kube-scheduler-pod.yaml"), r.join("logs/mcc.log"));
    let (pod_bytes, log_bytes) = (std::fs::read(&pod).unwrap(), std::fs::read(&log).unwrap());
    let extra = a.join("bootstrap-manifests/extra-pod.yaml");
    std::fs::write(
        &extra,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: extra\n  namespace: kube-system\n",
    )
    .unwrap();
    std::fs::write(&pod, [pod_bytes.as_slice(), b"# edited\n"].concat()).unwrap();
    std::fs::remove_file(&log).unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let out = hardshift(&["verify", "--dir", dir]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    for named in [
        "assets/bootstrap-manifests/extra-pod.yaml (added)",
        "assets/bootstrap-manifests/kube-scheduler-pod.yaml (changed)",
        "logs/mcc.log (removed)",
    ] {
        assert!(all.contains(named), "{named}: {all}");
    }
    std::fs::remove_file(&extra).unwrap();
    std::fs::write(&pod, &pod_bytes).unwrap();
    std::fs::write(&log, &log_bytes).unwrap();

    // A record from before the outputs were kept: verify says they are not checked, never that
    // they are.
    let good_record = std::fs::read(r.join("renders.json")).unwrap();
    let mut old: Value = serde_json::from_slice(&good_record).unwrap();
    old.as_object_mut().unwrap().remove("outputs");
    std::fs::write(r.join("renders.json"), serde_json::to_vec_pretty(&old).unwrap()).unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let out = hardshift(&["verify", "--dir", dir]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        all.contains("outputs are unrecorded") && all.contains(&format!("hardshift render --dir {dir}")),
        "{all}"
    );
    assert!(!all.contains("files as the renders made them"), "{all}");

    // A corrupt record: create names it, where it stops reading, exit 2, nothing written.
    std::fs::write(r.join("renders.json"), b"{\"release\": ").unwrap();
    let before = tree(d.path());
    let out = hardshift(&["create", "--dir", dir, "--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("render/renders.json: ") && err.contains("line 1 column"), "{err}");
    assert_eq!(before, tree(d.path()), "nothing written");
    std::fs::write(r.join("renders.json"), &good_record).unwrap();

    // A render whose output is not UTF-8: its words still show.
    let garbled = podman_script(
        &w.join("podman-garbled"),
        "printf '\\377\\376 not UTF-8\\n'",
        Some("STANDIN_FAIL=cluster-kube-scheduler-operator"),
    );
    let out = render(dir, &env, Some(&garbled));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not UTF-8") && err.contains("failing as asked"), "{err}");
    let _ = common::podman::run(&env, &["rmi", "-f", IMAGE]);
}

/// A render step has a deadline (issue 36, item 5): a podman that hangs, and ignores SIGTERM, is
/// stopped at `--step-timeout` with everything it started, named, its work kept for a look.
#[test]
fn a_render_step_has_a_deadline() {
    let _one = one_at_a_time();
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let w = tempfile::tempdir().unwrap();
    let started = w.path().join("started");
    let hang = podman_script(
        &w.path().join("podman-hang"),
        &format!(
            "trap '' TERM; echo $$ >> {p}; sleep 1000 & echo $! >> {p}; exec sleep 1000",
            p = started.display()
        ),
        None,
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hardshift"))
        .args(["render", "--dir", dir, "--step-timeout", "2s"])
        .env("PODMAN", &hang)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the api render") && err.contains("did not finish within 2s (--step-timeout)"),
        "{err}"
    );
    assert!(err.contains("the renders' work is kept in"), "{err}");
    let left = pids(&started);
    assert_eq!(left.len(), 2, "{left:?}");
    for pid in left {
        assert!(gone(pid), "the hung step's process {pid} outlived render");
    }
    assert!(!d.path().join("render").exists());
    // A deadline that is not one.
    for bad in ["0s", "soon"] {
        let out = hardshift(&["render", "--dir", dir, "--step-timeout", bad]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--step-timeout") && err.contains(bad), "{bad}: {err}");
    }
    // An image for no render, or not TAG=PULLSPEC.
    for (bad, said) in [
        ("etcd-operator=x/y:1", "no render runs the \"etcd-operator\" image"),
        ("cluster-etcd-operator", "expected TAG=PULLSPEC"),
    ] {
        let out = hardshift(&["render", "--dir", dir, "--image", bad]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--image") && err.contains(said), "{bad}: {err}");
    }
}

/// With OpenShift 4.18's own renders (built by hand into `HARDSHIFT_OCP_BIN`, run by
/// tests/fixtures/podman-ocp-bin in place of the release's images): every render runs on the
/// example bundle, and what they load from the bundle's layout is the bundle's own, never empty.
#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN: OpenShift 4.18's cluster-config-api render, cluster-etcd-operator, cluster-kube-apiserver-operator, -controller-manager- and -scheduler-operator (with their templates in bootkube-templates/), machine-config-operator and -controller, built by hand"]
fn the_releases_own_renders_run_on_the_bundle() {
    let bin = std::env::var("HARDSHIFT_OCP_BIN").expect("HARDSHIFT_OCP_BIN (see hack/tiers)");
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let out = renders::render_with_release_programs(d.path(), &bin);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    let a = d.path().join("render/assets");
    // etcd's pod and certificates for the bootstrap's name and address.
    let boot = bootstrap(d.path());
    let etcd = std::fs::read_to_string(a.join("etcd-bootstrap/etc-kubernetes/manifests/etcd-member-pod.yaml")).unwrap();
    assert!(etcd.contains(boot["ip"].as_str().unwrap()), "{etcd}");
    let host = boot["hostname"].as_str().unwrap();
    assert!(a
        .join(format!(
            "etcd-bootstrap/etc-kubernetes/static-pod-resources/etcd-member/etcd-all-certs/etcd-serving-{host}.crt"
        ))
        .is_file());
    // What the kube-apiserver render loaded from tls/ is the bundle's, not empty.
    let object = |kind: &str, name: &str| -> Value {
        std::fs::read_dir(a.join("manifests"))
            .unwrap()
            .flatten()
            .filter_map(|e| hardshift_generator::config::yaml::parse(&std::fs::read_to_string(e.path()).ok()?).ok())
            .map(|d| d.value)
            .find(|v| v["kind"] == kind && v["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in the rendered manifests"))
    };
    let signer = object("Secret", "aggregator-client-signer");
    use base64::Engine;
    let crt = base64::engine::general_purpose::STANDARD
        .decode(signer["data"]["tls.crt"].as_str().unwrap())
        .unwrap();
    assert_eq!(crt, std::fs::read(d.path().join("pki/front-proxy-ca.crt")).unwrap());
    for cm in [
        "admin-kubeconfig-client-ca",
        "csr-controller-ca",
        "kubelet-bootstrap-kubeconfig",
        "sa-token-signing-certs",
    ] {
        let v = object("ConfigMap", cm);
        let data: Vec<&str> = v["data"].as_object().unwrap().values().filter_map(|d| d.as_str()).collect();
        assert!(
            !data.is_empty() && data.iter().all(|d| d.contains("-----BEGIN ")),
            "{cm} is empty: {v}"
        );
    }
    // The bundle's own serving and client signers, as the operators will keep them.
    for (secret, ca) in [
        ("loadbalancer-serving-signer", "kube-apiserver-lb-signer"),
        ("csr-signer-signer", "kubelet-signer"),
    ] {
        let v = object("Secret", secret);
        let crt = base64::engine::general_purpose::STANDARD
            .decode(v["data"]["tls.crt"].as_str().unwrap())
            .unwrap();
        assert_eq!(crt, std::fs::read(d.path().join(format!("pki/{ca}.crt"))).unwrap(), "{secret}");
    }
    // The bound-token key is the bundle's: the render made none of its own.
    assert_eq!(
        std::fs::read(a.join("tls/bound-service-account-signing-key.key")).unwrap(),
        std::fs::read(d.path().join("pki/service-account.key")).unwrap()
    );
    for pod in [
        "kube-apiserver-pod.yaml",
        "kube-controller-manager-pod.yaml",
        "kube-scheduler-pod.yaml",
    ] {
        assert!(a.join("bootstrap-manifests").join(pod).is_file(), "{pod}");
    }
    let rendered: Vec<String> = std::fs::read_dir(a.join("mcc-output/machine-configs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert!(rendered.iter().any(|n| n.starts_with("rendered-master-")), "{rendered:?}");
    // create merges the masters and workers into what the release's controller rendered, and
    // verify makes the same bundle again.
    let out = create(
        d.path(),
        &["--key-algorithm", "ecdsa-p256", "--no-agent", "--bootstrap-control-plane", "native"],
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("merged into the release's own rendered MachineConfigs"), "{stdout}");
    let out = hardshift(&["verify", "--dir", dir]);
    assert!(
        text(&out.stderr).contains(" 0 failed"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = hardshift(&["render", "--dir", dir, "--diff", "-o", "json"]);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("render --diff on the example bundle: {} differences", j["differences"]);
    assert!(
        j["differences"].as_u64().unwrap() > 100,
        "hardshift's own control plane differs: {j}"
    );
    // With the renders' control plane on the bootstrap, the real Ignition takes the config, verify
    // agrees (every rendered object against the bundle's CRDs), and nothing differs.
    let out = create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(text(&out.stdout).contains("bootstrap control plane: the release's renders"));
    let (ok, out) = run("ignition-validate", &[d.path().join("ignition/bootstrap.ign").to_str().unwrap()]);
    assert!(ok, "{out}");
    let out = hardshift(&["verify", "--dir", dir]);
    assert!(
        text(&out.stderr).contains(" 0 failed"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = hardshift(&["render", "--dir", dir, "--diff", "-o", "json"]);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["differences"], 0, "{j}");
}
