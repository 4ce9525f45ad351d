//! `hardshift release pull | show` and `hardshift mirror-check`: the release straight from its
//! registry (through install-config's mirrors, with its pull secret and trust bundle), kept in
//! DIR/release/ so later runs need no registry; and a check, before anything boots, that the
//! mirror holds every image the nodes will pull.

use crate::failure::Failure;
use crate::progress::{Mode, Progress};
use hardshift_generator::release_pull::{self as pull, check};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    /// Pull the release's image-references and CRDs into DIR/release/ (cached by digest).
    Pull(Common),
    /// The release: version, tags, and each image's pullspec through the mirrors.
    Show(ShowArgs),
}

#[derive(clap::Args)]
pub struct ShowArgs {
    #[command(flatten)]
    common: Common,
    #[arg(short, long, value_enum, default_value_t = super::Output::Table)]
    output: super::Output,
}

#[derive(clap::Args, Clone)]
pub struct Common {
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// The release image (default: hardshift.yaml release.image).
    #[arg(long)]
    pub release_image: Option<String>,
}

#[derive(clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    common: Common,
    /// HEAD requests in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    #[arg(short, long, value_enum, default_value_t = super::Output::Table)]
    output: super::Output,
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Failure::other)
}

pub fn run(a: Args) -> Result<u8, Failure> {
    match a.what {
        What::Pull(c) => {
            let acc = pull::access(&c.dir, c.release_image.as_deref())?;
            let progress = Progress::new(Mode::pick(false));
            println!("{}", runtime()?.block_on(pull::pull_into(&acc, &progress))?);
        }
        What::Show(ShowArgs { common: c, output }) => {
            let shown = check::show(&pull::access(&c.dir, c.release_image.as_deref())?)?;
            if output == super::Output::Json {
                println!("{}", serde_json::to_string_pretty(&shown.json()).map_err(Failure::other)?);
            } else {
                shown.lines().iter().for_each(|l| println!("{l}"));
            }
        }
    }
    Ok(0)
}

/// Check every image; print each missing or refused one with the registry's own words.
/// Exit 1 when one is not pullable.
pub fn mirror_check(a: CheckArgs) -> Result<u8, Failure> {
    let acc = pull::access(&a.common.dir, a.common.release_image.as_deref())?;
    check_and_report(&runtime()?, &acc, a.concurrency, a.output)
}

pub fn check_and_report(
    rt: &tokio::runtime::Runtime,
    acc: &pull::Access,
    concurrency: usize,
    output: super::Output,
) -> Result<u8, Failure> {
    let progress = Progress::new(Mode::pick(output == super::Output::Json));
    let checked = rt.block_on(check::check(acc, concurrency, &progress));
    progress.finish();
    let checked = checked?;
    if output == super::Output::Json {
        println!("{}", serde_json::to_string_pretty(&checked.json()).map_err(Failure::other)?);
    } else {
        checked.lines().iter().for_each(|l| println!("{l}"));
    }
    Ok(if checked.all_pullable() { 0 } else { 1 })
}
