//! Where things live on the nodes (the tutorial's layout; bootkube.sh in /usr/local/bin for its
//! SELinux exec context).

pub const BOOTSTRAP_SECRETS: &str = "/etc/kubernetes/bootstrap-secrets";
pub const SECRETS_MOUNT: &str = "/etc/kubernetes/secrets";
pub const KUBECONFIGS_DIR: &str = "/etc/kubernetes/kubeconfigs";
pub const KUBECONFIGS_MOUNT: &str = "/etc/kubernetes/kubeconfigs";
pub const STATIC_PODS: &str = "/etc/kubernetes/manifests";
/// Where the renders' bootstrap pods read their configs (`--openshift-config`), as bootkube.sh copies them.
pub const BOOTSTRAP_CONFIGS: &str = "/etc/kubernetes/bootstrap-configs";
/// etcd's certificates from its render (`etcd-member/`), as bootkube.sh copies them.
pub const STATIC_POD_RESOURCES: &str = "/etc/kubernetes/static-pod-resources";
pub const ASSET_DIR: &str = "/opt/openshift";
/// Under ASSET_DIR: what bootkube applies once the cluster-version-operator has installed the
/// release's CRDs (`manifests::after_cvo`).
pub const AFTER_CVO: &str = "manifests-after-cvo";
pub const CVO_STAGED: &str = "/opt/openshift/cvo/cvo-bootstrap.yaml";
pub const BOOTKUBE: &str = "/usr/local/bin/bootkube.sh";
pub const BOOTKUBE_PROGRESS: &str = "/var/lib/hardshift/bootkube.json";
/// A single node's install-to-disk and post-reboot steps' progress (the live system's and then
/// the disk's): what the agent reports.
pub const IN_PLACE_PROGRESS: &str = "/var/lib/hardshift/in-place.json";
/// The kubelet's bootstrap kubeconfig on masters and workers.
pub const NODE_KUBECONFIG: &str = "/etc/kubernetes/kubeconfig";
/// The machine-config server's serving certificate on the bootstrap (the MCO's bootstrap pod
/// mounts /etc/ssl/mcs).
pub const MCS_TLS_CERT: &str = "/etc/ssl/mcs/tls.crt";
pub const MCS_TLS_KEY: &str = "/etc/ssl/mcs/tls.key";
pub const APISERVER_URL_ENV: &str = "/etc/kubernetes/apiserver-url.env";
pub const PULL_SECRET: &str = "/var/lib/kubelet/config.json";
pub const PAUSE_CONF: &str = "/etc/crio/crio.conf.d/00-pause.conf";
pub const REGISTRIES_CONF: &str = "/etc/containers/registries.conf";
pub const TRUST_ANCHOR: &str = "/etc/pki/ca-trust/source/anchors/hardshift-additional-trust-bundle.crt";
pub const PROXY_ENV: &str = "/etc/hardshift/proxy.env";
/// The kubelet's KubeletConfiguration (where the MCO puts it).
pub const KUBELET_CONFIG: &str = "/etc/kubernetes/kubelet.conf";
/// The kubeconfig the kubelet writes once its client CSR is signed.
pub const KUBELET_KUBECONFIG: &str = "/var/lib/kubelet/kubeconfig";
/// CA bundles in the bootstrap's secrets (pki::trust): the API server's client CAs, what verifies
/// kubelets' serving certificates, and what verifies the API server (the controller-manager's
/// root CA for pods).
pub const CLIENT_CA_BUNDLE: &str = "client-ca-bundle.crt";
pub const KUBELET_SERVING_CA_BUNDLE: &str = "kubelet-serving-ca-bundle.crt";
pub const SERVING_CA_BUNDLE: &str = "serving-ca-bundle.crt";
