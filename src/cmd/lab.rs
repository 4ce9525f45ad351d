//! `hardshift lab`: rewrite only the lab's files (DNS, DHCP, PXE, HAProxy) for the current bundle.

use crate::Failure;
use hardshift_generator::{bundle, fsio, lab};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    cluster: super::ClusterArgs,
}

/// Regenerate DIR/lab/ only, from the inputs and the live bundle's Ignition configs.
pub fn run(a: Args) -> Result<u8, Failure> {
    let cluster = a.cluster.load()?;
    let dir = &a.cluster.dir;
    let _lock = fsio::lock(dir, "lab").map_err(Failure::other)?;
    let mut b = fsio::read_bundle(dir).map_err(Failure::input)?;
    let mut missing = Vec::new();
    for n in &cluster.nodes {
        if !b.files.contains_key(&hardshift_generator::layout::ignition(&n.hostname)) {
            missing.push(n.hostname.clone());
        }
    }
    if !missing.is_empty() {
        return Err(Failure::input(format!(
            "the bundle has no Ignition config for {}: the inputs changed since `create`; run `hardshift create --dir {}`",
            missing.join(", "),
            dir.display()
        )));
    }
    let hashes = lab::ignition_hashes(b.files.iter().filter_map(|(p, f)| {
        let host = hardshift_generator::layout::node_of_ignition(p)?;
        Some((host, &f.contents))
    }));
    bundle::add_lab(&mut b, &cluster, &hashes);
    bundle::reseal(&mut b);
    let n = b.files.keys().filter(|p| p.starts_with("lab/")).count();
    match fsio::write(dir, &b).map_err(Failure::other)? {
        fsio::Written::Unchanged(_) => println!(
            "lab unchanged: {n} files in {}",
            dir.join(hardshift_generator::layout::LAB).display()
        ),
        fsio::Written::New(_) => println!("wrote {n} lab files to {}", dir.join(hardshift_generator::layout::LAB).display()),
        fsio::Written::Repaired { damage, moved_to, .. } => println!(
            "wrote {n} lab files to {} (repaired {} problems in the live copy; the damaged one is in {})",
            dir.join(hardshift_generator::layout::LAB).display(),
            damage.len(),
            moved_to.display()
        ),
    }
    Ok(0)
}
