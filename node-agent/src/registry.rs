//! Can this node pull? An authenticated manifest HEAD, through the mirrors, for the images the
//! node needs first (the release and the pause image), with the node's own pull secret and trust
//! bundle: the mirror check of `hardshift mirror-check`, from the node's view. Never a pull.

use anyhow::Context;
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::Component;
use hardshift_registry::{auth::Auths, check, client::Client, mirror::DigestSource, reference::Reference};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

pub use hardshift_agent_config::RegistryConfig;

fn state(health: Health, state: String, reason: String, details: HashMap<String, String>) -> ComponentState {
    ComponentState {
        name: Component::Registry.name().into(),
        health: health as i32,
        state,
        reason,
        details,
    }
}

/// One look: every image HEADed through its mirrors.
pub async fn probe(cfg: &RegistryConfig) -> ComponentState {
    let read = |p: &PathBuf| std::fs::read_to_string(p).with_context(|| p.display().to_string());
    let setup = (|| {
        let auths = Auths::from_pull_secret(&read(&cfg.pull_secret)?)?;
        let trust = match &cfg.trust {
            Some(p) if p.exists() => Some(read(p)?),
            _ => None,
        };
        let client = Client::new(auths, trust.as_deref(), Duration::from_secs(5))?;
        let images = cfg
            .images
            .iter()
            .map(|i| Reference::parse(i).with_context(|| format!("image {i}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok::<_, anyhow::Error>((client, images))
    })();
    let (client, images) = match setup {
        Ok(v) => v,
        Err(e) => return state(Health::Warning, "not checked".into(), format!("{e:#}"), HashMap::new()),
    };
    let sources: Vec<DigestSource> = cfg
        .mirror
        .iter()
        .map(|m| DigestSource {
            source: m.source.clone(),
            mirrors: m.mirrors.clone(),
            source_policy: None,
        })
        .collect();
    let outcomes = check::check(&client, &sources, images, 4, &hardshift_registry::progress::Quiet).await;
    let mut details = HashMap::new();
    let mut bad = Vec::new();
    for o in &outcomes {
        match &o.result {
            Ok(at) => {
                details.insert(o.image.to_string(), format!("ok via {}", at.registry));
            }
            Err(errs) => {
                let first = errs.first().map(|e| format!("{}: {e}", e.kind())).unwrap_or_default();
                details.insert(o.image.to_string(), first.clone());
                bad.push(first);
            }
        }
    }
    if bad.is_empty() {
        state(Health::Ok, format!("{} images pullable", outcomes.len()), String::new(), details)
    } else {
        state(
            Health::Failing,
            format!("{} of {} images not pullable", bad.len(), outcomes.len()),
            bad.join("; "),
            details,
        )
    }
}
