//! The agents' listener, owned here rather than left to tonic so that a flood cannot lock real
//! agents out: connection caps in total and per source address, a deadline on the TLS handshake
//! (each handshake in its own task, so idle sockets do not queue the others), a deadline on the
//! Hello once TLS is up, and every refusal logged with its reason (rate-limited) and counted.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::Connected;

/// The limits a listener enforces.
#[derive(Debug, Clone)]
pub struct Limits {
    pub handshake_timeout: Duration,
    /// From the end of the TLS handshake to the agent's Hello.
    pub hello_timeout: Duration,
    pub max_connections: usize,
    pub max_per_address: usize,
    /// Slots of `max_connections` only authenticated connections hold (the dashboard's admin,
    /// past the TLS handshake): connections that never authenticate fill the rest, never these.
    pub reserved_for_authenticated: usize,
    /// Full, close the oldest idle connection (no request in flight), then the oldest live
    /// stream, for a newcomer, rather than refuse it: a flood then cannot keep anyone out.
    pub shed_oldest: bool,
    /// Live streams (SSE) one address holds at most; a new one closes that address's oldest.
    pub max_streams_per_address: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake_timeout: Duration::from_secs(10),
            hello_timeout: Duration::from_secs(10),
            max_connections: 10_000,
            max_per_address: 64,
            reserved_for_authenticated: 0,
            shed_oldest: false,
            max_streams_per_address: usize::MAX,
        }
    }
}

/// Why a connection was refused (the label refusals are counted under).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    ConnectionCap,
    AddressCap,
    HandshakeTimeout,
    HandshakeFailed,
    NoHello,
    /// Not a refusal: an open connection closed to make room (`Limits::shed_oldest`).
    Shed,
}

impl Refusal {
    pub const ALL: [Refusal; 6] = [
        Refusal::ConnectionCap,
        Refusal::AddressCap,
        Refusal::HandshakeTimeout,
        Refusal::HandshakeFailed,
        Refusal::NoHello,
        Refusal::Shed,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Refusal::ConnectionCap => "connection_cap",
            Refusal::AddressCap => "address_cap",
            Refusal::HandshakeTimeout => "handshake_timeout",
            Refusal::HandshakeFailed => "handshake_failed",
            Refusal::NoHello => "no_hello",
            Refusal::Shed => "shed",
        }
    }
}

/// Open connections (admitted, handshaking or serving) and refusals so far.
#[derive(Default)]
pub struct Gate {
    /// Which door (empty for the agents'): the prefix of its log lines.
    name: &'static str,
    open: Mutex<Open>,
    refused: Mutex<BTreeMap<Refusal, u64>>,
    log: Mutex<BTreeMap<Refusal, RateLimit>>,
}

/// The connections open now: counts under each cap, and each connection by age (ids ascend)
/// with what it is doing, for choosing which to shed.
#[derive(Default)]
struct Open {
    total: usize,
    unauthenticated: usize,
    per_address: HashMap<IpAddr, usize>,
    next_id: u64,
    conns: BTreeMap<u64, Entry>,
}

struct Entry {
    peer: SocketAddr,
    authenticated: bool,
    activity: Activity,
    close: Arc<tokio::sync::Notify>,
}

/// What a connection is doing, as far as shedding goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Nothing in flight: a handshake not done, no request yet, or between two requests.
    Idle,
    /// A request is being answered: never shed.
    Busy,
    /// A live stream (SSE) is open: shed after every idle one.
    Stream,
}

impl Open {
    /// The cap a newcomer from `ip` would go over, if any.
    fn over(&self, ip: IpAddr, limits: &Limits) -> Option<Refusal> {
        if self.total >= limits.max_connections || self.unauthenticated >= unauthenticated_cap(limits) {
            return Some(Refusal::ConnectionCap);
        }
        (self.per_address.get(&ip).copied().unwrap_or(0) >= limits.max_per_address).then_some(Refusal::AddressCap)
    }

