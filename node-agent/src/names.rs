//! Two DNS checks beyond the bundle's names: a random name under the cluster's domain must not
//! resolve (a wildcard there answers for names that should fail, the assisted installer's
//! dns-wildcard-not-configured), and the node's address must resolve back to its name (RHCOS
//! takes its hostname from the PTR record when DHCP gives none). Both through glibc's DNS
//! service only (`getent -s dns`), as NetworkManager's reverse lookup goes: /etc/hosts and
//! nss-myhostname would answer for the node itself and hide a missing record.

use anyhow::Context;
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{self, Component};
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

/// What `getent -s dns hosts|ahosts KEY` said: its names and addresses, or nothing found.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Found { addresses: Vec<IpAddr>, names: Vec<String> },
    NotFound,
}

/// getent's output: `ADDRESS NAME [ALIAS…]` lines (exit 2: not found). Pure.
pub fn parse_getent(out: &str) -> Answer {
    let mut addresses = Vec::new();
    let mut names = Vec::new();
    for l in out.lines() {
        let mut f = l.split_whitespace();
        if let Some(a) = f.next().and_then(|a| a.parse::<IpAddr>().ok()) {
            if !addresses.contains(&a) {
                addresses.push(a);
            }
            for n in f.filter(|n| !["STREAM", "DGRAM", "RAW"].contains(n)) {
                let n = n.trim_end_matches('.').to_string();
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
    }
    if addresses.is_empty() {
        Answer::NotFound
    } else {
        Answer::Found { addresses, names }
    }
}

/// `getent -s dns DB KEY`, bounded in time.
pub async fn getent(db: &str, key: &str, timeout: Duration) -> anyhow::Result<Answer> {
    let mut cmd = tokio::process::Command::new("getent");
    cmd.args(["-s", "dns", db, key])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(timeout, cmd.output())
        .await
        .map_err(|_| anyhow::anyhow!("getent {db} {key}: no answer within {} s", timeout.as_secs()))?
        .context("getent")?;
    match out.status.code() {
        Some(0) => Ok(parse_getent(&String::from_utf8_lossy(&out.stdout))),
        // getent(1): 2 is "key not found".
        Some(2) => Ok(Answer::NotFound),
        _ => Err(anyhow::anyhow!(
            "getent {db} {key}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// A name no zone should hold: random, under the cluster's domain (not under `apps.`, whose
/// wildcard the cluster needs).
pub fn random_name(domain: &str) -> String {
    // std's hasher keys are random per process and per call: enough for a name nobody made.
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("hardshift-wildcard-{:012x}.{domain}", h.finish() & 0xffff_ffff_ffff)
}

/// The `dns-wildcard` component from the answer for a random name.
pub fn judge_wildcard(name: &str, a: &anyhow::Result<Answer>) -> ComponentState {
    let details = HashMap::from([("name".to_string(), name.to_string())]);
    match a {
        Ok(Answer::NotFound) => vocab::component(Component::DnsWildcard, Health::Ok, "no wildcard", "").with_details(details),
        Ok(Answer::Found { addresses, .. }) => vocab::component(
            Component::DnsWildcard,
            Health::Failing,
            "wildcard",
            format!(
                "{name}, a random name, resolves to {}: a wildcard record under the cluster's domain answers names that must fail",
                addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")
            ),
        )
        .with_details(details),
        Err(e) => vocab::component(Component::DnsWildcard, Health::Unknown, "unknown", format!("{e:#}")).with_details(details),
    }
}

/// The `dns-ptr` component: the address resolves back to the node's name (short or FQDN).
pub fn judge_ptr(node: &str, addr: IpAddr, a: &anyhow::Result<Answer>) -> ComponentState {
    let mut details = HashMap::from([("address".to_string(), addr.to_string())]);
    match a {
        Ok(Answer::Found { names, .. }) if names.iter().any(|n| n == node || n.split('.').next() == Some(node)) => {
            details.insert("names".into(), names.join(", "));
            vocab::component(Component::DnsPtr, Health::Ok, names[0].clone(), "").with_details(details)
        }
        Ok(Answer::Found { names, .. }) => {
            details.insert("names".into(), names.join(", "));
            vocab::component(
                Component::DnsPtr,
                Health::Failing,
                "wrong name",
                format!("{addr} resolves back to {}, not {node}", names.join(", ")),
            )
            .with_details(details)
        }
        Ok(Answer::NotFound) => vocab::component(
            Component::DnsPtr,
            Health::Failing,
            "no PTR record",
            format!("{addr} does not resolve back to a name: RHCOS takes its hostname from it when DHCP gives none"),
        )
        .with_details(details),
        Err(e) => vocab::component(Component::DnsPtr, Health::Unknown, "unknown", format!("{e:#}")).with_details(details),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// getent's output as this machine's glibc prints it (hosts and ahosts).
    #[test]
    fn getent_output() {
        let hosts = "192.168.126.101 master-0.ocp4.example.com master-0\n";
        let ahosts = "192.168.126.9   STREAM hardshift-wildcard-0a.ocp4.example.com\n192.168.126.9   DGRAM  \n192.168.126.9   RAW    \n";
        assert_eq!(
            parse_getent(hosts),
            Answer::Found {
                addresses: vec!["192.168.126.101".parse().unwrap()],
                names: vec!["master-0.ocp4.example.com".into(), "master-0".into()]
            }
        );
        let w = parse_getent(ahosts);
        let name = "hardshift-wildcard-0a.ocp4.example.com";
        let c = judge_wildcard(name, &Ok(w));
        assert_eq!(c.health, Health::Failing as i32);
        assert!(c.reason.contains("resolves to 192.168.126.9"), "{}", c.reason);
        assert_eq!(judge_wildcard(name, &Ok(parse_getent(""))).health, Health::Ok as i32);
        let addr: IpAddr = "192.168.126.101".parse().unwrap();
        assert_eq!(judge_ptr("master-0", addr, &Ok(parse_getent(hosts))).health, Health::Ok as i32);
        let c = judge_ptr("master-1", addr, &Ok(parse_getent(hosts)));
        assert!(
            c.reason
                .contains("resolves back to master-0.ocp4.example.com, master-0, not master-1"),
            "{}",
            c.reason
        );
        assert_eq!(judge_ptr("master-0", addr, &Ok(Answer::NotFound)).state, "no PTR record");
        assert!(random_name("a.b").starts_with("hardshift-wildcard-") && random_name("a.b") != random_name("a.b"));
    }

    /// The real getent: a name under the reserved `.invalid` (RFC 6761) never resolves.
    #[tokio::test]
    async fn real_getent_not_found() {
        let a = getent("ahosts", &random_name("invalid"), Duration::from_secs(10)).await;
        assert!(matches!(a, Ok(Answer::NotFound) | Err(_)), "{a:?}");
    }
}
