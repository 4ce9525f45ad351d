//! The release's own renderers, as the installer's bootkube.sh runs them on the bootstrap node:
//! the bundle laid out in the installer's asset layout ([`assets`]), and the renders in
//! bootkube.sh's order with their flags, the assets each reads and what bootkube does with what
//! each writes ([`steps`]). Pure: running them (podman) is `pipeline::render`'s.

pub mod assets;
pub mod diff;
pub mod steps;

pub use assets::{layout, Asset};
pub use steps::{steps, Copy, Net, Step};

/// What the renders need and the release, the inventory or the cluster's manifests lack, each
/// named (all at once: a user fixes them in one go).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct Lacking(pub Vec<String>);

#[cfg(test)]
mod tests;

/// Where `hardshift render` keeps the renders' assets, outputs and logs, inside the bundle directory.
pub const DIR: &str = crate::layout::RENDER;
