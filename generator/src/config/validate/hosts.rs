//! agent-config.yaml: the rendezvous IP and each host (hostname, role, interfaces, its one static
//! IPv4 address, gateway and DNS), then the cross-host rules (unique names, MACs and IPs; the
//! replica counts of install-config).

use super::{join, Networks, Settings};
use crate::cluster::*;
use crate::config::agent_config::{AgentConfig, Host, NmInterface};
use crate::config::diag::Reporter;
use crate::config::install_config::InstallConfig;
use crate::config::rules;
use ipnet::IpNet;
use std::collections::HashMap;
use std::net::IpAddr;

pub(super) fn agent_config(ac: &AgentConfig, ic: &InstallConfig, nets: &Networks, s: &Settings, r: &mut Reporter) -> Vec<Node> {
    header(ac, r);
    let mut nodes = hosts(ac, nets, s, r);
    // The cross-host rules judge the whole list: with a host missing, the counts would be wrong.
    if nodes.len() == ac.hosts.len() {
        replicas(ac, ic, &nodes, r);
    }
    rendezvous(ac, &nodes, r);
    ordered(&mut nodes);
    nodes
}

fn header(ac: &AgentConfig, r: &mut Reporter) {
    if ac.api_version != "v1beta1" && ac.api_version != "v1alpha1" {
        r.error(
            "apiVersion",
            format!("expected apiVersion \"v1beta1\", found {:?}", ac.api_version),
            None,
        );
    }
    if ac.kind != "AgentConfig" {
        r.error("kind", format!("expected kind \"AgentConfig\", found {:?}", ac.kind), None);
    }
    if ac.hosts.is_empty() {
        r.error("hosts", "no hosts: hardshift needs every node with its MAC and static IP", None);
    }
}

/// Every host checked, in order, and each name, MAC and IP used once; the valid hosts' nodes.
fn hosts(ac: &AgentConfig, nets: &Networks, s: &Settings, r: &mut Reporter) -> Vec<Node> {
    let mut nodes = Vec::new();
    let mut seen = Seen::default();
    for (i, h) in ac.hosts.iter().enumerate() {
        let p = format!("hosts[{i}]");
        // Uniqueness is checked on the raw hosts, so it is reported even when a host has other errors.
        seen.hostname(h, i, &p, r);
        seen.macs(h, &p, r);
        if let Some(node) = host(h, &p, nets, s, r) {
            seen.ip(&node, i, &p, r);
            nodes.push(node);
        }
    }
    nodes
}

/// What the hosts before this one used, and where.
#[derive(Default)]
struct Seen {
    names: HashMap<String, usize>,
    macs: HashMap<String, String>,
    ips: HashMap<IpAddr, usize>,
}

impl Seen {
    fn hostname(&mut self, h: &Host, i: usize, p: &str, r: &mut Reporter) {
        if h.hostname.is_empty() {
            return;
        }
        if let Some(prev) = self.names.insert(h.hostname.clone(), i) {
            r.error(
                &format!("{p}.hostname"),
                format!("hostname {:?} is already used by hosts[{prev}]", h.hostname),
                None,
            );
        }
    }

    fn macs(&mut self, h: &Host, p: &str, r: &mut Reporter) {
        for (j, iface) in h.interfaces.iter().enumerate() {
            let mac = iface.mac_address.to_ascii_lowercase();
            let here = format!("{p}.interfaces[{j}].macAddress");
            if mac.is_empty() {
                continue;
            }
            if let Some(prev) = self.macs.insert(mac.clone(), here.clone()) {
                r.error(
                    &here,
                    format!("MAC {mac} is already used by {prev}"),
                    Some("every interface needs its own MAC".into()),
                );
            }
        }
    }

    fn ip(&mut self, node: &Node, i: usize, p: &str, r: &mut Reporter) {
        if let Some(prev) = self.ips.insert(node.ip, i) {
            r.error(
                &format!("{p}.networkConfig"),
                format!("IP {} is already used by hosts[{prev}]", node.ip),
                None,
            );
        }
    }
}

