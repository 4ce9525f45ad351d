//! The dashboard beyond loopback: HTTPS, and only for the bundle's admin. Each connection is
//! handshaken in its own task and bounded in number and time.

use axum::Router;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// HTTPS connections open at once (non-loopback only; each needs an admin certificate).
const MAX_TLS_CONNECTIONS: usize = 256;

/// The client certificate's subject names `O=system:masters`: the bundle's admin.
fn is_admin(der: &[u8]) -> bool {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return false;
    };
    let admin = cert.subject().iter_organization().any(|o| o.as_str() == Ok("system:masters"));
    admin
}

/// HTTPS: each connection is handshaken in its own task (a slow client holds only itself),
/// must present an admin certificate, and then is served HTTP/1.1.
pub(super) async fn serve(tcp: tokio::net::TcpListener, cfg: Arc<tokio_rustls::rustls::ServerConfig>, app: Router) {
    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_TLS_CONNECTIONS));
    let refused: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    loop {
        let Ok((sock, peer)) = tcp.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let (acceptor, app, refused) = (acceptor.clone(), app.clone(), refused.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let tls = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(sock)).await {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => return note_refusal(&refused, peer, &format!("TLS: {e}")),
                Err(_) => return note_refusal(&refused, peer, "no TLS handshake within 10s"),
            };
            let admin = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .is_some_and(|c| is_admin(c));
            if !admin {
                return note_refusal(&refused, peer, "client certificate is not the admin's (O=system:masters)");
            }
            let svc = hyper_util::service::TowerToHyperService::new(app);
            let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                .await;
        });
    }
}

/// Log a refused dashboard connection, the first few of each reason only.
fn note_refusal(seen: &Mutex<HashMap<String, u64>>, peer: SocketAddr, why: &str) {
    let Ok(mut m) = seen.lock() else { return };
    let n = m.entry(why.to_string()).or_default();
    *n += 1;
    if *n <= 5 {
        tracing::warn!(%peer, "dashboard: refused {peer}: {why}");
    }
}
