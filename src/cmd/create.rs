//! `hardshift create`: read the inputs, pull the release when needed, and write the bundle (PKI,
//! kubeconfigs, one Ignition config per node, the lab) atomically, never re-keying by accident.

use super::load_cluster;
use crate::Failure;
use hardshift_generator::assets::{self, agent, Crd, Extras};
use hardshift_generator::bundle;
use hardshift_generator::cluster::{KeyAlgorithm, Role};
use hardshift_generator::config::{self, Overrides};
use hardshift_generator::fsio::{self, Written};
use hardshift_generator::ignition;
use hardshift_generator::kubeadmin;
use hardshift_generator::pki::{self, keys::SystemKeys, Outcome, PkiError};
use std::path::Path;
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
    #[arg(long, value_delimiter = ',', value_parser = parse_base)]
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
    /// The default (kept so existing scripts run): no mirror check.
    #[arg(long, hide = true)]
    no_mirror_check: bool,
}

/// Without DIR/release/image-references (and no --release-refs), the release comes from its
/// registry, through the mirrors, or from DIR/release/cache. Returns whether a registry answered.
fn release_from_registry(a: &Args, rt: &tokio::runtime::Runtime) -> Result<Option<super::release::Access>, Failure> {
    if a.input.release_refs.is_some() || a.input.dir.join(config::RELEASE_REFS).exists() {
        return Ok(None);
    }
    let acc = super::release::access(&a.input.dir, a.input.release_image.as_deref())?;
    if acc.image.is_none() {
        return Ok(None); // read_sources says what is missing, and how to get it
    }
    println!("{}", super::release::pull_into(&a.input.dir, rt, &acc)?);
    Ok(Some(acc))
}

/// The mirror check, when a registry is in reach (one TCP connect within a second says so).
fn mirror_check(a: &Args, rt: &tokio::runtime::Runtime, acc: Option<super::release::Access>) {
    if !a.mirror_check {
        // Offline by default: no lookup, no connect, on an air-gapped generator.
        println!("mirror-check: not run (create stays offline; `--mirror-check`, or `hardshift mirror-check --dir DIR` where the mirror is in reach)");
        return;
    }
    let acc = match acc {
        Some(acc) => acc,
        None => match super::release::access(&a.input.dir, a.input.release_image.as_deref()) {
            Ok(acc) => acc,
            Err(_) => return,
        },
    };
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
    match super::release::check_and_report(&a.input.dir, rt, &acc, 16, super::Output::Table) {
        Ok(0) => {}
        Ok(_) => println!("WARNING: the mirror lacks images the nodes will pull (above): mirror them before booting"),
        Err(f) => println!("mirror-check: {}", f.message),
    }
}

/// A check still running on an agent encoding taken from the cache: decoding 7 MB runs beside
/// the PKI and the configs, and a mismatch re-encodes and rebuilds the configs before anything
/// is written.
type CacheCheck = Option<(PathBuf, std::thread::JoinHandle<bool>)>;

/// Work started while the inputs are read, joined when its result is needed.
/// The agent binary being read (and its cached encoding checked) on a thread of its own.
type AgentRead = std::thread::JoinHandle<Result<(agent::Binary, CacheCheck), Failure>>;

struct Pending {
    /// The agent, read, hashed and its cached encoding looked up beside the PKI's first keys.
    agent: Option<(PathBuf, AgentRead)>,
    /// The kubeadmin login (and whether it is new): its bcrypt needs only the cluster's domain.
    admin: std::thread::JoinHandle<Result<(kubeadmin::Kubeadmin, bool), Failure>>,
}

/// The agent binary to embed: as given, else the sibling of this executable; None (with a
/// warning) if absent. Checked here, before anything is made; read by `load_agent`.
fn agent_path(a: &Args) -> Result<Option<PathBuf>, Failure> {
    if a.no_agent {
        return Ok(None);
    }
    let path = match &a.agent_binary {
        Some(p) => p.clone(),
        None => match std::env::current_exe()
            .ok()
            .map(|e| e.with_file_name("hardshift-agent"))
            .filter(|p| p.is_file())
        {
            Some(p) => p,
            None => {
                eprintln!("warning: no hardshift-agent next to this executable: the nodes get no agent (build it with `cargo build --release --workspace`, or pass --agent-binary PATH or --no-agent)");
                return Ok(None);
            }
        },
    };
    let mut magic = [0u8; 4];
    std::fs::File::open(&path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .map_err(|e| Failure::input(format!("--agent-binary {}: {e}", path.display())))?;
    if &magic != b"\x7fELF" {
        return Err(Failure::input(format!("--agent-binary {}: not an ELF executable", path.display())));
    }
    match &a.agent_url {
        Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
            Err(Failure::input(format!("--agent-url {url:?}: expected an http:// or https:// URL")))
        }
        _ => Ok(Some(path)),
    }
}

