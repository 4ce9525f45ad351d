//! hardshift.yaml: the load balancer and helper addresses, the collector, the PKI settings.

use super::{join, Networks, Settings};
use crate::cluster::*;
use crate::config::diag::Reporter;
use crate::config::hardshift_config::HardshiftConfig;
use crate::config::install_config::InstallConfig;
use crate::config::rules;
use crate::config::Overrides;
use std::net::IpAddr;

/// `hosts`: agent-config's hostnames (the lab's DNS answers each node's own name).
pub(super) fn hardshift(
    hs: &HardshiftConfig,
    ic: &InstallConfig,
    hosts: &[&str],
    nets: &Networks,
    ov: &Overrides,
    r: &mut Reporter,
) -> Settings {
    let (helper_ip, api_vip, ingress_vip) = addresses(hs, ic, nets, r);
    let collector_address = collector(hs, helper_ip, r);
    let pki = pki(hs, ov, r);
    lab(hs, r);
    let dns_records = dns_records(hs, ic, hosts, nets, r);
    let bm = |k: &str| ic.platform.get("baremetal").and_then(|b| b.get(k)).is_some();
    Settings {
        dns_records,
        api_vip,
        ingress_vip,
        api_vip_given: hs.load_balancer.api_vip.is_some() || bm("apiVIPs"),
        ingress_vip_given: hs.load_balancer.ingress_vip.is_some() || bm("ingressVIPs"),
        helper_ip,
        helper_ip_text: helper_ip.map(|i| i.to_string()).unwrap_or_default(),
        collector_address,
        collector_port: hs.collector.port.unwrap_or(9443),
        pki,
    }
}

/// The helper's address and the two VIPs, each inside a machine network; unset, each falls back
/// (VIPs to the baremetal platform's, then to the helper; the helper to the network's first host).
fn addresses(
    hs: &HardshiftConfig,
    ic: &InstallConfig,
    nets: &Networks,
    r: &mut Reporter,
) -> (Option<IpAddr>, Option<IpAddr>, Option<IpAddr>) {
    // baremetal platform VIPs are a fallback for users who already wrote them there.
    let bm = ic.platform.get("baremetal");
    let bm_vip = |k: &str| {
        bm.and_then(|b| b.get(k))
            .and_then(|v| v.get(0))
            .and_then(|v| v.as_str())
            .map(String::from)
    };
    let helper = nets.machine.first().map(|n| crate::cluster::nth_host(n, 1));
    let helper_ip = machine_address("helper.ip", &hs.helper.ip, nets, r).unwrap_or(helper);
    let api_vip = machine_address(
        "loadBalancer.apiVIP",
        &hs.load_balancer.api_vip.clone().or_else(|| bm_vip("apiVIPs")),
        nets,
        r,
    )
    .unwrap_or(helper_ip);
    let ingress_vip = machine_address(
        "loadBalancer.ingressVIP",
        &hs.load_balancer.ingress_vip.clone().or_else(|| bm_vip("ingressVIPs")),
        nets,
        r,
    )
    .unwrap_or(helper_ip);
    (helper_ip, api_vip, ingress_vip)
}

/// None when `text` is unset; Some(None) when it is set but wrong (reported).
fn machine_address(path: &str, text: &Option<String>, nets: &Networks, r: &mut Reporter) -> Option<Option<IpAddr>> {
    let t = text.as_ref()?;
    match t.parse::<IpAddr>() {
        Ok(ip) if !nets.machine.is_empty() && !nets.machine.iter().any(|n| n.contains(&ip)) => {
            r.error(
                path,
                format!("{ip} is not inside a machine network ({})", join(&nets.machine)),
                None,
            );
            Some(None)
        }
        Ok(ip) => Some(Some(ip)),
        Err(_) => {
            r.error(path, format!("{t:?} is not an IP address"), None);
            Some(None)
        }
    }
}

