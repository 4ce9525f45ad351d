//! Cluster manifests for bootkube to apply, in file-name order. Core objects are typed
//! (k8s-openapi); OpenShift's config CRs are JSON with the fields their CRDs declare.

use crate::cluster::{Cluster, Role};
use crate::pki::Pki;
use crate::yamlout;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub const NAMESPACES: &[&str] = &[
    "openshift-config",
    "openshift-config-managed",
    "openshift-etcd",
    "openshift-kube-apiserver",
    "openshift-kube-controller-manager",
    "openshift-kube-scheduler",
    "openshift-cluster-version",
    "openshift-machine-config-operator",
    "openshift-infra",
    "openshift-node",
    super::seeds::KAS_OPERATOR_NS,
    super::seeds::KCM_OPERATOR_NS,
];

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(String::from),
        ..Default::default()
    }
}

fn typed<T: serde::Serialize + k8s_openapi::Resource>(obj: &T) -> Value {
    let mut v = serde_json::to_value(obj).expect("serializes");
    v["apiVersion"] = json!(T::API_VERSION);
    v["kind"] = json!(T::KIND);
    v
}

/// Stable per-cluster identifiers: derived from the root CA, so re-runs keep them and two clusters
/// never share them.
fn cluster_digest(pki: &Pki) -> [u8; 32] {
    Sha256::digest(pki.get("pki/root-ca").cert_pem.as_bytes()).into()
}

pub fn cluster_id(pki: &Pki) -> String {
    cluster_id_of_root_ca(&pki.get("pki/root-ca").cert_pem)
}

pub use hardshift_bundle::certificates::cluster_id_of_root_ca;

pub fn infrastructure_name(c: &Cluster, pki: &Pki) -> String {
    const ALPHA: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let d = cluster_digest(pki);
    let suffix: String = d[20..25].iter().map(|b| ALPHA[*b as usize % ALPHA.len()] as char).collect();
    let prefix: String = c.name.chars().take(27).collect();
    format!("{}-{suffix}", prefix.trim_end_matches('-'))
}

/// The installer's rule (`pkg/asset/manifests/topologies.go`): fewer than three masters is a
/// single-replica control plane; the infrastructure follows the workers (none: as the control
/// plane; one: single-replica; more: highly available).
fn topology(c: &Cluster) -> (&'static str, &'static str) {
    let masters = c.nodes_with_role(Role::Master).count();
    let workers = c.nodes_with_role(Role::Worker).count();
    let control = if masters < 3 { "SingleReplica" } else { "HighlyAvailable" };
    let infra = match workers {
        0 => control,
        1 => "SingleReplica",
        _ => "HighlyAvailable",
    };
    (control, infra)
}

/// The status bootkube patches onto `ingresses.config.openshift.io/cluster`, as the installer
/// writes it (`pkg/asset/manifests/ingress.go`): on platform none a single-replica control plane
/// hosts the routers itself, with no load balancer in front.
pub fn ingress_status(c: &Cluster) -> Value {
    let placement = if topology(c).0 == "SingleReplica" {
        "ControlPlane"
    } else {
        "Workers"
    };
    json!({"status": {"defaultPlacement": placement}})
}

/// The status bootkube patches onto `infrastructure/cluster` (status is a subresource: `apply`
/// ignores it).
pub fn infrastructure_status(c: &Cluster, pki: &Pki) -> Value {
    let (control, infra) = topology(c);
    json!({"status": {
        "apiServerURL": c.api_url(),
        "apiServerInternalURI": c.api_int_url(),
        "controlPlaneTopology": control,
        "infrastructureTopology": infra,
        "cpuPartitioning": "None",
        "etcdDiscoveryDomain": "",
        "infrastructureName": infrastructure_name(c, pki),
        "platform": "None",
        "platformStatus": {"type": "None"}
    }})
}