/// Read the agent at `path` (checked by `agent_path`): fetched from `url`, or embedded with its
/// encoding from the cache when there is one (checked beside other work, see `CacheCheck`).
/// `fips: true` embeds only an agent whose TLS runs on the FIPS module: it refuses to start
/// otherwise, and a node whose agent never starts reports nothing.
fn fips_agent(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    match hardshift_crypto::module_of_binary(bytes) {
        Some(m) if m.fips => Ok(()),
        found => Err(Failure::input(format!(
            "{}: fips: true embeds only an agent built with AWS-LC's FIPS module; this one is {}\n    hint: build it with `cargo build --release -p hardshift-agent --features fips` (needs cmake and Go), or pass --no-agent",
            path.display(),
            match found {
                Some(m) => format!("built with {m}"),
                None => "not a hardshift-agent of this version (it names no crypto module)".into(),
            }
        ))),
    }
}

fn load_agent(path: &Path, url: Option<&str>) -> Result<(agent::Binary, CacheCheck), Failure> {
    let bytes = std::fs::read(path).map_err(|e| Failure::input(format!("--agent-binary {}: {e}", path.display())))?;
    if !bytes.starts_with(b"\x7fELF") {
        return Err(Failure::input(format!("--agent-binary {}: not an ELF executable", path.display())));
    }
    if let Some(url) = url {
        return Ok((agent::Binary::remote(bytes, url), None));
    }
    // Compressing 7 MB costs most of a run; it changes only when the agent does.
    let cache = encoding_cache(&bundle::sha256_hex(&bytes));
    let hit = cache
        .as_ref()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|j| serde_json::from_slice::<ignition::Contents>(&j).ok());
    let Some((cache, c)) = cache.zip(hit) else {
        return Ok((agent::Binary::new(bytes), None));
    };
    // Mark the entry used, for `prune_cache`.
    let _ = std::fs::File::options()
        .write(true)
        .open(&cache)
        .and_then(|f| f.set_modified(std::time::SystemTime::now()));
    match agent::Binary::cached(bytes, c) {
        Ok(b) => {
            let check = b.clone();
            Ok((b, Some((cache, std::thread::spawn(move || check.encodes())))))
        }
        Err(bytes) => Ok((agent::Binary::new(bytes), None)),
    }
}

/// Where the agent's Ignition encoding is kept, by the binary's SHA-256: the user's cache
/// (`$XDG_CACHE_HOME/hardshift`, else `~/.cache/hardshift`), shared by every bundle. A hit is
/// used only if it decodes to the binary, so a damaged or forged entry costs a re-encode, no more.
fn encoding_cache(sha: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("hardshift").join(format!("agent-{sha}.contents.json")))
}

fn parse_base(part: &str) -> Result<(Role, PathBuf), String> {
    match part.split_once('=') {
        Some(("master", f)) => Ok((Role::Master, PathBuf::from(f))),
        Some(("worker", f)) => Ok((Role::Worker, PathBuf::from(f))),
        _ => Err(format!("{part:?}: expected master=FILE or worker=FILE")),
    }
}

