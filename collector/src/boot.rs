//! What the helper saw of each machine before its agent ran: every DHCP, TFTP and HTTP step of
//! its boot (`hardshift lab serve`), kept in the store beside the reports (table `boot_events`)
//! and read back by `events`, `status` and `diagnose`.

use hardshift_proto::v1::ComponentState;
use hardshift_proto::vocab::{install, InstallStage};
use serde::Serialize;
use std::fmt;

/// One step of a machine's boot, as the helper's programs saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BootEvent {
    pub at_ms: i64,
    /// The inventory's node for the MAC or address, or empty: a machine the bundle does not know.
    pub node: String,
    /// Lowercase `aa:bb:…`, where the step names one (DHCP); else empty.
    pub mac: String,
    /// The machine's address, where the step names one (an offer, TFTP, HTTP); else empty.
    pub ip: String,
    pub step: Step,
    /// What else the step says: the file and status of a request, its bytes and time, why a
    /// DHCP request got no address, why the helper restarted a program.
    pub detail: String,
}

/// The steps, in the order a boot takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    DhcpDiscover,
    DhcpOffer,
    DhcpRequest,
    DhcpAck,
    /// The server refused the address the machine asked for.
    DhcpNak,
    /// A DHCP request the reservations have no address for (a MAC that is not in the inventory).
    DhcpNoAddress,
    TftpSent,
    /// A TFTP request for a file the helper does not have.
    TftpMissing,
    /// An HTTP request the helper answered (its status in `detail`).
    Http,
    /// An HTTP request for a node's config from an address that is not the node's: refused (403).
    HttpRefused,
    /// HAProxy's health check took a node's server in or out of a backend.
    Backend,
    /// A connection to the machine-config server through HAProxy (22623): a node asking for its
    /// pointer config's target.
    Mcs,
    /// One of the helper's programs stopped and was started again.
    HelperRestart,
    /// The live system's agent said its install moved (`detail`: its stage, percentage, disk and
    /// boot): from the node's own reports, not the helper's.
    Install,
    /// The first report of one of the node's boots (`detail`: live or installed, and the boot).
    Reported,
}

