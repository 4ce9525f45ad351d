//! One agent's stream: authenticated by its certificate (the Hello must name the same node),
//! registered while it lives, its reports queued to the writer and acked in order as their
//! commits land, its debug answers routed to whoever asked.

use crate::agents::{Agents, Outbox};
use crate::ingest::{Ingest, Stored};
use crate::listener::ConnInfo;
use crate::now_ms;
use crate::server::Collector;
use hardshift_proto::v1::agent_message::Body as In;
use hardshift_proto::v1::agent_server::Agent;
use hardshift_proto::v1::collector_message::Body as Out;
use hardshift_proto::v1::{Ack, AgentMessage, CollectorMessage, Hello};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_stream::{wrappers::ReceiverStream, Stream};
use tonic::{Request, Response, Status, Streaming};

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
            // The store keeps seqs as signed 64-bit integers: a seq it cannot hold faithfully
            // (0, or past i64::MAX) would sort wrong and hide every later report. Refused.
            if report.seq == 0 || report.seq >= i64::MAX as u64 {
                tracing::warn!(node = %node, "refused a report with seq {}: outside 1..{}", report.seq, i64::MAX);
                let msg = format!("seq {} is outside 1..{}", report.seq, i64::MAX);
                let _ = self.tx.send(Err(Status::invalid_argument(msg))).await;
                break;
            }
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
        // The agent CA vouches for the certificate; the inventory says who may report. A name
        // outside it (or no valid name at all, `..`) is refused before anything is stored.
        let valid = !cn.is_empty()
            && cn.len() <= 253
            && cn.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            && !cn.starts_with('.')
            && !cn.contains("..");
        if !valid || self.nodes.as_ref().is_some_and(|n| !n.contains(&cn)) {
            let peer = req.extensions().get::<ConnInfo>().map(|i| i.peer.to_string()).unwrap_or_default();
            tracing::warn!(
                "refused a stream from {peer}: certificate {cn:?} is signed by the agent CA but names no node of this bundle's inventory"
            );
            return Err(Status::permission_denied(format!("{cn:?} is not a node of this cluster")));
        }
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
