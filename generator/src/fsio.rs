//! The bundle on disk. The only writer, and the reader of a previous run's state.
//!
//! Layout: every generation lives whole in `DIR/.hardshift/gen-<hash>/`; `DIR/.hardshift/current`
//! is a symlink to the live one, and `DIR/pki`, `DIR/auth`, ... are symlinks through `current`.
//! A run writes a new generation in a temp dir, renames it into place, then swaps `current` with
//! one rename: an interrupted run leaves the previous bundle untouched and complete.

use crate::bundle::{self, Bundle};
use crate::pki::{keys::KeyPem, CertSpec, Existing, Kind, Material};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{symlink, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub const STATE_DIR: &str = crate::layout::STATE_DIR;
const CURRENT: &str = "current";
/// The generation that was live before the last change: kept as a backup.
const PREVIOUS: &str = "previous";

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{0} exists and is not a hardshift link; move it away so the bundle can be linked there")]
    Occupied(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The live generation's directory, if a bundle was written before.
pub fn current(dir: &Path) -> Option<PathBuf> {
    let link = dir.join(STATE_DIR).join(CURRENT);
    let target = fs::read_link(&link).ok()?;
    let p = dir.join(STATE_DIR).join(target);
    p.is_dir().then_some(p)
}

/// Read a file of the live bundle (`pki/root-ca.crt`).
pub fn read_current(dir: &Path, rel: &str) -> Option<Vec<u8>> {
    fs::read(current(dir)?.join(rel)).ok()
}

/// What the previous run left for each planned entry.
pub fn read_existing(dir: &Path, specs: &[CertSpec]) -> Existing {
    let Some(cur) = current(dir) else { return Existing::new() };
    let read = |p: PathBuf| fs::read_to_string(p).ok();
    specs
        .iter()
        .filter_map(|s| {
            let stem = cur.join(s.id());
            let m = Material {
                key_pem: read(stem.with_extension("key")).map(KeyPem::new),
                cert_pem: match s.kind {
                    Kind::KeyOnly => None,
                    _ => read(stem.with_extension("crt")),
                },
            };
            (m.key_pem.is_some() || m.cert_pem.is_some()).then(|| (s.id(), m))
        })
        .collect()
}

/// What `write` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// The same bytes were already live; nothing was touched.
    Unchanged(PathBuf),
    New(PathBuf),
    /// The live generation should have held these bytes but had been damaged (files missing,
    /// edited, added or with another mode): a fresh copy is now live, and the damaged one was
    /// moved aside for a look.
    Repaired {
        gen: PathBuf,
        damage: Vec<String>,
        moved_to: PathBuf,
    },
}

/// How the files under `live` differ from `b`: empty when they hold exactly its bytes and modes.
/// Every byte is read (on all cores): SHA256SUMS sits beside the files and can be edited with them.
pub fn damage(live: &Path, b: &Bundle) -> Vec<String> {
    let mut unreadable = Vec::new();
    let mut found: Vec<Found> = Vec::new();
    let mut stack = vec![live.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else {
            unreadable.push(format!("{} cannot be read", d.display()));
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(live).unwrap_or(&p).to_string_lossy().to_string();
                found.push(Found {
                    rel,
                    regular: ft.is_file(),
                });
            }
        }
    }
    let look = |rel: &str| {
        let p = live.join(rel);
        let mode = fs::symlink_metadata(&p).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0);
        fs::read(&p).ok().map(|c| (mode, c))
    };
    let mut out = damage_in(b, &found, look);
    out.extend(unreadable);
    out.sort();
    out
}

/// A file found in a generation, by its path inside it.
pub struct Found {
    pub rel: String,
    /// A regular file (not a symlink, a fifo...).
    pub regular: bool,
}

