//! The node report's vocabulary: the component names, states and health order the agent writes
//! and the collector reads, in one place, so a name is tied at compile time on both sides.

use crate::v1::{ComponentState, ContainerInfo, Health};

/// A node's role in the install: what the bundle's inventory says of each node, and what the
/// agent says of itself in its hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Bootstrap,
    Master,
    Worker,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Bootstrap => "bootstrap",
            Role::Master => "master",
            Role::Worker => "worker",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A component of a node report, by its name on the wire. Watched systemd units are components
/// too, named by their unit (`kubelet.service`): see `unit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Component {
    /// The kubelet's /healthz.
    Kubelet,
    /// The kubelet's client certificate.
    KubeletCert,
    /// The container runtime over CRI (CRI-O; containerd in tests).
    Cri,
    /// The local etcd member.
    Etcd,
    /// fdatasync latency under /var/lib/etcd.
    EtcdDisk,
    /// bootkube.sh's progress (the bootstrap only).
    Bootkube,
    /// A single node's bootstrap-in-place progress: install-to-disk on its live system, then the
    /// post-reboot step on its installed one.
    InPlace,
    /// api-int:6443 through the load balancer.
    Lb,
    /// The node's resolver against the bundle's zones.
    Dns,
    /// The node's registry (release and pause images through the mirrors).
    Registry,
    /// systemd itself, when it does not answer.
    Systemd,
    /// The NICs: link, speed, MTU, error counters, bonds (sysfs).
    Nic,
    /// The default route (/proc/net/route, /proc/net/ipv6_route).
    Route,
    /// The node's addresses against the bundle's machine network and its own address.
    MachineNetwork,
    /// NTP synchronization (systemd-timedated; chrony's tracking when present).
    TimeSync,
    /// Problems in the kernel's log since boot (the journal's kernel transport).
    Kernel,
    /// Boots over time: a reboot loop.
    Boots,
    /// The disk the system runs from: size, rotational, removable.
    InstallDisk,
    /// The kernel's FIPS mode against the bundle's `fips`.
    Fips,
    /// Swap: the kubelet refuses to start with swap on (its failSwapOn).
    Swap,
    /// The kernel's open-file table (/proc/sys/fs/file-nr) against its limit.
    FileTable,
    /// Latency and loss to the other nodes of the bundle.
    Peers,
    /// Don't-fragment probes at the interface MTU to the other nodes.
    PathMtu,
    /// A random name under the cluster's domain must not resolve.
    DnsWildcard,
    /// The node's address must resolve back (PTR) to its name.
    DnsPtr,
    /// The live system's install to disk (coreos-installer): its stage and progress.
    LiveInstall,
}

impl Component {
    /// In the order the dashboard shows them.
    pub const ALL: [Component; 26] = [
        Component::Kubelet,
        Component::Cri,
        Component::Etcd,
        Component::KubeletCert,
        Component::EtcdDisk,
        Component::Dns,
        Component::Lb,
        Component::Registry,
        Component::Bootkube,
        Component::InPlace,
        Component::Systemd,
        Component::Nic,
        Component::Route,
        Component::MachineNetwork,
        Component::PathMtu,
        Component::Peers,
        Component::TimeSync,
        Component::Kernel,
        Component::Boots,
        Component::InstallDisk,
        Component::Fips,
        Component::Swap,
        Component::FileTable,
        Component::DnsWildcard,
        Component::DnsPtr,
        Component::LiveInstall,
    ];

    /// The machine's own components (the hardware, its network and its kernel): the dashboard
    /// and `status` show them apart from the install's.
    pub const HARDWARE: [Component; 14] = [
        Component::Nic,
        Component::Route,
        Component::MachineNetwork,
        Component::PathMtu,
        Component::Peers,
        Component::TimeSync,
        Component::Kernel,
        Component::Boots,
        Component::InstallDisk,
        Component::Fips,
        Component::Swap,
        Component::FileTable,
        Component::DnsWildcard,
        Component::DnsPtr,
    ];

