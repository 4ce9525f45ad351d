//! The installer's rules for install-config, the agent installer's for agent-config, and the
//! cross-file rules of a lab (unique MACs/IPs, nodes inside the machine network, replicas).

use super::agent_config::{AgentConfig, Host};
use super::diag::{Diagnostic, Reporter};
use super::hardshift_config::HardshiftConfig;
use super::install_config::InstallConfig;
use super::rules;
use super::yaml::Doc;
use super::{Overrides, AGENT_CONFIG, HARDSHIFT_CONFIG, INSTALL_CONFIG};
use crate::cluster::*;
use ipnet::IpNet;
use std::collections::HashMap;
use std::net::IpAddr;

/// OVN-Kubernetes keeps these for itself (join and transit-switch subnets).
const OVN_RESERVED: &[&str] = &["100.64.0.0/16", "100.88.0.0/16"];

pub(super) fn validate(
    (ic_doc, ic): &(Doc, InstallConfig),
    (ac_doc, ac): &(Doc, AgentConfig),
    (hs_doc, hs): &(Doc, HardshiftConfig),
    overrides: &Overrides,
    out: &mut Vec<Diagnostic>,
) -> Option<Cluster> {
    let mut ir = Reporter {
        file: INSTALL_CONFIG,
        doc: ic_doc,
        out,
    };
    let nets = install_config(ic, &mut ir);
    let mut hr = Reporter {
        file: HARDSHIFT_CONFIG,
        doc: hs_doc,
        out: ir.out,
    };
    let settings = hardshift(hs, ic, &nets, overrides, &mut hr);
    let mut ar = Reporter {
        file: AGENT_CONFIG,
        doc: ac_doc,
        out: hr.out,
    };
    let nodes = agent_config(ac, ic, &nets, &settings, &mut ar);
    let out = ar.out;
    if !out.is_empty() {
        return None;
    }

    let mut raw = ic_doc.value.clone();
    if let Some(m) = raw.as_object_mut() {
        m.remove("pullSecret");
    }
    let mirrors = if ic.image_digest_sources.is_empty() {
        &ic.image_content_sources
    } else {
        &ic.image_digest_sources
    };
    Some(Cluster {
        name: ic.metadata.name.clone(),
        base_domain: ic.base_domain.clone(),
        network_type: ic.networking.network_type.clone().unwrap_or_else(|| "OVNKubernetes".into()),
        machine_networks: nets.machine,
        cluster_networks: nets.cluster,
        service_networks: nets.service,
        api_vip: settings.api_vip?,
        ingress_vip: settings.ingress_vip?,
        helper_ip: settings.helper_ip?,
        collector_address: settings.collector_address,
        collector_port: settings.collector_port,
        collector_extra_sans: hs.collector.extra_sans.clone(),
        nodes,
        pull_secret: ic.pull_secret.clone(),
        ssh_keys: ic
            .ssh_key
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect(),
        additional_trust_bundle: ic.additional_trust_bundle.clone(),
        mirrors: mirrors
            .iter()
            .map(|m| Mirror {
                source: m.source.clone(),
                mirrors: m.mirrors.clone(),
            })
            .collect(),
        proxy: ic.proxy.clone(),
        fips: ic.fips,
        pki: settings.pki,
        lab: LabSettings {
            install_device: hs.lab.install_device.clone().unwrap_or_else(|| "/dev/vda".into()),
            vcpus: hs.lab.vcpus.unwrap_or(4),
            memory_mib: hs.lab.memory_mib.unwrap_or(16384),
            disk_gib: hs.lab.disk_gib.unwrap_or(100),
            http_base_url: hs
                .lab
                .http_base_url
                .clone()
                .unwrap_or_else(|| format!("http://{}:8080", settings.helper_ip_text)),
        },
        install_config: raw,
        release: crate::release::Release {
            image: String::new(),
            version: None,
            tags: Default::default(),
        },
    })
}

#[derive(Default)]
struct Networks {
    machine: Vec<IpNet>,
    cluster: Vec<ClusterNetwork>,
    service: Vec<IpNet>,
}

