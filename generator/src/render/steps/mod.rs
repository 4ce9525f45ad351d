//! The renders, in bootkube.sh's order (installer `data/data/bootstrap/files/usr/local/bin/
//! bootkube.sh.template`, 4.18): each one's image, program and flags as bootkube passes them, the
//! assets it reads, and what bootkube copies from its output before the next one runs. The flags
//! each program declares, from its source on `release-4.18`, are kept beside it so a test can
//! hold every flag given against them. The control plane's renders are `control_plane`'s, the
//! machine-config operator's and controller's `mco`'s.

mod control_plane;
mod mco;

use crate::cluster::{Cluster, Role};
use control_plane::{api, etcd, kube_apiserver, kube_controller_manager, kube_scheduler};
use mco::{mcc, mco};
use std::net::IpAddr;

/// The network a render runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Net {
    /// None at all (`--net=none`): nothing to reach, nothing to learn from the host.
    None,
    /// The bootstrap's own name and address: the etcd render takes both from the machine it runs
    /// on (the first address inside the machine network) and writes them into etcd's
    /// certificates and pod.
    Bootstrap { hostname: String, ip: IpAddr, subnet: String },
}

/// bootkube's `cp FROM/* TO/` after a step (paths under /assets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone)]
pub struct Step {
    /// Short name: its output directory's prefix, its log's name.
    pub name: &'static str,
    /// The release tag of its image.
    pub tag: &'static str,
    pub entrypoint: &'static str,
    pub args: Vec<String>,
    /// Assets it reads (paths under /assets), each of which must exist and not be empty.
    pub reads: Vec<String>,
    /// Assets it makes that later steps read (after `then`), for checking the order.
    pub makes: Vec<String>,
    pub net: Net,
    pub then: Vec<Copy>,
    /// The flags its program declares, and those it refuses to run without.
    pub declared: Vec<&'static str>,
    pub required: &'static [&'static str],
}

impl Step {
    /// The flags given (`--name` of each `--name=value`).
    pub fn flags(&self) -> Vec<&str> {
        self.args
            .iter()
            .filter_map(|a| a.strip_prefix("--").map(|f| f.split('=').next().unwrap_or(f)))
            .collect()
    }
}

fn cp(from: &str, to: &str) -> Copy {
    Copy {
        from: from.into(),
        to: to.into(),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The release tags whose images the renders run.
pub const TAGS: &[&str] = &[
    "cluster-config-api",
    "cluster-etcd-operator",
    "cluster-kube-apiserver-operator",
    "cluster-kube-controller-manager-operator",
    "cluster-kube-scheduler-operator",
    "machine-config-operator",
];

/// The renders for `c`, their images from its release. `Err` names what the release lacks (a
/// tag, its version, its Kubernetes version) or the inventory (a bootstrap node).
pub fn steps(c: &Cluster) -> Result<Vec<Step>, super::Lacking> {
    let r = &c.release;
    let mut missing = Vec::new();
    let mut tag = |t: &str| match r.tags.get(t) {
        Some(p) => p.clone(),
        None => {
            missing.push(format!("the release has no {t:?} image"));
            String::new()
        }
    };
    let (etcd_image, hyperkube, kas_op, cpc, mco_image) = (
        tag("etcd"),
        tag("hyperkube"),
        tag("cluster-kube-apiserver-operator"),
        tag("cluster-policy-controller"),
        tag("machine-config-operator"),
    );
    let (oscontent, infra) = (r.tags.get("rhel-coreos").cloned().unwrap_or_else(|| tag("rhel-coreos")), tag("pod"));
    for t in [
        "cluster-config-api",
        "cluster-etcd-operator",
        "cluster-kube-controller-manager-operator",
        "cluster-kube-scheduler-operator",
    ] {
        tag(t);
    }
    let version = r.version.clone().unwrap_or_else(|| {
        missing.push("the release's version is unknown (its image-references names none)".into());
        String::new()
    });
    let kubernetes = r.kubernetes.clone().unwrap_or_else(|| {
        missing.push(
            "the release's Kubernetes version is unknown (its hyperkube tag has no io.openshift.build.versions annotation naming kubernetes=...; the kube-apiserver render needs it)"
                .into(),
        );
        String::new()
    });
    // A single node runs the bootstrap itself (bootstrap-in-place).
    let bootstrap = c
        .nodes
        .iter()
        .find(|n| n.role == Role::Bootstrap)
        .or(c.single_node().then(|| c.bootstrap()));
    if bootstrap.is_none() {
        missing.push("the inventory has no bootstrap node (the etcd render takes its name and address)".into());
    }
    if !missing.is_empty() {
        return Err(super::Lacking(missing));
    }
    let b = bootstrap.expect("checked");
    let net = Net::Bootstrap {
        hostname: b.hostname.clone(),
        ip: b.ip,
        subnet: c
            .machine_networks
            .iter()
            .find(|n| n.contains(&b.ip))
            .or(c.machine_networks.first())
            .map(|n| n.to_string())
            .unwrap_or_default(),
    };
    let v = format!("--payload-version={version}");
    Ok(vec![
        api(&v),
        etcd(&etcd_image, net),
        kube_apiserver(&v, &hyperkube, &kas_op, &kubernetes),
        kube_controller_manager(&v, &hyperkube, &cpc),
        kube_scheduler(&hyperkube),
        mco(
            &v,
            &r.image,
            &mco_image,
            &oscontent,
            &infra,
            !crate::assets::manifests::after_cvo(c).is_empty(),
        ),
        mcc(&v),
    ])
}

/// An asset under manifests/.
fn m(f: &str) -> String {
    format!("manifests/{f}")
}
