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
            ("tls.key".to_string(), ByteString(e.key_pem.clone().into_bytes())),
        ])),
        ..Default::default()
    }
}

/// A ConfigMap with `ca-bundle.crt`.
fn bundle(name: &str, ns: &str, pem: String) -> ConfigMap {
    ConfigMap {
        metadata: meta(name, ns),
        data: Some(BTreeMap::from([("ca-bundle.crt".to_string(), pem)])),
        ..Default::default()
    }
}

pub struct Seeds {
    pub secrets: Vec<Secret>,
    pub config_maps: Vec<ConfigMap>,
}

pub fn seeds(pki: &Pki) -> Seeds {
    let cert = |id: &str| pki.get(id).cert_pem.clone();
    let oc = "openshift-config";
    let sa = pki.get("pki/service-account");
    let secrets = vec![
        tls("etcd-signer", oc, pki, "pki/etcd-ca"),
        tls("etcd-metric-signer", oc, pki, "pki/etcd-metric-ca"),
        tls("etcd-client", oc, pki, "pki/etcd-client"),
        tls("etcd-metric-client", oc, pki, "pki/etcd-metric-client"),
        Secret {
            metadata: meta("initial-service-account-private-key", oc),
            data: Some(BTreeMap::from([(
                "service-account.key".to_string(),
                ByteString(sa.key_pem.clone().into_bytes()),
            )])),
            ..Default::default()
        },
        tls(
            "localhost-serving-signer",
            KAS_OPERATOR_NS,
            pki,
            "pki/kube-apiserver-localhost-signer",
        ),
        tls(
            "service-network-serving-signer",
            KAS_OPERATOR_NS,
            pki,
            "pki/kube-apiserver-service-network-signer",
        ),
        tls("loadbalancer-serving-signer", KAS_OPERATOR_NS, pki, "pki/kube-apiserver-lb-signer"),
        tls(
            "kube-apiserver-to-kubelet-signer",
            KAS_OPERATOR_NS,
            pki,
            "pki/kube-apiserver-to-kubelet-signer",
        ),
        tls("kube-control-plane-signer", KAS_OPERATOR_NS, pki, "pki/kube-control-plane-signer"),
        tls("aggregator-client-signer", KAS_OPERATOR_NS, pki, "pki/front-proxy-ca"),
        tls("csr-signer-signer", KCM_OPERATOR_NS, pki, "pki/kubelet-signer"),
    ];
    let config_maps = vec![
        bundle("etcd-ca-bundle", oc, cert("pki/etcd-ca")),
        bundle("etcd-serving-ca", oc, cert("pki/etcd-ca")),
        bundle("etcd-metric-serving-ca", oc, cert("pki/etcd-metric-ca")),
        // The admin kubeconfig's client certificate is kubernetes-ca's: the operator keeps
        // trusting this bundle, so the kubeconfig outlives the bootstrap.
        bundle("admin-kubeconfig-client-ca", oc, cert("pki/kubernetes-ca")),
        bundle("initial-kube-apiserver-server-ca", oc, trust::api_server_ca(pki)),
        bundle("initial-csr-signer-ca", oc, trust::csr_signer_ca(pki)),
        bundle("csr-controller-ca", "openshift-config-managed", trust::csr_signer_ca(pki)),
    ];
    Seeds { secrets, config_maps }
}
