use super::load_cluster;
use crate::Failure;
use hardshift_generator::bundle;
use hardshift_generator::cluster::{KeyAlgorithm, Role};
use hardshift_generator::config::Overrides;
use hardshift_generator::fsio::{self, Written};
use hardshift_generator::pki::{self, keys::SystemKeys, Outcome, PkiError};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Directory holding install-config.yaml, agent-config.yaml and (optionally) hardshift.yaml.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Key algorithm for new OpenShift keys (existing keys are kept): rsa-2048, rsa-4096, ecdsa-p256.
    #[arg(long, value_parser = parse_alg)]
    key_algorithm: Option<KeyAlgorithm>,
    /// Replace every CA, and so every certificate. Only for a cluster that does not run yet.
    #[arg(long)]
    rotate_ca: bool,
    /// The release image pullspec (wins over hardshift.yaml `release.image`).
    #[arg(long)]
    release_image: Option<String>,
    /// The release's image references (ImageStream JSON or name=pullspec lines).
    /// Default: DIR/release/image-references.
    #[arg(long)]
    release_refs: Option<PathBuf>,
}

fn parse_alg(s: &str) -> Result<KeyAlgorithm, String> {
    KeyAlgorithm::parse(s).ok_or_else(|| format!("expected {}", KeyAlgorithm::NAMES))
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let overrides = Overrides {
        key_algorithm: a.key_algorithm,
        release_image: a.release_image.clone(),
    };
    let cluster = load_cluster(&a.dir, a.release_refs.as_deref(), &overrides)?;
    let now = time::OffsetDateTime::now_utc();
    let specs = pki::plan(&cluster);
    let existing = fsio::read_existing(&a.dir, &specs);
    let pki = pki::issue(&specs, &existing, now, &SystemKeys, pki::Options { rotate_ca: a.rotate_ca }).map_err(|e| match e {
        PkiError::Refused { .. } => Failure::input(e),
        other => Failure::other(other),
    })?;
    let b = bundle::assemble(&cluster, &pki);
    let written = fsio::write(&a.dir, &b).map_err(Failure::other)?;

    let count = |r| cluster.nodes.iter().filter(|n| n.role == r).count();
    println!(
        "cluster {}: {} nodes ({} bootstrap, {} masters, {} workers), API {} , ingress {}",
        cluster.domain(),
        cluster.nodes.len(),
        count(Role::Bootstrap),
        count(Role::Master),
        count(Role::Worker),
        cluster.api_vip,
        cluster.ingress_vip
    );
    let tally = |f: fn(&Outcome) -> bool| pki.entries.iter().filter(|e| f(&e.outcome)).count();
    println!(
        "PKI: {} entries ({} keys for new entries): {} created, {} reused, {} re-issued",
        pki.entries.len(),
        cluster.pki.key_algorithm.as_str(),
        tally(|o| *o == Outcome::Created),
        tally(|o| *o == Outcome::Reused),
        tally(|o| matches!(o, Outcome::Reissued(_)))
    );
    let rerun = !existing.is_empty();
    for e in &pki.entries {
        match &e.outcome {
            Outcome::Reissued(why) => println!("  re-issued {}: {why}", e.spec.id()),
            Outcome::Created if rerun => println!("  created {}", e.spec.id()),
            _ => {}
        }
    }
    match written {
        Written::Unchanged(_) => println!("bundle unchanged: {} files in {}", b.files.len(), a.dir.display()),
        Written::New(g) => println!("wrote {} files to {} ({})", b.files.len(), a.dir.display(), g.display()),
    }
    println!("admin kubeconfig: {}", a.dir.join("auth/kubeconfig").display());
    Ok(0)
}
