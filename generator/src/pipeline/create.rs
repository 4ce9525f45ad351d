//! The pipeline's two runs: `create` (read, make, write under the bundle's lock) and `rebuild`
//! (what `verify` compares with: made again, written nowhere).

use super::cache::EncodingCache;
use super::error::Error;
use super::live::Live;
use super::make::{self, Env, Made};
use super::request::Request;
use super::{commit, decide, inputs, record};
use crate::fsio::{self, Written};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What `create` did: the bundle made, how it was written, and what to warn about.
pub struct Created {
    pub made: Made<fsio::Staged>,
    pub written: Written,
    /// The live bundle had a generation before this run (so new PKI entries are news).
    pub rerun: bool,
    /// The bundle's directory.
    pub dir: PathBuf,
    /// The masters and workers were merged into the release's own renders (DIR/render).
    pub from_renders: bool,
}

/// `hardshift create`: read the inputs, then under the bundle's lock read the live bundle, make
/// the bundle and write it. `warn` hears what is worth saying before the lock is taken.
pub fn create(req: &Request, cache: Arc<dyn EncodingCache>, warn: &mut dyn FnMut(String)) -> Result<Created, Error> {
    let t = std::time::Instant::now();
    let inputs = inputs::read(req, cache.clone())?;
    let from_renders = inputs.renders.is_some();
    // Not an input error: hardshift's own bootstrap runs without the MCO's bootstrap; but the
    // render (`hardshift mco`) and a real release need them.
    for m in crate::release::missing_for_mco(&inputs.cluster.release) {
        warn(m);
    }
    for m in crate::lab::dns::unresolvable_mirrors(&inputs.cluster) {
        warn(m);
    }
    tracing::debug!(ms = t.elapsed().as_millis(), "read the inputs");
    // Inputs are read and checked; from here on the bundle is read and written: one run at a time.
    let _lock = fsio::lock(&req.dir, "create")?;
    let t = std::time::Instant::now();
    let live = Live::read(&req.dir, &inputs.plan);
    tracing::debug!(ms = t.elapsed().as_millis(), "read the live bundle");
    // A fresh bundle's masters and workers are written while the bootstrap's keys are made.
    let staged = fsio::Staged::begin(&req.dir).map_err(Error::other)?;
    let env = Env {
        now: time::OffsetDateTime::now_utc(),
        keys: &crate::pki::keys::SystemKeys,
        new_password: &decide::random_password,
    };
    let mut made = make::make(req, inputs, &live, &env, staged)?;
    let rerun = live.generation.is_some();
    if let Some(m) = control_plane_changed(&req.dir, made.extras.renders.is_some()) {
        warn(m);
    }
    let written = commit::commit(req, &mut made, cache.as_ref())?;
    Ok(Created {
        made,
        written,
        rerun,
        dir: req.dir.clone(),
        from_renders,
    })
}

/// Said when the bootstrap's control plane changes hands since the last `create` (by default
/// when renders appear): its static pods and its etcd CA change with it, and a cluster already
/// installed was installed from the other.
fn control_plane_changed(dir: &Path, from_renders: bool) -> Option<String> {
    let prev = record::read(dir)?.ok()?;
    let whose = |r: bool| if r { "the release's renders'" } else { "hardshift's own" };
    let flag = |r: bool| if r { "renders" } else { "native" };
    (prev.bootstrap_from_renders != from_renders).then(|| {
        format!(
            "the bootstrap's control plane is now {}; it was {} at the last create: its static pods and its etcd CA change with it (a cluster installed already keeps what it was installed with; `--bootstrap-control-plane {}` keeps the bootstrap as it was)",
            whose(from_renders),
            whose(prev.bootstrap_from_renders),
            flag(prev.bootstrap_from_renders)
        )
    })
}

/// What `verify` needs: the live bundle made again from the same inputs and the choices `create`
/// recorded, written nowhere. The notes say what had to be assumed.
pub fn rebuild(
    dir: &Path,
    release_image: Option<String>,
    release_refs: Option<PathBuf>,
    cache: Arc<dyn EncodingCache>,
) -> Result<(Made<()>, Vec<String>), Error> {
    let (mut req, notes) = Request::recorded(dir)?;
    if release_image.is_some() {
        req.release_image = release_image;
    }
    if release_refs.is_some() {
        req.release_refs = release_refs;
    }
    let inputs = inputs::read(&req, cache)?;
    let live = Live::read(dir, &inputs.plan);
    let env = Env {
        now: time::OffsetDateTime::now_utc(),
        keys: &crate::pki::keys::SystemKeys,
        new_password: &decide::random_password,
    };
    Ok((make::make(&req, inputs, &live, &env, None::<()>)?, notes))
}
