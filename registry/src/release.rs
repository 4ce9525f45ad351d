//! A release image, pulled once and kept: its manifest through the mirrors, its layers streamed
//! into `CACHE/blobs/` by digest, and `release-manifests/` extracted into `CACHE/<digest>/`. A
//! re-run, or a run with no registry in reach, uses what is there.

use crate::client::{Client, Error};
use crate::dirs::private_dir;
use crate::extract;
use crate::mirror::{candidates, DigestSource};
use crate::progress::Progress;
use crate::reference::{digest_hex, Reference};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Pulled {
    /// The release image's manifest digest.
    pub digest: String,
    /// Where it came from (a mirror, or the source), or "cache".
    pub from: String,
    /// `CACHE/<digest hex>/`: holds `release-manifests/`.
    pub root: PathBuf,
    /// Why the registry was not used, when the cache was (it could not be reached).
    pub offline_because: Vec<String>,
}

/// The hex of a digest the registry named, or an error naming where it came from.
fn hex<'a>(digest: &'a str, from: &dyn std::fmt::Display) -> Result<&'a str, Error> {
    digest_hex(digest).map_err(|e| Error::BadDigest(format!("{from}: {e}")))
}

/// Whether the file at `p` hashes to `digest` (a blob kept from an earlier run is trusted only so).
fn holds(p: &Path, digest: &str) -> bool {
    let Ok(mut f) = std::fs::File::open(p) else { return false };
    let mut h = Sha256::new();
    if std::io::copy(&mut f, &mut h).is_err() {
        return false;
    }
    format!("sha256:{:x}", h.finalize()) == digest
}

/// `CACHE/by-name/`: the digest a tag last resolved to, for a run with no registry in reach.
fn name_file(cache: &Path, image: &Reference) -> PathBuf {
    let safe: String = image
        .to_string()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    cache.join("by-name").join(safe)
}

fn complete(cache: &Path, digest: &str) -> Option<PathBuf> {
    let root = cache.join(digest_hex(digest).ok()?);
    root.join(".complete").exists().then_some(root)
}

/// A layer as its manifest lists it: (digest, media type, declared size).
pub type Layer = (String, String, Option<u64>);

