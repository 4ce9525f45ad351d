//! What the dashboard and `/metrics` show: the store's newest reports, the bundle's inventory
//! and the API side reduced to one value per node and component. Pure: built from what the
//! caller read, with the time passed in.

use crate::api::ApiObject;
use crate::diagnose::{self, Severity};
use crate::phase::{self, Check, Member};
use crate::store::{ApiContact, NodeRow};
use crate::summary::SILENT_AFTER_MS;
use hardshift_proto::v1::{Health, NodeReport};
use hardshift_proto::vocab::Component;
use serde::Serialize;

/// Health as the page and the metrics name it (`Health::label`; the gauge's value is the wire number).
pub fn health_name(h: i32) -> &'static str {
    Health::of(h).label()
}

#[derive(Debug, Clone, Serialize)]
pub struct Comp {
    pub name: String,
    pub health: &'static str,
    pub state: String,
    pub reason: String,
    pub details: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Cause {
    pub id: &'static str,
    pub severity: Severity,
    pub title: String,
    pub evidence: Vec<String>,
    pub fix: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeView {
    pub name: String,
    pub role: String,
    /// Where this node is: "no report yet", "silent", "bootkube: …", "kubelet running", "Ready".
    pub phase: String,
    /// The worst health of its components (or "failing" when silent, "unknown" before a report).
    pub health: &'static str,
    pub seen_ago_s: Option<i64>,
    /// No report for longer than `SILENT_AFTER_MS` (never for a node that never reported).
    pub silent: bool,
    pub components: Vec<Comp>,
    /// Diagnosis, root cause first.
    pub causes: Vec<Cause>,
    pub pods_not_running: Vec<String>,
    pub reports: u64,
    pub lost: u64,
    pub boot_id: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct View {
    pub now_ms: i64,
    pub nodes: Vec<NodeView>,
    /// Component columns of the grid, in display order.
    pub columns: Vec<String>,
    /// The install's checks in order; empty without an inventory.
    pub checks: Vec<Check>,
    /// CSRs the API holds that nobody approved or denied yet, by the node they are for.
    pub pending_csrs: Vec<PendingCsrs>,
}

/// The CSRs waiting for one node (or, when none names a node, for one requester).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingCsrs {
    /// The node they are for; empty when no CSR names one.
    pub node: String,
    /// Who asked, for CSRs naming no node (a bootstrap identity); empty when `node` is known.
    pub username: String,
    pub count: usize,
    /// Age of the oldest, from its creationTimestamp (when the collector first saw it, if that
    /// does not parse).
    pub oldest_age_s: i64,
}

impl View {
    pub fn node(&self, name: &str) -> Option<&NodeView> {
        self.nodes.iter().find(|n| n.name == name)
    }
    /// (checks met before the first unmet one, all checks).
    pub fn progress(&self) -> (usize, usize) {
        (self.checks.iter().take_while(|c| c.met).count(), self.checks.len())
    }
}

/// A machine component (NICs, time, kernel, peers…): shown in its own table, not the grid.
pub fn is_hardware(name: &str) -> bool {
    Component::of(name).is_some_and(Component::is_hardware)
}

/// Where a component goes among the columns: the vocabulary's order, then others (units) by name.
fn order(name: &str) -> usize {
    Component::of(name)
        .map(|c| Component::ALL.iter().position(|x| *x == c).unwrap_or(0))
        .unwrap_or(Component::ALL.len())
}

fn node_phase(row: &NodeRow, last: &NodeReport, silent: bool, api_node: Option<&ApiObject>) -> String {
    if silent {
        return "silent".into();
    }
    if let Some(n) = api_node.filter(|n| !n.deleted) {
        return if n.is_true("Ready") { "Ready".into() } else { "NotReady".into() };
    }
    if row.role == "bootstrap" {
        if let Some(b) = Component::Bootkube.in_report(&last.components) {
            return format!("bootkube: {}", b.state);
        }
    }
    match Component::Kubelet.in_report(&last.components) {
        Some(k) if k.health == Health::Ok as i32 => "kubelet running".into(),
        Some(_) => "kubelet not running".into(),
        None => "booted".into(),
    }
}

fn node_view(row: &NodeRow, api: &[ApiObject], now_ms: i64) -> NodeView {
    let ago = now_ms - row.last_seen_ms;
    let silent = ago > SILENT_AFTER_MS;
    let empty = NodeReport::default();
    let last = row.last.as_ref().unwrap_or(&empty);
    let api_node = api.iter().find(|o| o.kind == "Node" && o.name == row.node);
    let mut components: Vec<Comp> = last
        .components
        .iter()
        .map(|c| {
            let mut details: Vec<(String, String)> = c.details.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            details.sort();
            Comp {
                name: c.name.clone(),
                health: health_name(c.health),
                state: c.state.clone(),
                reason: c.reason.clone(),
                details,
            }
        })
        .collect();
    components.sort_by_key(|c| (order(&c.name), c.name.clone()));
    let causes: Vec<Cause> = diagnose::diagnose(&row.node, &row.role, last, ago)
        .into_iter()
        .map(|f| Cause {
            id: f.id,
            severity: f.severity,
            title: f.title,
            evidence: f.evidence,
            fix: f.fix,
        })
        .collect();
    // The worst component decides (Health::badness); a watched unit that is not there cannot
    // run, so the node is failing, though the unit's own cell says absent.
    // A machine probe that cannot say (no timedated, no ICMP) is not the node's health.
    let worst = last
        .components
        .iter()
        .filter(|c| !(is_hardware(&c.name) && Health::of(c.health) == Health::Unknown))
        .map(|c| Health::of(c.health))
        .max_by_key(|h| h.badness());
    let mut health = match worst {
        None => "unknown",
        Some(Health::Absent) => Health::Failing.label(),
        Some(h) => h.label(),
    };
    if silent || causes.iter().any(|c| c.severity == Severity::Critical) {
        health = "failing";
    }
    NodeView {
        name: row.node.clone(),
        role: row.role.clone(),
        phase: node_phase(row, last, silent, api_node),
        health,
        seen_ago_s: Some(ago.max(0) / 1000),
        silent,
        components,
        causes,
        pods_not_running: last
            .pods
            .iter()
            .filter(|p| !p.ready)
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .collect(),
        reports: row.reports,
        lost: row.dropped,
        boot_id: row.boot_id.clone(),
    }
}

/// A node that has not reported shows where its boot got to, as the helper saw it (`lab serve`).
pub fn with_boot_steps(view: &mut View, last: &[crate::boot::BootEvent]) {
    for n in view.nodes.iter_mut().filter(|n| n.seen_ago_s.is_none()) {
        if let Some(e) = last.iter().find(|e| e.node == n.name) {
            let detail: String = e.detail.chars().take(80).collect();
            n.phase = format!("boot: {} {detail}", e.step).trim_end().to_string();
        }
    }
}

/// The view of the install: every reporting node, and every inventory node that has not
/// reported yet (in inventory order when there is one).
pub fn build(rows: &[NodeRow], inventory: Option<&[Member]>, api: &[ApiObject], contact: &ApiContact, now_ms: i64) -> View {
    let mut nodes: Vec<NodeView> = Vec::with_capacity(rows.len());
    if let Some(inv) = inventory {
        for m in inv {
            match rows.iter().find(|r| r.node == m.name) {
                Some(r) => nodes.push(node_view(r, api, now_ms)),
                None => nodes.push(NodeView {
                    name: m.name.clone(),
                    role: m.role.to_string(),
                    phase: "no report yet".into(),
                    health: "unknown",
                    seen_ago_s: None,
                    silent: false,
                    components: vec![],
                    causes: vec![],
                    pods_not_running: vec![],
                    reports: 0,
                    lost: 0,
                    boot_id: String::new(),
                }),
            }
        }
    }
    // Nodes outside the inventory (an extra worker, a renamed host) are shown too, after it.
    for r in rows {
        if !nodes.iter().any(|n| n.name == r.node) {
            nodes.push(node_view(r, api, now_ms));
        }
    }
    let mut columns: Vec<String> = Vec::new();
    for n in &nodes {
        for c in n.components.iter().filter(|c| !is_hardware(&c.name)) {
            if !columns.contains(&c.name) {
                columns.push(c.name.clone());
            }
        }
    }
    columns.sort_by_key(|c| (order(c), c.clone()));
    let checks = match inventory {
        Some(inv) => phase::checks(inv, rows, api, contact, now_ms),
        None => vec![],
    };
    View {
        now_ms,
        nodes,
        columns,
        checks,
        pending_csrs: pending_csrs(api, now_ms),
    }
}

/// When an API object was created, in ms since the epoch (`metadata.creationTimestamp`).
fn created_ms(o: &ApiObject) -> i64 {
    serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>(o.view["created"].clone())
        .map(|t| t.0.as_millisecond())
        .unwrap_or(o.observed_ms)
}

/// Pending CSRs (no Approved or Denied condition yet) grouped by node, then requester.
fn pending_csrs(api: &[ApiObject], now_ms: i64) -> Vec<PendingCsrs> {
    let mut by: std::collections::BTreeMap<(String, String), (usize, i64)> = Default::default();
    let pending = api
        .iter()
        .filter(|o| o.kind == "CertificateSigningRequest" && !o.deleted && o.view["conditions"].as_array().is_none_or(|c| c.is_empty()));
    for o in pending {
        let node = o.view["node"].as_str().unwrap_or("").to_string();
        let user = if node.is_empty() {
            o.view["username"].as_str().unwrap_or("")
        } else {
            ""
        };
        let e = by.entry((node, user.to_string())).or_insert((0, i64::MAX));
        e.0 += 1;
        e.1 = e.1.min(created_ms(o));
    }
    by.into_iter()
        .map(|((node, username), (count, oldest))| PendingCsrs {
            node,
            username,
            count,
            oldest_age_s: (now_ms - oldest).max(0) / 1000,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hardshift_proto::v1::ComponentState;

    fn row(node: &str, role: &str, seen: i64, comps: &[(&str, Health)]) -> NodeRow {
        NodeRow {
            node: node.into(),
            role: role.into(),
            boot_id: "b".into(),
            last_seq: 1,
            last_seen_ms: seen,
            reports: 1,
            dropped: 0,
            last: Some(NodeReport {
                components: comps
                    .iter()
                    .map(|(n, h)| ComponentState {
                        name: (*n).into(),
                        health: *h as i32,
                        state: "s".into(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn inventory_order_silent_nodes_and_columns() {
        let inv = vec![
            Member {
                name: "master-0".into(),
                role: hardshift_proto::vocab::Role::Master,
            },
            Member {
                name: "master-1".into(),
                role: hardshift_proto::vocab::Role::Master,
            },
        ];
        let rows = vec![
            row("extra", "worker", 10_000, &[("zz", Health::Warning)]),
            row("master-0", "master", 10_000, &[("etcd", Health::Ok), ("kubelet", Health::Ok)]),
        ];
        let v = build(&rows, Some(&inv), &[], &ApiContact::default(), 12_000);
        let names: Vec<&str> = v.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["master-0", "master-1", "extra"]);
        assert_eq!(v.columns, ["kubelet", "etcd", "zz"]);
        assert_eq!(v.nodes[0].health, "ok");
        assert_eq!(v.nodes[2].health, "warning");
        assert_eq!(v.nodes[0].components[0].name, "kubelet");
        assert_eq!(v.nodes[1].phase, "no report yet");
        assert_eq!(v.nodes[1].health, "unknown");
        // What the helper saw of master-1's boot stands in its row; a node that reported keeps its phase.
        let mut v2 = build(&rows, Some(&inv), &[], &ApiContact::default(), 12_000);
        let step = |node: &str| crate::boot::BootEvent {
            at_ms: 1,
            node: node.into(),
            mac: String::new(),
            ip: String::new(),
            step: crate::boot::Step::Http,
            detail: "GET /rhcos/rhcos-live-rootfs.x86_64.img 404".into(),
        };
        with_boot_steps(&mut v2, &[step("master-1"), step("master-0")]);
        assert_eq!(v2.nodes[1].phase, "boot: http GET /rhcos/rhcos-live-rootfs.x86_64.img 404");
        assert_eq!(v2.nodes[0].phase, v.nodes[0].phase);
        assert!(!v.checks.is_empty());
        // Silent: failing whatever its last report said, and diagnosed as such.
        let later = build(&rows, Some(&inv), &[], &ApiContact::default(), 12_000 + SILENT_AFTER_MS);
        assert_eq!(later.nodes[0].phase, "silent");
        assert_eq!(later.nodes[0].health, "failing");
        assert_eq!(later.nodes[0].causes[0].id, "HS001");
    }

    #[test]
    fn a_failing_kubelet_makes_the_node_failing() {
        let rows = vec![row("w", "worker", 1_000, &[("kubelet", Health::Failing), ("cri", Health::Ok)])];
        let v = build(&rows, None, &[], &ApiContact::default(), 1_000);
        assert_eq!(v.nodes[0].health, "failing");
        assert_eq!(v.nodes[0].components[0].health, "failing");
        assert!(v.checks.is_empty());
    }

    #[test]
    fn a_watched_unit_that_is_not_there_makes_the_node_failing() {
        let rows = vec![row(
            "w",
            "worker",
            1_000,
            &[("chronyd.service", Health::Absent), ("cri", Health::Ok)],
        )];
        let v = build(&rows, None, &[], &ApiContact::default(), 1_000);
        let unit = v.nodes[0].components.iter().find(|c| c.name == "chronyd.service").unwrap();
        assert_eq!(unit.health, "absent");
        assert_eq!(v.nodes[0].health, "failing");
    }
}
