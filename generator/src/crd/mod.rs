//! The release's own CRDs judge the custom resources a bundle writes, offline: what a real API
//! server would prune (structural pruning drops an undeclared field silently), and what it would
//! refuse (types, enums, patterns, required, bounds, list uniqueness, CEL rules). Pure functions
//! over parsed documents; reading a directory is the one edge.
//!
//! Not checked, and said so in every report: `format`s (the API server checks a few of them), CEL
//! rules that use a function this evaluator does not have (each is listed with the reason), and
//! transition rules (`oldSelf`: they only run on updates).

pub mod bundle;
mod cel;
mod cost;
mod prune;
mod schema;

use serde_json::Value;
use std::path::Path;

/// The annotations that say which clusters a CRD file is for.
const FEATURE_SET: &str = "release.openshift.io/feature-set";
const PROFILE: &str = "include.release.openshift.io/self-managed-high-availability";
const PROFILE_PREFIX: &str = "include.release.openshift.io/";

/// One served version of a CRD.
pub struct Version {
    pub name: String,
    /// `spec.versions[].schema.openAPIV3Schema` as the CRD declares it.
    pub schema: Value,
    validator: jsonschema::Validator,
}

pub struct Crd {
    /// The file it came from (for reports).
    pub file: String,
    pub name: String,
    pub group: String,
    pub kind: String,
    pub versions: Vec<Version>,
}

/// The CRDs a default-feature-set, self-managed highly-available cluster applies.
pub struct CrdSet {
    pub crds: Vec<Crd>,
}

/// One way an object differs from what its CRD declares.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// `Kind/name` of the object.
    pub object: String,
    /// A JSON path into the object (`.status.apiServerInternalURL`).
    pub path: String,
    /// What the schema declares there, and what a real API server does.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.object, self.path, self.message)
    }
}

/// A CEL rule the check could not evaluate, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Unchecked {
    pub object: String,
    pub path: String,
    pub rule: String,
    pub why: String,
}

/// What checking one object found.
#[derive(Debug, Default)]
pub struct Report {
    /// The CRD file that judged it; `None` when the object is not a custom resource.
    pub crd_file: Option<String>,
    pub problems: Vec<Problem>,
    pub rules_checked: usize,
    pub rules_unchecked: Vec<Unchecked>,
}

/// `Kind/name` (`Kind/namespace/name` when namespaced).
pub fn object_name(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or("?");
    let name = obj["metadata"]["name"].as_str().unwrap_or("?");
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind}/{ns}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// The API groups Kubernetes itself serves: objects in them are not custom resources.
fn built_in(group: &str) -> bool {
    group.is_empty() || !group.contains('.') || group.ends_with(".k8s.io")
}

/// Whether a CRD file's annotations put it in the default feature set of a self-managed cluster.
fn applies(doc: &Value) -> bool {
    let ann = &doc["metadata"]["annotations"];
    let default_set = match ann[FEATURE_SET].as_str() {
        None => true,
        Some(sets) => sets.split(',').any(|s| s.trim() == "Default"),
    };
    let profiled = ann.as_object().is_some_and(|m| m.keys().any(|k| k.starts_with(PROFILE_PREFIX)));
    default_set && (!profiled || ann[PROFILE] == "true")
}

/// The most a CRD file may hold: the API server refuses a request over 3 MiB (the release's
/// largest CRD is 187 KB).
pub const MAX_CRD_BYTES: u64 = 4 << 20;
/// The most files `--crds` reads (the release has about a hundred).
pub const MAX_CRD_FILES: usize = 5_000;