fn install_config(ic: &InstallConfig, r: &mut Reporter) -> Networks {
    if ic.api_version != "v1" {
        r.error(
            "apiVersion",
            format!("install-config version must be \"v1\", found {:?}", ic.api_version),
            Some("set `apiVersion: v1`".into()),
        );
    }
    if ic.base_domain.is_empty() {
        r.error(
            "baseDomain",
            "baseDomain is required",
            Some("e.g. `baseDomain: example.com`".into()),
        );
    } else if let Err(e) = rules::dns1123_subdomain(&ic.base_domain) {
        r.error("baseDomain", format!("{:?} is not a valid domain: {e}", ic.base_domain), None);
    }
    let name = &ic.metadata.name;
    if name.is_empty() {
        r.error(
            "metadata.name",
            "the cluster name is required",
            Some("e.g. `metadata: {name: ocp4}`".into()),
        );
    } else if name.len() > 54 {
        r.error(
            "metadata.name",
            format!("cluster name must be at most 54 characters, is {}", name.len()),
            None,
        );
    } else if let Err(e) = rules::dns1123_label(name) {
        r.error("metadata.name", format!("{name:?} is not a valid DNS-1123 label: {e}"), None);
    }

    let nets = networks(ic, r);
    platform(ic, r);
    replicas(ic, r);

    if ic.pull_secret.trim().is_empty() {
        r.error(
            "pullSecret",
            "pullSecret is required",
            Some("paste the pull secret JSON, or `{\"auths\":{}}` for a mirror without auth".into()),
        );
    } else if let Err(e) = rules::pull_secret(&ic.pull_secret) {
        // Never echo the secret itself.
        r.error(
            "pullSecret",
            format!("invalid pull secret: {e}"),
            Some("it must be JSON like {\"auths\":{\"registry:5000\":{\"auth\":\"...\"}}}".into()),
        );
    }
    for (i, line) in ic.ssh_key.lines().map(str::trim).filter(|l| !l.is_empty()).enumerate() {
        if let Err(e) = rules::ssh_public_key(line) {
            r.error("sshKey", format!("ssh key {} does not parse: {e}", i + 1), None);
        }
    }
    if !ic.additional_trust_bundle.trim().is_empty() {
        if let Err(e) = rules::pem_certificates(&ic.additional_trust_bundle) {
            r.error("additionalTrustBundle", format!("additionalTrustBundle {e}"), None);
        }
    }
    let (key, sources) = if ic.image_digest_sources.is_empty() {
        ("imageContentSources", &ic.image_content_sources)
    } else {
        ("imageDigestSources", &ic.image_digest_sources)
    };
    if !ic.image_digest_sources.is_empty() && !ic.image_content_sources.is_empty() {
        r.error(
            "imageContentSources",
            "cannot set both imageContentSources and imageDigestSources",
            Some("keep imageDigestSources (imageContentSources is deprecated)".into()),
        );
    }
    for (i, s) in sources.iter().enumerate() {
        if s.source.trim().is_empty() {
            r.error(&format!("{key}[{i}].source"), "source is required", None);
        }
        if s.mirrors.is_empty() {
            r.error(&format!("{key}[{i}].mirrors"), "at least one mirror is required", None);
        }
    }
    if let Some(p) = &ic.proxy {
        for (field, v) in [("httpProxy", &p.http_proxy), ("httpsProxy", &p.https_proxy)] {
            if !v.is_empty() {
                if let Err(e) = rules::proxy_url(v) {
                    r.error(&format!("proxy.{field}"), e, None);
                }
            }
        }
    }
    nets
}

