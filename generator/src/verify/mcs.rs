//! `verify --against-mcs`: what a machine-config server serves a pool, against each node of the
//! pool's complete config. A node booted the standard RHCOS way (a pointer config to
//! api-int:22623) gets exactly what the server serves; one booted from the bundle must hold the
//! same, byte for byte, and beyond it only its own parts (hostname, addresses, the agent...), or
//! the machine-config daemon finds the node's files differ from its rendered config.

use super::{Check, Status};
use crate::assets::parts;
use crate::bundle::Bundle;
use crate::cluster::{Cluster, Role};
use crate::ignition::{decode_bounded, Contents};
use hardshift_bundle::data_url::Undecodable;
use serde_json::Value;
use std::collections::BTreeMap;

/// What the server answered for each pool (`master`, `worker`), or why it did not.
pub struct Served {
    pub url: String,
    pub pools: Vec<(String, Result<Vec<u8>, NoAnswer>)>,
}

/// Why the server gave no whole config for a pool (an HTTP status, a transport error, the deadline).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoAnswer(pub String);

fn pool(role: Role) -> Option<&'static str> {
    match role {
        Role::Master => Some("master"),
        Role::Worker => Some("worker"),
        Role::Bootstrap => None,
    }
}

/// One check per master and worker: its complete config against its pool's served config.
pub fn checks(c: &Cluster, b: &Bundle, served: &Served) -> Vec<Check> {
    let mut out = Vec::new();
    for n in &c.nodes {
        // A single node's master config is made on the node, from its live system.
        let Some(name) = pool(n.role).filter(|_| !c.single_node()) else {
            continue;
        };
        let url = format!("{}/config/{name}", served.url.trim_end_matches('/'));
        let check = |status, detail: String| Check {
            name: "mcs".into(),
            subject: n.hostname.clone(),
            issuer: String::new(),
            expires: String::new(),
            status,
            detail,
        };
        let answer = served.pools.iter().find(|(p, _)| p == name).map(|(_, r)| r);
        let config = match answer {
            None => Err("not asked".to_string()),
            Some(Err(e)) => Err(e.0.clone()),
            Some(Ok(bytes)) => serde_json::from_slice::<Value>(bytes)
                .map_err(|e| format!("not an Ignition config: {e}"))
                .and_then(|v| match v.is_object() {
                    true => Ok(v),
                    false => Err("not an Ignition config: not a JSON object".to_string()),
                }),
        };
        let path = format!("ignition/{}.ign", n.hostname);
        let node = b
            .files
            .get(&path)
            .ok_or_else(|| format!("{path} is missing"))
            .and_then(|f| serde_json::from_slice::<Value>(&f.contents.bytes()).map_err(|e| format!("{path}: {e}")));
        let (served_cfg, node_cfg) = match (config, node) {
            // The bootstrap's server refuses every pool but master (machine-config-operator
            // `pkg/server/bootstrap_server.go`); the cluster's serves workers once it runs.
            (Err(e), _) if n.role == Role::Worker && e.starts_with("HTTP ") => {
                let why = "not served: a bootstrap's machine-config server serves only the master pool; compare workers with the cluster's (api-int:22623 once the masters run it)";
                out.push(check(Status::Warn, format!("{url}: {e}: {why}")));
                continue;
            }
            (Err(e), _) => {
                out.push(check(Status::Fail, format!("{url}: {e}")));
                continue;
            }
            (_, Err(e)) => {
                out.push(check(Status::Fail, e));
                continue;
            }
            (Ok(s), Ok(n)) => (s, n),
        };
        let p = compare(n.role, &served_cfg, &node_cfg, &c.ssh_keys);
        let beyond: Vec<&str> = p.beyond.iter().map(|(w, _)| w.as_str()).collect();
        if p.differences.is_empty() && p.unexplained.is_empty() {
            out.push(check(
                Status::Ok,
                format!(
                    "{url}: its {} files and {} units are on the node byte for byte, and every other field of the spec as served{}; beyond them the node's own parts: {}",
                    p.files,
                    p.units,
                    p.stricter
                        .iter()
                        .map(|(f, n, s)| format!(" ({f} with mode {n:o}, served {s:o})"))
                        .collect::<String>(),
                    beyond.join(", ")
                ),
            ));
        } else {
            let mut why = p.differences.clone();
            why.extend(
                p.unexplained
                    .iter()
                    .map(|w| format!("{w}: on the node, neither served nor placed by a part")),
            );
            out.push(check(Status::Fail, format!("{url}: {}", why.join("; "))));
        }
    }
    out
}