/// One bootstrap, and as many masters and workers as install-config's replicas say.
fn replicas(ac: &AgentConfig, ic: &InstallConfig, nodes: &[Node], r: &mut Reporter) {
    let count = |role| nodes.iter().filter(|n| n.role == role).count();
    let bootstraps = count(Role::Bootstrap);
    if let Some(bip) = &ic.bootstrap_in_place {
        in_place(ac, &bip.installation_disk, r);
    } else if !ac.hosts.is_empty() && bootstraps != 1 {
        r.error(
            "hosts",
            format!("exactly one host must have `role: bootstrap`, found {bootstraps}"),
            Some("add the bootstrap host (a hardshift extension to agent-config) or remove the extra ones".into()),
        );
    }
    let cp = ic.control_plane.as_ref().and_then(|c| c.replicas);
    if let Some(cp) = cp {
        let masters = count(Role::Master);
        if masters as i64 != cp {
            r.error(
                "hosts",
                format!("{masters} hosts have `role: master` but install-config controlPlane.replicas is {cp}"),
                None,
            );
        }
    }
    let want_workers = ic.compute.first().and_then(|c| c.replicas).unwrap_or(0);
    let workers = count(Role::Worker);
    if workers as i64 != want_workers {
        r.error(
            "hosts",
            format!("{workers} hosts have `role: worker` but install-config compute[0].replicas is {want_workers}"),
            None,
        );
    }
}

/// A single node (install-config bootstrapInPlace) bootstraps itself: no bootstrap host, and its
/// installation disk named once, by install-config or by its rootDeviceHints.
fn in_place(ac: &AgentConfig, install_disk: &str, r: &mut Reporter) {
    for (i, h) in ac.hosts.iter().enumerate() {
        if h.role == "bootstrap" {
            r.error(
                &format!("hosts[{i}].role"),
                format!(
                    "{:?} is a bootstrap host, but install-config's bootstrapInPlace makes a single node that bootstraps itself",
                    h.hostname
                ),
                Some(format!(
                    "remove hosts[{i}], or remove `bootstrapInPlace` from install-config for a cluster with a bootstrap host"
                )),
            );
        }
    }
    let Some((i, h)) = ac.hosts.iter().enumerate().find(|(_, h)| h.role != "bootstrap") else {
        return;
    };
    let given = h.root_device_hints.as_ref().and_then(|r| r.get("deviceName"));
    // A deviceName that is not a device path is reported with the host (`root_device`).
    if given.is_some_and(|v| !v.is_string()) {
        return;
    }
    let hint = given.and_then(|v| v.as_str());
    let here = format!("hosts[{i}].rootDeviceHints.deviceName");
    match hint {
        Some(d) if !install_disk.is_empty() && d != install_disk => r.error(
            &here,
            format!("{d:?} is not install-config's bootstrapInPlace.installationDisk {install_disk:?}: which disk is written?"),
            Some("name the installation disk once: in install-config, or here".into()),
        ),
        Some(_) => {}
        None if install_disk.is_empty() => r.error(
            &format!("hosts[{i}]"),
            "a single node needs its installation disk: install-config's bootstrapInPlace.installationDisk is empty and this host has no rootDeviceHints.deviceName",
            Some("set `bootstrapInPlace: {installationDisk: /dev/disk/by-id/…}` in install-config (as openshift-install takes it)".into()),
        ),
        None => {}
    }
}

/// rendezvousIP, when given, is a master's or the bootstrap's address.
fn rendezvous(ac: &AgentConfig, nodes: &[Node], r: &mut Reporter) {
    let Some(rv) = &ac.rendezvous_ip else { return };
    match rv.parse::<IpAddr>() {
        // Judged only when every host is valid: a master with another error is not in
        // `nodes`, and its address would be called unknown falsely.
        Ok(ip) if nodes.len() == ac.hosts.len() && !nodes.iter().any(|n| n.ip == ip && n.role != Role::Worker) => r.error(
            "rendezvousIP",
            format!("rendezvousIP {ip} is not the address of a master or the bootstrap host"),
            None,
        ),
        Ok(_) => {}
        Err(_) => r.error("rendezvousIP", format!("{rv:?} is not an IP address"), None),
    }
}

