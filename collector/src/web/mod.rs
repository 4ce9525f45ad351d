//! The dashboard and `/metrics`, served by the collector beside the agents' gRPC port.
//!
//! One task rebuilds the `View` from the store when a commit lands (at most four times a
//! second, and every 2 s for the clocks); every open page holds a receiver of that snapshot, so
//! five dashboards cost what one does. Loopback is plain HTTP with a Host check (a web page
//! elsewhere cannot rebind a name onto it); any other address is HTTPS and requires the bundle's
//! admin client certificate. Pages are read-only; logs go through the agents' bounded debug
//! requests, scrubbed of secrets.

mod front;
pub use front::MAX_CONNECTIONS as DASHBOARD_CONNECTIONS;
mod node;
pub mod pages;
mod shared;
mod snapshot;
mod stream;

use node::{node_events, node_logs, node_page, window_changes};
pub use shared::Deps;
use shared::{Shared, Snapshot};
use snapshot::{grid_update, rebuild, refresh, Memory, MAX_REBUILD};
use stream::{sse, sse_named};

use crate::events;
use crate::listener;
use crate::metrics;
use crate::now_ms;
use crate::phase::Member;
use crate::store::Store;
use crate::view;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::StreamExt;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
use tower_http::compression::CompressionLayer;
use tower_http::set_header::SetResponseHeaderLayer;

const CSS: &str = include_str!("assets/app.css");
const JS: &str = include_str!("assets/app.js");
/// Recent reports read per node for the events shown.
const TIMELINE_REPORTS: usize = 20;
const TIMELINE_EVENTS: usize = 300;

/// Where and how the dashboard is served.
#[derive(Debug, Clone)]
pub struct Options {
    pub addr: SocketAddr,
    /// Required for an address other than loopback: the server's certificate, and the CA whose
    /// `system:masters` client certificates (the bundle's admin) may connect.
    pub tls: Option<Tls>,
    /// The bundle's nodes, in order: shown before they report, and the install's phases.
    pub inventory: Option<Vec<Member>>,
    /// The store, opened read-only-in-practice by the dashboard (its own connection).
    pub db: PathBuf,
    /// The bundle's own secrets: stripped by value from the logs the dashboard shows.
    pub secrets: Vec<String>,
    /// Its identity (labels of every series of /metrics) and certificates.
    pub bundle: metrics::Bundle,
    /// Connections the dashboard holds at most (`front::MAX_CONNECTIONS`, or less to fit the
    /// open-file limit beside the agents: `daemon::split_descriptors`).
    pub max_connections: usize,
}

#[derive(Debug, Clone)]
pub struct Tls {
    pub cert: String,
    pub key: String,
    pub client_ca: String,
}

/// Why the dashboard could not be served.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error(
        "--web {0}: not a loopback address, so the dashboard needs HTTPS with the admin client certificate, and no certificate was given"
    )]
    NeedsTls(SocketAddr),
    #[error("--web {addr}: {source} (another collector's dashboard? give --web another port, or --no-web)")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("dashboard store {path}: {message}")]
    Store { path: String, message: String },
    #[error("dashboard TLS: {0}")]
    Tls(#[from] crate::listener::TlsError),
    #[error("dashboard: {0}")]
    Serve(std::io::Error),
}

/// Refuse addresses that would serve the dashboard in the clear beyond this machine.
pub fn check(opts: &Options) -> Result<(), WebError> {
    if !opts.addr.ip().is_loopback() && opts.tls.is_none() {
        return Err(WebError::NeedsTls(opts.addr));
    }
    Ok(())
}

/// Bind the dashboard's address (port 0: any free port) and say where it is.
pub async fn bind(opts: &Options) -> Result<tokio::net::TcpListener, WebError> {
    check(opts)?;
    let bind_err = |source| WebError::Bind { addr: opts.addr, source };
    let tcp = tokio::net::TcpListener::bind(opts.addr).await.map_err(bind_err)?;
    let at = tcp.local_addr().map_err(bind_err)?;
    let scheme = if opts.tls.is_some() { "https" } else { "http" };
    tracing::info!(
        "dashboard on {scheme}://{at}/ and metrics on {scheme}://{at}/metrics{}",
        if opts.tls.is_some() {
            " (admin client certificate required)"
        } else {
            ""
        }
    );
    Ok(tcp)
}

