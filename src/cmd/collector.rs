//! `hardshift collector`: serve the agents (mTLS gRPC), store their reports, watch the API, and
//! serve the dashboard and /metrics; `StoreArgs` for the commands that read its store.

use crate::failure::Failure;
use hardshift_collector::{server, store::Store};
use hardshift_generator::fsio;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Address to listen on (the agents dial the collector address in hardshift.yaml).
    #[arg(long, default_value = "0.0.0.0:9443")]
    listen: SocketAddr,
    /// The report database. Default: DIR/collector/reports.db
    #[arg(long)]
    db: Option<PathBuf>,
    /// Connections open at once, in all (handshaking ones included).
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// Connections open at once from one source address (a node needs one).
    #[arg(long, default_value_t = 64)]
    max_per_address: usize,
    /// Time a client has to finish the TLS handshake, e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    handshake_timeout: Duration,
    /// Time an agent has, once TLS is up, to send its Hello.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    hello_timeout: Duration,
    /// Delete reports older than this (e.g. 7d, 12h); each boot's newest report is kept.
    /// "forever" keeps everything.
    #[arg(long, default_value = "7d", value_parser = parse_retention)]
    retain: Retention,
    /// Watch the API with this kubeconfig (Nodes, CSRs, ClusterOperators, ClusterVersion,
    /// control-plane pods) for `wait-for` and `diagnose`. Default: DIR/auth/kubeconfig when it exists.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Do not watch the API: agents' reports only.
    #[arg(long, conflicts_with = "kubeconfig")]
    no_api_watch: bool,
    /// The dashboard and /metrics. Loopback is plain HTTP; any other address is HTTPS and
    /// requires the bundle's admin client certificate (pki/admin.crt, or auth/kubeconfig's).
    #[arg(long, default_value = "127.0.0.1:9444")]
    web: SocketAddr,
    /// Serve neither the dashboard nor /metrics.
    #[arg(long)]
    no_web: bool,
}

#[derive(Clone, Copy, Debug)]
struct Retention(Option<Duration>);

fn parse_retention(s: &str) -> Result<Retention, String> {
    if s == "forever" {
        return Ok(Retention(None));
    }
    parse_duration(s).map(|d| Retention(Some(d)))
}

/// `500ms`, `45s`, `90m`, `12h`, `7d`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration: expected a number and a unit, e.g. 30s, 12h, 7d"))?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(n)),
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m, h or d)")),
    };
    Ok(Duration::from_secs(n.saturating_mul(secs)))
}

/// The dashboard's address, inventory (for the phases and the nodes not yet reporting) and,
/// beyond loopback, its TLS: the collector's certificate, admin clients of the cluster's CA.
fn web_options(
    dir: &std::path::Path,
    addr: SocketAddr,
    db: &std::path::Path,
    members: &Members,
) -> Result<hardshift_collector::web::Options, Failure> {
    let inventory = match members {
        Members::Inputs(m) => Some(m.clone()),
        Members::Certificates(_) => None,
    };
    let tls = if addr.ip().is_loopback() {
        None
    } else {
        let read = |rel: &str| {
            fsio::read_current(dir, rel).and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| {
                Failure::input(format!(
                    "--web {addr} needs HTTPS, and {rel} is missing from the bundle in {}",
                    dir.display()
                ))
            })
        };
        Some(hardshift_collector::web::Tls {
            cert: read(hardshift_generator::layout::COLLECTOR_CERT)?,
            key: read(hardshift_generator::layout::COLLECTOR_KEY)?,
            client_ca: read(hardshift_generator::layout::KUBERNETES_CA_CERT)?,
        })
    };
    Ok(hardshift_collector::web::Options {
        addr,
        tls,
        inventory,
        db: db.to_path_buf(),
        secrets: super::bundle_secrets(dir),
        bundle: bundle_of(dir)?,
    })
}

