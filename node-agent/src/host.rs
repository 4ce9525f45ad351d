//! The host: names, uptime, load, memory, disk, addresses. From /proc and statvfs only; the
//! /proc part is read from any directory shaped like it (`from_proc`), so it is tested on a
//! recorded one.

use hardshift_proto::v1::HostState;
use std::fs;
use std::path::Path;

fn read(proc: &Path, p: &str) -> String {
    fs::read_to_string(proc.join(p)).unwrap_or_default().trim().to_string()
}

fn meminfo(key: &str, text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Bytes available to unprivileged writers on the filesystem holding `path` (0 if unknown).
fn free_bytes(path: &str) -> u64 {
    nix::sys::statvfs::statvfs(path)
        .map(|s| s.blocks_available() * s.fragment_size())
        .unwrap_or(0)
}

/// This host, from `/proc` and the filesystems of `/` and `/var`.
pub fn probe() -> HostState {
    HostState {
        root_free_bytes: free_bytes("/"),
        var_free_bytes: free_bytes("/var"),
        ..from_proc(Path::new("/proc"))
    }
}

/// What a /proc-shaped directory says (disk space is left 0).
pub fn from_proc(proc: &Path) -> HostState {
    let read = |p: &str| read(proc, p);
    let mem = read("meminfo");
    let up = read("uptime");
    let load = read("loadavg");
    let fib = read("net/fib_trie");
    let mut addresses: Vec<String> = fib
        .lines()
        .zip(fib.lines().skip(1))
        .filter(|(_, next)| next.contains("/32 host LOCAL"))
        .filter_map(|(l, _)| l.trim().strip_prefix("|-- ").map(String::from))
        .filter(|a| !a.starts_with("127."))
        .collect();
    addresses.sort();
    addresses.dedup();
    HostState {
        hostname: read("sys/kernel/hostname"),
        boot_id: read("sys/kernel/random/boot_id"),
        uptime_seconds: up.split_whitespace().next().and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0) as u64,
        load1: load.split_whitespace().next().and_then(|s| s.parse().ok()).unwrap_or(0.0),
        memory_total_bytes: meminfo("MemTotal:", &mem),
        memory_available_bytes: meminfo("MemAvailable:", &mem),
        addresses,
        cpus: read("cpuinfo").lines().filter(|l| l.starts_with("processor")).count() as u32,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_proc() {
        let t = tempfile::tempdir().unwrap();
        let w = |p: &str, text: &str| {
            let f = t.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, text).unwrap();
        };
        w(
            "meminfo",
            "MemTotal:       16384000 kB\nMemFree:         1000 kB\nMemAvailable:    8192000 kB\n",
        );
        w("uptime", "3600.52 7000.10\n");
        w("loadavg", "0.42 0.30 0.20 1/200 999\n");
        w("sys/kernel/hostname", "master-0\n");
        w("sys/kernel/random/boot_id", "5f3c-boot\n");
        w("cpuinfo", "processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\nmodel name\t: x\n");
        w(
            "net/fib_trie",
            "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 127.0.0.1\n        /32 host LOCAL\n     |-- 192.168.126.101\n        /32 host LOCAL\n     |-- 192.168.126.255\n        /32 link BROADCAST\nLocal:\n     |-- 192.168.126.101\n        /32 host LOCAL\n",
        );
        let h = from_proc(t.path());
        assert_eq!((h.hostname.as_str(), h.boot_id.as_str()), ("master-0", "5f3c-boot"));
        assert_eq!((h.uptime_seconds, h.cpus), (3600, 2));
        assert_eq!(h.memory_total_bytes, 16384000 * 1024);
        assert_eq!(h.memory_available_bytes, 8192000 * 1024);
        assert!((h.load1 - 0.42).abs() < 1e-9);
        assert_eq!(h.addresses, ["192.168.126.101"], "loopback and broadcast left out, duplicates once");
    }
}
