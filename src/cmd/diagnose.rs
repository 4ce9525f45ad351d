//! `hardshift diagnose [NODE]`: why each node is stuck, from the collector's store: root causes
//! first, each with its rule id, the evidence and a fix (collector/src/diagnose.rs).

use crate::failure::Failure;
use hardshift_collector::diagnose::{self, Finding};

#[derive(clap::Args)]
pub struct Args {
    /// Only this node.
    #[arg(conflicts_with = "rules")]
    node: Option<String>,
    /// List every rule: its id, severity, what it is about and what it covers (assisted-service
    /// host validations, node-problem-detector conditions); needs no store.
    #[arg(long)]
    rules: bool,
    #[command(flatten)]
    store: super::StoreArgs,
    #[arg(short, long, value_enum, default_value_t = super::Output::Table)]
    output: super::Output,
}

/// Every rule of the table, as `--rules` lists it.
fn rules(output: super::Output) -> Result<u8, Failure> {
    if output == super::Output::Json {
        let v: Vec<serde_json::Value> = diagnose::RULES
            .iter()
            .map(|r| serde_json::json!({"id": r.id, "severity": r.severity, "about": r.about, "covers": r.covers, "explains": r.explains}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v).map_err(|e| Failure::other(e.to_string()))?);
        return Ok(0);
    }
    println!("{:<6} {:<9} {:<72} COVERS", "ID", "SEVERITY", "ABOUT");
    for r in diagnose::RULES {
        let covers = if r.covers.is_empty() {
            "-".to_string()
        } else {
            r.covers.join(", ")
        };
        println!(
            "{:<6} {:<9} {:<72} {covers}",
            r.id,
            format!("{:?}", r.severity).to_lowercase(),
            r.about
        );
    }
    Ok(0)
}

pub fn run(a: Args) -> Result<u8, Failure> {
    if a.rules {
        return rules(a.output);
    }
    let store = a.store.open()?;
    let now = hardshift_collector::now_ms();
    let rows = store.nodes().map_err(a.store.broken())?;
    a.store.warn_if_halted();
    // The bundle's nodes, when the store is in its directory: those that never reported are
    // findings too.
    let inventory: Vec<_> = a
        .store
        .inventory()
        .iter()
        .flat_map(hardshift_collector::phase::Member::all)
        .collect();
    if let Some(said) = a.node.as_deref().and_then(|n| diagnose::unknown_node(n, &rows, &inventory)) {
        return Err(Failure::input(said));
    }
    let events = store.boot_events(None).map_err(a.store.broken())?;
    let macs: Vec<(String, String)> = a
        .store
        .inventory()
        .iter()
        .flat_map(|inv| inv.nodes.iter().map(|n| (n.name.clone(), n.mac.to_ascii_lowercase())))
        .collect();
    let boots = diagnose::Boots {
        events: &events,
        macs: &macs,
    };
    let findings = diagnose::findings(&rows, &inventory, a.node.as_deref(), now, &boots);
    if a.output == super::Output::Json {
        super::print_json(&findings, &a.store.scrubber())?;
        return Ok(0);
    }
    print(&findings);
    Ok(0)
}

/// The findings for a terminal, each with its evidence and fix.
fn print(findings: &[Finding]) {
    if findings.is_empty() {
        println!("nothing found: every reporting node looks healthy");
        return;
    }
    for f in findings {
        // Titles, evidence and fixes quote what nodes sent: escaped and scrubbed for the terminal.
        let clean = hardshift_collector::scrub::for_terminal;
        println!("{} {} {:?}: {}", clean(&f.node), f.id, f.severity, clean(&f.title));
        for e in &f.evidence {
            println!("    evidence: {}", clean(e));
        }
        println!("    fix: {}", clean(&f.fix.replace("NODE", &f.node)));
    }
}
