//! Kubernetes objects as JSON values: what names one, across the bundle's manifests and the
//! renders' (theirs win over the bundle's by it, `render::diff` pairs them by it).

use serde_json::Value;

/// An object's identity: `Kind group namespace/name`.
pub fn identity(o: &Value) -> String {
    let api = o["apiVersion"].as_str().unwrap_or_default();
    let group = api.split_once('/').map(|(g, _)| g).unwrap_or("");
    let kind = o["kind"].as_str().unwrap_or_default();
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    let ns = o["metadata"]["namespace"].as_str().map(|n| format!("{n}/")).unwrap_or_default();
    match group {
        "" => format!("{kind} {ns}{name}"),
        g => format!("{kind}.{g} {ns}{name}"),
    }
}
