//! The agent's own files (its boot history, its sequence, a single node's master config): read
//! only when they are regular files, never through a link and never waiting on a FIFO, within a
//! bound; written whole through a temporary file of this process's own, made new (a planted
//! file or link at its name is removed, never written through) with the mode asked, then renamed.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

fn invalid(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
}

/// A regular file's bytes, at most `limit`; a link, FIFO, device or directory is an error at
/// once (the size judged before a byte is read).
pub fn read(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(invalid("not a regular file".into()));
    }
    if meta.len() > limit {
        return Err(invalid(format!("{} bytes, more than the {} allowed", meta.len(), size(limit))));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    f.take(limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(invalid(format!("more than the {} allowed (it grew while read)", size(limit))));
    }
    Ok(out)
}

/// `limit` for a message: MiB when it is at least one, bytes otherwise.
pub fn size(limit: u64) -> String {
    if limit >= 1 << 20 {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{limit} bytes")
    }
}

/// The temporary file `write` uses for `path`.
pub fn temporary(path: &Path) -> PathBuf {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    dir.join(format!(".{name}.tmp-{}", std::process::id()))
}

/// Write `bytes` to `path` whole (a kill -9 leaves the old file or the new one), the new file
/// with `mode`; with `sync`, on the disk before the rename (what must survive a power cut: not
/// the per-report sequence on tmpfs, which a reboot makes moot anyway).
pub fn write(path: &Path, bytes: &[u8], mode: u32, sync: bool) -> std::io::Result<()> {
    let tmp = temporary(path);
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .mode(mode)
        .open(&tmp)?;
    let done = f
        .write_all(bytes)
        .and_then(|_| if sync { f.sync_all() } else { Ok(()) })
        .and_then(|_| std::fs::rename(&tmp, path));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn fifos_links_and_planted_temporaries_are_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(read(&fifo, 10).unwrap_err().to_string().contains("not a regular file"));
        let target = t.path().join("target");
        std::fs::write(&target, b"secret").unwrap();
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(read(&link, 10).is_err(), "a link is not followed");
        assert!(read(&target, 3).unwrap_err().to_string().contains("more than the 3 bytes"));
        // A link planted at the temporary's name: removed, the target untouched.
        let out = t.path().join("out");
        std::os::unix::fs::symlink(&target, temporary(&out)).unwrap();
        write(&out, b"new", 0o600, true).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"secret");
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(!temporary(&out).exists());
    }
}
