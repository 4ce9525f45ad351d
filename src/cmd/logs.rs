//! `hardshift logs NODE WHAT`: one bounded, read-only debug request to a node through the
//! collector's admin socket.

use crate::failure::Failure;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The node, as its agent certificate names it.
    node: String,
    /// An allow-listed unit (kubelet, crio, bootkube, release-image, hardshift-agent), `etcd-members`,
    /// or with --container a container id or namespace/pod/container.
    what: String,
    /// WHAT is a container: its log through the CRI.
    #[arg(long)]
    container: bool,
    /// Lines, newest last (the agent caps it at 2000).
    #[arg(short = 'n', long, default_value_t = 100)]
    lines: u32,
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// The collector's admin socket. Default: DIR/collector/admin.sock
    #[arg(long)]
    socket: Option<PathBuf>,
}

pub fn admin_socket(dir: &std::path::Path) -> PathBuf {
    dir.join(hardshift_generator::layout::ADMIN_SOCKET)
}

/// Ask a connected node, through the running collector, for bounded read-only output.
pub fn run(a: Args) -> Result<u8, Failure> {
    let kind = hardshift_collector::admin::kind(&a.what, a.container, a.lines);
    let socket = a.socket.clone().unwrap_or_else(|| admin_socket(&a.dir));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Failure::other)?;
    let resp = rt
        .block_on(hardshift_collector::admin::ask(&socket, &a.node, kind))
        .map_err(Failure::other)?;
    // What a node logged leaves it scrubbed: by structure, by pattern, and the bundle's own
    // secrets by value; escaped for the terminal.
    let scrubber = hardshift_collector::scrub::Scrubber::with_values(hardshift_bundle::secrets::secrets(&a.dir));
    let text = scrubber.scrub(&resp.lines.join("\n"));
    for l in text.lines() {
        println!("{}", hardshift_collector::scrub::for_terminal(l));
    }
    if resp.truncated {
        eprintln!("(cut at the agent's bound)");
    }
    if !resp.error.is_empty() {
        // The node refused or could not answer: name it, as the node said it.
        return Err(Failure::input(format!("{}: {}", a.node, resp.error)));
    }
    Ok(0)
}
