//! `/metrics` in the Prometheus text format: the counters the ingest path keeps for the life of
//! the process, and gauges read from the dashboard's view at each scrape (the store is the
//! truth, so a restarted collector shows every node again at once). Every series carries the
//! bundle's identity (`cluster`, `base_domain`, `bundle`), so one Prometheus can hold many
//! collectors' series apart (docs/fleet.md).

use crate::view::View;
use hardshift_proto::v1::Health;
use hardshift_proto::vocab::Component;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use std::borrow::Cow;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

/// Which install a collector watches: labels on each of its series.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// install-config's metadata.name.
    pub cluster: String,
    pub base_domain: String,
    /// The cluster's id (its ClusterVersion's clusterID, from the bundle's root CA): two bundles
    /// of one cluster name differ here, and it is stable across collector restarts and re-runs.
    pub bundle: String,
}

impl Identity {
    fn labels(&self) -> impl Iterator<Item = (Cow<'static, str>, Cow<'static, str>)> {
        [
            ("cluster", self.cluster.clone()),
            ("base_domain", self.base_domain.clone()),
            ("bundle", self.bundle.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (Cow::Borrowed(k), Cow::Owned(v)))
    }
}

/// One certificate of the bundle (pki/, agent-pki/), read when the collector starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleCert {
    /// Its path in the bundle, e.g. `pki/root-ca.crt`.
    pub file: String,
    pub cn: String,
    /// notAfter, in seconds since the epoch.
    pub not_after_s: i64,
}

/// What the collector knows of its bundle for its life.
#[derive(Debug, Clone, Default)]
pub struct Bundle {
    pub identity: Identity,
    pub certificates: Vec<BundleCert>,
}

/// What the ingest path counts. Cheap to update from the writer thread (atomics).
pub struct Metrics {
    stored: Counter,
    duplicates: Counter,
    failed: Counter,
    latency: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            stored: Counter::default(),
            duplicates: Counter::default(),
            failed: Counter::default(),
            // 0.25 ms … 4 s: one commit is about a millisecond; a stalled disk shows in the top buckets.
            latency: Histogram::new(exponential_buckets(0.000_25, 2.0, 15)),
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

