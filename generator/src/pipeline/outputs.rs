//! A render's outputs, read as data: a container image made them (a mirror can hold a tampered
//! one), so no entry of theirs is a path to follow. Every directory and file is opened beneath
//! its root one name at a time with O_NOFOLLOW (after an lstat, so a device is never opened); a
//! symbolic link, a second name for a file (a hard link), a FIFO, a socket or a device is
//! refused, named by its path under the root.

use nix::dir::Dir;
use nix::fcntl::{openat, readlinkat, AtFlags, OFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// More entries than a render makes (the release's make a few thousand): refused, not read.
pub const MAX_ENTRIES: usize = 200_000;
/// Deeper than a render nests.
pub const MAX_DEPTH: usize = 32;

/// Why a tree was not read: an entry it must not hold (`Refused`), or an I/O error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeError {
    /// `path` (under the root) is `what`: "a symbolic link (to /etc/shadow)", "a FIFO", ...
    Refused {
        path: String,
        what: String,
    },
    Io {
        path: String,
        error: String,
    },
}

impl TreeError {
    /// The path under the root it names ("" for the root itself).
    pub fn path(&self) -> &str {
        match self {
            TreeError::Refused { path, .. } | TreeError::Io { path, .. } => path,
        }
    }

    /// The same error, its path under `prefix` ("assets/tls/x" for "tls/x").
    pub fn under(self, prefix: &str) -> TreeError {
        let join = |p: String| match (prefix.is_empty(), p.is_empty()) {
            (true, _) => p,
            (false, true) => prefix.to_string(),
            (false, false) => format!("{prefix}/{p}"),
        };
        match self {
            TreeError::Refused { path, what } => TreeError::Refused { path: join(path), what },
            TreeError::Io { path, error } => TreeError::Io { path: join(path), error },
        }
    }

    /// What is wrong with the entry (without its path).
    pub fn detail(&self) -> String {
        match self {
            TreeError::Refused { what, .. } => {
                format!("{what}: a render's output is read as data, never followed (only regular files, with one name, and directories)")
            }
            TreeError::Io { error, .. } => error.clone(),
        }
    }

    /// The error, its entry named in full under `root`.
    pub fn at(&self, root: &Path) -> String {
        match self.path() {
            "" => format!("{}: {}", root.display(), self.detail()),
            p => format!("{}: {}", root.join(p).display(), self.detail()),
        }
    }
}

impl std::fmt::Display for TreeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path(), self.detail())
    }
}

/// Every regular file under `root` (which must itself be a directory, not a link to one), in
/// path order, handed to `visit` opened; anything else refused.
pub fn walk(root: &Path, visit: &mut dyn FnMut(&str, std::fs::File) -> std::io::Result<()>) -> Result<(), TreeError> {
    let io = |path: &str| {
        let path = path.to_string();
        move |e: nix::Error| TreeError::Io {
            path,
            error: std::io::Error::from(e).to_string(),
        }
    };
    let st = nix::sys::stat::lstat(root).map_err(io(""))?;
    if kind(&st) != SFlag::S_IFDIR {
        let what = match kind(&st) {
            SFlag::S_IFLNK => format!(
                "a symbolic link (to {})",
                std::fs::read_link(root).map(|t| t.display().to_string()).unwrap_or_default()
            ),
            SFlag::S_IFREG => "a file, not a directory".into(),
            _ => describe(&st),
        };
        return Err(TreeError::Refused { path: String::new(), what });
    }
    let fd = nix::fcntl::open(root, dir_flags(), Mode::empty()).map_err(io(""))?;
    let mut count = 0;
    walk_dir(fd, &st, "", 0, &mut count, visit)
}

/// Every file under `root`, path → bytes.
pub fn read_all(root: &Path) -> Result<BTreeMap<String, Vec<u8>>, TreeError> {
    let mut out = BTreeMap::new();
    walk(root, &mut |path, mut f| {
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        out.insert(path.to_string(), bytes);
        Ok(())
    })?;
    Ok(out)
}

/// The SHA-256 of every file under `root`, path → hex.
pub fn hashes(root: &Path) -> Result<BTreeMap<String, String>, TreeError> {
    let mut out = BTreeMap::new();
    walk(root, &mut |path, mut f| {
        let mut h = Sha256::new();
        std::io::copy(&mut f, &mut h)?;
        out.insert(path.to_string(), format!("{:x}", h.finalize()));
        Ok(())
    })?;
    Ok(out)
}

fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

/// What an entry that is neither a directory nor a regular file is.
fn describe(st: &FileStat) -> String {
    match kind(st) {
        SFlag::S_IFIFO => "a FIFO".into(),
        SFlag::S_IFSOCK => "a socket".into(),
        SFlag::S_IFCHR => "a character device".into(),
        SFlag::S_IFBLK => "a block device".into(),
        SFlag::S_IFLNK => "a symbolic link".into(),
        SFlag::S_IFDIR => "a directory".into(),
        _ => format!("not a regular file (mode {:o})", st.st_mode),
    }
}

