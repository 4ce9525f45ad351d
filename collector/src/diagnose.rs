//! Why a node is stuck: rules over its newest report, each with an id, a severity, the evidence
//! it fired on and a fix. Causes come before consequences: a finding lists the rules it
//! explains, and those are dropped (a stopped kubelet is the cause, not also "a CSR waits" and
//! "the kubelet does not answer"). Pure: the report and its age in, findings out.

use crate::phase::Member;
use hardshift_proto::v1::{ComponentState, Health, HostState, NodeReport};
use hardshift_proto::vocab::{install, state, unit, Component, InstallStage};
use serde::Serialize;

/// Clock drift beyond this breaks TLS handshakes and certificate validity windows sooner or later.
pub const CLOCK_SKEW_WARN_MS: i64 = 2_000;
/// A node that has not reported for this long is silent.
pub const SILENT_AFTER_MS: i64 = 30_000;
const CLOCK_SKEW_MS: i64 = CLOCK_SKEW_WARN_MS;
/// OpenShift's minimums: control plane 16 GiB of memory, compute 8 GiB.
const MIN_MEMORY_CONTROL: u64 = 16 << 30;
const MIN_MEMORY_COMPUTE: u64 = 8 << 30;
/// Below this free in /var, image pulls and etcd fail.
const MIN_VAR_FREE: u64 = 10 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub id: &'static str,
    pub severity: Severity,
    pub node: String,
    pub title: String,
    pub evidence: Vec<String>,
    pub fix: String,
    /// Rules this finding explains: not shown while it stands.
    #[serde(skip)]
    pub explains: &'static [&'static str],
}

/// What a rule reads: one node's newest report and how long ago it arrived.
pub struct Seen<'a> {
    pub node: &'a str,
    pub role: &'a str,
    pub report: &'a NodeReport,
    pub host: HostState,
    pub seen_ago_ms: i64,
}

impl Seen<'_> {
    fn comp(&self, c: Component) -> Option<&ComponentState> {
        c.in_report(&self.report.components)
    }
    fn comp_with(&self, c: Component, h: Health) -> Option<&ComponentState> {
        self.comp(c).filter(|c| c.health == h as i32)
    }
    /// A watched systemd unit (`vocab::unit`).
    fn unit(&self, name: &str) -> Option<&ComponentState> {
        self.report.components.iter().find(|c| c.name == name)
    }
}

/// What a rule says when it fires; its id, severity and what it explains are its table row's.
pub struct Said {
    pub title: String,
    pub evidence: Vec<String>,
    pub fix: String,
}

fn said_as(title: impl Into<String>, evidence: Vec<String>, fix: impl Into<String>) -> Option<Said> {
    Some(Said {
        title: title.into(),
        evidence,
        fix: fix.into(),
    })
}

/// One rule: its id and subject, how bad it is, the findings it explains (dropped while it
/// stands: the cause→consequence graph, as data) and its check. Adding a rule is adding a row.
pub struct Rule {
    pub id: &'static str,
    pub about: &'static str,
    pub severity: Severity,
    pub explains: &'static [&'static str],
    /// What it matches elsewhere: an assisted-service host validation id (`ntp-synced`) or a
    /// node-problem-detector condition or reason (`KernelDeadlock`, `OOMKilling`); docs/hardware.md.
    pub covers: &'static [&'static str],
    pub check: fn(&Seen) -> Option<Said>,
}

use Severity::{Critical, Info, Warning};

/// The rules, in cause-before-consequence order (the order findings are shown in, within a
/// severity). One row each.
#[rustfmt::skip]
pub const RULES: &[Rule] = &[
    Rule { id: "HS001", about: "the node is silent", severity: Critical, explains: &[], covers: &["connected"], check: silent },
    Rule { id: "HS002", about: "the agent connected but no report is stored", severity: Warning, explains: &[], covers: &[], check: without_a_report },
    Rule { id: "HS003", about: "a node of the bundle never reported", severity: Warning, explains: &[], covers: &["has-inventory"], check: without_a_report },
    Rule { id: "HS004", about: "a node never asked for DHCP while a machine of its vendor, not in the inventory, did (a MAC typo)", severity: Critical, explains: &[], covers: &[], check: without_a_report },
    Rule { id: "HS005", about: "a node never asked the helper for an address", severity: Critical, explains: &[], covers: &[], check: without_a_report },
    Rule { id: "HS006", about: "a node got its DHCP lease and asked for no boot file", severity: Critical, explains: &[], covers: &[], check: without_a_report },
    Rule { id: "HS007", about: "a boot file a node asked for was refused or missing (403, 404, TFTP)", severity: Critical, explains: &[], covers: &[], check: without_a_report },
    Rule { id: "HS008", about: "a node's live rootfs download was cut short", severity: Critical, explains: &[], covers: &[], check: without_a_report },
    Rule { id: "HS009", about: "a node fetched its config, and its agent never reported", severity: Critical, explains: &[], covers: &[], check: without_a_report },
    Rule { id: "HS011", about: "the live system's installation disk is missing or not a disk", severity: Critical, explains: &["HS001", "HS120"], covers: &["Starting installation", "has-min-valid-disks"], check: live_disk },
    Rule { id: "HS012", about: "coreos-installer failed on the live system", severity: Critical, explains: &["HS001"], covers: &["Writing image to disk", "error"], check: live_failed },
    Rule { id: "HS013", about: "the image write to disk stopped moving", severity: Critical, explains: &["HS001", "HS016"], covers: &["Writing image to disk timeout"], check: live_stuck },
    Rule { id: "HS014", about: "the disk was written, and the installed system never reported", severity: Critical, explains: &["HS001"], covers: &["Rebooting timeout", "Waiting for ignition"], check: live_no_return },
    Rule { id: "HS015", about: "the node booted its live system again after its disk was written (boot order)", severity: Critical, explains: &["HS016", "HS014"], covers: &["installing-pending-user-action"], check: without_a_report },
    Rule { id: "HS016", about: "the live system is installing, or rebooting into the installed system", severity: Info, explains: &["HS001"], covers: &["Starting installation", "Writing image to disk", "Rebooting"], check: live_working },
    Rule { id: "HS010", about: "clock skew", severity: Critical, explains: &["HS031", "HS021", "HS030"], covers: &["time-synced-between-host-and-service"], check: clock_skew },
    Rule { id: "HS070", about: "the hostname is not the node's name", severity: Critical, explains: &["HS030"], covers: &["hostname-valid"], check: wrong_hostname },
    Rule { id: "HS071", about: "DNS answers differ from the bundle's zones", severity: Critical, explains: &["HS030", "HS072", "HS044"], covers: &["api-domain-name-resolved-correctly", "api-int-domain-name-resolved-correctly", "apps-domain-name-resolved-correctly"], check: wrong_dns },
    Rule { id: "HS072", about: "the load balancer does not forward the API", severity: Critical, explains: &["HS030"], covers: &[], check: lb_down },
    Rule { id: "HS100", about: "a NIC in use has no link", severity: Critical, explains: &["HS102", "HS105", "HS106", "HS104", "HS071", "HS072", "HS044", "HS108", "HS107"], covers: &[], check: nic_down },
    Rule { id: "HS102", about: "no default route", severity: Critical, explains: &["HS104", "HS044"], covers: &["has-default-route"], check: no_default_route },
    Rule { id: "HS103", about: "the node's address is not the bundle's or outside the machine network", severity: Critical, explains: &["HS105"], covers: &["belongs-to-machine-cidr"], check: outside_machine_network },
    Rule { id: "HS106", about: "the path to other nodes drops frames of the interface's MTU", severity: Critical, explains: &[], covers: &["mtu-valid"], check: path_mtu },
    Rule { id: "HS105", about: "packet loss or latency to other nodes", severity: Critical, explains: &[], covers: &["sufficient-network-latency-requirement-for-role", "sufficient-packet-loss-requirement-for-role"], check: peers_lossy },
    Rule { id: "HS107", about: "a DNS wildcard under the cluster's domain", severity: Critical, explains: &[], covers: &["dns-wildcard-not-configured"], check: dns_wildcard },
    Rule { id: "HS108", about: "the node's address has no PTR record to its name", severity: Warning, explains: &[], covers: &[], check: no_ptr },
    Rule { id: "HS121", about: "the kernel's FIPS mode is not the bundle's", severity: Critical, explains: &[], covers: &[], check: fips_mismatch },
    Rule { id: "HS122", about: "swap is on: the kubelet will not start", severity: Critical, explains: &["HS020", "HS021", "HS030", "HS041", "HS043"], covers: &[], check: swap_on },
    Rule { id: "HS123", about: "the kernel's open-file table is nearly full", severity: Critical, explains: &[], covers: &[], check: file_table_full },
    Rule { id: "HS120", about: "the installation disk is removable, read-only or too small", severity: Warning, explains: &[], covers: &["has-min-valid-disks"], check: install_disk },
    Rule { id: "HS114", about: "I/O errors in the kernel log", severity: Critical, explains: &["HS115", "HS116", "HS051"], covers: &["IOError"], check: kernel_io },
    Rule { id: "HS115", about: "filesystem errors in the kernel log", severity: Critical, explains: &["HS116"], covers: &["Ext4Error", "Ext4Warning"], check: kernel_fs },
    Rule { id: "HS116", about: "a filesystem went read-only", severity: Critical, explains: &[], covers: &["ReadonlyFilesystem", "XfsShutdown"], check: kernel_read_only },
    Rule { id: "HS113", about: "hardware errors (machine check, EDAC)", severity: Critical, explains: &[], covers: &["MemoryReadError"], check: kernel_hardware },
    Rule { id: "HS110", about: "a kernel oops", severity: Critical, explains: &[], covers: &["KernelOops"], check: kernel_oops },
    Rule { id: "HS111", about: "tasks hung in the kernel", severity: Critical, explains: &[], covers: &["TaskHung", "KernelDeadlock", "DockerHung"], check: kernel_hung },
    Rule { id: "HS112", about: "a network device that cannot be freed", severity: Critical, explains: &[], covers: &["UnregisterNetDevice"], check: kernel_netdev },
    Rule { id: "HS119", about: "a reboot loop", severity: Critical, explains: &[], covers: &[], check: reboot_loop },
    Rule { id: "HS104", about: "NTP is not synchronized", severity: Warning, explains: &["HS010"], covers: &["ntp-synced"], check: ntp_unsynced },
    Rule { id: "HS101", about: "a NIC in use is degraded (bond member down, errors, flapping)", severity: Warning, explains: &[], covers: &[], check: nic_degraded },
    Rule { id: "HS117", about: "the OOM killer killed processes", severity: Warning, explains: &[], covers: &["OOMKilling"], check: kernel_oom },
    Rule { id: "HS118", about: "a NIC's link went down", severity: Warning, explains: &[], covers: &[], check: kernel_link_down },
    Rule { id: "HS020", about: "kubelet.service is not running", severity: Critical, explains: &["HS021", "HS030", "HS041", "HS043"], covers: &["FrequentKubeletRestart", "KubeletUnhealthy"], check: kubelet_unit_down },
    Rule { id: "HS022", about: "crio.service is not running", severity: Critical, explains: &["HS040", "HS021", "HS041", "HS042", "HS043"], covers: &["FrequentContainerdRestart"], check: crio_unit_down },
    Rule { id: "HS040", about: "the container runtime is not ready", severity: Critical, explains: &["HS021", "HS041", "HS043"], covers: &["ContainerRuntimeUnhealthy"], check: runtime_not_ready },
    Rule { id: "HS051", about: "the disk under etcd is too slow", severity: Warning, explains: &[], covers: &["sufficient-installation-disk-speed"], check: slow_etcd_disk },
    Rule { id: "HS050", about: "etcd is unhealthy", severity: Critical, explains: &[], covers: &[], check: etcd_unhealthy },
    Rule { id: "HS060", about: "/var is nearly full", severity: Critical, explains: &["HS042", "HS043"], covers: &[], check: var_full },
    Rule { id: "HS061", about: "less memory than OpenShift's minimum", severity: Warning, explains: &[], covers: &["has-memory-for-role", "has-min-memory"], check: too_little_memory },
    Rule { id: "HS062", about: "fewer CPUs than OpenShift's minimum", severity: Warning, explains: &[], covers: &["has-cpu-cores-for-role", "has-min-cpu-cores"], check: too_few_cpus },
    Rule { id: "HS044", about: "the node cannot pull from its registry", severity: Critical, explains: &["HS042"], covers: &["container-images-available"], check: registry_refuses },
    Rule { id: "HS042", about: "images cannot be pulled", severity: Critical, explains: &["HS043"], covers: &[], check: pulls_fail },
    Rule { id: "HS031", about: "the kubelet's client certificate is not valid", severity: Critical, explains: &["HS021"], covers: &[], check: cert_invalid },
    Rule { id: "HS032", about: "the kubelet's client certificate expires soon", severity: Warning, explains: &[], covers: &[], check: cert_expiring },
    Rule { id: "HS030", about: "the kubelet's client CSR waits for approval", severity: Warning, explains: &["HS021", "HS041"], covers: &[], check: csr_waits },
    Rule { id: "HS021", about: "the kubelet does not answer /healthz", severity: Critical, explains: &[], covers: &["KubeletUnhealthy"], check: kubelet_silent },
    Rule { id: "HS043", about: "containers keep failing", severity: Warning, explains: &[], covers: &[], check: containers_fail },
    Rule { id: "HS041", about: "no CNI network yet", severity: Info, explains: &[], covers: &[], check: no_cni },
    Rule { id: "HS080", about: "bootkube failed", severity: Critical, explains: &[], covers: &[], check: bootkube_failed },
    Rule { id: "HS081", about: "bootkube is still working", severity: Info, explains: &[], covers: &[], check: bootkube_working },
    Rule { id: "HS090", about: "a single node's installation disk is missing or too small", severity: Critical, explains: &["HS120"], covers: &["has-min-valid-disks"], check: in_place_disk },
    Rule { id: "HS091", about: "a single node could not write its installation disk", severity: Critical, explains: &[], covers: &[], check: in_place_failed },
    Rule { id: "HS092", about: "a single node did not reboot into its installed system", severity: Critical, explains: &[], covers: &[], check: in_place_no_reboot },
    Rule { id: "HS093", about: "a single node's post-reboot step waits for the node to be Ready", severity: Warning, explains: &[], covers: &[], check: in_place_not_ready },
    Rule { id: "HS094", about: "a single node's bootstrap-in-place is still working", severity: Info, explains: &[], covers: &[], check: in_place_working },
];

