//! What the renders make for the bootstrap node, as `create` places it when the bootstrap runs their control plane
//! (bootkube.sh's copies, and cluster-bootstrap's): the static pods, their configs, the secrets
//! under the installer's names, etcd's static-pod resources, and the manifests and CRDs bootkube
//! applies.

use super::paths::*;
use crate::ignition::{NodeFile, PUBLIC, SECRET};
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

impl Bootstrap {
    /// Whether the renders make the object of this identity (`object::identity`), in place of the
    /// bundle's: one of theirs, or a seed that follows their etcd's CA.
    pub fn replaces(&self, id: &str) -> bool {
        self.objects.contains(id) || ETCD_SEEDS.contains(&id)
    }
}

/// Whose control plane the bootstrap runs, behind one type: hardshift's own (the parts
/// `Replaced::ByRenders`, which replaces nothing of the rest), or the renders' (their files, which
/// win over the bundle's of the same path, and their objects, over the bundle's of the same identity).
pub struct ControlPlane<'a> {
    renders: Option<&'a Bootstrap>,
    files: Vec<NodeFile>,
    paths: BTreeSet<String>,
}

impl ControlPlane<'static> {
    pub const OWN: ControlPlane<'static> = ControlPlane {
        renders: None,
        files: Vec::new(),
        paths: BTreeSet::new(),
    };
}

impl<'a> ControlPlane<'a> {
    /// The renders' when there are some, else hardshift's own.
    pub fn of(renders: Option<&'a Bootstrap>) -> ControlPlane<'a> {
        let files = renders.map(placed).unwrap_or_default();
        let paths = files.iter().map(|f| f.path.clone()).collect();
        ControlPlane { renders, files, paths }
    }

    pub fn is_renders(&self) -> bool {
        self.renders.is_some()
    }

    /// What it places beside the parts (hardshift's own: nothing, its parts place it).
    pub fn files(&self) -> &[NodeFile] {
        &self.files
    }

    pub fn wins_file(&self, path: &str) -> bool {
        self.paths.contains(path)
    }

    pub fn wins_object(&self, o: &serde_json::Value) -> bool {
        self.renders.is_some_and(|r| r.replaces(&crate::object::identity(o)))
    }
}

/// The bootstrap control plane the renders made, where bootkube.sh and cluster-bootstrap put it.
fn placed(r: &Bootstrap) -> Vec<NodeFile> {
    let mut f = Vec::new();
    for (name, bytes) in &r.pods {
        f.push(NodeFile::new(format!("{STATIC_PODS}/{name}"), PUBLIC, bytes.clone()));
    }
    for (name, bytes) in &r.configs {
        f.push(NodeFile::new(format!("{BOOTSTRAP_CONFIGS}/{name}"), PUBLIC, bytes.clone()));
    }
    for (rel, bytes) in &r.resources {
        f.push(NodeFile::new(format!("{STATIC_POD_RESOURCES}/{rel}"), SECRET, bytes.clone()));
    }
    for (i, (name, bytes)) in r.manifests.iter().enumerate() {
        f.push(NodeFile::new(
            format!("{ASSET_DIR}/manifests/50-render-{i:03}-{name}"),
            SECRET,
            bytes.clone(),
        ));
    }
    for (name, bytes) in &r.crds {
        f.push(NodeFile::new(format!("{ASSET_DIR}/crds/{name}"), PUBLIC, bytes.clone()));
    }
    for (name, bytes) in &r.secrets {
        let mode = if name.ends_with(".key") || name == "kubeconfig" {
            SECRET
        } else {
            PUBLIC
        };
        f.push(NodeFile::new(format!("{BOOTSTRAP_SECRETS}/{name}"), mode, bytes.clone()));
    }
    // bootkube.sh's etcd health check and the agent read the etcd CA here: the etcd render's.
    if let Some((_, ca)) = r.secrets.iter().find(|(n, _)| n == "etcd-ca-bundle.crt") {
        f.push(NodeFile::new(format!("{BOOTSTRAP_SECRETS}/{}", ETCD_CA), PUBLIC, ca.clone()));
    }
    f
}
