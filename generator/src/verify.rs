//! `hardshift verify`: checks a written bundle against the cluster it was made for.
//! Sums, chains, key/cert pairs, the SANs every node needs, expiry, key file modes, kubeconfigs.

use crate::bundle::{self, Bundle};
use crate::cluster::Cluster;
use crate::config::yaml;
use crate::kubeconfig;
use crate::pki::{inspect, plan, CertSpec, Kind};
use base64::Engine;
use serde::Serialize;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

const WARN_BEFORE_DAYS: i64 = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub subject: String,
    pub issuer: String,
    pub expires: String,
    pub status: Status,
    pub detail: String,
}

pub fn verify(c: &Cluster, b: &Bundle, now: OffsetDateTime) -> Vec<Check> {
    let mut out = vec![sums(b)];
    let specs = plan(c);
    for s in &specs {
        out.push(cert(s, &specs, b, now));
    }
    for k in kubeconfig::plan(c) {
        out.push(kubeconfig_check(&k, b));
    }
    out
}

fn check(name: &str, status: Status, detail: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        subject: String::new(),
        issuer: String::new(),
        expires: String::new(),
        status,
        detail: detail.into(),
    }
}

fn text(b: &Bundle, path: &str) -> Option<String> {
    b.files.get(path).and_then(|f| String::from_utf8(f.contents.to_vec()).ok())
}

fn sums(b: &Bundle) -> Check {
    let Some(listed) = text(b, bundle::SUMS) else {
        return check(bundle::SUMS, Status::Fail, "missing");
    };
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for line in listed.lines() {
        let Some((hash, path)) = sum_line(line) else {
            problems.push(format!("malformed line {line:?}"));
            continue;
        };
        seen.insert(path.to_string());
        match b.files.get(path) {
            None => problems.push(format!("{path} is missing")),
            Some(f) if f.contents.sha256_hex() != hash => problems.push(format!("{path} was modified")),
            _ => {}
        }
    }
    for p in b.files.keys().filter(|p| p.as_str() != bundle::SUMS && !seen.contains(*p)) {
        problems.push(format!("{p} is not listed"));
    }
    match problems.is_empty() {
        true => check(bundle::SUMS, Status::Ok, format!("{} files match", seen.len())),
        false => check(bundle::SUMS, Status::Fail, problems.join("; ")),
    }
}

/// A line as `sha256sum -c` reads it: 64 hex digits, two spaces (or a space and `*`), a path.
fn sum_line(line: &str) -> Option<(&str, &str)> {
    let hash = line.get(..64)?;
    let path = line.get(64..)?.strip_prefix("  ").or_else(|| line.get(64..)?.strip_prefix(" *"))?;
    (hash.bytes().all(|b| b.is_ascii_hexdigit()) && !path.is_empty()).then_some((hash, path))
}

/// Larger than any bundle's SHA256SUMS (a line a file): not read.
const MAX_SUMS: u64 = 64 << 20;

/// DIR/SHA256SUMS, the file a user runs `sha256sum -c` on (not the generation's copy `sums`
/// reads): a regular file (its type checked before it is opened, and opened without blocking, so
/// a FIFO never holds verify), every line `<64 hex>  <path>`, and the bundle's own.
pub fn sums_file(dir: &Path, b: &Bundle) -> Check {
    let path = dir.join(bundle::SUMS);
    let name = "sha256sum -c";
    let fail = |d: String| check(name, Status::Fail, format!("{}: {d}", path.display()));
    let again = "remove it and run `hardshift create` again, which links the bundle's own there";
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) => return fail(format!("{e}: {again}")),
    };
    if !meta.is_file() {
        return fail(format!(
            "{}, not a file: sha256sum -c cannot check the bundle by it; {again}",
            kind(&meta)
        ));
    }
    let bytes = match read_regular(&path, MAX_SUMS) {
        Ok(b) => b,
        Err(e) => return fail(format!("{e}; {again}")),
    };
    let text = String::from_utf8_lossy(&bytes);
    if let Some(n) = text.lines().position(|l| sum_line(l).is_none()) {
        return fail(format!(
            "line {} is not `<64 hex digits>  <path>` (what sha256sum -c reads); {again}",
            n + 1
        ));
    }
    match b.files.get(bundle::SUMS) {
        Some(own) if own.contents.bytes()[..] == bytes[..] => check(
            name,
            Status::Ok,
            format!("{}: the bundle's own, {} files", path.display(), text.lines().count()),
        ),
        _ => fail(format!(
            "differs from the bundle's own ({}): sha256sum -c would check other sums than the bundle's; {again}",
            crate::fsio::current(dir)
                .map(|c| c.join(bundle::SUMS).display().to_string())
                .unwrap_or_default()
        )),
    }
}

