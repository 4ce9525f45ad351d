//! Past bootkube, the release's operators take over (issue 39, item 3): on the bundle's bootstrap
//! control plane (the release's Kubernetes 1.31, `HARDSHIFT_KUBE_BIN`) after its bootkube.sh
//! completed, OpenShift 4.18's cluster-kube-apiserver-operator, cluster-kube-controller-manager-
//! operator and cluster-etcd-operator (`HARDSHIFT_OCP_BIN`) run as operators for minutes, and the
//! bundle's signers must come out as they went in.
//!
//! As a real cluster runs them, but for the pod: what the CVO applies from the payload first (each
//! operator's own `manifests/`: namespace, operator CR, config, RBAC, service account,
//! ClusterOperator; `payload/<operator>/` in the tier directory), then each operator as a process
//! in the bootstrap's network namespace with the Deployment's command, its config from the
//! payload's ConfigMap and its env from the bundle's release (images, versions), authenticated
//! as its own service account (a bound token from the TokenRequest API, as a pod's projected
//! token), not as an admin.

mod common;

use common::control_plane::*;
use common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The annotations library-go's cert rotation reads to decide whether a signer is kept.
const VALIDITY: [&str; 3] = [
    "auth.openshift.io/certificate-not-after",
    "auth.openshift.io/certificate-not-before",
    "auth.openshift.io/certificate-issuer",
];

/// (namespace, service account, binary, the port its metrics listen on in the bootstrap's namespace)
const OPERATORS: [(&str, &str, &str, u16); 3] = [
    (
        "openshift-kube-apiserver-operator",
        "kube-apiserver-operator",
        "cluster-kube-apiserver-operator",
        18443,
    ),
    (
        "openshift-kube-controller-manager-operator",
        "kube-controller-manager-operator",
        "cluster-kube-controller-manager-operator",
        18444,
    ),
    ("openshift-etcd-operator", "etcd-operator", "cluster-etcd-operator", 18445),
];

/// Why a Degraded condition is not the bundle's doing, when it is one a bootstrap without nodes,
/// without the other operators (service-ca, monitoring, the storage version migrator) and with
/// the operator out of its pod must show; None for any other.
fn not_the_bundles(condition: &str, message: &str) -> Option<&'static str> {
    let every_line = |f: &dyn Fn(&str) -> bool| message.lines().filter(|l| !l.trim().is_empty()).all(f);
    match condition {
        "InstallerControllerDegraded" if message.starts_with("missing required resources") => {
            Some("revision 0 waits for its target config, which waits for a node")
        }
        "RevisionControllerDegraded" if message.contains("\"service-ca\" not found") => {
            Some("the service-ca operator publishes service-ca")
        }
        "RevisionControllerDegraded" if message.contains("\"etcd-pod\" not found") => Some("etcd-pod is written from the nodes' addresses"),
        "EnvVarControllerDegraded" | "ScriptControllerDegraded"
            if message.contains("NodeStatuses") || message.contains("missing env var values") =>
        {
            Some("no node yet")
        }
        "EtcdMembersControllerDegraded" | "EtcdEndpointsDegraded" | "ClusterMemberControllerDegraded"
            if message.contains("cached client") =>
        {
            Some("the operator's etcd client reads the pod's mounted etcd-client Secret; a process has no such mount")
        }
        c if c.ends_with("StaticResourcesDegraded") && every_line(&|l| l.contains("could not find the requested resource")) => {
            Some("monitoring's and the storage version migrator's CRDs come with other operators")
        }
        _ => None,
    }
}

/// The seeded signers that are gone, or whose data or validity annotations changed.
fn replaced(seeded: &BTreeMap<String, Held>, signers: &BTreeSet<String>, after: &BTreeMap<String, Held>) -> Vec<String> {
    let mut changed = vec![];
    for k in signers {
        let h = &seeded[k];
        match after.get(k) {
            None => changed.push(format!("{k}: deleted")),
            Some(a) if a.data != h.data => changed.push(format!("{k}: data replaced")),
            Some(a) if a.validity != h.validity => changed.push(format!("{k}: annotations {:?} -> {:?}", h.validity, a.validity)),
            Some(_) => {}
        }
    }
    changed
}

/// The empty `cluster` config CRs the CVO creates from the payload (create-only: what exists
/// is kept), from `payload/empty-resources/` of the tier directory.
fn cvo_empty_resources(cp: &ControlPlane, bin: &Path) {
    let n = apply_all(cp, &bin.join("payload/empty-resources"));
    assert!(n >= 14, "payload/empty-resources holds {n} files");
}

fn ocp_bin() -> PathBuf {
    PathBuf::from(std::env::var("HARDSHIFT_OCP_BIN").expect("HARDSHIFT_OCP_BIN (see hack/tiers)"))
}

/// A Secret's or ConfigMap's identity and what is compared of it.
#[derive(Debug, Clone, PartialEq)]
struct Held {
    data: BTreeMap<String, String>,
    validity: BTreeMap<String, String>,
    tls: bool,
}

fn held(v: &Value) -> Held {
    let map = |o: &Value| -> BTreeMap<String, String> {
        o.as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let ann = map(&v["metadata"]["annotations"]);
    Held {
        data: map(&v["data"]),
        validity: VALIDITY
            .iter()
            .filter_map(|k| ann.get(*k).map(|a| (k.to_string(), a.clone())))
            .collect(),
        tls: v["type"] == "kubernetes.io/tls",
    }
}

/// Every Secret in the cluster by namespace/name.
fn secrets(cp: &ControlPlane) -> BTreeMap<String, Held> {
    let list = cp.kubectl_json(&["get", "secrets", "-A"]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                format!(
                    "{}/{}",
                    s["metadata"]["namespace"].as_str().unwrap(),
                    s["metadata"]["name"].as_str().unwrap()
                ),
                held(s),
            )
        })
        .collect()
}

/// Every ConfigMap holding a `ca-bundle.crt`, by namespace/name, with the PEM.
fn ca_bundles(cp: &ControlPlane) -> BTreeMap<String, String> {
    let list = cp.kubectl_json(&["get", "configmaps", "-A"]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let pem = c["data"]["ca-bundle.crt"].as_str()?;
            Some((
                format!(
                    "{}/{}",
                    c["metadata"]["namespace"].as_str().unwrap(),
                    c["metadata"]["name"].as_str().unwrap()
                ),
                pem.to_string(),
            ))
        })
        .collect()
}

fn b64(s: &str) -> String {
    use base64::Engine;
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(s).unwrap_or_default()).unwrap_or_default()
}

/// The PEM certificates of a bundle, each normalised to its base64 body (the comparison key).
fn certs(pem: &str) -> Vec<String> {
    pem.split("-----BEGIN CERTIFICATE-----")
        .skip(1)
        .filter_map(|c| c.split("-----END CERTIFICATE-----").next())
        .map(|b| b.split_whitespace().collect::<String>())
        .collect()
}

