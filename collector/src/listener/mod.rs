//! The agents' listener, owned here rather than left to tonic so that a flood cannot lock real
//! agents out: connection caps in total and per source address, a deadline on the TLS handshake
//! (each handshake in its own task, so idle sockets do not queue the others), a deadline on the
//! Hello once TLS is up, and every refusal logged with its reason (rate-limited) and counted.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::Connected;

mod gate;

pub use gate::*;

/// What a handler learns about its connection: the peer, its verified certificate, and the flag
/// its Hello sets to lift the Hello deadline.
#[derive(Clone, Debug)]
pub struct ConnInfo {
    pub peer: SocketAddr,
    /// The client's leaf certificate (DER), verified against the agent CA by rustls.
    pub cert: Option<Vec<u8>>,
    pub hello: Arc<AtomicBool>,
}

/// A TLS connection under the caps and the Hello deadline.
pub struct Conn {
    io: Stream,
    info: ConnInfo,
    hello_deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    gate: Arc<Gate>,
    _slot: Slot,
}

impl Connected for Conn {
    type ConnectInfo = ConnInfo;
    fn connect_info(&self) -> ConnInfo {
        self.info.clone()
    }
}

impl AsyncRead for Conn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        // hyper always has a read pending, so this is polled when the deadline's timer fires.
        if let Some(deadline) = this.hello_deadline.as_mut() {
            if this.info.hello.load(Ordering::Acquire) {
                this.hello_deadline = None;
            } else if deadline.as_mut().poll(cx).is_ready() {
                this.hello_deadline = None;
                this.gate
                    .refuse(this.info.peer, Refusal::NoHello, "no Hello after the TLS handshake; closed");
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "no Hello")));
            }
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// What is wrong with the TLS material the server was given.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("client CA: {0}")]
    ClientCa(String),
    #[error("server certificate: {0}")]
    Certificate(String),
    #[error("server key: {0}")]
    Key(String),
    #[error("{0}")]
    Config(#[from] rustls::Error),
}

/// The server's TLS: its certificate, and client certificates required from `client_ca`.
pub fn tls_config(cert_pem: &str, key_pem: &str, client_ca_pem: &str) -> Result<rustls::ServerConfig, TlsError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = hardshift_crypto::provider();
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        roots
            .add(c.map_err(|e| TlsError::ClientCa(e.to_string()))?)
            .map_err(|e| TlsError::ClientCa(e.to_string()))?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsError::ClientCa(e.to_string()))?;
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Certificate(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| TlsError::Key(e.to_string()))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(cfg)
}

/// A connection as a front door admits it: plain TCP (the dashboard on loopback), or TLS.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// A connection past a front door: its stream, the peer, the client's certificate (DER, verified
/// by rustls) when TLS asked for one, and its place under the caps (released on drop).
pub struct Admitted {
    pub io: Stream,
    pub peer: SocketAddr,
    pub cert: Option<Vec<u8>>,
    pub slot: Slot,
}

/// Descriptors a door may hold beyond its cap: sockets accepted and not yet closed (refused over
/// a cap, or shed for a newer one). Counted in the daemon's base reserve (`daemon::BASE_FDS`).
pub const ACCEPT_SLACK: usize = 16;

/// The collector's one front door, for the agents' gRPC and for the dashboard: accept on
/// `listener` until `stop`; over a cap (`gate`, `limits`) a socket is closed at once, holding
/// nothing of ours; with `tls`, the handshake runs in its own task under its deadline; every
/// refusal is counted and logged under its reason. Each admitted connection goes to `serve`, on
/// that task.
pub async fn front_door<F, Fut>(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    gate: Arc<Gate>,
    limits: Limits,
    stop: impl Future<Output = ()>,
    serve: F,
) where
    F: Fn(Admitted) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let acceptor = tls.map(TlsAcceptor::from);
    let mut accept_errors = 0u64;
    // Each accepted socket holds a permit until it is closed: a connection refused, or shed for
    // a newer one, closes a moment after the newcomer is accepted, and a flood accepting faster
    // than those close would otherwise run the process out of descriptors (EMFILE on every
    // door). With the permits, this door holds at most its cap and ACCEPT_SLACK descriptors.
    let descriptors = Arc::new(tokio::sync::Semaphore::new(limits.max_connections + ACCEPT_SLACK));
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            _ = &mut stop => return,
            p = descriptors.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (tcp, peer) = tokio::select! {
            _ = &mut stop => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors and the like: said once a minute at most, and
                    // waited out rather than spun on.
                    if accept_errors.is_multiple_of(600) {
                        tracing::error!("{}accept: {e} ({accept_errors} such errors before)", gate.prefix());
                    }
                    accept_errors += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Some(mut slot) = gate.admit_or_refuse(peer, &limits) else {
            drop(tcp);
            drop(permit);
            continue;
        };
        slot.hold(permit);
        let (acceptor, gate, limits, serve) = (acceptor.clone(), gate.clone(), limits.clone(), serve.clone());
        tokio::spawn(async move {
            let (io, cert) = match acceptor {
                None => (Stream::Plain(tcp), None),
                Some(acceptor) => match tokio::select! {
                    r = tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)) => r,
                    // Closed to make room for a newer connection: still handshaking, so idle.
                    _ = slot.shed() => return,
                } {
                    Err(_) => {
                        let d = format!("no TLS handshake within {:?}", limits.handshake_timeout);
                        return gate.refuse(peer, Refusal::HandshakeTimeout, &d);
                    }
                    Ok(Err(e)) => return gate.refuse(peer, Refusal::HandshakeFailed, &format!("TLS: {e}")),
                    Ok(Ok(io)) => {
                        let cert = io.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| c.to_vec());
                        (Stream::Tls(Box::new(io)), cert)
                    }
                },
            };
            serve(Admitted { io, peer, cert, slot }).await
        });
    }
}

/// The agents' door: TLS with a client certificate, then the Hello deadline; each connection
/// goes to `out` (tonic's incoming stream) until `stop`.
pub async fn accept(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    limits: Limits,
    gate: Arc<Gate>,
    out: mpsc::Sender<io::Result<Conn>>,
    stop: impl Future<Output = ()>,
) {
    let hello_timeout = limits.hello_timeout;
    let door_gate = gate.clone();
    front_door(listener, Some(tls), door_gate, limits, stop, move |a: Admitted| {
        let (out, gate) = (out.clone(), gate.clone());
        async move {
            let conn = Conn {
                io: a.io,
                info: ConnInfo {
                    peer: a.peer,
                    cert: a.cert,
                    hello: Arc::new(AtomicBool::new(false)),
                },
                hello_deadline: Some(Box::pin(tokio::time::sleep(hello_timeout))),
                gate,
                _slot: a.slot,
            };
            let _ = out.send(Ok(conn)).await;
        }
    })
    .await
}
