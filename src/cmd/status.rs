//! `hardshift status`: the install's phase, then a line per node from the collector's store.

use crate::failure::Failure;
use hardshift_collector::phase::Member;
use hardshift_collector::status;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    store: super::StoreArgs,
    #[arg(short, long, value_enum, default_value_t = super::Output::Table)]
    output: super::Output,
}

/// One row per node from the collector's store, then a row for each node of the bundle that never
/// reported (a machine that did not boot, fetch its config or reach the collector).
pub fn run(a: Args) -> Result<u8, Failure> {
    let store = a.store.open()?;
    let rows = store.nodes().map_err(a.store.broken())?;
    // A collector that stopped acknowledging is said first, and makes the exit status 1.
    let code = u8::from(a.store.warn_if_halted());
    let now = hardshift_collector::now_ms();
    let sums: Vec<_> = rows.iter().map(|r| hardshift_collector::summary::summarize(r, now)).collect();
    // The bundle's nodes, when the store is in the bundle's directory.
    let bundle = a.store.inventory();
    let inventory: Vec<status::Listed> = bundle
        .iter()
        .flat_map(|inv| Member::all(inv).into_iter().zip(inv.nodes.iter().map(|n| n.ip.to_string())))
        .collect();
    let silent = status::silent(&inventory, &rows);
    let boot = store.boot_events(None).map_err(a.store.broken())?;
    if a.output == super::Output::Json {
        super::print_json(&status::json(&rows, &sums, &silent, &boot), &a.store.scrubber())?;
        return Ok(code);
    }
    if bundle.is_some() {
        let members: Vec<_> = inventory.iter().map(|(m, _)| m.clone()).collect();
        println!("{}", status::phase_line(&store, &members, &rows, now).map_err(a.store.broken())?);
    }
    let lines = [status::table(&rows, &sums, &silent, &boot), status::hardware(&rows)];
    lines.iter().flatten().for_each(|l| println!("{l}"));
    Ok(code)
}