/// What a file that is not a regular one is.
fn kind(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    match () {
        _ if t.is_dir() => "a directory",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_socket() => "a socket",
        _ if t.is_char_device() => "a character device",
        _ if t.is_block_device() => "a block device",
        _ => "not a regular file",
    }
}

/// A regular file's bytes, opened without blocking (a FIFO put there since it was looked at is
/// refused, not waited on), at most `max`.
fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|e| e.to_string())?;
    let m = f.metadata().map_err(|e| e.to_string())?;
    if !m.is_file() {
        return Err(format!("{}, not a file", kind(&m)));
    }
    if m.len() > max {
        return Err(format!("{} bytes, more than a bundle's sums ({max})", m.len()));
    }
    let mut bytes = Vec::new();
    f.take(max).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes)
}

/// DIR/render against the SHA-256 `render` recorded of each of its files (renders.json): a file
/// changed, added or removed since is named. None when there are no renders.
pub fn render_outputs(dir: &Path) -> Option<Check> {
    use crate::pipeline::{outputs, render, rendered};
    let root = dir.join(crate::layout::RENDER);
    std::fs::symlink_metadata(&root).ok()?;
    let name = crate::layout::RENDER;
    let again = format!("run `hardshift render --dir {}` again", dir.display());
    let files = match outputs::read_all(&root) {
        Ok(f) => f,
        Err(e) => return Some(check(name, Status::Fail, format!("{}; {again}", e.at(&root)))),
    };
    let Some(json) = files.get(render::RECORD) else {
        return Some(check(
            name,
            Status::Warn,
            format!(
                "{}: no renders.json, so not made by `hardshift render`: not checked ({again})",
                root.display()
            ),
        ));
    };
    let record = match rendered::parse_record(json) {
        Ok(r) => r,
        Err(e) => {
            return Some(check(
                name,
                Status::Fail,
                format!("{}: {e}; {again}", root.join(render::RECORD).display()),
            ))
        }
    };
    let Some(recorded) = record.outputs else {
        return Some(check(
            name,
            Status::Warn,
            format!(
                "{}: the renders' outputs are unrecorded (a renders.json from an older hardshift): not checked; {again} to record them",
                root.display()
            ),
        ));
    };
    let mut problems = Vec::new();
    for (p, bytes) in files.iter().filter(|(p, _)| p.as_str() != render::RECORD) {
        match recorded.get(p) {
            None => problems.push(format!("{p} (added)")),
            Some(h) if *h != bundle::sha256_hex(bytes) => problems.push(format!("{p} (changed)")),
            _ => {}
        }
    }
    problems.extend(
        recorded
            .keys()
            .filter(|p| !files.contains_key(*p))
            .map(|p| format!("{p} (removed)")),
    );
    Some(match problems.len() {
        0 => check(
            name,
            Status::Ok,
            format!("{} files as the renders made them (renders.json)", recorded.len()),
        ),
        n => check(
            name,
            Status::Fail,
            format!(
                "{}: not as the renders made them (renders.json): {}{}; {again}",
                root.display(),
                problems[..n.min(10)].join(", "),
                if n > 10 { format!(" and {} more", n - 10) } else { String::new() }
            ),
        ),
    })
}

/// What an embedded agent is compared with.
pub struct AgentRef {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    /// Given as `--agent-binary`, else found beside hardshift.
    pub given: bool,
}

