//! Answers to debug requests: read-only and bounded. Journal lines of an allow-listed unit (read by
//! `journalctl` with arguments built here, never taken from the request), the tail of a container's
//! log file found through the CRI, and etcd's member list. Nothing sent is ever executed.

use crate::config::Config;
use anyhow::Context;
use hardshift_proto::cri::ContainerStatusRequest;
use hardshift_proto::v1::debug_request::Kind;
use hardshift_proto::v1::{DebugRequest, DebugResponse};
use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

/// The units whose journal a request may read.
pub const UNITS: [&str; 5] = hardshift_proto::DEBUG_UNITS;
pub const MAX_LINES: u32 = 2000;
pub const DEFAULT_LINES: u32 = 100;
/// Bytes of output per answer: a gRPC message stays small whatever the lines hold.
pub const MAX_BYTES: usize = 1 << 20;
const TIMEOUT: Duration = Duration::from_secs(10);

/// `kubelet` or `kubelet.service` → `kubelet.service`, if allow-listed.
pub fn allowed_unit(unit: &str) -> anyhow::Result<String> {
    let base = unit.strip_suffix(".service").unwrap_or(unit);
    if UNITS.contains(&base) {
        Ok(format!("{base}.service"))
    } else {
        Err(anyhow::anyhow!(
            "unit {unit:?} is not one a debug request may read (allowed: {})",
            UNITS.join(", ")
        ))
    }
}

fn bound(lines: u32) -> u32 {
    match lines {
        0 => DEFAULT_LINES,
        n => n.min(MAX_LINES),
    }
}

/// The last `lines` of `text`, keeping at most MAX_BYTES (the newest).
fn tail(text: &str, lines: u32) -> (Vec<String>, bool) {
    let all: Vec<&str> = text.lines().collect();
    let mut truncated = all.len() > lines as usize;
    let mut out: Vec<String> = Vec::new();
    let mut bytes = 0;
    for l in all.iter().rev().take(lines as usize) {
        bytes += l.len() + 1;
        if bytes > MAX_BYTES {
            truncated = true;
            break;
        }
        out.push(l.to_string());
    }
    out.reverse();
    (out, truncated)
}

