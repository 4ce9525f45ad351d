//! `hardshift mco`: write DIR/mco/, the machine-config-operator's inputs and render.sh.

use crate::failure::Failure;
use hardshift_generator::{layout, pipeline};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    cluster: super::ClusterArgs,
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let cluster = a.cluster.load()?;
    let dir = &a.cluster.dir;
    let n = pipeline::side::mco(dir, &cluster)?;
    println!(
        "wrote {n} files to {}: the machine-config-operator's inputs for {} (release {})",
        dir.join(layout::MCO).display(),
        cluster.domain(),
        cluster.release.version.as_deref().unwrap_or("unknown")
    );
    println!(
        "next: {}/mco/render.sh (podman and the release's machine-config-operator image), then `hardshift create --dir {}` merges every master and worker into the rendered configs",
        dir.display(),
        dir.display()
    );
    Ok(0)
}
