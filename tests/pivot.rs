//! What OpenShift 4.18's own operators need from the bootstrap to survive the pivot, checked
//! offline on the example bundle (the issue "the bundle survives the pivot"; each fact is read
//! from the operators' release-4.18 sources, named beside each test). What needs the release's
//! Kubernetes binaries is in tests/control_plane.rs (tier HARDSHIFT_KUBE_BIN).

mod common;

use common::*;
use hardshift_generator::ignition::{self, Config};
use serde_json::Value;

struct Bundle {
    _dir: tempfile::TempDir,
    boot: Config,
    work: tempfile::TempDir,
}

fn bundle() -> Bundle {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let boot: Config = serde_json::from_slice(&std::fs::read(d.path().join("ignition/bootstrap.ign")).unwrap()).unwrap();
    Bundle {
        _dir: d,
        boot,
        work: tempfile::tempdir().unwrap(),
    }
}

impl Bundle {
    fn file(&self, path: &str) -> String {
        let f = self
            .boot
            .storage
            .files
            .iter()
            .find(|f| f.path == path)
            .unwrap_or_else(|| panic!("no {path}"));
        String::from_utf8(ignition::decode(f.contents.as_ref().unwrap()).unwrap()).unwrap()
    }

    /// Every object of a manifest bootkube applies.
    fn manifest(&self, name: &str) -> Vec<Value> {
        let text = self.file(&format!("/opt/openshift/manifests/{name}"));
        hardshift_generator::crd::split_documents(&text)
            .into_iter()
            .map(|d| hardshift_generator::config::yaml::parse(d).unwrap().value)
            .collect()
    }

    fn object(&self, manifest: &str, kind: &str, ns: &str, name: &str) -> Value {
        self.manifest(manifest)
            .into_iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name && o["metadata"]["namespace"].as_str().unwrap_or("") == ns)
            .unwrap_or_else(|| panic!("{manifest} has no {kind} {ns}/{name}"))
    }

    fn static_pod_args(&self, file: &str) -> Vec<String> {
        let text = self.file(&format!("/etc/kubernetes/manifests/{file}"));
        let pod = hardshift_generator::config::yaml::parse(&text).unwrap().value;
        let c = &pod["spec"]["containers"][0];
        c["command"]
            .as_array()
            .into_iter()
            .chain(c["args"].as_array())
            .flatten()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    }

    fn flag(&self, file: &str, name: &str) -> String {
        let args = self.static_pod_args(file);
        let prefix = format!("--{name}=");
        args.iter()
            .find_map(|a| a.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{file} has no --{name}: {args:?}"))
            .to_string()
    }

    /// Write `text` under the scratch directory; its path.
    fn write(&self, name: &str, text: &str) -> String {
        let p = self.work.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().to_string()
    }
}

fn decode_b64(s: &str) -> String {
    use base64::Engine;
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(s).unwrap()).unwrap()
}

fn openssl(args: &[&str]) -> (bool, String) {
    run("openssl", args)
}

/// Point 1: cluster-kube-apiserver-operator `bindata/assets/config/defaultconfig.yaml`: `etcd-prefix:
/// kubernetes.io`, for every kube-apiserver it runs; the bootstrap's must store where they read.
#[test]
fn the_bootstrap_api_server_stores_under_the_operators_etcd_prefix() {
    let b = bundle();
    assert_eq!(b.flag("kube-apiserver-bootstrap.yaml", "etcd-prefix"), "kubernetes.io");
}

