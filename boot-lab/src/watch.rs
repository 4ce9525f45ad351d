//! What a booting machine has got to: the helper's boot events (`lab serve`: DHCP, HTTP), the
//! VM's serial console and the collector's store. Pure functions of those, so each rule is tested
//! on what the real programs give.

use hardshift_collector::boot::{BootEvent, Step};
use std::time::Duration;

/// When (after power-on) each step of a boot was first seen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Milestones {
    /// The firmware's DHCP request was answered with the node's reservation.
    pub lease: Option<Duration>,
    /// The helper served the node's Ignition config.
    pub fetched: Option<Duration>,
    /// Ignition finished every stage (ignition-complete.target).
    pub ignition_done: Option<Duration>,
    /// The collector stored the node's first report (of its installed system, when it boots a
    /// live one first).
    pub report: Option<Duration>,
    /// The collector stored the first report of the node's live system (its agent installing).
    pub live_report: Option<Duration>,
    /// The live system rebooted after writing the disk.
    pub rebooted: Option<Duration>,
    /// dnsmasq saw the machine's MAC and had no reservation for it.
    pub unserved: bool,
    /// The console line that says Ignition (or the boot) failed.
    pub failed: Option<String>,
}

impl Milestones {
    /// The furthest point reached, as a person reads it: what `boot-lab` prints for a node that
    /// did not report.
    pub fn last_seen(&self, name: &str, mac: &str, inventory_mac: &str) -> String {
        if self.report.is_some() {
            return "reported".into();
        }
        if let Some(line) = &self.failed {
            return format!("Ignition failed: {line}");
        }
        if self.rebooted.is_some() {
            return "the live system wrote the disk and rebooted; no report from the installed system yet".into();
        }
        if self.live_report.is_some() && self.rebooted.is_none() {
            return "its live system's agent reports: installing (`hardshift status`)".into();
        }
        if self.ignition_done.is_some() {
            return "Ignition done, no report yet (is the agent running, can it reach the collector? see the console)".into();
        }
        if self.fetched.is_some() {
            return "fetched its Ignition config; Ignition has not finished yet".into();
        }
        if self.lease.is_some() {
            return format!("DHCP lease; nothing has asked the helper for /ignition/{name}.ign yet (the kernel and initramfs load first)");
        }
        if self.unserved {
            let why = if mac.eq_ignore_ascii_case(inventory_mac) {
                "the lab's DHCP config has no reservation for it".to_string()
            } else {
                format!("the inventory (agent-config.yaml) says {inventory_mac}: fix the MAC there and run create again")
            };
            return format!("no DHCP: dnsmasq answered no address to {mac}: {why}");
        }
        "no DHCP request seen yet (does the firmware boot from the network?)".into()
    }
}

/// The address the helper's DHCP acknowledged to `mac` (a `dhcp-ack` boot event).
pub fn lease(events: &[BootEvent], mac: &str) -> Option<String> {
    events
        .iter()
        .find(|e| e.step == Step::DhcpAck && e.mac.eq_ignore_ascii_case(mac))
        .map(|e| e.ip.clone())
}

/// The helper's DHCP saw `mac` and had no reservation for it.
pub fn unserved(events: &[BootEvent], mac: &str) -> bool {
    events
        .iter()
        .any(|e| e.step == Step::DhcpNoAddress && e.mac.eq_ignore_ascii_case(mac))
}

/// The helper served `/ignition/<name>.ign` whole, with 200.
pub fn fetched(events: &[BootEvent], name: &str) -> bool {
    let get = format!("GET /ignition/{name}.ign 200 ");
    events
        .iter()
        .any(|e| e.step == Step::Http && e.detail.starts_with(&get) && !e.detail.contains("cut short"))
}

/// systemd in the initramfs reached ignition-complete.target: every Ignition stage ran.
pub fn ignition_done(console: &str) -> bool {
    console
        .lines()
        .any(|l| l.contains("Reached target") && (l.contains("ignition-complete.target") || l.contains("Ignition Complete")))
}

/// The console line that says best why the boot failed, without terminal escapes: Ignition's own
/// words before systemd's "Failed to start" or the emergency shell, whichever reached the console
/// first (under load, systemd's line can come before Ignition's).
pub fn failure(console: &str) -> Option<String> {
    const SIGNS: [&str; 5] = [
        "hash verification failed",
        "Ignition failed",
        "failed to fetch config",
        "Failed to start ignition",
        "emergency mode",
    ];
    let lines: Vec<String> = console.lines().map(plain).collect();
    SIGNS
        .iter()
        .find_map(|s| lines.iter().find(|l| l.contains(s)))
        .map(|l| without_timestamp(l.trim()).chars().take(300).collect())
}

/// A kernel console line without its `[   21.649177] ` timestamp.
fn without_timestamp(line: &str) -> &str {
    match line.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((t, rest)) if t.trim().chars().all(|c| c.is_ascii_digit() || c == '.') => rest.trim_start(),
        _ => line,
    }
}

