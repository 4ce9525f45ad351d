//! Where the install is: a pure function from the agents' newest reports, what the API server
//! was last seen to hold and the bundle's inventory to an ordered list of checks. The phase is
//! the first check not met; `wait-for` waits for a target's last check and, on timeout, names
//! every unmet check with its last error.

use crate::api::ApiObject;
use crate::store::{ApiContact, NodeRow};
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{state, Component, Role};
use serde::Serialize;

/// A node of the bundle: its name and role, from the bundle's inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub role: Role,
}

impl Member {
    /// The inventory's nodes as the phases, the dashboard and diagnose name them.
    pub fn all(inv: &hardshift_bundle::Inventory) -> Vec<Member> {
        inv.nodes
            .iter()
            .map(|n| Member {
                name: n.name.clone(),
                role: n.role,
            })
            .collect()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub id: &'static str,
    pub title: &'static str,
    pub met: bool,
    /// When unmet: what is missing, each with its last error. When met: what showed it.
    pub evidence: Vec<String>,
}

/// What a check returns: what is missing (each with its last error; empty when met), and what
/// showed it met.
struct Outcome {
    unmet: Vec<String>,
    met_by: Vec<String>,
}

fn met(by: impl Into<String>) -> Outcome {
    Outcome {
        unmet: vec![],
        met_by: vec![by.into()],
    }
}

fn unmet(why: Vec<String>) -> Outcome {
    Outcome {
        unmet: why,
        met_by: vec![],
    }
}

fn unmet_or(why: Vec<String>, met_by: String) -> Outcome {
    Outcome {
        unmet: why,
        met_by: vec![met_by],
    }
}

/// One step of the install: its id and title, and its check. Adding a step is adding a row.
pub struct Step {
    pub id: &'static str,
    pub title: &'static str,
    check: fn(&Ctx) -> Outcome,
}

/// The checks in install order.
#[rustfmt::skip]
pub const CHECKS: &[Step] = &[
    Step { id: "bootstrap-booted", title: "the bootstrap reports", check: bootstrap_booted },
    Step { id: "bootstrap-etcd", title: "bootstrap etcd healthy", check: bootstrap_etcd },
    Step { id: "api", title: "the API answers /readyz", check: api_answers },
    Step { id: "bootkube", title: "bootkube complete", check: bootkube_complete },
    Step { id: "cvo", title: "the cluster-version-operator runs", check: cvo_runs },
    Step { id: "masters-kubelet", title: "the masters' kubelets run", check: masters_kubelet },
    Step { id: "csrs", title: "no CSR of an inventory node waits", check: no_csr_waits },
    Step { id: "masters-ready", title: "the masters are Ready", check: masters_ready },
    Step { id: "etcd-masters", title: "etcd runs on every master", check: etcd_on_masters },
    Step { id: "api-masters", title: "kube-apiserver runs on every master", check: api_on_masters },
    Step { id: "bootstrap-removable", title: "safe to remove the bootstrap", check: bootstrap_removable },
    Step { id: "workers-ready", title: "the workers are Ready", check: workers_ready },
    Step { id: "operators", title: "every ClusterOperator Available, none Degraded", check: operators },
    Step { id: "complete", title: "ClusterVersion Available", check: complete },
];

/// A single node's install (bootstrap-in-place: no bootstrap host, one master, no workers): its
/// live system's bootkube, the disk written, the reboot, its post-reboot step, then the cluster.
#[rustfmt::skip]
pub const SINGLE_NODE_CHECKS: &[Step] = &[
    Step { id: "node-booted", title: "the node reports", check: sno_booted },
    Step { id: "bootkube", title: "bootkube complete on the live system", check: sno_bootkube },
    Step { id: "disk-written", title: "the installation disk written", check: sno_disk_written },
    Step { id: "rebooted", title: "the node runs from its disk", check: sno_rebooted },
    Step { id: "bootstrap-done", title: "bootstrap complete (the post-reboot step)", check: sno_bootstrap_done },
    Step { id: "masters-ready", title: "the node is Ready", check: masters_ready },
    Step { id: "operators", title: "every ClusterOperator Available, none Degraded", check: operators },
    Step { id: "complete", title: "ClusterVersion Available", check: complete },
];

/// The single-node check a target's check stands for (`target` names those of a cluster with a
/// bootstrap host).
fn single_node_alias(id: &str) -> &str {
    match id {
        "cvo" | "bootstrap-removable" => "bootstrap-done",
        other => other,
    }
}

/// The post-reboot step's stages, in order (hardshift-post-reboot.sh).
const POST_REBOOT_STAGES: &[&str] = &[
    "post-reboot-api",
    "bootstrap-complete",
    "release-leases",
    "approve-csrs",
    "restart-kubelet",
    "wait-for-cvo",
    "clean",
    "complete",
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

/// What every check reads, with what several of them share worked out once.
struct Ctx<'a> {
    inventory: &'a [Member],
    rows: &'a [NodeRow],
    api: &'a [ApiObject],
    contact: &'a ApiContact,
    now_ms: i64,
    bootstrap: Option<&'a str>,
    masters: Vec<&'a Member>,
    /// Masters whose kube-apiserver pod is not Ready, with why.
    api_unmet: Vec<String>,
    /// Masters whose etcd pod is not Ready, with why.
    etcd_unmet: Vec<String>,
    /// The masters serve the API: the bootstrap's own checks are history (it may be gone).
    pivoted: bool,
}

impl<'a> Ctx<'a> {
    fn new(inventory: &'a [Member], rows: &'a [NodeRow], api: &'a [ApiObject], contact: &'a ApiContact, now_ms: i64) -> Ctx<'a> {
        let masters: Vec<&Member> = inventory.iter().filter(|m| m.role == Role::Master).collect();
        let mut me = Ctx {
            inventory,
            rows,
            api,
            contact,
            now_ms,
            bootstrap: inventory.iter().find(|m| m.role == Role::Bootstrap).map(|m| m.name.as_str()),
            masters,
            api_unmet: vec![],
            etcd_unmet: vec![],
            pivoted: false,
        };
        me.api_unmet = me.pods_not_ready("openshift-kube-apiserver", "kube-apiserver-", "no kube-apiserver pod");
        me.etcd_unmet = me.pods_not_ready(
            "openshift-etcd",
            "etcd-",
            "no etcd pod (the etcd operator has not scaled out to it)",
        );
        me.pivoted = !me.masters.is_empty() && me.api_unmet.is_empty();
        me
    }

