//! `/etc/hardshift/agent.toml`, then `/etc/hardshift/agent.d/*.toml` in name order: one type,
//! written by the generator (`to_toml`) and read by the agent (`load`, `parse`), so the two can
//! never disagree on a key. Drop-ins merge table by table (later keys win).

pub mod regular;

use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Where the generator places the config on a node, and where drop-ins go.
pub const PATH: &str = "/etc/hardshift/agent.toml";
pub const DROPINS: &str = "/etc/hardshift/agent.d";

/// hardshift-agent's own config (`agent.toml`): not the installer's agent-config.yaml, which the
/// generator reads as `config::agent_config::AgentConfig`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentToml {
    /// `host:port` of the collector.
    pub collector: String,
    /// The name the collector's certificate must carry; default: the host part of `collector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// This node's name: what the collector checks against the certificate's CN.
    pub node: String,
    #[serde(default)]
    pub role: String,
    /// The bundle was made with `fips: true`: the agent refuses to start unless its TLS runs on a
    /// FIPS module in FIPS mode.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fips: bool,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_directory: Option<PathBuf>,
    /// Where the last used seq is kept across agent restarts within a boot (tmpfs is enough).
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// bootkube.sh's progress record (the bootstrap only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootkube_progress: Option<PathBuf>,
    /// A single node's bootstrap-in-place progress record (install-to-disk on the live system,
    /// then the post-reboot step on the installed one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_progress: Option<PathBuf>,
    /// etcd's data directory, for a bounded fdatasync probe at start and every hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_disk: Option<PathBuf>,
    /// Names this node must resolve, with the addresses the bundle's zones give them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns: Vec<DnsCheck>,
    /// The API through the load balancer and each API server directly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoint: Vec<Endpoint>,
    /// Whether this node can pull its first images through the mirrors (every `every_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistryConfig>,
    /// The local etcd member (bootstrap and masters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<EtcdConfig>,
    /// This node's address in the bundle (agent-config.yaml): the node must hold it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
    /// install-config's machineNetwork CIDRs: one of the node's addresses must be in one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_network: Vec<ipnet::IpNet>,
    /// `<name>.<baseDomain>`: a random name under it must not resolve (no wildcard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_domain: Option<String>,
    /// Other nodes of the bundle to measure latency, loss and path MTU to (bounded in count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<Peer>,
    /// Kept across reboots (the boots seen, for a reboot loop); not tmpfs.
    #[serde(default = "default_history_dir")]
    pub history_dir: PathBuf,
    /// The live system's install (the live config only): the agent writes the installation disk
    /// with coreos-installer, reports each stage, and reboots into the installed system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_install: Option<LiveInstall>,
}

/// What the live system installs, and from where: the node's own config, pinned by its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveInstall {
    /// The whole disk coreos-installer writes (a /dev path, by-id names included).
    pub disk: String,
    /// The node's Ignition config, as the helper serves it.
    pub config_url: String,
    /// `sha256-HEX` of that config: coreos-installer refuses any other.
    pub config_hash: String,
    /// The OS image to write; absent: the live system's own (RHCOS's osmet, offline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<String>,
    /// The image has no signature coreos-installer can check (`--insecure`): labs only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub image_unsigned: bool,
    /// The program (default: coreos-installer on PATH).
    #[serde(default = "default_installer")]
    pub installer: PathBuf,
    /// Reboot once the disk is written (default true).
    #[serde(default = "default_true")]
    pub reboot: bool,
}

fn default_installer() -> PathBuf {
    PathBuf::from("coreos-installer")
}
fn default_true() -> bool {
    true
}

/// Another node of the bundle, as the peers probe reaches it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    pub name: String,
    pub role: String,
    pub addr: IpAddr,
}

/// One name the node must resolve, and the addresses the bundle's zone gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsCheck {
    pub name: String,
    pub expect: Vec<IpAddr>,
}