    /// Which connection to close for a newcomer from `ip` that would go over `cap`: an idle one
    /// before a stream, one that never authenticated before one that did, one of the address
    /// holding the most before others (a flood from a few addresses sheds itself, not the one
    /// viewer beside it), the oldest first; never one answering a request. For the address's
    /// cap, one of that address; while those that never authenticated fill their share, one of
    /// them (closing another would free nothing for the newcomer); else any, an authenticated
    /// one only when idle.
    fn victim(&self, cap: Refusal, ip: IpAddr, limits: &Limits) -> Option<u64> {
        let share_full = self.unauthenticated >= unauthenticated_cap(limits);
        let eligible = |e: &Entry| match cap {
            Refusal::AddressCap => e.peer.ip() == ip,
            _ if share_full => !e.authenticated,
            _ => !e.authenticated || e.activity == Activity::Idle,
        };
        let crowd = |e: &Entry| std::cmp::Reverse(self.per_address.get(&e.peer.ip()).copied().unwrap_or(0));
        let rank = |e: &Entry| (e.activity != Activity::Idle, e.authenticated, crowd(e));
        self.conns
            .iter()
            .filter(|(_, e)| e.activity != Activity::Busy && eligible(e))
            .min_by_key(|(id, e)| (rank(e), **id))
            .map(|(id, _)| *id)
    }

    /// Forget a connection (shed, or ended): its place under every cap is free again.
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.conns.remove(&id)?;
        self.total -= 1;
        if !e.authenticated {
            self.unauthenticated -= 1;
        }
        let ip = e.peer.ip();
        if let Some(n) = self.per_address.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&ip);
            }
        }
        Some(e)
    }
}

/// The places connections that never authenticated may hold: all but the reserve.
fn unauthenticated_cap(limits: &Limits) -> usize {
    limits.max_connections.saturating_sub(limits.reserved_for_authenticated).max(1)
}

/// At most `BURST` log lines per reason and window; the rest are counted and summed up when the
/// window ends. Per reason, so a flood of one kind does not hide another.
struct RateLimit {
    window_start: Instant,
    lines: u32,
    suppressed: u64,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            window_start: Instant::now(),
            lines: 0,
            suppressed: 0,
        }
    }
}

const BURST: u32 = 20;
const WINDOW: Duration = Duration::from_secs(60);

/// A connection's name at its gate: what its requests use to say what it is doing.
#[derive(Clone)]
pub struct Tag {
    gate: Arc<Gate>,
    id: u64,
}

impl Tag {
    /// Say what the connection does now. A new live stream over its address's share closes
    /// that address's oldest stream.
    pub fn set(&self, activity: Activity, limits: &Limits) {
        let shed = {
            let Ok(mut open) = self.gate.open.lock() else { return };
            let Some(e) = open.conns.get_mut(&self.id) else { return };
            let (was, ip) = (e.activity, e.peer.ip());
            e.activity = activity;
            if activity != Activity::Stream || was == Activity::Stream {
                return;
            }
            let streams: Vec<u64> = open
                .conns
                .iter()
                .filter(|(id, e)| **id != self.id && e.activity == Activity::Stream && e.peer.ip() == ip)
                .map(|(id, _)| *id)
                .collect();
            if streams.len() < limits.max_streams_per_address {
                return;
            }
            open.remove(streams[0])
        };
        if let Some(e) = shed {
            e.close.notify_one();
            let d = format!(
                "its oldest live stream, for a newer one ({} streams from this address at most)",
                limits.max_streams_per_address
            );
            self.gate.note(e.peer, Refusal::Shed, "closed", &d);
        }
    }
}

/// A connection's place under the caps, given back when the connection ends.
pub struct Slot {
    tag: Tag,
    close: Arc<tokio::sync::Notify>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.tag.gate.open.lock() {
            open.remove(self.tag.id);
        }
    }
}

impl Slot {
    /// The connection proved who it is (the admin's certificate): it now holds a place of
    /// the reserve, out of reach of connections that never authenticate.
    pub fn authenticate(&self) {
        if let Ok(mut open) = self.tag.gate.open.lock() {
            let mut newly = false;
            if let Some(e) = open.conns.get_mut(&self.tag.id) {
                newly = !e.authenticated;
                e.authenticated = true;
            }
            if newly {
                open.unauthenticated -= 1;
            }
        }
    }

    pub fn tag(&self) -> Tag {
        self.tag.clone()
    }

    /// Resolves when the gate closed this connection to make room (`Limits::shed_oldest`).
    pub async fn shed(&self) {
        self.close.notified().await
    }
}

impl Gate {
    /// A gate whose log lines start with `name:`.
    pub fn named(name: &'static str) -> Gate {
        Gate {
            name,
            ..Default::default()
        }
    }

    fn prefix(&self) -> String {
        if self.name.is_empty() {
            String::new()
        } else {
            format!("{}: ", self.name)
        }
    }

