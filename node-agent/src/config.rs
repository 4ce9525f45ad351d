//! `/etc/hardshift/agent.toml`, then `/etc/hardshift/agent.d/*.toml` in name order (later keys win).

use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `host:port` of the collector.
    pub collector: String,
    /// The name the collector's certificate must carry; default: the host part of `collector`.
    #[serde(default)]
    pub server_name: Option<String>,
    /// This node's name: what the collector checks against the certificate's CN.
    pub node: String,
    #[serde(default)]
    pub role: String,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    #[serde(default = "default_interval")]
    pub interval_ms: u64,
    #[serde(default = "default_capacity")]
    pub outbox_capacity: usize,
    #[serde(default = "default_healthz")]
    pub kubelet_healthz: String,
    /// `system` (default), `session`, or a D-Bus address.
    #[serde(default = "default_bus")]
    pub systemd_bus: String,
    /// systemd units to watch.
    #[serde(default = "default_units")]
    pub units: Vec<String>,
    /// The CRI socket of the container runtime; "" turns the CRI probe off.
    #[serde(default = "default_cri")]
    pub cri_socket: PathBuf,
    /// The kubelet's client certificate: absent while its CSR waits for approval.
    #[serde(default = "default_kubelet_cert")]
    pub kubelet_cert: PathBuf,
    /// Where journalctl reads (`--directory`); default: the system journal.
    #[serde(default)]
    pub journal_directory: Option<PathBuf>,
    /// Where the last used seq is kept across agent restarts within a boot (tmpfs is enough).
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// The local etcd member (bootstrap and masters).
    #[serde(default)]
    pub etcd: Option<crate::etcd::EtcdConfig>,
}

fn default_state_dir() -> PathBuf {
    "/run/hardshift-agent".into()
}
fn default_bus() -> String {
    "system".into()
}
fn default_units() -> Vec<String> {
    vec!["kubelet.service".into(), "crio.service".into()]
}

fn default_cri() -> PathBuf {
    "/var/run/crio/crio.sock".into()
}
fn default_kubelet_cert() -> PathBuf {
    "/var/lib/kubelet/pki/kubelet-client-current.pem".into()
}

fn default_interval() -> u64 {
    5000
}
fn default_capacity() -> usize {
    2000
}
fn default_healthz() -> String {
    "127.0.0.1:10248".into()
}

impl Config {
    pub fn server_name(&self) -> String {
        self.server_name.clone().unwrap_or_else(|| {
            self.collector
                .rsplit_once(':')
                .map(|(h, _)| h)
                .unwrap_or(&self.collector)
                .trim_matches(['[', ']'])
                .to_string()
        })
    }
}

/// Read the main file and its drop-ins into one TOML table, then the typed config.
pub fn load(main: &Path) -> Result<Config, String> {
    let read = |p: &Path| -> Result<toml::Table, String> {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        text.parse::<toml::Table>().map_err(|e| format!("{}: {e}", p.display()))
    };
    let mut table = read(main)?;
    let dropins = main.with_file_name("agent.d");
    if let Ok(rd) = std::fs::read_dir(&dropins) {
        let mut files: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            for (k, v) in read(&f)? {
                table.insert(k, v);
            }
        }
    }
    toml::Value::Table(table).try_into().map_err(|e| format!("{}: {e}", main.display()))
}
