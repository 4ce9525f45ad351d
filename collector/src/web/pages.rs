//! The dashboard's HTML, rendered from a `View` with maud, which escapes every value it is given
//! (a node's or the API's words included) unless told it is markup. Pure: the live regions are
//! fragments the server-sent events replace.

use crate::events::Event;
use crate::view::{NodeView, View};
use maud::{html, Markup, PreEscaped, DOCTYPE};
use std::collections::BTreeMap;
use std::fmt::Write;

/// `s` as one path segment of a URL (node names are DNS labels, but never trust that).
pub fn url_segment(s: &str) -> String {
    let mut o = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            o.push(b as char);
        } else {
            let _ = write!(o, "%{b:02X}");
        }
    }
    o
}

/// Unix ms as `HH:MM:SS` UTC.
pub fn clock(ms: i64) -> String {
    let s = ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn ago(s: Option<i64>) -> String {
    match s {
        None => "never".into(),
        Some(s) if s < 120 => format!("{s}s ago"),
        Some(s) if s < 7200 => format!("{}m ago", s / 60),
        Some(s) => format!("{}h ago", s / 3600),
    }
}

/// The grid's "seen": exact only once a node falls silent, so a healthy grid does not change
/// (and is not re-sent to every page) each second.
fn seen_live(s: Option<i64>) -> String {
    match s {
        Some(s) if s * 1000 <= crate::summary::SILENT_AFTER_MS => "live".into(),
        other => ago(other),
    }
}

/// The whole page around `body` (HTML this module made); `live` is the URL of the stream that
/// replaces `#live`.
pub fn page(title: &str, nav: &str, live: &str, body: &str, after: &str) -> String {
    let link = |href: &str, name: &str| {
        html! { a href=(href) aria-current=[(name == nav).then_some("page")] { (name) } }
    };
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · hardshift" }
                link rel="stylesheet" href="/app.css";
                script src="/app.js" defer {}
            }
            body {
                header {
                    strong { "hardshift" }
                    nav aria-label="pages" { (link("/", "Nodes")) (link("/timeline", "Timeline")) (link("/metrics", "Metrics")) }
                    span #conn role="status" aria-live="polite" {}
                }
                main {
                    h1 { (title) }
                    div #live data-live=(live) aria-live="off" { (PreEscaped(body)) }
                    (PreEscaped(after))
                }
            }
        }
    };
    page.into_string() + "\n"
}

fn phase_line(v: &View) -> Markup {
    let (done, total) = v.progress();
    html! {
        @if total > 0 {
            @match v.checks.iter().find(|c| !c.met) {
                None => { p.phase.h-ok { "Install complete (" (done) "/" (total) " checks)" } }
                Some(c) => {
                    p.phase {
                        "Phase " (done) "/" (total) ": waiting for " strong { (c.title) }
                        @if let Some(e) = c.evidence.first() { ": " (e) }
                    }
                }
            }
        }
    }
}

/// The node grid: a row per node, a cell per component, coloured by health and named in words.
pub fn grid(v: &View) -> String {
    let mut o = grid_head(v);
    for n in &v.nodes {
        o.push_str(&grid_row(v, n));
    }
    o.push_str(&grid_tail(v));
    o
}

/// The grid up to its first row: the phase, the caption and the column headers. When this
/// changes, pages get the whole grid again; otherwise only the rows that changed. (The table and
/// its body are opened here and closed by `grid_tail`, so the rows can be sent alone.)
pub fn grid_head(v: &View) -> String {
    html! {
        (phase_line(v))
        (PreEscaped("<table class=\"grid\">"))
        caption { "Nodes and their components (updated live)" }
        thead {
            tr {
                th scope="col" { "Node" } th scope="col" { "Role" } th scope="col" { "Phase" } th scope="col" { "Seen" }
                @for c in &v.columns { th scope="col" { (c) } }
                th scope="col" { "Root cause" }
            }
        }
        (PreEscaped("<tbody>"))
    }
    .into_string()
}

pub fn grid_tail(v: &View) -> String {
    html! {
        (PreEscaped("</tbody></table>"))
        @if v.nodes.is_empty() { p { "No node has reported yet, and no bundle inventory was found." } }
    }
    .into_string()
}

/// One node's row; its `id` is what a live update replaces.
pub fn grid_row(v: &View, n: &NodeView) -> String {
    let id = url_segment(&n.name);
    html! {
        tr id={ "node-" (id) } data-node=(n.name) data-health=(n.health) {
            th scope="row" class={ "h-" (n.health) } { a href={ "/node/" (id) } { (n.name) } }
            td { (n.role) } td { (n.phase) } td { (seen_live(n.seen_ago_s)) }
            @for col in &v.columns {
                @match n.components.iter().find(|c| &c.name == col) {
                    None => { td.h-none { "–" } }
                    Some(c) => {
                        @let detail = if c.reason.is_empty() { &c.state } else { &c.reason };
                        td class={ "h-" (c.health) } data-component=(c.name) data-health=(c.health) title=(detail)
                            aria-label={ (c.name) ": " (c.health) ", " (c.state) } { (c.health) small { (c.state) } }
                    }
                }
            }
            @match n.causes.first() {
                None => { td.cause { "–" } }
                Some(c) => { td class={ "cause sev-" (format!("{:?}", c.severity)) } { abbr title=(c.fix) { (c.id) } " " (c.title) } }
            }
        }
    }
    .into_string()
}

