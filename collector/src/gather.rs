//! `hardshift gather`'s archive: what a support case needs, without SSH, through the agents:
//! each node's allow-listed journals, its failing containers' logs, etcd's members, its newest
//! report, events and diagnosis, plus the API side and the CSR decisions; secrets stripped; an
//! index. Every request is the agents' bounded, read-only kind, and each node's share is capped.

use crate::scrub::Scrubber;
use crate::store::{NodeRow, Store, StoreError};
use crate::{diagnose, events, summary};
use hardshift_proto::v1::debug_request::Kind;
use hardshift_proto::v1::{ContainerLogRequest, EtcdMembersRequest, JournalRequest, NodeReport};
use hardshift_proto::vocab;
use serde_json::json;
use std::path::{Path, PathBuf};

/// Containers' logs fetched per node at most, and bytes per node at most.
const MAX_CONTAINERS: usize = 10;
const MAX_NODE_BYTES: usize = 32 << 20;

/// What to gather, and from where.
pub struct Request {
    /// The nodes (empty: every node that ever reported).
    pub nodes: Vec<String>,
    /// Journal and container log lines per request.
    pub lines: u32,
    /// The collector's admin socket.
    pub socket: PathBuf,
    /// The bundle's own secrets, stripped by value too.
    pub secrets: Vec<String>,
    /// The approve-csrs decisions, when there are any.
    pub csr_decisions: Option<String>,
}

/// Why there is no archive.
#[derive(Debug)]
pub enum Error {
    /// A node asked for never reported (the user's input).
    Unknown(String),
    /// The store does not read.
    Store(StoreError),
    Other(String),
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

/// The archive's files (index.json first) and its index's entries.
pub struct Archive {
    scrubber: Scrubber,
    pub files: Vec<(String, Vec<u8>)>,
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
            .push(json!({"file": path, "what": what, "bytes": bytes.len(), "cut": cut}));
        self.files.push((path, bytes));
    }

    fn error(&mut self, node: &str, what: &str, why: &str) {
        self.index.push(json!({"node": node, "what": what, "error": why}));
    }

    /// Requests no node answered.
    pub fn unanswered(&self) -> usize {
        self.index.iter().filter(|e| e.get("error").is_some()).count()
    }
}

/// Gather from `store` and, through the collector's admin socket, from the agents.
pub fn gather(store: &Store, req: &Request, now_ms: i64) -> Result<Archive, Error> {
    let rows = store.nodes()?;
    let known: Vec<&str> = rows.iter().map(|r| r.node.as_str()).collect();
    if let Some(n) = req.nodes.iter().find(|n| !known.contains(&n.as_str())) {
        return Err(Error::Unknown(format!(
            "no reports from {n:?} (nodes reporting: {})",
            known.join(", ")
        )));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Other(e.to_string()))?;
    let mut ar = Archive {
        scrubber: Scrubber::with_values(req.secrets.clone()),
        files: vec![],
        index: vec![],
    };
    let chosen: Vec<&NodeRow> = rows
        .iter()
        .filter(|r| req.nodes.is_empty() || req.nodes.contains(&r.node))
        .collect();
    for r in &chosen {
        // A node's files go under its name: one that is no plain file name (`..`, `a/b`) is
        // skipped and said so, and never fails the archive for every other node.
        if !safe_name(&r.node) {
            ar.error(&r.node, "the node's files", "its name is not a plain file name: skipped");
            continue;
        }
        let mut budget = node(&mut ar, store, r, now_ms)?;
        for (path, what, kind) in asks(r, req.lines) {
            match rt.block_on(crate::admin::ask(&req.socket, &r.node, kind)) {
                Ok(resp) if resp.error.is_empty() => {
                    let mut body = resp.lines.join("\n");
                    body.push('\n');
                    if resp.truncated {
                        body.push_str("(cut at the agent's bound)\n");
                    }
                    ar.text(path, &what, &body, &mut budget);
                }
                Ok(resp) => ar.error(&r.node, &what, &resp.error),
                Err(e) => ar.error(&r.node, &what, &e.to_string()),
            }
        }
    }
    api_side(&mut ar, store, req)?;
    let index = serde_json::to_string_pretty(&json!({
        "made_ms": now_ms, "nodes": chosen.iter().map(|r| &r.node).collect::<Vec<_>>(),
        "secrets": "private keys, bearer tokens, pull-secret auths, kubeconfig key data and passwords are replaced by [REDACTED]",
        "entries": ar.index,
    }))
    .map_err(|e| Error::Other(e.to_string()))?;
    ar.files.insert(0, ("index.json".into(), index.into_bytes()));
    Ok(ar)
}

/// What the collector knows of node `r`: its row, its diagnosis and newest report, its events.
/// Returns what is left of the node's byte budget.
fn node(ar: &mut Archive, store: &Store, r: &NodeRow, now_ms: i64) -> Result<usize, StoreError> {
    let n = &r.node;
    let mut budget = MAX_NODE_BYTES;
    let summary = summary::summarize(r, now_ms);
    ar.text(
        format!("{n}/status.json"),
        "the collector's row for the node",
        &pretty(&summary),
        &mut budget,
    );
    if let Some(last) = &r.last {
        let findings = diagnose::diagnose(n, &r.role, last, now_ms - r.last_seen_ms);
        ar.text(format!("{n}/diagnose.json"), "hardshift diagnose", &pretty(&findings), &mut budget);
        ar.text(
            format!("{n}/last-report.json"),
            "the node's newest report",
            &pretty(&report_json(last)),
            &mut budget,
        );
    }
    let reports = store.reports(n)?;
    ar.text(
        format!("{n}/events.json"),
        "state changes",
        &pretty(&events::changes(n, &reports)),
        &mut budget,
    );
    Ok(budget)
}

