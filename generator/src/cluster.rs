//! The validated cluster: every later stage takes a `Cluster` and trusts it.

use ipnet::IpNet;
use serde::Serialize;
use serde_json::Value;
use std::net::IpAddr;

pub use hardshift_proto::vocab::Role;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    /// The hostname from agent-config; names the node's files and its agent certificate.
    pub hostname: String,
    pub role: Role,
    /// Position among the nodes of its role, in agent-config order (master 0 → `etcd-0`).
    pub index: usize,
    pub interface: String,
    pub mac: String,
    pub ip: IpAddr,
    pub prefix: u8,
    pub gateway: Option<IpAddr>,
    pub dns: Vec<IpAddr>,
    /// agent-config `rootDeviceHints.deviceName`, where RHCOS is installed.
    pub root_device: Option<String>,
}

impl Node {
    /// The node's FQDN: the hostname itself if it is already qualified.
    pub fn fqdn(&self, cluster_domain: &str) -> String {
        if self.hostname.contains('.') {
            self.hostname.clone()
        } else {
            format!("{}.{cluster_domain}", self.hostname)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum KeyAlgorithm {
    #[serde(rename = "rsa-2048")]
    Rsa2048,
    #[serde(rename = "rsa-4096")]
    Rsa4096,
    #[serde(rename = "ecdsa-p256")]
    EcdsaP256,
}

impl KeyAlgorithm {
    pub const NAMES: &'static str = "rsa-2048, rsa-4096 or ecdsa-p256";

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "rsa-2048" => Some(Self::Rsa2048),
            "rsa-4096" => Some(Self::Rsa4096),
            "ecdsa-p256" => Some(Self::EcdsaP256),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rsa2048 => "rsa-2048",
            Self::Rsa4096 => "rsa-4096",
            Self::EcdsaP256 => "ecdsa-p256",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PkiSettings {
    pub key_algorithm: KeyAlgorithm,
    pub ca_validity_days: u32,
    pub leaf_validity_days: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterNetwork {
    pub cidr: IpNet,
    pub host_prefix: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DnsRecord {
    pub name: String,
    pub ip: IpAddr,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mirror {
    pub source: String,
    pub mirrors: Vec<String>,
}

/// install-config's cluster-wide proxy, as the nodes and the Proxy config CR are given it (camelCase
/// in cluster.json, as install-config spells it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Proxy {
    pub http_proxy: String,
    pub https_proxy: String,
    pub no_proxy: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabSettings {
    /// Install disk for nodes without `rootDeviceHints.deviceName` (KVM virtio: /dev/vda).
    pub install_device: String,
    pub vcpus: u32,
    pub memory_mib: u32,
    pub disk_gib: u32,
    pub http_base_url: String,
    /// Each node's live system runs hardshift's live config (`live/NODE.ign`): its agent writes
    /// the disk with coreos-installer and reports each stage. False: `coreos.inst.*` arguments.
    pub live_agent: bool,
    /// The image the live agent writes, when not the live system's own.
    pub install_image_url: Option<String>,
    pub install_image_unsigned: bool,
}

/// Single-node OpenShift, bootstrap-in-place: the one master boots a live system that runs the
/// bootstrap control plane, writes its own master config to `installation_disk` and reboots into it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapInPlace {
    /// The whole disk `coreos-installer` writes (install-config's, or the host's rootDeviceHints).
    pub installation_disk: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cluster {
    pub name: String,
    pub base_domain: String,
    pub network_type: String,
    pub machine_networks: Vec<IpNet>,
    pub cluster_networks: Vec<ClusterNetwork>,
    pub service_networks: Vec<IpNet>,
    /// Where `api` and `api-int` resolve: a VIP or the helper's HAProxy.
    pub api_vip: IpAddr,
    pub ingress_vip: IpAddr,
    pub helper_ip: IpAddr,
    /// Address (IP or DNS name) and port the node agents dial.
    pub collector_address: String,
    pub collector_port: u16,
    pub collector_extra_sans: Vec<String>,
    /// hardshift.yaml `dns.records`: more names of the cluster's zone the lab's DNS answers.
    /// (Not recorded when empty: bundles written before it existed still verify.)
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dns_records: Vec<DnsRecord>,
    /// Bootstrap first, then masters, then workers, each in agent-config order.
    pub nodes: Vec<Node>,
    #[serde(skip)]
    pub pull_secret: String,
    pub ssh_keys: Vec<String>,
    pub additional_trust_bundle: String,
    pub mirrors: Vec<Mirror>,
    pub proxy: Option<Proxy>,
    pub fips: bool,
    pub pki: PkiSettings,
    pub lab: LabSettings,
    /// install-config as read (for `cluster-config-v1`), pull secret removed.
    pub install_config: Value,
    pub release: crate::release::Release,
    /// Some for single-node OpenShift (no bootstrap host: the master bootstraps itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap_in_place: Option<BootstrapInPlace>,
}

impl Cluster {
    /// `<name>.<baseDomain>`, the suffix of every cluster DNS name.
    pub fn domain(&self) -> String {
        format!("{}.{}", self.name, self.base_domain)
    }

    pub fn api_url(&self) -> String {
        format!("https://api.{}:6443", self.domain())
    }

    pub fn api_int_url(&self) -> String {
        format!("https://api-int.{}:6443", self.domain())
    }

    pub fn nodes_with_role(&self, role: Role) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(move |n| n.role == role)
    }

    /// The node that runs the bootstrap control plane: the bootstrap host, or a single node's
    /// master (bootstrap-in-place).
    pub fn bootstrap(&self) -> &Node {
        let sno = || self.bootstrap_in_place.as_ref().and(self.nodes_with_role(Role::Master).next());
        self.nodes_with_role(Role::Bootstrap)
            .next()
            .or_else(sno)
            .expect("validated: one bootstrap, or a single node")
    }

    /// Single-node OpenShift (bootstrap-in-place).
    pub fn single_node(&self) -> bool {
        self.bootstrap_in_place.is_some()
    }

    /// The bootstrap etcd's member and pod name: the installer's for a single node, whose member
    /// stays the cluster's (cluster-etcd-operator's render, `etcd-<hostname>`).
    pub fn bootstrap_etcd_name(&self) -> String {
        if self.single_node() {
            format!("etcd-{}", self.bootstrap().hostname)
        } else {
            "etcd-bootstrap".into()
        }
    }

    /// The first address of the first service network: the in-cluster `kubernetes` service.
    pub fn kubernetes_service_ip(&self) -> IpAddr {
        nth_host(&self.service_networks[0], 1)
    }
}

/// The `n`th address of a network (1: the first after the network address). Wraps past the
/// top, so callers validate the prefix first (every network here has room for the tenth).
pub fn nth_host(net: &IpNet, n: u32) -> IpAddr {
    match net.network() {
        IpAddr::V4(a) => IpAddr::V4(u32::from(a).wrapping_add(n).into()),
        IpAddr::V6(a) => IpAddr::V6(u128::from(a).wrapping_add(n.into()).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_host_counts_from_the_network_address() {
        let v4: IpNet = "172.30.0.0/16".parse().unwrap();
        assert_eq!(nth_host(&v4, 1).to_string(), "172.30.0.1");
        assert_eq!(nth_host(&v4, 10).to_string(), "172.30.0.10");
        let v6: IpNet = "fd02::/112".parse().unwrap();
        assert_eq!(nth_host(&v6, 10).to_string(), "fd02::a");
    }
}
