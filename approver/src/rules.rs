//! A safe CSR approver for platform none: cluster-machine-approver's rules, checked against the
//! bundle's inventory instead of Machine objects (field-notes §7). Pure: a CSR and what is known
//! of the cluster in, a decision with its reason out. Anything not provably a node of the
//! inventory asking for what it needs is refused, with the reason; nothing is ever denied
//! (a refused CSR stays pending, as the machine-approver leaves it, for a human to look at).
//! The request itself is read as Kubernetes reads it, or refused ([`crate::request`]).

use crate::request::parse;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// Who may ask for a new node's first client certificate: the bundle's bootstrap kubeconfig's
/// identity (a client certificate, no groups of its own).
pub const BOOTSTRAPPER: &str = "system:bootstrapper";
/// The machine-config server's bootstrap identity (the kubeconfig it serves a node booted the
/// RHCOS way): the machine-approver's only one, with exactly these groups.
pub const NODE_BOOTSTRAPPER_SA: &str = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
const NODE_BOOTSTRAPPER_GROUPS: [&str; 3] = [
    "system:serviceaccounts",
    "system:serviceaccounts:openshift-machine-config-operator",
    "system:authenticated",
];
/// The machine-approver stops when this many more CSRs than nodes are pending: a flood is an
/// attack or a bug, and approving into it is how a cluster gets a rogue node.
pub const MAX_PENDING_OVER_NODES: usize = 100;

/// A node the bundle made: its name and the only addresses and names its certificates may carry.
#[derive(Debug, Clone)]
pub struct InventoryNode {
    pub ips: Vec<IpAddr>,
    pub dns: Vec<String>,
}

/// The nodes that may join (the bootstrap is not one: it runs no kubelet that joins).
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub nodes: BTreeMap<String, InventoryNode>,
}

/// What a CSR object says: spec fields and the PEM request.
#[derive(Debug, Clone)]
pub struct Csr {
    pub name: String,
    pub signer: String,
    pub username: String,
    pub groups: Vec<String>,
    pub usages: Vec<String>,
    pub request_pem: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve(String),
    Refuse(String),
}

/// Why a rule refuses a CSR, in the words `approve-csrs` prints: the one `Err` of the checks,
/// so a request that does not read is a refusal too (`?` on the parse).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal(String);

impl From<crate::request::Unreadable> for Refusal {
    fn from(e: crate::request::Unreadable) -> Refusal {
        Refusal(e.0)
    }
}

/// Whether a client CSR comes from a bootstrap identity: the bundle's, or the machine-config
/// server's service account with exactly its groups (machine-approver `isReqFromNodeBootstrapper`).
fn from_bootstrapper(csr: &Csr) -> Result<(), Refusal> {
    if csr.username == BOOTSTRAPPER {
        return Ok(());
    }
    if csr.username == NODE_BOOTSTRAPPER_SA {
        let groups: BTreeSet<&str> = csr.groups.iter().map(String::as_str).collect();
        if groups == BTreeSet::from(NODE_BOOTSTRAPPER_GROUPS) && csr.groups.len() == NODE_BOOTSTRAPPER_GROUPS.len() {
            return Ok(());
        }
        return Err(Refusal(format!(
            "{NODE_BOOTSTRAPPER_SA} asks with groups {:?}, not exactly {NODE_BOOTSTRAPPER_GROUPS:?}",
            csr.groups
        )));
    }
    Err(Refusal(format!(
        "a node's first client certificate is asked for by {BOOTSTRAPPER} or the machine-config server's node-bootstrapper, not {:?}",
        csr.username
    )))
}

/// Decide one pending CSR. `registered`: the Nodes that exist; `pending`: how many CSRs wait.
pub fn decide(inv: &Inventory, csr: &Csr, registered: &BTreeSet<String>, pending: usize) -> Decision {
    match check(inv, csr, registered, pending) {
        Ok(why) => Decision::Approve(why),
        Err(Refusal(why)) => Decision::Refuse(why),
    }
}