/// CRDs from DIR/crds/ (name order) and the MCO bases: read and checked before anything is made.
fn read_extras(dir: &Path, bases: &[(Role, PathBuf)]) -> Result<Extras, Failure> {
    let mut extras = Extras::default();
    let mut problems = Vec::new();
    // The user's DIR/crds/, else the ones `hardshift release pull` took from the release.
    let crd_dir = [
        dir.join(hardshift_generator::layout::CRDS),
        dir.join(hardshift_generator::layout::RELEASE_CRDS),
    ]
    .into_iter()
    .find(|d| std::fs::read_dir(d).is_ok_and(|mut rd| rd.next().is_some()))
    .unwrap_or_else(|| dir.join(hardshift_generator::layout::CRDS));
    if let Ok(rd) = std::fs::read_dir(&crd_dir) {
        let mut names: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json"))
            .collect();
        names.sort();
        for p in names {
            match std::fs::read(&p) {
                Ok(contents) => extras.crds.push(Crd {
                    file: p.file_name().unwrap_or_default().to_string_lossy().to_string(),
                    contents,
                }),
                Err(e) => problems.push(format!("{}: {e}", p.display())),
            }
        }
    }
    if extras.crds.is_empty() && problems.is_empty() {
        // bootkube.sh waits for every CRD to be Established before the manifests: with none of
        // the release's, the manifests that need them never apply and the bootstrap hangs.
        problems.push(format!(
            "no CRDs in {} or {}: the bootstrap needs the release's config.openshift.io and ClusterVersion/ClusterOperator CRDs before its manifests apply (bootkube would hang at \"crds-established\"); run `hardshift release pull --dir {}` (from the registry, through the mirrors), or put them in {} (`oc adm release extract --to DIR/crds RELEASE`, keeping the *.crd.yaml of config.openshift.io and the CVO)",
            dir.join(hardshift_generator::layout::CRDS).display(),
            dir.join(hardshift_generator::layout::RELEASE_CRDS).display(),
            dir.display(),
            dir.join(hardshift_generator::layout::CRDS).display()
        ));
    }
    for (role, file) in bases {
        let text = std::fs::read_to_string(file).map_err(|e| e.to_string());
        match text.clone().and_then(|t| ignition::parse_base(&t)) {
            Ok(cfg) => {
                extras.bases.insert(*role, cfg);
                // A rendered MachineConfig (not a bare Ignition config): the node gets what the
                // machine-config server serves with it.
                if let Some(mc) = text.ok().and_then(|t| ignition::machine_config_of(&t)) {
                    extras.machine_configs.insert(*role, mc);
                }
            }
            Err(e) => problems.push(format!("{} (--mco-base {}): {e}", file.display(), role.as_str())),
        }
    }
    if problems.is_empty() {
        Ok(extras)
    } else {
        Err(Failure::input(format!(
            "{} problem(s) in the inputs:\n  {}",
            problems.len(),
            problems.join("\n  ")
        )))
    }
}

/// The MCO bases: as given, else DIR/mco/rendered/ when `hardshift mco`'s render.sh left one.
fn mco_bases(a: &Args) -> Result<Vec<(Role, PathBuf)>, Failure> {
    if !a.mco_base.is_empty() {
        return Ok(a.mco_base.clone());
    }
    let rendered = [
        (Role::Master, a.input.dir.join(hardshift_generator::mco::RENDERED_MASTER)),
        (Role::Worker, a.input.dir.join(hardshift_generator::mco::RENDERED_WORKER)),
    ];
    Ok(rendered.into_iter().filter(|(_, p)| p.is_file()).collect())
}

/// OVN-Kubernetes needs the MCO's OS configuration on every master and worker (configure-ovs.sh,
/// br-ex, openvswitch): without it the network never comes up. Refuse, unless told.
fn check_bases(a: &Args, cluster: &hardshift_generator::cluster::Cluster, extras: &Extras) -> Result<(), Failure> {
    if a.self_contained_nodes || cluster.network_type != "OVNKubernetes" {
        return Ok(());
    }
    let missing: Vec<&str> = [Role::Master, Role::Worker]
        .into_iter()
        .filter(|r| cluster.nodes.iter().any(|n| n.role == *r) && !extras.bases.contains_key(r))
        .map(|r| r.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Failure::input(format!(
        "no MCO-rendered base for the {} nodes: with networkType OVNKubernetes they need the machine-config-operator's OS configuration (br-ex, Open vSwitch, CRI-O and kubelet config), which hardshift does not write itself\n    hint: `hardshift mco --dir {d}` writes the MCO's inputs and {d}/mco/render.sh; after render.sh, `create` merges every node into {d}/mco/rendered/. Or pass --mco-base master=FILE,worker=FILE, or --self-contained-nodes to go on with hardshift's kubelet alone (needed once to make the PKI that `hardshift mco` uses)",
        missing.join(" and "),
        d = a.input.dir.display()
    )))
}

fn parse_alg(s: &str) -> Result<KeyAlgorithm, String> {
    KeyAlgorithm::parse(s).ok_or_else(|| format!("expected {}", KeyAlgorithm::NAMES))
}

/// Everything `create` makes, before it is written.
pub struct Built {
    pub cluster: hardshift_generator::cluster::Cluster,
    pub extras: Extras,
    pub existing: pki::Existing,
    pub pki: pki::Pki,
    pub nodes: Vec<assets::NodeIgnition>,
    pub bundle: bundle::Bundle,
    pub new_password: bool,
    /// The configs already written (a fresh bundle's masters and workers), for `fsio::write_staged`.
    pub staged: Option<fsio::Staged>,
}

