//! State changes over time ("kubelet healthy → not listening"), derived from the stored reports.

use hardshift_proto::v1::NodeReport;
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

/// Reports of one node in (boot, seq) order → the changes between consecutive reports.
pub fn changes(node: &str, reports: &[(String, NodeReport)]) -> Vec<Event> {
    let mut out = Vec::new();
    let mut last: BTreeMap<String, String> = BTreeMap::new();
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
    }
    out
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
}