/// The bundle's identity and certificates, for /metrics: its record (cluster.json, public) and
/// its root CA name it, so every series says which install it is of.
fn bundle_of(dir: &std::path::Path) -> Result<hardshift_collector::metrics::Bundle, Failure> {
    use hardshift_collector::metrics::{Bundle, Identity};
    let missing = |rel: &str| {
        Failure::input(format!(
            "{rel}: missing from the bundle in {} (run `hardshift create`); /metrics names the cluster by it",
            dir.display()
        ))
    };
    let record = fsio::read_current(dir, hardshift_generator::bundle::CLUSTER_JSON).ok_or_else(|| missing("cluster.json"))?;
    let record: serde_json::Value = serde_json::from_slice(&record).map_err(|e| {
        Failure::input(format!(
            "{}/cluster.json: not JSON ({e}); run `hardshift create` again",
            dir.display()
        ))
    })?;
    let field = |k: &str| {
        record[k].as_str().map(str::to_string).ok_or_else(|| {
            Failure::input(format!(
                "{}/cluster.json: no string {k:?}; run `hardshift create` again",
                dir.display()
            ))
        })
    };
    let root_ca = fsio::read_current(dir, ROOT_CA).ok_or_else(|| missing(ROOT_CA))?;
    Ok(Bundle {
        identity: Identity {
            cluster: field("name")?,
            base_domain: field("base_domain")?,
            bundle: hardshift_generator::assets::manifests::cluster_id_of_root_ca(&String::from_utf8_lossy(&root_ca)),
        },
        certificates: bundle_certificates(dir),
    })
}

const ROOT_CA: &str = "pki/root-ca.crt";

/// Every certificate of pki/ and agent-pki/ with its notAfter (ones that do not parse are
/// `verify`'s business, not the metrics').
fn bundle_certificates(dir: &std::path::Path) -> Vec<hardshift_collector::metrics::BundleCert> {
    let Some(cur) = fsio::current(dir) else { return vec![] };
    let mut out = Vec::new();
    for sub in [hardshift_generator::layout::PKI, hardshift_generator::layout::AGENT_PKI] {
        let Ok(entries) = std::fs::read_dir(cur.join(sub)) else { continue };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".crt"))
            .collect();
        names.sort();
        for n in names {
            let rel = format!("{sub}/{n}");
            let Some(f) =
                fsio::read_current(dir, &rel).and_then(|pem| hardshift_generator::pki::inspect::facts(&String::from_utf8_lossy(&pem)).ok())
            else {
                continue;
            };
            out.push(hardshift_collector::metrics::BundleCert {
                file: rel,
                cn: f.cn,
                not_after_s: f.not_after,
            });
        }
    }
    out
}

