//! Credentials from the pull secret (`{"auths": {"host[:port]": {"auth": base64(user:password)}}}`)
//! and the registry's challenge (`WWW-Authenticate: Bearer realm=...,service=...,scope=...`).

use base64::Engine;
use std::collections::BTreeMap;

/// user:password per registry host, never printed.
#[derive(Clone, Default)]
pub struct Auths(BTreeMap<String, (String, String)>);

impl std::fmt::Debug for Auths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Auths({:?})", self.0.keys().collect::<Vec<_>>())
    }
}

impl Auths {
    /// From the pull secret's JSON. A malformed entry is an error naming the registry, not its secret.
    pub fn from_pull_secret(json: &str) -> Result<Auths, crate::error::Error> {
        use crate::error::Error::PullSecret;
        let v: serde_json::Value = serde_json::from_str(json).map_err(|e| PullSecret(format!("not JSON: {e}")))?;
        let mut out = BTreeMap::new();
        for (host, entry) in v["auths"].as_object().into_iter().flatten() {
            let (user, pass) = match (entry["auth"].as_str(), entry["username"].as_str(), entry["password"].as_str()) {
                (Some(a), _, _) => {
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(a.trim())
                        .map_err(|_| PullSecret(format!("the auth of {host} is not base64")))?;
                    let s = String::from_utf8(raw).map_err(|_| PullSecret(format!("the auth of {host} is not UTF-8")))?;
                    let (u, p) = s
                        .split_once(':')
                        .ok_or_else(|| PullSecret(format!("the auth of {host} is not user:password")))?;
                    (u.to_string(), p.to_string())
                }
                (None, Some(u), Some(p)) => (u.to_string(), p.to_string()),
                _ => continue,
            };
            out.insert(host.trim_start_matches("https://").trim_end_matches('/').to_string(), (user, pass));
        }
        Ok(Auths(out))
    }

    /// The credentials for a registry host (`host[:port]`).
    pub fn get(&self, registry: &str) -> Option<(&str, &str)> {
        self.0.get(registry).map(|(u, p)| (u.as_str(), p.as_str()))
    }

    pub fn registries(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// A parsed `WWW-Authenticate` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

pub fn challenge(header: &str) -> Option<Challenge> {
    let (scheme, rest) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    // key="value" pairs; values may hold commas (scope="repository:a/b:pull,push").
    let mut params = BTreeMap::new();
    let mut s = rest.trim();
    while !s.is_empty() {
        let (k, after) = s.split_once('=')?;
        let after = after.trim_start();
        let (v, tail) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"')?;
            (&q[..end], &q[end + 1..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        params.insert(k.trim().to_ascii_lowercase(), v.to_string());
        s = tail.trim_start().trim_start_matches(',').trim_start();
    }
    Some(Challenge::Bearer {
        realm: params.remove("realm")?,
        service: params.remove("service"),
        scope: params.remove("scope"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_secret_entries_and_their_errors() {
        let a = Auths::from_pull_secret(
            r#"{"auths":{"mirror.lab:5000":{"auth":"dXNlcjpwOnc="},"quay.io":{"auth":"","email":"x"},"r.io":{"username":"u","password":"p"}}}"#,
        );
        assert!(a.is_err(), "an empty auth is not user:password");
        let a = Auths::from_pull_secret(r#"{"auths":{"mirror.lab:5000":{"auth":"dXNlcjpwOnc="},"r.io":{"username":"u","password":"p"}}}"#)
            .unwrap();
        assert_eq!(a.get("mirror.lab:5000"), Some(("user", "p:w")));
        assert_eq!(a.get("r.io"), Some(("u", "p")));
        assert!(!format!("{a:?}").contains("p:w"), "secrets are never printed");
        let e = Auths::from_pull_secret(r#"{"auths":{"q.io":{"auth":"!!!"}}}"#).unwrap_err();
        assert!(
            matches!(&e, crate::error::Error::PullSecret(m) if m.contains("q.io") && !m.contains("!!!")),
            "{e}"
        );
    }

    #[test]
    fn challenges_as_registries_send_them() {
        assert_eq!(
            challenge(r#"Bearer realm="https://auth.lab/token",service="registry.lab",scope="repository:ocp/release:pull,push""#),
            Some(Challenge::Bearer {
                realm: "https://auth.lab/token".into(),
                service: Some("registry.lab".into()),
                scope: Some("repository:ocp/release:pull,push".into())
            })
        );
        assert_eq!(challenge(r#"Basic realm="Registry Realm""#), Some(Challenge::Basic));
        assert_eq!(challenge("Negotiate"), None);
        assert_eq!(challenge("Bearer service=\"x\""), None, "no realm");
    }
}
