//! Why a run of the pipeline stopped.

use std::path::{Path, PathBuf};

/// Why a build stopped: the user's input (exit 2), or something else (exit 1), with the
/// underlying error kept as the source where there is one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The user's input: a file, field or flag to fix (each message says which and how).
    #[error("{0}")]
    Input(String),
    /// A file or directory of the bundle, the cache or the inputs did not read or write.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Another hardshift run is writing the bundle.
    #[error(transparent)]
    Locked(#[from] hardshift_bundle::fsio::BundleLockError),
    /// A release's CRDs, or the bundle's objects for them, did not load.
    #[error(transparent)]
    Crd(#[from] crate::crd::CrdError),
    #[error("{0}")]
    Other(String),
}

impl Error {
    pub fn input(m: impl std::fmt::Display) -> Error {
        Error::Input(m.to_string())
    }
    pub fn other(m: impl std::fmt::Display) -> Error {
        Error::Other(m.to_string())
    }
    /// An I/O failure on `path`, as a `map_err` argument.
    pub fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
    /// Whether the user can fix it by changing what they gave (exit 2).
    pub fn is_input(&self) -> bool {
        matches!(self, Error::Input(_))
    }
}