/// A console line without ANSI escape sequences (systemd colours its status).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else if c != '\r' {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(step: Step, mac: &str, ip: &str, detail: &str) -> BootEvent {
        BootEvent {
            at_ms: 1,
            node: String::new(),
            mac: mac.into(),
            ip: ip.into(),
            step,
            detail: detail.into(),
        }
    }

    #[test]
    fn a_lease_is_the_ack_for_that_mac_and_a_stranger_is_unserved() {
        let events = [
            e(Step::DhcpDiscover, "52:54:00:aa:bb:01", "", ""),
            e(Step::DhcpAck, "52:54:00:aa:bb:01", "192.168.126.100", "bootstrap"),
            e(Step::DhcpNoAddress, "52:54:00:de:ad:01", "", "no address available"),
        ];
        assert_eq!(lease(&events, "52:54:00:AA:BB:01").as_deref(), Some("192.168.126.100"));
        assert_eq!(lease(&events, "52:54:00:aa:bb:02"), None);
        assert_eq!(lease(&events, "52:54:00:de:ad:01"), None);
        assert!(unserved(&events, "52:54:00:de:ad:01"));
        assert!(!unserved(&events, "52:54:00:aa:bb:01"));
    }

    #[test]
    fn only_a_whole_200_for_the_nodes_own_config_is_a_fetch() {
        let events = [
            e(Step::Http, "", "192.168.126.100", "GET /ignition/bootstrap.ign 200 1000 B 3 ms"),
            e(Step::Http, "", "192.168.126.101", "GET /ignition/master-0.ign 404"),
            e(Step::HttpRefused, "", "192.168.126.101", "GET /ignition/master-1.ign 403: ..."),
            e(
                Step::Http,
                "",
                "192.168.126.102",
                "GET /ignition/master-2.ign 200 cut short: 10 of 1000 B in 2 ms",
            ),
        ];
        assert!(fetched(&events, "bootstrap"));
        assert!(!fetched(&events, "master-0"));
        assert!(!fetched(&events, "master-1"));
        assert!(!fetched(&events, "master-2"));
        assert!(!fetched(&events, "bootstrap-x"));
    }

    #[test]
    fn ignition_is_done_at_its_target_and_failures_are_named() {
        let ok = "[  \u{1b}[0;32mOK\u{1b}[0m  ] Reached target \u{1b}[0;1;39mignition-complete.target\u{1b}[0m - Ignition Complete.\n";
        assert!(ignition_done(ok));
        assert!(!ignition_done("[  OK  ] Reached target initrd.target\n"));
        let bad = "ignition[412]: failed to fetch config: hash verification failed\n\u{1b}[0;1;31mYou are in emergency mode.\u{1b}[0m\n";
        assert_eq!(
            failure(bad).as_deref(),
            Some("ignition[412]: failed to fetch config: hash verification failed")
        );
        assert_eq!(failure(ok), None);
        // systemd's line first, Ignition's after it: Ignition's words are the reason.
        let late = "[FAILED] Failed to start ignition-fetch.service - Ignition (fetch).\nignition[412]: failed to fetch config: hash verification failed\n";
        assert_eq!(
            failure(late).as_deref(),
            Some("ignition[412]: failed to fetch config: hash verification failed")
        );
        assert_eq!(
            failure("[FAILED] Failed to start ignition-fetch.service - Ignition (fetch).\n").as_deref(),
            Some("[FAILED] Failed to start ignition-fetch.service - Ignition (fetch).")
        );
        let stamped = "[   21.649177] ignition[272]: Ignition failed: unsupported config version\n";
        assert_eq!(
            failure(stamped).as_deref(),
            Some("ignition[272]: Ignition failed: unsupported config version")
        );
    }

    #[test]
    fn the_last_thing_seen_names_the_furthest_step() {
        let mut m = Milestones::default();
        assert!(m
            .last_seen("w", "52:54:00:00:00:01", "52:54:00:00:00:01")
            .starts_with("no DHCP request"));
        m.unserved = true;
        let s = m.last_seen("w", "52:54:00:00:00:09", "52:54:00:00:00:01");
        assert!(
            s.contains("52:54:00:00:00:09") && s.contains("inventory") && s.contains("52:54:00:00:00:01"),
            "{s}"
        );
        m.lease = Some(Duration::from_secs(3));
        assert!(m.last_seen("w", "a", "a").contains("/ignition/w.ign"));
        m.fetched = Some(Duration::from_secs(9));
        m.failed = Some("hash verification failed".into());
        assert_eq!(m.last_seen("w", "a", "a"), "Ignition failed: hash verification failed");
        m.report = Some(Duration::from_secs(60));
        assert_eq!(m.last_seen("w", "a", "a"), "reported");
    }
}