/// The collector's address (the helper's by default) and its certificate's extra names.
fn collector(hs: &HardshiftConfig, helper_ip: Option<IpAddr>, r: &mut Reporter) -> String {
    let collector_address = hs
        .collector
        .address
        .clone()
        .unwrap_or_else(|| helper_ip.map(|i| i.to_string()).unwrap_or_default());
    if collector_address.parse::<IpAddr>().is_err() {
        if let Err(e) = rules::dns1123_subdomain(&collector_address) {
            r.error(
                "collector.address",
                format!("{collector_address:?} is neither an IP address nor a DNS name: {e}"),
                None,
            );
        }
    }
    for (i, san) in hs.collector.extra_sans.iter().enumerate() {
        if san.parse::<IpAddr>().is_err() && rules::dns1123_subdomain(san).is_err() {
            r.error(
                &format!("collector.extraSANs[{i}]"),
                format!("{san:?} is neither an IP address nor a DNS name"),
                None,
            );
        }
    }
    collector_address
}

/// The key algorithm (the command line's wins) and the validities, a leaf never outliving its CA.
fn pki(hs: &HardshiftConfig, ov: &Overrides, r: &mut Reporter) -> PkiSettings {
    let key_algorithm = match (ov.key_algorithm, &hs.pki.key_algorithm) {
        (Some(k), _) => k,
        (None, None) => KeyAlgorithm::Rsa2048,
        (None, Some(s)) => KeyAlgorithm::parse(s).unwrap_or_else(|| {
            r.error(
                "pki.keyAlgorithm",
                format!("unknown key algorithm {s:?}, expected {}", KeyAlgorithm::NAMES),
                None,
            );
            KeyAlgorithm::Rsa2048
        }),
    };
    let ca_days = hs.pki.ca_validity_days.unwrap_or(3650);
    let leaf_days = hs.pki.leaf_validity_days.unwrap_or(365);
    if ca_days == 0 {
        r.error("pki.caValidityDays", "must be at least 1", None);
    }
    if leaf_days == 0 || leaf_days > ca_days {
        r.error(
            "pki.leafValidityDays",
            format!("must be between 1 and the CA validity ({ca_days} days), found {leaf_days}"),
            None,
        );
    }
    PkiSettings {
        key_algorithm,
        ca_validity_days: ca_days,
        leaf_validity_days: leaf_days,
    }
}

/// The lab's VM sizes, when given, are not zero.
fn lab(hs: &HardshiftConfig, r: &mut Reporter) {
    for (field, v) in [
        ("lab.vcpus", hs.lab.vcpus),
        ("lab.memoryMiB", hs.lab.memory_mib),
        ("lab.diskGiB", hs.lab.disk_gib),
    ] {
        if v == Some(0) {
            r.error(field, "must be greater than 0", None);
        }
    }
    // Both reach kernel command lines, the lab's scripts and its servers' configs.
    if let Some(d) = &hs.lab.install_device {
        if let Err(e) = rules::device_path(d) {
            r.error(
                "lab.installDevice",
                e,
                Some("name the disk every node installs to, e.g. /dev/vda or /dev/disk/by-id/…".into()),
            );
        }
    }
    if let Some(u) = &hs.lab.install_image_url {
        if !(u.starts_with("http://") || u.starts_with("https://")) || u.chars().any(|c| c.is_whitespace() || c.is_control()) {
            r.error(
                "lab.installImageURL",
                format!("{u:?} is not an http:// or https:// URL"),
                Some("the image coreos-installer writes, e.g. http://192.168.126.1:8080/rhcos/rhcos-metal.x86_64.raw.gz".into()),
            );
        }
    }
    if hs.lab.install_image_unsigned == Some(true) && hs.lab.install_image_url.is_none() {
        r.error(
            "lab.installImageUnsigned",
            "is set, and lab.installImageURL is not",
            Some("the live system's own image needs no signature check; remove installImageUnsigned".into()),
        );
    }
    if let Some(u) = &hs.lab.http_base_url {
        if let Err(e) = rules::http_base_url(u) {
            r.error(
                "lab.httpBaseUrl",
                e,
                Some("the helper's HTTP server, e.g. http://192.168.126.1:8080".into()),
            );
        }
    }
}

