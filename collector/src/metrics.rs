//! `/metrics` in the Prometheus text format: the counters the ingest path keeps for the life of
//! the process, and gauges read from the dashboard's view at each scrape (the store is the
//! truth, so a restarted collector shows every node again at once).

use crate::view::View;
use hardshift_proto::v1::Health;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

/// What the ingest path counts. Cheap to update from the writer thread (atomics).
pub struct Metrics {
    registry: Registry,
    stored: Counter,
    duplicates: Counter,
    failed: Counter,
    latency: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("hardshift_collector");
        let stored = Counter::default();
        let duplicates = Counter::default();
        let failed = Counter::default();
        // 0.25 ms … 4 s: one commit is about a millisecond; a stalled disk shows in the top buckets.
        let latency = Histogram::new(exponential_buckets(0.000_25, 2.0, 15));
        registry.register("reports_stored", "Reports committed to the store", stored.clone());
        registry.register(
            "reports_duplicate",
            "Reports received again after a reconnect and not stored twice",
            duplicates.clone(),
        );
        registry.register(
            "reports_failed",
            "Reports the store refused (not acknowledged; the agent resends them)",
            failed.clone(),
        );
        registry.register_with_unit(
            "ingest_latency",
            "From a report's arrival to its commit (its Ack leaves then)",
            Unit::Seconds,
            latency.clone(),
        );
        Metrics {
            registry,
            stored,
            duplicates,
            failed,
            latency,
        }
    }
}

impl Metrics {
    /// One report's fate: stored (false: a duplicate) after `latency`, or failed.
    pub fn report(&self, stored: Option<bool>, latency: Duration) {
        match stored {
            Some(true) => self.stored.inc(),
            Some(false) => self.duplicates.inc(),
            None => self.failed.inc(),
        };
        if stored.is_some() {
            self.latency.observe(latency.as_secs_f64());
        }
    }
}

