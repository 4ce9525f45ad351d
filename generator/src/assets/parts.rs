//! A node's config as a table of parts ([`PARTS`]), in the style of `pki::plan`: each row says
//! which roles get it, what of the PKI it reads, what it writes, and what replaces it (an MCO
//! base, or the release's renders). The PKI a role needs is derived from the rows
//! ([`pki_read_by`]); a part is made from the entries it declared alone (`view`), so one
//! that reads more panics in every build of its role, not on a fresh `create` alone.
//!
//! The bootstrap runs hardshift's own control plane or the release's renders' ([`ControlPlane`]);
//! with the renders', their files and objects win over the parts' by identity ([`give_way`]).

use super::control_plane::ControlPlane;
use super::node::{self, Ctx, Manifest, Objects, Placed};
use super::paths::*;
use super::{agent, mcs, Extras};
use crate::cluster::{Cluster, Node, Role};
use crate::ignition::{NodeConfig, NodeFile, PUBLIC, SECRET};
use crate::pki::trust::{API_SERVER_CA, CLIENT_CA, CSR_SIGNER_CA};
use crate::pki::{CertSpec, Pki, OPENSHIFT_DIR};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// One part of a node's config. Adding a file to a node is adding a row (or a file to a row).
pub struct Part {
    pub name: &'static str,
    pub roles: &'static [Role],
    pub reads: &'static [Read],
    /// The files and directories it places: a path, or a prefix ending in `*`.
    pub writes: &'static [&'static str],
    pub units: &'static [&'static str],
    pub replaced_by: Replaced,
    /// The same for every node it applies to: made once.
    pub once: bool,
    pub make: fn(&Ctx, &Node) -> Placed,
}

/// What of the PKI a part reads.
#[derive(Debug, Clone, Copy)]
pub enum Read {
    /// These entries (`pki/root-ca`).
    Entries(&'static [&'static str]),
    /// The node's own entry: this prefix and its hostname (`agent-pki/agent-`).
    Own(&'static str),
    /// Every entry of this directory (`pki`).
    Dir(&'static str),
}

/// What takes a part's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replaced {
    /// Nothing: it is always the bundle's.
    Never,
    /// An MCO-rendered base of the node's role: it brings its own.
    ByBase,
    /// The release's renders, whole, when the bootstrap runs their control plane.
    ByRenders,
    /// The release's renders, file by file and object by object: theirs of the same path or
    /// identity win.
    ByIdentity,
}

const ALL: &[Role] = &[Role::Bootstrap, Role::Master, Role::Worker];
const BOOTSTRAP: &[Role] = &[Role::Bootstrap];
const NODES: &[Role] = &[Role::Master, Role::Worker];

