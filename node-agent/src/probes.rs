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
