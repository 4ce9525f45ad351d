//! The mTLS gRPC server agents stream to (each stream a `session`), the admin socket, and the
//! dashboard beside them. Connections come through `listener` (caps, deadlines); on shutdown
//! every stream is drained: what was received is committed and acknowledged, then the streams
//! end and the agents reconnect elsewhere or later.

use crate::agents::Agents;
use crate::ingest::Ingest;
use crate::listener::{self, Gate, Limits};
use crate::now_ms;
use crate::store::Store;
use hardshift_proto::v1::admin_server::{Admin, AdminServer};
use hardshift_proto::v1::agent_server::AgentServer;
use hardshift_proto::v1::{AdminDebugRequest, DebugResponse};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tonic::transport::Server;
use tonic::{Request, Response, Status};

pub struct Collector {
    pub(crate) nodes: Option<std::collections::BTreeSet<String>>,
    pub(crate) ingest: Ingest,
    pub(crate) agents: Arc<Agents>,
    pub(crate) hello_timeout: Duration,
    pub(crate) stop: tokio::sync::watch::Receiver<bool>,
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
    /// The bundle's nodes: a certificate of the agent CA naming any other is refused (the CA's
    /// key signs what it is given; the inventory says who may report). None accepts any name.
    pub nodes: Option<std::collections::BTreeSet<String>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            limits: Limits::default(),
            retain: None,
            drain: Duration::from_secs(10),
            web: None,
            nodes: None,
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
        let deps = crate::web::Deps {
            agents: agents.clone(),
            gate: gate.clone(),
            web_gate: Arc::new(Gate::named("dashboard")),
            metrics,
            changed,
        };
        start_web(web, deps, stop_rx.clone()).await?;
    }
    if let Some(retain) = opts.retain {
        tokio::spawn(prune_every(ingest.clone(), retain, stopped(stop_rx.clone())));
    }
    let agent_server = Server::builder()
        // A peer that vanished without a FIN is found and its slot freed.
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .add_service(agent_service(&opts, ingest, &agents, &stop_rx))
        .serve_with_incoming_shutdown(ReceiverStream::new(conn_rx), stopped(stop_rx.clone()));
    let admin = async {
        match admin_socket {
            Some(path) => serve_admin(path, agents.clone(), stopped(stop_rx.clone())).await,
            None => Ok(()),
        }
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
    let watcher = drain_on(shutdown, &agents, stop_tx, drain);
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
    say_refusals(&gate);
    tracing::info!("collector stopped");
    result
}

/// The agents' gRPC service: the inventory's nodes only, their reports into `ingest`.
fn agent_service(
    opts: &Options,
    ingest: Ingest,
    agents: &Arc<Agents>,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> AgentServer<Collector> {
    AgentServer::new(Collector {
        nodes: opts.nodes.clone(),
        ingest,
        agents: agents.clone(),
        hello_timeout: opts.limits.hello_timeout,
        stop: stop.clone(),
    })
}

/// Resolves once the stop signal is sent.
async fn stopped(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// On `shutdown`, tell every task to stop and give the agents' streams `drain` to end; resolves
/// when the drain has run out.
async fn drain_on(
    shutdown: impl std::future::Future<Output = ()>,
    agents: &Agents,
    stop_tx: tokio::sync::watch::Sender<bool>,
    drain: Duration,
) {
    shutdown.await;
    let streams = agents.conns.lock().map(|c| c.len()).unwrap_or(0);
    tracing::info!("stopping: draining {streams} agent streams (at most {drain:?})");
    let _ = stop_tx.send(true);
    tokio::time::sleep(drain).await;
}

/// The connections refused over the collector's life, by why, said once at the end.
fn say_refusals(gate: &Gate) {
    let refused = gate.refusals();
    if !refused.is_empty() {
        let list: Vec<String> = refused.iter().map(|(k, v)| format!("{} {v}", k.label())).collect();
        tracing::info!("refused connections: {}", list.join(", "));
    }
}

/// The dashboard, bound here so a port in use fails the start rather than a background task.
async fn start_web(web: crate::web::Options, deps: crate::web::Deps, stop: tokio::sync::watch::Receiver<bool>) -> Result<(), ServeError> {
    let tcp = crate::web::bind(&web).await?;
    tokio::spawn(async move {
        if let Err(e) = crate::web::serve(web, tcp, deps, stop).await {
            tracing::error!("{e}");
        }
    });
    Ok(())
}

/// The admin API on its unix socket (0600) until `stop`.
async fn serve_admin(path: &Path, agents: Arc<Agents>, stop: impl std::future::Future<Output = ()>) -> Result<(), ServeError> {
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
        .add_service(AdminServer::new(AdminApi { agents }))
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), stop)
        .await
        .map_err(|e| admin_err(e.to_string()))
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
