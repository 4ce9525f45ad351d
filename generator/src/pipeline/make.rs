//! The build itself: from the inputs and the live bundle to every file, keeping the live keys,
//! certificates and password. Pure but for what is injected: the clock, the key source, the
//! password source, and a `Stage` that may write a fresh bundle's first part early.

use super::decide;
use super::error::Error;
use super::inputs::Inputs;
use super::live::Live;
use super::request::Request;
use crate::assets::{self, agent, Extras, NodeIgnition};
use crate::cluster::{Cluster, Role};
use crate::pki::{self, keys::KeySource, PkiError};
use crate::{bundle, fsio, kubeadmin};
use std::path::PathBuf;

/// What a build takes from the world.
pub struct Env<'a> {
    pub now: time::OffsetDateTime,
    pub keys: &'a dyn KeySource,
    /// A new kubeadmin password, when the live bundle has none.
    pub new_password: &'a (dyn Fn() -> Result<String, Error> + Sync),
}

/// Where a fresh bundle's first part goes while the bootstrap's keys are still being made (the
/// masters' and workers' configs, the PKI they read, the lab): written and flushed early, the
/// rest completes it (`fsio::write_staged`).
pub trait Stage: Send {
    fn put(&mut self, files: Vec<(String, bundle::File)>) -> Result<(), Error>;
    /// Keep `bytes` at `dest` (beside the generations) once the bundle is written.
    fn keep(&mut self, dest: PathBuf, bytes: &[u8], mode: u32) -> Result<(), Error>;
}

/// No stage: everything is made first, then written (or compared).
impl Stage for () {
    fn put(&mut self, _: Vec<(String, bundle::File)>) -> Result<(), Error> {
        Ok(())
    }
    fn keep(&mut self, _: PathBuf, _: &[u8], _: u32) -> Result<(), Error> {
        Ok(())
    }
}

impl Stage for fsio::Staged {
    fn put(&mut self, files: Vec<(String, bundle::File)>) -> Result<(), Error> {
        fsio::Staged::put(self, files).map_err(Error::other)
    }
    fn keep(&mut self, dest: PathBuf, bytes: &[u8], mode: u32) -> Result<(), Error> {
        fsio::Staged::keep(self, dest, bytes, mode).map_err(Error::other)
    }
}

/// Everything a build makes, before it is written.
pub struct Made<S> {
    pub cluster: Cluster,
    pub extras: Extras,
    pub pki: pki::Pki,
    pub nodes: Vec<NodeIgnition>,
    pub bundle: bundle::Bundle,
    /// The kubeadmin password was made by this build (shown once).
    pub new_password: bool,
    /// What was staged, for `fsio::write_staged`.
    pub staged: Option<S>,
}