    /// Admit a new connection from `peer`, or say which cap it hits. With `shed_oldest`, the
    /// connections closed to make room are closed and logged here.
    pub fn admit(self: &Arc<Self>, peer: SocketAddr, limits: &Limits) -> Result<Slot, Refusal> {
        let mut shed = Vec::new();
        let admitted = self.admit_locked(peer, limits, &mut shed);
        for (e, cap) in shed {
            e.close.notify_one();
            let why = match cap {
                Refusal::AddressCap => format!("{} connections from this address", limits.max_per_address),
                _ => format!("{} connections open", limits.max_connections),
            };
            let d = format!(
                "its oldest idle connection (or live stream), for a newer one ({}: {why})",
                cap.label()
            );
            self.note(e.peer, Refusal::Shed, "closed", &d);
        }
        admitted
    }

    fn admit_locked(self: &Arc<Self>, peer: SocketAddr, limits: &Limits, shed: &mut Vec<(Entry, Refusal)>) -> Result<Slot, Refusal> {
        let ip = peer.ip();
        let mut open = self.open.lock().map_err(|_| Refusal::ConnectionCap)?;
        // Each round frees a place under one cap; two caps at most, and one more for luck.
        for _ in 0..3 {
            let Some(cap) = open.over(ip, limits) else { break };
            let victim = limits.shed_oldest.then(|| open.victim(cap, ip, limits)).flatten();
            match victim.and_then(|id| open.remove(id)) {
                Some(e) => shed.push((e, cap)),
                None => return Err(cap),
            }
        }
        if let Some(cap) = open.over(ip, limits) {
            return Err(cap);
        }
        let id = open.next_id;
        open.next_id += 1;
        open.total += 1;
        open.unauthenticated += 1;
        *open.per_address.entry(ip).or_insert(0) += 1;
        let close = Arc::new(tokio::sync::Notify::new());
        open.conns.insert(
            id,
            Entry {
                peer,
                authenticated: false,
                activity: Activity::Idle,
                close: close.clone(),
            },
        );
        Ok(Slot {
            tag: Tag { gate: self.clone(), id },
            close,
        })
    }

    /// `admit`, or count and log the refusal (naming the cap it hit) and give nothing.
    pub fn admit_or_refuse(self: &Arc<Self>, peer: SocketAddr, limits: &Limits) -> Option<Slot> {
        match self.admit(peer, limits) {
            Ok(s) => Some(s),
            Err(why) => {
                let detail = match why {
                    Refusal::AddressCap => format!("{} connections from this address already", limits.max_per_address),
                    _ => format!("{} connections open already", limits.max_connections),
                };
                self.refuse(peer, why, &detail);
                None
            }
        }
    }

    /// Count a refusal and log it, unless this window has had its share of lines.
    pub fn refuse(&self, peer: SocketAddr, why: Refusal, detail: &str) {
        self.note(peer, why, "refused", detail)
    }

    /// Count what was done to a connection (`verb`: refused, closed) and log it, rate-limited.
    fn note(&self, peer: SocketAddr, why: Refusal, verb: &str, detail: &str) {
        if let Ok(mut r) = self.refused.lock() {
            *r.entry(why).or_insert(0) += 1;
        }
        let Ok(mut logs) = self.log.lock() else { return };
        let log = logs.entry(why).or_default();
        let now = Instant::now();
        if now.duration_since(log.window_start) >= WINDOW {
            if log.suppressed > 0 {
                tracing::warn!(
                    "{}{} more of these ({}) were not logged in the last minute",
                    self.prefix(),
                    log.suppressed,
                    why.label()
                );
            }
            *log = RateLimit {
                window_start: now,
                ..Default::default()
            };
        }
        if log.lines < BURST {
            log.lines += 1;
            tracing::warn!(%peer, "{}{verb} {peer}: {}: {detail}", self.prefix(), why.label());
        } else {
            log.suppressed += 1;
        }
    }