/// Why a set of CRDs, or the bundle's objects for them, did not load.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file of `--crds` over the cap, or not a regular file.
    #[error("{}: {why} (the API server takes no request over 3 MiB; a CRD file is a regular file of at most {} MiB)", path.display(), MAX_CRD_BYTES >> 20)]
    File { path: std::path::PathBuf, why: String },
    #[error("{}: {n} YAML files, more than the {MAX_CRD_FILES} a release's CRDs fill: point --crds at the release's CRD directory", dir.display())]
    TooMany { dir: std::path::PathBuf, n: usize },
    #[error("{place} (document {document}) line {line}: {message}")]
    Yaml {
        place: String,
        document: usize,
        line: usize,
        message: String,
    },
    #[error("{place}: {message}")]
    Malformed { place: String, message: String },
    #[error("{file} and {other} both declare {name} for the default feature set")]
    Duplicate { file: String, other: String, name: String },
    #[error("{file}: its schema does not compile: {message}")]
    Schema { file: String, message: String },
}

impl CrdSet {
    /// Select, from (file name, parsed document) pairs, the CRDs a default cluster applies. Two
    /// files that both apply to one CRD name is an error naming both.
    pub fn select(docs: Vec<(String, Value)>) -> Result<CrdSet, CrdError> {
        let mut crds: Vec<Crd> = Vec::new();
        for (file, doc) in docs {
            if doc["kind"] != "CustomResourceDefinition" || !applies(&doc) {
                continue;
            }
            let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_string();
            if let Some(other) = crds.iter().find(|c| c.name == name) {
                return Err(CrdError::Duplicate {
                    file,
                    other: other.file.clone(),
                    name,
                });
            }
            let spec = &doc["spec"];
            let mut versions = Vec::new();
            for v in spec["versions"].as_array().into_iter().flatten() {
                if v["served"] == false {
                    continue;
                }
                let schema = v["schema"]["openAPIV3Schema"].clone();
                let validator = schema::validator(&schema).map_err(|e| CrdError::Schema {
                    file: file.clone(),
                    message: e.to_string(),
                })?;
                versions.push(Version {
                    name: v["name"].as_str().unwrap_or_default().to_string(),
                    schema,
                    validator,
                });
            }
            crds.push(Crd {
                file,
                name,
                group: spec["group"].as_str().unwrap_or_default().to_string(),
                kind: spec["names"]["kind"].as_str().unwrap_or_default().to_string(),
                versions,
            });
        }
        Ok(CrdSet { crds })
    }

