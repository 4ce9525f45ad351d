//! What the machine-config server adds to the rendered config it serves a node on first boot
//! (machine-config-operator `pkg/server/server.go`, release-4.18), made here so that a complete
//! per-node config carries it: the kubelet's client CA, the daemon's initial node annotations, the
//! served MachineConfig itself and, last, the encapsulated MachineConfig the firstboot and pull
//! units are conditioned on (without it: no pivot to osImageURL, no kernel arguments). Each is
//! mode 0644, as the server writes them. The bootstrap kubeconfig it also serves is the node's own
//! (`/etc/kubernetes/kubeconfig`, placed by `node`).

use crate::ignition::NodeFile;
use serde_json::{json, Value};

pub const KUBELET_CA: &str = "/etc/kubernetes/kubelet-ca.crt";
pub const NODE_ANNOTATIONS: &str = "/etc/machine-config-daemon/node-annotations.json";
pub const CONTENT: &str = "/etc/mcs-machine-config-content.json";
pub const ENCAPSULATED: &str = "/etc/ignition-machine-config-encapsulated.json";
/// The Ignition version the server encapsulates with (the MCO's internal spec, 3.4).
const ENCAPSULATED_VERSION: &str = "3.4.0";

/// The files, in the server's order. `kubelet_ca`: the ControllerConfig's
/// `kubeAPIServerServingCAData` (what `--kube-ca` gave the MCO's bootstrap), which replaces the
/// rendered config's copy.
pub fn served_files(mc: &Value, kubelet_ca: &str) -> Vec<NodeFile> {
    let name = mc["metadata"]["name"].as_str().unwrap_or_default();
    // Keys in order (the server marshals a map: sorted, compact).
    let annotations = json!({
        "machineconfiguration.openshift.io/currentConfig": name,
        "machineconfiguration.openshift.io/desiredConfig": name,
        "machineconfiguration.openshift.io/state": "Done",
    });
    let mut content = serde_json::to_vec_pretty(mc).expect("a JSON value serializes");
    content = reindent(&content);
    let mut encapsulated = mc.clone();
    encapsulated["spec"]["config"] = json!({"ignition": {"version": ENCAPSULATED_VERSION}});
    vec![
        NodeFile::new(KUBELET_CA, 0o644, kubelet_ca.to_string()).over_base(),
        NodeFile::new(NODE_ANNOTATIONS, 0o644, serde_json::to_vec(&annotations).expect("serializes")).over_base(),
        NodeFile::new(CONTENT, 0o644, content).over_base(),
        NodeFile::new(ENCAPSULATED, 0o644, serde_json::to_vec(&encapsulated).expect("serializes")).over_base(),
    ]
}

/// serde_json's two-space indent as the server's four (Go's MarshalIndent with "    ").
fn reindent(pretty: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(pretty);
    let mut out = String::with_capacity(pretty.len() * 5 / 4);
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let spaces = line.len() - line.trim_start_matches(' ').len();
        out.push_str(&" ".repeat(spaces * 2));
        out.push_str(&line[spaces..]);
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_files_from_a_rendered_machine_config() {
        let mc = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": "rendered-master-0123"},
            "spec": {"osImageURL": "quay.io/x@sha256:1", "config": {"ignition": {"version": "3.4.0"}, "storage": {"files": []}},
                     "kernelArguments": ["a=b"]}});
        let files = served_files(&mc, "CA\n");
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, [KUBELET_CA, NODE_ANNOTATIONS, CONTENT, ENCAPSULATED]);
        assert!(files.iter().all(|f| f.mode == 0o644 && f.replaces_base));
        assert_eq!(
            std::str::from_utf8(&files[1].contents).unwrap(),
            r#"{"machineconfiguration.openshift.io/currentConfig":"rendered-master-0123","machineconfiguration.openshift.io/desiredConfig":"rendered-master-0123","machineconfiguration.openshift.io/state":"Done"}"#
        );
        let content: Value = serde_json::from_slice(&files[2].contents).unwrap();
        assert_eq!(content, mc);
        assert!(std::str::from_utf8(&files[2].contents).unwrap().contains("\n    \"kind\""));
        let enc: Value = serde_json::from_slice(&files[3].contents).unwrap();
        assert_eq!(enc["spec"]["config"], json!({"ignition": {"version": "3.4.0"}}));
        assert_eq!(enc["spec"]["kernelArguments"], json!(["a=b"]));
        assert_eq!(enc["metadata"]["name"], "rendered-master-0123");
    }
}
