//! `hardshift create`: turn flags into a build request, pull the release when needed, run the
//! build (`hardshift_generator::pipeline`, which reads, makes and writes the bundle atomically, never
//! re-keying by accident), and say what it did.

use crate::failure::Failure;
use hardshift_generator::cluster::Cluster;
use hardshift_generator::cluster::{KeyAlgorithm, Role};
use hardshift_generator::fsio::{Staged, Written};
use hardshift_generator::pipeline::request::Bootstrap;
use hardshift_generator::pipeline::{self, Created, Request};
use hardshift_generator::pki::{Outcome, Pki};
use hardshift_generator::{ignition, kubeadmin, layout};
use std::path::{Path, PathBuf};

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

/// Without DIR/release/image-references (and no --release-refs), the release comes from its
/// registry, through the mirrors, or from DIR/release/cache. Returns whether a registry answered.
fn release_from_registry(req: &Request, rt: &tokio::runtime::Runtime) -> Result<Option<super::release::Access>, Failure> {
    if req.release_refs.is_some() || req.dir.join(layout::RELEASE_REFS).exists() {
        return Ok(None);
    }
    let acc = super::release::access(&req.dir, req.release_image.as_deref())?;
    if acc.image.is_none() {
        return Ok(None); // read_sources says what is missing, and how to get it
    }
    println!("{}", super::release::pull_into(rt, &acc)?);
    Ok(Some(acc))
}

/// The mirror check, when a registry is in reach (one TCP connect within a second says so).
fn mirror_check(rt: &tokio::runtime::Runtime, acc: Option<super::release::Access>) {
    let Some(acc) = acc else { return };
    let Some(first) = acc.sources.iter().flat_map(|s| s.mirrors.first()).next().cloned() else {
        return;
    };
    let host = first.split('/').next().unwrap_or("").to_string();
    let addr = if host.contains(':') { host.clone() } else { format!("{host}:443") };
    let reachable = rt.block_on(async {
        matches!(
            tokio::time::timeout(std::time::Duration::from_secs(1), tokio::net::TcpStream::connect(addr.as_str())).await,
            Ok(Ok(_))
        )
    });
    if !reachable {
        println!("mirror-check: skipped, {host} is not reachable from here (run `hardshift mirror-check` where it is)");
        return;
    }
    match super::release::check_and_report(rt, &acc, 16, super::Output::Table) {
        Ok(0) => {}
        Ok(_) => println!("WARNING: the mirror lacks images the nodes will pull (above): mirror them before booting"),
        Err(f) => println!("mirror-check: {}", f.message),
    }
}

