//! The inputs of a build, read and checked before anything is locked or made: the cluster, the
//! CRDs, the MCO bases, and the agent binary (read on a thread of its own, beside the rest).

use super::cache::EncodingCache;
use super::decide;
use super::error::Error;
use super::request::Bootstrap;
use super::request::Request;
use crate::assets::{agent, Crd, Extras};
use crate::cluster::{Cluster, Role};
use crate::{config, ignition, layout};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A check still running on an agent encoding taken from the cache: decoding 7 MB runs beside
/// the PKI and the configs, and a mismatch re-encodes before any config carries it.
pub struct CacheCheck {
    pub sha: String,
    pub cache: Arc<dyn EncodingCache>,
    pub check: JoinHandle<bool>,
}

/// The agent binary being read (and its cached encoding looked up), joined when the configs
/// need it.
pub struct PendingAgent {
    pub path: PathBuf,
    pub read: JoinHandle<Result<(agent::Binary, Option<CacheCheck>), Error>>,
}

impl PendingAgent {
    /// The agent, its cached encoding checked (and re-encoded if it was not this agent's).
    pub fn join(self) -> Result<agent::Binary, Error> {
        let (bin, check) = self.read.join().map_err(|_| Error::other("reading the agent binary panicked"))??;
        let Some(CacheCheck { sha, cache, check }) = check else {
            return Ok(bin);
        };
        if check.join().unwrap_or(false) {
            return Ok(bin);
        }
        tracing::warn!(sha, "the cached agent encoding is not this agent's: encoding it anew");
        cache.forget(&sha);
        Ok(agent::Binary::new(bin.bytes.to_vec()))
    }
}

/// The inputs, read and checked.
pub struct Inputs {
    pub cluster: Cluster,
    /// CRDs and MCO bases; the agent and the kubeadmin login are added by the build.
    pub extras: Extras,
    pub agent: Option<PendingAgent>,
    /// The layout the renders were given (their record), when the bases are the renders'.
    pub renders: Option<Layout>,
    /// The cluster's PKI plan (`pki::plan`), made once: the live bundle is read for it and the
    /// build issues it.
    pub plan: Vec<crate::pki::CertSpec>,
}

/// Read and validate the cluster's inputs in `dir` (install-config, agent-config, hardshift.yaml,
/// the release's references).
pub fn cluster(dir: &Path, release_refs: Option<&Path>, overrides: &config::Overrides) -> Result<Cluster, Error> {
    let sources = config::read_sources(dir, release_refs).map_err(Error::input)?;
    config::build(&sources, overrides).map_err(Error::input)
}

/// Everything `req` builds from. The agent's path, magic and URL are checked here, with the
/// inputs; reading and hashing it runs beside the YAML and the first keys.
pub fn read(req: &Request, cache: Arc<dyn EncodingCache>) -> Result<Inputs, Error> {
    let overrides = config::Overrides {
        key_algorithm: req.key_algorithm,
        release_image: req.release_image.clone(),
        crypto_fips: req.crypto_fips,
        // The live configs carry the agent: without one, the nodes install the plain way.
        no_live_agent: req.no_live_agent || req.agent.is_none(),
    };
    let agent = match &req.agent {
        Some(path) => {
            check_agent(path, req.agent_url.as_deref())?;
            let (p, url) = (path.clone(), req.agent_url.clone());
            let read = std::thread::spawn(move || {
                let t = std::time::Instant::now();
                let r = load_agent(&p, url.as_deref(), cache);
                tracing::debug!(ms = t.elapsed().as_millis(), "read the agent");
                r
            });
            Some(PendingAgent { path: path.clone(), read })
        }
        None => None,
    };
    let t = std::time::Instant::now();
    let cluster = cluster(&req.dir, req.release_refs.as_deref(), &overrides)?;
    tracing::debug!(ms = t.elapsed().as_millis(), nodes = cluster.nodes.len(), "read the cluster");
    let t = std::time::Instant::now();
    // DIR/render read once, as data (a link or a FIFO in it is refused, naming it).
    let rendered = super::rendered::load(&req.dir)?;
    let (bases, mut renders) = mco_bases(req, rendered.as_ref());
    let mut extras = read_extras(&req.dir, &bases)?;
    match (req.bootstrap, rendered) {
        (Bootstrap::Native, _) | (Bootstrap::Auto, None) => {}
        (Bootstrap::Renders, None) => {
            return Err(Error::input(format!(
                "--bootstrap-control-plane renders: {} has no renders\n    hint: run `hardshift render --dir {}` first",
                req.dir.join(layout::RENDER).display(),
                req.dir.display()
            )));
        }
        // Their layout is checked against this bundle's (`decide::renders_fresh`) before use.
        (Bootstrap::Renders | Bootstrap::Auto, Some(r)) => {
            extras.renders = Some(super::rendered::read_bootstrap(&req.dir, &r, &cluster)?);
            renders = Some(r.record.layout);
        }
    }
    decide::check_bases(req, &cluster, &extras)?;
    tracing::debug!(
        ms = t.elapsed().as_millis(),
        crds = extras.crds.len(),
        bases = extras.bases.len(),
        "read the CRDs and MCO bases"
    );
    Ok(Inputs {
        plan: crate::pki::plan(&cluster),
        cluster,
        extras,
        agent,
        renders,
    })
}

