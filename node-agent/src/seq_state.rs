//! The last seq this agent used in this boot, kept in a file so that a restarted agent
//! continues the sequence. The collector keys reports by (node, boot, seq): a restart that
//! counted from 1 again would have its reports acknowledged and dropped as duplicates.
//!
//! The file lives on tmpfs (`/run`) by default: a reboot changes the boot id anyway, so nothing
//! needs to survive one, and the node's disk (etcd's disk) sees no write per report. A write
//! is a temp file and a rename, so a kill -9 leaves the old or the new value, never half.

use std::path::{Path, PathBuf};

const FILE: &str = "seq";

pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// The last seq used by `node` in `boot_id`, or 0 when the file belongs to another boot or node,
/// or is absent or unreadable (then the sequence starts over, which a new boot id makes safe).
pub fn load(dir: &Path, node: &str, boot_id: &str) -> u64 {
    let Ok(bytes) = crate::state_file::read(&path(dir), 4096) else {
        return 0;
    };
    parse(&String::from_utf8_lossy(&bytes), node, boot_id).unwrap_or(0)
}

/// The highest seq a sequence may reach: what the collector's store keeps faithfully (SQLite
/// integers are signed 64-bit). Far beyond any real boot (a report a millisecond for 292 million
/// years); a file saying more is corrupt or forged, and continuing after it would wrap to 0 and
/// have every later report dropped as a duplicate.
pub const MAX_SEQ: u64 = i64::MAX as u64 - 1;

/// The most a real sequence reaches: one report a millisecond for 8,900 years. A file saying
/// more is corrupt or forged: continuing after one just under MAX_SEQ would pin every later
/// report at MAX_SEQ, each dropped as a duplicate, the agent silent.
pub const PLAUSIBLE_SEQ: u64 = 1 << 48;

fn parse(text: &str, node: &str, boot_id: &str) -> Option<u64> {
    let mut f = text.split_whitespace();
    let (n, b, s) = (f.next()?, f.next()?, f.next()?);
    let seq: u64 = (n == node && b == boot_id).then(|| s.parse().ok()).flatten()?;
    if seq > PLAUSIBLE_SEQ {
        tracing::warn!("{FILE}: seq {seq} is beyond any real sequence (corrupt or forged): ignored, counting from 1");
        return None;
    }
    Some(seq)
}

/// Record `seq` as used. Called before the report carrying it is queued, so the file is never
/// behind anything the collector may have seen.
pub fn save(dir: &Path, node: &str, boot_id: &str, seq: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    crate::state_file::write(&path(dir), format!("{node} {boot_id} {seq}\n").as_bytes(), 0o644, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continues_only_within_the_same_boot_and_node() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(load(d.path(), "m0", "b1"), 0);
        save(d.path(), "m0", "b1", 41).unwrap();
        assert_eq!(load(d.path(), "m0", "b1"), 41);
        assert_eq!(load(d.path(), "m0", "b2"), 0, "a new boot starts over");
        assert_eq!(load(d.path(), "m1", "b1"), 0, "another node's file is not ours");
        std::fs::write(path(d.path()), "garbage").unwrap();
        assert_eq!(load(d.path(), "m0", "b1"), 0);
        // A seq no sequence reaches is not continued after (it would wrap).
        std::fs::write(path(d.path()), format!("m0 b1 {}\n", u64::MAX - 1)).unwrap();
        assert_eq!(load(d.path(), "m0", "b1"), 0);
        // Nor one just under the maximum (every later report would be pinned there).
        std::fs::write(path(d.path()), format!("m0 b1 {}\n", MAX_SEQ - 1)).unwrap();
        assert_eq!(load(d.path(), "m0", "b1"), 0);
        std::fs::write(path(d.path()), format!("m0 b1 {PLAUSIBLE_SEQ}\n")).unwrap();
        assert_eq!(load(d.path(), "m0", "b1"), PLAUSIBLE_SEQ);
        // No temp file is left behind.
        save(d.path(), "m0", "b1", 42).unwrap();
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("seq")]);
    }
}
