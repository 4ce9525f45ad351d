//! One writer at a time: an exclusive flock on a file that names its holder.

use super::dirs::private_dir_all;
use super::STATE_DIR;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The one-writer lock of a bundle directory (`DIR/.hardshift/lock`), held while it lives.
pub struct DirLock {
    _lock: nix::fcntl::Flock<fs::File>,
}

/// Take the bundle's writer lock, or say who holds it: two runs writing one bundle at once would
/// leave a generation with some of each run's files.
pub fn lock(dir: &Path, what: &str) -> Result<DirLock, BundleLockError> {
    let state = dir.join(STATE_DIR);
    private_dir_all(&state).map_err(|source| BundleLockError {
        dir: dir.to_path_buf(),
        source: LockError::Io {
            path: state.clone(),
            source,
        },
    })?;
    lock_file(&state.join("lock"), what).map_err(|source| BundleLockError {
        dir: dir.to_path_buf(),
        source,
    })
}

/// The bundle's writer lock not taken, in the words a user acts on.
#[derive(Debug, thiserror::Error)]
#[error("{}: {}", dir.display(), match source {
    LockError::Busy(holder) => format!("another hardshift run is writing this bundle ({holder}); wait for it to finish and run again"),
    LockError::Io { .. } => source.to_string(),
})]
pub struct BundleLockError {
    pub dir: std::path::PathBuf,
    #[source]
    pub source: LockError,
}

/// Why a lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Held by another process: the holder as it named itself, if it still lives.
    #[error("held by {0}")]
    Busy(String),
    #[error("{}: cannot lock: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Take an exclusive, non-blocking flock on `path`, writing our pid and `what` into it.
pub fn lock_file(path: &Path, what: &str) -> Result<DirLock, LockError> {
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|source| LockError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            // Who holds it, for the next run to name. The lock is on the open file, not its text.
            let _ = lock.set_len(0);
            let _ = writeln!(&mut *lock, "pid {} ({what})", std::process::id());
            Ok(DirLock { _lock: lock })
        }
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            // The text names the last taker: believe it only while that pid lives.
            let text = fs::read_to_string(path).unwrap_or_default();
            let alive = text
                .strip_prefix("pid ")
                .and_then(|t| t.split_whitespace().next())
                .is_some_and(|pid| Path::new("/proc").join(pid).exists());
            Err(LockError::Busy(if alive {
                text.trim().to_string()
            } else {
                "holder unknown".into()
            }))
        }
        Err((_, e)) => Err(LockError::Io {
            path: path.to_path_buf(),
            source: e.into(),
        }),
    }
}
