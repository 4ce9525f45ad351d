//! `hardshift approve-csrs`: approve the kubelets' CSRs that cluster-machine-approver's rules
//! allow for the bundle's inventory, and only those; say why for every other one. Platform none
//! has no machine-approver until the cluster runs one, and `oc adm certificate approve` on
//! everything pending is how a rogue machine joins.

use crate::failure::Failure;
use hardshift_collector::approver::{self, Csr, Decision, Inventory, InventoryNode};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    cluster: super::ClusterArgs,
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
fn inventory(c: &hardshift_generator::cluster::Cluster) -> Inventory {
    let domain = c.domain();
    Inventory {
        nodes: c
            .nodes
            .iter()
            .filter(|n| n.role != hardshift_generator::cluster::Role::Bootstrap)
            .map(|n| {
                (
                    n.hostname.clone(),
                    InventoryNode {
                        ips: vec![n.ip],
                        dns: vec![n.hostname.clone(), format!("{}.{domain}", n.hostname)],
                    },
                )
            })
            .collect(),
    }
}

fn view(c: &CertificateSigningRequest) -> Csr {
    Csr {
        name: c.metadata.name.clone().unwrap_or_default(),
        signer: c.spec.signer_name.clone(),
        username: c.spec.username.clone().unwrap_or_default(),
        groups: c.spec.groups.clone().unwrap_or_default(),
        usages: c.spec.usages.clone().unwrap_or_default(),
        request_pem: c.spec.request.0.clone(),
    }
}

fn approved_condition(c: &CertificateSigningRequest) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|x| x.type_ == "Approved" && x.status == "True"))
}

fn pending(c: &CertificateSigningRequest) -> bool {
    c.status.as_ref().and_then(|s| s.conditions.as_ref()).is_none_or(|cs| cs.is_empty())
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let cluster = a.cluster.load()?;
    let inv = inventory(&cluster);
    let path = a
        .kubeconfig
        .clone()
        .unwrap_or_else(|| a.cluster.dir.join(hardshift_generator::layout::ADMIN_KUBECONFIG));
    let log_path = a.cluster.dir.join(hardshift_generator::layout::CSR_DECISIONS);
    let rt = tokio::runtime::Runtime::new().map_err(Failure::other)?;
    rt.block_on(async {
        let client = super::kube_client(&path).await?;
        let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
        let nodes: Api<Node> = Api::all(client);
        // What was said about a CSR is said once, not at every look.
        let mut said: BTreeMap<String, Decision> = BTreeMap::new();
        let (mut approved, mut refused) = (0usize, 0usize);
        loop {
            let list = csrs
                .list(&ListParams::default())
                .await
                .map_err(|e| Failure::other(format!("list CSRs: {e}")))?;
            let registered: BTreeSet<String> = nodes
                .list(&ListParams::default())
                .await
                .map_err(|e| Failure::other(format!("list Nodes: {e}")))?
                .items
                .into_iter()
                .filter_map(|n| n.metadata.name)
                .collect();
            let waiting: Vec<Csr> = list.items.iter().filter(|c| pending(c)).map(view).collect();
            // Client certificates approved before, by this or anyone: the node has had its one.
            let approved_clients: BTreeMap<String, String> = list
                .items
                .iter()
                .filter(|c| approved_condition(c))
                .filter_map(|c| {
                    let csr = view(c);
                    approver::client_node(&csr).map(|n| (n, csr.name))
                })
                .collect();
            let decisions = approver::decide_pass(&inv, &waiting, &approved_clients, &registered);
            for (csr, decision) in waiting.into_iter().zip(decisions) {
                if said.get(&csr.name) == Some(&decision) {
                    continue;
                }
                match &decision {
                    Decision::Approve(why) if !a.dry_run => {
                        let body = serde_json::json!({"status": {"conditions": [{
                            "type": "Approved", "status": "True", "reason": "HardshiftApprover", "message": why,
                        }]}});
                        csrs.patch_approval(&csr.name, &PatchParams::default(), &Patch::Merge(&body))
                            .await
                            .map_err(|e| Failure::other(format!("approve {}: {e}", csr.name)))?;
                        approved += 1;
                        println!("approved {} ({}): {why}", csr.name, csr.signer);
                    }
                    Decision::Approve(why) => println!("would approve {} ({}): {why}", csr.name, csr.signer),
                    Decision::Refuse(why) => {
                        refused += 1;
                        println!("refused {} ({}, from {}): {why}", csr.name, csr.signer, csr.username);
                    }
                }
                record(&log_path, &csr, &decision, a.dry_run);
                said.insert(csr.name.clone(), decision);
            }
            if !a.watch {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(a.interval) => {}
                _ = tokio::signal::ctrl_c() => break,
            }
        }
        eprintln!("{approved} approved, {refused} refused (left pending for a person to look at)");
        Ok(0)
    })
}

/// Every decision is an event: one JSON line in DIR/collector/csr-decisions.jsonl (best effort;
/// stdout already has it).
fn record(path: &std::path::Path, csr: &Csr, d: &Decision, dry_run: bool) {
    let (decision, reason) = match d {
        Decision::Approve(r) if dry_run => ("would-approve", r),
        Decision::Approve(r) => ("approved", r),
        Decision::Refuse(r) => ("refused", r),
    };
    let line = serde_json::json!({
        "time_ms": hardshift_collector::now_ms(), "csr": csr.name, "signer": csr.signer,
        "username": csr.username, "decision": decision, "reason": reason,
    });
    if let Some(dir) = path.parent() {
        let _ = hardshift_generator::fsio::make_dir_all(dir, 0o700);
    }
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(f, "{line}");
    }
}
