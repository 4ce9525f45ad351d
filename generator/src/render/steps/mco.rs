//! The machine-config operator's bootstrap and its controller's: the rendered MachineConfigs.

use super::{cp, strings, Net, Step};

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
/// `machine_configs`: the layout has MachineConfigs in `openshift/` (99-<role>-ssh, -fips).
pub(super) fn mco(v: &str, release: &str, operator: &str, oscontent: &str, infra: &str, machine_configs: bool) -> Step {
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
        // The installer's openshift/ MachineConfigs go in too, so the controller's rendered names
        // are the ones the cluster's controller makes from the same MachineConfigs.
        then: [cp("mco-bootstrap/bootstrap/manifests", "mcc-input"), cp("manifests", "mcc-input")]
            .into_iter()
            .chain(machine_configs.then(|| cp("openshift", "mcc-input")))
            .chain([cp("mco-bootstrap/manifests", "manifests")])
            .collect(),
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
pub(super) fn mcc(v: &str) -> Step {
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