    pub fn is_hardware(self) -> bool {
        Component::HARDWARE.contains(&self)
    }

    pub const fn name(self) -> &'static str {
        match self {
            Component::Kubelet => "kubelet",
            Component::KubeletCert => "kubelet-cert",
            Component::Cri => "cri",
            Component::Etcd => "etcd",
            Component::EtcdDisk => "etcd-disk",
            Component::Bootkube => "bootkube",
            Component::InPlace => "bootstrap-in-place",
            Component::Lb => "lb",
            Component::Dns => "dns",
            Component::Registry => "registry",
            Component::Systemd => "systemd",
            Component::Nic => "nic",
            Component::Route => "route",
            Component::MachineNetwork => "machine-network",
            Component::TimeSync => "time-sync",
            Component::Kernel => "kernel",
            Component::Boots => "boots",
            Component::InstallDisk => "install-disk",
            Component::Fips => "fips",
            Component::Swap => "swap",
            Component::FileTable => "file-table",
            Component::Peers => "peers",
            Component::PathMtu => "path-mtu",
            Component::DnsWildcard => "dns-wildcard",
            Component::DnsPtr => "dns-ptr",
            Component::LiveInstall => "live-install",
        }
    }

    /// Its place in `ALL`. A new component does not compile until it is given one, and the
    /// vocabulary's tests hold `ALL` to these places: none is left out of it.
    pub const fn position(self) -> usize {
        match self {
            Component::Kubelet => 0,
            Component::Cri => 1,
            Component::Etcd => 2,
            Component::KubeletCert => 3,
            Component::EtcdDisk => 4,
            Component::Dns => 5,
            Component::Lb => 6,
            Component::Registry => 7,
            Component::Bootkube => 8,
            Component::InPlace => 9,
            Component::Systemd => 10,
            Component::Nic => 11,
            Component::Route => 12,
            Component::MachineNetwork => 13,
            Component::PathMtu => 14,
            Component::Peers => 15,
            Component::TimeSync => 16,
            Component::Kernel => 17,
            Component::Boots => 18,
            Component::InstallDisk => 19,
            Component::Fips => 20,
            Component::Swap => 21,
            Component::FileTable => 22,
            Component::DnsWildcard => 23,
            Component::DnsPtr => 24,
            Component::LiveInstall => 25,
        }
    }

    pub fn of(name: &str) -> Option<Component> {
        Component::ALL.into_iter().find(|c| c.name() == name)
    }

    /// This component in a report, if it is there.
    pub fn in_report(self, components: &[ComponentState]) -> Option<&ComponentState> {
        components.iter().find(|c| c.name == self.name())
    }
}

/// A component's state in a report: the one way the agent writes one (details added after).
pub fn component(c: Component, health: Health, state: impl Into<String>, reason: impl Into<String>) -> ComponentState {
    ComponentState {
        name: c.name().into(),
        health: health as i32,
        state: state.into(),
        reason: reason.into(),
        details: Default::default(),
    }
}

impl ComponentState {
    /// The same state with these details (what the probe read, for the dashboard and the rules).
    pub fn with_details(mut self, details: std::collections::HashMap<String, String>) -> ComponentState {
        self.details = details;
        self
    }
}

/// The systemd units the collector diagnoses by name (any watched unit is reported).
pub mod unit {
    pub const KUBELET: &str = "kubelet.service";
    pub const CRIO: &str = "crio.service";
}

/// States the collector reads, as the agent writes them.
pub mod state {
    /// kubelet-cert: no client certificate yet, its CSR waits.
    pub const BOOTSTRAPPING: &str = "bootstrapping";
    /// kubelet-cert: valid only later (a clock behind).
    pub const NOT_YET_VALID: &str = "not yet valid";
    /// kubelet-cert: past its notAfter.
    pub const EXPIRED: &str = "expired";
    /// kubelet-cert: within a day of its notAfter.
    pub const EXPIRING: &str = "expiring";
    /// bootkube: every stage done.
    pub const COMPLETE: &str = "complete";
    /// bootkube: no progress file yet.
    pub const NOT_STARTED: &str = "not started";
    /// A container (CRI's CONTAINER_RUNNING).
    pub const RUNNING: &str = "running";
    /// A container (CRI's CONTAINER_EXITED).
    pub const EXITED: &str = "exited";
    /// A probe that did not answer within its deadline: its field only, never the report.
    pub const TIMED_OUT: &str = "unknown: timed out";
}