    fn row(&self, n: &str) -> Option<&'a NodeRow> {
        self.rows.iter().find(|r| r.node == n)
    }

    fn boot_row(&self) -> Option<&'a NodeRow> {
        self.bootstrap.and_then(|b| self.row(b))
    }

    fn obj(&self, kind: &str, ns: &str, name: &str) -> Option<&'a ApiObject> {
        self.api.iter().find(|o| o.kind == kind && o.namespace == ns && o.name == name)
    }

    /// The pod named `prefix…` in `ns` on `node`, as the API sees it.
    fn pod_on(&self, ns: &str, prefix: &str, node: &str) -> Option<&'a ApiObject> {
        self.api
            .iter()
            .find(|o| o.kind == "Pod" && o.namespace == ns && o.name.starts_with(prefix) && o.view["nodeName"] == node)
    }

    /// Each master whose `prefix…` pod in `ns` is not Running and Ready, with why.
    fn pods_not_ready(&self, ns: &str, prefix: &str, missing: &str) -> Vec<String> {
        let ready = |p: Option<&ApiObject>| p.is_some_and(|p| p.view["phase"] == "Running" && p.is_true("Ready"));
        self.masters
            .iter()
            .filter(|m| !ready(self.pod_on(ns, prefix, &m.name)))
            .map(|m| match self.pod_on(ns, prefix, &m.name) {
                None => format!("{}: {missing}", m.name),
                Some(p) => format!("{}: {} {}", m.name, p.name, pod_summary(p)),
            })
            .collect()
    }

    /// Each of `members` that is not a Ready Node, with why.
    fn not_ready(&self, members: &[&Member]) -> Vec<String> {
        members
            .iter()
            .filter_map(|m| match self.obj("Node", "", &m.name) {
                None => Some(format!("{}: no Node object (its kubelet has not registered)", m.name)),
                Some(n) if n.is_true("Ready") => None,
                Some(n) => Some(format!("{}: {}", m.name, cond_text(n, "Ready"))),
            })
            .collect()
    }
}

fn ok(c: Option<&ComponentState>) -> bool {
    c.is_some_and(|c| c.health == Health::Ok as i32)
}

fn history() -> Outcome {
    met("the masters run the control plane")
}

fn bootstrap_booted(x: &Ctx) -> Outcome {
    match (x.bootstrap, x.boot_row()) {
        _ if x.pivoted => history(),
        (None, _) => unmet(vec!["the inventory has no bootstrap node".into()]),
        (Some(b), None) => unmet(vec![format!(
            "{b} has never reported: not booted, no network to the collector, or its agent fails"
        )]),
        (Some(b), Some(r)) => met(format!("{b}: {} reports", r.reports)),
    }
}

