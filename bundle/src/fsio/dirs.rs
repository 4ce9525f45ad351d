//! Directories with exactly the mode asked for, whatever the umask.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Create `path` and its missing parents as this user's only (0700), whatever the umask: caches
/// and state hold agents, release layers and keys' neighbours. An existing `path` is narrowed to
/// 0700 too.
pub fn private_dir_all(path: &Path) -> io::Result<()> {
    make_dir_all(path, 0o700)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))
}

/// Create the directory `path` with exactly `mode`, whatever the umask (which narrows the mode
/// given at creation: the mode is set again after). Fails as `fs::create_dir` does when `path`
/// exists. The one way the tool makes a directory (a umask of 000 must not leave one writable by
/// others: root runs what some of them hold).
pub fn make_dir(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().mode(mode).create(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

/// `make_dir` for `path` and each missing parent (each with `mode`); directories already there
/// are left as they are. Ok when `path` is a directory already, as `fs::create_dir_all`.
pub fn make_dir_all(path: &Path, mode: u32) -> io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    let missing: Vec<&Path> = path
        .ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && fs::symlink_metadata(p).is_err())
        .collect();
    for p in missing.into_iter().rev() {
        match make_dir(p, mode) {
            // Made meanwhile by another thread or run: fine if it is a directory.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && p.is_dir() => {}
            r => r?,
        }
    }
    if path.is_dir() {
        Ok(())
    } else {
        Err(io::Error::new(io::ErrorKind::AlreadyExists, "exists and is not a directory"))
    }
}