/// A report as JSON, for a person reading the archive.
fn report_json(last: &NodeReport) -> serde_json::Value {
    let comps: Vec<serde_json::Value> = last.components.iter().map(vocab::component_json).collect();
    let containers: Vec<serde_json::Value> = last
        .containers
        .iter()
        .map(|c| json!({"pod": c.pod, "name": c.name, "state": c.state, "exitCode": c.exit_code, "reason": c.reason, "message": c.message, "image": c.image}))
        .collect();
    let host = last.host.clone().unwrap_or_default();
    json!({"seq": last.seq, "time_ms": last.time_ms, "components": comps, "containers": containers,
        "host": {"hostname": host.hostname, "boot_id": host.boot_id, "uptime_seconds": host.uptime_seconds, "load1": host.load1,
        "memory_total_bytes": host.memory_total_bytes, "memory_available_bytes": host.memory_available_bytes,
        "root_free_bytes": host.root_free_bytes, "var_free_bytes": host.var_free_bytes, "addresses": host.addresses,
        "clock_offset_ms": host.clock_offset_known.then_some(host.clock_offset_ms)}})
}

/// Through the agent, the bounded, read-only answers of `hardshift logs`: (file, what, request).
fn asks(r: &NodeRow, lines: u32) -> Vec<(String, String, Kind)> {
    let n = &r.node;
    let mut asks: Vec<(String, String, Kind)> = hardshift_proto::DEBUG_UNITS
        .iter()
        .map(|u| {
            let kind = Kind::Journal(JournalRequest {
                unit: u.to_string(),
                lines,
            });
            (format!("{n}/journal/{u}.log"), format!("journal of {u}"), kind)
        })
        .collect();
    if r.role != "worker" {
        asks.push((
            format!("{n}/etcd-members.txt"),
            "etcd's member list".into(),
            Kind::EtcdMembers(EtcdMembersRequest {}),
        ));
    }
    let failing = r.last.iter().flat_map(|l| vocab::failing_containers(&l.containers));
    for c in failing.take(MAX_CONTAINERS) {
        let sel = format!("{}/{}", c.pod, c.name);
        let kind = Kind::ContainerLog(ContainerLogRequest {
            container: c.id.clone(),
            lines,
        });
        asks.push((
            format!("{n}/containers/{}.log", sel.replace('/', "_")),
            format!("log of container {sel}"),
            kind,
        ));
    }
    asks
}

/// What the API side saw (the objects as last seen, every change, the last contact), and every
/// approve-csrs decision.
fn api_side(ar: &mut Archive, store: &Store, req: &Request) -> Result<(), Error> {
    let api = json!({
        "contact": store.api_status()?,
        "objects": store.api_objects()?,
        "changes": store.api_changes()?,
    });
    let api = serde_json::to_string_pretty(&api).map_err(|e| Error::Other(e.to_string()))?;
    let what = "the API side: Nodes, CSRs, ClusterOperators, ClusterVersion, control-plane pods and their changes";
    ar.text("api.json".into(), what, &api, &mut MAX_NODE_BYTES.clone());
    if let Some(t) = &req.csr_decisions {
        ar.text(
            "csr-decisions.jsonl".into(),
            "every approve-csrs decision",
            t,
            &mut MAX_NODE_BYTES.clone(),
        );
    }
    Ok(())
}

/// Pretty JSON of anything serializable, for the archive's files.
fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// A node name usable as one path component inside the archive.
fn safe_name(n: &str) -> bool {
    !n.is_empty() && n != "." && n != ".." && !n.contains('/') && !n.contains('\0') && n.len() <= 253
}

/// The archive, written whole or not at all (temp file, then rename), 0600: logs can say much.
pub fn write(path: &Path, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
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
            h.set_mtime((crate::now_ms() / 1000) as u64);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_that_are_no_plain_file_name_are_refused() {
        for bad in ["", ".", "..", "a/b", "x\0y"] {
            assert!(!safe_name(bad), "{bad:?}");
        }
        assert!(safe_name("master-0"));
    }

    #[test]
    fn a_worker_is_not_asked_for_etcd_members_and_a_master_is() {
        let mut r = NodeRow {
            node: "w".into(),
            role: "worker".into(),
            ..Default::default()
        };
        let files = |r: &NodeRow| asks(r, 5).into_iter().map(|(f, _, _)| f).collect::<Vec<_>>();
        assert_eq!(files(&r).len(), hardshift_proto::DEBUG_UNITS.len());
        r.role = "master".into();
        assert!(files(&r).contains(&"w/etcd-members.txt".to_string()));
    }

    #[test]
    fn the_budget_cuts_a_file_and_says_so() {
        let mut ar = Archive {
            scrubber: Scrubber::default(),
            files: vec![],
            index: vec![],
        };
        let mut budget = 4;
        ar.text("a".into(), "x", "123456", &mut budget);
        assert_eq!((ar.files[0].1.as_slice(), budget), (&b"1234"[..], 0));
        assert_eq!(ar.index[0]["cut"], true);
        ar.error("n", "y", "refused");
        assert_eq!(ar.unanswered(), 1);
    }
}
