//! `hardshift verify`: checks a written bundle against the cluster it was made for.
//! Sums, chains, key/cert pairs, the SANs every node needs, expiry, key file modes, kubeconfigs.

use crate::bundle::{self, Bundle};
use crate::cluster::Cluster;
use crate::config::yaml;
use crate::kubeconfig;
use crate::pki::{inspect, plan, CertSpec, Kind};
use base64::Engine;
use serde::Serialize;
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
        let Some((hash, path)) = line.split_once("  ") else {
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
