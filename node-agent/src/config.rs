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
    /// The kubelet's client certificate: absent while its CSR waits for approval; "" turns it off.
    #[serde(default = "default_kubelet_cert")]
    pub kubelet_cert: PathBuf,
    /// Where journalctl reads (`--directory`); default: the system journal.
    #[serde(default)]
    pub journal_directory: Option<PathBuf>,
    /// Where the last used seq is kept across agent restarts within a boot (tmpfs is enough).
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// bootkube.sh's progress record (the bootstrap only).
    #[serde(default)]
    pub bootkube_progress: Option<PathBuf>,
    /// etcd's data directory, for a bounded fdatasync probe at start and every hour (bootstrap and masters).
    #[serde(default)]
    pub etcd_disk: Option<PathBuf>,
    /// Names this node must resolve, with the addresses the bundle's zones give them.
    #[serde(default)]
    pub dns: Vec<crate::install::DnsCheck>,
    /// The API through the load balancer and each API server directly.
    #[serde(default)]
    pub endpoint: Vec<crate::install::Endpoint>,
    /// Whether this node can pull its first images through the mirrors (every `every_s`).
    #[serde(default)]
    pub registry: Option<crate::registry::RegistryConfig>,
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
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let text = read(main)?;
    let mut dropins = Vec::new();
    if let Ok(rd) = std::fs::read_dir(main.with_file_name("agent.d")) {
        let mut files: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            dropins.push((f.display().to_string(), read(&f)?));
        }
    }
    parse((&main.display().to_string(), &text), &dropins)
}

/// The config from the main file's text and its drop-ins' (name, text), later keys winning.
/// Tables merge key by key, at any depth: a drop-in that sets `[etcd] endpoint` keeps the
/// main file's `[etcd] ca`. Other values, arrays included, are replaced whole.
pub fn parse(main: (&str, &str), dropins: &[(String, String)]) -> Result<Config, String> {
    let table = |(name, text): (&str, &str)| text.parse::<toml::Table>().map_err(|e| format!("{name}: {e}"));
    let mut merged = table(main)?;
    for (name, text) in dropins {
        merge(&mut merged, table((name, text))?);
    }
    toml::Value::Table(merged).try_into().map_err(|e| format!("{}: {e}", main.0))
}

fn merge(into: &mut toml::Table, from: toml::Table) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: &str = "collector = \"192.168.126.1:9443\"\nnode = \"master-0\"\nrole = \"master\"\nca = \"/etc/hardshift/agent-ca.crt\"\ncert = \"/etc/hardshift/agent.crt\"\nkey = \"/etc/hardshift/agent.key\"\ninterval_ms = 5000\n";

    #[test]
    fn dropins_override_and_unknown_keys_are_errors() {
        let c = parse(("agent.toml", MAIN), &[("10.toml".into(), "interval_ms = 100\n".into())]).unwrap();
        assert_eq!(c.interval_ms, 100);
        assert_eq!(c.server_name(), "192.168.126.1");
        let e = parse(("agent.toml", MAIN), &[("20.toml".into(), "intervall_ms = 1\n".into())]).unwrap_err();
        assert!(e.contains("unknown field `intervall_ms`"), "{e}");
    }

    #[test]
    fn dropins_merge_tables_key_by_key() {
        let main = format!("{MAIN}units = [\"kubelet.service\"]\n[etcd]\nendpoint = \"https://10.0.0.1:2379\"\nca = \"/etc/etcd/ca.crt\"\ncert = \"/etc/etcd/c.crt\"\nkey = \"/etc/etcd/c.key\"\n");
        let c = parse(
            ("agent.toml", &main),
            &[
                ("10.toml".into(), "[etcd]\nendpoint = \"https://10.0.0.2:2379\"\n".into()),
                ("20.toml".into(), "units = [\"crio.service\"]\n".into()),
            ],
        )
        .unwrap();
        let etcd = c.etcd.expect("etcd kept");
        assert_eq!(etcd.endpoint, "https://10.0.0.2:2379");
        assert_eq!(
            etcd.ca,
            PathBuf::from("/etc/etcd/ca.crt"),
            "the drop-in must not lose the main file's ca"
        );
        assert_eq!(c.units, ["crio.service"], "arrays are replaced whole");
    }

    /// Whatever bytes the config files hold, the agent says what is wrong and never panics.
    #[test]
    fn fuzz_agent_config() {
        let tokens: &[&[u8]] = &[
            b"[etcd]\n",
            b"endpoint = \"",
            b"units = [",
            b"\"\"\"",
            b"interval_ms = 18446744073709551615\n",
            b"outbox_capacity = 0\n",
            b"collector = \"[::1]:9443\"\n",
            b"= ",
            b"]]",
            b"\\u0000",
            b"inf",
            b"nan",
            b"1979-05-27T07:32:00Z",
        ];
        hardshift_fuzz::run("agent-config", tokens, |input| {
            let text = String::from_utf8_lossy(input);
            if let Ok(c) = parse(("agent.toml", &text), &[]) {
                let _ = c.server_name();
            }
            let _ = parse(("agent.toml", MAIN), &[("10.toml".into(), text.to_string())]);
        });
    }
}
