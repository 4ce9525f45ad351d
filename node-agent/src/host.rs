//! The host: names, uptime, load, memory, disk, addresses. From /proc and statvfs only.

use hardshift_proto::v1::HostState;
use std::fs;

fn read(p: &str) -> String {
    fs::read_to_string(p).unwrap_or_default().trim().to_string()
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

pub fn probe() -> HostState {
    let mem = read("/proc/meminfo");
    let up = read("/proc/uptime");
    let load = read("/proc/loadavg");
    let mut addresses: Vec<String> = read("/proc/net/fib_trie")
        .lines()
        .zip(read("/proc/net/fib_trie").lines().skip(1))
        .filter(|(_, next)| next.contains("/32 host LOCAL"))
        .filter_map(|(l, _)| l.trim().strip_prefix("|-- ").map(String::from))
        .filter(|a| !a.starts_with("127."))
        .collect();
    addresses.sort();
    addresses.dedup();
    HostState {
        hostname: read("/proc/sys/kernel/hostname"),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
        uptime_seconds: up.split_whitespace().next().and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0) as u64,
        load1: load.split_whitespace().next().and_then(|s| s.parse().ok()).unwrap_or(0.0),
        memory_total_bytes: meminfo("MemTotal:", &mem),
        memory_available_bytes: meminfo("MemAvailable:", &mem),
        root_free_bytes: free_bytes("/"),
        var_free_bytes: free_bytes("/var"),
        addresses,
        cpus: read("/proc/cpuinfo").lines().filter(|l| l.starts_with("processor")).count() as u32,
        ..Default::default()
    }
}
