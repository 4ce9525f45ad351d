//! The store's handle and its error, below everything that reads or writes through it; and where
//! a store's files lie (its -wal, -shm and note files beside it).

use rusqlite::Connection;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store: {0}")]
    Sql(#[from] rusqlite::Error),
    /// The file is not a store that can be read, or no longer the one written.
    #[error("{0}")]
    Broken(String),
}

pub struct Store {
    pub(super) db: Connection,
    /// The file opened and its WAL, and their identities then: a write into a file that was
    /// deleted or replaced since would be acknowledged and lost, so `batch` refuses it.
    pub(super) path: PathBuf,
    pub(super) identity: Option<(u64, u64)>,
    pub(super) wal_identity: Option<(u64, u64)>,
    /// Why this writer stopped, once it has.
    pub(super) halted: Option<Halted>,
}

/// A file of the store deleted or replaced under the writer (`why`), and whether what the
/// unlinked WAL held is saved into the main file yet.
pub(super) struct Halted {
    pub(super) why: String,
    pub(super) saved: bool,
}

/// (device, inode) of the file at `path` now, if any.
pub(super) fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// `path` with `suffix` added to its file name: the -wal, -shm and note files beside a store.
pub(super) fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}
