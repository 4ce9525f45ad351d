//! The bundle: every generated file with its mode, as data. `assemble` is pure; `fsio` writes it.

pub use crate::body::Body;
use crate::cluster::Cluster;
use crate::kubeconfig;
use crate::pki::{Kind, Pki};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub const SUMS: &str = crate::layout::SUMS;
pub const CLUSTER_JSON: &str = crate::layout::CLUSTER_JSON;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub mode: u32,
    pub contents: Body,
}

/// Path inside the bundle → file. Ordered, so output is deterministic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bundle {
    pub files: BTreeMap<String, File>,
}

pub const SECRET: u32 = 0o600;
pub const PUBLIC: u32 = 0o644;

impl Bundle {
    pub fn add(&mut self, path: impl Into<String>, mode: u32, contents: impl Into<Body>) {
        self.files.insert(
            path.into(),
            File {
                mode,
                contents: contents.into(),
            },
        );
    }

    /// Top-level names (`pki`, `auth`, `SHA256SUMS`, ...), each linked into the bundle directory.
    pub fn top_level(&self) -> Vec<String> {
        let mut v: Vec<String> = self.files.keys().map(|p| p.split('/').next().unwrap_or(p).to_string()).collect();
        v.dedup();
        v
    }
}

/// Everything `create` writes for the foundation: PKI, kubeconfigs, the resolved cluster, sums.
/// The ignition bytes move into the bundle (they can be hundreds of MB for a large cluster).
pub fn assemble(
    c: &Cluster,
    pki: &Pki,
    ignitions: &[crate::assets::NodeIgnition],
    served: &[(&str, &[u8])],
    kubeadmin: Option<&str>,
) -> Bundle {
    let mut b = Bundle::default();
    if let Some(p) = kubeadmin {
        b.add(crate::kubeadmin::PASSWORD_FILE, SECRET, format!("{p}\n"));
    }
    // The collector scrubs these credentials from what leaves the workstation: read from here,
    // not from the inputs.
    b.add(crate::layout::PULL_SECRET, SECRET, format!("{}\n", c.pull_secret.trim_end()));
    b.files.extend(served.iter().map(|(path, bytes)| served_file(path, bytes)));
    // Each config was hashed once, when built: its SHA-256 pins it in the install commands and
    // in SHA256SUMS.
    let hashes = config_hashes(ignitions);
    add_lab(&mut b, c, &hashes);
    let mut known = BTreeMap::new();
    for n in ignitions {
        let (path, file) = ignition_file(n);
        known.insert(path.clone(), n.sha256.clone());
        b.files.insert(path, file);
        b.files.extend(live_file(n));
    }
    b.files.extend(pki_files(pki));
    for k in kubeconfig::plan(c) {
        let text = kubeconfig::to_yaml(&k, pki);
        b.add(k.path, SECRET, text);
    }
    let sums = sums_with(&b, &known);
    b.add(SUMS, PUBLIC, sums);
    b
}

/// Hostname → SHA-256 of its config, as `lab::files` takes them.
pub fn config_hashes(nodes: &[crate::assets::NodeIgnition]) -> BTreeMap<String, String> {
    nodes.iter().map(|n| (n.hostname.clone(), n.sha256.clone())).collect()
}

/// A file the helper serves (the agent binary, fetched by `--agent-url`).
pub fn served_file(path: &str, bytes: &[u8]) -> (String, File) {
    (
        path.to_string(),
        File {
            mode: 0o755,
            contents: bytes.into(),
        },
    )
}

/// Each entry's key (`.key`) and certificate (`.crt`, or `.pub` for a bare key).
pub fn pki_files(pki: &Pki) -> Vec<(String, File)> {
    let file = |mode, text: &str| File {
        mode,
        contents: text.as_bytes().into(),
    };
    let mut out = Vec::with_capacity(pki.entries.len() * 2);
    for e in &pki.entries {
        let stem = e.spec.id();
        out.push((format!("{stem}.key"), file(SECRET, &e.key_pem)));
        let ext = match e.spec.kind {
            Kind::KeyOnly => "pub",
            _ => "crt",
        };
        out.push((format!("{stem}.{ext}"), file(PUBLIC, &e.cert_pem)));
    }
    out
}

