//! Where the install is: a pure function from the agents' newest reports, what the API server
//! was last seen to hold and the bundle's inventory to an ordered list of checks. The phase is
//! the first check not met; `wait-for` waits for a target's last check and, on timeout, names
//! every unmet check with its last error.

use crate::api::ApiObject;
use crate::store::{ApiContact, NodeRow};
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{state, Component};
use serde::Serialize;

/// A node of the bundle: its name and role (bootstrap, master, worker).
#[derive(Debug, Clone)]
pub struct Member {
    pub name: String,
    pub role: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub id: &'static str,
    pub title: &'static str,
    pub met: bool,
    /// When unmet: what is missing, each with its last error. When met: what showed it.
    pub evidence: Vec<String>,
}

/// The checks in install order, by id.
pub const CHECKS: &[(&str, &str)] = &[
    ("bootstrap-booted", "the bootstrap reports"),
    ("bootstrap-etcd", "bootstrap etcd healthy"),
    ("api", "the API answers /readyz"),
    ("bootkube", "bootkube complete"),
    ("cvo", "the cluster-version-operator runs"),
    ("masters-kubelet", "the masters' kubelets run"),
    ("csrs", "no CSR of an inventory node waits"),
    ("masters-ready", "the masters are Ready"),
    ("etcd-masters", "etcd runs on every master"),
    ("api-masters", "kube-apiserver runs on every master"),
    ("bootstrap-removable", "safe to remove the bootstrap"),
    ("workers-ready", "the workers are Ready"),
    ("operators", "every ClusterOperator Available, none Degraded"),
    ("complete", "ClusterVersion Available"),
];

/// What `wait-for` can wait for: the id of the last check it needs.
pub fn target(name: &str) -> Option<&'static str> {
    match name {
        // bootkube's job is done and the CVO runs: the bootstrap must still stay.
        "bootstrap-complete" => Some("cvo"),
        // The lab README's pivot: etcd and kube-apiserver on the masters, no bootstrap member.
        "pivot-ready" => Some("bootstrap-removable"),
        "install-complete" => Some("complete"),
        _ => None,
    }
}

pub const TARGETS: [&str; 3] = ["bootstrap-complete", "pivot-ready", "install-complete"];

/// The API is taken as answering when /readyz said ok within this long, and after any error.
const API_FRESH_MS: i64 = 30_000;

fn comp(row: Option<&NodeRow>, c: Component) -> Option<&ComponentState> {
    c.in_report(&row?.last.as_ref()?.components)
}

fn said(c: &ComponentState) -> String {
    if c.reason.is_empty() {
        c.state.clone()
    } else {
        format!("{} ({})", c.state, c.reason)
    }
}

fn cond_text(o: &ApiObject, t: &str) -> String {
    match o.condition(t) {
        None => format!("no {t} condition"),
        Some(c) => {
            let mut s = format!("{t}={}", c["status"].as_str().unwrap_or("?"));
            for k in ["reason", "message"] {
                if let Some(v) = c[k].as_str().filter(|v| !v.is_empty()) {
                    s.push_str(&format!(" {v}"));
                }
            }
            s
        }
    }
}

