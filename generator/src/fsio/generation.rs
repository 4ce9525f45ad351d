//! A new generation written whole beside the live one and made live with one rename; a damaged
//! live one repaired; superseded ones removed.

use super::damage::{action, damage, Action};
use super::staged::Staged;
use super::tree::write_tree;
use super::{current, io_err, nanos, sync_dir, WriteError, CURRENT, PREVIOUS, STATE_DIR};
use crate::bundle::{self, Bundle};
use hardshift_bundle::fsio::private_dir_all;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

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

/// Write `b` as the new live bundle of `dir`, atomically.
pub fn write(dir: &Path, b: &Bundle) -> Result<Written, WriteError> {
    write_staged(dir, b, None)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle;
    use crate::fsio::read_bundle;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

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