/// The inputs, read and checked: the cluster and what goes into every node besides.
/// `crypto_fips`: the module's FIPS mode when this run may make keys (see `Overrides`).
fn inputs(a: &Args, crypto_fips: Option<bool>) -> Result<(hardshift_generator::cluster::Cluster, Extras, Pending), Failure> {
    let overrides = Overrides {
        key_algorithm: a.key_algorithm,
        release_image: a.input.release_image.clone(),
        crypto_fips,
    };
    // Reading and hashing the agent (and its cached encoding) runs beside the YAML and the first
    // keys: only the configs need it. Its path, magic and URL are checked here, with the inputs.
    let agent = agent_path(a)?.map(|path| {
        let url = a.agent_url.clone();
        let shown = path.clone();
        let handle = std::thread::spawn(move || {
            let t = std::time::Instant::now();
            let r = load_agent(&path, url.as_deref());
            tracing::debug!(ms = t.elapsed().as_millis(), "read the agent");
            r
        });
        (shown, handle)
    });
    let t = std::time::Instant::now();
    let cluster = load_cluster(&a.input.dir, a.input.release_refs.as_deref(), &overrides)?;
    tracing::debug!(ms = t.elapsed().as_millis(), nodes = cluster.nodes.len(), "read the cluster");
    let (dir, domain) = (a.input.dir.clone(), cluster.domain());
    let admin =
        std::thread::spawn(move || kubeadmin_password(&dir).map(|(password, new)| (kubeadmin::Kubeadmin::new(password, &domain), new)));
    let t = std::time::Instant::now();
    let bases = mco_bases(a)?;
    let extras = read_extras(&a.input.dir, &bases)?;
    check_bases(a, &cluster, &extras)?;
    tracing::debug!(
        ms = t.elapsed().as_millis(),
        crds = extras.crds.len(),
        bases = extras.bases.len(),
        "read the CRDs and MCO bases"
    );
    Ok((cluster, extras, Pending { agent, admin }))
}

/// The bundle these inputs make, keeping the live bundle's keys, certificates and password.
fn generate(
    a: &Args,
    cluster: hardshift_generator::cluster::Cluster,
    mut extras: Extras,
    pending: Pending,
    now: time::OffsetDateTime,
    stage: bool,
) -> Result<Built, Failure> {
    let t = std::time::Instant::now();
    let specs = pki::plan(&cluster);
    let existing = fsio::read_existing(&a.input.dir, &specs);
    refuse_rekey(a, &specs, &existing)?;
    tracing::debug!(ms = t.elapsed().as_millis(), entries = specs.len(), "read the existing PKI");
    let t = std::time::Instant::now();
    // A fresh bundle's masters and workers are built and written while the keys only the
    // bootstrap needs are still being generated (`pki::issue_staged`).
    let staged = match stage {
        true => fsio::Staged::begin(&a.input.dir).map_err(Failure::other)?,
        false => None,
    };
    let for_nodes = assets::node::pki_for_nodes(&cluster);
    let first: &(dyn Fn(&pki::CertSpec) -> bool + Sync) = if staged.is_some() { &for_nodes } else { &|_| false };
    let (agent, extras_early, c) = (pending.agent, &mut extras, &cluster);
    let (pki, early) = pki::issue_staged(
        &specs,
        &existing,
        now,
        &SystemKeys,
        pki::Options { rotate_ca: a.rotate_ca },
        first,
        |partial| {
            // Beside the key generation either way: the agent, and its cached encoding's check.
            if let Some((path, agent)) = agent {
                let (bin, check) = agent.join().map_err(|_| Failure::other("reading the agent binary panicked"))??;
                if c.fips {
                    fips_agent(&path, &bin.bytes)?;
                }
                extras_early.agent = Some(bin);
                check_agent(extras_early, check);
            }
            let Some(st) = staged else { return Ok(None) };
            let staged = stage_first(&a.input.dir, c, partial, extras_early, st)?;
            tracing::debug!(
                ms = t.elapsed().as_millis(),
                nodes = staged.0.len(),
                "built and wrote the masters' and workers' configs"
            );
            Ok::<_, Failure>(Some(staged))
        },
    )
    .map_err(|e| match e {
        PkiError::Refused { .. } => Failure::input(e),
        other => Failure::other(other),
    })?;
    let (mut nodes, staged) = match early? {
        Some((nodes, st)) => (nodes, Some(st)),
        None => (Vec::new(), None),
    };
    tracing::debug!(ms = t.elapsed().as_millis(), "issued the PKI");
    let (mut admin, mut new_password) = pending
        .admin
        .join()
        .map_err(|_| Failure::other("the kubeadmin login could not be made"))??;
    // The password was read before the lock: a run that finished meanwhile made the bundle's own.
    if new_password {
        if let (kept, false) = kubeadmin_password(&a.input.dir)? {
            admin = kubeadmin::Kubeadmin::new(kept, &cluster.domain());
            new_password = false;
        }
    }
    extras.kubeadmin = Some(admin);
    let t = std::time::Instant::now();
    let built: std::collections::BTreeSet<String> = nodes.iter().map(|n| n.hostname.clone()).collect();
    nodes.extend(assets::ignitions_of(&cluster, &pki, &extras, &|n| !built.contains(&n.hostname)));
    let order: std::collections::HashMap<&str, usize> = cluster.nodes.iter().enumerate().map(|(i, n)| (n.hostname.as_str(), i)).collect();
    nodes.sort_by_key(|n| order.get(n.hostname.as_str()).copied());
    tracing::debug!(ms = t.elapsed().as_millis(), nodes = nodes.len(), "built the Ignition configs");
    let t = std::time::Instant::now();
    let served: Vec<(&str, &[u8])> = extras
        .agent
        .iter()
        .filter(|b| b.is_remote())
        .map(|b| (agent::SERVED, &b.bytes[..]))
        .collect();
    let password = extras.kubeadmin.as_ref().map(|k| k.password.as_str());
    let bundle = bundle::assemble(&cluster, &pki, &nodes, &served, password);
    tracing::debug!(ms = t.elapsed().as_millis(), files = bundle.files.len(), "assembled the bundle");
    Ok(Built {
        cluster,
        extras,
        existing,
        pki,
        nodes,
        bundle,
        new_password,
        staged,
    })
}

