//! One file written whole or not at all; one directory replaced whole, in one step.

use super::dirs::make_dir_all;
use super::{nanos, sync_dir};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Replace the directory `target` as a whole with `files` (path inside it, mode, bytes): a new
/// directory is written and flushed beside it, then swapped into place (`swap_into`), so a killed
/// run leaves the old one or the new one, never half, never none. The entries named in `carry`
/// move over from the old.
pub fn replace_dir(target: &Path, files: &[(String, u32, Vec<u8>)], carry: &[&str]) -> io::Result<()> {
    let name = target.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let parent = target.parent().unwrap_or(Path::new("."));
    let tmp = parent.join(format!(".{name}.new-{}-{}", std::process::id(), nanos()));
    let old = parent.join(format!(".{name}.old-{}-{}", std::process::id(), nanos()));
    let written = (|| {
        for (rel, mode, bytes) in files {
            let p = tmp.join(rel);
            make_dir_all(p.parent().unwrap_or(&tmp), 0o755)?;
            // Secrets are 0600 from their creation, not after a chmod.
            let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(*mode).open(&p)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            fs::set_permissions(&p, fs::Permissions::from_mode(*mode))?;
        }
        make_dir_all(&tmp, 0o755)?;
        for c in carry {
            if fs::symlink_metadata(target.join(c)).is_ok() {
                fs::rename(target.join(c), tmp.join(c))?;
            }
        }
        sync_dir(&tmp)
    })();
    if let Err(e) = written {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    swap_into(&tmp, target, &old)
}

/// Put the directory `new` in place of `target` in one step: exchanged with the old one when
/// there is one (`renameat2` RENAME_EXCHANGE), so `target` is never missing, even for a run
/// killed in between; the old one, then at `new`, is removed. On a filesystem without the
/// exchange, the old one is renamed to `old` first (a window a killed run can leave it in).
pub fn swap_into(new: &Path, target: &Path, old: &Path) -> io::Result<()> {
    use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
    if fs::symlink_metadata(target).is_err() {
        return fs::rename(new, target);
    }
    match renameat2(AT_FDCWD, new, AT_FDCWD, target, RenameFlags::RENAME_EXCHANGE) {
        Ok(()) => {
            let _ = fs::remove_dir_all(new);
            return Ok(());
        }
        Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOSYS) => {}
        Err(e) => return Err(io::Error::from(e)),
    }
    fs::rename(target, old)?;
    fs::rename(new, target)?;
    let _ = fs::remove_dir_all(old);
    Ok(())
}

/// Write one file whole or not at all: a temp file beside it (created with `mode`), synced,
/// then renamed over `path`.
pub fn write_file_atomic(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}-{}", std::process::id(), nanos()));
    let result = (|| {
        let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp)?;
        f.write_all(contents)?;
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_replaced_directory_is_whole_keeps_what_it_carries_and_leaves_nothing_beside() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("mco");
        fs::create_dir_all(target.join("rendered")).unwrap();
        fs::write(target.join("rendered/master.yaml"), "m").unwrap();
        fs::write(target.join("stale.yaml"), "old").unwrap();
        let files = vec![
            ("render.sh".to_string(), 0o755, b"#!/bin/sh\n".to_vec()),
            ("manifests/pull-secret.yaml".to_string(), 0o600, b"s".to_vec()),
        ];
        replace_dir(&target, &files, &["rendered"]).unwrap();
        let mode = |p: &str| fs::metadata(target.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode("render.sh"), mode("manifests/pull-secret.yaml")), (0o755, 0o600));
        assert_eq!(fs::read_to_string(target.join("rendered/master.yaml")).unwrap(), "m");
        assert!(!target.join("stale.yaml").exists());
        let beside: Vec<_> = fs::read_dir(d.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(beside, ["mco"]);
        // A file that cannot be written (a path under a file) leaves the old directory as it was.
        let bad = ("render.sh/x".to_string(), 0o644, Vec::new());
        assert!(replace_dir(&target, &[files[0].clone(), bad], &[]).is_err());
        assert_eq!(mode("render.sh"), 0o755);
        let beside: Vec<_> = fs::read_dir(d.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(beside, ["mco"]);
    }

    #[test]
    fn a_swapped_directory_is_exchanged_in_one_step() {
        let d = tempfile::tempdir().unwrap();
        let (new, target, old) = (d.path().join("new"), d.path().join("render"), d.path().join("old"));
        fs::create_dir_all(&new).unwrap();
        fs::write(new.join("renders.json"), "2").unwrap();
        // Nothing in place yet: a rename.
        swap_into(&new, &target, &old).unwrap();
        assert_eq!(fs::read_to_string(target.join("renders.json")).unwrap(), "2");
        fs::create_dir_all(&new).unwrap();
        fs::write(new.join("renders.json"), "3").unwrap();
        swap_into(&new, &target, &old).unwrap();
        assert_eq!(fs::read_to_string(target.join("renders.json")).unwrap(), "3");
        // Exchanged, not renamed aside: the old one was never at `old`, and is gone.
        let beside: Vec<_> = fs::read_dir(d.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(beside, ["render"]);
    }
}
