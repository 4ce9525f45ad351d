//! The agent's probes as one table (`PROBES`), driven by one scheduler. A row says which
//! components it reports, how often (each report, each round of the machine's probes beside the
//! reports, or in the background on its own period), its deadline, whether the node's config
//! turns it on, and how it runs. A probe that misses its deadline reports each of its components
//! as "unknown: timed out", never late and never missing; the probes of a report, and of a round,
//! run at once, so one hung answer holds no other.
//!
//! The host's small checks keep their rows beside their readers and judges
//! (`host_checks::ROWS`); the table the scheduler runs is this one, then those.

use crate::config::Config;
use crate::probe::{always, timed_out, Cadence, Probe, ASK, ASK_BACKSTOP, LOCAL, NET, PEERS};
pub use crate::probe::{Ctx, State};
use crate::{cri, disk, etcd, host_checks, install, kernel, machine, names, nic, peers, probes, registry, systemd};
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{self, Component};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

/// Every row the agent runs: this table, then the host checks'. A row's index here is its place
/// in a report.
static TABLE: LazyLock<Vec<&'static Probe>> = LazyLock::new(|| PROBES.iter().chain(host_checks::ROWS).collect());

fn table() -> &'static [&'static Probe] {
    &TABLE
}

/// The table, in the order a report lists its components (the host checks' rows follow).
pub const PROBES: &[Probe] = &[
    Probe {
        components: &[Component::Kubelet],
        cadence: Cadence::Report,
        deadline: NET,
        // "" turns it off: the live system has no kubelet.
        enabled: |c| !c.kubelet_healthz.is_empty(),
        run: |x| Box::pin(async move { vec![probes::kubelet_healthz(&x.cfg.kubelet_healthz).await] }),
    },
    // "" turns it off: the bootstrap's standalone kubelet never gets a client certificate.
    Probe {
        components: &[Component::KubeletCert],
        cadence: Cadence::Report,
        deadline: LOCAL,
        enabled: |c| !c.kubelet_cert.as_os_str().is_empty(),
        run: |x| Box::pin(async move { vec![probes::kubelet_cert(&x.cfg.kubelet_cert, x.now_s)] }),
    },
    Probe {
        components: &[Component::Bootkube],
        cadence: Cadence::Report,
        deadline: LOCAL,
        enabled: |c| c.bootkube_progress.is_some(),
        run: |x| Box::pin(async move { x.cfg.bootkube_progress.as_deref().map(install::bootkube).into_iter().collect() }),
    },
    Probe {
        components: &[Component::InPlace],
        cadence: Cadence::Report,
        deadline: LOCAL,
        enabled: |c| c.in_place_progress.is_some(),
        run: |x| Box::pin(async move { x.cfg.in_place_progress.as_deref().map(install::in_place).into_iter().collect() }),
    },
    Probe {
        components: &[Component::LiveInstall],
        cadence: Cadence::Report,
        deadline: LOCAL,
        enabled: |c| c.live_install.is_some(),
        run: |x| Box::pin(async move { x.state.install.component(x.now_s).into_iter().collect() }),
    },
    // etcd's disk, measured at start and hourly (it writes, so never per report; a failure is
    // tried again in a minute).
    Probe {
        components: &[Component::EtcdDisk],
        cadence: Cadence::Every(|_, last| match last.iter().any(disk::not_measured) {
            true => Duration::from_secs(60),
            false => Duration::from_secs(3600),
        }),
        deadline: Duration::from_secs(60),
        enabled: |c| c.etcd_disk.is_some(),
        run: |x| {
            Box::pin(async move {
                let Some(dir) = x.cfg.etcd_disk.clone() else { return vec![] };
                let d = dir.clone();
                let r = tokio::task::spawn_blocking(move || disk::fdatasync_probe(&d, disk::SAMPLES, disk::BUDGET))
                    .await
                    .unwrap_or_else(|e| Err(e.into()));
                vec![disk::component(&dir, &r)]
            })
        },
    },
    // The registry, asked every `every_s` (a HEAD per image), not per report.
    Probe {
        components: &[Component::Registry],
        cadence: Cadence::Every(|c, _| Duration::from_secs(c.registry.as_ref().map_or(60, |r| r.every_s).max(1))),
        deadline: Duration::from_secs(120),
        enabled: |c| c.registry.is_some(),
        run: |x| {
            Box::pin(async move {
                futures_util::future::OptionFuture::from(x.cfg.registry.as_ref().map(registry::probe))
                    .await
                    .into_iter()
                    .collect()
            })
        },
    },
    Probe {
        components: &[Component::Dns],
        cadence: Cadence::Report,
        deadline: NET,
        enabled: |c| !c.dns.is_empty(),
        run: |x| {
            Box::pin(async move {
                let answers = install::resolve(&x.cfg.dns, Duration::from_secs(2)).await;
                vec![install::dns(&x.cfg.dns, &answers)]
            })
        },
    },
    Probe {
        components: &[Component::Lb],
        cadence: Cadence::Report,
        deadline: NET,
        enabled: |c| !c.endpoint.is_empty(),
        run: |x| {
            Box::pin(async move {
                let results = install::connect_all(&x.cfg.endpoint, Duration::from_secs(1)).await;
                vec![install::lb(&x.cfg.endpoint, &results)]
            })
        },
    },
    Probe {
        components: &[Component::Cri],
        cadence: Cadence::Report,
        deadline: NET,
        enabled: |c| !c.cri_socket.as_os_str().is_empty(),
        run: |x| {
            Box::pin(async move {
                let (c, pods, containers) = cri::probe(&x.cfg.cri_socket).await;
                if let Ok(mut w) = x.state.workloads.lock() {
                    *w = (pods, containers);
                }
                vec![c]
            })
        },
    },
    Probe {
        components: &[Component::Etcd],
        cadence: Cadence::Report,
        deadline: NET,
        enabled: |c| c.etcd.is_some(),
        run: |x| {
            Box::pin(async move {
                futures_util::future::OptionFuture::from(x.cfg.etcd.as_ref().map(etcd::probe))
                    .await
                    .into_iter()
                    .collect()
            })
        },
    },
    // The configured units' states over D-Bus; one "unreachable" component when the bus is not.
    Probe {
        components: &[Component::Systemd],
        cadence: Cadence::Report,
        deadline: NET,
        enabled: |c| !c.units.is_empty(),
        run: |x| {
            Box::pin(async move {
                match &x.units {
                    Some(conn) => {
                        let mut out = Vec::with_capacity(x.cfg.units.len());
                        for u in &x.cfg.units {
                            out.push(systemd::unit(conn, u).await);
                        }
                        out
                    }
                    None => vec![vocab::component(
                        Component::Systemd,
                        Health::Unknown,
                        "unreachable",
                        format!("cannot reach the D-Bus {} bus", x.cfg.systemd_bus),
                    )],
                }
            })
        },
    },
    // One read of sysfs and /proc judged three ways.
    Probe {
        components: &[Component::Nic, Component::Route, Component::MachineNetwork],
        cadence: Cadence::Round,
        deadline: LOCAL,
        enabled: always,
        run: |x| {
            Box::pin(async move {
                match x.state.net.run(LOCAL, || nic::read(std::path::Path::new("/"))).await {
                    Some(s) => vec![
                        nic::judge_nics(&s),
                        nic::judge_route(&s),
                        nic::judge_machine_network(&s.addresses, &x.cfg.machine_network, x.cfg.address),
                    ],
                    None => [Component::Nic, Component::Route, Component::MachineNetwork]
                        .map(|c| timed_out(c, LOCAL))
                        .into(),
                }
            })
        },
    },
    Probe {
        components: &[Component::Peers, Component::PathMtu],
        cadence: Cadence::Round,
        deadline: PEERS,
        enabled: |c| !c.peers.is_empty(),
        run: |x| {
            Box::pin(async move {
                let p = peers::probe_all(&x.cfg.peers, PEERS).await;
                vec![peers::judge_peers(&x.cfg.role, &p), peers::judge_mtu(&p)]
            })
        },
    },
    Probe {
        components: &[Component::TimeSync],
        cadence: Cadence::Round,
        deadline: ASK,
        enabled: always,
        run: |x| {
            Box::pin(async move {
                let td = match &x.system {
                    Some(c) => machine::timedated(c).await,
                    None => Err(anyhow::anyhow!("no D-Bus system bus")),
                };
                // chrony's own view, when it is there; never longer than the rest of the deadline.
                let ch = machine::chrony(ASK / 2).await;
                vec![machine::judge_time(&td, ch.as_ref(), x.uptime_s)]
            })
        },
    },
    // The kernel log is read from where the last read stopped; a read that times out keeps the
    // counts so far (the next one starts from the same cursor). Its own timeout is inside the
    // deadline, so the log is always put back.
    Probe {
        components: &[Component::Kernel],
        cadence: Cadence::Round,
        deadline: ASK_BACKSTOP,
        enabled: always,
        run: |x| {
            Box::pin(async move {
                let mut klog = x.state.kernel.lock().ok().and_then(|mut k| k.take()).unwrap_or_default();
                let journal = x.cfg.journal_directory.as_deref();
                let r = tokio::time::timeout(ASK, kernel::read(journal, &x.state.boot_id, &mut klog, ASK)).await;
                let c = match r {
                    Err(_) => timed_out(Component::Kernel, ASK),
                    Ok(Err(e)) => kernel::judge(&Err(e)),
                    Ok(Ok(())) => kernel::judge(&Ok(klog.clone())),
                };
                if let Ok(mut k) = x.state.kernel.lock() {
                    *k = Some(klog);
                }
                vec![c]
            })
        },
    },
    Probe {
        components: &[Component::Boots],
        cadence: Cadence::Round,
        deadline: LOCAL,
        enabled: always,
        run: |x| Box::pin(async move { vec![machine::judge_boots(&x.state.boots, x.now_s)] }),
    },
    Probe {
        components: &[Component::InstallDisk],
        cadence: Cadence::Round,
        deadline: LOCAL,
        // The live system runs from memory and another disk: its install reports the disk it
        // writes (`live-install`).
        enabled: |c| c.live_install.is_none(),
        run: |x| {
            Box::pin(async move {
                let d = x.state.disk.run(LOCAL, machine::install_disk).await;
                vec![d.map_or_else(|| timed_out(Component::InstallDisk, LOCAL), |d| machine::judge_disk(&d))]
            })
        },
    },
    Probe {
        components: &[Component::DnsWildcard],
        cadence: Cadence::Round,
        deadline: ASK_BACKSTOP,
        enabled: |c| c.cluster_domain.is_some(),
        run: |x| {
            Box::pin(async move {
                let Some(d) = x.cfg.cluster_domain.as_deref() else { return vec![] };
                let name = names::random_name(d);
                let a = names::getent("ahosts", &name, ASK).await;
                vec![names::judge_wildcard(&name, &a)]
            })
        },
    },
    Probe {
        components: &[Component::DnsPtr],
        cadence: Cadence::Round,
        deadline: ASK_BACKSTOP,
        enabled: |c| c.address.is_some(),
        run: |x| {
            Box::pin(async move {
                let Some(addr) = x.cfg.address else { return vec![] };
                let a = names::getent("hosts", &addr.to_string(), ASK).await;
                vec![names::judge_ptr(&x.cfg.node, addr, &a)]
            })
        },
    },
];

