//! Single-node OpenShift, bootstrap-in-place (install-config `bootstrapInPlace`): one config for
//! the one node, as the installer's `bootstrap-in-place-for-live-iso.ign` does it. The node boots
//! a live system that runs the bootstrap control plane (the bootstrap's parts, on this node);
//! once bootkube is done, hardshift's install-to-disk step stops etcd, makes the master's config
//! (the one `create` wrote, with etcd's data, the control plane's pods, secrets and configs
//! carried in by `hardshift-agent in-place-config`), writes it with RHCOS to the installation
//! disk (`coreos-installer install -n -i`, the installer's arguments) and reboots. From the disk
//! the kubelet runs the carried control plane, and the post-reboot step does what the installer's
//! does: bootstrap complete, the stale leases released, the node's own CSRs approved until it is
//! Ready, the kubelet restarted on the new pods, then the bootstrap's leftovers removed.
//! Both steps write their progress where the agent reads it.

use super::node::unit;
use super::parts::{self, Shared};
use super::paths::*;
use super::{agent, bootkube};
use crate::cluster::{Cluster, Node, Role};
use crate::ignition::{self, Config, Contents, MergeReport, NodeFile, SCRIPT, SECRET};

/// The master's config as `create` wrote it, on the live system.
pub const MASTER_BASE: &str = "/opt/openshift/hardshift/master-base.ign";
/// The master's complete config, made on the live system (the installer's path).
pub const MASTER_IGN: &str = "/opt/openshift/master.ign";
pub const INSTALL_TO_DISK: &str = "/usr/local/bin/hardshift-install-to-disk.sh";
pub const INSTALL_TO_DISK_UNIT: &str = "hardshift-install-to-disk.service";
pub const POST_REBOOT: &str = "/usr/local/bin/hardshift-post-reboot.sh";
pub const POST_REBOOT_UNIT: &str = "hardshift-post-reboot.service";
/// etcd's certificates from the etcd render (cluster-bootstrap's copy).
const ETCD_MEMBER: &str = "/etc/kubernetes/static-pod-resources/etcd-member";
/// Where stop-etcd moves etcd's pod, out of the kubelet's sight.
const ETCD_ASIDE: &str = "/opt/openshift/hardshift/etcd-pod.yaml";
/// The kubeconfig both control planes' bootkube uses (localhost, admin).
const LOOPBACK: &str = "/etc/kubernetes/kubeconfigs/localhost.kubeconfig";

/// The installer's file names for the control plane's static pods on the installed master
/// (master-update.fcc): the names the operators' installer pods write their revisions to, so
/// that theirs replace the bootstrap's.
fn installed_name(pod_file: &str) -> Option<&'static str> {
    [
        ("etcd", "etcd-pod.yaml"),
        ("kube-apiserver", "kube-apiserver-pod.yaml"),
        ("kube-controller-manager", "kube-controller-manager-pod.yaml"),
        ("kube-scheduler", "kube-scheduler-pod.yaml"),
    ]
    .into_iter()
    .find(|(prefix, _)| pod_file.starts_with(prefix))
    .map(|(_, name)| name)
}

/// What install-to-disk carries from the live system to the installed one (SRC, DEST): the
/// control plane's static pods under the installer's names (etcd's from where stop-etcd put it),
/// the directories they read, etcd's data and the agent. `pods`: the bootstrap's static pod files.
pub fn carried(pods: &[String], dirs: &[&str]) -> Vec<(String, String)> {
    let mut out = vec![];
    for p in pods {
        let Some(name) = installed_name(p) else { continue };
        let src = if name == "etcd-pod.yaml" {
            ETCD_ASIDE.to_string()
        } else {
            format!("{STATIC_PODS}/{p}")
        };
        out.push((src, format!("{STATIC_PODS}/{name}")));
    }
    for d in dirs {
        out.push((d.to_string(), d.to_string()));
    }
    out.push(("/var/lib/etcd".into(), "/var/lib/etcd".into()));
    out.push((agent::BINARY.into(), agent::BINARY.into()));
    out
}

