//! `hardshift release pull | show` and `hardshift mirror-check`: the release straight from its
//! registry (through install-config's mirrors, with its pull secret and trust bundle), kept in
//! DIR/release/ so later runs need no registry; and a check, before anything boots, that the
//! mirror holds every image the nodes will pull.

use crate::failure::Failure;
use hardshift_generator::config;
use hardshift_registry::{auth::Auths, check, client::Client, mirror::DigestSource, reference::Reference, release};
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// What reaching the registry takes, from the inputs in `dir`, and the bundle it is for.
pub struct Access {
    pub dir: PathBuf,
    pub client: Client,
    pub sources: Vec<DigestSource>,
    pub image: Option<Reference>,
}

pub fn access(dir: &Path, release_image: Option<&str>) -> Result<Access, Failure> {
    let a = config::registry_access(
        dir,
        &config::Overrides {
            release_image: release_image.map(String::from),
            key_algorithm: None,
            crypto_fips: None,
        },
    )
    .map_err(Failure::input)?;
    let auths = Auths::from_pull_secret(&a.pull_secret).map_err(Failure::input)?;
    let roots = Some(a.additional_trust_bundle.as_str()).filter(|t| !t.trim().is_empty());
    let client = Client::new(auths, roots, Duration::from_secs(10)).map_err(Failure::input)?;
    let sources = a
        .mirrors
        .into_iter()
        .map(|(source, mirrors)| DigestSource {
            source,
            mirrors,
            source_policy: None,
        })
        .collect();
    let image = match a.release_image {
        Some(i) => Some(Reference::parse(&i).map_err(|e| Failure::input(format!("release image: {e}")))?),
        None => None,
    };
    Ok(Access {
        dir: dir.to_path_buf(),
        client,
        sources,
        image,
    })
}

/// The release's CRDs the bootstrap must apply before its manifests: config.openshift.io's, the
/// CVO's own (ClusterVersion, ClusterOperator), and operator.openshift.io's Network (the
/// bundle's cluster-network-03-config is one).
fn is_bootstrap_crd(text: &str) -> bool {
    text.contains("kind: CustomResourceDefinition")
        && (text.contains("group: config.openshift.io")
            || text.contains("name: clusterversions.config.openshift.io")
            || text.contains("name: clusteroperators.config.openshift.io")
            || text.contains("name: networks.operator.openshift.io"))
}

/// Pull (or reuse) the release and lay out DIR/release/image-references and DIR/release/crds/.
pub fn pull_into(rt: &tokio::runtime::Runtime, acc: &Access) -> Result<String, Failure> {
    let dir = &acc.dir;
    let image = acc
        .image
        .as_ref()
        .ok_or_else(|| Failure::input("no release image: set release.image in hardshift.yaml or pass --release-image"))?;
    let cache = dir.join(hardshift_generator::layout::RELEASE_CACHE);
    hardshift_generator::fsio::private_dir_all(&cache).map_err(|e| Failure::other(format!("{}: {e}", cache.display())))?;
    let progress = crate::progress::Progress::new(crate::progress::Mode::pick(false));
    let pulled = rt
        .block_on(release::pull(&acc.client, &acc.sources, image, &cache, &progress))
        .map_err(|errs| {
            Failure::other(format!(
                "cannot pull the release {image}:\n  {}",
                errs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n  ")
            ))
        })?;
    let manifests = pulled.root.join("release-manifests");
    let refs = std::fs::read(manifests.join("image-references"))
        .map_err(|e| Failure::other(format!("{image}: no release-manifests/image-references in the image: {e}")))?;
    let out = dir.join(hardshift_generator::layout::RELEASE);
    hardshift_generator::fsio::write_file_atomic(&out.join("image-references"), &refs, 0o644).map_err(Failure::other)?;
    let mut names: Vec<PathBuf> = std::fs::read_dir(&manifests)
        .map_err(Failure::other)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    names.sort();
    let crds: Vec<(String, u32, Vec<u8>)> = names
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).ok().filter(|t| is_bootstrap_crd(t))?;
            Some((p.file_name()?.to_string_lossy().to_string(), 0o644, text.into_bytes()))
        })
        .collect();
    let n = crds.len();
    hardshift_generator::fsio::replace_dir(&dir.join(hardshift_generator::layout::RELEASE_CRDS), &crds, &[]).map_err(Failure::other)?;
    let mut msg = format!("release {image}: {} from {}, {n} CRDs", pulled.digest, pulled.from);
    if !pulled.offline_because.is_empty() {
        msg.push_str(&format!(
            " (the cached copy: the registry is out of reach: {})",
            pulled.offline_because.join("; ")
        ));
    } else if pulled.from == "cache" {
        msg.push_str(" (already in DIR/release/cache)");
    }
    Ok(msg)
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Failure::other)
}

/// (tag, image) pairs: what the nodes will pull.
type Images = Vec<(String, Reference)>;

