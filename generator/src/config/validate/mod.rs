//! The installer's rules for install-config, the agent installer's for agent-config, and the
//! cross-file rules of a lab (unique MACs/IPs, nodes inside the machine network, replicas), one
//! file per input: `install_config` (with its networks), `hardshift` (hardshift.yaml), `hosts`
//! (agent-config's hosts). Each reports into the `Reporter` of its file; `validate` builds the
//! `Cluster` only when none reported anything.

mod hardshift;
mod hosts;
mod install_config;

use super::agent_config::AgentConfig;
use super::diag::{Diagnostic, Reporter};
use super::hardshift_config::HardshiftConfig;
use super::install_config::InstallConfig;
use super::yaml::Doc;
use super::{Overrides, AGENT_CONFIG, HARDSHIFT_CONFIG, INSTALL_CONFIG};
use crate::cluster::*;
use ipnet::IpNet;
use std::net::IpAddr;

pub(super) fn validate(
    (ic_doc, ic): &(Doc, InstallConfig),
    (ac_doc, ac): &(Doc, AgentConfig),
    (hs_doc, hs): &(Doc, HardshiftConfig),
    release: Option<crate::release::Release>,
    overrides: &Overrides,
    out: &mut Vec<Diagnostic>,
) -> Option<Cluster> {
    let mut ir = Reporter {
        file: INSTALL_CONFIG,
        doc: ic_doc,
        out,
    };
    let nets = install_config::install_config(ic, &mut ir);
    fips(ic, overrides, &mut ir);
    let mut hr = Reporter {
        file: HARDSHIFT_CONFIG,
        doc: hs_doc,
        out: ir.out,
    };
    let hostnames: Vec<&str> = ac.hosts.iter().map(|h| h.hostname.as_str()).collect();
    let settings = hardshift::hardshift(hs, ic, &hostnames, &nets, overrides, &mut hr);
    let mut ar = Reporter {
        file: AGENT_CONFIG,
        doc: ac_doc,
        out: hr.out,
    };
    let nodes = hosts::agent_config(ac, ic, &nets, &settings, &mut ar);
    let out = ar.out;
    // The release's own problems are already in `out`.
    let release = release?;
    if !out.is_empty() {
        return None;
    }
    let mut c = cluster(ic_doc, ic, hs, nets, settings, nodes, release)?;
    c.lab.live_agent &= !overrides.no_live_agent;
    Some(c)
}

/// FIPS is never ignored: a cluster cannot be switched to FIPS after it is installed, and its
/// keys would not have come from a validated module.
fn fips(ic: &InstallConfig, overrides: &Overrides, r: &mut Reporter) {
    if ic.fips && overrides.crypto_fips == Some(false) {
        r.error(
            "fips",
            "fips: true needs a FIPS-validated crypto module for the bundle's keys and certificates, and this hardshift was built without one",
            Some("build hardshift with AWS-LC's FIPS module: `cargo build --release --features fips` (needs cmake and Go); or set `fips: false`".into()),
        );
    }
}

