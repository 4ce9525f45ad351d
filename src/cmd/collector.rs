//! `hardshift collector`: serve the agents (mTLS gRPC), store their reports, watch the API, and
//! serve the dashboard and /metrics; `StoreArgs` for the commands that read its store.

use super::parse_duration;
use crate::failure::Failure;
use hardshift_collector::{bundle, daemon};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Address to listen on (the agents dial the collector address in hardshift.yaml).
    #[arg(long, default_value = "0.0.0.0:9443")]
    listen: SocketAddr,
    /// The report database. Default: DIR/collector/reports.db
    #[arg(long)]
    db: Option<PathBuf>,
    /// Connections open at once, in all (handshaking ones included).
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// Connections open at once from one source address (a node needs one).
    #[arg(long, default_value_t = 64)]
    max_per_address: usize,
    /// Time a client has to finish the TLS handshake, e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    handshake_timeout: Duration,
    /// Time an agent has, once TLS is up, to send its Hello.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    hello_timeout: Duration,
    /// Delete reports older than this (e.g. 7d, 12h); each boot's newest report is kept.
    /// "forever" keeps everything.
    #[arg(long, default_value = "7d", value_parser = parse_retention)]
    retain: Retention,
    /// Watch the API with this kubeconfig (Nodes, CSRs, ClusterOperators, ClusterVersion,
    /// control-plane pods) for `wait-for` and `diagnose`. Default: DIR/auth/kubeconfig when it exists.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Do not watch the API: agents' reports only.
    #[arg(long, conflicts_with = "kubeconfig")]
    no_api_watch: bool,
    /// The dashboard and /metrics. Loopback is plain HTTP; any other address is HTTPS and
    /// requires the bundle's admin client certificate (pki/admin.crt, or auth/kubeconfig's).
    #[arg(long, default_value = "127.0.0.1:9444")]
    web: SocketAddr,
    /// Serve neither the dashboard nor /metrics.
    #[arg(long)]
    no_web: bool,
}

#[derive(Clone, Copy, Debug)]
struct Retention(Option<Duration>);

fn parse_retention(s: &str) -> Result<Retention, String> {
    if s == "forever" {
        return Ok(Retention(None));
    }
    parse_duration(s).map(|d| Retention(Some(d)))
}

/// Serve the agents with the bundle's collector certificate until Ctrl-C.
pub fn run(a: Args) -> Result<u8, Failure> {
    let limits = hardshift_collector::listener::Limits {
        handshake_timeout: a.handshake_timeout,
        hello_timeout: a.hello_timeout,
        max_connections: a.max_connections,
        max_per_address: a.max_per_address.max(1),
        // The agents' door refuses over its caps (agents retry); the dashboard's sheds.
        ..Default::default()
    };
    let (setup, _lock) = bundle::setup(bundle::Serve {
        db: super::db_path(&a.dir, a.db),
        admin: super::logs::admin_socket(&a.dir),
        dir: a.dir,
        listen: a.listen,
        limits,
        retain: a.retain.0,
        web: (!a.no_web).then_some(a.web),
        kubeconfig: a.kubeconfig,
        no_api_watch: a.no_api_watch,
    })
    .map_err(failure)?;
    daemon::run(setup).map_err(failure)?;
    Ok(0)
}

fn failure(e: daemon::Error) -> Failure {
    match e {
        daemon::Error::Input(m) => Failure::input(m),
        daemon::Error::Other(m) => Failure::other(m),
    }
}
