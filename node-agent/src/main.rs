//! `hardshift-agent`: runs on every node from first boot; probes the node and streams reports to
//! the collector on the admin's workstation. It never runs a command it was sent.
//!
//!   hardshift-agent [--config /etc/hardshift/agent.toml] [run]    run
//!   hardshift-agent status [--json]                                print the local view once
//!   hardshift-agent logs UNIT [-n N] | logs --container SEL [-n N] the bounded debug answers, locally

mod approve;
mod client;
mod config;
mod cri;
mod debug;
mod disk;
mod etcd;
mod host;
mod host_checks;
mod in_place;
mod install;
mod kernel;
mod live_install;
mod machine;
mod names;
mod nic;
mod outbox;
mod peers;
mod probe;
mod probes;
mod registry;
mod schedule;
mod seq_state;
mod state_file;
mod systemd;
mod unread;

use hardshift_proto::v1::{ComponentState, NodeReport};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hardshift_proto::now_ms;

/// One report: this report's probes (`now`, run at once), with the latest round of the
/// machine's probes and of the background ones, in the table's order. `clock` is this node's
/// offset to the collector's clock when known.
fn report(x: &schedule::Ctx, latest: &schedule::Latest, now: Vec<(usize, Vec<ComponentState>)>, clock: Option<i64>) -> NodeReport {
    let mut host = host::probe();
    if let Some(off) = clock {
        host.clock_offset_ms = off;
        host.clock_offset_known = true;
    }
    let components = latest.assemble(now);
    let (pods, containers) = x.state.workloads();
    NodeReport {
        seq: 0,
        time_ms: now_ms(),
        dropped_before: 0,
        components,
        host: Some(host),
        pods,
        containers,
    }
}

/// The system bus for timedated: the units' connection when that is the system bus, else one of
/// its own (none within 2 s: the time-sync component says so).
async fn system_bus(cfg: &config::Config, units: Option<&zbus::Connection>) -> Option<zbus::Connection> {
    if cfg.systemd_bus == "system" {
        if let Some(c) = units {
            return Some(c.clone());
        }
    }
    tokio::time::timeout(Duration::from_secs(2), zbus::Connection::system())
        .await
        .ok()?
        .ok()
}

async fn bus(cfg: &config::Config) -> Option<zbus::Connection> {
    try_bus(cfg).await.map_err(|e| tracing::warn!("{e}")).ok().flatten()
}

/// The systemd bus, if there are units to watch; why not, when it does not answer in 2 s.
async fn try_bus(cfg: &config::Config) -> anyhow::Result<Option<zbus::Connection>> {
    if cfg.units.is_empty() {
        return Ok(None);
    }
    match tokio::time::timeout(Duration::from_secs(2), systemd::connect(&cfg.systemd_bus)).await {
        Ok(Ok(c)) => Ok(Some(c)),
        Ok(Err(e)) => Err(anyhow::anyhow!("D-Bus {}: {e}", cfg.systemd_bus)),
        Err(_) => Err(anyhow::anyhow!("D-Bus {}: no answer within 2 s", cfg.systemd_bus)),
    }
}

