//! What `create` records beside the bundle (`DIR/.hardshift/create.json`): the options it was
//! made with, enough for `verify` to make it again, and the agent binary it embedded.

use super::request::{parse_base, Bootstrap, Request};
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

/// The record, if there is one (Err: it does not read, with where).
pub fn read(dir: &Path) -> Option<Result<Record, String>> {
    let p = path(dir);
    let bytes = std::fs::read(&p).ok()?;
    Some(serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", p.display())))
}

impl Record {
    /// What `req` made, with this agent (its SHA-256), for a cluster with install-config `fips`.
    /// `from_renders`: whether its bootstrap runs the renders' control plane (what `Auto` chose).
    pub fn of(req: &Request, agent_sha256: Option<String>, fips: bool, from_renders: bool) -> Record {
        let abs = |p: &PathBuf| std::path::absolute(p).unwrap_or_else(|_| p.clone());
        Record {
            key_algorithm: req.key_algorithm.map(|k| k.as_str().to_string()),
            release_image: req.release_image.clone(),
            release_refs: req.release_refs.as_ref().map(abs),
            mco_base: req.mco_base.iter().map(|(r, p)| (r.as_str().to_string(), abs(p))).collect(),
            self_contained_nodes: req.self_contained_nodes,
            no_agent: agent_sha256.is_none(),
            agent_url: req.agent_url.clone(),
            agent_sha256,
            crypto_module: Some(hardshift_crypto::module().name().to_string()),
            crypto_fips: hardshift_crypto::module().fips,
            fips,
            bootstrap_from_renders: from_renders,
        }
    }

    /// The request that makes the recorded bundle again: no new CAs, and the agent beside this
    /// executable until `Request::recorded` finds the kept one.
    pub fn request(&self, dir: &Path) -> Request {
        Request {
            dir: dir.to_path_buf(),
            release_image: self.release_image.clone(),
            release_refs: self.release_refs.clone(),
            key_algorithm: self.key_algorithm.as_deref().and_then(KeyAlgorithm::parse),
            rotate_ca: false,
            mco_base: self
                .mco_base
                .iter()
                .filter_map(|(r, p)| parse_base(&format!("{r}={}", p.display())).ok())
                .collect(),
            self_contained_nodes: self.self_contained_nodes,
            agent: if self.no_agent { None } else { super::request::beside_executable() },
            agent_url: self.agent_url.clone(),
            // A rebuild writes nothing: it may check a FIPS bundle from any build.
            crypto_fips: None,
            // What was chosen, not Auto: a rebuild of a native bundle stays native when renders
            // appear later, and one from renders refuses when they are gone.
            bootstrap: if self.bootstrap_from_renders {
                Bootstrap::Renders
            } else {
                Bootstrap::Native
            },
        }
    }
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
    }
}

impl Recorded {
    /// The overrides that load the cluster as `create` built it (no new keys are made).
    pub fn overrides(&self, release_image: Option<String>) -> crate::config::Overrides {
        crate::config::Overrides {
            release_image: release_image.or_else(|| self.release_image.clone()),
            key_algorithm: self.key_algorithm,
            crypto_fips: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Role;

    #[test]
    fn a_record_makes_the_request_that_made_it() {
        let req = Request {
            dir: PathBuf::from("/b"),
            release_image: Some("quay.io/x@sha256:1".into()),
            release_refs: Some(PathBuf::from("/r/refs")),
            key_algorithm: Some(KeyAlgorithm::EcdsaP256),
            rotate_ca: true,
            mco_base: vec![(Role::Master, PathBuf::from("/m.yaml"))],
            self_contained_nodes: true,
            agent: None,
            agent_url: Some("http://h/a".into()),
            crypto_fips: Some(false),
            bootstrap: Bootstrap::Auto,
        };
        // Auto is recorded as what it chose.
        let rec = Record::of(&req, Some("ab".into()), true, true);
        assert!(!rec.no_agent && rec.fips);
        let again = rec.request(Path::new("/b"));
        assert_eq!(again.release_image, req.release_image);
        assert_eq!(again.release_refs, req.release_refs);
        assert_eq!(again.key_algorithm, req.key_algorithm);
        assert_eq!(again.mco_base, req.mco_base);
        assert_eq!(again.agent_url, req.agent_url);
        assert!(again.self_contained_nodes);
        assert_eq!(again.bootstrap, Bootstrap::Renders);
        let native = Record::of(&req, None, false, false).request(Path::new("/b"));
        assert_eq!(native.bootstrap, Bootstrap::Native);
        // A rebuild never rotates, and makes no keys to judge by the module.
        assert!(!again.rotate_ca);
        assert_eq!(again.crypto_fips, None);
        let none = Record::of(&req, None, false, false);
        assert!(none.no_agent);
        assert_eq!(none.request(Path::new("/b")).agent, None);
    }
}