impl Step {
    pub const ALL: [Step; 15] = [
        Step::DhcpDiscover,
        Step::DhcpOffer,
        Step::DhcpRequest,
        Step::DhcpAck,
        Step::DhcpNak,
        Step::DhcpNoAddress,
        Step::TftpSent,
        Step::TftpMissing,
        Step::Http,
        Step::HttpRefused,
        Step::Backend,
        Step::Mcs,
        Step::HelperRestart,
        Step::Install,
        Step::Reported,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Step::DhcpDiscover => "dhcp-discover",
            Step::DhcpOffer => "dhcp-offer",
            Step::DhcpRequest => "dhcp-request",
            Step::DhcpAck => "dhcp-ack",
            Step::DhcpNak => "dhcp-nak",
            Step::DhcpNoAddress => "dhcp-no-address",
            Step::TftpSent => "tftp-sent",
            Step::TftpMissing => "tftp-missing",
            Step::Http => "http",
            Step::HttpRefused => "http-refused",
            Step::Backend => "backend",
            Step::Mcs => "mcs",
            Step::HelperRestart => "helper-restart",
            Step::Install => "install",
            Step::Reported => "reported",
        }
    }

    pub fn of(name: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether the helper saw it (not the node's own reports: `Install`, `Reported`).
    pub const fn from_helper(self) -> bool {
        !matches!(self, Step::Install | Step::Reported)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The vendor prefix of a MAC (its first three octets, the OUI): a machine not in the inventory
/// whose prefix a node's shares is likely that node with a MAC typed wrong.
pub fn vendor_prefix(mac: &str) -> String {
    mac.split(':').take(3).collect::<Vec<_>>().join(":").to_ascii_lowercase()
}

/// What one node's boot got to, newest last: the step a `status` row names. HAProxy's checks
/// of the node's ports are the helper's doing, not a step of the node's, and do not count.
pub fn last_step<'a>(events: &'a [BootEvent], node: &str) -> Option<&'a BootEvent> {
    events
        .iter()
        .filter(|e| e.node == node && e.step != Step::Backend)
        .max_by_key(|e| e.at_ms)
}

/// A node's boot in one line, from its latest attempt (its last DHCP discover on): each step
/// that moved it on, with its time of day (UTC) — "dhcp-ack 12:03:05 → undionly.kpxe 12:03:06 →
/// boot.ipxe 200 12:03:07 → rhcos-live-rootfs.x86_64.img 200 1.1 GB 12:04:10 → …". At most
/// `MAX_TIMELINE` steps, the newest kept.
pub fn timeline(events: &[BootEvent], node: &str) -> String {
    let mine: Vec<&BootEvent> = events.iter().filter(|e| e.node == node && e.step != Step::Backend).collect();
    // A first report alone is no boot to tell (the helper saw nothing of it, the node installed
    // nothing): no line.
    if mine.iter().all(|e| e.step == Step::Reported) {
        return String::new();
    }
    let attempt = &mine[attempt_start(&mine)..];
    // Of a stage's progress events, the newest says it (the percentage written so far).
    let superseded = |i: usize| {
        let stage = |e: &BootEvent| (e.step == Step::Install).then(|| Installed::of(&e.detail).stage);
        attempt
            .get(i + 1)
            .is_some_and(|next| stage(next).is_some() && stage(next) == stage(attempt[i]))
    };
    let steps: Vec<String> = attempt
        .iter()
        .enumerate()
        .filter(|(i, e)| !matches!(e.step, Step::DhcpDiscover | Step::DhcpOffer | Step::DhcpRequest) && !superseded(*i))
        .map(|(_, e)| format!("{} {}", step_words(e), crate::boot_stuck::time_of_day(e.at_ms)))
        .collect();
    let skip = steps.len().saturating_sub(MAX_TIMELINE);
    let mut line = steps[skip..].join(" → ");
    if skip > 0 {
        line = format!("… → {line}");
    }
    line
}

/// The steps a timeline line holds, at most.
pub const MAX_TIMELINE: usize = 16;

/// Where a node's latest boot attempt starts in its events (oldest first): the DHCP discover
/// before its firmware's last request for a boot file (TFTP, or the iPXE script), so a live
/// system's own DHCP later in the same boot does not cut it; else its last discover; else 0.
pub fn attempt_start(mine: &[&BootEvent]) -> usize {
    let firmware = mine
        .iter()
        .rposition(|e| matches!(e.step, Step::TftpSent | Step::TftpMissing) || (e.step == Step::Http && e.detail.contains(" /pxe/")));
    let before = firmware.map_or(mine.len(), |f| f + 1);
    mine[..before].iter().rposition(|e| e.step == Step::DhcpDiscover).unwrap_or(0)
}

/// A step in a few words: the file's name (not its path), the status and size of a download.
fn step_words(e: &BootEvent) -> String {
    // The file's name; a live config keeps its directory (the node's config has the same name).
    let file = |p: &str| match p.strip_prefix("/live/") {
        Some(name) => format!("live/{name}"),
        None => p.rsplit('/').next().unwrap_or(p).to_string(),
    };
    match e.step {
        Step::TftpSent => format!("tftp {}", file(&e.detail)),
        Step::TftpMissing => format!("tftp {} missing", file(&e.detail)),
        Step::Http | Step::HttpRefused => {
            let w: Vec<&str> = e.detail.split_whitespace().collect();
            let (path, code) = (w.get(1).copied().unwrap_or_default(), w.get(2).copied().unwrap_or_default());
            let size = w
                .get(3)
                .and_then(|b| b.parse::<u64>().ok())
                .filter(|_| w.get(4) == Some(&"B"))
                .map(human)
                .map(|s| format!(" {s}"))
                .unwrap_or_default();
            let cut = if e.detail.contains("cut short") { " cut short" } else { "" };
            format!("{} {}{size}{cut}", file(path), code.trim_end_matches(':'))
        }
        Step::Install => {
            let i = Installed::of(&e.detail);
            let words = i.stage.map_or("install", |s| s.assisted());
            match i.percent {
                Some(p) if i.stage == Some(InstallStage::Writing) => format!("{} {p}%", words.to_ascii_lowercase()),
                _ => words.to_ascii_lowercase(),
            }
        }
        Step::Reported => match e.detail.starts_with("live") {
            true => "live agent reported".into(),
            false => "agent reported".into(),
        },
        _ => e.step.name().to_string(),
    }
}

/// An install event's detail, read back: "STAGE [PCT%] DISK boot BOOT8[: ERROR]".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub stage: Option<InstallStage>,
    pub percent: Option<u8>,
    pub boot: String,
}

impl Installed {
    pub fn of(detail: &str) -> Installed {
        let head = detail.split(": ").next().unwrap_or_default();
        let w: Vec<&str> = head.split_whitespace().collect();
        Installed {
            stage: w.first().and_then(|s| InstallStage::of(s)),
            percent: w.get(1).and_then(|p| p.strip_suffix('%')).and_then(|p| p.parse().ok()),
            boot: w
                .iter()
                .position(|x| *x == "boot")
                .and_then(|i| w.get(i + 1))
                .map(|b| b.to_string())
                .unwrap_or_default(),
        }
    }
}