/// Serve on `tcp` (from `bind`) until `stop` flips to true.
pub async fn serve(opts: Options, tcp: tokio::net::TcpListener, deps: Deps, stop: watch::Receiver<bool>) -> Result<(), WebError> {
    let store = Store::open(&opts.db).map_err(|e| WebError::Store {
        path: opts.db.display().to_string(),
        message: e.to_string(),
    })?;
    let empty = Arc::new(Snapshot {
        view: view::build(&[], None, &[], &Default::default(), now_ms()),
        head: String::new(),
        rows: vec![],
        tail: String::new(),
        met_at: BTreeMap::new(),
        grid_built: false,
        commits: 0,
    });
    let changed = deps.changed.clone();
    let shared = Arc::new(Shared {
        store: Mutex::new(store),
        inventory: opts.inventory.clone(),
        snap: watch::channel(empty).0,
        want_rebuild: tokio::sync::Notify::new(),
        deps,
        check_host: opts.tls.is_none(),
        scrubber: crate::scrub::Scrubber::with_values(opts.secrets.clone()),
        reports: crate::scrub::Scrubber::default(),
        bundle: opts.bundle.clone(),
    });
    rebuild(&shared, &mut Memory::default()).await;
    tokio::spawn(refresh(shared.clone(), changed, stop.clone()));
    let web_gate = shared.deps.web_gate.clone();
    let app = router(shared);
    let mut stop = stop;
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let tls = match opts.tls {
        None => None,
        Some(t) => {
            let mut cfg = listener::tls_config(&t.cert, &t.key, &t.client_ca)?;
            cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
            Some(Arc::new(cfg))
        }
    };
    let limits = front::limits(tls.is_some(), opts.max_connections);
    tokio::select! {
        _ = front::serve(tcp, tls, app, web_gate, limits) => Ok(()),
        _ = stopped => Ok(()),
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(grid_page))
        .route("/events/grid", get(grid_events))
        .route("/node/{name}", get(node_page))
        .route("/events/node/{name}", get(node_events))
        .route("/node/{name}/logs", get(node_logs))
        .route("/timeline", get(timeline_page))
        .route("/events/timeline", get(timeline_events))
        .route("/api/view.json", get(view_json))
        .route("/metrics", get(metrics_text))
        .route("/app.css", get(|| async { asset(CSS, "text/css; charset=utf-8") }))
        .route("/app.js", get(|| async { asset(JS, "text/javascript; charset=utf-8") }))
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        // On every answer, refusals included: no other site frames, sniffs or caches the pages.
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        // gzip when the client takes it: the grid of a thousand nodes is a megabyte of very
        // repetitive HTML, a twentieth of that compressed. Not the live streams (SSE), not small
        // answers.
        .layer(
            CompressionLayer::new().gzip(true).compress_when(
                SizeAbove::new(1400)
                    .and(NotForContentType::SSE)
                    .and(NotForContentType::GRPC)
                    .and(NotForContentType::IMAGES),
            ),
        )
        .with_state(shared)
}

fn asset(body: &'static str, ty: &'static str) -> Response {
    ([(header::CONTENT_TYPE, ty), (header::CACHE_CONTROL, "max-age=300")], body).into_response()
}

/// A Host header a browser sends only when it meant this machine: `localhost`, or an IP.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => return v6.split(']').next().is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok()),
        None => host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::Ipv4Addr>().is_ok()
}

/// Every response: the Host check (DNS rebinding), then headers that keep the pages inert
/// anywhere but here: no framing, no inline or foreign scripts, no caching of node data.
async fn guard(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    if s.check_host {
        let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        if !loopback_host(host) {
            return (
                StatusCode::MISDIRECTED_REQUEST,
                format!("Host {host:?} is not this machine's loopback: use http://127.0.0.1 or http://localhost\n"),
            )
                .into_response();
        }
    }
    // Another site's page may not make a node act (its logs are read by running journalctl on
    // it): a browser says where a request comes from (Sec-Fetch-Site, Origin).
    if let Some(why) = cross_site(req.headers()) {
        return (StatusCode::FORBIDDEN, format!("refused: {why}\n")).into_response();
    }
    next.run(req).await
}

