//! The mTLS gRPC server agents stream to. A node's identity is its client certificate's CN; a
//! stream whose Hello names another node is refused and logged. Connections come through
//! `listener` (caps, deadlines); on shutdown every stream is drained: what was received is
//! committed and acknowledged, then the streams end and the agents reconnect elsewhere or later.

use crate::ingest::{Ingest, Stored};
use crate::listener::{self, ConnInfo, Gate, Limits};
use crate::now_ms;
use crate::store::Store;
use hardshift_proto::v1::admin_server::{Admin, AdminServer};
use hardshift_proto::v1::agent_message::Body as In;
use hardshift_proto::v1::agent_server::{Agent, AgentServer};
use hardshift_proto::v1::collector_message::Body as Out;
use hardshift_proto::v1::{Ack, AdminDebugRequest, AgentMessage, CollectorMessage, DebugRequest, DebugResponse, Hello};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::{
    wrappers::{ReceiverStream, UnixListenerStream},
    Stream,
};
use tonic::transport::Server;
use tonic::{Request, Response, Status, Streaming};

pub struct Collector {
    ingest: Ingest,
    agents: Arc<Agents>,
    hello_timeout: Duration,
    stop: tokio::sync::watch::Receiver<bool>,
}

type Outbox = mpsc::Sender<Result<CollectorMessage, Status>>;

/// The connected agents, and the debug requests waiting for their answers.
#[derive(Default)]
pub struct Agents {
    /// node → (connection number, its outbound stream). A reconnect replaces the entry.
    conns: Mutex<HashMap<String, (u64, Outbox)>>,
    /// request id → (the node asked, who waits).
    pending: Mutex<HashMap<u64, (String, oneshot::Sender<DebugResponse>)>>,
    next: AtomicU64,
}

/// How long `hardshift logs` waits for a node's answer.
const DEBUG_TIMEOUT: Duration = Duration::from_secs(20);

impl Agents {
    /// Agents streaming now.
    pub fn connected(&self) -> usize {
        self.conns.lock().map(|c| c.len()).unwrap_or(0)
    }

    fn id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Ask `node` one debug request and wait for its answer.
    pub async fn ask(&self, node: &str, mut req: DebugRequest) -> Result<DebugResponse, Status> {
        let tx = self
            .conns
            .lock()
            .map_err(|_| Status::internal("lock"))?
            .get(node)
            .map(|c| c.1.clone())
            .ok_or_else(|| Status::unavailable(format!("{node} is not connected to this collector")))?;
        req.id = self.id();
        let (otx, orx) = oneshot::channel();
        self.pending
            .lock()
            .map_err(|_| Status::internal("lock"))?
            .insert(req.id, (node.to_string(), otx));
        let id = req.id;
        let sent = tx
            .send(Ok(CollectorMessage {
                body: Some(Out::DebugRequest(req)),
            }))
            .await;
        let answer = match sent {
            Err(_) => Err(Status::unavailable(format!("{node} disconnected"))),
            Ok(()) => match tokio::time::timeout(DEBUG_TIMEOUT, orx).await {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(_)) => Err(Status::unavailable(format!("{node} disconnected before answering"))),
                Err(_) => Err(Status::deadline_exceeded(format!(
                    "{node} did not answer within {}s",
                    DEBUG_TIMEOUT.as_secs()
                ))),
            },
        };
        if let Ok(mut p) = self.pending.lock() {
            p.remove(&id);
        }
        answer
    }

    /// An answer from `node`: delivered only to a request that was sent to that node.
    fn answered(&self, node: &str, r: DebugResponse) {
        let Ok(mut p) = self.pending.lock() else { return };
        if p.get(&r.id).is_some_and(|(n, _)| n == node) {
            if let Some((_, w)) = p.remove(&r.id) {
                let _ = w.send(r);
            }
        } else {
            tracing::warn!(node, "answered request {} it was not asked; ignored", r.id);
        }
    }
}

/// The local admin API (unix socket): debug requests on behalf of the workstation CLI.
pub struct AdminApi {
    agents: Arc<Agents>,
}