impl Args {
    /// The build these flags ask for. The agent defaults to the one beside this executable.
    fn request(&self) -> Request {
        let agent = match (&self.agent_binary, self.no_agent) {
            (_, true) => None,
            (Some(p), false) => Some(p.clone()),
            (None, false) => {
                let beside = pipeline::request::beside_executable();
                if beside.is_none() {
                    eprintln!("warning: no hardshift-agent next to this executable: the nodes get no agent (build it with `cargo build --release --workspace`, or pass --agent-binary PATH or --no-agent)");
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
    let pulled = release_from_registry(&req, &rt)?;
    let created = pipeline::create(&req, pipeline::cache::user(), &mut |m| eprintln!("warning: {m}"))?;
    let unchanged = matches!(created.written, Written::Unchanged(_));
    say(&created);
    if !a.mirror_check {
        // Offline by default: no lookup, no connect, on an air-gapped generator.
        if !unchanged || pulled.is_some() {
            println!("mirror-check: not run (create stays offline; `--mirror-check`, or `hardshift mirror-check --dir DIR` where the mirror is in reach)");
        }
        return Ok(0);
    }
    let acc = match pulled {
        Some(acc) => Some(acc),
        None => super::release::access(&req.dir, req.release_image.as_deref()).ok(),
    };
    mirror_check(&rt, acc);
    Ok(0)
}

/// What `create` made and wrote, in lines.
fn say(created: &Created) {
    let Created {
        made,
        written,
        rerun,
        dir,
        from_renders,
    } = created;
    let (cluster, extras) = (&made.cluster, &made.extras);
    let count = |r| cluster.nodes.iter().filter(|n| n.role == r).count();
    println!(
        "cluster {}: {} nodes ({} bootstrap, {} masters, {} workers), API {} , ingress {}",
        cluster.domain(),
        cluster.nodes.len(),
        count(Role::Bootstrap),
        count(Role::Master),
        count(Role::Worker),
        cluster.api_vip,
        cluster.ingress_vip
    );
    say_pki(cluster, &made.pki, *rerun);
    say_configs(dir, made);
    if *from_renders {
        println!(
            "masters and workers: merged into the release's own rendered MachineConfigs ({})",
            dir.join(layout::RENDER).display()
        );
    }
    match &made.extras.renders {
        Some(r) => println!(
            "bootstrap control plane: the release's renders ({}): {} static pods, {} configs, {} manifests and {} CRDs of theirs",
            dir.join(layout::RENDER).display(),
            r.pods.len(),
            r.configs.len(),
            r.manifests.len(),
            r.crds.len()
        ),
        // Said once a run, plainly: the release's operators will find a control plane they did not render.
        None if pipeline::rendered::has_renders(dir) => println!("bootstrap control plane: hardshift's own static pods, as asked, not the release's renders beside it (`hardshift render --diff` shows how they differ)"),
        None => println!("bootstrap control plane: hardshift's own static pods, not the release's renders (`hardshift render` makes them, and the next `create` uses them; `hardshift render --diff` shows how they differ)"),
    }
    say_written(dir, made, written);
    println!("admin kubeconfig: {}", dir.join(layout::ADMIN_KUBECONFIG).display());
    if made.new_password {
        // Shown once, when made; afterwards only the 0600 file holds it.
        println!(
            "console login: kubeadmin / {} (kept in {})",
            extras.kubeadmin.as_ref().map_or("", |k| k.password.as_str()),
            dir.join(kubeadmin::PASSWORD_FILE).display()
        );
    }
}

/// The PKI's tally, and each entry re-issued (or, on a re-run, created) with why.
fn say_pki(cluster: &Cluster, pki: &Pki, rerun: bool) {
    let tally = |f: fn(&Outcome) -> bool| pki.entries.iter().filter(|e| f(&e.outcome)).count();
    println!(
        "PKI: {} entries ({} keys for new entries): {} created, {} reused, {} re-issued",
        pki.entries.len(),
        cluster.pki.key_algorithm.as_str(),
        tally(|o| *o == Outcome::Created),
        tally(|o| *o == Outcome::Reused),
        tally(|o| matches!(o, Outcome::Reissued(_)))
    );
    for e in &pki.entries {
        match &e.outcome {
            Outcome::Reissued(why) => println!("  re-issued {}: {why}", e.spec.id()),
            Outcome::Created if rerun => println!("  created {}", e.spec.id()),
            _ => {}
        }
    }
}

/// The Ignition spec, the CRDs, the agent, and one line per node's config.
fn say_configs(dir: &Path, made: &pipeline::Made<Staged>) {
    let (cluster, extras) = (&made.cluster, &made.extras);
    // A node merged into a newer base keeps the base's version (the MCO renders 3.4.0).
    let parse = |v: &str| v.split('.').map(|p| p.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>();
    let mut versions: Vec<String> = extras
        .bases
        .values()
        .map(|b| &b.ignition.version)
        .filter(|v| parse(v) > parse(ignition::VERSION))
        .cloned()
        .collect();
    versions.push(ignition::VERSION.to_string());
    versions.sort();
    versions.dedup();
    println!(
        "ignition (spec {}), {} CRDs for bootkube, {}:",
        versions.join(" and "),
        extras.crds.len(),
        match &extras.agent {
            Some(b) if b.is_remote() => format!(
                "hardshift-agent fetched from {} (serve {}/http/ there)",
                b.encoded.source.as_deref().unwrap_or(""),
                dir.display()
            ),
            Some(b) => format!("hardshift-agent ({:.1} MiB) on every node", b.bytes.len() as f64 / 1048576.0),
            None => "no node agent".to_string(),
        }
    );
    for n in &made.nodes {
        let how = match &n.merge {
            Some(m) => format!(
                "merged into the MCO {} base ({} files, {} units; {} replaced, {} kept from the base, {} merged)",
                n.role.as_str(),
                m.base_files,
                m.base_units,
                m.replaced_files.len(),
                m.kept_files.len(),
                m.merged_units.len()
            ),
            None if n.role == Role::Bootstrap => "complete".to_string(),
            None => "self-contained (no --mco-base: hardshift's kubelet unit, no MCO files)".to_string(),
        };
        println!(
            "  ignition/{}.ign  {:<9} {:>4} files {:>3} units {:>8.1} KiB  {how}",
            n.hostname,
            n.role.as_str(),
            n.files,
            n.units,
            n.size as f64 / 1024.0
        );
    }
    if extras.agent.as_ref().is_some_and(|b| !b.is_remote()) && cluster.nodes.len() > 50 {
        println!(
            "hint: every config carries the agent binary; with {} nodes, --agent-url serves it once from the helper",
            cluster.nodes.len()
        );
    }
}

/// Where the bundle went, and what was repaired.
fn say_written(dir: &Path, made: &pipeline::Made<Staged>, written: &Written) {
    // An unchanged bundle was checked when it was written: a re-run stays instant.
    match written {
        Written::Unchanged(_) => println!("bundle unchanged: {} files in {}", made.bundle.files.len(), dir.display()),
        Written::New(g) => println!("wrote {} files to {} ({})", made.bundle.files.len(), dir.display(), g.display()),
        Written::Repaired { gen, damage, moved_to } => {
            // Same inputs, same bundle: the live copy had been changed on disk. Say what.
            println!(
                "repaired the live bundle ({} problems; the damaged copy is in {}):",
                damage.len(),
                moved_to.display()
            );
            for d in damage.iter().take(20) {
                println!("  {d}");
            }
            if damage.len() > 20 {
                println!("  ... and {} more", damage.len() - 20);
            }
            println!("wrote {} files to {} ({})", made.bundle.files.len(), dir.display(), gen.display());
        }
    }
}

fn parse_alg(s: &str) -> Result<KeyAlgorithm, String> {
    KeyAlgorithm::parse(s).ok_or_else(|| format!("expected {}", KeyAlgorithm::NAMES))
}