/// Point 2: `bindata/bootkube/manifests/configmap-sa-token-signing-certs.yaml` (kube-apiserver operator):
/// a required revision input, seeded with the bundle's service-account public key.
#[test]
fn sa_token_signing_certs_carries_the_service_account_public_key() {
    let b = bundle();
    let cm = b.object(
        "10-operator-seeds.yaml",
        "ConfigMap",
        "openshift-config-managed",
        "sa-token-signing-certs",
    );
    let pub_key = b.file("/etc/kubernetes/bootstrap-secrets/service-account.pub");
    assert!(pub_key.contains("BEGIN PUBLIC KEY"), "{pub_key}");
    assert_eq!(cm["data"]["service-account-001.pub"], pub_key);
    // The key the API server verifies tokens with is that same key.
    assert!(b
        .flag("kube-apiserver-bootstrap.yaml", "service-account-key-file")
        .ends_with("/service-account.pub"));
}

/// Point 3: library-go `pkg/operator/certrotation/signer.go`: a signer without RFC 3339 not-before and
/// not-after annotations, or past 80% of its validity, is replaced by a new random CA on the first
/// sync; the issuer annotation is the certificate's issuer CN. Compared with what OpenSSL reads.
#[test]
fn every_seeded_signer_carries_the_validity_annotations_cert_rotation_keeps() {
    let b = bundle();
    let seeds = b.manifest("10-operator-seeds.yaml");
    let signers = [
        ("openshift-etcd", "etcd-signer", "etcd"),
        ("openshift-etcd", "etcd-metric-signer", "etcd"),
        ("openshift-kube-apiserver-operator", "localhost-serving-signer", "kube-apiserver"),
        (
            "openshift-kube-apiserver-operator",
            "service-network-serving-signer",
            "kube-apiserver",
        ),
        ("openshift-kube-apiserver-operator", "loadbalancer-serving-signer", "kube-apiserver"),
        (
            "openshift-kube-apiserver-operator",
            "kube-apiserver-to-kubelet-signer",
            "kube-apiserver",
        ),
        ("openshift-kube-apiserver-operator", "kube-control-plane-signer", "kube-apiserver"),
        ("openshift-kube-apiserver-operator", "aggregator-client-signer", "kube-apiserver"),
        (
            "openshift-kube-controller-manager-operator",
            "csr-signer-signer",
            "kube-controller-manager",
        ),
    ];
    let now = time::OffsetDateTime::now_utc();
    let rfc = |s: &str| {
        time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|e| panic!("{s:?} is not RFC 3339: {e}"))
    };
    for (ns, name, owner) in signers {
        let s = seeds
            .iter()
            .find(|o| o["kind"] == "Secret" && o["metadata"]["namespace"] == ns && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Secret {ns}/{name}"));
        assert_eq!(s["type"], "kubernetes.io/tls", "{ns}/{name}");
        let ann = &s["metadata"]["annotations"];
        let crt = b.write(&format!("{name}.crt"), &decode_b64(s["data"]["tls.crt"].as_str().unwrap()));
        let (ok, out) = openssl(&[
            "x509",
            "-in",
            &crt,
            "-noout",
            "-startdate",
            "-enddate",
            "-dateopt",
            "iso_8601",
            "-issuer",
            "-nameopt",
            "multiline",
        ]);
        assert!(ok, "{out}");
        let field = |k: &str| out.lines().find_map(|l| l.strip_prefix(k)).unwrap().trim().replace(' ', "T");
        let (nb, na) = (field("notBefore="), field("notAfter="));
        let issuer_cn = out.lines().find_map(|l| l.trim().strip_prefix("commonName")).unwrap();
        let issuer_cn = issuer_cn.trim_start_matches([' ', '=']).trim();
        let (ann_nb, ann_na) = (
            ann["auth.openshift.io/certificate-not-before"].as_str(),
            ann["auth.openshift.io/certificate-not-after"].as_str(),
        );
        let (ann_nb, ann_na) = (
            ann_nb.unwrap_or_else(|| panic!("{ns}/{name}: no not-before")),
            ann_na.unwrap_or_else(|| panic!("{ns}/{name}: no not-after")),
        );
        assert_eq!(rfc(ann_nb), rfc(&nb), "{ns}/{name} not-before");
        assert_eq!(rfc(ann_na), rfc(&na), "{ns}/{name} not-after");
        assert_eq!(ann["auth.openshift.io/certificate-issuer"], issuer_cn, "{ns}/{name}");
        assert_eq!(ann["openshift.io/owning-component"], owner, "{ns}/{name}");
        // Inside the window library-go keeps: not expired, before 80% of the validity.
        let (start, end) = (rfc(ann_nb), rfc(ann_na));
        assert!(now < end - (end - start) / 5, "{ns}/{name} would be refreshed at once");
    }
}

