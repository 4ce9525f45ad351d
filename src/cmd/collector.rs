//! `hardshift collector`: serve the agents (mTLS gRPC), store their reports, watch the API, and
//! serve the dashboard and /metrics; `StoreArgs` for the commands that read its store.

use super::parse_duration;
use crate::failure::Failure;
use hardshift_collector::{daemon, metrics, phase::Member, server, web};
use hardshift_generator::collector_side as side;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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
    let pem = side::agent_tls(&a.dir)?;
    side::check_fips(&a.dir)?;
    let members = side::Members::load(&a.dir)?;
    let db = super::db_path(&a.dir, a.db);
    let admin = super::logs::admin_socket(&a.dir);
    let _lock = side::state(&a.dir, &db, &admin, &format!("collector on {}", a.listen))?;
    let limits = hardshift_collector::listener::Limits {
        handshake_timeout: a.handshake_timeout,
        hello_timeout: a.hello_timeout,
        max_connections: a.max_connections,
        max_per_address: a.max_per_address.max(1),
        // The agents' door refuses over its caps (agents retry); the dashboard's sheds.
        ..Default::default()
    };
    let opts = server::Options {
        limits,
        retain: a.retain.0,
        web: (!a.no_web).then(|| web_options(&a.dir, a.web, &db, &members)).transpose()?,
        nodes: Some(members.names()),
        ..Default::default()
    };
    let kubeconfig = match (&a.kubeconfig, a.no_api_watch) {
        (_, true) => None,
        (Some(k), _) => Some(k.clone()),
        (None, _) => Some(a.dir.join(hardshift_generator::layout::ADMIN_KUBECONFIG)).filter(|k| k.exists()),
    };
    let setup = daemon::Setup {
        listen: a.listen,
        tls: server::Tls {
            cert: pem.cert,
            key: pem.key,
            client_ca: pem.client_ca,
        },
        what: format!("collector on {} for {}", a.listen, a.dir.display()),
        db,
        admin,
        kubeconfig,
        opts,
    };
    daemon::run(setup).map_err(|e| match e {
        daemon::Error::Input(m) => Failure::input(m),
        daemon::Error::Other(m) => Failure::other(m),
    })?;
    Ok(0)
}

/// The dashboard's address, inventory (for the phases and the nodes not yet reporting), the
/// bundle's identity and certificates for /metrics, and, beyond loopback, its TLS.
fn web_options(dir: &Path, addr: SocketAddr, db: &Path, members: &side::Members) -> Result<web::Options, Failure> {
    let inventory = match members {
        side::Members::Inputs(m) => Some(
            m.iter()
                .map(|(name, role)| Member {
                    name: name.clone(),
                    role: role.clone(),
                })
                .collect(),
        ),
        side::Members::Certificates(_) => None,
    };
    let tls = match addr.ip().is_loopback() {
        true => None,
        false => side::web_tls(dir, &addr.to_string())
            .map(|p| web::Tls {
                cert: p.cert,
                key: p.key,
                client_ca: p.client_ca,
            })
            .map(Some)?,
    };
    let id = side::identity(dir)?;
    let certificates = side::certificates(dir).into_iter().map(|c| metrics::BundleCert {
        file: c.file,
        cn: c.cn,
        not_after_s: c.not_after_s,
    });
    let bundle = metrics::Bundle {
        identity: metrics::Identity {
            cluster: id.cluster,
            base_domain: id.base_domain,
            bundle: id.bundle,
        },
        certificates: certificates.collect(),
    };
    let secrets = hardshift_generator::reload::secrets(dir);
    Ok(web::Options {
        addr,
        tls,
        inventory,
        db: db.to_path_buf(),
        secrets,
        bundle,
    })
}
