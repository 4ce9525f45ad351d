//! Inputs → `Cluster`. `read_sources` is the only I/O; `build` is pure and reports every
//! problem it finds, each with file, line, column and field path.

pub mod agent_config;
pub mod diag;
pub mod hardshift_config;
pub mod install_config;
pub(crate) mod rules;
pub mod schema;
mod validate;
pub mod yaml;

pub use diag::{Diagnostic, InputError};
pub use rules::Broken;

use crate::cluster::{Cluster, KeyAlgorithm};
use serde::de::DeserializeOwned;
use std::path::Path;
use yaml::Doc;

pub const INSTALL_CONFIG: &str = "install-config.yaml";
pub const AGENT_CONFIG: &str = "agent-config.yaml";
pub const HARDSHIFT_CONFIG: &str = "hardshift.yaml";

/// The text of the input files, as read from the bundle directory.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub install_config: String,
    pub agent_config: String,
    pub hardshift: Option<String>,
    /// The release's image references: (name to show in errors, text).
    pub release_refs: (String, String),
}

/// Where the release's image references are, unless `--release-refs` says otherwise.
pub const RELEASE_REFS: &str = crate::layout::RELEASE_REFS;

/// Command-line choices that win over `hardshift.yaml`.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub key_algorithm: Option<KeyAlgorithm>,
    /// For a run that makes keys: whether its crypto module is FIPS (`hardshift_crypto::module()`).
    /// `fips: true` is refused without one. None for runs that only read a bundle.
    pub crypto_fips: Option<bool>,
    /// `--release-image`: wins over hardshift.yaml `release.image`.
    pub release_image: Option<String>,
    /// `--no-live-agent`: RHCOS's own `coreos.inst.*` arguments, whatever hardshift.yaml's
    /// `lab.liveAgent` says.
    pub no_live_agent: bool,
}

/// The most a YAML input may hold: install-config.yaml travels whole in the
/// `cluster-config-v1` ConfigMap, and etcd refuses a request over 1.5 MiB.
pub const MAX_INPUT_BYTES: u64 = 1 << 20;
/// agent-config.yaml never leaves the workstation, and grows with the hosts (0.5 to 1 KB each):
/// 32 MiB holds 30,000 of the example's hosts, far past OpenShift's 2,000 nodes (which 1 MiB
/// did not hold), and still bounds a runaway file.
pub const MAX_AGENT_CONFIG_BYTES: u64 = 32 << 20;

/// The cap of input `name` and why, for the error that names it.
fn cap_of(name: &str) -> (u64, &'static str) {
    if name == AGENT_CONFIG {
        (
            MAX_AGENT_CONFIG_BYTES,
            "the file must be UTF-8 YAML of at most 32 MiB (some 30,000 hosts); look for a pasted file or a runaway value",
        )
    } else {
        (
            MAX_INPUT_BYTES,
            "the file must be UTF-8 YAML of at most 1 MiB (install-config.yaml travels whole in a ConfigMap, and etcd caps one at 1.5 MiB); look for a pasted file or a runaway value",
        )
    }
}
/// The release's image references (an ImageStream of ~200 tags is about 100 KB).
pub const MAX_REFS_BYTES: u64 = 16 << 20;

/// Read a file as UTF-8, refusing (without reading it all) one larger than `max` bytes, and
/// anything but a regular file (a FIFO would hang the read).
pub fn read_capped(path: &Path, max: u64) -> std::io::Result<String> {
    hardshift_agent_config::regular::read_to_string(path, max)
}