fn rule(id: &str) -> &'static Rule {
    RULES.iter().find(|r| r.id == id).expect("a rule of the table")
}

/// What rule `id` is about ("bootkube failed"); empty for an id not in the table.
pub fn about(id: &str) -> &'static str {
    RULES.iter().find(|r| r.id == id).map_or("", |r| r.about)
}

impl Rule {
    fn finding(&self, node: &str, s: Said) -> Finding {
        Finding {
            id: self.id,
            severity: self.severity,
            node: node.to_string(),
            title: s.title,
            evidence: s.evidence,
            fix: s.fix,
            explains: self.explains,
        }
    }
}

fn failing(c: Option<&ComponentState>) -> bool {
    c.is_some_and(|c| Health::of(c.health).is_down())
}

/// What systemd's own codes say of a unit that does not run because the machine lacks it: not
/// installed, or its program missing (status 203/EXEC). Not a config problem: the machine is not
/// the OS the bundle is for (RHCOS ships the kubelet and CRI-O).
fn lacks_program(c: &ComponentState) -> Option<String> {
    if c.health == Health::Absent as i32 {
        return Some(format!("{} is not installed on this machine (RHCOS ships it)", c.name));
    }
    (c.details.get("ExecMainStatus").map(String::as_str) == Some("203")).then(|| {
        format!(
            "systemd cannot execute {}'s program (exit status 203/EXEC): it is missing or not executable (RHCOS ships it)",
            c.name
        )
    })
}

const NOT_RHCOS_FIX: &str = "boot the node from the release's RHCOS (coreos-installer, lab/scripts/): this machine lacks the program, so no config change can start it";

fn said(c: &ComponentState) -> String {
    if c.reason.is_empty() {
        format!("{}: {}", c.name, c.state)
    } else {
        format!("{}: {} ({})", c.name, c.state, c.reason)
    }
}

/// HS002 and HS003 speak of nodes without a report (`no_report`, `never_reported`): there is
/// nothing for a check to read.
fn without_a_report(_: &Seen) -> Option<Said> {
    None
}

fn silent(s: &Seen) -> Option<Said> {
    (s.seen_ago_ms > SILENT_AFTER_MS).then_some(())?;
    said_as(
        format!("{} has not reported for {} s", s.node, s.seen_ago_ms / 1000),
        vec!["what follows is from its last report".into()],
        "the node is down, rebooting or cut off from the collector: check its console, its network and `systemctl status hardshift-agent`",
    )
}

fn clock_skew(s: &Seen) -> Option<Said> {
    let cert = s.comp(Component::KubeletCert).filter(|c| c.state == state::NOT_YET_VALID);
    let off = s.host.clock_offset_known && s.host.clock_offset_ms.abs() > CLOCK_SKEW_MS;
    if !off && cert.is_none() {
        return None;
    }
    let mut ev = Vec::new();
    if s.host.clock_offset_known {
        ev.push(format!(
            "clock offset to the collector: {:+.1} s",
            s.host.clock_offset_ms as f64 / 1000.0
        ));
    }
    ev.extend(cert.map(said));
    said_as(
        format!("{}'s clock is off: certificates look not yet valid or expired", s.node),
        ev,
        "point chrony at a reachable NTP server (a chrony MachineConfig, or the helper) and check `chronyc tracking`",
    )
}

/// The kubelet registers, and asks for certificates, under the hostname: a wrong one is a Node
/// nobody expects and CSRs the approver refuses.
fn wrong_hostname(s: &Seen) -> Option<Said> {
    let h = &s.host.hostname;
    let short = h.split('.').next().unwrap_or("");
    if h.is_empty() || short == s.node {
        return None;
    }
    let local = matches!(short, "localhost" | "localhost6" | "fedora" | "");
    said_as(
        format!("{}'s hostname is {h:?}", s.node),
        vec![format!(
            "the kubelet will register as {short:?} and its CSRs will name it, not {}{}",
            s.node,
            if local { " (no name came from DHCP, DNS or the Ignition config)" } else { "" }
        )],
        "give the node its name: a DHCP host entry or reverse DNS for its address (the lab's dnsmasq/dhcpd configs), or `hostnamectl set-hostname NODE`, then reboot",
    )
}

fn wrong_dns(s: &Seen) -> Option<Said> {
    let c = s.comp_with(Component::Dns, Health::Failing)?;
    said_as(
        format!("{} resolves {}", s.node, c.state),
        c.reason.split("; ").map(String::from).collect(),
        "serve the bundle's zone (lab/dns: dnsmasq or BIND) and point the node's resolver at it (DHCP option 6, or its NetworkManager config); `dig @SERVER NAME` from the node",
    )
}