/// The first eight characters of a boot id: enough to tell a node's boots apart in a line.
pub fn short_boot(boot_id: &str) -> String {
    boot_id.chars().filter(|c| *c != '-').take(8).collect()
}

/// The install event a live agent's report makes, if its install moved since `last` (the detail
/// of the node's newest install event): a new stage, a new boot, or ten more percent written.
pub fn install_event(node: &str, boot_id: &str, c: &ComponentState, at_ms: i64, last: Option<&str>) -> Option<BootEvent> {
    let get = |k: &str| c.details.get(k).map(String::as_str).unwrap_or_default();
    let stage = InstallStage::of(get(install::STAGE))?;
    let percent: Option<u8> = get(install::PERCENT).parse().ok();
    let boot = short_boot(boot_id);
    if let Some(l) = last.map(Installed::of) {
        let decade = |p: Option<u8>| p.map(|p| p / 10);
        if l.stage == Some(stage) && l.boot == boot && decade(l.percent) == decade(percent) {
            return None;
        }
    }
    let pct = percent
        .filter(|_| stage == InstallStage::Writing)
        .map(|p| format!(" {p}%"))
        .unwrap_or_default();
    let error = match get(install::ERROR) {
        "" => String::new(),
        e => format!(": {}", e.chars().take(300).collect::<String>()),
    };
    Some(BootEvent {
        at_ms,
        node: node.to_string(),
        mac: String::new(),
        ip: String::new(),
        step: Step::Install,
        detail: format!("{}{pct} {} boot {boot}{error}", stage.slug(), get(install::DISK)),
    })
}

/// The event of a boot's first report: from its live system (it reports its install) or the
/// installed one.
pub fn reported_event(node: &str, boot_id: &str, live: bool, at_ms: i64) -> BootEvent {
    BootEvent {
        at_ms,
        node: node.to_string(),
        mac: String::new(),
        ip: String::new(),
        step: Step::Reported,
        detail: format!(
            "{} boot {}",
            if live { "live system" } else { "installed system" },
            short_boot(boot_id)
        ),
    }
}

