//! `hardshift lab serve`: the helper in one process. It checks first (the bundle's files, the
//! boot files the nodes will ask for, every port), then runs dnsmasq and HAProxy supervised,
//! serves the boot files itself, runs the collector beside them unless told not to, and turns
//! every boot step into an event of the node it belongs to. SIGINT or SIGTERM stops it all.

use crate::dnsmasq_log;
use crate::http::Site;
use crate::plan::{plan, Options, Plan};
use crate::record::Recorder;
use crate::supervise::{Program, Supervisor};
use hardshift_bundle::Inventory;
use hardshift_collector::boot::{BootEvent, Step};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why `lab serve` did not serve: what the admin must fix (exit 2), or else (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Input(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The inventory's view of a machine: the node a MAC or an address belongs to.
#[derive(Clone)]
pub struct Names {
    nodes: Vec<(String, std::net::IpAddr, String)>,
}

impl Names {
    pub fn new(inv: &Inventory) -> Names {
        Names {
            nodes: inv
                .nodes
                .iter()
                .map(|n| (n.name.clone(), n.ip, n.mac.to_ascii_lowercase()))
                .collect(),
        }
    }

    /// The node of a MAC, else of an address; "" when neither is the inventory's.
    pub fn node(&self, mac: &str, ip: &str) -> String {
        let by_mac = (!mac.is_empty()).then(|| self.nodes.iter().find(|(_, _, m)| m == mac)).flatten();
        let by_ip = || {
            ip.parse()
                .ok()
                .and_then(|a: std::net::IpAddr| self.nodes.iter().find(|(_, i, _)| *i == a))
        };
        by_mac.or_else(by_ip).map(|(n, _, _)| n.clone()).unwrap_or_default()
    }

    /// The MAC the inventory gives a node.
    pub fn mac_of(&self, node: &str) -> String {
        self.nodes
            .iter()
            .find(|(n, _, _)| n == node)
            .map(|(_, _, m)| m.clone())
            .unwrap_or_default()
    }

    pub fn all(&self) -> &[(String, std::net::IpAddr, String)] {
        &self.nodes
    }
}

/// A boot event from one of dnsmasq's lines, named by the inventory.
pub fn dnsmasq_event(names: &Names, line: &str, at_ms: i64) -> Option<BootEvent> {
    let s = dnsmasq_log::read_line(line)?;
    let node = names.node(&s.mac, &s.ip);
    let mac = if s.mac.is_empty() { names.mac_of(&node) } else { s.mac };
    Some(BootEvent {
        at_ms,
        node,
        mac,
        ip: s.ip,
        step: s.step,
        detail: s.detail,
    })
}

/// HAProxy's word on a backend server (`Server api-backend/master-0 is DOWN, reason: ...`), as
/// an event of that node when the server is one; or a connection to the machine-config server
/// in its tcplog (`IP:PORT [date] machine-config machine-config-backend/SERVER Tw/Tc/Tt BYTES
/// STATE ...`), as an event of the node that asked.
pub fn haproxy_event(names: &Names, line: &str, at_ms: i64) -> Option<BootEvent> {
    if let Some(e) = mcs_request(names, line, at_ms) {
        return Some(e);
    }
    // HAProxy says a state change twice with a log target on stderr: as its warning
    // ("[WARNING] ... Server ...") and through the logger (a bare "Server ..."): the warning counts.
    if !line.starts_with('[') {
        return None;
    }
    let at = line.find("Server ")?;
    let rest = &line[at + "Server ".len()..];
    let (server, state) = rest.split_once(" is ")?;
    let (_, name) = server.split_once('/')?;
    let up = state.starts_with("UP");
    if !up && !state.starts_with("DOWN") {
        return None;
    }
    let node = if names.all().iter().any(|(n, _, _)| n == name) {
        name.to_string()
    } else {
        String::new()
    };
    Some(BootEvent {
        at_ms,
        mac: names.mac_of(&node),
        node,
        ip: String::new(),
        step: Step::Backend,
        detail: format!("{server} is {}", state.trim()),
    })
}

/// A tcplog line of the machine-config frontend, as an event of the node at its source address.
fn mcs_request(names: &Names, line: &str, at_ms: i64) -> Option<BootEvent> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let (src, frontend) = (*w.first()?, *w.get(2)?);
    if frontend != "machine-config" || !w.get(1)?.starts_with('[') {
        return None;
    }
    let ip = src.rsplit_once(':')?.0.trim_matches(['[', ']']).to_string();
    let server = w.get(3)?.split_once('/').map(|(_, s)| s).unwrap_or_default();
    let (bytes, state) = (w.get(5).copied().unwrap_or_default(), w.get(6).copied().unwrap_or_default());
    // HAProxy's termination state: its first letter says who ended it ("-" : normally), the
    // second at which stage ("C": connecting to the server).
    let how = match state.as_bytes() {
        [b'-', b'-', ..] => "answered".to_string(),
        [b'S', b'C', ..] => "no server answered (the bootstrap's, or a master's, machine-config server is not up)".to_string(),
        _ => format!("ended {state}"),
    };
    let node = names.node("", &ip);
    Some(BootEvent {
        at_ms,
        mac: names.mac_of(&node),
        node,
        ip,
        step: Step::Mcs,
        detail: format!("to {server}: {bytes} B, {how}"),
    })
}

/// Make the TFTP root and dnsmasq's config under the plan's state directory.
fn prepare(p: &Plan) -> Result<(), Error> {
    let tftp = p.state.join("tftp");
    hardshift_bundle::fsio::make_dir_all(&p.state, 0o700).map_err(io(&p.state))?;
    // Made afresh each start: a link the last bundle made must not outlive it.
    if tftp.exists() {
        std::fs::remove_dir_all(&tftp).map_err(io(&tftp))?;
    }
    hardshift_bundle::fsio::make_dir_all(&tftp, 0o755).map_err(io(&tftp))?;
    for (name, target) in &p.tftp {
        let link = tftp.join(name);
        std::os::unix::fs::symlink(target, &link).map_err(io(&link))?;
    }
    let log = p.state.join(crate::plan::HAPROXY_LOG_CFG);
    hardshift_bundle::fsio::write_file_atomic(&log, crate::plan::HAPROXY_LOG.as_bytes(), 0o644).map_err(io(&log))?;
    let conf = p.state.join("dnsmasq.conf");
    hardshift_bundle::fsio::write_file_atomic(&conf, p.dnsmasq_conf.as_bytes(), 0o644).map_err(io(&conf))
}

/// What `run` does besides the helper's own parts.
pub struct Run {
    pub options: Options,
    /// The collector's store (boot events go there too).
    pub db: PathBuf,
    /// The collector to run in this process, if any.
    pub collector: Option<hardshift_collector::bundle::Serve>,
    /// Print the plan and stop.
    pub dry_run: bool,
}

/// Check, start, serve until SIGINT/SIGTERM, stop everything.
pub fn run(r: Run) -> Result<(), Error> {
    let o = &r.options;
    let inv = Inventory::load(&o.dir).map_err(|e| Error::Input(e.to_string()))?;
    let p = plan(&inv, o).map_err(Error::Input)?;
    if r.dry_run {
        print!("{}", p.describe());
        return Ok(());
    }
    if !p.missing.is_empty() {
        return Err(Error::Input(format!(
            "the nodes would ask for what is not here:\n  {}",
            p.missing.join("\n  ")
        )));
    }
    let taken = crate::ports::check(&p.needs);
    if !taken.is_empty() {
        let lines: Vec<String> = taken.iter().map(ToString::to_string).collect();
        return Err(Error::Input(format!(
            "ports the helper needs are not free (stop what holds them, e.g. libvirt's dnsmasq on the lab network: `<dns enable='no'/>` and no `<dhcp>` in its XML):\n  {}",
            lines.join("\n  ")
        )));
    }
    let lock_path = p.state.join("lock");
    hardshift_bundle::fsio::make_dir_all(&p.state, 0o700).map_err(io(&p.state))?;
    let _lock =
        hardshift_bundle::fsio::lock_file(&lock_path, "lab serve").map_err(|e| Error::Input(format!("{}: {e}", o.dir.display())))?;
    prepare(&p)?;

    let (recorder, writer) = Recorder::into_store(r.db.clone());
    let names = Names::new(&inv);
    let (n1, rec1) = (names.clone(), recorder.clone());
    let (n2, rec2) = (names.clone(), recorder.clone());
    let programs = vec![
        Program {
            name: "dnsmasq",
            argv: p.dnsmasq.clone(),
            log: p.state.join("dnsmasq.log"),
            on_line: Box::new(move |l| {
                if let Some(e) = dnsmasq_event(&n1, l, hardshift_proto::now_ms()) {
                    rec1.record(e);
                }
            }),
        },
        Program {
            name: "haproxy",
            argv: p.haproxy.clone(),
            log: p.state.join("haproxy.log"),
            on_line: Box::new(move |l| {
                if let Some(e) = haproxy_event(&n2, l, hardshift_proto::now_ms()) {
                    rec2.record(e);
                }
            }),
        },
    ];
    let mut supervisor = Supervisor::start(programs, recorder.clone()).map_err(Error::Other)?;
    let collector = r.collector.map(|serve| {
        std::thread::Builder::new()
            .name("collector".into())
            .spawn(move || -> Result<(), String> {
                let (setup, _lock) = hardshift_collector::bundle::setup(serve).map_err(|e| format!("{e:?}"))?;
                hardshift_collector::daemon::run(setup).map_err(|e| format!("{e:?}"))
            })
            .expect("a thread")
    });
    let site = Arc::new(Site {
        dir: o.dir.clone(),
        rhcos: o.rhcos.clone(),
        prefix: p.prefix.clone(),
        nodes: names.all().to_vec(),
        serve_to_any: o.serve_to_any,
        recorder: recorder.clone(),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Other(e.to_string()))?;
    let served = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(p.http)
            .await
            .map_err(io(Path::new(&p.http.to_string())))?;
        eprintln!(
            "lab serve: DHCP, DNS and TFTP on {} (dnsmasq), HAProxy, boot files on http://{}{}/; Ctrl-C stops",
            p.interface, p.http, p.prefix
        );
        let app = crate::http::app(site).into_make_service_with_connect_info::<std::net::SocketAddr>();
        // SIGHUP (`lab pivot`): HAProxy on the post-pivot config, once the mark is there.
        let (handle, mark, dir) = (supervisor.handle(), p.state.join(crate::plan::PIVOTED), o.dir.clone());
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let Ok(mut hup) = signal(SignalKind::hangup()) else { return };
            while hup.recv().await.is_some() {
                if mark.exists() {
                    handle.replace("haproxy", crate::plan::haproxy_post_pivot(&dir));
                }
            }
        });
        let stop = async {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        };
        axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await
            .map_err(|e| Error::Other(format!("the HTTP server: {e}")))
    });
    supervisor.stop();
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    if let Some(c) = collector {
        match c.join() {
            Ok(Err(e)) => eprintln!("lab serve: the collector: {e}"),
            Err(_) => eprintln!("lab serve: the collector panicked"),
            Ok(Ok(())) => {}
        }
    }
    let dropped = recorder.dropped();
    drop(recorder);
    let _ = writer.join();
    if dropped > 0 {
        eprintln!("lab serve: {dropped} boot events were dropped (the queue was full)");
    }
    served
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names {
            nodes: vec![
                ("master-0".into(), "192.168.126.101".parse().unwrap(), "52:54:00:aa:bb:01".into()),
                ("bootstrap".into(), "192.168.126.100".parse().unwrap(), "52:54:00:aa:bb:00".into()),
            ],
        }
    }

    #[test]
    fn dnsmasq_lines_become_events_of_their_node() {
        let n = names();
        let ack = dnsmasq_event(&n, "dnsmasq-dhcp[1]: 9 DHCPACK(br0) 192.168.126.101 52:54:00:AA:BB:01 master-0", 5).unwrap();
        assert_eq!((ack.node.as_str(), ack.step, ack.at_ms), ("master-0", Step::DhcpAck, 5));
        let tftp = dnsmasq_event(&n, "dnsmasq-tftp[1]: sent /t/undionly.kpxe to 192.168.126.100", 6).unwrap();
        assert_eq!((tftp.node.as_str(), tftp.mac.as_str()), ("bootstrap", "52:54:00:aa:bb:00"));
        let stranger = dnsmasq_event(&n, "dnsmasq-dhcp[1]: 9 DHCPDISCOVER(br0) 52:54:00:aa:bb:10 no address available", 7).unwrap();
        assert_eq!((stranger.node.as_str(), stranger.step), ("", Step::DhcpNoAddress));
        assert!(dnsmasq_event(&n, "dnsmasq[1]: started", 8).is_none());
    }

    /// HAProxy's state-change lines (HAProxy 2.6, `-db`): a node's server going up or down.
    #[test]
    fn haproxy_state_changes_are_events_of_their_server() {
        let n = names();
        let down = haproxy_event(
            &n,
            "[WARNING]  (8) : Server api-backend/bootstrap is DOWN, reason: Layer4 connection problem, info: \"Connection refused\", check duration: 0ms. 3 active and 0 backup servers left.",
            1,
        )
        .unwrap();
        assert_eq!((down.node.as_str(), down.step), ("bootstrap", Step::Backend));
        assert!(down.detail.starts_with("api-backend/bootstrap is DOWN"), "{}", down.detail);
        let up = haproxy_event(
            &n,
            "[WARNING]  (8) : Server machine-config-backend/master-0 is UP, reason: Layer4 check passed",
            2,
        )
        .unwrap();
        assert_eq!(up.node, "master-0");
        assert!(haproxy_event(&n, "[NOTICE]   (7) : New worker (8) forked", 3).is_none());
        assert!(
            haproxy_event(&n, "Server machine-config-backend/master-0 is UP, reason: Layer4 check passed", 3).is_none(),
            "the logger's copy"
        );
        // tcplog lines (HAProxy 2.6, `log stderr format raw`): the machine-config frontend's only.
        let mcs = haproxy_event(
            &n,
            "192.168.126.101:40522 [07/Dec/2026:21:50:01.123] machine-config machine-config-backend/bootstrap 1/-1/3003 0 SC 1/1/0/0/3 0/0",
            4,
        )
        .unwrap();
        assert_eq!(
            (mcs.node.as_str(), mcs.step, mcs.ip.as_str()),
            ("master-0", Step::Mcs, "192.168.126.101")
        );
        assert!(mcs.detail.starts_with("to bootstrap: 0 B, no server answered"), "{}", mcs.detail);
        let ok = haproxy_event(
            &n,
            "192.168.126.101:40524 [07/Dec/2026:21:50:02.001] machine-config machine-config-backend/master-0 1/0/35 10297881 -- 1/1/0/0/0 0/0",
            5,
        )
        .unwrap();
        assert_eq!(ok.detail, "to master-0: 10297881 B, answered");
        assert!(haproxy_event(
            &n,
            "192.168.126.101:40530 [07/Dec/2026:21:50:03.001] api api-backend/master-0 1/0/35 100 -- 1/1/0/0/0 0/0",
            6
        )
        .is_none());
    }
}
