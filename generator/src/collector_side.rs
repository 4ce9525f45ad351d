//! What `hardshift collector` takes from the bundle directory `create` wrote: its TLS, who may
//! report, the identity and certificates /metrics names, and its own state (one collector per
//! bundle, its store and admin socket this user's only).

use crate::pipeline::Error;
use crate::{fsio, layout};
use std::collections::BTreeSet;
use std::path::Path;

/// A certificate, its key and the CA whose clients it admits, PEM.
pub struct Pem {
    pub cert: String,
    pub key: String,
    pub client_ca: String,
}

/// A file of the live bundle as text, or `missing` naming it.
fn text(dir: &Path, rel: &str, missing: impl Fn(&str) -> Error) -> Result<String, Error> {
    fsio::read_current(dir, rel)
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| missing(rel))
}

/// The agents' side: the collector's certificate, admitting clients of the agent CA.
pub fn agent_tls(dir: &Path) -> Result<Pem, Error> {
    collector_pem(dir, layout::AGENT_CA_CERT, |rel| {
        format!("{rel}: missing from the bundle in {} (run `hardshift create`)", dir.display())
    })
}

/// The dashboard beyond loopback (`web`, its address): the collector's certificate, admitting
/// admin clients of the cluster's CA.
pub fn web_tls(dir: &Path, web: &str) -> Result<Pem, Error> {
    collector_pem(dir, layout::KUBERNETES_CA_CERT, |rel| {
        format!("--web {web} needs HTTPS, and {rel} is missing from the bundle in {}", dir.display())
    })
}

/// The collector's certificate and key, admitting clients of `client_ca`; `said` words a file
/// the bundle lacks.
fn collector_pem(dir: &Path, client_ca: &str, said: impl Fn(&str) -> String) -> Result<Pem, Error> {
    let missing = |rel: &str| Error::input(said(rel));
    Ok(Pem {
        cert: text(dir, layout::COLLECTOR_CERT, missing)?,
        key: text(dir, layout::COLLECTOR_KEY, missing)?,
        client_ca: text(dir, client_ca, missing)?,
    })
}

/// A FIPS bundle's agents speak TLS through the FIPS module only: so must its collector.
pub fn check_fips(dir: &Path) -> Result<(), Error> {
    if !crate::pipeline::recorded(dir).fips {
        return Ok(());
    }
    hardshift_crypto::fips_mode().map_err(|e| Error::input(format!("{}: the bundle was made with fips: true, but {e}", dir.display())))
}

/// The install /metrics is of: the cluster, its base domain, and the bundle (by its root CA).
pub struct Identity {
    pub cluster: String,
    pub base_domain: String,
    pub bundle: String,
}

const ROOT_CA: &str = "pki/root-ca.crt";

/// The bundle's identity, from its record (cluster.json, public) and its root CA.
pub fn identity(dir: &Path) -> Result<Identity, Error> {
    let missing = |rel: &str| {
        Error::input(format!(
            "{rel}: missing from the bundle in {} (run `hardshift create`); /metrics names the cluster by it",
            dir.display()
        ))
    };
    let record = fsio::read_current(dir, crate::bundle::CLUSTER_JSON).ok_or_else(|| missing("cluster.json"))?;
    let record: serde_json::Value = serde_json::from_slice(&record).map_err(|e| {
        Error::input(format!(
            "{}/cluster.json: not JSON ({e}); run `hardshift create` again",
            dir.display()
        ))
    })?;
    let field = |k: &str| {
        record[k].as_str().map(str::to_string).ok_or_else(|| {
            Error::input(format!(
                "{}/cluster.json: no string {k:?}; run `hardshift create` again",
                dir.display()
            ))
        })
    };
    let root_ca = fsio::read_current(dir, ROOT_CA).ok_or_else(|| missing(ROOT_CA))?;
    Ok(Identity {
        cluster: field("name")?,
        base_domain: field("base_domain")?,
        bundle: crate::assets::manifests::cluster_id_of_root_ca(&String::from_utf8_lossy(&root_ca)),
    })
}

/// A certificate of the bundle: its file, CN and notAfter (unix seconds).
pub struct Cert {
    pub file: String,
    pub cn: String,
    pub not_after_s: i64,
}

/// Every certificate of pki/ and agent-pki/ (ones that do not parse are `verify`'s business,
/// not the metrics').
pub fn certificates(dir: &Path) -> Vec<Cert> {
    let Some(cur) = fsio::current(dir) else { return vec![] };
    let mut out = Vec::new();
    for sub in [layout::PKI, layout::AGENT_PKI] {
        let Ok(entries) = std::fs::read_dir(cur.join(sub)) else { continue };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".crt"))
            .collect();
        names.sort();
        for n in names {
            let rel = format!("{sub}/{n}");
            let facts = fsio::read_current(dir, &rel).and_then(|pem| crate::pki::inspect::facts(&String::from_utf8_lossy(&pem)).ok());
            if let Some(f) = facts {
                out.push(Cert {
                    file: rel,
                    cn: f.cn,
                    not_after_s: f.not_after,
                });
            }
        }
    }
    out
}