/// One node against its pool's served config.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parity {
    /// What the server serves that the node lacks or holds otherwise, by where it is.
    pub differences: Vec<String>,
    /// What the node holds beyond it, each with the part that placed it.
    pub beyond: Vec<(String, &'static str)>,
    /// What the node holds beyond it that no part of its role places.
    pub unexplained: Vec<String>,
    /// Files the node holds with the same bytes and a stricter mode (a kubeconfig with a private
    /// key, 0600 where the server says 0644): (path, node's mode, served mode).
    pub stricter: Vec<(String, u32, u32)>,
    pub files: usize,
    pub units: usize,
}

/// The spec's lists whose entries Ignition keys by a field: (where, the key). Every entry the
/// server serves must be on the node as it is; one the node holds beyond them is unexplained
/// (no part of hardshift writes these). Files and units have rules of their own (decoded
/// contents, stricter modes, the parts that place them).
const KEYED: [(&str, &str); 10] = [
    ("/storage/directories", "path"),
    ("/storage/links", "path"),
    ("/storage/disks", "device"),
    ("/storage/raid", "name"),
    ("/storage/filesystems", "device"),
    ("/storage/luks", "name"),
    ("/passwd/users", "name"),
    ("/passwd/groups", "name"),
    ("/ignition/config/merge", "source"),
    ("/ignition/security/tls/certificateAuthorities", "source"),
];
/// Lists of strings compared as sets.
const SETS: [&str; 2] = ["/kernelArguments/shouldExist", "/kernelArguments/shouldNotExist"];
/// Where the rules above (or none at all: the spec version the server answers in) apply; all the
/// rest of a config is compared leaf by leaf.
const RULED: [&str; 3] = ["/storage/files", "/systemd/units", "/ignition/version"];

/// A value without what Ignition reads as its default: nulls, `false`, empty lists and objects,
/// and the owner `root` (a file `{"user": {"name": "root"}}` is the same file as one without it).
fn normal(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), normal(v)))
                .filter(|(k, v)| !is_default(k, v))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normal).collect()),
        other => other.clone(),
    }
}

fn is_default(key: &str, v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty() || ((key == "user" || key == "group") && is_root(m)),
        _ => false,
    }
}

fn is_root(m: &serde_json::Map<String, Value>) -> bool {
    m.iter().all(|(k, v)| (k == "name" && v == "root") || (k == "id" && v == 0))
}

/// A short form of a value for a message.
fn brief(v: Option<&Value>) -> String {
    match v {
        None => "nothing".into(),
        Some(v) => {
            let s = v.to_string();
            if s.chars().count() > 60 {
                format!("{}...", s.chars().take(57).collect::<String>())
            } else {
                s
            }
        }
    }
}

/// Every leaf where `node` is not `served`, by JSON pointer under `at`: (where, served, node).
fn leaves(at: &str, served: Option<&Value>, node: Option<&Value>, out: &mut Vec<(String, Option<Value>, Option<Value>)>) {
    let empty = serde_json::Map::new();
    let object = |v: Option<&'_ Value>| match v {
        Some(Value::Object(m)) => Some(m.clone()),
        None => Some(empty.clone()),
        Some(_) => None,
    };
    match (served, node) {
        (Some(Value::Object(_)), _) | (_, Some(Value::Object(_))) if object(served).is_some() && object(node).is_some() => {
            let (s, n) = (object(served).unwrap_or_default(), object(node).unwrap_or_default());
            let keys: std::collections::BTreeSet<&String> = s.keys().chain(n.keys()).collect();
            for k in keys {
                leaves(&format!("{at}/{k}"), s.get(k), n.get(k), out);
            }
        }
        (s, n) if s == n => {}
        (s, n) => out.push((at.to_string(), s.cloned(), n.cloned())),
    }
}

/// Remove and return the value at `pointer` (its parents stay).
fn take(v: &mut Value, pointer: &str) -> Option<Value> {
    let (parent, key) = pointer.rsplit_once('/')?;
    let p = if parent.is_empty() { Some(&mut *v) } else { v.pointer_mut(parent) };
    p?.as_object_mut()?.remove(key)
}

