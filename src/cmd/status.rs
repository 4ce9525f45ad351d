use crate::Failure;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    #[arg(long)]
    db: Option<PathBuf>,
    #[arg(short, long, default_value = "table", value_parser = ["table", "json"])]
    output: String,
}

const HEALTH: [&str; 5] = ["unknown", "ok", "warning", "failing", "absent"];

/// One row per node from the collector's store.
pub fn run(a: Args) -> Result<u8, Failure> {
    let store = super::collector::open_existing(&a.dir, a.db)?;
    let rows = store.nodes().map_err(Failure::other)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    if a.output == "json" {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let comps: Vec<serde_json::Value> = r
                    .last
                    .iter()
                    .flat_map(|l| &l.components)
                    .map(|c| serde_json::json!({"name": c.name, "health": HEALTH.get(c.health as usize).unwrap_or(&"unknown"), "state": c.state, "reason": c.reason}))
                    .collect();
                serde_json::json!({"node": r.node, "role": r.role, "boot_id": r.boot_id, "last_seq": r.last_seq, "reports": r.reports,
                    "dropped": r.dropped, "last_seen_ms": r.last_seen_ms, "components": comps})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).map_err(Failure::other)?);
        return Ok(0);
    }
    println!(
        "{:<20} {:<10} {:>10} {:>8} {:>8}  KUBELET",
        "NODE", "ROLE", "LAST SEEN", "REPORTS", "DROPPED"
    );
    for r in &rows {
        let kubelet = r
            .last
            .iter()
            .flat_map(|l| &l.components)
            .find(|c| c.name == "kubelet")
            .map(|c| {
                if c.reason.is_empty() {
                    c.state.clone()
                } else {
                    format!("{}: {}", c.state, c.reason)
                }
            })
            .unwrap_or_default();
        println!(
            "{:<20} {:<10} {:>9}s {:>8} {:>8}  {kubelet}",
            r.node,
            r.role,
            (now - r.last_seen_ms) / 1000,
            r.reports,
            r.dropped
        );
    }
    Ok(0)
}
