//! The boot lab's work directory (`--work`): it is emptied at each run, so it must be one the tool
//! made itself. The tool marks what it makes (`MARKER`) and takes only a new or empty directory, or
//! a marked one; anything else is refused, never emptied. No symlink is followed.

use anyhow::Context;
use std::fs;
use std::io;
use std::path::Path;

/// The file that says a directory is a boot lab's own (and may be emptied).
pub const MARKER: &str = ".hardshift-boot-lab";

/// Whether `work` can be the work directory: missing, an empty directory, or one the tool made.
/// Touches nothing.
pub fn check(work: &Path) -> anyhow::Result<()> {
    let shown = work.display();
    let meta = match fs::symlink_metadata(work) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(anyhow::anyhow!("--work {shown}: {e}")),
        Ok(m) => m,
    };
    if meta.file_type().is_symlink() {
        return Err(anyhow::anyhow!(
            "--work {shown} is a symlink: give the directory itself (the boot lab empties its work directory, and follows no link to do so)"
        ));
    }
    if !meta.is_dir() {
        return Err(anyhow::anyhow!("--work {shown} is not a directory: give a new or empty directory"));
    }
    let names = entries(work)?;
    if names.is_empty() || is_marked(work) {
        return Ok(());
    }
    let mut shown_names: Vec<&str> = names.iter().map(String::as_str).take(5).collect();
    if names.len() > shown_names.len() {
        shown_names.push("...");
    }
    Err(anyhow::anyhow!(
        "--work {shown} holds {} entr{} ({}) and is not a boot lab's work directory (no {MARKER} in it): \
         the boot lab empties its work directory at each run, so it takes only a new or empty one, or one it made; \
         give another --work (a new directory), or empty this one yourself if nothing in it is needed",
        names.len(),
        if names.len() == 1 { "y" } else { "ies" },
        shown_names.join(", ")
    ))
}

/// Make `work` ready for a run: created (with its marker), or, when the tool made it before,
/// emptied of what the last run left. Refuses what `check` refuses.
pub fn prepare(work: &Path) -> anyhow::Result<()> {
    check(work)?;
    let fail = |p: &Path, e: io::Error| anyhow::Error::new(e).context(p.display().to_string());
    match fs::symlink_metadata(work) {
        Ok(_) => {
            for name in entries(work)? {
                if name != MARKER {
                    let p = work.join(&name);
                    remove(&p).map_err(|e| fail(&p, e))?;
                }
            }
        }
        Err(_) => hardshift_bundle::fsio::make_dir_all(work, 0o755).map_err(|e| fail(work, e))?,
    }
    let marker = work.join(MARKER);
    let text = marker_text(work).map_err(|e| fail(work, e))?;
    hardshift_bundle::fsio::write_file_atomic(&marker, text.as_bytes(), 0o644).map_err(|e| fail(&marker, e))?;
    Ok(())
}

/// What the marker says: that the tool made it, for this very directory (its device and inode:
/// a marker copied from another work directory is no marker here).
fn marker_text(work: &Path) -> io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(work)?;
    Ok(format!(
        "Made by hardshift-boot-lab: its next run empties this directory.\ndirectory {}:{}\n",
        m.dev(),
        m.ino()
    ))
}

/// Whether the tool made `work`: the directory and its marker belong to whoever runs it (root: a
/// marker another user planted is not one), the marker is a plain file no one else may write, and
/// it names this directory.
fn is_marked(work: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let (Ok(dir), Ok(marker)) = (fs::symlink_metadata(work), fs::symlink_metadata(work.join(MARKER))) else {
        return false;
    };
    let ours = |m: &fs::Metadata| m.uid() == me && m.mode() & 0o022 == 0;
    marker.is_file()
        && ours(&marker)
        && ours(&dir)
        && marker.len() < 4096
        && fs::read_to_string(work.join(MARKER)).ok() == marker_text(work).ok()
}

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> anyhow::Result<Vec<String>> {
    let rd = fs::read_dir(dir).with_context(|| format!("--work {}", dir.display()))?;
    let mut names: Vec<String> = rd.flatten().map(|e| e.file_name().to_string_lossy().to_string()).collect();
    names.sort();
    Ok(names)
}

/// Remove `p`: a link as a link (never what it points at); a directory with what it holds
/// (`remove_dir_all` follows no symlink inside it either).
fn remove(p: &Path) -> io::Result<()> {
    if fs::symlink_metadata(p)?.is_dir() {
        fs::remove_dir_all(p)
    } else {
        fs::remove_file(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(label: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("boot-lab-workdir-{label}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        p
    }

    #[test]
    fn a_marked_directory_is_emptied_and_no_link_in_it_is_followed() {
        let s = scratch("links");
        let outside = s.join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("keep"), b"x").unwrap();
        let work = s.join("work");
        prepare(&work).unwrap();
        assert!(work.join(MARKER).is_file());
        // What a run leaves, and links to what is not the lab's.
        fs::create_dir_all(work.join("www/ignition")).unwrap();
        fs::write(work.join("dnsmasq.log"), b"log").unwrap();
        std::os::unix::fs::symlink(&outside, work.join("dir-link")).unwrap();
        std::os::unix::fs::symlink(&outside, work.join("www/ignition/link")).unwrap();
        prepare(&work).unwrap();
        let left: Vec<String> = fs::read_dir(&work)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert_eq!(left, vec![MARKER.to_string()]);
        assert_eq!(fs::read(outside.join("keep")).unwrap(), b"x");
        // A marker that is a link is no marker.
        fs::remove_file(work.join(MARKER)).unwrap();
        fs::write(work.join("x"), b"").unwrap();
        std::os::unix::fs::symlink(outside.join("keep"), work.join(MARKER)).unwrap();
        assert!(check(&work).is_err());
        fs::remove_dir_all(&s).unwrap();
    }

    /// A marker anyone could plant (the old text, another directory's, or one others may write) is
    /// no marker: the directory is refused, never emptied.
    #[test]
    fn a_planted_or_copied_marker_is_no_marker() {
        use std::os::unix::fs::PermissionsExt;
        let s = scratch("planted");
        let work = s.join("work");
        fs::create_dir_all(&work).unwrap();
        fs::write(work.join("precious"), b"x").unwrap();
        fs::write(
            work.join(MARKER),
            b"Made by hardshift-boot-lab: its next run empties this directory.\n",
        )
        .unwrap();
        assert!(check(&work).is_err(), "the bare text anyone can write");
        let other = s.join("other");
        prepare(&other).unwrap();
        fs::copy(other.join(MARKER), work.join(MARKER)).unwrap();
        assert!(check(&work).is_err(), "another directory's marker");
        fs::write(work.join(MARKER), marker_text(&work).unwrap()).unwrap();
        assert!(check(&work).is_ok(), "this directory's, written by its owner");
        fs::set_permissions(work.join(MARKER), fs::Permissions::from_mode(0o666)).unwrap();
        assert!(check(&work).is_err(), "a marker others may write");
        assert!(work.join("precious").exists());
        fs::remove_dir_all(&s).unwrap();
    }
}
