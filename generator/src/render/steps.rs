//! The renders, in bootkube.sh's order (installer `data/data/bootstrap/files/usr/local/bin/
//! bootkube.sh.template`, 4.18): each one's image, program and flags as bootkube passes them, the
//! assets it reads, and what bootkube copies from its output before the next one runs. The flags
//! each program declares, from its source on `release-4.18`, are kept beside it so a test can
//! hold every flag given against them.

use crate::cluster::{Cluster, Role};
use std::net::IpAddr;

/// The network a render runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Net {
    /// None at all (`--net=none`): nothing to reach, nothing to learn from the host.
    None,
    /// The bootstrap's own name and address: the etcd render takes both from the machine it runs
    /// on (the first address inside the machine network) and writes them into etcd's
    /// certificates and pod.
    Bootstrap { hostname: String, ip: IpAddr, subnet: String },
}

/// bootkube's `cp FROM/* TO/` after a step (paths under /assets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone)]
pub struct Step {
    /// Short name: its output directory's prefix, its log's name.
    pub name: &'static str,
    /// The release tag of its image.
    pub tag: &'static str,
    pub entrypoint: &'static str,
    pub args: Vec<String>,
    /// Assets it reads (paths under /assets), each of which must exist and not be empty.
    pub reads: Vec<String>,
    /// Assets it makes that later steps read (after `then`), for checking the order.
    pub makes: Vec<String>,
    pub net: Net,
    pub then: Vec<Copy>,
    /// The flags its program declares, and those it refuses to run without.
    pub declared: Vec<&'static str>,
    pub required: &'static [&'static str],
}

impl Step {
    /// The flags given (`--name` of each `--name=value`).
    pub fn flags(&self) -> Vec<&str> {
        self.args
            .iter()
            .filter_map(|a| a.strip_prefix("--").map(|f| f.split('=').next().unwrap_or(f)))
            .collect()
    }
}

