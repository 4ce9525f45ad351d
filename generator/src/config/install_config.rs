//! `install-config.yaml`, the file users already give `openshift-install` (apiVersion v1).
//! Only the fields hardshift uses are typed; the whole document is kept as read so that
//! `kube-system/cluster-config-v1` can carry it (minus the pull secret).

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallConfig {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub base_domain: String,
    #[serde(default)]
    pub metadata: Metadata,
    #[serde(default)]
    pub networking: Networking,
    pub control_plane: Option<MachinePool>,
    #[serde(default)]
    pub compute: Vec<MachinePool>,
    #[serde(default)]
    pub platform: serde_json::Map<String, Value>,
    #[serde(default)]
    pub pull_secret: String,
    #[serde(default)]
    pub ssh_key: String,
    #[serde(default)]
    pub additional_trust_bundle: String,
    #[serde(default)]
    pub image_digest_sources: Vec<ImageDigestSource>,
    /// The pre-4.14 name of `imageDigestSources`; still accepted by the installer.
    #[serde(default)]
    pub image_content_sources: Vec<ImageDigestSource>,
    pub proxy: Option<Proxy>,
    #[serde(default)]
    pub fips: bool,
    /// Single-node OpenShift: the node bootstraps itself, then installs to this disk.
    pub bootstrap_in_place: Option<BootstrapInPlace>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapInPlace {
    #[serde(default)]
    pub installation_disk: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Metadata {
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Networking {
    pub network_type: Option<String>,
    #[serde(default)]
    pub machine_network: Vec<MachineNetwork>,
    #[serde(default)]
    pub cluster_network: Vec<ClusterNetwork>,
    #[serde(default)]
    pub service_network: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct MachineNetwork {
    pub cidr: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetwork {
    pub cidr: String,
    pub host_prefix: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct MachinePool {
    #[serde(default)]
    pub name: String,
    pub replicas: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ImageDigestSource {
    pub source: String,
    #[serde(default)]
    pub mirrors: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Proxy {
    #[serde(default)]
    pub http_proxy: String,
    #[serde(default)]
    pub https_proxy: String,
    #[serde(default)]
    pub no_proxy: String,
}