async fn journal(cfg: &Config, unit: &str, lines: u32) -> anyhow::Result<(Vec<String>, bool)> {
    let unit = allowed_unit(unit)?;
    let n = bound(lines);
    let mut cmd = tokio::process::Command::new("journalctl");
    cmd.args(["--no-pager", "--quiet", "-o", "short-iso", "-u", &unit, "-n", &n.to_string()]);
    if let Some(d) = &cfg.journal_directory {
        cmd.arg("--directory").arg(d);
    }
    cmd.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(TIMEOUT, cmd.output())
        .await
        .map_err(|_| anyhow::anyhow!("journalctl did not finish within {}s", TIMEOUT.as_secs()))?
        .context("journalctl")?;
    if !out.status.success() {
        return Err(anyhow::anyhow!("journalctl: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let (l, t) = tail(&String::from_utf8_lossy(&out.stdout), n);
    Ok((l, t || lines > MAX_LINES))
}

/// The last bytes of a file, at most MAX_BYTES, from a line start.
fn read_tail(path: &std::path::Path) -> anyhow::Result<String> {
    let e = |x: std::io::Error| anyhow::Error::new(x).context(path.display().to_string());
    let mut f = std::fs::File::open(path).map_err(e)?;
    let len = f.metadata().map_err(e)?.len();
    let start = len.saturating_sub(MAX_BYTES as u64);
    f.seek(SeekFrom::Start(start)).map_err(e)?;
    let mut buf = Vec::new();
    f.take(MAX_BYTES as u64).read_to_end(&mut buf).map_err(e)?;
    let text = String::from_utf8_lossy(&buf).to_string();
    Ok(if start > 0 {
        text.split_once('\n').map(|(_, r)| r.to_string()).unwrap_or_default()
    } else {
        text
    })
}

/// `selector`: a container id or unique id prefix, or `namespace/pod/container` (its newest attempt).
async fn container_log(cfg: &Config, selector: &str, lines: u32) -> anyhow::Result<(Vec<String>, bool)> {
    if selector.is_empty() {
        return Err(anyhow::anyhow!("no container named (an id, or namespace/pod/container)"));
    }
    let mut c = hardshift_proto::cri_client(&cfg.cri_socket, Duration::from_secs(3)).await?;
    let st = |s: tonic::Status| anyhow::anyhow!("CRI: {}", s.message());
    let (_, list, pods) = crate::cri::inventory(&mut c).await?;
    let pod_of = |id: &str| pods.get(id).cloned().unwrap_or_default();
    let chosen = if selector.contains('/') {
        // By name: its newest attempt.
        list.iter()
            .filter(|k| {
                let name = k.metadata.as_ref().map(|m| m.name.as_str()).unwrap_or("");
                format!("{}/{name}", pod_of(&k.pod_sandbox_id)) == selector
            })
            .max_by_key(|k| (k.metadata.as_ref().map(|m| m.attempt).unwrap_or(0), k.created_at))
    } else {
        let by_id: Vec<_> = list.iter().filter(|k| k.id.starts_with(selector)).collect();
        if by_id.len() > 1 {
            return Err(anyhow::anyhow!(
                "{selector:?} matches {} containers: give more of the id",
                by_id.len()
            ));
        }
        by_id.first().copied()
    };
    let chosen = chosen.with_context(|| format!("no container {selector:?} on this node"))?;
    let status = c
        .container_status(ContainerStatusRequest {
            container_id: chosen.id.clone(),
            verbose: false,
        })
        .await
        .map_err(st)?
        .into_inner()
        .status
        .context("CRI: no status")?;
    if status.log_path.is_empty() {
        return Err(anyhow::anyhow!("container {} has no log path", chosen.id));
    }
    let n = bound(lines);
    let text = read_tail(std::path::Path::new(&status.log_path))?;
    let (l, t) = tail(&text, n);
    Ok((l, t || lines > MAX_LINES))
}

async fn etcd_members(cfg: &Config) -> anyhow::Result<(Vec<String>, bool)> {
    let e = cfg.etcd.as_ref().context("this node runs no etcd member the agent knows of")?;
    Ok((crate::etcd::members(e).await?, false))
}

pub async fn answer(cfg: &Config, req: DebugRequest) -> DebugResponse {
    let r = match req.kind {
        Some(Kind::Journal(j)) => journal(cfg, &j.unit, j.lines).await,
        Some(Kind::ContainerLog(c)) => container_log(cfg, &c.container, c.lines).await,
        Some(Kind::EtcdMembers(_)) => etcd_members(cfg).await,
        None => Err(anyhow::anyhow!("unknown request kind (a newer collector?)")),
    };
    match r {
        Ok((lines, truncated)) => DebugResponse {
            id: req.id,
            error: String::new(),
            lines,
            truncated,
        },
        Err(error) => DebugResponse {
            id: req.id,
            // The whole chain, outermost first: the collector shows it as the answer.
            error: format!("{error:#}"),
            lines: vec![],
            truncated: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allow_listed_units() {
        assert_eq!(allowed_unit("kubelet").unwrap(), "kubelet.service");
        assert_eq!(allowed_unit("crio.service").unwrap(), "crio.service");
        for bad in ["sshd", "kubelet; rm -rf /", "../kubelet", "-o json", ""] {
            assert!(allowed_unit(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tail_is_bounded_by_lines_and_bytes() {
        let text: String = (0..10).map(|i| format!("line {i}\n")).collect();
        let (l, t) = tail(&text, 3);
        assert_eq!(l, vec!["line 7", "line 8", "line 9"]);
        assert!(t);
        let big = "x".repeat(600_000) + "\n" + &"y".repeat(600_000) + "\n";
        let (l, t) = tail(&big, 10);
        assert_eq!(l.len(), 1);
        assert!(t);
        assert_eq!(bound(0), DEFAULT_LINES);
        assert_eq!(bound(1_000_000), MAX_LINES);
    }
}