fn cp(from: &str, to: &str) -> Copy {
    Copy {
        from: from.into(),
        to: to.into(),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

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

/// The release tags whose images the renders run.
pub const TAGS: &[&str] = &[
    "cluster-config-api",
    "cluster-etcd-operator",
    "cluster-kube-apiserver-operator",
    "cluster-kube-controller-manager-operator",
    "cluster-kube-scheduler-operator",
    "machine-config-operator",
];

/// The renders for `c`, their images from its release. `Err` names what the release lacks (a
/// tag, its version, its Kubernetes version) or the inventory (a bootstrap node).
pub fn steps(c: &Cluster) -> Result<Vec<Step>, String> {
    let r = &c.release;
    let mut missing = Vec::new();
    let mut tag = |t: &str| match r.tags.get(t) {
        Some(p) => p.clone(),
        None => {
            missing.push(format!("the release has no {t:?} image"));
            String::new()
        }
    };
    let (etcd_image, hyperkube, kas_op, cpc, mco_image) = (
        tag("etcd"),
        tag("hyperkube"),
        tag("cluster-kube-apiserver-operator"),
        tag("cluster-policy-controller"),
        tag("machine-config-operator"),
    );
    let (oscontent, infra) = (r.tags.get("rhel-coreos").cloned().unwrap_or_else(|| tag("rhel-coreos")), tag("pod"));
    for t in [
        "cluster-config-api",
        "cluster-etcd-operator",
        "cluster-kube-controller-manager-operator",
        "cluster-kube-scheduler-operator",
    ] {
        tag(t);
    }
    let version = r.version.clone().unwrap_or_else(|| {
        missing.push("the release's version is unknown (its image-references names none)".into());
        String::new()
    });
    let kubernetes = r.kubernetes.clone().unwrap_or_else(|| {
        missing.push(
            "the release's Kubernetes version is unknown (its hyperkube tag has no io.openshift.build.versions annotation naming kubernetes=...; the kube-apiserver render needs it)"
                .into(),
        );
        String::new()
    });
    let bootstrap = c.nodes.iter().find(|n| n.role == Role::Bootstrap);
    if bootstrap.is_none() {
        missing.push("the inventory has no bootstrap node (the etcd render takes its name and address)".into());
    }
    if !missing.is_empty() {
        return Err(missing.join("; "));
    }
    let b = bootstrap.expect("checked");
    let net = Net::Bootstrap {
        hostname: b.hostname.clone(),
        ip: b.ip,
        subnet: c
            .machine_networks
            .iter()
            .find(|n| n.contains(&b.ip))
            .or(c.machine_networks.first())
            .map(|n| n.to_string())
            .unwrap_or_default(),
    };
    let v = format!("--payload-version={version}");
    Ok(vec![
        api(&v),
        etcd(&etcd_image, net),
        kube_apiserver(&v, &hyperkube, &kas_op, &kubernetes),
        kube_controller_manager(&v, &hyperkube, &cpc),
        kube_scheduler(&hyperkube),
        mco(&v, &r.image, &mco_image, &oscontent, &infra),
        mcc(&v),
    ])
}

fn m(f: &str) -> String {
    format!("manifests/{f}")
}

/// cluster-config-api's render: the FeatureGate's status for the release's version.
fn api(v: &str) -> Step {
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
fn etcd(image: &str, net: Net) -> Step {
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
fn kube_apiserver(v: &str, hyperkube: &str, operator: &str, kubernetes: &str) -> Step {
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
fn kube_controller_manager(v: &str, hyperkube: &str, policy: &str) -> Step {
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
fn kube_scheduler(hyperkube: &str) -> Step {
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

/// The flags of machine-config-operator `bootstrap` (cmd/machine-config-operator/bootstrap.go
/// and main.go).
const MCO_DECLARED: &[&str] = &[
    "root-ca",
    "kube-ca",
    "pull-secret",
    "dest-dir",
    "machine-config-operator-image",
    "machine-config-oscontent-image",
    "infra-image",
    "release-image",
    "config-file",
    "infra-config-file",
    "network-config-file",
    "cloud-config-file",
    "proxy-config-file",
    "dns-config-file",
    "additional-trust-bundle-config-file",
    "keepalived-image",
    "coredns-image",
    "haproxy-image",
    "baremetal-runtimecfg-image",
    "oauth-proxy-image",
    "kube-rbac-proxy-image",
    "baseos-image",
    "baseos-extensions-image",
    "image-references",
    "cloud-provider-ca-file",
    "payload-version",
    "operator-image",
];

/// The machine-config-operator's bootstrap: the controller's inputs and its own manifests.
fn mco(v: &str, release: &str, operator: &str, oscontent: &str, infra: &str) -> Step {
    let mut args = strings(&[
        "bootstrap",
        "--root-ca=/assets/tls/root-ca.crt",
        "--kube-ca=/assets/tls/kube-apiserver-complete-client-ca-bundle.crt",
        "--config-file=/assets/manifests/cluster-config.yaml",
        "--infra-config-file=/assets/manifests/cluster-infrastructure-02-config.yml",
        "--network-config-file=/assets/manifests/cluster-network-02-config.yml",
        "--proxy-config-file=/assets/manifests/cluster-proxy-01-config.yaml",
        "--dns-config-file=/assets/manifests/cluster-dns-02-config.yml",
        "--pull-secret=/assets/manifests/openshift-config-secret-pull-secret.yaml",
        "--image-references=/assets/image-references",
        "--dest-dir=/assets/mco-bootstrap",
    ]);
    args.extend([
        format!("--machine-config-operator-image={operator}"),
        format!("--machine-config-oscontent-image={oscontent}"),
        format!("--infra-image={infra}"),
        format!("--release-image={release}"),
        v.into(),
    ]);
    Step {
        name: "mco",
        tag: "machine-config-operator",
        entrypoint: "/usr/bin/machine-config-operator",
        args,
        reads: strings(&[
            "tls/root-ca.crt",
            "tls/kube-apiserver-complete-client-ca-bundle.crt",
            "manifests/cluster-config.yaml",
            "manifests/cluster-infrastructure-02-config.yml",
            "manifests/cluster-network-02-config.yml",
            "manifests/cluster-proxy-01-config.yaml",
            "manifests/cluster-dns-02-config.yml",
            "manifests/openshift-config-secret-pull-secret.yaml",
            "image-references",
        ]),
        makes: strings(&["mco-bootstrap/bootstrap/manifests/machineconfigcontroller-pull-secret"]),
        net: Net::None,
        // bootkube hands the controller the operator's manifests and everything rendered so far
        // (/etc/mcc/bootstrap), then adds the operator's own manifests to bootkube's.
        then: vec![
            cp("mco-bootstrap/bootstrap/manifests", "mcc-input"),
            cp("manifests", "mcc-input"),
            cp("mco-bootstrap/manifests", "manifests"),
        ],
        declared: MCO_DECLARED.to_vec(),
        required: &[
            "dest-dir",
            "machine-config-operator-image",
            "machine-config-oscontent-image",
            "infra-image",
            "release-image",
            "config-file",
        ],
    }
}

/// The machine-config-controller's bootstrap (in the installer, an init container of the
/// operator's bootstrap pod): the rendered MachineConfigs of every pool.
fn mcc(v: &str) -> Step {
    Step {
        name: "mcc",
        tag: "machine-config-operator",
        entrypoint: "/usr/bin/machine-config-controller",
        args: vec![
            "bootstrap".into(),
            "--manifest-dir=/assets/mcc-input".into(),
            "--dest-dir=/assets/mcc-output".into(),
            "--pull-secret=/assets/mco-bootstrap/bootstrap/manifests/machineconfigcontroller-pull-secret".into(),
            v.into(),
        ],
        reads: strings(&["mco-bootstrap/bootstrap/manifests/machineconfigcontroller-pull-secret"]),
        makes: vec![],
        net: Net::None,
        then: vec![],
        // machine-config-operator cmd/machine-config-controller/bootstrap.go and main.go
        declared: vec!["manifest-dir", "dest-dir", "pull-secret", "payload-version", "templates"],
        required: &["manifest-dir", "dest-dir", "pull-secret"],
    }
}

/// A library-go operator's own flags and the render options they all share.
fn with_generic(own: &[&'static str]) -> Vec<&'static str> {
    own.iter().chain(GENERIC).copied().collect()
}
