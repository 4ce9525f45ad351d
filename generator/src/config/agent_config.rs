//! `agent-config.yaml` (agent-installer schema, v1beta1): hosts, their MACs and their static
//! network in nmstate form. hardshift adds `role: bootstrap` for the lab's bootstrap host.

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(rename = "rendezvousIP")]
    pub rendezvous_ip: Option<String>,
    #[serde(default)]
    pub hosts: Vec<Host>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Host {
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub interfaces: Vec<Interface>,
    #[serde(default)]
    pub network_config: NetworkConfig,
    pub root_device_hints: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub mac_address: String,
}

/// The nmstate subset that carries a static IPv4 setup.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct NetworkConfig {
    #[serde(default)]
    pub interfaces: Vec<NmInterface>,
    pub dns_resolver: Option<DnsResolver>,
    pub routes: Option<Routes>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct NmInterface {
    #[serde(default)]
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    pub state: Option<String>,
    pub mac_address: Option<String>,
    pub ipv4: Option<NmIpv4>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct NmIpv4 {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub dhcp: bool,
    #[serde(default)]
    pub address: Vec<NmAddress>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct NmAddress {
    pub ip: String,
    pub prefix_length: u8,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct DnsResolver {
    pub config: Option<DnsConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct DnsConfig {
    #[serde(default)]
    pub server: Vec<String>,
    #[serde(default)]
    pub search: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Routes {
    #[serde(default)]
    pub config: Vec<Route>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Route {
    #[serde(default)]
    pub destination: String,
    #[serde(default)]
    pub next_hop_address: String,
    #[serde(default)]
    pub next_hop_interface: String,
}
