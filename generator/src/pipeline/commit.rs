//! The one write of a build: the bundle as a new generation (or nothing, when it is unchanged;
//! or a fresh copy, when the live one was damaged), then the record of how it was made and the
//! agent it embeds, for `verify`.

use super::cache::EncodingCache;
use super::error::Error;
use super::make::Made;
use super::record::{self, Record};
use super::request::Request;
use crate::fsio::{self, Staged, Written};
use crate::{assets::agent, bundle};

pub fn commit(req: &Request, made: &mut Made<Staged>, cache: &dyn EncodingCache) -> Result<Written, Error> {
    let t = std::time::Instant::now();
    let written = fsio::write_staged(&req.dir, &made.bundle, made.staged.take()).map_err(Error::other)?;
    let from_renders = made.extras.renders.is_some();
    record(req, made.extras.agent.as_ref(), made.cluster.fips, from_renders, cache)?;
    tracing::debug!(ms = t.elapsed().as_millis(), "wrote the bundle");
    Ok(written)
}

/// Record the options and keep the agent binary (one: the one in use), atomically.
fn record(req: &Request, agent: Option<&agent::Binary>, fips: bool, from_renders: bool, cache: &dyn EncodingCache) -> Result<(), Error> {
    let sha = agent.map(|b| bundle::sha256_hex(&b.bytes));
    let rec = Record::of(req, sha.clone(), fips, from_renders);
    if let (Some(b), Some(sha)) = (agent, &sha) {
        let kept = record::kept_agent(&req.dir, sha);
        let agents = record::agents_dir(&req.dir);
        if !kept.is_file() {
            let fail = |e: std::io::Error| Error::io(&kept)(e);
            fsio::private_dir_all(&agents).map_err(fail)?;
            fsio::write_file_atomic(&kept, &b.bytes, 0o755).map_err(fail)?;
        }
        if !b.is_remote() {
            cache.put(sha, &b.encoded);
        }
        // Keep only the agent in use.
        for e in std::fs::read_dir(&agents).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy() != *sha {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let path = record::path(&req.dir);
    let json = serde_json::to_vec_pretty(&rec).map_err(Error::other)?;
    fsio::write_file_atomic(&path, &json, 0o600).map_err(Error::io(&path))
}
