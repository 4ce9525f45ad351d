pub mod collector;
pub mod create;
pub mod events;
pub mod lab;
pub mod logs;
pub mod mco;
pub mod status;
pub mod verify;

use crate::Failure;
use hardshift_generator::{cluster::Cluster, config};
use std::path::Path;

/// Read and validate the inputs in `dir`.
pub fn load_cluster(dir: &Path, release_refs: Option<&Path>, overrides: &config::Overrides) -> Result<Cluster, Failure> {
    let sources = config::read_sources(dir, release_refs).map_err(Failure::input)?;
    config::build(&sources, overrides).map_err(Failure::input)
}