/// The first stage of a fresh bundle, beside the bootstrap's keys: the masters' and workers'
/// configs from the `partial` PKI, written with that PKI, the lab (from the hashes known so far:
/// the few files that name the bootstrap's config are written again at the end), a served agent,
/// and the agent kept for `verify`.
fn stage_first(
    dir: &Path,
    c: &hardshift_generator::cluster::Cluster,
    partial: &pki::Pki,
    extras: &Extras,
    mut st: fsio::Staged,
) -> Result<(Vec<assets::NodeIgnition>, fsio::Staged), Failure> {
    if let Some(b) = &extras.agent {
        let sha = bundle::sha256_hex(&b.bytes);
        st.keep(kept_agent(dir, &sha), &b.bytes, 0o755).map_err(Failure::other)?;
        cache_encoding(b, &sha);
    }
    let nodes = assets::ignitions_of(c, partial, extras, &|n| n.role != Role::Bootstrap);
    let mut files: Vec<_> = nodes.iter().map(bundle::ignition_file).collect();
    files.extend(bundle::pki_files(partial));
    let mut lab = bundle::Bundle::default();
    bundle::add_lab(&mut lab, c, &bundle::config_hashes(&nodes));
    files.extend(lab.files);
    if let Some(b) = extras.agent.as_ref().filter(|b| b.is_remote()) {
        files.push(bundle::served_file(agent::SERVED, &b.bytes));
    }
    st.put(files).map_err(Failure::other)?;
    Ok((nodes, st))
}

/// Join the check of a cached agent encoding; if it is not this agent's, drop the entry and
/// encode the agent anew (before any config carries it).
fn check_agent(extras: &mut Extras, check: CacheCheck) {
    let Some((path, check)) = check else { return };
    if !check.join().unwrap_or(false) {
        tracing::warn!(cache = %path.display(), "the cached agent encoding is not this agent's: encoding it anew");
        let _ = std::fs::remove_file(&path);
        if let Some(b) = extras.agent.take() {
            extras.agent = Some(agent::Binary::new(b.bytes.to_vec()));
        }
    }
}