/// The layers of an image manifest.
fn layers(manifest: &serde_json::Value) -> Vec<Layer> {
    manifest["layers"]
        .as_array()
        .map(|ls| {
            ls.iter()
                .filter_map(|l| {
                    Some((
                        l["digest"].as_str()?.to_string(),
                        l["mediaType"].as_str().unwrap_or("").to_string(),
                        l["size"].as_u64(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A manifest's layers and where each is kept under `blobs`: every digest checked
/// (`sha256:` and 64 hex digits) before any path is formed from it, so each path is
/// `blobs/<64 hex>` whatever the manifest says. `at` names the image in errors.
pub fn layer_paths(manifest: &serde_json::Value, blobs: &Path, at: &dyn std::fmt::Display) -> Result<(Vec<Layer>, Vec<PathBuf>), Error> {
    let layers = layers(manifest);
    if layers.is_empty() {
        return Err(Error::Other(format!("{at}: the manifest lists no layers")));
    }
    let mut paths = Vec::with_capacity(layers.len());
    for (i, (d, _, _)) in layers.iter().enumerate() {
        paths.push(blobs.join(hex(d, &format_args!("{at}: layer {i}"))?));
    }
    Ok((layers, paths))
}

/// From an index, the linux/amd64 image (or the only one).
fn pick(index: &serde_json::Value) -> Option<String> {
    let ms = index["manifests"].as_array()?;
    ms.iter()
        .find(|m| m["platform"]["os"] == "linux" && m["platform"]["architecture"] == "amd64")
        .or(if ms.len() == 1 { ms.first() } else { None })
        .and_then(|m| m["digest"].as_str().map(String::from))
}

async fn fetch(client: &Client, at: &Reference, cache: &Path, progress: &dyn Progress) -> Result<(String, PathBuf), Error> {
    let (body, _media, digest) = client.manifest(at).await?;
    let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| Error::Other(format!("{at}: manifest: {e}")))?;
    let (v, digest, at) = if v["manifests"].is_array() {
        let d = pick(&v).ok_or_else(|| Error::Other(format!("{at}: the index has no linux/amd64 image")))?;
        hex(&d, &format_args!("{at}: the index's linux/amd64 entry"))?;
        let mut one = at.clone();
        one.digest = Some(d);
        let (body, _, _) = client.manifest(&one).await?;
        (
            serde_json::from_slice(&body).map_err(|e| Error::Other(format!("{one}: manifest: {e}")))?,
            digest,
            one,
        )
    } else {
        (v, digest, at.clone())
    };
    let digest_hex = hex(&digest, &at)?.to_string();
    if let Some(root) = complete(cache, &digest) {
        return Ok((digest, root));
    }
    let blobs = cache.join("blobs");
    private_dir(&blobs).map_err(Error::io(&blobs))?;
    let (layers, paths) = layer_paths(&v, &blobs, &at)?;
    let total: u64 = layers.iter().filter_map(|(_, _, size)| *size).sum();
    progress.begin(&format!("{at}: {} layers", layers.len()), total, true);
    for (i, ((d, _, size), p)) in layers.iter().zip(&paths).enumerate() {
        // A kept blob is used only if it still hashes to its name.
        let how = if holds(p, d) {
            progress.inc(size.unwrap_or(0));
            "kept"
        } else {
            let _ = std::fs::remove_file(p);
            client.blob_to_file(&at, d, p, *size, progress).await?;
            "fetched"
        };
        let size = size.map_or("? bytes".to_string(), |s| format!("{s} bytes"));
        progress.item(&format!("layer {}/{} {d}: {size}, {how}", i + 1, layers.len()));
    }
    progress.end();
    // Extract beside the final place, then rename: a killed run leaves no half release.
    let root = cache.join(&digest_hex);
    let tmp = cache.join(format!("{digest_hex}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    private_dir(&tmp).map_err(Error::io(&tmp))?;
    let keep = |p: &str| p.starts_with("release-manifests/") || p == "release-manifests";
    let extracted = layers.iter().zip(&paths).try_for_each(|((d, _, _), p)| {
        extract::apply_layer(p, &tmp, &keep)
            .map(drop)
            .map_err(|source| Error::Layer { digest: d.clone(), source })
    });
    // A refused layer (an inode bomb, a path out of the tree) leaves nothing behind: what it
    // wrote before it was refused goes with the temporary tree.
    if let Err(e) = extracted.and_then(|_| std::fs::write(tmp.join(".complete"), format!("{at}\n")).map_err(Error::io(&tmp))) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&tmp, &root).map_err(Error::io(&root))?;
    Ok((digest, root))
}

/// Pull `image` (through its mirrors) into `cache`, or use the cache; `progress` hears the layers.
pub async fn pull(
    client: &Client,
    sources: &[DigestSource],
    image: &Reference,
    cache: &Path,
    progress: &dyn Progress,
) -> Result<Pulled, Vec<Error>> {
    if let Some(root) = image.digest.as_deref().and_then(|d| complete(cache, d)) {
        return Ok(Pulled {
            digest: image.digest.clone().unwrap_or_default(),
            from: "cache".into(),
            root,
            offline_because: vec![],
        });
    }
    let mut errors = Vec::new();
    for at in candidates(sources, image) {
        match fetch(client, &at, cache, progress).await {
            Ok((digest, root)) => {
                let f = name_file(cache, image);
                if let Some(p) = f.parent() {
                    let _ = private_dir(p);
                }
                let _ = std::fs::write(&f, &digest);
                return Ok(Pulled {
                    digest,
                    from: at.to_string(),
                    root,
                    offline_because: vec![],
                });
            }
            // A digest mismatch is never retried elsewhere silently: it is reported.
            Err(e) => errors.push(e),
        }
    }
    // No registry answered: a tag resolved before, and its release kept, will do.
    let reachable = errors
        .iter()
        .any(|e| matches!(e, Error::Missing { .. } | Error::Auth { .. } | Error::Digest { .. }));
    if !reachable {
        if let Some(root) = std::fs::read_to_string(name_file(cache, image))
            .ok()
            .and_then(|d| complete(cache, d.trim()))
        {
            return Ok(Pulled {
                digest: std::fs::read_to_string(name_file(cache, image))
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
                from: "cache".into(),
                root,
                offline_because: errors.iter().map(|e| e.to_string()).collect(),
            });
        }
    }
    Err(errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_yields_its_linux_amd64_image() {
        let idx = serde_json::json!({"manifests": [
            {"digest": "sha256:arm", "platform": {"os": "linux", "architecture": "arm64"}},
            {"digest": "sha256:amd", "platform": {"os": "linux", "architecture": "amd64"}}]});
        assert_eq!(pick(&idx).as_deref(), Some("sha256:amd"));
        let only = serde_json::json!({"manifests": [{"digest": "sha256:one"}]});
        assert_eq!(pick(&only).as_deref(), Some("sha256:one"));
        let none = serde_json::json!({"manifests": [
            {"digest": "sha256:a", "platform": {"os": "linux", "architecture": "s390x"}},
            {"digest": "sha256:b", "platform": {"os": "linux", "architecture": "ppc64le"}}]});
        assert_eq!(pick(&none), None, "never a wrong architecture silently");
        let m = serde_json::json!({"layers": [{"digest": "sha256:l1", "mediaType": "application/vnd.oci.image.layer.v1.tar+zstd"}]});
        assert_eq!(
            layers(&m),
            vec![(
                "sha256:l1".to_string(),
                "application/vnd.oci.image.layer.v1.tar+zstd".to_string(),
                None
            )]
        );
    }
}