/// Bootstrap first, then masters, then workers; agent-config order within a role, which is each
/// node's index in its role.
fn ordered(nodes: &mut [Node]) {
    let mut counters: HashMap<Role, usize> = HashMap::new();
    for n in nodes.iter_mut() {
        let c = counters.entry(n.role).or_insert(0);
        n.index = *c;
        *c += 1;
    }
    nodes.sort_by_key(|n| (n.role, n.index));
}

/// One host: each part checked on its own, every problem reported; a `Node` only when none was.
fn host(h: &Host, p: &str, nets: &Networks, s: &Settings, r: &mut Reporter) -> Option<Node> {
    let before = r.out.len();
    hostname(h, p, r);
    let role = role(h, p, r);
    interfaces(h, p, r);
    let v4 = static_ipv4(h, p, nets, s, r)?;
    let ncp = format!("{p}.networkConfig");
    let gateway = gateway(h, &ncp, v4.ip, v4.prefix, r);
    let dns = dns(h, &ncp, r);
    let root = root_device(h, p, r);
    if r.out.len() != before {
        return None;
    }
    Some(Node {
        hostname: h.hostname.clone(),
        role: role?,
        index: 0,
        interface: v4.interface,
        mac: v4.mac?,
        ip: v4.ip?,
        prefix: v4.prefix,
        gateway,
        dns,
        root_device: root.flatten(),
    })
}

/// `rootDeviceHints.deviceName`, if given: a device path (it goes into the lab's kernel command
/// lines and its coreos-installer script). None when it is wrong (reported); Some(None) unset.
fn root_device(h: &Host, p: &str, r: &mut Reporter) -> Option<Option<String>> {
    let Some(v) = h.root_device_hints.as_ref().and_then(|r| r.get("deviceName")) else {
        return Some(None);
    };
    let here = format!("{p}.rootDeviceHints.deviceName");
    let hint = Some("name the whole disk the node installs to, e.g. /dev/disk/by-id/wwn-0x… or /dev/sda".to_string());
    let Some(d) = v.as_str() else {
        r.error(&here, format!("must be a string (a device path), it is {}", kind(v)), hint);
        return None;
    };
    match rules::device_path(d) {
        Ok(()) => Some(Some(d.to_string())),
        Err(e) => {
            r.error(&here, e, hint);
            None
        }
    }
}

/// What a YAML value is, for a message.
fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "empty",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a map",
    }
}

fn hostname(h: &Host, p: &str, r: &mut Reporter) {
    if h.hostname.is_empty() {
        r.error(&format!("{p}.hostname"), "hostname is required", None);
    } else if let Err(e) = rules::dns1123_subdomain(&h.hostname) {
        r.error(
            &format!("{p}.hostname"),
            format!("{:?} is not a valid hostname: {e}", h.hostname),
            None,
        );
    } else if h.hostname == "localhost" || h.hostname.starts_with("localhost.") {
        // A node named localhost registers as localhost: every such node is the same Node, its
        // certificates name the loopback, and the CSR approver cannot tell them apart.
        r.error(
            &format!("{p}.hostname"),
            format!("{:?} names the loopback, not a node", h.hostname),
            Some("give the node its own name (master-0, worker-1, ...)".into()),
        );
    }
}

fn role(h: &Host, p: &str, r: &mut Reporter) -> Option<Role> {
    match h.role.as_str() {
        "bootstrap" => Some(Role::Bootstrap),
        "master" => Some(Role::Master),
        "worker" => Some(Role::Worker),
        "" => {
            r.error(
                &format!("{p}.role"),
                "role is required",
                Some("use master, worker or bootstrap".into()),
            );
            None
        }
        other => {
            r.error(
                &format!("{p}.role"),
                format!("role must be master, worker or bootstrap, found {other:?}"),
                None,
            );
            None
        }
    }
}

fn interfaces(h: &Host, p: &str, r: &mut Reporter) {
    if h.interfaces.is_empty() {
        r.error(
            &format!("{p}.interfaces"),
            "at least one interface with its macAddress is required",
            None,
        );
    }
    for (j, iface) in h.interfaces.iter().enumerate() {
        if iface.name.is_empty() {
            r.error(&format!("{p}.interfaces[{j}].name"), "interface name is required", None);
        }
        if iface.mac_address.is_empty() {
            r.error(&format!("{p}.interfaces[{j}].macAddress"), "macAddress is required", None);
        } else if let Err(e) = rules::unicast_mac(&iface.mac_address) {
            r.error(&format!("{p}.interfaces[{j}].macAddress"), e, None);
        }
    }
}