    /// Every `*.yaml`/`*.yml` of `dir`, in name order, then [`CrdSet::select`].
    pub fn load_dir(dir: &Path) -> Result<CrdSet, CrdError> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(|source| CrdError::Io {
                path: dir.to_path_buf(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        let mut docs = Vec::new();
        if files.len() > MAX_CRD_FILES {
            return Err(CrdError::TooMany {
                dir: dir.to_path_buf(),
                n: files.len(),
            });
        }
        for p in files {
            // Read without blocking on a FIFO, and never more than a CRD can be.
            let text = crate::config::read_capped(&p, MAX_CRD_BYTES).map_err(|e| CrdError::File {
                path: p.clone(),
                why: e.to_string(),
            })?;
            let name = p.file_name().unwrap_or_default().to_string_lossy().to_string();
            for (i, d) in split_documents(&text).into_iter().enumerate() {
                let doc = crate::config::yaml::parse(d)
                    .map_err(|e| CrdError::Yaml {
                        place: name.clone(),
                        document: i + 1,
                        line: e.pos.line,
                        message: e.message,
                    })?
                    .value;
                docs.push((name.clone(), doc));
            }
        }
        Self::select(docs)
    }

    /// The CRD and version that serve `apiVersion` and `kind`.
    pub fn find(&self, api_version: &str, kind: &str) -> Option<(&Crd, &Version)> {
        let (group, version) = api_version.rsplit_once('/')?;
        let crd = self.crds.iter().find(|c| c.group == group && c.kind == kind)?;
        Some((crd, crd.versions.iter().find(|v| v.name == version)?))
    }

    /// Judge one object as a real API server would on create (status included: bootkube patches
    /// it through the status subresource, which prunes and validates against the same schema).
    pub fn check(&self, obj: &Value) -> Report {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default();
        let kind = obj["kind"].as_str().unwrap_or_default();
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or_default();
        let object = object_name(obj);
        let mut report = Report::default();
        if built_in(group) {
            return report;
        }
        let Some((crd, version)) = self.find(api_version, kind) else {
            let known: Vec<String> = self
                .crds
                .iter()
                .filter(|c| c.kind == kind)
                .map(|c| {
                    format!(
                        "{}/{}",
                        c.group,
                        c.versions.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(",")
                    )
                })
                .collect();
            report.problems.push(Problem {
                object,
                path: String::new(),
                message: if known.is_empty() {
                    format!("no CRD of the release serves {api_version} {kind}: the API server refuses it (no matches for kind)")
                } else {
                    format!("{api_version} is not served for {kind}; the release serves {}", known.join("; "))
                },
            });
            return report;
        };
        report.crd_file = Some(crd.file.clone());
        let mut defaulted = obj.clone();
        prune::walk(&version.schema, &mut defaulted, &object, &mut report.problems);
        // Validation sees the object as the server stores it: defaulted, metadata its own.
        let mut body = defaulted.clone();
        if let Some(m) = body.as_object_mut() {
            m.remove("metadata");
        }
        for e in version.validator.iter_errors(&body) {
            report.problems.push(Problem {
                object: object.clone(),
                path: pointer_to_path(e.instance_path().as_str()),
                message: e.to_string(),
            });
        }
        let mut mismatched = Vec::new();
        schema::patterns(&version.schema, &body, "", &mut mismatched);
        for (path, message) in mismatched {
            report.problems.push(Problem {
                object: object.clone(),
                path,
                message,
            });
        }
        // Root rules see the object's name, as the API server's do.
        if let (Some(m), Some(name)) = (body.as_object_mut(), obj["metadata"].get("name")) {
            m.insert("metadata".into(), serde_json::json!({"name": name}));
        }
        cel::walk(&version.schema, &body, "", &object, &mut report);
        report
    }
}

/// Each node of `v` with the schema that governs it, depth first: `f(schema, value, path)` for
/// the node, then its children through `properties`, `additionalProperties` and `items`; with
/// `all_of`, the schemas of `allOf` govern the same value too.
fn visit(s: &Value, v: &Value, path: &str, all_of: bool, f: &mut dyn FnMut(&Value, &Value, &str)) {
    f(s, v, path);
    if all_of {
        for sub in s.get("allOf").and_then(Value::as_array).into_iter().flatten() {
            visit(sub, v, path, all_of, f);
        }
    }
    match v {
        Value::Object(map) => {
            let props = s.get("properties").and_then(Value::as_object);
            for (k, child) in map {
                let here = format!("{path}.{k}");
                if let Some(ps) = props.and_then(|p| p.get(k)) {
                    visit(ps, child, &here, all_of, f);
                } else if let Some(a @ Value::Object(_)) = s.get("additionalProperties") {
                    visit(a, child, &here, all_of, f);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for (i, it) in items.iter().enumerate() {
                    visit(is, it, &format!("{path}[{i}]"), all_of, f);
                }
            }
        }
        _ => {}
    }
}

/// A JSON pointer (`/status/platformStatus`) as a path (`.status.platformStatus`).
fn pointer_to_path(p: &str) -> String {
    p.split('/')
        .skip(1)
        .map(|s| {
            let s = s.replace("~1", "/").replace("~0", "~");
            if s.chars().all(|c| c.is_ascii_digit()) && !s.is_empty() {
                format!("[{s}]")
            } else {
                format!(".{s}")
            }
        })
        .collect()
}

/// The documents of a multi-document YAML text (`---` lines), empty ones dropped.
pub fn split_documents(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end() == "---" {
            out.push(&text[start..at]);
            start = at + line.len();
        }
        at += line.len();
    }
    out.push(&text[start..]);
    out.into_iter()
        .filter(|d| d.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')))
        .collect()
}

#[cfg(test)]
mod tests;
