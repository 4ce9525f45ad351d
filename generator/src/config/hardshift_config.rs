//! `hardshift.yaml`: what neither OpenShift file holds. Optional; every field has a default
//! (see docs/hardshift-yaml.md).

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HardshiftConfig {
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub load_balancer: LoadBalancer,
    #[serde(default)]
    pub helper: Helper,
    #[serde(default)]
    pub collector: Collector,
    #[serde(default)]
    pub pki: PkiOptions,
    #[serde(default)]
    pub lab: Lab,
    #[serde(default)]
    pub release: ReleaseRef,
    #[serde(default)]
    pub dns: Dns,
}

/// More names the lab's DNS answers, inside the cluster's zone (the mirror registry, say: the
/// zone is served alone, so a name it lacks does not resolve at all).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dns {
    #[serde(default)]
    pub records: Vec<DnsRecord>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DnsRecord {
    pub name: String,
    pub ip: String,
}

/// The release image pullspec (what the cluster-version-operator runs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleaseRef {
    pub image: Option<String>,
}

/// Where `api`/`api-int` and `*.apps` point. Default: the helper (it runs HAProxy).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancer {
    #[serde(rename = "apiVIP")]
    pub api_vip: Option<String>,
    #[serde(rename = "ingressVIP")]
    pub ingress_vip: Option<String>,
}

/// The helper node serving DNS, DHCP, HAProxy and HTTP. Default: first address of the machine network.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Helper {
    pub ip: Option<String>,
}

/// The workstation collector the node agents dial. Default: the helper's address, port 9443.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Collector {
    /// An IP address or a DNS name; it becomes the collector certificate's SAN.
    pub address: Option<String>,
    pub port: Option<u16>,
    /// More names or addresses the collector certificate must carry.
    #[serde(default, rename = "extraSANs")]
    pub extra_sans: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PkiOptions {
    /// rsa-2048 (default), rsa-4096 or ecdsa-p256; `--key-algorithm` wins over this.
    pub key_algorithm: Option<String>,
    pub ca_validity_days: Option<u32>,
    pub leaf_validity_days: Option<u32>,
}

/// VM sizing for the generated lab scripts (tutorial defaults).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lab {
    pub vcpus: Option<u32>,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: Option<u32>,
    #[serde(rename = "diskGiB")]
    pub disk_gib: Option<u32>,
    pub http_base_url: Option<String>,
    /// Install disk when a host has no rootDeviceHints.deviceName (default /dev/vda).
    pub install_device: Option<String>,
    /// Each node boots its live system with hardshift's live config, whose agent writes the disk
    /// and reports each stage (default true); false: RHCOS's own `coreos.inst.*` arguments.
    pub live_agent: Option<bool>,
    /// The OS image the live agent writes (default: the live system's own, RHCOS's osmet).
    #[serde(rename = "installImageURL")]
    pub install_image_url: Option<String>,
    /// That image carries no signature coreos-installer can check (`--insecure`): labs only.
    pub install_image_unsigned: Option<bool>,
}