fn lb_down(s: &Seen) -> Option<Said> {
    let c = s.comp_with(Component::Lb, Health::Failing)?;
    said_as(
        format!("{} cannot reach the API through the load balancer", s.node),
        vec![c.reason.clone()],
        "start HAProxy on the helper with the bundle's lab/haproxy/haproxy.cfg (`haproxy -c -f` it first), check the VIPs are on the helper (scripts/helper-network.sh) and that 6443 and 22623 are open",
    )
}

/// A watched unit that is down: its state, and when the machine lacks its program, that.
/// A unit that fails, or that systemd is restarting after a failure (whatever health the agent
/// gave the snapshot: between two tries a restarting unit passes through `activating/start-pre`
/// and `activating/start`, which read as "starting").
fn unit_down(s: &Seen, name: &str, fix: &str) -> Option<Said> {
    let u = s.unit(name)?;
    let retried = restarting(u);
    if !failing(Some(u)) && retried.is_none() {
        return None;
    }
    let lacks = lacks_program(u);
    let fix = if lacks.is_some() { NOT_RHCOS_FIX } else { fix };
    let evidence = [said(u)].into_iter().chain(retried).chain(lacks).collect();
    said_as(format!("{name} is not running"), evidence, fix)
}

/// systemd is trying the unit again after a failure: it is `activating`, and it has restarted
/// (NRestarts) or its last run did not succeed (Result). From the first failure on, not only
/// once it counts as a crash loop.
fn restarting(c: &ComponentState) -> Option<String> {
    let n: u64 = c.details.get("NRestarts").and_then(|n| n.parse().ok()).unwrap_or(0);
    let result = c.details.get("Result").map(String::as_str).unwrap_or("");
    let failed = !result.is_empty() && result != "success";
    (c.state.starts_with("activating/") && (n > 0 || failed)).then(|| match n {
        0 => format!("systemd is restarting it after its first failure (result {result})"),
        1 => "systemd restarted it 1 time: it failed and is tried again".to_string(),
        n => format!("systemd restarted it {n} times: it keeps failing"),
    })
}

fn kubelet_unit_down(s: &Seen) -> Option<Said> {
    unit_down(
        s,
        unit::KUBELET,
        "read why: `hardshift logs NODE kubelet` (its config, its certificates, the runtime socket)",
    )
}

fn crio_unit_down(s: &Seen) -> Option<Said> {
    unit_down(
        s,
        unit::CRIO,
        "read why: `hardshift logs NODE crio` (storage, registries.conf, the pull secret)",
    )
}

fn runtime_not_ready(s: &Seen) -> Option<Said> {
    let c = s.comp_with(Component::Cri, Health::Failing)?;
    said_as(
        "the container runtime is not ready",
        vec![said(c)],
        "check the runtime: `hardshift logs NODE crio`",
    )
}

fn slow_etcd_disk(s: &Seen) -> Option<Said> {
    let c = s.comp_with(Component::EtcdDisk, Health::Warning)?;
    said_as(
        format!("the disk under etcd is too slow on {}", s.node),
        vec![said(c)],
        "give etcd an SSD or NVMe disk (on KVM: cache=none, io=native, not a qcow2 on a spinning disk); etcd's own check is `fio --rw=write --ioengine=sync --fdatasync=1 --bs=2300 --size=22m`",
    )
}

fn etcd_unhealthy(s: &Seen) -> Option<Said> {
    let c = s.comp_with(Component::Etcd, Health::Failing)?;
    said_as(
        "etcd is unhealthy",
        vec![said(c)],
        "`hardshift logs NODE etcd-members`; a slow disk (fdatasync over 10 ms) or a lost quorum are the usual causes",
    )
}

fn var_full(s: &Seen) -> Option<Said> {
    let h = &s.host;
    (h.var_free_bytes > 0 && h.var_free_bytes < MIN_VAR_FREE).then_some(())?;
    said_as(
        format!("/var has {} MiB free", h.var_free_bytes >> 20),
        vec![format!(
            "/var free: {} MiB, / free: {} MiB",
            h.var_free_bytes >> 20,
            h.root_free_bytes >> 20
        )],
        "give the node a bigger disk (images and etcd live in /var): 100 GiB is the tutorial's size",
    )
}

fn too_little_memory(s: &Seen) -> Option<Said> {
    let min = if s.role == "worker" {
        MIN_MEMORY_COMPUTE
    } else {
        MIN_MEMORY_CONTROL
    };
    let have = s.host.memory_total_bytes;
    (have > 0 && have < min * 95 / 100).then_some(())?;
    said_as(
        format!("{} has {} MiB of memory", s.node, have >> 20),
        vec![format!("a {} needs at least {} GiB", s.role, min >> 30)],
        "give the VM more memory",
    )
}

fn too_few_cpus(s: &Seen) -> Option<Said> {
    let min = if s.role == "worker" { 2 } else { 4 };
    (s.host.cpus > 0 && s.host.cpus < min).then_some(())?;
    said_as(
        format!("{} has {} CPUs", s.node, s.host.cpus),
        vec![format!("a {} needs at least {min} vCPUs", s.role)],
        "give the VM more vCPUs (etcd and the API server starve first)",
    )
}

fn registry_refuses(s: &Seen) -> Option<Said> {
    let c = s.comp_with(Component::Registry, Health::Failing)?;
    let fix = if c.reason.starts_with("auth") {
        "the pull secret on the node (install-config pullSecret) lacks or has wrong credentials for the mirror: fix pullSecret and re-create the bundle, or fix /var/lib/kubelet/config.json on the node"
    } else if c.reason.starts_with("tls") {
        "the node does not trust the mirror's certificate: put its CA in install-config additionalTrustBundle"
    } else if c.reason.starts_with("missing") {
        "the mirror lacks the image: mirror the release again (`oc adm release mirror`), then `hardshift mirror-check`"
    } else {
        "the node cannot reach the mirror: check its DNS name and the route from the node"
    };
    said_as(
        format!("{} cannot pull from its registry", s.node),
        c.reason.split("; ").map(String::from).collect(),
        fix,
    )
}

fn pulls_fail(s: &Seen) -> Option<Said> {
    let pulls: Vec<String> = s
        .report
        .containers
        .iter()
        .filter(|c| c.reason.contains("ImagePull") || c.reason.contains("ErrImage") || c.message.contains("pull"))
        .map(|c| format!("{}/{}: {} {}", c.pod, c.name, c.reason, c.image))
        .collect();
    (!pulls.is_empty()).then_some(())?;
    said_as(
        "images cannot be pulled",
        pulls,
        "check the mirror (`hardshift mirror-check`), the pull secret and /etc/containers/registries.conf on the node",
    )
}

fn cert_invalid(s: &Seen) -> Option<Said> {
    let c = s
        .comp_with(Component::KubeletCert, Health::Failing)
        .filter(|c| c.state != state::NOT_YET_VALID)?;
    said_as(
        format!("the kubelet's client certificate is {}", c.state),
        vec![said(c)],
        "approve its renewal CSR (`hardshift approve-csrs`), or check the clock",
    )
}

fn cert_expiring(s: &Seen) -> Option<Said> {
    let c = s.comp(Component::KubeletCert).filter(|c| c.state == state::EXPIRING)?;
    said_as(
        "the kubelet's client certificate expires soon",
        vec![said(c)],
        "its renewal CSR waits: `hardshift approve-csrs --dir DIR` (after the pivot, the machine-approver does it)",
    )
}

fn csr_waits(s: &Seen) -> Option<Said> {
    let c = s.comp(Component::KubeletCert).filter(|c| c.state == state::BOOTSTRAPPING)?;
    said_as(
        "the kubelet's client CSR waits for approval",
        vec![said(c)],
        "`hardshift approve-csrs --dir DIR` approves it if it is this node's (the machine-approver's rules)",
    )
}

fn kubelet_silent(s: &Seen) -> Option<Said> {
    let c = s
        .comp(Component::Kubelet)
        .filter(|c| !matches!(Health::of(c.health), Health::Ok | Health::Unknown))?;
    said_as(
        "the kubelet does not answer /healthz",
        vec![said(c)],
        "`hardshift logs NODE kubelet`",
    )
}

fn containers_fail(s: &Seen) -> Option<Said> {
    let crashing: Vec<String> = hardshift_proto::vocab::failing_containers(&s.report.containers)
        .into_iter()
        .map(|c| format!("{}/{}: exit {} {} (attempt {})", c.pod, c.name, c.exit_code, c.reason, c.attempt))
        .collect();
    (!crashing.is_empty()).then_some(())?;
    said_as(
        format!("{} containers exited with an error", crashing.len()),
        crashing,
        "`hardshift logs NODE --container NS/POD/NAME`",
    )
}

fn no_cni(s: &Seen) -> Option<Said> {
    let c = s.comp(Component::Cri).filter(|c| c.reason.contains("NetworkReady=false"))?;
    said_as(
        "no CNI network yet",
        vec![said(c)],
        "expected until the network operator runs on this node (after the control plane is up); if it stays, look at the network operator's pods",
    )
}

/// bootkube's stage, and what to look at when it stops there.
fn bootkube_stage<'a>(s: &'a Seen) -> Option<(&'a ComponentState, String, &'static str)> {
    let c = s.comp(Component::Bootkube)?;
    let stage = c.details.get("stage").cloned().unwrap_or_default();
    let fix = match stage.as_str() {
        "etcd" => "etcd did not become healthy: `hardshift logs NODE etcd-members`, and its static pod's log",
        "kube-apiserver" => "the API server does not answer: its container log (`hardshift logs NODE --container kube-system/bootstrap-kube-apiserver-NODE/kube-apiserver`), etcd and its certificates",
        "crds" | "manifests" => "an object is not applied yet: the last error names it and why (a Namespace or CRD it needs that never came, an admission refusal); bootkube retries every 5 s, so it fails only after 5 minutes: `hardshift logs NODE bootkube`",
        "crds-established" => "a CRD was not Established: check the bundle's crds/ (the release's CRDs) with `oc get crd`",
        "manifests-after-cvo" => "the cluster-version-operator did not install the CRD of an object applied after it (the fips MachineConfigs need the MCO's): `oc get clusterversion`, and the CVO's pod log",
        _ => "`hardshift logs NODE bootkube`",
    };
    Some((c, stage, fix))
}

