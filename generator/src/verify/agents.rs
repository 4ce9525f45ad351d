//! The agent each node's config embeds, against the binary meant to be there.

use super::{check, Check, Status};
use crate::bundle::{self, Bundle};
use crate::ignition::Contents;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What an embedded agent is compared with.
pub struct AgentRef {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    /// Given as `--agent-binary`, else found beside hardshift.
    pub given: bool,
}

/// (what the agent is, how to hash the reference to compare)
type Identity = (String, String);

/// The agent each node's config embeds (grouped: the configs that embed the same), compared with
/// `reference`; `beside` is where hardshift looked for one when none was given or found.
pub fn agents(b: &Bundle, reference: Option<&AgentRef>, beside: &Path) -> Vec<Check> {
    let by = embedded(b);
    if by.is_empty() {
        return vec![check("agent", Status::Ok, "no node config embeds the agent")];
    }
    by.into_iter()
        .map(|(id, configs)| compare(&id, &configs, reference, beside))
        .collect()
}

/// Each distinct agent the node configs embed, and the configs that embed it.
fn embedded(b: &Bundle) -> BTreeMap<Identity, Vec<&str>> {
    let mut by: BTreeMap<Identity, Vec<&str>> = BTreeMap::new();
    for (path, f) in b.files.iter().filter(|(p, _)| p.starts_with("ignition/") && p.ends_with(".ign")) {
        let Ok(cfg) = serde_json::from_slice::<crate::ignition::Config>(&f.contents.bytes()) else {
            continue;
        };
        let Some(c) = cfg
            .storage
            .files
            .iter()
            .find(|f| f.path == crate::assets::agent::BINARY)
            .and_then(|f| f.contents.as_ref())
        else {
            continue;
        };
        by.entry(identity(c)).or_default().push(path);
    }
    by
}

/// An embedded agent is its bytes' SHA-256; a fetched one, its URL and the hash Ignition checks.
fn identity(c: &Contents) -> Identity {
    match (
        crate::ignition::decode(c),
        c.other.get("verification").and_then(|v| v["hash"].as_str()),
    ) {
        (Some(bytes), _) => (
            format!("hardshift-agent sha256 {}", bundle::sha256_hex(&bytes)),
            "sha256".to_string(),
        ),
        (None, Some(h)) => (
            format!("hardshift-agent fetched from {} ({h})", c.source.as_deref().unwrap_or_default()),
            h.to_string(),
        ),
        (None, None) => ("an agent that does not decode".to_string(), String::new()),
    }
}

/// The reference's digest the way the configs name theirs.
fn digest(how: &str, bytes: &[u8]) -> Option<String> {
    use sha2::{Digest, Sha512};
    match how {
        "sha256" => Some(bundle::sha256_hex(bytes)),
        h if h.starts_with("sha512-") => Some(format!("sha512-{:x}", Sha512::digest(bytes))),
        _ => None,
    }
}

/// One group of configs against the reference: the same agent, another, or nothing to compare with.
fn compare((what, how): &Identity, configs: &[&str], reference: Option<&AgentRef>, beside: &Path) -> Check {
    let list = format!(
        "{}{}",
        configs[..configs.len().min(6)].join(", "),
        if configs.len() > 6 {
            format!(" and {} more", configs.len() - 6)
        } else {
            String::new()
        }
    );
    let Some(r) = reference else {
        return check(
            "agent",
            Status::Warn,
            format!(
                "not compared: no hardshift-agent beside hardshift ({}); {list} embed {what} (pass --agent-binary PATH to compare)",
                beside.display()
            ),
        );
    };
    let said = match r.given {
        true => format!("the --agent-binary {}", r.path.display()),
        false => format!("the hardshift-agent beside hardshift ({}", r.path.display()),
    };
    let close = if r.given { "" } else { ")" };
    let theirs = digest(how, &r.bytes);
    let same = theirs.as_ref().is_some_and(|d| what.contains(d.as_str()));
    if same {
        return check("agent", Status::Ok, format!("{list} embed {what}: {said}{close}"));
    }
    let sha = bundle::sha256_hex(&r.bytes);
    let with = match r.given {
        true => format!("{said} (sha256 {sha})"),
        false => format!("{said}, sha256 {sha})"),
    };
    check(
        "agent",
        Status::Fail,
        format!(
            "{list} embed {what}, not {with}: a foreign agent, or another build's; compare with the one meant (--agent-binary PATH), or make the bundle again with this build's (`hardshift create`)"
        ),
    )
}