/// The status bootkube patches onto `featuregate/cluster`, as the release's cluster-config-api
/// render fills it; None when this build does not know the release's gates (or its version).
pub fn featuregate_status(c: &Cluster) -> Option<Value> {
    let version = c.release.version.as_deref()?;
    Some(json!({"status": super::featuregates::status(version)?}))
}

/// (file name, objects) in apply order. `kubeadmin`: the console password, when there is one.
pub fn manifests(c: &Cluster, pki: &Pki, kubeadmin: Option<&crate::kubeadmin::Kubeadmin>) -> Vec<(String, Vec<Value>)> {
    let (cluster_net, service_net) = networks(c);
    let mut out: Vec<(&str, Vec<Value>)> = vec![
        ("00-namespaces.yaml", namespaces()),
        ("01-rbac.yaml", rbac()),
        ("02-infrastructure.yaml", vec![infrastructure(c, pki)]),
        (
            "03-network-config.yaml",
            vec![
                json!({"apiVersion": "config.openshift.io/v1", "kind": "Network", "metadata": {"name": "cluster"},
                "spec": {"clusterNetwork": cluster_net, "serviceNetwork": service_net, "networkType": c.network_type,
                         "externalIP": {"policy": {}}}}),
            ],
        ),
        (
            "03-network-operator.yaml",
            vec![
                json!({"apiVersion": "operator.openshift.io/v1", "kind": "Network", "metadata": {"name": "cluster"},
                "spec": {"clusterNetwork": cluster_net, "serviceNetwork": service_net, "defaultNetwork": {"type": c.network_type},
                         "managementState": "Managed"}}),
            ],
        ),
        (
            "04-dns.yaml",
            vec![
                json!({"apiVersion": "config.openshift.io/v1", "kind": "DNS", "metadata": {"name": "cluster"}, "spec": {"baseDomain": c.domain()}}),
            ],
        ),
        ("04-proxy.yaml", proxy(c)),
        // Without it, ingress, the console and authentication never converge.
        (
            "04-ingress.yaml",
            vec![
                json!({"apiVersion": "config.openshift.io/v1", "kind": "Ingress", "metadata": {"name": "cluster"}, "spec": {"domain": format!("apps.{}", c.domain())}}),
            ],
        ),
        ("04-featuregate.yaml", vec![featuregate(c)]),
        ("04-scheduler.yaml", vec![scheduler(c)]),
        ("05-clusterversion.yaml", vec![cluster_version(c, pki)]),
        ("06-cluster-config-v1.yaml", vec![cluster_config(c)]),
        ("07-etcd-endpoints.yaml", vec![etcd_endpoints(c)]),
        ("08-pull-secret.yaml", vec![pull_secret(c)]),
        ("10-operator-seeds.yaml", operator_seeds(pki)),
    ];
    if let Some(k) = kubeadmin {
        out.push(("11-kubeadmin.yaml", vec![typed(&crate::kubeadmin::secret(k))]));
    }
    if !c.mirrors.is_empty() {
        out.push(("09-image-digest-mirror-set.yaml", vec![image_digest_mirror_set(c)]));
    }
    out.into_iter().map(|(name, objs)| (name.to_string(), objs)).collect()
}

fn namespaces() -> Vec<Value> {
    NAMESPACES
        .iter()
        .map(|n| {
            typed(&Namespace {
                metadata: meta(n, None),
                ..Default::default()
            })
        })
        .collect()
}

fn rbac() -> Vec<Value> {
    let crb = |name: &str, role: &str, user: &str| {
        typed(&ClusterRoleBinding {
            metadata: meta(name, None),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: role.into(),
            },
            subjects: Some(vec![Subject {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "User".into(),
                name: user.into(),
                namespace: None,
            }]),
        })
    };
    vec![
        // Kubelets bootstrap with system:bootstrapper: it may create CSRs, nothing approves them.
        crb("system:bootstrapper", "system:node-bootstrapper", "system:bootstrapper"),
        crb("system:node-admin", "system:node-admin", "system:admin"),
        // kube-apiserver's kubelet client (logs, exec, proxy): kubelets authorize it by webhook.
        crb(
            "system:kube-apiserver-to-kubelet",
            "system:kubelet-api-admin",
            "system:kube-apiserver",
        ),
    ]
}