/// Every part, in the order they are placed (of two files at one path, the later wins).
#[rustfmt::skip]
pub const PARTS: &[Part] = &[
    Part { name: "hostname and network", roles: ALL, reads: &[], writes: &["/etc/hostname", "/etc/NetworkManager/system-connections/*"], units: &[], replaced_by: Replaced::Never, once: false, make: node::host },
    Part { name: "static pod directory", roles: ALL, reads: &[], writes: &[STATIC_PODS], units: &[], replaced_by: Replaced::Never, once: true, make: node::static_pod_dir },
    Part { name: "CRI-O: pull secret, mirrors", roles: ALL, reads: &[], writes: &[PULL_SECRET, REGISTRIES_CONF], units: &[], replaced_by: Replaced::Never, once: true, make: node::crio },
    // The MCO's crio.conf sets the pause image (`pause_image`) on the nodes it configures.
    Part { name: "CRI-O: pause image", roles: ALL, reads: &[], writes: &[PAUSE_CONF], units: &[], replaced_by: Replaced::ByBase, once: true, make: node::pause },
    Part { name: "additional trust bundle", roles: ALL, reads: &[], writes: &[TRUST_ANCHOR], units: &[], replaced_by: Replaced::Never, once: true, make: node::trust_anchor },
    // The bootstrap's control plane.
    Part { name: "the bootstrap's certificates", roles: BOOTSTRAP, reads: &[Read::Dir(OPENSHIFT_DIR)], writes: &["/etc/kubernetes/bootstrap-secrets*"], units: &[], replaced_by: Replaced::ByIdentity, once: true, make: node::certificates },
    Part { name: "etcd's certificates", roles: BOOTSTRAP, reads: &[Read::Dir(OPENSHIFT_DIR)], writes: &["/etc/kubernetes/bootstrap-secrets/etcd-*"], units: &[], replaced_by: Replaced::ByRenders, once: true, make: node::etcd_certificates },
    Part { name: "CA bundles", roles: BOOTSTRAP, reads: &[Read::Entries(CLIENT_CA), Read::Entries(CSR_SIGNER_CA), Read::Entries(API_SERVER_CA)], writes: &["/etc/kubernetes/bootstrap-secrets/*"], units: &[], replaced_by: Replaced::ByIdentity, once: true, make: node::ca_bundles },
    Part { name: "kubeconfigs", roles: BOOTSTRAP, reads: &[Read::Dir(OPENSHIFT_DIR)], writes: &["/etc/kubernetes/kubeconfigs*"], units: &[], replaced_by: Replaced::ByIdentity, once: true, make: node::kubeconfigs },
    Part { name: "hardshift's static pods", roles: BOOTSTRAP, reads: &[], writes: &["/etc/kubernetes/manifests/*"], units: &[], replaced_by: Replaced::ByRenders, once: true, make: node::own_static_pods },
    Part { name: "the machine-config server's certificate", roles: BOOTSTRAP, reads: &[Read::Entries(&["pki/machine-config-server"])], writes: &[MCS_TLS_CERT, MCS_TLS_KEY], units: &[], replaced_by: Replaced::Never, once: true, make: node::mcs_tls },
    Part { name: "cluster-version-operator", roles: BOOTSTRAP, reads: &[], writes: &[CVO_STAGED], units: &[], replaced_by: Replaced::Never, once: true, make: node::cvo },
    Part { name: "manifests", roles: BOOTSTRAP, reads: &[Read::Dir(OPENSHIFT_DIR)], writes: &["/opt/openshift/manifests/*"], units: &[], replaced_by: Replaced::ByIdentity, once: true, make: node::manifests },
    Part { name: "manifests after the CVO", roles: BOOTSTRAP, reads: &[], writes: &["/opt/openshift/manifests-after-cvo/*"], units: &[], replaced_by: Replaced::Never, once: true, make: node::after_cvo },
    Part { name: "infrastructure and feature-gate status", roles: BOOTSTRAP, reads: &[Read::Entries(&["pki/root-ca"])], writes: &["/opt/openshift/infrastructure-status.json", "/opt/openshift/featuregate-status.json", "/opt/openshift/ingress-status.json"], units: &[], replaced_by: Replaced::Never, once: true, make: node::status },
    Part { name: "CRDs", roles: BOOTSTRAP, reads: &[], writes: &["/opt/openshift/crds/*"], units: &[], replaced_by: Replaced::ByIdentity, once: true, make: node::crds },
    Part { name: "bootkube", roles: BOOTSTRAP, reads: &[], writes: &[BOOTKUBE], units: &["bootkube.service"], replaced_by: Replaced::Never, once: true, make: node::bootkube },
    Part { name: "the bootstrap's kubelet", roles: BOOTSTRAP, reads: &[], writes: &[KUBELET_CONFIG], units: &["kubelet.service"], replaced_by: Replaced::Never, once: false, make: node::bootstrap_kubelet },
    // Masters and workers.
    Part { name: "the kubelet's bootstrap kubeconfig", roles: NODES, reads: &[Read::Entries(&["pki/kubelet-bootstrap"]), Read::Entries(API_SERVER_CA)], writes: &[NODE_KUBECONFIG], units: &[], replaced_by: Replaced::Never, once: true, make: node::kubelet_kubeconfig },
    // Where the MCS puts it (the same bundle): with an MCO base, the MCS's files part places it.
    Part { name: "the kubelet's client CA", roles: NODES, reads: &[Read::Entries(CLIENT_CA)], writes: &[mcs::KUBELET_CA], units: &[], replaced_by: Replaced::ByBase, once: true, make: node::kubelet_client_ca },
    Part { name: "the API's address", roles: NODES, reads: &[], writes: &[APISERVER_URL_ENV], units: &[], replaced_by: Replaced::Never, once: true, make: node::apiserver_url },
    Part { name: "the kubelet", roles: NODES, reads: &[], writes: &[KUBELET_CONFIG], units: &["kubelet.service"], replaced_by: Replaced::ByBase, once: false, make: node::kubelet },
    // Every node.
    Part { name: "FIPS mode", roles: ALL, reads: &[], writes: &[], units: &[], replaced_by: Replaced::ByBase, once: true, make: node::fips },
    Part { name: "hardshift-agent", roles: ALL, reads: &[Read::Own("agent-pki/agent-"), Read::Entries(&["agent-pki/agent-ca"])], writes: &[agent::BINARY, agent::CONFIG, agent::CA, agent::CERT, agent::KEY, agent::DROPINS], units: &["hardshift-agent.service"], replaced_by: Replaced::Never, once: false, make: node::agent },
    Part { name: "proxy", roles: ALL, reads: &[], writes: &[PROXY_ENV], units: &["crio.service", "kubelet.service"], replaced_by: Replaced::Never, once: true, make: node::proxy },
    Part { name: "the machine-config server's files", roles: NODES, reads: &[Read::Entries(CLIENT_CA)], writes: &[mcs::KUBELET_CA, mcs::NODE_ANNOTATIONS, mcs::CONTENT, mcs::ENCAPSULATED], units: &[], replaced_by: Replaced::Never, once: true, make: node::mcs },
];

