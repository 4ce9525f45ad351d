//! The host's small checks, each whole in this file: a reader of what the kernel says (/proc),
//! a pure judge, and its row of the probe table. Adding one is: its component in the vocabulary,
//! its reader, judge and row here, one diagnose rule in the collector, one row in
//! docs/hardware.md.

use crate::probe::{always, Cadence, Probe, LOCAL};
use anyhow::Context;
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{self, Component};
use std::collections::HashMap;
use std::path::Path;

/// Their rows of the probe table: each round, from /proc.
pub const ROWS: &[Probe] = &[
    Probe {
        components: &[Component::Fips],
        cadence: Cadence::Round,
        deadline: LOCAL,
        enabled: always,
        run: |x| {
            Box::pin(async move {
                let kernel = fips_enabled(Path::new("/proc"));
                vec![judge_fips(x.cfg.fips, kernel)]
            })
        },
    },
    Probe {
        components: &[Component::Swap],
        cadence: Cadence::Round,
        deadline: LOCAL,
        enabled: always,
        run: |_| Box::pin(async move { vec![judge_swap(&read_swaps(Path::new("/proc")))] }),
    },
    Probe {
        components: &[Component::FileTable],
        cadence: Cadence::Round,
        deadline: LOCAL,
        enabled: always,
        run: |_| Box::pin(async move { vec![judge_file_table(&read_file_nr(Path::new("/proc")))] }),
    },
];

/// The open-file table past this share of its limit fails: a full one refuses every open with
/// ENFILE ("VFS: file-max limit reached"), so CRI-O, the kubelet and etcd fail on sockets and
/// files they must open. Past `FILE_TABLE_WARN` it warns: something leaks descriptors.
pub const FILE_TABLE_FAIL: f64 = 0.9;
pub const FILE_TABLE_WARN: f64 = 0.75;

/// `/proc/sys/fs/file-nr`: (allocated file handles, the limit, fs.file-max).
pub fn read_file_nr(proc: &Path) -> anyhow::Result<(u64, u64)> {
    let path = proc.join("sys/fs/file-nr");
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let f: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("{}: {text:?}", path.display()))?;
    match f[..] {
        [allocated, _, max] => Ok((allocated, max)),
        _ => anyhow::bail!("{}: {text:?} is not three numbers", path.display()),
    }
}

/// The `file-table` component. Pure.
pub fn judge_file_table(nr: &anyhow::Result<(u64, u64)>) -> ComponentState {
    let &(allocated, max) = match nr {
        Ok(v) => v,
        Err(e) => return vocab::component(Component::FileTable, Health::Unknown, "unreadable", format!("{e:#}")),
    };
    let details = HashMap::from([
        ("allocated".to_string(), allocated.to_string()),
        ("max".to_string(), max.to_string()),
    ]);
    let share = if max == 0 { 1.0 } else { allocated as f64 / max as f64 };
    let state = format!("{allocated} of {max} open files ({:.0} %)", share * 100.0);
    let health = if share >= FILE_TABLE_FAIL {
        Health::Failing
    } else if share >= FILE_TABLE_WARN {
        Health::Warning
    } else {
        return vocab::component(Component::FileTable, Health::Ok, state, "").with_details(details);
    };
    let why = format!(
        "{allocated} file handles are open of the kernel's {max} (fs.file-max): at the limit every open fails with ENFILE (\"VFS: file-max limit reached\"), and CRI-O, the kubelet and etcd fail on the sockets and files they open; find the process that leaks them (`ls /proc/*/fd | wc -l` per process)"
    );
    vocab::component(Component::FileTable, health, state, why).with_details(details)
}

/// `/proc/sys/crypto/fips_enabled`: Some(on), None when the kernel has no such file.
pub fn fips_enabled(proc: &Path) -> Option<bool> {
    std::fs::read_to_string(proc.join("sys/crypto/fips_enabled"))
        .ok()
        .map(|s| s.trim() == "1")
}

/// The `fips` component: a bundle made with `fips: true` needs the kernel in FIPS mode (RHCOS
/// boots so with `fips=1`); a kernel in FIPS mode for a bundle without it is said, not failed.
pub fn judge_fips(bundle: bool, kernel: Option<bool>) -> ComponentState {
    let details = HashMap::from([
        ("bundle".to_string(), bundle.to_string()),
        ("kernel".to_string(), kernel.map_or("unknown".into(), |k| k.to_string())),
    ]);
    match (bundle, kernel) {
        (true, Some(true)) | (false, Some(false)) | (false, None) => {
            vocab::component(Component::Fips, Health::Ok, if bundle { "on" } else { "off" }, "").with_details(details)
        }
        (true, k) => vocab::component(
            Component::Fips,
            Health::Failing,
            "kernel not in FIPS mode",
            format!(
                "the bundle was made with fips: true, but /proc/sys/crypto/fips_enabled is {}",
                k.map_or("absent", |_| "0")
            ),
        )
        .with_details(details),
        (false, Some(true)) => vocab::component(
            Component::Fips,
            Health::Warning,
            "kernel in FIPS mode",
            "the kernel runs in FIPS mode, but the bundle was made without fips: true",
        )
        .with_details(details),
    }
}

