//! State changes over time ("kubelet healthy → not listening"), derived from the stored reports.

use hardshift_proto::v1::NodeReport;
use hardshift_proto::vocab::state;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    pub node: String,
    pub time_ms: i64,
    pub component: String,
    pub from: String,
    pub to: String,
    pub reason: String,
}

/// What the API watch saw, on the agents' timeline: a Node's change under its name, the rest
/// (CSRs, operators, pods) under "api".
pub fn from_api(c: crate::store::ApiChange) -> Event {
    let node = if c.kind == "Node" { c.name.clone() } else { "api".into() };
    let id = if c.namespace.is_empty() {
        c.name
    } else {
        format!("{}/{}", c.namespace, c.name)
    };
    Event {
        node,
        time_ms: c.time_ms,
        component: format!("{} {id}", c.kind),
        from: String::new(),
        to: c.change,
        reason: String::new(),
    }
}

/// A step the helper saw (`lab serve`), on the node's timeline; a machine not in the inventory
/// under its MAC, a restart of the helper's own programs under "helper".
pub fn from_boot(b: crate::boot::BootEvent) -> Event {
    let node = match (b.node.is_empty(), b.mac.is_empty()) {
        (false, _) => b.node,
        (true, false) => format!("unknown {}", b.mac),
        (true, true) if b.step == crate::boot::Step::HelperRestart => "helper".into(),
        (true, true) => format!("unknown {}", b.ip),
    };
    let reason = match (b.mac.is_empty(), b.ip.is_empty()) {
        (false, false) => format!("{} {}", b.mac, b.ip),
        (false, true) => b.mac,
        (true, false) => b.ip,
        (true, true) => String::new(),
    };
    Event {
        node,
        time_ms: b.at_ms,
        component: "boot".into(),
        from: String::new(),
        to: if b.detail.is_empty() {
            b.step.name().to_string()
        } else {
            format!("{} {}", b.step, b.detail)
        },
        reason,
    }
}

/// Reports of one node in (boot, seq) order → the changes between consecutive reports.
pub fn changes(node: &str, reports: &[(String, NodeReport)]) -> Vec<Event> {
    let mut out = Vec::new();
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    let mut containers: BTreeMap<String, String> = BTreeMap::new();
    let mut boot = None;
    for (b, r) in reports {
        if boot.as_ref() != Some(b) {
            if boot.is_some() {
                out.push(Event {
                    node: node.into(),
                    time_ms: r.time_ms,
                    component: "node".into(),
                    from: "up".into(),
                    to: "rebooted".into(),
                    reason: format!("boot {b}"),
                });
            }
            boot = Some(b.clone());
            // A new boot starts its containers afresh.
            containers.clear();
        }
        for c in &r.components {
            let now = c.state.clone();
            let prev = last.insert(c.name.clone(), now.clone());
            if prev.as_ref() != Some(&now) {
                out.push(Event {
                    node: node.into(),
                    time_ms: r.time_ms,
                    component: c.name.clone(),
                    from: prev.unwrap_or_else(|| "(first report)".into()),
                    to: now,
                    reason: c.reason.clone(),
                });
            }
        }
        // Containers (from the CRI): a restart or an exit is what explains a stuck static pod.
        // Keyed apart from components so a container named like a component cannot collide.
        for k in &r.containers {
            let now = match k.state.as_str() {
                state::EXITED => format!("exited ({})", k.exit_code),
                s => s.to_string(),
            };
            let now = format!("{now} #{}", k.attempt);
            let prev = containers.insert(format!("{}/{}", k.pod, k.name), now.clone());
            if prev.as_ref() != Some(&now) && !(prev.is_none() && k.state == state::RUNNING && k.attempt == 0) {
                out.push(Event {
                    node: node.into(),
                    time_ms: r.time_ms,
                    component: format!("container {}/{}", k.pod, k.name),
                    from: prev.unwrap_or_else(|| "(first report)".into()),
                    to: now,
                    reason: [k.reason.as_str(), k.message.as_str()]
                        .iter()
                        .filter(|s| !s.is_empty())
                        .copied()
                        .collect::<Vec<_>>()
                        .join(": "),
                });
            }
        }
    }
    out
}

/// The store's timeline, oldest first: every node's changes (only `node`'s when given), and what
/// the API server said, a Node's changes under its name, the rest (CSRs, operators, pods) under
/// "api".
pub fn timeline(store: &crate::store::Store, node: Option<&str>) -> Result<Vec<Event>, crate::store::StoreError> {
    let nodes: Vec<String> = match node {
        Some(n) => vec![n.to_string()],
        None => store.nodes()?.into_iter().map(|r| r.node).collect(),
    };
    let mut all = Vec::new();
    for n in &nodes {
        all.extend(changes(n, &store.reports(n)?));
    }
    for b in store.boot_events(node)? {
        all.push(from_boot(b));
    }
    for c in store.api_changes()? {
        // With a node named, its own Node object's changes and any naming it (its CSRs).
        let keep = node.is_none_or(|n| (c.kind == "Node" && c.name == n) || c.change.contains(n) || c.name.contains(n));
        if keep {
            all.push(from_api(c));
        }
    }
    all.sort_by_key(|e| e.time_ms);
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hardshift_proto::v1::ComponentState;

    fn r(seq: u64, state: &str) -> NodeReport {
        NodeReport {
            seq,
            time_ms: seq as i64,
            components: vec![ComponentState {
                name: "kubelet".into(),
                state: state.into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn only_changes_are_events() {
        let rs = vec![
            ("b".to_string(), r(1, "healthy")),
            ("b".into(), r(2, "healthy")),
            ("b".into(), r(3, "not listening")),
            ("b".into(), r(4, "healthy")),
        ];
        let e = changes("m0", &rs);
        let t: Vec<(String, String)> = e.iter().map(|e| (e.from.clone(), e.to.clone())).collect();
        assert_eq!(
            t,
            vec![
                ("(first report)".into(), "healthy".into()),
                ("healthy".into(), "not listening".into()),
                ("not listening".into(), "healthy".into())
            ]
        );
    }

    #[test]
    fn container_exits_and_restarts_are_events() {
        use hardshift_proto::v1::ContainerInfo;
        let k = |state: &str, attempt: u32, exit: i32| ContainerInfo {
            pod: "openshift-etcd/etcd-master-0".into(),
            name: "etcd".into(),
            state: state.into(),
            attempt,
            exit_code: exit,
            reason: if exit != 0 { "Error".into() } else { String::new() },
            ..Default::default()
        };
        let with = |seq: u64, c: ContainerInfo| NodeReport {
            seq,
            containers: vec![c],
            ..r(seq, "healthy")
        };
        let rs = vec![
            ("b".to_string(), with(1, k("running", 0, 0))),
            ("b".into(), with(2, k("running", 0, 0))),
            ("b".into(), with(3, k("exited", 0, 1))),
            ("b".into(), with(4, k("running", 1, 0))),
        ];
        let e: Vec<Event> = changes("m0", &rs)
            .into_iter()
            .filter(|e| e.component.starts_with("container "))
            .collect();
        let t: Vec<(&str, &str)> = e.iter().map(|e| (e.from.as_str(), e.to.as_str())).collect();
        assert_eq!(t, vec![("running #0", "exited (1) #0"), ("exited (1) #0", "running #1")]);
        assert_eq!(e[0].reason, "Error");
        assert_eq!(e[0].component, "container openshift-etcd/etcd-master-0/etcd");
    }
}