#[tonic::async_trait]
impl Admin for AdminApi {
    async fn debug(&self, req: Request<AdminDebugRequest>) -> Result<Response<DebugResponse>, Status> {
        let AdminDebugRequest { node, request } = req.into_inner();
        let request = request.ok_or_else(|| Status::invalid_argument("no request"))?;
        Ok(Response::new(self.agents.ask(&node, request).await?))
    }
}

/// The CN of the verified client certificate (rustls checked it against the agent CA).
fn peer_cn<T>(req: &Request<T>) -> Option<String> {
    let der = req.extensions().get::<ConnInfo>()?.cert.as_ref()?;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    Some(cn)
}

fn ack(boot_id: &str, highest: u64) -> Result<CollectorMessage, Status> {
    Ok(CollectorMessage {
        body: Some(Out::Ack(Ack {
            boot_id: boot_id.to_string(),
            highest_seq: highest,
            collector_time_ms: now_ms(),
        })),
    })
}

type Outbound = Pin<Box<dyn Stream<Item = Result<CollectorMessage, Status>> + Send>>;

/// Keeps a node's entry in `Agents` for as long as its session lives; dropping it removes the
/// entry, unless a newer connection of the same node has replaced it meanwhile.
struct Registration {
    agents: Arc<Agents>,
    node: String,
    conn: u64,
}

impl Agents {
    fn register(self: &Arc<Self>, node: &str, tx: Outbox) -> Registration {
        let conn = self.id();
        if let Ok(mut c) = self.conns.lock() {
            c.insert(node.to_string(), (conn, tx));
        }
        Registration {
            agents: self.clone(),
            node: node.to_string(),
            conn,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut c) = self.agents.conns.lock() {
            if c.get(&self.node).is_some_and(|(n, _)| *n == self.conn) {
                c.remove(&self.node);
            }
        }
    }
}

/// One agent's stream after its Hello: who it is (from its certificate), its boot, and where
/// its acks and debug requests go.
struct Session {
    node: String,
    boot: String,
    tx: Outbox,
}

impl Session {
    /// Ack each report in order as its commit lands; a failed commit ends the stream (the
    /// agent resends what was not acknowledged).
    async fn ack_loop(&self, mut stored: mpsc::Receiver<Stored>) {
        while let Some(s) = stored.recv().await {
            match s.await {
                Ok(Ok(h)) => {
                    if self.tx.send(ack(&self.boot, h)).await.is_err() {
                        break;
                    }
                }
                Ok(Err(e)) => {
                    tracing::error!(node = %self.node, "not stored: {e}");
                    let _ = self.tx.send(Err(Status::unavailable(format!("not stored: {e}")))).await;
                    break;
                }
                Err(_) => break,
            }
        }
    }

    /// Read reports and debug answers until the stream ends or the collector stops. Reports
    /// are queued to the writer without waiting for the last commit.
    async fn read_loop(
        &self,
        mut inbound: Streaming<AgentMessage>,
        ingest: &Ingest,
        agents: &Agents,
        stored: mpsc::Sender<Stored>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let node = &self.node;
        loop {
            // On shutdown, stop reading: what was read is still stored and acked.
            let next = tokio::select! {
                m = inbound.message() => m,
                _ = stop.wait_for(|s| *s) => break,
            };
            let report = match next {
                Ok(Some(AgentMessage { body: Some(In::Report(r)) })) => r,
                Ok(Some(AgentMessage {
                    body: Some(In::DebugResponse(r)),
                })) => {
                    agents.answered(node, r);
                    continue;
                }
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(e) => {
                    tracing::info!(node = %node, "stream ended: {}", e.message());
                    break;
                }
            };
            let queued = match ingest.report(node, &self.boot, report).await {
                Ok(q) => q,
                Err(e) => {
                    tracing::error!(node = %node, "not stored: {e}");
                    break;
                }
            };
            if stored.send(queued).await.is_err() {
                break;
            }
        }
    }
}

