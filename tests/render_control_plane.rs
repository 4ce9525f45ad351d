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
    assert!(out.contains("bootkube: complete: done"), "{out}");
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