/// How what was `found` differs from `b`, `look` giving a found file's mode and bytes (None:
/// unreadable). The repair decision, apart from the disk: every missing, extra, edited or
/// re-moded file is named.
pub fn damage_in(b: &Bundle, found: &[Found], look: impl Fn(&str) -> Option<(u32, Vec<u8>)> + Sync) -> Vec<String> {
    use rayon::prelude::*;
    let seen: std::collections::BTreeSet<&str> = found.iter().map(|f| f.rel.as_str()).collect();
    let mut out: Vec<String> = b
        .files
        .keys()
        .filter(|k| !seen.contains(k.as_str()))
        .map(|k| format!("{k} is missing"))
        .collect();
    out.extend(
        found
            .par_iter()
            .filter_map(|Found { rel, regular }| {
                let Some(f) = b.files.get(rel) else {
                    return Some(format!("{rel} is not part of the bundle"));
                };
                if !regular {
                    return Some(format!("{rel} is not a regular file"));
                }
                match look(rel) {
                    Some((_, c)) if !f.contents.eq_bytes(&c) => Some(format!("{rel} was edited")),
                    None => Some(format!("{rel} was edited")),
                    Some((mode, _)) if mode != f.mode => Some(format!("{rel} has mode {mode:o}, should be {:o}", f.mode)),
                    Some(_) => None,
                }
            })
            .collect::<Vec<_>>(),
    );
    out.sort();
    out
}

/// What writing the bundle named `gen_name` does, over the live generation named `live`.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// The same bundle is live, intact: nothing is touched.
    Unchanged,
    /// The same bundle is live but damaged (these problems): a fresh copy replaces it.
    Repair(Vec<String>),
    /// Another bundle (or none) is live: a new generation.
    New,
}

/// The write's decision. `damage` (the live generation against the bundle) is looked at only
/// when the same bundle is live; a repaired generation is named `gen-<hash>-r<time>`.
pub fn action(live: Option<&str>, gen_name: &str, damage: impl FnOnce() -> Vec<String>) -> Action {
    let same = live.is_some_and(|n| n == gen_name || n.starts_with(&format!("{gen_name}-r")));
    if !same {
        return Action::New;
    }
    match damage() {
        d if d.is_empty() => Action::Unchanged,
        d => Action::Repair(d),
    }
}

