//! `hardshift status`, as data and lines: the install's phase, a row per node from the store
//! (`summary`), a row for each node of the bundle that never reported (a machine that did not
//! boot, fetch its config or reach the collector), and the machine per node.

use crate::boot::BootEvent;
use crate::phase::{self, Member};
use crate::scrub::for_terminal as clean;
use crate::store::{NodeRow, Store, StoreError};
use crate::summary::Summary;
use hardshift_proto::v1::Health;
use hardshift_proto::vocab::{component_json, Component};

/// A node of the bundle and the address the inventory gives it.
pub type Listed = (Member, String);

/// The nodes of `inventory` that never reported.
pub fn silent<'a>(inventory: &'a [Listed], rows: &[NodeRow]) -> Vec<&'a Listed> {
    inventory.iter().filter(|(m, _)| !rows.iter().any(|r| r.node == m.name)).collect()
}

/// `-o json`: each node's summary with its newest report's host and components, then each
/// silent node.
pub fn json(rows: &[NodeRow], sums: &[Summary], silent: &[&Listed], boot: &[BootEvent]) -> Vec<serde_json::Value> {
    let mut v: Vec<serde_json::Value> = rows.iter().zip(sums).map(|(r, s)| reported(r, s)).collect();
    v.extend(silent.iter().map(|(m, ip)| {
        let last = crate::boot::last_step(boot, &m.name);
        serde_json::json!({"node": m.name, "role": m.role, "reported": false, "inventory_address": ip, "last_boot_step": last})
    }));
    v.extend(unknown_machines(boot).into_iter().map(
        |(mac, at_ms, n, like)| serde_json::json!({"unknown_machine": mac, "last_seen_ms": at_ms, "requests": n, "same_vendor_as": like}),
    ));
    v
}

/// The machines not in the inventory that asked the helper for an address, each with the nodes
/// of the bundle whose MAC has its vendor prefix and that never got one (a MAC typed wrong in
/// agent-config.yaml): (MAC, last seen, requests, those nodes).
pub fn unknown_machines(boot: &[BootEvent]) -> Vec<(String, i64, usize, Vec<String>)> {
    let acked = |node: &str| boot.iter().any(|e| e.node == node && e.step == crate::boot::Step::DhcpAck);
    crate::boot::unknown_machines(boot)
        .into_iter()
        .map(|(mac, at, n)| {
            let prefix = crate::boot::vendor_prefix(&mac);
            let mut like: Vec<String> = boot
                .iter()
                .filter(|e| !e.node.is_empty() && crate::boot::vendor_prefix(&e.mac) == prefix && !acked(&e.node))
                .map(|e| e.node.clone())
                .collect();
            like.sort();
            like.dedup();
            (mac, at, n, like)
        })
        .collect()
}

/// The last boot step of a node that never reported, in a few words.
fn boot_step(boot: &[BootEvent], node: &str) -> String {
    match crate::boot::last_step(boot, node) {
        Some(e) => format!("NEVER REPORTED; last boot step {} {}", e.step, clean(&e.detail)).trim_end().to_string(),
        None if boot.is_empty() => "NEVER REPORTED: no DHCP, no Ignition, or no route to the collector".into(),
        None => "NEVER REPORTED; the helper never saw it (no DHCP request from its MAC: powered off, booted from disk, or its MAC is not the inventory's)".into(),
    }
}

fn reported(r: &NodeRow, s: &Summary) -> serde_json::Value {
    let comps: Vec<serde_json::Value> = r.last.iter().flat_map(|l| &l.components).map(component_json).collect();
    let host = r.last.as_ref().and_then(|l| l.host.as_ref());
    let mut v = serde_json::to_value(s).unwrap_or_default();
    v["reported"] = true.into();
    v["boot_id"] = r.boot_id.clone().into();
    v["last_seq"] = r.last_seq.into();
    v["hostname"] = host.map(|h| h.hostname.clone()).unwrap_or_default().into();
    v["addresses"] = host.map(|h| h.addresses.clone()).unwrap_or_default().into();
    v["uptime_s"] = host.map(|h| h.uptime_seconds).unwrap_or_default().into();
    v["components"] = comps.into();
    v
}

