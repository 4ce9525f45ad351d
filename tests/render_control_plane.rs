//! The bootstrap control plane the release's own renders made, running: OpenShift 4.18's renders
//! (`HARDSHIFT_OCP_BIN`) over the example bundle, then the release's Kubernetes 1.31
//! (`HARDSHIFT_KUBE_BIN`: kube-apiserver, -controller-manager, -scheduler of the fork's
//! release-4.18) started from the rendered pods, configs and secrets exactly as the bootstrap's
//! Ignition places them (tests/common/control_plane.rs runs each container as a process with its
//! command), and the bundle's bootkube.sh run to the end against it.

mod common;

use common::renders::render_with_release_programs;
use common::*;

#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN+HARDSHIFT_KUBE_BIN: OpenShift 4.18's renders built by hand (as tests/render.rs) and the release's kube-apiserver, kube-controller-manager, kube-scheduler and kubelet"]
fn the_renders_control_plane_runs_and_bootkube_completes() {
    let bin = std::env::var("HARDSHIFT_OCP_BIN").expect("HARDSHIFT_OCP_BIN (see hack/tiers)");
    assert!(
        std::env::var_os("HARDSHIFT_KUBE_BIN").is_some(),
        "this test also needs HARDSHIFT_KUBE_BIN (see hack/tiers)"
    );
    let d = example_copy();
    common::control_plane::release_crds_into(d.path());
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let out = render_with_release_programs(d.path(), &bin);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    // With renders beside it, create gives the bootstrap their control plane by default.
    let out = create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    assert!(text(&out.stdout).contains("bootstrap control plane: the release's renders"));
    let mut cp = common::control_plane::ControlPlane::start_rendered(d);
    let (ok, out) = cp.run_bootkube_supervised(std::time::Duration::from_secs(900));
    let tails = || {
        ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"]
            .map(|n| format!("--- {n}.log:\n{}", common::control_plane::tail(&cp.log_path(n), 60)))
            .join("\n")
    };
    assert!(ok, "bootkube.sh failed:\n{out}\n{}", tails());
    assert!(out.contains("bootkube.sh: complete: done"), "{out}");
    eprintln!("restarts, as the kubelet would have: {:?}", cp.restarts());
    eprintln!("timings: {:?}", cp.timings);
    // The API is ready: every hook ran, the openshift admission chain among them.
    cp.wait_ready(std::time::Duration::from_secs(120));
    let (ok, out) = cp.kubectl(&["get", "--raw", "/readyz?verbose"]);
    assert!(ok && out.contains("[+]poststarthook/openshift.io-startkubeinformers ok"), "{out}");
    // ... and what the renders made is in the cluster: the SCCs and the etcd render's signer.
    let (ok, out) = cp.kubectl(&[
        "get",
        "securitycontextconstraints.security.openshift.io",
        "restricted-v2",
        "-o",
        "name",
    ]);
    assert!(ok, "{out}");
    let (ok, out) = cp.kubectl(&["-n", "openshift-etcd", "get", "secret", "etcd-signer", "-o", "name"]);
    assert!(ok, "{out}");
    // The rendered controller-manager and scheduler run with their rendered kubeconfigs and
    // certificates: each holds its leader lease.
    for lease in ["kube-controller-manager", "kube-scheduler"] {
        cp.wait(&format!("the {lease} lease"), std::time::Duration::from_secs(180), lease, |cp| {
            let (ok, out) = cp.kubectl(&["-n", "kube-system", "get", "lease", lease, "-o", "jsonpath={.spec.holderIdentity}"]);
            if ok && !out.trim().is_empty() {
                Ok(())
            } else {
                Err(out)
            }
        });
    }
}