/// Bytes as a person reads them: 3.1 MB, 1.1 GB (powers of ten, as curl and browsers say).
fn human(b: u64) -> String {
    match b {
        0..1_000 => format!("{b} B"),
        1_000..1_000_000 => format!("{:.1} kB", b as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        _ => format!("{:.1} GB", b as f64 / 1e9),
    }
}

/// The machines not in the inventory that asked for an address: (MAC, when last, how often).
pub fn unknown_machines(events: &[BootEvent]) -> Vec<(String, i64, usize)> {
    let mut out: Vec<(String, i64, usize)> = Vec::new();
    for e in events.iter().filter(|e| e.node.is_empty() && !e.mac.is_empty()) {
        match out.iter_mut().find(|(m, _, _)| *m == e.mac) {
            Some(u) => {
                u.1 = u.1.max(e.at_ms);
                u.2 += 1;
            }
            None => out.push((e.mac.clone(), e.at_ms, 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_reads_back_by_its_name() {
        for s in Step::ALL {
            assert_eq!(Step::of(s.name()), Some(s));
        }
        assert_eq!(Step::of("dhcp-acked"), None);
    }

    #[test]
    fn a_live_install_is_an_event_at_each_stage_and_ten_percent() {
        use hardshift_proto::v1::Health;
        use hardshift_proto::vocab::{self, Component};
        let comp = |stage: InstallStage, pct: Option<u8>| {
            let mut d = std::collections::HashMap::new();
            d.insert(install::STAGE.to_string(), stage.slug().to_string());
            d.insert(install::DISK.to_string(), "/dev/vda".to_string());
            if let Some(p) = pct {
                d.insert(install::PERCENT.to_string(), p.to_string());
            }
            vocab::component(Component::LiveInstall, Health::Warning, stage.assisted(), "").with_details(d)
        };
        let boot = "1a2b3c4d-5e6f-7081-9203-a4b5c6d7e8f9";
        let first = install_event("w", boot, &comp(InstallStage::Starting, None), 1, None).unwrap();
        assert_eq!(first.detail, "starting-installation /dev/vda boot 1a2b3c4d");
        let w = install_event("w", boot, &comp(InstallStage::Writing, Some(41)), 2, Some(&first.detail)).unwrap();
        assert_eq!(w.detail, "writing-image-to-disk 41% /dev/vda boot 1a2b3c4d");
        assert_eq!(
            install_event("w", boot, &comp(InstallStage::Writing, Some(49)), 3, Some(&w.detail)),
            None
        );
        assert!(install_event("w", boot, &comp(InstallStage::Writing, Some(50)), 3, Some(&w.detail)).is_some());
        assert!(
            install_event("w", "ffff", &comp(InstallStage::Writing, Some(41)), 3, Some(&w.detail)).is_some(),
            "a new boot"
        );
        let r = install_event("w", boot, &comp(InstallStage::Rebooting, Some(100)), 4, Some(&w.detail)).unwrap();
        assert_eq!(Installed::of(&r.detail).stage, Some(InstallStage::Rebooting));
        let mut failed = comp(InstallStage::Failed, None);
        failed.details.insert(install::ERROR.into(), "Error: no such disk".into());
        let f = install_event("w", boot, &failed, 5, None).unwrap();
        assert_eq!(f.detail, "failed /dev/vda boot 1a2b3c4d: Error: no such disk");
        assert_eq!(Installed::of(&f.detail).boot, "1a2b3c4d");
        // On the timeline, a stage's newest progress says it.
        let events: Vec<BootEvent> = [
            first,
            w.clone(),
            install_event("w", boot, &comp(InstallStage::Writing, Some(73)), 3, Some(&w.detail)).unwrap(),
            r,
        ]
        .into_iter()
        .map(|mut e| {
            e.node = "w".into();
            e
        })
        .collect();
        let line = timeline(&events, "w");
        assert!(
            line.contains("writing image to disk 73%") && !line.contains("41%") && line.ends_with("rebooting 00:00:00"),
            "{line}"
        );
    }

    #[test]
    fn a_boot_in_one_line() {
        let e = |step, detail: &str, at_ms| BootEvent {
            at_ms,
            node: "master-0".into(),
            mac: String::new(),
            ip: String::new(),
            step,
            detail: detail.into(),
        };
        let h = |hh: i64, mm: i64, ss: i64| (hh * 3600 + mm * 60 + ss) * 1000;
        let events = [
            e(Step::DhcpDiscover, "", h(12, 0, 0)),
            e(Step::DhcpAck, "master-0", h(12, 0, 1)),
            e(Step::DhcpDiscover, "", h(12, 3, 4)),
            e(Step::DhcpAck, "master-0", h(12, 3, 5)),
            e(Step::TftpSent, "/x/tftp/undionly.kpxe", h(12, 3, 6)),
            e(Step::Backend, "api-backend/master-0 is DOWN", h(12, 3, 6)),
            e(Step::Http, "GET /pxe/boot.ipxe 200 3339 B 0 ms", h(12, 3, 7)),
            e(
                Step::Http,
                "GET /rhcos/rhcos-live-rootfs.x86_64.img 200 1123456789 B 50000 ms",
                h(12, 4, 10),
            ),
            e(
                Step::Http,
                "GET /ignition/master-0.ign 200 cut short: 10 of 100 B in 5 ms",
                h(12, 4, 11),
            ),
            e(
                Step::HttpRefused,
                "GET /ignition/bootstrap.ign 403: bootstrap's config asked for by …",
                h(12, 4, 12),
            ),
        ];
        assert_eq!(
            timeline(&events, "master-0"),
            "dhcp-ack 12:03:05 → tftp undionly.kpxe 12:03:06 → boot.ipxe 200 3.3 kB 12:03:07 → rhcos-live-rootfs.x86_64.img 200 1.1 GB 12:04:10 → master-0.ign 200 cut short 12:04:11 → bootstrap.ign 403 12:04:12"
        );
        assert_eq!(timeline(&events, "master-1"), "");
    }

    #[test]
    fn unknown_machines_are_counted_by_mac() {
        let e = |node: &str, mac: &str, at_ms| BootEvent {
            at_ms,
            node: node.into(),
            mac: mac.into(),
            ip: String::new(),
            step: Step::DhcpNoAddress,
            detail: String::new(),
        };
        let events = [
            e("", "52:54:00:aa:bb:99", 1),
            e("master-0", "52:54:00:aa:bb:01", 2),
            e("", "52:54:00:aa:bb:99", 3),
        ];
        assert_eq!(unknown_machines(&events), [("52:54:00:aa:bb:99".to_string(), 3, 2)]);
        assert_eq!(last_step(&events, "master-0").unwrap().at_ms, 2);
        assert_eq!(vendor_prefix("52:54:00:AA:BB:99"), "52:54:00");
    }
}
