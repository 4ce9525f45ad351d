//! Unit states over D-Bus (org.freedesktop.systemd1): ActiveState/SubState on the Unit interface,
//! NRestarts/Result/ExecMainStatus on the Service interface; and a watch on ActiveState changes so a
//! failing kubelet or crio is reported at once, not at the next tick.

use futures_util::StreamExt;
use hardshift_proto::v1::{ComponentState, Health};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use zbus::proxy::CacheProperties;
use zbus::Connection;
use zbus_systemd::systemd1::{ManagerProxy, ServiceProxy, UnitProxy};

const TIMEOUT: Duration = Duration::from_secs(2);

/// `system`, `session`, or a D-Bus address (`unix:path=...`).
pub async fn connect(bus: &str) -> zbus::Result<Connection> {
    match bus {
        "system" => Connection::system().await,
        "session" => Connection::session().await,
        addr => zbus::connection::Builder::address(addr).build().await,
    }
}

/// What systemd says of one unit: the properties read over D-Bus.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Raw {
    pub load: String,
    pub active: String,
    pub sub: String,
    pub restarts: u32,
    pub result: String,
    pub status: i32,
    /// When the unit last changed state, µs since the epoch (0: never).
    pub since_us: u64,
}

async fn read(conn: &Connection, unit: &str) -> zbus::Result<Raw> {
    let path = ManagerProxy::new(conn).await?.load_unit(unit.to_string()).await?;
    let u = UnitProxy::builder(conn)
        .path(path.clone())
        .cache_properties(CacheProperties::No)
        .build()
        .await?;
    let s = ServiceProxy::builder(conn)
        .path(path)
        .cache_properties(CacheProperties::No)
        .build()
        .await?;
    Ok(Raw {
        load: u.load_state().await?,
        active: u.active_state().await?,
        sub: u.sub_state().await?,
        restarts: s.n_restarts().await.unwrap_or(0),
        result: s.result().await.unwrap_or_default(),
        status: s.exec_main_status().await.unwrap_or(0),
        since_us: u.state_change_timestamp().await.unwrap_or(0),
    })
}

/// The state of one unit as a component: read, then judged.
pub async fn unit(conn: &Connection, unit: &str) -> ComponentState {
    let raw = match tokio::time::timeout(TIMEOUT, read(conn, unit)).await {
        Err(_) => Err("systemd did not answer within 2s".to_string()),
        Ok(Err(e)) => Err(format!("D-Bus: {e}")),
        Ok(Ok(r)) => Ok(r),
    };
    judge(unit, &raw)
}

/// A unit's component from what systemd said (or why it said nothing). Pure.
pub fn judge(unit: &str, raw: &Result<Raw, String>) -> ComponentState {
    let mut c = ComponentState {
        name: unit.to_string(),
        ..Default::default()
    };
    let raw = match raw {
        Err(e) => {
            c.health = Health::Unknown as i32;
            c.reason = e.clone();
            return c;
        }
        Ok(r) => r,
    };
    c.state = format!("{}/{}", raw.active, raw.sub);
    c.details = BTreeMap::from([
        ("NRestarts".to_string(), raw.restarts.to_string()),
        ("Result".to_string(), raw.result.clone()),
        ("ExecMainStatus".to_string(), raw.status.to_string()),
        // Unix seconds of the last state change: "failed since 09:14", "running for 3 s".
        ("since".to_string(), (raw.since_us / 1_000_000).to_string()),
    ])
    .into_iter()
    .collect();
    let (health, reason) = match (raw.load.as_str(), raw.active.as_str(), raw.sub.as_str()) {
        ("not-found", _, _) => (Health::Absent, "unit not found".to_string()),
        (_, "active", _) if raw.restarts > 0 => (Health::Warning, format!("running, but restarted {} times", raw.restarts)),
        (_, "active", _) => (Health::Ok, String::new()),
        (_, "activating", "auto-restart") => (
            Health::Failing,
            format!(
                "crash-looping: {} restarts, last result {} (exit status {})",
                raw.restarts, raw.result, raw.status
            ),
        ),
        (_, "activating", _) | (_, "reloading", _) => (Health::Warning, "starting".to_string()),
        (_, "failed", _) => (
            Health::Failing,
            format!("failed: result {} (exit status {})", raw.result, raw.status),
        ),
        _ => (Health::Failing, "not running".to_string()),
    };
    c.health = health as i32;
    c.reason = reason;
    c
}

/// Wake `changed` whenever one of `units` changes ActiveState (PropertiesChanged).
pub async fn watch(conn: Connection, units: Vec<String>, changed: Arc<Notify>) {
    // systemd sends unit signals only to clients that subscribed.
    match ManagerProxy::new(&conn).await {
        Ok(m) => {
            if let Err(e) = m.subscribe().await {
                tracing::warn!("systemd Subscribe: {e}; unit changes wait for the next tick");
            }
        }
        Err(e) => tracing::warn!("systemd: {e}"),
    }
    let mut tasks = Vec::new();
    for name in units {
        let (conn, changed) = (conn.clone(), changed.clone());
        tasks.push(tokio::spawn(async move {
            let Ok(m) = ManagerProxy::new(&conn).await else { return };
            let Ok(path) = m.load_unit(name.clone()).await else { return };
            let Ok(u) = UnitProxy::builder(&conn).path(path).build().await else {
                return;
            };
            let mut stream = u.receive_active_state_changed().await;
            while stream.next().await.is_some() {
                changed.notify_one();
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(load: &str, active: &str, sub: &str, restarts: u32, result: &str, status: i32) -> Result<Raw, String> {
        Ok(Raw {
            load: load.into(),
            active: active.into(),
            sub: sub.into(),
            restarts,
            result: result.into(),
            status,
            since_us: 1_764_160_000_000_000,
        })
    }

    /// The properties systemd reports in each case (as `systemctl show` prints them).
    #[test]
    fn recorded_unit_states() {
        let ok = judge("kubelet.service", &raw("loaded", "active", "running", 0, "success", 0));
        assert_eq!((ok.health, ok.state.as_str()), (Health::Ok as i32, "active/running"));
        assert_eq!(ok.details["since"], "1764160000");
        let loop_ = judge("kubelet.service", &raw("loaded", "activating", "auto-restart", 7, "exit-code", 1));
        assert_eq!(loop_.health, Health::Failing as i32);
        assert_eq!(loop_.reason, "crash-looping: 7 restarts, last result exit-code (exit status 1)");
        let failed = judge("crio.service", &raw("loaded", "failed", "failed", 0, "exit-code", 2));
        assert_eq!(failed.reason, "failed: result exit-code (exit status 2)");
        let restarted = judge("crio.service", &raw("loaded", "active", "running", 2, "success", 0));
        assert_eq!(restarted.health, Health::Warning as i32);
        let missing = judge("bootkube.service", &raw("not-found", "inactive", "dead", 0, "success", 0));
        assert_eq!(missing.health, Health::Absent as i32);
        let stopped = judge("kubelet.service", &raw("loaded", "inactive", "dead", 0, "success", 0));
        assert_eq!((stopped.health, stopped.reason.as_str()), (Health::Failing as i32, "not running"));
        let starting = judge("kubelet.service", &raw("loaded", "activating", "start", 0, "success", 0));
        assert_eq!(starting.health, Health::Warning as i32);
        let silent = judge("kubelet.service", &Err("systemd did not answer within 2s".into()));
        assert_eq!(
            (silent.health, silent.reason.as_str()),
            (Health::Unknown as i32, "systemd did not answer within 2s")
        );
    }
}
