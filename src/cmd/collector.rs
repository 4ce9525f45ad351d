use crate::Failure;
use hardshift_collector::{server, store::Store};
use hardshift_generator::fsio;
use std::net::SocketAddr;
use std::path::PathBuf;

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
}

pub fn db_path(dir: &std::path::Path, db: Option<PathBuf>) -> PathBuf {
    db.unwrap_or_else(|| dir.join("collector").join("reports.db"))
}

/// Where the commands that read the collector's store (`status`, `events`) find it.
#[derive(clap::Args)]
pub struct StoreArgs {
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// The report database. Default: DIR/collector/reports.db
    #[arg(long)]
    pub db: Option<PathBuf>,
}

impl StoreArgs {
    pub fn open(&self) -> Result<Store, Failure> {
        open_existing(&self.dir, self.db.clone())
    }
}

fn open_existing(dir: &std::path::Path, db: Option<PathBuf>) -> Result<Store, Failure> {
    let db = db_path(dir, db);
    if !db.exists() {
        return Err(Failure::input(format!(
            "{}: no reports yet (is `hardshift collector` running?)",
            db.display()
        )));
    }
    Store::open(&db).map_err(|e| Failure::other(format!("{}: {e}", db.display())))
}

/// Serve the agents with the bundle's collector certificate until Ctrl-C.
pub fn run(a: Args) -> Result<u8, Failure> {
    let read = |rel: &str| {
        fsio::read_current(&a.dir, rel)
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| {
                Failure::input(format!(
                    "{}: missing from the bundle in {} (run `hardshift create`)",
                    rel,
                    a.dir.display()
                ))
            })
    };
    let tls = server::Tls {
        cert: read("agent-pki/collector.crt")?,
        key: read("agent-pki/collector.key")?,
        client_ca: read("agent-pki/agent-ca.crt")?,
    };
    let db = db_path(&a.dir, a.db);
    if let Some(p) = db.parent() {
        std::fs::create_dir_all(p).map_err(|e| Failure::other(format!("{}: {e}", p.display())))?;
    }
    // The admin socket asks nodes for their logs: only this user may reach it.
    let admin = super::logs::admin_socket(&a.dir);
    std::fs::create_dir_all(admin.parent().unwrap_or(&a.dir))
        .and_then(|_| {
            std::fs::set_permissions(
                admin.parent().unwrap_or(&a.dir),
                std::os::unix::fs::PermissionsExt::from_mode(0o700),
            )
        })
        .map_err(|e| Failure::other(format!("{}: {e}", admin.display())))?;
    let store = Store::open(&db).map_err(|e| Failure::other(format!("{}: {e}", db.display())))?;
    let rt = tokio::runtime::Runtime::new().map_err(Failure::other)?;
    eprintln!(
        "collector: listening on {} (reports in {}, admin socket {})",
        a.listen,
        db.display(),
        admin.display()
    );
    rt.block_on(server::serve(a.listen, tls, store, Some(&admin), async {
        let _ = tokio::signal::ctrl_c().await;
    }))
    .map_err(Failure::other)?;
    Ok(0)
}
