//! The kubelet on every node: a KubeletConfiguration file and a unit that passes only the flags
//! kubelet has not deprecated (`--config`, the kubeconfigs, node IP, name and labels). Everything
//! else is a field of the file, so the kubelet logs no deprecation warning.

use super::paths::*;
use crate::cluster::{Cluster, Node, Role};
use serde_json::{json, Value};
use std::net::IpAddr;

/// Where CRI-O listens on RHCOS.
pub const CRIO_SOCKET: &str = "unix:///var/run/crio/crio.sock";

/// The cluster DNS service: the service network's tenth address (what the DNS operator takes).
fn cluster_dns(c: &Cluster) -> IpAddr {
    crate::cluster::nth_host(&c.service_networks[0], 10)
}

/// Fields every kubelet shares. Image pulls from a mirror are slow: pull in parallel and give the
/// runtime ten minutes per request, as the installer does for its bootstrap kubelet.
fn common() -> Value {
    json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
        "containerRuntimeEndpoint": CRIO_SOCKET,
        "staticPodPath": STATIC_PODS,
        "clusterDomain": "cluster.local",
        "readOnlyPort": 0,
        "runtimeRequestTimeout": "10m",
        "serializeImagePulls": false,
    })
}

fn merge(mut base: Value, extra: Value) -> Value {
    if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
        b.extend(e);
    }
    base
}

/// Masters and workers: client certificates from kube-apiserver's client CA only, every other
/// request authorized by the API server (SubjectAccessReview); the client certificate rotates and
/// the serving certificate comes from a `kubernetes.io/kubelet-serving` CSR, so the API server can
/// verify the kubelet it talks to (`--kubelet-certificate-authority`).
pub fn node_config(c: &Cluster, n: &Node) -> Value {
    let mut extra = json!({
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": true, "cacheTTL": "0s"},
            "x509": {"clientCAFile": super::mcs::KUBELET_CA},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [cluster_dns(c).to_string()],
        "rotateCertificates": true,
        "serverTLSBootstrap": true,
    });
    // Without workers the masters are schedulable (the Scheduler config says so): no taint.
    if n.role == Role::Master && c.nodes_with_role(Role::Worker).next().is_some() {
        extra["registerWithTaints"] = json!([{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}]);
    }
    merge(common(), extra)
}

/// The bootstrap kubelet runs static pods only and has no API client, so the webhook modes cannot
/// work: only holders of a certificate from kubernetes-ca (the API server's kubelet client) get in.
pub fn bootstrap_config() -> Value {
    merge(
        common(),
        json!({
            "authentication": {
                "anonymous": {"enabled": false},
                "webhook": {"enabled": false},
                "x509": {"clientCAFile": format!("{BOOTSTRAP_SECRETS}/kubernetes-ca.crt")},
            },
            "authorization": {"mode": "AlwaysAllow"},
        }),
    )
}

pub fn to_yaml(v: &Value) -> String {
    crate::yamlout::to_yaml(v)
}

/// A kubelet unit: `env` an optional EnvironmentFile, `flags` the ExecStart flags, one per line.
fn unit(description: &str, env: Option<&str>, flags: &[String]) -> String {
    let env = env.map(|f| format!("EnvironmentFile=-{f}\n")).unwrap_or_default();
    let flags: String = flags.iter().map(|f| format!("  {f} \\\n")).collect();
    format!(
        "[Unit]
Description={description}
Wants=rpc-statd.service network-online.target crio.service
After=network-online.target crio.service

[Service]
Type=notify
{env}ExecStartPre=/bin/mkdir -p {STATIC_PODS}
ExecStart=/usr/bin/kubelet \\
{flags}  --v=2
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
"
    )
}

/// The bootstrap kubelet: static pods only, no `--kubeconfig`, no `--bootstrap-kubeconfig`.
pub fn bootstrap_unit(n: &Node) -> String {
    unit(
        "Kubernetes Kubelet (bootstrap: static pods only)",
        None,
        &[
            format!("--config={KUBELET_CONFIG}"),
            format!("--node-ip={}", n.ip),
            format!("--hostname-override={}", n.hostname),
        ],
    )
}

/// Masters and workers without an MCO base: the kubelet bootstraps its client certificate through
/// a CSR with the bootstrap kubeconfig, then asks for its serving certificate.
pub fn node_unit(n: &Node) -> String {
    let labels = match n.role {
        Role::Master => "node-role.kubernetes.io/master,node-role.kubernetes.io/control-plane",
        _ => "node-role.kubernetes.io/worker",
    };
    unit(
        "Kubernetes Kubelet",
        Some(APISERVER_URL_ENV),
        &[
            format!("--config={KUBELET_CONFIG}"),
            format!("--bootstrap-kubeconfig={NODE_KUBECONFIG}"),
            format!("--kubeconfig={KUBELET_KUBECONFIG}"),
            format!("--node-ip={}", n.ip),
            format!("--hostname-override={}", n.hostname),
            format!("--node-labels={labels},node.openshift.io/os_id=rhcos"),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_config_turns_off_anonymous_and_read_only_and_asks_for_serving_certs() {
        let v = common();
        assert_eq!(v["readOnlyPort"], 0);
        let b = bootstrap_config();
        assert_eq!(b["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(b["authorization"]["mode"], "AlwaysAllow");
        assert_eq!(b["runtimeRequestTimeout"], "10m");
        assert_eq!(b["serializeImagePulls"], false);
    }
}