/// Write `b` as the new live bundle of `dir`, atomically.
pub fn write(dir: &Path, b: &Bundle) -> Result<Written, WriteError> {
    write_staged(dir, b, None)
}

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
    fn finish(&mut self) -> Result<(PathBuf, std::collections::BTreeMap<String, bundle::File>), WriteError> {
        let tmp = self.tmp.take().expect("a staged directory");
        for s in std::mem::take(&mut self.syncs) {
            s.join()
                .unwrap_or_else(|_| Err(io::Error::other("syncfs thread panicked")))
                .map_err(io_err(&tmp))?;
        }
        Ok((tmp, std::mem::take(&mut self.files)))
    }

    /// The bundle is written: put the kept files in place.
    fn settle(&mut self) -> Result<(), WriteError> {
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

/// `write`, completing what `staged` holds (if the bundle is written anew: else it is removed).
pub fn write_staged(dir: &Path, b: &Bundle, mut staged: Option<Staged>) -> Result<Written, WriteError> {
    let state = dir.join(STATE_DIR);
    let sums = b
        .files
        .get(bundle::SUMS)
        .map(|f| f.contents.to_vec())
        .unwrap_or_else(|| bundle::sums(b).into_bytes());
    let gen_name = format!("gen-{}", &bundle::sha256_hex(&sums)[..16]);
    let gen = state.join(&gen_name);

    // Refuse before writing anything if a top-level name is taken by something of the user's.
    let tops = b.top_level();
    for t in &tops {
        let p = dir.join(t);
        if let Ok(meta) = fs::symlink_metadata(&p) {
            let ours = meta.file_type().is_symlink() && fs::read_link(&p).map(|l| l == link_target(t)).unwrap_or(false);
            if !ours {
                return Err(WriteError::Occupied(p));
            }
        }
    }

    private_dir_all(&state).map_err(io_err(&state))?;
    let live = current(dir);
    let was_live = live.as_ref().and_then(|c| c.file_name()).map(|n| n.to_string_lossy().to_string());
    let unchanged = match action(was_live.as_deref(), &gen_name, || {
        damage(live.as_deref().unwrap_or(Path::new("")), b)
    }) {
        Action::Repair(damage) => {
            let live = live.clone().unwrap_or_default();
            let w = repair(dir, &state, b, &gen_name, &live, damage)?;
            staged.as_mut().map_or(Ok(()), Staged::settle)?;
            return Ok(w);
        }
        Action::Unchanged => true,
        Action::New => false,
    };
    let gen = if unchanged { live.unwrap_or(gen) } else { gen };
    if !unchanged {
        // A generation of this name from before (the inputs went back) is reused only if intact.
        if gen.exists() && !damage(&gen, b).is_empty() {
            fs::remove_dir_all(&gen).map_err(io_err(&gen))?;
        }
        if !gen.exists() {
            let (tmp, written) = match staged.as_mut() {
                Some(st) => st.finish()?,
                None => (state.join(format!("tmp-{}-{}", std::process::id(), nanos())), Default::default()),
            };
            // A failed write (a full disk) leaves no half generation behind.
            let done = write_tree(&tmp, b, current(dir).as_deref(), &written).and_then(|_| fs::rename(&tmp, &gen).map_err(io_err(&gen)));
            if let Err(e) = done {
                let _ = fs::remove_dir_all(&tmp);
                return Err(e);
            }
        }
        if let Ok(old) = fs::read_link(state.join(CURRENT)) {
            swap_link(&state, PREVIOUS, &old)?;
        }
        swap_link(&state, CURRENT, Path::new(&gen_name))?;
        sync_dir(&state)?;
    }
    for t in &tops {
        let p = dir.join(t);
        if fs::symlink_metadata(&p).is_err() {
            symlink(link_target(t), &p).map_err(io_err(&p))?;
        }
    }
    let previous = fs::read_link(state.join(PREVIOUS)).ok().map(|p| p.to_string_lossy().to_string());
    let live_name = gen.file_name().map(|n| n.to_string_lossy().to_string());
    staged.as_mut().map_or(Ok(()), Staged::settle)?;
    clean_old(&state, &[live_name.as_deref(), previous.as_deref()]);
    Ok(if unchanged { Written::Unchanged(gen) } else { Written::New(gen) })
}

/// Make a fresh copy of `b` live in place of the damaged `live` generation (same bundle, so
/// `previous` stays what it was), and move the damaged one aside.
fn repair(dir: &Path, state: &Path, b: &Bundle, gen_name: &str, live: &Path, damage: Vec<String>) -> Result<Written, WriteError> {
    let stamp = nanos();
    let name = format!("{gen_name}-r{stamp}");
    let gen = state.join(&name);
    let tmp = state.join(format!("tmp-{}-{stamp}", std::process::id()));
    // Nothing is linked from the damaged generation: every file is written anew.
    let done = write_tree(&tmp, b, None, &Default::default()).and_then(|_| fs::rename(&tmp, &gen).map_err(io_err(&gen)));
    if let Err(e) = done {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    swap_link(state, CURRENT, Path::new(&name))?;
    sync_dir(state)?;
    let moved_to = state.join(format!("damaged-{stamp}"));
    fs::rename(live, &moved_to).map_err(io_err(live))?;
    for t in b.top_level() {
        let p = dir.join(&t);
        if fs::symlink_metadata(&p).is_err() {
            symlink(link_target(&t), &p).map_err(io_err(&p))?;
        }
    }
    Ok(Written::Repaired { gen, damage, moved_to })
}

fn swap_link(state: &Path, name: &str, target: &Path) -> Result<(), WriteError> {
    let tmp = state.join(format!("{name}.tmp-{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    symlink(target, &tmp).map_err(io_err(&tmp))?;
    fs::rename(&tmp, state.join(name)).map_err(io_err(state))
}

fn link_target(top: &str) -> PathBuf {
    Path::new(STATE_DIR).join(CURRENT).join(top)
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// The live generation's `SHA256SUMS`, path → hash.
fn live_sums(live: &Path) -> std::collections::HashMap<String, String> {
    let text = fs::read_to_string(live.join(bundle::SUMS)).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once("  "))
        .map(|(h, p)| (p.to_string(), h.to_string()))
        .collect()
}

/// Write `b` into `root` and flush it. `written`: files `root` already holds (`Staged`).
fn write_tree(
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

fn write_files(
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
enum Spread {
    AllCores,
    OneThread,
}

fn sync_dir(p: &Path) -> Result<(), WriteError> {
    fs::File::open(p).and_then(|d| d.sync_all()).map_err(io_err(p))
}

/// Remove superseded generations and leftovers of interrupted runs.
fn clean_old(state: &Path, keep: &[Option<&str>]) {
    let Ok(rd) = fs::read_dir(state) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let stale_gen = name.starts_with("gen-") && !keep.contains(&Some(name.as_str()));
        let stale_tmp = name.starts_with("tmp-") || name.contains(".tmp-");
        if stale_gen || stale_tmp {
            let p = e.path();
            let _ = if p.is_dir() && !p.is_symlink() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
        }
    }
}

/// Every file of the live bundle, for `verify`.
pub fn read_bundle(dir: &Path) -> io::Result<Bundle> {
    let cur = current(dir).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no bundle in {} (run `hardshift create` first)", dir.display()),
        )
    })?;
    let mut b = Bundle::default();
    let mut stack = vec![cur.clone()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            if e.file_type()?.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&cur).map_err(io::Error::other)?.to_string_lossy().to_string();
                let mode = e.metadata()?.permissions().mode() & 0o7777;
                b.add(rel, mode, fs::read(&p)?);
            }
        }
    }
    Ok(b)
}

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
        sync_dir(&tmp).map_err(|e| io::Error::other(e.to_string()))
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

