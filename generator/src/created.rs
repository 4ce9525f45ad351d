//! What `create` made and wrote, in lines for the person who ran it: the cluster, the PKI's
//! tally, each node's config, whose control plane the bootstrap runs, and where it all went.

use crate::cluster::{Cluster, Role};
use crate::fsio::{Staged, Written};
use crate::pipeline::{self, Created, Made};
use crate::pki::{Outcome, Pki};
use crate::{ignition, kubeadmin, layout};
use std::path::Path;

/// Every line, in order.
pub fn lines(created: &Created) -> Vec<String> {
    let Created {
        made,
        written,
        rerun,
        dir,
        from_renders,
    } = created;
    let cluster = &made.cluster;
    let count = |r| cluster.nodes.iter().filter(|n| n.role == r).count();
    let head = match &cluster.bootstrap_in_place {
        Some(b) => {
            let n = cluster.bootstrap();
            let at = if cluster.api_vip == n.ip && cluster.ingress_vip == n.ip {
                format!("API and ingress at the node itself ({}, no load balancer)", n.ip)
            } else {
                format!("API {} , ingress {} (VIPs)", cluster.api_vip, cluster.ingress_vip)
            };
            format!(
                "cluster {}: a single node ({}, bootstrap-in-place onto {}), {at}",
                cluster.domain(),
                n.hostname,
                b.installation_disk
            )
        }
        None => String::new(),
    };
    let mut out = vec![format!(
        "cluster {}: {} nodes ({} bootstrap, {} masters, {} workers), API {} , ingress {}",
        cluster.domain(),
        cluster.nodes.len(),
        count(Role::Bootstrap),
        count(Role::Master),
        count(Role::Worker),
        cluster.api_vip,
        cluster.ingress_vip
    )];
    if !head.is_empty() {
        out[0] = head;
    }
    out.extend(pki(cluster, &made.pki, *rerun));
    out.extend(configs(dir, made));
    if *from_renders {
        out.push(format!(
            "masters and workers: merged into the release's own rendered MachineConfigs ({})",
            dir.join(layout::RENDER).display()
        ));
    }
    out.push(control_plane(dir, made));
    out.extend(written_to(dir, made, written));
    out.push(format!("admin kubeconfig: {}", dir.join(layout::ADMIN_KUBECONFIG).display()));
    if made.new_password {
        // Shown once, when made; afterwards only the 0600 file holds it.
        out.push(format!(
            "console login: kubeadmin / {} (kept in {})",
            made.extras.kubeadmin.as_ref().map_or("", |k| k.password.as_str()),
            dir.join(kubeadmin::PASSWORD_FILE).display()
        ));
    }
    out
}

/// Whose control plane the bootstrap runs.
fn control_plane(dir: &Path, made: &Made<Staged>) -> String {
    match &made.extras.renders {
        Some(r) => format!(
            "bootstrap control plane: the release's renders ({}): {} static pods, {} configs, {} manifests and {} CRDs of theirs",
            dir.join(layout::RENDER).display(),
            r.pods.len(),
            r.configs.len(),
            r.manifests.len(),
            r.crds.len()
        ),
        // Said once a run, plainly: the release's operators will find a control plane they did not render.
        None if pipeline::rendered::has_renders(dir) => "bootstrap control plane: hardshift's own static pods, as asked, not the release's renders beside it (`hardshift render --diff` shows how they differ)".into(),
        None => "bootstrap control plane: hardshift's own static pods, not the release's renders (`hardshift render` makes them, and the next `create` uses them; `hardshift render --diff` shows how they differ)".into(),
    }
}

/// The PKI's tally, and each entry re-issued (or, on a re-run, created) with why.
fn pki(cluster: &Cluster, pki: &Pki, rerun: bool) -> Vec<String> {
    let tally = |f: fn(&Outcome) -> bool| pki.entries.iter().filter(|e| f(&e.outcome)).count();
    let mut out = vec![format!(
        "PKI: {} entries ({} keys for new entries): {} created, {} reused, {} re-issued",
        pki.entries.len(),
        cluster.pki.key_algorithm.as_str(),
        tally(|o| *o == Outcome::Created),
        tally(|o| *o == Outcome::Reused),
        tally(|o| matches!(o, Outcome::Reissued(_)))
    )];
    for e in &pki.entries {
        match &e.outcome {
            Outcome::Reissued(why) => out.push(format!("  re-issued {}: {why}", e.spec.id())),
            Outcome::Created if rerun => out.push(format!("  created {}", e.spec.id())),
            _ => {}
        }
    }
    out
}

