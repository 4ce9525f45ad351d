//! Unit states over D-Bus (org.freedesktop.systemd1): ActiveState/SubState on the Unit interface,
//! NRestarts/Result/ExecMainStatus on the Service interface; and a watch on ActiveState and
//! SubState changes so a failing kubelet or crio is reported at once (at most once a second per
//! unit), not at the next tick.
//!
//! systemd forgets a failure when it tries the unit again: each start (a restart too) resets
//! Result, ExecMainCode/ExecMainStatus and the InvocationID, so between two tries of a unit whose
//! program is missing (`activating/start-pre`, `activating/start`) nothing it exposes says 203.
//! The agent remembers each unit's last failure (seen by a probe or announced by the watch) and
//! reports it while systemd is restarting the unit after it.

use futures_util::StreamExt;
use hardshift_proto::v1::{ComponentState, Health};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use zbus::fdo::PropertiesProxy;
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
    /// This run's InvocationID (hex; systemd gives each start a new one).
    pub invocation: String,
    /// `result` and `status` are the last failed run's, remembered: systemd reset its own.
    pub remembered: bool,
}

/// A unit's failed run: its Result and ExecMainStatus, and NRestarts and InvocationID while it
/// was current.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub result: String,
    pub status: i32,
    pub restarts: u32,
    pub invocation: String,
}

/// Each watched unit's last failure, shared by the probes and the watch (which sees failures
/// between two reports).
static LAST_FAILURE: Mutex<BTreeMap<String, Failure>> = Mutex::new(BTreeMap::new());

/// Update what is remembered of a unit's last failure from what systemd says now. Pure.
///
/// A failure is kept until another run of the unit is `active` (a later InvocationID; a read
/// of the failed run itself, late, forgets nothing) or a new sequence of tries begins
/// (NRestarts flushed by a manual start).
pub fn remember(last: &mut Option<Failure>, raw: &Raw) {
    // Result alone says whether the run failed: ExecMainStatus can be non-zero in a success
    // (SuccessExitStatus=), and the properties are read one by one, so a read that spans a try
    // failing sees Result `success` with the new ExecMainStatus (203): not a failure of its own.
    if raw.result != "success" && !raw.result.is_empty() {
        *last = Some(Failure {
            result: raw.result.clone(),
            status: raw.status,
            restarts: raw.restarts,
            invocation: raw.invocation.clone(),
        });
        return;
    }
    let another_run = |f: &Failure| match raw.invocation.is_empty() || f.invocation.is_empty() {
        true => raw.restarts > f.restarts,
        false => raw.invocation != f.invocation,
    };
    let over = last
        .as_ref()
        .is_some_and(|f| raw.restarts < f.restarts || (raw.active == "active" && another_run(f)));
    if over {
        *last = None;
    }
}

/// What systemd says, with the last failure put back while systemd restarts the unit after it
/// (`activating`, NRestarts > 0, its own Result and ExecMainStatus reset to success and 0).
/// The collector reads Result and ExecMainStatus: a snapshot taken between two tries names the
/// failure (203/EXEC: the program is missing) as one taken in `auto-restart` does. Pure.
pub fn recall(mut raw: Raw, last: Option<&Failure>) -> Raw {
    let reset = raw.result == "success";
    if let Some(f) = last.filter(|f| raw.active == "activating" && reset && raw.restarts > 0 && f.restarts <= raw.restarts) {
        raw.result = f.result.clone();
        raw.status = f.status;
        raw.remembered = true;
    }
    raw
}