/// The part of `role` that places `path` (a file) or unit `path` (a unit name), if one does.
pub fn placing(role: Role, path: &str) -> Option<&'static str> {
    let covers = |w: &str| match w.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => path == w,
    };
    PARTS
        .iter()
        .filter(|p| p.roles.contains(&role))
        .find(|p| p.writes.iter().any(|w| covers(w)) || p.units.contains(&path))
        .map(|p| p.name)
}

impl Read {
    /// Whether this read takes entry `s`, for nodes named `hosts`.
    fn covers(&self, s: &CertSpec, hosts: &BTreeSet<String>) -> bool {
        match *self {
            Read::Entries(ids) => ids.iter().any(|id| is(s, id)),
            Read::Own(prefix) => {
                let id = s.id();
                id.strip_prefix(prefix).is_some_and(|h| hosts.contains(h))
            }
            Read::Dir(dir) => s.dir == dir,
        }
    }
}

/// `s` is entry `id` (`dir/name`), compared without formatting.
fn is(s: &CertSpec, id: &str) -> bool {
    id.split_once('/').is_some_and(|(d, n)| d == s.dir && n == s.name)
}

/// The hostnames of the nodes of these roles.
fn hosts(c: &Cluster, roles: &[Role]) -> BTreeSet<String> {
    c.nodes
        .iter()
        .filter(|n| roles.contains(&n.role))
        .map(|n| n.hostname.clone())
        .collect()
}

/// The PKI entries the parts of these roles read. `pki::issue_staged` makes the masters' and
/// workers' first: their configs are built while the keys only the bootstrap needs are made.
pub fn pki_read_by(c: &Cluster, roles: &[Role]) -> impl Fn(&CertSpec) -> bool + Sync {
    let reads: Vec<(Read, BTreeSet<String>)> = PARTS
        .iter()
        .flat_map(|p| {
            let mine: Vec<Role> = p.roles.iter().copied().filter(|r| roles.contains(r)).collect();
            let h = hosts(c, &mine);
            p.reads.iter().filter(move |_| !mine.is_empty()).map(move |r| (*r, h.clone()))
        })
        .collect();
    move |s| reads.iter().any(|(r, h)| r.covers(s, h))
}

/// The entries of `pki` part `p` declared it reads.
fn view(pki: &Pki, p: &Part, c: &Cluster) -> Pki {
    let h = hosts(c, p.roles);
    Pki {
        entries: pki
            .entries
            .iter()
            .filter(|e| p.reads.iter().any(|r| r.covers(&e.spec, &h)))
            .cloned()
            .collect(),
    }
}

fn role_index(r: Role) -> usize {
    match r {
        Role::Bootstrap => 0,
        Role::Master => 1,
        Role::Worker => 2,
    }
}

/// What every node's config is made from, and what the parts made once (per role).
pub struct Shared<'a> {
    cluster: &'a Cluster,
    pki: &'a Pki,
    extras: &'a Extras,
    views: Vec<OnceLock<Pki>>,
    made: Vec<[OnceLock<Placed>; 3]>,
    control_plane: OnceLock<ControlPlane<'a>>,
}