/// A node's config as a bundle file (its pieces shared, not copied). It holds secrets: the pull
/// secret, kubeconfigs, and on the bootstrap every key.
pub fn ignition_file(n: &crate::assets::NodeIgnition) -> (String, File) {
    let path = format!("ignition/{}.ign", n.hostname);
    (
        path,
        File {
            mode: SECRET,
            contents: n.body.clone(),
        },
    )
}

/// A node's live config as a bundle file, if it has one (it holds the node's agent key).
pub fn live_file(n: &crate::assets::NodeIgnition) -> Option<(String, File)> {
    let body = n.live.as_ref()?;
    Some((
        crate::layout::live(&n.hostname),
        File {
            mode: SECRET,
            contents: body.clone(),
        },
    ))
}

pub fn sha256_hex(data: &[u8]) -> String {
    crate::body::hex(&Sha256::digest(data))
}

/// `sha256sum -c` format over every file but the sums file itself (hashed on all cores).
pub fn sums(b: &Bundle) -> String {
    sums_with(b, &BTreeMap::new())
}

/// `sums`, taking the hashes already known (path → hex) rather than hashing those files again.
pub fn sums_with(b: &Bundle, known: &BTreeMap<String, String>) -> String {
    use rayon::prelude::*;
    let files: Vec<(&String, &File)> = b.files.iter().filter(|(p, _)| p.as_str() != SUMS).collect();
    files
        .par_iter()
        .map(|(p, f)| {
            let h = known.get(*p).cloned().unwrap_or_else(|| f.contents.sha256_hex());
            format!("{h}  {p}\n")
        })
        .collect::<Vec<_>>()
        .concat()
}

/// The cluster model the bundle was made from (no secrets: the pull secret is left out).
pub fn cluster_json(c: &Cluster) -> String {
    let mut json = serde_json::to_string_pretty(c).expect("cluster serializes");
    json.push('\n');
    json
}

/// The install as every reader after `create` knows it (hardshift_bundle's contract).
pub fn inventory(c: &Cluster) -> hardshift_bundle::Inventory {
    use hardshift_bundle::inventory::{Inventory, Node, Release, FORMAT};
    Inventory {
        format: FORMAT,
        name: c.name.clone(),
        base_domain: c.base_domain.clone(),
        release: Release {
            image: c.release.image.clone(),
            version: c.release.version.clone(),
            kubernetes: c.release.kubernetes.clone(),
        },
        fips: c.fips,
        single_node: c.bootstrap_in_place.is_some(),
        machine_networks: c.machine_networks.clone(),
        cluster_networks: c.cluster_networks.iter().map(|n| n.cidr).collect(),
        service_networks: c.service_networks.clone(),
        api_vip: c.api_vip,
        ingress_vip: c.ingress_vip,
        helper_ip: c.helper_ip,
        collector_address: c.collector_address.clone(),
        collector_port: c.collector_port,
        http_base_url: c.lab.http_base_url.clone(),
        nodes: c
            .nodes
            .iter()
            .map(|n| Node {
                name: n.hostname.clone(),
                role: n.role,
                interface: n.interface.clone(),
                mac: n.mac.clone(),
                ip: n.ip,
                prefix: n.prefix,
                gateway: n.gateway,
            })
            .collect(),
    }
}

/// Put the lab files in (replacing any), for `create` and for `hardshift lab`, with the cluster
/// model they were made from (its lab settings are in it) and the inventory every reader after
/// `create` knows the install by.
pub fn add_lab(b: &mut Bundle, c: &Cluster, hashes: &BTreeMap<String, String>) {
    b.files.retain(|p, _| !p.starts_with("lab/"));
    b.add(CLUSTER_JSON, PUBLIC, cluster_json(c));
    b.add(crate::layout::INVENTORY, PUBLIC, inventory(c).to_json());
    for (path, mode, text) in crate::lab::files(c, hashes) {
        b.add(path, mode, text);
    }
}

/// Recompute SHA256SUMS after a change to the files.
pub fn reseal(b: &mut Bundle) {
    b.files.remove(SUMS);
    let s = sums(b);
    b.add(SUMS, PUBLIC, s);
}
