//! `hardshift gather [NODE...] -o FILE.tar.gz`: what a support case needs, without SSH, through
//! the agents: each node's allow-listed journals, its failing containers' logs, etcd's members,
//! its newest report, events and diagnosis, plus the CSR decisions; secrets stripped; an index.
//! Every request is the agents' bounded, read-only kind, and each node's share is capped.

use crate::failure::Failure;
use hardshift_collector::{diagnose, events, scrub::Scrubber};
use hardshift_proto::v1::debug_request::Kind;
use hardshift_proto::v1::{ContainerLogRequest, EtcdMembersRequest, JournalRequest};
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

/// Containers' logs fetched per node at most, and bytes per node at most.
const MAX_CONTAINERS: usize = 10;
const MAX_NODE_BYTES: usize = 32 << 20;

struct Archive {
    /// Knows the bundle's own secrets, to strip them by value too.
    scrubber: Scrubber,
    files: Vec<(String, Vec<u8>)>,
    index: Vec<serde_json::Value>,
}

impl Archive {
    /// Add a text file, secrets stripped, within the node's byte budget.
    fn text(&mut self, path: String, what: &str, text: &str, budget: &mut usize) {
        let clean = self.scrubber.scrub(text);
        let mut bytes = clean.into_bytes();
        let cut = bytes.len() > *budget;
        bytes.truncate(*budget);
        *budget -= bytes.len();
        self.index
            .push(serde_json::json!({"file": path, "what": what, "bytes": bytes.len(), "cut": cut}));
        self.files.push((path, bytes));
    }

