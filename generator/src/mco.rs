//! `DIR/mco/`: what the machine-config-operator needs to render the masters' and workers' OS
//! configuration (br-ex and Open vSwitch for OVN-Kubernetes, CRI-O, the kubelet, node IP
//! selection), and `render.sh`, the two podman runs that render it with the release's own
//! machine-config-operator image: `machine-config-operator bootstrap`, then
//! `machine-config-controller bootstrap`. The config CRs are the very objects bootkube applies
//! to the cluster, so the rendered nodes and the cluster agree.
//! Flags and file names: machine-config-operator `cmd/machine-config-operator/bootstrap.go`.

use crate::assets::manifests;
use crate::cluster::Cluster;
use crate::pki::{trust, Pki};
use serde_json::Value;

pub const DIR: &str = crate::layout::MCO;
/// Where render.sh leaves the rendered MachineConfigs; `create` merges nodes into them.
pub const RENDERED_MASTER: &str = "mco/rendered/master.yaml";
pub const RENDERED_WORKER: &str = "mco/rendered/worker.yaml";
/// The controller's pools and rendered MachineConfigs, as the bootstrap's machine-config server
/// serves them (`machine-config-server bootstrap --server-basedir`).
pub const MCS_BOOTSTRAP: &str = "mco/rendered/mcs-bootstrap";

/// The MCO render's copies of what bootkube applies after the CVO (`manifests::after_cvo`), named
/// as the installer's openshift/ manifests are.
const AFTER_CVO_PREFIX: &str = "99_openshift-machineconfig_";
/// The same, as a bundle path's prefix (`verify` knows their CRDs come from the release).
pub const AFTER_CVO_INPUTS: &str = "mco/manifests/99_openshift-machineconfig_";

/// (path inside the bundle directory, mode, contents)
pub type McoFile = (String, u32, Vec<u8>);

/// Every input file, by the names the MCO's flags default to. The config CRs are found by group,
/// kind and name among the manifests bootkube applies; one that is not there is named, never guessed.
pub fn inputs(c: &Cluster, pki: &Pki) -> Result<Vec<McoFile>, crate::render::Lacking> {
    let yaml = |v: &Value| crate::yamlout::to_yaml(v).into_bytes();
    let mut out: Vec<McoFile> = Vec::new();
    let mut add = |p: &str, mode: u32, bytes: Vec<u8>| out.push((format!("{DIR}/{p}"), mode, bytes));
    for (file, v) in crate::render::assets::config_crs(c, pki)? {
        // render.sh names the FeatureGate as it did before the renders took the installer's names.
        let file = if file == "99_feature-gate.yaml" { "featuregate.yaml" } else { file };
        let mode = if v["kind"] == "Secret" { 0o600 } else { 0o644 };
        add(&format!("manifests/{file}"), mode, yaml(&v));
    }
    // The MCO's bootstrap reads MachineConfigs from the manifests, as bootkube.sh gives it the
    // installer's openshift/99_openshift-machineconfig_*.yaml.
    for mc in manifests::after_cvo(c).iter().flat_map(|(_, o)| o) {
        let name = mc["metadata"]["name"].as_str().unwrap_or_default();
        add(&format!("manifests/{AFTER_CVO_PREFIX}{name}.yaml"), 0o644, yaml(mc));
    }
    add("tls/root-ca.crt", 0o644, pki.get("pki/root-ca").cert_pem.clone().into_bytes());
    add(
        "tls/kube-apiserver-serving-ca-bundle.crt",
        0o644,
        trust::api_server_ca(pki).into_bytes(),
    );
    // `--kube-ca`: the installer's kube-apiserver-complete-client-ca-bundle. The MCO serves it to
    // every node as /etc/kubernetes/kubelet-ca.crt, the kubelet's clientCAFile: it must hold the
    // signers of the API servers' kubelet client certificates, now and after the pivot.
    add(
        "tls/kube-apiserver-complete-client-ca-bundle.crt",
        0o644,
        trust::client_ca(pki).into_bytes(),
    );
    let mut refs = serde_json::to_string_pretty(&crate::render::assets::image_references(c)).expect("json");
    refs.push('\n');
    add("image-references", 0o644, refs.into_bytes());
    add("pull-secret.json", 0o600, c.pull_secret.clone().into_bytes());
    if let Some(r) = crate::assets::node::registries_conf(c) {
        add("registries.conf", 0o644, r.into_bytes());
    }
    add("render.sh", 0o755, render_script(c).into_bytes());
    Ok(out)
}

use crate::shell::quote as sh_quote;

/// The three podman runs (the cluster-config-api render fills the FeatureGate's status, as
/// bootkube.sh runs it first; then the MCO's and the controller's bootstraps, each told the
/// release's version), then the rendered MachineConfigs moved to `rendered/`.
pub fn render_script(c: &Cluster) -> String {
    let tag = |t: &str| c.release.tags.get(t).cloned().unwrap_or_default();
    let version = c.release.version.clone().unwrap_or_default();
    crate::scripts::fill(
        crate::scripts::MCO_RENDER,
        &[
            ("domain", &c.domain()),
            ("mco", &sh_quote(&tag("machine-config-operator"))),
            ("config_api", &sh_quote(&tag("cluster-config-api"))),
            ("release", &sh_quote(&c.release.image)),
            ("version", &sh_quote(&version)),
            (
                "oscontent",
                &sh_quote(
                    &c.release
                        .tags
                        .get("rhel-coreos")
                        .or_else(|| c.release.tags.get("machine-os-content"))
                        .cloned()
                        .unwrap_or_default(),
                ),
            ),
            ("infra", &sh_quote(&tag("pod"))),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_after_cvo_inputs_are_where_verify_looks_for_them() {
        let c = crate::testing::example_cluster(None);
        let p = crate::pki::issue(
            &crate::pki::plan(&c),
            &Default::default(),
            time::OffsetDateTime::now_utc(),
            &crate::pki::keys::SystemKeys,
            Default::default(),
        )
        .unwrap();
        let paths: Vec<String> = inputs(&c, &p).unwrap().into_iter().map(|(p, _, _)| p).collect();
        let ssh: Vec<&String> = paths.iter().filter(|p| p.starts_with(AFTER_CVO_INPUTS)).collect();
        assert_eq!(ssh.len(), 2, "{paths:?}");
        assert!(ssh.iter().all(|p| p.ends_with("-ssh.yaml")), "{ssh:?}");
    }
}
