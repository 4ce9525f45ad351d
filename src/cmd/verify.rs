//! `hardshift verify`: check the live bundle (sums, chains, keys, SANs, expiry) and rebuild it
//! from the inputs to compare every file.

use crate::failure::Failure;
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
    let (checks, notes) = hardshift_generator::verifying::whole(&hardshift_generator::verifying::Request {
        dir: a.input.dir.clone(),
        release_image: a.input.release_image.clone(),
        release_refs: a.input.release_refs.clone(),
        crds: a.crds.clone(),
        agent_binary: a.agent_binary.clone(),
        exe: std::env::current_exe().map_err(Failure::other)?,
    })?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    print(&checks, a.output)?;
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    eprintln!("{} checks: {} failed, {} warnings", checks.len(), failed, warned);
    Ok(if failed > 0 { 1 } else { 0 })
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