fn bootstrap_etcd(x: &Ctx) -> Outcome {
    match comp(x.boot_row(), Component::Etcd) {
        _ if x.pivoted => history(),
        Some(c) if ok(Some(c)) => met(said(c)),
        Some(c) => unmet(vec![format!("etcd: {}", said(c))]),
        None => unmet(vec!["no etcd report from the bootstrap yet".into()]),
    }
}

fn api_answers(x: &Ctx) -> Outcome {
    let c = x.contact;
    let fresh = c
        .last_ok_ms
        .is_some_and(|t| x.now_ms - t <= API_FRESH_MS && c.last_error_ms.is_none_or(|e| e <= t));
    match (&c.last_ok_ms, &c.last_error) {
        _ if fresh => met("GET /readyz: ok"),
        (None, None) => unmet(vec![
            "no contact with the API recorded: run the collector (it watches the API) or `hardshift watch`".into(),
        ]),
        (_, Some(e)) => unmet(vec![e.clone()]),
        (Some(t), None) => unmet(vec![format!("no answer for {} s", (x.now_ms - t) / 1000)]),
    }
}

fn bootkube_complete(x: &Ctx) -> Outcome {
    match comp(x.boot_row(), Component::Bootkube) {
        _ if x.pivoted => history(),
        Some(c) if c.state == state::COMPLETE => met("stage complete"),
        Some(c) => unmet(vec![format!("bootkube: {}", said(c))]),
        None => unmet(vec!["no bootkube progress from the bootstrap's agent yet".into()]),
    }
}

fn cvo_runs(x: &Ctx) -> Outcome {
    match x.obj("ClusterVersion", "", "version") {
        Some(cv) if cv.view["conditions"].as_array().is_some_and(|c| !c.is_empty()) => met(cond_text(cv, "Progressing")),
        Some(_) => unmet(vec![
            "ClusterVersion/version has no status: the cluster-version-operator has not started (bootkube starts it last), or cannot pull its image".into(),
        ]),
        None => unmet(vec!["no ClusterVersion/version in the API".into()]),
    }
}

fn masters_kubelet(x: &Ctx) -> Outcome {
    let why: Vec<String> = x
        .masters
        .iter()
        .filter_map(|m| match x.row(&m.name) {
            None => Some(format!("{}: has never reported", m.name)),
            Some(r) => match comp(Some(r), Component::Kubelet) {
                c if ok(c) => None,
                Some(c) => Some(format!("{}: kubelet {}", m.name, said(c))),
                None => Some(format!("{}: no kubelet report", m.name)),
            },
        })
        .collect();
    unmet_or(why, format!("{} masters", x.masters.len()))
}

fn no_csr_waits(x: &Ctx) -> Outcome {
    let names: std::collections::BTreeSet<&str> = x.inventory.iter().map(|m| m.name.as_str()).collect();
    let pending: Vec<String> = x
        .api
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
    unmet_or(pending, "none pending".into())
}

fn masters_ready(x: &Ctx) -> Outcome {
    unmet_or(x.not_ready(&x.masters), format!("{} Ready", x.masters.len()))
}

fn etcd_on_masters(x: &Ctx) -> Outcome {
    unmet_or(x.etcd_unmet.clone(), format!("{} etcd pods Ready", x.masters.len()))
}

fn api_on_masters(x: &Ctx) -> Outcome {
    unmet_or(x.api_unmet.clone(), format!("{} kube-apiserver pods Ready", x.masters.len()))
}

/// The lab README's pivot: etcd and kube-apiserver on every master, and etcd's member list (as
/// the newest report of a master's, or the bootstrap's, etcd says it) without the bootstrap.
fn bootstrap_removable(x: &Ctx) -> Outcome {
    let members: Option<(String, Vec<String>)> = x
        .masters
        .iter()
        .map(|m| m.name.as_str())
        .chain(x.bootstrap)
        .filter_map(|n| {
            let c = comp(x.row(n), Component::Etcd).filter(|c| c.health == Health::Ok as i32)?;
            let list = c.details.get("members")?;
            Some((n.to_string(), list.split(',').filter(|s| !s.is_empty()).map(String::from).collect()))
        })
        .next();
    let mut why: Vec<String> = Vec::new();
    if !x.etcd_unmet.is_empty() {
        why.push("etcd does not run on every master yet".into());
    }
    if !x.api_unmet.is_empty() {
        why.push("kube-apiserver does not run on every master yet".into());
    }
    match &members {
        None => why.push("no etcd member list from a master's agent yet".into()),
        Some((from, list)) => {
            if let Some(b) = list.iter().find(|m| m.contains("bootstrap")) {
                why.push(format!("etcd still has the bootstrap member {b} (as {from} sees it)"));
            }
            for m in &x.masters {
                if !list.iter().any(|l| l == &m.name || l.ends_with(&format!("-{}", m.name))) {
                    why.push(format!("{} is not an etcd member (as {from} sees it)", m.name));
                }
            }
        }
    }
    unmet_or(
        why,
        format!("etcd members: {}", members.map(|(_, l)| l.join(", ")).unwrap_or_default()),
    )
}

