//! The CLI's subcommands, one module each, and what they share: loading the cluster from DIR's
//! inputs (the commands that make or judge the bundle), or reading the bundle `create` wrote (its
//! inventory and the collector's store: every command after `create`).

pub mod approve_csrs;
pub mod collector;
pub mod create;
pub mod diagnose;
pub mod docs;
pub mod events;
pub mod gather;
pub mod lab;
pub mod logs;
pub mod mco;
pub mod release;
pub mod render;
pub mod status;
pub mod verify;
pub mod wait_for;
pub mod watch;

use crate::failure::Failure;
use hardshift_bundle::Inventory;
use hardshift_collector::scrub::Scrubber;
use hardshift_collector::store::{Store, StoreError};
use hardshift_generator::{cluster::Cluster, reload};
use std::path::{Path, PathBuf};

/// Where the inputs are, and the release overrides: what every command that rebuilds the
/// cluster from the inputs takes.
#[derive(clap::Args)]
pub struct ClusterArgs {
    /// Directory holding install-config.yaml, agent-config.yaml and (optionally) hardshift.yaml.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// The release image pullspec (wins over hardshift.yaml `release.image`).
    #[arg(long)]
    pub release_image: Option<String>,
    /// The release's image references (ImageStream JSON or name=pullspec lines).
    /// Default: DIR/release/image-references.
    #[arg(long)]
    pub release_refs: Option<PathBuf>,
}

impl ClusterArgs {
    /// The cluster as `create` built it: the inputs, with the options it recorded unless given here.
    pub fn load(&self) -> Result<Cluster, Failure> {
        let given = reload::Given {
            release_image: self.release_image.clone(),
            release_refs: self.release_refs.clone(),
        };
        Ok(reload::cluster(&self.dir, &given)?)
    }
}

/// The bundle `create` wrote in DIR: what every command after `create` reads the install from.
#[derive(clap::Args)]
pub struct BundleArgs {
    /// The directory `hardshift create` wrote the bundle in.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
}

impl BundleArgs {
    /// The bundle's inventory; none there, or one that does not read, is the user's to fix (exit 2).
    pub fn inventory(&self) -> Result<Inventory, Failure> {
        Ok(Inventory::load(&self.dir)?)
    }
}

/// A client of the API with the kubeconfig at `path`; a kubeconfig that does not read is the
/// user's input (exit 2).
pub async fn kube_client(path: &Path) -> Result<kube::Client, Failure> {
    use hardshift_collector::watch::{client, ClientError};
    client(path).await.map_err(|e| match e {
        ClientError::Kubeconfig(m) => Failure::input(m),
        ClientError::Client(m) => Failure::other(m),
    })
}

/// `500ms`, `45s`, `90m`, `12h`, `7d`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    use std::time::Duration;
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration: expected a number and a unit, e.g. 30s, 12h, 7d"))?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(n)),
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m, h or d)")),
    };
    Ok(Duration::from_secs(n.saturating_mul(secs)))
}

pub fn db_path(dir: &std::path::Path, db: Option<PathBuf>) -> PathBuf {
    db.unwrap_or_else(|| dir.join(hardshift_bundle::layout::REPORTS_DB))
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
    pub fn path(&self) -> PathBuf {
        db_path(&self.dir, self.db.clone())
    }

    /// The bundle's inventory, when the store sits in the bundle's directory (the nodes that never
    /// reported are findings too). A store copied elsewhere has none; an inventory that does not
    /// read is said on stderr, and the store is read without it.
    pub fn inventory(&self) -> Option<Inventory> {
        match Inventory::load(&self.dir) {
            Ok(inv) => Some(inv),
            Err(hardshift_bundle::inventory::Error::NoBundle { .. }) => None,
            Err(e) => {
                eprintln!("warning: {e}");
                None
            }
        }
    }

    /// The store, to read: one that is broken is a failure naming the file (exit 1).
    pub fn open(&self) -> Result<Store, Failure> {
        open_existing(&self.dir, self.db.clone())
    }

    /// A read of the opened store failed: the store is broken, said naming its file.
    pub fn broken(&self) -> impl Fn(StoreError) -> Failure {
        let db = self.path();
        move |e| broken_store(&db, e)
    }

    /// Every output of the store's readers is scrubbed by this one, as the terminal is: by
    /// structure and by pattern. (Not by the bundle's secret values: a pull-secret password that
    /// is a word, as the example's is, would blank that word in every domain name.)
    pub fn scrubber(&self) -> Scrubber {
        Scrubber::default()
    }

    /// Said on stderr when the collector stopped acknowledging (a file of its store deleted or
    /// replaced): true when it did.
    pub fn warn_if_halted(&self) -> bool {
        let note = hardshift_collector::store::halted(&self.path());
        if let Some(n) = &note {
            eprintln!("warning: {n}");
        }
        note.is_some()
    }
}

/// A store that cannot be read: its file, what is wrong, and what to do (exit 1).
pub fn broken_store(db: &Path, e: impl std::fmt::Display) -> Failure {
    Failure::other(format!(
        "{}: the report store is broken: {e}. Move it aside (a collector then starts a new one) or restore it from a copy",
        db.display()
    ))
}

fn open_existing(dir: &std::path::Path, db: Option<PathBuf>) -> Result<Store, Failure> {
    let db = db_path(dir, db);
    if !db.exists() {
        return Err(Failure::input(format!(
            "{}: no reports yet (is `hardshift collector` running?)",
            db.display()
        )));
    }
    Store::read(&db).map_err(|e| broken_store(&db, e))
}

/// `value` as pretty JSON on stdout, every string in it scrubbed first.
pub fn print_json(value: &impl serde::Serialize, scrubber: &Scrubber) -> Result<(), Failure> {
    let mut v = serde_json::to_value(value).map_err(Failure::other)?;
    scrubber.json(&mut v);
    println!("{}", serde_json::to_string_pretty(&v).map_err(Failure::other)?);
    Ok(())
}

/// `-o table | json` of the commands that print rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
}