/// The live system's install to disk, stage by stage (the `live-install` component's `stage`
/// detail), with the assisted installer's stage names where they mean the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InstallStage {
    /// The disk checked, coreos-installer started (it fetches the node's config first).
    Starting,
    /// coreos-installer writes the image; `percent` says how far.
    Writing,
    /// The disk is written with the node's config; the live system reboots into it.
    Rebooting,
    /// The disk could not be written (`error` says why); the live system stays up.
    Failed,
}

impl InstallStage {
    pub const ALL: [InstallStage; 4] = [
        InstallStage::Starting,
        InstallStage::Writing,
        InstallStage::Rebooting,
        InstallStage::Failed,
    ];

    /// On the wire and in events.
    pub const fn slug(self) -> &'static str {
        match self {
            InstallStage::Starting => "starting-installation",
            InstallStage::Writing => "writing-image-to-disk",
            InstallStage::Rebooting => "rebooting",
            InstallStage::Failed => "failed",
        }
    }

    /// The assisted installer's name for the stage (its HostStage).
    pub const fn assisted(self) -> &'static str {
        match self {
            InstallStage::Starting => "Starting installation",
            InstallStage::Writing => "Writing image to disk",
            InstallStage::Rebooting => "Rebooting",
            InstallStage::Failed => "Failed",
        }
    }

    pub fn of(slug: &str) -> Option<InstallStage> {
        InstallStage::ALL.into_iter().find(|s| s.slug() == slug)
    }
}

/// The `live-install` component's details, as the agent writes them and the collector reads them.
pub mod install {
    /// `InstallStage::slug`.
    pub const STAGE: &str = "stage";
    /// 0–100 while writing.
    pub const PERCENT: &str = "percent";
    /// The disk as configured, and as it resolved (`/dev/disk/by-id/…` → `/dev/sda`).
    pub const DISK: &str = "disk";
    pub const DISK_BYTES: &str = "disk_bytes";
    /// Seconds since the stage or its percentage last moved.
    pub const STILL_S: &str = "still_s";
    /// Why it failed: coreos-installer's error line, or the disk's absence.
    pub const ERROR: &str = "error";
    /// coreos-installer's last lines, newline-separated.
    pub const TAIL: &str = "tail";
}

/// The kernel's problems, as the agent counts them (keys of the `kernel` component's details)
/// and the collector's rules read them.
pub mod kernel {
    pub const OOM: &str = "oom-kill";
    pub const HUNG_TASK: &str = "hung-task";
    pub const OOPS: &str = "oops";
    pub const IO_ERROR: &str = "io-error";
    pub const FS_ERROR: &str = "fs-error";
    pub const READ_ONLY: &str = "read-only";
    pub const HARDWARE_ERROR: &str = "hardware-error";
    pub const LINK_DOWN: &str = "link-down";
    pub const NETDEV_LEAK: &str = "unregister-netdevice";
    /// Every kind, in the order they are shown.
    pub const ALL: [&str; 9] = [
        OOPS,
        HUNG_TASK,
        NETDEV_LEAK,
        HARDWARE_ERROR,
        IO_ERROR,
        FS_ERROR,
        READ_ONLY,
        OOM,
        LINK_DOWN,
    ];
}

impl Health {
    /// The health a report carries (an unknown number is `Unknown`).
    pub fn of(wire: i32) -> Health {
        Health::try_from(wire).unwrap_or(Health::Unknown)
    }