/// What only the serving side knows at scrape time.
#[derive(Debug, Default, Clone)]
pub struct Live {
    pub connected_agents: usize,
    pub open_connections: usize,
    /// Connections refused since start, by reason.
    pub refused: Vec<(&'static str, u64)>,
    /// The dashboard's: open now, and refused by reason.
    pub dashboard_open: usize,
    pub dashboard_refused: Vec<(&'static str, u64)>,
}

/// The whole exposition: counters, then the view's gauges, then `# EOF`.
pub fn render(m: &Metrics, view: &View, live: &Live) -> String {
    let mut reg = Registry::with_prefix("hardshift");
    let health = Family::<Labels, Gauge>::default();
    let age = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let lost = Family::<Labels, Gauge>::default();
    let findings = Family::<Labels, Gauge>::default();
    let node_health = Family::<Labels, Gauge>::default();
    for n in &view.nodes {
        let node = || vec![("node", n.name.clone()), ("role", n.role.clone())];
        node_health
            .get_or_create(&node())
            .set(Health::of_label(n.health).unwrap_or(Health::Unknown) as i64);
        if let Some(s) = n.seen_ago_s {
            age.get_or_create(&node()).set(s as f64);
        }
        lost.get_or_create(&node()).set(n.lost as i64);
        for c in &n.components {
            let mut l = node();
            l.push(("component", c.name.clone()));
            health
                .get_or_create(&l)
                .set(Health::of_label(c.health).unwrap_or(Health::Unknown) as i64);
        }
        for c in &n.causes {
            let mut l = node();
            l.push(("rule", c.id.to_string()));
            l.push(("severity", format!("{:?}", c.severity).to_lowercase()));
            findings.get_or_create(&l).set(1);
        }
    }
    let code = "0 unknown, 1 ok, 2 warning, 3 failing, 4 absent";
    reg.register(
        "component_health",
        format!("Health of a node's component in its newest report: {code}"),
        health,
    );
    reg.register(
        "node_health",
        format!("A node's worst health (failing when silent or a critical finding holds): {code}"),
        node_health,
    );
    reg.register_with_unit(
        "node_last_report_age",
        "Time since the node's newest report arrived",
        Unit::Seconds,
        age,
    );
    reg.register(
        "node_reports_lost",
        "Reports a node's agent dropped (full outbox) or never sent (killed), by the seq gaps",
        lost,
    );
    reg.register(
        "diagnosis_finding",
        "1 for each diagnosis rule that holds for a node (see `hardshift diagnose`)",
        findings,
    );
    let checks = Family::<Vec<(&'static str, String)>, Gauge>::default();
    for c in &view.checks {
        checks.get_or_create(&vec![("check", c.id.to_string())]).set(c.met as i64);
    }
    reg.register(
        "install_check_met",
        "1 when an install check holds (the phases of `hardshift wait-for`)",
        checks,
    );
    let progress = Gauge::<i64>::default();
    progress.set(view.progress().0 as i64);
    reg.register(
        "install_checks_passed",
        "Install checks met in order before the first unmet one",
        progress,
    );
    let connected = Gauge::<i64>::default();
    connected.set(live.connected_agents as i64);
    reg.register("collector_agents_connected", "Agents streaming to this collector now", connected);
    let open = Gauge::<i64>::default();
    open.set(live.open_connections as i64);
    reg.register("collector_connections_open", "TCP connections open on the agent port", open);
    let refused = Family::<Vec<(&'static str, String)>, Counter>::default();
    for (why, n) in &live.refused {
        refused.get_or_create(&vec![("reason", why.to_string())]).inc_by(*n);
    }
    reg.register(
        "collector_connections_refused",
        "Connections refused on the agent port, by reason",
        refused,
    );
    let open = Gauge::<i64>::default();
    open.set(live.dashboard_open as i64);
    reg.register(
        "collector_dashboard_connections_open",
        "TCP connections open on the dashboard port",
        open,
    );
    let refused = Family::<Vec<(&'static str, String)>, Counter>::default();
    for (why, n) in &live.dashboard_refused {
        refused.get_or_create(&vec![("reason", why.to_string())]).inc_by(*n);
    }
    reg.register(
        "collector_dashboard_connections_refused",
        "Connections refused on the dashboard port, by reason",
        refused,
    );
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode_registry(&mut out, &m.registry);
    let _ = encode_registry(&mut out, &reg);
    let _ = encode_eof(&mut out);
    out
}

/// The exposition in Prometheus' classic text format (0.0.4), for scrapers and tools that do
/// not ask for OpenMetrics (`promtool check metrics`, curl): counter families are named with
/// their `_total`, and the `# UNIT` and `# EOF` lines, which 0.0.4 lacks, are dropped.
pub fn classic(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "].iter().find(|p| line.starts_with(**p));
        match meta {
            Some(p) => {
                let rest = &line[p.len()..];
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                if counters.contains(name) {
                    out.push_str(&format!("{p}{name}_total {tail}\n"));
                    continue;
                }
                out.push_str(line);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ApiContact, NodeRow};
    use hardshift_proto::v1::{ComponentState, Health, NodeReport};

    #[test]
    fn counters_and_gauges_with_their_labels() {
        let m = Metrics::default();
        m.report(Some(true), Duration::from_millis(2));
        m.report(Some(false), Duration::from_millis(1));
        m.report(None, Duration::ZERO);
        let row = NodeRow {
            node: "master-0".into(),
            role: "master".into(),
            boot_id: "b".into(),
            last_seq: 1,
            last_seen_ms: 1_000,
            reports: 1,
            dropped: 3,
            last: Some(NodeReport {
                components: vec![ComponentState {
                    name: "kubelet".into(),
                    health: Health::Failing as i32,
                    state: "inactive".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        };
        let view = crate::view::build(&[row], None, &[], &ApiContact::default(), 3_500);
        let live = Live {
            connected_agents: 1,
            open_connections: 2,
            refused: vec![("handshake_failed", 4)],
            dashboard_open: 3,
            dashboard_refused: vec![("connection_cap", 5)],
        };
        let text = render(&m, &view, &live);
        for want in [
            "hardshift_collector_reports_stored_total 1",
            "hardshift_collector_dashboard_connections_open 3",
            "hardshift_collector_dashboard_connections_refused_total{reason=\"connection_cap\"} 5",
            "hardshift_collector_reports_duplicate_total 1",
            "hardshift_collector_reports_failed_total 1",
            "hardshift_collector_ingest_latency_seconds_count 2",
            "hardshift_component_health{node=\"master-0\",role=\"master\",component=\"kubelet\"} 3",
            "hardshift_node_last_report_age_seconds{node=\"master-0\",role=\"master\"} 2.0",
            "hardshift_node_reports_lost{node=\"master-0\",role=\"master\"} 3",
            "hardshift_collector_connections_refused_total{reason=\"handshake_failed\"} 4",
            "hardshift_collector_agents_connected 1",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        assert!(text.contains("rule=\"HS021\""), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        let c = classic(&text);
        assert!(c.contains("# TYPE hardshift_collector_reports_stored_total counter\n"), "{c}");
        assert!(c.contains("# HELP hardshift_collector_reports_stored_total Reports"), "{c}");
        assert!(c.contains("# TYPE hardshift_component_health gauge\n"), "{c}");
        assert!(!c.contains("# EOF") && !c.contains("# UNIT"), "{c}");
    }
}
