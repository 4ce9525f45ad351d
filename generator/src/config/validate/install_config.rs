//! install-config.yaml: its version, platform, replicas and networks (each valid, none
//! overlapping another, none inside OVN-Kubernetes' own subnets).

use super::Networks;
use crate::cluster::*;
use crate::config::diag::Reporter;
use crate::config::install_config::InstallConfig;
use crate::config::rules;
use ipnet::IpNet;

const OVN_RESERVED: &[&str] = &["100.64.0.0/16", "100.88.0.0/16"];

pub(super) fn install_config(ic: &InstallConfig, r: &mut Reporter) -> Networks {
    version_and_names(ic, r);
    let nets = networks(ic, r);
    platform(ic, r);
    replicas(ic, r);
    bootstrap_in_place(ic, r);
    secrets_and_trust(ic, r);
    mirrors(ic, r);
    proxy(ic, r);
    nets
}

/// apiVersion, baseDomain and the cluster's name (a DNS label: it prefixes every name of the cluster).
fn version_and_names(ic: &InstallConfig, r: &mut Reporter) {
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
}

/// The pull secret, the SSH keys and the extra CAs: each must parse, and none is ever echoed.
fn secrets_and_trust(ic: &InstallConfig, r: &mut Reporter) {
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
}

/// imageDigestSources or the deprecated imageContentSources (never both): each a source and its mirrors.
fn mirrors(ic: &InstallConfig, r: &mut Reporter) {
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
}

fn proxy(ic: &InstallConfig, r: &mut Reporter) {
    if let Some(p) = &ic.proxy {
        for (field, v) in [("httpProxy", &p.http_proxy), ("httpsProxy", &p.https_proxy)] {
            if !v.is_empty() {
                if let Err(e) = rules::proxy_url(v) {
                    r.error(&format!("proxy.{field}"), e, None);
                }
            }
        }
    }
}

/// (path, net) of every parsed CIDR, for the overlap checks.
type Parsed = Vec<(String, IpNet)>;

fn networks(ic: &InstallConfig, r: &mut Reporter) -> Networks {
    let n = &ic.networking;
    let network_type = n.network_type.as_deref().unwrap_or("OVNKubernetes");
    if !matches!(network_type, "OVNKubernetes" | "OpenShiftSDN") {
        r.error(
            "networking.networkType",
            format!("unsupported networkType {network_type:?}"),
            Some("use OVNKubernetes".into()),
        );
    }
    let mut all = Parsed::new();
    let nets = Networks {
        machine: machine_networks(ic, &mut all, r),
        cluster: cluster_networks(ic, &mut all, r),
        service: service_networks(ic, &mut all, r),
    };
    disjoint(&all, network_type == "OVNKubernetes", r);
    nets
}

fn machine_networks(ic: &InstallConfig, all: &mut Parsed, r: &mut Reporter) -> Vec<IpNet> {
    let n = &ic.networking;
    if n.machine_network.is_empty() {
        r.error(
            "networking.machineNetwork",
            "at least one machineNetwork is required",
            Some("e.g. `machineNetwork: [{cidr: 192.168.126.0/24}]`".into()),
        );
    }
    let mut machine = Vec::new();
    for (i, m) in n.machine_network.iter().enumerate() {
        let path = format!("networking.machineNetwork[{i}].cidr");
        match rules::cidr(&m.cidr) {
            Ok(net) => {
                machine.push(net);
                all.push((path, net));
            }
            Err(e) => r.error(&path, e, None),
        }
    }
    machine
}

/// Each cluster network with its hostPrefix (the subnet each node gets out of it).
fn cluster_networks(ic: &InstallConfig, all: &mut Parsed, r: &mut Reporter) -> Vec<ClusterNetwork> {
    let n = &ic.networking;
    if n.cluster_network.is_empty() {
        r.error(
            "networking.clusterNetwork",
            "at least one clusterNetwork is required",
            Some("e.g. `clusterNetwork: [{cidr: 10.128.0.0/14, hostPrefix: 23}]`".into()),
        );
    }
    let mut cluster = Vec::new();
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
            Some(hp) => cluster.push(ClusterNetwork {
                cidr: net,
                host_prefix: hp as u8,
            }),
        }
    }
    cluster
}

/// The one service network, sized for what kube-apiserver accepts.
fn service_networks(ic: &InstallConfig, all: &mut Parsed, r: &mut Reporter) -> Vec<IpNet> {
    let n = &ic.networking;
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
    let mut service = Vec::new();
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
                service.push(net);
                all.push((path, net));
            }
            Err(e) => r.error(&path, e, None),
        }
    }
    service
}

/// No network overlaps another, nor (with OVN-Kubernetes) the subnets OVN keeps for itself.
fn disjoint(all: &Parsed, ovn: bool, r: &mut Reporter) {
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
        if ovn {
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

/// Single-node OpenShift (bootstrapInPlace) as the installer's bootstrap-in-place asset checks it
/// (one control-plane replica), and what it leaves to chance: no workers (with any, the
/// infrastructure is HighlyAvailable and the masters unschedulable), and a disk that is one device
/// path (the installer pastes it into a shell line). An empty disk is allowed here: agent-config's
/// rootDeviceHints may name it (judged with the hosts).
fn bootstrap_in_place(ic: &InstallConfig, r: &mut Reporter) {
    let Some(bip) = &ic.bootstrap_in_place else { return };
    if let Some(n) = ic.control_plane.as_ref().and_then(|c| c.replicas).filter(|n| *n != 1) {
        r.error(
            "controlPlane.replicas",
            format!("bootstrapInPlace (single-node OpenShift) requires a single control-plane replica, found {n}"),
            Some("set `controlPlane.replicas: 1`, or remove `bootstrapInPlace` for a cluster with a bootstrap host".into()),
        );
    }
    for (i, pool) in ic.compute.iter().enumerate() {
        if let Some(n) = pool.replicas.filter(|n| *n > 0) {
            r.error(
                &format!("compute[{i}].replicas"),
                format!("a single-node cluster (bootstrapInPlace) has no workers, found replicas {n}"),
                Some("set `replicas: 0`; workers join a single node later, as day-2 nodes".into()),
            );
        }
    }
    if !bip.installation_disk.is_empty() {
        if let Err(e) = rules::device_path(&bip.installation_disk) {
            r.error(
                "bootstrapInPlace.installationDisk",
                e,
                Some("name the whole disk the node installs to, preferably by a stable name under /dev/disk/by-id/".into()),
            );
        }
    }
}
