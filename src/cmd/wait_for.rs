//! `hardshift wait-for bootstrap-complete | pivot-ready | install-complete`: watch the phase
//! (collector/src/phase.rs) over the collector's store until the target's checks are all met
//! (exit 0), or the timeout passes (exit 1, naming the phase, every unmet check with its last
//! error, and each node's root cause).

use crate::failure::Failure;
use hardshift_collector::{diagnose, phase, store::Store};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// bootstrap-complete: bootkube done and the CVO running (the bootstrap must stay);
    /// pivot-ready: etcd and kube-apiserver on every master and no bootstrap etcd member (remove
    /// the bootstrap, switch HAProxy); install-complete: every ClusterOperator and the ClusterVersion Available.
    #[arg(value_parser = phase::TARGETS)]
    target: String,
    #[command(flatten)]
    cluster: super::ClusterArgs,
    /// The report database. Default: DIR/collector/reports.db
    #[arg(long)]
    db: Option<PathBuf>,
    /// Give up after this long. Default: 45m for bootstrap-complete, 60m for pivot-ready, 40m
    /// for install-complete (the installer's own waits).
    #[arg(long, value_parser = super::collector::parse_duration)]
    timeout: Option<Duration>,
    /// How often to look.
    #[arg(long, default_value = "2s", value_parser = super::collector::parse_duration)]
    interval: Duration,
    /// The outcome as one JSON object on stdout (progress still goes to stderr).
    #[arg(short, long, value_enum, default_value_t = super::Output::Table)]
    output: super::Output,
}

/// The outcome for `-o json`: reached or not, after how long, every check (met or not, with its
/// evidence) and each node's first finding.
fn outcome_json(
    target: &str,
    reached: bool,
    secs: u64,
    checks: &[phase::Check],
    findings: &[diagnose::Finding],
) -> Result<String, Failure> {
    let v = serde_json::json!({
        "target": target,
        "reached": reached,
        "seconds": secs,
        "checks": checks,
        "findings": findings,
    });
    serde_json::to_string_pretty(&v).map_err(Failure::other)
}

fn default_timeout(target: &str) -> Duration {
    Duration::from_secs(60)
        * match target {
            "bootstrap-complete" => 45,
            "pivot-ready" => 60,
            _ => 40,
        }
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let last = phase::target(&a.target).ok_or_else(|| Failure::input(format!("unknown target {}", a.target)))?;
    let cluster = a.cluster.load()?;
    let inventory: Vec<phase::Member> = cluster
        .nodes
        .iter()
        .map(|n| phase::Member {
            name: n.hostname.clone(),
            role: n.role.as_str().to_string(),
        })
        .collect();
    let db = super::db_path(&a.cluster.dir, a.db.clone());
    let timeout = a.timeout.unwrap_or_else(|| default_timeout(&a.target));
    let start = Instant::now();
    let mut shown: Option<String> = None;
    loop {
        let now = hardshift_collector::now_ms();
        // The store appears when the collector first starts: until then, nothing is known.
        let seen = match db.exists() {
            false => None,
            true => {
                let broken = |e| super::broken_store(&db, e);
                let s = Store::read(&db).map_err(broken)?;
                let rows = s.nodes().map_err(broken)?;
                let api = s.api_objects().map_err(broken)?;
                let contact = s.api_status().map_err(broken)?;
                Some((phase::checks(&inventory, &rows, &api, &contact, now), rows))
            }
        };
        let (checks, rows) = seen.unwrap_or_default();
        let unmet = if checks.is_empty() {
            vec![]
        } else {
            phase::unmet_until(&checks, last)
        };
        if !checks.is_empty() && unmet.is_empty() {
            if a.output == super::Output::Json {
                println!("{}", outcome_json(&a.target, true, start.elapsed().as_secs(), &checks, &[])?);
                return Ok(0);
            }
            println!(
                "{} reached after {} s: {}",
                a.target,
                start.elapsed().as_secs(),
                checks
                    .iter()
                    .find(|c| c.id == last)
                    .map(|c| c.evidence.join("; "))
                    .unwrap_or_default()
            );
            return Ok(0);
        }
        let now_phase = unmet
            .first()
            .map(|c| format!("{} ({})", c.title, c.evidence.first().cloned().unwrap_or_default()))
            .unwrap_or_else(|| format!("no store yet at {}: is `hardshift collector` running?", db.display()));
        if shown.as_ref() != Some(&now_phase) {
            let done = checks.iter().take_while(|c| c.met).count();
            eprintln!("[{:>5} s] phase {done}/{}: {now_phase}", start.elapsed().as_secs(), checks.len());
            shown = Some(now_phase.clone());
        }
        if start.elapsed() >= timeout {
            // The first finding of each node: what to look at first.
            let firsts: Vec<diagnose::Finding> = rows
                .iter()
                .filter_map(|r| {
                    r.last
                        .as_ref()
                        .and_then(|l| diagnose::diagnose(&r.node, &r.role, l, now - r.last_seen_ms).into_iter().next())
                })
                .collect();
            if a.output == super::Output::Json {
                println!("{}", outcome_json(&a.target, false, start.elapsed().as_secs(), &checks, &firsts)?);
                return Ok(1);
            }
            println!(
                "timed out after {} waiting for {}: the install is at \"{}\"",
                fmt_duration(timeout),
                a.target,
                unmet.first().map(|c| c.title).unwrap_or("no store")
            );
            if unmet.is_empty() {
                println!("  {now_phase}");
            }
            for c in &unmet {
                println!("  unmet: {}", c.title);
                for e in &c.evidence {
                    println!("      {e}");
                }
            }
            for f in &firsts {
                println!("  {} {} {:?}: {}", f.node, f.id, f.severity, f.title);
            }
            return Ok(1);
        }
        std::thread::sleep(
            a.interval
                .min(timeout.saturating_sub(start.elapsed()))
                .max(Duration::from_millis(50)),
        );
    }
}

fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}