/// Remember what `raw` says of `unit`, and put back its last failure if systemd forgot it.
fn note(unit: &str, raw: Raw) -> Raw {
    let Ok(mut all) = LAST_FAILURE.lock() else { return raw };
    let mut last = all.remove(unit);
    remember(&mut last, &raw);
    let raw = recall(raw, last.as_ref());
    if let Some(f) = last {
        all.insert(unit.to_string(), f);
    }
    raw
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
        invocation: hex(&u.invocation_id().await.unwrap_or_default()),
        remembered: false,
    })
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The state of one unit as a component: read, then judged.
pub async fn unit(conn: &Connection, unit: &str) -> ComponentState {
    let raw = match tokio::time::timeout(TIMEOUT, read(conn, unit)).await {
        Err(_) => Err(anyhow::anyhow!("systemd did not answer within 2s")),
        Ok(Err(e)) => Err(anyhow::anyhow!("D-Bus: {e}")),
        Ok(Ok(r)) => Ok(note(unit, r)),
    };
    judge(unit, &raw)
}

/// A unit's component from what systemd said (or why it said nothing). Pure.
pub fn judge(unit: &str, raw: &anyhow::Result<Raw>) -> ComponentState {
    let mut c = ComponentState {
        name: unit.to_string(),
        ..Default::default()
    };
    let raw = match raw {
        Err(e) => {
            c.health = Health::Unknown as i32;
            c.reason = format!("{e:#}");
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
    if raw.remembered {
        c.details.insert(
            "Remembered".to_string(),
            "Result and ExecMainStatus are the last failed run's (systemd resets them at a restart)".to_string(),
        );
    }
    let (health, reason) = match (raw.load.as_str(), raw.active.as_str(), raw.sub.as_str()) {
        ("not-found", _, _) => (Health::Absent, "unit not found".to_string()),
        (_, "active", _) if raw.restarts > 0 => (Health::Warning, format!("running, but restarted {} times", raw.restarts)),
        (_, "active", _) => (Health::Ok, String::new()),
        (_, "activating", sub) if sub == "auto-restart" || raw.remembered => (
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

/// At most one report a second per unit for its state changes: a unit restarting every 100 ms
/// is not a report every 100 ms.
const REPORT_GAP: Duration = Duration::from_secs(1);

/// When a unit's state changes wake the reporter: the first change after a quiet `gap` at once,
/// later ones together once the gap has passed since the last wake (never dropped: the last
/// state is always reported). Pure: the caller says what time it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Debounce {
    last: Option<Instant>,
    /// A wake owed for changes within the gap, and when.
    pub pending: Option<Instant>,
}

impl Debounce {
    /// A change seen at `now`: whether to wake the reporter now (else a wake is pending).
    pub fn change(&mut self, now: Instant, gap: Duration) -> bool {
        match self.last {
            Some(l) if now < l + gap => {
                self.pending.get_or_insert(l + gap);
                false
            }
            _ => {
                (self.last, self.pending) = (Some(now), None);
                true
            }
        }
    }

    /// The clock at `now`: whether a pending wake is due (and is now the last).
    pub fn due(&mut self, now: Instant) -> bool {
        match self.pending {
            Some(at) if now >= at => {
                (self.last, self.pending) = (Some(now), None);
                true
            }
            _ => false,
        }
    }
}

/// Apply the properties a PropertiesChanged signal carries to what is known of a unit.
fn merge(raw: &mut Raw, changed: &HashMap<&str, zbus::Variant<'_>>) {
    use zbus::Variant;
    for (name, v) in changed {
        match (*name, v) {
            ("ActiveState", Variant::Str(x)) => raw.active = x.to_string(),
            ("SubState", Variant::Str(x)) => raw.sub = x.to_string(),
            ("Result", Variant::Str(x)) => raw.result = x.to_string(),
            ("ExecMainStatus", Variant::I32(n)) => raw.status = *n,
            ("NRestarts", Variant::U32(n)) => raw.restarts = *n,
            ("InvocationID", Variant::Array(a)) => {
                let id: Vec<u8> = a
                    .iter()
                    .filter_map(|b| if let Variant::U8(b) = b { Some(*b) } else { None })
                    .collect();
                raw.invocation = hex(&id);
            }
            _ => {}
        }
    }
}

/// Wake `changed` whenever one of `units` changes ActiveState or SubState (PropertiesChanged,
/// debounced per unit), and remember every failure systemd announces, however brief.
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
        tasks.push(tokio::spawn(watch_unit(conn.clone(), name, changed.clone())));
    }
    for t in tasks {
        let _ = t.await;
    }
}

async fn watch_unit(conn: Connection, name: String, changed: Arc<Notify>) {
    let Ok(m) = ManagerProxy::new(&conn).await else { return };
    let Ok(path) = m.load_unit(name.clone()).await else { return };
    let props = PropertiesProxy::builder(&conn)
        .destination("org.freedesktop.systemd1")
        .path(path)
        .cache_properties(CacheProperties::No)
        .build()
        .await;
    let Ok(props) = props else { return };
    let Ok(mut signals) = props.receive_properties_changed().await else {
        return;
    };
    // Listening first, then the unit as it is: no change falls in between.
    let mut now = read(&conn, &name).await.unwrap_or_default();
    note(&name, now.clone());
    let mut gate = Debounce::default();
    loop {
        let pending = gate.pending;
        let wake = tokio::select! {
            s = signals.next() => {
                let Some(s) = s else { return };
                let Ok(args) = s.args() else { continue };
                let before = (now.active.clone(), now.sub.clone());
                merge(&mut now, args.changed_properties());
                note(&name, now.clone());
                (now.active != before.0 || now.sub != before.1) && gate.change(Instant::now(), REPORT_GAP)
            }
            _ = tokio::time::sleep_until(pending.unwrap_or_else(Instant::now)), if pending.is_some() => gate.due(Instant::now()),
        };
        if wake {
            changed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(load: &str, active: &str, sub: &str, restarts: u32, result: &str, status: i32) -> anyhow::Result<Raw> {
        Ok(Raw {
            load: load.into(),
            active: active.into(),
            sub: sub.into(),
            restarts,
            result: result.into(),
            status,
            since_us: 1_764_160_000_000_000,
            invocation: String::new(),
            remembered: false,
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
        let silent = judge("kubelet.service", &Err(anyhow::anyhow!("systemd did not answer within 2s")));
        assert_eq!(
            (silent.health, silent.reason.as_str()),
            (Health::Unknown as i32, "systemd did not answer within 2s")
        );
    }

    /// Run `invocation` of a unit, as systemd says it.
    fn at(invocation: &str, active: &str, sub: &str, restarts: u32, result: &str, status: i32) -> Raw {
        Raw {
            invocation: invocation.into(),
            ..raw("loaded", active, sub, restarts, result, status).unwrap()
        }
    }

    /// A unit whose program is missing, as a real systemd 252 showed it (`systemctl show`):
    /// each try resets Result and ExecMainStatus and has a new InvocationID, NRestarts counts
    /// on. Every snapshot after the first failure names it; another run, or a new sequence of
    /// tries, forgets it.
    #[test]
    fn the_last_failure_survives_the_next_try() {
        let failed = Some(("exit-code", 203, false));
        let recalled = Some(("exit-code", 203, true));
        let tries = [
            (at("a", "activating", "start-pre", 0, "success", 0), None),
            (at("a", "activating", "auto-restart", 0, "exit-code", 203), failed),
            (at("b", "activating", "start-pre", 1, "success", 0), recalled),
            (at("b", "activating", "start", 1, "success", 0), recalled),
            (at("b", "activating", "auto-restart", 1, "exit-code", 203), failed),
            (at("c", "activating", "start-pre", 2, "success", 0), recalled),
        ];
        let mut last = None;
        for (now, want) in tries {
            remember(&mut last, &now);
            let seen = recall(now.clone(), last.as_ref());
            let got = (seen.result != "success").then_some((seen.result.as_str(), seen.status, seen.remembered));
            assert_eq!(got, want, "{now:?}");
            let c = judge("kubelet.service", &Ok(seen));
            if let Some((_, _, remembered)) = want {
                assert_eq!(c.health, Health::Failing as i32, "{c:?}");
                assert!(c.reason.contains("exit status 203"), "{c:?}");
                assert_eq!(c.details["ExecMainStatus"], "203");
                assert_eq!(c.details.contains_key("Remembered"), remembered, "{c:?}");
            }
        }
        // A late read of the run that failed (Type=simple: active a moment) forgets nothing.
        remember(&mut last, &at("b", "active", "running", 1, "success", 0));
        assert!(last.is_some());
        // Another run is active: the failure is history.
        remember(&mut last, &at("c", "active", "running", 2, "success", 0));
        assert_eq!(last, None);
        // Failed once, then started by hand (NRestarts stays 0) and running: forgotten, so a
        // later clean exit and restart (Restart=always) is not blamed on it.
        let mut last = None;
        remember(&mut last, &at("a", "activating", "auto-restart", 0, "exit-code", 203));
        remember(&mut last, &at("b", "active", "running", 0, "success", 0));
        assert_eq!(last, None);
        // A manual start during a loop flushes NRestarts: a new sequence, nothing to recall.
        let mut last = None;
        remember(&mut last, &at("d", "activating", "auto-restart", 4, "exit-code", 203));
        remember(&mut last, &at("e", "activating", "start", 0, "success", 0));
        assert_eq!(last, None);
        // Without InvocationIDs, NRestarts tells the runs apart.
        let mut last = None;
        remember(&mut last, &at("", "activating", "auto-restart", 1, "exit-code", 203));
        remember(&mut last, &at("", "active", "running", 1, "success", 0));
        assert!(last.is_some());
        remember(&mut last, &at("", "active", "running", 2, "success", 0));
        assert_eq!(last, None);
        // A read spanning a try's failure (Result read before it, ExecMainStatus after) is not
        // a failure of its own, and the one remembered is what it shows.
        let mut last = None;
        remember(&mut last, &at("a", "activating", "auto-restart", 1, "exit-code", 203));
        let mixed = at("b", "activating", "start", 2, "success", 203);
        remember(&mut last, &mixed);
        assert_eq!(last.as_ref().map(|f| (f.result.as_str(), f.restarts)), Some(("exit-code", 1)));
        let seen = recall(mixed, last.as_ref());
        assert_eq!((seen.result.as_str(), seen.status, seen.remembered), ("exit-code", 203, true));
        // Never failed: a starting unit stays "starting".
        let fresh = recall(at("a", "activating", "start", 0, "success", 0), None);
        assert_eq!(judge("kubelet.service", &Ok(fresh)).reason, "starting");
        // An ExecStartPre that failed (status 0, Result exit-code) is a failure too.
        let mut last = None;
        remember(&mut last, &at("a", "activating", "auto-restart", 0, "exit-code", 0));
        let r = recall(at("b", "activating", "start-pre", 1, "success", 0), last.as_ref());
        assert_eq!((r.result.as_str(), r.remembered), ("exit-code", true));
    }

    /// A unit changing state every 100 ms wakes the reporter at once, then once a second with
    /// its latest state, never more; a change after a quiet second is reported at once.
    #[test]
    fn state_changes_wake_the_reporter_at_most_once_a_second() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let gap = Duration::from_secs(1);
        let mut g = Debounce::default();
        assert!(g.change(ms(0), gap), "the first change is reported at once");
        assert_eq!(g.pending, None);
        let mut wakes = vec![0];
        for n in (100..=3000).step_by(100) {
            if g.due(ms(n)) {
                wakes.push(n);
            }
            if g.change(ms(n), gap) {
                wakes.push(n);
            }
        }
        assert_eq!(wakes, vec![0, 1000, 2000, 3000]);
        // The change at 3000 came with the wake at 3000: owed at 4000, not dropped; more
        // changes before then are the same wake.
        assert_eq!(g.pending, Some(ms(4000)));
        assert!(!g.change(ms(3500), gap));
        assert_eq!(g.pending, Some(ms(4000)));
        assert!(!g.due(ms(3999)));
        assert!(g.due(ms(4000)));
        assert_eq!(g.pending, None);
        // Quiet for more than a gap: at once again.
        assert!(g.change(ms(5200), gap));
    }
}
