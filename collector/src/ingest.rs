//! One writer thread owns the database. Reports from every stream queue up; the writer stores
//! whatever has arrived in one transaction (one fsync for the lot, not one per report) and only
//! then answers each sender, whose Ack therefore always means "on disk".

use crate::metrics::Metrics;
use crate::now_ms;
use crate::store::Store;
use hardshift_proto::v1::NodeReport;
use hardshift_proto::vocab::Component;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot, watch};

/// Reports stored per transaction at most: bounds the latency one commit adds.
const BATCH: usize = 1024;

enum Job {
    Hello {
        node: String,
        role: String,
        boot: String,
        version: String,
        reply: oneshot::Sender<Result<u64, IngestError>>,
    },
    Report {
        node: String,
        boot: String,
        report: Box<NodeReport>,
        queued: Instant,
        reply: oneshot::Sender<Result<u64, IngestError>>,
    },
    /// Retention: delete reports received before this time; answers how many went.
    Prune {
        before_ms: i64,
        reply: oneshot::Sender<Result<u64, IngestError>>,
    },
}

impl Job {
    fn reply(self) -> oneshot::Sender<Result<u64, IngestError>> {
        match self {
            Job::Hello { reply, .. } | Job::Report { reply, .. } | Job::Prune { reply, .. } => reply,
        }
    }
}

/// Why a job was not done. Cloned to every job of a failed batch, so it keeps the store's
/// error as text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IngestError {
    #[error("the collector's writer has stopped")]
    WriterStopped,
    #[error("{0}")]
    Store(String),
}

#[derive(Clone)]
pub struct Ingest {
    tx: mpsc::Sender<Job>,
}

/// What the writer tells others after each commit.
#[derive(Clone)]
pub struct Hooks {
    pub metrics: Arc<Metrics>,
    /// Bumped after every commit that stored something: the dashboard redraws then.
    pub changed: watch::Sender<u64>,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            metrics: Arc::default(),
            changed: watch::channel(0).0,
        }
    }
}

impl Ingest {
    /// Start the writer on its own thread; it ends when every `Ingest` handle is dropped.
    pub fn start(store: Store) -> Ingest {
        Ingest::start_with(store, Hooks::default())
    }

    /// `start`, counting into `hooks.metrics` and signalling `hooks.changed`.
    pub fn start_with(mut store: Store, hooks: Hooks) -> Ingest {
        let (tx, mut rx) = mpsc::channel::<Job>(16 * BATCH);
        std::thread::Builder::new()
            .name("collector-writer".into())
            .spawn(move || {
                while let Some(first) = rx.blocking_recv() {
                    let mut jobs = vec![first];
                    while jobs.len() < BATCH {
                        match rx.try_recv() {
                            Ok(j) => jobs.push(j),
                            Err(_) => break,
                        }
                    }
                    write(&mut store, jobs, &hooks);
                }
            })
            .expect("writer thread");
        Ingest { tx }
    }

    /// Record a stream's Hello; returns the highest seq already stored for this boot.
    pub async fn hello(&self, node: &str, role: &str, boot: &str, version: &str) -> Result<u64, IngestError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job::Hello {
                node: node.into(),
                role: role.into(),
                boot: boot.into(),
                version: version.into(),
                reply,
            })
            .await
            .map_err(|_| IngestError::WriterStopped)?;
        rx.await.map_err(|_| IngestError::WriterStopped)?
    }

    /// Queue a report; the receiver yields, once it is on disk, the highest seq stored for this
    /// node and boot. A stream queues its next report without waiting for the last commit.
    pub async fn report(&self, node: &str, boot: &str, report: NodeReport) -> Result<Stored, IngestError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job::Report {
                node: node.into(),
                boot: boot.into(),
                report: Box::new(report),
                queued: Instant::now(),
                reply,
            })
            .await
            .map_err(|_| IngestError::WriterStopped)?;
        Ok(rx)
    }
}

pub type Stored = oneshot::Receiver<Result<u64, IngestError>>;

impl Ingest {
    /// Delete reports received before `before_ms` (each boot's newest is kept); how many went.
    pub async fn prune(&self, before_ms: i64) -> Result<u64, IngestError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job::Prune { before_ms, reply })
            .await
            .map_err(|_| IngestError::WriterStopped)?;
        rx.await.map_err(|_| IngestError::WriterStopped)?
    }
}

/// What a report adds to the node's boot steps, in the same transaction: the first report of a
/// boot, and each move of a live system's install (its stage, ten more percent written).
fn boot_steps(tx: &Store, node: &str, boot: &str, r: &NodeReport, first: bool, now: i64) -> Result<(), crate::store::StoreError> {
    let install = Component::LiveInstall.in_report(&r.components);
    let mut events = Vec::new();
    if first {
        events.push(crate::boot::reported_event(node, boot, install.is_some(), now));
    }
    if let Some(c) = install {
        let last = tx.last_install_detail(node)?;
        events.extend(crate::boot::install_event(node, boot, c, now, last.as_deref()));
    }
    if events.is_empty() {
        return Ok(());
    }
    tx.add_boot_events(&events)
}

fn write(store: &mut Store, jobs: Vec<Job>, hooks: &Hooks) {
    let now = now_ms();
    // Per job: its answer, and for a report whether it was new (false: a duplicate).
    let result = store.batch(|tx| {
        let mut out = Vec::with_capacity(jobs.len());
        for j in &jobs {
            out.push(match j {
                Job::Hello {
                    node, role, boot, version, ..
                } => {
                    tx.hello(node, role, boot, version, now)?;
                    (tx.highest(node, boot)?, None)
                }
                Job::Report { node, boot, report, .. } => {
                    let first = tx.highest(node, boot)? == 0;
                    let new = tx.insert(node, boot, report, now)?;
                    if new {
                        boot_steps(tx, node, boot, report, first, now)?;
                    }
                    (tx.highest(node, boot)?, Some(new))
                }
                Job::Prune { before_ms, .. } => (tx.prune(*before_ms)?, None),
            });
        }
        Ok(out)
    });
    // Answer only after the commit: an error fails the whole batch, and nobody is acked.
    match result {
        Ok(out) => {
            // Counted before anyone is acked: a read after an ack waits for a view holding it.
            hooks.changed.send_modify(|n| *n += 1);
            for (j, (h, new)) in jobs.into_iter().zip(out) {
                if let Job::Report { queued, .. } = &j {
                    hooks.metrics.report(new, queued.elapsed());
                }
                let _ = j.reply().send(Ok(h));
            }
        }
        Err(e) => {
            // Loud, but not a line per batch: the first few, then one in a hundred.
            static FAILED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = FAILED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if n < 5 || n.is_multiple_of(100) {
                tracing::error!("not stored, not acknowledged ({} batches so far): {e}", n + 1);
            }
            for j in jobs {
                if let Job::Report { queued, .. } = &j {
                    hooks.metrics.report(None, queued.elapsed());
                }
                let _ = j.reply().send(Err(IngestError::Store(e.to_string())));
            }
        }
    }
}
