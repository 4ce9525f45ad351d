//! Ignition spec 3.2.0 (what RHCOS 4.18 and the installer use): the typed config and what
//! hardshift adds to a node (here), data-URL contents (`data_url`), merging a node's additions
//! into an MCO-rendered base (`merge`, `base`), deterministic rendering (`json`).

mod base;
mod data_url;
mod json;
mod merge;

pub use base::{machine_config_of, parse_base};
pub use data_url::{compact, decode, decode_bounded, encode, MAX_DECODED};
pub use json::{to_json, to_json_body, Pieces};
pub use merge::{build, build_with, MergeReport};

use json::splice;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const VERSION: &str = "3.2.0";
/// The first spec with `kernelArguments` (Ignition 2.14 and later apply them on first boot).
pub const KARGS_VERSION: &str = "3.3.0";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub ignition: Meta,
    #[serde(default, skip_serializing_if = "Passwd::is_empty")]
    pub passwd: Passwd,
    #[serde(default, skip_serializing_if = "Storage::is_empty")]
    pub storage: Storage,
    #[serde(default, skip_serializing_if = "Systemd::is_empty")]
    pub systemd: Systemd,
    /// Sections hardshift does not touch (kernelArguments, ...), carried from a base as they are.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub version: String,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Passwd {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<User>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl Passwd {
    fn is_empty(&self) -> bool {
        self.users.is_empty() && self.other.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_authorized_keys: Vec<String>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Storage {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directories: Vec<Directory>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<File>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<serde_json::Value>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl Storage {
    fn is_empty(&self) -> bool {
        self.directories.is_empty() && self.files.is_empty() && self.links.is_empty() && self.other.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Owner {
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Directory {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Owner>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Owner>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Contents {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    /// Shared: a node's copy of a base file, or of the agent, is the base's string.
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "splice::source")]
    pub source: Option<Arc<str>>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct File {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<Contents>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Owner>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Owner>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Systemd {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<Unit>,
}

impl Systemd {
    fn is_empty(&self) -> bool {
        self.units.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Unit {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropins: Vec<Dropin>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dropin {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
}

/// A file hardshift places on a node, before encoding.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFile {
    pub path: String,
    pub mode: u32,
    /// Shared: the same large file (the agent binary) goes to every node without copies.
    pub contents: Arc<[u8]>,
    /// Already encoded (once for all nodes), for large shared files.
    pub encoded: Option<Arc<Contents>>,
    /// Replaces a base file of the same path. Otherwise the base's file is kept: the
    /// machine-config daemon compares the files of the rendered config byte for byte.
    pub replaces_base: bool,
}

pub const SECRET: u32 = 0o600;
pub const PUBLIC: u32 = 0o644;
pub const SCRIPT: u32 = 0o755;

impl NodeFile {
    pub fn new(path: impl Into<String>, mode: u32, contents: impl Into<Vec<u8>>) -> Self {
        NodeFile {
            path: path.into(),
            mode,
            contents: Arc::from(contents.into()),
            encoded: None,
            replaces_base: false,
        }
    }

    /// This file wins over a base file of the same path (what the machine-config server itself
    /// puts in place of the rendered config's, such as the kubelet's client CA).
    pub fn over_base(mut self) -> Self {
        self.replaces_base = true;
        self
    }

    /// A file encoded once and shared by many nodes.
    pub fn shared(path: impl Into<String>, mode: u32, contents: Arc<[u8]>, encoded: Arc<Contents>) -> Self {
        NodeFile {
            path: path.into(),
            mode,
            contents,
            encoded: Some(encoded),
            replaces_base: false,
        }
    }
}

/// Everything hardshift adds to one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeConfig {
    pub ssh_keys: Vec<String>,
    pub files: Vec<NodeFile>,
    pub directories: Vec<(String, u32)>,
    pub units: Vec<Unit>,
    /// Kernel arguments the node must boot with (`kernelArguments.shouldExist`): Ignition sets
    /// them and reboots before the root is used, on first boot only.
    pub kernel_arguments: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, source: &str) -> File {
        File {
            path: path.into(),
            contents: Some(Contents {
                source: Some(source.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn compact_reencodes_inline_files_and_leaves_the_rest() {
        let text = "a line of a script that the MCO writes percent-encoded\n".repeat(100);
        let pct: String = text.bytes().map(|b| format!("%{b:02X}")).collect();
        let mut verified = file("/etc/verified", &format!("data:,{pct}"));
        verified
            .contents
            .as_mut()
            .unwrap()
            .other
            .insert("verification".into(), serde_json::json!({"hash": "sha512-00"}));
        let mut cfg = Config::default();
        cfg.storage.files = vec![
            file("/etc/big", &format!("data:,{pct}")),
            file("/etc/small", "data:,x"),
            file("/etc/remote", "http://192.168.126.1:8080/x"),
            verified.clone(),
        ];
        let before = cfg.clone();
        let saved = compact(&mut cfg);
        let big = cfg.storage.files[0].contents.as_ref().unwrap();
        assert_eq!(big.compression.as_deref(), Some("gzip"));
        assert_eq!(decode(big).unwrap(), text.as_bytes(), "same file on the node");
        assert!(saved > pct.len() / 2, "{saved}");
        assert_eq!(
            cfg.storage.files[1..],
            before.storage.files[1..],
            "small, remote and verified files unchanged"
        );
        let again = {
            let mut c = before.clone();
            compact(&mut c);
            c
        };
        assert_eq!(to_json(&again), to_json(&cfg), "deterministic");
    }

    #[test]
    fn the_json_body_is_the_json_with_shared_pieces() {
        let big: String = format!("data:;base64,{}", "QUJD".repeat(splice::MIN));
        let mut cfg = Config::default();
        cfg.ignition.version = VERSION.into();
        cfg.storage.files = vec![file("/etc/a", &big), file("/etc/b", "data:,small"), file("/etc/c", "")];
        // The same string in two files, as a base and a node's copy of it are.
        cfg.storage.files[2].contents = cfg.storage.files[0].contents.clone();
        let pieces = Pieces::default();
        let body = to_json_body(&cfg, &pieces);
        assert_eq!(body.to_vec(), to_json(&cfg));
        let twice = to_json_body(&cfg.clone(), &pieces);
        // Both large URLs of both configs are one allocation.
        let large: Vec<&Arc<[u8]>> = body
            .pieces()
            .iter()
            .chain(twice.pieces())
            .filter(|p| p.len() > splice::MIN)
            .collect();
        assert_eq!(large.len(), 4);
        assert!(large.windows(2).all(|w| Arc::ptr_eq(w[0], w[1])));
        // A user's string that holds the marker is written as it is.
        let mut odd = cfg.clone();
        odd.storage.files.push(file("/etc/d", splice::MARKER));
        assert_eq!(to_json_body(&odd, &pieces).to_vec(), to_json(&odd));
        assert!(String::from_utf8(to_json(&odd)).unwrap().contains("hardshift:shared-piece"));
    }

    #[test]
    fn encode_roundtrips_and_compresses_when_it_helps() {
        let small = b"hello";
        let c = encode(small);
        assert_eq!(c.compression, None);
        assert_eq!(decode(&c).unwrap(), small);
        let big = "a line that repeats\n".repeat(200);
        let c = encode(big.as_bytes());
        assert_eq!(c.compression.as_deref(), Some("gzip"));
        assert_eq!(decode(&c).unwrap(), big.as_bytes());
        assert_eq!(encode(big.as_bytes()), c, "deterministic");
    }

    #[test]
    fn merge_keeps_base_files_unless_over_base_and_merges_units_by_name() {
        let base = parse_base(
            r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,base"},"mode":420},{"path":"/etc/b","contents":{"source":"data:,b"}}]},
               "systemd":{"units":[{"name":"kubelet.service","enabled":true,"contents":"base","dropins":[{"name":"10-x.conf","contents":"x"}]}]}}"#,
        )
        .unwrap();
        let node = NodeConfig {
            ssh_keys: vec!["ssh-ed25519 AAAA k".into()],
            files: vec![
                NodeFile::new("/etc/a", PUBLIC, "node"),
                NodeFile::new("/etc/b", PUBLIC, "served").over_base(),
            ],
            directories: vec![],
            units: vec![Unit {
                name: "kubelet.service".into(),
                dropins: vec![Dropin {
                    name: "20-y.conf".into(),
                    contents: Some("y".into()),
                }],
                ..Default::default()
            }],
            kernel_arguments: vec![],
        };
        let (cfg, rep) = build(&node, Some(&base));
        assert_eq!(rep.replaced_files, vec!["/etc/b"]);
        assert_eq!(rep.kept_files, vec!["/etc/a"]);
        assert_eq!(rep.merged_units, vec!["kubelet.service"]);
        assert_eq!(cfg.storage.files.len(), 2);
        assert_eq!(decode(cfg.storage.files[0].contents.as_ref().unwrap()).unwrap(), b"base");
        assert_eq!(decode(cfg.storage.files[1].contents.as_ref().unwrap()).unwrap(), b"served");
        let k = &cfg.systemd.units[0];
        assert_eq!(k.contents.as_deref(), Some("base"));
        assert_eq!(
            k.dropins.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
            vec!["10-x.conf", "20-y.conf"]
        );
        assert_eq!(cfg.passwd.users[0].ssh_authorized_keys, vec!["ssh-ed25519 AAAA k"]);
    }

    #[test]
    fn a_node_dropin_replaces_the_bases_of_the_same_name_once() {
        let base = parse_base(
            r#"{"ignition":{"version":"3.2.0"},"systemd":{"units":[{"name":"crio.service","dropins":[{"name":"10-mco.conf","contents":"base"},{"name":"20-z.conf","contents":"z"}]}]}}"#,
        )
        .unwrap();
        let node = NodeConfig {
            units: vec![Unit {
                name: "crio.service".into(),
                dropins: vec![Dropin {
                    name: "10-mco.conf".into(),
                    contents: Some("node".into()),
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let (cfg, rep) = build(&node, Some(&base));
        assert_eq!(rep.merged_units, vec!["crio.service"]);
        let d: Vec<_> = cfg.systemd.units[0]
            .dropins
            .iter()
            .map(|d| (d.name.as_str(), d.contents.as_deref()))
            .collect();
        assert_eq!(d, [("10-mco.conf", Some("node")), ("20-z.conf", Some("z"))]);
    }

    #[test]
    fn machineconfig_raw_is_unwrapped_and_pointer_configs_refused() {
        let mc = r#"{"kind":"MachineConfig","spec":{"config":{"raw":"{\"ignition\":{\"version\":\"3.2.0\"}}"}}}"#;
        assert_eq!(parse_base(mc).unwrap().ignition.version, "3.2.0");
        let ptr = r#"{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://api-int:22623/config/master"}]}}}"#;
        assert!(parse_base(ptr).unwrap_err().0.contains("pointer"));
    }

    #[test]
    fn kernel_arguments_raise_the_version_and_join_the_bases() {
        let node = NodeConfig {
            kernel_arguments: vec!["fips=1".into()],
            ..Default::default()
        };
        let (cfg, _) = build(&node, None);
        assert_eq!(cfg.ignition.version, KARGS_VERSION);
        assert_eq!(cfg.other["kernelArguments"], serde_json::json!({"shouldExist": ["fips=1"]}));
        let base: Config = serde_json::from_str(
            r#"{"ignition":{"version":"3.4.0"},"kernelArguments":{"shouldExist":["a=b","fips=1"],"shouldNotExist":["c"]}}"#,
        )
        .unwrap();
        let (cfg, _) = build(&node, Some(&base));
        assert_eq!(cfg.ignition.version, "3.4.0", "a newer base keeps its version");
        assert_eq!(
            cfg.other["kernelArguments"],
            serde_json::json!({"shouldExist": ["a=b", "fips=1"], "shouldNotExist": ["c"]})
        );
        let (cfg, _) = build(&NodeConfig::default(), None);
        assert_eq!(cfg.ignition.version, VERSION);
        assert!(!cfg.other.contains_key("kernelArguments"));
    }
}
