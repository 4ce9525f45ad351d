//! `hardshift wait-for bootstrap-complete | pivot-ready | install-complete`: watch the phase
//! (collector/src/phase.rs) over the collector's store until the target's checks are all met
//! (exit 0), or the timeout passes (exit 1, naming the phase, every unmet check with its last
//! error, and each node's root cause).

use crate::failure::Failure;
use hardshift_collector::{phase, wait};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// bootstrap-complete: bootkube done and the CVO running (the bootstrap must stay);
    /// pivot-ready: etcd and kube-apiserver on every master and no bootstrap etcd member (remove
    /// the bootstrap, switch HAProxy); install-complete: every ClusterOperator and the ClusterVersion Available.
    #[arg(value_parser = phase::TARGETS)]
    target: String,
    #[command(flatten)]
    bundle: super::BundleArgs,
    /// The report database. Default: DIR/collector/reports.db
    #[arg(long)]
    db: Option<PathBuf>,
    /// Give up after this long. Default: 45m for bootstrap-complete, 60m for pivot-ready, 40m
    /// for install-complete (the installer's own waits).
    #[arg(long, value_parser = super::parse_duration)]
    timeout: Option<Duration>,
    /// How often to look.
    #[arg(long, default_value = "2s", value_parser = super::parse_duration)]
    interval: Duration,
    /// The outcome as one JSON object on stdout (progress still goes to stderr).
    #[arg(short, long, value_enum, default_value_t = super::Output::Table)]
    output: super::Output,
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let last = phase::target(&a.target).ok_or_else(|| Failure::input(format!("unknown target {}", a.target)))?;
    let inventory = phase::Member::all(&a.bundle.inventory()?);
    let db = super::db_path(&a.bundle.dir, a.db.clone());
    let timeout = a.timeout.unwrap_or_else(|| wait::default_timeout(&a.target));
    let outcome = wait::until(&db, &inventory, (&a.target, last), timeout, a.interval, &mut |l| eprintln!("{l}"))
        .map_err(|e| super::broken_store(&db, e))?;
    say(a.output == super::Output::Json, &outcome.json, &outcome.lines)?;
    Ok(if outcome.reached { 0 } else { 1 })
}

/// The outcome: one JSON object, or lines.
fn say(json: bool, v: &serde_json::Value, lines: &[String]) -> Result<(), Failure> {
    if json {
        println!("{}", serde_json::to_string_pretty(v).map_err(Failure::other)?);
    } else {
        lines.iter().for_each(|l| println!("{l}"));
    }
    Ok(())
}