    /// The counters, shared (a clone of a counter is the same counter) into `reg`.
    fn register(&self, reg: &mut Registry) {
        reg.register("reports_stored", "Reports committed to the store", self.stored.clone());
        reg.register(
            "reports_duplicate",
            "Reports received again after a reconnect and not stored twice",
            self.duplicates.clone(),
        );
        reg.register(
            "reports_failed",
            "Reports the store refused (not acknowledged; the agent resends them)",
            self.failed.clone(),
        );
        reg.register_with_unit(
            "ingest_latency",
            "From a report's arrival to its commit (its Ack leaves then)",
            Unit::Seconds,
            self.latency.clone(),
        );
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

const HEALTH_CODES: &str = "0 unknown, 1 ok, 2 warning, 3 failing, 4 absent";

/// The whole exposition: counters, then the view's gauges, then `# EOF`.
pub fn exposition(m: &Metrics, view: &View, live: &Live, bundle: &Bundle) -> String {
    let mut reg = Registry::with_prefix_and_labels("hardshift", bundle.identity.labels());
    m.register(reg.sub_registry_with_prefix("collector"));
    nodes(&mut reg, view);
    install(&mut reg, view);
    certificates(&mut reg, view, bundle);
    serving(reg.sub_registry_with_prefix("collector"), live);
    let info = Info::new(vec![("version", env!("CARGO_PKG_VERSION").to_string())]);
    reg.register(
        "collector",
        "This collector: its version; the bundle's identity is on every series",
        info,
    );
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode_registry(&mut out, &reg);
    let _ = encode_eof(&mut out);
    out
}

/// Per node: health, report age, silence, findings.
fn nodes(reg: &mut Registry, view: &View) {
    let health = Family::<Labels, Gauge>::default();
    let age = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let silent = Family::<Labels, Gauge>::default();
    let reported = Family::<Labels, Gauge>::default();
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
        silent.get_or_create(&node()).set(n.silent as i64);
        reported.get_or_create(&node()).set((n.seen_ago_s.is_some()) as i64);
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
            l.push(("about", crate::diagnose::about(c.id).to_string()));
            findings.get_or_create(&l).set(1);
        }
    }
    reg.register(
        "component_health",
        format!("Health of a node's component in its newest report: {HEALTH_CODES}"),
        health,
    );
    reg.register(
        "node_health",
        format!("A node's worst health (failing when silent or a critical finding holds): {HEALTH_CODES}"),
        node_health,
    );
    reg.register_with_unit(
        "node_last_report_age",
        "Time since the node's newest report arrived",
        Unit::Seconds,
        age,
    );
    reg.register(
        "node_silent",
        format!(
            "1 when the node has reported but not for {} s (diagnosis HS001)",
            crate::diagnose::SILENT_AFTER_MS / 1000
        ),
        silent,
    );
    reg.register(
        "node_reported",
        "1 when a report of the node is stored, 0 for a node of the bundle that never reported",
        reported,
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
}

/// The install's checks, and the CSRs waiting.
fn install(reg: &mut Registry, view: &View) {
    let checks = Family::<Labels, Gauge>::default();
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
    let count = Family::<Labels, Gauge>::default();
    let oldest = Family::<Labels, Gauge>::default();
    for p in &view.pending_csrs {
        let l = vec![("node", p.node.clone()), ("username", p.username.clone())];
        count.get_or_create(&l).set(p.count as i64);
        oldest.get_or_create(&l).set(p.oldest_age_s);
    }
    reg.register(
        "csrs_pending",
        "CSRs neither approved nor denied, by the node they are for (from the API watch)",
        count,
    );
    reg.register_with_unit(
        "csr_pending_oldest_age",
        "Age of the oldest pending CSR, by the node it is for (from the API watch)",
        Unit::Seconds,
        oldest,
    );
}

/// When certificates expire: the bundle's, and each node's kubelet client certificate.
fn certificates(reg: &mut Registry, view: &View, bundle: &Bundle) {
    let files = Family::<Labels, Gauge>::default();
    for c in &bundle.certificates {
        files
            .get_or_create(&vec![("file", c.file.clone()), ("cn", c.cn.clone())])
            .set(c.not_after_s);
    }
    reg.register_with_unit(
        "bundle_certificate_expiry_timestamp",
        "notAfter of a certificate of the bundle (renewed by `hardshift create` within 30 days of it)",
        Unit::Seconds,
        files,
    );
    let kubelet = Family::<Labels, Gauge>::default();
    let name = Component::KubeletCert.name();
    for n in &view.nodes {
        let not_after = n.components.iter().filter(|c| c.name == name).find_map(|c| {
            c.details
                .iter()
                .find(|(k, _)| k == "notAfter")
                .and_then(|(_, v)| v.parse::<i64>().ok())
        });
        if let Some(t) = not_after {
            kubelet
                .get_or_create(&vec![("node", n.name.clone()), ("role", n.role.clone())])
                .set(t);
        }
    }
    reg.register_with_unit(
        "kubelet_certificate_expiry_timestamp",
        "notAfter of a node's kubelet client certificate, as its agent last read it",
        Unit::Seconds,
        kubelet,
    );
}

/// The collector's own doors: agents and dashboard connections.
fn serving(reg: &mut Registry, live: &Live) {
    let connected = Gauge::<i64>::default();
    connected.set(live.connected_agents as i64);
    reg.register("agents_connected", "Agents streaming to this collector now", connected);
    let open = Gauge::<i64>::default();
    open.set(live.open_connections as i64);
    reg.register("connections_open", "TCP connections open on the agent port", open);
    let refused = Family::<Labels, Counter>::default();
    for (why, n) in &live.refused {
        refused.get_or_create(&vec![("reason", why.to_string())]).inc_by(*n);
    }
    reg.register("connections_refused", "Connections refused on the agent port, by reason", refused);
    let open = Gauge::<i64>::default();
    open.set(live.dashboard_open as i64);
    reg.register("dashboard_connections_open", "TCP connections open on the dashboard port", open);
    let refused = Family::<Labels, Counter>::default();
    for (why, n) in &live.dashboard_refused {
        refused.get_or_create(&vec![("reason", why.to_string())]).inc_by(*n);
    }
    reg.register(
        "dashboard_connections_refused",
        "Connections refused on the dashboard port, by reason",
        refused,
    );
}

/// The exposition in Prometheus' classic text format (0.0.4), for scrapers and tools that do
/// not ask for OpenMetrics (`promtool check metrics`, curl): counter families are named with
/// their `_total`, info families (which 0.0.4 lacks) become gauges named with their `_info`, and
/// the `# UNIT` and `# EOF` lines, which 0.0.4 lacks too, are dropped.
pub fn classic(openmetrics: &str) -> String {
    // Family name → (its name in 0.0.4, its type there, if another).
    let renamed: std::collections::HashMap<&str, (&str, Option<&str>)> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| match l.rsplit_once(' ') {
            Some((name, "counter")) => Some((name, ("_total", None))),
            Some((name, "info")) => Some((name, ("_info", Some("gauge")))),
            _ => None,
        })
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
                match renamed.get(name) {
                    Some((suffix, ty)) => {
                        let tail = if *p == "# TYPE " { ty.unwrap_or(tail) } else { tail };
                        out.push_str(&format!("{p}{name}{suffix} {tail}"));
                    }
                    None => out.push_str(line),
                }
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
    use crate::api::{project, ApiObject};
    use crate::store::{ApiContact, NodeRow};
    use hardshift_proto::v1::{ComponentState, Health, NodeReport};
    use std::collections::HashMap;