impl<'a> Shared<'a> {
    pub fn new(cluster: &'a Cluster, pki: &'a Pki, extras: &'a Extras) -> Shared<'a> {
        Shared {
            cluster,
            pki,
            extras,
            views: PARTS.iter().map(|_| OnceLock::new()).collect(),
            made: PARTS.iter().map(|_| Default::default()).collect(),
            control_plane: OnceLock::new(),
        }
    }

    /// What part `i` places on `n`: made for this node, or once for its role.
    fn placed(&self, i: usize, n: &Node) -> Placed {
        let p = &PARTS[i];
        let ctx = Ctx {
            cluster: self.cluster,
            pki: self.views[i].get_or_init(|| view(self.pki, p, self.cluster)),
            extras: self.extras,
        };
        if p.once {
            self.made[i][role_index(n.role)].get_or_init(|| (p.make)(&ctx, n)).clone()
        } else {
            (p.make)(&ctx, n)
        }
    }

    /// The control plane a node of `role` has a part in: the bootstrap's, or none (hardshift's own
    /// replaces nothing).
    fn control_plane(&self, role: Role) -> &ControlPlane<'a> {
        static OWN: ControlPlane<'static> = ControlPlane::OWN;
        if role != Role::Bootstrap {
            return &OWN;
        }
        self.control_plane.get_or_init(|| ControlPlane::of(self.extras.renders.as_ref()))
    }
}

/// Everything hardshift adds to node `n`: its role's parts, less what an MCO base or the
/// renders' control plane replaces, and that control plane's files.
pub fn node_config(shared: &Shared, n: &Node) -> NodeConfig {
    let cp = shared.control_plane(n.role);
    let has_base = shared.extras.bases.contains_key(&n.role);
    let mut all = Placed::default();
    for (i, p) in PARTS.iter().enumerate() {
        let placed = match p.replaced_by {
            _ if !p.roles.contains(&n.role) => continue,
            Replaced::ByBase if has_base => continue,
            Replaced::ByRenders if cp.is_renders() => continue,
            Replaced::ByIdentity => give_way(shared.placed(i, n), cp),
            _ => shared.placed(i, n),
        };
        all.config.files.extend(placed.config.files);
        all.config.directories.extend(placed.config.directories);
        all.config.units.extend(placed.config.units);
        all.config.kernel_arguments.extend(placed.config.kernel_arguments);
        all.manifests.extend(placed.manifests);
    }
    let mut config = all.config;
    config.ssh_keys = shared.cluster.ssh_keys.clone();
    config.files.extend(all.manifests.into_iter().map(Manifest::file));
    config.files.extend(cp.files().iter().cloned());
    config
}

/// The merge: the renders' files and objects win over a part's of the same path or identity.
fn give_way(p: Placed, cp: &ControlPlane) -> Placed {
    if !cp.is_renders() {
        return p;
    }
    let Placed { mut config, manifests } = p;
    config.files.retain(|f| !cp.wins_file(&f.path));
    let manifests = manifests.into_iter().filter_map(|m| m.less(cp)).collect();
    Placed { config, manifests }
}

impl Manifest {
    /// This file less the objects `cp` has of the same identity; None when nothing is left.
    fn less(self, cp: &ControlPlane) -> Option<Manifest> {
        if cp.wins_file(&self.path) {
            return None;
        }
        let objects = match self.objects {
            Objects::Made(objs) => {
                let before = objs.len();
                let kept: Vec<Value> = objs.into_iter().filter(|o| !cp.wins_object(o)).collect();
                if kept.is_empty() && before > 0 {
                    return None;
                }
                Objects::Made(kept)
            }
            Objects::Given(bytes) => {
                let doc = crate::config::yaml::parse(&String::from_utf8_lossy(&bytes));
                if doc.is_ok_and(|d| cp.wins_object(&d.value)) {
                    return None;
                }
                Objects::Given(bytes)
            }
        };
        Some(Manifest { path: self.path, objects })
    }

