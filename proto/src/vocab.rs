//! The node report's vocabulary: the component names, states and health order the agent writes
//! and the collector reads, in one place, so a name is tied at compile time on both sides.

use crate::v1::{ComponentState, ContainerInfo, Health};

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
    /// api-int:6443 through the load balancer.
    Lb,
    /// The node's resolver against the bundle's zones.
    Dns,
    /// The node's registry (release and pause images through the mirrors).
    Registry,
    /// systemd itself, when it does not answer.
    Systemd,
}

impl Component {
    /// In the order the dashboard shows them.
    pub const ALL: [Component; 10] = [
        Component::Kubelet,
        Component::Cri,
        Component::Etcd,
        Component::KubeletCert,
        Component::EtcdDisk,
        Component::Dns,
        Component::Lb,
        Component::Registry,
        Component::Bootkube,
        Component::Systemd,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Component::Kubelet => "kubelet",
            Component::KubeletCert => "kubelet-cert",
            Component::Cri => "cri",
            Component::Etcd => "etcd",
            Component::EtcdDisk => "etcd-disk",
            Component::Bootkube => "bootkube",
            Component::Lb => "lb",
            Component::Dns => "dns",
            Component::Registry => "registry",
            Component::Systemd => "systemd",
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
