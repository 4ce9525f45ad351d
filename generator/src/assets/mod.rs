//! Everything placed on the nodes: static pods, cluster manifests, per-node files, and the
//! Ignition config of each node.

pub mod agent;
pub mod bootkube;
pub mod control_plane;
pub mod featuregates;
pub mod in_place;
pub mod kubelet;
pub mod live;
pub mod manifests;
pub mod mcs;
pub mod node;
pub mod parts;
pub mod paths;
pub mod seeds;
pub mod static_pods;

use crate::cluster::{Cluster, Role};
use crate::ignition::{self, Config, MergeReport};
use crate::pki::Pki;
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// A CRD from `DIR/crds/`, applied by bootkube before the cluster-version-operator starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crd {
    pub file: String,
    pub contents: Vec<u8>,
}

/// What `create` got besides the cluster: CRDs and, per role, an MCO-rendered base.
#[derive(Default)]
pub struct Extras {
    pub crds: Vec<Crd>,
    pub bases: BTreeMap<Role, Config>,
    /// Per role, the rendered MachineConfig its base came from (when it was one): the
    /// machine-config server's files are made from it (`mcs`).
    pub machine_configs: BTreeMap<Role, serde_json::Value>,
    /// The hardshift-agent binary to place on every node; None leaves the agent out.
    pub agent: Option<agent::Binary>,
    /// The kubeadmin password (`auth/kubeadmin-password`); None leaves the kubeadmin Secret out.
    pub kubeadmin: Option<crate::kubeadmin::Kubeadmin>,
    /// The bootstrap control plane the release's renders made, in place of hardshift's own.
    pub renders: Option<control_plane::Bootstrap>,
}

#[derive(Debug, Clone)]
pub struct NodeIgnition {
    pub hostname: String,
    pub role: Role,
    /// The config, its large data URLs shared with the other nodes' (see `ignition::to_json_body`).
    pub body: crate::body::Body,
    /// Size of the config (kept when the body moves into the bundle).
    pub size: usize,
    /// SHA-256 of the config, hex: it pins the config in the install commands and SHA256SUMS.
    pub sha256: String,
    pub files: usize,
    pub units: usize,
    /// The live system's config (`live/NODE.ign`), when the node boots through one.
    pub live: Option<crate::body::Body>,
    /// Some when merged into an MCO base.
    pub merge: Option<MergeReport>,
}

/// One complete Ignition config per node, built in parallel. Files that many nodes share (the
/// kubelet kubeconfig, the CA, the pull secret...) are compressed and encoded once.
pub fn ignitions(c: &Cluster, pki: &Pki, extras: &Extras) -> Vec<NodeIgnition> {
    ignitions_of(c, pki, extras, &|_| true)
}

/// The configs of the nodes `which` selects; `pki` need hold only what those nodes read (see
/// `parts::pki_read_by`).
pub fn ignitions_of(c: &Cluster, pki: &Pki, extras: &Extras, which: &(dyn Fn(&crate::cluster::Node) -> bool + Sync)) -> Vec<NodeIgnition> {
    let shared = parts::Shared::new(c, pki, extras);
    let cache: Mutex<HashMap<[u8; 32], ignition::Contents>> = Mutex::new(HashMap::new());
    let pieces = ignition::Pieces::default();
    // Once per role, not per node: every node's config carries the base's files.
    let bases: BTreeMap<Role, ignition::Config> = extras
        .bases
        .iter()
        .map(|(r, b)| {
            let mut b = b.clone();
            ignition::compact(&mut b);
            (*r, b)
        })
        .collect();
    let encode = |data: &[u8]| {
        let key: [u8; 32] = Sha256::digest(data).into();
        if let Some(hit) = cache.lock().expect("cache").get(&key) {
            return hit.clone();
        }
        let enc = ignition::encode(data);
        cache.lock().expect("cache").insert(key, enc.clone());
        enc
    };
    c.nodes
        .par_iter()
        .filter(|n| which(n))
        .map(|n| {
            let base = bases.get(&n.role);
            let (cfg, report) = if c.single_node() {
                in_place::config(&shared, c, n, base, &encode)
            } else {
                ignition::build_with(&parts::node_config(&shared, n), base, &encode)
            };
            let body = ignition::to_json_body(&cfg, &pieces);
            let sha256 = body.sha256_hex();
            let live = extras
                .agent
                .as_ref()
                .filter(|_| live::wanted(c))
                .map(|bin| ignition::to_json_body(&live::config(c, n, pki, bin, &sha256, &encode), &pieces));
            NodeIgnition {
                hostname: n.hostname.clone(),
                role: n.role,
                files: cfg.storage.files.len(),
                units: cfg.systemd.units.len(),
                size: body.len(),
                sha256,
                body,
                live,
                merge: base.map(|_| report),
            }
        })
        .collect()
}