/// The node a kubelet client CSR is for (its CN's `system:node:<name>`), if it is one.
pub fn client_node(csr: &Csr) -> Option<String> {
    if csr.signer != CLIENT_SIGNER {
        return None;
    }
    requested_node(&csr.request_pem)
}

/// The node a PKCS#10 request names in its CN (`system:node:<name>`), if it verifies and does.
pub fn requested_node(request_pem: &[u8]) -> Option<String> {
    let r = parse(request_pem).ok()?;
    r.cn.strip_prefix("system:node:").map(str::to_string)
}

/// Decide every pending CSR of one pass, as the machine-approver does: at most one client
/// certificate per node, ever, until that node registers. `approved_clients`: the nodes whose
/// client CSR was approved before (node → CSR name). The bootstrap credential is in every node's
/// Ignition config, so a second client CSR for a node not yet registered is a second machine
/// claiming to be it, or a replay: reported, never approved.
pub fn decide_pass(
    inv: &Inventory,
    pending: &[Csr],
    approved_clients: &BTreeMap<String, String>,
    registered: &BTreeSet<String>,
) -> Vec<Decision> {
    let mut given: BTreeMap<String, String> = approved_clients.clone();
    pending
        .iter()
        .map(|csr| {
            let d = decide(inv, csr, registered, pending.len());
            let (Decision::Approve(_), Some(node)) = (&d, client_node(csr)) else {
                return d;
            };
            match given.get(&node) {
                Some(first) => Decision::Refuse(format!(
                    "a client certificate for {node} was already approved ({first}) and {node} has not registered: at most one per node until it does (another machine, or a replay of the bootstrap credential?)"
                )),
                None => {
                    given.insert(node, csr.name.clone());
                    d
                }
            }
        })
        .collect()
}

/// A refusal, in the words `approve-csrs` prints.
fn refuse<T>(why: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(why.into()))
}