fn networks(ic: &InstallConfig, r: &mut Reporter) -> Networks {
    let n = &ic.networking;
    let mut nets = Networks::default();
    let network_type = n.network_type.as_deref().unwrap_or("OVNKubernetes");
    if !matches!(network_type, "OVNKubernetes" | "OpenShiftSDN") {
        r.error(
            "networking.networkType",
            format!("unsupported networkType {network_type:?}"),
            Some("use OVNKubernetes".into()),
        );
    }
    if n.machine_network.is_empty() {
        r.error(
            "networking.machineNetwork",
            "at least one machineNetwork is required",
            Some("e.g. `machineNetwork: [{cidr: 192.168.126.0/24}]`".into()),
        );
    }
    // (path, net) of every parsed CIDR, for the overlap checks.
    let mut all: Vec<(String, IpNet)> = Vec::new();
    for (i, m) in n.machine_network.iter().enumerate() {
        let path = format!("networking.machineNetwork[{i}].cidr");
        match rules::cidr(&m.cidr) {
            Ok(net) => {
                nets.machine.push(net);
                all.push((path, net));
            }
            Err(e) => r.error(&path, e, None),
        }
    }
    if n.cluster_network.is_empty() {
        r.error(
            "networking.clusterNetwork",
            "at least one clusterNetwork is required",
            Some("e.g. `clusterNetwork: [{cidr: 10.128.0.0/14, hostPrefix: 23}]`".into()),
        );
    }
    for (i, c) in n.cluster_network.iter().enumerate() {
        let path = format!("networking.clusterNetwork[{i}]");
        let net = match rules::cidr(&c.cidr) {
            Ok(net) => net,
            Err(e) => {
                r.error(&format!("{path}.cidr"), e, None);
                continue;
            }
        };
        all.push((format!("{path}.cidr"), net));
        let max = if net.addr().is_ipv4() { 30 } else { 128 };
        match c.host_prefix {
            None => r.error(
                &format!("{path}.hostPrefix"),
                "hostPrefix is required",
                Some("e.g. `hostPrefix: 23` (a /23 per node)".into()),
            ),
            Some(hp) if hp < i64::from(net.prefix_len()) || hp > max => r.error(
                &format!("{path}.hostPrefix"),
                format!(
                    "cluster network host subnetwork prefix {hp} must be between the CIDR's /{} and {max}",
                    net.prefix_len()
                ),
                None,
            ),
            Some(hp) => nets.cluster.push(ClusterNetwork {
                cidr: net,
                host_prefix: hp as u8,
            }),
        }
    }
    match n.service_network.len() {
        0 => r.error(
            "networking.serviceNetwork",
            "a serviceNetwork is required",
            Some("e.g. `serviceNetwork: [172.30.0.0/16]`".into()),
        ),
        1 => {}
        _ => r.error(
            "networking.serviceNetwork",
            "only one serviceNetwork is supported for a single-stack cluster",
            None,
        ),
    }
    for (i, s) in n.service_network.iter().enumerate() {
        let path = format!("networking.serviceNetwork[{i}]");
        match rules::cidr(s) {
            Ok(net) => {
                let (min, max) = if net.addr().is_ipv4() { (12, 28) } else { (108, 124) };
                if net.prefix_len() < min {
                    r.error(
                        &path,
                        format!("service network {net} is too large: kube-apiserver accepts at most a /{min}"),
                        None,
                    );
                } else if net.prefix_len() > max {
                    r.error(
                        &path,
                        format!("service network {net} is too small: at least a /{max} is needed"),
                        None,
                    );
                }
                nets.service.push(net);
                all.push((path, net));
            }
            Err(e) => r.error(&path, e, None),
        }
    }
    for (i, (pa, a)) in all.iter().enumerate() {
        for (pb, b) in &all[i + 1..] {
            if rules::overlaps(a, b) {
                r.error(
                    pb,
                    format!("invalid network: {b} overlaps with {a} ({pa})"),
                    Some("machine, cluster and service networks must be disjoint".into()),
                );
            }
        }
        if network_type == "OVNKubernetes" {
            for reserved in OVN_RESERVED {
                let res: IpNet = reserved.parse().expect("constant");
                if rules::overlaps(a, &res) {
                    r.error(
                        pa,
                        format!("{a} overlaps with {res}, which OVNKubernetes reserves for itself"),
                        None,
                    );
                }
            }
        }
    }
    nets
}

fn platform(ic: &InstallConfig, r: &mut Reporter) {
    let keys: Vec<&String> = ic.platform.keys().collect();
    match keys.as_slice() {
        [] => r.error("platform", "a platform is required", Some("set `platform: {none: {}}`".into())),
        [one] if one.as_str() == "none" || one.as_str() == "baremetal" => {}
        [one] => r.error(
            &format!("platform.{one}"),
            format!("platform {one:?} is not user-provisioned bare metal"),
            Some("hardshift builds platform `none` clusters: set `platform: {none: {}}`".into()),
        ),
        _ => r.error(
            "platform",
            format!(
                "must specify exactly one platform, found {}",
                keys.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
            ),
            None,
        ),
    }
}

