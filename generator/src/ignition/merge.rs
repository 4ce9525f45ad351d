//! A node's config: the MCO-rendered base (if any) with what hardshift adds to the node merged in,
//! section by section.

use super::{encode, Config, Contents, Directory, File, NodeConfig, NodeFile, Owner, Unit, User, KARGS_VERSION, VERSION};
use std::collections::BTreeMap;

/// What a merge did, for the per-node report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    pub base_files: usize,
    pub base_units: usize,
    /// Base files replaced by a per-node file of the same path.
    pub replaced_files: Vec<String>,
    /// Per-node files left out because the base has that path (the base's bytes stay).
    pub kept_files: Vec<String>,
    /// Base units a per-node unit merged into.
    pub merged_units: Vec<String>,
}

/// Build a node's config: the base (if any) with `node` merged in. A base file is kept over a
/// per-node file of the same path (the machine-config daemon compares them with the rendered
/// config) unless that file is marked `over_base`; units merge by name (contents and enablement
/// from the node, drop-ins by name).
pub fn build(node: &NodeConfig, base: Option<&Config>) -> (Config, MergeReport) {
    build_with(node, base, &encode)
}

/// `build` with a chosen encoder (a cache, when many nodes share the same files).
pub fn build_with(node: &NodeConfig, base: Option<&Config>, encode: &(dyn Fn(&[u8]) -> Contents + Sync)) -> (Config, MergeReport) {
    let mut cfg = base.cloned().unwrap_or_default();
    let mut report = MergeReport {
        base_files: cfg.storage.files.len(),
        base_units: cfg.systemd.units.len(),
        ..Default::default()
    };
    // Keep a newer base version: its sections are what the node's Ignition will read.
    if cfg.ignition.version.is_empty() || version_lt(&cfg.ignition.version, VERSION) {
        cfg.ignition.version = VERSION.into();
    }
    kernel_arguments(&mut cfg, &node.kernel_arguments);
    ssh_keys(&mut cfg, &node.ssh_keys);
    files(&mut cfg, &node.files, encode, &mut report);
    directories(&mut cfg, &node.directories);
    units(&mut cfg, &node.units, &mut report);
    report.replaced_files.sort();
    report.kept_files.sort();
    report.merged_units.sort();
    (cfg, report)
}

/// `kernelArguments.shouldExist` gains the node's arguments (once each), and the config the spec
/// version that has them.
fn kernel_arguments(cfg: &mut Config, args: &[String]) {
    if args.is_empty() {
        return;
    }
    if version_lt(&cfg.ignition.version, KARGS_VERSION) {
        cfg.ignition.version = KARGS_VERSION.into();
    }
    let kargs = cfg.other.entry("kernelArguments".into()).or_insert_with(|| serde_json::json!({}));
    if !kargs.is_object() {
        *kargs = serde_json::json!({});
    }
    let should = kargs
        .as_object_mut()
        .expect("an object")
        .entry("shouldExist")
        .or_insert_with(|| serde_json::json!([]));
    if !should.is_array() {
        *should = serde_json::json!([]);
    }
    let list = should.as_array_mut().expect("an array");
    for k in args {
        if !list.iter().any(|v| v.as_str() == Some(k)) {
            list.push(serde_json::json!(k));
        }
    }
}

/// The core user with the SSH keys (added to any the base has).
fn ssh_keys(cfg: &mut Config, keys: &[String]) {
    if keys.is_empty() {
        return;
    }
    let core = match cfg.passwd.users.iter_mut().position(|u| u.name == "core") {
        Some(i) => &mut cfg.passwd.users[i],
        None => {
            cfg.passwd.users.push(User {
                name: "core".into(),
                ..Default::default()
            });
            cfg.passwd.users.last_mut().expect("just pushed")
        }
    };
    for k in keys {
        if !core.ssh_authorized_keys.contains(k) {
            core.ssh_authorized_keys.push(k.clone());
        }
    }
}

/// Files by path: the base's stays unless the node's replaces it (`over_base`); sorted by path.
fn files(cfg: &mut Config, node_files: &[NodeFile], encode: &(dyn Fn(&[u8]) -> Contents + Sync), report: &mut MergeReport) {
    let mut files: BTreeMap<String, File> = cfg.storage.files.drain(..).map(|f| (f.path.clone(), f)).collect();
    for f in node_files {
        if !f.replaces_base && files.contains_key(&f.path) {
            report.kept_files.push(f.path.clone());
            continue;
        }
        let new = File {
            path: f.path.clone(),
            contents: Some(match &f.encoded {
                Some(e) => Contents::clone(e),
                None => encode(&f.contents),
            }),
            mode: Some(f.mode),
            overwrite: Some(true),
            user: Some(Owner { name: "root".into() }),
            group: Some(Owner { name: "root".into() }),
            other: BTreeMap::new(),
        };
        if files.insert(f.path.clone(), new).is_some() {
            report.replaced_files.push(f.path.clone());
        }
    }
    cfg.storage.files = files.into_values().collect();
}

/// Directories by path, the node's mode winning; sorted by path.
fn directories(cfg: &mut Config, node_dirs: &[(String, u32)]) {
    let mut dirs: BTreeMap<String, Directory> = cfg.storage.directories.drain(..).map(|d| (d.path.clone(), d)).collect();
    for (path, mode) in node_dirs {
        dirs.insert(
            path.clone(),
            Directory {
                path: path.clone(),
                mode: Some(*mode),
                overwrite: None,
                user: None,
                group: None,
            },
        );
    }
    cfg.storage.directories = dirs.into_values().collect();
}

/// Units by name: a node's unit merges into one of the same name; sorted by name.
fn units(cfg: &mut Config, node_units: &[Unit], report: &mut MergeReport) {
    let mut units: BTreeMap<String, Unit> = cfg.systemd.units.drain(..).map(|u| (u.name.clone(), u)).collect();
    let base_units: Vec<String> = units.keys().cloned().collect();
    for u in node_units {
        match units.get_mut(&u.name) {
            Some(existing) => {
                if base_units.contains(&u.name) && !report.merged_units.contains(&u.name) {
                    report.merged_units.push(u.name.clone());
                }
                merge_unit(existing, u);
            }
            None => {
                units.insert(u.name.clone(), u.clone());
            }
        }
    }
    cfg.systemd.units = units.into_values().collect();
}

/// Contents and enablement from the node when it sets them; drop-ins by name, sorted.
fn merge_unit(existing: &mut Unit, u: &Unit) {
    if u.contents.is_some() {
        existing.contents = u.contents.clone();
    }
    if u.enabled.is_some() {
        existing.enabled = u.enabled;
    }
    if u.mask.is_some() {
        existing.mask = u.mask;
    }
    for d in &u.dropins {
        existing.dropins.retain(|x| x.name != d.name);
        existing.dropins.push(d.clone());
    }
    existing.dropins.sort_by(|a, b| a.name.cmp(&b.name));
}

fn version_lt(a: &str, b: &str) -> bool {
    let parse = |v: &str| v.split('.').map(|p| p.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>();
    parse(a) < parse(b)
}