    /// Its name in tables, JSON and the dashboard.
    pub const fn label(self) -> &'static str {
        match self {
            Health::Unknown => "unknown",
            Health::Ok => "ok",
            Health::Warning => "warning",
            Health::Failing => "failing",
            Health::Absent => "absent",
        }
    }

    /// How bad, for "the worst of" a node: a watched unit that is not there cannot run, so
    /// absent is as bad as failing; unknown (nothing said yet) is worse than ok.
    pub const fn badness(self) -> u8 {
        match self {
            Health::Ok => 0,
            Health::Unknown => 1,
            Health::Warning => 2,
            Health::Failing | Health::Absent => 3,
        }
    }

    /// The health named `label` (what `label` returns).
    pub fn of_label(label: &str) -> Option<Health> {
        [Health::Unknown, Health::Ok, Health::Warning, Health::Failing, Health::Absent]
            .into_iter()
            .find(|h| h.label() == label)
    }

    /// Failing or absent: the component cannot do its job.
    pub const fn is_down(self) -> bool {
        self.badness() == Health::Failing.badness()
    }
}

/// The containers that failed: exited non-zero, only the newest attempt of each (an older attempt
/// that failed is history once a newer one runs). The one definition for the agent's runtime
/// component, diagnose and gather.
pub fn failing_containers(containers: &[ContainerInfo]) -> Vec<&ContainerInfo> {
    let mut newest: std::collections::BTreeMap<(&str, &str), &ContainerInfo> = std::collections::BTreeMap::new();
    for c in containers {
        let k = (c.pod.as_str(), c.name.as_str());
        if newest.get(&k).is_none_or(|o| o.attempt <= c.attempt) {
            newest.insert(k, c);
        }
    }
    newest
        .into_values()
        .filter(|c| c.state == state::EXITED && c.exit_code != 0)
        .collect()
}

/// A component as JSON (the one form: the agent's local status, the collector's status, gather).
pub fn component_json(c: &ComponentState) -> serde_json::Value {
    let details: std::collections::BTreeMap<&String, &String> = c.details.iter().collect();
    serde_json::json!({
        "name": c.name,
        "health": Health::of(c.health).label(),
        "state": c.state,
        "reason": c.reason,
        "details": details,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for c in Component::ALL {
            assert_eq!(Component::of(c.name()), Some(c));
        }
        let mut names: Vec<&str> = Component::ALL.iter().map(|c| c.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Component::ALL.len());
        assert_eq!(Component::of("kubelet.service"), None);
    }

    /// Every component has its own place in ALL, and ALL holds each at its place: a component
    /// given a place but left out of ALL (or put twice) fails here.
    #[test]
    fn all_holds_every_component_at_its_place() {
        for (i, c) in Component::ALL.iter().enumerate() {
            assert_eq!(c.position(), i, "{c:?}");
        }
        let mut places: Vec<usize> = Component::ALL.iter().map(|c| c.position()).collect();
        places.dedup();
        assert_eq!(places, (0..Component::ALL.len()).collect::<Vec<_>>());
    }

    #[test]
    fn absent_is_as_bad_as_failing_and_worse_than_ok() {
        assert!(Health::Absent.badness() > Health::Ok.badness());
        assert!(Health::Absent.is_down() && Health::Failing.is_down() && !Health::Warning.is_down());
        assert!(Health::Unknown.badness() > Health::Ok.badness());
        assert_eq!(Health::of(99), Health::Unknown);
        assert_eq!(Health::of(Health::Absent as i32).label(), "absent");
    }

    #[test]
    fn a_failing_container_is_the_newest_attempt_exited_non_zero() {
        let c = |name: &str, attempt: u32, st: &str, exit: i32| ContainerInfo {
            pod: "ns/p".into(),
            name: name.into(),
            attempt,
            state: st.into(),
            exit_code: exit,
            ..Default::default()
        };
        let all = [
            c("a", 0, "exited", 1),
            c("a", 1, "running", 0),
            c("b", 2, "exited", 137),
            c("d", 0, "exited", 0),
        ];
        let f: Vec<&str> = failing_containers(&all).iter().map(|c| c.name.as_str()).collect();
        assert_eq!(f, ["b"]);
    }
}
