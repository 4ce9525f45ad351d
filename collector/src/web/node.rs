//! A node's page: its fragment with recent events, the events as they come, and its logs asked of
//! its agent, scrubbed before they leave.

use crate::events::{self, Event};
use crate::web::pages;
use crate::web::shared::Shared;
use crate::web::stream::sse;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use futures_util::StreamExt;
use hardshift_proto::v1::debug_request::Kind;
use hardshift_proto::v1::{ContainerLogRequest, DebugRequest, EtcdMembersRequest, JournalRequest};
use std::sync::Arc;
use tokio_stream::wrappers::WatchStream;

const NODE_EVENTS_REPORTS: usize = 200;
/// The boot steps a node's page shows, at most (the newest).
const NODE_BOOT_EVENTS: usize = 100;

/// The node's fragment, with its recent events read from the store.
pub(super) async fn node_html(s: &Arc<Shared>, name: &str) -> Option<String> {
    let snap = super::snapshot::fresh(s).await;
    let n = snap.view.node(name)?.clone();
    let (s2, node) = (s.clone(), name.to_string());
    let events = tokio::task::spawn_blocking(move || {
        let st = s2.store.lock().ok()?;
        let reports = s2.scrubbed(st.recent_reports(&node, NODE_EVENTS_REPORTS).ok()?);
        let mut e = window_changes(&node, &reports, NODE_EVENTS_REPORTS);
        // What the helper saw of its boots (`lab serve`), newest first up to a bound, on the
        // same timeline: for a node that never reported, all there is.
        let boot = st.boot_events(Some(&node)).unwrap_or_default();
        e.extend(boot.into_iter().rev().take(NODE_BOOT_EVENTS).map(events::from_boot));
        e.sort_by_key(|e| e.time_ms);
        Some(e)
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_default();
    Some(pages::node(&n, &events))
}

/// Changes within a window of recent reports. When the window is full, its first report is not
/// the boot's first, so "(first report)" there is not news and is dropped.
pub(super) fn window_changes(node: &str, reports: &[(String, hardshift_proto::v1::NodeReport)], limit: usize) -> Vec<Event> {
    let mut e = events::changes(node, reports);
    if reports.len() >= limit {
        e.retain(|e| e.from != "(first report)");
    }
    e
}

pub(super) async fn node_page(State(s): State<Arc<Shared>>, UrlPath(name): UrlPath<String>) -> Response {
    let Some(body) = node_html(&s, &name).await else {
        return (
            StatusCode::NOT_FOUND,
            format!("no node {name:?} has reported or is in the bundle\n"),
        )
            .into_response();
    };
    let role = s.snap.borrow().view.node(&name).map(|n| n.role.clone()).unwrap_or_default();
    let live = format!("/events/node/{}", pages::url_segment(&name));
    let logs = pages::log_links(&name, &hardshift_proto::DEBUG_UNITS, &role);
    Html(pages::page(&name, "", &live, &body, &logs)).into_response()
}

pub(super) async fn node_events(State(s): State<Arc<Shared>>, UrlPath(name): UrlPath<String>) -> impl IntoResponse {
    let rx = s.snap.subscribe();
    sse(futures_util::stream::unfold(
        (WatchStream::new(rx), s, name, String::new()),
        |(mut w, s, name, mut last)| async move {
            loop {
                w.next().await?;
                let html = node_html(&s, &name).await.unwrap_or_default();
                if html != last {
                    last = html.clone();
                    return Some((html, (w, s, name, last)));
                }
            }
        },
    ))
}

#[derive(serde::Deserialize)]
pub(super) struct LogQuery {
    unit: Option<String>,
    container: Option<String>,
    etcd: Option<String>,
    lines: Option<u32>,
}

/// One bounded, read-only debug request to the node, through its agent's stream.
pub(super) async fn node_logs(State(s): State<Arc<Shared>>, UrlPath(name): UrlPath<String>, Query(q): Query<LogQuery>) -> Response {
    let lines = q.lines.unwrap_or(200).clamp(1, 2000);
    let kind = match (q.unit, q.container, q.etcd.as_deref()) {
        (Some(u), None, None) if hardshift_proto::DEBUG_UNITS.contains(&u.as_str()) => Kind::Journal(JournalRequest { unit: u, lines }),
        (Some(u), None, None) => {
            return (
                StatusCode::BAD_REQUEST,
                format!(
                    "unit {u:?} is not one the agent reads; one of: {}\n",
                    hardshift_proto::DEBUG_UNITS.join(", ")
                ),
            )
                .into_response()
        }
        (None, Some(c), None) => Kind::ContainerLog(ContainerLogRequest { container: c, lines }),
        (None, None, Some("members")) => Kind::EtcdMembers(EtcdMembersRequest {}),
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                "ask for one of ?unit=UNIT, ?container=ID or ?etcd=members\n",
            )
                .into_response()
        }
    };
    let text = match s.deps.agents.ask(&name, DebugRequest { id: 0, kind: Some(kind) }).await {
        Err(e) => format!("{name}: {}\n", e.message()),
        Ok(r) => {
            let mut t = r.lines.join("\n");
            t.push('\n');
            if r.truncated {
                t.push_str("(cut at the agent's bound)\n");
            }
            if !r.error.is_empty() {
                t.push_str(&format!("{name}: {}\n", r.error));
            }
            t
        }
    };
    // Journals can carry tokens and keys a unit printed: never past this point.
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], s.scrubber.scrub(&text)).into_response()
}