    /// Refusals by reason so far.
    pub fn refusals(&self) -> BTreeMap<Refusal, u64> {
        self.refused.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().map(|o| o.total).unwrap_or(0)
    }
}

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
    tokio::pin!(stop);
    loop {
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
        let Some(slot) = gate.admit_or_refuse(peer, &limits) else {
            continue;
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ip: &str) -> SocketAddr {
        SocketAddr::new(ip.parse().unwrap(), 5)
    }

    #[test]
    fn caps_count_and_release() {
        let gate = Arc::new(Gate::default());
        let limits = Limits {
            max_connections: 3,
            max_per_address: 2,
            ..Default::default()
        };
        let (a, b) = (at("10.0.0.1"), at("10.0.0.2"));
        let s1 = gate.admit(a, &limits).unwrap();
        let _s2 = gate.admit(a, &limits).unwrap();
        assert_eq!(gate.admit(a, &limits).err(), Some(Refusal::AddressCap));
        let _s3 = gate.admit(b, &limits).unwrap();
        assert_eq!(gate.admit(b, &limits).err(), Some(Refusal::ConnectionCap));
        drop(s1);
        assert_eq!(gate.open(), 2);
        gate.admit(a, &limits).unwrap();
        let peer: SocketAddr = "10.0.0.1:5".parse().unwrap();
        for _ in 0..(BURST + 5) {
            gate.refuse(peer, Refusal::NoHello, "x");
        }
        assert_eq!(gate.refusals()[&Refusal::NoHello], u64::from(BURST) + 5);
        assert_eq!(gate.log.lock().unwrap()[&Refusal::NoHello].suppressed, 5);
        // Another reason still gets its own lines.
        gate.refuse(peer, Refusal::AddressCap, "y");
        assert_eq!(gate.log.lock().unwrap()[&Refusal::AddressCap].lines, 1);
    }

    /// Full, the oldest idle connection goes first, then the oldest stream, never one answering
    /// a request; the reserve is for authenticated connections; an address's streams are capped.
    #[test]
    fn a_full_gate_sheds_the_oldest_idle_and_keeps_the_reserve() {
        let gate = Arc::new(Gate::named("dashboard"));
        let limits = Limits {
            max_connections: 4,
            max_per_address: 3,
            reserved_for_authenticated: 1,
            shed_oldest: true,
            max_streams_per_address: 1,
            ..Default::default()
        };
        let shed_now = |s: &Slot| {
            let mut f = std::pin::pin!(s.shed());
            f.as_mut().poll(&mut Context::from_waker(std::task::Waker::noop())).is_ready()
        };
        let admin = gate.admit(at("10.0.0.9"), &limits).unwrap();
        admin.authenticate();
        let busy = gate.admit(at("10.0.0.1"), &limits).unwrap();
        busy.tag().set(Activity::Busy, &limits);
        let stream = gate.admit(at("10.0.0.2"), &limits).unwrap();
        stream.tag().set(Activity::Stream, &limits);
        let idle = gate.admit(at("10.0.0.3"), &limits).unwrap();
        // Three that never authenticated hold all but the reserve: the idle one goes first.
        let next = gate.admit(at("10.0.0.4"), &limits).unwrap();
        assert!(shed_now(&idle) && !shed_now(&busy) && !shed_now(&stream) && !shed_now(&admin));
        // Then the oldest stream (the busy one is answering).
        next.tag().set(Activity::Busy, &limits);
        let last = gate.admit(at("10.0.0.5"), &limits).unwrap();
        assert!(shed_now(&stream) && !shed_now(&busy) && !shed_now(&admin));
        assert_eq!(gate.open(), 4);
        // All that never authenticated answering requests: a newcomer is refused, and the
        // admin's place is not taken for it.
        last.tag().set(Activity::Busy, &limits);
        assert_eq!(gate.admit(at("10.0.0.6"), &limits).err(), Some(Refusal::ConnectionCap));
        assert!(!shed_now(&admin));
        // A second stream from one address closes its first.
        drop((busy, next));
        let s1 = gate.admit(at("10.0.0.7"), &limits).unwrap();
        s1.tag().set(Activity::Stream, &limits);
        let s2 = gate.admit(at("10.0.0.7"), &limits).unwrap();
        s2.tag().set(Activity::Stream, &limits);
        assert!(shed_now(&s1) && !shed_now(&s2) && !shed_now(&admin));
        assert!(gate.refusals()[&Refusal::Shed] >= 3);
        // A flood from one address sheds itself before the lone connection beside it, older or not.
        let gate = Arc::new(Gate::default());
        let lone = gate.admit(at("10.0.1.1"), &limits).unwrap();
        let flood: Vec<Slot> = (0..2).map(|_| gate.admit(at("10.0.1.2"), &limits).unwrap()).collect();
        let _newcomer = gate.admit(at("10.0.1.3"), &limits).unwrap();
        assert!(!shed_now(&lone) && shed_now(&flood[0]) && !shed_now(&flood[1]));
    }
}