fn infrastructure(c: &Cluster, pki: &Pki) -> Value {
    let mut infra = json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "spec": {"cloudConfig": {"name": ""}, "platformSpec": {"type": "None"}},
    });
    infra["status"] = infrastructure_status(c, pki)["status"].clone();
    infra
}

/// The cluster and service networks, as the Network configs name them.
fn networks(c: &Cluster) -> (Vec<Value>, Vec<Value>) {
    let cluster_net = c
        .cluster_networks
        .iter()
        .map(|n| json!({"cidr": n.cidr.to_string(), "hostPrefix": n.host_prefix}))
        .collect();
    let service_net = c.service_networks.iter().map(|n| json!(n.to_string())).collect();
    (cluster_net, service_net)
}

/// The Proxy config, and the additional trust bundle it names (user-ca-bundle) when there is one.
fn proxy(c: &Cluster) -> Vec<Value> {
    let mut proxy_spec = serde_json::Map::new();
    if let Some(p) = &c.proxy {
        for (k, v) in [
            ("httpProxy", &p.http_proxy),
            ("httpsProxy", &p.https_proxy),
            ("noProxy", &p.no_proxy),
        ] {
            if !v.is_empty() {
                proxy_spec.insert(k.into(), json!(v));
            }
        }
    }
    let mut trust = Vec::new();
    if !c.additional_trust_bundle.trim().is_empty() {
        proxy_spec.insert("trustedCA".into(), json!({"name": "user-ca-bundle"}));
        let cm = ConfigMap {
            metadata: meta("user-ca-bundle", Some("openshift-config")),
            data: Some(BTreeMap::from([("ca-bundle.crt".to_string(), c.additional_trust_bundle.clone())])),
            ..Default::default()
        };
        trust.push(typed(&cm));
    }
    trust.push(json!({"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"}, "spec": proxy_spec}));
    trust
}

fn featuregate(c: &Cluster) -> Value {
    let mut fg =
        json!({"apiVersion": "config.openshift.io/v1", "kind": "FeatureGate", "metadata": {"name": "cluster"}, "spec": {"featureSet": ""}});
    if let Some(st) = featuregate_status(c) {
        fg["status"] = st["status"].clone();
    }
    fg
}

/// As the installer writes it: with no compute nodes the masters run the workloads (and
/// ingress); the MCO's node controller lifts their NoSchedule taint when this says so.
fn scheduler(c: &Cluster) -> Value {
    let workers = c.nodes_with_role(Role::Worker).count();
    json!({"apiVersion": "config.openshift.io/v1", "kind": "Scheduler", "metadata": {"name": "cluster"}, "spec": {"mastersSchedulable": workers == 0}})
}

/// No desiredUpdate: the CVO installs the release it runs.
fn cluster_version(c: &Cluster, pki: &Pki) -> Value {
    let mut cv_spec = json!({"clusterID": cluster_id(pki)});
    if let Some(v) = &c.release.version {
        let minor: Vec<&str> = v.split('.').take(2).collect();
        cv_spec["channel"] = json!(format!("stable-{}", minor.join(".")));
    }
    json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"}, "spec": cv_spec})
}

fn cluster_config(c: &Cluster) -> Value {
    let cm = ConfigMap {
        metadata: meta("cluster-config-v1", Some("kube-system")),
        data: Some(BTreeMap::from([(
            "install-config".to_string(),
            yamlout::to_yaml(&c.install_config),
        )])),
        ..Default::default()
    };
    typed(&cm)
}