/// The node's one static IPv4 address, its interface and that interface's MAC.
struct StaticIpv4 {
    interface: String,
    mac: Option<String>,
    ip: Option<IpAddr>,
    prefix: u8,
}

/// The static IPv4 setup: the one nmstate interface with an address, matched to hardware by
/// name, inside a machine network and not one of the lab's own addresses.
fn static_ipv4(h: &Host, p: &str, nets: &Networks, s: &Settings, r: &mut Reporter) -> Option<StaticIpv4> {
    let ncp = format!("{p}.networkConfig");
    let (iface_idx, nm) = addressed_interface(h, &ncp, r)?;
    let nm_path = format!("{ncp}.interfaces[{iface_idx}]");
    let v4 = nm.ipv4.as_ref()?;
    if v4.dhcp {
        r.error(
            &format!("{nm_path}.ipv4.dhcp"),
            "dhcp must be false when a static address is given",
            None,
        );
    }
    let listed = listed_mac(h, nm, p, &nm_path, r);
    let addr = &v4.address[0];
    let ip_path = format!("{nm_path}.ipv4.address[0].ip");
    let ip: Option<IpAddr> = match addr.ip.parse::<IpAddr>() {
        Ok(ip) => Some(ip),
        Err(_) => {
            r.error(&ip_path, format!("{:?} is not an IP address", addr.ip), None);
            None
        }
    };
    if let Some(ip) = ip {
        in_machine_network(ip, addr.prefix_length, &nm_path, nets, r);
        not_a_subnet_edge(ip, addr.prefix_length, &ip_path, r);
        not_a_lab_address(ip, &ip_path, s, r);
    }
    Some(StaticIpv4 {
        interface: nm.name.clone(),
        mac: listed,
        ip,
        prefix: addr.prefix_length,
    })
}

/// The one nmstate interface with an enabled static IPv4 address, and its index.
fn addressed_interface<'h>(h: &'h Host, ncp: &str, r: &mut Reporter) -> Option<(usize, &'h NmInterface)> {
    let with_addr: Vec<(usize, &NmInterface)> = h
        .network_config
        .interfaces
        .iter()
        .enumerate()
        .filter(|(_, i)| i.ipv4.as_ref().is_some_and(|v| v.enabled && !v.address.is_empty()))
        .collect();
    match with_addr.as_slice() {
        [] => {
            r.error(
                &format!("{ncp}.interfaces"),
                "no interface with a static IPv4 address",
                Some("add `ipv4: {enabled: true, dhcp: false, address: [{ip: ..., prefix-length: 24}]}` to the interface".into()),
            );
            None
        }
        [one] => Some(*one),
        _ => {
            r.error(
                &format!("{ncp}.interfaces"),
                "more than one interface has a static IPv4 address; hardshift needs exactly one node IP",
                None,
            );
            None
        }
    }
}

/// The MAC `interfaces` lists for the nmstate interface (the agent installer maps nmstate
/// interfaces to hardware by name), which nmstate's own mac-address, if any, must repeat.
fn listed_mac(h: &Host, nm: &NmInterface, p: &str, nm_path: &str, r: &mut Reporter) -> Option<String> {
    let listed = h
        .interfaces
        .iter()
        .find(|i| i.name == nm.name)
        .map(|i| i.mac_address.to_ascii_lowercase());
    match (&listed, &nm.mac_address) {
        (None, _) => r.error(
            &format!("{nm_path}.name"),
            format!("interface {:?} is not listed in {p}.interfaces, so its MAC is unknown", nm.name),
            Some("every networkConfig interface must match an entry of `interfaces` by name".into()),
        ),
        (Some(l), Some(m)) if !m.eq_ignore_ascii_case(l) => r.error(
            &format!("{nm_path}.mac-address"),
            format!(
                "mac-address {m} differs from the macAddress {l} listed for {:?} in {p}.interfaces",
                nm.name
            ),
            None,
        ),
        _ => {}
    }
    listed
}