fn bootkube_failed(s: &Seen) -> Option<Said> {
    let (c, stage, fix) = bootkube_stage(s).filter(|(c, _, _)| c.health == Health::Failing as i32)?;
    said_as(format!("bootkube failed at {stage}"), vec![said(c)], fix)
}

fn bootkube_working(s: &Seen) -> Option<Said> {
    let (c, stage, fix) = bootkube_stage(s).filter(|(c, _, _)| c.health == Health::Warning as i32 && c.state != state::NOT_STARTED)?;
    said_as(format!("bootkube is at {stage}"), vec![said(c)], fix)
}

/// A single node's bootstrap-in-place record: its stage, result and how long ago it moved.
fn in_place_stage<'a>(s: &'a Seen) -> Option<(&'a ComponentState, &'a str, &'a str, u64)> {
    let c = s.comp(Component::InPlace)?;
    let get = |k: &str| c.details.get(k).map(String::as_str).unwrap_or_default();
    let age = get("age_s").parse().unwrap_or(0);
    Some((c, get("stage"), get("result"), age))
}

/// The reboot install-to-disk schedules comes a minute after it; five is long overdue.
const REBOOT_OVERDUE_S: u64 = 300;
/// The installer's post-reboot step approves every 10 s; a node not Ready after this is stuck.
const NOT_READY_AFTER_S: u64 = 900;

fn in_place_disk(s: &Seen) -> Option<Said> {
    let (c, stage, ..) = in_place_stage(s).filter(|(c, st, ..)| *st == "installation-disk" && c.health == Health::Failing as i32)?;
    said_as(
        format!("the installation disk is not usable ({stage})"),
        vec![said(c)],
        "name the whole disk by a stable name (`ls -l /dev/disk/by-id/` on the node; the evidence lists its disks) in install-config's bootstrapInPlace.installationDisk or the host's rootDeviceHints.deviceName, of at least 120 GB, then `hardshift create` again and boot the node with the new config",
    )
}

fn in_place_failed(s: &Seen) -> Option<Said> {
    let (c, stage, ..) = in_place_stage(s).filter(|(c, st, ..)| *st != "installation-disk" && c.health == Health::Failing as i32)?;
    let fix = match stage {
        "stop-etcd" => "etcd did not stop after its pod was moved aside: `crictl ps --name etcd` on the node, and `hardshift logs NODE kubelet`",
        "master-ignition" => "hardshift-agent could not make the master's config: the evidence names the file; `journalctl -u hardshift-install-to-disk` on the node",
        "coreos-installer" => "coreos-installer failed (or is absent: the node must boot RHCOS's live ISO or PXE image, not another live system): the evidence has its output; the unit retries every 30 s",
        _ => "`journalctl -u hardshift-install-to-disk -u hardshift-post-reboot` on the node",
    };
    said_as(format!("bootstrap-in-place failed at {stage}"), vec![said(c)], fix)
}

fn in_place_no_reboot(s: &Seen) -> Option<Said> {
    let (c, _, _, age) = in_place_stage(s).filter(|(_, st, r, age)| *st == "reboot" && *r == "done" && *age > REBOOT_OVERDUE_S)?;
    said_as(
        format!("the disk was written {} min ago and the node still runs its live system", age / 60),
        vec![said(c)],
        "the reboot `shutdown -r +1` scheduled did not happen: reboot the node (from its BMC if it hangs); make sure it boots from the installation disk, not again from the network or the ISO (boot order)",
    )
}

fn in_place_not_ready(s: &Seen) -> Option<Said> {
    let (c, _, _, age) = in_place_stage(s).filter(|(_, st, _, age)| *st == "approve-csrs" && *age > NOT_READY_AFTER_S)?;
    said_as(
        format!("the node is not Ready {} min after its post-reboot step began approving its CSRs", age / 60),
        vec![said(c)],
        "`hardshift approve-csrs` shows which CSRs wait and why; a CSR from another name is never approved by the node itself; then the kubelet: `hardshift logs NODE kubelet`",
    )
}

fn in_place_working(s: &Seen) -> Option<Said> {
    let (c, stage, result, _) = in_place_stage(s).filter(|(c, ..)| c.health == Health::Warning as i32 && c.state != state::NOT_STARTED)?;
    said_as(
        format!("bootstrap-in-place is at {stage} ({result})"),
        vec![said(c)],
        "`hardshift wait-for install-complete` follows it; `journalctl -u hardshift-install-to-disk` (live system) or `-u hardshift-post-reboot` (installed) on the node",
    )
}

/// The live system's install: its stage, how long it has not moved, and a detail by key.
fn live_stage<'a>(s: &'a Seen) -> Option<(&'a ComponentState, InstallStage, i64)> {
    let c = s.comp(Component::LiveInstall)?;
    let stage = InstallStage::of(c.details.get(install::STAGE)?)?;
    let still = c.details.get(install::STILL_S).and_then(|v| v.parse().ok()).unwrap_or(0);
    Some((c, stage, still))
}

fn live_evidence(c: &ComponentState) -> Vec<String> {
    let mut ev = vec![said(c)];
    if let Some(t) = c.details.get(install::TAIL) {
        ev.extend(t.lines().map(|l| format!("coreos-installer: {l}")));
    }
    ev
}

/// coreos-installer's failure (or the disk's) in the live system's words.
fn live_error(c: &ComponentState) -> &str {
    c.details.get(install::ERROR).map(String::as_str).unwrap_or_default()
}

/// Writing an image shows progress every second; five minutes without is stuck.
const WRITE_STILL_S: i64 = 300;
/// From "rebooting" to the installed system's first report: firmware, Ignition's first boot,
/// the agent. Ten minutes is long past it.
const REBOOT_TO_REPORT_MS: i64 = 10 * 60_000;

fn live_disk(s: &Seen) -> Option<Said> {
    let (c, ..) = live_stage(s).filter(|(c, st, _)| *st == InstallStage::Failed && live_error(c).starts_with("installation disk"))?;
    said_as(
        format!("the installation disk is not usable: {}", live_error(c)),
        live_evidence(c),
        "name the whole disk the node has (the evidence lists its disks; a stable name from `ls -l /dev/disk/by-id/` on the live system) as the host's rootDeviceHints.deviceName in agent-config.yaml (or hardshift.yaml's lab.installDevice), run `hardshift create` again (keys are kept), and boot the node again",
    )
}

fn live_failed(s: &Seen) -> Option<Said> {
    let (c, ..) = live_stage(s).filter(|(c, st, _)| *st == InstallStage::Failed && !live_error(c).starts_with("installation disk"))?;
    let e = live_error(c).to_ascii_lowercase();
    let fix = if e.contains("digest") || e.contains("hash") {
        "the config the helper serves is not the one create wrote (edited or replaced after create: coreos-installer checks it against the SHA-256 the live config pins): `hardshift verify --dir DIR` names what changed; run `hardshift create` again, restart `lab serve`, boot the node again"
    } else if e.contains("no space") || e.contains("too small") || e.contains("larger than") {
        "the installation disk is smaller than the image: give the node a larger disk (or name another in rootDeviceHints.deviceName), then boot it again"
    } else if e.contains("busy") || e.contains("in use") {
        "a partition of the installation disk is in use on the live system (mounted, swap, a RAID or LVM member): the evidence names it; wipe the disk's signatures (`wipefs -a`) from the live system, or name another disk"
    } else if e.contains("download") || e.contains("fetch") || e.contains("404") || e.contains("signature") {
        "coreos-installer could not fetch what it writes: the node's config from the helper (`lab serve` running, the node's address its reservation), or the image named by lab.installImageURL (and its signature, unless lab.installImageUnsigned)"
    } else {
        "the evidence has coreos-installer's last lines; `journalctl -u hardshift-agent` on the live system has all of them"
    };
    said_as(format!("coreos-installer failed: {}", live_error(c)), live_evidence(c), fix)
}

fn live_stuck(s: &Seen) -> Option<Said> {
    let (c, _, still) = live_stage(s).filter(|(_, st, still)| *st == InstallStage::Writing && *still > WRITE_STILL_S)?;
    let pct = c.details.get(install::PERCENT).cloned().unwrap_or_default();
    let disk = c.details.get(install::DISK).cloned().unwrap_or_default();
    said_as(
        format!("writing the image to {disk} has not moved for {} min (at {pct}%)", still / 60),
        live_evidence(c),
        "a disk that stopped answering (the live system's kernel log: `journalctl -k` on its console; `hardshift diagnose` names I/O errors once it reports them) or an image download that stalled (the helper's HTTP events for the image, the link's speed and drops)",
    )
}

fn live_no_return(s: &Seen) -> Option<Said> {
    live_stage(s).filter(|(_, st, _)| *st == InstallStage::Rebooting)?;
    (s.seen_ago_ms > REBOOT_TO_REPORT_MS).then_some(())?;
    let c = s.comp(Component::LiveInstall)?;
    said_as(
        format!(
            "{}'s disk was written and the live system rebooted {} min ago; the installed system never reported",
            s.node,
            s.seen_ago_ms / 60_000
        ),
        vec![said(c)],
        "look at its console: the firmware booting another disk (the boot order: the installation disk first after the install), or Ignition failing on the first boot (an Ignition spec the system's Ignition does not read; a file source it cannot fetch), or the agent not reaching the collector (a route to its address and port)",
    )
}

