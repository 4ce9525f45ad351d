//! What the cluster's PKI must contain: every CA and leaf with its subject, usages and SANs.
//! Names, CNs and SANs follow the tutorial's stage 05 (field-notes §3) so users find what they
//! look for; files are named after node hostnames.

use crate::cluster::{Cluster, KeyAlgorithm, Role};
use std::net::{IpAddr, Ipv4Addr};

pub const OPENSHIFT_DIR: &str = crate::layout::PKI;
pub const AGENT_DIR: &str = crate::layout::AGENT_PKI;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A CA; `path_len` None means unconstrained.
    Ca {
        path_len: Option<u8>,
    },
    Leaf {
        server: bool,
        client: bool,
    },
    /// A bare key pair (the service-account signing key): `.key` and `.pub`, no certificate.
    KeyOnly,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertSpec {
    /// Directory inside the bundle (`pki` or `agent-pki`).
    pub dir: &'static str,
    /// File stem: `<dir>/<name>.crt` and `<dir>/<name>.key`.
    pub name: String,
    pub cn: String,
    pub orgs: Vec<String>,
    pub kind: Kind,
    /// Name of the issuing CA in the same directory; None for a self-signed root.
    pub issuer: Option<String>,
    pub dns: Vec<String>,
    pub ips: Vec<IpAddr>,
    pub days: u32,
    pub key: KeyAlgorithm,
}

impl CertSpec {
    /// `<dir>/<name>`: the identity of this entry across runs.
    pub fn id(&self) -> String {
        format!("{}/{}", self.dir, self.name)
    }

    pub fn issuer_id(&self) -> Option<String> {
        self.issuer.as_ref().map(|i| format!("{}/{i}", self.dir))
    }

    pub fn is_ca(&self) -> bool {
        matches!(self.kind, Kind::Ca { .. })
    }
}

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Every entry of the bundle's PKI, issuers before what they sign.
pub fn plan(c: &Cluster) -> Vec<CertSpec> {
    let m = Maker {
        alg: c.pki.key_algorithm,
        ca_days: c.pki.ca_validity_days,
        leaf_days: c.pki.leaf_validity_days,
    };
    let mut out = cas(&m);
    out.extend(etcd(c, &m));
    out.extend(api_servers(c, &m));
    out.extend(clients(&m));
    out.extend(agent_plan(c));
    out
}

/// What every entry of the OpenShift directory shares: the key algorithm and the validity.
struct Maker {
    alg: KeyAlgorithm,
    ca_days: u32,
    leaf_days: u32,
}