/// One probe within its deadline; past it, each of its components timed out.
async fn bounded(p: &Probe, x: &Ctx) -> Vec<ComponentState> {
    match tokio::time::timeout(p.deadline, (p.run)(x)).await {
        Ok(v) => v,
        Err(_) => p.components.iter().map(|c| timed_out(*c, p.deadline)).collect(),
    }
}

/// The enabled probes of `cadence`'s kind, at once; each one's outcome by its row's index.
pub async fn run_all(x: &Ctx, kind: fn(&Cadence) -> bool) -> Vec<(usize, Vec<ComponentState>)> {
    let rows: Vec<(usize, &Probe)> = table()
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, p)| kind(&p.cadence) && (p.enabled)(&x.cfg))
        .collect();
    let outcomes = futures_util::future::join_all(rows.iter().map(|(_, p)| bounded(p, x))).await;
    rows.into_iter().map(|(i, _)| i).zip(outcomes).collect()
}

pub fn is_report(c: &Cadence) -> bool {
    matches!(c, Cadence::Report)
}

pub fn is_round(c: &Cadence) -> bool {
    matches!(c, Cadence::Round)
}

/// The latest outcome of each round and background probe, by row, for the reports to carry.
#[derive(Default)]
pub struct Latest(Mutex<Vec<Option<Vec<ComponentState>>>>);

