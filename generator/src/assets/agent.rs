//! hardshift-agent on every node: the binary, its config, its certificate (CN = hostname) and a
//! unit that starts it after the network and keeps it running.

use crate::cluster::{Cluster, Node, Role};
use crate::ignition::{self, Contents, NodeFile, Unit, PUBLIC, SCRIPT, SECRET};
use crate::pki::Pki;
use hardshift_agent_config::{AgentToml, DnsCheck, Endpoint, EtcdConfig, Peer, RegistryConfig, RegistryMirror, Via};
use sha2::{Digest, Sha512};
use std::sync::Arc;

/// Where a remotely fetched agent binary sits in the bundle, to be served by the helper.
pub const SERVED: &str = crate::layout::SERVED_AGENT;

pub const BINARY: &str = "/usr/local/bin/hardshift-agent";
pub const CONFIG: &str = hardshift_agent_config::PATH;
pub const DROPINS: &str = hardshift_agent_config::DROPINS;
pub const CA: &str = "/etc/hardshift/agent-ca.crt";
pub const CERT: &str = "/etc/hardshift/agent.crt";
pub const KEY: &str = "/etc/hardshift/agent.key";

pub const UNIT: &str = "[Unit]
Description=hardshift node agent: reports this node's health to the collector
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/local/bin/hardshift-agent --config /etc/hardshift/agent.toml
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
";

/// The agent binary, encoded once for every node.
#[derive(Clone)]
pub struct Binary {
    pub bytes: Arc<[u8]>,
    pub encoded: Arc<Contents>,
}

impl Binary {
    /// Embedded in every node's config (compressed).
    pub fn new(bytes: Vec<u8>) -> Binary {
        let encoded = Arc::new(ignition::encode(&bytes));
        Binary {
            bytes: Arc::from(bytes),
            encoded,
        }
    }

    /// Embedded, with an encoding made before (a cache keyed by the binary's hash): used only if it
    /// decodes to exactly `bytes`, else `bytes` come back to be encoded anew.
    pub fn from_encoded(bytes: Vec<u8>, encoded: Contents) -> Result<Binary, Vec<u8>> {
        let b = Binary::cached(bytes, encoded)?;
        if b.encodes() {
            Ok(b)
        } else {
            Err(b.bytes.to_vec())
        }
    }

    /// Embedded, with an encoding made before, not yet checked: `encodes` says whether it decodes
    /// to `bytes`, and is meant to run beside other work.
    pub fn cached(bytes: Vec<u8>, encoded: Contents) -> Result<Binary, Vec<u8>> {
        if encoded.source.as_deref().is_none_or(|s| !s.starts_with("data:")) {
            return Err(bytes);
        }
        Ok(Binary {
            bytes: Arc::from(bytes),
            encoded: Arc::new(encoded),
        })
    }

    /// Whether the encoding decodes to exactly the binary.
    pub fn encodes(&self) -> bool {
        ignition::decode(&self.encoded).as_deref() == Some(&self.bytes[..])
    }

    /// Fetched by Ignition from `url` (the helper's HTTP server, which serves `DIR/http/`), pinned
    /// by its SHA-512: node configs stay small when there are hundreds of nodes.
    pub fn remote(bytes: Vec<u8>, url: &str) -> Binary {
        let hash: String = Sha512::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        let mut c = Contents {
            compression: None,
            source: Some(url.into()),
            ..Default::default()
        };
        c.other
            .insert("verification".into(), serde_json::json!({ "hash": format!("sha512-{hash}") }));
        Binary {
            bytes: Arc::from(bytes),
            encoded: Arc::new(c),
        }
    }

    pub fn is_remote(&self) -> bool {
        self.encoded.source.as_deref().is_some_and(|s| !s.starts_with("data:"))
    }
}

