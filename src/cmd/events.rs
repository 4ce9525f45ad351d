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
    let all = events::timeline(&store, a.node.as_deref()).map_err(a.store.broken())?;
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