fn pem_of(body: &str) -> String {
    let lines: Vec<String> = body.as_bytes().chunks(64).map(|c| String::from_utf8_lossy(c).to_string()).collect();
    format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", lines.join("\n"))
}

/// Whether the first certificate of `pem` is a CA (basicConstraints CA:TRUE), by openssl.
fn is_ca(dir: &Path, pem: &str) -> bool {
    let f = dir.join("is-ca.pem");
    std::fs::write(&f, pem).unwrap();
    let (ok, out) = run(
        "openssl",
        &["x509", "-in", f.to_str().unwrap(), "-noout", "-ext", "basicConstraints"],
    );
    ok && out.contains("CA:TRUE")
}

/// `openssl verify` of the leaf (first certificate of `pem`, the rest untrusted intermediates)
/// against the CAs in `cafile`.
fn chains(dir: &Path, pem: &str, cafile: &Path) -> (bool, String) {
    let all = certs(pem);
    let leaf = dir.join("leaf.pem");
    std::fs::write(&leaf, pem_of(&all[0])).unwrap();
    let mut args = vec!["verify".to_string(), "-CAfile".into(), cafile.display().to_string()];
    if all.len() > 1 {
        let chain = dir.join("chain.pem");
        std::fs::write(&chain, all[1..].iter().map(|c| pem_of(c)).collect::<String>()).unwrap();
        args.extend(["-untrusted".into(), chain.display().to_string()]);
    }
    args.push(leaf.display().to_string());
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    run("openssl", &a)
}

/// The release's image for `tag` and, for the hyperkube, the Kubernetes version it carries.
fn release(bundle: &Path) -> (String, BTreeMap<String, String>, String) {
    let refs: Value = serde_json::from_str(&std::fs::read_to_string(bundle.join("release/image-references")).unwrap()).unwrap();
    let version = refs["metadata"]["name"].as_str().unwrap().to_string();
    let mut images = BTreeMap::new();
    let mut kube = String::new();
    for t in refs["spec"]["tags"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap().to_string();
        images.insert(name.clone(), t["from"]["name"].as_str().unwrap().to_string());
        if name == "hyperkube" {
            let v = t["annotations"]["io.openshift.build.versions"].as_str().unwrap();
            kube = v.trim_start_matches("kubernetes=").to_string();
        }
    }
    (version, images, kube)
}

/// Apply one operator's payload manifests (the Deployment aside: it runs as a process). Kinds
/// whose CRDs a bootstrap has not (Prometheus', the storage version migrator's) are named, not
/// applied.
fn apply_payload(cp: &ControlPlane, dir: &Path) -> Vec<String> {
    let mut skipped = vec![];
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with(".yaml") || name.contains("_deployment") {
            continue;
        }
        let (ok, out) = cp.kubectl(&["apply", "--server-side", "--force-conflicts", "-f", f.to_str().unwrap()]);
        if !ok {
            assert!(out.contains("no matches for kind"), "{name}: {out}");
            skipped.push(name);
        }
    }
    skipped
}

const MCO_NS: &str = "openshift-machine-config-operator";

/// A payload's manifests as the release carries them: `oc adm release new` replaces the
/// placeholder pull specs (`…placeholdernamespace:TAG`) by the release's image of TAG and
/// `0.0.1-snapshot` by its version; then as `apply_payload`.
fn apply_release_payload(cp: &ControlPlane, dir: &Path, version: &str, images: &BTreeMap<String, String>) -> Vec<String> {
    const PLACEHOLDER: &str = "placeholder.url.oc.will.replace.this.org/placeholdernamespace:";
    let out = cp
        .work
        .path()
        .join(format!("payload-{}", dir.file_name().unwrap().to_string_lossy()));
    std::fs::create_dir_all(&out).unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let mut text = std::fs::read_to_string(&p).unwrap().replace("0.0.1-snapshot", version);
        // What the CVO deletes, not creates (e.g. an old binding of cluster-admin).
        if text.contains("release.openshift.io/delete: \"true\"") {
            continue;
        }
        while let Some(i) = text.find(PLACEHOLDER) {
            let tag: String = text[i + PLACEHOLDER.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            let image = images
                .get(&tag)
                .unwrap_or_else(|| panic!("{}: the release has no {tag} image", p.display()));
            text.replace_range(i..i + PLACEHOLDER.len() + tag.len(), image);
        }
        std::fs::write(out.join(p.file_name().unwrap()), text).unwrap();
    }
    apply_payload(cp, &out)
}

/// A kubeconfig for `sa` in `ns`: a bound token from the TokenRequest API, the server and CA of
/// the bundle's admin kubeconfig (api.<domain>, the load balancer's name).
fn sa_kubeconfig(cp: &ControlPlane, ns: &str, sa: &str, dir: &Path) -> PathBuf {
    let (ok, token) = cp.kubectl(&["-n", ns, "create", "token", sa, "--duration=2h"]);
    assert!(ok, "token for {ns}/{sa}: {token}");
    let admin = std::fs::read_to_string(cp.bundle.path().join("auth/kubeconfig")).unwrap();
    let field = |k: &str| {
        admin
            .lines()
            .find_map(|l| l.trim().strip_prefix(k).map(|v| v.trim().trim_matches('"').to_string()))
            .unwrap_or_else(|| panic!("auth/kubeconfig has no {k}"))
    };
    let (server, ca) = (field("server:"), field("certificate-authority-data:"));
    let kc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {sa}\n  user:\n    token: {}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: {sa}\ncurrent-context: c\n",
        token.trim()
    );
    let p = dir.join(format!("{sa}.kubeconfig"));
    std::fs::write(&p, kc).unwrap();
    p
}

#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN+HARDSHIFT_KUBE_BIN: OpenShift 4.18's cluster-kube-apiserver-, cluster-kube-controller-manager- and cluster-etcd-operator with their payload manifests (payload/<operator>/), built by hand, and the release's kube-apiserver, kube-controller-manager, kube-scheduler and kubelet"]
fn the_releases_operators_run_on_the_bundle_and_keep_its_signers() {
    operators_keep_signers(example_copy());
}

/// The same on a lab with other names and addresses (`common::second_lab`).
#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN+HARDSHIFT_KUBE_BIN: OpenShift 4.18's cluster-kube-apiserver-, cluster-kube-controller-manager- and cluster-etcd-operator with their payload manifests (payload/<operator>/), built by hand, and the release's kube-apiserver, kube-controller-manager, kube-scheduler and kubelet"]
fn on_a_second_lab_the_releases_operators_keep_its_signers() {
    operators_keep_signers(second_lab());
}