    /// The file bootkube applies: 0600 when it holds a Secret.
    fn file(self) -> NodeFile {
        match self.objects {
            Objects::Made(objs) => {
                let mode = if objs.iter().any(|o| o["kind"] == "Secret") {
                    SECRET
                } else {
                    PUBLIC
                };
                NodeFile::new(self.path, mode, super::manifests::to_yaml(&objs))
            }
            Objects::Given(bytes) => NodeFile::new(self.path, PUBLIC, bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assets::control_plane::Bootstrap;
    use crate::pki::{keys::SystemKeys, plan};

    fn example() -> (Cluster, Pki) {
        let c = crate::testing::example_cluster(None);
        let pki = crate::pki::issue(
            &plan(&c),
            &Default::default(),
            time::OffsetDateTime::now_utc(),
            &SystemKeys,
            Default::default(),
        )
        .expect("issued");
        (c, pki)
    }

    #[test]
    fn every_read_of_every_part_is_in_the_pki_plan() {
        let c = crate::testing::example_cluster(None);
        let ids: BTreeSet<String> = plan(&c).iter().map(CertSpec::id).collect();
        for p in PARTS {
            for r in p.reads {
                let wanted: Vec<String> = match *r {
                    Read::Entries(e) => e.iter().map(|s| s.to_string()).collect(),
                    Read::Own(prefix) => hosts(&c, p.roles).iter().map(|h| format!("{prefix}{h}")).collect(),
                    Read::Dir(d) => vec![ids
                        .iter()
                        .find(|i| i.starts_with(&format!("{d}/")))
                        .cloned()
                        .unwrap_or_else(|| format!("{d}/*"))],
                };
                for id in wanted {
                    assert!(ids.contains(&id), "part {:?} reads {id}, which pki::plan does not make", p.name);
                }
            }
        }
    }

    /// Every part is made from the entries it declared alone (`view`): one that reads more panics
    /// here. And it places only what its row says.
    #[test]
    fn every_part_places_what_its_row_says_from_what_it_declared() {
        let (c, pki) = example();
        let extras = Extras {
            agent: Some(super::super::agent::Binary::new(b"\x7fELF".to_vec())),
            crds: vec![super::super::Crd {
                file: "a.crd.yaml".into(),
                contents: b"kind: CustomResourceDefinition\n".to_vec(),
            }],
            ..Default::default()
        };
        let declared = |p: &Part, path: &str| {
            p.writes.iter().any(|w| match w.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => path == *w,
            })
        };
        for n in &c.nodes {
            for p in PARTS.iter().filter(|p| p.roles.contains(&n.role)) {
                let view = view(&pki, p, &c);
                let placed = (p.make)(
                    &Ctx {
                        cluster: &c,
                        pki: &view,
                        extras: &extras,
                    },
                    n,
                );
                let paths = placed
                    .config
                    .files
                    .iter()
                    .map(|f| f.path.as_str())
                    .chain(placed.config.directories.iter().map(|d| d.0.as_str()))
                    .chain(placed.manifests.iter().map(|m| m.path.as_str()));
                for path in paths {
                    assert!(declared(p, path), "part {:?} places {path}, not in its row's writes", p.name);
                }
                for u in &placed.config.units {
                    assert!(
                        p.units.contains(&u.name.as_str()),
                        "part {:?} places unit {}, not in its row",
                        p.name,
                        u.name
                    );
                }
            }
        }
    }

    #[test]
    fn the_masters_and_workers_read_only_their_part_of_the_pki() {
        let c = crate::testing::example_cluster(None);
        let first = pki_read_by(&c, &[Role::Master, Role::Worker]);
        let read: BTreeSet<String> = plan(&c).iter().filter(|s| first(s)).map(CertSpec::id).collect();
        for id in [
            "pki/kubelet-bootstrap",
            "pki/kubernetes-ca",
            "pki/kube-apiserver-to-kubelet-signer",
            "agent-pki/agent-ca",
            "agent-pki/agent-master-0",
        ] {
            assert!(read.contains(id), "{id}: {read:?}");
        }
        for id in [
            "pki/etcd-ca",
            "pki/admin",
            "pki/service-account",
            "agent-pki/agent-bootstrap",
            "agent-pki/collector",
        ] {
            assert!(!read.contains(id), "{id} is not a master's or a worker's: {read:?}");
        }
    }

    /// One merge: the renders' files win by path and their objects by identity; their control
    /// plane takes the place of hardshift's own (its static pods, its etcd's certificates and the
    /// seeds that follow its etcd's CA); the rest stays the bundle's.
    #[test]
    fn the_renders_win_by_identity() {
        let (c, pki) = example();
        let bytes = |s: &str| s.as_bytes().to_vec();
        let renders = Bootstrap {
            pods: vec![("kube-apiserver-pod.yaml".into(), bytes("their pod"))],
            secrets: vec![
                ("admin.crt".into(), bytes("theirs")),
                ("etcd-ca-bundle.crt".into(), bytes("their etcd CA")),
            ],
            crds: vec![("a.crd.yaml".into(), bytes("their a"))],
            objects: [
                "ConfigMap openshift-config/admin-kubeconfig-client-ca",
                "CustomResourceDefinition.apiextensions.k8s.io b.example.com",
            ]
            .map(String::from)
            .into(),
            ..Default::default()
        };
        let crd = |file: &str, name: &str| super::super::Crd {
            file: file.into(),
            contents: bytes(&format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {name}\n"
            )),
        };
        let extras = |renders| Extras {
            crds: vec![
                crd("a.crd.yaml", "a.example.com"),
                crd("b.crd.yaml", "b.example.com"),
                crd("c.crd.yaml", "c.example.com"),
            ],
            renders,
            ..Default::default()
        };
        let files_of = |e: &Extras| -> std::collections::BTreeMap<String, Vec<u8>> {
            let shared = Shared::new(&c, &pki, e);
            node_config(&shared, c.bootstrap())
                .files
                .into_iter()
                .map(|f| (f.path, f.contents.to_vec()))
                .collect()
        };
        let (own, theirs) = (files_of(&extras(None)), files_of(&extras(Some(renders))));
        let secret = |n: &str| format!("{BOOTSTRAP_SECRETS}/{n}");
        let crd_at = |n: &str| format!("{ASSET_DIR}/crds/{n}");
        // Their files win by path.
        assert_eq!(theirs[&secret("admin.crt")], b"theirs");
        assert_ne!(own[&secret("admin.crt")], b"theirs");
        assert_eq!(theirs[&secret("etcd-ca.crt")], b"their etcd CA");
        assert_eq!(theirs[&crd_at("a.crd.yaml")], b"their a");
        // Their objects win by identity: a CRD of the same name, an object in the bundle's manifests.
        assert!(own.contains_key(&crd_at("b.crd.yaml")) && !theirs.contains_key(&crd_at("b.crd.yaml")));
        assert_eq!(own[&crd_at("c.crd.yaml")], theirs[&crd_at("c.crd.yaml")]);
        // The identities of the objects bootkube applies.
        let applied = |m: &std::collections::BTreeMap<String, Vec<u8>>| -> BTreeSet<String> {
            m.iter()
                .filter(|(p, _)| p.starts_with(&format!("{ASSET_DIR}/manifests/")))
                .flat_map(|(_, b)| String::from_utf8_lossy(b).split("\n---\n").map(String::from).collect::<Vec<_>>())
                .filter_map(|d| crate::config::yaml::parse(&d).ok())
                .map(|d| crate::object::identity(&d.value))
                .collect()
        };
        let (own_m, their_m) = (applied(&own), applied(&theirs));
        for id in [
            "ConfigMap openshift-config/admin-kubeconfig-client-ca",
            "Secret openshift-config/etcd-metric-client",
            "ConfigMap openshift-config/etcd-serving-ca",
        ] {
            assert!(own_m.contains(id) && !their_m.contains(id), "{id}");
        }
        assert_eq!(
            own_m.len() - their_m.len(),
            1 + crate::assets::control_plane::ETCD_SEEDS.len(),
            "{:?}",
            own_m.difference(&their_m).collect::<Vec<_>>()
        );
        // Their control plane in place of hardshift's own.
        let pod = |n: &str| format!("{STATIC_PODS}/{n}");
        assert!(own.contains_key(&pod("kube-apiserver-bootstrap.yaml")) && !theirs.contains_key(&pod("kube-apiserver-bootstrap.yaml")));
        assert_eq!(theirs[&pod("kube-apiserver-pod.yaml")], b"their pod");
        for etcd in ["etcd-server.key", "etcd-peer.crt", "etcd-client.key"] {
            assert!(own.contains_key(&secret(etcd)) && !theirs.contains_key(&secret(etcd)), "{etcd}");
        }
        // The rest is the bundle's.
        for kept in [
            secret("kube-scheduler.key"),
            format!("{KUBECONFIGS_DIR}/kubelet-bootstrap.kubeconfig"),
            CVO_STAGED.to_string(),
            BOOTKUBE.to_string(),
        ] {
            assert_eq!(own[&kept], theirs[&kept], "{kept}");
        }
    }
}
