//! The collector of one bundle: what it takes from the directory `create` wrote (its TLS, who may
//! report, the identity and certificates /metrics names, the bundle's secrets to scrub, its own
//! state), made into a `daemon::Setup`. The CLI parses the flags into `Serve` and runs the result.

use crate::daemon::{self, Error};
use crate::{listener, metrics, phase::Member, server, web};
use hardshift_generator::collector_side as side;
use hardshift_generator::fsio::DirLock;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `hardshift collector` was asked.
pub struct Serve {
    pub dir: PathBuf,
    pub listen: SocketAddr,
    pub db: PathBuf,
    pub admin: PathBuf,
    pub limits: listener::Limits,
    /// Reports older than this go (None: kept forever).
    pub retain: Option<Duration>,
    /// The dashboard's and /metrics' address (None: not served).
    pub web: Option<SocketAddr>,
    /// `--kubeconfig`, if given.
    pub kubeconfig: Option<PathBuf>,
    /// `--no-api-watch`.
    pub no_api_watch: bool,
}

impl From<hardshift_generator::pipeline::Error> for Error {
    fn from(e: hardshift_generator::pipeline::Error) -> Error {
        use hardshift_generator::pipeline::Error as E;
        match e {
            E::Input(m) => Error::Input(m),
            E::Other(m) => Error::Other(m),
        }
    }
}

/// The collector's setup for the bundle in `s.dir`, and the lock that makes it this bundle's one
/// collector (held while it serves).
pub fn setup(s: Serve) -> Result<(daemon::Setup, DirLock), Error> {
    let pem = side::agent_tls(&s.dir)?;
    side::check_fips(&s.dir)?;
    let members = side::Members::load(&s.dir)?;
    let lock = side::state(&s.dir, &s.db, &s.admin, &format!("collector on {}", s.listen))?;
    let opts = server::Options {
        limits: s.limits,
        retain: s.retain,
        web: s.web.map(|addr| web_options(&s.dir, addr, &s.db, &members)).transpose()?,
        nodes: Some(members.names()),
        ..Default::default()
    };
    let kubeconfig = match (&s.kubeconfig, s.no_api_watch) {
        (_, true) => None,
        (Some(k), _) => Some(k.clone()),
        (None, _) => Some(s.dir.join(hardshift_generator::layout::ADMIN_KUBECONFIG)).filter(|k| k.exists()),
    };
    let setup = daemon::Setup {
        listen: s.listen,
        tls: server::Tls {
            cert: pem.cert,
            key: pem.key,
            client_ca: pem.client_ca,
        },
        what: format!("collector on {} for {}", s.listen, s.dir.display()),
        db: s.db,
        admin: s.admin,
        kubeconfig,
        opts,
    };
    Ok((setup, lock))
}

/// The dashboard's address, inventory (for the phases and the nodes not yet reporting), the
/// bundle's identity and certificates for /metrics, and, beyond loopback, its TLS.
fn web_options(dir: &Path, addr: SocketAddr, db: &Path, members: &side::Members) -> Result<web::Options, Error> {
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
    Ok(web::Options {
        addr,
        tls,
        inventory,
        db: db.to_path_buf(),
        secrets: hardshift_generator::reload::secrets(dir),
        bundle,
        max_connections: web::DASHBOARD_CONNECTIONS,
    })
}