fn check(inv: &Inventory, csr: &Csr, registered: &BTreeSet<String>, pending: usize) -> Result<String, Refusal> {
    let cap = inv.nodes.len() + MAX_PENDING_OVER_NODES;
    if pending > cap {
        return refuse(format!(
            "{pending} CSRs are pending, more than the {} nodes + {MAX_PENDING_OVER_NODES}: approving nothing until someone looks",
            inv.nodes.len()
        ));
    }
    let client = match csr.signer.as_str() {
        CLIENT_SIGNER => true,
        SERVING_SIGNER => false,
        other => return refuse(format!("signer {other} is not a kubelet's; only a person should approve it")),
    };
    let r = parse(&csr.request_pem)?;
    let cn = &r.cn;
    let Some(node) = cn.strip_prefix("system:node:") else {
        return refuse(format!("CN {cn:?} is not system:node:<name>"));
    };
    let Some(known) = inv.nodes.get(node) else {
        return refuse(format!("{node} is not a node of this cluster's inventory"));
    };
    if r.org != "system:nodes" {
        return refuse(format!("O must be exactly system:nodes, it is {:?}", r.org));
    }
    let usages: BTreeSet<&str> = csr.usages.iter().map(String::as_str).collect();
    // A usage twice is a request no kubelet makes (the machine-approver counts, and so lets
    // a duplicate pass in place of a missing one).
    if usages.len() != csr.usages.len() {
        return refuse(format!("usages {:?} name one usage twice", csr.usages));
    }
    let (needed, allowed) = if client {
        ("client auth", ["digital signature", "key encipherment", "client auth"])
    } else {
        ("server auth", ["digital signature", "key encipherment", "server auth"])
    };
    if !usages.contains(needed) || !usages.contains("digital signature") || usages.iter().any(|u| !allowed.contains(u)) {
        return refuse(format!(
            "usages {:?}: must be digital signature and {needed} (key encipherment optional), nothing else",
            csr.usages
        ));
    }
    if client {
        from_bootstrapper(csr)?;
        if registered.contains(node) {
            return refuse(format!(
                "{node} is already registered: a new client certificate for it would let a second machine be {node}"
            ));
        }
        if !r.dns.is_empty() || !r.ips.is_empty() || r.other_sans > 0 {
            return refuse("a client certificate names no hosts, and this request does".to_string());
        }
        return Ok(format!("client certificate for {node}, a node of the inventory not yet registered"));
    }
    if csr.username != *cn {
        return refuse(format!("a serving CSR for {node} must come from {cn}, not {:?}", csr.username));
    }
    if !csr.groups.iter().any(|g| g == "system:nodes") || !csr.groups.iter().any(|g| g == "system:authenticated") {
        return refuse(format!("{:?} is not in groups system:nodes and system:authenticated", csr.username));
    }
    if r.other_sans > 0 {
        return refuse("names other than DNS names and IP addresses".to_string());
    }
    if r.dns.is_empty() && r.ips.is_empty() {
        return refuse("a serving certificate must name the node".to_string());
    }
    if let Some(d) = r.dns.iter().find(|d| !known.dns.contains(d)) {
        return refuse(format!("DNS name {d} is not {node}'s (allowed: {})", known.dns.join(", ")));
    }
    if let Some(ip) = r.ips.iter().find(|ip| !known.ips.contains(ip)) {
        let allowed: Vec<String> = known.ips.iter().map(ToString::to_string).collect();
        return refuse(format!("IP {ip} is not {node}'s (allowed: {})", allowed.join(", ")));
    }
    Ok(format!("serving certificate for {node}, every name and address its own"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    fn inventory() -> Inventory {
        let mut inv = Inventory::default();
        for (n, ip) in [("master-0", "192.168.126.101"), ("worker-0", "192.168.126.111")] {
            inv.nodes.insert(
                n.into(),
                InventoryNode {
                    ips: vec![ip.parse().unwrap()],
                    dns: vec![n.into(), format!("{n}.ocp4.example.com")],
                },
            );
        }
        inv
    }

    /// A PKCS#10 request in PEM, signed by a fresh key.
    pub(crate) fn request(cn: &str, orgs: &[&str], sans: Vec<SanType>) -> Vec<u8> {
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        // rcgen keeps one value per DnType: a second O goes under the same OID as a custom type.
        for (i, o) in orgs.iter().enumerate() {
            let t = if i == 0 {
                DnType::OrganizationName
            } else {
                DnType::CustomDnType(vec![2, 5, 4, 10])
            };
            dn.push(t, *o);
        }
        dn.push(DnType::CommonName, cn);
        p.distinguished_name = dn;
        p.subject_alt_names = sans;
        let key = KeyPair::generate().unwrap();
        p.serialize_request(&key).unwrap().pem().unwrap().into_bytes()
    }

    fn client(cn: &str, orgs: &[&str], user: &str, usages: &[&str], sans: Vec<SanType>) -> Csr {
        Csr {
            name: "csr-x".into(),
            signer: CLIENT_SIGNER.into(),
            username: user.into(),
            groups: vec!["system:bootstrappers".into()],
            usages: usages.iter().map(|u| u.to_string()).collect(),
            request_pem: request(cn, orgs, sans),
        }
    }

    fn serving(cn: &str, user: &str, sans: Vec<SanType>) -> Csr {
        Csr {
            name: "csr-y".into(),
            signer: SERVING_SIGNER.into(),
            username: user.into(),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
            usages: vec!["digital signature".into(), "server auth".into()],
            request_pem: request(cn, &["system:nodes"], sans),
        }
    }

    fn refused(d: Decision, why: &str) {
        match d {
            Decision::Refuse(r) => assert!(r.contains(why), "{r:?} should say {why:?}"),
            other => panic!("{other:?} should be refused for {why:?}"),
        }
    }

    #[test]
    fn a_new_nodes_client_csr_is_approved_and_forgeries_are_not() {
        let inv = inventory();
        let none = BTreeSet::new();
        let cn = "system:node:master-0";
        let good = |u: &[&str]| client(cn, &["system:nodes"], BOOTSTRAPPER, u, vec![]);
        assert!(matches!(
            decide(&inv, &good(&["digital signature", "client auth"]), &none, 1),
            Decision::Approve(_)
        ));
        assert!(matches!(
            decide(&inv, &good(&["digital signature", "key encipherment", "client auth"]), &none, 1),
            Decision::Approve(_)
        ));
        refused(
            decide(
                &inv,
                &client(
                    "system:node:rogue",
                    &["system:nodes"],
                    BOOTSTRAPPER,
                    &["digital signature", "client auth"],
                    vec![],
                ),
                &none,
                1,
            ),
            "not a node of this cluster's inventory",
        );
        refused(
            decide(
                &inv,
                &client(cn, &["system:masters"], BOOTSTRAPPER, &["digital signature", "client auth"], vec![]),
                &none,
                1,
            ),
            "O must be exactly system:nodes",
        );
        refused(
            decide(
                &inv,
                &client(
                    cn,
                    &["system:nodes", "system:masters"],
                    BOOTSTRAPPER,
                    &["digital signature", "client auth"],
                    vec![],
                ),
                &none,
                1,
            ),
            "exactly one CN and one O",
        );
        refused(
            decide(
                &inv,
                &client(
                    "system:admin",
                    &["system:nodes"],
                    BOOTSTRAPPER,
                    &["digital signature", "client auth"],
                    vec![],
                ),
                &none,
                1,
            ),
            "is not system:node:<name>",
        );
        refused(
            decide(&inv, &good(&["digital signature", "client auth", "server auth"]), &none, 1),
            "usages",
        );
        refused(decide(&inv, &good(&["client auth"]), &none, 1), "usages");
        refused(
            decide(
                &inv,
                &client(cn, &["system:nodes"], "system:admin", &["digital signature", "client auth"], vec![]),
                &none,
                1,
            ),
            "asked for by system:bootstrapper or the machine-config server's node-bootstrapper",
        );
        refused(
            decide(
                &inv,
                &client(
                    cn,
                    &["system:nodes"],
                    BOOTSTRAPPER,
                    &["digital signature", "client auth"],
                    vec![SanType::DnsName("x".try_into().unwrap())],
                ),
                &none,
                1,
            ),
            "names no hosts",
        );
        let registered = BTreeSet::from(["master-0".to_string()]);
        refused(
            decide(&inv, &good(&["digital signature", "client auth"]), &registered, 1),
            "already registered",
        );
        refused(
            decide(&inv, &good(&["digital signature", "client auth"]), &none, 103),
            "approving nothing",
        );
        let mut other = good(&["digital signature", "client auth"]);
        other.signer = "kubernetes.io/kube-apiserver-client".into();
        refused(decide(&inv, &other, &none, 1), "is not a kubelet's");
        let mut garbage = good(&["digital signature", "client auth"]);
        garbage.request_pem = b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n".to_vec();
        refused(decide(&inv, &garbage, &none, 1), "not a PKCS#10 request");
    }

    #[test]
    fn a_serving_csr_names_only_its_own_node() {
        let inv = inventory();
        let reg = BTreeSet::from(["master-0".to_string()]);
        let cn = "system:node:master-0";
        let ip = |s: &str| SanType::IpAddress(s.parse().unwrap());
        let dns = |s: &str| SanType::DnsName(s.try_into().unwrap());
        let good = serving(cn, cn, vec![dns("master-0"), ip("192.168.126.101")]);
        assert!(matches!(decide(&inv, &good, &reg, 1), Decision::Approve(_)));
        refused(
            decide(&inv, &serving(cn, cn, vec![dns("master-0"), ip("192.168.126.111")]), &reg, 1),
            "IP 192.168.126.111 is not master-0's",
        );
        refused(
            decide(&inv, &serving(cn, cn, vec![dns("master-0"), dns("api.ocp4.example.com")]), &reg, 1),
            "DNS name api.ocp4.example.com is not master-0's",
        );
        refused(
            decide(&inv, &serving(cn, "system:node:worker-0", vec![dns("master-0")]), &reg, 1),
            "must come from system:node:master-0",
        );
        let mut no_group = good.clone();
        no_group.groups = vec!["system:authenticated".into()];
        refused(
            decide(&inv, &no_group, &reg, 1),
            "not in groups system:nodes and system:authenticated",
        );
        let mut client_usage = good.clone();
        client_usage.usages.push("client auth".into());
        refused(decide(&inv, &client_usage, &reg, 1), "usages");
        refused(decide(&inv, &serving(cn, cn, vec![]), &reg, 1), "must name the node");
    }

    #[test]
    fn the_machine_config_servers_bootstrapper_asks_with_exactly_its_groups() {
        let inv = inventory();
        let none = BTreeSet::new();
        let mut sa = client(
            "system:node:worker-0",
            &["system:nodes"],
            NODE_BOOTSTRAPPER_SA,
            &["digital signature", "client auth"],
            vec![],
        );
        sa.groups = NODE_BOOTSTRAPPER_GROUPS.iter().map(|g| g.to_string()).collect();
        assert!(matches!(decide(&inv, &sa, &none, 1), Decision::Approve(_)));
        let mut more = sa.clone();
        more.groups.push("system:masters".into());
        refused(decide(&inv, &more, &none, 1), "not exactly");
        let mut twice = sa.clone();
        twice.usages = vec!["client auth".into(), "client auth".into()];
        refused(decide(&inv, &twice, &none, 1), "name one usage twice");
        // The probe's request: a second CN as a BMPString would make it master-0's certificate.
        let mut p = rcgen::CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "system:nodes");
        dn.push(DnType::CommonName, "system:node:worker-0");
        dn.push(
            DnType::CustomDnType(vec![2, 5, 4, 3]),
            rcgen::DnValue::BmpString("system:node:master-0".try_into().unwrap()),
        );
        p.distinguished_name = dn;
        let mut bmp = sa.clone();
        bmp.request_pem = p
            .serialize_request(&KeyPair::generate().unwrap())
            .unwrap()
            .pem()
            .unwrap()
            .into_bytes();
        refused(decide(&inv, &bmp, &none, 1), "CN is a BMPString");
        assert_eq!(client_node(&bmp), None);
    }

    #[test]
    fn at_most_one_client_certificate_per_node_until_it_registers() {
        let inv = inventory();
        let a = client(
            "system:node:master-0",
            &["system:nodes"],
            BOOTSTRAPPER,
            &["digital signature", "client auth"],
            vec![],
        );
        let mut b = a.clone();
        b.name = "csr-b".into();
        let w = client(
            "system:node:worker-0",
            &["system:nodes"],
            BOOTSTRAPPER,
            &["digital signature", "client auth"],
            vec![],
        );
        let none = BTreeSet::new();
        let d = decide_pass(&inv, &[a.clone(), b.clone(), w.clone()], &BTreeMap::new(), &none);
        assert!(matches!(d[0], Decision::Approve(_)), "{d:?}");
        refused(d[1].clone(), "already approved");
        assert!(matches!(d[2], Decision::Approve(_)), "{d:?}");
        // An earlier pass approved one: the next is refused too.
        let before = BTreeMap::from([("master-0".to_string(), "csr-old".to_string())]);
        let d = decide_pass(&inv, &[b], &before, &none);
        refused(d[0].clone(), "csr-old");
        assert_eq!(client_node(&w).as_deref(), Some("worker-0"));
    }
}
