//! `hardshift create`: turn flags into a request, pull the release when needed, run the pipeline
//! (`hardshift_generator::pipeline`, which reads, makes and writes the bundle atomically, never
//! re-keying by accident), and say what it did.

use crate::failure::Failure;
use hardshift_generator::cluster::{KeyAlgorithm, Role};
use hardshift_generator::created::lines as created_said;
use hardshift_generator::fsio::Written;
use hardshift_generator::pipeline::request::Bootstrap;
use hardshift_generator::pipeline::{self, Request};
use hardshift_generator::release_pull::{self as pull, check};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    input: super::ClusterArgs,
    /// Key algorithm for new OpenShift keys (existing keys are kept): rsa-2048, rsa-4096, ecdsa-p256.
    #[arg(long, value_parser = parse_alg)]
    key_algorithm: Option<KeyAlgorithm>,
    /// Replace every CA, and so every certificate. Only for a cluster that does not run yet.
    #[arg(long)]
    rotate_ca: bool,
    /// MCO-rendered base configs to merge into: `master=FILE,worker=FILE` (an Ignition config or
    /// the rendered MachineConfig). Without one, nodes get a self-contained config.
    #[arg(long, value_delimiter = ',', value_parser = pipeline::request::parse_base)]
    mco_base: Vec<(Role, PathBuf)>,
    /// Give masters and workers hardshift's own kubelet and nothing of the MCO's OS configuration
    /// (no br-ex, no Open vSwitch). Without an MCO base (`--mco-base`, or DIR/mco/rendered/ from
    /// `hardshift mco`), an OVNKubernetes cluster is refused unless this says you know.
    #[arg(long)]
    self_contained_nodes: bool,
    /// The hardshift-agent binary to place on every node. Default: the one built with this
    /// `hardshift` (next to its executable).
    #[arg(long)]
    agent_binary: Option<PathBuf>,
    /// Leave the node agent out of the Ignition configs.
    #[arg(long, conflicts_with = "agent_binary")]
    no_agent: bool,
    /// Have Ignition fetch the agent from this URL (pinned by SHA-512) instead of embedding it in
    /// every config; serve DIR/http/ there. For clusters with many nodes.
    #[arg(long)]
    agent_url: Option<String>,
    /// No live configs (`live/NODE.ign`): the nodes install by RHCOS's own `coreos.inst.*` kernel
    /// arguments, unwatched until their installed system's agent runs (hardshift.yaml's
    /// `lab.liveAgent: false` does the same). Recorded: `verify` and a later `create` keep it.
    #[arg(long)]
    no_live_agent: bool,
    /// Check, once written, that the mirror holds every image of the release (reaches the
    /// network: create is offline otherwise; `hardshift mirror-check` does the same alone).
    #[arg(long, conflicts_with = "no_mirror_check")]
    mirror_check: bool,
    /// Whose control plane the bootstrap runs: `renders`, the one the release's renders made
    /// (`hardshift render`: their etcd, kube-apiserver, controller-manager and scheduler pods,
    /// configs and secrets, and the manifests they make), or `native`, hardshift's own static
    /// pods. Default: the renders' when DIR/render holds renders, else hardshift's own. What was
    /// chosen is recorded: `verify` makes the same.
    #[arg(long, value_enum, value_name = "WHOSE")]
    bootstrap_control_plane: Option<ControlPlane>,
    /// The same as `--bootstrap-control-plane renders` (kept so existing scripts run).
    #[arg(long, hide = true, conflicts_with = "bootstrap_control_plane")]
    bootstrap_from_renders: bool,
    /// The default (kept so existing scripts run): no mirror check.
    #[arg(long, hide = true)]
    no_mirror_check: bool,
}

/// `--bootstrap-control-plane`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ControlPlane {
    /// The release's renders' (DIR/render).
    Renders,
    /// hardshift's own static pods.
    Native,
}

/// The mirror check, when a registry is in reach (one TCP connect within a second says so).
fn mirror_check(rt: &tokio::runtime::Runtime, acc: Option<pull::Access>) {
    let Some(acc) = acc else { return };
    match rt.block_on(check::mirror_in_reach(&acc)) {
        None => {}
        Some(check::Reach::Silent(host)) => {
            println!("mirror-check: skipped, {host} is not reachable from here (run `hardshift mirror-check` where it is)")
        }
        Some(check::Reach::Answers(_)) => match super::release::check_and_report(rt, &acc, 16, super::Output::Table) {
            Ok(0) => {}
            Ok(_) => println!("WARNING: the mirror lacks images the nodes will pull (above): mirror them before booting"),
            Err(f) => println!("mirror-check: {}", f.message),
        },
    }
}

impl Args {
    /// The bundle these flags ask for. The agent defaults to the one beside this executable.
    fn request(&self) -> Request {
        let agent = match (&self.agent_binary, self.no_agent) {
            (_, true) => None,
            (Some(p), false) => Some(p.clone()),
            (None, false) => {
                let beside = pipeline::request::beside_executable();
                if beside.is_none() {
                    eprintln!("warning: no hardshift-agent next to this executable: the nodes get no agent (build it with `cargo build --profile agent -p hardshift-agent`, or pass --agent-binary PATH or --no-agent)");
                }
                beside
            }
        };
        Request {
            dir: self.input.dir.clone(),
            release_image: self.input.release_image.clone(),
            release_refs: self.input.release_refs.clone(),
            key_algorithm: self.key_algorithm,
            rotate_ca: self.rotate_ca,
            mco_base: self.mco_base.clone(),
            self_contained_nodes: self.self_contained_nodes,
            agent,
            agent_url: self.agent_url.clone(),
            no_live_agent: self.no_live_agent,
            crypto_fips: Some(hardshift_crypto::module().fips),
            bootstrap: match (self.bootstrap_control_plane, self.bootstrap_from_renders) {
                (Some(ControlPlane::Renders), _) | (None, true) => Bootstrap::Renders,
                (Some(ControlPlane::Native), _) => Bootstrap::Native,
                (None, false) => Bootstrap::Auto,
            },
        }
    }
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let req = a.request();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Failure::other)?;
    let progress = crate::progress::Progress::new(crate::progress::Mode::pick(false));
    let pull = pull::for_create(&req.dir, req.release_refs.as_deref(), req.release_image.as_deref(), &progress);
    let pulled = rt.block_on(pull)?.map(|(acc, line)| {
        println!("{line}");
        acc
    });
    let created = pipeline::create(&req, pipeline::cache::user(), &mut |m| eprintln!("warning: {m}"))?;
    let unchanged = matches!(created.written, Written::Unchanged(_));
    created_said(&created).iter().for_each(|l| println!("{l}"));
    if !a.mirror_check {
        // Offline by default: no lookup, no connect, on an air-gapped generator.
        if !unchanged || pulled.is_some() {
            println!("mirror-check: not run (create stays offline; `--mirror-check`, or `hardshift mirror-check --dir DIR` where the mirror is in reach)");
        }
        return Ok(0);
    }
    let acc = match pulled {
        Some(acc) => Some(acc),
        None => pull::access(&req.dir, req.release_image.as_deref()).ok(),
    };
    mirror_check(&rt, acc);
    Ok(0)
}

fn parse_alg(s: &str) -> Result<KeyAlgorithm, String> {
    KeyAlgorithm::parse(s).ok_or_else(|| format!("expected {}", KeyAlgorithm::NAMES))
}
