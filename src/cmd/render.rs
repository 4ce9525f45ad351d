//! `hardshift render`: run the release's own renders (cluster-config-api, etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, machine-config-operator and -controller) over the
//! bundle through podman, as the installer's bootkube.sh does, and keep what they made in
//! DIR/render/.

use crate::failure::Failure;
use hardshift_generator::pipeline::render::{self, Options};
use hardshift_generator::pipeline::rendered;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    cluster: super::ClusterArgs,
    /// Run this image for a release tag instead of the release's (TAG=PULLSPEC; repeatable): an
    /// operator built or patched locally.
    #[arg(long = "image", value_name = "TAG=PULLSPEC", value_parser = parse_image)]
    images: Vec<(String, String)>,
    /// Run nothing: print how the bundle as written differs from the renders in DIR/render/, the
    /// bootstrap control plane flag by flag and the manifests object by object.
    #[arg(long, conflicts_with = "images")]
    diff: bool,
    /// Output format (with --diff).
    #[arg(short, long, value_enum, default_value_t = super::Output::Table, requires = "diff")]
    output: super::Output,
    /// How long one render may run (e.g. 90s, 20m): then it is stopped, with everything it
    /// started, and named; its work is kept for a look.
    #[arg(long, value_name = "DURATION", default_value = "20m", value_parser = parse_step_timeout)]
    step_timeout: std::time::Duration,
}

fn parse_step_timeout(s: &str) -> Result<std::time::Duration, String> {
    match super::parse_duration(s)? {
        d if d.is_zero() => Err(format!("{s:?}: a step needs more than no time, e.g. 90s or 20m")),
        d => Ok(d),
    }
}

/// `TAG=PULLSPEC`, the tag one a render runs.
fn parse_image(s: &str) -> Result<(String, String), String> {
    let known = hardshift_generator::render::steps::TAGS;
    match s.split_once('=') {
        Some((t, p)) if known.contains(&t) && !p.is_empty() => Ok((t.to_string(), p.to_string())),
        Some((t, p)) if !t.is_empty() && !p.is_empty() => {
            Err(format!("no render runs the {t:?} image; the renders run {}", known.join(", ")))
        }
        _ => Err(format!(
            "{s:?}: expected TAG=PULLSPEC, e.g. cluster-etcd-operator=localhost/etcd-operator:dev"
        )),
    }
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let cluster = a.cluster.load()?;
    let dir = &a.cluster.dir;
    if a.diff {
        let d = rendered::diff(dir, &cluster)?;
        if a.output == super::Output::Json {
            let v = serde_json::json!({"differences": d.count(), "diff": d});
            println!("{}", serde_json::to_string_pretty(&v).map_err(Failure::other)?);
        } else {
            for l in hardshift_generator::render::diff::lines(&d) {
                println!("{l}");
            }
            println!(
                "{} differences between the bundle and the renders; {} objects hardshift applies that no render makes",
                d.count(),
                d.only_native.len()
            );
        }
        return Ok(0);
    }
    let opts = Options {
        podman: std::env::var_os("PODMAN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("podman")),
        images: a.images.into_iter().collect(),
        step_timeout: a.step_timeout,
    };
    let progress = crate::progress::Progress::new(crate::progress::Mode::pick(false));
    let rendered = render::run(dir, &cluster, &opts, &mut |n, of, m| progress.step(n, of, &m));
    progress.finish();
    let rendered = rendered?;
    for s in &rendered.steps {
        println!("  {:<24} {:>6.1} s  {}", s.name, s.seconds, crate::failure::printable(&s.log));
    }
    println!(
        "rendered release {} (Kubernetes {}) into {}: the renders' outputs under assets/, what ran in renders.json",
        rendered.version,
        rendered.kubernetes,
        rendered::rendered_dir(dir).display()
    );
    Ok(0)
}