/// The entries of the directory open at `fd` (`st` its lstat, `rel` its path under the root).
fn walk_dir(
    fd: OwnedFd,
    st: &FileStat,
    rel: &str,
    depth: usize,
    count: &mut usize,
    visit: &mut dyn FnMut(&str, std::fs::File) -> std::io::Result<()>,
) -> Result<(), TreeError> {
    let io = |path: &str| {
        let path = path.to_string();
        move |e: nix::Error| TreeError::Io {
            path,
            error: std::io::Error::from(e).to_string(),
        }
    };
    // The directory opened is the one looked at, not one put in its place since.
    let opened = fstat(fd.as_fd()).map_err(io(rel))?;
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino) || kind(&opened) != SFlag::S_IFDIR {
        return Err(TreeError::Refused {
            path: rel.to_string(),
            what: "replaced while it was read".into(),
        });
    }
    if depth > MAX_DEPTH {
        return Err(TreeError::Refused {
            path: rel.to_string(),
            what: format!("nested deeper than {MAX_DEPTH} directories"),
        });
    }
    let mut d = Dir::from_fd(fd).map_err(io(rel))?;
    let mut names = Vec::new();
    for e in d.iter() {
        let e = e.map_err(io(rel))?;
        let name = e.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    names.sort();
    for name in names {
        let path = match rel {
            "" => name.to_string_lossy().to_string(),
            _ => format!("{rel}/{}", name.to_string_lossy()),
        };
        *count += 1;
        if *count > MAX_ENTRIES {
            return Err(TreeError::Refused {
                path: rel.to_string(),
                what: format!("more than {MAX_ENTRIES} entries"),
            });
        }
        let st = fstatat(d.as_fd(), name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW).map_err(io(&path))?;
        match kind(&st) {
            SFlag::S_IFDIR => {
                let sub = openat(d.as_fd(), name.as_c_str(), dir_flags(), Mode::empty()).map_err(io(&path))?;
                walk_dir(sub, &st, &path, depth + 1, count, visit)?;
            }
            SFlag::S_IFREG => {
                let f = open_file(&d, &name, &st, &path)?;
                visit(&path, f).map_err(|e| TreeError::Io {
                    path: path.clone(),
                    error: e.to_string(),
                })?;
            }
            SFlag::S_IFLNK => {
                let to = readlinkat(d.as_fd(), name.as_c_str())
                    .map(|t| t.to_string_lossy().to_string())
                    .unwrap_or_default();
                return Err(TreeError::Refused {
                    path,
                    what: format!("a symbolic link (to {to})"),
                });
            }
            _ => return Err(TreeError::Refused { path, what: describe(&st) }),
        }
    }
    Ok(())
}

/// A regular file with one name, opened without following a link or blocking; the same file
/// as `st` said.
fn open_file(d: &Dir, name: &std::ffi::CStr, st: &FileStat, path: &str) -> Result<std::fs::File, TreeError> {
    let hard = |n: nix::libc::nlink_t| TreeError::Refused {
        path: path.to_string(),
        what: format!("a hard link ({n} names for one file)"),
    };
    if st.st_nlink > 1 {
        return Err(hard(st.st_nlink));
    }
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    let fd = openat(d.as_fd(), name, flags, Mode::empty()).map_err(|e| TreeError::Io {
        path: path.to_string(),
        error: std::io::Error::from(e).to_string(),
    })?;
    let opened = fstat(fd.as_fd()).map_err(|e| TreeError::Io {
        path: path.to_string(),
        error: std::io::Error::from(e).to_string(),
    })?;
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino) || kind(&opened) != SFlag::S_IFREG {
        return Err(TreeError::Refused {
            path: path.to_string(),
            what: "replaced while it was read".into(),
        });
    }
    if opened.st_nlink > 1 {
        return Err(hard(opened.st_nlink));
    }
    Ok(std::fs::File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("a/b")).unwrap();
        std::fs::write(t.path().join("a/b/c.yaml"), "c").unwrap();
        std::fs::write(t.path().join("top"), "t").unwrap();
        t
    }

    #[test]
    fn files_and_directories_are_read_in_path_order() {
        let t = tree();
        let all = read_all(t.path()).unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["a/b/c.yaml", "top"]);
        assert_eq!(all["a/b/c.yaml"], b"c");
        let h = hashes(t.path()).unwrap();
        assert_eq!(h["top"], crate::bundle::sha256_hex(b"t"));
    }

    #[test]
    fn links_fifos_and_second_names_are_refused_by_name() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "HOST").unwrap();
        type Make<'a> = Box<dyn Fn(&Path) + 'a>;
        let cases: Vec<(&str, Make, &str)> = vec![
            (
                "a/b/link",
                Box::new(|r: &Path| symlink(outside.path().join("secret"), r.join("a/b/link")).unwrap()),
                "a symbolic link (to ",
            ),
            (
                "a/dir",
                Box::new(|r: &Path| symlink(outside.path(), r.join("a/dir")).unwrap()),
                "a symbolic link",
            ),
            (
                "a/b/c.yaml",
                Box::new(|r: &Path| std::fs::hard_link(r.join("a/b/c.yaml"), r.join("a/z")).unwrap()),
                "a hard link (2 names",
            ),
            (
                "a/fifo",
                Box::new(|r: &Path| nix::unistd::mkfifo(&r.join("a/fifo"), Mode::from_bits_truncate(0o600)).unwrap()),
                "a FIFO",
            ),
        ];
        for (path, make, what) in cases {
            let t = tree();
            make(t.path());
            let e = read_all(t.path()).unwrap_err();
            assert_eq!(e.path(), path, "{e}");
            assert!(e.to_string().contains(what), "{e}");
            assert!(matches!(e, TreeError::Refused { .. }), "{e}");
        }
        // The root itself a link to a directory.
        let t = tree();
        let link = t.path().join("root-link");
        symlink(t.path().join("a"), &link).unwrap();
        let e = read_all(&link).unwrap_err();
        assert!(e.to_string().contains("a symbolic link"), "{e}");
        assert_eq!(e.clone().under("render").path(), "render");
        let e = read_all(&t.path().join("top")).unwrap_err();
        assert!(e.to_string().contains("a file, not a directory"), "{e}");
    }
}
