//! Everything placed on the nodes: static pods, cluster manifests, per-node files, and the
//! Ignition config of each node.

pub mod bootkube;
pub mod manifests;
pub mod node;
pub mod paths;
pub mod static_pods;

use crate::cluster::{Cluster, Role};
use crate::ignition::{self, Config, MergeReport};
use crate::pki::Pki;
use std::collections::BTreeMap;

/// A CRD from `DIR/crds/`, applied by bootkube before the cluster-version-operator starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crd {
    pub file: String,
    pub contents: Vec<u8>,
}

/// What `create` got besides the cluster: CRDs and, per role, an MCO-rendered base.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    pub crds: Vec<Crd>,
    pub bases: BTreeMap<Role, Config>,
}

#[derive(Debug, Clone)]
pub struct NodeIgnition {
    pub hostname: String,
    pub role: Role,
    pub bytes: Vec<u8>,
    pub files: usize,
    pub units: usize,
    /// Some when merged into an MCO base.
    pub merge: Option<MergeReport>,
}

/// One complete Ignition config per node.
pub fn ignitions(c: &Cluster, pki: &Pki, extras: &Extras) -> Vec<NodeIgnition> {
    let shared = node::Shared::new(c, pki, extras);
    c.nodes
        .iter()
        .map(|n| {
            let add = node::node_config(c, n, &shared, extras.bases.contains_key(&n.role));
            let base = extras.bases.get(&n.role);
            let (cfg, report) = ignition::build(&add, base);
            NodeIgnition {
                hostname: n.hostname.clone(),
                role: n.role,
                files: cfg.storage.files.len(),
                units: cfg.systemd.units.len(),
                bytes: ignition::render(&cfg),
                merge: base.map(|_| report),
            }
        })
        .collect()
}
