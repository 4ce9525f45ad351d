//! SHA256SUMS: the generation's copy against the files, and DIR's, which `sha256sum -c` reads.

use super::{check, text, Check, Status};
use crate::bundle::{self, Bundle};
use std::path::Path;

pub(super) fn sums(b: &Bundle) -> Check {
    let Some(listed) = text(b, bundle::SUMS) else {
        return check(bundle::SUMS, Status::Fail, "missing");
    };
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for line in listed.lines() {
        let Some((hash, path)) = sum_line(line) else {
            problems.push(format!("malformed line {line:?}"));
            continue;
        };
        seen.insert(path.to_string());
        match b.files.get(path) {
            None => problems.push(format!("{path} is missing")),
            Some(f) if f.contents.sha256_hex() != hash => problems.push(format!("{path} was modified")),
            _ => {}
        }
    }
    for p in b.files.keys().filter(|p| p.as_str() != bundle::SUMS && !seen.contains(*p)) {
        problems.push(format!("{p} is not listed"));
    }
    match problems.is_empty() {
        true => check(bundle::SUMS, Status::Ok, format!("{} files match", seen.len())),
        false => check(bundle::SUMS, Status::Fail, problems.join("; ")),
    }
}

/// A line as `sha256sum -c` reads it: 64 hex digits, two spaces (or a space and `*`), a path.
fn sum_line(line: &str) -> Option<(&str, &str)> {
    let hash = line.get(..64)?;
    let path = line.get(64..)?.strip_prefix("  ").or_else(|| line.get(64..)?.strip_prefix(" *"))?;
    (hash.bytes().all(|b| b.is_ascii_hexdigit()) && !path.is_empty()).then_some((hash, path))
}

/// Larger than any bundle's SHA256SUMS (a line a file): not read.
const MAX_SUMS: u64 = 64 << 20;

/// DIR/SHA256SUMS, the file a user runs `sha256sum -c` on (not the generation's copy `sums`
/// reads): a regular file (its type checked before it is opened, and opened without blocking, so
/// a FIFO never holds verify), every line `<64 hex>  <path>`, and the bundle's own.
pub fn sums_file(dir: &Path, b: &Bundle) -> Check {
    let path = dir.join(bundle::SUMS);
    let name = "sha256sum -c";
    let fail = |d: String| check(name, Status::Fail, format!("{}: {d}", path.display()));
    let again = "remove it and run `hardshift create` again, which links the bundle's own there";
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) => return fail(format!("{e}: {again}")),
    };
    if !meta.is_file() {
        return fail(format!(
            "{}, not a file: sha256sum -c cannot check the bundle by it; {again}",
            kind(&meta)
        ));
    }
    let bytes = match read_regular(&path, MAX_SUMS) {
        Ok(b) => b,
        Err(e) => return fail(format!("{e}; {again}")),
    };
    let text = String::from_utf8_lossy(&bytes);
    if let Some(n) = text.lines().position(|l| sum_line(l).is_none()) {
        return fail(format!(
            "line {} is not `<64 hex digits>  <path>` (what sha256sum -c reads); {again}",
            n + 1
        ));
    }
    match b.files.get(bundle::SUMS) {
        Some(own) if own.contents.bytes()[..] == bytes[..] => check(
            name,
            Status::Ok,
            format!("{}: the bundle's own, {} files", path.display(), text.lines().count()),
        ),
        _ => fail(format!(
            "differs from the bundle's own ({}): sha256sum -c would check other sums than the bundle's; {again}",
            crate::fsio::current(dir)
                .map(|c| c.join(bundle::SUMS).display().to_string())
                .unwrap_or_default()
        )),
    }
}

/// What a file that is not a regular one is.
fn kind(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    match () {
        _ if t.is_dir() => "a directory",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_socket() => "a socket",
        _ if t.is_char_device() => "a character device",
        _ if t.is_block_device() => "a block device",
        _ => "not a regular file",
    }
}

/// A regular file's bytes, opened without blocking (a FIFO put there since it was looked at is
/// refused, not waited on), at most `max`.
fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, format!("{}, not a file", kind(&m))));
    }
    if m.len() > max {
        return Err(Error::new(
            ErrorKind::FileTooLarge,
            format!("{} bytes, more than a bundle's sums ({max})", m.len()),
        ));
    }
    let mut bytes = Vec::new();
    f.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}
