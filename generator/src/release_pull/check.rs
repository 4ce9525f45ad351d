//! What the nodes will pull, read from DIR/release/image-references: `release show` (each image
//! and where it is pulled from) and the mirror check (an authenticated manifest HEAD, through
//! the mirrors, for every image), as data and as lines.

use super::{Access, Error};
use crate::release::{self, Release};
use hardshift_registry::{check, mirror, progress::Progress, reference::Reference};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// (tag, image) pairs: what the nodes will pull.
type Images = Vec<(String, Reference)>;

/// The release's version, and its images as the references file names them, with the release
/// image itself.
pub fn images(acc: &Access) -> Result<(Option<String>, Images, Release), Error> {
    let path = acc.dir.join(crate::config::RELEASE_REFS);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::Input(format!("{}: {e} (run `hardshift release pull` first)", path.display())))?;
    let rel = release::parse(&text, acc.image.as_ref().map(|i| i.to_string()).as_deref()).map_err(|es| {
        Error::Input(format!(
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
        let r = Reference::parse(spec).map_err(|e| Error::Input(format!("{}: tag {tag}: {e}", path.display())))?;
        out.push((tag.clone(), r));
    }
    Ok((rel.version.clone(), out, rel))
}

/// `release show`: the version, and each image with the first place it is pulled from.
pub struct Shown {
    pub version: Option<String>,
    /// (tag, image, pulled from)
    pub rows: Vec<(String, Reference, String)>,
}

pub fn show(acc: &Access) -> Result<Shown, Error> {
    let (version, imgs, _) = images(acc)?;
    let rows = imgs
        .into_iter()
        .map(|(tag, r)| {
            let first = mirror::candidates(&acc.sources, &r)
                .first()
                .map(|v| v.to_string())
                .unwrap_or_default();
            (tag, r, first)
        })
        .collect();
    Ok(Shown { version, rows })
}

impl Shown {
    pub fn json(&self) -> serde_json::Value {
        let images: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|(tag, r, via)| json!({"tag": tag, "image": r.to_string(), "pull_from": via}))
            .collect();
        json!({"version": self.version, "images": images})
    }

    pub fn lines(&self) -> Vec<String> {
        let version = self.version.as_deref().unwrap_or("(not named in image-references)");
        let mut out = vec![format!("version: {version}")];
        out.extend(self.rows.iter().map(|(tag, _, via)| format!("{tag:<40} {via}")));
        out
    }
}

/// The mirror check's answer: what the release lacks for the MCO, and every image's outcome.
pub struct Checked {
    pub missing: Vec<String>,
    pub outcomes: Vec<check::Outcome>,
    /// image → its tag.
    tags: BTreeMap<String, String>,
    pub took: Duration,
}

/// Check every image of the release through the mirrors, `concurrency` at a time.
pub async fn check(acc: &Access, concurrency: usize, progress: &dyn Progress) -> Result<Checked, Error> {
    let (_, imgs, rel) = images(acc)?;
    let missing = release::missing_for_mco(&rel);
    let tags: BTreeMap<String, String> = imgs.iter().map(|(t, r)| (r.to_string(), t.clone())).collect();
    let mut unique: Vec<Reference> = imgs.into_iter().map(|(_, r)| r).collect();
    unique.sort_by_key(|r| r.to_string());
    unique.dedup();
    let t = std::time::Instant::now();
    let outcomes = check::check(&acc.client, &acc.sources, unique, concurrency, progress).await;
    Ok(Checked {
        missing,
        outcomes,
        tags,
        took: t.elapsed(),
    })
}

impl Checked {
    fn bad(&self) -> impl Iterator<Item = &check::Outcome> {
        self.outcomes.iter().filter(|o| o.result.is_err())
    }

    /// Every image is pullable.
    pub fn all_pullable(&self) -> bool {
        self.bad().next().is_none()
    }

    fn tag(&self, o: &check::Outcome) -> Option<&str> {
        self.tags.get(&o.image.to_string()).map(String::as_str)
    }

    pub fn json(&self) -> serde_json::Value {
        let images: Vec<serde_json::Value> = self
            .outcomes
            .iter()
            .map(|o| {
                let errors: Vec<serde_json::Value> = o
                    .result
                    .as_ref()
                    .err()
                    .into_iter()
                    .flatten()
                    .map(|e| json!({"kind": e.kind(), "error": e.to_string()}))
                    .collect();
                json!({
                    "tag": self.tag(o).unwrap_or_default(),
                    "image": o.image.to_string(),
                    "pullable": o.result.is_ok(),
                    "errors": errors,
                })
            })
            .collect();
        json!({
            "missing": self.missing,
            "pullable": self.outcomes.len() - self.bad().count(),
            "total": self.outcomes.len(),
            "seconds": self.took.as_secs_f64(),
            "images": images,
        })
    }

    /// Each missing or refused image with the registry's own words, then the tally.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self.missing.iter().map(|m| format!("MISSING {m}")).collect();
        for o in self.bad() {
            out.push(format!("NOT PULLABLE {} {}", self.tag(o).unwrap_or("?"), o.image));
            for e in o.result.as_ref().err().into_iter().flatten() {
                out.push(format!("    {}: {e}", e.kind()));
            }
        }
        out.push(format!(
            "mirror-check: {} of {} images pullable through the mirrors ({:.2} s)",
            self.outcomes.len() - self.bad().count(),
            self.outcomes.len(),
            self.took.as_secs_f64()
        ));
        out
    }
}

/// Whether the first mirror's host answers a TCP connect within a second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    Answers(String),
    /// `create --mirror-check` then skips the check, saying so.
    Silent(String),
}

/// The first mirror's reach; None without mirrors.
pub async fn mirror_in_reach(acc: &Access) -> Option<Reach> {
    let first = acc.sources.iter().flat_map(|s| s.mirrors.first()).next()?;
    let host = first.split('/').next().unwrap_or("").to_string();
    let answers = mirror::answers(&host, Duration::from_secs(1)).await;
    Some(if answers { Reach::Answers(host) } else { Reach::Silent(host) })
}
