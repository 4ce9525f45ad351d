//! What the API server says, reduced to what phases and diagnosis read: Nodes, CSRs,
//! ClusterOperators, ClusterVersion and the control-plane pods. Pure: an object's JSON in, its
//! projection out (no secrets, no managed fields, no spec the install does not need), and the
//! change between two projections as a line for the timeline.

use serde_json::{json, Map, Value};

/// The kinds watched, with the namespaces of the namespaced ones.
pub const KINDS: &[(&str, &[&str])] = &[
    ("Node", &[]),
    ("CertificateSigningRequest", &[]),
    ("ClusterOperator", &[]),
    ("ClusterVersion", &[]),
    ("Pod", &["openshift-etcd", "openshift-kube-apiserver"]),
];

/// One object as stored: its identity and its projection.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ApiObject {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub observed_ms: i64,
    pub deleted: bool,
    pub view: Value,
}

impl ApiObject {
    /// `status.conditions[type=t].status == "True"`.
    pub fn condition(&self, t: &str) -> Option<&Value> {
        self.view["conditions"].as_array()?.iter().find(|c| c["type"] == t)
    }
    pub fn is_true(&self, t: &str) -> bool {
        self.condition(t).is_some_and(|c| c["status"] == "True")
    }
}

fn pick(from: &Value, keys: &[&str]) -> Value {
    let mut m = Map::new();
    for k in keys {
        if let Some(v) = from.get(*k).filter(|v| !v.is_null()) {
            m.insert((*k).to_string(), v.clone());
        }
    }
    Value::Object(m)
}

