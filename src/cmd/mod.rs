//! The CLI's subcommands, one module each, and what they share: loading the cluster from DIR.

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
use hardshift_collector::scrub::Scrubber;
use hardshift_collector::store::{Store, StoreError};
use hardshift_generator::{cluster::Cluster, config, pipeline};
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
        // verify, lab and mco read a bundle `create` made: they make no new keys.
        let rec = pipeline::recorded(&self.dir);
        let refs = self.release_refs.clone().or_else(|| rec.release_refs.clone());
        load_cluster(&self.dir, refs.as_deref(), &rec.overrides(self.release_image.clone()))
    }
}

/// The bundle's nodes as (hostname, role), read with what `create` recorded; empty when the
/// inputs are not in `dir` (a collector's store copied elsewhere, say).
pub fn inventory(dir: &Path) -> Vec<(String, String)> {
    let rec = pipeline::recorded(dir);
    load_cluster(dir, rec.release_refs.as_deref(), &rec.overrides(None))
        .map(|c| c.nodes.iter().map(|n| (n.hostname.clone(), n.role.as_str().to_string())).collect())
        .unwrap_or_default()
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

/// Read and validate the inputs in `dir`.
pub fn load_cluster(dir: &Path, release_refs: Option<&Path>, overrides: &config::Overrides) -> Result<Cluster, Failure> {
    Ok(pipeline::inputs::cluster(dir, release_refs, overrides)?)
}

/// The bundle's own secrets, for scrubbing by value what leaves the workstation: the kubeadmin
/// password, and each pull-secret credential (as given, decoded, and its password alone).
pub fn bundle_secrets(dir: &Path) -> Vec<String> {
    use base64::Engine;
    let mut out = Vec::new();
    if let Some(pw) = hardshift_generator::fsio::read_current(dir, hardshift_generator::kubeadmin::PASSWORD_FILE) {
        out.push(String::from_utf8_lossy(&pw).trim().to_string());
    }
    let rec = pipeline::recorded(dir);
    if let Ok(c) = load_cluster(dir, rec.release_refs.as_deref(), &rec.overrides(None)) {
        let ps: serde_json::Value = serde_json::from_str(&c.pull_secret).unwrap_or_default();
        for (_, reg) in ps["auths"].as_object().into_iter().flatten() {
            if let Some(auth) = reg["auth"].as_str() {
                out.push(auth.to_string());
                if let Ok(plain) = base64::engine::general_purpose::STANDARD.decode(auth) {
                    let plain = String::from_utf8_lossy(&plain).to_string();
                    if let Some((_, pass)) = plain.split_once(':') {
                        out.push(pass.to_string());
                    }
                    out.push(plain);
                }
            }
        }
    }
    out.retain(|s| s.len() >= 6);
    out
}

pub fn db_path(dir: &std::path::Path, db: Option<PathBuf>) -> PathBuf {
    db.unwrap_or_else(|| dir.join(hardshift_generator::layout::REPORTS_DB))
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