/// The release's version, and its images as the references file names them, with the release image itself.
fn images(dir: &Path, acc: &Access) -> Result<(Option<String>, Images, hardshift_generator::release::Release), Failure> {
    let path = dir.join(config::RELEASE_REFS);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure::input(format!("{}: {e} (run `hardshift release pull` first)", path.display())))?;
    let rel = hardshift_generator::release::parse(&text, acc.image.as_ref().map(|i| i.to_string()).as_deref()).map_err(|es| {
        Failure::input(format!(
            "{}: {}",
            path.display(),
            es.iter().map(|(_, m)| m.clone()).collect::<Vec<_>>().join("; ")
        ))
    })?;
    let mut out = Vec::new();
    if let Ok(r) = Reference::parse(&rel.image) {
        out.push(("release".to_string(), r));
    }
    for (tag, spec) in &rel.tags {
        let r = Reference::parse(spec).map_err(|e| Failure::input(format!("{}: tag {tag}: {e}", path.display())))?;
        out.push((tag.clone(), r));
    }
    Ok((rel.version.clone(), out, rel))
}

pub fn run(a: Args) -> Result<u8, Failure> {
    match a.what {
        What::Pull(c) => {
            let rt = runtime()?;
            let acc = access(&c.dir, c.release_image.as_deref())?;
            println!("{}", pull_into(&rt, &acc)?);
            Ok(0)
        }
        What::Show(ShowArgs { common: c, output }) => {
            let acc = access(&c.dir, c.release_image.as_deref())?;
            let (version, imgs, _) = images(&c.dir, &acc)?;
            let rows: Vec<(String, Reference, String)> = imgs
                .into_iter()
                .map(|(tag, r)| {
                    let via = hardshift_registry::mirror::candidates(&acc.sources, &r);
                    let first = via.first().map(|v| v.to_string()).unwrap_or_default();
                    (tag, r, first)
                })
                .collect();
            if output == super::Output::Json {
                let images: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|(tag, r, via)| serde_json::json!({"tag": tag, "image": r.to_string(), "pull_from": via}))
                    .collect();
                let v = serde_json::json!({"version": version, "images": images});
                println!("{}", serde_json::to_string_pretty(&v).map_err(Failure::other)?);
                return Ok(0);
            }
            println!("version: {}", version.as_deref().unwrap_or("(not named in image-references)"));
            for (tag, _, via) in rows {
                println!("{tag:<40} {via}");
            }
            Ok(0)
        }
    }
}

/// Check every image; print each missing or refused one with the registry's own words.
/// Exit 1 when one is not pullable.
pub fn mirror_check(a: CheckArgs) -> Result<u8, Failure> {
    let acc = access(&a.common.dir, a.common.release_image.as_deref())?;
    let rt = runtime()?;
    check_and_report(&rt, &acc, a.concurrency, a.output)
}

pub fn check_and_report(rt: &tokio::runtime::Runtime, acc: &Access, concurrency: usize, output: super::Output) -> Result<u8, Failure> {
    let (_, imgs, rel) = images(&acc.dir, acc)?;
    let missing = hardshift_generator::release::missing_for_mco(&rel);
    let tags: std::collections::BTreeMap<String, String> = imgs.iter().map(|(t, r)| (r.to_string(), t.clone())).collect();
    let mut unique: Vec<Reference> = imgs.into_iter().map(|(_, r)| r).collect();
    unique.sort_by_key(|r| r.to_string());
    unique.dedup();
    let t = std::time::Instant::now();
    let progress = crate::progress::Progress::new(crate::progress::Mode::pick(output == super::Output::Json));
    let outcomes = rt.block_on(check::check(&acc.client, &acc.sources, unique, concurrency, &progress));
    progress.finish();
    let bad: Vec<&check::Outcome> = outcomes.iter().filter(|o| o.result.is_err()).collect();
    let code = if bad.is_empty() { 0 } else { 1 };
    if output == super::Output::Json {
        let images: Vec<serde_json::Value> = outcomes
            .iter()
            .map(|o| {
                let errors: Vec<serde_json::Value> = o
                    .result
                    .as_ref()
                    .err()
                    .into_iter()
                    .flatten()
                    .map(|e| serde_json::json!({"kind": e.kind(), "error": e.to_string()}))
                    .collect();
                serde_json::json!({
                    "tag": tags.get(&o.image.to_string()).cloned().unwrap_or_default(),
                    "image": o.image.to_string(),
                    "pullable": o.result.is_ok(),
                    "errors": errors,
                })
            })
            .collect();
        let v = serde_json::json!({
            "missing": missing.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
            "pullable": outcomes.len() - bad.len(),
            "total": outcomes.len(),
            "seconds": t.elapsed().as_secs_f64(),
            "images": images,
        });
        println!("{}", serde_json::to_string_pretty(&v).map_err(Failure::other)?);
        return Ok(code);
    }
    for m in missing {
        println!("MISSING {m}");
    }
    for o in &bad {
        let tag = tags.get(&o.image.to_string()).map(String::as_str).unwrap_or("?");
        println!("NOT PULLABLE {tag} {}", o.image);
        for e in o.result.as_ref().err().into_iter().flatten() {
            println!("    {}: {e}", e.kind());
        }
    }
    println!(
        "mirror-check: {} of {} images pullable through the mirrors ({:.2} s)",
        outcomes.len() - bad.len(),
        outcomes.len(),
        t.elapsed().as_secs_f64()
    );
    Ok(code)
}