/// Point 4: cluster-kube-controller-manager-operator `bindata/bootkube/config/bootstrap-config-overrides.yaml`
/// and `defaultconfig.yaml`: the bootstrap signs kubelet certificates with kubelet-signer for 720h.
/// A kubelet certificate from it keeps verifying when the operator rewrites csr-controller-ca to
/// what survives (its signers, without kubernetes-ca), and the API server accepts it now.
#[test]
fn kubelet_certificates_chain_to_what_survives_the_pivot() {
    let b = bundle();
    let kcm = "kube-controller-manager-bootstrap.yaml";
    assert!(b.flag(kcm, "cluster-signing-cert-file").ends_with("/kubelet-signer.crt"));
    assert!(b.flag(kcm, "cluster-signing-key-file").ends_with("/kubelet-signer.key"));
    assert_eq!(b.flag(kcm, "cluster-signing-duration"), "720h");
    // A node's client and serving certificate, issued as the controller-manager would.
    let s = |f: &str| b.write(f, &b.file(&format!("/etc/kubernetes/bootstrap-secrets/{f}")));
    let (ca, key) = (s("kubelet-signer.crt"), s("kubelet-signer.key"));
    let leaf = b.work.path().join("kubelet.crt").to_string_lossy().to_string();
    let leaf_key = b.work.path().join("kubelet.key").to_string_lossy().to_string();
    let (ok, out) = openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        &leaf_key,
        "-out",
        &leaf,
        "-subj",
        "/O=system:nodes/CN=system:node:master-0",
        "-CA",
        &ca,
        "-CAkey",
        &key,
        "-days",
        "30",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-addext",
        "extendedKeyUsage=clientAuth,serverAuth",
    ]);
    assert!(ok, "{out}");
    let kas = "kube-apiserver-bootstrap.yaml";
    for flag in ["client-ca-file", "kubelet-certificate-authority"] {
        let file = b.flag(kas, flag);
        let bundle = b.write(
            &format!("{flag}.crt"),
            &b.file(&file.replace("/etc/kubernetes/secrets", "/etc/kubernetes/bootstrap-secrets")),
        );
        let (ok, out) = openssl(&["verify", "-CAfile", &bundle, &leaf]);
        assert!(ok, "--{flag} does not verify a kubelet certificate from kubelet-signer: {out}");
    }
    // What the operator keeps: csr-controller-ca without kubernetes-ca still verifies it.
    let csr_ca = b.object(
        "10-operator-seeds.yaml",
        "ConfigMap",
        "openshift-config-managed",
        "csr-controller-ca",
    );
    let kubernetes_ca = b.file("/etc/kubernetes/bootstrap-secrets/kubernetes-ca.crt");
    let pem = csr_ca["data"]["ca-bundle.crt"]
        .as_str()
        .unwrap()
        .replace(kubernetes_ca.as_str(), "");
    assert!(pem.contains("BEGIN CERTIFICATE"));
    let survivors = b.write("survivors.crt", &pem);
    let (ok, out) = openssl(&["verify", "-CAfile", &survivors, &leaf]);
    assert!(ok, "{out}");
}

