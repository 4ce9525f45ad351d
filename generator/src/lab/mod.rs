//! The lab around the cluster, from the same `Cluster`: DNS, DHCP, PXE/iPXE, HAProxy before and
//! after the pivot, libvirt, install commands, and a README for the person at the helper node.

pub mod dhcp;
pub mod dns;
pub mod haproxy;
pub mod host_network;
pub mod libvirt;
pub mod pxe;
mod readme;

use crate::body::Body;
use crate::cluster::{Cluster, Node};
use std::collections::BTreeMap;

/// hostname → SHA-256 (hex) of its Ignition config, the hash SHA256SUMS holds too (one pass over
/// the bytes; coreos-installer takes `sha256-` since 0.4). On all cores: at a thousand nodes with
/// an MCO base this can be hundreds of MB.
pub fn ignition_hashes<'a>(configs: impl Iterator<Item = (&'a str, &'a Body)>) -> BTreeMap<String, String> {
    use rayon::prelude::*;
    let all: Vec<(&str, &Body)> = configs.collect();
    all.par_iter()
        .map(|(h, b)| (h.to_string(), b.sha256_hex()))
        .collect::<Vec<_>>()
        .into_iter()
        .collect()
}
use std::net::IpAddr;

/// (path inside the bundle, mode, contents)
pub type LabFile = (String, u32, String);

/// Every lab file. `hashes`: hostname → SHA-256 of its Ignition config (see `ignition_hashes`).
pub fn files(c: &Cluster, hashes: &BTreeMap<String, String>) -> Vec<LabFile> {
    let d = c.domain();
    let r = dns::records(c);
    let ipxe_url = format!("{}/pxe/boot.ipxe", c.lab.http_base_url);
    let dev = |n: &Node| n.root_device.clone().unwrap_or_else(|| c.lab.install_device.clone());
    let sha256 = |host: &str| hashes.get(host).cloned().unwrap_or_default();
    let mut out: Vec<LabFile> = Vec::new();
    let mut add = |p: String, mode: u32, text: String| out.push((format!("lab/{p}"), mode, text));

    add(format!("dnsmasq/{}-dns.conf", c.name), 0o644, dns::dnsmasq(&r));
    add(format!("dnsmasq/{}-dhcp.conf", c.name), 0o644, dhcp::dnsmasq_dhcp(c, &ipxe_url));
    add(format!("bind/db.{d}"), 0o644, dns::forward_zone(&r));
    let mut reverse_names = Vec::new();
    for net in &c.machine_networks {
        if let (IpAddr::V4(a), p) = (net.network(), net.prefix_len()) {
            let zone = dns::reverse_zone_name(a, p);
            add(format!("bind/db.{zone}"), 0o644, dns::reverse_zone(&r, &zone));
            reverse_names.push(zone);
        }
    }
    if let Some(rev) = reverse_names.first() {
        add("bind/named.conf.hardshift".into(), 0o644, dns::named_conf(&d, rev));
    }
    add("dhcpd/dhcpd.conf".into(), 0o644, dhcp::dhcpd_conf(c, &ipxe_url));
    for n in &c.nodes {
        add(format!("pxe/{}", pxe::pxelinux_name(n)), 0o644, pxe::pxelinux(c, n, &dev(n)));
    }
    add("pxe/boot.ipxe".into(), 0o644, pxe::ipxe(c, &dev));
    add("haproxy/haproxy.cfg".into(), 0o644, haproxy::config(c, true));
    add("haproxy/haproxy-post-pivot.cfg".into(), 0o644, haproxy::config(c, false));
    add(format!("libvirt/{}-network.xml", c.name), 0o644, libvirt::network_xml(c));
    add("scripts/helper-network.sh".into(), 0o755, host_network::script(c));
    add("scripts/virt-install.sh".into(), 0o755, libvirt::virt_install(c));
    add(
        "scripts/coreos-installer.sh".into(),
        0o755,
        libvirt::coreos_installer(c, &sha256, &dev),
    );
    add("README.md".into(), 0o644, readme::text(c, &reverse_names));
    out
}