/// The nodes of the bundle: the only names whose agent certificates the collector admits.
pub enum Members {
    /// From the bundle's inputs, (name, role) (the dashboard's phases need the roles).
    Inputs(Vec<(String, String)>),
    /// Without the inputs: the nodes create issued an agent certificate to (agent-pki/agent-NODE.crt).
    Certificates(BTreeSet<String>),
}

impl Members {
    /// Read once at the start (at 20,000 nodes, loading the inputs is seconds).
    pub fn load(dir: &Path) -> Result<Members, Error> {
        let inputs_error = match crate::reload::cluster(dir, &Default::default()) {
            Ok(c) => {
                let nodes = c.nodes.iter().map(|n| (n.hostname.clone(), n.role.as_str().to_string()));
                return Ok(Members::Inputs(nodes.collect()));
            }
            Err(e) => e,
        };
        let names = certificate_names(&dir.join(layout::AGENT_PKI));
        if names.is_empty() {
            // Without a list, any name the agent CA ever signed would be admitted.
            return Err(Error::input(format!(
                "{}: cannot tell which nodes belong to this bundle: its inputs do not load ({}), and {} holds no agent certificates\n    hint: run the collector on the directory `hardshift create` wrote",
                dir.display(),
                inputs_error.message().lines().skip(1).map(str::trim).collect::<Vec<_>>().join("; "),
                layout::AGENT_PKI
            )));
        }
        tracing::warn!(
            "{}: the bundle's inputs do not load, so the dashboard has no roles; admitting the {} nodes of {}",
            dir.display(),
            names.len(),
            layout::AGENT_PKI
        );
        Ok(Members::Certificates(names))
    }

    pub fn names(&self) -> BTreeSet<String> {
        match self {
            Members::Inputs(m) => m.iter().map(|(name, _)| name.clone()).collect(),
            Members::Certificates(n) => n.clone(),
        }
    }
}

/// NODE of every agent-NODE.crt in `pki` (agent-ca.crt is the CA, not a node).
fn certificate_names(pki: &Path) -> BTreeSet<String> {
    std::fs::read_dir(pki)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| Some(f.strip_prefix("agent-")?.strip_suffix(".crt")?.to_string()))
        .filter(|n| n != "ca")
        .collect()
}

/// The collector's own state in `dir`, this user's only: the store's directory (of `db`), and
/// DIR/collector/ with its lock (one collector per directory: a second would steal the admin
/// socket and share the store) and the admin socket's directory (it asks nodes for their
/// logs). The lock is held while the returned value lives.
pub fn state(dir: &Path, db: &Path, admin: &Path, holder: &str) -> Result<fsio::DirLock, Error> {
    let private = |p: &Path| fsio::make_dir_all(p, 0o700).map_err(|e| Error::other(format!("{}: {e}", p.display())));
    if let Some(p) = db.parent() {
        private(p)?;
    }
    let state = dir.join(layout::COLLECTOR);
    private(&state)?;
    let lock = fsio::lock_file(&state.join("lock"), holder).map_err(|e| match e {
        fsio::LockError::Busy(holder) => Error::other(format!(
            "{}: another collector serves this bundle ({holder}); stop it first, or give this one another --dir",
            dir.display()
        )),
        fsio::LockError::Io(e) => Error::other(e),
    })?;
    let sockets = admin.parent().unwrap_or(dir);
    fsio::make_dir_all(sockets, 0o700)
        .and_then(|_| std::fs::set_permissions(sockets, std::os::unix::fs::PermissionsExt::from_mode(0o700)))
        .map_err(|e| Error::other(format!("{}: {e}", admin.display())))?;
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_certificates_name_the_nodes_and_the_ca_is_none() {
        let d = tempfile::tempdir().unwrap();
        for f in [
            "agent-ca.crt",
            "agent-master-0.crt",
            "agent-master-0.key",
            "agent-worker-1.crt",
            "other.crt",
        ] {
            std::fs::write(d.path().join(f), "").unwrap();
        }
        let names: Vec<String> = certificate_names(d.path()).into_iter().collect();
        assert_eq!(names, ["master-0", "worker-1"]);
    }

    #[test]
    fn without_inputs_or_agent_certificates_no_one_is_admitted() {
        let d = tempfile::tempdir().unwrap();
        let Err(Error::Input(m)) = Members::load(d.path()) else {
            panic!("admitted")
        };
        assert!(m.contains("cannot tell which nodes belong to this bundle"), "{m}");
    }
}
