//! The user's cache of the agent's Ignition encoding, injected into the build: compressing 7 MB
//! costs most of a run, and changes only when the agent does.

use crate::fsio;
use crate::ignition::Contents;
use std::path::{Path, PathBuf};

/// Encodings of agent binaries, by the binary's SHA-256. A hit is used only if it decodes to the
/// binary (checked by the build), so a damaged or forged entry costs a re-encode, no more.
pub trait EncodingCache: Send + Sync {
    fn get(&self, sha: &str) -> Option<Contents>;
    /// Keep `c`, unless an entry is there. A convenience: failing only makes the next run slower.
    fn put(&self, sha: &str, c: &Contents);
    /// Drop an entry found not to be the binary's.
    fn forget(&self, sha: &str);
}

/// The user's cache (`UserCache::from_env`), or none without a home.
pub fn user() -> std::sync::Arc<dyn EncodingCache> {
    match UserCache::from_env() {
        Some(c) => std::sync::Arc::new(c),
        None => std::sync::Arc::new(NoCache),
    }
}

/// No cache: every run encodes.
pub struct NoCache;

impl EncodingCache for NoCache {
    fn get(&self, _: &str) -> Option<Contents> {
        None
    }
    fn put(&self, _: &str, _: &Contents) {}
    fn forget(&self, _: &str) {}
}

/// Encodings kept: each is ~1.5 times the agent's size, and a developer who rebuilds the agent
/// would otherwise collect one per build.
const KEEP: usize = 3;

/// A directory of `agent-<sha256>.contents.json`, shared by every bundle, the most recently used
/// `KEEP` kept (a hit refreshes an entry's time).
pub struct UserCache {
    dir: PathBuf,
}

impl UserCache {
    pub fn at(dir: PathBuf) -> UserCache {
        UserCache { dir }
    }

    /// `$XDG_CACHE_HOME/hardshift`, else `~/.cache/hardshift`; None without either.
    pub fn from_env() -> Option<UserCache> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(UserCache::at(base.join("hardshift")))
    }

    fn entry(&self, sha: &str) -> PathBuf {
        self.dir.join(format!("agent-{sha}.contents.json"))
    }

    /// Remove all but the `KEEP` most recently used entries, never `keep`, and nothing but
    /// `agent-*.contents.json`.
    fn prune(&self, keep: &Path) {
        let mut entries: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with("agent-") && name.ends_with(".contents.json")
            })
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .filter(|(_, p)| p != keep)
            .collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.0));
        for (_, p) in entries.into_iter().skip(KEEP - 1) {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl EncodingCache for UserCache {
    fn get(&self, sha: &str) -> Option<Contents> {
        let p = self.entry(sha);
        let c = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
        // Mark the entry used, for `prune`.
        let _ = std::fs::File::options()
            .write(true)
            .open(&p)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        Some(c)
    }

    fn put(&self, sha: &str, c: &Contents) {
        let p = self.entry(sha);
        if p.is_file() {
            return;
        }
        let Ok(json) = serde_json::to_vec(c) else { return };
        if fsio::private_dir_all(&self.dir)
            .and_then(|_| fsio::write_file_atomic(&p, &json, 0o644))
            .is_ok()
        {
            self.prune(&p);
        }
    }

    fn forget(&self, sha: &str) {
        let _ = std::fs::remove_file(self.entry(sha));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_the_most_recently_used() {
        let d = tempfile::tempdir().unwrap();
        let cache = UserCache::at(d.path().join("hardshift"));
        let c = |s: &str| Contents {
            source: Some(format!("data:,{s}").into()),
            ..Default::default()
        };
        for (i, sha) in ["a", "b", "c", "d"].iter().enumerate() {
            cache.put(sha, &c(sha));
            // Distinct times, oldest first.
            let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 + i as u64);
            std::fs::File::options()
                .write(true)
                .open(cache.entry(sha))
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        // Putting "d" pruned "a"; using "b" makes it the newest, so "c" goes when "e" comes.
        assert!(cache.get("a").is_none());
        assert_eq!(cache.get("b").unwrap().source.as_deref(), Some("data:,b"));
        cache.put("e", &c("e"));
        let left: Vec<bool> = ["b", "c", "d", "e"].iter().map(|s| cache.entry(s).is_file()).collect();
        assert_eq!(left, [true, false, true, true]);
        cache.forget("b");
        assert!(cache.get("b").is_none());
        // Nothing else in the directory is touched.
        std::fs::write(d.path().join("hardshift/boot-image"), b"x").unwrap();
        cache.put("f", &c("f"));
        assert!(d.path().join("hardshift/boot-image").is_file());
    }
}
