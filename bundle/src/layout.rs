//! Where everything lives in a bundle directory, by name: what `create` writes, what the user
//! brings beside it, and what the collector keeps there. Spelled once, here; the modules that
//! write a part name it from here, and every reader finds it by the same name.

/// hardshift's own state: the record of the last `create`, the locks, the generations.
pub const STATE_DIR: &str = ".hardshift";
/// The sums of every file `create` wrote.
pub const SUMS: &str = "SHA256SUMS";
/// OpenShift's PKI (CAs, signers, leaves).
pub const PKI: &str = "pki";
/// The node agents' PKI (their CA, each node's client certificate, the collector's).
pub const AGENT_PKI: &str = "agent-pki";
pub const COLLECTOR_CERT: &str = "agent-pki/collector.crt";
pub const COLLECTOR_KEY: &str = "agent-pki/collector.key";
pub const AGENT_CA_CERT: &str = "agent-pki/agent-ca.crt";
pub const KUBERNETES_CA_CERT: &str = "pki/kubernetes-ca.crt";
/// One Ignition config per node: `ignition/<hostname>.ign`.
pub const IGNITION: &str = "ignition";
/// Each node's live system's config (`lab.liveAgent`): `live/<hostname>.ign`.
pub const LIVE: &str = "live";
pub const ADMIN_KUBECONFIG: &str = "auth/kubeconfig";
pub const KUBEADMIN_PASSWORD: &str = "auth/kubeadmin-password";
/// The install's pull secret as install-config gave it (0600): what the collector scrubs from
/// what leaves the workstation, without reading the inputs again.
pub const PULL_SECRET: &str = "auth/pull-secret.json";
/// What every reader after `create` knows the install by: its nodes, roles, addresses and names
/// (`inventory::Inventory`).
pub const INVENTORY: &str = "inventory.json";
/// The resolved cluster model (public; the pull secret left out), for people and `verify`.
pub const CLUSTER_JSON: &str = "cluster.json";
/// The bundle's root CA: its hash names the bundle (the cluster ID).
pub const ROOT_CA_CERT: &str = "pki/root-ca.crt";
pub const KUBECONFIGS: &str = "kubeconfigs";
/// The helper's configs (DNS, DHCP, PXE, HAProxy, libvirt, scripts).
pub const LAB: &str = "lab";
/// The agent to serve from the helper for `--agent-url`.
pub const SERVED_AGENT: &str = "http/hardshift-agent";
/// The MCO render's inputs and output.
pub const MCO: &str = "mco";
/// The release's own renders (`hardshift render`): their assets, outputs, logs and record.
pub const RENDER: &str = "render";
pub const RENDERS_RECORD: &str = "render/renders.json";
/// The release: its image references (brought, or pulled), its CRDs and the blob cache.
pub const RELEASE: &str = "release";
pub const RELEASE_REFS: &str = "release/image-references";
pub const RELEASE_CRDS: &str = "release/crds";
pub const RELEASE_CACHE: &str = "release/cache";
/// CRDs the user brings (the release's cluster-config-api CRDs).
pub const CRDS: &str = "crds";
/// What the collector keeps: its store, its admin socket, the CSR decisions.
pub const COLLECTOR: &str = "collector";
pub const REPORTS_DB: &str = "collector/reports.db";
pub const ADMIN_SOCKET: &str = "collector/admin.sock";
pub const CSR_DECISIONS: &str = "collector/csr-decisions.jsonl";

/// A node's Ignition config.
pub fn ignition(hostname: &str) -> String {
    format!("{IGNITION}/{hostname}.ign")
}

/// A node's live config.
pub fn live(hostname: &str) -> String {
    format!("{LIVE}/{hostname}.ign")
}

/// The node whose Ignition config `path` is, if it is one.
pub fn node_of_ignition(path: &str) -> Option<&str> {
    path.strip_prefix(IGNITION)?.strip_prefix('/')?.strip_suffix(".ign")
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_ignition_path_names_its_node() {
        assert_eq!(super::ignition("master-0"), "ignition/master-0.ign");
        assert_eq!(super::node_of_ignition("ignition/master-0.ign"), Some("master-0"));
        assert_eq!(super::node_of_ignition("lab/x.ign"), None);
    }
}
