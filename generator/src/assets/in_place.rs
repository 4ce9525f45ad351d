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
    format!(
        r#"#!/bin/bash
# Generated by hardshift. A single node's live system, after bootkube: the master's config onto
# the installation disk, then the reboot into it ({INSTALL_TO_DISK_UNIT}).
set -uo pipefail
PROGRESS={IN_PLACE_PROGRESS}
DISK={disk}
ASSETS={ASSET_DIR}
mkdir -p "$ASSETS/hardshift"
{record}
stage=installation-disk
if [ ! -b "$DISK" ]; then
    record failed "installation disk $DISK not found; this machine's disks: $(lsblk -dno NAME,SIZE,MODEL 2>/dev/null | tr -s ' \n' ' ')"
    exit 1
fi
size=$(blockdev --getsize64 "$DISK")
if (( size < {MIN_DISK_BYTES} )); then
    record failed "installation disk $DISK holds $((size / 1000000000)) GB; a single node needs at least 120 GB"
    exit 1
fi
record done

stage=wait-for-bootkube
record waiting
until [ -e "$ASSETS/.bootkube.done" ]; do sleep 5; done
record done

# etcd stopped, so its data is whole when it is copied.
stage=stop-etcd
record running
if [ -e "{STATIC_PODS}/{etcd_pod}" ]; then mv "{STATIC_PODS}/{etcd_pod}" "{ETCD_ASIDE}"; fi
start=$SECONDS
while crictl ps --state running --name '^etcd$' -q 2>/dev/null | grep -q .; do
    if (( SECONDS - start > 300 )); then record failed "etcd still runs 300 s after its pod was removed"; exit 1; fi
    sleep 5
done
record done

stage=master-ignition
record running
if ! out=$(/usr/local/bin/hardshift-agent in-place-config --base {MASTER_BASE} --output {MASTER_IGN}{carry_args} 2>&1); then
    record failed "$out"
    exit 1
fi
record done

stage=coreos-installer
if [ ! -e "$ASSETS/hardshift/coreos-installer.done" ]; then
    record running
    if ! command -v coreos-installer >/dev/null; then
        record failed "coreos-installer not found: this live system is not RHCOS's live ISO or PXE image"
        exit 1
    fi
    if ! out=$(coreos-installer install -n -i {MASTER_IGN} "$DISK" 2>&1); then
        record failed "$out"
        exit 1
    fi
    touch "$ASSETS/hardshift/coreos-installer.done"
fi
record done

stage=reboot
record running
shutdown -r +1 "hardshift: the installation disk is written; rebooting into the single node's master"
touch "$ASSETS/.install-to-disk.done"
record done
"#
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
    format!(
        r#"#!/bin/bash
# Generated by hardshift. A single node's installed system, once: finish its bootstrap ({POST_REBOOT_UNIT}).
set -uo pipefail
PROGRESS={IN_PLACE_PROGRESS}
NODE={node}
export KUBECONFIG={LOOPBACK}
OC=$(command -v oc || command -v kubectl)
{record}
stage=post-reboot-api
record waiting
until "$OC" get --raw=/readyz >/dev/null 2>&1; do sleep 5; done
record done

# What `wait-for bootstrap-complete` and the etcd operator look for.
stage=bootstrap-complete
record running
until "$OC" get configmap bootstrap -n kube-system >/dev/null 2>&1 ||
      "$OC" create configmap bootstrap -n kube-system --from-literal status=complete >/dev/null 2>&1; do sleep 5; done
record done

# Leases the live system held: the CVO and the cluster-policy-controller would wait them out.
stage=release-leases
record running
for lease in openshift-cluster-version/version kube-system/cluster-policy-controller-lock; do
    "$OC" delete lease -n "${{lease%/*}}" "${{lease#*/}}" --ignore-not-found >/dev/null 2>&1
    "$OC" delete configmap -n "${{lease%/*}}" "${{lease#*/}}" --ignore-not-found >/dev/null 2>&1
done
record done

# This node's CSRs alone, decided by hardshift's rules (hardshift-agent approve-csrs): its
# kubelet's first client certificate and its serving certificate, nothing another identity asks.
ready() {{
    [ "$("$OC" get node "$NODE" -o jsonpath='{{.status.conditions[?(@.type=="Ready")].status}}' 2>/dev/null)" = True ]
}}
stage=approve-csrs
record running "waiting for node $NODE to be Ready"
lists=$(mktemp -d)
until ready; do
    if "$OC" get csr -o json >"$lists/csrs.json" 2>/dev/null && "$OC" get nodes -o json >"$lists/nodes.json" 2>/dev/null; then
        {agent} approve-csrs --node "$NODE" --ip {ip} --dns "$NODE" --dns {fqdn} \
            --csrs "$lists/csrs.json" --nodes "$lists/nodes.json" |
        while read -r name; do
            "$OC" adm certificate approve "$name" >/dev/null 2>&1 || "$OC" certificate approve "$name" >/dev/null 2>&1
        done
    fi
    # Not recorded again here: the record's age is how long the node has waited (HS093).
    sleep 10
done
rm -rf "$lists"
record done

# The kube-apiserver operator's revision replaces the bootstrap's pod; the kubelet restarted
# then picks up its node-IP drop-in (the MCO's nodeip-configuration).
stage=restart-kubelet
record running
until "$OC" get pods -n openshift-kube-apiserver-operator -l app=kube-apiserver-operator \
      -o jsonpath='{{.items[*].status.conditions[?(@.type=="Ready")].status}}' 2>/dev/null | grep -q True; do sleep 10; done
systemctl daemon-reload && systemctl restart kubelet
while grep -q -e 'name: kube-apiserver-bootstrap' -e 'name: bootstrap-kube-apiserver' {STATIC_PODS}/kube-apiserver-pod.yaml 2>/dev/null; do sleep 10; done
systemctl restart kubelet
record done

stage=wait-for-cvo
record waiting
until [ "$("$OC" get clusterversion version -o jsonpath='{{.status.conditions[?(@.type=="Available")].status}}' 2>/dev/null)" = True ]; do sleep 20; done
record done

stage=clean
record running
rm -rf {BOOTSTRAP_SECRETS} {BOOTSTRAP_CONFIGS} {ASSET_DIR}
systemctl disable {POST_REBOOT_UNIT}
stage=complete
record done
"#
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