fn conditions(status: &Value) -> Value {
    Value::Array(
        status["conditions"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .map(|c| pick(c, &["type", "status", "reason", "message", "lastTransitionTime"]))
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// The projection of one object of `kind`.
pub fn project(kind: &str, obj: &Value) -> Value {
    let meta = &obj["metadata"];
    let status = &obj["status"];
    let mut v = json!({ "created": meta["creationTimestamp"] });
    let m = v.as_object_mut().expect("object");
    match kind {
        "Node" => {
            let roles: Vec<String> = meta["labels"]
                .as_object()
                .map(|l| {
                    l.keys()
                        .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            m.insert("roles".into(), json!(roles));
            m.insert("conditions".into(), conditions(status));
            m.insert("addresses".into(), status["addresses"].clone());
            m.insert("kubeletVersion".into(), status["nodeInfo"]["kubeletVersion"].clone());
        }
        "CertificateSigningRequest" => {
            // spec.request is public (a CSR), but nothing here reads it: keep the store small.
            m.insert("signerName".into(), obj["spec"]["signerName"].clone());
            m.insert("username".into(), obj["spec"]["username"].clone());
            // The node it is for: a kubelet's first CSR comes from the bootstrap identity, and
            // only its request's CN names the node.
            if let Some(n) = csr_node(&obj["spec"]) {
                m.insert("node".into(), json!(n));
            }
            m.insert("conditions".into(), conditions(status));
            m.insert(
                "issued".into(),
                json!(status["certificate"].as_str().is_some_and(|c| !c.is_empty())),
            );
        }
        "ClusterOperator" => {
            m.insert("conditions".into(), conditions(status));
            m.insert("versions".into(), status["versions"].clone());
        }
        "ClusterVersion" => {
            m.insert("conditions".into(), conditions(status));
            m.insert("desired".into(), pick(&status["desired"], &["version", "image"]));
        }
        "Pod" => {
            m.insert("nodeName".into(), obj["spec"]["nodeName"].clone());
            m.insert("phase".into(), status["phase"].clone());
            m.insert("conditions".into(), conditions(status));
            let containers: Vec<Value> = status["containerStatuses"]
                .as_array()
                .map(|cs| {
                    cs.iter()
                        .map(|c| {
                            let state = &c["state"];
                            let (s, why) = if let Some(w) = state.get("waiting").filter(|w| !w.is_null()) {
                                ("waiting", w["reason"].clone())
                            } else if let Some(t) = state.get("terminated").filter(|t| !t.is_null()) {
                                ("terminated", t["reason"].clone())
                            } else {
                                ("running", Value::Null)
                            };
                            json!({"name": c["name"], "ready": c["ready"], "restartCount": c["restartCount"],
                                   "state": s, "reason": why})
                        })
                        .collect()
                })
                .unwrap_or_default();
            m.insert("containers".into(), Value::Array(containers));
        }
        _ => {}
    }
    v
}

/// `system:node:NAME` as the requester, or as the request's CN.
fn csr_node(spec: &Value) -> Option<String> {
    use base64::Engine;
    if let Some(n) = spec["username"].as_str().and_then(|u| u.strip_prefix("system:node:")) {
        return Some(n.to_string());
    }
    let pem = base64::engine::general_purpose::STANDARD.decode(spec["request"].as_str()?).ok()?;
    crate::approver::requested_node(&pem)
}

fn cond_map(v: &Value) -> Vec<(String, String)> {
    v["conditions"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["type"].as_str().unwrap_or("").to_string(),
                        c["status"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What changed between two projections, as a short line ("Ready False → True"), or None when
/// nothing a person would look at changed (a heartbeat, a resourceVersion).
pub fn change(kind: &str, before: Option<&Value>, after: Option<&Value>) -> Option<String> {
    let (b, a) = match (before, after) {
        (None, None) => return None,
        (None, Some(a)) => {
            let conds: Vec<String> = cond_map(a).into_iter().map(|(t, s)| format!("{t}={s}")).collect();
            return Some(if conds.is_empty() {
                "created".into()
            } else {
                format!("created ({})", conds.join(", "))
            });
        }
        (Some(_), None) => return Some("deleted".into()),
        (Some(b), Some(a)) => (b, a),
    };
    let mut out = Vec::new();
    let old = cond_map(b);
    for (t, s) in cond_map(a) {
        match old.iter().find(|(ot, _)| *ot == t) {
            Some((_, os)) if *os == s => {}
            Some((_, os)) => out.push(format!("{t} {os} → {s}")),
            None => out.push(format!("{t}={s}")),
        }
    }
    match kind {
        "Pod" => {
            if b["phase"] != a["phase"] {
                out.push(format!(
                    "phase {} → {}",
                    b["phase"].as_str().unwrap_or("-"),
                    a["phase"].as_str().unwrap_or("-")
                ));
            }
            let restarts = |v: &Value| -> i64 {
                v["containers"]
                    .as_array()
                    .map(|cs| cs.iter().filter_map(|c| c["restartCount"].as_i64()).sum())
                    .unwrap_or(0)
            };
            if restarts(a) > restarts(b) {
                out.push(format!("restarts {} → {}", restarts(b), restarts(a)));
            }
        }
        "CertificateSigningRequest" if a["issued"] == true && b["issued"] != true => out.push("issued".into()),
        "ClusterVersion" if a["desired"] != b["desired"] => {
            out.push(format!("desired {}", a["desired"]["version"].as_str().unwrap_or("?")))
        }
        _ => {}
    }
    (!out.is_empty()).then(|| out.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_reduced_to_roles_conditions_and_addresses() {
        let node = json!({
            "metadata": {"name": "master-0", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"node-role.kubernetes.io/master": "", "kubernetes.io/os": "linux"},
                         "managedFields": [{"manager": "kubelet"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                       "message": "cni plugin not initialized", "lastHeartbeatTime": "x"}],
                       "addresses": [{"type": "InternalIP", "address": "192.168.126.101"}],
                       "nodeInfo": {"kubeletVersion": "v1.33.2", "machineID": "secret-ish"}}
        });
        let v = project("Node", &node);
        assert_eq!(v["roles"], json!(["master"]));
        assert_eq!(v["conditions"][0]["reason"], "KubeletNotReady");
        assert!(v["conditions"][0].get("lastHeartbeatTime").is_none());
        assert!(!v.to_string().contains("managedFields") && !v.to_string().contains("machineID"));
        let mut ready = node.clone();
        ready["status"]["conditions"][0]["status"] = json!("True");
        ready["status"]["conditions"][0]["lastHeartbeatTime"] = json!("y");
        assert_eq!(
            change("Node", Some(&v), Some(&project("Node", &ready))).as_deref(),
            Some("Ready False → True")
        );
        // A heartbeat alone is not a change.
        let mut beat = node.clone();
        beat["status"]["conditions"][0]["lastHeartbeatTime"] = json!("z");
        assert_eq!(change("Node", Some(&v), Some(&project("Node", &beat))), None);
    }

    #[test]
    fn csrs_and_pods_say_what_a_person_looks_for() {
        let csr = json!({"metadata": {"name": "csr-1"}, "spec": {"signerName": "kubernetes.io/kubelet-serving",
                 "username": "system:node:master-0", "request": "LS0t"}, "status": {}});
        let pending = project("CertificateSigningRequest", &csr);
        assert!(pending.get("request").is_none());
        assert_eq!(pending["node"], "master-0");
        // A kubelet's first CSR comes from the bootstrap identity: its CN names the node.
        use base64::Engine;
        let req = crate::approver::tests::request("system:node:worker-0", &["system:nodes"], vec![]);
        let first = json!({"metadata": {"name": "csr-2"}, "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                 "username": "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper",
                 "request": base64::engine::general_purpose::STANDARD.encode(req)}, "status": {}});
        assert_eq!(project("CertificateSigningRequest", &first)["node"], "worker-0");
        let mut other = first.clone();
        other["spec"]["request"] = json!("LS0t");
        assert!(project("CertificateSigningRequest", &other).get("node").is_none());
        let mut done = csr.clone();
        done["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}], "certificate": "LS0t"});
        assert_eq!(
            change(
                "CertificateSigningRequest",
                Some(&pending),
                Some(&project("CertificateSigningRequest", &done))
            )
            .as_deref(),
            Some("Approved=True, issued")
        );
        let pod = |restarts: i64, waiting: bool| {
            let state = if waiting {
                json!({"waiting": {"reason": "CrashLoopBackOff"}})
            } else {
                json!({"running": {}})
            };
            project(
                "Pod",
                &json!({"metadata": {"name": "etcd-master-0"}, "spec": {"nodeName": "master-0"},
                "status": {"phase": "Running", "containerStatuses": [{"name": "etcd", "ready": !waiting,
                "restartCount": restarts, "state": state}]}}),
            )
        };
        assert_eq!(pod(3, true)["containers"][0]["reason"], "CrashLoopBackOff");
        assert_eq!(
            change("Pod", Some(&pod(2, false)), Some(&pod(3, true))).as_deref(),
            Some("restarts 2 → 3")
        );
        assert_eq!(change("Pod", None, Some(&pod(0, false))).as_deref(), Some("created"));
        assert_eq!(change("Pod", Some(&pod(0, false)), None).as_deref(), Some("deleted"));
    }
}
