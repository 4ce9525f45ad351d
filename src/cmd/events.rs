//! `hardshift events [NODE]`: what changed and when, the agents' and the API's changes on one timeline.

use crate::failure::Failure;
use hardshift_collector::events;

#[derive(clap::Args)]
pub struct Args {
    /// Only this node.
    node: Option<String>,
    #[command(flatten)]
    store: super::StoreArgs,
    #[arg(short, long, value_enum, default_value_t = super::Output::Table)]
    output: super::Output,
}

/// State changes over time, oldest first.
pub fn run(a: Args) -> Result<u8, Failure> {
    let store = a.store.open()?;
    let nodes: Vec<String> = match &a.node {
        Some(n) => vec![n.clone()],
        None => store.nodes().map_err(a.store.broken())?.into_iter().map(|r| r.node).collect(),
    };
    let mut all = Vec::new();
    for n in &nodes {
        all.extend(events::changes(n, &store.reports(n).map_err(a.store.broken())?));
    }
    // What the API server said, on the same timeline: a Node's changes under its name, the
    // rest (CSRs, operators, pods) under "api".
    for c in store.api_changes().map_err(a.store.broken())? {
        // With a node named, its own Node object's changes and any naming it (its CSRs).
        let keep = a
            .node
            .as_ref()
            .is_none_or(|n| (c.kind == "Node" && c.name == *n) || c.change.contains(n.as_str()) || c.name.contains(n.as_str()));
        if keep {
            all.push(events::from_api(c));
        }
    }
    all.sort_by_key(|e| e.time_ms);
    a.store.warn_if_halted();
    if a.output == super::Output::Json {
        super::print_json(&all, &a.store.scrubber())?;
        return Ok(0);
    }
    for e in &all {
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(e.time_ms) * 1_000_000)
            .map(|t| format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second()))
            .unwrap_or_default();
        // What a node sent reaches the terminal escaped and scrubbed, never as is.
        let clean = hardshift_collector::scrub::for_terminal;
        let why = if e.reason.is_empty() {
            String::new()
        } else {
            format!("  ({})", clean(&e.reason))
        };
        let (node, component, to) = (clean(&e.node), clean(&e.component), clean(&e.to));
        if e.from.is_empty() {
            println!("{t}  {node:<16} {component:<10} {to}{why}");
        } else {
            println!("{t}  {node:<16} {component:<10} {} → {to}{why}", clean(&e.from));
        }
    }
    Ok(0)
}