    fn error(&mut self, node: &str, what: &str, why: &str) {
        self.index.push(serde_json::json!({"node": node, "what": what, "error": why}));
    }
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let store = a.store.open()?;
    let rows = store.nodes().map_err(a.store.broken())?;
    let known: Vec<&str> = rows.iter().map(|r| r.node.as_str()).collect();
    if let Some(n) = a.nodes.iter().find(|n| !known.contains(&n.as_str())) {
        return Err(Failure::input(format!(
            "no reports from {n:?} (nodes reporting: {})",
            known.join(", ")
        )));
    }
    let socket = a.socket.clone().unwrap_or_else(|| super::logs::admin_socket(&a.store.dir));
    let now = hardshift_collector::now_ms();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Failure::other)?;
    let mut ar = Archive {
        scrubber: Scrubber::with_values(super::bundle_secrets(&a.store.dir)),
        files: vec![],
        index: vec![],
    };
    for r in rows.iter().filter(|r| a.nodes.is_empty() || a.nodes.contains(&r.node)) {
        let n = &r.node;
        // A node's files go under its name: one that is no plain file name (`..`, `a/b`) is
        // skipped and said so, and never fails the archive for every other node.
        if !safe_name(n) {
            ar.error(n, "the node's files", "its name is not a plain file name: skipped");
            continue;
        }
        let mut budget = MAX_NODE_BYTES;
        let summary = hardshift_collector::summary::summarize(r, now);
        let json = |v: &dyn erased::Json| v.pretty();
        ar.text(
            format!("{n}/status.json"),
            "the collector's row for the node",
            &json(&summary),
            &mut budget,
        );
        if let Some(last) = &r.last {
            let findings = diagnose::diagnose(n, &r.role, last, now - r.last_seen_ms);
            ar.text(format!("{n}/diagnose.json"), "hardshift diagnose", &json(&findings), &mut budget);
            let comps: Vec<serde_json::Value> = last.components.iter().map(hardshift_proto::vocab::component_json).collect();
            let containers: Vec<serde_json::Value> = last
                .containers
                .iter()
                .map(|c| serde_json::json!({"pod": c.pod, "name": c.name, "state": c.state, "exitCode": c.exit_code, "reason": c.reason, "message": c.message, "image": c.image}))
                .collect();
            let host = last.host.clone().unwrap_or_default();
            let report = serde_json::json!({"seq": last.seq, "time_ms": last.time_ms, "components": comps, "containers": containers,
                "host": {"hostname": host.hostname, "boot_id": host.boot_id, "uptime_seconds": host.uptime_seconds, "load1": host.load1,
                "memory_total_bytes": host.memory_total_bytes, "memory_available_bytes": host.memory_available_bytes,
                "root_free_bytes": host.root_free_bytes, "var_free_bytes": host.var_free_bytes, "addresses": host.addresses,
                "clock_offset_ms": host.clock_offset_known.then_some(host.clock_offset_ms)}});
            ar.text(
                format!("{n}/last-report.json"),
                "the node's newest report",
                &json(&report),
                &mut budget,
            );
        }
        let reports = store.reports(n).map_err(a.store.broken())?;
        ar.text(
            format!("{n}/events.json"),
            "state changes",
            &json(&events::changes(n, &reports)),
            &mut budget,
        );
        // Through the agent: the bounded, read-only answers of `hardshift logs`.
        let mut asks: Vec<(String, String, Kind)> = hardshift_proto::DEBUG_UNITS
            .iter()
            .map(|u| {
                (
                    format!("{n}/journal/{u}.log"),
                    format!("journal of {u}"),
                    Kind::Journal(JournalRequest {
                        unit: u.to_string(),
                        lines: a.lines,
                    }),
                )
            })
            .collect();
        if r.role != "worker" {
            asks.push((
                format!("{n}/etcd-members.txt"),
                "etcd's member list".into(),
                Kind::EtcdMembers(EtcdMembersRequest {}),
            ));
        }
        let failing = r
            .last
            .iter()
            .flat_map(|l| hardshift_proto::vocab::failing_containers(&l.containers));
        for c in failing.take(MAX_CONTAINERS) {
            let sel = format!("{}/{}", c.pod, c.name);
            asks.push((
                format!("{n}/containers/{}.log", sel.replace('/', "_")),
                format!("log of container {sel}"),
                Kind::ContainerLog(ContainerLogRequest {
                    container: c.id.clone(),
                    lines: a.lines,
                }),
            ));
        }
        for (path, what, kind) in asks {
            match rt.block_on(super::logs::ask(&socket, n, kind)) {
                Ok(resp) if resp.error.is_empty() => {
                    let mut body = resp.lines.join("\n");
                    body.push('\n');
                    if resp.truncated {
                        body.push_str("(cut at the agent's bound)\n");
                    }
                    ar.text(path, &what, &body, &mut budget);
                }
                Ok(resp) => ar.error(n, &what, &resp.error),
                Err(e) => ar.error(n, &what, &e.message),
            }
        }
    }
    // What the API side saw: the objects as last seen, every change, and the last contact.
    let api = serde_json::json!({
        "contact": store.api_status().map_err(a.store.broken())?,
        "objects": store.api_objects().map_err(a.store.broken())?,
        "changes": store.api_changes().map_err(a.store.broken())?,
    });
    let mut budget = MAX_NODE_BYTES;
    ar.text(
        "api.json".into(),
        "the API side: Nodes, CSRs, ClusterOperators, ClusterVersion, control-plane pods and their changes",
        &serde_json::to_string_pretty(&api).map_err(Failure::other)?,
        &mut budget,
    );
    let decisions = a.store.dir.join(hardshift_generator::layout::CSR_DECISIONS);
    if let Ok(t) = std::fs::read_to_string(&decisions) {
        let mut budget = MAX_NODE_BYTES;
        ar.text("csr-decisions.jsonl".into(), "every approve-csrs decision", &t, &mut budget);
    }
    let index = serde_json::to_string_pretty(&serde_json::json!({
        "made_ms": now, "nodes": rows.iter().filter(|r| a.nodes.is_empty() || a.nodes.contains(&r.node)).map(|r| &r.node).collect::<Vec<_>>(),
        "secrets": "private keys, bearer tokens, pull-secret auths, kubeconfig key data and passwords are replaced by [REDACTED]",
        "entries": ar.index,
    }))
    .map_err(Failure::other)?;
    ar.files.insert(0, ("index.json".into(), index.into_bytes()));
    write(&a.output, &ar.files).map_err(|e| Failure::other(format!("{}: {e}", a.output.display())))?;
    let errors = ar.index.iter().filter(|e| e.get("error").is_some()).count();
    println!(
        "wrote {} ({} files, {errors} requests unanswered: see index.json)",
        a.output.display(),
        ar.files.len()
    );
    Ok(0)
}

/// A node name usable as one path component inside the archive.
fn safe_name(n: &str) -> bool {
    !n.is_empty() && n != "." && n != ".." && !n.contains('/') && !n.contains('\0') && n.len() <= 253
}

/// The archive, written whole or not at all (temp file, then rename), 0600: logs can say much.
fn write(path: &std::path::Path, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let result = (|| {
        let f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        let gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        for (name, bytes) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(bytes.len() as u64);
            h.set_mode(0o600);
            h.set_mtime((hardshift_collector::now_ms() / 1000) as u64);
            h.set_cksum();
            tar.append_data(&mut h, format!("hardshift-gather/{name}"), bytes.as_slice())?;
        }
        let f = tar.into_inner()?.finish()?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Pretty JSON of anything serializable, for the archive's files.
mod erased {
    pub trait Json {
        fn pretty(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn pretty(&self) -> String {
            serde_json::to_string_pretty(self).unwrap_or_default()
        }
    }
}