/// The node's agent config, typed as the agent reads it (`hardshift-agent-config`).
pub fn settings(c: &Cluster, n: &Node) -> AgentToml {
    let host = if c.collector_address.contains(':') {
        format!("[{}]", c.collector_address)
    } else {
        c.collector_address.clone()
    };
    let mut a = AgentToml::new(
        format!("{host}:{}", c.collector_port),
        n.hostname.clone(),
        // A single node is its cluster's master in both its stages (its live system's config is
        // made as the bootstrap's).
        if c.single_node() { "master" } else { n.role.as_str() }.to_string(),
        CA.into(),
        CERT.into(),
        KEY.into(),
    );
    a.fips = c.fips;
    // The bootstrap's etcd is hardshift's, with the bundle's client certificate on the node. A
    // master's etcd is the cluster-etcd-operator's: its certificates appear in the operator's
    // static-pod resources once it rolls etcd out there (the peer certificate is also a client one).
    a.etcd = match n.role {
        Role::Bootstrap => {
            let s = super::paths::BOOTSTRAP_SECRETS;
            Some(EtcdConfig {
                endpoint: "127.0.0.1:2379".into(),
                ca: format!("{s}/etcd-ca.crt").into(),
                cert: format!("{s}/etcd-client.crt").into(),
                key: format!("{s}/etcd-client.key").into(),
            })
        }
        Role::Master => {
            let d = "/etc/kubernetes/static-pod-resources/etcd-certs";
            Some(EtcdConfig {
                endpoint: "127.0.0.1:2379".into(),
                ca: format!("{d}/configmaps/etcd-serving-ca/ca-bundle.crt").into(),
                cert: format!("{d}/secrets/etcd-all-certs/etcd-peer-{}.crt", n.hostname).into(),
                key: format!("{d}/secrets/etcd-all-certs/etcd-peer-{}.key", n.hostname).into(),
            })
        }
        Role::Worker => None,
    };
    if n.role != Role::Worker {
        a.etcd_disk = Some("/var/lib/etcd".into());
    }
    if n.role == Role::Bootstrap {
        a.bootkube_progress = Some(super::paths::BOOTKUBE_PROGRESS.into());
        // The bootstrap's kubelet runs standalone: it never has a client certificate to watch.
        a.kubelet_cert = "".into();
    }
    if c.single_node() {
        a.in_place_progress = Some(super::paths::IN_PLACE_PROGRESS.into());
    }
    (a.dns, a.endpoint) = dns_checks(c, n);
    a.registry = Some(registry_check(c));
    a.address = Some(n.ip);
    a.machine_network = c.machine_networks.clone();
    a.cluster_domain = Some(c.domain());
    a.peers = peers_of(&c.nodes, n);
    a
}

/// Workers a node measures the network to, besides the control plane: latency and loss are a
/// per-pair cost, so a node probes a bounded set whatever the cluster's size.
const WORKER_PEERS: usize = 3;

/// The nodes this one measures latency, loss and path MTU to: the control plane (the bootstrap
/// only from the bootstrap: it is gone once the install is done, and never the others' problem),
/// and the next few workers in agent-config order (each worker its own neighbours, so every
/// worker is measured by some other).
fn peers_of(nodes: &[Node], n: &Node) -> Vec<Peer> {
    let peer = |p: &Node| Peer {
        name: p.hostname.clone(),
        role: p.role.as_str().to_string(),
        addr: p.ip,
    };
    let mut out: Vec<Peer> = nodes
        .iter()
        .filter(|m| m.role == Role::Master && m.hostname != n.hostname)
        .map(peer)
        .collect();
    let workers: Vec<&Node> = nodes.iter().filter(|w| w.role == Role::Worker).collect();
    let start = workers.iter().position(|w| w.hostname == n.hostname).map_or(0, |i| i + 1);
    out.extend(
        workers
            .iter()
            .cycle()
            .skip(start)
            .take(workers.len())
            .filter(|w| w.hostname != n.hostname)
            .take(WORKER_PEERS)
            .map(|w| peer(w)),
    );
    out
}

pub fn config(c: &Cluster, n: &Node) -> String {
    // Every field is a plain string, number, path or address: serializing cannot fail.
    hardshift_agent_config::to_toml(&settings(c, n)).expect("agent config serializes")
}

/// The images a node pulls first (the release, the pause image), HEADed through the mirrors with
/// the node's own pull secret and trust bundle: can this node pull at all?
fn registry_check(c: &Cluster) -> RegistryConfig {
    let images = vec![c.release.image.clone(), c.release.tag("pod").to_string()];
    let mut r = RegistryConfig::new(super::paths::PULL_SECRET.into(), images);
    if !c.additional_trust_bundle.trim().is_empty() {
        r.trust = Some(super::paths::TRUST_ANCHOR.into());
    }
    r.mirror = c
        .mirrors
        .iter()
        .map(|m| RegistryMirror {
            source: m.source.clone(),
            mirrors: m.mirrors.clone(),
        })
        .collect();
    r
}

