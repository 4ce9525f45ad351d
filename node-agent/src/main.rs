//! `hardshift-agent`: runs on every RHCOS node and reports its health to the collector.
//! The probes and the protocol arrive with the live-node-health issue; until then it only says so.

fn main() {
    eprintln!("hardshift-agent {}: probes are not built yet", env!("CARGO_PKG_VERSION"));
    std::process::exit(1);
}