/// The install's phase over the bundle's `members`, in a line.
pub fn phase_line(store: &Store, members: &[Member], rows: &[NodeRow], now_ms: i64) -> Result<String, StoreError> {
    let checks = phase::checks(members, rows, &store.api_objects()?, &store.api_status()?, now_ms);
    let done = checks.iter().take_while(|c| c.met).count();
    Ok(match phase::phase(&checks) {
        None => format!("PHASE complete ({done}/{})", checks.len()),
        Some(c) => format!(
            "PHASE {done}/{}: waiting for {}: {}",
            checks.len(),
            c.title,
            clean(&c.evidence.first().cloned().unwrap_or_default())
        ),
    })
}

/// The table: a header, a row per node that reported, a row per silent node. Every field may
/// quote a node: escaped and scrubbed, never printed as is.
pub fn table(rows: &[NodeRow], sums: &[Summary], silent: &[&Listed], boot: &[BootEvent]) -> Vec<String> {
    let mut out = vec![format!(
        "{:<18} {:<9} {:<16} {:>6}  {:<18} {:<22} {:<18} {:>4}  WARNINGS",
        "NODE", "ROLE", "ADDRESS", "SEEN", "KUBELET", "CRI", "ETCD", "PODS"
    )];
    out.extend(rows.iter().zip(sums).map(|(r, s)| row(r, s)));
    out.extend(silent.iter().map(|(m, ip)| {
        format!(
            "{:<18} {:<9} {:<16} {:>6}  {:<18} {:<22} {:<18} {:>4}  {}; `hardshift diagnose {}`",
            m.name,
            m.role,
            ip,
            "never",
            "-",
            "-",
            "-",
            "-",
            boot_step(boot, &m.name),
            m.name
        )
    }));
    // Each node's boot as the helper saw it, in a line (the latest attempt).
    let mut nodes: Vec<&str> = boot.iter().filter(|e| !e.node.is_empty()).map(|e| e.node.as_str()).collect();
    nodes.sort_unstable();
    nodes.dedup();
    for n in nodes {
        let line = crate::boot::timeline(boot, n);
        if !line.is_empty() {
            out.push(format!("BOOT {n}: {}", clean(&line)));
        }
    }
    for (mac, _, n, like) in unknown_machines(boot) {
        let hint = if like.is_empty() {
            String::new()
        } else {
            format!(
                ": the vendor prefix of {}, which never got an address (a MAC typed wrong in agent-config.yaml?)",
                like.join(", ")
            )
        };
        out.push(format!(
            "UNKNOWN MACHINE {} asked for DHCP {n} times, not in the inventory{hint}",
            clean(&mac)
        ));
    }
    out
}

fn row(r: &NodeRow, s: &Summary) -> String {
    // The root cause first (see `hardshift diagnose`), then every warning.
    let mut parts: Vec<String> = s.root_cause.iter().map(|c| format!("CAUSE {c}")).collect();
    parts.extend(s.warnings.iter().cloned());
    let warn = if parts.is_empty() { "-".to_string() } else { parts.join("; ") };
    // The node's first address as it reports it (without the prefix length).
    let addr = r
        .last
        .as_ref()
        .and_then(|l| l.host.as_ref())
        .and_then(|h| h.addresses.first())
        .map(|a| a.split('/').next().unwrap_or_default().to_string())
        .unwrap_or_else(|| "-".into());
    format!(
        "{:<18} {:<9} {:<16} {:>5}s  {:<18} {:<22} {:<18} {:>4}  {}",
        clean(&s.node),
        clean(&s.role),
        clean(&addr),
        s.seen_ago_s,
        clean(&s.kubelet),
        clean(&s.cri),
        clean(&s.etcd),
        s.pods_not_running.len(),
        clean(&warn)
    )
}

/// The machine per node: its NIC, time sync, kernel and peers in one line, then every other
/// machine component that is not ok; under a HARDWARE heading, or nothing when no node has one.
pub fn hardware(rows: &[NodeRow]) -> Vec<String> {
    let lines: Vec<String> = rows.iter().flat_map(machine).collect();
    if lines.is_empty() {
        return lines;
    }
    std::iter::once("HARDWARE".to_string()).chain(lines).collect()
}

