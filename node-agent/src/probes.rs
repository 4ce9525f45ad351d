//! Component probes. Each has a timeout: a hung component never hangs the agent.

use hardshift_proto::v1::{ComponentState, Health};
use hardshift_proto::vocab::{state, Component};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(2);

fn state(name: &str, health: Health, state: &str, reason: &str) -> ComponentState {
    ComponentState {
        name: name.into(),
        health: health as i32,
        state: state.into(),
        reason: reason.into(),
        details: Default::default(),
    }
}

/// The error and its causes, which is where tonic and reqwest put "connection refused".
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// What the kubelet's `/healthz` said, or why it said nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Healthz {
    Timeout,
    Refused,
    Error(String),
    Answer { status: u16, body: String },
}

/// `GET /healthz` on the kubelet's local health port (plain HTTP on loopback), bounded in time
/// and in what is read.
pub async fn read_healthz(addr: &str) -> Healthz {
    // reqwest is built without a crypto provider of its own: the process's is hardshift-crypto's
    // (never used for this plain-HTTP request, but a client cannot be built without one).
    hardshift_crypto::install();
    let client = match reqwest::Client::builder().timeout(TIMEOUT).no_proxy().build() {
        Ok(c) => c,
        Err(e) => return Healthz::Error(e.to_string()),
    };
    let get = async {
        let resp = client.get(format!("http://{addr}/healthz")).send().await?;
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap_or_default();
        Ok::<_, reqwest::Error>(Healthz::Answer {
            status,
            body: body.chars().take(4096).collect(),
        })
    };
    match tokio::time::timeout(TIMEOUT, get).await {
        Err(_) => Healthz::Timeout,
        Ok(Ok(h)) => h,
        Ok(Err(e)) if e.is_timeout() => Healthz::Timeout,
        Ok(Err(e)) => {
            let mut cur: Option<&dyn std::error::Error> = Some(&e);
            while let Some(c) = cur {
                if c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
                {
                    return Healthz::Refused;
                }
                cur = c.source();
            }
            Healthz::Error(error_chain(&e))
        }
    }
}

/// The kubelet component from its `/healthz`. Pure.
pub fn judge_healthz(h: &Healthz) -> ComponentState {
    match h {
        Healthz::Timeout => state(
            Component::Kubelet.name(),
            Health::Failing,
            "healthz timeout",
            "kubelet /healthz did not answer within 2s",
        ),
        Healthz::Refused => state(
            Component::Kubelet.name(),
            Health::Failing,
            "not listening",
            "kubelet /healthz: connection refused (kubelet not running?)",
        ),
        Healthz::Error(e) => state(
            Component::Kubelet.name(),
            Health::Failing,
            "healthz error",
            &format!("kubelet /healthz: {e}"),
        ),
        Healthz::Answer { status: 200, body } if body.trim() == "ok" => state(Component::Kubelet.name(), Health::Ok, "healthy", ""),
        Healthz::Answer { status, body } => state(
            Component::Kubelet.name(),
            Health::Warning,
            "unhealthy",
            &format!("kubelet /healthz: HTTP {status}: {}", body.lines().next().unwrap_or("").trim()),
        ),
    }
}

pub async fn kubelet_healthz(addr: &str) -> ComponentState {
    judge_healthz(&read_healthz(addr).await)
}

/// The kubelet's client certificate (`kubelet-client-current.pem`): absent means the kubelet is
/// still bootstrapping, its CSR waiting for approval; a validity window that does not contain
/// now means a clock or rotation problem.
pub fn kubelet_cert(path: &std::path::Path, now_s: i64) -> ComponentState {
    let name = Component::KubeletCert.name();
    let pem = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return state(
                name,
                Health::Warning,
                state::BOOTSTRAPPING,
                &format!(
                    "{} absent: the kubelet's client CSR waits for approval (`oc get csr`, then `oc adm certificate approve`)",
                    path.display()
                ),
            )
        }
        Err(e) => return state(name, Health::Failing, "unreadable", &format!("{}: {e}", path.display())),
    };
    // The file holds the certificate and the key; the first CERTIFICATE block is the leaf.
    let cert = x509_parser::pem::Pem::iter_from_buffer(&pem)
        .flatten()
        .find(|p| p.label == "CERTIFICATE")
        .ok_or_else(|| "no CERTIFICATE block".to_string())
        .and_then(|p| {
            let (_, c) = x509_parser::parse_x509_certificate(&p.contents).map_err(|e| e.to_string())?;
            Ok((
                c.validity().not_before.timestamp(),
                c.validity().not_after.timestamp(),
                c.subject().to_string(),
            ))
        });
    let (nb, na, subject) = match cert {
        Ok(v) => v,
        Err(e) => return state(name, Health::Failing, "invalid", &format!("{}: {e}", path.display())),
    };
    let mut c = if now_s < nb {
        state(
            name,
            Health::Failing,
            state::NOT_YET_VALID,
            &format!(
                "valid only from {} s from now: this node's clock is behind (check chrony/NTP)",
                nb - now_s
            ),
        )
    } else if now_s >= na {
        state(
            name,
            Health::Failing,
            state::EXPIRED,
            &format!(
                "expired {} s ago: the kubelet could not rotate it (pending CSR?) or the clock is ahead",
                now_s - na
            ),
        )
    } else if na - now_s < 24 * 3600 {
        state(
            name,
            Health::Warning,
            state::EXPIRING,
            &format!("expires in {} h: its rotation CSR needs approval", (na - now_s) / 3600),
        )
    } else {
        state(name, Health::Ok, "valid", "")
    };
    c.details = std::collections::HashMap::from([
        ("subject".to_string(), subject),
        ("notBefore".to_string(), nb.to_string()),
        ("notAfter".to_string(), na.to_string()),
    ]);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthz_answers_judged() {
        let ok = judge_healthz(&Healthz::Answer {
            status: 200,
            body: "ok".into(),
        });
        assert_eq!((ok.health, ok.state.as_str()), (Health::Ok as i32, "healthy"));
        // What the kubelet says while a check fails (its /healthz lists the failed check).
        let bad = judge_healthz(&Healthz::Answer {
            status: 500,
            body: "[-]syncloop failed: reason withheld\nhealthz check failed\n".into(),
        });
        assert_eq!(bad.health, Health::Warning as i32);
        assert_eq!(bad.reason, "kubelet /healthz: HTTP 500: [-]syncloop failed: reason withheld");
        assert_eq!(judge_healthz(&Healthz::Refused).state, "not listening");
        assert_eq!(judge_healthz(&Healthz::Timeout).state, "healthz timeout");
    }

    /// Against real sockets: a closed port is "not listening", a server that accepts and never
    /// answers is a timeout, and an HTTP server's answer is read.
    #[tokio::test]
    async fn healthz_over_real_sockets() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap().to_string();
        drop(closed);
        assert_eq!(read_healthz(&addr).await, Healthz::Refused);
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap().to_string();
        let hold = tokio::spawn(async move {
            let (_s, _) = silent.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        assert_eq!(read_healthz(&addr).await, Healthz::Timeout);
        hold.abort();
        let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = server.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut s, _) = server.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok")
                .await;
        });
        assert_eq!(
            read_healthz(&addr).await,
            Healthz::Answer {
                status: 200,
                body: "ok".into()
            }
        );
    }
}
