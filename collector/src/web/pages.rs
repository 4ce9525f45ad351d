//! The dashboard's HTML, rendered from a `View`. Pure: every string that came from a node or
//! the API is escaped here, and the live regions are fragments the server-sent events replace.

use crate::events::Event;
use crate::view::{NodeView, View};
use std::collections::BTreeMap;
use std::fmt::Write;

/// `s` safe inside HTML text and double-quoted attributes.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

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

/// The whole page around `body`; `live` is the URL of the stream that replaces `#live`.
pub fn page(title: &str, nav: &str, live: &str, body: &str, after: &str) -> String {
    let link = |href: &str, name: &str| {
        let cur = if name == nav { " aria-current=\"page\"" } else { "" };
        format!("<a href=\"{href}\"{cur}>{name}</a>")
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{t} · hardshift</title><link rel=\"stylesheet\" href=\"/app.css\"><script src=\"/app.js\" defer></script></head>\
<body><header><strong>hardshift</strong><nav aria-label=\"pages\">{a}{b}{c}</nav>\
<span id=\"conn\" role=\"status\" aria-live=\"polite\"></span></header>\
<main><h1>{t}</h1><div id=\"live\" data-live=\"{live}\" aria-live=\"off\">{body}</div>{after}</main></body></html>\n",
        t = esc(title),
        a = link("/", "Nodes"),
        b = link("/timeline", "Timeline"),
        c = link("/metrics", "Metrics"),
        live = esc(live),
    )
}

fn phase_line(v: &View) -> String {
    let (done, total) = v.progress();
    if total == 0 {
        return String::new();
    }
    match v.checks.iter().find(|c| !c.met) {
        None => format!("<p class=\"phase h-ok\">Install complete ({done}/{total} checks)</p>"),
        Some(c) => format!(
            "<p class=\"phase\">Phase {done}/{total}: waiting for <strong>{}</strong>{}</p>",
            esc(c.title),
            c.evidence.first().map(|e| format!(": {}", esc(e))).unwrap_or_default()
        ),
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
/// changes, pages get the whole grid again; otherwise only the rows that changed.
pub fn grid_head(v: &View) -> String {
    let mut o = phase_line(v);
    o.push_str("<table class=\"grid\"><caption>Nodes and their components (updated live)</caption><thead><tr><th scope=\"col\">Node</th><th scope=\"col\">Role</th><th scope=\"col\">Phase</th><th scope=\"col\">Seen</th>");
    for c in &v.columns {
        let _ = write!(o, "<th scope=\"col\">{}</th>", esc(c));
    }
    o.push_str("<th scope=\"col\">Root cause</th></tr></thead><tbody>");
    o
}

pub fn grid_tail(v: &View) -> String {
    let mut o = String::from("</tbody></table>");
    if v.nodes.is_empty() {
        o.push_str("<p>No node has reported yet, and no bundle inventory was found.</p>");
    }
    o
}

/// One node's row; its `id` is what a live update replaces.
pub fn grid_row(v: &View, n: &NodeView) -> String {
    let mut o = String::with_capacity(256 + 128 * v.columns.len());
    let _ = write!(
        o,
        "<tr id=\"node-{id}\" data-node=\"{name}\" data-health=\"{h}\"><th scope=\"row\" class=\"h-{h}\"><a href=\"/node/{id}\">{name}</a></th><td>{role}</td><td>{phase}</td><td>{seen}</td>",
        id = url_segment(&n.name),
        name = esc(&n.name),
        h = n.health,
        role = esc(&n.role),
        phase = esc(&n.phase),
        seen = seen_live(n.seen_ago_s),
    );
    for col in &v.columns {
        match n.components.iter().find(|c| &c.name == col) {
            None => o.push_str("<td class=\"h-none\">–</td>"),
            Some(c) => {
                let detail = if c.reason.is_empty() { &c.state } else { &c.reason };
                let _ = write!(
                    o,
                    "<td class=\"h-{h}\" data-component=\"{name}\" data-health=\"{h}\" title=\"{d}\" aria-label=\"{name}: {h}, {s}\">{h}<small>{s}</small></td>",
                    h = c.health,
                    name = esc(&c.name),
                    d = esc(detail),
                    s = esc(&c.state),
                );
            }
        }
    }
    match n.causes.first() {
        None => o.push_str("<td class=\"cause\">–</td>"),
        Some(c) => {
            let _ = write!(
                o,
                "<td class=\"cause sev-{sev:?}\"><abbr title=\"{fix}\">{id}</abbr> {t}</td>",
                sev = c.severity,
                fix = esc(&c.fix),
                id = c.id,
                t = esc(&c.title),
            );
        }
    }
    o.push_str("</tr>");
    o
}

/// One node: its components with details, its diagnosis, pods not running, recent events.
pub fn node(n: &NodeView, events: &[Event]) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<p class=\"summary h-{h}\">{role}, {phase}, last report {seen}, {r} reports stored, {l} lost{boot}</p>",
        h = n.health,
        role = esc(&n.role),
        phase = esc(&n.phase),
        seen = ago(n.seen_ago_s),
        r = n.reports,
        l = n.lost,
        boot = if n.boot_id.is_empty() {
            String::new()
        } else {
            format!(", boot {}", esc(&n.boot_id))
        },
    );
    if !n.causes.is_empty() {
        o.push_str("<h2>Diagnosis</h2><ol class=\"causes\">");
        for c in &n.causes {
            let _ = write!(
                o,
                "<li class=\"sev-{sev:?}\"><strong>{id} {t}</strong><ul>",
                sev = c.severity,
                id = c.id,
                t = esc(&c.title)
            );
            for e in &c.evidence {
                let _ = write!(o, "<li>{}</li>", esc(e));
            }
            let _ = write!(o, "</ul><p>Fix: {}</p></li>", esc(&c.fix));
        }
        o.push_str("</ol>");
    }
    o.push_str("<h2>Components</h2><table class=\"comps\"><thead><tr><th scope=\"col\">Component</th><th scope=\"col\">Health</th><th scope=\"col\">State</th><th scope=\"col\">Reason</th><th scope=\"col\">Details</th></tr></thead><tbody>");
    for c in &n.components {
        let details: Vec<String> = c.details.iter().map(|(k, v)| format!("{}={}", esc(k), esc(v))).collect();
        let _ = write!(
            o,
            "<tr data-component=\"{name}\"><th scope=\"row\">{name}</th><td class=\"h-{h}\">{h}</td><td>{s}</td><td>{r}</td><td class=\"details\">{d}</td></tr>",
            name = esc(&c.name),
            h = c.health,
            s = esc(&c.state),
            r = esc(&c.reason),
            d = details.join("<br>"),
        );
    }
    o.push_str("</tbody></table>");
    if !n.pods_not_running.is_empty() {
        o.push_str("<h2>Pods not ready</h2><ul>");
        for p in &n.pods_not_running {
            let _ = write!(o, "<li>{}</li>", esc(p));
        }
        o.push_str("</ul>");
    }
    o.push_str("<h2>Recent events</h2>");
    o.push_str(&events_table(events));
    o
}

