//! Reading a file a user named, safely: opened without blocking (a FIFO in a config's place
//! would otherwise hang the open until someone writes to it), refused unless it is a regular
//! file, and never read past a bound. Shared by the agent's config and the CLI's inputs.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `path` opened for reading, if it is a regular file.
pub fn open(path: &Path) -> std::io::Result<std::fs::File> {
    // O_NONBLOCK does nothing to a regular file's reads; it only keeps the open from waiting.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, socket, device or directory): it is read from a regular file",
        ));
    }
    Ok(f)
}

/// The bytes of `path`, a regular file of at most `max` bytes.
pub fn read(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let f = open(path)?;
    let mut bytes = Vec::new();
    f.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {} KiB, the most hardshift reads from it", max >> 10),
        ));
    }
    Ok(bytes)
}

/// [`read`], as UTF-8 text.
pub fn read_to_string(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read(path, max)?).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8 text: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bounded_regular_files_are_read() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read(&fifo, 10).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(read(d.path(), 10).unwrap_err().to_string().contains("not a regular file"));
        let f = d.path().join("f");
        std::fs::write(&f, "0123456789").unwrap();
        assert_eq!(read(&f, 10).unwrap(), b"0123456789");
        assert!(read(&f, 9).unwrap_err().to_string().contains("larger than"));
        std::fs::write(&f, b"\xff").unwrap();
        assert!(read_to_string(&f, 9).unwrap_err().to_string().contains("not UTF-8"));
    }
}
