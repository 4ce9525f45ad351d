//! The control plane's renders: the FeatureGate (cluster-config-api), etcd, the API server, the
//! controller manager and the scheduler, each with the flags its operator declares.

use super::{cp, m, strings, Net, Step};

/// The library-go render options every operator's render shares (`pkg/operator/render/options/
/// generic.go` and `manifest.go`).
const GENERIC: &[&str] = &[
    "asset-output-dir",
    "asset-input-dir",
    "templates-input-dir",
    "config-override-files",
    "config-output-file",
    "rendered-manifest-files",
    "payload-version",
    "manifest-namespace",
    "manifest-image",
    "manifest-operator-image",
    "manifest-image-pull-policy",
    "manifest-config-host-path",
    "manifest-secrets-host-path",
    "manifest-config-file-name",
    "manifest-cloud-provider-host-path",
];

/// The tls/ files the kube-apiserver operator's templates load, and the etcd client it is given.
const KAS_TLS: &[&str] = &[
    "admin-kubeconfig-ca-bundle.crt",
    "kubelet-client-ca-bundle.crt",
    "kubelet-bootstrap-kubeconfig-ca-bundle.crt",
    "service-account.pub",
    "aggregator-signer.crt",
    "aggregator-signer.key",
    "bound-service-account-signing-key.key",
    "bound-service-account-signing-key.pub",
    "kube-control-plane-signer.crt",
    "kube-control-plane-signer.key",
    "kube-apiserver-to-kubelet-signer.crt",
    "kube-apiserver-to-kubelet-signer.key",
    "kube-apiserver-lb-signer.crt",
    "kube-apiserver-lb-signer.key",
    "kube-apiserver-localhost-signer.crt",
    "kube-apiserver-localhost-signer.key",
    "kube-apiserver-service-network-signer.crt",
    "kube-apiserver-service-network-signer.key",
    "etcd-ca-bundle.crt",
    "etcd-client.crt",
    "etcd-client.key",
];

/// cluster-config-api's render: the FeatureGate's status for the release's version.
pub(super) fn api(v: &str) -> Step {
    Step {
        name: "api",
        tag: "cluster-config-api",
        entrypoint: "/usr/bin/render",
        args: vec![
            "--asset-output-dir=/assets/api-bootstrap".into(),
            "--rendered-manifest-dir=/assets/manifests".into(),
            "--cluster-profile=self-managed-high-availability".into(),
            v.into(),
        ],
        reads: vec![m("99_feature-gate.yaml")],
        makes: vec![],
        net: Net::None,
        then: vec![cp("api-bootstrap/manifests", "manifests")],
        // openshift/api payload-command/cmd/render/main.go, payload-command/render/render.go
        declared: vec![
            "rendered-manifest-dir",
            "image-manifests",
            "payload-version",
            "asset-output-dir",
            "cluster-profile",
        ],
        required: &["rendered-manifest-dir", "asset-output-dir", "payload-version"],
    }
}

/// cluster-etcd-operator's render: etcd's own signer, certificates and pod.
pub(super) fn etcd(image: &str, net: Net) -> Step {
    Step {
        name: "etcd",
        tag: "cluster-etcd-operator",
        entrypoint: "/usr/bin/cluster-etcd-operator",
        args: vec![
            "render".into(),
            "--asset-output-dir=/assets/etcd-bootstrap".into(),
            "--cluster-configmap-file=/assets/manifests/cluster-config.yaml".into(),
            format!("--etcd-image={image}"),
            "--infra-config-file=/assets/manifests/cluster-infrastructure-02-config.yml".into(),
            "--network-config-file=/assets/manifests/cluster-network-02-config.yml".into(),
        ],
        reads: vec![
            m("cluster-config.yaml"),
            m("cluster-infrastructure-02-config.yml"),
            m("cluster-network-02-config.yml"),
        ],
        makes: strings(&["tls/etcd-ca-bundle.crt", "tls/etcd-client.crt", "tls/etcd-client.key"]),
        net,
        then: vec![cp("etcd-bootstrap/manifests", "manifests"), cp("etcd-bootstrap/tls", "tls")],
        // cluster-etcd-operator pkg/cmd/render/render.go
        declared: vec![
            "asset-output-dir",
            "template-dir",
            "etcd-image",
            "network-config-file",
            "cluster-configmap-file",
            "infra-config-file",
            "delayed-ha-bootstrap-scaling-marker-file",
        ],
        required: &[
            "asset-output-dir",
            "etcd-image",
            "network-config-file",
            "cluster-configmap-file",
            "infra-config-file",
        ],
    }
}

