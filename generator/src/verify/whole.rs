//! `hardshift verify`'s work: the live bundle read, rebuilt from its inputs with its live keys,
//! and every check made (verify/'s and crd/'s). The CLI prints what this returns.

use crate::cluster::Cluster;
use crate::crd::{self, CrdSet};
use crate::pipeline::{self, Error, Recorded};
use crate::pki::{Outcome, Pki};
use crate::verify::{self, AgentRef, Check, Status};
use std::path::{Path, PathBuf};

/// What `hardshift verify` was asked.
pub struct Request {
    pub dir: PathBuf,
    /// The release image, over what create recorded.
    pub release_image: Option<String>,
    /// The release's image references, over DIR/release/image-references.
    pub release_refs: Option<PathBuf>,
    /// The CRDs to judge the custom resources by, over the bundle's own.
    pub crds: Option<PathBuf>,
    /// The agent to compare the embedded one with, over the one beside hardshift.
    pub agent_binary: Option<PathBuf>,
    /// The running hardshift (the agent is looked for beside it).
    pub exe: PathBuf,
    /// What a machine-config server served each pool (`--against-mcs`).
    pub mcs: Option<verify::mcs::Served>,
}

/// Every check, in the order they are printed, and the rebuild's notes.
pub fn whole(r: &Request) -> Result<(Vec<Check>, Vec<String>), Error> {
    let b = crate::fsio::read_bundle(&r.dir).map_err(Error::input)?;
    // Rebuild from the inputs with the live keys: the same inputs give the same bytes.
    let (built, notes) = pipeline::rebuild(&r.dir, r.release_image.clone(), r.release_refs.clone(), pipeline::cache::user())?;
    let mut checks = verify::verify(&built.cluster, &b, time::OffsetDateTime::now_utc());
    // The sums a user would check, beside the generation's own.
    checks.insert(1, verify::sums_file(&r.dir, &b));
    checks.extend(pki_kept(&built.pki));
    checks.extend(verify::regeneration(&built.bundle, &b));
    checks.extend(verify::render_outputs(&r.dir));
    let beside = pipeline::request::agent_for(&r.exe).unwrap_or_else(|| r.exe.with_file_name("hardshift-agent"));
    let reference = agent_reference(r.agent_binary.as_deref(), &beside)?;
    checks.extend(verify::agents(&b, reference.as_ref(), &beside));
    checks.push(crypto_check(built.cluster.fips, &pipeline::recorded(&r.dir)));
    checks.extend(crd_checks(r, &built.cluster, &b)?);
    if let Some(served) = &r.mcs {
        checks.extend(verify::mcs::checks(&built.cluster, &b, served));
    }
    Ok((checks, notes))
}

/// A check that fails when a fresh build would not keep the live PKI (the file checks below
/// then differ because of it); none when it would.
fn pki_kept(pki: &Pki) -> Option<Check> {
    let reissued: Vec<String> = pki
        .entries
        .iter()
        .filter_map(|e| match &e.outcome {
            Outcome::Reused => None,
            Outcome::Created => Some(format!("{} would be created", e.spec.id())),
            Outcome::Reissued(why) => Some(format!("{} would be re-issued ({why})", e.spec.id())),
        })
        .collect();
    (!reissued.is_empty()).then(|| Check {
        name: "pki".into(),
        subject: String::new(),
        issuer: String::new(),
        expires: String::new(),
        status: Status::Fail,
        detail: format!(
            "a fresh build would not keep the live PKI: {}; the files below differ because of it",
            reissued.join("; ")
        ),
    })
}

/// What a real API server would prune or refuse, judged by the CRDs as it would: `--crds`', or
/// the bundle's own.
fn crd_checks(r: &Request, cluster: &Cluster, b: &crate::bundle::Bundle) -> Result<Vec<Check>, Error> {
    let crds = match &r.crds {
        Some(d) => Some(CrdSet::load_dir(d).map_err(Error::input)?),
        None => None,
    };
    let source = match &r.crds {
        Some(d) => d.display().to_string(),
        None => "the bundle's CRDs".into(),
    };
    let mco = mco_manifests(&r.dir).map_err(Error::other)?;
    Ok(crd::bundle::checks(cluster, b, &mco, crds.as_ref(), &source))
}

/// The agent to compare the embedded one with: `--agent-binary` (which must be there, and a
/// file: a FIFO is refused, not read), else the hardshift-agent beside hardshift, if there is one.
fn agent_reference(given: Option<&Path>, beside: &Path) -> Result<Option<AgentRef>, Error> {
    let read = |p: &Path| -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NONBLOCK).open(p)?;
        if !f.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut bytes)?;
        Ok(bytes)
    };
    match given {
        Some(p) => read(p)
            .map(|bytes| {
                Some(AgentRef {
                    path: p.to_path_buf(),
                    bytes,
                    given: true,
                })
            })
            .map_err(|e| Error::input(format!("--agent-binary {}: {e}", p.display()))),
        None if beside.is_file() => Ok(read(beside).ok().map(|bytes| AgentRef {
            path: beside.to_path_buf(),
            bytes,
            given: false,
        })),
        None => Ok(None),
    }
}

/// The crypto module the bundle's keys came from, as create recorded it; a `fips: true` bundle
/// whose keys did not come from a FIPS module fails.
fn crypto_check(fips: bool, rec: &Recorded) -> Check {
    let made = rec
        .crypto_module
        .clone()
        .unwrap_or_else(|| "not recorded (a bundle from an older hardshift)".into());
    let (status, detail) = match (fips, rec.crypto_fips) {
        (true, true) => (Status::Ok, format!("fips: true; keys and certificates made by {made}")),
        (true, false) => (
            Status::Fail,
            format!(
                "fips: true, but the keys and certificates were made by {made}: re-key the bundle with a FIPS build (`create --rotate-ca`)"
            ),
        ),
        (false, _) => (Status::Ok, format!("fips: false; keys and certificates made by {made}")),
    };
    Check {
        name: "crypto".into(),
        subject: String::new(),
        issuer: String::new(),
        expires: String::new(),
        status,
        detail,
    }
}

/// `DIR/mco/manifests/*.y*ml` (what `hardshift mco` gave the machine-config-operator), if any.
fn mco_manifests(dir: &Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let d = dir.join(crate::mco::DIR).join("manifests");
    if !d.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(&d)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            let rel = p.strip_prefix(dir).unwrap_or(&p).display().to_string();
            out.push((rel, std::fs::read(&p)?));
        }
    }
    out.sort();
    Ok(out)
}
