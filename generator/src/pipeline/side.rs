//! The bundle's side parts, made from the live bundle without touching it: the MCO's inputs
//! (`hardshift mco`) and the lab alone (`hardshift lab`). Each reads the live bundle under its
//! lock and writes in one step.

use super::error::Error;
use super::live::Live;
use crate::cluster::Cluster;
use crate::pki::{self, keys::SystemKeys};
use crate::{bundle, fsio, layout, mco};
use std::collections::BTreeMap;
use std::path::Path;

/// Write DIR/mco/ (the MCO's inputs and render.sh) for `cluster`, keeping what render.sh already
/// rendered there; the number of files written.
pub fn mco(dir: &Path, cluster: &Cluster) -> Result<usize, Error> {
    // The MCO's bootstrap stops at the first tag it lacks: name them all before it runs.
    let missing = crate::release::missing_for_mco(&cluster.release);
    if !missing.is_empty() {
        return Err(Error::input(format!(
            "{} problem{} in the release's image references:\n  {}\n    hint: use the release's own image-references (`hardshift release pull`, or `oc adm release extract --file=image-references`)",
            missing.len(),
            if missing.len() == 1 { "" } else { "s" },
            missing.join("\n  ")
        )));
    }
    let _lock = fsio::lock(dir, "mco")?;
    let specs = pki::plan(cluster);
    let live = Live::read(dir, &specs);
    let files = mco_inputs(dir, cluster, &live, time::OffsetDateTime::now_utc())?;
    fsio::replace_dir(&dir.join(layout::MCO), &files, &["rendered"]).map_err(Error::other)?;
    Ok(files.len())
}

/// The MCO's inputs over the live bundle, paths inside DIR/mco/. The CAs the rendered nodes will
/// trust must be the bundle's: refused when the bundle has not made them yet.
pub fn mco_inputs(dir: &Path, cluster: &Cluster, live: &Live, now: time::OffsetDateTime) -> Result<Vec<(String, u32, Vec<u8>)>, Error> {
    let issued = own_pki(
        dir,
        cluster,
        live,
        now,
        "the MCO",
        &format!(
            "`hardshift create --dir {} --self-contained-nodes` first, then `hardshift mco`",
            dir.display()
        ),
    )?;
    let prefix = format!("{}/", layout::MCO);
    Ok(mco::inputs(cluster, &issued)
        .map_err(Error::other)?
        .into_iter()
        .map(|(p, mode, bytes)| (p.strip_prefix(&prefix).unwrap_or(&p).to_string(), mode, bytes))
        .collect())
}

/// The live bundle's PKI, for what must be given the bundle's own CAs (`whom`: the MCO, the
/// renders): refused, with `then` as the hint, while the bundle has not made them yet.
pub(super) fn own_pki(
    dir: &Path,
    cluster: &Cluster,
    live: &Live,
    now: time::OffsetDateTime,
    whom: &str,
    then: &str,
) -> Result<pki::Pki, Error> {
    let issued = pki::issue(&pki::plan(cluster), &live.existing, now, &SystemKeys, pki::Options::default()).map_err(Error::input)?;
    let missing = pki::missing_cas(&issued);
    if !missing.is_empty() {
        return Err(Error::input(format!(
            "{}: the bundle has no {} yet; {whom} must be given the bundle's own CAs\n    hint: run {then}",
            dir.display(),
            missing.join(", "),
        )));
    }
    Ok(issued)
}

/// Rewrite DIR/lab/ alone, from the inputs and the live bundle's Ignition configs; how it was
/// written and the number of lab files.
pub fn lab(dir: &Path, cluster: &Cluster) -> Result<(fsio::Written, usize), Error> {
    let _lock = fsio::lock(dir, "lab")?;
    let mut b = fsio::read_bundle(dir).map_err(Error::input)?;
    relab(dir, cluster, &mut b)?;
    let n = b.files.keys().filter(|p| p.starts_with(&format!("{}/", layout::LAB))).count();
    Ok((fsio::write(dir, &b).map_err(Error::other)?, n))
}

/// `b` with its lab made again for `cluster`, from the configs it holds (whose hashes the PXE
/// and install scripts pin). Refused if a node has no config: the inputs changed since `create`.
pub fn relab(dir: &Path, cluster: &Cluster, b: &mut bundle::Bundle) -> Result<(), Error> {
    let missing: Vec<&str> = cluster
        .nodes
        .iter()
        .filter(|n| !b.files.contains_key(&layout::ignition(&n.hostname)))
        .map(|n| n.hostname.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(Error::input(format!(
            "the bundle has no Ignition config for {}: the inputs changed since `create`; run `hardshift create --dir {}`",
            missing.join(", "),
            dir.display()
        )));
    }
    let hashes = crate::lab::ignition_hashes(b.files.iter().filter_map(|(p, f)| {
        let host = layout::node_of_ignition(p)?;
        Some((host, &f.contents))
    }));
    relive(dir, cluster, b, &hashes)?;
    bundle::add_lab(b, cluster, &hashes);
    bundle::reseal(b);
    Ok(())
}

/// The live configs, for `cluster`'s lab: each one's agent config made again (the helper's URL,
/// the disk and the image it names are the lab's), the rest of it as `create` wrote it; gone when
/// the lab no longer boots through them. A node with the agent and no live config is refused:
/// only `create` has what one is made of.
fn relive(dir: &Path, cluster: &Cluster, b: &mut bundle::Bundle, hashes: &BTreeMap<String, String>) -> Result<(), Error> {
    use crate::assets::{agent, live};
    for n in &cluster.nodes {
        let path = layout::live(&n.hostname);
        if !live::wanted(cluster) {
            b.files.remove(&path);
            continue;
        }
        let Some(f) = b.files.get_mut(&path) else {
            let config = b
                .files
                .get(&layout::ignition(&n.hostname))
                .map(|f| f.contents.to_vec())
                .unwrap_or_default();
            let has_agent = config.windows(agent::BINARY.len()).any(|w| w == agent::BINARY.as_bytes());
            if has_agent {
                return Err(Error::input(format!(
                    "the bundle has no live config for {}: the lab now boots through live configs (lab.liveAgent), which only `create` makes; run `hardshift create --dir {}` (keys are kept)",
                    n.hostname,
                    dir.display()
                )));
            }
            continue;
        };
        let sha = hashes.get(&n.hostname).cloned().unwrap_or_default();
        let toml = hardshift_agent_config::to_toml(&live::settings(cluster, n, &sha)).expect("agent config serializes");
        let mut cfg: serde_json::Value =
            serde_json::from_slice(&f.contents.to_vec()).map_err(|e| Error::input(format!("{}: {e}", dir.join(&path).display())))?;
        let entry = cfg["storage"]["files"]
            .as_array_mut()
            .and_then(|files| files.iter_mut().find(|x| x["path"] == agent::CONFIG))
            .ok_or_else(|| Error::input(format!("{}: no {} in it", dir.join(&path).display(), agent::CONFIG)))?;
        entry["contents"] = serde_json::to_value(crate::ignition::encode(toml.as_bytes())).expect("contents serialize");
        // Compact, key order kept (serde_json's preserve_order): the bytes a fresh build writes.
        let mut bytes = serde_json::to_vec(&cfg).expect("a config serializes");
        bytes.push(b'\n');
        f.contents = bytes.into();
    }
    Ok(())
}
