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
    let mc = &go_order(mc);
    let mut content = serde_json::to_vec_pretty(mc).expect("a JSON value serializes");
    content = go_escape(&reindent(&content));
    let mut encapsulated = mc.clone();
    encapsulated["spec"]["config"] = json!({"ignition": {"version": ENCAPSULATED_VERSION}});
    vec![
        NodeFile::new(KUBELET_CA, 0o644, kubelet_ca.to_string()).over_base(),
        NodeFile::new(NODE_ANNOTATIONS, 0o644, serde_json::to_vec(&annotations).expect("serializes")).over_base(),
        NodeFile::new(CONTENT, 0o644, content).over_base(),
        NodeFile::new(
            ENCAPSULATED,
            0o644,
            go_escape(&serde_json::to_vec(&encapsulated).expect("serializes")),
        )
        .over_base(),
    ]
}

/// The server decodes the MachineConfig into its Go types and encodes it again: keys in the
/// order the types declare them, a zero `creationTimestamp` left out. `spec.config` is raw JSON
/// to the server: kept as it is. (Found by comparing with what the release's server serves.)
fn go_order(mc: &Value) -> Value {
    const TOP: &[&str] = &["kind", "apiVersion", "metadata", "spec", "status"];
    const META: &[&str] = &[
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    ];
    const OWNER: &[&str] = &["apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"];
    const SPEC: &[&str] = &[
        "osImageURL",
        "baseOSExtensionsContainerImage",
        "config",
        "kernelArguments",
        "extensions",
        "fips",
        "kernelType",
    ];
    fn ordered(v: &Value, order: &[&str], inner: &dyn Fn(&str, &Value) -> Value) -> Value {
        let Some(m) = v.as_object() else { return v.clone() };
        let mut out = serde_json::Map::new();
        let known = order.iter().filter_map(|k| m.get_key_value(*k));
        let rest = m.iter().filter(|(k, _)| !order.contains(&k.as_str()));
        for (k, v) in known.chain(rest) {
            if k == "creationTimestamp" && v.is_null() {
                continue;
            }
            out.insert(k.clone(), inner(k, v));
        }
        Value::Object(out)
    }
    let owners = |v: &Value| match v.as_array() {
        Some(a) => Value::Array(a.iter().map(|o| ordered(o, OWNER, &|_, v| v.clone())).collect()),
        None => v.clone(),
    };
    let meta = |k: &str, v: &Value| if k == "ownerReferences" { owners(v) } else { v.clone() };
    ordered(mc, TOP, &|k, v| match k {
        "metadata" => ordered(v, META, &meta),
        "spec" => ordered(v, SPEC, &|_, v| v.clone()),
        _ => v.clone(),
    })
}

/// Go's encoding/json escapes HTML's characters and two line separators inside strings (which is
/// the only place they can be in JSON).
fn go_escape(json: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(json);
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out.into_bytes()
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