/// Probes this node (kubelet, CRI-O, etcd, systemd units, the host) and streams reports to the
/// hardshift collector over mTLS. It never runs a command it was sent.
#[derive(clap::Parser)]
#[command(name = "hardshift-agent", version, long_version = hardshift_crypto::long_version!(), about)]
struct Cli {
    /// The agent's configuration; drop-ins are read from agent.d/*.toml beside it.
    #[arg(long, global = true, default_value = "/etc/hardshift/agent.toml")]
    config: PathBuf,
    /// More log detail: -v debug, -vv trace. RUST_LOG, when set, wins.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Probe and stream reports to the collector until stopped (the default).
    Run,
    /// Probe once and print this node's state.
    Status {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print the same bounded, read-only log answer a debug request gets.
    Logs {
        /// An allow-listed unit (kubelet, crio, bootkube, release-image, hardshift-agent).
        #[arg(required_unless_present = "container", conflicts_with = "container")]
        unit: Option<String>,
        /// A container: its ID or NAMESPACE/POD/NAME.
        #[arg(long)]
        container: Option<String>,
        /// Lines from the end (at most 2000).
        #[arg(short = 'n', default_value_t = debug::DEFAULT_LINES)]
        lines: u32,
    },
    /// A single node's master config, made on its live system: the config `create` wrote for
    /// the master with what only the live system holds carried in (run by the install-to-disk step).
    InPlaceConfig {
        /// The master's config as `create` wrote it.
        #[arg(long)]
        base: PathBuf,
        /// SRC[=DEST]: a file or directory of the live system to place at DEST.
        #[arg(long)]
        carry: Vec<String>,
        /// Where to write the config (0600, atomically).
        #[arg(long)]
        output: PathBuf,
    },
    /// Decide a single node's own pending CSRs by `hardshift approve-csrs`'s rules (run by its
    /// post-reboot step): prints the names to approve, one a line; why each other one is not, on
    /// stderr. Reads the API's JSON; approves nothing itself.
    ApproveCsrs {
        /// The node's name: the only one whose CSRs may be approved.
        #[arg(long)]
        node: String,
        /// An address the node's serving certificate may name (repeat).
        #[arg(long = "ip")]
        ips: Vec<std::net::IpAddr>,
        /// A DNS name the node's serving certificate may name (repeat).
        #[arg(long = "dns")]
        dns: Vec<String>,
        /// `kubectl get csr -o json`'s output.
        #[arg(long)]
        csrs: PathBuf,
        /// `kubectl get nodes -o json`'s output.
        #[arg(long)]
        nodes: PathBuf,
    },
}

/// Logs go to stderr (the journal, under systemd), one line each.
fn logging(verbose: u8) {
    use std::io::IsTerminal;
    let level = ["info", "debug", "trace"][usize::from(verbose.min(2))];
    // `Targets` reads RUST_LOG's `target=level` lists without a regex engine (EnvFilter's would
    // add half a megabyte to a binary embedded in every node's config).
    let filter: tracing_subscriber::filter::Targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| format!("warn,hardshift_agent={level}").parse().expect("a valid filter"));
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal());
    tracing_subscriber::registry().with(fmt).with(filter).init();
}

/// `status`: one report of this node, the machine's probes included, taken here and now (the
/// background probes, which write or cost, are left out).
async fn local_report(cfg: &config::Config) -> NodeReport {
    let conn = bus(cfg).await;
    let h = host::probe();
    let booted = now_ms() / 1000 - h.uptime_seconds as i64;
    let system = system_bus(cfg, conn.as_ref()).await;
    let x = schedule::Ctx {
        cfg: Arc::new(cfg.clone()),
        units: conn,
        system,
        state: Arc::new(schedule::State::new(cfg, &h.boot_id, booted, false)),
        uptime_s: h.uptime_seconds,
        now_s: now_ms() / 1000,
    };
    let (round, now) = tokio::join!(
        schedule::run_all(&x, schedule::is_round),
        schedule::run_all(&x, schedule::is_report)
    );
    let latest = schedule::Latest::default();
    round.into_iter().for_each(|(row, v)| latest.set(row, v));
    report(&x, &latest, now, None)
}

/// `status --json`: the components in the collector's vocabulary, the pods and containers.
fn print_status_json(cfg: &config::Config, r: &NodeReport) {
    let comps: Vec<serde_json::Value> = r.components.iter().map(hardshift_proto::vocab::component_json).collect();
    let pods: Vec<serde_json::Value> = r
        .pods
        .iter()
        .map(|p| serde_json::json!({"id": p.id, "namespace": p.namespace, "name": p.name, "ready": p.ready}))
        .collect();
    let containers: Vec<serde_json::Value> = r
        .containers
        .iter()
        .map(|c| {
            serde_json::json!({"id": c.id, "pod": c.pod, "name": c.name, "state": c.state, "attempt": c.attempt,
            "exitCode": c.exit_code, "reason": c.reason, "message": c.message, "image": c.image})
        })
        .collect();
    println!(
        "{}",
        serde_json::json!({"node": cfg.node, "components": comps, "pods": pods, "containers": containers})
    );
}

/// `status`: the host, one line per component, and the containers that exited failing.
fn print_status(cfg: &config::Config, r: NodeReport) {
    let host = r.host.unwrap_or_default();
    println!(
        "node {} ({}), boot {}, up {}s, load {:.2}",
        cfg.node, cfg.role, host.boot_id, host.uptime_seconds, host.load1
    );
    println!(
        "memory {} MiB free of {} MiB; / {} MiB free; /var {} MiB free",
        host.memory_available_bytes >> 20,
        host.memory_total_bytes >> 20,
        host.root_free_bytes >> 20,
        host.var_free_bytes >> 20
    );
    for c in &r.components {
        println!("{:<16} {:<24} {}", c.name, c.state, c.reason);
    }
    for c in cri::failing(&r.containers) {
        println!("container {}/{} exited {} {} {}", c.pod, c.name, c.exit_code, c.reason, c.message);
    }
}

