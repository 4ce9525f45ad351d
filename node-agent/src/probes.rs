//! Component probes. Each has a timeout: a hung component never hangs the agent.

use hardshift_proto::v1::{ComponentState, Health};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// `GET /healthz` on the kubelet's local health port.
pub async fn kubelet_healthz(addr: &str) -> ComponentState {
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(b"GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n").await?;
        let mut buf = Vec::new();
        s.take(4096).read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&buf).to_string())
    };
    match tokio::time::timeout(TIMEOUT, attempt).await {
        Err(_) => state(
            "kubelet",
            Health::Failing,
            "healthz timeout",
            "kubelet /healthz did not answer within 2s",
        ),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => state(
            "kubelet",
            Health::Failing,
            "not listening",
            "kubelet /healthz: connection refused (kubelet not running?)",
        ),
        Ok(Err(e)) => state("kubelet", Health::Failing, "healthz error", &format!("kubelet /healthz: {e}")),
        Ok(Ok(resp)) => {
            let ok = resp.starts_with("HTTP/1.1 200") || resp.starts_with("HTTP/1.0 200");
            let body = resp.split("\r\n\r\n").nth(1).unwrap_or("").trim().to_string();
            if ok && body == "ok" {
                state("kubelet", Health::Ok, "healthy", "")
            } else {
                state(
                    "kubelet",
                    Health::Warning,
                    "unhealthy",
                    &format!("kubelet /healthz: {}", resp.lines().next().unwrap_or("")),
                )
            }
        }
    }
}

/// The kubelet's client certificate (`kubelet-client-current.pem`): absent means the kubelet is
/// still bootstrapping, its CSR waiting for approval; a validity window that does not contain
/// now means a clock or rotation problem.
pub fn kubelet_cert(path: &std::path::Path, now_s: i64) -> ComponentState {
    let name = "kubelet-cert";
    let pem = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return state(
                name,
                Health::Warning,
                "bootstrapping",
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
            "not yet valid",
            &format!(
                "valid only from {} s from now: this node's clock is behind (check chrony/NTP)",
                nb - now_s
            ),
        )
    } else if now_s >= na {
        state(
            name,
            Health::Failing,
            "expired",
            &format!(
                "expired {} s ago: the kubelet could not rotate it (pending CSR?) or the clock is ahead",
                now_s - na
            ),
        )
    } else if na - now_s < 24 * 3600 {
        state(
            name,
            Health::Warning,
            "expiring",
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
