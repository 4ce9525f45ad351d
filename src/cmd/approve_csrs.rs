//! `hardshift approve-csrs`: approve the kubelets' CSRs that cluster-machine-approver's rules
//! allow for the bundle's inventory, and only those; say why for every other one. Platform none
//! has no machine-approver until the cluster runs one, and `oc adm certificate approve` on
//! everything pending is how a rogue machine joins.

use crate::failure::Failure;
use hardshift_collector::approver::{Csr, Decision, Inventory, InventoryNode};
use hardshift_collector::approving;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    bundle: super::BundleArgs,
    /// The kubeconfig to act with. Default: DIR/auth/kubeconfig
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Keep going, approving CSRs as they arrive, until Ctrl-C.
    #[arg(long)]
    watch: bool,
    /// Decide and say, but approve nothing.
    #[arg(long)]
    dry_run: bool,
    /// How often to look for new CSRs with --watch, e.g. 2s.
    #[arg(long, default_value = "2s", value_parser = super::parse_duration)]
    interval: Duration,
}

/// The nodes of the bundle that may join, with the names and addresses their certificates may carry.
fn inventory(inv: &hardshift_bundle::Inventory) -> Inventory {
    let domain = inv.domain();
    Inventory {
        nodes: inv
            .nodes
            .iter()
            .filter(|n| n.role != hardshift_bundle::Role::Bootstrap)
            .map(|n| {
                (
                    n.name.clone(),
                    InventoryNode {
                        ips: vec![n.ip],
                        dns: vec![n.name.clone(), format!("{}.{domain}", n.name)],
                    },
                )
            })
            .collect(),
    }
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let inv = inventory(&a.bundle.inventory()?);
    let path = a
        .kubeconfig
        .clone()
        .unwrap_or_else(|| a.bundle.dir.join(hardshift_bundle::layout::ADMIN_KUBECONFIG));
    let opts = approving::Options {
        watch: a.watch,
        dry_run: a.dry_run,
        interval: a.interval,
        log: a.bundle.dir.join(hardshift_bundle::layout::CSR_DECISIONS),
    };
    let rt = tokio::runtime::Runtime::new().map_err(Failure::other)?;
    rt.block_on(async {
        let client = super::kube_client(&path).await?;
        let counts = approving::run(client, &inv, &opts, &mut |csr, d| say(csr, d, a.dry_run))
            .await
            .map_err(Failure::other)?;
        eprintln!(
            "{} approved, {} refused (left pending for a person to look at)",
            counts.approved, counts.refused
        );
        Ok(0)
    })
}

fn say(csr: &Csr, d: &Decision, dry_run: bool) {
    match d {
        Decision::Approve(why) if !dry_run => println!("approved {} ({}): {why}", csr.name, csr.signer),
        Decision::Approve(why) => println!("would approve {} ({}): {why}", csr.name, csr.signer),
        Decision::Refuse(why) => println!("refused {} ({}, from {}): {why}", csr.name, csr.signer, csr.username),
    }
}