impl Maker {
    fn ca(&self, name: &str, issuer: Option<&str>, path_len: Option<u8>) -> CertSpec {
        CertSpec {
            dir: OPENSHIFT_DIR,
            name: name.into(),
            cn: name.into(),
            orgs: vec![],
            kind: Kind::Ca { path_len },
            issuer: issuer.map(String::from),
            dns: vec![],
            ips: vec![],
            days: self.ca_days,
            key: self.alg,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn leaf(&self, name: &str, cn: &str, issuer: &str, server: bool, client: bool, dns: Vec<String>, ips: Vec<IpAddr>) -> CertSpec {
        CertSpec {
            dir: OPENSHIFT_DIR,
            name: name.into(),
            cn: cn.into(),
            orgs: vec![],
            kind: Kind::Leaf { server, client },
            issuer: Some(issuer.into()),
            dns,
            ips,
            days: self.leaf_days,
            key: self.alg,
        }
    }
}

/// The CAs: the tutorial's tree under root-ca, and the signers the operators take over.
fn cas(m: &Maker) -> Vec<CertSpec> {
    vec![
        m.ca("root-ca", None, None),
        m.ca("etcd-ca", Some("root-ca"), Some(0)),
        // kubernetes-ca signs kubelet-ca, so it needs a path length of 1 (the tutorial's 0 would
        // make every certificate under kubelet-ca fail verification).
        m.ca("kubernetes-ca", Some("root-ca"), Some(1)),
        m.ca("front-proxy-ca", Some("root-ca"), Some(0)),
        m.ca("kubelet-ca", Some("kubernetes-ca"), Some(0)),
        CertSpec {
            kind: Kind::KeyOnly,
            issuer: None,
            days: 0,
            ..m.ca("service-account", None, None)
        },
        // The signers the operators take over from the bootstrap (docs/operator-seeds.md): each
        // self-signed, as the installer's are, so an operator can rotate one without the others.
        m.ca("etcd-metric-ca", None, Some(0)),
        m.ca("kube-apiserver-localhost-signer", None, Some(0)),
        m.ca("kube-apiserver-service-network-signer", None, Some(0)),
        m.ca("kube-apiserver-lb-signer", None, Some(0)),
        m.ca("kube-apiserver-to-kubelet-signer", None, Some(0)),
        m.ca("kube-control-plane-signer", None, Some(0)),
        // csr-signer-signer: it signs the csr-signer CA, which signs kubelet certificates.
        m.ca("kubelet-signer", None, Some(1)),
    ]
}

/// etcd's: a peer certificate per control-plane node, the server's, and the clients'.
fn etcd(c: &Cluster, m: &Maker) -> Vec<CertSpec> {
    let domain = c.domain();
    let mut out = Vec::new();
    let control_plane: Vec<_> = c.nodes.iter().filter(|n| n.role != Role::Worker).collect();
    for n in &control_plane {
        let mut dns = vec![n.fqdn(&domain)];
        if n.role == Role::Master {
            dns.push(format!("etcd-{}.{domain}", n.index));
        }
        dns.push("localhost".into());
        let name = format!("etcd-peer-{}", n.hostname);
        out.push(m.leaf(&name, &name, "etcd-ca", true, true, dns, vec![n.ip, LOCALHOST]));
    }
    let cp_ips: Vec<IpAddr> = control_plane.iter().map(|n| n.ip).collect();
    let with_localhost = |mut ips: Vec<IpAddr>| {
        ips.push(LOCALHOST);
        ips
    };
    out.push(m.leaf(
        "etcd-server",
        "etcd-server",
        "etcd-ca",
        true,
        true,
        vec!["localhost".into(), format!("etcd.{domain}")],
        with_localhost(cp_ips),
    ));
    out.push(m.leaf("etcd-client", "system:etcd-client", "etcd-ca", false, true, vec![], vec![]));
    // What Prometheus presents to etcd's metrics listener (openshift-config/etcd-metric-client).
    out.push(m.leaf("etcd-metric-client", "etcd-metric", "etcd-metric-ca", false, true, vec![], vec![]));
    out
}

fn api_servers(c: &Cluster, m: &Maker) -> Vec<CertSpec> {
    let domain = c.domain();
    let mut out = Vec::new();
    // The API server's serving certificates, one per serving signer, chosen by SNI as the real
    // bootstrap does (kube-apiserver-operator `bindata/bootkube/config/bootstrap-config-overrides.yaml`):
    // the service network's is the default (clients by the service IP send no name); localhost,
    // api and api-int are named. Clients trust the signers (pki::trust::api_server_ca), so the
    // certificates the operator issues from the same signers after the pivot verify alike.
    let service_dns: Vec<String> = ["kubernetes", "openshift"]
        .into_iter()
        .flat_map(|n| {
            [
                n.to_string(),
                format!("{n}.default"),
                format!("{n}.default.svc"),
                format!("{n}.default.svc.cluster.local"),
            ]
        })
        .collect();
    let server = |name: &str, issuer: &str, dns: Vec<String>, ips: Vec<IpAddr>| m.leaf(name, name, issuer, true, false, dns, ips);
    out.push(server(
        "kube-apiserver-service-network-server",
        "kube-apiserver-service-network-signer",
        service_dns,
        vec![c.kubernetes_service_ip()],
    ));
    out.push(server(
        "kube-apiserver-localhost-server",
        "kube-apiserver-localhost-signer",
        vec!["localhost".into()],
        vec![LOCALHOST, IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)],
    ));
    out.push(server(
        "kube-apiserver-lb-server",
        "kube-apiserver-lb-signer",
        vec![format!("api.{domain}")],
        vec![],
    ));
    out.push(server(
        "kube-apiserver-internal-lb-server",
        "kube-apiserver-lb-signer",
        vec![format!("api-int.{domain}")],
        vec![],
    ));
    // The machine-config server's (22623, behind api-int), under the root CA the nodes' pointer
    // configs trust. Ten years, as the installer's: nothing in 4.18 rotates it, and a node that
    // joins in year two must still be served.
    out.push(CertSpec {
        days: m.ca_days,
        ..m.leaf(
            "machine-config-server",
            "system:machine-config-server",
            "root-ca",
            true,
            false,
            vec![format!("api-int.{domain}")],
            vec![],
        )
    });
    out
}

/// The control plane's clients, the kubelet's bootstrap identity and the admin.
fn clients(m: &Maker) -> Vec<CertSpec> {
    let mut out = Vec::new();
    for (name, cn, issuer) in [
        ("kube-apiserver-kubelet-client", "system:kube-apiserver", "kubernetes-ca"),
        ("kube-controller-manager", "system:kube-controller-manager", "kubernetes-ca"),
        ("kube-scheduler", "system:kube-scheduler", "kubernetes-ca"),
        ("front-proxy-client", "front-proxy-client", "front-proxy-ca"),
        ("kubelet-bootstrap", "system:bootstrapper", "kubernetes-ca"),
    ] {
        out.push(m.leaf(name, cn, issuer, false, true, vec![], vec![]));
    }
    out.push(CertSpec {
        orgs: vec!["system:masters".into()],
        ..m.leaf("admin", "system:admin", "kubernetes-ca", false, true, vec![], vec![])
    });
    out
}

/// hardshift's own PKI for agent ↔ collector mTLS: always ECDSA P-256.
fn agent_plan(c: &Cluster) -> Vec<CertSpec> {
    let base = CertSpec {
        dir: AGENT_DIR,
        name: "agent-ca".into(),
        cn: "hardshift-agent-ca".into(),
        orgs: vec!["hardshift".into()],
        kind: Kind::Ca { path_len: Some(0) },
        issuer: None,
        dns: vec![],
        ips: vec![],
        days: c.pki.ca_validity_days,
        key: KeyAlgorithm::EcdsaP256,
    };
    let mut dns = vec!["localhost".to_string()];
    let mut ips = vec![LOCALHOST];
    for a in std::iter::once(&c.collector_address).chain(&c.collector_extra_sans) {
        match a.parse::<IpAddr>() {
            Ok(ip) => ips.push(ip),
            Err(_) => dns.push(a.clone()),
        }
    }
    dedup(&mut ips);
    dedup(&mut dns);
    let mut out = vec![
        base.clone(),
        CertSpec {
            name: "collector".into(),
            cn: "hardshift-collector".into(),
            kind: Kind::Leaf {
                server: true,
                client: false,
            },
            issuer: Some("agent-ca".into()),
            dns,
            ips,
            days: c.pki.leaf_validity_days,
            ..base.clone()
        },
    ];
    for n in &c.nodes {
        out.push(CertSpec {
            name: format!("agent-{}", n.hostname),
            // The node's identity on the agent stream: the collector trusts this CN, nothing else.
            cn: n.hostname.clone(),
            orgs: vec!["hardshift:agents".into()],
            kind: Kind::Leaf {
                server: false,
                client: true,
            },
            issuer: Some("agent-ca".into()),
            dns: vec![],
            ips: vec![],
            days: c.pki.leaf_validity_days,
            ..base.clone()
        });
    }
    out
}

fn dedup<T: PartialEq + Clone>(v: &mut Vec<T>) {
    let mut seen = Vec::with_capacity(v.len());
    v.retain(|x| {
        if seen.contains(x) {
            false
        } else {
            seen.push(x.clone());
            true
        }
    });
}