/// The Ignition spec, the CRDs, the agent, and one line per node's config.
fn configs(dir: &Path, made: &Made<Staged>) -> Vec<String> {
    let (cluster, extras) = (&made.cluster, &made.extras);
    // A node merged into a newer base keeps the base's version (the MCO renders 3.4.0).
    let parse = |v: &str| v.split('.').map(|p| p.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>();
    let mut versions: Vec<String> = extras
        .bases
        .values()
        .map(|b| &b.ignition.version)
        .filter(|v| parse(v) > parse(ignition::VERSION))
        .cloned()
        .collect();
    versions.push(ignition::VERSION.to_string());
    versions.sort();
    versions.dedup();
    let agent = match &extras.agent {
        Some(b) if b.is_remote() => format!(
            "hardshift-agent fetched from {} (serve {}/http/ there)",
            b.encoded.source.as_deref().unwrap_or(""),
            dir.display()
        ),
        Some(b) => format!("hardshift-agent ({:.1} MiB) on every node", b.bytes.len() as f64 / 1048576.0),
        None => "no node agent".to_string(),
    };
    let mut out = vec![format!(
        "ignition (spec {}), {} CRDs for bootkube, {agent}:",
        versions.join(" and "),
        extras.crds.len()
    )];
    let single = made.cluster.single_node();
    out.extend(made.nodes.iter().map(|n| node(n, single)));
    if extras.agent.as_ref().is_some_and(|b| !b.is_remote()) && cluster.nodes.len() > 50 {
        out.push(format!(
            "hint: every config carries the agent binary; with {} nodes, --agent-url serves it once from the helper",
            cluster.nodes.len()
        ));
    }
    out
}

/// A node's config: its size, and how it was made.
fn node(n: &crate::assets::NodeIgnition, single: bool) -> String {
    let mut how = match &n.merge {
        Some(m) => format!(
            "merged into the MCO {} base ({} files, {} units; {} replaced, {} kept from the base, {} merged)",
            n.role.as_str(),
            m.base_files,
            m.base_units,
            m.replaced_files.len(),
            m.kept_files.len(),
            m.merged_units.len()
        ),
        None if n.role == Role::Bootstrap => "complete".to_string(),
        None => "self-contained (no --mco-base: hardshift's kubelet unit, no MCO files)".to_string(),
    };
    if single {
        // The live system's config, with the master's (described by `how`) inside.
        how = format!("live system (the bootstrap, then install-to-disk); the master's config inside: {how}");
    }
    format!(
        "  ignition/{}.ign  {:<9} {:>4} files {:>3} units {:>8.1} KiB  {how}",
        n.hostname,
        n.role.as_str(),
        n.files,
        n.units,
        n.size as f64 / 1024.0
    )
}

/// Where the bundle went, and what was repaired.
fn written_to(dir: &Path, made: &Made<Staged>, written: &Written) -> Vec<String> {
    let files = made.bundle.files.len();
    // An unchanged bundle was checked when it was written: a re-run stays instant.
    match written {
        Written::Unchanged(_) => vec![format!("bundle unchanged: {files} files in {}", dir.display())],
        Written::New(g) => vec![format!("wrote {files} files to {} ({})", dir.display(), g.display())],
        Written::Repaired { gen, damage, moved_to } => {
            // Same inputs, same bundle: the live copy had been changed on disk. Say what.
            let mut out = vec![format!(
                "repaired the live bundle ({} problems; the damaged copy is in {}):",
                damage.len(),
                moved_to.display()
            )];
            out.extend(damage.iter().take(20).map(|d| format!("  {d}")));
            if damage.len() > 20 {
                out.push(format!("  ... and {} more", damage.len() - 20));
            }
            out.push(format!("wrote {files} files to {} ({})", dir.display(), gen.display()));
            out
        }
    }
}