/// An ELF file, and an http(s) URL if one is given.
fn check_agent(path: &Path, url: Option<&str>) -> Result<(), Error> {
    let mut magic = [0u8; 4];
    hardshift_agent_config::regular::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .map_err(|e| Error::input(format!("--agent-binary {}: {e}", path.display())))?;
    if &magic != b"\x7fELF" {
        return Err(Error::input(format!("--agent-binary {}: not an ELF executable", path.display())));
    }
    match url {
        Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
            Err(Error::input(format!("--agent-url {url:?}: expected an http:// or https:// URL")))
        }
        _ => Ok(()),
    }
}

/// The most an agent binary may be (it is about 7 MB; it travels in every node's config).
pub const MAX_AGENT_BYTES: u64 = 64 << 20;

/// Read the agent: fetched from `url`, or embedded with its encoding from the cache when there
/// is one (checked beside other work, see `CacheCheck`).
fn load_agent(path: &Path, url: Option<&str>, cache: Arc<dyn EncodingCache>) -> Result<(agent::Binary, Option<CacheCheck>), Error> {
    let bytes = hardshift_agent_config::regular::read(path, MAX_AGENT_BYTES)
        .map_err(|e| Error::input(format!("--agent-binary {}: {e}", path.display())))?;
    if !bytes.starts_with(b"\x7fELF") {
        return Err(Error::input(format!("--agent-binary {}: not an ELF executable", path.display())));
    }
    if let Some(url) = url {
        return Ok((agent::Binary::remote(bytes, url), None));
    }
    let sha = crate::bundle::sha256_hex(&bytes);
    let Some(c) = cache.get(&sha) else {
        return Ok((agent::Binary::new(bytes), None));
    };
    match agent::Binary::cached(bytes, c) {
        Ok(b) => {
            let probe = b.clone();
            let check = std::thread::spawn(move || probe.encodes());
            Ok((b, Some(CacheCheck { sha, cache, check })))
        }
        Err(bytes) => Ok((agent::Binary::new(bytes), None)),
    }
}

/// The SHA-256 of each file of the layout the renders were given, by path.
pub type Layout = BTreeMap<String, String>;

