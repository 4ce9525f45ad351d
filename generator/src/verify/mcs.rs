//! `verify --against-mcs`: what a machine-config server serves a pool, against each node of the
//! pool's complete config. A node booted the standard RHCOS way (a pointer config to
//! api-int:22623) gets exactly what the server serves; one booted from the bundle must hold the
//! same, byte for byte, and beyond it only its own parts (hostname, addresses, the agent...), or
//! the machine-config daemon finds the node's files differ from its rendered config.

use super::{Check, Status};
use crate::assets::parts;
use crate::bundle::Bundle;
use crate::cluster::{Cluster, Role};
use crate::ignition::{decode, Config, File, Unit};
use std::collections::BTreeMap;

/// What the server answered for each pool (`master`, `worker`), or why it did not.
pub struct Served {
    pub url: String,
    pub pools: Vec<(String, Result<Vec<u8>, String>)>,
}

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
            Some(Err(e)) => Err(e.clone()),
            Some(Ok(bytes)) => serde_json::from_slice::<Config>(bytes).map_err(|e| format!("not an Ignition config: {e}")),
        };
        let path = format!("ignition/{}.ign", n.hostname);
        let node = b
            .files
            .get(&path)
            .ok_or_else(|| format!("{path} is missing"))
            .and_then(|f| serde_json::from_slice::<Config>(&f.contents.bytes()).map_err(|e| format!("{path}: {e}")));
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
        let p = compare(n.role, &served_cfg, &node_cfg);
        let beyond: Vec<&str> = p.beyond.iter().map(|(w, _)| w.as_str()).collect();
        if p.differences.is_empty() && p.unexplained.is_empty() {
            out.push(check(
                Status::Ok,
                format!(
                    "{url}: its {} files and {} units are on the node byte for byte{}; beyond them the node's own parts: {}",
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
    /// What the server serves that the node lacks or holds otherwise.
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

fn files(c: &Config) -> BTreeMap<&str, &File> {
    c.storage.files.iter().map(|f| (f.path.as_str(), f)).collect()
}

fn units(c: &Config) -> BTreeMap<&str, &Unit> {
    c.systemd.units.iter().map(|u| (u.name.as_str(), u)).collect()
}

fn bytes(f: &File) -> Option<Vec<u8>> {
    f.contents.as_ref().map_or(Some(Vec::new()), decode)
}

enum FileParity {
    Same,
    Stricter(u32, u32),
    Differs(String),
}

/// What differs between a served file and the node's, if anything.
fn file_parity(served: &File, node: &File) -> FileParity {
    match file_difference(served, node) {
        Some(d) => FileParity::Differs(d),
        None => {
            let mode = |f: &File| f.mode.unwrap_or(0o644);
            let (n, s) = (mode(node), mode(served));
            if n == s {
                FileParity::Same
            } else if n & !s == 0 {
                FileParity::Stricter(n, s)
            } else {
                FileParity::Differs(format!("{}: mode {s:o} served, {n:o} on the node", served.path))
            }
        }
    }
}

/// A difference in contents, if any.
fn file_difference(served: &File, node: &File) -> Option<String> {
    let path = &served.path;
    let (s, n) = (bytes(served), bytes(node));
    if s.is_none() {
        return Some(format!("{path}: the server's contents are not a data URL hardshift can read"));
    }
    if s != n {
        let len = |b: &Option<Vec<u8>>| b.as_ref().map_or(0, Vec::len);
        return Some(format!(
            "{path}: contents differ ({} bytes served, {} on the node)",
            len(&s),
            len(&n)
        ));
    }
    None
}

fn unit_difference(served: &Unit, node: &Unit) -> Option<String> {
    let name = &served.name;
    if served.contents != node.contents {
        return Some(format!("unit {name}: contents differ"));
    }
    if served.enabled.is_some() && served.enabled != node.enabled {
        return Some(format!(
            "unit {name}: enabled {:?} served, {:?} on the node",
            served.enabled, node.enabled
        ));
    }
    if served.mask.unwrap_or(false) != node.mask.unwrap_or(false) {
        return Some(format!("unit {name}: mask differs"));
    }
    for d in &served.dropins {
        match node.dropins.iter().find(|x| x.name == d.name) {
            None => return Some(format!("unit {name}: drop-in {} missing", d.name)),
            Some(x) if x.contents != d.contents => return Some(format!("unit {name}: drop-in {} differs", d.name)),
            Some(_) => {}
        }
    }
    None
}

/// `node` (of `role`) against `served`.
pub fn compare(role: Role, served: &Config, node: &Config) -> Parity {
    let mut p = Parity::default();
    let (sf, nf) = (files(served), files(node));
    let (su, nu) = (units(served), units(node));
    p.files = sf.len();
    p.units = su.len();
    for (path, f) in &sf {
        match nf.get(path) {
            None => p.differences.push(format!("{path}: served, not on the node")),
            Some(n) => match file_parity(f, n) {
                FileParity::Same => {}
                FileParity::Stricter(node, served) => p.stricter.push((path.to_string(), node, served)),
                FileParity::Differs(d) => p.differences.push(d),
            },
        }
    }
    for (name, u) in &su {
        match nu.get(name) {
            None => p.differences.push(format!("unit {name}: served, not on the node")),
            Some(n) => p.differences.extend(unit_difference(u, n)),
        }
    }
    let core = |c: &Config| {
        c.passwd
            .users
            .iter()
            .find(|u| u.name == "core")
            .map(|u| u.ssh_authorized_keys.clone())
            .unwrap_or_default()
    };
    let node_keys = core(node);
    for k in core(served).iter().filter(|k| !node_keys.contains(k)) {
        let short: String = k.chars().take(24).collect();
        p.differences
            .push(format!("passwd core: the key {short}... is served, not on the node"));
    }
    let extra = nf
        .keys()
        .filter(|k| !sf.contains_key(*k))
        .map(|k| k.to_string())
        .chain(nu.keys().filter(|k| !su.contains_key(*k)).map(|k| format!("unit {k}")));
    for what in extra {
        match parts::placing(role, what.strip_prefix("unit ").unwrap_or(&what)) {
            Some(part) => p.beyond.push((what, part)),
            None => p.unexplained.push(what),
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(v: serde_json::Value) -> Config {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn what_is_served_must_be_on_the_node_and_what_is_beyond_must_be_a_part() {
        let served = cfg(json!({"ignition": {"version": "3.2.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA admin"]}]},
            "storage": {"files": [
                {"path": "/etc/a", "mode": 420, "contents": {"source": "data:,hello"}},
                {"path": "/etc/b", "mode": 420, "contents": {"source": "data:;base64,aGk="}}]},
            "systemd": {"units": [{"name": "kubelet.service", "enabled": true, "contents": "[Unit]\n"}]}}));
        let same = cfg(json!({"ignition": {"version": "3.2.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA admin"]}]},
            "storage": {"files": [
                {"path": "/etc/a", "mode": 420, "contents": {"source": "data:;base64,aGVsbG8="}},
                {"path": "/etc/b", "mode": 420, "contents": {"source": "data:,hi"}},
                {"path": "/etc/hostname", "mode": 420, "contents": {"source": "data:,master-0"}},
                {"path": "/etc/surprise", "mode": 420, "contents": {"source": "data:,x"}}]},
            "systemd": {"units": [{"name": "kubelet.service", "enabled": true, "contents": "[Unit]\n"},
                                  {"name": "hardshift-agent.service", "enabled": true, "contents": "[Unit]\n"}]}}));
        let p = compare(Role::Master, &served, &same);
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
        strict.storage.files[1].mode = Some(0o600);
        let p = compare(Role::Master, &served, &strict);
        assert!(p.differences.is_empty(), "{p:?}");
        assert_eq!(p.stricter, [("/etc/b".to_string(), 0o600, 0o644)]);

        let mut other = same.clone();
        other.storage.files.retain(|f| f.path != "/etc/b");
        other.storage.files[0].mode = Some(0o664);
        other.systemd.units[0].enabled = Some(false);
        other.passwd.users.clear();
        let p = compare(Role::Master, &served, &other);
        assert_eq!(
            p.differences,
            [
                "/etc/a: mode 644 served, 664 on the node",
                "/etc/b: served, not on the node",
                "unit kubelet.service: enabled Some(true) served, Some(false) on the node",
                "passwd core: the key ssh-ed25519 AAAA admin... is served, not on the node",
            ]
        );
    }
}