/// The single node's config: the live system's (the bootstrap's parts on this node, the
/// install-to-disk step) with the master's inside. The report is the master's merge into its MCO base.
pub fn config(
    shared: &Shared,
    c: &Cluster,
    n: &Node,
    base: Option<&Config>,
    encode: &(dyn Fn(&[u8]) -> Contents + Sync),
) -> (Config, MergeReport) {
    // The master it becomes: its parts over the MCO base, less the agent's binary (carried from
    // the live system: one copy in the config), plus the post-reboot step.
    let mut master = parts::node_config(shared, n);
    master.files.retain(|f| f.path != agent::BINARY);
    master.files.push(NodeFile::new(POST_REBOOT, SCRIPT, post_reboot(c, n)));
    master.units.push(unit(POST_REBOOT_UNIT, POST_REBOOT_UNIT_TEXT.into()));
    let (master_cfg, report) = ignition::build_with(&master, base, encode);
    // The live system: the bootstrap's parts on this node.
    let live_node = Node {
        role: Role::Bootstrap,
        ..n.clone()
    };
    let mut live = parts::node_config(shared, &live_node);
    let mut pods: Vec<String> = live
        .files
        .iter()
        .filter_map(|f| f.path.strip_prefix(&format!("{STATIC_PODS}/")).map(String::from))
        .filter(|p| !p.contains('/'))
        .collect();
    pods.sort();
    // The directories the pods read, those this control plane has.
    let dirs: Vec<&str> = [BOOTSTRAP_SECRETS, KUBECONFIGS_DIR, BOOTSTRAP_CONFIGS, ETCD_MEMBER]
        .into_iter()
        .filter(|d| live.files.iter().any(|f| f.path.starts_with(&format!("{d}/"))))
        .collect();
    let etcd_pod = pods
        .iter()
        .find(|p| installed_name(p) == Some("etcd-pod.yaml"))
        .cloned()
        .unwrap_or_default();
    let carry = carried(&pods, &dirs);
    live.files.push(NodeFile::new(MASTER_BASE, SECRET, ignition::to_json(&master_cfg)));
    live.files
        .push(NodeFile::new(INSTALL_TO_DISK, SCRIPT, install_to_disk(c, &etcd_pod, &carry)));
    live.units.push(unit(INSTALL_TO_DISK_UNIT, INSTALL_TO_DISK_UNIT_TEXT.into()));
    let (cfg, _) = ignition::build_with(&live, None, encode);
    (cfg, report)
}

/// The installation disk's floor (OpenShift's single-node requirement: 120 GB).
pub const MIN_DISK_BYTES: u64 = 120_000_000_000;

/// The live system's last step (the installer's install-to-disk.sh and bootstrap-in-place.sh):
/// the disk checked first (nothing is stopped for a disk that is not there), then, once bootkube
/// is done, etcd stopped, the master's config made, RHCOS written, the reboot.
pub fn install_to_disk(c: &Cluster, etcd_pod: &str, carry: &[(String, String)]) -> String {
    let disk = c
        .bootstrap_in_place
        .as_ref()
        .map(|b| b.installation_disk.as_str())
        .unwrap_or_default();
    let carry_args: String = carry.iter().map(|(s, d)| format!(" \\\n    --carry {s}={d}")).collect();
    let record = bootkube::RECORD;
    crate::scripts::fill(
        crate::scripts::INSTALL_TO_DISK,
        &[
            ("INSTALL_TO_DISK_UNIT", &INSTALL_TO_DISK_UNIT),
            ("IN_PLACE_PROGRESS", &IN_PLACE_PROGRESS),
            ("disk", &disk),
            ("ASSET_DIR", &ASSET_DIR),
            ("record", &record),
            ("MIN_DISK_BYTES", &MIN_DISK_BYTES),
            ("STATIC_PODS", &STATIC_PODS),
            ("etcd_pod", &etcd_pod),
            ("ETCD_ASIDE", &ETCD_ASIDE),
            ("MASTER_BASE", &MASTER_BASE),
            ("MASTER_IGN", &MASTER_IGN),
            ("carry_args", &carry_args),
        ],
    )
}

