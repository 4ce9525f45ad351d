//! The release straight from its registry (through install-config's mirrors, with its pull
//! secret and trust bundle), kept in DIR/release/ so later runs need no registry: its
//! image-references, and the CRDs the bootstrap applies before its manifests.

pub mod check;

use crate::{config, fsio, layout};
use hardshift_registry::{auth::Auths, client::Client, mirror::DigestSource, progress::Progress, reference::Reference, release};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why the release could not be reached or read: the user's input (exit 2), or else (exit 1):
/// the pipeline's one error type.
pub use crate::pipeline::Error;

/// What reaching the registry takes, from the inputs in `dir`, and the bundle it is for.
pub struct Access {
    pub dir: PathBuf,
    pub client: Client,
    pub sources: Vec<DigestSource>,
    pub image: Option<Reference>,
}

/// The registry access the inputs in `dir` give (`release_image` wins over hardshift.yaml's).
pub fn access(dir: &Path, release_image: Option<&str>) -> Result<Access, Error> {
    let overrides = config::Overrides {
        release_image: release_image.map(String::from),
        key_algorithm: None,
        crypto_fips: None,
        no_live_agent: false,
    };
    let a = config::registry_access(dir, &overrides).map_err(Error::input)?;
    let auths = Auths::from_pull_secret(&a.pull_secret).map_err(Error::input)?;
    let roots = Some(a.additional_trust_bundle.as_str()).filter(|t| !t.trim().is_empty());
    let client = Client::new(auths, roots, Duration::from_secs(10)).map_err(Error::input)?;
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
        Some(i) => Some(Reference::parse(&i).map_err(|e| Error::input(format!("release image: {e}")))?),
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
pub fn is_bootstrap_crd(text: &str) -> bool {
    text.contains("kind: CustomResourceDefinition")
        && (text.contains("group: config.openshift.io")
            || text.contains("name: clusterversions.config.openshift.io")
            || text.contains("name: clusteroperators.config.openshift.io")
            || text.contains("name: networks.operator.openshift.io"))
}

/// Pull (or reuse) the release and lay out DIR/release/image-references and DIR/release/crds/;
/// the line that says what was done.
pub async fn pull_into(acc: &Access, progress: &dyn Progress) -> Result<String, Error> {
    let image = acc
        .image
        .as_ref()
        .ok_or_else(|| Error::input("no release image: set release.image in hardshift.yaml or pass --release-image"))?;
    let cache = acc.dir.join(layout::RELEASE_CACHE);
    fsio::private_dir_all(&cache).map_err(Error::io(&cache))?;
    let pulled = release::pull(&acc.client, &acc.sources, image, &cache, progress)
        .await
        .map_err(|errs| {
            Error::other(format!(
                "cannot pull the release {image}:\n  {}",
                errs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n  ")
            ))
        })?;
    let crds = lay_out(&acc.dir, &pulled.root.join("release-manifests"), image)?;
    Ok(said(image, &pulled, crds))
}

/// DIR/release/ from an extracted `release-manifests/`: its image-references, and its bootstrap
/// CRDs (the directory replaced whole). Returns how many CRDs.
fn lay_out(dir: &Path, manifests: &Path, image: &Reference) -> Result<usize, Error> {
    let refs = std::fs::read(manifests.join("image-references"))
        .map_err(|e| Error::other(format!("{image}: no release-manifests/image-references in the image: {e}")))?;
    let out = dir.join(layout::RELEASE);
    fsio::write_file_atomic(&out.join("image-references"), &refs, 0o644).map_err(Error::other)?;
    let mut names: Vec<PathBuf> = std::fs::read_dir(manifests)
        .map_err(Error::other)?
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
    fsio::replace_dir(&dir.join(layout::RELEASE_CRDS), &crds, &[]).map_err(Error::other)?;
    Ok(crds.len())
}

/// What a pull did, in a line.
fn said(image: &Reference, pulled: &release::Pulled, crds: usize) -> String {
    let mut msg = format!("release {image}: {} from {}, {crds} CRDs", pulled.digest, pulled.from);
    if !pulled.offline_because.is_empty() {
        msg.push_str(&format!(
            " (the cached copy: the registry is out of reach: {})",
            pulled.offline_because.join("; ")
        ));
    } else if pulled.from == "cache" {
        msg.push_str(" (already in DIR/release/cache)");
    }
    msg
}

/// `create`'s pull: without references (DIR/release/image-references, or `refs` given) the
/// release comes from its registry, through the mirrors, or from DIR/release/cache. The access
/// and the line that says what was done, when it did.
pub async fn for_create(
    dir: &Path,
    refs: Option<&Path>,
    release_image: Option<&str>,
    progress: &dyn Progress,
) -> Result<Option<(Access, String)>, Error> {
    if refs.is_some() || dir.join(layout::RELEASE_REFS).exists() {
        return Ok(None);
    }
    let acc = access(dir, release_image)?;
    if acc.image.is_none() {
        return Ok(None); // read_sources says what is missing, and how to get it
    }
    let line = pull_into(&acc, progress).await?;
    Ok(Some((acc, line)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootstrap_crds_are_config_the_cvos_and_the_network_operators() {
        let crd = |group: &str, name: &str| format!("kind: CustomResourceDefinition\nspec:\n  group: {group}\nmetadata:\n  name: {name}\n");
        assert!(is_bootstrap_crd(&crd("config.openshift.io", "proxies.config.openshift.io")));
        assert!(is_bootstrap_crd(&crd("operator.openshift.io", "networks.operator.openshift.io")));
        assert!(!is_bootstrap_crd(&crd("operator.openshift.io", "etcds.operator.openshift.io")));
        assert!(!is_bootstrap_crd("kind: ConfigMap\ngroup: config.openshift.io\n"));
    }
}