fn etcd_endpoints(c: &Cluster) -> Value {
    let bootstrap_ip = c.bootstrap().ip.to_string();
    if c.single_node() {
        // The node's own member stays: cluster-etcd-operator's render fills the endpoints as its
        // endpoint controller would (key: the address in unpadded base64), with no bootstrap
        // annotation (there is no bootstrap member to remove).
        use base64::Engine;
        let key = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bootstrap_ip);
        let ep = ConfigMap {
            metadata: meta("etcd-endpoints", Some("openshift-etcd")),
            data: Some(BTreeMap::from([(key, bootstrap_ip)])),
            ..Default::default()
        };
        return typed(&ep);
    }
    let mut ep_meta = meta("etcd-endpoints", Some("openshift-etcd"));
    ep_meta.annotations = Some(BTreeMap::from([(
        "alpha.installer.openshift.io/etcd-bootstrap".to_string(),
        bootstrap_ip.clone(),
    )]));
    let ep = ConfigMap {
        metadata: ep_meta,
        data: Some(BTreeMap::from([("bootstrapIP".to_string(), bootstrap_ip)])),
        ..Default::default()
    };
    typed(&ep)
}

fn pull_secret(c: &Cluster) -> Value {
    let secret = Secret {
        metadata: meta("pull-secret", Some("openshift-config")),
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_string(),
            ByteString(c.pull_secret.as_bytes().to_vec()),
        )])),
        ..Default::default()
    };
    typed(&secret)
}

fn operator_seeds(pki: &Pki) -> Vec<Value> {
    let seeds = super::seeds::seeds(pki);
    let mut objs: Vec<Value> = seeds.secrets.iter().map(typed).collect();
    objs.extend(seeds.config_maps.iter().map(typed));
    objs
}

fn image_digest_mirror_set(c: &Cluster) -> Value {
    let m: Vec<Value> = c
        .mirrors
        .iter()
        .map(|m| json!({"source": m.source, "mirrors": m.mirrors}))
        .collect();
    json!({"apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet", "metadata": {"name": "image-digest-mirror"},
    "spec": {"imageDigestMirrors": m}})
}

/// Objects whose CRDs the cluster-version-operator installs from the release (the MCO's
/// MachineConfig): bootkube applies them once the CVO runs, as cluster-bootstrap retries the
/// installer's `openshift/` manifests until their CRDs exist.
pub fn after_cvo(c: &Cluster) -> Vec<(String, Vec<Value>)> {
    let mut out = Vec::new();
    if !c.ssh_keys.is_empty() {
        let mcs = ["master", "worker"].iter().map(|r| ssh_machine_config(r, &c.ssh_keys)).collect();
        out.push(("99-machineconfig-ssh.yaml".to_string(), mcs));
    }
    if c.fips {
        let mcs = ["master", "worker"].iter().map(|r| fips_machine_config(r)).collect();
        out.push(("99-machineconfig-fips.yaml".to_string(), mcs));
    }
    out
}

/// The installer's `99-<role>-fips` MachineConfig: `spec.fips` makes the machine-config daemon
/// boot the node in FIPS mode (and the rendered config carries it to every node of the role).
pub fn fips_machine_config(role: &str) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": format!("99-{role}-fips"), "labels": {"machineconfiguration.openshift.io/role": role}},
        "spec": {"config": {"ignition": {"version": crate::ignition::VERSION}}, "fips": true}})
}

/// The installer's `99-<role>-ssh` MachineConfig: the machine-config daemon manages `core`'s
/// authorized keys from the rendered config, so a key that is only in the node's own config is
/// dropped at its first update (and the admin loses SSH, a stuck install's lifeline).
pub fn ssh_machine_config(role: &str, keys: &[String]) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": format!("99-{role}-ssh"), "labels": {"machineconfiguration.openshift.io/role": role}},
        "spec": {"config": {"ignition": {"version": crate::ignition::VERSION},
                            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": keys}]}}}})
}

pub fn to_yaml(objs: &[Value]) -> String {
    yamlout::documents(objs)
}