fn machine(r: &NodeRow) -> Vec<String> {
    let Some(last) = &r.last else { return vec![] };
    let get = |c: Component| c.in_report(&last.components);
    if !Component::HARDWARE.iter().any(|c| get(*c).is_some()) {
        return vec![];
    }
    let short = |c: Component| match get(c) {
        Some(x) => format!("{}: {} {}", c.name(), Health::of(x.health).label(), x.state),
        None => format!("{}: -", c.name()),
    };
    let main = [Component::Nic, Component::TimeSync, Component::Kernel, Component::Peers];
    let mut lines = vec![format!("{:<18} {}", clean(&r.node), clean(&main.map(short).join(" | ")))];
    for c in Component::HARDWARE.iter().filter(|c| !main.contains(c)) {
        if let Some(x) = get(*c).filter(|x| matches!(Health::of(x.health), Health::Warning | Health::Failing)) {
            lines.push(format!(
                "{:<18}   {} {}: {}",
                "",
                c.name(),
                Health::of(x.health).label(),
                clean(&x.reason)
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(node: &str) -> NodeRow {
        NodeRow {
            node: node.into(),
            role: "master".into(),
            boot_id: "b".into(),
            last_seq: 1,
            last_seen_ms: 0,
            reports: 1,
            dropped: 0,
            last: None,
        }
    }

    #[test]
    fn a_bundle_node_that_never_reported_gets_its_own_row() {
        let m = |n: &str| Member {
            name: n.into(),
            role: hardshift_proto::vocab::Role::Master,
        };
        let inv = vec![(m("master-0"), "10.0.0.1".to_string()), (m("master-1"), "10.0.0.2".to_string())];
        let rows = vec![row("master-0")];
        let quiet = silent(&inv, &rows);
        assert_eq!(quiet.len(), 1);
        let t = table(&[], &[], &quiet, &[]);
        assert!(
            t[0].starts_with("NODE") && t[1].starts_with("master-1 ") && t[1].contains("NEVER REPORTED"),
            "{t:?}"
        );
        let j = json(&[], &[], &quiet, &[]);
        assert_eq!(j[0]["reported"], false);
        assert_eq!(j[0]["inventory_address"], "10.0.0.2");
        assert!(hardware(&rows).is_empty());
    }

    /// What the helper saw stands in the silent node's row: its last step, and a stranger with
    /// its vendor prefix that asked for an address instead.
    #[test]
    fn a_silent_node_shows_its_last_boot_step_and_a_stranger_its_likely_twin() {
        use crate::boot::Step;
        let m = |n: &str| Member {
            name: n.into(),
            role: hardshift_proto::vocab::Role::Master,
        };
        let inv = vec![(m("master-1"), "10.0.0.2".to_string()), (m("master-2"), "10.0.0.3".to_string())];
        let quiet = silent(&inv, &[]);
        let e = |node: &str, mac: &str, step, detail: &str, at_ms| BootEvent {
            at_ms,
            node: node.into(),
            mac: mac.into(),
            ip: String::new(),
            step,
            detail: detail.into(),
        };
        let boot = vec![
            e("master-1", "52:54:00:aa:bb:02", Step::DhcpAck, "master-1", 1),
            e(
                "master-1",
                "52:54:00:aa:bb:02",
                Step::Http,
                "GET /rhcos/rhcos-live-rootfs.x86_64.img 404",
                2,
            ),
            e("", "52:54:00:aa:bb:30", Step::DhcpNoAddress, "no address available", 3),
            e("master-2", "52:54:00:aa:bb:03", Step::Backend, "api-backend/master-2 is DOWN", 4),
        ];
        let t = table(&[], &[], &quiet, &boot);
        assert!(
            t[1].contains("last boot step http GET /rhcos/rhcos-live-rootfs.x86_64.img 404"),
            "{t:?}"
        );
        // HAProxy's checks of master-2 are the helper's doing, not a step of its boot.
        assert!(t[2].starts_with("master-2 ") && t[2].contains("the helper never saw it"), "{t:?}");
        let unknown = t
            .iter()
            .find(|l| l.starts_with("UNKNOWN MACHINE"))
            .expect("an unknown machine line");
        assert!(
            unknown.starts_with("UNKNOWN MACHINE 52:54:00:aa:bb:30") && unknown.contains("of master-2, which never got an address"),
            "{t:?}"
        );
        assert!(t.iter().any(|l| l.starts_with("BOOT master-1: dhcp-ack ")), "{t:?}");
        let j = json(&[], &[], &quiet, &boot);
        assert_eq!(j[0]["last_boot_step"]["step"], "http");
        assert_eq!(j[2]["unknown_machine"], "52:54:00:aa:bb:30");
        assert_eq!(j[2]["same_vendor_as"], serde_json::json!(["master-2"]));
    }
}
