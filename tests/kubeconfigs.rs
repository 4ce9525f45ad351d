//! Every kubeconfig read by real kubectl, and its client certificate verified by openssl
//! against the CA data it carries.

mod common;

use base64::Engine;
use common::*;
use std::os::unix::fs::PermissionsExt;

const API: &str = "https://api.ocp4.example.com:6443";
const API_INT: &str = "https://api-int.ocp4.example.com:6443";
const LOCAL: &str = "https://localhost:6443";

#[test]
fn kubectl_reads_every_kubeconfig_and_its_client_cert_verifies() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let expect = [
        ("kubeconfigs/admin.kubeconfig", API, "CN=system:admin", "ocp4"),
        (
            "kubeconfigs/kube-controller-manager.kubeconfig",
            LOCAL,
            "CN=system:kube-controller-manager",
            "ocp4",
        ),
        ("kubeconfigs/kube-scheduler.kubeconfig", LOCAL, "CN=system:kube-scheduler", "ocp4"),
        (
            "kubeconfigs/kubelet-bootstrap.kubeconfig",
            API_INT,
            "CN=system:bootstrapper",
            "ocp4",
        ),
        ("kubeconfigs/localhost.kubeconfig", LOCAL, "CN=system:admin", "localhost"),
        (
            "kubeconfigs/localhost-recovery.kubeconfig",
            LOCAL,
            "CN=system:admin",
            "localhost-recovery",
        ),
        ("kubeconfigs/lb-int.kubeconfig", API_INT, "CN=system:admin", "lb-int"),
        ("kubeconfigs/lb-ext.kubeconfig", API, "CN=system:admin", "lb-ext"),
        ("auth/kubeconfig", API, "CN=system:admin", "ocp4"),
    ];
    let work = tempfile::tempdir().unwrap();
    for (file, server, subject, cluster) in expect {
        let path = d.path().join(file);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file} holds a private key");
        // --minify --raw fails on a missing file or a broken context, unlike a plain `config view`.
        let (ok, out) = run(
            "kubectl",
            &[
                "config",
                "view",
                "--minify",
                "--raw",
                "-o",
                "json",
                "--kubeconfig",
                path.to_str().unwrap(),
            ],
        );
        assert!(ok, "{file}: {out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{file}: {e}\n{out}"));
        assert_eq!(v["clusters"][0]["cluster"]["server"], server, "{file}");
        assert_eq!(v["clusters"][0]["name"], cluster, "{file}");
        let b64 = |x: &serde_json::Value| base64::engine::general_purpose::STANDARD.decode(x.as_str().unwrap()).unwrap();
        let ca = work.path().join("ca.pem");
        let crt = work.path().join("client.pem");
        let key = work.path().join("client.key");
        std::fs::write(&ca, b64(&v["clusters"][0]["cluster"]["certificate-authority-data"])).unwrap();
        std::fs::write(&crt, b64(&v["users"][0]["user"]["client-certificate-data"])).unwrap();
        std::fs::write(&key, b64(&v["users"][0]["user"]["client-key-data"])).unwrap();
        let (ok, out) = run(
            "openssl",
            &[
                "verify",
                "-purpose",
                "sslclient",
                "-CAfile",
                ca.to_str().unwrap(),
                crt.to_str().unwrap(),
            ],
        );
        assert!(ok && out.contains(": OK"), "{file}: {out}");
        let (_, subj) = run(
            "openssl",
            &[
                "x509",
                "-noout",
                "-subject",
                "-nameopt",
                "sep_comma_plus_space",
                "-in",
                crt.to_str().unwrap(),
            ],
        );
        assert!(subj.trim().ends_with(subject), "{file}: {subj}");
        let (_, from_key) = run("openssl", &["pkey", "-pubout", "-in", key.to_str().unwrap()]);
        let (_, from_crt) = run("openssl", &["x509", "-pubkey", "-noout", "-in", crt.to_str().unwrap()]);
        assert_eq!(from_key, from_crt, "{file}: client key and certificate differ");
        // The certificate the API server presents for this server name (by SNI) verifies against
        // the same CA data, host name included: clients will trust it.
        let (served, host) = match server {
            LOCAL => ("kube-apiserver-localhost-server", "localhost"),
            API_INT => ("kube-apiserver-internal-lb-server", "api-int.ocp4.example.com"),
            _ => ("kube-apiserver-lb-server", "api.ocp4.example.com"),
        };
        let (ok, out) = run(
            "openssl",
            &[
                "verify",
                "-purpose",
                "sslserver",
                "-verify_hostname",
                host,
                "-CAfile",
                ca.to_str().unwrap(),
                d.path().join(format!("pki/{served}.crt")).to_str().unwrap(),
            ],
        );
        assert!(ok, "{file}: the CA data must verify the API server: {out}");
    }
}