fn replicas(ic: &InstallConfig, r: &mut Reporter) {
    match &ic.control_plane {
        None => r.error(
            "controlPlane",
            "controlPlane is required",
            Some("e.g. `controlPlane: {name: master, replicas: 3}`".into()),
        ),
        Some(cp) => {
            if cp.name != "master" {
                r.error(
                    "controlPlane.name",
                    format!("the control plane pool must be named \"master\", found {:?}", cp.name),
                    None,
                );
            }
            match cp.replicas {
                Some(1 | 3 | 4 | 5) => {}
                Some(n) => r.error(
                    "controlPlane.replicas",
                    format!("control plane replicas must be 1, 3, 4 or 5, found {n}"),
                    None,
                ),
                None => r.error("controlPlane.replicas", "replicas is required", None),
            }
        }
    }
    for (i, pool) in ic.compute.iter().enumerate() {
        if pool.name != "worker" {
            r.error(
                &format!("compute[{i}].name"),
                format!("compute pools must be named \"worker\", found {:?}", pool.name),
                None,
            );
        }
        if let Some(n) = pool.replicas {
            if n < 0 {
                r.error(
                    &format!("compute[{i}].replicas"),
                    format!("replicas must not be negative, found {n}"),
                    None,
                );
            }
        }
    }
    if ic.compute.len() > 1 {
        r.error("compute", "only one compute pool (worker) is supported", None);
    }
}

struct Settings {
    api_vip: Option<IpAddr>,
    ingress_vip: Option<IpAddr>,
    helper_ip: Option<IpAddr>,
    helper_ip_text: String,
    collector_address: String,
    collector_port: u16,
    pki: PkiSettings,
}