const INSTALL_TO_DISK_UNIT_TEXT: &str = "[Unit]
Description=hardshift: a single node's master config onto its installation disk, then the reboot
# Not After=bootkube.service (a oneshot: that would wait for it to finish): the disk is checked at
# once, and the script waits for bootkube's marker itself.
Wants=bootkube.service network-online.target
After=network-online.target
ConditionPathExists=!/opt/openshift/.install-to-disk.done

[Service]
Type=oneshot
WorkingDirectory=/opt/openshift
ExecStart=/usr/local/bin/hardshift-install-to-disk.sh
Restart=on-failure
RestartSec=30
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
";

const POST_REBOOT_UNIT_TEXT: &str = "[Unit]
Description=hardshift: a single node's bootstrap, finished from its installed system
Wants=kubelet.service
After=kubelet.service
ConditionPathExists=/etc/kubernetes/bootstrap-secrets

[Service]
Type=oneshot
ExecStart=/usr/local/bin/hardshift-post-reboot.sh
Restart=on-failure
RestartSec=30

[Install]
WantedBy=multi-user.target
";

/// The installed system's first step (the installer's bootstrap-in-place-post-reboot.sh, in its
/// order). Only this node's own CSRs are approved (its kubelet's client and serving certificates),
/// and only until it is Ready: `hardshift-agent approve-csrs` decides each by `hardshift
/// approve-csrs`'s rules (the bootstrap identity, the node's name, O, signer, usages, its own
/// names and address), not by who asked.
pub fn post_reboot(c: &Cluster, n: &Node) -> String {
    let node = &n.hostname;
    let ip = n.ip;
    let fqdn = format!("{node}.{}", c.domain());
    let agent = agent::BINARY;
    let record = bootkube::RECORD;
    crate::scripts::fill(
        crate::scripts::POST_REBOOT,
        &[
            ("POST_REBOOT_UNIT", &POST_REBOOT_UNIT),
            ("IN_PLACE_PROGRESS", &IN_PLACE_PROGRESS),
            ("node", &node),
            ("LOOPBACK", &LOOPBACK),
            ("record", &record),
            ("agent", &agent),
            ("ip", &ip),
            ("fqdn", &fqdn),
            ("STATIC_PODS", &STATIC_PODS),
            ("BOOTSTRAP_SECRETS", &BOOTSTRAP_SECRETS),
            ("BOOTSTRAP_CONFIGS", &BOOTSTRAP_CONFIGS),
            ("ASSET_DIR", &ASSET_DIR),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_control_planes_pods_go_under_the_installers_names() {
        let own = [
            "etcd-bootstrap.yaml",
            "kube-apiserver-bootstrap.yaml",
            "kube-controller-manager-bootstrap.yaml",
            "kube-scheduler-bootstrap.yaml",
        ]
        .map(String::from);
        let c = carried(&own, &[BOOTSTRAP_SECRETS]);
        assert!(c.contains(&(ETCD_ASIDE.into(), "/etc/kubernetes/manifests/etcd-pod.yaml".into())));
        assert!(c.contains(&(
            "/etc/kubernetes/manifests/kube-apiserver-bootstrap.yaml".into(),
            "/etc/kubernetes/manifests/kube-apiserver-pod.yaml".into()
        )));
        let renders = [
            "etcd-member-pod.yaml",
            "kube-apiserver-pod.yaml",
            "machineconfigoperator-bootstrap-pod.yaml",
            "cvo-bootstrap.yaml",
        ]
        .map(String::from);
        let c = carried(&renders, &[]);
        let dests: Vec<&str> = c.iter().map(|(_, d)| d.as_str()).collect();
        assert!(
            !dests.iter().any(|d| d.contains("machineconfigoperator") || d.contains("cvo")),
            "{dests:?}"
        );
        assert!(dests.contains(&"/var/lib/etcd") && dests.contains(&agent::BINARY));
    }
}
