//! The inventory: the install as `create` made it, for every reader after it (the collector, the
//! CLI's read commands, boot-lab, the lab's helper). Written once by `create` into the bundle
//! (`inventory.json`), read back typed; no reader loads install-config.yaml or agent-config.yaml
//! again, so an input edited after `create` cannot make `status` disagree with the bundle the
//! nodes run.
//!
//! The file carries its `format`. A reader refuses a format it does not know, and a bundle
//! without the file (written before there was one), each saying what to do.

use crate::layout::INVENTORY;
use hardshift_proto::vocab::Role;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The format this hardshift writes and reads.
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Inventory {
    /// [`FORMAT`] when written.
    pub format: u32,
    /// install-config's `metadata.name` and `baseDomain`.
    pub name: String,
    pub base_domain: String,
    pub release: Release,
    /// install-config `fips: true`: the collector must speak TLS through the FIPS module too.
    pub fips: bool,
    /// Single-node OpenShift (bootstrap-in-place): the one master bootstraps itself.
    pub single_node: bool,
    pub machine_networks: Vec<IpNet>,
    pub cluster_networks: Vec<IpNet>,
    pub service_networks: Vec<IpNet>,
    /// Where `api`/`api-int` and `*.apps` resolve: VIPs, the helper's HAProxy, or a single node.
    pub api_vip: IpAddr,
    pub ingress_vip: IpAddr,
    /// The lab's helper (DNS, DHCP, HAProxy, PXE).
    pub helper_ip: IpAddr,
    /// Where the node agents report: an address (IP or DNS name) and port.
    pub collector_address: String,
    pub collector_port: u16,
    /// Where the helper serves the Ignition configs and PXE files.
    pub http_base_url: String,
    /// Bootstrap first, then masters, then workers, each in agent-config order.
    pub nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Release {
    /// The release image pullspec.
    pub image: String,
    /// The OpenShift version, when the release's references name it.
    pub version: Option<String>,
    /// The Kubernetes version of its kubelet, when known.
    pub kubernetes: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Node {
    /// agent-config's hostname: names the node's config, its agent certificate and its reports.
    pub name: String,
    pub role: Role,
    /// The interface agent-config names, its MAC (as written there) and static address.
    pub interface: String,
    pub mac: String,
    pub ip: IpAddr,
    pub prefix: u8,
    pub gateway: Option<IpAddr>,
}

/// Why a bundle's inventory was not read: each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: no bundle here (nothing `hardshift create` wrote)\n    hint: run `hardshift create --dir {}` first, or give the --dir it wrote", .dir.display(), .dir.display())]
    NoBundle { dir: PathBuf },
    #[error("{}: missing: this bundle was written by a hardshift from before its inventory\n    hint: run `hardshift create --dir {}` again: it reuses every key and certificate, and writes the inventory", .path.display(), .dir.display())]
    Older { path: PathBuf, dir: PathBuf },
    #[error("{}: inventory format {found}, but this hardshift reads format {FORMAT}: it was written by a newer hardshift\n    hint: use that hardshift, or run this one's `hardshift create` again", .path.display())]
    Newer { path: PathBuf, found: u64 },
    #[error("{}:{line}:{column}: {why}\n    hint: the inventory is `hardshift create`'s; run it again rather than edit the file", .path.display())]
    Invalid {
        path: PathBuf,
        line: usize,
        column: usize,
        why: String,
    },
}

impl Inventory {
    /// The inventory of the bundle in `dir`.
    pub fn load(dir: &Path) -> Result<Inventory, Error> {
        let path = dir.join(INVENTORY);
        let Some(bytes) = crate::fsio::read_current(dir, INVENTORY) else {
            return Err(match crate::fsio::current(dir) {
                Some(_) => Error::Older {
                    path,
                    dir: dir.to_path_buf(),
                },
                None => Error::NoBundle { dir: dir.to_path_buf() },
            });
        };
        Inventory::from_json(&path, &bytes)
    }

    /// An inventory's bytes, read from `path` (named in errors): its format first, so a newer
    /// one is named as newer rather than as a stray field.
    pub fn from_json(path: &Path, bytes: &[u8]) -> Result<Inventory, Error> {
        let invalid = |e: serde_json::Error| Error::Invalid {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            why: e.to_string().split(" at line ").next().unwrap_or_default().to_string(),
        };
        #[derive(Deserialize)]
        struct Format {
            format: u64,
        }
        let Format { format } = serde_json::from_slice(bytes).map_err(invalid)?;
        if format > u64::from(FORMAT) {
            return Err(Error::Newer {
                path: path.to_path_buf(),
                found: format,
            });
        }
        if format < u64::from(FORMAT) {
            return Err(Error::Invalid {
                path: path.to_path_buf(),
                line: 1,
                column: 1,
                why: format!("inventory format {format} was never written (the first is 1)"),
            });
        }
        serde_json::from_slice(bytes).map_err(invalid)
    }

    /// The file `create` writes: pretty JSON and a newline, the same bytes for the same install.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("an inventory serializes");
        s.push('\n');
        s
    }

    /// `<name>.<baseDomain>`, the suffix of every cluster DNS name.
    pub fn domain(&self) -> String {
        format!("{}.{}", self.name, self.base_domain)
    }

    /// The node names, in inventory order.
    pub fn names(&self) -> Vec<&str> {
        self.nodes.iter().map(|n| n.name.as_str()).collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn example() -> Inventory {
        let node = |name: &str, role, ip: &str, mac: &str| Node {
            name: name.into(),
            role,
            interface: "enp1s0".into(),
            mac: mac.into(),
            ip: ip.parse().unwrap(),
            prefix: 24,
            gateway: Some("192.168.126.1".parse().unwrap()),
        };
        Inventory {
            format: FORMAT,
            name: "ocp4".into(),
            base_domain: "example.com".into(),
            release: Release {
                image: "quay.io/openshift-release-dev/ocp-release@sha256:00".into(),
                version: Some("4.18.1".into()),
                kubernetes: None,
            },
            fips: false,
            single_node: false,
            machine_networks: vec!["192.168.126.0/24".parse().unwrap()],
            cluster_networks: vec!["10.128.0.0/14".parse().unwrap()],
            service_networks: vec!["172.30.0.0/16".parse().unwrap()],
            api_vip: "192.168.126.1".parse().unwrap(),
            ingress_vip: "192.168.126.1".parse().unwrap(),
            helper_ip: "192.168.126.1".parse().unwrap(),
            collector_address: "192.168.126.1".into(),
            collector_port: 9443,
            http_base_url: "http://192.168.126.1:8080".into(),
            nodes: vec![
                node("bootstrap", Role::Bootstrap, "192.168.126.100", "52:54:00:00:00:01"),
                node("master-0", Role::Master, "192.168.126.10", "52:54:00:00:00:10"),
                node("worker-0", Role::Worker, "192.168.126.20", "52:54:00:00:00:20"),
            ],
        }
    }

    #[test]
    fn an_inventory_reads_back_what_was_written() {
        let inv = example();
        let text = inv.to_json();
        assert_eq!(Inventory::from_json(Path::new("i.json"), text.as_bytes()).unwrap(), inv);
        assert!(text.contains("\"role\": \"master\""), "{text}");
        assert_eq!(inv.domain(), "ocp4.example.com");
    }

    #[test]
    fn newer_stray_and_broken_inventories_are_refused_saying_where_and_what_to_do() {
        let path = Path::new("DIR/inventory.json");
        let mut v: serde_json::Value = serde_json::from_str(&example().to_json()).unwrap();
        v["format"] = 2.into();
        let e = Inventory::from_json(path, v.to_string().as_bytes()).unwrap_err();
        assert!(matches!(e, Error::Newer { found: 2, .. }), "{e}");
        assert!(e.to_string().contains("written by a newer hardshift"), "{e}");

        let mut v: serde_json::Value = serde_json::from_str(&example().to_json()).unwrap();
        v["nodes"][1]["role"] = "mastre".into();
        let text = serde_json::to_string_pretty(&v).unwrap();
        let e = Inventory::from_json(path, text.as_bytes()).unwrap_err().to_string();
        let line = text.lines().position(|l| l.contains("mastre")).unwrap() + 1;
        assert!(e.starts_with(&format!("DIR/inventory.json:{line}:")), "{e}");
        assert!(e.contains("unknown variant `mastre`"), "{e}");

        v["nodes"][1]["role"] = "master".into();
        v["extra"] = true.into();
        let e = Inventory::from_json(path, v.to_string().as_bytes()).unwrap_err().to_string();
        assert!(e.contains("unknown field `extra`"), "{e}");
        let e = Inventory::from_json(path, b"{\"format\": 1, \"name\": ").unwrap_err().to_string();
        assert!(e.starts_with("DIR/inventory.json:1:"), "{e}");
    }

    #[test]
    fn a_directory_without_a_bundle_or_without_an_inventory_says_which() {
        let d = tempfile::tempdir().unwrap();
        let e = Inventory::load(d.path()).unwrap_err();
        assert!(matches!(e, Error::NoBundle { .. }), "{e}");
        // A live generation without inventory.json: an older hardshift's bundle.
        let gen = d.path().join(".hardshift/gen-1");
        std::fs::create_dir_all(&gen).unwrap();
        std::os::unix::fs::symlink("gen-1", d.path().join(".hardshift/current")).unwrap();
        let e = Inventory::load(d.path()).unwrap_err();
        assert!(matches!(e, Error::Older { .. }), "{e}");
        assert!(e.to_string().contains("reuses every key"), "{e}");
        std::fs::write(gen.join(INVENTORY), example().to_json()).unwrap();
        assert_eq!(Inventory::load(d.path()).unwrap(), example());
    }
}
