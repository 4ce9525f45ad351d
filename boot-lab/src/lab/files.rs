//! What the lab's servers and VMs wrote, read as text whatever its bytes.

use std::path::Path;

pub fn read_lossy(p: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).to_string()
}

/// The last `n` lines of a file.
pub fn tail(p: &Path, n: usize) -> String {
    let s = read_lossy(p);
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