fn operators_keep_signers(inputs: tempfile::TempDir) {
    let bin = ocp_bin();
    let secs: u64 = std::env::var("HARDSHIFT_OPERATORS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(180);
    let mut cp = ControlPlane::start_inputs(inputs, &["--no-agent"]);
    let (ok, out) = cp.run_bootkube();
    assert!(ok, "bootkube.sh failed:\n{out}");
    let work = cp.work.path().join("operators");
    std::fs::create_dir_all(&work).unwrap();

    // What the bundle seeded, before any operator ran.
    let before = secrets(&cp);
    let seeded: BTreeMap<String, Held> = before
        .iter()
        .filter(|(k, h)| k.starts_with("openshift-") && (h.tls || h.data.contains_key("tls.crt")))
        .map(|(k, h)| (k.clone(), h.clone()))
        .collect();
    // The bundle's CAs: every CA certificate the seeds and bootkube's CA bundles hold.
    let mut bundle_cas: BTreeSet<String> = BTreeSet::new();
    for h in seeded.values() {
        let pem = b64(h.data.get("tls.crt").map(String::as_str).unwrap_or_default());
        if !pem.is_empty() && is_ca(&work, &pem) {
            bundle_cas.extend(certs(&pem).into_iter().take(1));
        }
    }
    let bundles_before = ca_bundles(&cp);
    for pem in bundles_before.values() {
        for c in certs(pem) {
            if is_ca(&work, &pem_of(&c)) {
                bundle_cas.insert(c);
            }
        }
    }
    let seeded_signers: BTreeSet<String> = seeded
        .iter()
        .filter(|(_, h)| {
            let pem = b64(h.data.get("tls.crt").map(String::as_str).unwrap_or_default());
            !pem.is_empty() && is_ca(&work, &pem)
        })
        .map(|(k, _)| k.clone())
        .collect();
    eprintln!(
        "seeded: {} certificates, {} of them signers: {:?}",
        seeded.len(),
        seeded_signers.len(),
        seeded_signers
    );
    assert!(seeded_signers.len() >= 9, "the bundle's seeded certificates: {:?}", seeded.keys());
    for k in &seeded_signers {
        assert!(seeded[k].validity.len() == 3, "{k}: a signer without its validity annotations");
    }

    // The CVO's part: each operator's payload manifests.
    for (_, _, op, _) in OPERATORS {
        let skipped = apply_payload(&cp, &bin.join("payload").join(op));
        eprintln!("{op}: payload applied; not applied (no such CRD on a bootstrap): {skipped:?}");
    }

    // Other operators' parts these three wait on, played here as those operators write them:
    // the empty `cluster` configs the CVO creates from the payload (openshift/api's
    // empty-resources: create-only, so the bundle's own stay as they are), and the Network status
    // the cluster network operator copies from its spec (the kube-apiserver operator's cert
    // rotation panics without status.serviceNetwork, until the CNO runs on a real cluster too).
    cvo_empty_resources(&cp, &bin);
    let net = cp.kubectl_json(&["get", "networks.config.openshift.io", "cluster"]);
    let status = serde_json::json!({"status": {
        "clusterNetwork": net["spec"]["clusterNetwork"],
        "serviceNetwork": net["spec"]["serviceNetwork"],
        "networkType": net["spec"]["networkType"],
        "clusterNetworkMTU": 1400,
    }});
    let (ok, out) = cp.kubectl(&[
        "patch",
        "networks.config.openshift.io",
        "cluster",
        // The release's Network CRD has no status subresource: status is patched in place.
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    assert!(ok, "network status: {out}");

    // The operators, as their Deployments run them.
    let (version, images, kube) = release(cp.bundle.path());
    let image = |t: &str| images.get(t).cloned().unwrap_or_else(|| panic!("the release has no {t}"));
    let mut pids = BTreeMap::new();
    for (ns, sa, op, port) in OPERATORS {
        let (ok, config) = cp.kubectl(&[
            "-n",
            ns,
            "get",
            "configmap",
            &format!("{}-config", sa),
            "-o",
            "jsonpath={.data.config\\.yaml}",
        ]);
        assert!(ok && config.contains("GenericOperatorConfig"), "{ns}: {config}");
        let cfg = work.join(format!("{op}.yaml"));
        std::fs::write(&cfg, config).unwrap();
        let kc = sa_kubeconfig(&cp, ns, sa, &work);
        let mut env: Vec<(String, String)> = vec![
            ("OPERATOR_IMAGE".into(), image(op)),
            ("OPERATOR_IMAGE_VERSION".into(), version.clone()),
            ("POD_NAME".into(), format!("{sa}-hardshift")),
        ];
        match op {
            "cluster-etcd-operator" => {
                env.push(("IMAGE".into(), image("etcd")));
                env.push(("OPERAND_IMAGE_VERSION".into(), version.clone()));
            }
            _ => {
                env.push(("IMAGE".into(), image("hyperkube")));
                env.push(("OPERAND_IMAGE_VERSION".into(), kube.clone()));
            }
        }
        if op == "cluster-kube-controller-manager-operator" {
            env.push(("CLUSTER_POLICY_CONTROLLER_IMAGE".into(), image("cluster-policy-controller")));
            env.push(("TOOLS_IMAGE".into(), image("tools")));
        }
        let args: Vec<String> = vec![
            "operator".into(),
            format!("--config={}", cfg.display()),
            format!("--kubeconfig={}", kc.display()),
            format!("--namespace={ns}"),
            format!("--listen=0.0.0.0:{port}"),
        ];
        let log = cp.log_path(op);
        let pid = cp.net.spawn_logged("bootstrap", bin.join(op).to_str().unwrap(), &args, &env, &log);
        pids.insert(op, pid);
    }
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        for (op, pid) in &pids {
            if let Some(status) = cp.net.exited(*pid) {
                panic!("{op} exited ({status}) after {:?}:\n{}", t0.elapsed(), tail(&cp.log_path(op), 80));
            }
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    eprintln!("the three operators ran {:?}", t0.elapsed());
    // What they cost on this machine's 2 cores: resident memory (now and peak) and CPU time.
    for (op, pid) in &pids {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kb = |k: &str| {
            status
                .lines()
                .find_map(|l| {
                    l.strip_prefix(k)
                        .map(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().unwrap_or(0.0))
                })
                .unwrap_or(0.0)
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after_comm = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or_default();
        let f: Vec<f64> = after_comm.split(' ').map(|x| x.parse().unwrap_or(0.0)).collect();
        // utime and stime are fields 14 and 15 of /proc/PID/stat, in clock ticks (100 a second).
        let cpu = (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0;
        eprintln!(
            "measured: {op}: RSS {:.0} MB (peak {:.0} MB), CPU {cpu:.1} s in {:.0} s ({:.1} % of a core)",
            kb("VmRSS:") / 1024.0,
            kb("VmHWM:") / 1024.0,
            t0.elapsed().as_secs_f64(),
            100.0 * cpu / t0.elapsed().as_secs_f64()
        );
    }

    // 1. Every seeded certificate and its validity annotations are unchanged.
    let after = secrets(&cp);
    let changed = replaced(&seeded, &seeded_signers, &after);
    let leaves_reissued: Vec<&String> = seeded
        .iter()
        .filter(|(k, h)| !seeded_signers.contains(*k) && after.get(*k) != Some(h))
        .map(|(k, _)| k)
        .collect();

    // 2. What the operators issued: new or re-issued TLS Secrets.
    let cafile = work.join("bundle-cas.pem");
    std::fs::write(&cafile, bundle_cas.iter().map(|c| pem_of(c)).collect::<String>()).unwrap();
    let mut own_signers = BTreeMap::new();
    let mut issued = vec![];
    let mut stray = vec![];
    for (k, a) in &after {
        if before.get(k) == Some(a) {
            continue;
        }
        let pem = b64(a.data.get("tls.crt").map(String::as_str).unwrap_or_default());
        if pem.is_empty() || certs(&pem).is_empty() {
            continue;
        }
        if is_ca(&work, &pem) && !chains(&work, &pem, &cafile).0 {
            own_signers.insert(k.clone(), certs(&pem)[0].clone());
            continue;
        }
        issued.push((k.clone(), pem));
    }
    let owncas = work.join("own-and-bundle-cas.pem");
    std::fs::write(
        &owncas,
        bundle_cas.iter().chain(own_signers.values()).map(|c| pem_of(c)).collect::<String>(),
    )
    .unwrap();
    let mut by_bundle = vec![];
    let mut by_own = vec![];
    for (k, pem) in &issued {
        if chains(&work, pem, &cafile).0 {
            by_bundle.push(k.clone());
        } else if chains(&work, pem, &owncas).0 {
            by_own.push(k.clone());
        } else {
            stray.push(format!("{k}: {}", chains(&work, pem, &owncas).1));
        }
    }
    eprintln!("seeded leaf certificates the operators re-issued: {leaves_reissued:?}");
    eprintln!(
        "issued by the operators, chaining to the bundle's signers ({}): {by_bundle:?}",
        by_bundle.len()
    );
    eprintln!(
        "the operators' own signers (none seeded by the bundle, as by the installer): {:?}",
        own_signers.keys()
    );
    eprintln!("issued from those: {by_own:?}");

    // 3. The CA bundles they publish hold the bundle's CAs.
    let bundles_after = ca_bundles(&cp);
    let mut published = BTreeMap::new();
    for (k, pem) in &bundles_after {
        if bundles_before.get(k) == Some(pem) {
            continue;
        }
        let inside: BTreeSet<String> = certs(pem).into_iter().collect();
        let ours = inside.intersection(&bundle_cas).count();
        published.insert(k.clone(), (ours, inside.len()));
    }
    eprintln!("CA bundles published or changed (bundle CAs held / certificates): {published:?}");

    // 4. ClusterOperators and the operators' own conditions.
    let cos = cp.kubectl_json(&["get", "clusteroperators"]);
    let mut degraded = vec![];
    for co in cos["items"].as_array().unwrap() {
        let name = co["metadata"]["name"].as_str().unwrap();
        for c in co["status"]["conditions"].as_array().into_iter().flatten() {
            eprintln!(
                "clusteroperator {name}: {}={} {}: {}",
                c["type"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or_default(),
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            );
        }
    }
    let mut waiting = vec![];
    for kind in ["kubeapiserver", "kubecontrollermanager", "etcd"] {
        let cr = cp.kubectl_json(&["get", &format!("{kind}.operator.openshift.io"), "cluster"]);
        for c in cr["status"]["conditions"].as_array().into_iter().flatten() {
            let (t, s) = (c["type"].as_str().unwrap_or_default(), c["status"].as_str().unwrap_or_default());
            if t.ends_with("Degraded") && s == "True" {
                let message = c["message"].as_str().unwrap_or_default();
                match not_the_bundles(t, message) {
                    Some(why) => waiting.push(format!("{kind}: {t} ({why})")),
                    None => degraded.push(format!("{kind}: {t}: {message}")),
                }
            }
        }
    }
    for w in &waiting {
        eprintln!("degraded for want of what a bootstrap has not: {w}");
    }
    for op in pids.keys() {
        eprintln!("--- {op} (tail):\n{}", tail(&cp.log_path(op), 30));
    }
    assert!(changed.is_empty(), "the operators replaced the bundle's seeds: {changed:#?}");
    assert!(
        degraded.is_empty(),
        "degraded, and not for want of nodes or other operators: {degraded:#?}"
    );
    // The CA bundles they publish hold the bundle's CAs, where each client looks for them.
    let cert_of = |k: &str| certs(&b64(&before[k].data["tls.crt"]))[0].clone();
    let holds = |bundle: &str, want: &[String]| {
        let pem = bundles_after.get(bundle).unwrap_or_else(|| panic!("{bundle} was not published"));
        let inside = certs(pem);
        for w in want {
            assert!(inside.contains(w), "{bundle} lacks one of the bundle's CAs");
        }
    };
    let kas = |n: &str| cert_of(&format!("openshift-kube-apiserver-operator/{n}"));
    holds(
        "openshift-config-managed/kube-apiserver-server-ca",
        &[
            kas("localhost-serving-signer"),
            kas("service-network-serving-signer"),
            kas("loadbalancer-serving-signer"),
        ],
    );
    let admin_ca = certs(&bundles_before["openshift-config/admin-kubeconfig-client-ca"]);
    holds("openshift-config-managed/kube-apiserver-client-ca", &admin_ca);
    holds(
        "openshift-config-managed/kube-apiserver-client-ca",
        &[kas("kube-control-plane-signer")],
    );
    holds(
        "openshift-config-managed/kube-apiserver-aggregator-client-ca",
        &[kas("aggregator-client-signer")],
    );
    holds("openshift-etcd-operator/etcd-ca-bundle", &[cert_of("openshift-etcd/etcd-signer")]);

    // The check can fail: a signer without its validity annotations (as a bundle that seeded
    // none would have it) is replaced by the operator's cert rotation with a CA of its own.
    let (ns, name) = ("openshift-kube-apiserver-operator", "kube-control-plane-signer");
    let (ok, out) = cp.kubectl(&["-n", ns, "annotate", "secret", name, &format!("{}-", VALIDITY[0])]);
    assert!(ok, "{out}");
    let key = format!("{ns}/{name}");
    let t = Instant::now();
    let replaced_now = cp.wait(
        "the operator to replace a signer without its annotations",
        Duration::from_secs(120),
        "cluster-kube-apiserver-operator",
        |cp| {
            let now = secrets(cp);
            let r = replaced(&seeded, &seeded_signers, &now);
            if r.iter().any(|c| c.starts_with(&format!("{key}: data replaced"))) {
                Ok(r)
            } else {
                Err(format!("{r:?}"))
            }
        },
    );
    eprintln!("without its annotations, {key} was replaced in {:?}: {replaced_now:?}", t.elapsed());
    assert!(stray.is_empty(), "certificates chaining to no known signer: {stray:#?}");
    assert!(
        !by_bundle.is_empty(),
        "the operators issued nothing from the bundle's signers in {secs} s"
    );
}

/// The objects of every YAML file in `dir` applied (documents split by kubectl itself).
fn apply_all(cp: &ControlPlane, dir: &Path) -> usize {
    let mut n = 0;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "yaml" || e == "yml")) {
        let (ok, out) = cp.kubectl(&["create", "-f", f.to_str().unwrap()]);
        assert!(ok || out.contains("AlreadyExists"), "{}: {out}", f.display());
        n += 1;
    }
    n
}

/// The names of the MachineConfigs a rendered config was made from (its pool's status source).
fn sources(pool: &Value) -> Vec<String> {
    pool["spec"]["configuration"]["source"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str().map(str::to_string))
        .collect()
}

#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN+HARDSHIFT_KUBE_BIN: OpenShift 4.18's machine-config-operator and -controller (with mcc-templates/ and the MCO's payload/machine-config-operator/) and the cluster-config-api render, built by hand, and the release's kube-apiserver, kube-controller-manager, kube-scheduler and kubelet"]
fn the_releases_machine_config_controller_renders_in_the_cluster_the_config_each_node_was_told() {
    mcc_renders_what_nodes_were_told(example_copy());
}

/// The same on a lab with other names and addresses (`common::second_lab`).
#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN+HARDSHIFT_KUBE_BIN: OpenShift 4.18's machine-config-operator and -controller (with mcc-templates/ and the MCO's payload/machine-config-operator/) and the cluster-config-api render, built by hand, and the release's kube-apiserver, kube-controller-manager, kube-scheduler and kubelet"]
fn on_a_second_lab_the_clusters_controller_renders_the_config_each_node_was_told() {
    mcc_renders_what_nodes_were_told(second_lab());
}

fn mcc_renders_what_nodes_were_told(d: tempfile::TempDir) {
    let bin = ocp_bin();
    release_crds_into(d.path());
    create(d.path(), &["--no-agent"]);
    common::renders::mco_render_with_release_programs(d.path(), bin.to_str().unwrap());
    create(d.path(), &["--no-agent"]);
    // What each node was told it runs: the MCS's node annotations in its config. A machine-config
    // daemon finding no MachineConfig of that name in the cluster degrades the node.
    let lab = Lab::of(d.path());
    let (masters, workers) = (lab.of_role(Role::Master), lab.of_role(Role::Worker));
    let told: BTreeMap<String, String> = masters
        .iter()
        .chain(&workers)
        .map(|n| {
            let files = node_files(d.path(), n);
            let ann: Value = serde_json::from_slice(&files["/etc/machine-config-daemon/node-annotations.json"]).unwrap();
            let cur = ann["machineconfiguration.openshift.io/currentConfig"].as_str().unwrap().to_string();
            (n.to_string(), cur)
        })
        .collect();
    let boot = d.path().join("mco/rendered/mcs-bootstrap");
    let mut boot_mcs: Vec<String> = std::fs::read_dir(boot.join("machine-configs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".yaml").to_string())
        .collect();
    boot_mcs.sort();
    let (version, _, _) = release(d.path());

    let mut cp = ControlPlane::start_from(d, |_| {});
    let (ok, out) = cp.run_bootkube();
    assert!(ok, "bootkube.sh failed:\n{out}");
    // The operator's part, which waits for its controller's Deployment to roll out before it
    // writes the ControllerConfig (no node here runs it): the pools and the ControllerConfig its
    // bootstrap render made from the same manifests.
    cvo_empty_resources(&cp, &bin);
    // The CVO's status: the release it installs (the registries controller keeps the payload's
    // repository out of blocked registries by it, and writes nothing until it parses).
    let cc = std::fs::read_to_string(boot.join("controller-config/machine-config-controller.yaml")).unwrap();
    let release_image = cc
        .lines()
        .find_map(|l| l.trim().strip_prefix("releaseImage:").map(|v| v.trim().to_string()))
        .expect("the ControllerConfig names the release image");
    // A JSON patch: a merge patch's null would delete availableUpdates, which is required.
    let status = serde_json::json!([{"op": "add", "path": "/status", "value": {
        "desired": {"image": release_image, "version": version},
        "availableUpdates": null,
        "observedGeneration": 1,
        "versionHash": "hardshift-test",
    }}]);
    let (ok, out) = cp.kubectl(&[
        "patch",
        "clusterversion",
        "version",
        "--subresource=status",
        "--type=json",
        "-p",
        &status.to_string(),
    ]);
    assert!(ok, "clusterversion status: {out}");
    // The MCO's payload as the CVO applies it (its Deployment aside: the operator runs as a
    // process), and what it reads of other payloads: the machine API's namespace (its pools'
    // user-data Secrets go there) and the CVO's admin-gates.
    let (_, images, _) = release(cp.bundle.path());
    let skipped = apply_release_payload(&cp, &bin.join("payload/machine-config-operator"), &version, &images);
    eprintln!("machine-config-operator: payload applied; not applied (no such CRD on a bootstrap): {skipped:?}");
    for args in [
        &["create", "namespace", "openshift-machine-api"][..],
        &["-n", "openshift-config-managed", "create", "configmap", "admin-gates"],
    ] {
        let (ok, out) = cp.kubectl(args);
        assert!(ok, "kubectl {args:?}: {out}");
    }
    let kc = cp.boot.map("/etc/kubernetes/kubeconfigs/localhost.kubeconfig");
    let args: Vec<String> = vec![
        "start".into(),
        format!("--kubeconfig={kc}"),
        "--resourcelock-namespace=openshift-machine-config-operator".into(),
        format!("--payload-version={version}"),
        format!("--templates={}", bin.join("mcc-templates").display()),
        "--metrics-listen-address=127.0.0.1:18797".into(),
    ];
    let log = cp.log_path("machine-config-controller");
    let pid = cp.net.spawn_logged(
        "bootstrap",
        bin.join("machine-config-controller").to_str().unwrap(),
        &args,
        &[],
        &log,
    );
    cp.pids.insert("machine-config-controller".into(), pid);
    // The operator, in operator mode, as its Deployment runs it: its images.json from the
    // ConfigMap the Deployment mounts, its service account's token.
    let work = cp.work.path().join("mco");
    std::fs::create_dir_all(&work).unwrap();
    let cm = cp.kubectl_json(&["-n", MCO_NS, "get", "configmap", "machine-config-operator-images"]);
    let images_json = work.join("images.json");
    std::fs::write(&images_json, cm["data"]["images.json"].as_str().unwrap()).unwrap();
    let kc = sa_kubeconfig(&cp, MCO_NS, "machine-config-operator", &work);
    let args: Vec<String> = vec![
        "start".into(),
        format!("--images-json={}", images_json.display()),
        format!("--payload-version={version}"),
        format!("--operator-image={}", images["machine-config-operator"]),
        format!("--kubeconfig={}", kc.display()),
        "--metrics-listen-address=127.0.0.1:18798".into(),
    ];
    let log = cp.log_path("machine-config-operator");
    let env = [("RELEASE_VERSION".to_string(), version.clone())];
    let pid = cp.net.spawn_logged(
        "bootstrap",
        bin.join("machine-config-operator").to_str().unwrap(),
        &args,
        &env,
        &log,
    );
    cp.pids.insert("machine-config-operator".into(), pid);
    // The operator writes the ControllerConfig once its controller's Deployment has rolled out
    // (sync.go, syncMachineConfigController). No node here runs that pod, and the controller runs
    // as the process above: scale the Deployment to 0 once the operator made it.
    cp.wait(
        "the operator's controller Deployment",
        Duration::from_secs(300),
        "machine-config-operator",
        |cp| {
            let (ok, out) = cp.kubectl(&["-n", MCO_NS, "get", "deployment", "machine-config-controller"]);
            if ok {
                Ok(())
            } else {
                Err(out)
            }
        },
    );
    let (ok, out) = cp.kubectl(&["-n", MCO_NS, "scale", "deployment", "machine-config-controller", "--replicas=0"]);
    assert!(ok, "scale: {out}");
    let cc = cp.wait(
        "the operator's ControllerConfig",
        Duration::from_secs(300),
        "machine-config-operator",
        |cp| {
            let (ok, out) = cp.kubectl(&["get", "controllerconfig", "machine-config-controller", "-o", "json"]);
            if ok {
                serde_json::from_str::<Value>(&out).map_err(|e| e.to_string())
            } else {
                Err(out)
            }
        },
    );
    eprintln!("the operator wrote the ControllerConfig: {}", cc["metadata"]["annotations"]);
    let t0 = Instant::now();
    // The controller renders as each of its sub-controllers (templates, kubelet and node configs,
    // registries) adds its MachineConfig: wait for the render the nodes were told of, or fail
    // with the last one and what it was made from.
    let want = |pool: &str| told[if pool == "master" { &masters[0] } else { &workers[0] }].clone();
    let rendered: BTreeMap<String, Value> = cp.wait(
        "the cluster's controller to render what each node was told",
        Duration::from_secs(240),
        "machine-config-controller",
        |cp| {
            let mut got = BTreeMap::new();
            let (_, names) = cp.kubectl(&["get", "machineconfigs", "-o", "name"]);
            for pool in ["master", "worker"] {
                let p = cp.kubectl_json(&["get", "machineconfigpool", pool]);
                let name = p["spec"]["configuration"]["name"].as_str().unwrap_or_default();
                if name != want(pool) || !names.contains(&format!("/{name}")) {
                    return Err(format!(
                        "{pool}: rendered {name:?} from {:?}, the node was told {}; MachineConfigs: {}",
                        sources(&p),
                        want(pool),
                        names
                            .replace("machineconfig.machineconfiguration.openshift.io/", "")
                            .replace('\n', " ")
                    ));
                }
                got.insert(pool.to_string(), p);
            }
            Ok(got)
        },
    );
    eprintln!("the controller rendered both pools in {:?}", t0.elapsed());
    let list = cp.kubectl_json(&["get", "machineconfigs"]);
    let in_cluster: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    eprintln!("MachineConfigs in the cluster: {in_cluster:?}");
    eprintln!("the bootstrap's: {boot_mcs:?}");
    for (pool, p) in &rendered {
        eprintln!("{pool}: {} from {:?}", p["spec"]["configuration"]["name"], sources(p));
    }
    // What the operator says of itself: the sync steps that wait for nodes (the daemon, the
    // required pools) are named there, not the bundle's inputs.
    let (_, co) = cp.kubectl(&[
        "get",
        "clusteroperator",
        "machine-config",
        "-o",
        "jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{\"\\n\"}{end}",
    ]);
    eprintln!("clusteroperator machine-config:\n{co}");
    for (node, cur) in &told {
        let pool = if masters.contains(node) { "master" } else { "worker" };
        let name = rendered[pool]["spec"]["configuration"]["name"].as_str().unwrap();
        assert_eq!(
            cur,
            name,
            "{node} was told it runs {cur}; the cluster's controller rendered {name} from {:?}",
            sources(&rendered[pool])
        );
        assert!(in_cluster.contains(cur), "{node}'s currentConfig {cur} is not in the cluster");
    }
}

/// `${VAR}` in `word` from `env` (unset: empty, as systemd expands it).
fn expand(word: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = word;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find('}').map(|e| i + e).expect("unclosed ${");
        out.push_str(env.get(&rest[i + 2..end]).map(String::as_str).unwrap_or(""));
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `KEY=VALUE` lines (an EnvironmentFile) into `env`.
fn env_file(text: &str, env: &mut BTreeMap<String, String>) {
    for l in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if let Some((k, v)) = l.split_once('=') {
            env.insert(k.trim().to_string(), v.trim().trim_matches('"').to_string());
        }
    }
}

/// `Environment="A=1" "B=2"` lines of a unit or drop-in into `env`.
fn environment_lines(text: &str, env: &mut BTreeMap<String, String>) {
    for l in text.lines().filter_map(|l| l.trim().strip_prefix("Environment=")) {
        for kv in l.split("\" \"").map(|s| s.trim_matches('"')) {
            if let Some((k, v)) = kv.split_once('=') {
                env.insert(k.to_string(), v.to_string());
            }
        }
    }
}

/// Issue 39, item 1: master-0 joins from the config the MCO rendered for it, its kubelet started as
/// the MCO's kubelet.service says, through `hardshift approve-csrs` alone.
#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN+HARDSHIFT_KUBE_BIN: OpenShift 4.18's machine-config-operator and -controller (with mcc-templates/) and the cluster-config-api render, built by hand, and the release's kube-apiserver, kube-controller-manager, kube-scheduler and kubelet"]
fn master_0_joins_from_its_mco_rendered_config_through_approve_csrs() {
    master_0_joins(example_copy());
}

/// The same on a lab with other names and addresses (`common::second_lab`).
#[test]
#[ignore = "needs HARDSHIFT_OCP_BIN+HARDSHIFT_KUBE_BIN: OpenShift 4.18's machine-config-operator and -controller (with mcc-templates/) and the cluster-config-api render, built by hand, and the release's kube-apiserver, kube-controller-manager, kube-scheduler and kubelet"]
fn on_a_second_lab_its_first_master_joins_from_its_mco_rendered_config() {
    master_0_joins(second_lab());
}

fn master_0_joins(d: tempfile::TempDir) {
    use common::containerd::Containerd;
    let bin = ocp_bin();
    release_crds_into(d.path());
    create(d.path(), &[]);
    common::renders::mco_render_with_release_programs(d.path(), bin.to_str().unwrap());
    let out = create(d.path(), &[]);
    assert!(
        text(&out.stdout).contains("merged into the MCO master base"),
        "{}",
        text(&out.stdout)
    );
    let mut cp = ControlPlane::start_from(d, |_| {});
    let (ok, out) = cp.run_bootkube();
    assert!(ok, "bootkube.sh failed:\n{out}");
    let bootkube_done = Instant::now();
    let bundle = cp.bundle.path().to_path_buf();
    let dir = bundle.to_str().unwrap().to_string();
    let lab = cp.lab.clone();
    let m0_name = lab.master0.as_str();
    // The collector on the helper, watching the API with the admin kubeconfig.
    let collector_log = cp.log_path("collector");
    cp.net.spawn_logged(
        "helper",
        env!("CARGO_BIN_EXE_hardshift"),
        &[
            "collector".into(),
            "--dir".into(),
            dir.clone(),
            "--listen".into(),
            format!("{}:9443", lab.helper_ip),
        ],
        &[],
        &collector_log,
    );

    // The lab's own HAProxy and DNS on the helper, as generated: master-0 resolves every name
    // through the lab's dnsmasq (no /etc/hosts entry of the harness) and reaches api-int through
    // the VIP, where HAProxy forwards to the bootstrap.
    let lab_file = |f: &str| bundle.join("lab").join(f).display().to_string();
    let haproxy_log = cp.log_path("haproxy");
    let pid = cp.net.spawn_logged(
        "helper",
        "haproxy",
        &["-db".into(), "-f".into(), lab_file("haproxy/haproxy.cfg")],
        &[],
        &haproxy_log,
    );
    cp.pids.insert("haproxy".into(), pid);
    let dns_log = cp.log_path("dnsmasq");
    let dns_args: Vec<String> = [
        "-d",
        "-C",
        &lab_file(&format!("dnsmasq/{}-dns.conf", lab.name)),
        &format!("--listen-address={}", lab.helper_ip),
        "--bind-interfaces",
        "--no-resolv",
        "--no-hosts",
        "--pid-file=",
        "--user=root",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let pid = cp.net.spawn_logged("helper", "dnsmasq", &dns_args, &[], &dns_log);
    cp.pids.insert("dnsmasq".into(), pid);
    cp.net.hosts("master-0", &lab.helper_ip, &[]);
    cp.wait(
        "api-int through the lab's DNS and HAProxy",
        Duration::from_secs(60),
        "haproxy",
        |cp| {
            let (ok, out) = cp.exec(
                "master-0",
                "curl",
                &["-sk", "--max-time", "3", &format!("https://api-int.{}:6443/readyz", lab.domain)],
            );
            if ok && out.trim() == "ok" {
                Ok(())
            } else {
                Err(out)
            }
        },
    );
    let (_, resolved) = cp.exec("master-0", "getent", &["hosts", &format!("api-int.{}", lab.domain)]);
    assert!(
        resolved.starts_with(&format!("{} ", lab.api_vip)),
        "api-int from {m0_name}: {resolved}"
    );

    // master-0's filesystem from its complete (MCO-merged) config; containerd (Debian's, serving
    // the CRI that CRI-O serves on RHCOS) answering at CRI-O's socket path.
    let m0 = NodeRoot::lay(load_ign(&bundle, m0_name), &cp.work.path().join("master-0"));
    let ns = cp.net.ns("master-0");
    let ctd = Containerd::start_in(&cp.work.path().join("ctd"), Some(&ns));
    ctd.import_pause(cp.work.path());
    let crio = PathBuf::from(m0.map("/var/run/crio/crio.sock"));
    std::fs::create_dir_all(crio.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&ctd.sock, &crio).unwrap();

    // The MCO's kubelet.service: its ExecStart, with the environment systemd would give it.
    let unit = m0.unit("kubelet.service");
    let mut env = BTreeMap::new();
    environment_lines(&unit, &mut env);
    for path in m0.cfg.storage.files.iter().map(|f| f.path.clone()) {
        if path.starts_with("/etc/systemd/system/kubelet.service.d/") {
            environment_lines(&m0.text(&path), &mut env);
        }
    }
    for d in m0
        .cfg
        .systemd
        .units
        .iter()
        .filter(|u| u.name == "kubelet.service")
        .flat_map(|u| u.dropins.iter())
    {
        environment_lines(d.contents.as_deref().unwrap_or_default(), &mut env);
    }
    // What boot-time units write before the kubelet starts, which do not run here:
    // - the OS image's /etc/os-release (RHCOS: ID=rhcos);
    env.insert("ID".into(), "rhcos".into());
    // - kubelet-auto-node-size.service: its own script, run on the node's sizing inputs;
    let sizing = PathBuf::from(m0.map("/etc/node-sizing.env"));
    let script = m0
        .text("/usr/local/sbin/dynamic-system-reserved-calc.sh")
        .replace("/etc/node-sizing.env", sizing.to_str().unwrap());
    let script_path = cp.work.path().join("dynamic-system-reserved-calc.sh");
    std::fs::write(&script_path, script).unwrap();
    let mut inputs = BTreeMap::new();
    env_file(&m0.text("/etc/node-sizing-enabled.env"), &mut inputs);
    let (ok, out) = run(
        "bash",
        &[
            script_path.to_str().unwrap(),
            &inputs["NODE_SIZING_ENABLED"],
            &inputs["SYSTEM_RESERVED_MEMORY"],
            &inputs["SYSTEM_RESERVED_CPU"],
            &inputs["SYSTEM_RESERVED_ES"],
        ],
    );
    assert!(ok, "dynamic-system-reserved-calc.sh: {out}");
    env_file(&std::fs::read_to_string(&sizing).unwrap(), &mut env);
    // - nodeip-configuration.service (baremetal-runtimecfg's image): the node's address on the
    //   machine network, in its 20-nodenet.conf drop-in;
    env.insert("KUBELET_NODE_IP".into(), lab.master0_ip.clone());
    // - the kernel's hostname, which the kubelet takes with no --hostname-override: the config's.
    env.insert("KUBELET_NODE_NAME".into(), m0.text("/etc/hostname").trim().to_string());
    for f in ["/etc/kubernetes/kubelet-workaround", "/etc/kubernetes/kubelet-env"] {
        if m0.cfg.storage.files.iter().any(|x| x.path == f) {
            env_file(&m0.text(f), &mut env);
        }
    }
    let words: Vec<String> = exec_start(&unit).iter().map(|w| expand(w, &env)).collect();
    assert_eq!(words[..2], ["/usr/local/bin/kubenswrapper", "/usr/bin/kubelet"], "{words:?}");
    let config = words
        .iter()
        .find_map(|w| w.strip_prefix("--config="))
        .expect("--config")
        .to_string();
    // kubelet.conf as the MCO wrote it, but what this shared host cannot give: cgroupfs for
    // systemd as PID 1, no systemCgroups (it would move this machine's processes into
    // /system.slice), no protectKernelDefaults (it demands RHCOS's sysctls of this kernel).
    let mapped = m0.map(&config);
    let mut kc = hardshift_generator::config::yaml::parse(&std::fs::read_to_string(&mapped).unwrap())
        .unwrap()
        .value;
    for p in ["/staticPodPath", "/authentication/x509/clientCAFile"] {
        let f = kc.pointer_mut(p).unwrap_or_else(|| panic!("{config} has no {p}"));
        *f = Value::String(m0.map(f.as_str().unwrap()));
    }
    assert_eq!(kc["cgroupDriver"], "systemd");
    kc["cgroupDriver"] = "cgroupfs".into();
    kc["failCgroupV1"] = false.into();
    kc.as_object_mut().unwrap().remove("systemCgroups");
    kc["protectKernelDefaults"] = false.into();
    std::fs::write(&mapped, serde_json::to_string_pretty(&kc).unwrap()).unwrap();
    let mut args: Vec<String> = vec![m0.map("/usr/local/bin/kubenswrapper"), kube_bin("kubelet").display().to_string()];
    args.extend(words[2..].iter().filter(|w| !w.is_empty()).map(|w| match w.split_once("=/") {
        Some((flag, path)) => format!("{flag}={}", m0.map(&format!("/{path}"))),
        None => w.clone(),
    }));
    args.push(format!("--root-dir={}", m0.map("/var/lib/kubelet")));
    args.push(format!("--cert-dir={}", m0.map("/var/lib/kubelet/pki")));
    eprintln!("{m0_name}'s kubelet: {}", args.join(" "));
    let kubelet_log = cp.log_path("kubelet");
    let t0 = Instant::now();
    let kubelet = cp.net.spawn_logged("master-0", "sh", &args, &[], &kubelet_log);
    eprintln!(
        "measured: bootkube complete → {m0_name}'s kubelet started: {:?} (the test's set-up)",
        bootkube_done.elapsed()
    );
    cp.pids.insert("kubelet".into(), kubelet);

    // Its client CSR, approved by hardshift approve-csrs and nothing else.
    let csr = cp.wait("master-0's client CSR", Duration::from_secs(120), "kubelet", |cp| {
        pending_csr(cp, "kubernetes.io/kube-apiserver-client-kubelet")
    });
    let name = csr["metadata"]["name"].as_str().unwrap().to_string();
    let out = approve_csrs(&cp);
    assert!(out.contains(&format!("approved {name}")), "{out}");
    let node = cp.wait(&format!("Node {m0_name}"), Duration::from_secs(120), "kubelet", |cp| {
        let (ok, out) = cp.kubectl(&["get", "node", m0_name, "-o", "json"]);
        if ok {
            serde_json::from_str::<Value>(&out).map_err(|e| e.to_string())
        } else {
            Err(out)
        }
    });
    eprintln!(
        "measured: {m0_name} registered {:?} after its kubelet started, {:?} after bootkube completed",
        t0.elapsed(),
        bootkube_done.elapsed()
    );
    // The MCO's labels and taint, the node's address.
    let labels = &node["metadata"]["labels"];
    for (k, v) in [
        ("node-role.kubernetes.io/master", ""),
        ("node-role.kubernetes.io/control-plane", ""),
        ("node.openshift.io/os_id", "rhcos"),
        ("kubernetes.io/hostname", m0_name),
    ] {
        assert_eq!(labels[k], v, "{k}: {labels}");
    }
    let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == "node-role.kubernetes.io/master" && t["effect"] == "NoSchedule"),
        "{taints:?}"
    );
    let addr = node["status"]["addresses"].as_array().unwrap();
    assert!(
        addr.iter()
            .any(|a| a["type"] == "InternalIP" && a["address"] == lab.master0_ip.as_str()),
        "{addr:?}"
    );
    // Its serving CSR, the same way; then the API server reaches it.
    let csr = cp.wait("master-0's serving CSR", Duration::from_secs(120), "kubelet", |cp| {
        pending_csr(cp, "kubernetes.io/kubelet-serving")
    });
    let name = csr["metadata"]["name"].as_str().unwrap().to_string();
    let out = approve_csrs(&cp);
    assert!(out.contains(&format!("approved {name}")), "{out}");
    wait_kubelet_proxy(&cp, m0_name);
    // NotReady, for want of a CNI (the network operator's, which does not run here).
    let ready = node_condition(&cp, m0_name, "Ready").unwrap();
    assert_eq!(ready["status"], "False", "{ready}");
    assert!(
        ready["message"].as_str().unwrap_or_default().contains("NetworkReady=false"),
        "{ready}"
    );

    // The node's agent, from master-0's config, reports; diagnose names the missing CNI (HS041)
    // and no kubelet or CSR cause.
    let m0_agent = start_agent(
        &mut cp,
        "master-0",
        &m0,
        vec![
            ("cri_socket", crio.display().to_string().into()),
            ("kubelet_cert", m0.map("/var/lib/kubelet/pki/kubelet-client-current.pem").into()),
        ],
    );
    cp.pids.insert("agent-master-0".into(), m0_agent);
    let boot_root = NodeRoot {
        root: cp.boot.root.clone(),
        cfg: cp.boot.cfg.clone(),
    };
    let boot_agent = start_agent(&mut cp, "bootstrap", &boot_root, vec![("cri_socket", "".into())]);
    cp.pids.insert("agent-bootstrap".into(), boot_agent);
    let diag = cp.wait(
        "diagnose to name master-0's missing CNI",
        Duration::from_secs(90),
        "agent-master-0",
        |_| {
            let (ok, out) = run(env!("CARGO_BIN_EXE_hardshift"), &["diagnose", m0_name, "--dir", &dir, "-o", "json"]);
            if ok && out.contains("HS041") {
                Ok(out)
            } else {
                Err(out)
            }
        },
    );
    // Nor a DNS cause: the lab's zone answers what the node needs (HS071, HS108, HS109 would say).
    for not in ["HS020", "HS021", "HS030", "HS071", "HS107", "HS108"] {
        assert!(!diag.contains(&format!("\"{not}\"")), "{not} in {diag}");
    }
    // The phase table: past bootkube and the CSRs, at the masters (master-0 NotReady for want of
    // its network, the other two never registered); the CVO's step is not met (none runs here).
    let checks = cp.wait("the phase table at the masters", Duration::from_secs(60), "agent-bootstrap", |_| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hardshift"))
            .args([
                "wait-for",
                "pivot-ready",
                "--dir",
                &dir,
                "--timeout",
                "1s",
                "--interval",
                "200ms",
                "-o",
                "json",
            ])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("{e}: {}", text(&out.stdout)))?;
        let met = |id: &str| {
            v["checks"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["id"] == id && c["met"] == true)
        };
        if ["bootstrap-booted", "bootkube", "csrs"].iter().all(|id| met(id)) && !met("masters-ready") {
            Ok(v)
        } else {
            Err(v.to_string())
        }
    });
    let all = checks.to_string();
    let m1 = &lab.of_role(Role::Master)[1];
    for want in [
        "masters-ready".to_string(),
        m0_name.to_string(),
        format!("{m1}: no Node object (its kubelet has not registered)"),
    ] {
        assert!(all.contains(&want), "{want:?} not in {all}");
    }
    let (ok, phases) = run(env!("CARGO_BIN_EXE_hardshift"), &["status", "--dir", &dir]);
    assert!(ok, "{phases}");
    eprintln!("{phases}");
    eprintln!("wait-for pivot-ready: {all}");
    eprintln!("diagnose {m0_name}: {diag}");
    drop(ctd);
}