fn live_working(s: &Seen) -> Option<Said> {
    let (c, stage, _) = live_stage(s)?;
    let title = match stage {
        InstallStage::Starting | InstallStage::Writing => format!("the live system is installing: {}", c.reason),
        InstallStage::Rebooting if s.seen_ago_ms <= REBOOT_TO_REPORT_MS => {
            format!(
                "the disk is written; rebooting into the installed system ({} s ago)",
                s.seen_ago_ms / 1000
            )
        }
        _ => return None,
    };
    said_as(
        title,
        vec![said(c)],
        "nothing to do yet: `hardshift status` follows each stage; the installed system reports under the same name",
    )
}

/// A machine component in a given health: its reason's parts as the evidence.
fn machine(s: &Seen, c: Component, healths: &[Health]) -> Option<(ComponentState, Vec<String>)> {
    let comp = s.comp(c).filter(|x| healths.contains(&Health::of(x.health)))?.clone();
    let mut ev: Vec<String> = comp.reason.split("; ").filter(|r| !r.is_empty()).map(String::from).collect();
    if ev.is_empty() {
        ev.push(said(&comp));
    }
    Some((comp, ev))
}

fn nic_down(s: &Seen) -> Option<Said> {
    let (c, mut ev) = machine(s, Component::Nic, &[Health::Failing])?;
    let mut d: Vec<String> = c.details.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    d.sort();
    ev.extend(d);
    said_as(
        format!("{}'s network interface has no link", s.node),
        ev,
        "check the cable, the switch port and its VLAN (or the VM's NIC and bridge: `virsh domiflist`, `ip link` on the host); for a bond, its members and mode must match the switch's (LACP for 802.3ad)",
    )
}

fn nic_degraded(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::Nic, &[Health::Warning])?;
    said_as(
        format!("a network interface of {} is degraded", s.node),
        ev,
        "a bond member without link, errors or a flapping link: reseat or replace the cable or transceiver, check the switch port's counters and its speed/duplex",
    )
}

fn no_default_route(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::Route, &[Health::Failing])?;
    said_as(
        format!("{} has no default route", s.node),
        ev,
        "give the node a gateway: DHCP's router option (the lab's dnsmasq/dhcpd), or `routes` in the host's networkConfig in agent-config.yaml (nmstate: destination 0.0.0.0/0, next-hop-address)",
    )
}

fn outside_machine_network(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::MachineNetwork, &[Health::Failing])?;
    said_as(
        format!("{}'s address is not the one the bundle gives it", s.node),
        ev,
        "the node got another address than agent-config.yaml's (a DHCP pool instead of its reservation, a wrong MAC in agent-config.yaml), or install-config's machineNetwork does not hold it: fix the DHCP reservation or the inputs and re-create",
    )
}

fn path_mtu(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::PathMtu, &[Health::Failing])?;
    said_as(
        format!("full-size frames from {} are lost on the way to other nodes", s.node),
        ev,
        "make the MTU equal end to end: the node's interface (nmstate `mtu` in agent-config.yaml) must not exceed the switch's or the bridge's (`ip link show` on the host); OVN-Kubernetes needs the cluster network MTU 100 bytes below it",
    )
}

fn peers_lossy(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::Peers, &[Health::Failing])?;
    said_as(
        format!("{} loses packets or waits too long for other nodes", s.node),
        ev,
        "etcd needs a loss-free, low-latency network between masters: check the links' error counters, a saturated uplink, a shaping or firewall rule between the nodes (`mtr` from the node)",
    )
}

fn dns_wildcard(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::DnsWildcard, &[Health::Failing])?;
    said_as(
        "a wildcard DNS record answers for the cluster's whole domain",
        ev,
        "remove the `*.<cluster>.<baseDomain>` wildcard from the zone (keep `*.apps.<cluster>.<baseDomain>`): with it, names that must fail resolve, and the installer's and the cluster's lookups go astray",
    )
}

fn no_ptr(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::DnsPtr, &[Health::Failing])?;
    said_as(
        format!("{}'s address does not resolve back to its name", s.node),
        ev,
        "add the PTR record to the reverse zone (the lab's dnsmasq `host-record`/`ptr-record`, BIND's in-addr.arpa zone): RHCOS names itself from it when DHCP gives no hostname",
    )
}

fn fips_mismatch(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::Fips, &[Health::Failing])?;
    said_as(
        format!("{} does not run its kernel in FIPS mode", s.node),
        ev,
        "the node must boot with `fips=1` from its first boot (coreos-installer and the Ignition config of a fips: true bundle set it); reinstall the node from this bundle's configs",
    )
}

fn swap_on(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::Swap, &[Health::Failing])?;
    said_as(
        format!("{} has swap on, and its kubelet refuses to start with swap", s.node),
        ev,
        "`swapoff -a` on the node, then remove the swap area for good (its /etc/fstab line or swap unit; with a MachineConfig once the cluster runs); the kubelet starts on its next restart",
    )
}

fn file_table_full(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::FileTable, &[Health::Failing])?;
    said_as(
        format!("{}'s kernel is out of file handles", s.node),
        ev,
        "find the process holding them (`for p in /proc/[0-9]*; do echo $(ls $p/fd | wc -l) $p; done | sort -n | tail`) and restart or fix it; raise fs.file-max only once the leak is understood",
    )
}

fn install_disk(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::InstallDisk, &[Health::Failing, Health::Warning])?;
    said_as(
        format!("{}'s installation disk is not fit", s.node),
        ev,
        "install to a fixed, writable disk of at least 100 GB (agent-config.yaml rootDeviceHints.deviceName names it)",
    )
}

/// A kind the agent counted in the kernel's log: how many, and the newest line.
fn kernel(s: &Seen, kind: &str, title: &str, fix: &str) -> Option<Said> {
    let c = s.comp(Component::Kernel)?;
    let d = c.details.get(kind)?;
    said_as(format!("{title} on {}", s.node), vec![format!("{kind}: {d}")], fix)
}

fn kernel_io(s: &Seen) -> Option<Said> {
    kernel(s, hardshift_proto::vocab::kernel::IO_ERROR, "I/O errors", "the disk or its path fails: check its SMART data (`smartctl -a`), cables and controller; on KVM the image's host filesystem (full, or an I/O error there)")
}

fn kernel_fs(s: &Seen) -> Option<Said> {
    kernel(
        s,
        hardshift_proto::vocab::kernel::FS_ERROR,
        "filesystem errors",
        "the filesystem is damaged: reinstall the node (RHCOS is immutable; /var holds what is lost), and check the disk below it",
    )
}

fn kernel_read_only(s: &Seen) -> Option<Said> {
    kernel(s, hardshift_proto::vocab::kernel::READ_ONLY, "a filesystem went read-only", "the kernel stopped writing after an error: nothing under it (/var: images, etcd) can be written until a reboot; find the error before it (I/O or corruption) and fix the disk")
}

fn kernel_hardware(s: &Seen) -> Option<Said> {
    kernel(
        s,
        hardshift_proto::vocab::kernel::HARDWARE_ERROR,
        "hardware errors",
        "machine-check or memory errors: run the vendor's diagnostics, reseat or replace the DIMM named, check the BMC's event log",
    )
}

fn kernel_oops(s: &Seen) -> Option<Said> {
    kernel(s, hardshift_proto::vocab::kernel::OOPS, "a kernel oops", "the kernel hit a bug or bad memory: read the trace (`journalctl -k -b`), update the firmware, and report it with the RHCOS version")
}

fn kernel_hung(s: &Seen) -> Option<Said> {
    kernel(s, hardshift_proto::vocab::kernel::HUNG_TASK, "tasks hung in the kernel", "a task waited over two minutes, mostly on storage: a stalled disk or NFS, or a very slow one (etcd and the kubelet stall with it); check the disk's latency and errors")
}

fn kernel_netdev(s: &Seen) -> Option<Said> {
    kernel(s, hardshift_proto::vocab::kernel::NETDEV_LEAK, "a network device cannot be freed", "a kernel reference leak on a network device (unregister_netdevice): new pods' networks stall until a reboot; reboot the node and update RHCOS")
}

fn kernel_oom(s: &Seen) -> Option<Said> {
    kernel(
        s,
        hardshift_proto::vocab::kernel::OOM,
        "the OOM killer killed processes",
        "the node ran out of memory: give it more (a master needs 16 GiB), and see which process it killed in the evidence",
    )
}

fn kernel_link_down(s: &Seen) -> Option<Said> {
    kernel(
        s,
        hardshift_proto::vocab::kernel::LINK_DOWN,
        "a NIC's link went down",
        "the link dropped at least once since boot: check the cable, the switch port's log and the NIC's firmware",
    )
}

fn reboot_loop(s: &Seen) -> Option<Said> {
    let (_, ev) = machine(s, Component::Boots, &[Health::Failing])?;
    said_as(
        format!("{} keeps rebooting", s.node),
        ev,
        "read the previous boot's end (`journalctl -b -1 -e` on the node, or its console): a kernel panic, a watchdog, or a machine-config that fails and reboots",
    )
}

fn ntp_unsynced(s: &Seen) -> Option<Said> {
    let (_, mut ev) = machine(s, Component::TimeSync, &[Health::Failing, Health::Warning])?;
    if s.host.clock_offset_known {
        ev.push(format!(
            "clock offset to the collector: {:+.1} s",
            s.host.clock_offset_ms as f64 / 1000.0
        ));
    }
    said_as(
        format!("{}'s clock is not synchronized by NTP", s.node),
        ev,
        "point chrony at a reachable NTP server (a chrony MachineConfig, or DHCP option 42) and check `chronyc sources` on the node; certificates fail when clocks drift",
    )
}