/// Point 6: cluster-etcd-operator `pkg/tlshelpers/tlshelpers.go`, `pkg/operator/etcdcertsigner/`: 4.18
/// reads its signers and bundles in openshift-etcd only (the openshift-config objects are copies it
/// writes); seeded there, it signs the masters' etcd certificates from the CA the bootstrap etcd trusts.
#[test]
fn etcd_signers_are_where_the_4_18_operator_reads_them() {
    let b = bundle();
    let etcd_ca = b.file("/etc/kubernetes/bootstrap-secrets/etcd-ca.crt");
    let seeds = b.manifest("10-operator-seeds.yaml");
    let find = |kind: &str, ns: &str, name: &str| {
        seeds
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["namespace"] == ns && o["metadata"]["name"] == name)
            .cloned()
    };
    let signer = find("Secret", "openshift-etcd", "etcd-signer").expect("openshift-etcd/etcd-signer");
    assert_eq!(decode_b64(signer["data"]["tls.crt"].as_str().unwrap()), etcd_ca);
    // The bootstrap etcd trusts exactly that CA.
    assert!(b.flag("etcd-bootstrap.yaml", "trusted-ca-file").ends_with("/etcd-ca.crt"));
    let bundle = find("ConfigMap", "openshift-etcd", "etcd-ca-bundle").expect("openshift-etcd/etcd-ca-bundle");
    assert_eq!(bundle["data"]["ca-bundle.crt"], etcd_ca);
    assert!(find("ConfigMap", "openshift-etcd", "etcd-metrics-ca-bundle").is_some());
    assert!(find("Secret", "openshift-etcd", "etcd-metric-signer").is_some());
    // No second copy of the CA's key where nothing reads it.
    assert!(find("Secret", "openshift-config", "etcd-signer").is_none());
    // What the API server's operator reads in openshift-config is still there.
    assert!(find("Secret", "openshift-config", "etcd-client").is_some());
    assert!(find("ConfigMap", "openshift-config", "etcd-serving-ca").is_some());
    assert!(
        find("ConfigMap", "openshift-config", "initial-csr-signer-ca").is_none(),
        "nothing in 4.18 reads it"
    );
}

/// Point 7: machine-config-operator `pkg/controller/bootstrap/bootstrap.go`, library-go
/// `configobserver/featuregates/simple_featuregate_reader.go`: a FeatureGate needs a status entry
/// for the release's version, as the cluster-config-api render writes it; bootkube patches it.
#[test]
fn the_featuregate_has_the_release_s_gates_in_its_status() {
    let b = bundle();
    let fg = b.object("04-featuregate.yaml", "FeatureGate", "", "cluster");
    let patch: Value = serde_json::from_str(&b.file("/opt/openshift/featuregate-status.json")).unwrap();
    assert_eq!(patch["status"], fg["status"]);
    let gates = fg["status"]["featureGates"].as_array().unwrap();
    assert_eq!(gates.len(), 1);
    assert_eq!(gates[0]["version"], "4.18.0", "the example release's version");
    let names = |k: &str| -> Vec<String> {
        gates[0][k]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(names("enabled").contains(&"ValidatingAdmissionPolicy".to_string()));
    assert!(names("disabled").contains(&"GatewayAPI".to_string()));
    let script = b.file("/usr/local/bin/bootkube.sh");
    assert!(script.contains("patch_status featuregate-status featuregate"), "{script}");
    let (ok, out) = run("bash", &["-n", "-c", &script]);
    assert!(ok, "{out}");
}

/// The FeatureGate of a release whose gates this build does not know stays spec-only (the release's
/// own render must fill it), and says nothing false.
#[test]
fn an_unknown_release_gets_no_made_up_gates() {
    let d = example_copy();
    edit(d.path(), "release/image-references", "\"name\": \"4.18.0\"", "\"name\": \"4.19.2\"");
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let boot: Config = serde_json::from_slice(&std::fs::read(d.path().join("ignition/bootstrap.ign")).unwrap()).unwrap();
    assert!(!boot
        .storage
        .files
        .iter()
        .any(|f| f.path == "/opt/openshift/featuregate-status.json"));
}
