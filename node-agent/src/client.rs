//! The stream to the collector: dial out over mTLS, say Hello, send every unacknowledged report,
//! forget what is acknowledged; on any failure reconnect with backoff and jitter.

use crate::config::Config;
use crate::outbox::Outbox;
use hardshift_proto::v1::agent_client::AgentClient;
use hardshift_proto::v1::agent_message::Body;
use hardshift_proto::v1::collector_message::Body as In;
use hardshift_proto::v1::{AgentMessage, CollectorMessage, Hello};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Notify};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

pub struct Shared {
    pub outbox: Mutex<Outbox>,
    pub new_report: Notify,
    pub boot_id: String,
    /// This node's clock minus the collector's (ms), from the last Ack; None until one arrives.
    pub clock: Mutex<Option<i64>>,
}

impl Shared {
    pub fn clock_offset(&self) -> Option<i64> {
        self.clock.lock().ok().and_then(|c| *c)
    }
}

/// Why a session with the collector ended.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("collector address {0}")]
    Address(String),
    /// The connection, explained (see `explain`).
    #[error("{0}")]
    Connect(String),
    /// The collector refused the stream, explained.
    #[error("{0}")]
    Refused(String),
    #[error("the collector closed the stream")]
    Closed,
    #[error("{0}")]
    Stream(String),
}

async fn channel(cfg: &Config) -> Result<Channel, ClientError> {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|source| ClientError::Read {
            path: p.display().to_string(),
            source,
        })
    };
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(&cfg.ca)?))
        .identity(Identity::from_pem(read(&cfg.cert)?, read(&cfg.key)?))
        .domain_name(cfg.server_name());
    Channel::from_shared(format!("https://{}", cfg.collector))
        .map_err(|e| ClientError::Address(format!("{}: {e}", cfg.collector)))?
        .tls_config(tls)
        .map_err(|e| ClientError::Connect(e.to_string()))?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| ClientError::Connect(explain(e.to_string(), std::error::Error::source(&e))))
}

