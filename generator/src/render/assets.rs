//! The bundle in the installer's asset layout (`/opt/openshift` on its bootstrap node, mounted
//! at `/assets` into every render): the PKI under the installer's `tls/` names, the kubeconfigs
//! under `auth/`, the cluster's config CRs under `manifests/` by the installer's file names, the
//! release's image references, and the pull secret and registries for podman.
//! Names: installer `pkg/asset/tls/*.go`, `pkg/asset/kubeconfig/*.go`, `pkg/asset/manifests/*.go`.

use crate::cluster::Cluster;
use crate::kubeconfig::{self, Kubeconfig};
use crate::pki::{trust, Pki};
use serde_json::Value;

/// A file of the layout: its path under `/assets`, mode and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asset {
    pub path: String,
    pub mode: u32,
    pub bytes: Vec<u8>,
}

/// Where a `tls/` file's bytes come from in the bundle's PKI.
#[derive(Debug, Clone, Copy)]
enum Src {
    Cert(&'static str),
    /// The certificate followed by its issuer's, as the installer writes its serving leaves.
    Chain(&'static str),
    Key(&'static str),
    /// A key-only entry's public key.
    Public(&'static str),
    Bundle(&'static [&'static str]),
}

/// Every `tls/` file a render reads, or a pod it renders names under /etc/kubernetes/secrets/,
/// from the bundle's own entries (the installer's signer, the bundle's entry that plays it).
const TLS: &[(&str, Src)] = &[
    ("root-ca.crt", Src::Cert("pki/root-ca")),
    // The admin client certificate's signer (installer: admin-kubeconfig-signer).
    ("admin-kubeconfig-ca-bundle.crt", Src::Bundle(&["pki/kubernetes-ca"])),
    ("admin-kubeconfig-client.crt", Src::Cert("pki/admin")),
    ("admin-kubeconfig-client.key", Src::Key("pki/admin")),
    // The front proxy's CA plays both of the installer's aggregator signers.
    ("aggregator-signer.crt", Src::Cert("pki/front-proxy-ca")),
    ("aggregator-signer.key", Src::Key("pki/front-proxy-ca")),
    ("aggregator-ca.crt", Src::Cert("pki/front-proxy-ca")),
    ("aggregator-ca.key", Src::Key("pki/front-proxy-ca")),
    ("aggregator-ca-bundle.crt", Src::Bundle(&["pki/front-proxy-ca"])),
    ("apiserver-proxy.crt", Src::Cert("pki/front-proxy-client")),
    ("apiserver-proxy.key", Src::Key("pki/front-proxy-client")),
    ("aggregator-client.crt", Src::Cert("pki/front-proxy-client")),
    ("aggregator-client.key", Src::Key("pki/front-proxy-client")),
    (
        "kube-apiserver-to-kubelet-signer.crt",
        Src::Cert("pki/kube-apiserver-to-kubelet-signer"),
    ),
    (
        "kube-apiserver-to-kubelet-signer.key",
        Src::Key("pki/kube-apiserver-to-kubelet-signer"),
    ),
    ("kube-apiserver-to-kubelet-ca-bundle.crt", Src::Bundle(trust::KUBELET_CLIENT_CA)),
    (
        "kube-apiserver-to-kubelet-client.crt",
        Src::Cert("pki/kube-apiserver-kubelet-client"),
    ),
    (
        "kube-apiserver-to-kubelet-client.key",
        Src::Key("pki/kube-apiserver-kubelet-client"),
    ),
    (
        "kube-apiserver-localhost-signer.crt",
        Src::Cert("pki/kube-apiserver-localhost-signer"),
    ),
    (
        "kube-apiserver-localhost-signer.key",
        Src::Key("pki/kube-apiserver-localhost-signer"),
    ),
    (
        "kube-apiserver-localhost-ca-bundle.crt",
        Src::Bundle(&["pki/kube-apiserver-localhost-signer"]),
    ),
    (
        "kube-apiserver-localhost-server.crt",
        Src::Chain("pki/kube-apiserver-localhost-server"),
    ),
    (
        "kube-apiserver-localhost-server.key",
        Src::Key("pki/kube-apiserver-localhost-server"),
    ),
    (
        "kube-apiserver-service-network-signer.crt",
        Src::Cert("pki/kube-apiserver-service-network-signer"),
    ),
    (
        "kube-apiserver-service-network-signer.key",
        Src::Key("pki/kube-apiserver-service-network-signer"),
    ),
    (
        "kube-apiserver-service-network-ca-bundle.crt",
        Src::Bundle(&["pki/kube-apiserver-service-network-signer"]),
    ),
    (
        "kube-apiserver-service-network-server.crt",
        Src::Chain("pki/kube-apiserver-service-network-server"),
    ),
    (
        "kube-apiserver-service-network-server.key",
        Src::Key("pki/kube-apiserver-service-network-server"),
    ),
    ("kube-apiserver-lb-signer.crt", Src::Cert("pki/kube-apiserver-lb-signer")),
    ("kube-apiserver-lb-signer.key", Src::Key("pki/kube-apiserver-lb-signer")),
    ("kube-apiserver-lb-ca-bundle.crt", Src::Bundle(&["pki/kube-apiserver-lb-signer"])),
    ("kube-apiserver-lb-server.crt", Src::Chain("pki/kube-apiserver-lb-server")),
    ("kube-apiserver-lb-server.key", Src::Key("pki/kube-apiserver-lb-server")),
    (
        "kube-apiserver-internal-lb-server.crt",
        Src::Chain("pki/kube-apiserver-internal-lb-server"),
    ),
    (
        "kube-apiserver-internal-lb-server.key",
        Src::Key("pki/kube-apiserver-internal-lb-server"),
    ),
    ("kube-apiserver-complete-server-ca-bundle.crt", Src::Bundle(trust::API_SERVER_CA)),
    ("kube-apiserver-complete-client-ca-bundle.crt", Src::Bundle(trust::CLIENT_CA)),
    ("kube-control-plane-signer.crt", Src::Cert("pki/kube-control-plane-signer")),
    ("kube-control-plane-signer.key", Src::Key("pki/kube-control-plane-signer")),
    // What verifies the control plane's clients: their signer here (kubernetes-ca), and the
    // operator's after the pivot, with the serving signers as the installer's bundle has them.
    (
        "kube-control-plane-ca-bundle.crt",
        Src::Bundle(&[
            "pki/kubernetes-ca",
            "pki/kube-control-plane-signer",
            "pki/kube-apiserver-lb-signer",
            "pki/kube-apiserver-localhost-signer",
            "pki/kube-apiserver-service-network-signer",
        ]),
    ),
    (
        "kube-control-plane-kube-controller-manager-client.crt",
        Src::Cert("pki/kube-controller-manager"),
    ),
    (
        "kube-control-plane-kube-controller-manager-client.key",
        Src::Key("pki/kube-controller-manager"),
    ),
    ("kube-control-plane-kube-scheduler-client.crt", Src::Cert("pki/kube-scheduler")),
    ("kube-control-plane-kube-scheduler-client.key", Src::Key("pki/kube-scheduler")),
    ("kubelet-signer.crt", Src::Cert("pki/kubelet-signer")),
    ("kubelet-signer.key", Src::Key("pki/kubelet-signer")),
    (
        "kubelet-client-ca-bundle.crt",
        Src::Bundle(&["pki/kubernetes-ca", "pki/kubelet-signer"]),
    ),
    (
        "kubelet-serving-ca-bundle.crt",
        Src::Bundle(&["pki/kubernetes-ca", "pki/kubelet-signer"]),
    ),
    // The bootstrap kubeconfig's client certificate and its signer.
    ("kubelet-bootstrap-kubeconfig-ca-bundle.crt", Src::Bundle(&["pki/kubernetes-ca"])),
    ("kubelet-client.crt", Src::Cert("pki/kubelet-bootstrap")),
    ("kubelet-client.key", Src::Key("pki/kubelet-bootstrap")),
    ("service-account.key", Src::Key("pki/service-account")),
    ("service-account.pub", Src::Public("pki/service-account")),
    // Given, so the kube-apiserver render does not make a key of its own: the bundle's one
    // service-account key signs and verifies the bound tokens too.
    ("bound-service-account-signing-key.key", Src::Key("pki/service-account")),
    ("bound-service-account-signing-key.pub", Src::Public("pki/service-account")),
];

fn tls_bytes(pki: &Pki, src: Src) -> String {
    match src {
        Src::Cert(id) | Src::Public(id) => pki.get(id).cert_pem.clone(),
        Src::Chain(id) => {
            let e = pki.get(id);
            let issuer = e.spec.issuer_id().map(|i| pki.get(&i).cert_pem.clone()).unwrap_or_default();
            format!("{}{issuer}", e.cert_pem)
        }
        Src::Key(id) => pki.get(id).key_pem.to_string(),
        Src::Bundle(ids) => ids.iter().map(|id| pki.get(id).cert_pem.as_str()).collect(),
    }
}

/// The installer's three kubeconfigs on its bootstrap node: `auth/kubeconfig` (the admin, through
/// api-int), `auth/kubeconfig-loopback` (the admin, localhost) and `auth/kubeconfig-kubelet` (the
/// bootstrap kubeconfig).
fn kubeconfigs(c: &Cluster) -> Vec<Kubeconfig> {
    let kc = |path: &str, cert: &str, user: &str, server: String| Kubeconfig {
        path: path.into(),
        cert: format!("pki/{cert}"),
        server,
        cluster_name: c.name.clone(),
        user: user.into(),
    };
    vec![
        kc("auth/kubeconfig", "admin", "admin", c.api_int_url()),
        kc("auth/kubeconfig-loopback", "admin", "admin", "https://localhost:6443".into()),
        kc("auth/kubeconfig-kubelet", "kubelet-bootstrap", "kubelet", c.api_int_url()),
    ]
}

/// The config CRs the renders read, by the installer's file names under `manifests/`, found by
/// group, kind and name among the manifests bootkube applies (`Err` names what is missing).
pub fn config_crs(c: &Cluster, pki: &Pki) -> Result<Vec<(&'static str, Value)>, super::Lacking> {
    let all = crate::assets::manifests::manifests(c, pki, None);
    let find = |group: &str, kind: &str, name: Option<&str>| -> Option<Value> {
        all.iter()
            .flat_map(|(_, objs)| objs.iter())
            .find(|o| {
                let api = o["apiVersion"].as_str().unwrap_or_default();
                let in_group = if group.is_empty() {
                    !api.contains('/')
                } else {
                    api.starts_with(&format!("{group}/"))
                };
                in_group && o["kind"] == kind && name.is_none_or(|n| o["metadata"]["name"] == n)
            })
            .cloned()
    };
    const CONFIG: &str = "config.openshift.io";
    let wanted: [(&'static str, &str, &str, &str); 7] = [
        ("cluster-config.yaml", "", "ConfigMap", "cluster-config-v1"),
        ("cluster-infrastructure-02-config.yml", CONFIG, "Infrastructure", "cluster"),
        ("cluster-network-02-config.yml", CONFIG, "Network", "cluster"),
        ("cluster-proxy-01-config.yaml", CONFIG, "Proxy", "cluster"),
        ("cluster-dns-02-config.yml", CONFIG, "DNS", "cluster"),
        ("99_feature-gate.yaml", CONFIG, "FeatureGate", "cluster"),
        ("openshift-config-secret-pull-secret.yaml", "", "Secret", "pull-secret"),
    ];
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for (file, group, kind, name) in wanted {
        match find(group, kind, Some(name)) {
            Some(v) => out.push((file, v)),
            None => missing.push(format!("{kind} {name}")),
        }
    }
    if let Some(cm) = find("", "ConfigMap", Some("user-ca-bundle")) {
        out.push(("user-ca-bundle-config.yaml", cm));
    }
    if let Some(idms) = find(CONFIG, "ImageDigestMirrorSet", None) {
        out.push(("image-digest-mirror-set.yaml", idms));
    }
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(super::Lacking(vec![format!(
            "the cluster's manifests hold no {}: the renders need each",
            missing.join(", ")
        )]))
    }
}

/// The release's image references as the ImageStream the MCO reads (`--image-references`) and
/// the renders are given.
pub fn image_references(c: &Cluster) -> Value {
    use serde_json::json;
    let tags: Vec<Value> = c
        .release
        .tags
        .iter()
        .map(|(name, pullspec)| json!({"name": name, "from": {"kind": "DockerImage", "name": pullspec}}))
        .collect();
    let mut v = json!({"kind": "ImageStream", "apiVersion": "image.openshift.io/v1", "metadata": {}, "spec": {"tags": tags}});
    if let Some(version) = &c.release.version {
        v["metadata"]["name"] = json!(version);
    }
    v
}

/// The whole layout. The FeatureGate goes without its status: the cluster-config-api render
/// fills it for the release's version, as on the installer's bootstrap node.
pub fn layout(c: &Cluster, pki: &Pki) -> Result<Vec<Asset>, super::Lacking> {
    let mut out: Vec<Asset> = TLS
        .iter()
        .map(|(name, src)| Asset {
            path: format!("tls/{name}"),
            mode: if name.ends_with(".key") { 0o600 } else { 0o644 },
            bytes: tls_bytes(pki, *src).into_bytes(),
        })
        .collect();
    for k in kubeconfigs(c) {
        out.push(Asset {
            path: k.path.clone(),
            mode: 0o600,
            bytes: kubeconfig::to_yaml(&k, pki).into_bytes(),
        });
    }
    for (file, mut v) in config_crs(c, pki)? {
        if v["kind"] == "FeatureGate" {
            if let Some(o) = v.as_object_mut() {
                o.remove("status");
            }
        }
        let mode = if v["kind"] == "Secret" { 0o600 } else { 0o644 };
        out.push(Asset {
            path: format!("manifests/{file}"),
            mode,
            bytes: crate::yamlout::to_yaml(&v).into_bytes(),
        });
    }
    // The installer's openshift/99_openshift-machineconfig_*.yaml: the controller renders them in.
    for mc in crate::assets::manifests::after_cvo(c).iter().flat_map(|(_, o)| o) {
        let name = mc["metadata"]["name"].as_str().unwrap_or_default();
        out.push(Asset {
            path: format!("openshift/99_openshift-machineconfig_{name}.yaml"),
            mode: 0o644,
            bytes: crate::yamlout::to_yaml(mc).into_bytes(),
        });
    }
    let mut refs = serde_json::to_string_pretty(&image_references(c)).unwrap_or_default();
    refs.push('\n');
    out.push(Asset {
        path: "image-references".into(),
        mode: 0o644,
        bytes: refs.into_bytes(),
    });
    Ok(out)
}
