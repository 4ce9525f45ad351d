//! What the node's own view of the install says: bootkube's progress record (bootstrap only)
//! and DNS, resolved through the node's resolver (nsswitch: /etc/hosts, then resolv.conf), as
//! the kubelet and CRI-O resolve, compared with the addresses the bundle's zones give.

use crate::unread::Unread;
use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{state, Component};
use serde::Deserialize;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

pub use hardshift_agent_config::{DnsCheck, Endpoint, Via};

#[derive(Debug, Default, Deserialize)]
struct Progress {
    #[serde(default)]
    stage: String,
    #[serde(default)]
    result: String,
    #[serde(default, rename = "lastError")]
    last_error: String,
    #[serde(default)]
    time: String,
}

/// bootkube.sh's record (`{"stage","result","lastError","time"}`), as a component.
pub fn bootkube(path: &Path) -> ComponentState {
    progress(Component::Bootkube, path, "bootkube.service has not run yet")
}

/// A single node's bootstrap-in-place record (the same form): install-to-disk's on the live
/// system, the post-reboot step's on the installed one.
pub fn in_place(path: &Path) -> ComponentState {
    progress(Component::InPlace, path, "its step has not run yet on this boot")
}

/// A progress record as a component; `age_s`: how long ago it was last written (a step that
/// stops moving, a reboot that never came).
fn progress(which: Component, path: &Path, absent: &str) -> ComponentState {
    let mut c = ComponentState {
        name: which.name().into(),
        ..Default::default()
    };
    let text = match std::fs::read(path) {
        Ok(t) if t.len() <= 64 * 1024 => t,
        Ok(_) => {
            c.health = Health::Warning as i32;
            c.state = "unreadable".into();
            c.reason = format!("{}: larger than 64 KiB", path.display());
            return c;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            c.health = Health::Warning as i32;
            c.state = state::NOT_STARTED.into();
            c.reason = format!("{} absent: {absent}", path.display());
            return c;
        }
        Err(e) => {
            c.health = Health::Warning as i32;
            c.state = "unreadable".into();
            c.reason = format!("{}: {e}", path.display());
            return c;
        }
    };
    let p: Progress = match serde_json::from_slice(&text) {
        Ok(p) => p,
        Err(e) => {
            c.health = Health::Warning as i32;
            c.state = "unreadable".into();
            c.reason = format!("{}: {e}", path.display());
            return c;
        }
    };
    (c.health, c.state) = match (p.stage.as_str(), p.result.as_str()) {
        (state::COMPLETE, _) => (Health::Ok as i32, state::COMPLETE.into()),
        (s, "failed") => (Health::Failing as i32, format!("{s}: failed")),
        (s, r) => (Health::Warning as i32, format!("{s}: {r}")),
    };
    c.reason = p.last_error.chars().take(512).collect();
    c.details = HashMap::from([("stage".into(), p.stage), ("result".into(), p.result), ("time".into(), p.time)]);
    let age = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok());
    if let Some(age) = age {
        c.details.insert("age_s".into(), age.as_secs().to_string());
    }
    c
}

/// What the resolver answers for each name: addresses, or the error.
pub async fn resolve(checks: &[DnsCheck], timeout: Duration) -> Vec<(String, Result<Vec<IpAddr>, Unread>)> {
    let one = |name: String| async move {
        let r = match tokio::time::timeout(timeout, tokio::net::lookup_host((name.as_str(), 0))).await {
            Err(_) => Err(Unread::new(format!("no answer within {} s", timeout.as_secs()))),
            Ok(Err(e)) => Err(Unread::new(e)),
            Ok(Ok(addrs)) => {
                let mut v: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
                v.sort();
                v.dedup();
                Ok(v)
            }
        };
        (name, r)
    };
    futures_util::future::join_all(checks.iter().map(|c| one(c.name.clone()))).await
}

/// A TCP connect to each endpoint at once (resolving through the node's resolver): how long it took, or the error.
pub async fn connect_all(eps: &[Endpoint], timeout: Duration) -> Vec<Result<Duration, Unread>> {
    let one = |addr: String| async move {
        let t = std::time::Instant::now();
        match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr.as_str())).await {
            Err(_) => Err(Unread::new(format!("no answer within {} s", timeout.as_secs()))),
            Ok(Err(e)) => Err(Unread::new(e)),
            Ok(Ok(_)) => Ok(t.elapsed()),
        }
    };
    futures_util::future::join_all(eps.iter().map(|e| one(e.addr.clone()))).await
}

/// The `lb` component. Pure. Through the load balancer fails while an API server answers
/// directly: the load balancer is the cause. Nothing answers at all: no API server runs yet.
pub fn lb(eps: &[Endpoint], results: &[Result<Duration, Unread>]) -> ComponentState {
    let mut details = HashMap::new();
    let (mut lb_bad, mut direct_ok) = (Vec::new(), Vec::new());
    for (e, r) in eps.iter().zip(results) {
        details.insert(
            e.name.clone(),
            match r {
                Ok(d) => format!("ok {:.1} ms", d.as_secs_f64() * 1000.0),
                Err(err) => err.to_string(),
            },
        );
        match (e.via, r) {
            (Via::Lb, Err(err)) => lb_bad.push(format!("{} ({}): {err}", e.name, e.addr)),
            (Via::Backend, Ok(_)) => direct_ok.push(format!("{} ({})", e.name, e.addr)),
            _ => {}
        }
    }
    let (health, state, reason) = match (lb_bad.is_empty(), direct_ok.is_empty()) {
        (true, _) => (Health::Ok, "reachable".to_string(), String::new()),
        (false, false) => (
            Health::Failing,
            "load balancer not forwarding".to_string(),
            format!(
                "through the load balancer: {}; directly, {} answer{}",
                lb_bad.join("; "),
                direct_ok.join(", "),
                if direct_ok.len() == 1 { "s" } else { "" }
            ),
        ),
        (false, true) => (
            Health::Warning,
            "no API server answers".to_string(),
            format!(
                "through the load balancer: {}; no API server answers directly either (none started yet?)",
                lb_bad.join("; ")
            ),
        ),
    };
    ComponentState {
        name: Component::Lb.name().into(),
        health: health as i32,
        state,
        reason,
        details,
    }
}