/// A TCP endpoint the node must reach: the API through the load balancer (`via = "lb"`), or one
/// API server directly (`via = "backend"`), to tell a load balancer problem from a down API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub name: String,
    pub addr: String,
    pub via: Via,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    Lb,
    Backend,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// The node's pull secret (CRI-O's: /var/lib/kubelet/config.json).
    pub pull_secret: PathBuf,
    /// Extra roots (install-config's additionalTrustBundle, as laid on the node); optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<PathBuf>,
    pub images: Vec<String>,
    /// How often to look, in seconds.
    #[serde(default = "default_every")]
    pub every_s: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirror: Vec<RegistryMirror>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryMirror {
    pub source: String,
    pub mirrors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdConfig {
    /// `host:port` of the local member's client URL.
    pub endpoint: String,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn default_state_dir() -> PathBuf {
    PathBuf::from("/run/hardshift-agent")
}
fn default_history_dir() -> PathBuf {
    PathBuf::from("/var/lib/hardshift-agent")
}
fn default_bus() -> String {
    "system".into()
}
fn default_units() -> Vec<String> {
    vec!["kubelet.service".into(), "crio.service".into()]
}
fn default_cri() -> PathBuf {
    PathBuf::from("/var/run/crio/crio.sock")
}
fn default_kubelet_cert() -> PathBuf {
    PathBuf::from("/var/lib/kubelet/pki/kubelet-client-current.pem")
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
fn default_every() -> u64 {
    600
}

impl AgentToml {
    /// A config with what is required, everything else at the agent's defaults.
    pub fn new(collector: String, node: String, role: String, ca: PathBuf, cert: PathBuf, key: PathBuf) -> AgentToml {
        AgentToml {
            collector,
            server_name: None,
            node,
            role,
            fips: false,
            ca,
            cert,
            key,
            interval_ms: default_interval(),
            outbox_capacity: default_capacity(),
            kubelet_healthz: default_healthz(),
            systemd_bus: default_bus(),
            units: default_units(),
            cri_socket: default_cri(),
            kubelet_cert: default_kubelet_cert(),
            journal_directory: None,
            state_dir: default_state_dir(),
            bootkube_progress: None,
            in_place_progress: None,
            etcd_disk: None,
            dns: vec![],
            endpoint: vec![],
            registry: None,
            etcd: None,
            address: None,
            machine_network: vec![],
            cluster_domain: None,
            peers: vec![],
            history_dir: default_history_dir(),
            live_install: None,
        }
    }

    /// The host part of `collector`, or `server_name`: what the collector's certificate must name.
    pub fn server_name(&self) -> String {
        self.server_name.clone().unwrap_or_else(|| {
            let host = self.collector.rsplit_once(':').map(|(h, _)| h).unwrap_or(&self.collector);
            host.trim_start_matches('[').trim_end_matches(']').to_string()
        })
    }
}

impl RegistryConfig {
    pub fn new(pull_secret: PathBuf, images: Vec<String>) -> RegistryConfig {
        RegistryConfig {
            pull_secret,
            trust: None,
            images,
            every_s: default_every(),
            mirror: vec![],
        }
    }
}

/// The file the generator writes: a header saying where local changes go, then the config.
pub fn to_toml(c: &AgentToml) -> Result<String, toml::ser::Error> {
    Ok(format!(
        "# Generated by hardshift. Local changes go in {DROPINS}/*.toml (later files win).\n{}",
        toml::to_string(c)?
    ))
}

/// The most a config file may hold (the generated one is about 1 KiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Why the agent's config did not load: a file that did not read, or TOML that did not parse or
/// fit the config (toml's own error carries the line and column).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: {source}")]
    Toml {
        file: String,
        #[source]
        source: toml::de::Error,
    },
}

/// Read the main file and its drop-ins (`agent.d/*.toml` beside it, in name order).
pub fn load(main: &Path) -> Result<AgentToml, ConfigError> {
    let read = |p: &Path| {
        regular::read_to_string(p, MAX_CONFIG_BYTES).map_err(|source| ConfigError::Read {
            path: p.to_path_buf(),
            source,
        })
    };
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
pub fn parse(main: (&str, &str), dropins: &[(String, String)]) -> Result<AgentToml, ConfigError> {
    let toml = |file: &str| {
        let file = file.to_string();
        move |source| ConfigError::Toml { file, source }
    };
    let table = |(name, text): (&str, &str)| text.parse::<toml::Table>().map_err(toml(name));
    let mut merged = table(main)?;
    for (name, text) in dropins {
        merge(&mut merged, table((name, text))?);
    }
    toml::Value::Table(merged).try_into().map_err(toml(main.0))
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

    /// A FIFO or a directory given as the config (or as a drop-in) is named, never waited on.
    #[test]
    fn a_config_that_is_not_a_regular_file_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("agent.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let p = fifo.clone();
        std::thread::spawn(move || tx.send(load(&p).err()).unwrap());
        let err = match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(e) => e.expect("a FIFO was read as the config"),
            Err(_) => {
                let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
                panic!("load blocked on a FIFO");
            }
        };
        assert!(
            matches!(&err, ConfigError::Read { path, source } if path.ends_with("agent.toml") && source.to_string().contains("not a regular file")),
            "{err}"
        );
    }

    /// What `to_toml` writes, `parse` reads back as the same value, with every field set.
    #[test]
    fn to_toml_then_parse_is_the_identity() {
        let mut c = AgentToml::new(
            "[fd00::1]:9443".into(),
            "master-0".into(),
            "master".into(),
            "/etc/hardshift/agent-ca.crt".into(),
            "/etc/hardshift/agent.crt".into(),
            "/etc/hardshift/agent.key".into(),
        );
        c.server_name = Some("collector.example.com".into());
        c.journal_directory = Some("/var/log/journal".into());
        c.bootkube_progress = Some("/var/lib/hardshift/bootkube.json".into());
        c.etcd_disk = Some("/var/lib/etcd".into());
        c.kubelet_cert = "".into();
        c.dns = vec![DnsCheck {
            name: "api-int.ocp4.example.com".into(),
            expect: vec!["192.168.126.10".parse().unwrap(), "fd00::10".parse().unwrap()],
        }];
        c.endpoint = vec![Endpoint {
            name: "api-int:6443".into(),
            addr: "api-int.ocp4.example.com:6443".into(),
            via: Via::Lb,
        }];
        let mut r = RegistryConfig::new("/var/lib/kubelet/config.json".into(), vec!["quay.io/a@sha256:00".into()]);
        r.trust = Some("/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt".into());
        r.mirror = vec![RegistryMirror {
            source: "quay.io/a".into(),
            mirrors: vec!["registry.example.com:5000/a".into()],
        }];
        c.registry = Some(r);
        c.etcd = Some(EtcdConfig {
            endpoint: "127.0.0.1:2379".into(),
            ca: "/a/ca.crt".into(),
            cert: "/a/c.crt".into(),
            key: "/a/c.key".into(),
        });
        c.address = Some("192.168.126.101".parse().unwrap());
        c.machine_network = vec!["192.168.126.0/24".parse().unwrap(), "fd00::/64".parse().unwrap()];
        c.cluster_domain = Some("ocp4.example.com".into());
        c.peers = vec![Peer {
            name: "master-1".into(),
            role: "master".into(),
            addr: "192.168.126.102".parse().unwrap(),
        }];
        c.history_dir = "/var/lib/x".into();
        let text = to_toml(&c).unwrap();
        assert!(text.starts_with("# Generated by hardshift."), "{text}");
        assert_eq!(parse(("agent.toml", &text), &[]).unwrap(), c, "{text}");
        assert_eq!(c.server_name(), "collector.example.com");
        c.server_name = None;
        assert_eq!(c.server_name(), "fd00::1");
        // The minimal config: only what is required, the rest at the defaults.
        let min = AgentToml::new("h:1".into(), "n".into(), String::new(), "a".into(), "b".into(), "c".into());
        assert_eq!(parse(("agent.toml", &to_toml(&min).unwrap()), &[]).unwrap(), min);
    }

    const MAIN: &str = "collector = \"192.168.126.1:9443\"\nnode = \"master-0\"\nrole = \"master\"\nca = \"/etc/hardshift/agent-ca.crt\"\ncert = \"/etc/hardshift/agent.crt\"\nkey = \"/etc/hardshift/agent.key\"\ninterval_ms = 5000\n";

    #[test]
    fn dropins_override_and_unknown_keys_are_errors() {
        let c = parse(("agent.toml", MAIN), &[("10.toml".into(), "interval_ms = 100\n".into())]).unwrap();
        assert_eq!(c.interval_ms, 100);
        assert_eq!(c.server_name(), "192.168.126.1");
        let e = parse(("agent.toml", MAIN), &[("20.toml".into(), "intervall_ms = 1\n".into())]).unwrap_err();
        assert!(
            matches!(&e, ConfigError::Toml { source, .. } if source.to_string().contains("unknown field `intervall_ms`")),
            "{e}"
        );
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
}
