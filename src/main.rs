//! `hardshift`: the workstation CLI. Parsing and printing only; the work is in the libraries.

mod cmd;
mod failure;
mod progress;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;
use std::sync::LazyLock;

/// `-V` and `--version`: the release the bundles target, then (long) the crypto module.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    use hardshift_generator::release::{TARGET_KUBERNETES, TARGET_OPENSHIFT};
    format!(
        "{} (OpenShift {TARGET_OPENSHIFT}, Kubernetes {TARGET_KUBERNETES})",
        env!("CARGO_PKG_VERSION")
    )
});
static LONG_VERSION: LazyLock<String> = LazyLock::new(|| {
    let crypto = hardshift_crypto::long_version!().split_once('\n').map_or("", |(_, c)| c);
    format!("{}\n{crypto}", *VERSION)
});

#[derive(Parser)]
#[command(name = "hardshift", version = VERSION.as_str(), long_version = LONG_VERSION.as_str(), about = "OpenShift on bare metal and KVM, the hard way, done right")]
struct Cli {
    /// More log detail from the long-running commands (collector, watch): -v debug, -vv trace.
    /// RUST_LOG, when set, wins.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

/// Logs go to stderr, one line each, the node as a field where there is one.
fn logging(verbose: u8) {
    use std::io::IsTerminal;
    let level = ["info", "debug", "trace"][usize::from(verbose.min(2))];
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("warn,hardshift={level},hardshift_collector={level}")));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

#[derive(Subcommand)]
enum Command {
    /// Build the install bundle from install-config.yaml and agent-config.yaml, offline.
    Create(cmd::create::Args),
    /// Check a written bundle: sums, chains, key pairs, SANs, expiry, kubeconfigs.
    Verify(cmd::verify::Args),
    /// Regenerate only DIR/lab/ (DNS, DHCP, PXE, HAProxy, libvirt, install commands).
    Lab(cmd::lab::Args),
    /// Run the release's own renders (etcd, kube-apiserver, controller-manager, scheduler, MCO) over the bundle through podman, as bootkube.sh does.
    Render(cmd::render::Args),
    /// Write DIR/mco/: the machine-config-operator's inputs and render.sh (the MCO render).
    Mco(cmd::mco::Args),
    /// Receive the node agents' reports over mTLS and store them.
    Collector(cmd::collector::Args),
    /// What the collector knows: a row per node.
    Status(cmd::status::Args),
    /// State changes over time ("kubelet healthy → not listening"), from the stored reports.
    Events(cmd::events::Args),
    /// A node's journal (allow-listed units), a container's log, or etcd's members, via the collector.
    Logs(cmd::logs::Args),
    /// A support archive without SSH: journals, container logs, etcd members, reports, events, diagnosis.
    Gather(cmd::gather::Args),
    /// Why each node is stuck: root causes first, with evidence and a fix.
    Diagnose(cmd::diagnose::Args),
    /// Approve the kubelets' CSRs the machine-approver's rules allow for this inventory, and say why not for the rest.
    ApproveCsrs(cmd::approve_csrs::Args),
    /// The release straight from its registry: `pull` (into DIR/release/, cached) or `show`.
    Release(cmd::release::Args),
    /// Before anything boots: an authenticated manifest HEAD, through the mirrors, for every image the nodes will pull.
    MirrorCheck(cmd::release::CheckArgs),
    /// Watch the API (Nodes, CSRs, ClusterOperators, ClusterVersion, control-plane pods) into the store.
    Watch(cmd::watch::Args),
    /// Wait for bootstrap-complete, pivot-ready or install-complete; on timeout, say what is unmet and why.
    WaitFor(cmd::wait_for::Args),
    /// A shell completion script for bash, zsh, fish, elvish or PowerShell, on stdout.
    Completions(cmd::docs::CompletionsArgs),
    /// Write the man pages (one per command) into a directory.
    Man(cmd::docs::ManArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A command whose output goes to `head` or `less` stops quietly when the reader does, as
    // Unix tools do, instead of panicking on a broken pipe. Not the servers and the commands
    // that talk over a unix socket: there a closed peer is an error to report, not a signal.
    if !matches!(
        cli.command,
        Command::Collector(_) | Command::Watch(_) | Command::Logs(_) | Command::Gather(_)
    ) {
        // SAFETY: the default disposition, set before any thread starts.
        let _ = unsafe { nix::sys::signal::signal(nix::sys::signal::Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl) };
    }
    logging(cli.verbose);
    hardshift_crypto::install();
    let result = match cli.command {
        Command::Create(a) => cmd::create::run(a),
        Command::Verify(a) => cmd::verify::run(a),
        Command::Lab(a) => cmd::lab::run(a),
        Command::Mco(a) => cmd::mco::run(a),
        Command::Render(a) => cmd::render::run(a),
        Command::Collector(a) => cmd::collector::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Events(a) => cmd::events::run(a),
        Command::Logs(a) => cmd::logs::run(a),
        Command::ApproveCsrs(a) => cmd::approve_csrs::run(a),
        Command::Diagnose(a) => cmd::diagnose::run(a),
        Command::Gather(a) => cmd::gather::run(a),
        Command::Watch(a) => cmd::watch::run(a),
        Command::Release(a) => cmd::release::run(a),
        Command::MirrorCheck(a) => cmd::release::mirror_check(a),
        Command::WaitFor(a) => cmd::wait_for::run(a),
        Command::Completions(a) => cmd::docs::completions(a, Cli::command()),
        Command::Man(a) => cmd::docs::man(a, Cli::command()),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("error: {}", failure::printable(f.message.trim_end()));
            ExitCode::from(f.code)
        }
    }
}
