//! The machine's components (NICs, routes, addresses, time, kernel, boots, disk, FIPS, peers,
//! DNS wildcard and PTR), probed together, each with its own deadline: one that does not answer
//! in time is that component's "unknown: timed out", never a late or missing report. Reads that
//! can block in the kernel (sysfs asks NIC drivers) run on a blocking thread, and one still stuck
//! from before is not started again, so a hung driver costs one thread, not one per report.

use crate::{kernel, machine, names, nic, peers};
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{state, Component};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// sysfs and /proc reads.
const LOCAL: Duration = Duration::from_secs(2);
/// D-Bus, chronyc, journalctl, getent.
const ASK: Duration = Duration::from_secs(4);
/// Every peer at once (PINGS + 1 echoes of at most WAIT each, and a margin).
const PEERS: Duration = Duration::from_secs(7);

/// A component that did not answer within its deadline.
pub fn timed_out(c: Component, deadline: Duration) -> ComponentState {
    ComponentState {
        name: c.name().into(),
        health: Health::Unknown as i32,
        state: state::TIMED_OUT.into(),
        reason: format!("no answer within {} s", deadline.as_secs()),
        details: Default::default(),
    }
}

/// A blocking read with a deadline, never two at once.
#[derive(Default, Clone)]
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

/// What the probes keep between rounds.
pub struct Hardware {
    boot_id: String,
    boots: Result<Vec<(i64, String)>, String>,
    kernel: Option<kernel::KernelLog>,
    net: Guarded,
    disk: Guarded,
    journal: Option<std::path::PathBuf>,
}

impl Hardware {
    /// `record`: write this boot into the history (the running agent; `status` only reads).
    pub fn new(cfg: &crate::config::Config, boot_id: &str, booted_s: i64, record: bool) -> Hardware {
        let boots = if record {
            machine::remember_boot(&cfg.history_dir, boot_id, booted_s)
        } else {
            machine::read_boots(&cfg.history_dir).map(|b| machine::record_boot(b, boot_id, booted_s))
        };
        Hardware {
            boot_id: boot_id.to_string(),
            boots,
            kernel: Some(kernel::KernelLog::default()),
            net: Guarded::default(),
            disk: Guarded::default(),
            journal: cfg.journal_directory.clone(),
        }
    }

    /// Why the boot history could not be kept, if it could not.
    pub fn boots_error(&self) -> Option<&str> {
        self.boots.as_ref().err().map(String::as_str)
    }

    /// One round of every probe, at once.
    pub async fn probe(
        &mut self,
        cfg: &crate::config::Config,
        bus: Option<&zbus::Connection>,
        uptime_s: u64,
        now_s: i64,
    ) -> Vec<ComponentState> {
        let net = self.net.run(LOCAL, || nic::read(std::path::Path::new("/")));
        let disk = self.disk.run(LOCAL, machine::install_disk);
        let time = tokio::time::timeout(ASK, async {
            let td = match bus {
                Some(c) => machine::timedated(c).await,
                None => Err("no D-Bus system bus".to_string()),
            };
            // chrony's own view, when it is there; never longer than the rest of the deadline.
            let ch = machine::chrony(ASK / 2).await;
            machine::judge_time(&td, ch.as_ref(), uptime_s)
        });
        // The kernel log is read from where the last read stopped; a read that times out keeps
        // the counts so far (the next one starts from the same cursor).
        let mut klog = self.kernel.take().unwrap_or_default();
        let (journal, boot) = (self.journal.clone(), self.boot_id.clone());
        let kern = async move {
            let r = tokio::time::timeout(ASK, kernel::read(journal.as_deref(), &boot, &mut klog, ASK)).await;
            let c = match &r {
                Err(_) => timed_out(Component::Kernel, ASK),
                Ok(Err(e)) => kernel::judge(&Err(e.clone())),
                Ok(Ok(())) => kernel::judge(&Ok(klog.clone())),
            };
            (c, klog)
        };
        let peers = async {
            match cfg.peers.is_empty() {
                true => None,
                false => Some(peers::probe_all(&cfg.peers, PEERS).await),
            }
        };
        let wildcard = async {
            let d = cfg.cluster_domain.as_deref()?;
            let name = names::random_name(d);
            let a = names::getent("ahosts", &name, ASK).await;
            Some(names::judge_wildcard(&name, &a))
        };
        let ptr = async {
            let addr = cfg.address?;
            let a = names::getent("hosts", &addr.to_string(), ASK).await;
            Some(names::judge_ptr(&cfg.node, addr, &a))
        };
        let (net, disk, time, (kern, klog), peers, wildcard, ptr) = tokio::join!(net, disk, time, kern, peers, wildcard, ptr);
        self.kernel = Some(klog);
        let mut out = match net {
            Some(s) => vec![
                nic::judge_nics(&s),
                nic::judge_route(&s),
                nic::judge_machine_network(&s.addresses, &cfg.machine_network, cfg.address),
            ],
            None => vec![
                timed_out(Component::Nic, LOCAL),
                timed_out(Component::Route, LOCAL),
                timed_out(Component::MachineNetwork, LOCAL),
            ],
        };
        if let Some(p) = &peers {
            out.push(peers::judge_peers(&cfg.role, p));
            out.push(peers::judge_mtu(p));
        }
        out.push(time.unwrap_or_else(|_| timed_out(Component::TimeSync, ASK)));
        out.push(kern);
        out.push(machine::judge_boots(&self.boots, now_s));
        out.push(disk.map_or_else(|| timed_out(Component::InstallDisk, LOCAL), |d| machine::judge_disk(&d)));
        out.push(machine::judge_fips(cfg.fips, machine::fips_enabled(std::path::Path::new("/proc"))));
        out.extend(wildcard);
        out.extend(ptr);
        out
    }
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
