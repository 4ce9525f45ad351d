//! Why a node that never reported stopped where it did, from what the helper saw of its boot
//! (`lab serve`): the step it got to, and the one it did not. Pure: the boot events and the MAC
//! the inventory gives the node in, a verdict out; `diagnose` makes it a finding.

use crate::boot::{vendor_prefix, BootEvent, Step};

/// A verdict: the rule (a row of `diagnose::RULES`), and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    pub id: &'static str,
    pub title: String,
    pub evidence: Vec<String>,
    pub fix: String,
    /// The stage is still within its time: said as a warning, not yet as the cause.
    pub within_time: bool,
}

/// How long each stage may take before the node counts as stuck there (the assisted installer
/// times its stages the same way). From the DHCP lease to the firmware asking for its boot file:
/// it asks at once.
pub const LEASE_TO_BOOT_FILE_MS: i64 = 60_000;
/// From the config fetched to the agent's first report: coreos-installer writes the disk, the
/// machine reboots, Ignition runs on the first boot and the agent starts.
pub const CONFIG_TO_REPORT_MS: i64 = 15 * 60_000;
/// From any other step to the next.
pub const NEXT_STEP_MS: i64 = 10 * 60_000;

fn ago(now_ms: i64, at_ms: i64) -> String {
    format!("{} s ago", (now_ms - at_ms).max(0) / 1000)
}

fn when(ms: i64) -> String {
    time_of_day(ms)
}

