//! The dashboard's front door, plain HTTP on loopback or HTTPS beyond it, under the same kind of
//! caps and deadlines as the agents' listener (`listener::Gate`): a bounded number of connections
//! in total and per source address (a connection over the cap is closed at once, so a flood of
//! idle sockets holds no file descriptor of ours), a deadline on the TLS handshake, and a deadline
//! on each request's headers (an idle socket is closed). Refusals are counted and logged,
//! rate-limited, under their reason. Without it, 20,000 idle loopback connections used every file
//! descriptor and locked the agents' port out.
//!
//! Full, it closes the oldest idle connection (then the oldest live stream) for a newcomer rather
//! than refuse it, keeps places for the admin's authenticated sessions that connections which
//! never authenticate cannot take, and bounds the live streams of one address: a flood of live
//! updates or of idle sockets cannot keep a viewer out.

use crate::listener::{front_door, Activity, Admitted, Gate, Limits, Refusal, Tag};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls;

/// The dashboard's connections at most, where the open-file limit leaves room for them.
pub const MAX_CONNECTIONS: usize = 256;

/// The dashboard's limits: a dashboard has a few viewers, each with a page and its live update.
/// Over HTTPS (`tls`) the admin authenticates, and a share of the places is kept for that.
/// `max`: its connections at most (fewer under a low open-file limit); the shares scale with it.
pub fn limits(tls: bool, max: usize) -> Limits {
    let max = max.max(4);
    Limits {
        handshake_timeout: Duration::from_secs(10),
        // Here: from the connection (or the end of the last response) to a request's headers.
        hello_timeout: Duration::from_secs(10),
        max_connections: max,
        max_per_address: (max / 2).max(1),
        reserved_for_authenticated: if tls { (max / 8).max(1) } else { 0 },
        shed_oldest: true,
        // A browser opens a live update per tab; more than this from one address is a flood.
        max_streams_per_address: 8,
    }
}

/// The client certificate's subject names `O=system:masters`: the bundle's admin.
fn is_admin(der: &[u8]) -> bool {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return false;
    };
    let admin = cert.subject().iter_organization().any(|o| o.as_str() == Ok("system:masters"));
    admin
}

/// Each request says what its connection does: answering (never shed), then idle, or a live
/// stream when the answer is one (shed after the idle ones, and capped per address).
async fn track(tag: Tag, limits: Limits, req: Request, next: Next) -> Response {
    tag.set(Activity::Busy, &limits);
    let res = next.run(req).await;
    let stream = res
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
    tag.set(if stream { Activity::Stream } else { Activity::Idle }, &limits);
    res
}

async fn http<I>(io: I, app: Router, limits: &Limits, tag: Tag) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let l = limits.clone();
    let app = app.layer(axum::middleware::from_fn(move |req: Request, next: Next| {
        track(tag.clone(), l.clone(), req, next)
    }));
    let svc = hyper_util::service::TowerToHyperService::new(app);
    // HTTP/1.1 only: the dashboard offers nothing else, and sniffing for HTTP/2 would wait on
    // a silent socket before any deadline runs.
    let mut b = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new()).http1_only();
    b.http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.hello_timeout);
    b.serve_connection(hyper_util::rt::TokioIo::new(io), svc).await
}

/// Serve `app` on `tcp` (HTTPS for the admin only when `tls` is given) until the task is dropped,
/// through the collector's one front door (`listener::front_door`).
pub async fn serve(tcp: tokio::net::TcpListener, tls: Option<Arc<rustls::ServerConfig>>, app: Router, gate: Arc<Gate>, limits: Limits) {
    let https = tls.is_some();
    let (door_gate, door_limits) = (gate.clone(), limits.clone());
    front_door(tcp, tls, door_gate, door_limits, std::future::pending(), move |a: Admitted| {
        let (app, gate, limits) = (app.clone(), gate.clone(), limits.clone());
        async move {
            let slot = a.slot;
            if https {
                if !a.cert.as_deref().is_some_and(is_admin) {
                    let d = "client certificate is not the admin's (O=system:masters)";
                    return gate.refuse(a.peer, Refusal::HandshakeFailed, d);
                }
                slot.authenticate();
            }
            tokio::select! {
                r = http(a.io, app, &limits, slot.tag()) => {
                    if let Err(e) = r {
                        // hyper's header-read deadline: the client connected and said nothing.
                        if e.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_timeout) {
                            let d = format!("no request within {:?}", limits.hello_timeout);
                            gate.refuse(a.peer, Refusal::NoHello, &d);
                        }
                    }
                }
                // Closed to make room: dropping the connection closes its socket.
                _ = slot.shed() => {}
            }
        }
    })
    .await
}
