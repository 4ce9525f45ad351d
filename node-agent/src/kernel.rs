//! The kernel's own problems since boot, from the journal's kernel transport
//! (`_TRANSPORT=kernel`, this boot's id): OOM kills, hung tasks, oopses, I/O and filesystem
//! errors, read-only remounts and XFS shutdowns, machine-check and EDAC hardware errors, NIC
//! links going down, leaked network devices. The kinds are node-problem-detector's kernel
//! monitor's, matched by plain substrings (no regex engine in the agent). Read incrementally
//! (journalctl's cursor), counted per kind with the newest line.

use anyhow::Context;
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{kernel as k, Component};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

/// Lines read per journalctl call: the newest ones, if more came since the last.
const MAX_LINES: &str = "20000";
/// The most of journalctl's output read per call.
const MAX_BYTES: usize = 8 << 20;
/// The longest line kept as evidence.
const LINE_CHARS: usize = 300;

/// The kind of problem a kernel message reports, if any. Pure.
pub fn classify(msg: &str) -> Option<&'static str> {
    let has = |s: &str| msg.contains(s);
    // mm/oom_kill.c: "Out of memory: Killed process N (comm) total-vm:…" (the memory cgroup's
    // says "Memory cgroup out of memory: Killed process …").
    if has("Killed process ") && has("total-vm:") {
        return Some(k::OOM);
    }
    // kernel/hung_task.c: "INFO: task comm:pid blocked for more than N seconds."
    if has("task ") && has(" blocked for more than ") && has(" seconds") {
        return Some(k::HUNG_TASK);
    }
    if has("unregister_netdevice: waiting for ") && has("to become free") {
        return Some(k::NETDEV_LEAK);
    }
    if msg.starts_with("BUG: unable to handle")
        || msg.starts_with("BUG: kernel NULL pointer dereference")
        || msg.starts_with("kernel BUG at ")
        || msg.starts_with("Oops: ")
        || msg.starts_with("general protection fault")
        || (msg.starts_with("divide error: ") && has("[#"))
        || msg.starts_with("Kernel panic - not syncing")
    {
        return Some(k::OOPS);
    }
    // The machine-check handler and the EDAC memory controllers (CE corrected, UE not).
    if msg.starts_with("mce: [Hardware Error]")
        || has("Machine check events logged")
        || (msg.starts_with("EDAC ") && (has(" CE ") || has(" UE ")))
        || has("CE memory read error")
    {
        return Some(k::HARDWARE_ERROR);
    }
    // ext4 ("EXT4-fs (sda1): Remounting filesystem read-only") and XFS's shutdown, after which
    // the filesystem takes no write.
    if has("Remounting filesystem read-only")
        || (msg.starts_with("XFS ") && (has("Shutting down filesystem") || has("Filesystem has been shut down")))
    {
        return Some(k::READ_ONLY);
    }
    if msg.starts_with("EXT4-fs error")
        || msg.starts_with("EXT4-fs warning")
        || (msg.starts_with("XFS ") && (has("Corruption") || has("metadata I/O error") || has("log I/O error")))
        || msg.starts_with("BTRFS error")
    {
        return Some(k::FS_ERROR);
    }
    // The block layer ("I/O error, dev sda, sector …", once prefixed by blk_update_request) and
    // the buffer cache ("Buffer I/O error on dev sdb1, logical block 0").
    if has("I/O error, dev ") || has("Buffer I/O error on dev") || has("critical medium error, dev ") || has("critical target error, dev ")
    {
        return Some(k::IO_ERROR);
    }
    // Drivers' link messages: e1000e/igb/ixgbe "NIC Link is Down", others "Link is Down" or
    // mlx5 "Link down".
    if has("Link is Down") || has("NIC Link is Down") || msg.ends_with(": Link down") {
        return Some(k::LINK_DOWN);
    }
    None
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    pub count: u64,
    pub last: String,
}

/// What the kernel said since boot, as far as read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelLog {
    pub cursor: Option<String>,
    pub seen: BTreeMap<&'static str, Seen>,
    pub lines: u64,
}