/// The MCO bases: as given; else the release's own renders (`hardshift render`: DIR/render/,
/// with the layout they were made from); else DIR/mco/rendered/ when `hardshift mco`'s render.sh
/// left one.
fn mco_bases(req: &Request, rendered: Option<&super::rendered::Renders>) -> (Vec<(Role, PathBuf)>, Option<Layout>) {
    if !req.mco_base.is_empty() {
        return (req.mco_base.clone(), None);
    }
    if let Some(r) = rendered {
        let pools: Vec<(Role, PathBuf)> = [(Role::Master, "master"), (Role::Worker, "worker")]
            .into_iter()
            .filter_map(|(role, pool)| Some((role, super::rendered::rendered_pool(&req.dir, r, pool)?)))
            .collect();
        if !pools.is_empty() {
            return (pools, Some(r.record.layout.clone()));
        }
    }
    let rendered = [
        (Role::Master, req.dir.join(crate::mco::RENDERED_MASTER)),
        (Role::Worker, req.dir.join(crate::mco::RENDERED_WORKER)),
    ];
    (rendered.into_iter().filter(|(_, p)| p.is_file()).collect(), None)
}

/// The CRDs bootkube applies from DIR/crds/ (or DIR/release/crds/), by name.
pub fn crds(dir: &Path) -> Result<Vec<Crd>, Error> {
    read_extras(dir, &[]).map(|e| e.crds)
}

/// CRDs from DIR/crds/ (name order) and the MCO bases: read and checked before anything is made.
fn read_extras(dir: &Path, bases: &[(Role, PathBuf)]) -> Result<Extras, Error> {
    let mut extras = Extras::default();
    let mut problems = Vec::new();
    // The user's DIR/crds/, else the ones `hardshift release pull` took from the release.
    let crd_dir = [dir.join(layout::CRDS), dir.join(layout::RELEASE_CRDS)]
        .into_iter()
        .find(|d| std::fs::read_dir(d).is_ok_and(|mut rd| rd.next().is_some()))
        .unwrap_or_else(|| dir.join(layout::CRDS));
    if let Ok(rd) = std::fs::read_dir(&crd_dir) {
        let mut names: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json"))
            .collect();
        names.sort();
        for p in names {
            // A regular file of a sane size only: a FIFO there would hang `create` (the largest
            // of the release's CRDs is about 2 MiB).
            match hardshift_agent_config::regular::read(&p, 16 << 20) {
                Ok(contents) => extras.crds.push(Crd {
                    file: p.file_name().unwrap_or_default().to_string_lossy().to_string(),
                    contents,
                }),
                Err(e) => problems.push(format!("{}: {e}", p.display())),
            }
        }
    }
    if extras.crds.is_empty() && problems.is_empty() {
        // bootkube.sh waits for every CRD to be Established before the manifests: with none of
        // the release's, the manifests that need them never apply and the bootstrap hangs.
        problems.push(format!(
            "no CRDs in {} or {}: the bootstrap needs the release's config.openshift.io and ClusterVersion/ClusterOperator CRDs before its manifests apply (bootkube would hang at \"crds-established\"); run `hardshift release pull --dir {}` (from the registry, through the mirrors), or put them in {} (`oc adm release extract --to DIR/crds RELEASE`, keeping the *.crd.yaml of config.openshift.io and the CVO)",
            dir.join(layout::CRDS).display(),
            dir.join(layout::RELEASE_CRDS).display(),
            dir.display(),
            dir.join(layout::CRDS).display()
        ));
    }
    for (role, file) in bases {
        let text = std::fs::read_to_string(file).map_err(|e| e.to_string());
        match text.clone().and_then(|t| ignition::parse_base(&t).map_err(String::from)) {
            Ok(cfg) => {
                extras.bases.insert(*role, cfg);
                // A rendered MachineConfig (not a bare Ignition config): the node gets what the
                // machine-config server serves with it.
                if let Some(mc) = text.ok().and_then(|t| ignition::machine_config_of(&t)) {
                    extras.machine_configs.insert(*role, mc);
                }
            }
            Err(e) => problems.push(format!("{} (--mco-base {}): {e}", file.display(), role.as_str())),
        }
    }
    if problems.is_empty() {
        Ok(extras)
    } else {
        Err(Error::input(format!(
            "{} problem(s) in the inputs:\n  {}",
            problems.len(),
            problems.join("\n  ")
        )))
    }
}
