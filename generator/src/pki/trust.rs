//! The CA bundles clients are given: which signers each must trust, so that certificates the
//! operators re-issue after the pivot (from the signers seeded for them) keep verifying.

use super::Pki;

fn concat(pki: &Pki, ids: &[&str]) -> String {
    ids.iter().map(|id| pki.get(id).cert_pem.as_str()).collect()
}

/// What verifies the API server, now and after the pivot: the bootstrap's serving certificate
/// (kubernetes-ca → root-ca) and whatever kube-apiserver-operator issues from the localhost,
/// service-network and load-balancer serving signers. Every kubeconfig carries it.
pub fn api_server_ca(pki: &Pki) -> String {
    concat(pki, API_SERVER_CA)
}

pub const API_SERVER_CA: &[&str] = &[
    "pki/kubernetes-ca",
    "pki/root-ca",
    "pki/kube-apiserver-localhost-signer",
    "pki/kube-apiserver-service-network-signer",
    "pki/kube-apiserver-lb-signer",
];

/// Whom a kubelet accepts client certificates from: the bootstrap API server's kubelet client
/// (kubernetes-ca) and, after the pivot, the operator's (kube-apiserver-to-kubelet-signer).
pub const KUBELET_CLIENT_CA: &[&str] = &["pki/kubernetes-ca", "pki/root-ca", "pki/kube-apiserver-to-kubelet-signer"];

/// What verifies kubelet certificates: signed by kube-controller-manager with kubelet-signer on
/// the bootstrap, by the csr-signer (under kubelet-signer) after the pivot; kubernetes-ca for
/// bundles made before hardshift signed with kubelet-signer.
pub fn csr_signer_ca(pki: &Pki) -> String {
    concat(pki, CSR_SIGNER_CA)
}

pub const CSR_SIGNER_CA: &[&str] = &["pki/kubernetes-ca", "pki/kubelet-signer"];

/// Whom the API server accepts client certificates from: the bundle's clients (kubernetes-ca),
/// nodes (kubelet-signer, as the bootstrap controller-manager signs them), and what the operator
/// issues from the control-plane and kubelet-client signers after the pivot.
pub fn client_ca(pki: &Pki) -> String {
    concat(pki, CLIENT_CA)
}

pub const CLIENT_CA: &[&str] = &[
    "pki/kubernetes-ca",
    "pki/kubelet-signer",
    "pki/kube-control-plane-signer",
    "pki/kube-apiserver-to-kubelet-signer",
];
