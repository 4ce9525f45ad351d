//! Apply image layers, in order, to a directory: gzip, zstd or plain tar (told by their first
//! bytes), whiteouts (`.wh.NAME` deletes NAME from earlier layers; `.wh..wh..opq` empties its
//! directory), only the paths `keep` accepts, never outside the directory. Streamed: a layer is
//! read from its file, never held in memory.

use crate::dirs::private_dir;
use std::io::{BufRead, BufReader, Read};
use std::path::{Component, Path, PathBuf};

/// The most one file may hold once decompressed (a release's largest manifest is a few MB).
pub const MAX_FILE: u64 = 64 << 20;
/// The most a layer may write in all, and read in all once decompressed: a gzip bomb (400 MB
/// from 408 KB) stops here, with its name, instead of filling the disk.
pub const MAX_KEPT: u64 = 1 << 30;
pub const MAX_READ: u64 = 8 << 30;
/// The most files and directories a layer may write: bytes alone let 200,000 empty files
/// through (a release's manifests are about a thousand).
pub const MAX_ENTRIES: usize = 20_000;

/// Counts what is read through it and refuses past `left` bytes.
struct Bounded<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self
            .left
            .checked_sub(n as u64)
            .ok_or_else(|| std::io::Error::other(format!("over {MAX_READ} bytes once decompressed: refused (a decompression bomb?)")))?;
        Ok(n)
    }
}

/// Why a layer was not applied: its file did not read or write (with the OS's cause), or its
/// content was refused (a bound crossed, a whiteout naming no file).
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {why}", layer.display())]
    Refused { layer: PathBuf, why: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LayerError + '_ {
    move |source| LayerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn refused(layer: &Path, why: String) -> LayerError {
    LayerError::Refused {
        layer: layer.to_path_buf(),
        why,
    }
}

/// A whiteout's target: one plain name (never empty, `.` or `..`, never a path).
fn whiteout_target(gone: &str) -> Option<&str> {
    (!gone.is_empty() && gone != "." && gone != ".." && !gone.contains('/')).then_some(gone)
}

fn decompressed(layer: &Path, file: std::fs::File) -> Result<Box<dyn Read>, LayerError> {
    let mut r = BufReader::with_capacity(256 * 1024, file);
    let head = r.fill_buf().map_err(io(layer))?.to_vec();
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        // Multi-member: parallel gzip writers (umoci, pigz) emit one member per block.
        Box::new(flate2::read::MultiGzDecoder::new(r))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(ruzstd::decoding::StreamingDecoder::new(r).map_err(|e| refused(layer, format!("zstd: {e}")))?)
    } else {
        Box::new(r)
    })
}

/// The path inside the image, relative and without `.` or `..`; None if it would leave the root.
fn inside(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// Remove a file or a whole directory; what is already gone is fine.
fn remove_any(p: &Path) {
    let _ = if p.is_dir() {
        std::fs::remove_dir_all(p)
    } else {
        std::fs::remove_file(p)
    };
}

/// Apply a whiteout entry (`rel` named `.wh.<gone>`): an opaque one empties its directory, any
/// other removes the one name it points at.
fn apply_whiteout(layer: &Path, dest: &Path, rel: &Path, rel_s: &str, gone: &str, keep: &dyn Fn(&str) -> bool) -> Result<(), LayerError> {
    let dir = dest.join(rel.parent().unwrap_or(Path::new("")));
    if !keep(rel_s) && !keep(&format!("{}/", dir.strip_prefix(dest).unwrap_or(&dir).display())) {
        return Ok(());
    }
    if gone == ".wh..opq" {
        // Opaque: what earlier layers put in this directory is gone.
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for c in rd.flatten() {
                remove_any(&c.path());
            }
        }
        return Ok(());
    }
    let Some(gone) = whiteout_target(gone) else {
        return Err(refused(layer, format!("whiteout {rel_s:?} names no file")));
    };
    remove_any(&dir.join(gone));
    Ok(())
}

/// What one layer has written so far, checked against the bounds as it grows.
struct Tally<'a> {
    layer: &'a Path,
    written: usize,
    kept_bytes: u64,
    made: usize,
}