fn hardshift(hs: &HardshiftConfig, ic: &InstallConfig, nets: &Networks, ov: &Overrides, r: &mut Reporter) -> Settings {
    let in_machine = |ip: &IpAddr| nets.machine.iter().any(|n| n.contains(ip));
    let mut addr = |path: &str, text: &Option<String>, must_be_in_machine: bool| -> Option<Option<IpAddr>> {
        let t = text.as_ref()?;
        match t.parse::<IpAddr>() {
            Ok(ip) if must_be_in_machine && !nets.machine.is_empty() && !in_machine(&ip) => {
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
    };
    // baremetal platform VIPs are a fallback for users who already wrote them there.
    let bm = ic.platform.get("baremetal");
    let bm_vip = |k: &str| {
        bm.and_then(|b| b.get(k))
            .and_then(|v| v.get(0))
            .and_then(|v| v.as_str())
            .map(String::from)
    };
    let helper = nets.machine.first().map(|n| crate::cluster::nth_host(n, 1));
    let helper_ip = addr("helper.ip", &hs.helper.ip, true).unwrap_or(helper);
    let api_vip = addr(
        "loadBalancer.apiVIP",
        &hs.load_balancer.api_vip.clone().or_else(|| bm_vip("apiVIPs")),
        true,
    )
    .unwrap_or(helper_ip);
    let ingress_vip = addr(
        "loadBalancer.ingressVIP",
        &hs.load_balancer.ingress_vip.clone().or_else(|| bm_vip("ingressVIPs")),
        true,
    )
    .unwrap_or(helper_ip);

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
    for (field, v) in [
        ("lab.vcpus", hs.lab.vcpus),
        ("lab.memoryMiB", hs.lab.memory_mib),
        ("lab.diskGiB", hs.lab.disk_gib),
    ] {
        if v == Some(0) {
            r.error(field, "must be greater than 0", None);
        }
    }
    Settings {
        api_vip,
        ingress_vip,
        helper_ip,
        helper_ip_text: helper_ip.map(|i| i.to_string()).unwrap_or_default(),
        collector_address,
        collector_port: hs.collector.port.unwrap_or(9443),
        pki: PkiSettings {
            key_algorithm,
            ca_validity_days: ca_days,
            leaf_validity_days: leaf_days,
        },
    }
}

fn join(nets: &[IpNet]) -> String {
    nets.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
}

fn agent_config(ac: &AgentConfig, ic: &InstallConfig, nets: &Networks, s: &Settings, r: &mut Reporter) -> Vec<Node> {
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
    let mut nodes = Vec::new();
    let mut seen_name: HashMap<String, usize> = HashMap::new();
    let mut seen_mac: HashMap<String, String> = HashMap::new();
    let mut seen_ip: HashMap<IpAddr, usize> = HashMap::new();
    for (i, h) in ac.hosts.iter().enumerate() {
        let p = format!("hosts[{i}]");
        // Uniqueness is checked on the raw hosts, so it is reported even when a host has other errors.
        if !h.hostname.is_empty() {
            if let Some(prev) = seen_name.insert(h.hostname.clone(), i) {
                r.error(
                    &format!("{p}.hostname"),
                    format!("hostname {:?} is already used by hosts[{prev}]", h.hostname),
                    None,
                );
            }
        }
        for (j, iface) in h.interfaces.iter().enumerate() {
            let mac = iface.mac_address.to_ascii_lowercase();
            let here = format!("{p}.interfaces[{j}].macAddress");
            if mac.is_empty() {
                continue;
            }
            if let Some(prev) = seen_mac.insert(mac.clone(), here.clone()) {
                r.error(
                    &here,
                    format!("MAC {mac} is already used by {prev}"),
                    Some("every interface needs its own MAC".into()),
                );
            }
        }
        if let Some(node) = host(h, &p, nets, s, r) {
            if let Some(prev) = seen_ip.insert(node.ip, i) {
                r.error(
                    &format!("{p}.networkConfig"),
                    format!("IP {} is already used by hosts[{prev}]", node.ip),
                    None,
                );
            }
            nodes.push(node);
        }
    }

    let count = |role| nodes.iter().filter(|n| n.role == role).count();
    let bootstraps = count(Role::Bootstrap);
    if !ac.hosts.is_empty() && bootstraps != 1 && nodes.len() == ac.hosts.len() {
        r.error(
            "hosts",
            format!("exactly one host must have `role: bootstrap`, found {bootstraps}"),
            Some("add the bootstrap host (a hardshift extension to agent-config) or remove the extra ones".into()),
        );
    }
    let cp = ic.control_plane.as_ref().and_then(|c| c.replicas);
    if let Some(cp) = cp {
        let masters = count(Role::Master);
        if masters as i64 != cp && nodes.len() == ac.hosts.len() {
            r.error(
                "hosts",
                format!("{masters} hosts have `role: master` but install-config controlPlane.replicas is {cp}"),
                None,
            );
        }
    }
    let want_workers = ic.compute.first().and_then(|c| c.replicas).unwrap_or(0);
    let workers = count(Role::Worker);
    if workers as i64 != want_workers && nodes.len() == ac.hosts.len() {
        r.error(
            "hosts",
            format!("{workers} hosts have `role: worker` but install-config compute[0].replicas is {want_workers}"),
            None,
        );
    }
    if let Some(rv) = &ac.rendezvous_ip {
        match rv.parse::<IpAddr>() {
            Ok(ip) if !nodes.iter().any(|n| n.ip == ip && n.role != Role::Worker) => r.error(
                "rendezvousIP",
                format!("rendezvousIP {ip} is not the address of a master or the bootstrap host"),
                None,
            ),
            Ok(_) => {}
            Err(_) => r.error("rendezvousIP", format!("{rv:?} is not an IP address"), None),
        }
    }
    // Bootstrap first, then masters, then workers; agent-config order within a role.
    let mut counters: HashMap<Role, usize> = HashMap::new();
    for n in nodes.iter_mut() {
        let c = counters.entry(n.role).or_insert(0);
        n.index = *c;
        *c += 1;
    }
    nodes.sort_by_key(|n| (n.role, n.index));
    nodes
}

fn host(h: &Host, p: &str, nets: &Networks, s: &Settings, r: &mut Reporter) -> Option<Node> {
    let before = r.out.len();
    if h.hostname.is_empty() {
        r.error(&format!("{p}.hostname"), "hostname is required", None);
    } else if let Err(e) = rules::dns1123_subdomain(&h.hostname) {
        r.error(
            &format!("{p}.hostname"),
            format!("{:?} is not a valid hostname: {e}", h.hostname),
            None,
        );
    }
    let role = match h.role.as_str() {
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
    };
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

    // The static IPv4 setup: the one nmstate interface with an address.
    let nc = &h.network_config;
    let with_addr: Vec<(usize, &super::agent_config::NmInterface)> = nc
        .interfaces
        .iter()
        .enumerate()
        .filter(|(_, i)| i.ipv4.as_ref().is_some_and(|v| v.enabled && !v.address.is_empty()))
        .collect();
    let ncp = format!("{p}.networkConfig");
    let (iface_idx, nm) = match with_addr.as_slice() {
        [] => {
            r.error(
                &format!("{ncp}.interfaces"),
                "no interface with a static IPv4 address",
                Some("add `ipv4: {enabled: true, dhcp: false, address: [{ip: ..., prefix-length: 24}]}` to the interface".into()),
            );
            return None;
        }
        [one] => *one,
        _ => {
            r.error(
                &format!("{ncp}.interfaces"),
                "more than one interface has a static IPv4 address; hardshift needs exactly one node IP",
                None,
            );
            return None;
        }
    };
    let ip_path = format!("{ncp}.interfaces[{iface_idx}].ipv4.address[0].ip");
    let v4 = nm.ipv4.as_ref()?;
    if v4.dhcp {
        r.error(
            &format!("{ncp}.interfaces[{iface_idx}].ipv4.dhcp"),
            "dhcp must be false when a static address is given",
            None,
        );
    }
    // The agent installer maps nmstate interfaces to hardware by name through `interfaces`.
    let listed = h
        .interfaces
        .iter()
        .find(|i| i.name == nm.name)
        .map(|i| i.mac_address.to_ascii_lowercase());
    let nm_path = format!("{ncp}.interfaces[{iface_idx}]");
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
    let mac = listed;
    let addr = &v4.address[0];
    let ip: Option<IpAddr> = match addr.ip.parse::<IpAddr>() {
        Ok(ip) => Some(ip),
        Err(_) => {
            r.error(&ip_path, format!("{:?} is not an IP address", addr.ip), None);
            None
        }
    };
    if let Some(ip) = ip {
        let net = nets.machine.iter().find(|n| n.contains(&ip));
        match net {
            None if !nets.machine.is_empty() => r.error(
                &ip_path,
                format!("{ip} is not inside a machine network ({})", join(&nets.machine)),
                Some("fix the address or add its network to install-config networking.machineNetwork".into()),
            ),
            Some(n) if n.prefix_len() != addr.prefix_length => r.error(
                &format!("{ncp}.interfaces[{iface_idx}].ipv4.address[0].prefix-length"),
                format!("prefix-length {} differs from the machine network {n}", addr.prefix_length),
                None,
            ),
            _ => {}
        }
        for (what, vip) in [("API VIP", s.api_vip), ("ingress VIP", s.ingress_vip), ("helper", s.helper_ip)] {
            if vip == Some(ip) {
                r.error(
                    &ip_path,
                    format!("{ip} is the {what}; a node needs its own address"),
                    Some("set loadBalancer/helper in hardshift.yaml or pick another node IP".into()),
                );
            }
        }
    }
    let mut gateway = None;
    if let Some(routes) = &nc.routes {
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
        let subnet = IpNet::new(ip, addr.prefix_length).map(|n| n.trunc()).ok();
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
    let mut dns = Vec::new();
    if let Some(cfg) = nc.dns_resolver.as_ref().and_then(|d| d.config.as_ref()) {
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
    if r.out.len() != before {
        return None;
    }
    Some(Node {
        hostname: h.hostname.clone(),
        role: role?,
        index: 0,
        interface: nm.name.clone(),
        mac: mac?,
        ip: ip?,
        prefix: addr.prefix_length,
        gateway,
        dns,
        root_device: h
            .root_device_hints
            .as_ref()
            .and_then(|r| r.get("deviceName"))
            .and_then(|v| v.as_str())
            .map(String::from),
    })
}