/// The DNS component: every name must resolve to exactly the zone's addresses. Pure.
pub fn dns(checks: &[DnsCheck], answers: &[(String, Result<Vec<IpAddr>, Unread>)]) -> ComponentState {
    let mut wrong = Vec::new();
    let mut details = HashMap::new();
    for c in checks {
        let got = answers.iter().find(|(n, _)| *n == c.name).map(|(_, r)| r);
        let mut want = c.expect.clone();
        want.sort();
        let list = |v: &[IpAddr]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(",");
        let line = match got {
            None => None,
            Some(Err(e)) => Some(format!("{} does not resolve ({e}); the zone says {}", c.name, list(&want))),
            Some(Ok(v)) if *v == want => None,
            Some(Ok(v)) => Some(format!("{} → {}, but the zone says {}", c.name, list(v), list(&want))),
        };
        details.insert(
            c.name.clone(),
            match got {
                Some(Ok(v)) => list(v),
                Some(Err(e)) => format!("error: {e}"),
                None => "not asked".into(),
            },
        );
        wrong.extend(line);
    }
    ComponentState {
        name: Component::Dns.name().into(),
        health: if wrong.is_empty() { Health::Ok } else { Health::Failing } as i32,
        state: if wrong.is_empty() {
            format!("{} names ok", checks.len())
        } else {
            format!("{} of {} names wrong", wrong.len(), checks.len())
        },
        reason: wrong.join("; "),
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, ip: &str) -> DnsCheck {
        DnsCheck {
            name: name.into(),
            expect: vec![ip.parse().unwrap()],
        }
    }

    #[test]
    fn dns_names_what_is_wrong_and_what_the_zone_says() {
        let checks = [check("api-int.x", "192.168.126.1"), check("master-0.x", "192.168.126.101")];
        let ok = dns(
            &checks,
            &[
                ("api-int.x".into(), Ok(vec!["192.168.126.1".parse().unwrap()])),
                ("master-0.x".into(), Ok(vec!["192.168.126.101".parse().unwrap()])),
            ],
        );
        assert_eq!((ok.health, ok.state.as_str()), (Health::Ok as i32, "2 names ok"));
        let bad = dns(
            &checks,
            &[
                ("api-int.x".into(), Ok(vec!["10.0.0.9".parse().unwrap()])),
                ("master-0.x".into(), Err(Unread::new("failed to lookup address information"))),
            ],
        );
        assert_eq!(bad.health, Health::Failing as i32);
        assert!(
            bad.reason.contains("api-int.x → 10.0.0.9, but the zone says 192.168.126.1"),
            "{}",
            bad.reason
        );
        assert!(bad.reason.contains("master-0.x does not resolve"), "{}", bad.reason);
    }

    #[test]
    fn the_load_balancer_is_blamed_only_when_a_backend_answers() {
        let eps = [
            Endpoint {
                name: "api-int:6443".into(),
                addr: "api-int.x:6443".into(),
                via: Via::Lb,
            },
            Endpoint {
                name: "bootstrap:6443".into(),
                addr: "192.168.126.100:6443".into(),
                via: Via::Backend,
            },
        ];
        let ok = Ok(Duration::from_millis(1));
        let refused = Err::<Duration, Unread>(Unread::new("Connection refused (os error 111)"));
        assert_eq!(lb(&eps, &[ok.clone(), refused.clone()]).health, Health::Ok as i32);
        let c = lb(&eps, &[refused.clone(), ok]);
        assert_eq!(c.health, Health::Failing as i32);
        assert!(
            c.reason.contains("directly, bootstrap:6443 (192.168.126.100:6443) answers"),
            "{}",
            c.reason
        );
        let c = lb(&eps, &[refused.clone(), refused]);
        assert_eq!((c.health, c.state.as_str()), (Health::Warning as i32, "no API server answers"));
    }

    #[test]
    fn bootkube_progress_is_read_and_bounded() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("bootkube.json");
        assert_eq!(bootkube(&p).state, "not started");
        std::fs::write(
            &p,
            r#"{"stage":"crds-established","result":"failed","lastError":"timed out","time":"t"}"#,
        )
        .unwrap();
        let c = bootkube(&p);
        assert_eq!(
            (c.health, c.state.as_str(), c.reason.as_str()),
            (Health::Failing as i32, "crds-established: failed", "timed out")
        );
        std::fs::write(&p, r#"{"stage":"complete","result":"done","lastError":"","time":"t"}"#).unwrap();
        assert_eq!(bootkube(&p).health, Health::Ok as i32);
        std::fs::write(&p, "{not json").unwrap();
        assert_eq!(bootkube(&p).state, "unreadable");
    }

    #[tokio::test]
    async fn the_resolver_reads_etc_hosts() {
        // localhost is in every /etc/hosts; a name under .invalid never resolves (RFC 6761).
        let r = resolve(
            &[check("localhost", "127.0.0.1"), check("hardshift.invalid", "10.0.0.1")],
            Duration::from_secs(5),
        )
        .await;
        assert!(r[0].1.as_ref().unwrap().contains(&"127.0.0.1".parse().unwrap()), "{r:?}");
        assert!(r[1].1.is_err(), "{r:?}");
    }
}
