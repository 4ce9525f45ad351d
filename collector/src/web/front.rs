//! The dashboard's front door, plain HTTP on loopback or HTTPS beyond it, under the same kind of
//! caps and deadlines as the agents' listener (`listener::Gate`): a bounded number of connections
//! in total and per source address (a connection over the cap is closed at once, so a flood of
//! idle sockets holds no file descriptor of ours), a deadline on the TLS handshake, and a deadline
//! on each request's headers (an idle socket is closed). Refusals are counted and logged,
//! rate-limited, under their reason. Without it, 20,000 idle loopback connections used every file
//! descriptor and locked the agents' port out.

use crate::listener::{Gate, Limits, Refusal};
use axum::Router;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls;

/// The dashboard's limits: a dashboard has a few viewers, each with a page and its live update.
pub fn limits() -> Limits {
    Limits {
        handshake_timeout: Duration::from_secs(10),
        // Here: from the connection (or the end of the last response) to a request's headers.
        hello_timeout: Duration::from_secs(10),
        max_connections: 256,
        max_per_address: 128,
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

async fn http<I>(io: I, app: Router, limits: &Limits) -> Result<(), String>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper_util::service::TowerToHyperService::new(app);
    // HTTP/1.1 only: the dashboard offers nothing else, and sniffing for HTTP/2 would wait on
    // a silent socket before any deadline runs.
    let mut b = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new()).http1_only();
    b.http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.hello_timeout);
    b.serve_connection(hyper_util::rt::TokioIo::new(io), svc)
        .await
        .map_err(|e| e.to_string())
}

/// Serve `app` on `tcp` (HTTPS for the admin only when `tls` is given) until the task is dropped.
pub async fn serve(tcp: tokio::net::TcpListener, tls: Option<Arc<rustls::ServerConfig>>, app: Router, gate: Arc<Gate>, limits: Limits) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut accept_errors = 0u64;
    loop {
        let (sock, peer) = match tcp.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: said once a minute at most, never spun on.
                if accept_errors.is_multiple_of(600) {
                    tracing::error!("dashboard: accept: {e} ({accept_errors} such errors before)");
                }
                accept_errors += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Over a cap, the socket is closed at once (dropped here): it holds nothing of ours.
        let Some(slot) = gate.admit_or_refuse(peer, &limits) else {
            continue;
        };
        let (acceptor, app, gate, limits) = (acceptor.clone(), app.clone(), gate.clone(), limits.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let served = match acceptor {
                None => http(sock, app, &limits).await,
                Some(acceptor) => {
                    let tls = match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(sock)).await {
                        Ok(Ok(t)) => t,
                        Ok(Err(e)) => return gate.refuse(peer, Refusal::HandshakeFailed, &format!("TLS: {e}")),
                        Err(_) => {
                            let d = format!("no TLS handshake within {:?}", limits.handshake_timeout);
                            return gate.refuse(peer, Refusal::HandshakeTimeout, &d);
                        }
                    };
                    let admin = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .is_some_and(|c| is_admin(c));
                    if !admin {
                        let d = "client certificate is not the admin's (O=system:masters)";
                        return gate.refuse(peer, Refusal::HandshakeFailed, d);
                    }
                    http(tls, app, &limits).await
                }
            };
            if let Err(e) = served {
                if e.contains("timeout") {
                    let d = format!("no request within {:?}", limits.hello_timeout);
                    gate.refuse(peer, Refusal::NoHello, &d);
                }
            }
        });
    }
}
