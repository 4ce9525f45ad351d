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
use serde_json::{json, Value};

pub const DIR: &str = crate::layout::MCO;
/// Where render.sh leaves the rendered MachineConfigs; `create` merges nodes into them.
pub const RENDERED_MASTER: &str = "mco/rendered/master.yaml";
pub const RENDERED_WORKER: &str = "mco/rendered/worker.yaml";

/// (path inside the bundle directory, mode, contents)
pub type McoFile = (String, u32, Vec<u8>);

/// The release's image references as the ImageStream the MCO reads (`--image-references`).
pub fn image_references(c: &Cluster) -> Value {
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

/// Every input file, by the names the MCO's flags default to. The config CRs are found by group,
/// kind and name among the manifests bootkube applies; one that is not there is named, never guessed.
pub fn inputs(c: &Cluster, pki: &Pki) -> Result<Vec<McoFile>, String> {
    let all = manifests::manifests(c, pki, None);
    // By identity: group, kind and name (a config Network and an operator Network share a kind).
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
    let missing = std::cell::RefCell::new(Vec::new());
    let yaml = |v: &Value| crate::yamlout::to_yaml(v).into_bytes();
    let mut out: Vec<McoFile> = Vec::new();
    let mut add = |p: &str, mode: u32, bytes: Vec<u8>| out.push((format!("{DIR}/{p}"), mode, bytes));
    let pick = |group: &str, kind: &str, name: &str| {
        find(group, kind, Some(name)).unwrap_or_else(|| {
            missing.borrow_mut().push(format!("{kind} {name}"));
            Value::Null
        })
    };
    add(
        "manifests/cluster-config.yaml",
        0o644,
        yaml(&pick("", "ConfigMap", "cluster-config-v1")),
    );
    add(
        "manifests/cluster-infrastructure-02-config.yml",
        0o644,
        yaml(&pick("config.openshift.io", "Infrastructure", "cluster")),
    );
    add(
        "manifests/cluster-network-02-config.yml",
        0o644,
        yaml(&pick("config.openshift.io", "Network", "cluster")),
    );
    add(
        "manifests/cluster-proxy-01-config.yaml",
        0o644,
        yaml(&pick("config.openshift.io", "Proxy", "cluster")),
    );
    add(
        "manifests/cluster-dns-02-config.yml",
        0o644,
        yaml(&pick("config.openshift.io", "DNS", "cluster")),
    );
    add(
        "manifests/featuregate.yaml",
        0o644,
        yaml(&pick("config.openshift.io", "FeatureGate", "cluster")),
    );
    if let Some(cm) = find("", "ConfigMap", Some("user-ca-bundle")) {
        add("manifests/user-ca-bundle-config.yaml", 0o644, yaml(&cm));
    }
    // The MCO's bootstrap reads MachineConfigs from the manifests, as bootkube.sh gives it the
    // installer's openshift/99_openshift-machineconfig_*.yaml.
    for mc in manifests::after_cvo(c).iter().flat_map(|(_, o)| o) {
        let name = mc["metadata"]["name"].as_str().unwrap_or_default();
        add(&format!("manifests/99_openshift-machineconfig_{name}.yaml"), 0o644, yaml(mc));
    }
    if let Some(idms) = find("config.openshift.io", "ImageDigestMirrorSet", None) {
        add("manifests/image-digest-mirror-set.yaml", 0o644, yaml(&idms));
    }
    add(
        "manifests/openshift-config-secret-pull-secret.yaml",
        0o600,
        yaml(&pick("", "Secret", "pull-secret")),
    );
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
    let mut refs = serde_json::to_string_pretty(&image_references(c)).expect("json");
    refs.push('\n');
    add("image-references", 0o644, refs.into_bytes());
    add("pull-secret.json", 0o600, c.pull_secret.clone().into_bytes());
    if let Some(r) = crate::assets::node::registries_conf(c) {
        add("registries.conf", 0o644, r.into_bytes());
    }
    add("render.sh", 0o755, render_script(c).into_bytes());
    let missing = missing.into_inner();
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "the cluster's manifests hold no {}: the MCO's bootstrap needs each",
            missing.join(", ")
        ))
    }
}

