//! The agents connected to this collector, and the debug requests waiting for their answers:
//! what the gRPC server (`server`, `session`) fills and the dashboard and admin socket ask.

use hardshift_proto::v1::collector_message::Body as Out;
use hardshift_proto::v1::{CollectorMessage, DebugRequest, DebugResponse};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

pub(crate) type Outbox = mpsc::Sender<Result<CollectorMessage, Status>>;

/// The connected agents, and the debug requests waiting for their answers.
#[derive(Default)]
pub struct Agents {
    /// node → (connection number, its outbound stream). A reconnect replaces the entry.
    pub(crate) conns: Mutex<HashMap<String, (u64, Outbox)>>,
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

    pub(crate) fn id(&self) -> u64 {
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
    pub(crate) fn answered(&self, node: &str, r: DebugResponse) {
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