/// The bundle `req` and `inputs` make over `live`. `stage`, when given, takes a fresh bundle's
/// masters' and workers' configs as soon as their PKI exists.
pub fn make<S: Stage>(req: &Request, inputs: Inputs, live: &Live, env: &Env, stage: Option<S>) -> Result<Made<S>, Error> {
    let Inputs {
        cluster,
        mut extras,
        agent,
        renders,
        plan: specs,
    } = inputs;
    let t = std::time::Instant::now();
    decide::refuse_rekey(req, &specs, live)?;
    let (password, new_password) = decide::password(live, env.new_password)?;
    let for_nodes = assets::parts::pki_read_by(&cluster, &[Role::Master, Role::Worker]);
    let first: &(dyn Fn(&pki::CertSpec) -> bool + Sync) = if stage.is_some() { &for_nodes } else { &|_| false };
    let (extras_early, c) = (&mut extras, &cluster);
    let domain = cluster.domain();
    // The login's bcrypt and the keys only the bootstrap needs run beside the first stage.
    let (admin, issued) = rayon::join(
        || kubeadmin::Kubeadmin::new(password, &domain),
        || {
            pki::issue_staged(
                &specs,
                &live.existing,
                env.now,
                env.keys,
                pki::Options { rotate_ca: req.rotate_ca },
                first,
                |partial| {
                    // Beside the key generation either way: the agent, and its cached encoding's check.
                    if let Some(pending) = agent {
                        let path = pending.path.clone();
                        let bin = pending.join()?;
                        if c.fips {
                            decide::fips_agent(&path, &bin.bytes)?;
                        }
                        extras_early.agent = Some(bin);
                    }
                    let Some(mut st) = stage else { return Ok(None) };
                    let nodes = stage_first(req, c, partial, extras_early, &mut st)?;
                    tracing::debug!(
                        ms = t.elapsed().as_millis(),
                        nodes = nodes.len(),
                        "built and wrote the masters' and workers' configs"
                    );
                    Ok::<_, Error>(Some((nodes, st)))
                },
            )
        },
    );
    let (pki, early) = issued.map_err(|e| match e {
        PkiError::Refused { .. } => Error::input(e),
        other => Error::other(other),
    })?;
    if let Some(layout) = &renders {
        decide::renders_fresh(req, &cluster, &pki, layout)?;
    }
    let (nodes, staged) = match early? {
        Some((nodes, st)) => (nodes, Some(st)),
        None => (Vec::new(), None),
    };
    tracing::debug!(ms = t.elapsed().as_millis(), "issued the PKI");
    extras.kubeadmin = Some(admin);
    let nodes = the_other_configs(&cluster, &pki, &extras, nodes);
    let served: Vec<(&str, &[u8])> = extras
        .agent
        .iter()
        .filter(|b| b.is_remote())
        .map(|b| (agent::SERVED, &b.bytes[..]))
        .collect();
    let password = extras.kubeadmin.as_ref().map(|k| k.password.as_str());
    let bundle = bundle::assemble(&cluster, &pki, &nodes, &served, password);
    Ok(Made {
        cluster,
        extras,
        pki,
        nodes,
        bundle,
        new_password,
        staged,
    })
}

/// Every node's config: those staged early (`staged`), and the others, in the inventory's order.
fn the_other_configs(cluster: &Cluster, pki: &pki::Pki, extras: &Extras, mut nodes: Vec<NodeIgnition>) -> Vec<NodeIgnition> {
    let t = std::time::Instant::now();
    let built: std::collections::BTreeSet<String> = nodes.iter().map(|n| n.hostname.clone()).collect();
    nodes.extend(assets::ignitions_of(cluster, pki, extras, &|n| !built.contains(&n.hostname)));
    let order: std::collections::HashMap<&str, usize> = cluster.nodes.iter().enumerate().map(|(i, n)| (n.hostname.as_str(), i)).collect();
    nodes.sort_by_key(|n| order.get(n.hostname.as_str()).copied());
    tracing::debug!(ms = t.elapsed().as_millis(), nodes = nodes.len(), "built the Ignition configs");
    nodes
}

/// The first stage of a fresh bundle, beside the bootstrap's keys: the masters' and workers'
/// configs from the `partial` PKI, with that PKI, the lab (from the hashes known so far: the few
/// files that name the bootstrap's config are written again at the end), a served agent, and the
/// agent kept for `verify`.
fn stage_first(req: &Request, c: &Cluster, partial: &pki::Pki, extras: &Extras, st: &mut impl Stage) -> Result<Vec<NodeIgnition>, Error> {
    if let Some(b) = &extras.agent {
        let sha = bundle::sha256_hex(&b.bytes);
        st.keep(super::record::kept_agent(&req.dir, &sha), &b.bytes, 0o755)?;
    }
    // A single node's config holds the bootstrap's parts: it waits for the whole PKI.
    let nodes = assets::ignitions_of(c, partial, extras, &|n| n.role != Role::Bootstrap && !c.single_node());
    let mut files: Vec<_> = nodes.iter().map(bundle::ignition_file).collect();
    files.extend(nodes.iter().filter_map(bundle::live_file));
    files.extend(bundle::pki_files(partial));
    let mut lab = bundle::Bundle::default();
    bundle::add_lab(&mut lab, c, &bundle::config_hashes(&nodes));
    files.extend(lab.files);
    if let Some(b) = extras.agent.as_ref().filter(|b| b.is_remote()) {
        files.push(bundle::served_file(agent::SERVED, &b.bytes));
    }
    st.put(files)?;
    Ok(nodes)
}
