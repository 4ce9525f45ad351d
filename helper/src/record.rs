//! Boot events on their way into the collector's store: one writer thread takes them from a
//! bounded queue and stores each batch whole (one transaction, synchronous=FULL) before it takes
//! the next, so an event is on disk or still queued, never half-written. A queue that is full (a
//! broadcast storm of DHCP) drops the newest and counts them; the count is said when the helper
//! stops and in each batch's log line.

use hardshift_collector::boot::BootEvent;
use hardshift_collector::store::Store;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

/// Events queued and not yet stored, at most.
pub const QUEUE: usize = 50_000;
/// Events stored in one transaction, at most.
const BATCH: usize = 2_000;

/// Where the helper's parts hand their events.
#[derive(Clone)]
pub struct Recorder {
    tx: Option<SyncSender<BootEvent>>,
    dropped: Arc<AtomicU64>,
    /// Every event also goes here (tests, `--dry-run`), when set.
    tap: Option<SyncSender<BootEvent>>,
}

impl Recorder {
    /// A recorder that keeps nothing (a unit test's server).
    pub fn discard() -> Recorder {
        Recorder {
            tx: None,
            dropped: Arc::default(),
            tap: None,
        }
    }

    /// A recorder into the store at `db`, and the writer thread's handle: it ends once every
    /// clone of the recorder is dropped and the queue is stored.
    pub fn into_store(db: PathBuf) -> (Recorder, std::thread::JoinHandle<()>) {
        let (tx, rx) = sync_channel(QUEUE);
        let h = std::thread::Builder::new()
            .name("boot-events".into())
            .spawn(move || write(db, rx))
            .expect("a thread");
        (
            Recorder {
                tx: Some(tx),
                dropped: Arc::default(),
                tap: None,
            },
            h,
        )
    }

    /// The same recorder, every event also sent to `tap`.
    pub fn with_tap(mut self, tap: SyncSender<BootEvent>) -> Recorder {
        self.tap = Some(tap);
        self
    }

    pub fn record(&self, e: BootEvent) {
        tracing::info!(node = %e.node, mac = %e.mac, ip = %e.ip, "{} {}", e.step, e.detail);
        if let Some(t) = &self.tap {
            let _ = t.try_send(e.clone());
        }
        if let Some(tx) = &self.tx {
            if let Err(TrySendError::Full(_)) = tx.try_send(e) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Events dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

fn write(db: PathBuf, rx: Receiver<BootEvent>) {
    // The store's directory, as the collector makes it (this user's only), if it is first.
    if let Some(parent) = db.parent() {
        let _ = hardshift_bundle::fsio::make_dir_all(parent, 0o700);
    }
    // Tried a few times: a collector starting beside the helper may be making the store.
    let mut opened = Store::create(&db).and_then(|_| Store::open(&db));
    for _ in 0..20 {
        if opened.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
        opened = Store::create(&db).and_then(|_| Store::open(&db));
    }
    let mut store = match opened {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("boot events: {}: {e}; events are logged, not stored", db.display());
            // Drain, so the senders never block: they are logged above.
            for _ in rx {}
            return;
        }
    };
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(e) => batch.push(e),
                Err(_) => break,
            }
        }
        // A failed transaction is tried again once (a reader's lock past the busy timeout);
        // then the batch is named in the log and left.
        let stored = store
            .batch(|s| s.add_boot_events(&batch))
            .or_else(|_| store.batch(|s| s.add_boot_events(&batch)));
        if let Err(e) = stored {
            tracing::error!("boot events: {} not stored in {}: {e}", batch.len(), db.display());
        }
    }
}