/// `dns.records`: names inside the cluster's zone (the lab's DNS serves that zone alone, and a BIND
/// zone file holds only its own names), each once, none that the lab already answers (a node's own
/// name included: dnsmasq's `address=/name/` also answers every name under it), each on an address
/// a node can reach.
fn dns_records(hs: &HardshiftConfig, ic: &InstallConfig, hosts: &[&str], nets: &Networks, r: &mut Reporter) -> Vec<DnsRecord> {
    let domain = format!("{}.{}", ic.metadata.name, ic.base_domain);
    let generated = |n: &str| {
        let rel = n.strip_suffix(&format!(".{domain}")).unwrap_or(n);
        ["api", "api-int", "ns1"].contains(&rel) || rel == "apps" || rel.ends_with(".apps") || rel.starts_with("etcd-")
    };
    // Each node's name in the lab's DNS (Node::fqdn), and the host it belongs to.
    let node_names: Vec<(String, &str)> = hosts
        .iter()
        .filter(|h| !h.is_empty())
        .map(|h| {
            let l = h.to_ascii_lowercase();
            (if l.contains('.') { l } else { format!("{l}.{domain}") }, *h)
        })
        .collect();
    let mut out: Vec<DnsRecord> = Vec::new();
    for (i, rec) in hs.dns.records.iter().enumerate() {
        let name = rec.name.trim_end_matches('.').to_ascii_lowercase();
        let path = format!("dns.records[{i}]");
        if let Err(e) = rules::dns1123_subdomain(&name) {
            r.error(&format!("{path}.name"), format!("{:?} is not a DNS name: {e}", rec.name), None);
            continue;
        }
        if !name.ends_with(&format!(".{domain}")) {
            r.error(
                &format!("{path}.name"),
                format!("{name} is outside {domain}, the zone the lab's DNS serves"),
                Some(format!(
                    "name it inside {domain} (e.g. registry.{domain}), or serve it from your own DNS"
                )),
            );
            continue;
        }
        if generated(&name) {
            r.error(
                &format!("{path}.name"),
                format!("{name} is one of the records the lab's DNS already has (api, api-int, *.apps, etcd-N, ns1)"),
                None,
            );
            continue;
        }
        if let Some((fqdn, host)) = node_names.iter().find(|(f, _)| *f == name || f.ends_with(&format!(".{name}"))) {
            let what = if *fqdn == name {
                format!("{name} is the name of node {host} (agent-config.yaml): the lab's DNS already answers it with the node's address")
            } else {
                let node = if fqdn.eq_ignore_ascii_case(host) {
                    format!("node {host}")
                } else {
                    format!("node {host} ({fqdn})")
                };
                format!("{name} is above the name of {node}: dnsmasq would answer that name too, with this record's address")
            };
            r.error(
                &format!("{path}.name"),
                what,
                Some(format!("name the service apart from the nodes (e.g. registry.{domain})")),
            );
            continue;
        }
        let Ok(ip) = rec.ip.parse::<IpAddr>() else {
            r.error(&format!("{path}.ip"), format!("{:?} is not an IP address", rec.ip), None);
            continue;
        };
        if let Some(why) = not_a_host(ip, &nets.machine) {
            r.error(
                &format!("{path}.ip"),
                format!("{why}; expected the unicast address of the host that serves {name}"),
                Some("give the host's own address (the mirror registry's, say), as the nodes reach it".into()),
            );
            continue;
        }
        if out.iter().any(|o| o.name == name) {
            r.error(&format!("{path}.name"), format!("{name} is listed twice"), None);
            continue;
        }
        out.push(DnsRecord { name, ip });
    }
    out
}

/// Why `ip` is no host's address (a record pointing there reaches no server), if it is not.
fn not_a_host(ip: IpAddr, machine: &[ipnet::IpNet]) -> Option<String> {
    // An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is what it maps.
    let v = ip.to_canonical();
    if v.is_unspecified() {
        return Some(format!("{ip} is the unspecified address (\"any\"), not a host"));
    }
    if v.is_loopback() {
        return Some(format!("{ip} is a loopback address: each node would reach itself"));
    }
    if v.is_multicast() {
        return Some(format!("{ip} is a multicast address"));
    }
    let IpAddr::V4(v4) = v else { return None };
    if v4.is_broadcast() {
        return Some(format!("{ip} is the broadcast address"));
    }
    // A /31 or /32 has neither a network nor a broadcast address (RFC 3021).
    machine.iter().find_map(|n| match n {
        ipnet::IpNet::V4(n4) if n4.prefix_len() < 31 && v4 == n4.broadcast() => {
            Some(format!("{ip} is the broadcast address of the machine network {n}"))
        }
        ipnet::IpNet::V4(n4) if n4.prefix_len() < 31 && v4 == n4.network() => {
            Some(format!("{ip} is the network address of the machine network {n}"))
        }
        _ => None,
    })
}