/// The swap areas `/proc/swaps` lists: (name, size in KiB); an unreadable file says why.
pub fn read_swaps(proc: &Path) -> anyhow::Result<Vec<(String, u64)>> {
    let path = proc.join("swaps");
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    Ok(text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.first()?.to_string(), f.get(2)?.parse().ok()?))
        })
        .collect())
}

/// The `swap` component: the kubelet refuses to start while swap is on (its failSwapOn, which
/// OpenShift keeps), so a node with a swap area never runs a pod. Pure.
pub fn judge_swap(swaps: &anyhow::Result<Vec<(String, u64)>>) -> ComponentState {
    match swaps {
        Err(e) => vocab::component(Component::Swap, Health::Unknown, "unreadable", format!("{e:#}")),
        Ok(v) if v.is_empty() => vocab::component(Component::Swap, Health::Ok, "off", ""),
        Ok(v) => {
            let kib: u64 = v.iter().map(|(_, k)| k).sum();
            let names: Vec<&str> = v.iter().map(|(n, _)| n.as_str()).collect();
            vocab::component(
                Component::Swap,
                Health::Failing,
                "on",
                format!(
                    "{} MiB of swap ({}): the kubelet refuses to start with swap on; swapoff -a, and remove it from /etc/fstab or the swap unit",
                    kib / 1024,
                    names.join(", ")
                ),
            )
            .with_details(HashMap::from([("areas".to_string(), names.join(",")), ("kib".to_string(), kib.to_string())]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fips_against_the_bundle() {
        assert_eq!(judge_fips(true, Some(true)).health, Health::Ok as i32);
        assert_eq!(judge_fips(false, None).health, Health::Ok as i32);
        let c = judge_fips(true, Some(false));
        assert_eq!(c.health, Health::Failing as i32);
        assert!(c.reason.contains("fips_enabled is 0"), "{}", c.reason);
        assert!(judge_fips(true, None).reason.contains("absent"));
        assert_eq!(judge_fips(false, Some(true)).health, Health::Warning as i32);
        // This machine's kernel, read as the agent reads it.
        let _ = fips_enabled(Path::new("/proc"));
    }

    /// The file table judged at its bounds, this machine's own read, and a file the kernel
    /// never writes said as such.
    #[test]
    fn a_nearly_full_file_table_fails_and_a_roomy_one_passes() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(judge_file_table(&read_file_nr(d.path())).health, Health::Unknown as i32);
        std::fs::create_dir_all(d.path().join("sys/fs")).unwrap();
        let at = |text: &str| {
            std::fs::write(d.path().join("sys/fs/file-nr"), text).unwrap();
            judge_file_table(&read_file_nr(d.path()))
        };
        let ok = at("1344\t0\t9223372036854775807\n");
        assert_eq!(ok.health, Health::Ok as i32, "{ok:?}");
        assert_eq!(ok.details["allocated"], "1344");
        assert_eq!(at("80000\t0\t100000\n").health, Health::Warning as i32);
        let full = at("99000\t0\t100000\n");
        assert_eq!(full.health, Health::Failing as i32);
        assert!(full.reason.contains("ENFILE") && full.state.contains("99 %"), "{full:?}");
        assert_eq!(at("1 2\n").health, Health::Unknown as i32);
        assert_eq!(at("a b c\n").health, Health::Unknown as i32);
        let here = judge_file_table(&read_file_nr(Path::new("/proc")));
        assert_ne!(
            here.health,
            Health::Unknown as i32,
            "this machine's /proc/sys/fs/file-nr reads: {here:?}"
        );
    }

    /// A swap area fails the node (the kubelet will not start), none is ok, and a /proc without
    /// the file says so rather than passing.
    #[test]
    fn swap_on_fails_and_off_passes() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(judge_swap(&read_swaps(d.path())).health, Health::Unknown as i32);
        std::fs::write(d.path().join("swaps"), "Filename\tType\tSize\tUsed\tPriority\n").unwrap();
        let off = judge_swap(&read_swaps(d.path()));
        assert_eq!((off.health, off.state.as_str()), (Health::Ok as i32, "off"));
        std::fs::write(
            d.path().join("swaps"),
            "Filename\tType\tSize\tUsed\tPriority\n/dev/vda3 partition\t2097148\t0\t-2\n/swapfile file 1048576 0 -3\n",
        )
        .unwrap();
        let on = judge_swap(&read_swaps(d.path()));
        assert_eq!(on.health, Health::Failing as i32);
        assert!(on.reason.starts_with("3071 MiB of swap (/dev/vda3, /swapfile)"), "{}", on.reason);
        assert_eq!(on.details["kib"], "3145724");
    }
}
