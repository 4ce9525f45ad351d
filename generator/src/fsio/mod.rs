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
//! with exact modes, `lock` keeps one writer per bundle (those three, and reading the live
//! generation, are the bundle crate's: every reader shares them).

mod damage;
mod generation;
mod live;
mod staged;
mod tree;

pub use damage::{action, damage, damage_in, Action, Found};
pub use generation::{write, write_staged, Written};
use hardshift_bundle::fsio::nanos;
pub use hardshift_bundle::fsio::{
    current, lock, lock_file, make_dir, make_dir_all, private_dir_all, read_current, replace_dir, swap_into, write_file_atomic, DirLock,
    LockError, CURRENT,
};
pub use live::{read_bundle, read_existing};
pub use staged::Staged;

use std::io;
use std::path::{Path, PathBuf};

pub const STATE_DIR: &str = crate::layout::STATE_DIR;
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

fn sync_dir(p: &Path) -> Result<(), WriteError> {
    hardshift_bundle::fsio::sync_dir(p).map_err(io_err(p))
}
