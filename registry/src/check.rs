//! The mirror check: for every pullspec the nodes will pull, an authenticated manifest HEAD
//! through the mirrors, as CRI-O would resolve it. Nothing is pulled.

use crate::client::{Client, Error};
use crate::mirror::{candidates, DigestSource};
use crate::progress::Progress;
use crate::reference::Reference;
use futures_util::StreamExt;

pub struct Outcome {
    pub image: Reference,
    /// Where it was found, or every candidate's error in order.
    pub result: Result<Reference, Vec<Error>>,
}

/// Each image through its mirrors, `concurrency` at a time; `progress` hears each one checked.
pub async fn check(
    client: &Client,
    sources: &[DigestSource],
    images: Vec<Reference>,
    concurrency: usize,
    progress: &dyn Progress,
) -> Vec<Outcome> {
    progress.begin("images checked", images.len() as u64, false);
    let one = |image: Reference| async move {
        let mut errors = Vec::new();
        for at in candidates(sources, &image) {
            match client.head_manifest(&at).await {
                Ok(_) => {
                    progress.item(&format!("pullable {image} (at {at})"));
                    progress.inc(1);
                    return Outcome { image, result: Ok(at) };
                }
                Err(e) => errors.push(e),
            }
        }
        progress.item(&format!("NOT PULLABLE {image}"));
        progress.inc(1);
        Outcome {
            image,
            result: Err(errors),
        }
    };
    let mut out: Vec<Outcome> = futures_util::stream::iter(images.into_iter().map(one))
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    out.sort_by_key(|o| o.image.to_string());
    out
}
