//! The agent's unit probes against a real systemd (a user manager on its own D-Bus): a running
//! unit serving healthz, a crash-looping one whose NRestarts rises, a stopped one, a missing one;
//! and a unit stopping reaches the collector through the PropertiesChanged watch, long before
//! the next tick; a unit whose program is missing is named by its last failure (203/EXEC) in
//! every snapshot between its tries, each try reported as it happens, never a flood.

mod common;

use common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct UserSystemd {
    runtime: tempfile::TempDir,
    config: tempfile::TempDir,
    dbus_pid: i32,
    manager: Child,
}

impl UserSystemd {
    fn start(units: &[(&str, String)]) -> UserSystemd {
        std::fs::create_dir_all("/run/systemd/system").unwrap();
        let runtime = tempfile::tempdir().unwrap();
        let config = tempfile::tempdir().unwrap();
        let unit_dir = config.path().join("systemd/user");
        std::fs::create_dir_all(&unit_dir).unwrap();
        for (name, text) in units {
            std::fs::write(unit_dir.join(name), text).unwrap();
        }
        let bus = format!("unix:path={}/bus", runtime.path().display());
        let out = Command::new("dbus-daemon")
            .args(["--session", &format!("--address={bus}"), "--fork", "--print-pid"])
            .output()
            .unwrap();
        assert!(out.status.success(), "dbus-daemon: {}", text(&out.stderr));
        let dbus_pid: i32 = text(&out.stdout).trim().parse().unwrap();
        let manager = Command::new("/lib/systemd/systemd")
            .arg("--user")
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env("DBUS_SESSION_BUS_ADDRESS", &bus)
            .env("XDG_CONFIG_HOME", config.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let me = UserSystemd {
            runtime,
            config,
            dbus_pid,
            manager,
        };
        let start = Instant::now();
        while !me.systemctl(&["is-system-running"]).1.contains("running") && !me.systemctl(&["is-system-running"]).1.contains("degraded") {
            assert!(start.elapsed() < Duration::from_secs(15), "the user manager did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
        me
    }

    fn bus(&self) -> String {
        format!("unix:path={}/bus", self.runtime.path().display())
    }

    fn systemctl(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new("systemctl")
            .arg("--user")
            .args(args)
            .env("XDG_RUNTIME_DIR", self.runtime.path())
            .env("DBUS_SESSION_BUS_ADDRESS", self.bus())
            .env("XDG_CONFIG_HOME", self.config.path())
            .output()
            .unwrap();
        (out.status.success(), format!("{}{}", text(&out.stdout), text(&out.stderr)))
    }
}

impl Drop for UserSystemd {
    fn drop(&mut self) {
        // `exit` stops every unit the manager started (a session bus it may have activated too).
        let _ = self.systemctl(&["exit"]);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.manager.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.manager.kill();
        let _ = self.manager.wait();
        let _ = Command::new("kill").arg(self.dbus_pid.to_string()).status();
    }
}

const HEALTHZ: &str = r#"
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

fn units(script: &Path, port: u16) -> Vec<(&'static str, String)> {
    vec![
        (
            "kubelet.service",
            format!("[Service]\nExecStart=/usr/bin/env python3 {} {port}\n", script.display()),
        ),
        // Crash-loops forever: no start limit.
        (
            "crio.service",
            "[Unit]\nStartLimitIntervalSec=0\n[Service]\nExecStart=/bin/false\nRestart=always\nRestartSec=1\n".to_string(),
        ),
        ("stopped.service", "[Service]\nType=oneshot\nExecStart=/bin/true\n".to_string()),
    ]
}

fn component<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {v}"))
}

// One test, not two: two user managers started from one process share a cgroup, and stopping a
// unit in one would kill the other's.
/// A bundle, a user systemd running a healthy kubelet.service, and a collector for the bundle.
/// (Fields drop in order: the collector stops before the directories go.)
struct Stage {
    _collector: Kill,
    sd: UserSystemd,
    cport: u16,
    work: tempfile::TempDir,
    bundle: tempfile::TempDir,
}

impl Stage {
    fn new() -> Stage {
        let bundle = example_copy();
        create(bundle.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
        let work = tempfile::tempdir().unwrap();
        let script = work.path().join("healthz.py");
        std::fs::write(&script, HEALTHZ).unwrap();
        let sd = UserSystemd::start(&units(&script, free_port()));
        assert!(sd.systemctl(&["start", "kubelet.service"]).0);
        let cport = free_port();
        let _collector = collector(bundle.path(), cport);
        Stage {
            _collector,
            sd,
            cport,
            work,
            bundle,
        }
    }
}

#[test]
fn unit_probes_and_the_change_watch_against_a_real_systemd() {
    unit_states_from_a_real_systemd();
    a_stopped_unit_reaches_the_collector_before_the_next_tick();
    a_restarting_unit_is_named_by_its_last_failure_between_tries();
    a_bus_that_answers_late_is_used_once_it_answers();
}

/// An agent started before the bus answers (early in a slow boot: a TCG VM under load took more
/// than the 2 s the agent waits) connects when it does: the units were missing from every
/// report for the agent's life, and with them HS020 and HS022.
fn a_bus_that_answers_late_is_used_once_it_answers() {
    let st = Stage::new();
    let (dir, work, sd, cport) = (st.bundle.path(), &st.work, &st.sd, st.cport);
    let late = work.path().join("late-bus");
    let _agent = node_agent_on(
        dir,
        work.path(),
        cport,
        300,
        &format!("unix:path={}", late.display()),
        &["kubelet.service"],
    );
    let db = dir.join("collector/reports.db");
    let latest = || {
        let store = hardshift_collector::store::Store::read(&db).ok()?;
        store.reports("master-0").ok()?.last().map(|(_, r)| r.clone())
    };
    let start = Instant::now();
    let first = loop {
        if let Some(r) = latest() {
            break r;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no report");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        snapshot_of(&first, "kubelet.service").is_none(),
        "the bus answered before it existed"
    );
    // The bus answers now.
    std::os::unix::fs::symlink(sd.runtime.path().join("bus"), &late).unwrap();
    let start = Instant::now();
    loop {
        if let Some((state, ..)) = latest().and_then(|r| snapshot_of(&r, "kubelet.service")) {
            assert_eq!(state, "active/running");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the agent never used the bus that answered after it started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn unit_states_from_a_real_systemd() {
    let bin = agent_bin();
    let work = tempfile::tempdir().unwrap();
    let script = work.path().join("healthz.py");
    std::fs::write(&script, HEALTHZ).unwrap();
    let port = free_port();
    let sd = UserSystemd::start(&units(&script, port));
    let (ok, out) = sd.systemctl(&["start", "kubelet.service", "crio.service"]);
    assert!(ok, "{out}");
    let cfg = work.path().join("agent.toml");
    let mut c = probe_config("master-0");
    c.systemd_bus = sd.bus().to_string();
    c.kubelet_healthz = format!("127.0.0.1:{port}");
    c.units = ["kubelet.service", "crio.service", "stopped.service", "missing.service"]
        .map(String::from)
        .to_vec();
    write_agent_config(&cfg, &c);
    let status = || {
        let (ok, out) = run(bin.to_str().unwrap(), &["--config", cfg.to_str().unwrap(), "status", "--json"]);
        assert!(ok, "{out}");
        serde_json::from_str::<serde_json::Value>(out.lines().last().unwrap()).unwrap()
    };
    // Let the healthz server start and crio fail a few times.
    let start = Instant::now();
    loop {
        let v = status();
        if component(&v, "kubelet")["health"] == "ok"
            && component(&v, "crio.service")["details"]["NRestarts"]
                .as_str()
                .unwrap_or("0")
                .parse::<u32>()
                .unwrap_or(0)
                >= 2
        {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "units did not settle: {v}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let v = status();
    let k = component(&v, "kubelet.service");
    assert_eq!(
        (k["state"].as_str(), k["health"].as_str()),
        (Some("active/running"), Some("ok")),
        "{k}"
    );
    // "since": the unit's last state change, in unix seconds, within this test's lifetime.
    let since: u64 = k["details"]["since"].as_str().unwrap().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(since > 0 && since <= now && now - since < 300, "since {since}, now {now}: {k}");
    let c = component(&v, "crio.service");
    assert_eq!(c["health"], "failing", "{c}");
    assert!(
        c["reason"].as_str().unwrap().contains("crash-looping") || c["state"] == "activating/auto-restart",
        "{c}"
    );
    let n1: u32 = c["details"]["NRestarts"].as_str().unwrap().parse().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let n2: u32 = component(&status(), "crio.service")["details"]["NRestarts"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(n2 > n1, "NRestarts must rise: {n1} then {n2}");
    let s = component(&v, "stopped.service");
    assert_eq!(
        (s["state"].as_str(), s["health"].as_str()),
        (Some("inactive/dead"), Some("failing")),
        "{s}"
    );
    assert_eq!(component(&v, "missing.service")["health"], "absent");
}

fn a_stopped_unit_reaches_the_collector_before_the_next_tick() {
    let st = Stage::new();
    let (dir, work, sd, cport) = (st.bundle.path(), &st.work, &st.sd, st.cport);
    // One report a minute: only the watch can bring the change sooner. As on master-0, its
    // hostname is its name (else HS070, a wrong hostname, is the cause).
    let _agent = node_agent(dir, work.path(), cport, 60000, sd, &["kubelet.service"]);
    let events = || {
        let out = hardshift(&["events", "master-0", "--dir", dir.to_str().unwrap(), "-o", "json"]);
        serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).unwrap_or_default()
    };
    let start = Instant::now();
    while !events()
        .iter()
        .any(|e| e["component"] == "kubelet.service" && e["to"] == "active/running")
    {
        assert!(start.elapsed() < Duration::from_secs(30), "no first report");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The kubelet runs but has no client certificate here: its CSR waits (HS030).
    let diagnose = || {
        let out = hardshift(&["diagnose", "master-0", "--dir", dir.to_str().unwrap(), "-o", "json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let f: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        f.iter().map(|x| x["id"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    let before = diagnose();
    assert!(before.contains(&"HS030".to_string()), "{before:?}");
    let stopped_at = Instant::now();
    assert!(sd.systemctl(&["stop", "kubelet.service"]).0);
    while !events()
        .iter()
        .any(|e| e["component"] == "kubelet.service" && e["from"] == "active/running")
    {
        assert!(
            stopped_at.elapsed() < Duration::from_secs(30),
            "the stop was not reported before the next tick (60 s)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("kubelet.service stop known to the collector after {:?}", stopped_at.elapsed());
    // Before: status said both "kubelet not running" and "the CSR waits for approval". The
    // stopped unit is the cause; the waiting CSR and the silent /healthz are its consequences.
    let after = diagnose();
    assert_eq!(after.first().map(String::as_str), Some("HS020"), "{after:?}");
    assert!(!after.iter().any(|id| id == "HS030" || id == "HS021"), "{after:?}");
    let status = hardshift(&["status", "--dir", dir.to_str().unwrap()]);
    assert!(
        text(&status.stdout).contains("CAUSE HS020 kubelet.service is not running"),
        "{}",
        text(&status.stdout)
    );
}

/// `master-0`'s agent for bundle `dir`, reporting to the collector on `cport` every
/// `interval_ms`, watching `units` on the bus of `sd`. Its hostname is its name.
fn node_agent(dir: &Path, work: &Path, cport: u16, interval_ms: u64, sd: &UserSystemd, units: &[&str]) -> Kill {
    node_agent_on(dir, work, cport, interval_ms, &sd.bus(), units)
}

/// `node_agent` on the bus at `bus`.
fn node_agent_on(dir: &Path, work: &Path, cport: u16, interval_ms: u64, bus: &str, units: &[&str]) -> Kill {
    let cfg = work.join("agent.toml");
    let pki = dir.join("agent-pki");
    let mut c = agent_config(cport, "master-0", &pki, "master-0");
    c.interval_ms = interval_ms;
    c.systemd_bus = bus.to_string();
    c.units = units.iter().map(|u| u.to_string()).collect();
    c.state_dir = work.join("agent-state");
    write_agent_config(&cfg, &c);
    Kill(
        Command::new("unshare")
            .args(["--uts", "sh", "-c", "hostname master-0 && exec \"$0\" \"$@\""])
            .arg(agent_bin())
            .args(["--config", cfg.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// A unit's snapshot in one stored report: (state, Result, ExecMainStatus, NRestarts).
fn snapshot_of(r: &hardshift_proto::v1::NodeReport, unit: &str) -> Option<(String, String, String, u32)> {
    let c = r.components.iter().find(|c| c.name == unit)?;
    let d = |k: &str| c.details.get(k).cloned().unwrap_or_default();
    Some((
        c.state.clone(),
        d("Result"),
        d("ExecMainStatus"),
        d("NRestarts").parse().unwrap_or(0),
    ))
}

/// As a real node's kubelet without its program: `activating/auto-restart` with 203/EXEC, then
/// `activating/start-pre` (ExecMainStatus and Result reset by systemd) on every try. Only the
/// watch brings reports here (one a minute otherwise): each SubState change is one, at most one
/// a second. Every snapshot after the first failure names it, whichever moment it caught.
/// `start-pre` lasts 2 s, longer than that second: the change that ends the quiet gap is
/// reported at once (the try failing), and the ones within it a second later (in `start-pre`).
fn a_restarting_unit_is_named_by_its_last_failure_between_tries() {
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let dir = d.path();
    let work = tempfile::tempdir().unwrap();
    let unit = "kubelet.service";
    let sd = UserSystemd::start(&[(
        unit,
        "[Unit]\nStartLimitIntervalSec=0\n[Service]\nType=notify\nExecStartPre=/bin/sleep 2\nExecStart=/nonexistent/kubelet\nRestart=always\nRestartSec=0.2\n".to_string(),
    )]);
    let cport = free_port();
    let _col = collector(dir, cport);
    let started = Instant::now();
    let _agent = node_agent(dir, work.path(), cport, 60_000, &sd, &[unit]);
    assert!(sd.systemctl(&["start", "--no-block", unit]).0);
    let db = dir.join("collector/reports.db");
    // The unit's snapshots from its first failure on, in the order the agent took them.
    let after_failure = || {
        let Ok(store) = hardshift_collector::store::Store::read(&db) else {
            return (0, vec![]);
        };
        let reports = store.reports("master-0").unwrap_or_default();
        let snaps: Vec<_> = reports.iter().filter_map(|(_, r)| snapshot_of(r, unit)).collect();
        let first = snaps.iter().position(|(_, result, _, _)| result != "success" && !result.is_empty());
        (reports.len(), first.map(|i| snaps[i..].to_vec()).unwrap_or_default())
    };
    let count = |snaps: &[(String, String, String, u32)], state: &str| snaps.iter().filter(|s| s.0 == state).count();
    let start = Instant::now();
    loop {
        let (_, snaps) = after_failure();
        // ActiveState stays `activating` through the loop: only SubState changes bring these.
        if count(&snaps, "activating/start-pre") >= 3 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no report of the tries (start-pre) after the first failure: {snaps:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (n, snaps) = after_failure();
    let elapsed = started.elapsed();
    eprintln!("{n} reports in {elapsed:?}; from the first failure on: {snaps:?}");
    for s in &snaps {
        assert!(
            s.1 == "exit-code" && s.2 == "203",
            "a snapshot between tries lost the last failure (Result exit-code, ExecMainStatus 203): {s:?} in {snaps:?}"
        );
    }
    // At most one report a second for the unit's changes, and the agent's first.
    assert!(
        (n as u64) <= elapsed.as_secs() + 2,
        "{n} reports in {elapsed:?}: a crash-looping unit floods"
    );
}