/// The agent each node's config embeds (grouped: the configs that embed the same), compared with
/// `reference`; `beside` is where hardshift looked for one when none was given or found.
pub fn agents(b: &Bundle, reference: Option<&AgentRef>, beside: &Path) -> Vec<Check> {
    use sha2::{Digest, Sha512};
    let mut by: std::collections::BTreeMap<(String, String), Vec<&str>> = Default::default();
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
        // (what it is, how to hash the reference to compare)
        let id = match (
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
        };
        by.entry(id).or_default().push(path);
    }
    if by.is_empty() {
        return vec![check("agent", Status::Ok, "no node config embeds the agent")];
    }
    let digest = |how: &str, bytes: &[u8]| match how {
        "sha256" => Some(bundle::sha256_hex(bytes)),
        h if h.starts_with("sha512-") => Some(format!("sha512-{:x}", Sha512::digest(bytes))),
        _ => None,
    };
    by.into_iter()
        .map(|((what, how), configs)| {
            let list = format!(
                "{}{}",
                configs[..configs.len().min(6)].join(", "),
                if configs.len() > 6 { format!(" and {} more", configs.len() - 6) } else { String::new() }
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
            let theirs = digest(&how, &r.bytes);
            let same = theirs.as_ref().is_some_and(|d| what.contains(d.as_str()));
            if same {
                check("agent", Status::Ok, format!("{list} embed {what}: {said}{close}"))
            } else {
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
        })
        .collect()
}

fn date(ts: i64) -> String {
    OffsetDateTime::from_unix_timestamp(ts)
        .map(|t| t.date().to_string())
        .unwrap_or_default()
}

fn cert(s: &CertSpec, specs: &[CertSpec], b: &Bundle, now: OffsetDateTime) -> Check {
    let id = s.id();
    let key_path = format!("{id}.key");
    let Some(key) = text(b, &key_path) else {
        return check(&id, Status::Fail, format!("{key_path} is missing"));
    };
    let mut problems: Vec<String> = Vec::new();
    if b.files[&key_path].mode & 0o077 != 0 {
        problems.push(format!(
            "{key_path} has mode {:o}; private keys must be 0600",
            b.files[&key_path].mode
        ));
    }
    let key_spki = match inspect::spki_of_key(&key) {
        Ok(k) => k,
        Err(e) => return check(&id, Status::Fail, format!("{key_path}: {e}")),
    };
    if s.kind == Kind::KeyOnly {
        let want = crate::pki::keys::public_pem(&key).unwrap_or_default();
        let pub_ok = text(b, &format!("{id}.pub")).is_some_and(|p| p.trim() == want.trim());
        if !pub_ok {
            problems.push(format!("{id}.pub is missing or is not the public half of {key_path}"));
        }
        return finish(check(&id, Status::Ok, "key pair"), problems);
    }
    let Some(pem) = text(b, &format!("{id}.crt")) else {
        return check(&id, Status::Fail, format!("{id}.crt is missing"));
    };
    let f = match inspect::facts(&pem) {
        Ok(f) => f,
        Err(e) => return check(&id, Status::Fail, e),
    };
    let mut c = check(&id, Status::Ok, "");
    c.subject = f.cn.clone();
    c.issuer = s.issuer.clone().unwrap_or_else(|| "self".into());
    c.expires = date(f.not_after);
    if f.spki != key_spki {
        problems.push("the key does not belong to the certificate".into());
    }
    if let Some(m) = inspect::mismatch(s, &f) {
        problems.push(m);
    }
    // Walk the chain to the self-signed root, verifying every signature.
    let mut cur = (s.clone(), pem.to_string());
    for _ in 0..8 {
        let Some(issuer) = cur.0.issuer_id() else {
            if let Err(e) = inspect::signed_by(&cur.1, &cur.1) {
                problems.push(format!("root {} is not self-signed: {e}", cur.0.id()));
            }
            break;
        };
        let Some(ipem) = text(b, &format!("{issuer}.crt")) else {
            problems.push(format!("{issuer}.crt is missing"));
            break;
        };
        if let Err(e) = inspect::signed_by(&cur.1, &ipem) {
            problems.push(format!("{} → {issuer}: {e}", cur.0.id()));
            break;
        }
        match specs.iter().find(|x| x.id() == issuer) {
            Some(next) => cur = (next.clone(), ipem.to_string()),
            None => break,
        }
    }
    let t = now.unix_timestamp();
    if f.not_before > t {
        problems.push(format!("not valid before {} (is this machine's clock right?)", date(f.not_before)));
    }
    if f.not_after <= t {
        problems.push(format!("expired on {}", date(f.not_after)));
    } else if problems.is_empty() && f.not_after - t < WARN_BEFORE_DAYS * 86400 {
        c.status = Status::Warn;
        c.detail = format!("expires in {} days; re-run `hardshift create` to renew", (f.not_after - t) / 86400);
        return c;
    }
    if problems.is_empty() {
        let sans = f.dns.len() + f.ips.len();
        c.detail = format!(
            "{}{}",
            inspect::usage_words(f.server_auth, f.client_auth).replace("none", "CA"),
            if sans > 0 { format!(", {sans} SANs") } else { String::new() }
        );
    }
    finish(c, problems)
}

fn finish(mut c: Check, problems: Vec<String>) -> Check {
    if !problems.is_empty() {
        c.status = Status::Fail;
        c.detail = problems.join("; ");
    }
    c
}

fn kubeconfig_check(k: &kubeconfig::Kubeconfig, b: &Bundle) -> Check {
    let fail = |d: String| check(&k.path, Status::Fail, d);
    let Some(t) = text(b, &k.path) else { return fail("missing".into()) };
    let doc = match yaml::parse(&t) {
        Ok(d) => d.value,
        Err(e) => return fail(format!("not YAML: {}", e.message)),
    };
    let dec = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
            .and_then(|b| String::from_utf8(b).ok())
    };
    let server = doc["clusters"][0]["cluster"]["server"].as_str().unwrap_or_default();
    let ca = dec(&doc["clusters"][0]["cluster"]["certificate-authority-data"]);
    let crt = dec(&doc["users"][0]["user"]["client-certificate-data"]);
    let key = dec(&doc["users"][0]["user"]["client-key-data"]);
    let (Some(ca), Some(crt), Some(key)) = (ca, crt, key) else {
        return fail("certificate-authority-data, client-certificate-data or client-key-data is missing".into());
    };
    if server != k.server {
        return fail(format!("server is {server:?}, should be {:?}", k.server));
    }
    if inspect::spki_of_key(&key).ok() != inspect::facts(&crt).ok().map(|f| f.spki) {
        return fail("client key does not belong to the client certificate".into());
    }
    // The first CA in the data must have signed the client certificate.
    let first_ca = ca.split_inclusive("-----END CERTIFICATE-----\n").next().unwrap_or("");
    if let Err(e) = inspect::signed_by(&crt, first_ca) {
        return fail(format!("client certificate does not verify against the embedded CA: {e}"));
    }
    let mut c = check(&k.path, Status::Ok, format!("server {server}"));
    c.subject = inspect::facts(&crt).map(|f| f.cn).unwrap_or_default();
    c
}

