//! Files of a fresh bundle written early, while the rest is still being made.

use super::tree::{write_files, Spread};
use super::{current, io_err, nanos, WriteError, STATE_DIR};
use crate::bundle::{self, Bundle};
use hardshift_bundle::fsio::{make_dir, private_dir_all};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Files of a fresh bundle written before the rest of it is made (the masters' and workers'
/// configs, while the keys only the bootstrap needs are still being generated), into the
/// directory that `write_staged` completes and renames into place. Dropped unused, it is removed.
pub struct Staged {
    state: PathBuf,
    tmp: Option<PathBuf>,
    files: std::collections::BTreeMap<String, bundle::File>,
    /// Their syncfs, started at once: the disk works while the keys are made.
    syncs: Vec<std::thread::JoinHandle<io::Result<()>>>,
    /// Files kept beside the generations (the agent binary `verify` needs), each written under a
    /// temp name now and renamed into place once the bundle is.
    kept: Vec<(PathBuf, PathBuf)>,
}

impl Staged {
    /// Only for a directory without a live bundle: a re-run links what did not change from the
    /// live generation instead of writing it.
    pub fn begin(dir: &Path) -> Result<Option<Staged>, WriteError> {
        if current(dir).is_some() {
            return Ok(None);
        }
        let state = dir.join(STATE_DIR);
        private_dir_all(&state).map_err(io_err(&state))?;
        let tmp = state.join(format!("tmp-{}-{}", std::process::id(), nanos()));
        make_dir(&tmp, 0o700).map_err(io_err(&tmp))?;
        Ok(Some(Staged {
            state,
            tmp: Some(tmp),
            files: Default::default(),
            syncs: Vec::new(),
            kept: Vec::new(),
        }))
    }

    /// Write `files` (paths inside the bundle) now, and start flushing them.
    pub fn put(&mut self, files: Vec<(String, bundle::File)>) -> Result<(), WriteError> {
        let Some(tmp) = self.tmp.clone() else { return Ok(()) };
        let part = Bundle {
            files: files.into_iter().collect(),
        };
        write_files(&tmp, &part, None, &Default::default(), Spread::OneThread)?;
        let d = fs::File::open(&tmp).map_err(io_err(&tmp))?;
        self.syncs
            .push(std::thread::spawn(move || nix::unistd::syncfs(&d).map_err(io::Error::from)));
        self.files.extend(part.files);
        Ok(())
    }

    /// Keep `bytes` at `dest` (a path under `DIR/.hardshift`, outside the generations) if the
    /// bundle gets written; nothing if `dest` is already there.
    pub fn keep(&mut self, dest: PathBuf, bytes: &[u8], mode: u32) -> Result<(), WriteError> {
        if dest.exists() {
            return Ok(());
        }
        let tmp = self.state.join(format!("tmp-{}-{}-kept", std::process::id(), nanos()));
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        self.kept.push((tmp.clone(), dest));
        // No fsync here, on a thread the keys need: the bundle's syncfs flushes it too (same
        // filesystem), and `settle` makes sure of it before the rename.
        f.write_all(bytes).map_err(io_err(&tmp))
    }

    /// The directory and what it holds, once every flush started has ended.
    pub(super) fn finish(&mut self) -> Result<(PathBuf, std::collections::BTreeMap<String, bundle::File>), WriteError> {
        let tmp = self.tmp.take().expect("a staged directory");
        for s in std::mem::take(&mut self.syncs) {
            s.join()
                .unwrap_or_else(|_| Err(io::Error::other("syncfs thread panicked")))
                .map_err(io_err(&tmp))?;
        }
        Ok((tmp, std::mem::take(&mut self.files)))
    }

    /// The bundle is written: put the kept files in place.
    pub(super) fn settle(&mut self) -> Result<(), WriteError> {
        for (tmp, dest) in std::mem::take(&mut self.kept) {
            if let Some(parent) = dest.parent() {
                // Kept files (the agent) sit in state directories: this user's only.
                private_dir_all(parent).map_err(io_err(parent))?;
            }
            // Already on disk when the bundle's syncfs ran (then this costs nothing); not when
            // an intact generation was reused as is.
            fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(io_err(&tmp))?;
            fs::rename(&tmp, &dest).map_err(io_err(&dest))?;
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = fs::remove_dir_all(tmp);
        }
        for (tmp, _) in &self.kept {
            let _ = fs::remove_file(tmp);
        }
    }
}
