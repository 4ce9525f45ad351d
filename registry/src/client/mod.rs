//! A small OCI distribution client over reqwest (rustls with ring, the workspace's one provider):
//! manifests by HEAD or GET, blobs streamed to a file and checked against their digest, and the
//! registry's auth as registries do it: anonymous, then Basic or a Bearer token fetched with the
//! pull secret's credentials. Every failure says which registry, and the registry's own words.

mod handshake;

use crate::auth::Auths;
pub use crate::error::Error;
use crate::reference::Reference;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

pub const MANIFEST_TYPES: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
/// A manifest larger than this is not one.
const MAX_MANIFEST: usize = 4 << 20;
/// The largest blob fetched at all (a release image's layers are far smaller).
pub const MAX_BLOB: u64 = 4 << 30;
/// A blob's deadline: a base (120 s, or `HARDSHIFT_BLOB_DEADLINE` seconds for a slow link),
/// plus a second per `BLOB_MIN_RATE` bytes of its size.
const BLOB_MIN_RATE: u64 = 64 * 1024;

fn blob_deadline_base() -> Duration {
    let secs = std::env::var("HARDSHIFT_BLOB_DEADLINE")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    Duration::from_secs(secs.unwrap_or(120))
}

pub struct Client {
    http: reqwest::Client,
    auths: Auths,
    /// Bearer tokens by (registry, scope).
    tokens: tokio::sync::Mutex<HashMap<(String, String), String>>,
    /// Registries that asked for Basic: send it at once next time.
    basic: tokio::sync::Mutex<std::collections::HashSet<String>>,
}