/// What `verify` needs to rebuild the live bundle: the same inputs and the choices `create`
/// recorded when it wrote it (`DIR/.hardshift/create.json`).
pub fn rebuild(dir: &Path, release_image: Option<String>, release_refs: Option<PathBuf>) -> Result<(Built, Vec<String>), Failure> {
    let mut notes = Vec::new();
    let rec = match std::fs::read(dir.join(fsio::STATE_DIR).join(RECORD)) {
        Ok(b) => serde_json::from_slice::<Record>(&b)
            .map_err(|e| Failure::input(format!("{}/{}/{RECORD}: {e}", dir.display(), fsio::STATE_DIR)))?,
        Err(_) => {
            notes.push(format!(
                "no record of create's options in {}/{}/{RECORD} (a bundle from an older hardshift): assuming the defaults",
                dir.display(),
                fsio::STATE_DIR
            ));
            Record::default()
        }
    };
    let mut args = rec.args(dir);
    if release_image.is_some() {
        args.input.release_image = release_image;
    }
    if release_refs.is_some() {
        args.input.release_refs = release_refs;
    }
    if let Some(sha) = &rec.agent_sha256 {
        let kept = kept_agent(dir, sha);
        if kept.is_file() {
            // Trusted only if it still hashes to its name: a foreign binary stored there (with
            // the configs and sums regenerated) would otherwise rebuild into a perfect match.
            let bytes = std::fs::read(&kept).map_err(|e| Failure::other(format!("{}: {e}", kept.display())))?;
            let got = bundle::sha256_hex(&bytes);
            if &got != sha {
                return Err(Failure::other(format!(
                    "{}: the kept agent hashes to {got}, not {sha}, the hash create recorded: it was replaced after create wrote the bundle, so the nodes' configs cannot be trusted\n    hint: rebuild the bundle with the agent you mean (`hardshift create --dir {} --agent-binary PATH`), then verify",
                    kept.display(),
                    dir.display()
                )));
            }
            args.agent_binary = Some(kept);
        } else {
            notes.push(format!(
                "the agent binary create embedded (sha256 {sha}) is not kept in {}: using the one beside hardshift",
                kept.display()
            ));
        }
    }
    // A rebuild writes nothing: it may check a FIPS bundle from any build (verify reports the mode).
    let (cluster, extras, pending) = inputs(&args, None)?;
    Ok((
        generate(&args, cluster, extras, pending, time::OffsetDateTime::now_utc(), false)?,
        notes,
    ))
}

/// The overrides `create` recorded for DIR's bundle (none if it recorded nothing).
pub struct Recorded {
    pub key_algorithm: Option<KeyAlgorithm>,
    pub release_image: Option<String>,
    pub release_refs: Option<PathBuf>,
    /// The crypto module the bundle's keys were made with, and whether it was FIPS.
    pub crypto_module: Option<String>,
    pub crypto_fips: bool,
    /// The bundle was made with `fips: true`.
    pub fips: bool,
}

pub fn recorded(dir: &Path) -> Recorded {
    let rec: Record = std::fs::read(dir.join(fsio::STATE_DIR).join(RECORD))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    Recorded {
        key_algorithm: rec.key_algorithm.as_deref().and_then(KeyAlgorithm::parse),
        release_image: rec.release_image,
        release_refs: rec.release_refs,
        crypto_module: rec.crypto_module,
        crypto_fips: rec.crypto_fips,
        fips: rec.fips,
    }
}

/// Where create records its choices, and keeps the agent binary it embedded, under DIR/.hardshift.
const RECORD: &str = "create.json";
const AGENTS: &str = "agents";

/// The options a bundle was made with: enough for `verify` to make it again.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Record {
    key_algorithm: Option<String>,
    release_image: Option<String>,
    release_refs: Option<PathBuf>,
    mco_base: Vec<(String, PathBuf)>,
    self_contained_nodes: bool,
    no_agent: bool,
    agent_url: Option<String>,
    agent_sha256: Option<String>,
    /// The crypto module that made the bundle's new keys (`hardshift_crypto::Module::name`).
    #[serde(default)]
    crypto_module: Option<String>,
    #[serde(default)]
    crypto_fips: bool,
    /// install-config's `fips`.
    #[serde(default)]
    fips: bool,
}

impl Record {
    fn of(a: &Args, agent: Option<&agent::Binary>, fips: bool) -> Record {
        let abs = |p: &PathBuf| std::path::absolute(p).unwrap_or_else(|_| p.clone());
        Record {
            key_algorithm: a.key_algorithm.map(|k| k.as_str().to_string()),
            release_image: a.input.release_image.clone(),
            release_refs: a.input.release_refs.as_ref().map(abs),
            mco_base: a.mco_base.iter().map(|(r, p)| (r.as_str().to_string(), abs(p))).collect(),
            self_contained_nodes: a.self_contained_nodes,
            no_agent: agent.is_none(),
            agent_url: a.agent_url.clone(),
            agent_sha256: agent.map(|b| bundle::sha256_hex(&b.bytes)),
            crypto_module: Some(hardshift_crypto::module().name().to_string()),
            crypto_fips: hardshift_crypto::module().fips,
            fips,
        }
    }

    fn args(&self, dir: &Path) -> Args {
        Args {
            input: super::ClusterArgs {
                dir: dir.to_path_buf(),
                release_image: self.release_image.clone(),
                release_refs: self.release_refs.clone(),
            },
            key_algorithm: self.key_algorithm.as_deref().and_then(KeyAlgorithm::parse),
            rotate_ca: false,
            mco_base: self
                .mco_base
                .iter()
                .filter_map(|(r, p)| parse_base(&format!("{r}={}", p.display())).ok())
                .collect(),
            self_contained_nodes: self.self_contained_nodes,
            agent_binary: None,
            no_agent: self.no_agent,
            agent_url: self.agent_url.clone(),
            mirror_check: false,
            no_mirror_check: false,
        }
    }
}