/// Every check, in order. `now_ms` dates the reports and the API contact.
pub fn checks(inventory: &[Member], rows: &[NodeRow], api: &[ApiObject], contact: &ApiContact, now_ms: i64) -> Vec<Check> {
    let row = |n: &str| rows.iter().find(|r| r.node == n);
    let obj = |kind: &str, ns: &str, name: &str| api.iter().find(|o| o.kind == kind && o.namespace == ns && o.name == name);
    let bootstrap = inventory.iter().find(|m| m.role == "bootstrap").map(|m| m.name.as_str());
    let mut out: Vec<Check> = Vec::new();
    let mut push = |id: &'static str, unmet: Vec<String>, met_by: Vec<String>| {
        let title = CHECKS.iter().find(|(i, _)| *i == id).map(|(_, t)| *t).unwrap_or(id);
        let met = unmet.is_empty();
        out.push(Check {
            id,
            title,
            met,
            evidence: if met { met_by } else { unmet },
        });
    };
    let ok = |c: Option<&ComponentState>| c.is_some_and(|c| c.health == Health::Ok as i32);

    // The pods the masters run, as the API sees them.
    let pod_on = |ns: &str, prefix: &str, node: &str| {
        api.iter()
            .find(|o| o.kind == "Pod" && o.namespace == ns && o.name.starts_with(prefix) && o.view["nodeName"] == node)
    };
    let pod_ready = |p: Option<&ApiObject>| p.is_some_and(|p| p.view["phase"] == "Running" && p.is_true("Ready"));
    let masters: Vec<&Member> = inventory.iter().filter(|m| m.role == "master").collect();
    let api_on_masters: Vec<String> = masters
        .iter()
        .filter(|m| !pod_ready(pod_on("openshift-kube-apiserver", "kube-apiserver-", &m.name)))
        .map(|m| match pod_on("openshift-kube-apiserver", "kube-apiserver-", &m.name) {
            None => format!("{}: no kube-apiserver pod", m.name),
            Some(p) => format!("{}: {} {}", m.name, p.name, pod_summary(p)),
        })
        .collect();
    // Once the masters serve the API, the bootstrap's own checks are history: it may be gone.
    let pivoted = !masters.is_empty() && api_on_masters.is_empty();
    let history = || vec!["the masters run the control plane".to_string()];

    // The bootstrap.
    let boot_row = bootstrap.and_then(row);
    match (bootstrap, boot_row) {
        _ if pivoted => push("bootstrap-booted", vec![], history()),
        (None, _) => push("bootstrap-booted", vec!["the inventory has no bootstrap node".into()], vec![]),
        (Some(b), None) => push(
            "bootstrap-booted",
            vec![format!(
                "{b} has never reported: not booted, no network to the collector, or its agent fails"
            )],
            vec![],
        ),
        (Some(b), Some(r)) => push("bootstrap-booted", vec![], vec![format!("{b}: {} reports", r.reports)]),
    }
    let etcd = comp(boot_row, Component::Etcd);
    match etcd {
        _ if pivoted => push("bootstrap-etcd", vec![], history()),
        c if ok(c) => push("bootstrap-etcd", vec![], vec![c.map(said).unwrap_or_default()]),
        Some(c) => push("bootstrap-etcd", vec![format!("etcd: {}", said(c))], vec![]),
        None => push("bootstrap-etcd", vec!["no etcd report from the bootstrap yet".into()], vec![]),
    }
    let fresh = contact
        .last_ok_ms
        .is_some_and(|t| now_ms - t <= API_FRESH_MS && contact.last_error_ms.is_none_or(|e| e <= t));
    match (&contact.last_ok_ms, &contact.last_error) {
        _ if fresh => push("api", vec![], vec!["GET /readyz: ok".into()]),
        (None, None) => push(
            "api",
            vec!["no contact with the API recorded: run the collector (it watches the API) or `hardshift watch`".into()],
            vec![],
        ),
        (_, Some(e)) => push("api", vec![e.clone()], vec![]),
        (Some(t), None) => push("api", vec![format!("no answer for {} s", (now_ms - t) / 1000)], vec![]),
    }
    match comp(boot_row, Component::Bootkube) {
        _ if pivoted => push("bootkube", vec![], history()),
        Some(c) if c.state == state::COMPLETE => push("bootkube", vec![], vec!["stage complete".into()]),
        Some(c) => push("bootkube", vec![format!("bootkube: {}", said(c))], vec![]),
        None => push(
            "bootkube",
            vec!["no bootkube progress from the bootstrap's agent yet".into()],
            vec![],
        ),
    }
    match obj("ClusterVersion", "", "version") {
        Some(cv) if cv.view["conditions"].as_array().is_some_and(|c| !c.is_empty()) => {
            push("cvo", vec![], vec![cond_text(cv, "Progressing")])
        }
        Some(_) => push(
            "cvo",
            vec!["ClusterVersion/version has no status: the cluster-version-operator has not started (bootkube starts it last), or cannot pull its image".into()],
            vec![],
        ),
        None => push("cvo", vec!["no ClusterVersion/version in the API".into()], vec![]),
    }

    // The masters.
    let unmet: Vec<String> = masters
        .iter()
        .filter_map(|m| match row(&m.name) {
            None => Some(format!("{}: has never reported", m.name)),
            Some(_) if ok(comp(row(&m.name), Component::Kubelet)) => None,
            Some(r) => Some(match comp(Some(r), Component::Kubelet) {
                Some(c) => format!("{}: kubelet {}", m.name, said(c)),
                None => format!("{}: no kubelet report", m.name),
            }),
        })
        .collect();
    push("masters-kubelet", unmet, vec![format!("{} masters", masters.len())]);
    let names: std::collections::BTreeSet<&str> = inventory.iter().map(|m| m.name.as_str()).collect();
    let pending: Vec<String> = api
        .iter()
        .filter(|o| o.kind == "CertificateSigningRequest" && o.view["conditions"].as_array().is_none_or(|c| c.is_empty()))
        .filter_map(|o| {
            let user = o.view["username"].as_str().unwrap_or("");
            // A kubelet's first CSR is posted as the bootstrap identity; its node is in the CN,
            // which the projection does not keep: count every node-client CSR, name the rest.
            let node = user.strip_prefix("system:node:");
            let relevant = node.is_some_and(|n| names.contains(n)) || o.view["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet";
            relevant.then(|| {
                format!(
                    "{} ({}, from {}) waits: `hardshift approve-csrs`",
                    o.name,
                    o.view["signerName"].as_str().unwrap_or("?"),
                    if user.is_empty() { "?" } else { user }
                )
            })
        })
        .collect();
    push("csrs", pending, vec!["none pending".into()]);
    let node_state = |members: &[&Member]| -> Vec<String> {
        members
            .iter()
            .filter_map(|m| match obj("Node", "", &m.name) {
                None => Some(format!("{}: no Node object (its kubelet has not registered)", m.name)),
                Some(n) if n.is_true("Ready") => None,
                Some(n) => Some(format!("{}: {}", m.name, cond_text(n, "Ready"))),
            })
            .collect()
    };
    push("masters-ready", node_state(&masters), vec![format!("{} Ready", masters.len())]);
    let etcd_unmet: Vec<String> = masters
        .iter()
        .filter(|m| !pod_ready(pod_on("openshift-etcd", "etcd-", &m.name)))
        .map(|m| match pod_on("openshift-etcd", "etcd-", &m.name) {
            None => format!("{}: no etcd pod (the etcd operator has not scaled out to it)", m.name),
            Some(p) => format!("{}: {} {}", m.name, p.name, pod_summary(p)),
        })
        .collect();
    push(
        "etcd-masters",
        etcd_unmet.clone(),
        vec![format!("{} etcd pods Ready", masters.len())],
    );
    push(
        "api-masters",
        api_on_masters.clone(),
        vec![format!("{} kube-apiserver pods Ready", masters.len())],
    );
    // The member list, as the newest report of a master's (or the bootstrap's) etcd says it.
    let members: Option<(String, Vec<String>)> = masters
        .iter()
        .map(|m| m.name.as_str())
        .chain(bootstrap)
        .filter_map(|n| {
            let c = comp(row(n), Component::Etcd).filter(|c| c.health == Health::Ok as i32)?;
            let list = c.details.get("members")?;
            Some((n.to_string(), list.split(',').filter(|s| !s.is_empty()).map(String::from).collect()))
        })
        .next();
    let mut unmet: Vec<String> = Vec::new();
    if !etcd_unmet.is_empty() {
        unmet.push("etcd does not run on every master yet".into());
    }
    if !api_on_masters.is_empty() {
        unmet.push("kube-apiserver does not run on every master yet".into());
    }
    match &members {
        None => unmet.push("no etcd member list from a master's agent yet".into()),
        Some((from, list)) => {
            if let Some(b) = list.iter().find(|m| m.contains("bootstrap")) {
                unmet.push(format!("etcd still has the bootstrap member {b} (as {from} sees it)"));
            }
            for m in &masters {
                if !list.iter().any(|x| x == &m.name || x.ends_with(&format!("-{}", m.name))) {
                    unmet.push(format!("{} is not an etcd member (as {from} sees it)", m.name));
                }
            }
        }
    }
    push(
        "bootstrap-removable",
        unmet,
        vec![format!("etcd members: {}", members.map(|(_, l)| l.join(", ")).unwrap_or_default())],
    );
    let workers: Vec<&Member> = inventory.iter().filter(|m| m.role == "worker").collect();
    push("workers-ready", node_state(&workers), vec![format!("{} Ready", workers.len())]);
    let cos: Vec<&ApiObject> = api.iter().filter(|o| o.kind == "ClusterOperator").collect();
    let mut unmet: Vec<String> = cos
        .iter()
        .filter(|o| !o.is_true("Available") || o.is_true("Degraded"))
        .map(|o| {
            let bad = if o.is_true("Degraded") { "Degraded" } else { "Available" };
            format!("{}: {}", o.name, cond_text(o, bad))
        })
        .collect();
    if cos.is_empty() {
        unmet.push("no ClusterOperator reports yet (the CVO creates them)".into());
    }
    push("operators", unmet, vec![format!("{} ClusterOperators", cos.len())]);
    match obj("ClusterVersion", "", "version") {
        Some(cv) if cv.is_true("Available") => push("complete", vec![], vec![cond_text(cv, "Available")]),
        Some(cv) => push("complete", vec![cond_text(cv, "Progressing"), cond_text(cv, "Failing")], vec![]),
        None => push("complete", vec!["no ClusterVersion/version".into()], vec![]),
    }
    out
}