/// Why a request comes from another site, if it does: `Sec-Fetch-Site` other than same-origin
/// or none (a typed URL, a bookmark), or an `Origin` whose host is not the one asked.
fn cross_site(h: &axum::http::HeaderMap) -> Option<String> {
    let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok());
    if let Some(site) = get("sec-fetch-site") {
        if site != "same-origin" && site != "none" {
            return Some(format!("a {site} request (Sec-Fetch-Site)"));
        }
    }
    if let Some(origin) = get("origin") {
        let host = get("host").unwrap_or("");
        let origin_host = origin.split_once("://").map(|(_, r)| r).unwrap_or(origin);
        if origin != "null" && origin_host != host {
            return Some(format!("a request from {origin} (Origin) for {host}"));
        }
        if origin == "null" {
            return Some("a request from an opaque origin".into());
        }
    }
    None
}

/// The snapshot with its grid: rendered now if nobody was watching (this receiver makes the
/// next rebuild render it; the notice makes that rebuild happen at once).
async fn with_grid(s: &Shared) -> Arc<Snapshot> {
    let mut rx = s.snap.subscribe();
    if !rx.borrow().grid_built {
        s.want_rebuild.notify_one();
        let _ = tokio::time::timeout(MAX_REBUILD * 2, rx.wait_for(|snap| snap.grid_built)).await;
    }
    let snap = rx.borrow().clone();
    snap
}

async fn grid_page(State(s): State<Arc<Shared>>) -> Response {
    let grid = with_grid(&s).await.grid();
    let page = pages::page("Nodes", "Nodes", "/events/grid", &grid, "");
    typed("text/html; charset=utf-8", page)
}

async fn grid_events(State(s): State<Arc<Shared>>) -> impl IntoResponse {
    let rx = s.snap.subscribe();
    s.want_rebuild.notify_one();
    sse_named(futures_util::stream::unfold(
        (WatchStream::new(rx), None::<Arc<Snapshot>>),
        |(mut w, mut last)| async move {
            loop {
                let now = w.next().await?;
                if !now.grid_built {
                    continue;
                }
                let update = grid_update(last.as_deref(), &now);
                last = Some(now);
                if let Some(u) = update {
                    return Some((u, (w, last)));
                }
            }
        },
    ))
}

/// `body` as `ty` (gzip, when the client takes it, is the CompressionLayer's).
fn typed(ty: &'static str, body: String) -> Response {
    ([(header::CONTENT_TYPE, ty)], body).into_response()
}

async fn timeline_html(s: &Arc<Shared>) -> String {
    let snap = snapshot::fresh(s).await;
    let s2 = s.clone();
    let names: Vec<String> = snap.view.nodes.iter().map(|n| n.name.clone()).collect();
    let events = tokio::task::spawn_blocking(move || {
        let Ok(st) = s2.store.lock() else { return vec![] };
        let mut all = Vec::new();
        for n in &names {
            if let Ok(r) = st.recent_reports(n, TIMELINE_REPORTS) {
                all.extend(window_changes(n, &s2.scrubbed(r), TIMELINE_REPORTS));
            }
        }
        for mut c in st.api_changes().unwrap_or_default() {
            c.change = s2.reports.scrub(&c.change);
            all.push(events::from_api(c));
        }
        all.sort_by_key(|e| e.time_ms);
        let cut = all.len().saturating_sub(TIMELINE_EVENTS);
        all.split_off(cut)
    })
    .await
    .unwrap_or_default();
    pages::timeline(&snap.view, &snap.met_at, &events)
}

async fn timeline_page(State(s): State<Arc<Shared>>) -> Html<String> {
    let body = timeline_html(&s).await;
    Html(pages::page("Install timeline", "Timeline", "/events/timeline", &body, ""))
}