impl Tally<'_> {
    /// Count one file or directory to create; refuse past `MAX_ENTRIES`.
    fn entry(&mut self) -> Result<(), LayerError> {
        self.made += 1;
        if self.made > MAX_ENTRIES {
            return Err(refused(
                self.layer,
                format!("more than {MAX_ENTRIES} files and directories to write: refused (a release's manifests are about a thousand; an inode bomb?)"),
            ));
        }
        Ok(())
    }

    /// Write one regular file's bytes to `out`, within the per-file and per-layer bounds.
    fn file(&mut self, e: &mut impl Read, want: u64, out: &Path, rel_s: &str) -> Result<(), LayerError> {
        if let Some(p) = out.parent() {
            private_dir(p).map_err(io(p))?;
        }
        // A later layer's file replaces an earlier one, even a directory of that name.
        if out.is_dir() {
            let _ = std::fs::remove_dir_all(out);
        }
        self.kept_bytes = self.kept_bytes.saturating_add(want);
        let kept_bytes = self.kept_bytes;
        if want > MAX_FILE || kept_bytes > MAX_KEPT {
            return Err(refused(
                self.layer,
                format!("{rel_s} is {want} bytes once decompressed ({kept_bytes} in all): over the {MAX_FILE}-byte file or {MAX_KEPT}-byte layer bound, refused (a decompression bomb?)"),
            ));
        }
        let mut w = std::fs::File::create(out).map_err(io(out))?;
        let got = std::io::copy(e, &mut w).map_err(io(out))?;
        if got != want {
            return Err(refused(self.layer, format!("{rel_s} is cut short ({got} of {want} bytes)")));
        }
        self.written += 1;
        Ok(())
    }
}