fn entries(v: Option<Value>, key: &str) -> (BTreeMap<String, Value>, usize) {
    let mut out = BTreeMap::new();
    let mut unkeyed = 0;
    for e in v.and_then(|v| v.as_array().cloned()).unwrap_or_default() {
        match e.get(key).and_then(Value::as_str) {
            Some(k) => {
                out.insert(k.to_string(), e);
            }
            None => unkeyed += 1,
        }
    }
    (out, unkeyed)
}

/// What differs between a served file and the node's, if anything (contents decoded, mode aside).
fn file_difference(served: &Value, node: &Value) -> Option<String> {
    let path = served["path"].as_str().unwrap_or_default();
    let contents = |f: &Value| -> Result<Vec<u8>, Undecodable> {
        match f.get("contents").filter(|c| c.get("source").is_some()) {
            None => Ok(Vec::new()),
            Some(c) => {
                let c: Contents = serde_json::from_value(c.clone()).map_err(|e| Undecodable(e.to_string()))?;
                decode_bounded(&c)
            }
        }
    };
    let s = match contents(served) {
        Ok(s) => s,
        Err(e) => return Some(format!("{path}: the server's contents cannot be read: {e}")),
    };
    let n = contents(node);
    if n.as_ref().ok() != Some(&s) {
        let n = n.map_or_else(|e| format!("unreadable: {e}"), |n| format!("{} bytes", n.len()));
        return Some(format!("{path}: contents differ ({} bytes served, {n} on the node)", s.len()));
    }
    // Every other field (owner, overwrite, append, the contents' verification and headers).
    let rest = |f: &Value| {
        let mut f = normal(f);
        take(&mut f, "/contents/source");
        take(&mut f, "/contents/compression");
        take(&mut f, "/mode");
        normal(&f)
    };
    let mut diffs = Vec::new();
    leaves("", Some(&rest(served)), Some(&rest(node)), &mut diffs);
    let said: Vec<String> = diffs
        .iter()
        .map(|(at, s, n)| {
            format!(
                "{path}: {} {} served, {} on the node",
                &at[1..],
                brief(s.as_ref()),
                brief(n.as_ref())
            )
        })
        .collect();
    (!said.is_empty()).then(|| said.join("; "))
}

fn mode(f: &Value) -> u32 {
    f.get("mode").and_then(Value::as_u64).map_or(0o644, |m| m as u32)
}

fn unit_differences(role: Role, served: &Value, node: &Value, p: &mut Parity) {
    let name = served["name"].as_str().unwrap_or_default();
    let (mut s, mut n) = (normal(served), normal(node));
    let (sd, _) = entries(take(&mut s, "/dropins"), "name");
    let (nd, _) = entries(take(&mut n, "/dropins"), "name");
    // A unit the server only names (enabled, no contents) leaves the node's contents its own.
    if s.get("enabled").is_none() {
        take(&mut n, "/enabled");
    }
    let mut diffs = Vec::new();
    leaves("", Some(&s), Some(&n), &mut diffs);
    for (at, s, n) in diffs {
        let field = &at[1..];
        p.differences.push(match field {
            "contents" => format!("unit {name}: contents differ"),
            _ => format!(
                "unit {name}: {field} {} served, {} on the node",
                brief(s.as_ref()),
                brief(n.as_ref())
            ),
        });
    }
    for (d, sv) in &sd {
        match nd.get(d) {
            None => p.differences.push(format!("unit {name}: drop-in {d} missing")),
            Some(nv) if nv != sv => p.differences.push(format!("unit {name}: drop-in {d} differs")),
            Some(_) => {}
        }
    }
    for d in nd.keys().filter(|d| !sd.contains_key(*d)) {
        let what = format!("unit {name} drop-in {d}");
        match parts::placing(role, name) {
            Some(part) => p.beyond.push((what, part)),
            None => p.unexplained.push(what),
        }
    }
}