/// A word for bash, whatever it holds: the inputs name these strings, not us.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The three podman runs (the cluster-config-api render fills the FeatureGate's status, as
/// bootkube.sh runs it first; then the MCO's and the controller's bootstraps, each told the
/// release's version), then the rendered MachineConfigs moved to `rendered/`.
pub fn render_script(c: &Cluster) -> String {
    let tag = |t: &str| c.release.tags.get(t).cloned().unwrap_or_default();
    let version = c.release.version.clone().unwrap_or_default();
    format!(
        r#"#!/bin/bash
# Generated by hardshift for {domain}: render the masters' and workers' OS configuration with the
# release's machine-config-operator, as the installer's bootstrap does. Needs podman and the
# release's images (through the mirrors in registries.conf when the cluster has any).
#   mco/render.sh            then: hardshift create --dir <this bundle>  (merges nodes into rendered/)
# PODMAN=... to use another podman (or a wrapper); MCO_IMAGE=... and CONFIG_API_IMAGE=... to
# override the images.
set -euo pipefail
here=$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)
PODMAN=${{PODMAN:-podman}}
MCO_IMAGE=${{MCO_IMAGE:-{mco}}}
CONFIG_API_IMAGE=${{CONFIG_API_IMAGE:-{config_api}}}
RELEASE_IMAGE={release}
VERSION={version}
[ -n "$CONFIG_API_IMAGE" ] || {{ echo "render.sh: the release has no cluster-config-api image (set CONFIG_API_IMAGE)" >&2; exit 1; }}
[ -f "$here/registries.conf" ] && export CONTAINERS_REGISTRIES_CONF="$here/registries.conf"
command -v "$PODMAN" >/dev/null || {{ echo "render.sh: $PODMAN not found (install podman, or set PODMAN)" >&2; exit 1; }}
work=$(mktemp -d "$here/.render.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$here/manifests" "$here/tls" "$here/image-references" "$work/"
extra=()
[ -f "$here/manifests/user-ca-bundle-config.yaml" ] && extra+=(--additional-trust-bundle-config-file=/assets/manifests/user-ca-bundle-config.yaml)

[ -n "$VERSION" ] || {{ echo "render.sh: the release's version is unknown (image-references names none)" >&2; exit 1; }}

# As bootkube.sh: the FeatureGate's status (the release's gates for its version) first.
echo "render.sh: cluster-config-api render ($CONFIG_API_IMAGE)"
"$PODMAN" run --rm --net=none --user 0 --authfile "$here/pull-secret.json" \
  --volume "$work:/assets:z" --entrypoint /usr/bin/render "$CONFIG_API_IMAGE" \
  --cluster-profile=self-managed-high-availability \
  --payload-version="$VERSION" \
  --rendered-manifest-dir=/assets/manifests \
  --asset-output-dir=/assets/config-bootstrap

echo "render.sh: machine-config-operator bootstrap ($MCO_IMAGE)"
"$PODMAN" run --rm --net=none --user 0 --authfile "$here/pull-secret.json" \
  --volume "$work:/assets:z" "$MCO_IMAGE" bootstrap \
  --payload-version="$VERSION" \
  --root-ca=/assets/tls/root-ca.crt \
  --kube-ca=/assets/tls/kube-apiserver-complete-client-ca-bundle.crt \
  --config-file=/assets/manifests/cluster-config.yaml \
  --infra-config-file=/assets/manifests/cluster-infrastructure-02-config.yml \
  --network-config-file=/assets/manifests/cluster-network-02-config.yml \
  --proxy-config-file=/assets/manifests/cluster-proxy-01-config.yaml \
  --dns-config-file=/assets/manifests/cluster-dns-02-config.yml \
  --pull-secret=/assets/manifests/openshift-config-secret-pull-secret.yaml \
  --image-references=/assets/image-references \
  --machine-config-operator-image={mco} \
  --machine-config-oscontent-image={oscontent} \
  --infra-image={infra} \
  --release-image="$RELEASE_IMAGE" \
  --dest-dir=/assets/mco-bootstrap "${{extra[@]}}"

# The controller reads the operator's output with the FeatureGate, the mirrors and the images.
mkdir -p "$work/mcc-input"
cp "$work"/mco-bootstrap/bootstrap/manifests/* "$work/mcc-input/"
cp "$work/manifests/featuregate.yaml" "$work/image-references" "$work/mcc-input/"
[ -f "$work/manifests/image-digest-mirror-set.yaml" ] && cp "$work/manifests/image-digest-mirror-set.yaml" "$work/mcc-input/"

echo "render.sh: machine-config-controller bootstrap"
"$PODMAN" run --rm --net=none --user 0 --authfile "$here/pull-secret.json" \
  --volume "$work:/assets:z" --entrypoint /usr/bin/machine-config-controller "$MCO_IMAGE" bootstrap \
  --payload-version="$VERSION" \
  --manifest-dir=/assets/mcc-input \
  --dest-dir=/assets/mcc-output \
  --pull-secret=/assets/mco-bootstrap/bootstrap/manifests/machineconfigcontroller-pull-secret

mkdir -p "$here/rendered.new"
for pool in master worker; do
  f=$(ls "$work"/mcc-output/machine-configs/rendered-$pool-*.yaml 2>/dev/null | head -1)
  [ -n "$f" ] || {{ echo "render.sh: no rendered-$pool MachineConfig in the controller's output" >&2; exit 1; }}
  cp "$f" "$here/rendered.new/$pool.yaml"
done
rm -rf "$here/rendered" && mv "$here/rendered.new" "$here/rendered"
echo "render.sh: wrote $here/rendered/master.yaml and worker.yaml (release $VERSION); now run hardshift create again"
"#,
        domain = c.domain(),
        mco = sh_quote(&tag("machine-config-operator")),
        oscontent = sh_quote(
            &c.release
                .tags
                .get("rhel-coreos")
                .or_else(|| c.release.tags.get("machine-os-content"))
                .cloned()
                .unwrap_or_default()
        ),
        infra = sh_quote(&tag("pod")),
        config_api = sh_quote(&tag("cluster-config-api")),
        release = sh_quote(&c.release.image),
        version = sh_quote(&version),
    )
}
