//! The machine itself: the disk the system runs from (size, rotational, removable, from sysfs),
//! NTP synchronization (systemd-timedated over
//! D-Bus, chrony's `tracking` when chronyc is there), and the boots seen over time (a reboot
//! loop, kept in the agent's history directory). Each reader is split from a pure judge.

use anyhow::Context;
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{self, Component};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The assisted installer's minimum installation disk (masters and workers).
pub const MIN_DISK_BYTES: u64 = 100 * 1_000_000_000;
/// This many boots within `LOOP_WINDOW_S` is a reboot loop (an install reboots twice or three
/// times: into the installed system, then the machine-config pivot).
pub const LOOP_BOOTS: usize = 4;
pub const LOOP_WINDOW_S: i64 = 30 * 60;
/// NTP gets this long after boot before "not synchronized" fails rather than warns.
pub const NTP_GRACE_S: u64 = 600;
/// Boots kept in the history file.
const BOOTS_KEPT: usize = 32;

#[derive(Debug, Clone, PartialEq)]
pub struct Disk {
    pub name: String,
    pub size_bytes: u64,
    pub rotational: bool,
    pub removable: bool,
    pub read_only: bool,
}

fn text(p: &Path) -> String {
    std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default()
}

/// The whole disk under block device `major:minor`, in a `/sys`-shaped directory: from a
/// partition to its disk, from a device-mapper device (LUKS, LVM) to what it is made of.
pub fn disk_of(sys: &Path, major: u64, minor: u64) -> anyhow::Result<Disk> {
    let link = sys.join(format!("dev/block/{major}:{minor}"));
    let mut dir = std::fs::canonicalize(&link).with_context(|| link.display().to_string())?;
    // A bounded walk: partition → disk, dm → its first member.
    for _ in 0..8 {
        if dir.join("partition").exists() {
            dir = dir.parent().map(Path::to_path_buf).context("a partition without a disk")?;
            continue;
        }
        let first: Option<PathBuf> = std::fs::read_dir(dir.join("slaves")).ok().and_then(|rd| {
            let mut v: Vec<PathBuf> = rd
                .flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .collect();
            v.sort();
            v.into_iter().next()
        });
        match first.and_then(|f| std::fs::canonicalize(f).ok()) {
            Some(next) => dir = next,
            None => break,
        }
    }
    Ok(Disk {
        name: dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        size_bytes: text(&dir.join("size")).parse::<u64>().unwrap_or(0) * 512,
        rotational: text(&dir.join("queue/rotational")) == "1",
        removable: text(&dir.join("removable")) == "1",
        read_only: text(&dir.join("ro")) == "1",
    })
}

/// The disk holding `/` on this machine.
pub fn install_disk() -> anyhow::Result<Disk> {
    let st = nix::sys::stat::stat("/").context("stat /")?;
    let dev = st.st_dev;
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    if major == 0 {
        return Err(anyhow::anyhow!("/ is not on a block device (a live ISO or a container)"));
    }
    disk_of(Path::new("/sys"), major, minor)
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

/// The `install-disk` component: removable or read-only fails, smaller than the assisted
/// installer's minimum warns. Rotational is shown, not judged (virtio disks say 1 whatever
/// backs them); etcd's fdatasync probe measures the speed that matters.
pub fn judge_disk(d: &anyhow::Result<Disk>) -> ComponentState {
    let d = match d {
        Ok(d) => d,
        Err(e) => {
            return vocab::component(Component::InstallDisk, Health::Unknown, "not found", format!("{e:#}")).with_details(HashMap::new())
        }
    };
    let details = HashMap::from([
        ("device".to_string(), format!("/dev/{}", d.name)),
        ("size_bytes".to_string(), d.size_bytes.to_string()),
        ("rotational".to_string(), d.rotational.to_string()),
        ("removable".to_string(), d.removable.to_string()),
    ]);
    let state = format!(
        "/dev/{} {}{}",
        d.name,
        gib(d.size_bytes),
        if d.rotational { " rotational" } else { "" }
    );
    let mut fail = Vec::new();
    if d.removable {
        fail.push(format!(
            "/dev/{} is removable (a USB stick or SD card): not an installation disk",
            d.name
        ));
    }
    if d.read_only {
        fail.push(format!("/dev/{} is read-only", d.name));
    }
    if !fail.is_empty() {
        return vocab::component(Component::InstallDisk, Health::Failing, state, fail.join("; ")).with_details(details);
    }
    if d.size_bytes < MIN_DISK_BYTES {
        let why = format!("/dev/{} holds {}: OpenShift needs at least 100 GB", d.name, gib(d.size_bytes));
        return vocab::component(Component::InstallDisk, Health::Warning, state, why).with_details(details);
    }
    vocab::component(Component::InstallDisk, Health::Ok, state, "").with_details(details)
}

/// What chrony's `chronyc -n tracking` says (its documented output: `Name : value` lines).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tracking {
    pub reference: String,
    pub leap: String,
    pub system_time: String,
    pub stratum: String,
}