/// The names a node must resolve as the bundle's zones say (the API, external and internal, a
/// name under the `*.apps` wildcard, its own name), and the API through HAProxy and each API
/// server (bootstrap, masters) directly: a refused api-int while a backend answers is the load
/// balancer's fault.
fn dns_checks(c: &Cluster, n: &Node) -> (Vec<DnsCheck>, Vec<Endpoint>) {
    // The lab's own records for these names (not all of them: this runs once per node).
    use crate::lab::dns;
    let d = c.domain();
    let mut dns: Vec<DnsCheck> = dns::api_records(c, &d)
        .into_iter()
        .chain([dns::node_record(n, &d)])
        .map(|a| DnsCheck {
            name: a.name,
            expect: vec![a.ip],
        })
        .collect();
    dns.push(DnsCheck {
        name: format!("hardshift-probe.apps.{d}"),
        expect: vec![c.ingress_vip],
    });
    let mut endpoints = vec![Endpoint {
        name: "api-int:6443".into(),
        addr: format!("api-int.{d}:6443"),
        via: Via::Lb,
    }];
    for b in c.nodes.iter().filter(|b| b.role != Role::Worker) {
        let ip = match b.ip {
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            v4 => v4.to_string(),
        };
        endpoints.push(Endpoint {
            name: format!("{}:6443", b.hostname),
            addr: format!("{ip}:6443"),
            via: Via::Backend,
        });
    }
    (dns, endpoints)
}

pub fn files(c: &Cluster, n: &Node, pki: &Pki, bin: &Binary) -> Vec<NodeFile> {
    let me = pki.get(&format!("agent-pki/agent-{}", n.hostname));
    vec![
        NodeFile::shared(BINARY, SCRIPT, bin.bytes.clone(), bin.encoded.clone()),
        NodeFile::new(CONFIG, PUBLIC, config(c, n)),
        NodeFile::new(CA, PUBLIC, pki.get("agent-pki/agent-ca").cert_pem.clone()),
        NodeFile::new(CERT, PUBLIC, me.cert_pem.clone()),
        NodeFile::new(KEY, SECRET, me.key_pem.as_bytes()),
    ]
}

pub fn unit() -> Unit {
    Unit {
        name: "hardshift-agent.service".into(),
        enabled: Some(true),
        contents: Some(UNIT.into()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_the_masters_and_the_next_workers_bounded() {
        let node = |name: &str, role: Role, last: u8| Node {
            hostname: name.into(),
            role,
            index: 0,
            interface: "enp1s0".into(),
            mac: String::new(),
            ip: std::net::IpAddr::from([192, 168, 126, last]),
            prefix: 24,
            gateway: None,
            dns: vec![],
            root_device: None,
        };
        let mut nodes = vec![node("bootstrap", Role::Bootstrap, 10)];
        nodes.extend((0..3).map(|i| node(&format!("master-{i}"), Role::Master, 20 + i)));
        nodes.extend((0..6).map(|i| node(&format!("worker-{i}"), Role::Worker, 30 + i)));
        let names = |me: &Node| -> Vec<String> { peers_of(&nodes, me).into_iter().map(|p| p.name).collect() };
        assert_eq!(names(&nodes[1]), ["master-1", "master-2", "worker-0", "worker-1", "worker-2"]);
        assert_eq!(
            names(&nodes[0]),
            ["master-0", "master-1", "master-2", "worker-0", "worker-1", "worker-2"]
        );
        // The last worker's neighbours wrap around; never itself.
        assert_eq!(
            names(&nodes[9]),
            ["master-0", "master-1", "master-2", "worker-0", "worker-1", "worker-2"]
        );
        assert_eq!(
            names(&nodes[5]),
            ["master-0", "master-1", "master-2", "worker-2", "worker-3", "worker-4"]
        );
    }

    #[test]
    fn a_cached_encoding_is_used_only_when_it_decodes_to_the_binary() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let fresh = Binary::new(bytes.clone());
        let reused = Binary::from_encoded(bytes.clone(), (*fresh.encoded).clone()).ok().unwrap();
        assert_eq!(reused.encoded, fresh.encoded);
        // The cache of another binary (or an edited one) is refused, and the bytes come back.
        let mut other = bytes.clone();
        other[7] ^= 1;
        assert_eq!(Binary::from_encoded(other.clone(), (*fresh.encoded).clone()).err(), Some(other));
    }
}
