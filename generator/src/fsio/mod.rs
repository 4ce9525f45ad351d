//! The bundle on disk. The only writer, and the reader of a previous run's state.
//!
//! Layout: every generation lives whole in `DIR/.hardshift/gen-<hash>/`; `DIR/.hardshift/current`
//! is a symlink to the live one, and `DIR/pki`, `DIR/auth`, ... are symlinks through `current`.
//! A run writes a new generation in a temp dir, renames it into place, then swaps `current` with
//! one rename: an interrupted run leaves the previous bundle untouched and complete.
//!
//! By what it does: `live` reads the live generation, `generation` writes a new one (its files
//! by `tree`, some of them early by `staged`), `damage` says how a generation differs from its
//! bundle; `atomic` writes one file or replaces one directory whole, `dirs` makes directories
//! with exact modes, `lock` keeps one writer per bundle.

mod atomic;
mod damage;
mod dirs;
mod generation;
mod live;
mod lock;
mod staged;
mod tree;

pub use atomic::{replace_dir, swap_into, write_file_atomic};
pub use damage::{action, damage, damage_in, Action, Found};
pub use dirs::{make_dir, make_dir_all, private_dir_all};
pub use generation::{write, write_staged, Written};
pub use live::{current, read_bundle, read_current, read_existing};
pub use lock::{lock, lock_file, DirLock, LockError};
pub use staged::Staged;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub const STATE_DIR: &str = crate::layout::STATE_DIR;
const CURRENT: &str = "current";
/// The generation that was live before the last change: kept as a backup.
const PREVIOUS: &str = "previous";

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{0} exists and is not a hardshift link; move it away so the bundle can be linked there")]
    Occupied(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn sync_dir(p: &Path) -> Result<(), WriteError> {
    fs::File::open(p).and_then(|d| d.sync_all()).map_err(io_err(p))
}