/// The address lies in a machine network, with that network's prefix length.
fn in_machine_network(ip: IpAddr, prefix: u8, nm_path: &str, nets: &Networks, r: &mut Reporter) {
    match nets.machine.iter().find(|n| n.contains(&ip)) {
        None if !nets.machine.is_empty() => r.error(
            &format!("{nm_path}.ipv4.address[0].ip"),
            format!("{ip} is not inside a machine network ({})", join(&nets.machine)),
            Some("fix the address or add its network to install-config networking.machineNetwork".into()),
        ),
        Some(n) if n.prefix_len() != prefix => r.error(
            &format!("{nm_path}.ipv4.address[0].prefix-length"),
            format!("prefix-length {prefix} differs from the machine network {n}"),
            None,
        ),
        _ => {}
    }
}

/// The subnet's own network and broadcast addresses are no host's (a /31 or /32 has none).
fn not_a_subnet_edge(ip: IpAddr, prefix: u8, ip_path: &str, r: &mut Reporter) {
    let Ok(subnet) = IpNet::new(ip, prefix).map(|n| n.trunc()) else {
        return;
    };
    let hosts_have_edges = match subnet {
        IpNet::V4(n) => n.prefix_len() < 31,
        IpNet::V6(_) => false,
    };
    if hosts_have_edges && (ip == subnet.network() || ip == subnet.broadcast()) {
        let which = if ip == subnet.network() { "network" } else { "broadcast" };
        r.error(
            ip_path,
            format!("{ip} is the {which} address of {subnet}, not a host's"),
            Some("pick an address between the network and the broadcast address".into()),
        );
    }
}

/// A node's address is not one the lab keeps for the VIPs or the helper.
fn not_a_lab_address(ip: IpAddr, ip_path: &str, s: &Settings, r: &mut Reporter) {
    for (what, vip) in [("API VIP", s.api_vip), ("ingress VIP", s.ingress_vip), ("helper", s.helper_ip)] {
        if vip == Some(ip) {
            r.error(
                ip_path,
                format!("{ip} is the {what}; a node needs its own address"),
                Some("set loadBalancer/helper in hardshift.yaml or pick another node IP".into()),
            );
        }
    }
}

/// The default route's next hop, which must be on the node's own subnet.
fn gateway(h: &Host, ncp: &str, ip: Option<IpAddr>, prefix: u8, r: &mut Reporter) -> Option<IpAddr> {
    let mut gateway = None;
    if let Some(routes) = &h.network_config.routes {
        for (k, route) in routes.config.iter().enumerate() {
            if route.destination == "0.0.0.0/0" || route.destination == "::/0" {
                match route.next_hop_address.parse::<IpAddr>() {
                    Ok(gw) => gateway = Some(gw),
                    Err(_) => r.error(
                        &format!("{ncp}.routes.config[{k}].next-hop-address"),
                        format!("{:?} is not an IP address", route.next_hop_address),
                        None,
                    ),
                }
            }
        }
    }
    if let (Some(gw), Some(ip)) = (gateway, ip) {
        let subnet = IpNet::new(ip, prefix).map(|n| n.trunc()).ok();
        if subnet.is_some_and(|n| !n.contains(&gw)) {
            r.error(
                &format!("{ncp}.routes"),
                format!(
                    "gateway {gw} is not on the node's subnet {}",
                    subnet.map(|n| n.to_string()).unwrap_or_default()
                ),
                None,
            );
        }
    }
    gateway
}

fn dns(h: &Host, ncp: &str, r: &mut Reporter) -> Vec<IpAddr> {
    let mut dns = Vec::new();
    if let Some(cfg) = h.network_config.dns_resolver.as_ref().and_then(|d| d.config.as_ref()) {
        for (k, sv) in cfg.server.iter().enumerate() {
            match sv.parse::<IpAddr>() {
                Ok(a) => dns.push(a),
                Err(_) => r.error(
                    &format!("{ncp}.dns-resolver.config.server[{k}]"),
                    format!("{sv:?} is not an IP address"),
                    None,
                ),
            }
        }
    }
    dns
}