/// `HH:MM:SS` (UTC) of a unix time in ms.
pub fn time_of_day(ms: i64) -> String {
    let s = ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn line(e: &BootEvent) -> String {
    let detail = if e.detail.is_empty() {
        String::new()
    } else {
        format!(" {}", e.detail)
    };
    format!("{} {}{detail}", when(e.at_ms), e.step)
}

/// A request answered with nothing to boot from: 404 or 403 over HTTP, a file TFTP lacks.
fn refused(e: &BootEvent) -> bool {
    match e.step {
        Step::HttpRefused | Step::TftpMissing => true,
        Step::Http => e
            .detail
            .split_whitespace()
            .nth(2)
            .is_some_and(|code| code == "404" || code == "403"),
        _ => false,
    }
}

/// The verdict for `node` (its inventory MAC `mac`) from every boot event the helper stored, at
/// `now_ms`. None when the helper saw nothing at all: it did not run, and `HS003` says what it can.
pub fn why(node: &str, mac: &str, events: &[BootEvent], now_ms: i64) -> Option<Stuck> {
    // Without the helper's own events (no `lab serve`), only the reports speak: nothing to say.
    if !events.iter().any(|e| e.step.from_helper()) {
        return None;
    }
    let mine: Vec<&BootEvent> = events.iter().filter(|e| e.node == node).collect();
    if mine.iter().all(|e| e.step == Step::Backend) {
        return Some(never_asked(node, mac, events));
    }
    // The latest attempt: from its last DHCP discover on (a node retries a whole boot).
    let attempt = &mine[crate::boot::attempt_start(&mine)..];
    let evidence = |filter: &dyn Fn(&BootEvent) -> bool| -> Vec<String> { attempt.iter().filter(|e| filter(e)).map(|e| line(e)).collect() };
    let config = format!("/ignition/{node}.ign 200");
    let got_config = attempt
        .iter()
        .rev()
        .find(|e| e.step == Step::Http && e.detail.contains(&config) && !e.detail.contains("cut short"));
    if let Some(got) = got_config {
        return Some(Stuck {
            id: "HS009",
            title: format!("{node} fetched its config ({}) but its agent never reported", ago(now_ms, got.at_ms)),
            within_time: now_ms - got.at_ms < CONFIG_TO_REPORT_MS,
            evidence: evidence(&|e| e.step == Step::Http),
            fix: "the config reached the node: its first boot stopped in Ignition (on the console: `hash verification failed` means the config served is not the one the boot's --ignition-hash names; an Ignition spec the system's Ignition does not read), or the agent cannot reach the collector (`systemctl status hardshift-agent` on the node, a route to the collector's address and port)".into(),
        });
    }
    if let Some(bad) = attempt.iter().rev().find(|e| refused(e)) {
        return Some(Stuck {
            id: "HS007",
            title: format!("{node} asked the helper for a boot file it could not have"),
            within_time: false,
            evidence: evidence(&|e| refused(e)),
            fix: match bad.step {
                Step::HttpRefused => format!("a node's config is served only to the address its DHCP reservation gives it: {node} asked from {}; check its MAC and address in agent-config.yaml (or `lab serve --serve-to-any` for a lab without reservations)", bad.ip),
                Step::TftpMissing => "the TFTP root lacks the file the firmware asked for: the iPXE binaries come from Debian's `ipxe` package (or `lab serve --ipxe DIR`); a UEFI machine asks for ipxe.efi, a BIOS one for undionly.kpxe".into(),
                _ => "the file is not where the bundle's boot scripts name it: RHCOS's live kernel, initramfs and rootfs go in the directory `lab serve --rhcos` names, under the names the iPXE script and PXELINUX configs use (rhcos-live-kernel-x86_64, rhcos-live-initramfs.x86_64.img, rhcos-live-rootfs.x86_64.img)".into(),
            },
        });
    }
    if let Some(cut) = attempt
        .iter()
        .rev()
        .find(|e| e.step == Step::Http && e.detail.contains("rootfs") && e.detail.contains("cut short"))
    {
        return Some(Stuck {
            id: "HS008",
            title: format!("{node}'s download of the live rootfs was cut short"),
            within_time: false,
            evidence: vec![line(cut)],
            fix: "the live system fetches its ~1 GB rootfs before it can install: check the link between the node and the helper (speed, drops, MTU), and the disk the helper serves it from; the node retries on its next boot".into(),
        });
    }
    let acked = attempt.iter().rev().find(|e| e.step == Step::DhcpAck);
    let booted = attempt.iter().any(|e| matches!(e.step, Step::TftpSent | Step::Http));
    if let (Some(ack), false) = (acked, booted) {
        return Some(Stuck {
            id: "HS006",
            title: format!("{node} got its address ({}) but asked for no boot file", ago(now_ms, ack.at_ms)),
            within_time: now_ms - ack.at_ms < LEASE_TO_BOOT_FILE_MS,
            evidence: evidence(&|e| e.step.name().starts_with("dhcp")),
            fix: "its firmware took the lease and did not network-boot: network boot (PXE) first in its boot order, the firmware's boot mode matching the iPXE binary (UEFI: ipxe.efi, BIOS: undionly.kpxe), and TFTP (UDP 69) open on the helper".into(),
        });
    }
    let (last, at) = attempt.last().map(|e| (line(e), e.at_ms)).unwrap_or_default();
    Some(Stuck {
        id: "HS003",
        title: format!(
            "{node} never reported; the last step the helper saw was {last} ({})",
            ago(now_ms, at)
        ),
        within_time: now_ms - at < NEXT_STEP_MS,
        evidence: evidence(&|_| true),
        fix: "the next step would have been the helper's to see; look at the node's console for where it stopped".into(),
    })
}

/// The node never asked the helper for anything: a stranger with its vendor prefix did (its MAC
/// typed wrong), or nothing did (off, booted from its disk, or on another network).
/// A node whose live system wrote its disk and rebooted, and which then booted a live system
/// again (from the network or the ISO) instead of its disk: the firmware's boot order. None once
/// an installed system reported after it.
pub fn live_again(node: &str, events: &[BootEvent]) -> Option<Stuck> {
    use crate::boot::Installed;
    use hardshift_proto::vocab::InstallStage;
    let mine: Vec<&BootEvent> = events.iter().filter(|e| e.node == node).collect();
    let boot_of = |e: &BootEvent| -> Option<String> {
        match e.step {
            Step::Install => Some(Installed::of(&e.detail).boot),
            Step::Reported if e.detail.starts_with("live") => e.detail.rsplit(' ').next().map(String::from),
            _ => None,
        }
    };
    // From the newest "rebooting" back: the first followed by another live boot says it, unless
    // an installed system reported since the newest (the boot order was mended).
    let rebootings: Vec<usize> = (0..mine.len())
        .filter(|&i| mine[i].step == Step::Install && Installed::of(&mine[i].detail).stage == Some(InstallStage::Rebooting))
        .collect();
    let newest = *rebootings.last()?;
    if mine[newest + 1..]
        .iter()
        .any(|e| e.step == Step::Reported && e.detail.starts_with("installed"))
    {
        return None;
    }
    let (written, again) = rebootings.iter().rev().find_map(|&w| {
        let rebooted_boot = Installed::of(&mine[w].detail).boot;
        let again = mine[w + 1..].iter().find(|e| boot_of(e).is_some_and(|b| b != rebooted_boot))?;
        Some((w, *again))
    })?;
    let after = &mine[written + 1..];
    let mut evidence = vec![line(mine[written])];
    // The helper saw it ask for its boot files again, when it did.
    evidence.extend(
        after
            .iter()
            .filter(|e| matches!(e.step, Step::DhcpAck | Step::TftpSent | Step::Http))
            .take(4)
            .map(|e| line(e)),
    );
    evidence.push(line(again));
    Some(Stuck {
        id: "HS015",
        title: format!("{node} wrote its disk and rebooted, then booted its live system again instead of the disk"),
        evidence,
        fix: "the firmware boots the network (or the ISO) before the installation disk: put the disk first in its boot order (PXE then only for a blank disk), or eject the ISO after the install; the live system installs again at every such boot".into(),
        within_time: false,
    })
}

fn never_asked(node: &str, mac: &str, events: &[BootEvent]) -> Stuck {
    let prefix = vendor_prefix(mac);
    let strangers: Vec<(String, i64, usize)> = crate::boot::unknown_machines(events)
        .into_iter()
        .filter(|(m, _, _)| !mac.is_empty() && vendor_prefix(m) == prefix)
        .collect();
    if !strangers.is_empty() {
        let mut evidence: Vec<String> = strangers
            .iter()
            .map(|(m, at, n)| format!("{m} asked for DHCP {n} times, last at {}, and is not in the inventory", when(*at)))
            .collect();
        evidence.push(format!("{node}'s MAC in agent-config.yaml is {mac}: no request from it"));
        return Stuck {
            within_time: false,
            id: "HS004",
            title: format!("{node} never asked for an address, and a machine of its vendor with a MAC the inventory does not know did"),
            evidence,
            fix: format!("if that machine is {node}, its MAC in agent-config.yaml is wrong: correct its macAddress, run `hardshift create` again (keys are kept) and restart `lab serve`; else find what that machine is"),
        };
    }
    // Nothing to time it from: a machine not powered on yet is not stuck.
    Stuck {
        within_time: true,
        id: "HS005",
        title: format!("{node} never asked the helper for an address"),
        evidence: vec![format!(
            "the helper saw {} boot steps of other machines, none from {node}'s MAC {mac}",
            events.iter().filter(|e| e.step.from_helper()).count()
        )],
        fix: "power it on (`hardshift bmc` or its console); its firmware must try the network first (PXE) on the lab's network, where the helper's DHCP answers".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(node: &str, mac: &str, step: Step, detail: &str, at_ms: i64) -> BootEvent {
        BootEvent {
            at_ms,
            node: node.into(),
            mac: mac.into(),
            ip: "192.168.126.101".into(),
            step,
            detail: detail.into(),
        }
    }
    const M: &str = "52:54:00:00:00:65";

    fn dhcp(node: &str) -> Vec<BootEvent> {
        vec![
            e(node, M, Step::DhcpDiscover, "", 1),
            e(node, M, Step::DhcpOffer, "", 2),
            e(node, M, Step::DhcpRequest, "", 3),
            e(node, M, Step::DhcpAck, node, 4),
        ]
    }

    #[test]
    fn each_stop_is_named_by_its_own_rule() {
        let why = |node: &str, mac: &str, events: &[BootEvent]| super::why(node, mac, events, 100);
        assert_eq!(why("master-0", M, &[]), None, "no helper: HS003 says what it can");
        let reports_only = [e("worker-0", "", Step::Reported, "installed system boot aaaa1111", 1)];
        assert_eq!(
            why("master-0", M, &reports_only),
            None,
            "the nodes' own reports are not the helper's"
        );
        let stranger = vec![e("", "52:54:00:00:00:99", Step::DhcpNoAddress, "no address available", 9)];
        let s = why("master-0", M, &stranger).unwrap();
        assert_eq!(s.id, "HS004");
        assert!(s.evidence[0].starts_with("52:54:00:00:00:99 asked for DHCP 1 times"), "{s:?}");
        let other_vendor = vec![e("", "0c:c4:7a:00:00:99", Step::DhcpNoAddress, "", 9)];
        assert_eq!(why("master-0", M, &other_vendor).unwrap().id, "HS005");

        let mut v = dhcp("master-0");
        assert_eq!(why("master-0", M, &v).unwrap().id, "HS006");
        v.push(e("master-0", M, Step::TftpMissing, "/t/ipxe.efi", 5));
        let s = why("master-0", M, &v).unwrap();
        assert_eq!(s.id, "HS007");
        assert!(s.fix.contains("ipxe.efi"), "{s:?}");
        let mut v = dhcp("master-0");
        v.push(e(
            "master-0",
            M,
            Step::Http,
            "GET /rhcos/rhcos-live-rootfs.x86_64.img 404 (no /r/x)",
            5,
        ));
        assert_eq!(why("master-0", M, &v).unwrap().id, "HS007");
        let mut v = dhcp("master-0");
        v.push(e(
            "master-0",
            M,
            Step::Http,
            "GET /rhcos/rhcos-live-rootfs.x86_64.img 200 cut short: 10 of 100 B in 5 ms",
            5,
        ));
        assert_eq!(why("master-0", M, &v).unwrap().id, "HS008");
        v.push(e("master-0", M, Step::Http, "GET /ignition/master-0.ign 200 1000 B 3 ms", 6));
        assert_eq!(why("master-0", M, &v).unwrap().id, "HS009");
        // A later attempt that gets further is what counts: the 404 of the first is past.
        let mut v = dhcp("master-0");
        v.push(e("master-0", M, Step::Http, "GET /pxe/boot.ipxe 404", 5));
        v.extend(dhcp("master-0").into_iter().map(|mut x| {
            x.at_ms += 10;
            x
        }));
        v.push(e("master-0", M, Step::Http, "GET /pxe/boot.ipxe 200 3000 B 1 ms", 20));
        let s = why("master-0", M, &v).unwrap();
        assert_eq!(s.id, "HS003");
        assert!(s.title.contains("http GET /pxe/boot.ipxe 200"), "{s:?}");
    }

    #[test]
    fn a_live_system_again_after_the_disk_was_written_is_the_boot_order() {
        let inst = |detail: &str, at| e("worker-0", "", Step::Install, detail, at);
        let reported = |detail: &str, at| e("worker-0", "", Step::Reported, detail, at);
        let mut v = dhcp("worker-0");
        v.push(reported("live system boot aaaa1111", 10));
        v.push(inst("starting-installation /dev/vda boot aaaa1111", 11));
        v.push(inst("writing-image-to-disk 50% /dev/vda boot aaaa1111", 12));
        v.push(inst("rebooting /dev/vda boot aaaa1111", 13));
        assert_eq!(live_again("worker-0", &v), None, "rebooting, nothing since");
        let mut again = v.clone();
        again.extend(dhcp("worker-0").into_iter().map(|mut x| {
            x.at_ms += 20;
            x
        }));
        again.push(reported("live system boot bbbb2222", 30));
        let s = live_again("worker-0", &again).unwrap();
        assert_eq!(s.id, "HS015");
        assert!(s.evidence[0].contains("rebooting /dev/vda boot aaaa1111"), "{s:?}");
        assert!(s.evidence.last().unwrap().contains("live system boot bbbb2222"), "{s:?}");
        assert!(s.evidence.iter().any(|l| l.contains("dhcp-ack")), "the helper's view of it: {s:?}");
        // A second install on the live system again, ending in "rebooting": still the boot order.
        again.push(inst("rebooting /dev/vda boot bbbb2222", 35));
        assert_eq!(live_again("worker-0", &again).unwrap().id, "HS015");
        // The installed system reported: the order worked.
        v.push(reported("installed system boot cccc3333", 40));
        assert_eq!(live_again("worker-0", &v), None);
        assert_eq!(live_again("worker-1", &again), None, "another node's history");
    }

    #[test]
    fn times_of_day() {
        assert_eq!(time_of_day(0), "00:00:00");
        assert_eq!(time_of_day((12 * 3600 + 3 * 60 + 5) * 1000 + 999), "12:03:05");
    }

    /// A stage within its time is a warning; past it, the cause.
    #[test]
    fn a_stage_within_its_time_is_not_yet_stuck() {
        let mut v = dhcp("master-0");
        let ack = v[3].at_ms;
        assert!(why("master-0", M, &v, ack + LEASE_TO_BOOT_FILE_MS - 1).unwrap().within_time);
        let s = why("master-0", M, &v, ack + LEASE_TO_BOOT_FILE_MS).unwrap();
        assert!(!s.within_time && s.title.contains("(60 s ago)"), "{s:?}");
        v.push(e("master-0", M, Step::Http, "GET /ignition/master-0.ign 200 1000 B 3 ms", 10));
        assert!(why("master-0", M, &v, 10 + CONFIG_TO_REPORT_MS - 1).unwrap().within_time);
        assert!(!why("master-0", M, &v, 10 + CONFIG_TO_REPORT_MS).unwrap().within_time);
    }
}