/// A single node (issue 40): the release's renders on its assets (the etcd render picks its
/// bootstrap-in-place strategy from install-config), their control plane from the node's live
/// config, bootkube to the end; the single-node topology read back from the real API server;
/// then the live system's install-to-disk step as the node runs it (etcd stopped, the master's
/// config made by the agent from the generated script's own carry list), a "reboot" into a root
/// laid out from that config alone, the carried control plane up again with the cluster's state,
/// and the post-reboot step to where it waits for a kubelet.
#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN+HARDSHIFT_KUBE_BIN: OpenShift 4.18's renders built by hand (as tests/render.rs) and the release's kube-apiserver, kube-controller-manager, kube-scheduler and kubelet"]
fn on_a_single_node_the_renders_run_and_the_installed_system_comes_back_with_the_cluster() {
    use std::time::Duration;
    let bin = std::env::var("HARDSHIFT_OCP_BIN").expect("HARDSHIFT_OCP_BIN (see hack/tiers)");
    let d = single_node(example_copy());
    common::control_plane::release_crds_into(d.path());
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let out = render_with_release_programs(d.path(), &bin);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let out = create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    assert!(text(&out.stdout).contains("bootstrap control plane: the release's renders"));
    let mut cp = common::control_plane::ControlPlane::start_rendered(d);
    let node = cp.lab.boot_host.clone();
    // The release's etcd render chose bootstrap-in-place from the bundle's install-config.
    let etcd = cp.boot.text("/etc/kubernetes/manifests/etcd-member-pod.yaml");
    assert!(
        etcd.contains(&format!("name: etcd-{node}")),
        "the etcd render did not pick bootstrap-in-place:\n{etcd}"
    );
    let (ok, out) = cp.run_bootkube_supervised(Duration::from_secs(900));
    assert!(ok && out.contains("complete: done"), "bootkube.sh failed:\n{out}");
    let get = |cp: &common::control_plane::ControlPlane, args: &[&str]| {
        let (ok, out) = cp.kubectl(args);
        assert!(ok, "kubectl {args:?}: {out}");
        out
    };
    // The topology, as the real API server and the release's CRDs kept it.
    let jp = |p: &str| format!("jsonpath={p}");
    assert_eq!(
        get(
            &cp,
            &[
                "get",
                "infrastructure",
                "cluster",
                "-o",
                &jp("{.status.controlPlaneTopology}/{.status.infrastructureTopology}")
            ]
        ),
        "SingleReplica/SingleReplica"
    );
    assert_eq!(
        get(
            &cp,
            &[
                "get",
                "ingresses.config.openshift.io",
                "cluster",
                "-o",
                &jp("{.status.defaultPlacement}")
            ]
        ),
        "ControlPlane"
    );
    assert_eq!(
        get(
            &cp,
            &[
                "get",
                "schedulers.config.openshift.io",
                "cluster",
                "-o",
                &jp("{.spec.mastersSchedulable}")
            ]
        ),
        "true"
    );
    let ep = get(&cp, &["-n", "openshift-etcd", "get", "configmap", "etcd-endpoints", "-o", "json"]);
    assert!(
        ep.contains(&format!("\"{}\"", cp.lab.bootstrap_ip)) && !ep.contains("etcd-bootstrap"),
        "{ep}"
    );

    // install-to-disk, as the live system runs it: etcd's pod moved aside and etcd stopped, then
    // the agent with the generated script's carry list.
    let script = cp.boot.text("/usr/local/bin/hardshift-install-to-disk.sh");
    cp.stop("etcd");
    std::fs::copy(
        cp.boot.map("/etc/kubernetes/manifests/etcd-member-pod.yaml"),
        cp.boot.map("/opt/openshift/hardshift/etcd-pod.yaml"),
    )
    .unwrap();
    let master_ign = cp.work.path().join("master.ign");
    let mut args: Vec<String> = vec![
        "in-place-config".into(),
        "--base".into(),
        cp.boot.map("/opt/openshift/hardshift/master-base.ign"),
        "--output".into(),
        master_ign.display().to_string(),
    ];
    let carried: Vec<(String, String)> = script
        .lines()
        .filter_map(|l| l.trim().strip_prefix("--carry "))
        .map(|c| {
            // The first word: the script's last --carry ends its command line.
            let c = c.split_whitespace().next().unwrap();
            let (s, d) = c.split_once('=').unwrap();
            (s.to_string(), d.to_string())
        })
        .collect();
    assert!(carried.len() >= 7, "{carried:?}");
    for (s, d) in &carried {
        args.push("--carry".into());
        args.push(format!("{}={d}", cp.boot.map(s)));
    }
    let t = std::time::Instant::now();
    let out = std::process::Command::new(agent_bin()).args(&args).output().unwrap();
    assert!(out.status.success(), "in-place-config: {}", text(&out.stderr));
    eprintln!("{}\nin-place-config took {:.1} s", text(&out.stdout), t.elapsed().as_secs_f64());
    assert!(carried.iter().all(|(_, d)| d.starts_with('/') && !d.contains(' ')), "{carried:?}");
    // Merged into the renders' MachineConfig, it is Ignition 3.4.0 (the MCO's spec), which
    // Debian's ignition-validate (3.3 at most) does not know: validated by the IGNITION tier's
    // when it is given, and laid out and run below either way.
    let version = common::control_plane::load_ign_file(&master_ign).ignition.version;
    let validate = match std::env::var_os("HARDSHIFT_IGNITION_BIN") {
        Some(d) => std::path::Path::new(&d).join("ignition-validate").display().to_string(),
        None if version.as_str() < "3.4.0" => "ignition-validate".into(),
        None => String::new(),
    };
    if validate.is_empty() {
        eprintln!("master.ign (Ignition {version}): not judged by ignition-validate (set HARDSHIFT_IGNITION_BIN)");
    } else {
        let (ok, msg) = run(&validate, &[master_ign.to_str().unwrap()]);
        assert!(ok, "the master's config: {msg}");
    }
    eprintln!("master.ign: {} bytes", std::fs::metadata(&master_ign).unwrap().len());

    // The reboot: a root from master.ign alone; the carried control plane under the installer's names.
    let cfg = common::control_plane::load_ign_file(&master_ign);
    let installed = common::control_plane::NodeRoot::lay(cfg, &cp.work.path().join("installed"));
    for pod in [
        "etcd-pod.yaml",
        "kube-apiserver-pod.yaml",
        "kube-controller-manager-pod.yaml",
        "kube-scheduler-pod.yaml",
    ] {
        assert!(
            std::path::Path::new(&installed.map(&format!("/etc/kubernetes/manifests/{pod}"))).is_file(),
            "{pod}"
        );
    }
    cp.reboot_into(installed);
    cp.run_rendered_pods("etcd-pod.yaml");
    cp.wait_ready(Duration::from_secs(180));
    // The cluster's state came with it: what bootkube applied on the live system.
    get(&cp, &["-n", "openshift-etcd", "get", "secret", "etcd-signer", "-o", "name"]);
    get(
        &cp,
        &[
            "get",
            "securitycontextconstraints.security.openshift.io",
            "restricted-v2",
            "-o",
            "name",
        ],
    );
    // The post-reboot step, paths mapped, to the stage where it waits for the kubelet.
    let mut post = cp.boot.text("/usr/local/bin/hardshift-post-reboot.sh");
    for p in ["/var/lib/hardshift", "/etc/kubernetes", "/opt/openshift"] {
        post = post.replace(p, &cp.boot.map(p));
    }
    let path = cp.work.path().join("post-reboot.sh");
    std::fs::write(&path, post).unwrap();
    let log = cp.log_path("post-reboot");
    let pid = cp.net.spawn_logged("bootstrap", "bash", &[path.display().to_string()], &[], &log);
    let progress = cp.boot.map("/var/lib/hardshift/in-place.json");
    cp.wait(
        "the post-reboot step at approve-csrs",
        Duration::from_secs(180),
        "post-reboot",
        |_| {
            let rec: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&progress).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
            if rec["stage"] == "approve-csrs" {
                Ok(())
            } else {
                Err(rec.to_string())
            }
        },
    );
    cp.net.kill(pid);
    assert_eq!(
        get(
            &cp,
            &["-n", "kube-system", "get", "configmap", "bootstrap", "-o", &jp("{.data.status}")]
        ),
        "complete"
    );
    let (ok, _) = cp.kubectl(&["-n", "openshift-cluster-version", "get", "lease", "version"]);
    assert!(!ok, "the live system's CVO lease was released");
}