impl Latest {
    pub fn set(&self, row: usize, v: Vec<ComponentState>) {
        if let Ok(mut slots) = self.0.lock() {
            if slots.len() < table().len() {
                slots.resize(table().len(), None);
            }
            slots[row] = Some(v);
        }
    }

    /// A report's components: this report's probes where they ran, the latest outcome of the
    /// others, in the table's order.
    pub fn assemble(&self, now: Vec<(usize, Vec<ComponentState>)>) -> Vec<ComponentState> {
        let slots = self.0.lock().map(|s| s.clone()).unwrap_or_default();
        let mut by_row: Vec<Option<Vec<ComponentState>>> = vec![None; table().len()];
        for (i, v) in now {
            by_row[i] = Some(v);
        }
        by_row
            .into_iter()
            .enumerate()
            .flat_map(|(i, v)| v.or_else(|| slots.get(i).cloned().flatten()).unwrap_or_default())
            .collect()
    }
}

/// Each background probe in its own task, forever: run, keep the outcome, wait the period it asks.
pub fn spawn_background(cfg: Arc<Config>, state: Arc<State>, latest: Arc<Latest>) {
    for (row, p) in table().iter().copied().enumerate() {
        let Cadence::Every(period) = p.cadence else { continue };
        if !(p.enabled)(&cfg) {
            continue;
        }
        let (cfg, state, latest) = (cfg.clone(), state.clone(), latest.clone());
        tokio::spawn(async move {
            loop {
                let x = Ctx {
                    cfg: cfg.clone(),
                    units: None,
                    system: None,
                    state: state.clone(),
                    uptime_s: 0,
                    now_s: hardshift_proto::now_ms() / 1000,
                };
                let v = bounded(p, &x).await;
                let again = period(&cfg, &v);
                latest.set(row, v);
                tokio::time::sleep(again).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hardshift_proto::vocab::state;

    /// A node's config with only what every config must say.
    fn config() -> Config {
        let toml = "collector = \"c:9443\"\nnode = \"n\"\nca = \"/ca\"\ncert = \"/c\"\nkey = \"/k\"\n";
        hardshift_agent_config::parse(("agent.toml", toml), &[]).unwrap()
    }

    /// Every component of the vocabulary is some row's (but the watched units, which are named by
    /// their unit), and no two rows report the same one.
    #[test]
    fn every_component_has_exactly_one_row() {
        for c in Component::ALL {
            let rows = table().iter().filter(|p| p.components.contains(&c)).count();
            assert_eq!(rows, 1, "{c:?} is reported by {rows} rows");
        }
        let listed: usize = table().iter().map(|p| p.components.len()).sum();
        assert_eq!(listed, Component::ALL.len());
    }

    /// A probe past its deadline says each of its components timed out, and the others are
    /// not held.
    #[tokio::test]
    async fn a_probe_past_its_deadline_is_each_of_its_components_timed_out() {
        let slow = Probe {
            components: &[Component::Nic, Component::Route],
            cadence: Cadence::Round,
            deadline: Duration::from_millis(200),
            enabled: always,
            run: |_| {
                Box::pin(async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    vec![]
                })
            },
        };
        let x = Ctx {
            cfg: Arc::new(config()),
            units: None,
            system: None,
            state: Arc::new(State::new(&config(), "b", 0, false)),
            uptime_s: 0,
            now_s: 0,
        };
        let got = bounded(&slow, &x).await;
        let said: Vec<(&str, &str)> = got.iter().map(|c| (c.name.as_str(), c.state.as_str())).collect();
        assert_eq!(said, [("nic", state::TIMED_OUT), ("route", state::TIMED_OUT)]);
        assert_eq!(got[0].health, Health::Unknown as i32);
    }

    /// A report lists this report's probes and the latest of the others, in the table's order.
    #[test]
    fn a_report_keeps_the_tables_order() {
        let latest = Latest::default();
        let c = |n: Component| vocab::component(n, Health::Ok, "ok", String::new());
        let row = |n: Component| table().iter().position(|p| p.components.contains(&n)).unwrap();
        latest.set(row(Component::Boots), vec![c(Component::Boots)]);
        latest.set(row(Component::EtcdDisk), vec![c(Component::EtcdDisk)]);
        let v = latest.assemble(vec![
            (row(Component::Cri), vec![c(Component::Cri)]),
            (row(Component::Kubelet), vec![c(Component::Kubelet)]),
        ]);
        let names: Vec<&str> = v.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["kubelet", "etcd-disk", "cri", "boots"]);
    }
}