    fn row(node: &str, seen_ms: i64, components: Vec<ComponentState>) -> NodeRow {
        NodeRow {
            node: node.into(),
            role: "master".into(),
            boot_id: "b".into(),
            last_seq: 1,
            last_seen_ms: seen_ms,
            reports: 1,
            dropped: 3,
            last: Some(NodeReport {
                components,
                ..Default::default()
            }),
        }
    }

    fn csr(name: &str, created: &str, username: &str, approved: bool) -> ApiObject {
        let status = if approved {
            serde_json::json!({"conditions": [{"type": "Approved", "status": "True"}]})
        } else {
            serde_json::json!({})
        };
        let obj = serde_json::json!({"metadata": {"name": name, "creationTimestamp": created},
            "spec": {"signerName": "kubernetes.io/kubelet-serving", "username": username}, "status": status});
        ApiObject {
            kind: "CertificateSigningRequest".into(),
            namespace: String::new(),
            name: name.into(),
            observed_ms: 0,
            deleted: false,
            view: project("CertificateSigningRequest", &obj),
        }
    }

    #[test]
    fn counters_and_gauges_with_their_labels() {
        let m = Metrics::default();
        m.report(Some(true), Duration::from_millis(2));
        m.report(Some(false), Duration::from_millis(1));
        m.report(None, Duration::ZERO);
        let kubelet = ComponentState {
            name: "kubelet".into(),
            health: Health::Failing as i32,
            state: "inactive".into(),
            ..Default::default()
        };
        let cert = ComponentState {
            name: "kubelet-cert".into(),
            health: Health::Ok as i32,
            state: "valid".into(),
            details: HashMap::from([("notAfter".to_string(), "1900000000".to_string())]),
            ..Default::default()
        };
        // 2001-09-09T01:46:40Z is 1e12 ms; "now" is 700 s later.
        let now = 1_000_000_700_000;
        let rows = [
            row("master-0", now - 2_500, vec![kubelet, cert]),
            row("master-2", now - 31_000, vec![]),
        ];
        let inventory = ["master-0", "master-1", "master-2"].map(|n| crate::phase::Member {
            name: n.into(),
            role: hardshift_proto::vocab::Role::Master,
        });
        let api = [
            csr("csr-a", "2001-09-09T01:46:40Z", "system:node:master-1", false),
            csr("csr-b", "2001-09-09T01:50:00Z", "system:node:master-1", false),
            csr("csr-c", "2001-09-09T01:46:40Z", "system:node:master-2", true),
        ];
        let view = crate::view::build(&rows, Some(&inventory), &api, &ApiContact::default(), now);
        let live = Live {
            connected_agents: 1,
            open_connections: 2,
            refused: vec![("handshake_failed", 4)],
            dashboard_open: 3,
            dashboard_refused: vec![("connection_cap", 5)],
        };
        let bundle = Bundle {
            identity: Identity {
                cluster: "ocp4".into(),
                base_domain: "example.com".into(),
                bundle: "0f0e".into(),
            },
            certificates: vec![BundleCert {
                file: "pki/root-ca.crt".into(),
                cn: "root-ca".into(),
                not_after_s: 2_000_000_000,
            }],
        };
        let text = exposition(&m, &view, &live, &bundle);
        let id = r#"cluster="ocp4",base_domain="example.com",bundle="0f0e""#;
        for want in [
            format!("hardshift_collector_reports_stored_total{{{id}}} 1"),
            format!("hardshift_collector_dashboard_connections_open{{{id}}} 3"),
            format!("hardshift_collector_dashboard_connections_refused_total{{{id},reason=\"connection_cap\"}} 5"),
            format!("hardshift_collector_reports_duplicate_total{{{id}}} 1"),
            format!("hardshift_collector_reports_failed_total{{{id}}} 1"),
            format!("hardshift_collector_ingest_latency_seconds_count{{{id}}} 2"),
            format!("hardshift_component_health{{{id},node=\"master-0\",role=\"master\",component=\"kubelet\"}} 3"),
            format!("hardshift_node_last_report_age_seconds{{{id},node=\"master-0\",role=\"master\"}} 2.0"),
            format!("hardshift_node_reports_lost{{{id},node=\"master-0\",role=\"master\"}} 3"),
            format!("hardshift_collector_connections_refused_total{{{id},reason=\"handshake_failed\"}} 4"),
            format!("hardshift_collector_agents_connected{{{id}}} 1"),
            format!("hardshift_collector_info{{{id},version=\"{}\"}} 1", env!("CARGO_PKG_VERSION")),
            // Silent past 30 s, never reported, and neither.
            format!("hardshift_node_silent{{{id},node=\"master-2\",role=\"master\"}} 1"),
            format!("hardshift_node_silent{{{id},node=\"master-0\",role=\"master\"}} 0"),
            format!("hardshift_node_silent{{{id},node=\"master-1\",role=\"master\"}} 0"),
            format!("hardshift_node_reported{{{id},node=\"master-1\",role=\"master\"}} 0"),
            format!("hardshift_node_reported{{{id},node=\"master-0\",role=\"master\"}} 1"),
            format!("hardshift_diagnosis_finding{{{id},node=\"master-2\",role=\"master\",rule=\"HS001\",severity=\"critical\",about=\"the node is silent\"}} 1"),
            // master-1's two pending CSRs, the oldest 700 s old; master-2's is approved.
            format!("hardshift_csrs_pending{{{id},node=\"master-1\",username=\"\"}} 2"),
            format!("hardshift_csr_pending_oldest_age_seconds{{{id},node=\"master-1\",username=\"\"}} 700"),
            format!("hardshift_bundle_certificate_expiry_timestamp_seconds{{{id},file=\"pki/root-ca.crt\",cn=\"root-ca\"}} 2000000000"),
            format!("hardshift_kubelet_certificate_expiry_timestamp_seconds{{{id},node=\"master-0\",role=\"master\"}} 1900000000"),
        ] {
            assert!(text.contains(&want), "{want:?} not in\n{text}");
        }
        assert!(
            !text.contains("node=\"master-2\",username"),
            "an approved CSR is not pending:\n{text}"
        );
        assert!(text.contains("rule=\"HS021\""), "{text}");
        // Every sample line carries the identity.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(l.contains(id), "{l}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        let c = classic(&text);
        assert!(c.contains("# TYPE hardshift_collector_reports_stored_total counter\n"), "{c}");
        assert!(c.contains("# HELP hardshift_collector_reports_stored_total Reports"), "{c}");
        assert!(c.contains("# TYPE hardshift_component_health gauge\n"), "{c}");
        assert!(
            c.contains("# TYPE hardshift_collector_info gauge\nhardshift_collector_info{"),
            "{c}"
        );
        assert!(c.contains("# HELP hardshift_collector_info This collector"), "{c}");
        assert!(!c.contains("# EOF") && !c.contains("# UNIT"), "{c}");
    }
}