/// The live bundle against a fresh build from the same inputs and the live keys: same inputs
/// give the same bytes, so any difference is an edit (or a change of inputs since `create`).
/// Unlike SHA256SUMS, which lives beside the files it lists, this cannot be rewritten to match.
pub fn regeneration(fresh: &Bundle, live: &Bundle) -> Vec<Check> {
    let mut out = Vec::new();
    let keys: std::collections::BTreeSet<&String> = fresh.files.keys().chain(live.files.keys()).collect();
    let mut same = 0;
    for path in keys {
        let problem = match (fresh.files.get(path), live.files.get(path)) {
            (Some(_), None) => Some("missing: a fresh build from the inputs has it".to_string()),
            (None, Some(_)) => Some("not part of a fresh build from the inputs: added by hand?".to_string()),
            (Some(f), Some(l)) if f.contents != l.contents => Some(describe(path, &f.contents.bytes(), &l.contents.bytes(), f.mode)),
            (Some(f), Some(l)) if f.mode != l.mode => Some(format!("mode {:o}, a fresh build has {:o}", l.mode, f.mode)),
            _ => None,
        };
        match problem {
            // SHA256SUMS differs whenever anything else does; name it only when it alone does.
            Some(_) if path == bundle::SUMS => {}
            Some(p) => out.push(check(path, Status::Fail, p)),
            None => same += 1,
        }
    }
    if out.is_empty() && fresh.files.get(bundle::SUMS).map(|f| &f.contents) != live.files.get(bundle::SUMS).map(|f| &f.contents) {
        out.push(check(bundle::SUMS, Status::Fail, "differs from a fresh build's"));
    }
    if out.is_empty() {
        out.push(check(
            "regeneration",
            Status::Ok,
            format!("{same} files identical to a fresh build from the inputs"),
        ));
    }
    out
}

/// What differs in one file, without printing a secret: JSON paths for JSON (Ignition configs,
/// cluster.json), the first differing line for other public text, nothing more for secrets.
fn describe(path: &str, fresh: &[u8], live: &[u8], mode: u32) -> String {
    if let (Ok(f), Ok(l)) = (
        serde_json::from_slice::<serde_json::Value>(fresh),
        serde_json::from_slice::<serde_json::Value>(live),
    ) {
        let mut diffs = Vec::new();
        json_diff(&f, &l, "", &mut diffs);
        let n = diffs.len();
        diffs.truncate(5);
        let more = if n > 5 { format!(" and {} more", n - 5) } else { String::new() };
        return format!("differs from a fresh build at {}{more}", diffs.join(", "));
    }
    if mode & 0o077 == 0 || path.ends_with(".key") {
        return "differs from a fresh build (a secret: contents not shown)".into();
    }
    let (f, l) = (String::from_utf8_lossy(fresh), String::from_utf8_lossy(live));
    let line = f
        .lines()
        .zip(l.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| f.lines().count().min(l.lines().count()));
    format!("differs from a fresh build from line {}", line + 1)
}

