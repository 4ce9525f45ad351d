//! `hardshift gather [NODE...] -o FILE.tar.gz`: what a support case needs, without SSH, through
//! the agents: each node's allow-listed journals, its failing containers' logs, etcd's members,
//! its newest report, events and diagnosis, plus the CSR decisions; secrets stripped; an index.
//! Every request is the agents' bounded, read-only kind, and each node's share is capped.

use crate::failure::Failure;
use hardshift_collector::gather;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The nodes (default: every node that ever reported).
    nodes: Vec<String>,
    #[command(flatten)]
    store: super::StoreArgs,
    /// Where to write the archive.
    #[arg(short, long)]
    output: PathBuf,
    /// Journal lines per unit (the agent caps it at 2000).
    #[arg(short = 'n', long, default_value_t = 2000)]
    lines: u32,
    /// The collector's admin socket. Default: DIR/collector/admin.sock
    #[arg(long)]
    socket: Option<PathBuf>,
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let store = a.store.open()?;
    let decisions = a.store.dir.join(hardshift_bundle::layout::CSR_DECISIONS);
    let req = gather::Request {
        nodes: a.nodes,
        lines: a.lines,
        socket: a.socket.clone().unwrap_or_else(|| super::logs::admin_socket(&a.store.dir)),
        secrets: hardshift_bundle::secrets::secrets(&a.store.dir),
        csr_decisions: std::fs::read_to_string(&decisions).ok(),
    };
    let ar = gather::gather(&store, &req, hardshift_collector::now_ms()).map_err(|e| match e {
        gather::Error::Unknown(m) => Failure::input(m),
        gather::Error::Store(e) => a.store.broken()(e),
        gather::Error::Other(m) => Failure::other(m),
    })?;
    gather::write(&a.output, &ar.files).map_err(|e| Failure::other(format!("{}: {e}", a.output.display())))?;
    println!(
        "wrote {} ({} files, {} requests unanswered: see index.json)",
        a.output.display(),
        ar.files.len(),
        ar.unanswered()
    );
    Ok(0)
}
