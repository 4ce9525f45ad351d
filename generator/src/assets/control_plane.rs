//! What the renders make for the bootstrap node, as `create` places it when the bootstrap runs their control plane
//! (bootkube.sh's copies, and cluster-bootstrap's): the static pods, their configs, the secrets
//! under the installer's names, etcd's static-pod resources, and the manifests and CRDs bootkube
//! applies.

use std::collections::BTreeSet;

/// Files by name (or path relative to their directory), with their bytes.
pub type Files = Vec<(String, Vec<u8>)>;

#[derive(Debug, Clone, Default)]
pub struct Bootstrap {
    /// /etc/kubernetes/manifests/: the kube-apiserver, controller-manager, scheduler and etcd pods.
    pub pods: Files,
    /// /etc/kubernetes/bootstrap-configs/: the configs the pods read (`--openshift-config`).
    pub configs: Files,
    /// /etc/kubernetes/bootstrap-secrets/: `tls/` after the renders (the etcd render's client and
    /// CA bundle among them) and `kubeconfig` (the loopback admin kubeconfig), as cluster-bootstrap
    /// lays them out.
    pub secrets: Files,
    /// /etc/kubernetes/static-pod-resources/: etcd's certificates and CA.
    pub resources: Files,
    /// The renders' manifests bootkube applies, and their CRDs.
    pub manifests: Files,
    pub crds: Files,
    /// The identities (`object::identity`) of every object in `manifests` and `crds`: the
    /// bundle's own objects of the same identity give way to them.
    pub objects: BTreeSet<String>,
}

/// The bundle's seeds that follow its own etcd CA: with the etcd render's etcd, the
/// cluster-etcd-operator makes them from its signer; the bundle's would name another CA.
pub const ETCD_SEEDS: &[&str] = &[
    "Secret openshift-config/etcd-client",
    "Secret openshift-config/etcd-metric-client",
    "ConfigMap openshift-config/etcd-ca-bundle",
    "ConfigMap openshift-config/etcd-serving-ca",
    "ConfigMap openshift-config/etcd-metric-serving-ca",
];

/// The bootstrap secret every etcd client of the bundle reads its CA from (bootkube.sh's health
/// check, the agent): with the etcd render's etcd, its CA bundle.
pub const ETCD_CA: &str = "etcd-ca.crt";