fn events_table(events: &[Event]) -> String {
    if events.is_empty() {
        return "<p>None yet.</p>".into();
    }
    let mut o = String::from("<table class=\"events\"><thead><tr><th scope=\"col\">Time (UTC)</th><th scope=\"col\">Node</th><th scope=\"col\">What</th><th scope=\"col\">Change</th><th scope=\"col\">Why</th></tr></thead><tbody>");
    for e in events.iter().rev() {
        let change = if e.from.is_empty() {
            esc(&e.to)
        } else {
            format!("{} → {}", esc(&e.from), esc(&e.to))
        };
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{change}</td><td>{}</td></tr>",
            clock(e.time_ms),
            esc(&e.node),
            esc(&e.component),
            esc(&e.reason)
        );
    }
    o.push_str("</tbody></table>");
    o
}

/// The node page's static part: the log buttons, outside the live region so an update
/// does not wipe what was fetched. Each is a plain link too (works without JavaScript).
pub fn log_links(node: &str, units: &[&str], role: &str) -> String {
    let mut o = String::from("<section aria-labelledby=\"logs-h\"><h2 id=\"logs-h\">Logs</h2><p class=\"logs\">");
    let mut items: Vec<(String, String)> = units.iter().map(|u| (format!("unit={u}"), format!("{u} journal"))).collect();
    if role != "worker" {
        items.push(("etcd=members".into(), "etcd members".into()));
    }
    for (q, label) in items {
        let _ = write!(
            o,
            "<a class=\"fetch\" href=\"/node/{}/logs?{q}\">{}</a> ",
            url_segment(node),
            esc(&label)
        );
    }
    o.push_str("</p><pre id=\"logs\" tabindex=\"0\" aria-label=\"fetched log\"></pre></section>");
    o
}

/// The install timeline: the checks in order (with when this collector first saw each met),
/// then every change, newest first.
pub fn timeline(v: &View, met_at: &BTreeMap<&'static str, i64>, events: &[Event]) -> String {
    let mut o = phase_line(v);
    if v.checks.is_empty() {
        o.push_str("<p>No bundle inventory here: the phases need `hardshift create`'s inputs in the collector's directory.</p>");
    } else {
        o.push_str("<h2>Phases</h2><ol class=\"checks\">");
        for c in &v.checks {
            let when = met_at
                .get(c.id)
                .map(|t| format!(" <time>{} UTC</time>", clock(*t)))
                .unwrap_or_default();
            let _ = write!(
                o,
                "<li class=\"{cls}\"><span class=\"mark\">{mark}</span> {t}{when}",
                cls = if c.met { "h-ok" } else { "h-pending" },
                mark = if c.met { "met" } else { "not yet" },
                t = esc(c.title),
            );
            if !c.met && !c.evidence.is_empty() {
                o.push_str("<ul>");
                for e in c.evidence.iter().take(8) {
                    let _ = write!(o, "<li>{}</li>", esc(e));
                }
                o.push_str("</ul>");
            }
            o.push_str("</li>");
        }
        o.push_str("</ol>");
    }
    o.push_str("<h2>Events</h2>");
    o.push_str(&events_table(events));
    o
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
