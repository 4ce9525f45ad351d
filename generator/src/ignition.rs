//! Ignition spec 3.2.0 (what RHCOS 4.18 and the installer use): typed config, data-URL contents,
//! merging per-node additions into an MCO-rendered base, deterministic rendering.

use base64::Engine;
use flate2::{write::GzEncoder, Compression};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

pub const VERSION: &str = "3.2.0";
/// The first spec with `kernelArguments` (Ignition 2.14 and later apply them on first boot).
pub const KARGS_VERSION: &str = "3.3.0";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub ignition: Meta,
    #[serde(default, skip_serializing_if = "Passwd::is_empty")]
    pub passwd: Passwd,
    #[serde(default, skip_serializing_if = "Storage::is_empty")]
    pub storage: Storage,
    #[serde(default, skip_serializing_if = "Systemd::is_empty")]
    pub systemd: Systemd,
    /// Sections hardshift does not touch (kernelArguments, ...), carried from a base as they are.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub version: String,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Passwd {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<User>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl Passwd {
    fn is_empty(&self) -> bool {
        self.users.is_empty() && self.other.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_authorized_keys: Vec<String>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Storage {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directories: Vec<Directory>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<File>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<serde_json::Value>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl Storage {
    fn is_empty(&self) -> bool {
        self.directories.is_empty() && self.files.is_empty() && self.links.is_empty() && self.other.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Owner {
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Directory {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Owner>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Owner>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Contents {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    /// Shared: a node's copy of a base file, or of the agent, is the base's string.
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "splice::source")]
    pub source: Option<Arc<str>>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct File {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<Contents>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Owner>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Owner>,
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Systemd {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<Unit>,
}

impl Systemd {
    fn is_empty(&self) -> bool {
        self.units.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Unit {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropins: Vec<Dropin>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dropin {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
}

/// A file hardshift places on a node, before encoding.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFile {
    pub path: String,
    pub mode: u32,
    /// Shared: the same large file (the agent binary) goes to every node without copies.
    pub contents: Arc<[u8]>,
    /// Already encoded (once for all nodes), for large shared files.
    pub encoded: Option<Arc<Contents>>,
    /// Replaces a base file of the same path. Otherwise the base's file is kept: the
    /// machine-config daemon compares the files of the rendered config byte for byte.
    pub replaces_base: bool,
}

pub const SECRET: u32 = 0o600;
pub const PUBLIC: u32 = 0o644;
pub const SCRIPT: u32 = 0o755;

impl NodeFile {
    pub fn new(path: impl Into<String>, mode: u32, contents: impl Into<Vec<u8>>) -> Self {
        NodeFile {
            path: path.into(),
            mode,
            contents: Arc::from(contents.into()),
            encoded: None,
            replaces_base: false,
        }
    }

    /// This file wins over a base file of the same path (what the machine-config server itself
    /// puts in place of the rendered config's, such as the kubelet's client CA).
    pub fn over_base(mut self) -> Self {
        self.replaces_base = true;
        self
    }

    /// A file encoded once and shared by many nodes.
    pub fn shared(path: impl Into<String>, mode: u32, contents: Arc<[u8]>, encoded: Arc<Contents>) -> Self {
        NodeFile {
            path: path.into(),
            mode,
            contents,
            encoded: Some(encoded),
            replaces_base: false,
        }
    }
}

/// Everything hardshift adds to one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeConfig {
    pub ssh_keys: Vec<String>,
    pub files: Vec<NodeFile>,
    pub directories: Vec<(String, u32)>,
    pub units: Vec<Unit>,
    /// Kernel arguments the node must boot with (`kernelArguments.shouldExist`): Ignition sets
    /// them and reboots before the root is used, on first boot only.
    pub kernel_arguments: Vec<String>,
}

/// Contents as a data URL; gzip-compressed when that saves at least a tenth (and 256 bytes). Files of
/// 2 KiB or less are not tried: a compressor costs more to set up than they could save.
pub fn encode(data: &[u8]) -> Contents {
    let b64 = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
    if data.len() > 2048 {
        // GzEncoder writes mtime 0 and no file name: the same input gives the same bytes.
        let mut gz = GzEncoder::new(Vec::new(), Compression::best());
        if gz.write_all(data).is_ok() {
            if let Ok(z) = gz.finish() {
                if z.len() + 256 < data.len() && z.len() * 10 < data.len() * 9 {
                    return Contents {
                        compression: Some("gzip".into()),
                        source: Some(format!("data:;base64,{}", b64(&z)).into()),
                        ..Default::default()
                    };
                }
            }
        }
    }
    Contents {
        compression: None,
        source: Some(format!("data:;base64,{}", b64(data)).into()),
        ..Default::default()
    }
}

/// The base's inline files re-encoded as `encode` does (gzip and base64 when that saves a tenth):
/// the MCO writes them percent-encoded, and every node's config carries them. Same files on the
/// node; a file with a verification hash or already compressed is left as it is. Returns how
/// many bytes of data URLs that saves.
pub fn compact(cfg: &mut Config) -> usize {
    let mut saved = 0;
    for f in &mut cfg.storage.files {
        let Some(c) = f.contents.as_mut() else { continue };
        let inline = c.source.as_deref().is_some_and(|s| s.starts_with("data:"));
        if !inline || c.compression.as_deref().is_some_and(|z| !z.is_empty()) || !c.other.is_empty() {
            continue;
        }
        let Some(data) = decode(c) else { continue };
        let new = encode(&data);
        let (old_len, new_len) = (c.source.as_deref().map_or(0, str::len), new.source.as_deref().map_or(0, str::len));
        if new_len < old_len {
            saved += old_len - new_len;
            c.compression = new.compression;
            c.source = new.source;
        }
    }
    saved
}

/// Decode a data URL (and gzip), for tests and for reading a base config.
pub fn decode(c: &Contents) -> Option<Vec<u8>> {
    let src = c.source.as_deref()?;
    let rest = src.strip_prefix("data:")?;
    let (meta, payload) = rest.split_once(',')?;
    let raw = if meta.ends_with(";base64") {
        base64::engine::general_purpose::STANDARD.decode(payload).ok()?
    } else {
        percent_decode(payload)
    };
    if c.compression.as_deref() == Some("gzip") {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&raw[..]), &mut out).ok()?;
        Some(out)
    } else {
        Some(raw)
    }
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// What a merge did, for the per-node report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    pub base_files: usize,
    pub base_units: usize,
    /// Base files replaced by a per-node file of the same path.
    pub replaced_files: Vec<String>,
    /// Per-node files left out because the base has that path (the base's bytes stay).
    pub kept_files: Vec<String>,
    /// Base units a per-node unit merged into.
    pub merged_units: Vec<String>,
}

/// Build a node's config: the base (if any) with `node` merged in. A base file is kept over a
/// per-node file of the same path (the machine-config daemon compares them with the rendered
/// config) unless that file is marked `over_base`; units merge by name (contents and enablement
/// from the node, drop-ins by name).
pub fn build(node: &NodeConfig, base: Option<&Config>) -> (Config, MergeReport) {
    build_with(node, base, &encode)
}

/// `build` with a chosen encoder (a cache, when many nodes share the same files).
pub fn build_with(node: &NodeConfig, base: Option<&Config>, encode: &(dyn Fn(&[u8]) -> Contents + Sync)) -> (Config, MergeReport) {
    let mut cfg = base.cloned().unwrap_or_default();
    let mut report = MergeReport {
        base_files: cfg.storage.files.len(),
        base_units: cfg.systemd.units.len(),
        ..Default::default()
    };
    // Keep a newer base version: its sections are what the node's Ignition will read.
    if cfg.ignition.version.is_empty() || version_lt(&cfg.ignition.version, VERSION) {
        cfg.ignition.version = VERSION.into();
    }
    if !node.kernel_arguments.is_empty() {
        if version_lt(&cfg.ignition.version, KARGS_VERSION) {
            cfg.ignition.version = KARGS_VERSION.into();
        }
        let kargs = cfg.other.entry("kernelArguments".into()).or_insert_with(|| serde_json::json!({}));
        if !kargs.is_object() {
            *kargs = serde_json::json!({});
        }
        let should = kargs
            .as_object_mut()
            .expect("an object")
            .entry("shouldExist")
            .or_insert_with(|| serde_json::json!([]));
        if !should.is_array() {
            *should = serde_json::json!([]);
        }
        let list = should.as_array_mut().expect("an array");
        for k in &node.kernel_arguments {
            if !list.iter().any(|v| v.as_str() == Some(k)) {
                list.push(serde_json::json!(k));
            }
        }
    }

    // The core user with the SSH keys (added to any the base has).
    if !node.ssh_keys.is_empty() {
        let core = match cfg.passwd.users.iter_mut().position(|u| u.name == "core") {
            Some(i) => &mut cfg.passwd.users[i],
            None => {
                cfg.passwd.users.push(User {
                    name: "core".into(),
                    ..Default::default()
                });
                cfg.passwd.users.last_mut().expect("just pushed")
            }
        };
        for k in &node.ssh_keys {
            if !core.ssh_authorized_keys.contains(k) {
                core.ssh_authorized_keys.push(k.clone());
            }
        }
    }

    let mut files: BTreeMap<String, File> = cfg.storage.files.drain(..).map(|f| (f.path.clone(), f)).collect();
    for f in &node.files {
        if !f.replaces_base && files.contains_key(&f.path) {
            report.kept_files.push(f.path.clone());
            continue;
        }
        let new = File {
            path: f.path.clone(),
            contents: Some(match &f.encoded {
                Some(e) => Contents::clone(e),
                None => encode(&f.contents),
            }),
            mode: Some(f.mode),
            overwrite: Some(true),
            user: Some(Owner { name: "root".into() }),
            group: Some(Owner { name: "root".into() }),
            other: BTreeMap::new(),
        };
        if files.insert(f.path.clone(), new).is_some() {
            report.replaced_files.push(f.path.clone());
        }
    }
    cfg.storage.files = files.into_values().collect();

    let mut dirs: BTreeMap<String, Directory> = cfg.storage.directories.drain(..).map(|d| (d.path.clone(), d)).collect();
    for (path, mode) in &node.directories {
        dirs.insert(
            path.clone(),
            Directory {
                path: path.clone(),
                mode: Some(*mode),
                overwrite: None,
                user: None,
                group: None,
            },
        );
    }
    cfg.storage.directories = dirs.into_values().collect();

    let mut units: BTreeMap<String, Unit> = cfg.systemd.units.drain(..).map(|u| (u.name.clone(), u)).collect();
    let base_units: Vec<String> = units.keys().cloned().collect();
    for u in &node.units {
        match units.get_mut(&u.name) {
            Some(existing) => {
                if base_units.contains(&u.name) && !report.merged_units.contains(&u.name) {
                    report.merged_units.push(u.name.clone());
                }
                if u.contents.is_some() {
                    existing.contents = u.contents.clone();
                }
                if u.enabled.is_some() {
                    existing.enabled = u.enabled;
                }
                if u.mask.is_some() {
                    existing.mask = u.mask;
                }
                for d in &u.dropins {
                    existing.dropins.retain(|x| x.name != d.name);
                    existing.dropins.push(d.clone());
                }
                existing.dropins.sort_by(|a, b| a.name.cmp(&b.name));
            }
            None => {
                units.insert(u.name.clone(), u.clone());
            }
        }
    }
    cfg.systemd.units = units.into_values().collect();
    report.replaced_files.sort();
    report.kept_files.sort();
    report.merged_units.sort();
    (cfg, report)
}

fn version_lt(a: &str, b: &str) -> bool {
    let parse = |v: &str| v.split('.').map(|p| p.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>();
    parse(a) < parse(b)
}

/// The MachineConfig object of a rendered base, when the base is one (JSON or YAML); None for a
/// bare Ignition config. The machine-config server serves files made from it.
pub fn machine_config_of(text: &str) -> Option<serde_json::Value> {
    let v = crate::config::yaml::parse(text).ok()?.value;
    (v.get("kind").and_then(|k| k.as_str()) == Some("MachineConfig")).then_some(v)
}

/// Read an MCO-rendered base: an Ignition config, or a MachineConfig whose `spec.config`
/// (or `spec.config.raw`) holds one. JSON or YAML.
pub fn parse_base(text: &str) -> Result<Config, String> {
    let doc = crate::config::yaml::parse(text).map_err(|e| format!("line {}: {}", e.pos.line, e.message))?;
    let mut v = doc.value;
    if v.get("kind").and_then(|k| k.as_str()) == Some("MachineConfig") {
        let cfg = v["spec"]["config"].take();
        v = match cfg.get("raw") {
            Some(serde_json::Value::String(s)) => serde_json::from_str(s).map_err(|e| format!("spec.config.raw: {e}"))?,
            Some(raw) => raw.clone(),
            None => cfg,
        };
    }
    let version = v["ignition"]["version"].as_str().unwrap_or("").to_string();
    if !version.starts_with("3.") {
        return Err(format!(
            "ignition.version is {version:?}; an Ignition 3.x config (or a MachineConfig holding one) is expected"
        ));
    }
    if v["ignition"]
        .get("config")
        .is_some_and(|c| c.get("merge").is_some() || c.get("replace").is_some())
    {
        return Err("the base is a pointer config (ignition.config.merge/replace); give the rendered config itself".into());
    }
    serde_json::from_value(v).map_err(|e| format!("not an Ignition config: {e}"))
}

/// The config as bytes: compact JSON, fields and lists in a fixed order, newline-terminated.
pub fn render(cfg: &Config) -> Vec<u8> {
    let mut out = serde_json::to_vec(cfg).expect("config serializes");
    out.push(b'\n');
    out
}

/// The JSON text of large data URLs, made once and shared by every config that holds the same
/// string (the MCO base's files, the agent): keyed by the string's address, which the entry keeps
/// alive so no other string can take it.
#[derive(Default)]
pub struct Pieces(std::sync::Mutex<std::collections::HashMap<usize, Piece>>);

/// A string, and its JSON text.
type Piece = (Arc<str>, Arc<[u8]>);

impl Pieces {
    fn json_of(&self, s: &Arc<str>) -> Arc<[u8]> {
        let key = Arc::as_ptr(s) as *const u8 as usize;
        if let Some((_, j)) = self.0.lock().expect("pieces").get(&key) {
            return j.clone();
        }
        let j: Arc<[u8]> = Arc::from(serde_json::to_vec(&**s).expect("a string serializes"));
        self.0.lock().expect("pieces").insert(key, (s.clone(), j.clone()));
        j
    }
}

/// `render`'s bytes exactly, with every data URL of `splice::MIN` bytes or more as a shared piece:
/// a thousand configs merged into one base hold the base's files once.
pub fn render_body(cfg: &Config, pieces: &Pieces) -> crate::body::Body {
    let (mut out, taken) = splice::collecting(|| serde_json::to_vec(cfg).expect("config serializes"));
    out.push(b'\n');
    if taken.is_empty() {
        return crate::body::Body::from(out);
    }
    let marker = serde_json::to_vec(splice::MARKER).expect("a string serializes");
    let mut cuts = Vec::with_capacity(taken.len());
    let mut at = 0;
    while let Some(i) = find(&out[at..], &marker) {
        cuts.push(at + i);
        at += i + marker.len();
    }
    // A user's string that happens to hold the marker: no pieces, the plain bytes.
    if cuts.len() != taken.len() {
        return crate::body::Body::from(render(cfg));
    }
    let mut parts: Vec<Arc<[u8]>> = Vec::with_capacity(2 * cuts.len() + 1);
    let mut last = 0;
    for (cut, s) in cuts.iter().zip(&taken) {
        parts.push(Arc::from(&out[last..*cut]));
        parts.push(pieces.json_of(s));
        last = cut + marker.len();
    }
    parts.push(Arc::from(&out[last..]));
    crate::body::Body::from_pieces(parts)
}

/// Where `needle` starts in `hay`. The marker's rare byte (the backslash of `\\u0000`) leads the
/// scan, not its quote, which JSON is full of.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let lead = needle.iter().position(|b| *b == b'\\').unwrap_or(0);
    let (first, needle_at) = (needle[lead], lead);
    let mut from = 0;
    while let Some(i) = hay[from..].iter().position(|b| *b == first) {
        let at = from + i;
        if at >= needle_at && hay[at - needle_at..].starts_with(needle) {
            return Some(at - needle_at);
        }
        from = at + 1;
    }
    None
}

/// While `render_body` serializes, each large `source` is written as a marker and its string set
/// aside, in order; any other serialization writes the string itself.
mod splice {
    use serde::Serializer;
    use std::cell::RefCell;
    use std::sync::Arc;

    pub const MIN: usize = 16 * 1024;
    pub const MARKER: &str = "\u{0}hardshift:shared-piece\u{0}";

    thread_local! {
        static TAKEN: RefCell<Option<Vec<Arc<str>>>> = const { RefCell::new(None) };
    }

    pub fn collecting<T>(f: impl FnOnce() -> T) -> (T, Vec<Arc<str>>) {
        TAKEN.with(|t| *t.borrow_mut() = Some(Vec::new()));
        let out = f();
        (out, TAKEN.with(|t| t.borrow_mut().take()).unwrap_or_default())
    }

    pub fn source<S: Serializer>(v: &Option<Arc<str>>, ser: S) -> Result<S::Ok, S::Error> {
        let Some(s) = v else { return ser.serialize_none() };
        let taken = s.len() >= MIN && TAKEN.with(|t| t.borrow_mut().as_mut().map(|l| l.push(s.clone())).is_some());
        ser.serialize_str(if taken { MARKER } else { s })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, source: &str) -> File {
        File {
            path: path.into(),
            contents: Some(Contents {
                source: Some(source.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn compact_reencodes_inline_files_and_leaves_the_rest() {
        let text = "a line of a script that the MCO writes percent-encoded\n".repeat(100);
        let pct: String = text.bytes().map(|b| format!("%{b:02X}")).collect();
        let mut verified = file("/etc/verified", &format!("data:,{pct}"));
        verified
            .contents
            .as_mut()
            .unwrap()
            .other
            .insert("verification".into(), serde_json::json!({"hash": "sha512-00"}));
        let mut cfg = Config::default();
        cfg.storage.files = vec![
            file("/etc/big", &format!("data:,{pct}")),
            file("/etc/small", "data:,x"),
            file("/etc/remote", "http://192.168.126.1:8080/x"),
            verified.clone(),
        ];
        let before = cfg.clone();
        let saved = compact(&mut cfg);
        let big = cfg.storage.files[0].contents.as_ref().unwrap();
        assert_eq!(big.compression.as_deref(), Some("gzip"));
        assert_eq!(decode(big).unwrap(), text.as_bytes(), "same file on the node");
        assert!(saved > pct.len() / 2, "{saved}");
        assert_eq!(
            cfg.storage.files[1..],
            before.storage.files[1..],
            "small, remote and verified files unchanged"
        );
        let again = {
            let mut c = before.clone();
            compact(&mut c);
            c
        };
        assert_eq!(render(&again), render(&cfg), "deterministic");
    }

    #[test]
    fn render_body_is_render_with_shared_pieces() {
        let big: String = format!("data:;base64,{}", "QUJD".repeat(splice::MIN));
        let mut cfg = Config::default();
        cfg.ignition.version = VERSION.into();
        cfg.storage.files = vec![file("/etc/a", &big), file("/etc/b", "data:,small"), file("/etc/c", "")];
        // The same string in two files, as a base and a node's copy of it are.
        cfg.storage.files[2].contents = cfg.storage.files[0].contents.clone();
        let pieces = Pieces::default();
        let body = render_body(&cfg, &pieces);
        assert_eq!(body.to_vec(), render(&cfg));
        let twice = render_body(&cfg.clone(), &pieces);
        // Both large URLs of both configs are one allocation.
        let large: Vec<&Arc<[u8]>> = body
            .pieces()
            .iter()
            .chain(twice.pieces())
            .filter(|p| p.len() > splice::MIN)
            .collect();
        assert_eq!(large.len(), 4);
        assert!(large.windows(2).all(|w| Arc::ptr_eq(w[0], w[1])));
        // A user's string that holds the marker is written as it is.
        let mut odd = cfg.clone();
        odd.storage.files.push(file("/etc/d", splice::MARKER));
        assert_eq!(render_body(&odd, &pieces).to_vec(), render(&odd));
        assert!(String::from_utf8(render(&odd)).unwrap().contains("hardshift:shared-piece"));
    }

    #[test]
    fn encode_roundtrips_and_compresses_when_it_helps() {
        let small = b"hello";
        let c = encode(small);
        assert_eq!(c.compression, None);
        assert_eq!(decode(&c).unwrap(), small);
        let big = "a line that repeats\n".repeat(200);
        let c = encode(big.as_bytes());
        assert_eq!(c.compression.as_deref(), Some("gzip"));
        assert_eq!(decode(&c).unwrap(), big.as_bytes());
        assert_eq!(encode(big.as_bytes()), c, "deterministic");
    }

    #[test]
    fn merge_keeps_base_files_unless_over_base_and_merges_units_by_name() {
        let base = parse_base(
            r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,base"},"mode":420},{"path":"/etc/b","contents":{"source":"data:,b"}}]},
               "systemd":{"units":[{"name":"kubelet.service","enabled":true,"contents":"base","dropins":[{"name":"10-x.conf","contents":"x"}]}]}}"#,
        )
        .unwrap();
        let node = NodeConfig {
            ssh_keys: vec!["ssh-ed25519 AAAA k".into()],
            files: vec![
                NodeFile::new("/etc/a", PUBLIC, "node"),
                NodeFile::new("/etc/b", PUBLIC, "served").over_base(),
            ],
            directories: vec![],
            units: vec![Unit {
                name: "kubelet.service".into(),
                dropins: vec![Dropin {
                    name: "20-y.conf".into(),
                    contents: Some("y".into()),
                }],
                ..Default::default()
            }],
            kernel_arguments: vec![],
        };
        let (cfg, rep) = build(&node, Some(&base));
        assert_eq!(rep.replaced_files, vec!["/etc/b"]);
        assert_eq!(rep.kept_files, vec!["/etc/a"]);
        assert_eq!(rep.merged_units, vec!["kubelet.service"]);
        assert_eq!(cfg.storage.files.len(), 2);
        assert_eq!(decode(cfg.storage.files[0].contents.as_ref().unwrap()).unwrap(), b"base");
        assert_eq!(decode(cfg.storage.files[1].contents.as_ref().unwrap()).unwrap(), b"served");
        let k = &cfg.systemd.units[0];
        assert_eq!(k.contents.as_deref(), Some("base"));
        assert_eq!(
            k.dropins.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
            vec!["10-x.conf", "20-y.conf"]
        );
        assert_eq!(cfg.passwd.users[0].ssh_authorized_keys, vec!["ssh-ed25519 AAAA k"]);
    }

    #[test]
    fn machineconfig_raw_is_unwrapped_and_pointer_configs_refused() {
        let mc = r#"{"kind":"MachineConfig","spec":{"config":{"raw":"{\"ignition\":{\"version\":\"3.2.0\"}}"}}}"#;
        assert_eq!(parse_base(mc).unwrap().ignition.version, "3.2.0");
        let ptr = r#"{"ignition":{"version":"3.2.0","config":{"merge":[{"source":"https://api-int:22623/config/master"}]}}}"#;
        assert!(parse_base(ptr).unwrap_err().contains("pointer"));
    }

    #[test]
    fn kernel_arguments_raise_the_version_and_join_the_bases() {
        let node = NodeConfig {
            kernel_arguments: vec!["fips=1".into()],
            ..Default::default()
        };
        let (cfg, _) = build(&node, None);
        assert_eq!(cfg.ignition.version, KARGS_VERSION);
        assert_eq!(cfg.other["kernelArguments"], serde_json::json!({"shouldExist": ["fips=1"]}));
        let base: Config = serde_json::from_str(
            r#"{"ignition":{"version":"3.4.0"},"kernelArguments":{"shouldExist":["a=b","fips=1"],"shouldNotExist":["c"]}}"#,
        )
        .unwrap();
        let (cfg, _) = build(&node, Some(&base));
        assert_eq!(cfg.ignition.version, "3.4.0", "a newer base keeps its version");
        assert_eq!(
            cfg.other["kernelArguments"],
            serde_json::json!({"shouldExist": ["a=b", "fips=1"], "shouldNotExist": ["c"]})
        );
        let (cfg, _) = build(&NodeConfig::default(), None);
        assert_eq!(cfg.ignition.version, VERSION);
        assert!(!cfg.other.contains_key("kernelArguments"));
    }
}