/// The one-writer lock of a bundle directory (`DIR/.hardshift/lock`), held while it lives.
pub struct DirLock {
    _lock: nix::fcntl::Flock<fs::File>,
}

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

/// Take the bundle's writer lock, or say who holds it: two runs writing one bundle at once would
/// leave a generation with some of each run's files.
pub fn lock(dir: &Path, what: &str) -> Result<DirLock, String> {
    let state = dir.join(STATE_DIR);
    private_dir_all(&state).map_err(|e| format!("{}: {e}", state.display()))?;
    lock_file(&state.join("lock"), what).map_err(|e| match e {
        LockError::Busy(holder) => format!(
            "{}: another hardshift run is writing this bundle ({holder}); wait for it to finish and run again",
            dir.display()
        ),
        LockError::Io(e) => e,
    })
}

/// Why a lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Held by another process: the holder as it named itself, if it still lives.
    Busy(String),
    Io(String),
}

/// Take an exclusive, non-blocking flock on `path`, writing our pid and `what` into it.
pub fn lock_file(path: &Path, what: &str) -> Result<DirLock, LockError> {
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| LockError::Io(format!("{}: {e}", path.display())))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            // Who holds it, for the next run to name. The lock is on the open file, not its text.
            let _ = lock.set_len(0);
            let _ = writeln!(&mut *lock, "pid {} ({what})", std::process::id());
            Ok(DirLock { _lock: lock })
        }
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            // The text names the last taker: believe it only while that pid lives.
            let text = fs::read_to_string(path).unwrap_or_default();
            let alive = text
                .strip_prefix("pid ")
                .and_then(|t| t.split_whitespace().next())
                .is_some_and(|pid| Path::new("/proc").join(pid).exists());
            Err(LockError::Busy(if alive {
                text.trim().to_string()
            } else {
                "holder unknown".into()
            }))
        }
        Err((_, e)) => Err(LockError::Io(format!("{}: cannot lock: {e}", path.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn bundle(files: &[(&str, &str)]) -> Bundle {
        let mut b = Bundle::default();
        for (p, c) in files {
            b.add(*p, bundle::SECRET, c.as_bytes());
        }
        let s = bundle::sums(&b);
        b.add(bundle::SUMS, bundle::PUBLIC, s);
        b
    }

    #[test]
    fn a_write_that_fails_midway_leaves_the_previous_bundle_live() {
        let t = tempfile::tempdir().unwrap();
        let a = bundle(&[("pki/a.key", "first"), ("pki/b.crt", "first")]);
        assert!(matches!(write(t.path(), &a).unwrap(), Written::New(_)));
        // "pki/b.crt" as a file and as a directory: the second file cannot be created, so the
        // write fails after it has started writing the new generation.
        let broken = bundle(&[("pki/a.key", "second"), ("pki/b.crt", "x"), ("pki/b.crt/c", "y")]);
        assert!(write(t.path(), &broken).is_err());
        assert_eq!(fs::read_to_string(t.path().join("pki/a.key")).unwrap(), "first");
        assert_eq!(read_bundle(t.path()).unwrap(), {
            let mut expect = a.clone();
            for f in expect.files.values_mut() {
                f.mode = if f.mode == bundle::SECRET { 0o600 } else { 0o644 };
            }
            expect
        });
        // The next good run cleans the leftover and goes live.
        let c = bundle(&[("pki/a.key", "third")]);
        write(t.path(), &c).unwrap();
        assert_eq!(fs::read_to_string(t.path().join("pki/a.key")).unwrap(), "third");
        let leftovers: Vec<_> = fs::read_dir(t.path().join(STATE_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn keys_are_created_0600() {
        let t = tempfile::tempdir().unwrap();
        write(t.path(), &bundle(&[("pki/k.key", "secret")])).unwrap();
        let mode = fs::metadata(t.path().join("pki/k.key")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let state = fs::metadata(t.path().join(STATE_DIR)).unwrap().permissions().mode() & 0o777;
        assert_eq!(state, 0o700);
    }

    fn tmp_dirs(dir: &Path) -> Vec<String> {
        fs::read_dir(dir.join(STATE_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("tmp-"))
            .collect()
    }

    #[test]
    fn staged_files_are_completed_and_a_stale_one_rewritten() {
        let t = tempfile::tempdir().unwrap();
        let b = bundle(&[("ignition/w.ign", "worker"), ("ignition/m.ign", "master"), ("pki/a.key", "key")]);
        let mut st = Staged::begin(t.path()).unwrap().expect("no live bundle: staged");
        let file = |c: &str| bundle::File {
            mode: bundle::SECRET,
            contents: c.as_bytes().into(),
        };
        // One file as the bundle has it, one that the bundle no longer matches.
        st.put(vec![
            ("ignition/w.ign".into(), file("worker")),
            ("ignition/m.ign".into(), file("stale")),
        ])
        .unwrap();
        st.keep(t.path().join(STATE_DIR).join("agents/abc"), b"agent", 0o755).unwrap();
        assert!(
            !t.path().join(STATE_DIR).join("agents").exists(),
            "kept only once the bundle is written"
        );
        assert_eq!(tmp_dirs(t.path()).len(), 2);
        assert!(matches!(write_staged(t.path(), &b, Some(st)).unwrap(), Written::New(_)));
        assert_eq!(fs::read_to_string(t.path().join("ignition/w.ign")).unwrap(), "worker");
        assert_eq!(fs::read_to_string(t.path().join("ignition/m.ign")).unwrap(), "master");
        assert_eq!(fs::read_to_string(t.path().join("pki/a.key")).unwrap(), "key");
        assert!(tmp_dirs(t.path()).is_empty());
        assert_eq!(fs::read(t.path().join(STATE_DIR).join("agents/abc")).unwrap(), b"agent");
        // A live bundle: nothing is staged (a re-run links what it keeps instead).
        assert!(Staged::begin(t.path()).unwrap().is_none());
    }

    #[test]
    fn staged_files_of_a_run_that_fails_are_removed() {
        let t = tempfile::tempdir().unwrap();
        let mut st = Staged::begin(t.path()).unwrap().unwrap();
        st.put(vec![(
            "ignition/w.ign".into(),
            bundle::File {
                mode: bundle::SECRET,
                contents: "w".into(),
            },
        )])
        .unwrap();
        st.keep(t.path().join(STATE_DIR).join("agents/abc"), b"agent", 0o755).unwrap();
        drop(st);
        assert!(tmp_dirs(t.path()).is_empty());
        assert!(!t.path().join(STATE_DIR).join("agents").exists());
        assert!(current(t.path()).is_none());
        // A bundle whose top-level name is taken is refused, and what was staged goes.
        fs::write(t.path().join("pki"), "the user's").unwrap();
        let st = Staged::begin(t.path()).unwrap().unwrap();
        assert!(matches!(
            write_staged(t.path(), &bundle(&[("pki/a.key", "k")]), Some(st)),
            Err(WriteError::Occupied(_))
        ));
        assert!(tmp_dirs(t.path()).is_empty());
    }
}
