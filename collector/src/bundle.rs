//! The collector of one bundle: what it takes from the directory `create` wrote (its TLS, who may
//! report, the identity and certificates /metrics names, the bundle's secrets to scrub, its own
//! state), made into a `daemon::Setup`. The CLI parses the flags into `Serve` and runs the result.
//! Everything is read from the bundle (hardshift_bundle), never from the install's inputs.

use crate::daemon::{self, Error};
use crate::{listener, metrics, phase::Member, server, web};
use hardshift_bundle::fsio::{self, DirLock};
use hardshift_bundle::{certificates, layout, Inventory};
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

/// The collector's setup for the bundle in `s.dir`, and the lock that makes it this bundle's one
/// collector (held while it serves).
pub fn setup(s: Serve) -> Result<(daemon::Setup, DirLock), Error> {
    // Who may report: the inventory's nodes, and no other name the agent CA ever signed.
    let inventory = Inventory::load(&s.dir).map_err(|e| Error::Input(e.to_string()))?;
    let pem = agent_tls(&s.dir)?;
    check_fips(&s.dir, &inventory)?;
    let lock = state(&s.dir, &s.db, &s.admin, &format!("collector on {}", s.listen))?;
    let opts = server::Options {
        limits: s.limits,
        retain: s.retain,
        web: s.web.map(|addr| web_options(&s.dir, addr, &s.db, &inventory)).transpose()?,
        nodes: Some(inventory.names().into_iter().map(str::to_string).collect()),
        ..Default::default()
    };
    let kubeconfig = match (&s.kubeconfig, s.no_api_watch) {
        (_, true) => None,
        (Some(k), _) => Some(k.clone()),
        (None, _) => Some(s.dir.join(layout::ADMIN_KUBECONFIG)).filter(|k| k.exists()),
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
fn web_options(dir: &Path, addr: SocketAddr, db: &Path, inventory: &Inventory) -> Result<web::Options, Error> {
    let tls = match addr.ip().is_loopback() {
        true => None,
        false => web_tls(dir, &addr.to_string())
            .map(|p| web::Tls {
                cert: p.cert,
                key: p.key,
                client_ca: p.client_ca,
            })
            .map(Some)?,
    };
    let root_ca = text(dir, layout::ROOT_CA_CERT, |rel| {
        format!(
            "{rel}: missing from the bundle in {} (run `hardshift create`); /metrics names the bundle by it",
            dir.display()
        )
    })?;
    let certs = certificates::certificates(dir).into_iter().map(|c| metrics::BundleCert {
        file: c.file,
        cn: c.cn,
        not_after_s: c.not_after_s,
    });
    let bundle = metrics::Bundle {
        identity: metrics::Identity {
            cluster: inventory.name.clone(),
            base_domain: inventory.base_domain.clone(),
            bundle: certificates::cluster_id_of_root_ca(&root_ca),
        },
        certificates: certs.collect(),
    };
    Ok(web::Options {
        addr,
        tls,
        inventory: Some(Member::all(inventory)),
        db: db.to_path_buf(),
        secrets: hardshift_bundle::secrets::secrets(dir),
        bundle,
        max_connections: web::DASHBOARD_CONNECTIONS,
    })
}

/// A certificate, its key and the CA whose clients it admits, PEM.
struct Pem {
    cert: String,
    key: String,
    client_ca: String,
}

/// A file of the live bundle as text, or `said` naming it (the user's to fix: exit 2).
fn text(dir: &Path, rel: &str, said: impl Fn(&str) -> String) -> Result<String, Error> {
    fsio::read_current(dir, rel)
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| Error::Input(said(rel)))
}

/// The agents' side: the collector's certificate, admitting clients of the agent CA.
fn agent_tls(dir: &Path) -> Result<Pem, Error> {
    collector_pem(dir, layout::AGENT_CA_CERT, |rel| {
        format!("{rel}: missing from the bundle in {} (run `hardshift create`)", dir.display())
    })
}

/// The dashboard beyond loopback (`web`, its address): the collector's certificate, admitting
/// admin clients of the cluster's CA.
fn web_tls(dir: &Path, web: &str) -> Result<Pem, Error> {
    collector_pem(dir, layout::KUBERNETES_CA_CERT, |rel| {
        format!("--web {web} needs HTTPS, and {rel} is missing from the bundle in {}", dir.display())
    })
}

/// The collector's certificate and key, admitting clients of `client_ca`; `said` words a file
/// the bundle lacks.
fn collector_pem(dir: &Path, client_ca: &str, said: impl Fn(&str) -> String) -> Result<Pem, Error> {
    Ok(Pem {
        cert: text(dir, layout::COLLECTOR_CERT, &said)?,
        key: text(dir, layout::COLLECTOR_KEY, &said)?,
        client_ca: text(dir, client_ca, &said)?,
    })
}

/// A FIPS bundle's agents speak TLS through the FIPS module only: so must its collector.
fn check_fips(dir: &Path, inventory: &Inventory) -> Result<(), Error> {
    if !inventory.fips {
        return Ok(());
    }
    hardshift_crypto::fips_mode().map_err(|e| Error::Input(format!("{}: the bundle was made with fips: true, but {e}", dir.display())))
}

/// The collector's own state in `dir`, this user's only: the store's directory (of `db`), and
/// DIR/collector/ with its lock (one collector per directory: a second would steal the admin
/// socket and share the store) and the admin socket's directory (it asks nodes for their
/// logs). The lock is held while the returned value lives.
fn state(dir: &Path, db: &Path, admin: &Path, holder: &str) -> Result<DirLock, Error> {
    let private = |p: &Path| fsio::make_dir_all(p, 0o700).map_err(|e| Error::Other(format!("{}: {e}", p.display())));
    if let Some(p) = db.parent() {
        private(p)?;
    }
    let state = dir.join(layout::COLLECTOR);
    private(&state)?;
    let lock = fsio::lock_file(&state.join("lock"), holder).map_err(|e| match e {
        fsio::LockError::Busy(holder) => Error::Other(format!(
            "{}: another collector serves this bundle ({holder}); stop it first, or give this one another --dir",
            dir.display()
        )),
        e @ fsio::LockError::Io { .. } => Error::Other(e.to_string()),
    })?;
    let sockets = admin.parent().unwrap_or(dir);
    fsio::make_dir_all(sockets, 0o700)
        .and_then(|_| std::fs::set_permissions(sockets, std::os::unix::fs::PermissionsExt::from_mode(0o700)))
        .map_err(|e| Error::Other(format!("{}: {e}", admin.display())))?;
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_inventory_no_one_is_admitted_and_the_user_is_told_what_to_run() {
        let d = tempfile::tempdir().unwrap();
        let serve = Serve {
            dir: d.path().to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            db: d.path().join("collector/reports.db"),
            admin: d.path().join("collector/admin.sock"),
            limits: Default::default(),
            retain: None,
            web: None,
            kubeconfig: None,
            no_api_watch: true,
        };
        let Err(Error::Input(m)) = setup(serve) else {
            panic!("a collector without an inventory started")
        };
        assert!(m.contains("no bundle here") && m.contains("hardshift create"), "{m}");
        assert!(!d.path().join("collector").exists(), "nothing written before the refusal");
    }
}
