//! The live system's config (`live/NODE.ign`, with `lab.liveAgent`, the default): what a node's
//! RHCOS live system (PXE or ISO) boots with before it has a disk. It carries only hardshift-agent,
//! its certificate and a config that turns the cluster's probes off (no kubelet, runtime or etcd
//! there yet) and asks it to install: check the installation disk, run `coreos-installer install`
//! with the node's own config pinned by its SHA-256, report each stage and the percentage written,
//! then reboot into the disk. The node is watched from its live system on, by the same identity
//! as its installed one (the collector takes it from the certificate).
//!
//! It holds the node's agent key: the helper serves it, like the node's config, only to the
//! address the node's DHCP reservation gives it.

use super::agent::{self, Binary};
use crate::cluster::{Cluster, Node};
use crate::ignition::{self, Config, Contents, NodeConfig, NodeFile, PUBLIC};
use crate::pki::Pki;
use hardshift_agent_config::{AgentToml, LiveInstall};

/// The disk a node installs to: its rootDeviceHints, else the lab's.
pub fn install_device(c: &Cluster, n: &Node) -> String {
    n.root_device.clone().unwrap_or_else(|| c.lab.install_device.clone())
}

/// Whether `n` boots through a live config (a single node's live system is its bootstrap: its
/// own config already installs in place).
pub fn wanted(c: &Cluster) -> bool {
    c.lab.live_agent && !c.single_node()
}

/// The agent's config on the live system: the node's identity and the host's own checks (its
/// NICs, routes, addresses, clock, disks, DNS), none of the cluster's, and the install.
pub fn settings(c: &Cluster, n: &Node, config_sha256: &str) -> AgentToml {
    let mut a = agent::settings(c, n);
    a.kubelet_healthz = String::new();
    a.kubelet_cert = "".into();
    a.cri_socket = "".into();
    a.units = vec![];
    a.etcd = None;
    a.etcd_disk = None;
    a.bootkube_progress = None;
    a.in_place_progress = None;
    // The release's registry needs the pull secret, which the live system does not carry; the
    // API and the other nodes are not up while a node installs.
    a.registry = None;
    a.endpoint = vec![];
    a.peers = vec![];
    a.live_install = Some(LiveInstall {
        disk: install_device(c, n),
        config_url: format!("{}/{}", c.lab.http_base_url, crate::layout::ignition(&n.hostname)),
        config_hash: format!("sha256-{config_sha256}"),
        image_url: c.lab.install_image_url.clone(),
        image_unsigned: c.lab.install_image_unsigned,
        installer: "coreos-installer".into(),
        reboot: true,
    });
    a
}

/// The live config of node `n`, whose installed config hashes to `config_sha256`.
pub fn config(c: &Cluster, n: &Node, pki: &Pki, bin: &Binary, config_sha256: &str, encode: &(dyn Fn(&[u8]) -> Contents + Sync)) -> Config {
    let toml = hardshift_agent_config::to_toml(&settings(c, n, config_sha256)).expect("agent config serializes");
    let mut files = agent::files(c, n, pki, bin);
    for f in files.iter_mut().filter(|f| f.path == agent::CONFIG) {
        *f = NodeFile::new(agent::CONFIG, PUBLIC, toml.clone());
    }
    // The live system names itself as the node (its reports, its console, `hostname-valid`).
    files.push(NodeFile::new("/etc/hostname", PUBLIC, format!("{}\n", n.hostname)));
    let live = NodeConfig {
        files,
        directories: vec![(agent::DROPINS.to_string(), 0o755)],
        units: vec![agent::unit()],
        ..Default::default()
    };
    ignition::build_with(&live, None, encode).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_agent_installs_the_nodes_own_config_and_probes_only_the_host() {
        let c = crate::testing::example_cluster(None);
        let n = c.nodes.iter().find(|n| n.role == crate::cluster::Role::Worker).unwrap();
        let a = settings(&c, n, "ab12");
        let li = a.live_install.as_ref().unwrap();
        assert_eq!(li.config_hash, "sha256-ab12");
        assert_eq!(li.config_url, format!("{}/ignition/{}.ign", c.lab.http_base_url, n.hostname));
        assert_eq!(li.disk, install_device(&c, n));
        assert!(a.kubelet_healthz.is_empty() && a.cri_socket.as_os_str().is_empty() && a.units.is_empty());
        assert!(a.etcd.is_none() && a.registry.is_none() && a.endpoint.is_empty());
        assert_eq!(a.node, n.hostname, "the same identity as the installed node");
        // What the agent reads back is what was written.
        let text = hardshift_agent_config::to_toml(&a).unwrap();
        assert_eq!(hardshift_agent_config::parse(("agent.toml", &text), &[]).unwrap(), a);
    }
}