/// The registry's own error text from a JSON error body (`{"errors":[{"code","message"}]}`), or the body.
fn said(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    match v["errors"].as_array() {
        Some(es) if !es.is_empty() => es
            .iter()
            .map(|e| {
                format!("{} {}", e["code"].as_str().unwrap_or(""), e["message"].as_str().unwrap_or(""))
                    .trim()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("; "),
        _ => body.trim().chars().take(300).collect(),
    }
}

fn transport(registry: &str, e: &reqwest::Error) -> Error {
    let mut chain = e.to_string();
    let mut cur = std::error::Error::source(e);
    while let Some(c) = cur {
        chain.push_str(": ");
        chain.push_str(&c.to_string());
        cur = c.source();
    }
    let lower = chain.to_lowercase();
    let registry = registry.to_string();
    // A timeout's chain may pass through the TLS stream's error: it is not a TLS problem.
    if e.is_timeout() {
        return Error::Connect {
            registry,
            detail: format!("timed out: {chain}"),
        };
    }
    if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake") {
        Error::Tls { registry, detail: chain }
    } else if lower.contains("dns error") || lower.contains("lookup address") || lower.contains("name or service not known") {
        Error::Dns { registry, detail: chain }
    } else {
        Error::Connect { registry, detail: chain }
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

impl Client {
    /// `extra_roots`: PEM certificates trusted beside the system's (install-config's
    /// additionalTrustBundle).
    pub fn new(auths: Auths, extra_roots: Option<&str>, timeout: Duration) -> Result<Client, Error> {
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(c);
        }
        if let Some(pem) = extra_roots {
            let mut n = 0;
            for c in rustls_pemfile::certs(&mut pem.as_bytes()) {
                let c = c.map_err(|e| Error::TrustBundle(e.to_string()))?;
                roots.add(c).map_err(|e| Error::TrustBundle(e.to_string()))?;
                n += 1;
            }
            if n == 0 && !pem.trim().is_empty() {
                return Err(Error::TrustBundle("holds no PEM certificate".into()));
            }
        }
        let tls = rustls::ClientConfig::builder_with_provider(hardshift_crypto::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Other(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .connect_timeout(timeout)
            .read_timeout(timeout)
            .user_agent(concat!("hardshift/", env!("CARGO_PKG_VERSION")))
            // Registries and token servers over HTTPS only, redirects included: the pull
            // secret's credentials never travel in the clear.
            .https_only(true)
            .build()
            .map_err(|e| Error::Other(format!("HTTP client: {e}")))?;
        Ok(Client {
            http,
            auths,
            tokens: Default::default(),
            basic: Default::default(),
        })
    }

    fn url(r: &Reference, what: &str) -> String {
        format!("https://{}/v2/{}/{what}", r.registry, r.repository)
    }

    fn status_error(r: &Reference, status: u16, body: &str) -> Error {
        match status {
            404 => Error::Missing {
                image: r.to_string(),
                registry: r.registry.clone(),
                said: if body.is_empty() { "HTTP 404".into() } else { said(body) },
            },
            401 | 403 => Error::Auth {
                image: r.to_string(),
                registry: r.registry.clone(),
                status,
                said: said(body),
            },
            _ => Error::Http {
                image: r.to_string(),
                registry: r.registry.clone(),
                status,
                said: said(body),
            },
        }
    }

    /// HEAD the manifest: its digest, as the registry says it, when it is there. Never pulls.
    /// On a refusal the same request is made with GET, to read the registry's error text.
    pub async fn head_manifest(&self, r: &Reference) -> Result<String, Error> {
        let resp = self
            .send(r, reqwest::Method::HEAD, &format!("manifests/{}", r.reference()), MANIFEST_TYPES)
            .await?;
        let status = resp.status().as_u16();
        if status == 200 {
            let d = resp
                .headers()
                .get("docker-content-digest")
                .and_then(|h| h.to_str().ok())
                .map(String::from)
                .or_else(|| r.digest.clone())
                .unwrap_or_default();
            if let Some(want) = &r.digest {
                if &d != want {
                    return Err(Error::Digest {
                        image: r.to_string(),
                        want: want.clone(),
                        got: d,
                    });
                }
            }
            return Ok(d);
        }
        let body = match self
            .send(r, reqwest::Method::GET, &format!("manifests/{}", r.reference()), MANIFEST_TYPES)
            .await
        {
            Ok(g) => g.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        Err(Self::status_error(r, status, &body))
    }

    /// GET the manifest (or index): (bytes, media type, digest). A pinned digest must match.
    pub async fn manifest(&self, r: &Reference) -> Result<(Vec<u8>, String, String), Error> {
        let resp = self
            .send(r, reqwest::Method::GET, &format!("manifests/{}", r.reference()), MANIFEST_TYPES)
            .await?;
        let status = resp.status().as_u16();
        let media = resp
            .headers()
            .get("content-type")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .to_string();
        if status != 200 {
            let body = resp.text().await.unwrap_or_default();
            return Err(Self::status_error(r, status, &body));
        }
        // A manifest is small: one deadline for all of it (a registry sending a byte every few
        // seconds holds no read timeout but this one).
        let deadline = blob_deadline_base();
        let started = std::time::Instant::now();
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        let read = async {
            while let Some(chunk) = stream.next().await {
                body.extend_from_slice(&chunk.map_err(|e| transport(&r.registry, &e))?);
                if body.len() > MAX_MANIFEST {
                    return Err(Error::Other(format!("{r}: a manifest over {MAX_MANIFEST} bytes")));
                }
            }
            Ok(())
        };
        if tokio::time::timeout(deadline, read).await.is_err() {
            return Err(Error::Other(format!(
                "{r}: the manifest was not whole after {:.0} s: the registry {} sends too slowly (the deadline for a manifest is {} s)",
                started.elapsed().as_secs_f64(),
                r.registry,
                deadline.as_secs()
            )));
        }
        let got = sha256_hex(&body);
        if let Some(want) = &r.digest {
            if &got != want {
                return Err(Error::Digest {
                    image: r.to_string(),
                    want: want.clone(),
                    got,
                });
            }
        }
        let media = if media.is_empty() {
            serde_json::from_slice::<serde_json::Value>(&body).unwrap_or_default()["mediaType"]
                .as_str()
                .unwrap_or("")
                .to_string()
        } else {
            media
        };
        Ok((body, media, got))
    }

    /// Stream a blob into `path` (through a temporary file beside it), hashing as it goes: a
    /// blob whose bytes do not hash to `digest` is refused and nothing is left behind. `size`
    /// (what the manifest declares) bounds it: one byte more, or fewer at the end, is refused;
    /// never more than `MAX_BLOB`. The whole transfer has a deadline that grows with the size
    /// (a registry sending a byte every few seconds holds no read timeout but this one).
    pub async fn blob_to_file(
        &self,
        r: &Reference,
        digest: &str,
        path: &Path,
        size: Option<u64>,
        progress: &dyn crate::progress::Progress,
    ) -> Result<u64, Error> {
        let limit = size.unwrap_or(MAX_BLOB).min(MAX_BLOB);
        let deadline = blob_deadline_base() + Duration::from_secs(limit / BLOB_MIN_RATE);
        let started = std::time::Instant::now();
        let what = format!("{}@{digest} (a layer of {r})", r.name());
        let slow = |n: u64| {
            Error::Other(format!(
                "{what}: {n} of {} bytes after {:.0} s: the registry {} sends too slowly (the deadline for this size is {} s)",
                size.map_or("?".to_string(), |s| s.to_string()),
                started.elapsed().as_secs_f64(),
                r.registry,
                deadline.as_secs()
            ))
        };
        let resp = self.send(r, reqwest::Method::GET, &format!("blobs/{digest}"), "*/*").await?;
        let status = resp.status().as_u16();
        if status != 200 {
            let body = resp.text().await.unwrap_or_default();
            return Err(Self::status_error(r, status, &body));
        }
        let tmp = path.with_extension(format!("part-{}", std::process::id()));
        let io = |e: std::io::Error| Error::io(&tmp)(e);
        let mut f = tokio::fs::File::create(&tmp).await.map_err(io)?;
        let mut h = Sha256::new();
        let mut n = 0u64;
        let mut stream = resp.bytes_stream();
        let transfer = async {
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| transport(&r.registry, &e))?;
                h.update(&chunk);
                n += chunk.len() as u64;
                if n > limit {
                    return Err(Error::Other(match size {
                        Some(s) if s <= MAX_BLOB => {
                            format!("{what}: the registry sent more than the {s} bytes the manifest declares: refused")
                        }
                        _ => format!("{what}: over {MAX_BLOB} bytes: refused"),
                    }));
                }
                f.write_all(&chunk).await.map_err(io)?;
                progress.inc(chunk.len() as u64);
            }
            if let Some(s) = size.filter(|s| *s != n) {
                return Err(Error::Other(format!(
                    "{what}: {n} bytes, not the {s} the manifest declares: refused"
                )));
            }
            f.sync_all().await.map_err(io)?;
            Ok::<(), Error>(())
        };
        let result = match tokio::time::timeout(deadline, transfer).await {
            Ok(r) => r,
            Err(_) => Err(slow(n)),
        };
        let got = format!("sha256:{:x}", h.finalize());
        if let Err(e) = result {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(e);
        }
        if got != digest {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(Error::Digest {
                image: format!("{}@{digest} (a layer of {r})", r.name()),
                want: digest.to_string(),
                got,
            });
        }
        tokio::fs::rename(&tmp, path).await.map_err(io)?;
        Ok(n)
    }
}
