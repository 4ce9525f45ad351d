//! `lab/scripts/helper-network.sh`: the helper's host network, the steps the tutorial learned the
//! hard way (PROGRESS.md): the VIPs on the lab bridge, the load balancer's ports open, NAT for the
//! lab network, HAProxy allowed to bind and connect under SELinux. Idempotent: each step looks
//! before it acts, says `ok` or `changed`, and `--dry-run` only says what it would change.

use crate::cluster::Cluster;
use ipnet::IpNet;
use std::net::IpAddr;

/// The ports HAProxy serves on the helper: API, machine-config, ingress.
pub const PORTS: [u16; 4] = [6443, 22623, 80, 443];

pub fn script(c: &Cluster) -> String {
    let net = c.machine_networks.iter().find(|n| matches!(n, IpNet::V4(_)));
    let (cidr, prefix) = net.map(|n| (n.trunc().to_string(), n.prefix_len())).unwrap_or_default();
    let vips: Vec<String> = [c.api_vip, c.ingress_vip]
        .iter()
        .filter(|ip| matches!(ip, IpAddr::V4(_)) && **ip != c.helper_ip)
        .map(|ip| format!("{ip}/{prefix}"))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let ports: Vec<String> = PORTS.iter().map(u16::to_string).collect();
    crate::scripts::fill(
        crate::scripts::HELPER_NETWORK,
        &[
            ("domain", &c.domain()),
            ("vip_list", &vips.join(", ")),
            ("port_list", &ports.join(", ")),
            ("cidr", &cidr),
            ("bridge", &c.name),
            ("vips", &vips.join(" ")),
            ("ports", &ports.join(" ")),
            ("port_set", &ports.join(", ")),
        ],
    )
}