/// One node: its components with details, its diagnosis, pods not running, recent events.
pub fn node(n: &NodeView, events: &[Event]) -> String {
    html! {
        p class={ "summary h-" (n.health) } {
            (n.role) ", " (n.phase) ", last report " (ago(n.seen_ago_s)) ", " (n.reports) " reports stored, " (n.lost) " lost"
            @if !n.boot_id.is_empty() { ", boot " (n.boot_id) }
        }
        @if !n.causes.is_empty() {
            h2 { "Diagnosis" }
            ol.causes {
                @for c in &n.causes {
                    li class={ "sev-" (format!("{:?}", c.severity)) } {
                        strong { (c.id) " " (c.title) }
                        ul { @for e in &c.evidence { li { (e) } } }
                        p { "Fix: " (c.fix) }
                    }
                }
            }
        }
        h2 { "Components" }
        (comps_table(n.components.iter().filter(|c| !crate::view::is_hardware(&c.name))))
        @if n.components.iter().any(|c| crate::view::is_hardware(&c.name)) {
            h2 { "Hardware" }
            (comps_table(n.components.iter().filter(|c| crate::view::is_hardware(&c.name))))
        }
        @if !n.pods_not_running.is_empty() {
            h2 { "Pods not ready" }
            ul { @for p in &n.pods_not_running { li { (p) } } }
        }
        h2 { "Recent events" }
        (events_table(events))
    }
    .into_string()
}

/// Components with their health, state, reason and details: the node page's tables.
fn comps_table<'a>(comps: impl Iterator<Item = &'a crate::view::Comp>) -> Markup {
    html! {
        table.comps {
            thead { tr { th scope="col" { "Component" } th scope="col" { "Health" } th scope="col" { "State" } th scope="col" { "Reason" } th scope="col" { "Details" } } }
            tbody {
                @for c in comps {
                    tr data-component=(c.name) {
                        th scope="row" { (c.name) }
                        td class={ "h-" (c.health) } { (c.health) }
                        td { (c.state) }
                        td { (c.reason) }
                        td.details { @for (i, (k, v)) in c.details.iter().enumerate() { @if i > 0 { br; } (k) "=" (v) } }
                    }
                }
            }
        }
    }
}

fn events_table(events: &[Event]) -> Markup {
    html! {
        @if events.is_empty() {
            p { "None yet." }
        } @else {
            table.events {
                thead { tr { th scope="col" { "Time (UTC)" } th scope="col" { "Node" } th scope="col" { "What" } th scope="col" { "Change" } th scope="col" { "Why" } } }
                tbody {
                    @for e in events.iter().rev() {
                        tr {
                            td { (clock(e.time_ms)) }
                            td { (e.node) }
                            td { (e.component) }
                            td { @if !e.from.is_empty() { (e.from) " → " } (e.to) }
                            td { (e.reason) }
                        }
                    }
                }
            }
        }
    }
}

/// The node page's static part: the log buttons, outside the live region so an update
/// does not wipe what was fetched. Each is a plain link too (works without JavaScript).
pub fn log_links(node: &str, units: &[&str], role: &str) -> String {
    let mut items: Vec<(String, String)> = units.iter().map(|u| (format!("unit={u}"), format!("{u} journal"))).collect();
    if role != "worker" {
        items.push(("etcd=members".into(), "etcd members".into()));
    }
    let node = url_segment(node);
    html! {
        section aria-labelledby="logs-h" {
            h2 #logs-h { "Logs" }
            p.logs { @for (q, label) in &items { a.fetch href={ "/node/" (node) "/logs?" (q) } { (label) } " " } }
            pre #logs tabindex="0" aria-label="fetched log" {}
        }
    }
    .into_string()
}

/// The install timeline: the checks in order (with when this collector first saw each met),
/// then every change, newest first.
pub fn timeline(v: &View, met_at: &BTreeMap<&'static str, i64>, events: &[Event]) -> String {
    html! {
        (phase_line(v))
        @if v.checks.is_empty() {
            p { "No bundle inventory here: the phases need `hardshift create`'s inputs in the collector's directory." }
        } @else {
            h2 { "Phases" }
            ol.checks {
                @for c in &v.checks {
                    li class=(if c.met { "h-ok" } else { "h-pending" }) {
                        span.mark { (if c.met { "met" } else { "not yet" }) }
                        " " (c.title)
                        @if let Some(t) = met_at.get(c.id) { " " time { (clock(*t)) " UTC" } }
                        @if !c.met && !c.evidence.is_empty() {
                            ul { @for e in c.evidence.iter().take(8) { li { (e) } } }
                        }
                    }
                }
            }
        }
        h2 { "Events" }
        (events_table(events))
    }
    .into_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ApiContact, NodeRow};
    use hardshift_proto::v1::{ComponentState, Health, NodeReport};

    #[test]
    fn node_text_is_escaped_everywhere() {
        let row = NodeRow {
            node: "<script>x</script>".into(),
            role: "worker".into(),
            boot_id: "b".into(),
            last_seq: 1,
            last_seen_ms: 0,
            reports: 1,
            dropped: 0,
            last: Some(NodeReport {
                components: vec![ComponentState {
                    name: "kubelet\"><img src=x onerror=alert(1)>".into(),
                    health: Health::Failing as i32,
                    state: "<b>".into(),
                    reason: "a & b".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        };
        let v = crate::view::build(&[row], None, &[], &ApiContact::default(), 0);
        let html = grid(&v) + &node(&v.nodes[0], &[]) + &log_links(&v.nodes[0].name, &["kubelet"], "worker");
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(html.contains("&lt;script&gt;x&lt;/script&gt;"));
        assert!(html.contains("/node/%3Cscript%3Ex%3C%2Fscript%3E"), "{html}");
        assert!(html.contains("a &amp; b"));
    }

    #[test]
    fn clock_and_ago() {
        assert_eq!(clock(3_723_000), "01:02:03");
        assert_eq!(ago(None), "never");
        assert_eq!(ago(Some(59)), "59s ago");
        assert_eq!(ago(Some(600)), "10m ago");
    }
}