/// Apply one layer file to `dest`. Returns the number of files written.
pub fn apply_layer(layer: &Path, dest: &Path, keep: &dyn Fn(&str) -> bool) -> Result<usize, LayerError> {
    let f = std::fs::File::open(layer).map_err(io(layer))?;
    let inner = decompressed(layer, f)?;
    let mut ar = tar::Archive::new(Bounded { inner, left: MAX_READ });
    let mut tally = Tally {
        layer,
        written: 0,
        kept_bytes: 0,
        made: 0,
    };
    for entry in ar.entries().map_err(io(layer))? {
        let mut e = match entry {
            Ok(e) => e,
            // Some writers (umoci among them) end a layer after its last entry, without the
            // padding and the two zero blocks; GNU tar reads it too. The bytes are the
            // producer's (their digest was checked), and a file cut short fails in its copy.
            Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof || err.to_string().contains("unexpected EOF") => break,
            Err(err) => return Err(io(layer)(err)),
        };
        let raw = e.path().map_err(io(layer))?.to_path_buf();
        let Some(rel) = inside(&raw) else { continue };
        let rel_s = rel.to_string_lossy().to_string();
        let name = rel.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        if let Some(gone) = name.strip_prefix(".wh.") {
            apply_whiteout(layer, dest, &rel, &rel_s, gone, keep)?;
            continue;
        }
        if !keep(&rel_s) {
            continue;
        }
        let out = dest.join(&rel);
        match e.header().entry_type() {
            tar::EntryType::Directory => {
                tally.entry()?;
                private_dir(&out).map_err(io(&out))?
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                tally.entry()?;
                let want = e.size();
                tally.file(&mut e, want, &out, &rel_s)?;
            }
            // Links and devices have no place among release manifests.
            _ => {}
        }
    }
    Ok(tally.written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(dir: &Path, name: &str, files: &[(&str, &str)], compress: &str) -> PathBuf {
        let mut b = tar::Builder::new(Vec::new());
        for (p, body) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(body.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            // The tar crate refuses to write `..`; a hostile layer has it anyway.
            let name = &mut h.as_old_mut().name;
            name[..p.len()].copy_from_slice(p.as_bytes());
            h.set_cksum();
            b.append(&h, body.as_bytes()).unwrap();
        }
        let raw = b.into_inner().unwrap();
        let bytes = match compress {
            "zstd" => ruzstd::encoding::compress_to_vec(&raw[..], ruzstd::encoding::CompressionLevel::Fastest),
            "gzip" => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                std::io::Write::write_all(&mut e, &raw).unwrap();
                e.finish().unwrap()
            }
            _ => raw,
        };
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn a_layer_without_its_end_blocks_is_read_whole() {
        let t = tempfile::tempdir().unwrap();
        let full = layer(
            t.path(),
            "l",
            &[("release-manifests/a.yaml", "aaa"), ("release-manifests/b.yaml", "bbbb")],
            "tar",
        );
        let bytes = std::fs::read(&full).unwrap();
        // Cut the two zero blocks and the last entry's padding, as umoci writes layers.
        let cut = 512 * 3 + 4;
        std::fs::write(&full, &bytes[..cut]).unwrap();
        let dest = t.path().join("root");
        assert_eq!(apply_layer(&full, &dest, &|_| true).unwrap(), 2);
        assert_eq!(std::fs::read_to_string(dest.join("release-manifests/b.yaml")).unwrap(), "bbbb");
        // A file cut short is an error, not a short file.
        std::fs::write(&full, &bytes[..512 * 3 + 2]).unwrap();
        assert!(apply_layer(&full, &t.path().join("root2"), &|_| true).is_err());
    }

    #[test]
    fn layers_whiteouts_and_the_root_are_honoured() {
        let t = tempfile::tempdir().unwrap();
        let dest = t.path().join("root");
        std::fs::create_dir_all(&dest).unwrap();
        let keep = |p: &str| p.starts_with("release-manifests/");
        let l1 = layer(
            t.path(),
            "l1",
            &[
                ("release-manifests/a.yaml", "a1"),
                ("release-manifests/stale.yaml", "old"),
                ("etc/passwd", "root"),
                ("../escape", "x"),
            ],
            "gzip",
        );
        let l2 = layer(
            t.path(),
            "l2",
            &[("release-manifests/a.yaml", "a2"), ("release-manifests/.wh.stale.yaml", "")],
            "tar",
        );
        assert_eq!(apply_layer(&l1, &dest, &keep).unwrap(), 2);
        assert_eq!(apply_layer(&l2, &dest, &keep).unwrap(), 1);
        assert_eq!(std::fs::read_to_string(dest.join("release-manifests/a.yaml")).unwrap(), "a2");
        assert!(!dest.join("release-manifests/stale.yaml").exists(), "whited out");
        assert!(!dest.join("etc").exists() && !t.path().join("escape").exists());
        let l3 = layer(
            t.path(),
            "l3",
            &[("release-manifests/.wh..wh..opq", ""), ("release-manifests/b.yaml", "b")],
            "gzip",
        );
        apply_layer(&l3, &dest, &keep).unwrap();
        let names: Vec<String> = std::fs::read_dir(dest.join("release-manifests"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        assert_eq!(names, ["b.yaml"], "an opaque directory drops what came before");
    }

    #[test]
    fn a_decompression_bomb_and_a_whiteout_of_dot_dot_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let big = "\0".repeat((MAX_FILE + 1) as usize);
        let bomb = layer(t.path(), "bomb", &[("release-manifests/zeros", &big)], "gzip");
        assert!(std::fs::metadata(&bomb).unwrap().len() < 1 << 20, "a small layer");
        let dest = t.path().join("out");
        std::fs::create_dir_all(&dest).unwrap();
        let keep = |p: &str| p.starts_with("release-manifests");
        let e = apply_layer(&bomb, &dest, &keep).unwrap_err();
        assert!(e.to_string().contains("decompression bomb"), "{e}");
        assert!(!dest.join("release-manifests/zeros").exists());
        // `.wh...` would name the parent of its directory: the extraction root itself.
        std::fs::create_dir_all(dest.join("release-manifests")).unwrap();
        std::fs::write(dest.join("release-manifests/a.yaml"), "a").unwrap();
        let wh = layer(t.path(), "wh", &[("release-manifests/.wh...", "")], "");
        let e = apply_layer(&wh, &dest, &keep).unwrap_err();
        assert!(
            matches!(&e, LayerError::Refused { why, .. } if why.contains("names no file")),
            "{e}"
        );
        assert!(dest.join("release-manifests/a.yaml").exists(), "nothing removed");
    }

    /// 200,000 empty files are a few MB of tar: the bytes bound never sees them.
    #[test]
    fn a_layer_of_too_many_files_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let names: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("release-manifests/f{i}")).collect();
        let files: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "")).collect();
        let l = layer(t.path(), "many", &files, "gzip");
        let dest = t.path().join("out");
        std::fs::create_dir_all(&dest).unwrap();
        let e = apply_layer(&l, &dest, &|p: &str| p.starts_with("release-manifests")).unwrap_err();
        assert!(
            matches!(&e, LayerError::Refused { why, .. } if why.contains("more than 20000 files")),
            "{e}"
        );
        // Just under the bound is fine.
        let l = layer(t.path(), "enough", &files[1..], "gzip");
        let dest = t.path().join("out2");
        std::fs::create_dir_all(&dest).unwrap();
        assert_eq!(
            apply_layer(&l, &dest, &|p: &str| p.starts_with("release-manifests")).unwrap(),
            MAX_ENTRIES
        );
    }
}