/// Serve the agents with the bundle's collector certificate until Ctrl-C.
pub fn run(a: Args) -> Result<u8, Failure> {
    let read = |rel: &str| {
        fsio::read_current(&a.dir, rel)
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| {
                Failure::input(format!(
                    "{}: missing from the bundle in {} (run `hardshift create`)",
                    rel,
                    a.dir.display()
                ))
            })
    };
    // A FIPS bundle's agents speak TLS through the FIPS module only: so does its collector.
    if hardshift_generator::pipeline::recorded(&a.dir).fips {
        hardshift_crypto::fips_mode()
            .map_err(|e| Failure::input(format!("{}: the bundle was made with fips: true, but {e}", a.dir.display())))?;
    }
    let tls = server::Tls {
        cert: read(hardshift_generator::layout::COLLECTOR_CERT)?,
        key: read(hardshift_generator::layout::COLLECTOR_KEY)?,
        client_ca: read(hardshift_generator::layout::AGENT_CA_CERT)?,
    };
    let members = Members::load(&a.dir)?;
    let db = super::db_path(&a.dir, a.db);
    if let Some(p) = db.parent() {
        // The store holds the nodes' reports: this user's only.
        fsio::make_dir_all(p, 0o700).map_err(|e| Failure::other(format!("{}: {e}", p.display())))?;
    }
    // One collector per directory: a second would steal the admin socket and share the store.
    let state = a.dir.join(hardshift_generator::layout::COLLECTOR);
    fsio::make_dir_all(&state, 0o700).map_err(|e| Failure::other(format!("{}: {e}", state.display())))?;
    let _lock = fsio::lock_file(&state.join("lock"), &format!("collector on {}", a.listen)).map_err(|e| match e {
        fsio::LockError::Busy(holder) => Failure::other(format!(
            "{}: another collector serves this bundle ({holder}); stop it first, or give this one another --dir",
            a.dir.display()
        )),
        fsio::LockError::Io(e) => Failure::other(e),
    })?;
    // And one writer per database, however --db reaches it (another directory, a symlink, a
    // hard link): two collectors sharing one store would interleave boots and acks.
    let what = format!("collector on {} for {}", a.listen, a.dir.display());
    lock_store(&db)?;
    // What a collector before this one said when it stopped acknowledging no longer holds.
    hardshift_collector::store::clear_halted(&db);
    // The admin socket asks nodes for their logs: only this user may reach it.
    let admin = super::logs::admin_socket(&a.dir);
    fsio::make_dir_all(admin.parent().unwrap_or(&a.dir), 0o700)
        .and_then(|_| {
            std::fs::set_permissions(
                admin.parent().unwrap_or(&a.dir),
                std::os::unix::fs::PermissionsExt::from_mode(0o700),
            )
        })
        .map_err(|e| Failure::other(format!("{}: {e}", admin.display())))?;
    let store = Store::open(&db).map_err(|e| Failure::other(format!("{}: {e}", db.display())))?;
    store
        .set_writer(std::process::id(), &what)
        .map_err(|e| Failure::other(format!("{}: {e}", db.display())))?;
    let rt = tokio::runtime::Runtime::new().map_err(Failure::other)?;
    tracing::info!(
        "listening on {} (reports in {}, admin socket {})",
        a.listen,
        db.display(),
        admin.display()
    );
    let max_connections = fit_to_descriptors(a.max_connections.max(1));
    let opts = server::Options {
        limits: hardshift_collector::listener::Limits {
            handshake_timeout: a.handshake_timeout,
            hello_timeout: a.hello_timeout,
            max_connections,
            max_per_address: a.max_per_address.max(1),
            // The agents' door refuses over its caps (agents retry); the dashboard's sheds.
            ..Default::default()
        },
        retain: a.retain.0,
        web: None,
        ..Default::default()
    };
    let opts = server::Options {
        web: (!a.no_web).then(|| web_options(&a.dir, a.web, &db, &members)).transpose()?,
        nodes: Some(members.names()),
        ..opts
    };
    let kubeconfig = match (&a.kubeconfig, a.no_api_watch) {
        (_, true) => None,
        (Some(k), _) => Some(k.clone()),
        (None, _) => Some(a.dir.join(hardshift_generator::layout::ADMIN_KUBECONFIG)).filter(|k| k.exists()),
    };
    // The API side writes through its own connection: WAL lets it and the ingest share the file.
    let api_store = match &kubeconfig {
        Some(_) => Some(Store::open(&db).map_err(|e| Failure::other(format!("{}: {e}", db.display())))?),
        None => None,
    };
    let (stop_api, api_stopped) = tokio::sync::oneshot::channel::<()>();
    rt.block_on(async {
        if let (Some(k), Some(s)) = (kubeconfig, api_store) {
            let client = super::kube_client(&k).await?;
            tracing::info!("watching the API through {}", k.display());
            tokio::spawn(hardshift_collector::watch::run_api_watch(client, s, async move {
                let _ = api_stopped.await;
            }));
        }
        // SIGINT (Ctrl-C) and SIGTERM (systemctl stop, kill) both drain, then exit.
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| Failure::other(format!("SIGTERM handler: {e}")))?;
        server::serve(a.listen, tls, store, Some(&admin), opts, async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        })
        .await
        .map_err(Failure::other)
    })?;
    let _ = stop_api.send(());
    Ok(0)
}

/// Take the store's one writer's lock, or say who holds it. The lock is an open file
/// description lock on one byte of the database file itself, far past the bytes SQLite locks
/// (so it neither conflicts with them nor is dropped by theirs): any path to the same file
/// meets it. Its descriptor stays open for the life of the process, as closing any descriptor
/// of the database would drop SQLite's own POSIX locks.
fn lock_store(db: &std::path::Path) -> Result<(), Failure> {
    use nix::fcntl::{fcntl, FcntlArg};
    use nix::libc;
    let io = |e: std::io::Error| Failure::other(format!("{}: {e}", db.display()));
    // A whole empty store first, never an empty file a reader would take for a broken store.
    Store::create(db).map_err(|e| Failure::other(format!("{}: {e}", db.display())))?;
    let file = std::fs::OpenOptions::new().read(true).write(true).open(db).map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(Failure::input(format!("{}: --db must be a file", db.display())));
    }
    // SAFETY: a plain C struct; all-zero is a valid value before the fields are set.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = 1 << 40;
    lock.l_len = 1;
    match fcntl(&file, FcntlArg::F_OFD_SETLK(&lock)) {
        Ok(_) => {
            // Held until the process ends; see above for why it is never closed.
            std::mem::forget(file);
            Ok(())
        }
        Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => {
            drop(file);
            let holder = Store::writer_of(db)
                .filter(|(pid, _)| std::path::Path::new("/proc").join(pid.to_string()).exists())
                .map(|(pid, what)| format!("pid {pid} ({what})"))
                .unwrap_or_else(|| "holder unknown".into());
            Err(Failure::other(format!(
                "{}: another collector writes this database ({holder}); give this one another --db",
                db.display()
            )))
        }
        Err(e) => Err(Failure::other(format!("{}: cannot lock: {e}", db.display()))),
    }
}