fn workers_ready(x: &Ctx) -> Outcome {
    let workers: Vec<&Member> = x.inventory.iter().filter(|m| m.role == Role::Worker).collect();
    unmet_or(x.not_ready(&workers), format!("{} Ready", workers.len()))
}

fn operators(x: &Ctx) -> Outcome {
    let cos: Vec<&ApiObject> = x.api.iter().filter(|o| o.kind == "ClusterOperator").collect();
    let mut why: Vec<String> = cos
        .iter()
        .filter(|o| !o.is_true("Available") || o.is_true("Degraded"))
        .map(|o| {
            let bad = if o.is_true("Degraded") { "Degraded" } else { "Available" };
            format!("{}: {}", o.name, cond_text(o, bad))
        })
        .collect();
    if cos.is_empty() {
        why.push("no ClusterOperator reports yet (the CVO creates them)".into());
    }
    unmet_or(why, format!("{} ClusterOperators", cos.len()))
}

fn complete(x: &Ctx) -> Outcome {
    match x.obj("ClusterVersion", "", "version") {
        Some(cv) if cv.is_true("Available") => met(cond_text(cv, "Available")),
        Some(cv) => unmet(vec![cond_text(cv, "Progressing"), cond_text(cv, "Failing")]),
        None => unmet(vec!["no ClusterVersion/version".into()]),
    }
}

/// A single node's inventory: one master, nothing else.
fn single_node(inventory: &[Member]) -> bool {
    inventory.len() == 1 && inventory[0].role == Role::Master
}

/// The single node: its name, its newest report's bootstrap-in-place record (stage, result), and
/// whether that report comes from its installed system (no bootkube record there).
fn sno(x: &Ctx) -> (String, Option<(String, String)>, bool) {
    let name = x.masters.first().map(|m| m.name.clone()).unwrap_or_default();
    let row = x.row(&name);
    let ip = comp(row, Component::InPlace).map(|c| {
        let get = |k: &str| c.details.get(k).cloned().unwrap_or_default();
        (get("stage"), get("result"))
    });
    let installed = ip.is_some() && comp(row, Component::Bootkube).is_none();
    (name, ip, installed)
}

fn sno_booted(x: &Ctx) -> Outcome {
    let (name, ..) = sno(x);
    match x.row(&name) {
        None => unmet(vec![format!(
            "{name} has never reported: not booted, no network to the collector, or its agent fails"
        )]),
        Some(r) => met(format!("{name}: {} reports", r.reports)),
    }
}

fn sno_bootkube(x: &Ctx) -> Outcome {
    let (name, _, installed) = sno(x);
    match comp(x.row(&name), Component::Bootkube) {
        _ if installed => met("the node runs from its disk"),
        Some(c) if c.state == state::COMPLETE => met("stage complete"),
        Some(c) => unmet(vec![format!("bootkube: {}", said(c))]),
        None => unmet(vec![format!("no bootkube progress from {name}'s live system yet")]),
    }
}

fn sno_disk_written(x: &Ctx) -> Outcome {
    let (name, ip, installed) = sno(x);
    let c = comp(x.row(&name), Component::InPlace);
    match (ip, c) {
        _ if installed => met("the node runs from its disk"),
        (Some((stage, result)), _) if stage == "reboot" && result == "done" => met("reboot scheduled"),
        (Some(_), Some(c)) => unmet(vec![format!("install-to-disk: {}", said(c))]),
        _ => unmet(vec![format!("no bootstrap-in-place progress from {name} yet")]),
    }
}

fn sno_rebooted(x: &Ctx) -> Outcome {
    let (name, ip, installed) = sno(x);
    match ip {
        _ if installed => met(format!("{name} reports from its installed system")),
        Some((stage, _)) => unmet(vec![format!("{name} still runs its live system (install-to-disk at {stage})")]),
        None => unmet(vec![format!("no bootstrap-in-place progress from {name} yet")]),
    }
}