pub fn parse_tracking(out: &str) -> Tracking {
    let field = |name: &str| {
        out.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    Tracking {
        reference: field("Reference ID"),
        leap: field("Leap status"),
        system_time: field("System time"),
        stratum: field("Stratum"),
    }
}

/// timedated's view: whether NTP is on, whether the clock is synchronized.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timedated {
    pub ntp: bool,
    pub synchronized: bool,
}

/// NTPSynchronized and NTP from org.freedesktop.timedate1 (bus-activated by systemd).
pub async fn timedated(conn: &zbus::Connection) -> anyhow::Result<Timedated> {
    let p = zbus::proxy::Builder::<zbus::Proxy>::new(conn)
        .destination("org.freedesktop.timedate1")
        .path("/org/freedesktop/timedate1")
        .interface("org.freedesktop.timedate1")
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .context("timedated")?;
    let synchronized: bool = p.get_property("NTPSynchronized").await.context("timedated")?;
    let ntp: bool = p.get_property("NTP").await.unwrap_or(true);
    Ok(Timedated { ntp, synchronized })
}

/// `chronyc -n tracking`, if chronyc is installed (None if not).
pub async fn chrony(timeout: Duration) -> Option<anyhow::Result<Tracking>> {
    let mut cmd = tokio::process::Command::new("chronyc");
    cmd.args(["-n", "tracking"]).stdin(std::process::Stdio::null()).kill_on_drop(true);
    let out = match tokio::time::timeout(timeout, cmd.output()).await {
        Err(_) => return Some(Err(anyhow::anyhow!("chronyc did not answer within {} s", timeout.as_secs()))),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Ok(Err(e)) => return Some(Err(anyhow::anyhow!("chronyc: {e}"))),
        Ok(Ok(o)) => o,
    };
    if !out.status.success() {
        return Some(Err(anyhow::anyhow!("chronyc: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    Some(Ok(parse_tracking(&String::from_utf8_lossy(&out.stdout))))
}

/// The `time-sync` component: NTP synchronized (the assisted installer's ntp-synced). Not yet
/// synchronized warns for `NTP_GRACE_S` after boot, then fails; NTP switched off fails.
pub fn judge_time(td: &anyhow::Result<Timedated>, chrony: Option<&anyhow::Result<Tracking>>, uptime_s: u64) -> ComponentState {
    let mut details = HashMap::new();
    if let Some(Ok(t)) = chrony {
        details.insert("chrony_reference".to_string(), t.reference.clone());
        details.insert("chrony_leap".to_string(), t.leap.clone());
        details.insert("chrony_system_time".to_string(), t.system_time.clone());
        details.insert("chrony_stratum".to_string(), t.stratum.clone());
    }
    let chrony_synced = match chrony {
        Some(Ok(t)) => Some(t.leap != "Not synchronised" && !t.reference.starts_with("00000000")),
        _ => None,
    };
    let (synced, source) = match (td, chrony_synced) {
        (Ok(t), _) => {
            details.insert("ntp".into(), t.ntp.to_string());
            details.insert("ntp_synchronized".into(), t.synchronized.to_string());
            if !t.ntp {
                return vocab::component(
                    Component::TimeSync,
                    Health::Failing,
                    "NTP off",
                    "timedated: NTP is switched off (no chronyd running)",
                )
                .with_details(details);
            }
            (t.synchronized, "timedated")
        }
        (Err(_), Some(s)) => (s, "chrony"),
        (Err(e), None) => return vocab::component(Component::TimeSync, Health::Unknown, "unknown", format!("{e:#}")).with_details(details),
    };
    if synced {
        let state = match chrony {
            Some(Ok(t)) if !t.system_time.is_empty() => format!("synchronized ({})", t.system_time),
            _ => "synchronized".into(),
        };
        return vocab::component(Component::TimeSync, Health::Ok, state, "").with_details(details);
    }
    let mut why = format!("{source}: the clock is not synchronized to an NTP server {uptime_s} s after boot");
    if let Some(Ok(t)) = chrony {
        why.push_str(&format!(" (chrony: reference {}, leap status {})", t.reference, t.leap));
    }
    let health = if uptime_s < NTP_GRACE_S { Health::Warning } else { Health::Failing };
    vocab::component(Component::TimeSync, health, "not synchronized", why).with_details(details)
}

/// The boots seen, oldest first: (when it booted, unix s; its boot id), one a line.
pub fn parse_boots(text: &str) -> Vec<(i64, String)> {
    text.lines()
        .filter_map(|l| {
            let (t, id) = l.split_once(' ')?;
            Some((t.parse().ok()?, id.trim().to_string()))
        })
        .filter(|(_, id)| !id.is_empty())
        .collect()
}

/// The history with this boot in it (once), the newest `BOOTS_KEPT` kept. Pure.
pub fn record_boot(mut boots: Vec<(i64, String)>, boot_id: &str, booted_s: i64) -> Vec<(i64, String)> {
    if !boot_id.is_empty() && !boots.iter().any(|(_, b)| b == boot_id) {
        boots.push((booted_s, boot_id.to_string()));
    }
    let drop = boots.len().saturating_sub(BOOTS_KEPT);
    boots.drain(..drop);
    boots
}

pub fn boots_text(boots: &[(i64, String)]) -> String {
    boots.iter().map(|(t, b)| format!("{t} {b}\n")).collect()
}

/// The most the history file may be: `BOOTS_KEPT` lines of a time and a boot id.
const BOOTS_FILE_LIMIT: u64 = 64 << 10;

/// The history as `DIR/boots` holds it: empty when there is none yet; an error when it is not a
/// regular file of a sane size (a FIFO there must not freeze the agent before it connects).
pub fn read_boots(dir: &Path) -> anyhow::Result<Vec<(i64, String)>> {
    let path = dir.join("boots");
    match crate::state_file::read(&path, BOOTS_FILE_LIMIT) {
        Ok(b) => Ok(parse_boots(&String::from_utf8_lossy(&b))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(vec![]),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
    }
}

/// Records this boot in `DIR/boots` (atomically) and returns the history.
pub fn remember_boot(dir: &Path, boot_id: &str, booted_s: i64) -> anyhow::Result<Vec<(i64, String)>> {
    let path = dir.join("boots");
    let boots = record_boot(read_boots(dir)?, boot_id, booted_s);
    std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
    crate::state_file::write(&path, boots_text(&boots).as_bytes(), 0o644, true).with_context(|| path.display().to_string())?;
    Ok(boots)
}

/// How far in the future a boot may be dated and still count (clocks set a little ahead, then
/// stepped back by NTP); one dated later is a clock that was wrong, not a boot in the window.
const FUTURE_SLACK_S: i64 = 300;

/// The `boots` component: `LOOP_BOOTS` boots within `LOOP_WINDOW_S` is a reboot loop.
pub fn judge_boots(boots: &anyhow::Result<Vec<(i64, String)>>, now_s: i64) -> ComponentState {
    let boots = match boots {
        Ok(b) => b,
        Err(e) => return vocab::component(Component::Boots, Health::Unknown, "no history", format!("{e:#}")).with_details(HashMap::new()),
    };
    let recent: Vec<&(i64, String)> = boots
        .iter()
        .filter(|(t, _)| (-FUTURE_SLACK_S..=LOOP_WINDOW_S).contains(&(now_s - t)))
        .collect();
    let future = boots.iter().filter(|(t, _)| t - now_s > FUTURE_SLACK_S).count();
    let mut details = HashMap::from([
        ("boots_kept".to_string(), boots.len().to_string()),
        (
            "recent".to_string(),
            recent
                .iter()
                .map(|(t, b)| format!("{} s ago {b}", now_s - t))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    ]);
    if future > 0 {
        // Said, not counted: a clock once set years ahead must not make a loop for years.
        details.insert("dated_in_the_future".to_string(), future.to_string());
    }
    let state = format!("{} boots in {} min", recent.len(), LOOP_WINDOW_S / 60);
    if recent.len() >= LOOP_BOOTS {
        let why = format!(
            "{} boots within {} minutes: the machine keeps rebooting (a kernel panic, a watchdog, a failing machine-config)",
            recent.len(),
            LOOP_WINDOW_S / 60
        );
        return vocab::component(Component::Boots, Health::Failing, state, why).with_details(details);
    }
    vocab::component(Component::Boots, Health::Ok, state, "").with_details(details)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
    }

    /// The root disk of the machine the fixture was recorded on (virtio, 256 GiB, which the
    /// kernel calls rotational), reached from its device number as the agent reaches it.
    #[test]
    fn the_recorded_root_disk() {
        let d = disk_of(&fixture("this-machine/sys"), 254, 0).unwrap();
        assert_eq!(
            d,
            Disk {
                name: "vda".into(),
                size_bytes: 536870912 * 512,
                rotational: true,
                removable: false,
                read_only: false
            }
        );
        let c = judge_disk(&Ok(d.clone()));
        assert_eq!((c.health, c.state.as_str()), (Health::Ok as i32, "/dev/vda 256.0 GiB rotational"));
        let small = Disk {
            size_bytes: 40 << 30,
            ..d.clone()
        };
        let c = judge_disk(&Ok(small));
        assert_eq!(c.health, Health::Warning as i32);
        assert!(c.reason.contains("at least 100 GB"), "{}", c.reason);
        let usb = Disk { removable: true, ..d };
        assert_eq!(judge_disk(&Ok(usb)).health, Health::Failing as i32);
        assert!(disk_of(&fixture("this-machine/sys"), 8, 0).is_err());
    }

    /// RHCOS's layout (Documentation/ABI/stable/sysfs-block: a partition's directory sits in its
    /// disk's, a dm device lists its members under slaves/): root on LUKS on sda4.
    #[test]
    fn a_partition_under_luks_leads_to_its_disk() {
        let t = tempfile::tempdir().unwrap();
        let s = t.path();
        let disk = s.join("devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda");
        std::fs::create_dir_all(disk.join("sda4")).unwrap();
        std::fs::create_dir_all(disk.join("queue")).unwrap();
        std::fs::write(disk.join("size"), "976773168\n").unwrap();
        std::fs::write(disk.join("queue/rotational"), "0\n").unwrap();
        std::fs::write(disk.join("removable"), "0\n").unwrap();
        std::fs::write(disk.join("sda4/partition"), "4\n").unwrap();
        let dm = s.join("devices/virtual/block/dm-0");
        std::fs::create_dir_all(dm.join("slaves")).unwrap();
        std::os::unix::fs::symlink(disk.join("sda4"), dm.join("slaves/sda4")).unwrap();
        std::fs::create_dir_all(s.join("dev/block")).unwrap();
        std::os::unix::fs::symlink(&dm, s.join("dev/block/253:0")).unwrap();
        let d = disk_of(s, 253, 0).unwrap();
        assert_eq!((d.name.as_str(), d.size_bytes, d.rotational), ("sda", 976773168 * 512, false));
    }

    /// chronyc's tracking output as chrony's documentation (chronyc(1)) shows it, synchronized
    /// and not.
    #[test]
    fn chrony_tracking_and_timedated() {
        let synced = "Reference ID    : CB00710F (ntp1.example.net)\nStratum         : 3\nRef time (UTC)  : Fri Jan 27 09:49:17 2017\nSystem time     : 0.000006523 seconds slow of NTP time\nLast offset     : -0.000006747 seconds\nRMS offset      : 0.000035822 seconds\nFrequency       : 3.225 ppm slow\nResidual freq   : -0.000 ppm\nSkew            : 0.129 ppm\nRoot delay      : 0.013639022 seconds\nRoot dispersion : 0.001100737 seconds\nUpdate interval : 64.9 seconds\nLeap status     : Normal\n";
        let t = parse_tracking(synced);
        assert_eq!(
            (t.reference.as_str(), t.leap.as_str(), t.stratum.as_str()),
            ("CB00710F (ntp1.example.net)", "Normal", "3")
        );
        let unsynced = "Reference ID    : 00000000 ()\nStratum         : 0\nRef time (UTC)  : Thu Jan 01 00:00:00 1970\nSystem time     : 0.000000000 seconds fast of NTP time\nLast offset     : +0.000000000 seconds\nRMS offset      : 0.000000000 seconds\nFrequency       : 0.000 ppm slow\nResidual freq   : +0.000 ppm\nSkew            : 0.000 ppm\nRoot delay      : 1.000000000 seconds\nRoot dispersion : 1.000000000 seconds\nUpdate interval : 0.0 seconds\nLeap status     : Not synchronised\n";
        let no_bus: anyhow::Result<Timedated> = Err(anyhow::anyhow!("timedated: org.freedesktop.DBus.Error.ServiceUnknown"));
        let c = judge_time(&no_bus, Some(&Ok(parse_tracking(unsynced))), 3600);
        assert_eq!(c.health, Health::Failing as i32);
        assert!(
            c.reason.contains("chrony: reference 00000000 (), leap status Not synchronised"),
            "{}",
            c.reason
        );
        assert_eq!(judge_time(&no_bus, Some(&Ok(t)), 3600).health, Health::Ok as i32);
        let td = |ntp, synchronized| Ok(Timedated { ntp, synchronized });
        assert_eq!(
            judge_time(&td(true, false), None, 60).health,
            Health::Warning as i32,
            "a fresh boot gets time"
        );
        assert_eq!(judge_time(&td(true, false), None, NTP_GRACE_S).health, Health::Failing as i32);
        assert_eq!(judge_time(&td(false, false), None, 60).state, "NTP off");
        assert_eq!(judge_time(&no_bus, None, 60).health, Health::Unknown as i32);
    }

    #[test]
    fn boots_are_recorded_once_and_a_loop_is_named() {
        let t = tempfile::tempdir().unwrap();
        let now = 1_800_000_000;
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            remember_boot(t.path(), id, now - 600 + i as i64 * 100).unwrap();
        }
        let b = remember_boot(t.path(), "c", now).unwrap();
        assert_eq!(b.len(), 3, "a boot is recorded once: {b:?}");
        assert_eq!(judge_boots(&Ok(b), now).health, Health::Ok as i32);
        let b = remember_boot(t.path(), "d", now - 10).unwrap();
        let c = judge_boots(&Ok(b.clone()), now);
        assert_eq!((c.health, c.state.as_str()), (Health::Failing as i32, "4 boots in 30 min"));
        // Half an hour later the same history is no loop.
        assert_eq!(judge_boots(&Ok(b), now + LOOP_WINDOW_S).health, Health::Ok as i32);
        let many: Vec<(i64, String)> = (0..100).map(|i| (i, format!("b{i}"))).collect();
        assert_eq!(record_boot(many, "new", 200).len(), BOOTS_KEPT);
    }

    /// The probe's cases: boots dated years ahead (a clock once wrong) made a loop for years; a
    /// FIFO as the history froze the agent before it connected; a link at the temporary's name
    /// was written through.
    #[test]
    fn a_wrong_clock_a_fifo_or_a_planted_link_does_not_make_or_hide_a_loop() {
        let now = 1_800_000_000;
        let ahead: Vec<(i64, String)> = (0..5).map(|i| (now + 3 * 365 * 86_400 + i, format!("f{i}"))).collect();
        let c = judge_boots(&Ok(ahead), now);
        assert_eq!((c.health, c.state.as_str()), (Health::Ok as i32, "0 boots in 30 min"));
        assert_eq!(c.details["dated_in_the_future"], "5");
        // A few seconds ahead (a clock about to be stepped back) still counts.
        let near: Vec<(i64, String)> = (0..4).map(|i| (now + 60 + i, format!("n{i}"))).collect();
        assert_eq!(judge_boots(&Ok(near), now).health, Health::Failing as i32);

        let t = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&t.path().join("boots"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = remember_boot(t.path(), "a", now).unwrap_err();
        assert!(format!("{e:#}").contains("not a regular file"), "{e}");
        assert_eq!(judge_boots(&Err(e), now).health, Health::Unknown as i32);

        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, crate::state_file::temporary(&t.path().join("boots"))).unwrap();
        remember_boot(t.path(), "a", now).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(read_boots(t.path()).unwrap(), [(now, "a".to_string())]);
    }
}