/// An error with its causes ("transport error" alone says nothing), and what it most likely means.
fn explain(head: String, source: Option<&(dyn std::error::Error + 'static)>) -> String {
    let mut parts = vec![head];
    let mut cur = source;
    while let Some(c) = cur {
        let s = c.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = c.source();
    }
    let text = parts.join(": ");
    let lower = text.to_lowercase();
    let hint = if lower.contains("invalid peer certificate") {
        " (this node does not trust the collector's certificate: check ca and server_name in the agent config)"
    } else if ["alert", "connection closed", "connection reset", "broken pipe"]
        .iter()
        .any(|w| lower.contains(w))
    {
        " (the collector closed the connection during or right after TLS: if its log says handshake_failed, it refused this node's certificate; is it from this bundle's agent CA?)"
    } else {
        ""
    };
    format!("{text}{hint}")
}

/// Send what the outbox holds past what was sent, as it comes; on each wake, anything an ack
/// did not cover goes again. Returns only when the stream closes.
async fn send_reports(tx: &mpsc::Sender<AgentMessage>, shared: &Shared) -> Result<(), ClientError> {
    let mut sent = 0u64;
    loop {
        let batch: Vec<_> = shared.outbox.lock().map(|o| o.after(sent).cloned().collect()).unwrap_or_default();
        for r in batch {
            sent = r.seq;
            if tx
                .send(AgentMessage {
                    body: Some(Body::Report(r)),
                })
                .await
                .is_err()
            {
                return Err(ClientError::Closed);
            }
        }
        // Wake on a new report, or now and then to resend anything an ack did not cover.
        let _ = tokio::time::timeout(Duration::from_secs(30), shared.new_report.notified()).await;
    }
}

/// Answer a debug request beside the stream, or say the agent is busy when `busy` has no
/// permit left.
fn answer_debug(cfg: &Config, tx: &mpsc::Sender<AgentMessage>, busy: &Arc<tokio::sync::Semaphore>, d: hardshift_proto::v1::DebugRequest) {
    let (cfg, tx) = (cfg.clone(), tx.clone());
    let permit = busy.clone().try_acquire_owned();
    tokio::spawn(async move {
        let resp = match permit {
            Ok(_p) => crate::debug::answer(&cfg, d).await,
            Err(_) => hardshift_proto::v1::DebugResponse {
                id: d.id,
                error: "the agent is busy with other debug requests; retry".into(),
                ..Default::default()
            },
        };
        let _ = tx
            .send(AgentMessage {
                body: Some(Body::DebugResponse(resp)),
            })
            .await;
    });
}

/// An Ack: the clock offset it implies, and the reports it covers off the outbox.
fn take_ack(shared: &Shared, a: hardshift_proto::v1::Ack) {
    // The Ack left the collector at collector_time_ms and arrived now; on a LAN the transit is
    // well under the seconds that break certificates.
    if a.collector_time_ms > 0 {
        if let Ok(mut c) = shared.clock.lock() {
            *c = Some(hardshift_proto::now_ms() - a.collector_time_ms);
        }
    }
    if a.boot_id == shared.boot_id {
        if let Ok(mut o) = shared.outbox.lock() {
            o.ack(a.highest_seq);
        }
    }
}

/// One connection, until it fails.
async fn session(cfg: &Config, shared: &Shared) -> Result<(), ClientError> {
    let ch = channel(cfg).await?;
    let (tx, rx) = mpsc::channel::<AgentMessage>(256);
    let hello = Hello {
        agent_version: env!("CARGO_PKG_VERSION").into(),
        node: cfg.node.clone(),
        boot_id: shared.boot_id.clone(),
        role: cfg.role.clone(),
        last_seq: shared.outbox.lock().map(|o| o.last_seq()).unwrap_or(0),
    };
    tx.send(AgentMessage {
        body: Some(Body::Hello(hello)),
    })
    .await
    .map_err(|_| ClientError::Closed)?;
    let mut inbound = AgentClient::new(ch)
        .connect(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .map_err(|s| ClientError::Refused(explain(format!("{:?}: {}", s.code(), s.message()), std::error::Error::source(&s))))?
        .into_inner();
    tracing::info!(node = %cfg.node, "connected to {}", cfg.collector);

    let sender = send_reports(&tx, shared);
    // At most a few debug answers in flight: a flood of requests cannot load the node.
    let busy = Arc::new(tokio::sync::Semaphore::new(4));
    let receiver = async {
        loop {
            match inbound.message().await {
                Ok(Some(CollectorMessage {
                    body: Some(In::DebugRequest(d)),
                })) => answer_debug(cfg, &tx, &busy, d),
                Ok(Some(CollectorMessage { body: Some(In::Ack(a)) })) => take_ack(shared, a),
                Ok(Some(_)) => {}
                Ok(None) => return Err(ClientError::Closed),
                Err(s) => return Err(ClientError::Stream(format!("{}: {}", s.code(), s.message()))),
            }
        }
    };
    tokio::select! {
        r = sender => r,
        r = receiver => r,
    }
}

/// Jitter from the clock's nanoseconds: enough to spread a thousand agents, no RNG needed.
fn jitter(max_ms: u64) -> Duration {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    Duration::from_millis(n % max_ms.max(1))
}

pub async fn run(cfg: Config, shared: Arc<Shared>) {
    let mut backoff = Duration::from_millis(500);
    loop {
        let started = std::time::Instant::now();
        if let Err(e) = session(&cfg, &shared).await {
            tracing::warn!("{e}; retrying");
        }
        if started.elapsed() > Duration::from_secs(30) {
            backoff = Duration::from_millis(500);
        }
        tokio::time::sleep(backoff + jitter(backoff.as_millis() as u64)).await;
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}
