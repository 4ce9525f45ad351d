//! What the installer leaves in the cluster for the operators that take over from the bootstrap:
//! the etcd signers and CA bundles for cluster-etcd-operator; the serving, kubelet-client and
//! control-plane signers for kube-apiserver-operator; the csr-signer's signer for
//! kube-controller-manager-operator; the admin kubeconfig's client CA. Names, namespaces and keys
//! follow the installer's bootkube manifests and the operators' bootkube bindata; each row of
//! docs/operator-seeds.md names its source.

use crate::pki::{trust, Pki};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use std::collections::BTreeMap;

pub const KAS_OPERATOR_NS: &str = "openshift-kube-apiserver-operator";
pub const KCM_OPERATOR_NS: &str = "openshift-kube-controller-manager-operator";

fn meta(name: &str, ns: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.into()),
        ..Default::default()
    }
}

/// A `kubernetes.io/tls` Secret holding a PKI entry's certificate and key.
fn tls(name: &str, ns: &str, pki: &Pki, id: &str) -> Secret {
    let e = pki.get(id);
    Secret {
        metadata: meta(name, ns),
        type_: Some("kubernetes.io/tls".into()),
        data: Some(BTreeMap::from([
            ("tls.crt".to_string(), ByteString(e.cert_pem.clone().into_bytes())),
            ("tls.key".to_string(), ByteString(e.key_pem.as_bytes().to_vec())),
        ])),
        ..Default::default()
    }
}

const NOT_BEFORE: &str = "auth.openshift.io/certificate-not-before";
const NOT_AFTER: &str = "auth.openshift.io/certificate-not-after";
const ISSUER: &str = "auth.openshift.io/certificate-issuer";
const OWNER: &str = "openshift.io/owning-component";

