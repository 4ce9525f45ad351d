//! What `create` records beside the bundle (`DIR/.hardshift/create.json`): the options it was
//! made with, enough for `verify` to make it again, and the agent binary it embedded.

use crate::cluster::KeyAlgorithm;
use crate::layout::STATE_DIR;
use std::path::{Path, PathBuf};

const RECORD: &str = "create.json";
const AGENTS: &str = "agents";

/// The options a bundle was made with.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    pub key_algorithm: Option<String>,
    pub release_image: Option<String>,
    pub release_refs: Option<PathBuf>,
    pub mco_base: Vec<(String, PathBuf)>,
    pub self_contained_nodes: bool,
    pub no_agent: bool,
    pub agent_url: Option<String>,
    /// `--no-live-agent`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_live_agent: bool,
    pub agent_sha256: Option<String>,
    /// The crypto module that made the bundle's new keys (`hardshift_crypto::Module::name`).
    #[serde(default)]
    pub crypto_module: Option<String>,
    #[serde(default)]
    pub crypto_fips: bool,
    /// install-config's `fips`.
    #[serde(default)]
    pub fips: bool,
    /// The bootstrap runs the renders' control plane (what `--bootstrap-control-plane` chose).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bootstrap_from_renders: bool,
}

/// Where the record is.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(STATE_DIR).join(RECORD)
}

/// Where the agent binary a bundle embeds is kept for `verify`: DIR/.hardshift/agents/<sha256>.
pub fn kept_agent(dir: &Path, sha: &str) -> PathBuf {
    dir.join(STATE_DIR).join(AGENTS).join(sha)
}

/// The directory of kept agents.
pub fn agents_dir(dir: &Path) -> PathBuf {
    dir.join(STATE_DIR).join(AGENTS)
}

/// A record that does not read as JSON of its shape.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct Unreadable {
    pub path: PathBuf,
    #[source]
    pub source: serde_json::Error,
}

/// The record, if there is one.
pub fn read(dir: &Path) -> Option<Result<Record, Unreadable>> {
    let p = path(dir);
    let bytes = std::fs::read(&p).ok()?;
    Some(serde_json::from_slice(&bytes).map_err(|source| Unreadable { path: p, source }))
}

/// The overrides `create` recorded for DIR's bundle (none if it recorded nothing, or if the
/// record does not read): what every command that loads the cluster again starts from.
#[derive(Debug, Default, Clone)]
pub struct Recorded {
    pub key_algorithm: Option<KeyAlgorithm>,
    pub release_image: Option<String>,
    pub release_refs: Option<PathBuf>,
    /// The crypto module the bundle's keys were made with, and whether it was FIPS.
    pub crypto_module: Option<String>,
    pub crypto_fips: bool,
    /// The bundle was made with `fips: true`.
    pub fips: bool,
    /// `--no-live-agent`.
    pub no_live_agent: bool,
}

pub fn recorded(dir: &Path) -> Recorded {
    let rec = read(dir).and_then(Result::ok).unwrap_or_default();
    Recorded {
        key_algorithm: rec.key_algorithm.as_deref().and_then(KeyAlgorithm::parse),
        release_image: rec.release_image,
        release_refs: rec.release_refs,
        crypto_module: rec.crypto_module,
        crypto_fips: rec.crypto_fips,
        fips: rec.fips,
        no_live_agent: rec.no_live_agent,
    }
}

impl Recorded {
    /// The overrides that load the cluster as `create` built it (no new keys are made).
    pub fn overrides(&self, release_image: Option<String>) -> crate::config::Overrides {
        crate::config::Overrides {
            release_image: release_image.or_else(|| self.release_image.clone()),
            key_algorithm: self.key_algorithm,
            crypto_fips: None,
            no_live_agent: self.no_live_agent,
        }
    }
}
