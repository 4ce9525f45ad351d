//! The rules over the API's own JSON (`kubectl get csr -o json`, `kubectl get nodes -o json`):
//! what a node's post-reboot step has, without a Kubernetes client in the agent.

use crate::{client_node, decide_pass, Csr, Decision, Inventory};
use base64::Engine;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One CSR object as the rules see it; `None` for what is not a CSR object.
fn csr(item: &Value) -> Option<Csr> {
    let spec = item.get("spec")?;
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    // spec.request is the PEM, base64-encoded (a []byte field).
    let request_pem = spec
        .get("request")
        .and_then(Value::as_str)
        .and_then(|r| base64::engine::general_purpose::STANDARD.decode(r).ok())
        .unwrap_or_default();
    Some(Csr {
        name: item.pointer("/metadata/name")?.as_str()?.to_string(),
        signer: spec.get("signerName").and_then(Value::as_str).unwrap_or_default().to_string(),
        username: spec.get("username").and_then(Value::as_str).unwrap_or_default().to_string(),
        groups: strings(spec.get("groups")),
        usages: strings(spec.get("usages")),
        request_pem,
    })
}

fn conditions(item: &Value) -> &[Value] {
    item.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn approved(item: &Value) -> bool {
    conditions(item).iter().any(|c| c["type"] == "Approved" && c["status"] == "True")
}

/// A JSON document given as a list that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: not a Kubernetes list (no items)")]
pub struct NotAList {
    pub what: &'static str,
}

fn items(list: &Value, what: &'static str) -> Result<Vec<Value>, NotAList> {
    list.get("items").and_then(Value::as_array).cloned().ok_or(NotAList { what })
}

/// Every pending CSR of `csrs` with its decision, as `hardshift approve-csrs` makes it: the
/// client CSRs approved before (by anyone) count against the one per node, the Nodes of
/// `nodes` are the registered ones.
pub fn decide(inv: &Inventory, csrs: &Value, nodes: &Value) -> Result<Vec<(Csr, Decision)>, NotAList> {
    let all = items(csrs, "the CSR list")?;
    let registered: BTreeSet<String> = items(nodes, "the Node list")?
        .iter()
        .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str).map(String::from))
        .collect();
    let waiting: Vec<Csr> = all.iter().filter(|c| conditions(c).is_empty()).filter_map(csr).collect();
    let approved_clients: BTreeMap<String, String> = all
        .iter()
        .filter(|c| approved(c))
        .filter_map(csr)
        .filter_map(|c| client_node(&c).map(|n| (n, c.name)))
        .collect();
    let decisions = decide_pass(inv, &waiting, &approved_clients, &registered);
    Ok(waiting.into_iter().zip(decisions).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{InventoryNode, BOOTSTRAPPER, CLIENT_SIGNER};
    use serde_json::json;

    fn inv() -> Inventory {
        let mut inv = Inventory::default();
        inv.nodes.insert(
            "sno".into(),
            InventoryNode {
                ips: vec!["192.168.126.101".parse().unwrap()],
                dns: vec!["sno".into(), "sno.ocp4.example.com".into()],
            },
        );
        inv
    }

    fn item(name: &str, user: &str, cn: &str, org: &str, status: Value) -> Value {
        let pem = crate::request::tests::with_subject(
            vec![
                (rcgen::DnType::OrganizationName, rcgen::DnValue::Utf8String(org.into())),
                (rcgen::DnType::CommonName, rcgen::DnValue::Utf8String(cn.into())),
            ],
            vec![],
        );
        json!({"metadata": {"name": name}, "spec": {"signerName": CLIENT_SIGNER, "username": user,
               "groups": ["system:authenticated"], "usages": ["digital signature", "client auth"],
               "request": base64::engine::general_purpose::STANDARD.encode(pem)}, "status": status})
    }

    #[test]
    fn the_api_lists_are_judged_by_the_same_rules() {
        let csrs = json!({"items": [
            item("csr-good", BOOTSTRAPPER, "system:node:sno", "system:nodes", json!({})),
            item("csr-masters", BOOTSTRAPPER, "system:node:sno", "system:masters", json!({})),
            item("csr-other", BOOTSTRAPPER, "system:node:evil", "system:nodes", json!({})),
            item("csr-old", BOOTSTRAPPER, "system:node:sno", "system:nodes",
                 json!({"conditions": [{"type": "Denied", "status": "True"}]})),
        ]});
        let nodes = json!({"items": []});
        let d = decide(&inv(), &csrs, &nodes).unwrap();
        let names: Vec<(&str, bool)> = d
            .iter()
            .map(|(c, d)| (c.name.as_str(), matches!(d, Decision::Approve(_))))
            .collect();
        assert_eq!(names, [("csr-good", true), ("csr-masters", false), ("csr-other", false)]);
        // Once one was approved, a second for the same node is not; nor once the node exists.
        let csrs = json!({"items": [
            item("csr-first", BOOTSTRAPPER, "system:node:sno", "system:nodes",
                 json!({"conditions": [{"type": "Approved", "status": "True"}]})),
            item("csr-again", BOOTSTRAPPER, "system:node:sno", "system:nodes", json!(null)),
        ]});
        let d = decide(&inv(), &csrs, &nodes).unwrap();
        assert!(matches!(&d[0].1, Decision::Refuse(w) if w.contains("csr-first")), "{d:?}");
        let d = decide(&inv(), &csrs, &json!({"items": [{"metadata": {"name": "sno"}}]})).unwrap();
        assert!(matches!(&d[0].1, Decision::Refuse(w) if w.contains("already registered")), "{d:?}");
        assert!(decide(&inv(), &json!({"kind": "Status"}), &nodes).is_err());
    }
}