async fn timeline_events(State(s): State<Arc<Shared>>) -> impl IntoResponse {
    let rx = s.snap.subscribe();
    sse(futures_util::stream::unfold(
        (WatchStream::new(rx), s, String::new()),
        |(mut w, s, mut last)| async move {
            loop {
                w.next().await?;
                let html = timeline_html(&s).await;
                // Reading every node's recent reports is the costly page: at most every 2 s.
                tokio::time::sleep(MAX_REBUILD).await;
                if html != last {
                    last = html.clone();
                    return Some((html, (w, s, last)));
                }
            }
        },
    ))
}

async fn view_json(State(s): State<Arc<Shared>>) -> Response {
    let snap = snapshot::fresh(&s).await;
    // The view is built from scrubbed reports; the API's words in it are scrubbed here too.
    let json = serde_json::to_value(&snap.view).map(|mut v| {
        s.reports.json(&mut v);
        v.to_string()
    });
    match json {
        Ok(j) => typed("application/json", j),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// OpenMetrics when the scraper asks for it (Prometheus does), else the classic text format.
async fn metrics_text(State(s): State<Arc<Shared>>, headers: axum::http::HeaderMap) -> Response {
    let open = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    let snap = snapshot::fresh(&s).await;
    // Every reason, at 0 until it happens: a counter that appears at its first increment hides
    // that increment from rate().
    let every = |gate: &listener::Gate| {
        let seen = gate.refusals();
        listener::Refusal::ALL
            .iter()
            .map(|k| (k.label(), seen.get(k).copied().unwrap_or(0)))
            .collect()
    };
    let live = metrics::Live {
        connected_agents: s.deps.agents.connected(),
        open_connections: s.deps.gate.open(),
        refused: every(&s.deps.gate),
        dashboard_open: s.deps.web_gate.open(),
        dashboard_refused: every(&s.deps.web_gate),
    };
    let text = metrics::exposition(&s.deps.metrics, &snap.view, &live, &s.bundle);
    if open {
        typed("application/openmetrics-text; version=1.0.0; charset=utf-8", text)
    } else {
        typed("text/plain; version=0.0.4; charset=utf-8", metrics::classic(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_from_another_site_are_named() {
        let h = |pairs: &[(&'static str, &'static str)]| {
            let mut m = axum::http::HeaderMap::new();
            for (k, v) in pairs {
                m.insert(*k, HeaderValue::from_static(v));
            }
            m
        };
        assert!(cross_site(&h(&[("host", "127.0.0.1:9000")])).is_none(), "curl, a script");
        assert!(cross_site(&h(&[("sec-fetch-site", "same-origin")])).is_none());
        assert!(cross_site(&h(&[("sec-fetch-site", "none")])).is_none(), "a typed URL");
        assert!(cross_site(&h(&[("sec-fetch-site", "cross-site")])).is_some());
        assert!(cross_site(&h(&[("sec-fetch-site", "same-site")])).is_some());
        assert!(cross_site(&h(&[("host", "127.0.0.1:9000"), ("origin", "http://127.0.0.1:9000")])).is_none());
        assert!(cross_site(&h(&[("host", "127.0.0.1:9000"), ("origin", "http://evil.example")])).is_some());
        assert!(cross_site(&h(&[("host", "127.0.0.1:9000"), ("origin", "null")])).is_some());
    }

    #[test]
    fn only_loopback_hosts_pass_the_guard() {
        for ok in ["localhost", "localhost:9444", "127.0.0.1:9444", "[::1]:9444", "LOCALHOST"] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in ["evil.example.com", "evil.example.com:9444", "", "[evil]:1", "127.0.0.1.nip.io"] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn a_public_address_needs_tls() {
        let o = Options {
            addr: "0.0.0.0:9444".parse().unwrap(),
            tls: None,
            inventory: None,
            db: "x".into(),
            secrets: vec![],
            bundle: Default::default(),
            max_connections: DASHBOARD_CONNECTIONS,
        };
        assert!(check(&o).unwrap_err().to_string().contains("admin client certificate"));
        assert!(check(&Options {
            addr: "127.0.0.1:9444".parse().unwrap(),
            ..o
        })
        .is_ok());
    }
}
