//! `hardshift render` with real podman and a stand-in for the release's images (busybox and a
//! script per program that checks what it is handed and writes what the real one writes): the
//! renders run in bootkube.sh's order over the bundle's installer layout, bootkube's copies
//! between them, the etcd render at the bootstrap's name and address, the outputs and the record
//! kept; a missing asset is refused before the render that reads it; a failing render is named.

mod common;

use common::renders::{self, full_release};
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
    let script = format!("#!/bin/sh\nif [ \"$1\" = run ]; then shift; exec podman run --env={env} \"$@\"; fi\nexec podman \"$@\"\n");
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.to_path_buf()
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
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    full_release(d.path());
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);

    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let env = common::podman::env(w);
    let programs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/render-standin");
    let applets = [
        "sh", "hostname", "ip", "awk", "grep", "base64", "printf", "cp", "mkdir", "head", "cat", "basename", "echo", "sed",
    ];
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mco/worker-machineconfig.json");
    common::podman::standin_image(&env, &w.join("image"), IMAGE, &programs, &applets, &[(&fixture, "fixture.json")]);

    // No diff before there are renders to compare with.
    let out = hardshift(&["render", "--dir", dir, "--diff"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no renders yet") && err.contains("hardshift render --dir"), "{err}");

    // Before a bundle's renders can run, the release must name what they need.
    let bare = example_copy();
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
    assert_eq!(record["version"], "4.18.0");
    assert_eq!(record["kubernetes"], "1.31.5");
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

/// With OpenShift 4.18's own renders (built by hand into `HARDSHIFT_OCP_BIN`, run by
/// tests/fixtures/podman-ocp-bin in place of the release's images): every render runs on the
/// example bundle, and what they load from the bundle's layout is the bundle's own, never empty.
#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN: OpenShift 4.18's cluster-config-api render, cluster-etcd-operator, cluster-kube-apiserver-operator, -controller-manager- and -scheduler-operator (with their templates in bootkube-templates/), machine-config-operator and -controller, built by hand"]
fn the_releases_own_renders_run_on_the_bundle() {
    let bin = std::env::var("HARDSHIFT_OCP_BIN").expect("HARDSHIFT_OCP_BIN (see hack/tiers)");
    let d = example_copy();
    let dir = d.path().to_str().unwrap();
    full_release(d.path());
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
