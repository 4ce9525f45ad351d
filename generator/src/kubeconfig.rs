//! The tutorial's eight kubeconfigs (stage 06) plus `auth/kubeconfig` where openshift-install
//! users look for it. Client certificates embedded; the CA data is the kubernetes-ca → root-ca
//! chain so any verifier (Go, openssl) can reach the self-signed root, plus the serving signers
//! the kube-apiserver operator re-issues from after the pivot (`pki::trust::api_server_ca`).

use crate::cluster::Cluster;
use crate::pki::Pki;
use base64::Engine;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubeconfig {
    /// Path inside the bundle.
    pub path: String,
    /// The cert entry whose client certificate it carries (e.g. `pki/admin`).
    pub cert: String,
    pub server: String,
    pub cluster_name: String,
    pub user: String,
}

/// Which kubeconfigs exist and what each holds.
pub fn plan(c: &Cluster) -> Vec<Kubeconfig> {
    let (api, api_int, local) = (c.api_url(), c.api_int_url(), "https://localhost:6443".to_string());
    let kc = |file: &str, cert: &str, user: &str, server: &str, cluster: &str| Kubeconfig {
        path: file.to_string(),
        cert: format!("pki/{cert}"),
        server: server.to_string(),
        cluster_name: cluster.to_string(),
        user: user.to_string(),
    };
    let name = c.name.as_str();
    // kube-controller-manager and kube-scheduler run on the bootstrap only (the operators run their
    // own on the masters): they talk to the API server beside them, as the installer's do, so they
    // never depend on the load balancer or on api-int moving to the masters.
    vec![
        kc("kubeconfigs/admin.kubeconfig", "admin", "admin", &api, name),
        kc(
            "kubeconfigs/kube-controller-manager.kubeconfig",
            "kube-controller-manager",
            "system:kube-controller-manager",
            &local,
            name,
        ),
        kc(
            "kubeconfigs/kube-scheduler.kubeconfig",
            "kube-scheduler",
            "system:kube-scheduler",
            &local,
            name,
        ),
        kc(
            "kubeconfigs/kubelet-bootstrap.kubeconfig",
            "kubelet-bootstrap",
            "system:bootstrapper",
            &api_int,
            name,
        ),
        kc("kubeconfigs/localhost.kubeconfig", "admin", "admin", &local, "localhost"),
        kc(
            "kubeconfigs/localhost-recovery.kubeconfig",
            "admin",
            "admin",
            &local,
            "localhost-recovery",
        ),
        kc("kubeconfigs/lb-int.kubeconfig", "admin", "admin", &api_int, "lb-int"),
        kc("kubeconfigs/lb-ext.kubeconfig", "admin", "admin", &api, "lb-ext"),
        kc("auth/kubeconfig", "admin", "admin", &api, name),
    ]
}

/// The kubeconfig's YAML. Every string is a JSON-quoted scalar, which YAML reads verbatim.
pub fn to_yaml(k: &Kubeconfig, pki: &Pki) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let q = |s: &str| serde_json::to_string(s).expect("string");
    let client = pki.get(&k.cert);
    let ca = crate::pki::trust::api_server_ca(pki);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
         users:\n- name: {user}\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n\
         contexts:\n- name: {user}\n  context:\n    cluster: {cluster}\n    user: {user}\ncurrent-context: {user}\npreferences: {{}}\n",
        cluster = q(&k.cluster_name),
        server = q(&k.server),
        user = q(&k.user),
        ca = b64(&ca),
        cert = b64(&client.cert_pem),
        key = b64(&client.key_pem),
    )
}