/// `logs`: a unit's journal or a container's log, as the collector's debug request gets them.
fn logs(
    rt: &tokio::runtime::Runtime,
    cfg: &config::Config,
    unit: Option<String>,
    container: Option<String>,
    lines: u32,
) -> std::process::ExitCode {
    use hardshift_proto::v1::{debug_request::Kind, ContainerLogRequest, DebugRequest, JournalRequest};
    let kind = match (container, unit) {
        (Some(container), _) => Kind::ContainerLog(ContainerLogRequest { container, lines }),
        (None, Some(unit)) => Kind::Journal(JournalRequest { unit, lines }),
        (None, None) => unreachable!("clap requires a unit or --container"),
    };
    let r = rt.block_on(debug::answer(cfg, DebugRequest { id: 0, kind: Some(kind) }));
    for l in &r.lines {
        println!("{l}");
    }
    if !r.error.is_empty() {
        eprintln!("hardshift-agent: {}", r.error);
        return std::process::ExitCode::from(2);
    }
    std::process::ExitCode::SUCCESS
}

fn main() -> std::process::ExitCode {
    use clap::Parser;
    let cli = Cli::parse();
    logging(cli.verbose);
    // Needs no agent config: it runs before the node has reported anything.
    if let Some(Command::InPlaceConfig { base, carry, output }) = &cli.command {
        return match in_place::run(base, carry, output) {
            Ok(summary) => {
                println!("{summary}");
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("hardshift-agent in-place-config: {e}");
                std::process::ExitCode::from(2)
            }
        };
    }
    if let Some(Command::ApproveCsrs {
        node,
        ips,
        dns,
        csrs,
        nodes,
    }) = &cli.command
    {
        return approve::run(node, ips, dns, csrs, nodes);
    }
    let cfg = match config::load(&cli.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hardshift-agent: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    // Every TLS connection (collector, etcd, registries) uses the one provider.
    hardshift_crypto::install();
    if cfg.fips {
        if let Err(e) = hardshift_crypto::fips_mode() {
            eprintln!("hardshift-agent: {}: fips = true, but {e}", cli.config.display());
            return std::process::ExitCode::from(2);
        }
    }
    tracing::debug!("crypto: {}", hardshift_crypto::module());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    match cli.command.unwrap_or(Command::Run) {
        Command::Status { json } => {
            let r = rt.block_on(local_report(&cfg));
            match json {
                true => print_status_json(&cfg, &r),
                false => print_status(&cfg, r),
            }
            std::process::ExitCode::SUCCESS
        }
        Command::Logs { unit, container, lines } => logs(&rt, &cfg, unit, container, lines),
        Command::InPlaceConfig { .. } | Command::ApproveCsrs { .. } => {
            unreachable!("handled before the config is read")
        }
        Command::Run => {
            rt.block_on(run(cfg));
            std::process::ExitCode::SUCCESS
        }
    }
}

/// The machine's probes, a round every interval beside the reports, each with its own deadline;
/// each report carries the latest round, and `done` is told when a round is in, so the report
/// goes out then rather than up to an interval later. Rounds start on a fixed cadence (not an
/// interval after the last one ended): a fault shows within one interval plus one round's time
/// (a 250 ms netem delay took 6–14 s to be named when a round waited a whole interval after the
/// previous one and its report waited for the next tick).
fn rounds(
    cfg: Arc<config::Config>,
    state: Arc<schedule::State>,
    latest: Arc<schedule::Latest>,
    units: Option<zbus::Connection>,
    done: Arc<tokio::sync::Notify>,
) {
    tokio::spawn(async move {
        let mut cadence = tokio::time::interval(Duration::from_millis(cfg.interval_ms.max(100)));
        // A round longer than the interval (a peer timing out) is followed by the next at once,
        // never by a burst of rounds to catch up.
        cadence.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut system: Option<zbus::Connection> = None;
        loop {
            cadence.tick().await;
            if system.is_none() {
                system = system_bus(&cfg, units.as_ref()).await;
            }
            let x = schedule::Ctx {
                cfg: cfg.clone(),
                units: units.clone(),
                system: system.clone(),
                state: state.clone(),
                uptime_s: host::probe().uptime_seconds,
                now_s: now_ms() / 1000,
            };
            for (row, v) in schedule::run_all(&x, schedule::is_round).await {
                latest.set(row, v);
            }
            done.notify_one();
        }
    });
}

/// Queue a report, its seq recorded first (said once if it cannot be).
fn queue(shared: &client::Shared, cfg: &config::Config, boot_id: &str, r: NodeReport, warned: &mut bool) {
    if let Ok(mut o) = shared.outbox.lock() {
        // Record the seq before it can reach the collector, so a restart never reuses it.
        if let Err(e) = seq_state::save(&cfg.state_dir, &cfg.node, boot_id, o.next_seq()) {
            if !std::mem::replace(warned, true) {
                tracing::error!(
                    "cannot record the seq in {}: {e}; a restart of the agent would lose reports",
                    cfg.state_dir.display()
                );
            }
        }
        o.push(r);
    }
}

async fn run(cfg: config::Config) {
    let boot_id = host::probe().boot_id;
    let last = seq_state::load(&cfg.state_dir, &cfg.node, &boot_id);
    if last > 0 {
        tracing::info!(node = %cfg.node, "restarted within boot {boot_id}: continuing after seq {last}");
    }
    let shared = Arc::new(client::Shared {
        outbox: Mutex::new(outbox::Outbox::after_seq(cfg.outbox_capacity, last)),
        new_report: tokio::sync::Notify::new(),
        boot_id: boot_id.clone(),
        clock: Default::default(),
    });
    let mut warned = false;
    let stream = tokio::spawn(client::run(cfg.clone(), shared.clone()));
    let changed = Arc::new(tokio::sync::Notify::new());
    let mut conn = bus(&cfg).await;
    if let Some(c) = &conn {
        tokio::spawn(systemd::watch(c.clone(), cfg.units.clone(), changed.clone()));
    }
    let shared_cfg = Arc::new(cfg.clone());
    let up = host::probe().uptime_seconds;
    let state = Arc::new(schedule::State::new(&cfg, &boot_id, now_ms() / 1000 - up as i64, true));
    if let Some(e) = state.boots_error() {
        tracing::warn!("boot history in {}: {e}", cfg.history_dir.display());
    }
    if let Some(li) = cfg.live_install.clone() {
        let s = shared.clone();
        let drained = move || s.outbox.lock().map(|o| o.is_empty()).unwrap_or(true);
        live_install::spawn(li, cfg.state_dir.clone(), state.install.clone(), changed.clone(), drained);
    }
    let latest = Arc::new(schedule::Latest::default());
    schedule::spawn_background(shared_cfg.clone(), state.clone(), latest.clone());
    let round = Arc::new(tokio::sync::Notify::new());
    rounds(shared_cfg.clone(), state.clone(), latest.clone(), conn.clone(), round.clone());
    let mut tick = tokio::time::interval(Duration::from_millis(cfg.interval_ms.max(100)));
    loop {
        tokio::select! {
            // A unit changed state: report now rather than at the next tick.
            _ = changed.notified() => {}
            // A round of the machine's probes is in: report it now, and the next report an
            // interval from now (one report an interval, as before).
            _ = round.notified() => tick.reset(),
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        // The bus may not answer yet when the agent starts early in a slow boot (a TCG VM took
        // over 2 s): try again at every report until it does, then watch the units from then on;
        // connected once, never again the units missing from every report for the agent's life.
        if conn.is_none() && !cfg.units.is_empty() {
            // Said once (the first try said why); every report says the units are unreachable.
            conn = try_bus(&cfg).await.ok().flatten();
            if let Some(c) = &conn {
                tracing::info!("D-Bus {}: connected", cfg.systemd_bus);
                tokio::spawn(systemd::watch(c.clone(), cfg.units.clone(), changed.clone()));
            }
        }
        let x = schedule::Ctx {
            cfg: shared_cfg.clone(),
            units: conn.clone(),
            system: None,
            state: state.clone(),
            uptime_s: up,
            now_s: now_ms() / 1000,
        };
        let now = schedule::run_all(&x, schedule::is_report).await;
        let r = report(&x, &latest, now, shared.clock_offset());
        queue(&shared, &cfg, &boot_id, r, &mut warned);
        shared.new_report.notify_one();
    }
    stream.abort();
}
