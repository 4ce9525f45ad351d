//! What to build: the choices of one `create`, from its flags or from what a bundle recorded.

use super::error::Error;
use super::record::{self, Record};
use crate::cluster::{KeyAlgorithm, Role};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The bundle directory, holding the inputs.
    pub dir: PathBuf,
    /// The release image pullspec (wins over hardshift.yaml `release.image`).
    pub release_image: Option<String>,
    /// The release's image references; default DIR/release/image-references.
    pub release_refs: Option<PathBuf>,
    /// The key algorithm for new keys (existing keys are kept).
    pub key_algorithm: Option<KeyAlgorithm>,
    /// Replace every CA (a cluster that does not run yet).
    pub rotate_ca: bool,
    /// MCO-rendered bases, per role; empty takes DIR/mco/rendered/ when `render.sh` left one.
    pub mco_base: Vec<(Role, PathBuf)>,
    /// Go on without an MCO base on an OVNKubernetes cluster.
    pub self_contained_nodes: bool,
    /// The hardshift-agent binary to place on every node; None leaves it out.
    pub agent: Option<PathBuf>,
    /// Have Ignition fetch the agent from this URL instead of embedding it.
    pub agent_url: Option<String>,
    /// No live configs: RHCOS's `coreos.inst.*` arguments install the nodes.
    pub no_live_agent: bool,
    /// Whose control plane the bootstrap runs.
    pub bootstrap: Bootstrap,
    /// Some(whether the crypto module is FIPS) when this run may make keys (`create`); None when
    /// it only rebuilds a bundle to compare (`verify` may check a FIPS bundle from any build).
    pub crypto_fips: Option<bool>,
}

/// Whose control plane the bootstrap runs: the one the release's renders made (DIR/render), or
/// hardshift's own static pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Bootstrap {
    /// The renders' when DIR/render holds renders (stale ones are refused), else hardshift's own.
    #[default]
    Auto,
    /// The renders' (refused without renders).
    Renders,
    /// hardshift's own, renders or not.
    Native,
}

impl Request {
    /// The request that made DIR's bundle, as `create` recorded it (`DIR/.hardshift/create.json`),
    /// with the agent it embedded; notes say what had to be assumed.
    pub fn recorded(dir: &Path) -> Result<(Request, Vec<String>), Error> {
        let mut notes = Vec::new();
        let rec = match record::read(dir) {
            Some(Ok(rec)) => rec,
            Some(Err(e)) => return Err(Error::input(e)),
            None => {
                notes.push(format!(
                    "no record of create's options in {} (a bundle from an older hardshift): assuming the defaults",
                    record::path(dir).display()
                ));
                Record::default()
            }
        };
        let mut req = rec.request(dir);
        if let Some(sha) = &rec.agent_sha256 {
            let kept = record::kept_agent(dir, sha);
            if kept.is_file() {
                // Trusted only if it still hashes to its name: a foreign binary stored there (with
                // the configs and sums regenerated) would otherwise rebuild into a perfect match.
                let bytes = std::fs::read(&kept).map_err(Error::io(&kept))?;
                let got = crate::bundle::sha256_hex(&bytes);
                if &got != sha {
                    return Err(Error::other(format!(
                        "{}: the kept agent hashes to {got}, not {sha}, the hash create recorded: it was replaced after create wrote the bundle, so the nodes' configs cannot be trusted\n    hint: rebuild the bundle with the agent you mean (`hardshift create --dir {} --agent-binary PATH`), then verify",
                        kept.display(),
                        dir.display()
                    )));
                }
                req.agent = Some(kept);
            } else {
                notes.push(format!(
                    "the agent binary create embedded (sha256 {sha}) is not kept in {}: using the one beside hardshift",
                    kept.display()
                ));
                req.agent = beside_executable();
            }
        }
        Ok((req, notes))
    }
}

/// A record and the request it stands for, both ways: here, beside the request, so that the
/// record knows nothing of requests.
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
            no_live_agent: req.no_live_agent,
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
            agent: if self.no_agent { None } else { beside_executable() },
            agent_url: self.agent_url.clone(),
            no_live_agent: self.no_live_agent,
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

/// The hardshift-agent that goes with the running executable, if there is one: the one beside it
/// (an installed package, `--bin-dir` builds), or the one cargo's `agent` profile wrote beside its
/// profile directory (`cargo build --profile agent -p hardshift-agent` puts it in target/agent/
/// while the CLI is in target/release/). Of the two, the newer: a stale one must not win over the
/// one just built.
pub fn beside_executable() -> Option<PathBuf> {
    std::env::current_exe().ok().and_then(|exe| agent_for(&exe))
}

/// [`beside_executable`] for the executable at `exe`.
pub fn agent_for(exe: &Path) -> Option<PathBuf> {
    let beside = exe.with_file_name("hardshift-agent");
    let profile = exe.parent()?.parent().map(|t| t.join("agent/hardshift-agent"));
    let modified = |p: &Path| std::fs::metadata(p).ok().filter(|m| m.is_file()).and_then(|m| m.modified().ok());
    [Some(beside), profile]
        .into_iter()
        .flatten()
        .filter_map(|p| modified(&p).map(|t| (t, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
}

/// `master=FILE` or `worker=FILE`, as `--mco-base` takes them.
pub fn parse_base(part: &str) -> Result<(Role, PathBuf), String> {
    match part.split_once('=') {
        Some(("master", f)) => Ok((Role::Master, PathBuf::from(f))),
        Some(("worker", f)) => Ok((Role::Worker, PathBuf::from(f))),
        _ => Err(format!("{part:?}: expected master=FILE or worker=FILE")),
    }
}

#[cfg(test)]
mod agent_lookup {
    use super::agent_for;
    use std::time::{Duration, SystemTime};

    fn agent_at(path: &std::path::Path, age_s: u64) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let f = std::fs::File::create(path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(age_s)).unwrap();
    }

    #[test]
    fn the_newer_of_beside_and_the_agent_profile() {
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("target/release/hardshift");
        assert_eq!(agent_for(&exe), None);
        let profile = t.path().join("target/agent/hardshift-agent");
        agent_at(&profile, 60);
        assert_eq!(agent_for(&exe).as_ref(), Some(&profile), "only the agent profile's");
        let beside = t.path().join("target/release/hardshift-agent");
        agent_at(&beside, 3600);
        assert_eq!(agent_for(&exe).as_ref(), Some(&profile), "a stale one beside must not win");
        agent_at(&beside, 0);
        assert_eq!(agent_for(&exe).as_ref(), Some(&beside), "the one just built beside");
        // An installed package: /usr/bin/hardshift-agent beside, no profile directory.
        let usr = t.path().join("usr/bin/hardshift");
        agent_at(&usr.with_file_name("hardshift-agent"), 0);
        assert_eq!(agent_for(&usr), Some(usr.with_file_name("hardshift-agent")));
    }
}

#[cfg(test)]
mod record_round_trip {
    use super::*;

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
            no_live_agent: true,
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
        assert!(again.no_live_agent);
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