/// Read the inputs from `dir`. A missing required file is an input error, not an I/O failure.
pub fn read_sources(dir: &Path, release_refs: Option<&Path>) -> Result<Sources, InputError> {
    let mut diagnostics = Vec::new();
    let mut read = |name: &str, required: bool| -> Option<String> {
        let (cap, why) = cap_of(name);
        match read_capped(&dir.join(name), cap) {
            Ok(s) => Some(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => None,
            Err(e) => {
                let hint = match e.kind() {
                    std::io::ErrorKind::NotFound => Some(format!("put the file in {} (see examples/ for one)", dir.display())),
                    std::io::ErrorKind::InvalidData => Some(why.into()),
                    _ => None,
                };
                diagnostics.push(Diagnostic {
                    file: dir.join(name).display().to_string(),
                    path: String::new(),
                    pos: None,
                    message: format!("cannot read: {e}"),
                    hint,
                });
                None
            }
        }
    };
    let install_config = read(INSTALL_CONFIG, true);
    let agent_config = read(AGENT_CONFIG, true);
    let hardshift = read(HARDSHIFT_CONFIG, false);
    let refs_path = release_refs.map(Path::to_path_buf).unwrap_or_else(|| dir.join(RELEASE_REFS));
    let refs = match read_capped(&refs_path, MAX_REFS_BYTES) {
        Ok(t) => t,
        Err(e) => {
            diagnostics.push(Diagnostic {
                file: refs_path.display().to_string(),
                path: String::new(),
                pos: None,
                message: format!("cannot read the release's image references: {e}"),
                hint: Some("extract them with `oc adm release extract --file=image-references RELEASE` into DIR/release/, or pass --release-refs FILE (an ImageStream JSON or name=pullspec lines)".into()),
            });
            String::new()
        }
    };
    if !diagnostics.is_empty() {
        return Err(InputError { diagnostics });
    }
    Ok(Sources {
        install_config: install_config.unwrap_or_default(),
        agent_config: agent_config.unwrap_or_default(),
        hardshift,
        release_refs: (refs_path.display().to_string(), refs),
    })
}

/// What reaching the release's registry takes, before the release is known (its image
/// references may come from the registry itself): the pull secret, the trust bundle, the digest
/// mirrors and the release image. From install-config.yaml and hardshift.yaml alone.
#[derive(Debug, Clone)]
pub struct RegistryAccess {
    pub pull_secret: String,
    pub additional_trust_bundle: String,
    /// (source, mirrors), in install-config's order.
    pub mirrors: Vec<(String, Vec<String>)>,
    pub release_image: Option<String>,
}

pub fn registry_access(dir: &Path, overrides: &Overrides) -> Result<RegistryAccess, InputError> {
    let mut out = Vec::new();
    let text = |name: &str| read_capped(&dir.join(name), MAX_INPUT_BYTES);
    let ic_text = text(INSTALL_CONFIG).map_err(|e| InputError {
        diagnostics: vec![Diagnostic {
            file: dir.join(INSTALL_CONFIG).display().to_string(),
            path: String::new(),
            pos: None,
            message: e.to_string(),
            hint: None,
        }],
    })?;
    let ic = parse_typed::<install_config::InstallConfig>(INSTALL_CONFIG, &ic_text, &schema::INSTALL_CONFIG, &mut out);
    let hs = match text(HARDSHIFT_CONFIG) {
        Ok(t) => parse_typed::<hardshift_config::HardshiftConfig>(HARDSHIFT_CONFIG, &t, &schema::HARDSHIFT_CONFIG, &mut out).map(|h| h.1),
        Err(_) => Some(hardshift_config::HardshiftConfig::default()),
    };
    let (Some((_, ic)), Some(hs)) = (ic, hs) else {
        return Err(InputError { diagnostics: out });
    };
    let mirrors = if ic.image_digest_sources.is_empty() {
        &ic.image_content_sources
    } else {
        &ic.image_digest_sources
    };
    Ok(RegistryAccess {
        pull_secret: ic.pull_secret.clone(),
        additional_trust_bundle: ic.additional_trust_bundle.clone(),
        mirrors: mirrors.iter().map(|m| (m.source.clone(), m.mirrors.clone())).collect(),
        release_image: overrides.release_image.clone().or(hs.release.image.clone()),
    })
}

/// Validate the inputs and build the `Cluster`; on failure, every problem found.
pub fn build(sources: &Sources, overrides: &Overrides) -> Result<Cluster, InputError> {
    let mut out = Vec::new();
    let ic = parse_typed::<install_config::InstallConfig>(INSTALL_CONFIG, &sources.install_config, &schema::INSTALL_CONFIG, &mut out);
    let ac = parse_typed::<agent_config::AgentConfig>(AGENT_CONFIG, &sources.agent_config, &schema::AGENT_CONFIG, &mut out);
    let hs = match &sources.hardshift {
        Some(text) => parse_typed::<hardshift_config::HardshiftConfig>(HARDSHIFT_CONFIG, text, &schema::HARDSHIFT_CONFIG, &mut out),
        None => Some((Doc::default(), hardshift_config::HardshiftConfig::default())),
    };
    let (Some(ic), Some(ac), Some(hs)) = (ic, ac, hs) else {
        return Err(InputError { diagnostics: out });
    };
    let release = release_of(
        sources,
        overrides.release_image.as_deref().or(hs.1.release.image.as_deref()),
        &mut out,
    );
    match validate::validate(&ic, &ac, &hs, release, overrides, &mut out) {
        Some(c) if out.is_empty() => Ok(c),
        _ => Err(InputError { diagnostics: out }),
    }
}

/// Parse YAML, refuse unknown keys, and deserialize it into `T`, turning failures into
/// positioned diagnostics.
fn parse_typed<T: DeserializeOwned>(file: &str, text: &str, shape: &schema::Shape, out: &mut Vec<Diagnostic>) -> Option<(Doc, T)> {
    let doc = match yaml::parse(text) {
        Ok(d) => d,
        Err(e) => {
            out.push(Diagnostic {
                file: file.into(),
                path: String::new(),
                pos: Some(e.pos),
                message: format!("not valid YAML: {}", e.message),
                hint: None,
            });
            return None;
        }
    };
    if !doc.value.is_object() {
        out.push(Diagnostic {
            file: file.into(),
            path: String::new(),
            pos: doc.pos(""),
            message: "expected a YAML mapping at the top level".into(),
            hint: Some("the file should start with `apiVersion:`".into()),
        });
        return None;
    }
    let before = out.len();
    schema::check(file, &doc, shape, out);
    if out.len() > before {
        // The typed parse would only repeat these (or fail on a default they left).
        return None;
    }
    // `key:` with no value is null; like Kubernetes, read it as absent so defaults apply. The
    // document keeps its nulls (the install-config is embedded as written), so drop them from a
    // copy, made only when there are any (a 1,000-host agent-config costs ~20 ms to copy).
    let cleaned;
    let value = if has_nulls(&doc.value) {
        let mut v = doc.value.clone();
        drop_nulls(&mut v);
        cleaned = v;
        &cleaned
    } else {
        &doc.value
    };
    match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(v) => Some((doc, v)),
        Err(e) => {
            let path = e.path().to_string();
            let path = if path == "." { String::new() } else { path };
            out.push(Diagnostic {
                file: file.into(),
                pos: doc.pos(&path),
                path,
                message: e.into_inner().to_string(),
                hint: None,
            });
            None
        }
    }
}

