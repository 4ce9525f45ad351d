//! The bootstrap control plane as typed static pods (k8s-openapi),
//! flags as in the tutorial's stage 07 with this bundle's paths.

use super::paths::*;
use crate::cluster::Cluster;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, HTTPGetAction, HostPathVolumeSource, Pod, PodSpec, Probe, ResourceRequirements, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

fn meta(name: &str, namespace: &str, app: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
        ..Default::default()
    }
}

fn host_path(name: &str, path: &str, kind: Option<&str>) -> Volume {
    Volume {
        name: name.into(),
        host_path: Some(HostPathVolumeSource {
            path: path.into(),
            type_: kind.map(String::from),
        }),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

fn requests(cpu: &str, memory: &str) -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(memory.into())),
        ])),
        ..Default::default()
    }
}

fn https_probe(path: &str, port: i32, delay: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(port),
            scheme: Some("HTTPS".into()),
            ..Default::default()
        }),
        initial_delay_seconds: Some(delay),
        period_seconds: Some(10),
        ..Default::default()
    }
}

fn pod(meta: ObjectMeta, container: Container, volumes: Vec<Volume>) -> Pod {
    Pod {
        metadata: meta,
        spec: Some(PodSpec {
            host_network: Some(true),
            priority_class_name: Some("system-node-critical".into()),
            containers: vec![container],
            volumes: Some(volumes),
            ..Default::default()
        }),
        status: None,
    }
}

fn args(list: &[String]) -> Option<Vec<String>> {
    Some(list.to_vec())
}

fn secret(name: &str) -> String {
    format!("{SECRETS_MOUNT}/{name}")
}

/// Single-member etcd on the bootstrap IP.
pub fn etcd_bootstrap(c: &Cluster) -> Pod {
    let ip = c.bootstrap().ip;
    let name = c.bootstrap_etcd_name();
    let cmd: Vec<String> = vec![
        "/usr/bin/etcd".into(),
        format!("--name={name}"),
        "--data-dir=/var/lib/etcd".into(),
        "--listen-client-urls=https://0.0.0.0:2379".into(),
        format!("--advertise-client-urls=https://{ip}:2379"),
        "--listen-peer-urls=https://0.0.0.0:2380".into(),
        format!("--initial-advertise-peer-urls=https://{ip}:2380"),
        format!("--initial-cluster={name}=https://{ip}:2380"),
        "--initial-cluster-state=new".into(),
        "--initial-cluster-token=openshift-etcd".into(),
        format!("--cert-file={}", secret("etcd-server.crt")),
        format!("--key-file={}", secret("etcd-server.key")),
        "--client-cert-auth=true".into(),
        format!("--trusted-ca-file={}", secret("etcd-ca.crt")),
        format!("--peer-cert-file={}", secret("etcd-peer.crt")),
        format!("--peer-key-file={}", secret("etcd-peer.key")),
        "--peer-client-cert-auth=true".into(),
        format!("--peer-trusted-ca-file={}", secret("etcd-ca.crt")),
        "--quota-backend-bytes=8589934592".into(),
    ];
    let container = Container {
        name: "etcd".into(),
        image: Some(c.release.tag("etcd").into()),
        command: args(&cmd),
        volume_mounts: Some(vec![
            mount("etcd-data", "/var/lib/etcd", false),
            mount("secrets", SECRETS_MOUNT, true),
        ]),
        resources: Some(requests("300m", "600Mi")),
        ..Default::default()
    };
    pod(
        meta(&name, "openshift-etcd", "etcd"),
        container,
        vec![
            host_path("etcd-data", "/var/lib/etcd", Some("DirectoryOrCreate")),
            host_path("secrets", BOOTSTRAP_SECRETS, None),
        ],
    )
}