/// Where the agent binary a bundle embeds is kept for `verify`: DIR/.hardshift/agents/<sha256>.
fn kept_agent(dir: &Path, sha: &str) -> PathBuf {
    dir.join(fsio::STATE_DIR).join(AGENTS).join(sha)
}

/// Keep an embedded agent's encoding in the user's cache, unless it is there. A convenience: a
/// read-only or absent home only makes the next run slower.
fn cache_encoding(b: &agent::Binary, sha: &str) {
    if let Some(enc) = encoding_cache(sha).filter(|p| !b.is_remote() && !p.is_file()) {
        if let Ok(json) = serde_json::to_vec(&*b.encoded) {
            let written = enc
                .parent()
                .map(|d| fsio::private_dir_all(d).and_then(|_| fsio::write_file_atomic(&enc, &json, 0o644)));
            if let (Some(Ok(())), Some(dir)) = (written, enc.parent()) {
                prune_cache(dir, &enc);
            }
        }
    }
}

/// Encodings kept in the cache: each is ~1.5 times the agent's size, and a developer who rebuilds
/// the agent would otherwise collect one per build.
const CACHE_KEEP: usize = 3;

/// Remove all but the `CACHE_KEEP` most recently used agent encodings (a hit refreshes an entry's
/// time), never `keep`, and nothing but `agent-*.contents.json`.
fn prune_cache(dir: &Path, keep: &Path) {
    let mut entries: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("agent-") && name.ends_with(".contents.json")
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .filter(|(_, p)| p != keep)
        .collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.0));
    for (_, p) in entries.into_iter().skip(CACHE_KEEP - 1) {
        let _ = std::fs::remove_file(p);
    }
}

/// Record the options and keep the agent binary (one: the one in use), atomically.
fn record(a: &Args, agent: Option<&agent::Binary>, fips: bool) -> Result<(), Failure> {
    let state = a.input.dir.join(fsio::STATE_DIR);
    let rec = Record::of(a, agent, fips);
    if let (Some(b), Some(sha)) = (agent, &rec.agent_sha256) {
        let kept = kept_agent(&a.input.dir, sha);
        if !kept.is_file() {
            let fail = |e: std::io::Error| Failure::other(format!("{}: {e}", kept.display()));
            fsio::private_dir_all(&state.join(AGENTS)).map_err(fail)?;
            fsio::write_file_atomic(&kept, &b.bytes, 0o755).map_err(fail)?;
        }
        cache_encoding(b, sha);
        // Keep only the agent in use.
        for e in std::fs::read_dir(state.join(AGENTS)).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy() != *sha {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let path = state.join(RECORD);
    let json = serde_json::to_vec_pretty(&rec).map_err(Failure::other)?;
    fsio::write_file_atomic(&path, &json, 0o600).map_err(|e| Failure::other(format!("{}: {e}", path.display())))
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Failure::other)?;
    let pulled = release_from_registry(&a, &rt)?;
    let t = std::time::Instant::now();
    let (cluster, extras, pending) = inputs(&a, Some(hardshift_crypto::module().fips))?;
    // Not an input error: hardshift's own bootstrap runs without the MCO's bootstrap; but the
    // render (`hardshift mco`) and a real release need them.
    for m in hardshift_generator::release::missing_for_mco(&cluster.release) {
        eprintln!("warning: {m}");
    }
    for m in hardshift_generator::lab::dns::unresolvable_mirrors(&cluster) {
        eprintln!("warning: {m}");
    }
    tracing::debug!(ms = t.elapsed().as_millis(), "read the inputs");
    // Inputs are read and checked; from here on the bundle is read and written: one run at a time.
    let _lock = fsio::lock(&a.input.dir, "create").map_err(Failure::other)?;
    let now = time::OffsetDateTime::now_utc();
    let Built {
        cluster,
        extras,
        existing,
        pki,
        nodes,
        bundle: b,
        new_password,
        staged,
    } = generate(&a, cluster, extras, pending, now, true)?;
    let t = std::time::Instant::now();
    let written = fsio::write_staged(&a.input.dir, &b, staged).map_err(Failure::other)?;
    record(&a, extras.agent.as_ref(), cluster.fips)?;
    tracing::debug!(ms = t.elapsed().as_millis(), "wrote the bundle");

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
    let tally = |f: fn(&Outcome) -> bool| pki.entries.iter().filter(|e| f(&e.outcome)).count();
    println!(
        "PKI: {} entries ({} keys for new entries): {} created, {} reused, {} re-issued",
        pki.entries.len(),
        cluster.pki.key_algorithm.as_str(),
        tally(|o| *o == Outcome::Created),
        tally(|o| *o == Outcome::Reused),
        tally(|o| matches!(o, Outcome::Reissued(_)))
    );
    let rerun = !existing.is_empty();
    for e in &pki.entries {
        match &e.outcome {
            Outcome::Reissued(why) => println!("  re-issued {}: {why}", e.spec.id()),
            Outcome::Created if rerun => println!("  created {}", e.spec.id()),
            _ => {}
        }
    }
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
                a.input.dir.display()
            ),
            Some(b) => format!("hardshift-agent ({:.1} MiB) on every node", b.bytes.len() as f64 / 1048576.0),
            None => "no node agent".to_string(),
        }
    );
    for n in &nodes {
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
    // An unchanged bundle was checked when it was written: a re-run stays instant.
    let unchanged = matches!(written, Written::Unchanged(_));
    match written {
        Written::Unchanged(_) => println!("bundle unchanged: {} files in {}", b.files.len(), a.input.dir.display()),
        Written::New(g) => println!("wrote {} files to {} ({})", b.files.len(), a.input.dir.display(), g.display()),
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
            println!("wrote {} files to {} ({})", b.files.len(), a.input.dir.display(), gen.display());
        }
    }
    println!(
        "admin kubeconfig: {}",
        a.input.dir.join(hardshift_generator::layout::ADMIN_KUBECONFIG).display()
    );
    if new_password {
        // Shown once, when made; afterwards only the 0600 file holds it.
        println!(
            "console login: kubeadmin / {} (kept in {})",
            extras.kubeadmin.as_ref().map_or("", |k| k.password.as_str()),
            a.input.dir.join(kubeadmin::PASSWORD_FILE).display()
        );
    }
    if a.mirror_check || !unchanged || pulled.is_some() {
        mirror_check(&a, &rt, pulled);
    }
    Ok(0)
}

