//! The bundle directory on disk, the parts every reader and writer shares: one file written whole
//! (`atomic`), directories with exact modes (`dirs`), one writer at a time (`lock`), and the live
//! generation read (`current`, `read_current`). The generator's fsio writes generations with them.
//!
//! Layout: every generation lives whole in `DIR/.hardshift/gen-<hash>/`; `DIR/.hardshift/current`
//! is a symlink to the live one, and `DIR/pki`, `DIR/auth`, ... are symlinks through `current`.

mod atomic;
mod dirs;
mod lock;

pub use atomic::{replace_dir, swap_into, write_file_atomic};
pub use dirs::{make_dir, make_dir_all, private_dir_all};
pub use lock::{lock, lock_file, BundleLockError, DirLock, LockError};

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub const STATE_DIR: &str = crate::layout::STATE_DIR;
/// The link to the live generation, in STATE_DIR.
pub const CURRENT: &str = "current";

/// The live generation's directory, if a bundle was written before.
pub fn current(dir: &Path) -> Option<PathBuf> {
    let link = dir.join(STATE_DIR).join(CURRENT);
    let target = fs::read_link(&link).ok()?;
    let p = dir.join(STATE_DIR).join(target);
    p.is_dir().then_some(p)
}

/// Read a file of the live bundle (`pki/root-ca.crt`).
pub fn read_current(dir: &Path, rel: &str) -> Option<Vec<u8>> {
    fs::read(current(dir)?.join(rel)).ok()
}

/// Nanoseconds since the epoch: what makes a temp name unique within one process.
pub fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Flush a directory's entries (a rename into it survives a crash only after this).
pub fn sync_dir(p: &Path) -> io::Result<()> {
    fs::File::open(p).and_then(|d| d.sync_all())
}