fn sno_bootstrap_done(x: &Ctx) -> Outcome {
    let (name, ip, installed) = sno(x);
    let at = |s: &str| POST_REBOOT_STAGES.iter().position(|p| *p == s);
    match ip {
        Some((stage, result)) if installed => {
            let i = at(&stage);
            let done = i.is_some_and(|i| i > 1 || (i == 1 && result == "done"));
            match (done, comp(x.row(&name), Component::InPlace)) {
                (true, _) => met(format!("post-reboot at {stage}: the bootstrap configmap is made")),
                (false, Some(c)) => unmet(vec![format!("post-reboot: {}", said(c))]),
                (false, None) => unmet(vec!["no post-reboot progress yet".into()]),
            }
        }
        _ => unmet(vec![format!("{name} has not run its post-reboot step yet")]),
    }
}

/// Every check, in order. `now_ms` dates the reports and the API contact.
pub fn checks(inventory: &[Member], rows: &[NodeRow], api: &[ApiObject], contact: &ApiContact, now_ms: i64) -> Vec<Check> {
    let x = Ctx::new(inventory, rows, api, contact, now_ms);
    let table = if single_node(inventory) { SINGLE_NODE_CHECKS } else { CHECKS };
    table
        .iter()
        .map(|step| {
            let o = (step.check)(&x);
            let met = o.unmet.is_empty();
            Check {
                id: step.id,
                title: step.title,
                met,
                evidence: if met { o.met_by } else { o.unmet },
            }
        })
        .collect()
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
    let end = checks
        .iter()
        .position(|c| c.id == last)
        .or_else(|| checks.iter().position(|c| c.id == single_node_alias(last)))
        .map(|i| i + 1)
        .unwrap_or(checks.len());
    checks[..end].iter().filter(|c| !c.met).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hardshift_proto::v1::NodeReport;
    use serde_json::json;

    fn inv() -> Vec<Member> {
        [
            ("bootstrap", Role::Bootstrap),
            ("master-0", Role::Master),
            ("worker-0", Role::Worker),
        ]
        .iter()
        .map(|(n, r)| Member {
            name: n.to_string(),
            role: *r,
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
    fn a_single_node_is_followed_through_both_its_stages() {
        let inv = vec![Member {
            name: "sno".into(),
            role: Role::Master,
        }];
        let none = ApiContact::default();
        let at = |rows: Vec<NodeRow>, api: Vec<ApiObject>| {
            let c = checks(&inv, &rows, &api, &none, 10_000);
            assert_eq!(
                c.iter().map(|c| c.id).collect::<Vec<_>>(),
                SINGLE_NODE_CHECKS.iter().map(|s| s.id).collect::<Vec<_>>()
            );
            let p = phase(&c).map(|p| (p.id, p.evidence.join("; ")));
            (p, unmet_until(&c, target("bootstrap-complete").unwrap()).len())
        };
        let (id, why) = at(vec![], vec![]).0.unwrap();
        assert_eq!(id, "node-booted", "{why}");
        // The live system: bootkube working, then install-to-disk.
        let live = |bk: &str, stage: &str, result: &str| {
            row(
                "sno",
                vec![
                    ("bootkube", if bk == "complete" { Health::Ok } else { Health::Warning }, bk, vec![]),
                    (
                        "bootstrap-in-place",
                        Health::Warning,
                        "x",
                        vec![("stage", stage), ("result", result)],
                    ),
                ],
            )
        };
        let (p, _) = at(vec![live("etcd: waiting", "wait-for-bootkube", "waiting")], vec![]);
        assert_eq!(p.unwrap().0, "bootkube");
        let (p, _) = at(vec![live("complete", "coreos-installer", "running")], vec![]);
        let (id, why) = p.unwrap();
        assert!(id == "disk-written" && why.contains("install-to-disk"), "{id}: {why}");
        let (p, _) = at(vec![live("complete", "reboot", "done")], vec![]);
        assert_eq!(p.unwrap().0, "rebooted");
        // The installed system: no bootkube record; the post-reboot step's.
        let installed = |stage: &str, result: &str| {
            row(
                "sno",
                vec![(
                    "bootstrap-in-place",
                    Health::Warning,
                    "x",
                    vec![("stage", stage), ("result", result)],
                )],
            )
        };
        let (p, waiting) = at(vec![installed("bootstrap-complete", "running")], vec![]);
        assert_eq!(p.unwrap().0, "bootstrap-done");
        assert_eq!(waiting, 1, "wait-for bootstrap-complete waits for the post-reboot step alone");
        let (p, waiting) = at(
            vec![installed("approve-csrs", "running")],
            vec![obj("Node", "", "sno", ready("False"))],
        );
        let (id, why) = p.unwrap();
        assert!(id == "masters-ready" && why.contains("cni plugin"), "{id}: {why}");
        assert_eq!(waiting, 0, "bootstrap complete");
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