/// A CA the live bundle had, whose files are gone (`rm -rf pki/`): never mint it anew silently.
fn refuse_rekey(a: &Args, specs: &[pki::CertSpec], existing: &pki::Existing) -> Result<(), Failure> {
    if a.rotate_ca {
        return Ok(());
    }
    let sums = fsio::read_current(&a.input.dir, bundle::SUMS).unwrap_or_default();
    let recorded: std::collections::BTreeSet<String> = String::from_utf8_lossy(&sums)
        .lines()
        .filter_map(|l| l.split_once("  ").map(|(_, p)| p.to_string()))
        .collect();
    let gone = pki::vanished_cas(specs, existing, &recorded);
    if gone.is_empty() {
        return Ok(());
    }
    // Name the earlier generation only if there is one, and it still holds those CAs.
    let previous = a.input.dir.join(fsio::STATE_DIR).join("previous");
    let has = |id: &String| previous.join(format!("{id}.key")).is_file();
    let from = if gone.iter().all(has) {
        format!("the generation before the last change, in {}, holds them", previous.display())
    } else {
        "no earlier generation holding them is kept: use your backup of the bundle".to_string()
    };
    Err(Failure::input(format!(
        "{}: the live bundle had {} but their files are gone; new CAs would re-key a running cluster, so nothing was written\n    hint: restore them ({from}), or pass --rotate-ca if the cluster does not run yet",
        a.input.dir.display(),
        gone.join(", "),
    )))
}

/// The bundle's kubeadmin password, or a new one (true) when there is none yet.
fn kubeadmin_password(dir: &Path) -> Result<(String, bool), Failure> {
    if let Some(bytes) = fsio::read_current(dir, kubeadmin::PASSWORD_FILE) {
        let text = String::from_utf8(bytes).map_err(|_| Failure::input(format!("{}: not UTF-8", kubeadmin::PASSWORD_FILE)))?;
        return kubeadmin::check(&text).map(|p| (p, false)).map_err(Failure::input);
    }
    let mut buf = [0u8; 64];
    let mut i = buf.len();
    let mut err = None;
    let p = kubeadmin::password(|| {
        if i == buf.len() {
            if let Err(e) = getrandom::fill(&mut buf) {
                err = Some(e);
            }
            i = 0;
        }
        i += 1;
        buf[i - 1]
    });
    match err {
        Some(e) => Err(Failure::other(format!("no randomness for the kubeadmin password: {e}"))),
        None => Ok((p, true)),
    }
}