/// The kube-apiserver operator's render: the bootstrap API server's pod and config, and the
/// signers' Secrets loaded from tls/.
pub(super) fn kube_apiserver(v: &str, hyperkube: &str, operator: &str, kubernetes: &str) -> Step {
    Step {
        name: "kube-apiserver",
        tag: "cluster-kube-apiserver-operator",
        entrypoint: "/usr/bin/cluster-kube-apiserver-operator",
        args: vec![
            "render".into(),
            "--manifest-etcd-serving-ca=etcd-ca-bundle.crt".into(),
            "--manifest-etcd-server-urls=https://localhost:2379".into(),
            format!("--manifest-image={hyperkube}"),
            format!("--manifest-operator-image={operator}"),
            "--asset-input-dir=/assets/tls".into(),
            "--asset-output-dir=/assets/kube-apiserver-bootstrap".into(),
            "--config-output-file=/assets/kube-apiserver-bootstrap/config".into(),
            "--cluster-config-file=/assets/manifests/cluster-network-02-config.yml".into(),
            "--cluster-auth-file=/assets/manifests/cluster-authentication-02-config.yaml".into(),
            "--infra-config-file=/assets/manifests/cluster-infrastructure-02-config.yml".into(),
            "--rendered-manifest-files=/assets/manifests".into(),
            v.into(),
            format!("--operand-kubernetes-version={kubernetes}"),
        ],
        reads: KAS_TLS
            .iter()
            .map(|f| format!("tls/{f}"))
            .chain([
                m("cluster-network-02-config.yml"),
                m("cluster-infrastructure-02-config.yml"),
                m("99_feature-gate.yaml"),
            ])
            .collect(),
        makes: vec![],
        net: Net::None,
        then: vec![
            cp("kube-apiserver-bootstrap/bootstrap-manifests", "bootstrap-manifests"),
            cp("kube-apiserver-bootstrap/manifests", "manifests"),
        ],
        // cluster-kube-apiserver-operator pkg/cmd/render/render.go, with library-go's options
        declared: with_generic(&[
            "manifest-lock-host-path",
            "manifest-etcd-server-urls",
            "manifest-etcd-serving-ca",
            "cluster-config-file",
            "cluster-auth-file",
            "infra-config-file",
            "operand-kubernetes-version",
        ]),
        required: &[
            "asset-output-dir",
            "asset-input-dir",
            "config-output-file",
            "manifest-image",
            "manifest-operator-image",
            "operand-kubernetes-version",
            "rendered-manifest-files",
            "payload-version",
        ],
    }
}

/// The kube-controller-manager operator's render (with the cluster-policy-controller's config).
pub(super) fn kube_controller_manager(v: &str, hyperkube: &str, policy: &str) -> Step {
    Step {
        name: "kube-controller-manager",
        tag: "cluster-kube-controller-manager-operator",
        entrypoint: "/usr/bin/cluster-kube-controller-manager-operator",
        args: vec![
            "render".into(),
            format!("--cluster-policy-controller-image={policy}"),
            format!("--manifest-image={hyperkube}"),
            "--asset-input-dir=/assets/tls".into(),
            "--asset-output-dir=/assets/kube-controller-manager-bootstrap".into(),
            "--config-output-file=/assets/kube-controller-manager-bootstrap/config".into(),
            "--cpc-config-output-file=/assets/kube-controller-manager-bootstrap/cpc-config".into(),
            "--cluster-config-file=/assets/manifests/cluster-network-02-config.yml".into(),
            "--rendered-manifest-files=/assets/manifests".into(),
            v.into(),
        ],
        reads: strings(&[
            "tls/kubelet-signer.crt",
            "tls/kubelet-signer.key",
            "tls/service-account.key",
            "auth/kubeconfig",
            "manifests/cluster-network-02-config.yml",
        ]),
        makes: vec![],
        net: Net::None,
        then: vec![
            cp("kube-controller-manager-bootstrap/bootstrap-manifests", "bootstrap-manifests"),
            cp("kube-controller-manager-bootstrap/manifests", "manifests"),
        ],
        // cluster-kube-controller-manager-operator pkg/cmd/render/render.go
        declared: with_generic(&[
            "cluster-config-file",
            "cluster-policy-controller-image",
            "cpc-config-output-file",
            "disable-phase-2",
        ]),
        required: &[
            "asset-output-dir",
            "asset-input-dir",
            "config-output-file",
            "cpc-config-output-file",
            "manifest-image",
            "rendered-manifest-files",
            "payload-version",
        ],
    }
}

/// The kube-scheduler operator's render.
pub(super) fn kube_scheduler(hyperkube: &str) -> Step {
    Step {
        name: "kube-scheduler",
        tag: "cluster-kube-scheduler-operator",
        entrypoint: "/usr/bin/cluster-kube-scheduler-operator",
        args: vec![
            "render".into(),
            format!("--manifest-image={hyperkube}"),
            "--asset-input-dir=/assets/tls".into(),
            "--asset-output-dir=/assets/kube-scheduler-bootstrap".into(),
            "--config-output-file=/assets/kube-scheduler-bootstrap/config".into(),
        ],
        reads: strings(&["auth/kubeconfig"]),
        makes: vec![],
        net: Net::None,
        then: vec![
            cp("kube-scheduler-bootstrap/bootstrap-manifests", "bootstrap-manifests"),
            cp("kube-scheduler-bootstrap/manifests", "manifests"),
        ],
        // cluster-kube-scheduler-operator cmd/render/render.go: library-go's options only
        declared: with_generic(&[]),
        required: &["asset-output-dir", "asset-input-dir", "config-output-file", "manifest-image"],
    }
}

/// A library-go operator's own flags and the render options they all share.
fn with_generic(own: &[&'static str]) -> Vec<&'static str> {
    own.iter().chain(GENERIC).copied().collect()
}
