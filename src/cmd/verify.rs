//! `hardshift verify`: check the live bundle (sums, chains, keys, SANs, expiry) and rebuild it
//! from the inputs to compare every file.

use crate::failure::Failure;
use hardshift_generator::crd::{self, CrdSet};
use hardshift_generator::fsio;
use hardshift_generator::pki::Outcome;
use hardshift_generator::verify::{self, Status};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    input: super::ClusterArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = super::Output::Table)]
    output: super::Output,
    /// Judge the bundle's custom resources by these CRDs (a directory of YAML, e.g. the release's
    /// own, extracted from its cluster-config-api image) instead of the ones the bundle applies.
    #[arg(long, value_name = "DIR")]
    crds: Option<std::path::PathBuf>,
    /// Compare the agent the nodes' configs embed with this hardshift-agent instead of the one
    /// built beside hardshift.
    #[arg(long, value_name = "PATH")]
    agent_binary: Option<std::path::PathBuf>,
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let b = fsio::read_bundle(&a.input.dir).map_err(Failure::input)?;
    // Rebuild from the inputs with the live keys: the same inputs give the same bytes.
    let (built, notes) = hardshift_generator::pipeline::rebuild(
        &a.input.dir,
        a.input.release_image.clone(),
        a.input.release_refs.clone(),
        hardshift_generator::pipeline::cache::user(),
    )?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    let mut checks = verify::verify(&built.cluster, &b, time::OffsetDateTime::now_utc());
    // The sums a user would check, beside the generation's own.
    checks.insert(1, verify::sums_file(&a.input.dir, &b));
    checks.extend(pki_kept(&built.pki));
    checks.extend(verify::regeneration(&built.bundle, &b));
    checks.extend(verify::render_outputs(&a.input.dir));
    let exe = std::env::current_exe().map_err(Failure::other)?;
    let beside = hardshift_generator::pipeline::request::agent_for(&exe).unwrap_or_else(|| exe.with_file_name("hardshift-agent"));
    let reference = agent_reference(a.agent_binary.as_deref(), &beside)?;
    checks.extend(verify::agents(&b, reference.as_ref(), &beside));
    checks.push(crypto_check(
        built.cluster.fips,
        &hardshift_generator::pipeline::recorded(&a.input.dir),
    ));
    checks.extend(crd_checks(&a, &built.cluster, &b)?);
    print(&checks, a.output)?;
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    eprintln!("{} checks: {} failed, {} warnings", checks.len(), failed, warned);
    Ok(if failed > 0 { 1 } else { 0 })
}

/// A check that fails when a fresh build would not keep the live PKI (the file checks below
/// then differ because of it); none when it would.
fn pki_kept(pki: &hardshift_generator::pki::Pki) -> Option<verify::Check> {
    let reissued: Vec<String> = pki
        .entries
        .iter()
        .filter_map(|e| match &e.outcome {
            Outcome::Reused => None,
            Outcome::Created => Some(format!("{} would be created", e.spec.id())),
            Outcome::Reissued(why) => Some(format!("{} would be re-issued ({why})", e.spec.id())),
        })
        .collect();
    (!reissued.is_empty()).then(|| verify::Check {
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
fn crd_checks(
    a: &Args,
    cluster: &hardshift_generator::cluster::Cluster,
    b: &hardshift_generator::bundle::Bundle,
) -> Result<Vec<verify::Check>, Failure> {
    let crds = match &a.crds {
        Some(d) => Some(CrdSet::load_dir(d).map_err(Failure::input)?),
        None => None,
    };
    let source = match &a.crds {
        Some(d) => d.display().to_string(),
        None => "the bundle's CRDs".into(),
    };
    let mco = mco_manifests(&a.input.dir).map_err(Failure::other)?;
    Ok(crd::bundle::checks(cluster, b, &mco, crds.as_ref(), &source))
}

/// The checks as a table, or as JSON with `-o json`.
fn print(checks: &[verify::Check], output: super::Output) -> Result<(), Failure> {
    if output == super::Output::Json {
        println!("{}", serde_json::to_string_pretty(checks).map_err(Failure::other)?);
    } else {
        let w = |f: fn(&verify::Check) -> usize| checks.iter().map(f).max().unwrap_or(0);
        let (wn, ws, wi) = (w(|c| c.name.len()), w(|c| c.subject.len()).max(7), w(|c| c.issuer.len()).max(6));
        println!(
            "{:<wn$}  {:<ws$}  {:<wi$}  {:<10}  {:<6}  DETAIL",
            "NAME", "SUBJECT", "ISSUER", "EXPIRES", "STATUS"
        );
        for c in checks {
            let st = match c.status {
                Status::Ok => "ok",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            println!(
                "{:<wn$}  {:<ws$}  {:<wi$}  {:<10}  {:<6}  {}",
                c.name, c.subject, c.issuer, c.expires, st, c.detail
            );
        }
    }
    Ok(())
}

/// The agent to compare the embedded one with: `--agent-binary` (which must be there, and a
/// file: a FIFO is refused, not read), else the hardshift-agent beside hardshift, if there is one.
fn agent_reference(given: Option<&std::path::Path>, beside: &std::path::Path) -> Result<Option<verify::AgentRef>, Failure> {
    let read = |p: &std::path::Path| -> std::io::Result<Vec<u8>> {
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
                Some(verify::AgentRef {
                    path: p.to_path_buf(),
                    bytes,
                    given: true,
                })
            })
            .map_err(|e| Failure::input(format!("--agent-binary {}: {e}", p.display()))),
        None if beside.is_file() => Ok(read(beside).ok().map(|bytes| verify::AgentRef {
            path: beside.to_path_buf(),
            bytes,
            given: false,
        })),
        None => Ok(None),
    }
}

/// The crypto module the bundle's keys came from, as create recorded it; a `fips: true` bundle
/// whose keys did not come from a FIPS module fails.
fn crypto_check(fips: bool, rec: &hardshift_generator::pipeline::Recorded) -> verify::Check {
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
    verify::Check {
        name: "crypto".into(),
        subject: String::new(),
        issuer: String::new(),
        expires: String::new(),
        status,
        detail,
    }
}

/// `DIR/mco/manifests/*.y*ml` (what `hardshift mco` gave the machine-config-operator), if any.
fn mco_manifests(dir: &std::path::Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let d = dir.join(hardshift_generator::mco::DIR).join("manifests");
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