impl KernelLog {
    /// journalctl's `-o cat --show-cursor` output: messages, then `-- cursor: …`.
    pub fn feed(&mut self, out: &str) {
        for l in out.lines() {
            if let Some(c) = l.strip_prefix("-- cursor: ") {
                self.cursor = Some(c.trim().to_string());
                continue;
            }
            self.lines += 1;
            if let Some(kind) = classify(l) {
                let s = self.seen.entry(kind).or_default();
                s.count += 1;
                s.last = l.chars().take(LINE_CHARS).collect();
            }
        }
    }
}

/// Reads what the kernel logged since the last call (this boot only) into `log`.
pub async fn read(journal_dir: Option<&Path>, boot_id: &str, log: &mut KernelLog, timeout: Duration) -> anyhow::Result<()> {
    let mut cmd = tokio::process::Command::new("journalctl");
    cmd.args(["--no-pager", "--quiet", "-o", "cat", "--show-cursor", "-n", MAX_LINES]);
    if let Some(d) = journal_dir {
        cmd.arg("--directory").arg(d);
    }
    if let Some(c) = &log.cursor {
        cmd.arg(format!("--after-cursor={c}"));
    }
    // This boot by its id, not `-b`: with --directory, `-b` means the reading machine's boot.
    cmd.arg(format!("_BOOT_ID={}", boot_id.replace('-', "")));
    cmd.arg("_TRANSPORT=kernel");
    cmd.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(timeout, cmd.output())
        .await
        .map_err(|_| anyhow::anyhow!("journalctl did not answer within {} s", timeout.as_secs()))?
        .context("journalctl")?;
    if !out.status.success() {
        return Err(anyhow::anyhow!("journalctl: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let n = out.stdout.len().min(MAX_BYTES);
    log.feed(&String::from_utf8_lossy(&out.stdout[..n]));
    Ok(())
}

/// How bad each kind is: the kernel or the hardware failing, or a warning (an OOM kill is the
/// kernel doing its job for a workload; a link that went down may have come back).
fn badness(kind: &str) -> Health {
    match kind {
        k::OOM | k::LINK_DOWN => Health::Warning,
        _ => Health::Failing,
    }
}

/// The `kernel` component: a detail per kind seen ("N× last: line").
pub fn judge(log: &anyhow::Result<KernelLog>) -> ComponentState {
    let log = match log {
        Ok(l) => l,
        Err(e) => {
            return ComponentState {
                name: Component::Kernel.name().into(),
                health: Health::Unknown as i32,
                state: "unread".into(),
                reason: format!("{e:#}"),
                details: Default::default(),
            }
        }
    };
    let details: HashMap<String, String> = log
        .seen
        .iter()
        .map(|(kind, s)| (kind.to_string(), format!("{}× last: {}", s.count, s.last)))
        .collect();
    let worst = log
        .seen
        .keys()
        .map(|kind| badness(kind))
        .max_by_key(|h| h.badness())
        .unwrap_or(Health::Ok);
    let kinds: Vec<String> = k::ALL
        .iter()
        .filter_map(|kind| log.seen.get(kind).map(|s| format!("{} {kind}", s.count)))
        .collect();
    ComponentState {
        name: Component::Kernel.name().into(),
        health: worst as i32,
        state: if kinds.is_empty() {
            format!("{} lines, no problem", log.lines)
        } else {
            kinds.join(", ")
        },
        reason: k::ALL
            .iter()
            .find_map(|kind| log.seen.get(kind).filter(|_| badness(kind) == worst).map(|s| s.last.clone()))
            .unwrap_or_default(),
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real kernels' messages, in their formats (mm/oom_kill.c, kernel/hung_task.c, the block
    /// layer, ext4, XFS, the MCE and EDAC handlers, e1000e/ixgbe/mlx5, net/core/dev.c), as they
    /// appear in bug reports of real machines; and ordinary boot lines that are no problem.
    pub const LINES: &[(&str, Option<&str>)] = &[
        ("Out of memory: Killed process 15784 (python3) total-vm:11964kB, anon-rss:4288kB, file-rss:3028kB, shmem-rss:0kB, UID:0 pgtables:60kB oom_score_adj:0", Some(k::OOM)),
        ("Memory cgroup out of memory: Killed process 4242 (etcd) total-vm:10653324kB, anon-rss:8283612kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:16828kB oom_score_adj:-999", Some(k::OOM)),
        ("oom_reaper: reaped process 15784 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB", None),
        ("INFO: task hhvm:1577 blocked for more than 120 seconds.", Some(k::HUNG_TASK)),
        ("INFO: task kworker/u8:2:170 blocked for more than 122 seconds.", Some(k::HUNG_TASK)),
        ("unregister_netdevice: waiting for eth0 to become free. Usage count = 1", Some(k::NETDEV_LEAK)),
        ("BUG: unable to handle kernel NULL pointer dereference at 0000000000000010", Some(k::OOPS)),
        ("BUG: kernel NULL pointer dereference, address: 0000000000000008", Some(k::OOPS)),
        ("divide error: 0000 [#1] SMP PTI", Some(k::OOPS)),
        ("general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] PREEMPT SMP NOPTI", Some(k::OOPS)),
        ("blk_update_request: I/O error, dev sda, sector 106553248", Some(k::IO_ERROR)),
        ("I/O error, dev nvme0n1, sector 131209936 op 0x0:(READ) flags 0x80700 phys_seg 25 prio class 0", Some(k::IO_ERROR)),
        ("Buffer I/O error on dev sdb1, logical block 0, lost sync page write", Some(k::IO_ERROR)),
        ("blk_update_request: critical medium error, dev sdb, sector 2064", Some(k::IO_ERROR)),
        ("EXT4-fs error (device sdb1): ext4_journal_check_start:61: Detected aborted journal", Some(k::FS_ERROR)),
        ("EXT4-fs (sdb1): Remounting filesystem read-only", Some(k::READ_ONLY)),
        ("XFS (vda4): Corruption of in-memory data detected.  Shutting down filesystem", Some(k::READ_ONLY)),
        ("XFS (dm-0): metadata I/O error in \"xfs_imap_to_bp+0x5c/0xa0\" at daddr 0x1f40 len 32 error 5", Some(k::FS_ERROR)),
        ("mce: [Hardware Error]: Machine check events logged", Some(k::HARDWARE_ERROR)),
        ("EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x4c2a1 offset:0x0 grain:32 syndrome:0x0)", Some(k::HARDWARE_ERROR)),
        ("e1000e 0000:00:1f.6 eth0: NIC Link is Down", Some(k::LINK_DOWN)),
        ("ixgbe 0000:03:00.0 ens1f0: NIC Link is Down", Some(k::LINK_DOWN)),
        ("mlx5_core 0000:3b:00.0 ens1f0np0: Link down", Some(k::LINK_DOWN)),
        ("e1000e 0000:00:1f.6 eth0: NIC Link is Up 1000 Mbps Full Duplex, Flow Control: None", None),
        ("EXT4-fs (vda): mounted filesystem with ordered data mode. Quota mode: none.", None),
        ("XFS (vda4): Mounting V5 Filesystem", None),
        ("EXT4-fs warning (device loop1): ext4_end_bio:343: I/O error 10 writing to inode 1001 starting block 1018782)", Some(k::FS_ERROR)),
        ("virtio_net virtio1 enp1s0: renamed from eth0", None),
        ("Linux version 5.14.0-427.el9.x86_64 (mockbuild@x86-64-01.build.eng.rdu2.redhat.com) (gcc (GCC) 11.4.1)", None),
        ("EDAC MC: Ver: 3.0.0", None),
    ];

    #[test]
    fn every_kind_from_real_lines_and_nothing_from_ordinary_ones() {
        for (line, want) in LINES {
            assert_eq!(classify(line), *want, "{line}");
        }
        for kind in k::ALL {
            assert!(LINES.iter().any(|(_, w)| *w == Some(kind)), "no real line of kind {kind}");
        }
    }

    #[test]
    fn counted_with_the_newest_line_and_the_cursor_kept() {
        let mut log = KernelLog::default();
        log.feed("EXT4-fs (vda): mounted filesystem\nINFO: task etcd:2211 blocked for more than 120 seconds.\n-- cursor: s=1;i=2\n");
        log.feed("Out of memory: Killed process 1 (a) total-vm:1kB, anon-rss:1kB\nOut of memory: Killed process 2 (b) total-vm:1kB, anon-rss:1kB\n-- cursor: s=1;i=5\n");
        assert_eq!(log.cursor.as_deref(), Some("s=1;i=5"));
        assert_eq!(log.seen[k::OOM].count, 2);
        assert!(log.seen[k::OOM].last.contains("(b)"));
        let c = judge(&Ok(log));
        assert_eq!(c.health, Health::Failing as i32, "a hung task is worse than an OOM kill");
        assert_eq!(c.state, "1 hung-task, 2 oom-kill");
        assert!(c.reason.contains("etcd:2211"), "{}", c.reason);
        assert!(c.details[k::OOM].starts_with("2× last: Out of memory"), "{:?}", c.details);
        let quiet = judge(&Ok(KernelLog {
            lines: 3,
            ..Default::default()
        }));
        assert_eq!((quiet.health, quiet.state.as_str()), (Health::Ok as i32, "3 lines, no problem"));
    }

    /// Through the real journalctl, on a real journal file (systemd-journal-remote writes it from
    /// export format): only this boot's kernel lines are counted, and a second read from the
    /// cursor counts nothing twice.
    #[tokio::test]
    async fn a_real_journal_read_from_its_cursor() {
        const BOOT: &str = "5e1a4a53c0f24b8c9d6a2f7b1e3c4d5a";
        let entry = |i: usize, boot: &str, transport: &str, msg: &str| {
            format!("__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={}\n_BOOT_ID={boot}\n_HOSTNAME=master-0\n_TRANSPORT={transport}\nSYSLOG_IDENTIFIER=kernel\nPRIORITY=3\nMESSAGE={msg}\n\n", 1795684442000000u64 + i as u64 * 1000, 1000000 + i * 1000)
        };
        let mut export: String = LINES.iter().enumerate().map(|(i, (l, _))| entry(i, BOOT, "kernel", l)).collect();
        export.push_str(&entry(
            100,
            "0badb00t0badb00t0badb00t0badb00t",
            "kernel",
            "INFO: task x:1 blocked for more than 120 seconds.",
        ));
        export.push_str(&entry(
            101,
            BOOT,
            "syslog",
            "Out of memory: Killed process 9 (not-the-kernel) total-vm:1kB",
        ));
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("k.export");
        std::fs::write(&src, export).unwrap();
        let dir = t.path().join("journal");
        std::fs::create_dir_all(&dir).unwrap();
        let st = std::process::Command::new("/lib/systemd/systemd-journal-remote")
            .args([
                "-o",
                dir.join("k.journal").to_str().unwrap(),
                "--split-mode=none",
                src.to_str().unwrap(),
            ])
            .output()
            .expect("systemd-journal-remote (hack/setup.sh installs it)");
        assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
        let mut log = KernelLog::default();
        read(
            Some(&dir),
            "5e1a4a53-c0f2-4b8c-9d6a-2f7b1e3c4d5a",
            &mut log,
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        assert_eq!(log.lines, LINES.len() as u64, "this boot's kernel lines only");
        assert_eq!(log.seen[k::OOM].count, 2);
        assert_eq!(log.seen[k::HUNG_TASK].count, 2);
        assert!(log.cursor.is_some());
        let before = log.clone();
        read(Some(&dir), BOOT, &mut log, Duration::from_secs(30)).await.unwrap();
        assert_eq!(log.seen, before.seen, "nothing read twice");
        let c = judge(&Ok(log));
        assert_eq!(c.health, Health::Failing as i32);
        for kind in k::ALL {
            assert!(c.details.contains_key(kind), "{kind}: {:?}", c.details);
        }
    }
}