fn rfc3339(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

/// A signer Secret as library-go's cert rotation keeps it: without its validity annotations
/// (RFC 3339, from the certificate) it is "invalid" and replaced by a new random CA on the
/// operator's first sync, and nothing in the bundle would trust what it then issues.
fn signer(name: &str, ns: &str, pki: &Pki, id: &str, owner: &str) -> Secret {
    let mut s = tls(name, ns, pki, id);
    let e = pki.get(id);
    let issuer_cn = match e.spec.issuer_id() {
        Some(i) => pki.get(&i).spec.cn.clone(),
        None => e.spec.cn.clone(),
    };
    // The PKI's own certificates always parse (verify checks them); an empty date would be
    // refused by the operator, never trusted.
    let (nb, na) = crate::pki::inspect::facts(&e.cert_pem)
        .map(|f| (rfc3339(f.not_before), rfc3339(f.not_after)))
        .unwrap_or_default();
    s.metadata.annotations = Some(BTreeMap::from([
        (NOT_BEFORE.to_string(), nb),
        (NOT_AFTER.to_string(), na),
        (ISSUER.to_string(), issuer_cn),
        (OWNER.to_string(), owner.to_string()),
    ]));
    s
}

/// A ConfigMap with `ca-bundle.crt`.
fn bundle(name: &str, ns: &str, pem: String) -> ConfigMap {
    ConfigMap {
        metadata: meta(name, ns),
        data: Some(BTreeMap::from([("ca-bundle.crt".to_string(), pem)])),
        ..Default::default()
    }
}

fn owned(mut cm: ConfigMap, owner: &str) -> ConfigMap {
    cm.metadata.annotations = Some(BTreeMap::from([(OWNER.to_string(), owner.to_string())]));
    cm
}

pub struct Seeds {
    pub secrets: Vec<Secret>,
    pub config_maps: Vec<ConfigMap>,
}

pub fn seeds(pki: &Pki) -> Seeds {
    let mut secrets = etcd_secrets(pki);
    secrets.push(service_account_key(pki));
    secrets.extend(operator_signers(pki));
    secrets.push(machine_config_server_tls(pki));
    let mut config_maps = config_maps(pki);
    config_maps.push(root_ca(pki));
    Seeds { secrets, config_maps }
}

/// The machine-config server DaemonSet's certificate (the installer's
/// `machine-config-server-tls-secret.yaml`): without it the operator's server pods never start,
/// and a node booted from a pointer config to api-int:22623 is never served.
fn machine_config_server_tls(pki: &Pki) -> Secret {
    tls(
        "machine-config-server-tls",
        "openshift-machine-config-operator",
        pki,
        "pki/machine-config-server",
    )
}

/// The root CA the nodes' pointer configs trust the machine-config server by (the installer's
/// `kube-system-configmap-root-ca.yaml`): the machine-config operator's sync fails until it
/// exists ("sync up CAs", machine-config-operator `pkg/operator/sync.go`).
fn root_ca(pki: &Pki) -> ConfigMap {
    ConfigMap {
        metadata: meta("root-ca", "kube-system"),
        data: Some(BTreeMap::from([("ca.crt".to_string(), pki.get("pki/root-ca").cert_pem.clone())])),
        ..Default::default()
    }
}

/// cluster-etcd-operator 4.18 reads its signers and bundles in openshift-etcd only; the
/// openshift-config copies are its to write (the API server's operator reads etcd-client and
/// etcd-serving-ca there, so those are seeded too).
fn etcd_secrets(pki: &Pki) -> Vec<Secret> {
    let (oc, etcd) = ("openshift-config", "openshift-etcd");
    vec![
        signer("etcd-signer", etcd, pki, "pki/etcd-ca", "etcd"),
        signer("etcd-metric-signer", etcd, pki, "pki/etcd-metric-ca", "etcd"),
        tls("etcd-client", etcd, pki, "pki/etcd-client"),
        tls("etcd-metric-client", etcd, pki, "pki/etcd-metric-client"),
        tls("etcd-client", oc, pki, "pki/etcd-client"),
        tls("etcd-metric-client", oc, pki, "pki/etcd-metric-client"),
    ]
}

/// The key the bootstrap's API server signed service-account tokens with, which the masters'
/// keep accepting.
fn service_account_key(pki: &Pki) -> Secret {
    Secret {
        metadata: meta("initial-service-account-private-key", "openshift-config"),
        data: Some(BTreeMap::from([(
            "service-account.key".to_string(),
            ByteString(pki.get("pki/service-account").key_pem.as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

/// (Secret, namespace, PKI entry, owning component) of each signer the API server's and the
/// controller manager's operators take over.
#[rustfmt::skip]
const OPERATOR_SIGNERS: &[(&str, &str, &str, &str)] = &[
    ("localhost-serving-signer",         KAS_OPERATOR_NS, "pki/kube-apiserver-localhost-signer",       "kube-apiserver"),
    ("service-network-serving-signer",   KAS_OPERATOR_NS, "pki/kube-apiserver-service-network-signer", "kube-apiserver"),
    ("loadbalancer-serving-signer",      KAS_OPERATOR_NS, "pki/kube-apiserver-lb-signer",              "kube-apiserver"),
    ("kube-apiserver-to-kubelet-signer", KAS_OPERATOR_NS, "pki/kube-apiserver-to-kubelet-signer",      "kube-apiserver"),
    ("kube-control-plane-signer",        KAS_OPERATOR_NS, "pki/kube-control-plane-signer",             "kube-apiserver"),
    ("aggregator-client-signer",         KAS_OPERATOR_NS, "pki/front-proxy-ca",                        "kube-apiserver"),
    ("csr-signer-signer",                KCM_OPERATOR_NS, "pki/kubelet-signer",                        "kube-controller-manager"),
];

fn operator_signers(pki: &Pki) -> Vec<Secret> {
    OPERATOR_SIGNERS
        .iter()
        .map(|(name, ns, id, owner)| signer(name, ns, pki, id, owner))
        .collect()
}

/// The CA bundles the operators read (and, where an operator owns one, its annotation).
fn config_maps(pki: &Pki) -> Vec<ConfigMap> {
    let cert = |id: &str| pki.get(id).cert_pem.clone();
    let (oc, etcd, kas) = ("openshift-config", "openshift-etcd", "kube-apiserver");
    vec![
        owned(bundle("etcd-ca-bundle", etcd, cert("pki/etcd-ca")), "etcd"),
        owned(bundle("etcd-metrics-ca-bundle", etcd, cert("pki/etcd-metric-ca")), "etcd"),
        bundle("etcd-ca-bundle", oc, cert("pki/etcd-ca")),
        bundle("etcd-serving-ca", oc, cert("pki/etcd-ca")),
        bundle("etcd-metric-serving-ca", oc, cert("pki/etcd-metric-ca")),
        // The admin kubeconfig's client certificate is kubernetes-ca's: the operator keeps
        // trusting this bundle, so the kubeconfig outlives the bootstrap.
        owned(bundle("admin-kubeconfig-client-ca", oc, cert("pki/kubernetes-ca")), kas),
        bundle("initial-kube-apiserver-server-ca", oc, trust::api_server_ca(pki)),
        owned(
            bundle("csr-controller-ca", "openshift-config-managed", trust::csr_signer_ca(pki)),
            "kube-controller-manager",
        ),
        // A required revision input of the kube-apiserver operator, which the controller-manager
        // operator only writes once the bootstrap is gone: without it, no master API server.
        ConfigMap {
            metadata: meta("sa-token-signing-certs", "openshift-config-managed"),
            data: Some(BTreeMap::from([(
                "service-account-001.pub".to_string(),
                pki.get("pki/service-account").cert_pem.clone(),
            )])),
            ..Default::default()
        },
    ]
}