/// A node whose agent said hello (its boot is known) but whose first report never arrived: the
/// agent stopped, or its reports are refused. Nothing else can be said of it.
pub fn no_report(node: &str, seen_ago_ms: i64) -> Vec<Finding> {
    let mut f = rule("HS002").finding(
        node,
        Said {
            title: format!("{node}'s agent connected {} s ago but no report of it is stored", seen_ago_ms / 1000),
            evidence: vec!["the collector knows its boot from the agent's hello, and has no report of that boot".into()],
            fix: "wait one report interval (5 s); if it stays so: `hardshift logs NODE hardshift-agent`, the collector's log (refused reports), the node's console".into(),
        },
    );
    if seen_ago_ms > SILENT_AFTER_MS {
        f.severity = Critical;
    }
    vec![f]
}

/// What the helper saw of the boots (`lab serve`): every boot event, and each node's inventory MAC.
#[derive(Default)]
pub struct Boots<'a> {
    pub events: &'a [crate::boot::BootEvent],
    pub macs: &'a [(String, String)],
}

/// A node of the bundle the collector never heard from. With the helper's boot events, the step
/// it stopped at names the cause (HS004–HS009, or HS003 with the last step seen); without them
/// the collector cannot tell, and the places that can are named.
pub fn never_reported(node: &str, role: &str, boots: &Boots, now_ms: i64) -> Finding {
    let mac = boots
        .macs
        .iter()
        .find(|(n, _)| n == node)
        .map(|(_, m)| m.as_str())
        .unwrap_or_default();
    if let Some(s) = crate::boot_stuck::why(node, mac, boots.events, now_ms) {
        let mut f = rule(s.id).finding(
            node,
            Said {
                title: s.title,
                evidence: s.evidence,
                fix: s.fix,
            },
        );
        // Within its stage's time the node is on its way: said, not yet blamed.
        if s.within_time {
            f.severity = Warning;
        }
        return f;
    }
    rule("HS003").finding(
        node,
        Said {
            title: format!("{node} ({role}) has never reported"),
            evidence: vec!["no hello and no report from its agent since the collector's store began".into()],
            fix: "look where it stopped: its console (Ignition errors, e.g. `hash verification failed`: the config served is not the one create wrote), the helper's DHCP log (no lease: a MAC that differs from agent-config.yaml) and HTTP log (no GET /ignition/NODE.ign), then the agent (`systemctl status hardshift-agent`, a route to the collector)".into(),
        },
    )
}

/// Findings for one node, root causes first. `seen_ago_ms`: since its newest report arrived.
pub fn diagnose(node: &str, role: &str, r: &NodeReport, seen_ago_ms: i64) -> Vec<Finding> {
    let seen = Seen {
        node,
        role,
        report: r,
        host: r.host.clone().unwrap_or_default(),
        seen_ago_ms,
    };
    let mut out: Vec<Finding> = RULES
        .iter()
        .filter_map(|rule| (rule.check)(&seen).map(|s| rule.finding(node, s)))
        .collect();
    // Consequences of a standing cause go; then worst first, causes before consequences.
    let explained: Vec<&str> = out.iter().flat_map(|f| f.explains.iter().copied()).collect();
    out.retain(|f| !explained.contains(&f.id));
    let rank = |id: &str| RULES.iter().position(|r| r.id == id).unwrap_or(usize::MAX);
    out.sort_by_key(|f| (f.severity, rank(f.id)));
    out
}

/// None when `n` reported or is in the inventory; else what to tell the user, with the nodes
/// there are and the likeliest one meant.
pub fn unknown_node(n: &str, rows: &[crate::store::NodeRow], inventory: &[Member]) -> Option<String> {
    if rows.iter().any(|r| r.node == n) || inventory.iter().any(|m| m.name == n) {
        return None;
    }
    let mut names: Vec<&str> = inventory.iter().map(|m| m.name.as_str()).collect();
    names.extend(
        rows.iter()
            .map(|r| r.node.as_str())
            .filter(|r| !inventory.iter().any(|m| m.name == *r)),
    );
    let hint = hardshift_bundle::names::did_you_mean(n, &names)
        .map(|m| format!("; did you mean {m:?}?"))
        .unwrap_or_default();
    Some(format!(
        "{n:?} is not a node of this bundle and never reported (its nodes: {}){hint}",
        names.join(", ")
    ))
}

