//! `hardshift lab`: rewrite only the lab's files (DNS, DHCP, PXE, HAProxy) for the current bundle.

use crate::failure::Failure;
use hardshift_generator::{fsio::Written, layout, pipeline};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    cluster: super::ClusterArgs,
}

/// Regenerate DIR/lab/ only, from the inputs and the live bundle's Ignition configs.
pub fn run(a: Args) -> Result<u8, Failure> {
    let cluster = a.cluster.load()?;
    let lab = a.cluster.dir.join(layout::LAB);
    match pipeline::side::lab(&a.cluster.dir, &cluster)? {
        (Written::Unchanged(_), n) => println!("lab unchanged: {n} files in {}", lab.display()),
        (Written::New(_), n) => println!("wrote {n} lab files to {}", lab.display()),
        (Written::Repaired { damage, moved_to, .. }, n) => println!(
            "wrote {n} lab files to {} (repaired {} problems in the live copy; the damaged one is in {})",
            lab.display(),
            damage.len(),
            moved_to.display()
        ),
    }
    Ok(0)
}
