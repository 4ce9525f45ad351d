//! One row of the agent's probe table and what it runs with: its cadence, deadline and switch,
//! the context a probe gets (the node's config, the D-Bus connections, what probes keep between
//! runs), and the deadlines probes share. The tables are `schedule::PROBES` and the host checks'
//! `host_checks::ROWS`; `schedule` runs them.

use crate::config::Config;
use crate::{kernel, machine};
use futures_util::future::BoxFuture;
use hardshift_proto::v1::{ComponentState, ContainerInfo, Health, PodInfo};
use hardshift_proto::vocab::{self, state, Component};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// sysfs and /proc reads.
pub const LOCAL: Duration = Duration::from_secs(2);
/// D-Bus, chronyc, journalctl, getent.
pub const ASK: Duration = Duration::from_secs(4);
/// A probe that bounds its own asking at ASK, and a second to put back what it keeps.
pub const ASK_BACKSTOP: Duration = Duration::from_secs(5);
/// Every peer at once (PINGS + 1 echoes of at most WAIT each, and a margin).
pub const PEERS: Duration = Duration::from_secs(7);
/// A network answer (the kubelet's /healthz, a connect, a resolver, etcd, CRI): each read is
/// bounded at 1–2 s by its own timeout; this is the backstop.
pub const NET: Duration = Duration::from_secs(5);

/// How often a probe runs.
pub enum Cadence {
    /// For every report: what a report must say fresh (the kubelet, the runtime, etcd, units).
    Report,
    /// Each round of the machine's probes, started on the report interval beside the reports;
    /// each report carries the latest round.
    Round,
    /// In the background, again after the period its outcome asks for (a probe that writes, or
    /// asks a registry, never runs per report); each report carries the latest outcome.
    Every(fn(&Config, &[ComponentState]) -> Duration),
}

/// One row of the table.
pub struct Probe {
    /// The components it reports: what a timeout is said as, and what tests hold the table to.
    pub components: &'static [Component],
    pub cadence: Cadence,
    /// The whole probe's deadline (a probe bounds its own reads within it).
    pub deadline: Duration,
    /// Whether this node's config turns it on.
    pub enabled: fn(&Config) -> bool,
    pub run: for<'a> fn(&'a Ctx) -> BoxFuture<'a, Vec<ComponentState>>,
}

/// What a probe runs with: the node's config, the D-Bus connections (the units' bus, and the
/// system bus for timedated), what probes keep between runs, and when it is.
pub struct Ctx {
    pub cfg: Arc<Config>,
    pub units: Option<zbus::Connection>,
    pub system: Option<zbus::Connection>,
    pub state: Arc<State>,
    pub uptime_s: u64,
    pub now_s: i64,
}

/// What probes keep between runs.
pub struct State {
    pub(crate) boot_id: String,
    pub(crate) boots: anyhow::Result<Vec<(i64, String)>>,
    /// The kernel log's counts and cursor (taken by a read, put back after it).
    pub(crate) kernel: Mutex<Option<kernel::KernelLog>>,
    pub(crate) net: Guarded,
    pub(crate) disk: Guarded,
    /// The CRI probe's pods and containers, for the report's lists.
    pub(crate) workloads: Mutex<(Vec<PodInfo>, Vec<ContainerInfo>)>,
    /// The live system's install, when the config asks for one.
    pub(crate) install: Arc<crate::live_install::Install>,
}

impl State {
    /// `record`: write this boot into the history (the running agent; `status` only reads).
    pub fn new(cfg: &Config, boot_id: &str, booted_s: i64, record: bool) -> State {
        let boots = if record {
            machine::remember_boot(&cfg.history_dir, boot_id, booted_s)
        } else {
            machine::read_boots(&cfg.history_dir).map(|b| machine::record_boot(b, boot_id, booted_s))
        };
        State {
            boot_id: boot_id.to_string(),
            boots,
            kernel: Mutex::new(Some(kernel::KernelLog::default())),
            net: Guarded::default(),
            disk: Guarded::default(),
            workloads: Mutex::default(),
            install: Arc::default(),
        }
    }

    /// Why the boot history could not be kept, if it could not.
    pub fn boots_error(&self) -> Option<String> {
        self.boots.as_ref().err().map(|e| e.to_string())
    }

    /// The pods and containers the last CRI probe listed.
    pub fn workloads(&self) -> (Vec<PodInfo>, Vec<ContainerInfo>) {
        self.workloads.lock().map(|w| w.clone()).unwrap_or_default()
    }
}

impl Default for Guarded {
    fn default() -> Self {
        Guarded(Arc::new(AtomicBool::new(false)))
    }
}

/// A blocking read with a deadline, never two at once: reads that can block in the kernel (sysfs
/// asks NIC drivers) run on a blocking thread, and one still stuck from before is not started
/// again, so a hung driver costs one thread, not one per report.
#[derive(Clone)]
pub struct Guarded(Arc<AtomicBool>);

impl Guarded {
    /// `f` on a blocking thread; None if it misses `deadline` or the last one is still stuck.
    pub async fn run<T: Send + 'static>(&self, deadline: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        if self.0.swap(true, Ordering::SeqCst) {
            return None;
        }
        let busy = self.0.clone();
        let h = tokio::task::spawn_blocking(move || {
            let r = f();
            busy.store(false, Ordering::SeqCst);
            r
        });
        tokio::time::timeout(deadline, h).await.ok()?.ok()
    }
}

/// A component that did not answer within its deadline.
pub fn timed_out(c: Component, deadline: Duration) -> ComponentState {
    vocab::component(
        c,
        Health::Unknown,
        state::TIMED_OUT,
        format!("no answer within {} s", deadline.as_secs()),
    )
}

pub fn always(_: &Config) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read stuck in the kernel costs its field: the deadline answers, and the stuck read is
    /// not started again while it hangs.
    #[tokio::test]
    async fn a_stuck_read_times_out_and_is_not_piled_up() {
        let g = Guarded::default();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let stuck = g.run(Duration::from_millis(100), move || rx.recv().ok());
        assert_eq!(stuck.await, None, "the deadline answers");
        let started = Arc::new(AtomicBool::new(false));
        let s2 = started.clone();
        assert_eq!(
            g.run(Duration::from_secs(5), move || s2.store(true, Ordering::SeqCst)).await,
            None,
            "not twice at once"
        );
        assert!(!started.load(Ordering::SeqCst));
        tx.send(()).unwrap();
        // Once it returns, the next read runs.
        let mut ok = None;
        for _ in 0..100 {
            ok = g.run(Duration::from_secs(5), || 7).await;
            if ok.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(ok, Some(7));
    }
}
