//! The live bundle against a fresh build: every difference named, no secret shown.

use super::{check, Check, Status};
use crate::bundle::{self, Bundle};

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
mod tests {
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