fn pod_summary(p: &ApiObject) -> String {
    let mut s = p.view["phase"].as_str().unwrap_or("Unknown").to_string();
    if let Some(cs) = p.view["containers"].as_array() {
        for c in cs.iter().filter(|c| c["ready"] != true) {
            s.push_str(&format!(
                ", {} {}{}",
                c["name"].as_str().unwrap_or("?"),
                c["state"].as_str().unwrap_or("?"),
                c["reason"].as_str().map(|r| format!(" ({r})")).unwrap_or_default()
            ));
        }
    }
    s
}

/// The first unmet check, or None when every check is met.
pub fn phase(checks: &[Check]) -> Option<&Check> {
    checks.iter().find(|c| !c.met)
}

/// The checks up to and including `last` that are not met.
pub fn unmet_until<'a>(checks: &'a [Check], last: &str) -> Vec<&'a Check> {
    let end = checks.iter().position(|c| c.id == last).map(|i| i + 1).unwrap_or(checks.len());
    checks[..end].iter().filter(|c| !c.met).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hardshift_proto::v1::NodeReport;
    use serde_json::json;

    fn inv() -> Vec<Member> {
        [("bootstrap", "bootstrap"), ("master-0", "master"), ("worker-0", "worker")]
            .iter()
            .map(|(n, r)| Member {
                name: n.to_string(),
                role: r.to_string(),
            })
            .collect()
    }

    /// (name, health, state, details) of one component.
    type Comp<'a> = (&'a str, Health, &'a str, Vec<(&'a str, &'a str)>);

    fn row(node: &str, comps: Vec<Comp>) -> NodeRow {
        NodeRow {
            node: node.into(),
            role: String::new(),
            boot_id: "b".into(),
            last_seq: 1,
            last_seen_ms: 1000,
            reports: 1,
            dropped: 0,
            last: Some(NodeReport {
                components: comps
                    .into_iter()
                    .map(|(n, h, s, d)| ComponentState {
                        name: n.into(),
                        health: h as i32,
                        state: s.into(),
                        reason: String::new(),
                        details: d.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                    })
                    .collect(),
                ..Default::default()
            }),
        }
    }

    fn obj(kind: &str, ns: &str, name: &str, view: serde_json::Value) -> ApiObject {
        ApiObject {
            kind: kind.into(),
            namespace: ns.into(),
            name: name.into(),
            observed_ms: 0,
            deleted: false,
            view,
        }
    }

    fn ready(status: &str) -> serde_json::Value {
        json!({"conditions": [{"type": "Ready", "status": status, "reason": "KubeletNotReady", "message": "cni plugin not initialized"}]})
    }

    #[test]
    fn nothing_yet_is_the_first_phase_and_says_why() {
        let c = checks(&inv(), &[], &[], &ApiContact::default(), 10_000);
        let p = phase(&c).unwrap();
        assert_eq!(p.id, "bootstrap-booted");
        assert!(p.evidence[0].contains("never reported"), "{:?}", p.evidence);
        assert_eq!(c.len(), CHECKS.len());
        let api = c.iter().find(|c| c.id == "api").unwrap();
        assert!(api.evidence[0].contains("hardshift watch"), "{:?}", api.evidence);
    }

    #[test]
    fn a_pending_csr_and_a_not_ready_master_are_named() {
        let rows = vec![
            row(
                "bootstrap",
                vec![
                    ("etcd", Health::Ok, "1 members, leader", vec![("members", "etcd-bootstrap")]),
                    ("bootkube", Health::Ok, "complete", vec![]),
                ],
            ),
            row("master-0", vec![("kubelet", Health::Ok, "healthy", vec![])]),
        ];
        let api = vec![
            obj(
                "ClusterVersion",
                "",
                "version",
                json!({"conditions": [{"type": "Progressing", "status": "True"}]}),
            ),
            obj(
                "CertificateSigningRequest",
                "",
                "csr-abc",
                json!({"signerName": "kubernetes.io/kubelet-serving", "username": "system:node:master-0", "conditions": []}),
            ),
            obj("Node", "", "master-0", ready("False")),
        ];
        let contact = ApiContact {
            last_ok_ms: Some(9_000),
            ..Default::default()
        };
        let c = checks(&inv(), &rows, &api, &contact, 10_000);
        let met: Vec<&str> = c.iter().filter(|c| c.met).map(|c| c.id).collect();
        assert_eq!(
            met,
            ["bootstrap-booted", "bootstrap-etcd", "api", "bootkube", "cvo", "masters-kubelet"]
        );
        assert_eq!(phase(&c).unwrap().id, "csrs");
        assert!(c[6].evidence[0].contains("csr-abc") && c[6].evidence[0].contains("approve-csrs"));
        assert!(c[7].evidence[0].contains("cni plugin not initialized"), "{:?}", c[7].evidence);
        let removable = c.iter().find(|c| c.id == "bootstrap-removable").unwrap();
        assert!(
            removable.evidence.iter().any(|e| e.contains("bootstrap member etcd-bootstrap")),
            "{:?}",
            removable.evidence
        );
        // bootstrap-complete is reached; pivot-ready is not, and says why.
        assert!(unmet_until(&c, target("bootstrap-complete").unwrap()).is_empty());
        let unmet: Vec<&str> = unmet_until(&c, target("pivot-ready").unwrap()).iter().map(|c| c.id).collect();
        assert_eq!(
            unmet,
            ["csrs", "masters-ready", "etcd-masters", "api-masters", "bootstrap-removable"]
        );
    }

    #[test]
    fn a_stale_api_contact_is_not_an_answering_api() {
        let contact = ApiContact {
            last_ok_ms: Some(1_000),
            last_error: Some("GET /readyz: connection refused".into()),
            last_error_ms: Some(50_000),
        };
        let c = checks(&inv(), &[], &[], &contact, 60_000);
        let api = c.iter().find(|c| c.id == "api").unwrap();
        assert!(!api.met && api.evidence[0].contains("connection refused"));
    }

    #[test]
    fn after_the_pivot_the_bootstrap_may_be_gone() {
        let pod = |ns: &str, name: &str| {
            obj(
                "Pod",
                ns,
                name,
                json!({"nodeName": "master-0", "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
            )
        };
        let rows = vec![
            row(
                "master-0",
                vec![
                    ("kubelet", Health::Ok, "healthy", vec![]),
                    ("etcd", Health::Ok, "1 members", vec![("members", "master-0")]),
                ],
            ),
            row("worker-0", vec![("kubelet", Health::Ok, "healthy", vec![])]),
        ];
        let mut api = vec![
            pod("openshift-etcd", "etcd-master-0"),
            pod("openshift-kube-apiserver", "kube-apiserver-master-0"),
            obj("Node", "", "master-0", ready("True")),
            obj("Node", "", "worker-0", ready("True")),
            obj(
                "ClusterOperator",
                "",
                "etcd",
                json!({"conditions": [{"type": "Available", "status": "True"}]}),
            ),
            obj(
                "ClusterVersion",
                "",
                "version",
                json!({"conditions": [{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "False"}]}),
            ),
        ];
        let contact = ApiContact {
            last_ok_ms: Some(9_000),
            ..Default::default()
        };
        let c = checks(&inv(), &rows, &api, &contact, 10_000);
        assert!(phase(&c).is_none(), "{:?}", phase(&c));
        // A degraded operator holds install-complete only.
        api.push(obj(
            "ClusterOperator",
            "",
            "ingress",
            json!({"conditions": [{"type": "Available", "status": "True"}, {"type": "Degraded", "status": "True", "message": "no router pods"}]}),
        ));
        let c = checks(&inv(), &rows, &api, &contact, 10_000);
        assert!(unmet_until(&c, "bootstrap-removable").is_empty());
        let p = phase(&c).unwrap();
        assert_eq!(p.id, "operators");
        assert!(p.evidence[0].contains("ingress: Degraded=True no router pods"), "{:?}", p.evidence);
    }
}
