//! etcd over TLS with the node's etcd client certificate: `/health`, and the JSON gateway's
//! maintenance status (leader, raft index, db size, errors), member list and alarms.

use hardshift_proto::v1::{ComponentState, Health};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

const TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdConfig {
    /// `host:port` of the local member's client URL.
    pub endpoint: String,
    pub ca: std::path::PathBuf,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

fn tls(cfg: &EtcdConfig) -> Result<Arc<ClientConfig>, String> {
    let e = |p: &std::path::Path, x: &dyn std::fmt::Display| format!("{}: {x}", p.display());
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(&cfg.ca).map_err(|x| e(&cfg.ca, &x))? {
        roots.add(c.map_err(|x| e(&cfg.ca, &x))?).map_err(|x| e(&cfg.ca, &x))?;
    }
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cfg.cert)
        .map_err(|x| e(&cfg.cert, &x))?
        .collect::<Result<_, _>>()
        .map_err(|x| e(&cfg.cert, &x))?;
    let key = PrivateKeyDer::from_pem_file(&cfg.key).map_err(|x| e(&cfg.key, &x))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let c = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|x| x.to_string())?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .map_err(|x| x.to_string())?;
    Ok(Arc::new(c))
}

/// One HTTP/1.1 request over TLS; returns (status, body).
async fn request(cfg: &EtcdConfig, tls: Arc<ClientConfig>, method: &str, path: &str, body: &str) -> Result<(u16, String), String> {
    let host = cfg
        .endpoint
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(&cfg.endpoint)
        .trim_matches(['[', ']'])
        .to_string();
    let name = ServerName::try_from(host.clone()).map_err(|x| x.to_string())?;
    let tcp = tokio::net::TcpStream::connect(&cfg.endpoint)
        .await
        .map_err(|x| format!("{}: {x}", cfg.endpoint))?;
    let mut s = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(|x| format!("TLS: {x}"))?;
    let req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).await.map_err(|x| x.to_string())?;
    let mut buf = Vec::new();
    let _ = s.take(1 << 20).read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").ok_or("no HTTP response")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("no HTTP status")?;
    // etcd's gateway answers chunked or with a length; either way the JSON is in the body.
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Ok((status, body))
}

fn dechunk(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some((len, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(len.trim(), 16) else { break };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

#[derive(Deserialize, Default)]
struct Header {
    #[serde(default)]
    member_id: String,
    #[serde(default)]
    raft_term: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    header: Header,
    #[serde(default)]
    leader: String,
    #[serde(default)]
    db_size: String,
    #[serde(default)]
    raft_index: String,
    #[serde(default)]
    errors: Vec<String>,
}

#[derive(Deserialize, Default)]
struct Members {
    #[serde(default)]
    members: Vec<Member>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Member {
    #[serde(default, rename = "ID")]
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default, rename = "peerURLs")]
    peer_urls: Vec<String>,
    #[serde(default, rename = "clientURLs")]
    client_urls: Vec<String>,
    #[serde(default)]
    is_learner: bool,
}

/// The member list, one line per member (a debug request's answer).
pub async fn members(cfg: &EtcdConfig) -> Result<Vec<String>, String> {
    let run = async {
        let (code, body) = request(cfg, tls(cfg)?, "POST", "/v3/cluster/member/list", "{}").await?;
        if code != 200 {
            return Err(format!("member list: HTTP {code}: {}", body.trim()));
        }
        let ms: Members = serde_json::from_str(&body).map_err(|e| format!("member list: {e}"))?;
        Ok(ms
            .members
            .iter()
            .map(|m| {
                format!(
                    "{} name={} peers={} clients={}{}",
                    m.id,
                    if m.name.is_empty() { "(unstarted)" } else { &m.name },
                    m.peer_urls.join(","),
                    m.client_urls.join(","),
                    if m.is_learner { " learner" } else { "" }
                )
            })
            .collect())
    };
    tokio::time::timeout(TIMEOUT, run)
        .await
        .map_err(|_| format!("etcd at {} did not answer within 3s", cfg.endpoint))?
}

#[derive(Deserialize, Default)]
struct Alarms {
    #[serde(default)]
    alarms: Vec<serde_json::Value>,
}

pub async fn probe(cfg: &EtcdConfig) -> ComponentState {
    let mut c = ComponentState {
        name: "etcd".into(),
        ..Default::default()
    };
    // Before etcd runs here (a master before the cluster-etcd-operator rolls it out) its
    // certificates do not exist yet: that is a phase, not a fault.
    if let Some(p) = [&cfg.ca, &cfg.cert, &cfg.key].into_iter().find(|p| !p.exists()) {
        c.health = Health::Warning as i32;
        c.state = "no certificates yet".into();
        c.reason = format!("{} absent: etcd is not rolled out on this node yet", p.display());
        return c;
    }
    let run = async {
        let tls = tls(cfg)?;
        let (code, health) = request(cfg, tls.clone(), "GET", "/health", "").await?;
        let (_, status) = request(cfg, tls.clone(), "POST", "/v3/maintenance/status", "{}").await?;
        let (_, members) = request(cfg, tls.clone(), "POST", "/v3/cluster/member/list", "{}").await?;
        let (_, alarms) = request(cfg, tls, "POST", "/v3/maintenance/alarm", r#"{"action":"GET"}"#).await?;
        Ok::<_, String>((code, health, status, members, alarms))
    };
    match tokio::time::timeout(TIMEOUT, run).await {
        Err(_) => {
            c.health = Health::Failing as i32;
            c.state = "timeout".into();
            c.reason = format!("etcd at {} did not answer within 3s", cfg.endpoint);
        }
        Ok(Err(e)) => {
            c.health = Health::Failing as i32;
            c.state = "unreachable".into();
            c.reason = e;
        }
        Ok(Ok((code, health, status, members, alarms))) => {
            let st: Status = serde_json::from_str(&status).unwrap_or_default();
            let ms: Members = serde_json::from_str(&members).unwrap_or_default();
            let al: Alarms = serde_json::from_str(&alarms).unwrap_or_default();
            let healthy = code == 200 && health.contains("\"health\":\"true\"");
            let is_leader = !st.leader.is_empty() && st.leader == st.header.member_id;
            let mut d: HashMap<String, String> = HashMap::new();
            d.insert(
                "members".into(),
                ms.members.iter().map(|m| m.name.clone()).collect::<Vec<_>>().join(","),
            );
            d.insert("leader".into(), st.leader.clone());
            d.insert("isLeader".into(), is_leader.to_string());
            d.insert("raftIndex".into(), st.raft_index.clone());
            d.insert("raftTerm".into(), st.header.raft_term.clone());
            d.insert("dbSize".into(), st.db_size.clone());
            d.insert("alarms".into(), al.alarms.len().to_string());
            c.details = d;
            c.state = format!("{} members{}", ms.members.len(), if is_leader { ", leader" } else { "" });
            let (h, reason) = if !healthy {
                (Health::Failing, format!("/health: {}", health.trim()))
            } else if !al.alarms.is_empty() {
                (
                    Health::Failing,
                    format!("alarms: {}", serde_json::to_string(&al.alarms).unwrap_or_default()),
                )
            } else if st.leader.is_empty() || st.leader == "0" {
                (Health::Failing, "no leader".into())
            } else if !st.errors.is_empty() {
                (Health::Warning, st.errors.join("; "))
            } else {
                (Health::Ok, String::new())
            };
            c.health = h as i32;
            c.reason = reason;
        }
    }
    c
}