/// `node` (of `role`) against `served`: every field of the spec. `own_keys`: the install-config's
/// SSH keys, which hardshift gives the core user beside any the server serves.
pub fn compare(role: Role, served: &Value, node: &Value, own_keys: &[String]) -> Parity {
    let mut p = Parity::default();
    let (mut s, mut n) = (served.clone(), node.clone());
    // Files: contents decoded, a stricter mode allowed, every other field the same.
    let (sf, _) = entries(take(&mut s, "/storage/files"), "path");
    let (nf, _) = entries(take(&mut n, "/storage/files"), "path");
    p.files = sf.len();
    for (path, f) in &sf {
        match nf.get(path) {
            None => p.differences.push(format!("{path}: served, not on the node")),
            Some(nv) => match file_difference(f, nv) {
                Some(d) => p.differences.push(d),
                None => {
                    let (nm, sm) = (mode(nv), mode(f));
                    if nm != sm && nm & !sm == 0 {
                        p.stricter.push((path.clone(), nm, sm));
                    } else if nm != sm {
                        p.differences.push(format!("{path}: mode {sm:o} served, {nm:o} on the node"));
                    }
                }
            },
        }
    }
    let (su, _) = entries(take(&mut s, "/systemd/units"), "name");
    let (nu, _) = entries(take(&mut n, "/systemd/units"), "name");
    p.units = su.len();
    for (name, u) in &su {
        match nu.get(name) {
            None => p.differences.push(format!("unit {name}: served, not on the node")),
            Some(nv) => unit_differences(role, u, nv, &mut p),
        }
    }
    let extra = nf
        .keys()
        .filter(|k| !sf.contains_key(*k))
        .map(|k| (k.clone(), k.clone()))
        .chain(nu.keys().filter(|k| !su.contains_key(*k)).map(|k| (format!("unit {k}"), k.clone())));
    for (what, key) in extra {
        match parts::placing(role, &key) {
            Some(part) => p.beyond.push((what, part)),
            None => p.unexplained.push(what),
        }
    }
    // The keyed sections: each served entry as it is, nothing beyond them.
    for (at, key) in KEYED {
        let section = &at[1..];
        let (se, s_unkeyed) = entries(take(&mut s, at), key);
        let (ne, n_unkeyed) = entries(take(&mut n, at), key);
        if s_unkeyed + n_unkeyed > 0 {
            p.differences
                .push(format!("{section}: {} entries without a {key}", s_unkeyed + n_unkeyed));
        }
        for (k, sv) in &se {
            let (mut sv, mut nv) = match ne.get(k) {
                None => {
                    p.differences.push(format!("{section} {k}: served, not on the node"));
                    continue;
                }
                Some(nv) => (normal(sv), normal(nv)),
            };
            // A user's keys are a set: each served one on the node, none beyond them.
            if at == "/passwd/users" {
                let keys = |v: &mut Value| -> Vec<String> {
                    take(v, "/sshAuthorizedKeys")
                        .and_then(|k| serde_json::from_value(k).ok())
                        .unwrap_or_default()
                };
                let (sk, nk) = (keys(&mut sv), keys(&mut nv));
                let short = |k: &str| k.chars().take(24).collect::<String>();
                for key in sk.iter().filter(|x| !nk.contains(x)) {
                    p.differences
                        .push(format!("passwd {k}: the key {}... is served, not on the node", short(key)));
                }
                for key in nk.iter().filter(|x| !sk.contains(x)) {
                    let what = format!("passwd {k}: the key {}...", short(key));
                    match k == "core" && own_keys.contains(key) {
                        true => p.beyond.push((what, "the install-config's sshKey")),
                        false => p.unexplained.push(what),
                    }
                }
            }
            let mut diffs = Vec::new();
            leaves("", Some(&sv), Some(&nv), &mut diffs);
            for (f, sv, nv) in diffs {
                p.differences.push(format!(
                    "{section} {k}: {} {} served, {} on the node",
                    &f[1..],
                    brief(sv.as_ref()),
                    brief(nv.as_ref())
                ));
            }
        }
        for k in ne.keys().filter(|k| !se.contains_key(*k)) {
            let what = format!("{section} {k}");
            // A directory or link a part of the node's role places (the static pods' directory).
            let placed = matches!(at, "/storage/directories" | "/storage/links")
                .then(|| parts::placing(role, k))
                .flatten();
            match placed {
                Some(part) => p.beyond.push((what, part)),
                None => p.unexplained.push(what),
            }
        }
    }
    for at in SETS {
        let list = |v: &mut Value| -> Vec<String> { take(v, at).and_then(|k| serde_json::from_value(k).ok()).unwrap_or_default() };
        let (sl, nl) = (list(&mut s), list(&mut n));
        for x in sl.iter().filter(|x| !nl.contains(x)) {
            p.differences.push(format!("{}: {x:?} served, not on the node", &at[1..]));
        }
        for x in nl.iter().filter(|x| !sl.contains(x)) {
            p.unexplained.push(format!("{}: {x:?}", &at[1..]));
        }
    }
    // All the rest, leaf by leaf (ignition.config.replace, timeouts, proxy, anything newer).
    for at in RULED {
        take(&mut s, at);
        take(&mut n, at);
    }
    let mut diffs = Vec::new();
    leaves("", Some(&normal(&s)), Some(&normal(&n)), &mut diffs);
    for (at, sv, nv) in diffs {
        let at = at[1..].replace('/', ".");
        match sv {
            Some(sv) => p
                .differences
                .push(format!("{at}: {} served, {} on the node", brief(Some(&sv)), brief(nv.as_ref()))),
            None => p.unexplained.push(format!("{at}: {}", brief(nv.as_ref()))),
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_is_served_must_be_on_the_node_and_what_is_beyond_must_be_a_part() {
        let served = json!({"ignition": {"version": "3.2.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA admin"]}]},
            "storage": {"files": [
                {"path": "/etc/a", "mode": 420, "contents": {"source": "data:,hello"}},
                {"path": "/etc/b", "mode": 420, "overwrite": true, "contents": {"source": "data:;base64,aGk="}}]},
            "systemd": {"units": [{"name": "kubelet.service", "enabled": true, "contents": "[Unit]\n"}]}});
        let same = json!({"ignition": {"version": "3.4.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA admin"]}]},
            "storage": {"files": [
                {"path": "/etc/a", "mode": 420, "user": {"name": "root"}, "contents": {"source": "data:;base64,aGVsbG8="}},
                {"path": "/etc/b", "mode": 420, "overwrite": true, "contents": {"source": "data:,hi"}},
                {"path": "/etc/hostname", "mode": 420, "contents": {"source": "data:,master-0"}},
                {"path": "/etc/surprise", "mode": 420, "contents": {"source": "data:,x"}}]},
            "systemd": {"units": [{"name": "kubelet.service", "enabled": true, "contents": "[Unit]\n"},
                                  {"name": "hardshift-agent.service", "enabled": true, "contents": "[Unit]\n"}]}});
        let p = compare(Role::Master, &served, &same, &[]);
        assert!(p.differences.is_empty(), "{p:?}");
        assert_eq!((p.files, p.units), (2, 1));
        assert_eq!(
            p.beyond,
            [
                ("/etc/hostname".to_string(), "hostname and network"),
                ("unit hardshift-agent.service".to_string(), "hardshift-agent")
            ]
        );
        assert_eq!(p.unexplained, ["/etc/surprise"]);
        // The same bytes under a stricter mode (a private key's file) are said, not a difference.
        let mut strict = same.clone();
        strict["storage"]["files"][1]["mode"] = json!(0o600);
        let p = compare(Role::Master, &served, &strict, &[]);
        assert!(p.differences.is_empty(), "{p:?}");
        assert_eq!(p.stricter, [("/etc/b".to_string(), 0o600, 0o644)]);

        let mut other = same.clone();
        other["storage"]["files"].as_array_mut().unwrap().remove(1);
        other["storage"]["files"][0]["mode"] = json!(0o664);
        other["systemd"]["units"][0]["enabled"] = json!(false);
        other["passwd"] = json!({});
        let p = compare(Role::Master, &served, &other, &[]);
        assert_eq!(
            p.differences,
            [
                "/etc/a: mode 644 served, 664 on the node",
                "/etc/b: served, not on the node",
                "unit kubelet.service: enabled true served, nothing on the node",
                "passwd/users core: served, not on the node",
            ]
        );
    }

    /// The probe's served configs: each passed as "byte for byte" when only files, units and the
    /// core user's keys were compared.
    #[test]
    fn every_field_of_the_spec_is_compared() {
        let node = json!({"ignition": {"version": "3.2.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA admin"]}]},
            "storage": {"files": [{"path": "/etc/a", "mode": 420, "contents": {"source": "data:,a"}}]},
            "systemd": {"units": [{"name": "kubelet.service", "enabled": true, "contents": "[Unit]\n",
                                   "dropins": [{"name": "10-x.conf", "contents": "[Service]\n"}]}]}});
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "/storage/links",
                json!([{"path": "/etc/l", "target": "/etc/shadow"}]),
                "storage/links /etc/l: served, not on the node",
            ),
            (
                "/storage/directories",
                json!([{"path": "/root/.ssh", "mode": 448}]),
                "storage/directories /root/.ssh: served, not on the node",
            ),
            (
                "/passwd/users",
                json!([{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA admin"]},
                {"name": "evil", "sshAuthorizedKeys": ["ssh-ed25519 BBBB evil"], "groups": ["wheel", "sudo"]}]),
                "passwd/users evil: served, not on the node",
            ),
            (
                "/passwd/users",
                json!([{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA admin"], "groups": ["wheel"]}]),
                "passwd/users core: groups [\"wheel\"] served, nothing on the node",
            ),
            (
                "/kernelArguments",
                json!({"shouldExist": ["init=/bin/sh"]}),
                "kernelArguments/shouldExist: \"init=/bin/sh\" served, not on the node",
            ),
            (
                "/storage/disks",
                json!([{"device": "/dev/sda", "wipeTable": true}]),
                "storage/disks /dev/sda: served, not on the node",
            ),
            (
                "/storage/raid",
                json!([{"name": "md0", "level": "raid1", "devices": ["/dev/a", "/dev/b"]}]),
                "storage/raid md0: served",
            ),
            (
                "/storage/filesystems",
                json!([{"device": "/dev/sda1", "format": "xfs", "wipeFilesystem": true}]),
                "storage/filesystems /dev/sda1: served",
            ),
            (
                "/storage/luks",
                json!([{"name": "root", "device": "/dev/sda4"}]),
                "storage/luks root: served",
            ),
            (
                "/ignition/config",
                json!({"merge": [{"source": "http://203.0.113.9/x.ign"}]}),
                "ignition/config/merge http://203.0.113.9/x.ign: served, not on the node",
            ),
            (
                "/ignition/config",
                json!({"replace": {"source": "http://203.0.113.9/x.ign"}}),
                "ignition.config.replace.source: \"http://203.0.113.9/x.ign\" served, nothing on the node",
            ),
            (
                "/ignition/security",
                json!({"tls": {"certificateAuthorities": [{"source": "data:,evil"}]}}),
                "ignition/security/tls/certificateAuthorities data:,evil: served",
            ),
            (
                "/storage/files",
                json!([{"path": "/etc/a", "mode": 420, "append": [{"source": "data:,b"}], "contents": {"source": "data:,a"}}]),
                "/etc/a: append [{\"source\":\"data:,b\"}] served, nothing on the node",
            ),
            (
                "/storage/files",
                json!([{"path": "/etc/a", "mode": 420, "user": {"name": "evil"}, "contents": {"source": "data:,a"}}]),
                "/etc/a: user/name \"evil\" served, nothing on the node",
            ),
            (
                "/systemd/units",
                json!([{"name": "kubelet.service", "enabled": true, "contents": "[Unit]\n",
                                   "dropins": [{"name": "10-x.conf", "contents": "[Service]\n"}, {"name": "99-evil.conf", "contents": "[Service]\nExecStartPre=/tmp/x\n"}]}]),
                "unit kubelet.service: drop-in 99-evil.conf missing",
            ),
        ];
        for (at, value, why) in cases {
            let mut served = node.clone();
            let (parent, key) = at.rsplit_once('/').unwrap();
            let obj = if parent.is_empty() {
                &mut served
            } else {
                if served.pointer(parent).is_none() {
                    served[&parent[1..]] = json!({});
                }
                served.pointer_mut(parent).unwrap()
            };
            obj[key] = value;
            let p = compare(Role::Master, &served, &node, &[]);
            assert!(
                p.differences.iter().any(|d| d.contains(why)),
                "{at}: {why:?} not in {:?}",
                p.differences
            );
            // And the other way round: the same on the node alone is unexplained.
            let p = compare(Role::Master, &node, &served, &[]);
            let dropin_beyond = p.beyond.iter().any(|(w, _)| w.contains("drop-in 99-evil.conf"));
            assert!(
                !p.unexplained.is_empty() || !p.differences.is_empty() || dropin_beyond,
                "{at}: the node's own {:?} passed",
                served.pointer(at)
            );
        }
    }
}
