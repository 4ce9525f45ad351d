//! One line per node for `hardshift status`: the newest report reduced to what an admin scans
//! first (kubelet, runtime, etcd, pods not running) and every warning, worst first.

use crate::store::NodeRow;
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::Component;
use serde::Serialize;

pub use crate::diagnose::{CLOCK_SKEW_WARN_MS, SILENT_AFTER_MS};

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub node: String,
    pub role: String,
    pub last_seen_ms: i64,
    pub seen_ago_s: i64,
    pub kubelet: String,
    pub cri: String,
    pub etcd: String,
    pub pods_not_running: Vec<String>,
    pub clock_offset_ms: Option<i64>,
    /// The first finding of `diagnose`: what to look at first.
    pub root_cause: Option<String>,
    pub warnings: Vec<String>,
    pub reports: u64,
    pub dropped: u64,
}

fn short(c: Option<&ComponentState>) -> String {
    match c {
        None => "-".into(),
        Some(c) if c.health == Health::Ok as i32 => "ok".into(),
        Some(c) => c.state.clone(),
    }
}

pub fn summarize(r: &NodeRow, now_ms: i64) -> Summary {
    let comps: &[ComponentState] = r.last.as_ref().map(|l| l.components.as_slice()).unwrap_or(&[]);
    let find = |n: &str| comps.iter().find(|c| c.name == n);
    // Ranked by `Health::badness`, the one order of "how bad" (a watched unit that is not there
    // ranks with the failures).
    let mut warnings: Vec<(u8, String)> = comps
        .iter()
        .filter_map(|c| {
            let h = Health::try_from(c.health).ok()?;
            (h.badness() >= Health::Warning.badness()).then(|| {
                let why = if c.reason.is_empty() { c.state.clone() } else { c.reason.clone() };
                (h.badness(), format!("{}: {why}", c.name))
            })
        })
        .collect();
    let seen_ago_s = (now_ms - r.last_seen_ms).max(0) / 1000;
    if now_ms - r.last_seen_ms > SILENT_AFTER_MS {
        warnings.push((
            Health::Failing.badness(),
            format!("silent for {seen_ago_s}s: the node is down, rebooting, or cannot reach the collector"),
        ));
    }
    let host = r.last.as_ref().and_then(|l| l.host.as_ref());
    let clock_offset_ms = host.filter(|h| h.clock_offset_known).map(|h| h.clock_offset_ms);
    if let Some(off) = clock_offset_ms.filter(|o| o.abs() > CLOCK_SKEW_WARN_MS) {
        warnings.push((
            Health::Failing.badness(),
            format!(
                "clock is {:.1}s {} the collector's: certificates will fail (check chrony/NTP)",
                off.abs() as f64 / 1000.0,
                if off > 0 { "ahead of" } else { "behind" }
            ),
        ));
    }
    if r.dropped > 0 {
        warnings.push((
            Health::Warning.badness(),
            format!(
                "{} reports lost: dropped by a full outbox while the collector was unreachable, or not sent before an agent restart",
                r.dropped
            ),
        ));
    }
    warnings.sort_by_key(|w| std::cmp::Reverse(w.0));
    let pods_not_running = r
        .last
        .iter()
        .flat_map(|l| &l.pods)
        .filter(|p| !p.ready)
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect();
    Summary {
        node: r.node.clone(),
        role: r.role.clone(),
        last_seen_ms: r.last_seen_ms,
        seen_ago_s,
        kubelet: short(find(Component::Kubelet.name())),
        cri: short(find(Component::Cri.name())),
        etcd: short(find(Component::Etcd.name())),
        pods_not_running,
        clock_offset_ms,
        root_cause: r.last.as_ref().and_then(|l| {
            crate::diagnose::diagnose(&r.node, &r.role, l, now_ms - r.last_seen_ms)
                .first()
                .map(|f| format!("{} {}", f.id, f.title))
        }),
        warnings: warnings.into_iter().map(|w| w.1).collect(),
        reports: r.reports,
        dropped: r.dropped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hardshift_proto::v1::{HostState, NodeReport, PodInfo};

    fn comp(name: &str, h: Health, state: &str, reason: &str) -> ComponentState {
        ComponentState {
            name: name.into(),
            health: h as i32,
            state: state.into(),
            reason: reason.into(),
            details: Default::default(),
        }
    }

    #[test]
    fn failing_first_and_clock_skew_named() {
        let row = NodeRow {
            node: "master-0".into(),
            role: "master".into(),
            boot_id: "b".into(),
            last_seq: 3,
            last_seen_ms: 10_000,
            reports: 3,
            dropped: 0,
            last: Some(NodeReport {
                components: vec![
                    comp("kubelet", Health::Ok, "healthy", ""),
                    comp("cri", Health::Warning, "0/0 running", "NetworkReady=false: x"),
                    comp("kubelet-cert", Health::Failing, "not yet valid", "clock is behind"),
                ],
                host: Some(HostState {
                    clock_offset_ms: -5_300,
                    clock_offset_known: true,
                    ..Default::default()
                }),
                pods: vec![PodInfo {
                    namespace: "ns".into(),
                    name: "p".into(),
                    ready: false,
                    ..Default::default()
                }],
                ..Default::default()
            }),
        };
        let s = summarize(&row, 12_000);
        assert_eq!(s.kubelet, "ok");
        assert_eq!(s.cri, "0/0 running");
        assert_eq!(s.etcd, "-");
        assert_eq!(s.pods_not_running, vec!["ns/p"]);
        assert!(
            s.warnings[0].starts_with("kubelet-cert") || s.warnings[0].starts_with("clock"),
            "{:?}",
            s.warnings
        );
        assert!(s.warnings.iter().any(|w| w.contains("5.3s behind")), "{:?}", s.warnings);
        assert!(s.warnings.last().unwrap().starts_with("cri"), "{:?}", s.warnings);
        let silent = summarize(&row, 100_000);
        assert!(
            silent.warnings.iter().any(|w| w.starts_with("silent for 90s")),
            "{:?}",
            silent.warnings
        );
    }

    #[test]
    fn a_watched_unit_that_is_not_there_is_warned_of_with_the_failures() {
        let row = NodeRow {
            node: "w".into(),
            last_seen_ms: 10_000,
            last: Some(NodeReport {
                components: vec![
                    comp("cri", Health::Warning, "0/0 running", "NetworkReady=false: x"),
                    comp("chronyd.service", Health::Absent, "inactive/dead", "unit not found"),
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        let s = summarize(&row, 10_000);
        assert_eq!(
            s.warnings.first().map(String::as_str),
            Some("chronyd.service: unit not found"),
            "{:?}",
            s.warnings
        );
    }
}