fn has_nulls(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::Object(m) => m.values().any(has_nulls),
        serde_json::Value::Array(a) => a.iter().any(has_nulls),
        _ => false,
    }
}

fn drop_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

fn release_of(sources: &Sources, image: Option<&str>, out: &mut Vec<Diagnostic>) -> Option<crate::release::Release> {
    let (file, text) = &sources.release_refs;
    match crate::release::parse(text, image) {
        Ok(r) => Some(r),
        Err(errors) => {
            for (line, message) in errors {
                let hint = if message.contains("release image itself") {
                    "pass --release-image <pullspec> or set `release: {image: <pullspec>}` in hardshift.yaml (the release you mirror, by digest)"
                } else {
                    "use the image-references of the release you install (`oc adm release extract --file=image-references`)"
                };
                out.push(Diagnostic {
                    file: file.clone(),
                    path: String::new(),
                    pos: (line > 0).then_some(yaml::Pos { line, col: 1 }),
                    message,
                    hint: Some(hint.into()),
                });
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct T {
        #[serde(default = "three")]
        n: u32,
        #[serde(default)]
        list: Vec<Option<u32>>,
    }

    fn three() -> u32 {
        3
    }

    fn typed(text: &str) -> (Doc, T) {
        let mut out = Vec::new();
        let r = parse_typed::<T>("t.yaml", text, &schema::Shape::Any, &mut out);
        assert!(out.is_empty(), "{out:?}");
        r.unwrap()
    }

    #[test]
    fn a_key_without_a_value_takes_the_default_and_the_document_keeps_it() {
        let (doc, t) = typed("n:\nlist: [1, null]\n");
        assert_eq!(
            t,
            T {
                n: 3,
                list: vec![Some(1), None]
            }
        );
        // The document as written is what gets embedded: its null stays.
        assert_eq!(doc.value["n"], serde_json::Value::Null);
        let (_, t) = typed("n: 7\n");
        assert_eq!(t, T { n: 7, list: vec![] });
    }

    /// An input directory whose agent-config.yaml holds `hosts` of the example's hosts (the
    /// first master's, renamed) and is padded to at least `pad` bytes with a comment.
    fn inputs(hosts: usize, pad: usize) -> tempfile::TempDir {
        let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/ocp4");
        let t = tempfile::tempdir().unwrap();
        std::fs::copy(ex.join(INSTALL_CONFIG), t.path().join(INSTALL_CONFIG)).unwrap();
        std::fs::create_dir_all(t.path().join("release")).unwrap();
        std::fs::copy(ex.join(RELEASE_REFS), t.path().join(RELEASE_REFS)).unwrap();
        let ac = std::fs::read_to_string(ex.join(AGENT_CONFIG)).unwrap();
        let start = ac.find("- hostname: master-0").unwrap();
        let len = ac[start + 1..].find("\n- hostname:").unwrap() + 2;
        let host = &ac[start..start + len];
        let mut text = ac[..ac.find("- hostname:").unwrap()].to_string();
        for i in 0..hosts {
            text.push_str(&host.replace("master-0", &format!("worker-{i}")));
        }
        while text.len() < pad {
            text.push_str(&format!("# {}\n", "x".repeat(1000)));
        }
        std::fs::write(t.path().join(AGENT_CONFIG), text).unwrap();
        t
    }

    #[test]
    fn agent_config_holds_thousands_of_hosts_install_config_one_mib() {
        // 2,000 hosts (OpenShift's most nodes) are about 1.8 MB: read and parsed whole.
        let t = inputs(2000, 0);
        let s = read_sources(t.path(), None).unwrap();
        assert!(s.agent_config.len() > (1 << 20), "{}", s.agent_config.len());
        let doc = yaml::parse(&s.agent_config).unwrap();
        assert_eq!(doc.value["hosts"].as_array().unwrap().len(), 2000);

        // Past 32 MiB: a runaway file, refused with what the cap is.
        let t = inputs(1, (32 << 20) + 1);
        let e = read_sources(t.path(), None).err().unwrap().diagnostics;
        assert!(
            e[0].file.ends_with(AGENT_CONFIG) && e[0].message.contains("larger than 32768 KiB"),
            "{e:?}"
        );
        assert!(e[0].hint.as_deref().unwrap().contains("at most 32 MiB"), "{e:?}");

        // install-config.yaml stays at 1 MiB (it travels in a ConfigMap).
        let t = inputs(1, 0);
        let mut ic = std::fs::read_to_string(t.path().join(INSTALL_CONFIG)).unwrap();
        ic.push_str(&format!("# {}\n", "x".repeat(1 << 20)));
        std::fs::write(t.path().join(INSTALL_CONFIG), ic).unwrap();
        let e = read_sources(t.path(), None).err().unwrap().diagnostics;
        assert!(
            e[0].file.ends_with(INSTALL_CONFIG) && e[0].message.contains("larger than 1024 KiB"),
            "{e:?}"
        );
    }

    #[test]
    fn nulls_are_found_at_any_depth() {
        assert!(!has_nulls(&serde_json::json!({"a": [1, {"b": "c"}], "d": false})));
        assert!(has_nulls(&serde_json::json!({"a": [1, {"b": null}]})));
        assert!(has_nulls(&serde_json::json!([[null]])));
    }
}
