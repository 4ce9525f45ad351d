//! How a generation on disk differs from the bundle it should hold, and what a write does
//! about it.

use crate::bundle::Bundle;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

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