/// Descriptors kept out of the agents' cap: the dashboard's whole cap, the store, the log, the
/// admin socket, the API watch, the runtime's own.
const RESERVED_FDS: u64 = 256 + 128;

/// Raise the soft limit on open files to the hard one, and bound the agents' connection cap by
/// what is left after the reserve: a flood on either port can then never take the descriptors
/// the other, or the store, needs.
fn fit_to_descriptors(wanted: usize) -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return wanted;
    };
    let limit = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let room = limit.saturating_sub(RESERVED_FDS).max(16) as usize;
    if wanted > room {
        tracing::warn!(
            "--max-connections {wanted} lowered to {room}: the open-file limit is {limit} and {RESERVED_FDS} descriptors are kept for the dashboard and the store"
        );
    }
    wanted.min(room)
}

/// The nodes of the bundle: the only names whose agent certificates the collector admits.
enum Members {
    /// From the bundle's inputs, with their roles (the dashboard's phases need them).
    Inputs(Vec<hardshift_collector::phase::Member>),
    /// Without the inputs: the nodes create issued an agent certificate to (agent-pki/agent-NODE.crt).
    Certificates(std::collections::BTreeSet<String>),
}

impl Members {
    /// Read once at the start (at 20,000 nodes, loading the inputs is seconds).
    fn load(dir: &std::path::Path) -> Result<Members, Failure> {
        let rec = hardshift_generator::pipeline::recorded(dir);
        let overrides = hardshift_generator::config::Overrides {
            release_image: rec.release_image,
            key_algorithm: rec.key_algorithm,
            crypto_fips: None,
        };
        let inputs_error = match super::load_cluster(dir, rec.release_refs.as_deref(), &overrides) {
            Ok(c) => {
                return Ok(Members::Inputs(
                    c.nodes
                        .iter()
                        .map(|n| hardshift_collector::phase::Member {
                            name: n.hostname.clone(),
                            role: n.role.as_str().to_string(),
                        })
                        .collect(),
                ))
            }
            Err(e) => e,
        };
        let names = certificate_names(&dir.join(hardshift_generator::layout::AGENT_PKI));
        if names.is_empty() {
            // Without a list, any name the agent CA ever signed would be admitted.
            return Err(Failure::input(format!(
                "{}: cannot tell which nodes belong to this bundle: its inputs do not load ({}), and {} holds no agent certificates\n    hint: run the collector on the directory `hardshift create` wrote",
                dir.display(),
                inputs_error.message.lines().skip(1).map(str::trim).collect::<Vec<_>>().join("; "),
                hardshift_generator::layout::AGENT_PKI
            )));
        }
        tracing::warn!(
            "{}: the bundle's inputs do not load, so the dashboard has no roles; admitting the {} nodes of {}",
            dir.display(),
            names.len(),
            hardshift_generator::layout::AGENT_PKI
        );
        Ok(Members::Certificates(names))
    }

    fn names(&self) -> std::collections::BTreeSet<String> {
        match self {
            Members::Inputs(m) => m.iter().map(|m| m.name.clone()).collect(),
            Members::Certificates(n) => n.clone(),
        }
    }
}

/// NODE of every agent-NODE.crt in `pki` (agent-ca.crt is the CA, not a node).
fn certificate_names(pki: &std::path::Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(pki)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| Some(f.strip_prefix("agent-")?.strip_suffix(".crt")?.to_string()))
        .filter(|n| n != "ca")
        .collect()
}
