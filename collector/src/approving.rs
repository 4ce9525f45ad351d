//! Approving the kubelets' CSRs on a live API: list the pending ones, decide each by
//! [`approver`](crate::approver)'s rules, approve the allowed, and record every decision once.

use crate::approver::{self, Csr, Decision, Inventory};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// How to go about it.
pub struct Options {
    /// Keep going, approving CSRs as they arrive, until Ctrl-C.
    pub watch: bool,
    /// Decide and say, but approve nothing.
    pub dry_run: bool,
    /// How often to look for new CSRs when watching.
    pub interval: Duration,
    /// The decisions' log, one JSON line each (DIR/collector/csr-decisions.jsonl).
    pub log: PathBuf,
}

/// What was done, in all.
#[derive(Debug, Default)]
pub struct Counts {
    pub approved: usize,
    pub refused: usize,
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

/// A call to the API that failed: what was asked, and kube's error.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct ApiError {
    pub what: String,
    #[source]
    pub source: kube::Error,
}

fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ApiError {
    let what = what.into();
    move |source| ApiError { what, source }
}

/// One look at the API: the pending CSRs with their decisions.
async fn pass(csrs: &Api<CertificateSigningRequest>, nodes: &Api<Node>, inv: &Inventory) -> Result<Vec<(Csr, Decision)>, ApiError> {
    let list = csrs.list(&ListParams::default()).await.map_err(api("list CSRs"))?;
    let registered: BTreeSet<String> = nodes
        .list(&ListParams::default())
        .await
        .map_err(api("list Nodes"))?
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
    let decisions = approver::decide_pass(inv, &waiting, &approved_clients, &registered);
    Ok(waiting.into_iter().zip(decisions).collect())
}

/// Mark one CSR approved, with the rule that allowed it as the condition's message.
async fn approve(csrs: &Api<CertificateSigningRequest>, name: &str, why: &str) -> Result<(), ApiError> {
    let body = serde_json::json!({"status": {"conditions": [{
        "type": "Approved", "status": "True", "reason": "HardshiftApprover", "message": why,
    }]}});
    csrs.patch_approval(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map(drop)
        .map_err(api(format!("approve {name}")))
}

/// Decide the pending CSRs (and, with `watch`, those that arrive until Ctrl-C), approve the
/// allowed unless `dry_run`, and hand every new decision to `say` once it is acted on.
pub async fn run(client: kube::Client, inv: &Inventory, o: &Options, say: &mut dyn FnMut(&Csr, &Decision)) -> Result<Counts, ApiError> {
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client);
    // What was said about a CSR is said once, not at every look.
    let mut said: BTreeMap<String, Decision> = BTreeMap::new();
    let mut counts = Counts::default();
    loop {
        for (csr, decision) in pass(&csrs, &nodes, inv).await? {
            if said.get(&csr.name) == Some(&decision) {
                continue;
            }
            match &decision {
                Decision::Approve(why) if !o.dry_run => {
                    approve(&csrs, &csr.name, why).await?;
                    counts.approved += 1;
                }
                Decision::Approve(_) => {}
                Decision::Refuse(_) => counts.refused += 1,
            }
            say(&csr, &decision);
            record(&o.log, &csr, &decision, o.dry_run);
            said.insert(csr.name.clone(), decision);
        }
        if !o.watch {
            return Ok(counts);
        }
        tokio::select! {
            _ = tokio::time::sleep(o.interval) => {}
            _ = tokio::signal::ctrl_c() => return Ok(counts),
        }
    }
}

/// Every decision is an event: one JSON line in the log (best effort; stdout already has it).
fn record(path: &std::path::Path, csr: &Csr, d: &Decision, dry_run: bool) {
    let (decision, reason) = match d {
        Decision::Approve(r) if dry_run => ("would-approve", r),
        Decision::Approve(r) => ("approved", r),
        Decision::Refuse(r) => ("refused", r),
    };
    let line = serde_json::json!({
        "time_ms": crate::now_ms(), "csr": csr.name, "signer": csr.signer,
        "username": csr.username, "decision": decision, "reason": reason,
    });
    if let Some(dir) = path.parent() {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    }
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(f, "{line}");
    }
}