impl Collector {
    /// The stream's first message, which must be a Hello naming the certificate's own node.
    async fn hello(&self, cn: &str, info: Option<&ConnInfo>, inbound: &mut Streaming<AgentMessage>) -> Result<Hello, Status> {
        let first = tokio::time::timeout(self.hello_timeout, inbound.message())
            .await
            .map_err(|_| Status::deadline_exceeded("no Hello in time"))?;
        let hello = match first? {
            Some(AgentMessage { body: Some(In::Hello(h)) }) => h,
            _ => return Err(Status::invalid_argument("the first message must be Hello")),
        };
        if let Some(i) = info {
            i.hello.store(true, Ordering::Release);
        }
        if hello.node != cn {
            tracing::warn!(node = cn, "refused a stream: certificate {cn:?} claims to be node {:?}", hello.node);
            return Err(Status::permission_denied(format!("certificate {cn:?} may only report as itself")));
        }
        Ok(hello)
    }
}

#[tonic::async_trait]
impl Agent for Collector {
    type ConnectStream = Outbound;

    async fn connect(&self, req: Request<Streaming<AgentMessage>>) -> Result<Response<Outbound>, Status> {
        let cn = peer_cn(&req).ok_or_else(|| Status::unauthenticated("no client certificate"))?;
        let info = req.extensions().get::<ConnInfo>().cloned();
        let mut inbound = req.into_inner();
        let hello = self.hello(&cn, info.as_ref(), &mut inbound).await?;
        let highest = self
            .ingest
            .hello(&cn, &hello.role, &hello.boot_id, &hello.agent_version)
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        tracing::info!(
            node = %cn,
            boot = %hello.boot_id,
            agent = %hello.agent_version,
            "connected, stored up to {highest}"
        );
        let (tx, rx) = mpsc::channel(64);
        // Tell the agent at once what is already stored, so it resends only the rest.
        let _ = tx.send(ack(&hello.boot_id, highest)).await;
        let registration = self.agents.register(&cn, tx.clone());
        let session = Arc::new(Session {
            node: cn,
            boot: hello.boot_id,
            tx,
        });
        // Reports are queued as they arrive and acked in order as their commits land, so a
        // backlog resent after a reconnect is not stored one fsync at a time.
        let (stored_tx, stored_rx) = mpsc::channel::<Stored>(256);
        let acker = {
            let s = session.clone();
            tokio::spawn(async move { s.ack_loop(stored_rx).await })
        };
        let (ingest, agents, stop) = (self.ingest.clone(), self.agents.clone(), self.stop.clone());
        tokio::spawn(async move {
            session.read_loop(inbound, &ingest, &agents, stored_tx, stop).await;
            let _ = acker.await;
            drop(registration);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// TLS material, PEM.
pub struct Tls {
    pub cert: String,
    pub key: String,
    pub client_ca: String,
}

/// How the collector treats its connections and its store.
#[derive(Debug, Clone)]
pub struct Options {
    pub limits: Limits,
    /// Delete reports older than this (each boot's newest is kept); None keeps everything.
    pub retain: Option<Duration>,
    /// How long a shutdown waits for the streams to drain.
    pub drain: Duration,
    /// The dashboard and `/metrics`; None serves neither.
    pub web: Option<crate::web::Options>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            limits: Limits::default(),
            retain: None,
            drain: Duration::from_secs(10),
            web: None,
        }
    }
}

/// Why the collector could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("TLS: {0}")]
    Tls(#[from] listener::TlsError),
    #[error("listen on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error("the agents' gRPC server: {0}")]
    Agents(String),
    #[error("admin socket {path}: {message}")]
    Admin { path: String, message: String },
    #[error(transparent)]
    Web(#[from] crate::web::WebError),
}

/// Serve agents on `addr` (mTLS) and, when given, the admin API on a unix socket, until
/// `shutdown` resolves; then drain. Agents must present a certificate from `client_ca`.
pub async fn serve(
    addr: SocketAddr,
    tls: Tls,
    store: Store,
    admin_socket: Option<&Path>,
    opts: Options,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), ServeError> {
    let tls = Arc::new(listener::tls_config(&tls.cert, &tls.key, &tls.client_ca)?);
    let tcp = tokio::net::TcpListener::bind(addr).await.map_err(|source| ServeError::Listen {
        addr: addr.to_string(),
        source,
    })?;
    let agents = Arc::new(Agents::default());
    let gate = Arc::new(Gate::default());
    let hooks = crate::ingest::Hooks::default();
    let (metrics, changed) = (hooks.metrics.clone(), hooks.changed.subscribe());
    let ingest = Ingest::start_with(store, hooks);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let (conn_tx, conn_rx) = mpsc::channel(256);
    tokio::spawn(listener::accept(
        tcp,
        tls,
        opts.limits.clone(),
        gate.clone(),
        conn_tx,
        stopped(stop_rx.clone()),
    ));
    if let Some(web) = opts.web.clone() {
        // Bound here, so a port in use fails the start rather than a background task.
        let tcp = crate::web::bind(&web).await?;
        let deps = crate::web::Deps {
            agents: agents.clone(),
            gate: gate.clone(),
            metrics,
            changed,
        };
        let stop = stop_rx.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::web::serve(web, tcp, deps, stop).await {
                tracing::error!("{e}");
            }
        });
    }
    if let Some(retain) = opts.retain {
        tokio::spawn(prune_every(ingest.clone(), retain, stopped(stop_rx.clone())));
    }
    let agent_server = Server::builder()
        // A peer that vanished without a FIN is found and its slot freed.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .add_service(AgentServer::new(Collector {
            ingest,
            agents: agents.clone(),
            hello_timeout: opts.limits.hello_timeout,
            stop: stop_rx.clone(),
        }))
        .serve_with_incoming_shutdown(ReceiverStream::new(conn_rx), stopped(stop_rx.clone()));
    let admin = async {
        let Some(path) = admin_socket else { return Ok(()) };
        // A stale socket from a killed collector would make bind fail (the caller holds the
        // directory's lock, so it is not a live collector's).
        let _ = std::fs::remove_file(path);
        let admin_err = |message: String| ServeError::Admin {
            path: path.display().to_string(),
            message,
        };
        let listener = tokio::net::UnixListener::bind(path).map_err(|e| admin_err(e.to_string()))?;
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).map_err(|e| admin_err(e.to_string()))?;
        Server::builder()
            .add_service(AdminServer::new(AdminApi { agents: agents.clone() }))
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), stopped(stop_rx.clone()))
            .await
            .map_err(|e| admin_err(e.to_string()))
    };
    let servers = async {
        let (a, b) = tokio::join!(
            async {
                agent_server
                    .await
                    .map_err(|e| ServeError::Agents(format!("{e}: {:?}", std::error::Error::source(&e))))
            },
            admin
        );
        a.and(b)
    };
    let drain = opts.drain;
    let watcher = async {
        shutdown.await;
        let streams = agents.conns.lock().map(|c| c.len()).unwrap_or(0);
        tracing::info!("stopping: draining {streams} agent streams (at most {drain:?})");
        let _ = stop_tx.send(true);
        tokio::time::sleep(drain).await;
    };
    let result = tokio::select! {
        r = servers => r,
        _ = watcher => {
            tracing::warn!("the drain took over {drain:?}; stopping anyway");
            Ok(())
        }
    };
    if let Some(p) = admin_socket {
        let _ = std::fs::remove_file(p);
    }
    let refused = gate.refusals();
    if !refused.is_empty() {
        let list: Vec<String> = refused.iter().map(|(k, v)| format!("{} {v}", k.label())).collect();
        tracing::info!("refused connections: {}", list.join(", "));
    }
    tracing::info!("collector stopped");
    result
}

/// Retention: prune now, then every `retain / 4` (at most hourly), until `stop`.
async fn prune_every(ingest: Ingest, retain: Duration, stop: impl std::future::Future<Output = ()>) {
    let every = (retain / 4).clamp(Duration::from_millis(250), Duration::from_secs(3600));
    tokio::pin!(stop);
    loop {
        let before = now_ms() - retain.as_millis() as i64;
        match ingest.prune(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("retention: deleted {n} reports older than {retain:?}"),
            Err(e) => tracing::error!("retention: {e}"),
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = &mut stop => return,
        }
    }
}