/// JSON paths where `live` differs from `fresh`. Array items with a `path` or `name` (Ignition
/// files, units, users) are matched by it, so an edit names the file and not an index.
fn json_diff(fresh: &serde_json::Value, live: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    use serde_json::Value;
    let id = |v: &Value| {
        ["path", "name"]
            .iter()
            .find_map(|k| v.get(*k).and_then(Value::as_str).map(str::to_string))
    };
    match (fresh, live) {
        (Value::Object(f), Value::Object(l)) => {
            for (k, fv) in f {
                let p = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                match l.get(k) {
                    Some(lv) => json_diff(fv, lv, &p, out),
                    None => out.push(format!("{p} (removed)")),
                }
            }
            for k in l.keys().filter(|k| !f.contains_key(*k)) {
                out.push(format!("{} (added)", if at.is_empty() { k.clone() } else { format!("{at}.{k}") }));
            }
        }
        (Value::Array(f), Value::Array(l)) if f.iter().chain(l).all(|v| id(v).is_some()) => {
            for fv in f {
                let key = id(fv).unwrap_or_default();
                let p = format!("{at}[{key}]");
                match l.iter().find(|lv| id(lv).as_deref() == Some(key.as_str())) {
                    Some(lv) => json_diff(fv, lv, &p, out),
                    None => out.push(format!("{p} (removed)")),
                }
            }
            for lv in l {
                let key = id(lv).unwrap_or_default();
                if !f.iter().any(|fv| id(fv).as_deref() == Some(key.as_str())) {
                    out.push(format!("{at}[{key}] (added)"));
                }
            }
        }
        (Value::Array(f), Value::Array(l)) => {
            for i in 0..f.len().max(l.len()) {
                let p = format!("{at}[{i}]");
                match (f.get(i), l.get(i)) {
                    (Some(a), Some(b)) => json_diff(a, b, &p, out),
                    (Some(_), None) => out.push(format!("{p} (removed)")),
                    (None, Some(_)) => out.push(format!("{p} (added)")),
                    (None, None) => {}
                }
            }
        }
        (f, l) if f != l => out.push(at.to_string()),
        _ => {}
    }
}

#[cfg(test)]
mod regeneration_tests {
    use super::*;

    #[test]
    fn edits_are_named_by_json_path_and_file() {
        let mut fresh = Bundle::default();
        let ign = serde_json::json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 A"]}]},
            "storage": {"files": [{"path": "/etc/a", "contents": {"source": "data:,1"}}]}});
        fresh.add("ignition/m.ign", 0o600, serde_json::to_vec(&ign).unwrap());
        fresh.add("pki/x.key", 0o600, "KEY");
        fresh.add("notes.txt", 0o644, "a\nb\nc\n");
        fresh.add(bundle::SUMS, 0o644, "s1");
        let mut live = fresh.clone();
        let mut bad = ign.clone();
        bad["passwd"]["users"][0]["sshAuthorizedKeys"]
            .as_array_mut()
            .unwrap()
            .push("ssh-rsa EVIL".into());
        bad["storage"]["files"][0]["contents"]["source"] = "data:,2".into();
        live.add("ignition/m.ign", 0o600, serde_json::to_vec(&bad).unwrap());
        live.add("pki/x.key", 0o600, "OTHER");
        live.add("notes.txt", 0o644, "a\nB\nc\n");
        live.add("extra", 0o644, "");
        live.add(bundle::SUMS, 0o644, "s2");
        let got: Vec<String> = regeneration(&fresh, &live)
            .iter()
            .map(|c| format!("{}: {}", c.name, c.detail))
            .collect();
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(got[0].starts_with("extra: not part of"), "{got:?}");
        assert!(got[1].contains("passwd.users[core].sshAuthorizedKeys[1] (added)"), "{got:?}");
        assert!(got[1].contains("storage.files[/etc/a].contents.source"), "{got:?}");
        assert!(!got[1].contains("EVIL"), "values are not printed");
        assert_eq!(got[2], "notes.txt: differs from a fresh build from line 2");
        assert!(got[3].contains("a secret: contents not shown"), "{got:?}");
        let ok = regeneration(&fresh, &fresh);
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].status, Status::Ok);
    }
}