pub fn kube_apiserver(c: &Cluster) -> Pod {
    let service = c.service_networks.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(",");
    let cmd: Vec<String> = vec![
        "hyperkube".into(),
        "kube-apiserver".into(),
        "--etcd-servers=https://localhost:2379".into(),
        // Every kube-apiserver the operator runs stores here (its defaultconfig.yaml): under the
        // default `/registry` the masters' API servers would find an empty cluster.
        "--etcd-prefix=kubernetes.io".into(),
        // The kubernetes service's endpoint: the node's lab address, not whatever interface holds
        // the default route (a bootstrap with two NICs, or none, would pick wrong or fail).
        format!("--advertise-address={}", c.bootstrap().ip),
        format!("--etcd-cafile={}", secret("etcd-ca.crt")),
        format!("--etcd-certfile={}", secret("etcd-client.crt")),
        format!("--etcd-keyfile={}", secret("etcd-client.key")),
        // Served by SNI as the real bootstrap does: the service network's certificate by default
        // (pods reach 172.30.0.1 without a name), localhost's, api's and api-int's by name; each
        // from the serving signer the operator later issues from, so one trust covers both.
        format!("--tls-cert-file={}", secret("kube-apiserver-service-network-server.crt")),
        format!("--tls-private-key-file={}", secret("kube-apiserver-service-network-server.key")),
        format!(
            "--tls-sni-cert-key={},{}",
            secret("kube-apiserver-localhost-server.crt"),
            secret("kube-apiserver-localhost-server.key")
        ),
        format!(
            "--tls-sni-cert-key={},{}",
            secret("kube-apiserver-lb-server.crt"),
            secret("kube-apiserver-lb-server.key")
        ),
        format!(
            "--tls-sni-cert-key={},{}",
            secret("kube-apiserver-internal-lb-server.crt"),
            secret("kube-apiserver-internal-lb-server.key")
        ),
        // Every client signer: the bundle's own, kubelet-signer (node client certificates the
        // controller-manager signs), and the operator's control-plane and kubelet-client signers.
        format!("--client-ca-file={}", secret(CLIENT_CA_BUNDLE)),
        format!("--service-account-key-file={}", secret("service-account.pub")),
        format!("--service-account-signing-key-file={}", secret("service-account.key")),
        "--service-account-issuer=https://kubernetes.default.svc".into(),
        "--api-audiences=https://kubernetes.default.svc".into(),
        format!("--service-cluster-ip-range={service}"),
        "--authorization-mode=Node,RBAC".into(),
        "--enable-admission-plugins=NodeRestriction".into(),
        format!("--requestheader-client-ca-file={}", secret("front-proxy-ca.crt")),
        "--requestheader-allowed-names=system:admin,system:openshift-aggregator,front-proxy-client".into(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
        "--requestheader-group-headers=X-Remote-Group".into(),
        "--requestheader-username-headers=X-Remote-User".into(),
        format!("--proxy-client-cert-file={}", secret("front-proxy-client.crt")),
        format!("--proxy-client-key-file={}", secret("front-proxy-client.key")),
        format!("--kubelet-client-certificate={}", secret("kube-apiserver-kubelet-client.crt")),
        format!("--kubelet-client-key={}", secret("kube-apiserver-kubelet-client.key")),
        format!("--kubelet-certificate-authority={}", secret(KUBELET_SERVING_CA_BUNDLE)),
        // Reach kubelets at their node IP, as OpenShift's kube-apiserver does: a node's short
        // hostname need not resolve from the control plane.
        "--kubelet-preferred-address-types=InternalIP".into(),
        "--enable-bootstrap-token-auth=true".into(),
        "--allow-privileged=true".into(),
        "--v=2".into(),
    ];
    let container = Container {
        name: "kube-apiserver".into(),
        image: Some(c.release.tag("hyperkube").into()),
        command: args(&cmd),
        volume_mounts: Some(vec![mount("secrets", SECRETS_MOUNT, true)]),
        liveness_probe: Some(https_probe("/healthz", 6443, 45)),
        readiness_probe: Some(https_probe("/readyz", 6443, 10)),
        resources: Some(requests("500m", "1Gi")),
        ..Default::default()
    };
    pod(
        meta("kube-apiserver-bootstrap", "openshift-kube-apiserver", "openshift-kube-apiserver"),
        container,
        vec![host_path("secrets", BOOTSTRAP_SECRETS, None)],
    )
}

pub fn kube_controller_manager(c: &Cluster) -> Pod {
    let kc = format!("{KUBECONFIGS_MOUNT}/kube-controller-manager.kubeconfig");
    let cluster_cidr = c.cluster_networks.iter().map(|n| n.cidr.to_string()).collect::<Vec<_>>().join(",");
    let service = c.service_networks.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(",");
    let cmd: Vec<String> = vec![
        "hyperkube".into(),
        "kube-controller-manager".into(),
        format!("--kubeconfig={kc}"),
        format!("--authentication-kubeconfig={kc}"),
        format!("--authorization-kubeconfig={kc}"),
        format!("--cluster-cidr={cluster_cidr}"),
        format!("--service-cluster-ip-range={service}"),
        "--allocate-node-cidrs=true".into(),
        format!("--service-account-private-key-file={}", secret("service-account.key")),
        // What pods trust for the API (kube-root-ca.crt): the bootstrap's and, after the pivot,
        // what the operator issues from the serving signers.
        format!("--root-ca-file={}", secret(SERVING_CA_BUNDLE)),
        "--use-service-account-credentials=true".into(),
        // As the installer's bootstrap overrides: kubelet certificates from kubelet-signer (the
        // csr-signer-signer the operator keeps trusting), for 30 days; never from kubernetes-ca,
        // which the operator's csr-controller-ca drops.
        format!("--cluster-signing-cert-file={}", secret("kubelet-signer.crt")),
        format!("--cluster-signing-key-file={}", secret("kubelet-signer.key")),
        "--cluster-signing-duration=720h".into(),
        "--leader-elect=true".into(),
        "--leader-elect-retry-period=3s".into(),
        "--leader-elect-resource-lock=leases".into(),
        "--controllers=*,bootstrapsigner,tokencleaner".into(),
        "--v=2".into(),
    ];
    let container = Container {
        name: "kube-controller-manager".into(),
        image: Some(c.release.tag("hyperkube").into()),
        command: args(&cmd),
        volume_mounts: Some(vec![
            mount("secrets", SECRETS_MOUNT, true),
            mount("kubeconfigs", KUBECONFIGS_MOUNT, true),
        ]),
        liveness_probe: Some(https_probe("/healthz", 10257, 45)),
        resources: Some(requests("200m", "256Mi")),
        ..Default::default()
    };
    pod(
        meta(
            "kube-controller-manager-bootstrap",
            "openshift-kube-controller-manager",
            "kube-controller-manager",
        ),
        container,
        vec![
            host_path("secrets", BOOTSTRAP_SECRETS, None),
            host_path("kubeconfigs", KUBECONFIGS_DIR, None),
        ],
    )
}

pub fn kube_scheduler(c: &Cluster) -> Pod {
    let kc = format!("{KUBECONFIGS_MOUNT}/kube-scheduler.kubeconfig");
    let cmd: Vec<String> = vec![
        "hyperkube".into(),
        "kube-scheduler".into(),
        format!("--kubeconfig={kc}"),
        format!("--authentication-kubeconfig={kc}"),
        format!("--authorization-kubeconfig={kc}"),
        "--leader-elect=true".into(),
        "--leader-elect-retry-period=3s".into(),
        "--leader-elect-resource-lock=leases".into(),
        "--v=2".into(),
    ];
    let container = Container {
        name: "kube-scheduler".into(),
        image: Some(c.release.tag("hyperkube").into()),
        command: args(&cmd),
        volume_mounts: Some(vec![mount("kubeconfigs", KUBECONFIGS_MOUNT, true)]),
        liveness_probe: Some(https_probe("/healthz", 10259, 45)),
        resources: Some(requests("100m", "128Mi")),
        ..Default::default()
    };
    pod(
        meta("kube-scheduler-bootstrap", "openshift-kube-scheduler", "openshift-kube-scheduler"),
        container,
        vec![host_path("kubeconfigs", KUBECONFIGS_DIR, None)],
    )
}

/// The cluster-version-operator: the release image itself (it reads /release-manifests).
/// bootkube.sh moves it into the manifest directory only after the CRDs are applied.
pub fn cluster_version_operator(c: &Cluster) -> Pod {
    let env = |n: &str, v: &str| EnvVar {
        name: n.into(),
        value: Some(v.into()),
        value_from: None,
    };
    let container = Container {
        name: "cluster-version-operator".into(),
        image: Some(c.release.image.clone()),
        args: args(&[
            "start".into(),
            format!("--release-image={}", c.release.image),
            "--enable-auto-update=false".into(),
            format!("--kubeconfig={KUBECONFIGS_MOUNT}/localhost.kubeconfig"),
            // Empty: no metrics listener, so it needs no serving certificate on bootstrap.
            "--listen=".into(),
            "--v=2".into(),
        ]),
        env: Some(vec![
            env("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
            env("KUBERNETES_SERVICE_PORT", "6443"),
            env("NODE_NAME", &c.bootstrap().hostname),
            env("CLUSTER_PROFILE", "self-managed-high-availability"),
        ]),
        security_context: Some(SecurityContext {
            privileged: Some(true),
            ..Default::default()
        }),
        volume_mounts: Some(vec![mount("kubeconfigs", KUBECONFIGS_MOUNT, true)]),
        ..Default::default()
    };
    let mut m = meta("cvo-bootstrap", "openshift-cluster-version", "cluster-version-operator");
    m.labels
        .get_or_insert_with(BTreeMap::new)
        .insert("k8s-app".into(), "cluster-version-operator".into());
    pod(m, container, vec![host_path("kubeconfigs", KUBECONFIGS_DIR, None)])
}

/// The bootstrap's static pods, by file name (the CVO is placed separately, see above).
pub fn bootstrap_pods(c: &Cluster) -> Vec<(&'static str, Pod)> {
    vec![
        ("etcd-bootstrap.yaml", etcd_bootstrap(c)),
        ("kube-apiserver-bootstrap.yaml", kube_apiserver(c)),
        ("kube-controller-manager-bootstrap.yaml", kube_controller_manager(c)),
        ("kube-scheduler-bootstrap.yaml", kube_scheduler(c)),
    ]
}

pub fn to_yaml(p: &Pod) -> String {
    crate::yamlout::to_yaml(&serde_json::to_value(p).expect("pod serializes"))
}
