//! A bundle's files written into a directory: what the live generation already holds linked,
//! not written again; the rest created with its mode, on all cores; then one syncfs.

use super::{io_err, WriteError};
use crate::bundle::{self, Bundle};
use hardshift_bundle::fsio::{make_dir, private_dir_all};
use std::fs;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The live generation's `SHA256SUMS`, path → hash.
fn live_sums(live: &Path) -> std::collections::HashMap<String, String> {
    let text = fs::read_to_string(live.join(bundle::SUMS)).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once("  "))
        .map(|(h, p)| (p.to_string(), h.to_string()))
        .collect()
}

/// Write `b` into `root` and flush it. `written`: files `root` already holds (`Staged`).
pub(super) fn write_tree(
    root: &Path,
    b: &Bundle,
    live: Option<&Path>,
    written: &std::collections::BTreeMap<String, bundle::File>,
) -> Result<(), WriteError> {
    write_files(root, b, live, written, Spread::AllCores)?;
    // One syncfs instead of an fsync per file: everything is on disk before the rename that
    // makes it live, at a fraction of the cost for thousands of files.
    let d = fs::File::open(root).map_err(io_err(root))?;
    nix::unistd::syncfs(&d).map_err(|e| WriteError::Io {
        path: root.to_path_buf(),
        source: e.into(),
    })
}

pub(super) fn write_files(
    root: &Path,
    b: &Bundle,
    live: Option<&Path>,
    written: &std::collections::BTreeMap<String, bundle::File>,
    spread: Spread,
) -> Result<(), WriteError> {
    use rayon::prelude::*;
    private_dir_all(root).map_err(io_err(root))?;
    let old = live.map(live_sums).unwrap_or_default();
    // This bundle's own hashes, from its SHA256SUMS: not computed again.
    let sums = b.files.get(bundle::SUMS).map(|f| f.contents.to_vec()).unwrap_or_default();
    let new: std::collections::HashMap<&str, &str> = std::str::from_utf8(&sums)
        .map(|t| t.lines().filter_map(|l| l.split_once("  ")).map(|(h, p)| (p, h)).collect())
        .unwrap_or_default();
    // Directories first (a parent sorts before its children), then the files on all cores.
    let dirs: std::collections::BTreeSet<&Path> = b
        .files
        .keys()
        .flat_map(|rel| Path::new(rel.as_str()).ancestors().skip(1))
        .filter(|d| !d.as_os_str().is_empty())
        .collect();
    for d in dirs {
        let p = root.join(d);
        match make_dir(&p, 0o755) {
            // Made by an earlier `put` (Staged): its mode set then.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            r => r.map_err(io_err(&p))?,
        }
    }
    let files: Vec<(&String, &bundle::File)> = b.files.iter().collect();
    let one = |(rel, f): &(&String, &bundle::File)| -> Result<(), WriteError> {
        let path = root.join(rel);
        match written.get(rel.as_str()) {
            Some(w) if w == *f => return Ok(()),
            Some(_) => fs::remove_file(&path).map_err(io_err(&path))?,
            None => {}
        }
        // A file the live generation already holds, byte for byte and with the same mode, is
        // linked rather than written again: a re-run that changes one leaf rewrites one file.
        if let (Some(live), Some(h)) = (live, old.get(rel.as_str())) {
            let src = live.join(rel);
            let same_mode = fs::metadata(&src)
                .map(|m| m.permissions().mode() & 0o7777 == f.mode)
                .unwrap_or(false);
            // SHA256SUMS says what the file should hold; only its bytes say what it holds.
            let intact = || fs::read(&src).is_ok_and(|c| f.contents.eq_bytes(&c));
            let same_hash = new.get(rel.as_str()).map_or_else(|| *h == f.contents.sha256_hex(), |n| n == h);
            if same_mode && same_hash && intact() && fs::hard_link(&src, &path).is_ok() {
                return Ok(());
            }
        }
        // The mode is set at creation, so a key is never readable by others, not even briefly.
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(f.mode)
            .open(&path)
            .map_err(io_err(&path))?;
        f.contents.write_to(&mut file).map_err(io_err(&path))?;
        file.set_permissions(fs::Permissions::from_mode(f.mode)).map_err(io_err(&path))
    };
    match spread {
        Spread::AllCores => files.par_iter().try_for_each(one),
        // Beside the key generation: a second writer would only contend for the directory's
        // lock (and spin on it), taking CPU from the keys.
        Spread::OneThread => files.iter().try_for_each(one),
    }
}

/// How many threads write a tree's files.
#[derive(Clone, Copy)]
pub(super) enum Spread {
    AllCores,
    OneThread,
}