/// The `Cluster` of three valid files (None only when a VIP or the helper has no address).
fn cluster(
    ic_doc: &Doc,
    ic: &InstallConfig,
    hs: &HardshiftConfig,
    nets: Networks,
    settings: Settings,
    nodes: Vec<Node>,
    release: crate::release::Release,
) -> Option<Cluster> {
    // install-config as written, for the bootstrap's manifests; the secret travels on its own.
    let mut raw = ic_doc.value.clone();
    // A single node answers api, api-int and *.apps itself (the installer's ingress placement on
    // the control plane): no load balancer unless hardshift.yaml names VIPs.
    let in_place = ic.bootstrap_in_place.as_ref().map(|b| BootstrapInPlace {
        installation_disk: if b.installation_disk.is_empty() {
            nodes.iter().find_map(|n| n.root_device.clone()).unwrap_or_default()
        } else {
            b.installation_disk.clone()
        },
    });
    let node_ip = nodes.first().map(|n| n.ip).filter(|_| in_place.is_some());
    let vip = |v: Option<IpAddr>, given: bool| if given { v } else { node_ip.or(v) };
    if let Some(m) = raw.as_object_mut() {
        m.remove("pullSecret");
    }
    Some(Cluster {
        name: ic.metadata.name.clone(),
        base_domain: ic.base_domain.clone(),
        network_type: ic.networking.network_type.clone().unwrap_or_else(|| "OVNKubernetes".into()),
        machine_networks: nets.machine,
        cluster_networks: nets.cluster,
        service_networks: nets.service,
        api_vip: vip(settings.api_vip, settings.api_vip_given)?,
        ingress_vip: vip(settings.ingress_vip, settings.ingress_vip_given)?,
        helper_ip: settings.helper_ip?,
        collector_address: settings.collector_address,
        collector_port: settings.collector_port,
        collector_extra_sans: hs.collector.extra_sans.clone(),
        dns_records: settings.dns_records,
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
        mirrors: mirrors(ic),
        proxy: ic.proxy.as_ref().map(|p| Proxy {
            http_proxy: p.http_proxy.clone(),
            https_proxy: p.https_proxy.clone(),
            no_proxy: p.no_proxy.clone(),
        }),
        fips: ic.fips,
        pki: settings.pki,
        lab: lab(hs, &settings.helper_ip_text, in_place.is_some()),
        install_config: raw,
        release,
        bootstrap_in_place: in_place,
    })
}

/// imageDigestSources, or the deprecated imageContentSources when those are not given.
fn mirrors(ic: &InstallConfig) -> Vec<Mirror> {
    let sources = if ic.image_digest_sources.is_empty() {
        &ic.image_content_sources
    } else {
        &ic.image_digest_sources
    };
    sources
        .iter()
        .map(|m| Mirror {
            source: m.source.clone(),
            mirrors: m.mirrors.clone(),
        })
        .collect()
}

/// The lab's VMs and where the nodes fetch their files, with the defaults of the tutorial's lab.
/// (A single node's VM: OpenShift's single-node minimum, 8 vCPUs and a 120 GB disk.)
fn lab(hs: &HardshiftConfig, helper_ip: &str, single_node: bool) -> LabSettings {
    LabSettings {
        install_device: hs.lab.install_device.clone().unwrap_or_else(|| "/dev/vda".into()),
        vcpus: hs.lab.vcpus.unwrap_or(if single_node { 8 } else { 4 }),
        memory_mib: hs.lab.memory_mib.unwrap_or(16384),
        disk_gib: hs.lab.disk_gib.unwrap_or(if single_node { 120 } else { 100 }),
        http_base_url: hs.lab.http_base_url.clone().unwrap_or_else(|| format!("http://{helper_ip}:8080")),
        live_agent: hs.lab.live_agent.unwrap_or(true),
        install_image_url: hs.lab.install_image_url.clone(),
        install_image_unsigned: hs.lab.install_image_unsigned.unwrap_or(false),
    }
}

#[derive(Default)]
struct Networks {
    pub(super) machine: Vec<IpNet>,
    pub(super) cluster: Vec<ClusterNetwork>,
    pub(super) service: Vec<IpNet>,
}

struct Settings {
    pub(super) api_vip: Option<IpAddr>,
    pub(super) ingress_vip: Option<IpAddr>,
    /// Named by hardshift.yaml (or install-config's baremetal VIPs), not a fallback.
    pub(super) api_vip_given: bool,
    pub(super) ingress_vip_given: bool,
    pub(super) helper_ip: Option<IpAddr>,
    pub(super) helper_ip_text: String,
    pub(super) collector_address: String,
    pub(super) collector_port: u16,
    pub(super) pki: PkiSettings,
    pub(super) dns_records: Vec<DnsRecord>,
}

pub(super) fn join(nets: &[IpNet]) -> String {
    nets.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
}
