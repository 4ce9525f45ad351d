//! `hardshift diagnose [NODE]`: why each node is stuck, from the collector's store: root causes
//! first, each with its rule id, the evidence and a fix (collector/src/diagnose.rs).

use crate::Failure;
use hardshift_collector::diagnose::{self, Finding};

#[derive(clap::Args)]
pub struct Args {
    /// Only this node.
    node: Option<String>,
    #[command(flatten)]
    store: super::collector::StoreArgs,
    #[arg(short, long, value_enum, default_value_t = super::Output::Table)]
    output: super::Output,
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let store = a.store.open()?;
    let now = hardshift_collector::now_ms();
    let rows = store.nodes().map_err(Failure::other)?;
    if let Some(n) = &a.node {
        if !rows.iter().any(|r| &r.node == n) {
            let known: Vec<&str> = rows.iter().map(|r| r.node.as_str()).collect();
            return Err(Failure::input(format!(
                "no reports from {n:?} (nodes reporting: {})",
                known.join(", ")
            )));
        }
    }
    let findings: Vec<Finding> = rows
        .iter()
        .filter(|r| a.node.as_ref().is_none_or(|n| &r.node == n))
        .flat_map(|r| match &r.last {
            Some(l) => diagnose::diagnose(&r.node, &r.role, l, now - r.last_seen_ms),
            None => diagnose::no_report(&r.node, now - r.last_seen_ms),
        })
        .collect();
    if a.output == super::Output::Json {
        println!("{}", serde_json::to_string_pretty(&findings).map_err(Failure::other)?);
        return Ok(0);
    }
    if findings.is_empty() {
        println!("nothing found: every reporting node looks healthy");
        return Ok(0);
    }
    for f in &findings {
        // Titles, evidence and fixes quote what nodes sent: escaped and scrubbed for the terminal.
        let clean = hardshift_collector::scrub::for_terminal;
        println!("{} {} {:?}: {}", clean(&f.node), f.id, f.severity, clean(&f.title));
        for e in &f.evidence {
            println!("    evidence: {}", clean(e));
        }
        println!("    fix: {}", clean(&f.fix.replace("NODE", &f.node)));
    }
    Ok(0)
}