/// Every finding of the store's rows (only node `only`'s when given), then the inventory's nodes
/// (name, role) that never reported.
pub fn findings(rows: &[crate::store::NodeRow], inventory: &[Member], only: Option<&str>, now_ms: i64, boots: &Boots) -> Vec<Finding> {
    let wanted = |n: &str| only.is_none_or(|w| w == n);
    let mut out: Vec<Finding> = rows
        .iter()
        .filter(|r| wanted(&r.node))
        .flat_map(|r| {
            let mut f = match &r.last {
                Some(l) => diagnose(&r.node, &r.role, l, now_ms - r.last_seen_ms),
                None => no_report(&r.node, now_ms - r.last_seen_ms),
            };
            // What only the boot's history shows: a live system again after the disk was written.
            if let Some(s) = crate::boot_stuck::live_again(&r.node, boots.events) {
                let again = rule(s.id).finding(
                    &r.node,
                    Said {
                        title: s.title,
                        evidence: s.evidence,
                        fix: s.fix,
                    },
                );
                f.retain(|x| !again.explains.contains(&x.id));
                f.insert(0, again);
            }
            f
        })
        .collect();
    out.extend(
        inventory
            .iter()
            .filter(|m| wanted(&m.name) && !rows.iter().any(|r| r.node == m.name))
            .map(|m| never_reported(&m.name, m.role.as_str(), boots, now_ms)),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_node_is_refused_with_the_nodes_there_are_and_the_likeliest() {
        use hardshift_proto::vocab::Role;
        let m = |name: &str, role| Member { name: name.into(), role };
        let inventory = vec![m("master-0", Role::Master), m("worker-0", Role::Worker)];
        let row = crate::store::NodeRow {
            node: "stray-1".into(),
            role: "worker".into(),
            boot_id: String::new(),
            last_seq: 1,
            last_seen_ms: 0,
            reports: 1,
            dropped: 0,
            last: None,
        };
        let rows = [row];
        assert_eq!(unknown_node("master-0", &rows, &inventory), None);
        assert_eq!(unknown_node("stray-1", &rows, &inventory), None, "it reported");
        let said = unknown_node("mastre-0", &rows, &inventory).unwrap();
        assert!(
            said.contains("master-0, worker-0, stray-1") && said.contains("did you mean \"master-0\""),
            "{said}"
        );
    }
    use hardshift_proto::v1::ContainerInfo;

    fn c(name: &str, h: Health, state: &str, reason: &str) -> ComponentState {
        ComponentState {
            name: name.into(),
            health: h as i32,
            state: state.into(),
            reason: reason.into(),
            details: Default::default(),
        }
    }

    fn report(components: Vec<ComponentState>) -> NodeReport {
        NodeReport {
            components,
            host: Some(HostState {
                memory_total_bytes: 16 << 30,
                var_free_bytes: 80 << 30,
                root_free_bytes: 80 << 30,
                clock_offset_known: true,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn ids(f: &[Finding]) -> Vec<&str> {
        f.iter().map(|f| f.id).collect()
    }

    #[test]
    fn a_wrong_hostname_and_wrong_dns_are_causes() {
        let mut r = report(vec![c("kubelet-cert", Health::Warning, "bootstrapping", "")]);
        r.host.as_mut().unwrap().hostname = "localhost".into();
        let f = diagnose("master-0", "master", &r, 0);
        assert_eq!(ids(&f), ["HS070"], "the CSR is its consequence");
        assert!(f[0].evidence[0].contains("no name came from DHCP"), "{:?}", f[0].evidence);
        r.host.as_mut().unwrap().hostname = "master-0.ocp4.example.com".into();
        assert_eq!(
            ids(&diagnose("master-0", "master", &r, 0)),
            ["HS030"],
            "an FQDN hostname is the node's name"
        );
        r.components.push(c(
            "dns",
            Health::Failing,
            "1 of 4 names wrong",
            "api-int.x → 10.0.0.9, but the zone says 192.168.126.10",
        ));
        let f = diagnose("master-0", "master", &r, 0);
        assert_eq!(ids(&f), ["HS071"]);
        assert_eq!(f[0].evidence, ["api-int.x → 10.0.0.9, but the zone says 192.168.126.10"]);
    }

    fn in_place(h: Health, stage: &str, result: &str, age_s: u64, reason: &str) -> ComponentState {
        let mut x = c("bootstrap-in-place", h, &format!("{stage}: {result}"), reason);
        x.details = [("stage", stage), ("result", result), ("age_s", &age_s.to_string())]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        x
    }

    #[test]
    fn a_single_nodes_stages_are_named() {
        let f = |x| diagnose("sno", "master", &report(vec![x]), 0);
        let disk = f(in_place(
            Health::Failing,
            "installation-disk",
            "failed",
            5,
            "installation disk /dev/sdz not found; this machine's disks: vda 120G",
        ));
        assert_eq!(ids(&disk), ["HS090"]);
        assert!(disk[0].evidence[0].contains("vda 120G"), "the node's own disks are in the evidence");
        assert_eq!(
            ids(&f(in_place(
                Health::Failing,
                "coreos-installer",
                "failed",
                5,
                "coreos-installer not found"
            ))),
            ["HS091"]
        );
        assert_eq!(
            ids(&f(in_place(Health::Warning, "reboot", "done", 30, ""))),
            ["HS094"],
            "the reboot comes a minute later"
        );
        assert_eq!(ids(&f(in_place(Health::Warning, "reboot", "done", 900, ""))), ["HS092", "HS094"]);
        assert_eq!(ids(&f(in_place(Health::Warning, "approve-csrs", "running", 60, ""))), ["HS094"]);
        assert_eq!(
            ids(&f(in_place(
                Health::Warning,
                "approve-csrs",
                "running",
                3600,
                "waiting for node sno to be Ready"
            ))),
            ["HS093", "HS094"]
        );
        assert!(f(in_place(Health::Ok, "complete", "done", 9999, "")).is_empty());
        assert!(f(c("bootstrap-in-place", Health::Warning, state::NOT_STARTED, "absent")).is_empty());
    }

    #[test]
    fn a_slow_etcd_disk_is_named_with_its_numbers() {
        let d = c(
            "etcd-disk",
            Health::Warning,
            "fdatasync p99 42.00 ms",
            "fdatasync p99 42.00 ms in /var/lib/etcd (p50 3.10 ms, 200 writes): etcd needs under 10 ms",
        );
        let f = diagnose("master-0", "master", &report(vec![d]), 0);
        assert_eq!(ids(&f), ["HS051"]);
        assert!(f[0].evidence[0].contains("p99 42.00 ms"));
    }

    #[test]
    fn too_few_cpus_and_an_expiring_certificate() {
        let mut r = report(vec![c(
            "kubelet-cert",
            Health::Warning,
            "expiring",
            "expires in 5 h: its rotation CSR needs approval",
        )]);
        r.host.as_mut().unwrap().cpus = 2;
        let f = diagnose("master-0", "master", &r, 0);
        assert_eq!(ids(&f), ["HS062", "HS032"]);
        assert_eq!(
            ids(&diagnose("worker-0", "worker", &r, 0)),
            ["HS032"],
            "2 CPUs are enough for a worker"
        );
    }

    #[test]
    fn a_registry_refusal_explains_failed_pulls() {
        let reg = c(
            "registry",
            Health::Failing,
            "1 of 2 images not pullable",
            "auth: 127.0.0.1:5000: credentials refused (HTTP 401) for x: UNAUTHORIZED authentication required",
        );
        let mut r = report(vec![reg]);
        r.containers.push(ContainerInfo {
            pod: "openshift-etcd/etcd".into(),
            name: "etcd".into(),
            reason: "ErrImagePull".into(),
            ..Default::default()
        });
        let f = diagnose("master-0", "master", &r, 0);
        assert_eq!(ids(&f), ["HS044"]);
        assert!(f[0].fix.contains("pull secret"), "{}", f[0].fix);
    }

    #[test]
    fn bootkube_says_its_stage() {
        let mut b = c("bootkube", Health::Failing, "crds-established: failed", "timed out waiting");
        b.details.insert("stage".into(), "crds-established".into());
        let f = diagnose("bootstrap", "bootstrap", &report(vec![b.clone()]), 0);
        assert_eq!(ids(&f), ["HS080"]);
        assert!(f[0].fix.contains("crds/"), "{}", f[0].fix);
        b.health = Health::Warning as i32;
        assert_eq!(ids(&diagnose("bootstrap", "bootstrap", &report(vec![b.clone()]), 0)), ["HS081"]);
        // Retrying a manifest: the last error is the evidence, and the fix says what it means.
        b.state = "manifests: retrying".into();
        b.reason = "1 not applied yet; 50-render-000-00_etcd-endpoints-cm.yaml: namespaces \"openshift-etcd\" not found".into();
        b.details.insert("stage".into(), "manifests".into());
        let f = diagnose("bootstrap", "bootstrap", &report(vec![b]), 0);
        assert_eq!(ids(&f), ["HS081"]);
        assert!(f[0].evidence[0].contains("openshift-etcd"), "{:?}", f[0].evidence);
        assert!(f[0].fix.contains("Namespace or CRD"), "{}", f[0].fix);
    }

    #[test]
    fn a_stopped_kubelet_is_the_cause_not_also_a_pending_csr() {
        let r = report(vec![
            c("kubelet.service", Health::Failing, "failed/failed", "exited 1"),
            c("kubelet", Health::Failing, "not listening", "connection refused"),
            c("kubelet-cert", Health::Warning, "bootstrapping", "absent: the CSR waits"),
            c("cri", Health::Warning, "ready", "NetworkReady=false: NetworkPluginNotReady"),
        ]);
        let f = diagnose("master-0", "master", &r, 1000);
        assert_eq!(ids(&f), vec!["HS020"], "{f:#?}");
        assert!(f[0].evidence[0].contains("failed/failed"));
    }

    #[test]
    fn a_node_without_a_report_is_not_called_healthy() {
        let f = no_report("bootstrap", 2_000);
        assert_eq!((ids(&f), f[0].severity), (vec!["HS002"], Severity::Warning));
        assert_eq!(no_report("bootstrap", SILENT_AFTER_MS + 1)[0].severity, Severity::Critical);
    }

    #[test]
    fn a_unit_whose_program_is_missing_is_named_as_such() {
        let mut k = c(
            "kubelet.service",
            Health::Failing,
            "activating/auto-restart",
            "crash-looping: 8 restarts, last result exit-code (exit status 203)",
        );
        k.details.insert("ExecMainStatus".into(), "203".into());
        let f = diagnose(
            "master-0",
            "master",
            &report(vec![
                k.clone(),
                c("crio.service", Health::Absent, "inactive/dead", "unit not found"),
            ]),
            0,
        );
        assert_eq!(ids(&f), vec!["HS020", "HS022"], "{f:#?}");
        assert!(f[0].evidence[1].contains("203/EXEC") && f[0].fix.contains("RHCOS"), "{f:#?}");
        assert!(f[1].evidence[1].contains("crio.service is not installed"), "{f:#?}");
        // Any other exit status is a config or runtime problem: read its journal.
        k.details.insert("ExecMainStatus".into(), "1".into());
        let f = diagnose("master-0", "master", &report(vec![k]), 0);
        assert_eq!(f[0].evidence.len(), 1, "{f:#?}");
        assert!(f[0].fix.contains("hardshift logs"), "{f:#?}");
    }

    /// A unit systemd restarts is named at its first failure (issue 36): a real systemd's
    /// kubelet-like unit (Type=notify, ExecStartPre, its program missing) reads, between two
    /// tries, `activating/auto-restart` with Result=exit-code and status 203, and for a moment
    /// on each try `activating/start-pre` with Result=success and status 0, NRestarts counting.
    /// Both are HS020, whatever health the agent gave the snapshot; 203 is named when it shows.
    #[test]
    fn a_unit_restarting_after_its_first_failure_is_named() {
        let unit = |health: Health, state: &str, reason: &str, result: &str, status: &str| {
            let mut k = c("kubelet.service", health, state, reason);
            for (key, v) in [("NRestarts", "1"), ("Result", result), ("ExecMainStatus", status)] {
                k.details.insert(key.into(), v.into());
            }
            k
        };
        let waiting = unit(
            Health::Failing,
            "activating/auto-restart",
            "crash-looping: 1 restarts, last result exit-code (exit status 203)",
            "exit-code",
            "203",
        );
        let f = diagnose("master-0", "master", &report(vec![waiting]), 0);
        assert_eq!(ids(&f), vec!["HS020"], "{f:#?}");
        assert!(f[0].evidence.iter().any(|e| e.contains("203/EXEC")), "{f:#?}");
        // The same loop a moment later, as an agent judges a starting unit (or an agent that
        // calls a first restart a warning): still the cause, not silence.
        for (health, state, result, status) in [
            (Health::Warning, "activating/start-pre", "success", "0"),
            (Health::Warning, "activating/start", "success", "0"),
            (Health::Warning, "activating/auto-restart", "exit-code", "203"),
        ] {
            let k = unit(health, state, "starting", result, status);
            let f = diagnose("master-0", "master", &report(vec![k]), 0);
            assert_eq!(ids(&f), vec!["HS020"], "{state}: {f:#?}");
            assert!(f[0].evidence.iter().any(|e| e.contains("restarted it 1 time")), "{state}: {f:#?}");
            assert_eq!(
                f[0].evidence.iter().any(|e| e.contains("203/EXEC")),
                status == "203",
                "{state}: {f:#?}"
            );
        }
        // Starting for the first time, never failed: not a finding.
        let k = unit(Health::Warning, "activating/start", "starting", "success", "0");
        let mut k = k;
        k.details.insert("NRestarts".into(), "0".into());
        assert!(diagnose("master-0", "master", &report(vec![k]), 0).is_empty());
    }

    #[test]
    fn a_running_kubelet_without_its_certificate_is_waiting_for_its_csr() {
        let r = report(vec![
            c("kubelet.service", Health::Ok, "active/running", ""),
            c("kubelet", Health::Ok, "healthy", ""),
            c("kubelet-cert", Health::Warning, "bootstrapping", "absent"),
            c("cri", Health::Warning, "ready", "NetworkReady=false: x"),
        ]);
        let f = diagnose("worker-0", "worker", &r, 1000);
        assert_eq!(ids(&f), vec!["HS030"], "no CNI is its consequence: {f:#?}");
        assert!(f[0].fix.contains("approve-csrs"));
    }

    #[test]
    fn clock_skew_explains_certificate_errors() {
        let mut r = report(vec![
            c("kubelet-cert", Health::Failing, "not yet valid", "valid only from 300 s from now"),
            c("kubelet", Health::Failing, "healthz error", "x"),
        ]);
        r.host.as_mut().unwrap().clock_offset_ms = -300_000;
        let f = diagnose("master-1", "master", &r, 0);
        assert_eq!(ids(&f), vec!["HS010"], "{f:#?}");
        assert!(f[0].evidence.iter().any(|e| e.contains("-300.0 s")));
    }

    #[test]
    fn image_pulls_disk_memory_and_silence() {
        let mut r = report(vec![c("cri", Health::Warning, "ready", "1 failing")]);
        r.containers.push(ContainerInfo {
            pod: "openshift-etcd/etcd".into(),
            name: "etcd".into(),
            state: "exited".into(),
            exit_code: 1,
            reason: "ErrImagePull".into(),
            image: "registry.example.com/etcd@sha256:1".into(),
            ..Default::default()
        });
        let h = r.host.as_mut().unwrap();
        h.var_free_bytes = 2 << 30;
        h.memory_total_bytes = 8 << 30;
        let f = diagnose("master-2", "master", &r, 60_000);
        // Silent first; the full /var explains the pull failure and the exited container.
        assert_eq!(ids(&f), vec!["HS001", "HS060", "HS061"], "{f:#?}");
        let mut r2 = r.clone();
        r2.host.as_mut().unwrap().var_free_bytes = 50 << 30;
        let f = diagnose("master-2", "master", &r2, 0);
        assert_eq!(ids(&f), vec!["HS042", "HS061"], "{f:#?}");
        assert!(f[0].evidence[0].contains("registry.example.com/etcd"));
        // A worker with 8 GiB meets its minimum.
        assert!(!ids(&diagnose("w", "worker", &r2, 0)).contains(&"HS061"));
    }

    #[test]
    fn a_healthy_node_has_no_findings() {
        let r = report(vec![
            c("kubelet.service", Health::Ok, "active/running", ""),
            c("kubelet", Health::Ok, "healthy", ""),
            c("kubelet-cert", Health::Ok, "valid", ""),
            c("cri", Health::Ok, "ready", ""),
            c("etcd", Health::Ok, "healthy", ""),
        ]);
        assert!(diagnose("m", "master", &r, 0).is_empty());
    }

    /// Each machine rule from the component the agent writes for it, alone in a report.
    #[test]
    fn every_machine_rule_fires_on_its_component() {
        use hardshift_proto::vocab::kernel as k;
        let f = Health::Failing;
        let mut cases: Vec<(&str, ComponentState)> = vec![
            (
                "HS100",
                c(
                    "nic",
                    f,
                    "eth0 no link mtu 1500",
                    "eth0 carries the default route and has no link (down)",
                ),
            ),
            (
                "HS101",
                c(
                    "nic",
                    Health::Warning,
                    "bond0 up mtu 9000",
                    "bond bond0: ens3f1 without link, no redundancy left",
                ),
            ),
            (
                "HS102",
                c(
                    "route",
                    f,
                    "no default route",
                    "neither /proc/net/route nor /proc/net/ipv6_route has a default route",
                ),
            ),
            (
                "HS103",
                c(
                    "machine-network",
                    f,
                    "outside",
                    "no address in the machine network 192.168.126.0/24 (the node has: 10.0.0.5)",
                ),
            ),
            (
                "HS106",
                c(
                    "path-mtu",
                    f,
                    "1 of 2 peers: MTU too large for the path",
                    "master-1 (192.168.126.102): a 9000-byte don't-fragment echo is lost",
                ),
            ),
            (
                "HS105",
                c(
                    "peers",
                    f,
                    "2/2 answer",
                    "master-1 (192.168.126.102): 25 % packet loss (a master allows 0 %)",
                ),
            ),
            (
                "HS107",
                c(
                    "dns-wildcard",
                    f,
                    "wildcard",
                    "hardshift-wildcard-1.ocp4.example.com, a random name, resolves to 192.168.126.9",
                ),
            ),
            (
                "HS108",
                c("dns-ptr", f, "no PTR record", "192.168.126.101 does not resolve back to a name"),
            ),
            (
                "HS121",
                c(
                    "fips",
                    f,
                    "kernel not in FIPS mode",
                    "the bundle was made with fips: true, but /proc/sys/crypto/fips_enabled is 0",
                ),
            ),
            (
                "HS120",
                c(
                    "install-disk",
                    Health::Warning,
                    "/dev/vda 40.0 GiB",
                    "/dev/vda holds 40.0 GiB: OpenShift needs at least 100 GB",
                ),
            ),
            ("HS119", c("boots", f, "5 boots in 30 min", "5 boots within 30 minutes")),
            (
                "HS122",
                c(
                    "swap",
                    f,
                    "on",
                    "2047 MiB of swap (/dev/vda3): the kubelet refuses to start with swap on",
                ),
            ),
            (
                "HS123",
                c(
                    "file-table",
                    f,
                    "99000 of 100000 open files (99 %)",
                    "99000 file handles are open of the kernel's 100000 (fs.file-max)",
                ),
            ),
            (
                "HS104",
                c(
                    "time-sync",
                    f,
                    "not synchronized",
                    "timedated: the clock is not synchronized to an NTP server 900 s after boot",
                ),
            ),
        ];
        for (id, kind) in [
            ("HS114", k::IO_ERROR),
            ("HS115", k::FS_ERROR),
            ("HS116", k::READ_ONLY),
            ("HS113", k::HARDWARE_ERROR),
            ("HS110", k::OOPS),
            ("HS111", k::HUNG_TASK),
            ("HS112", k::NETDEV_LEAK),
            ("HS117", k::OOM),
            ("HS118", k::LINK_DOWN),
        ] {
            let mut kc = c("kernel", f, "1 x", "");
            kc.details.insert(kind.into(), "1× last: a line".into());
            cases.push((id, kc));
        }
        for (id, comp) in cases {
            let found = diagnose("master-0", "master", &report(vec![comp.clone()]), 0);
            assert_eq!(ids(&found), [id], "{comp:?}");
            assert!(!found[0].evidence.is_empty() && !found[0].fix.is_empty());
        }
        // Healthy machine components say nothing; an NTP failure explains the clock skew.
        assert!(diagnose(
            "m",
            "master",
            &report(vec![
                c("nic", Health::Ok, "eth0 up", ""),
                c("time-sync", Health::Ok, "synchronized", "")
            ]),
            0
        )
        .is_empty());
        let mut r = report(vec![c("time-sync", f, "not synchronized", "x")]);
        r.host.as_mut().unwrap().clock_offset_ms = 90_000;
        let found = diagnose("m", "master", &r, 0);
        assert_eq!(ids(&found), ["HS104"]);
        assert!(found[0].evidence.iter().any(|e| e.contains("+90.0 s")), "{found:?}");
    }

    #[test]
    fn the_live_systems_install_is_named_by_its_stage() {
        let live = |stage: InstallStage, extra: &[(&str, &str)]| {
            let mut comp = c("live-install", Health::Warning, stage.assisted(), "r");
            comp.details.insert(install::STAGE.into(), stage.slug().into());
            for (k, v) in extra {
                comp.details.insert(k.to_string(), v.to_string());
            }
            report(vec![comp])
        };
        let ids_of =
            |r: &NodeReport, ago: i64| -> Vec<String> { ids(&diagnose("w", "worker", r, ago)).into_iter().map(String::from).collect() };
        let writing = live(InstallStage::Writing, &[(install::PERCENT, "57"), (install::STILL_S, "20")]);
        assert_eq!(ids_of(&writing, 1_000), ["HS016"]);
        assert_eq!(ids_of(&writing, 60_000), ["HS016"], "silent while it writes is not HS001");
        let stuck = live(InstallStage::Writing, &[(install::PERCENT, "57"), (install::STILL_S, "301")]);
        let f = diagnose("w", "worker", &stuck, 1_000);
        assert_eq!(ids(&f), ["HS013"]);
        assert!(f[0].title.contains("57%"), "{f:?}");
        let no_disk = live(
            InstallStage::Failed,
            &[(
                install::ERROR,
                "installation disk /dev/sdz not found; this machine's disks: vda 8.0 GiB",
            )],
        );
        let f = diagnose("w", "worker", &no_disk, 1_000);
        assert_eq!(ids(&f), ["HS011"]);
        assert!(f[0].title.contains("vda 8.0 GiB"), "{f:?}");
        let hash = live(
            InstallStage::Failed,
            &[
                (install::ERROR, "Error: failed to validate Ignition configuration digest"),
                (
                    install::TAIL,
                    "Writing Ignition config\nError: failed to validate Ignition configuration digest",
                ),
            ],
        );
        let f = diagnose("w", "worker", &hash, 1_000);
        assert_eq!(ids(&f), ["HS012"]);
        assert!(f[0].fix.contains("hardshift verify"), "{f:?}");
        assert!(
            f[0].evidence.iter().any(|e| e.starts_with("coreos-installer: Writing Ignition")),
            "{f:?}"
        );
        let rebooting = live(InstallStage::Rebooting, &[]);
        assert_eq!(ids_of(&rebooting, 120_000), ["HS016"]);
        assert_eq!(ids_of(&rebooting, REBOOT_TO_REPORT_MS + 1), ["HS014"]);
    }

    /// docs/hardware.md's coverage tables name every rule's `covers`, and every rule id.
    #[test]
    fn the_coverage_table_names_every_rule() {
        let doc = include_str!("../../docs/hardware.md");
        for r in RULES.iter().filter(|r| r.id.starts_with("HS1") || !r.covers.is_empty()) {
            assert!(doc.contains(r.id), "{} is not in docs/hardware.md", r.id);
            for c in r.covers {
                assert!(doc.contains(&format!("`{c}`")), "{}: {c} is not in docs/hardware.md", r.id);
            }
        }
    }

    #[test]
    fn every_rule_is_listed_once() {
        let mut seen = std::collections::BTreeSet::new();
        for r in RULES {
            assert!(seen.insert(r.id), "{} twice", r.id);
            // What a rule explains is another rule of the table.
            for e in r.explains {
                assert!(RULES.iter().any(|x| x.id == *e), "{} explains {e}, which is not a rule", r.id);
            }
        }
    }
}
