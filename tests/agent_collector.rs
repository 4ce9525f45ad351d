//! The real collector and real agents on loopback with the bundle's certificates: reports arrive;
//! the collector killed with SIGKILL for 30 s and restarted loses nothing acknowledged and stores
//! nothing twice; impersonation, another CA and no certificate are all refused.

mod common;

use common::*;
use hardshift_agent_config::AgentToml;
use hardshift_collector::store::Store;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// An agent reporting as `node` with the certificate of `cert_of` from bundle `pki_dir`.
fn agent(dir: &Path, port: u16, node: &str, cert_of: &str, pki_dir: &Path) -> (Kill, PathBuf) {
    agent_with(dir, port, node, cert_of, pki_dir, |_| {})
}

fn agent_with(dir: &Path, port: u16, node: &str, cert_of: &str, pki_dir: &Path, extra: impl FnOnce(&mut AgentToml)) -> (Kill, PathBuf) {
    let cfg = dir.join(format!("agent-{node}-{cert_of}.toml"));
    let mut c = agent_config(port, node, pki_dir, cert_of);
    c.role = "master".into();
    c.interval_ms = 100;
    c.state_dir = state_dir(dir, node, cert_of);
    extra(&mut c);
    write_agent_config(&cfg, &c);
    let log_path = dir.join(format!("agent-{node}-{cert_of}.log"));
    let log = std::fs::File::create(&log_path).unwrap();
    let bin = agent_bin();
    let p = Command::new(bin)
        .args(["--config", cfg.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("hardshift-agent built");
    (Kill(p), log_path)
}

/// Where the agent keeps its last seq (the default, /run/hardshift-agent, is one per machine).
fn state_dir(dir: &Path, node: &str, cert_of: &str) -> PathBuf {
    dir.join(format!("agent-state-{node}-{cert_of}"))
}

fn db(dir: &Path) -> Store {
    Store::open(&dir.join("collector/reports.db")).unwrap()
}

#[test]
fn reports_survive_a_killed_collector_and_identities_are_enforced() {
    agent_bin();

    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let dir = d.path();
    let pki_dir = dir.join("agent-pki");
    let port = free_port();
    let mut col = collector(dir, port);
    let nodes = ["bootstrap", "master-0", "worker-0"];
    let agents: Vec<_> = nodes.iter().map(|n| agent(dir, port, n, n, &pki_dir)).collect();
    wait_for("reports from every agent", 120, || {
        dir.join("collector/reports.db").exists() && nodes.iter().all(|n| stored(dir, n).len() >= 10)
    });

    // SIGKILL the collector for 30 s; the agents keep probing into their outboxes.
    let before: Vec<u64> = nodes.iter().map(|n| *stored(dir, n).last().unwrap()).collect();
    col.0.kill().unwrap();
    col.0.wait().unwrap();
    std::thread::sleep(Duration::from_secs(30));
    let _col = collector(dir, port);
    // Each agent resends what was never acknowledged; 30 s at 10 reports/s is ~300 each.
    wait_for("the backlog after the restart", 180, || {
        nodes.iter().zip(&before).all(|(n, b)| stored(dir, n).len() as u64 >= b + 300)
    });
    drop(agents);
    for n in nodes {
        let seqs = stored(dir, n);
        let expect: Vec<u64> = (1..=*seqs.last().unwrap()).collect();
        assert_eq!(seqs, expect, "{n}: every report of this boot exactly once, no gaps");
    }

    // Impersonation: master-0's certificate claiming to be master-1.
    let (_imp, imp_log) = agent(dir, port, "master-1", "master-0", &pki_dir);
    // Another CA: a second bundle's certificate for the same node name.
    let other = example_copy();
    create(other.path(), &["--key-algorithm", "ecdsa-p256"]);
    let mut foreign_pki = other.path().join("agent-pki");
    // Trust our collector's CA, but present the other bundle's client certificate.
    std::fs::copy(pki_dir.join("agent-ca.crt"), other.path().join("trusted-ca.crt")).unwrap();
    let cfg_dir = other.path().join("mixed");
    std::fs::create_dir_all(&cfg_dir).unwrap();
    for f in ["agent-worker-1.crt", "agent-worker-1.key"] {
        std::fs::copy(foreign_pki.join(f), cfg_dir.join(f)).unwrap();
    }
    std::fs::copy(pki_dir.join("agent-ca.crt"), cfg_dir.join("agent-ca.crt")).unwrap();
    foreign_pki = cfg_dir;
    let (_foreign, foreign_log) = agent(dir, port, "worker-1", "worker-1", &foreign_pki);
    std::thread::sleep(Duration::from_secs(3));
    let col_log = std::fs::read_to_string(dir.join("collector.log")).unwrap();
    assert!(
        col_log.contains("certificate \"master-0\" claims to be node \"master-1\""),
        "{col_log}"
    );
    // The foreign certificate is refused in the handshake, and the collector says why.
    assert!(col_log.contains("handshake_failed: TLS: invalid peer certificate"), "{col_log}");
    assert!(
        std::fs::read_to_string(&imp_log).unwrap().contains("PermissionDenied")
            || std::fs::read_to_string(&imp_log).unwrap().contains("may only report as itself")
    );
    assert!(stored(dir, "master-1").is_empty(), "nothing stored for an impersonated node");
    assert!(
        stored(dir, "worker-1").is_empty(),
        "nothing stored from a certificate of another CA"
    );
    let foreign = std::fs::read_to_string(&foreign_log).unwrap();
    assert!(
        !foreign.contains("connected to"),
        "a foreign certificate must not get a stream: {foreign}"
    );
    // Not just "transport error": the agent says what most likely happened.
    assert!(foreign.contains("refused this node's certificate"), "{foreign}");

    // No client certificate at all: the TLS handshake is refused.
    let (ok, out) = run(
        "curl",
        &[
            "-sS",
            "--http2-prior-knowledge",
            "--max-time",
            "5",
            "--cacert",
            pki_dir.join("agent-ca.crt").to_str().unwrap(),
            &format!("https://127.0.0.1:{port}/"),
        ],
    );
    assert!(!ok, "a client without a certificate must be refused: {out}");
}

#[test]
fn a_restarted_agent_continues_its_sequence() {
    // Before: a restart counted from 1 again within the same boot; the collector acked those
    // reports and dropped them as duplicates (43 lost in the probe), and status went stale.
    let (d, port, _col) = bundle_and_collector();
    let dir = d.path();
    let pki_dir = dir.join("agent-pki");
    let node = "master-1";
    let first = agent(dir, port, node, node, &pki_dir);
    wait_for("20 reports", 120, || stored(dir, node).len() >= 20);
    // SIGKILL: no chance to save anything on the way out.
    drop(first);
    let saved = std::fs::read_to_string(state_dir(dir, node, node).join("seq")).unwrap();
    let last: u64 = saved.split_whitespace().nth(2).unwrap().parse().unwrap();
    let before = stored(dir, node);
    assert!(last >= *before.last().unwrap(), "the file is never behind the collector: {saved}");

    let (second, log) = agent(dir, port, node, node, &pki_dir);
    wait_for("20 reports after the restart", 120, || {
        stored(dir, node).iter().filter(|s| **s > last).count() >= 20
    });
    drop(second);
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains(&format!("continuing after seq {last}")), "{log}");
    // Every report of the second run is stored, from the first seq it used.
    let seqs = stored(dir, node);
    let after: Vec<u64> = seqs.iter().copied().filter(|s| *s > last).collect();
    let expect: Vec<u64> = (last + 1..=*seqs.last().unwrap()).collect();
    assert_eq!(after, expect);
    // What the killed agent never sent is counted as lost, not hidden.
    let unsent = last - seqs.iter().filter(|s| **s <= last).count() as u64;
    let row = db(dir).nodes().unwrap().into_iter().find(|r| r.node == node).unwrap();
    assert_eq!(row.dropped, unsent, "lost = the gaps below the highest seq");
}

/// A kubelet stand-in serving /healthz like the kubelet does, until dropped.
fn healthz_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    l.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !s2.load(std::sync::atomic::Ordering::SeqCst) {
            match l.accept() {
                Ok((mut c, _)) => {
                    let mut buf = [0u8; 512];
                    let _ = c.read(&mut buf);
                    let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    (port, stop)
}

/// A fresh bundle (ECDSA, no embedded agent) with its collector running on a free port.
fn bundle_and_collector() -> (tempfile::TempDir, u16, Kill) {
    agent_bin();
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let port = free_port();
    let col = collector(d.path(), port);
    (d, port, col)
}

/// The read commands know the install by what `create` wrote, not by the inputs beside it: an
/// agent-config.yaml edited after `create` (a node renamed) changes nothing `status`, `diagnose`
/// and `wait-for` say until `create` runs again; then they follow the new bundle.
#[test]
fn the_read_commands_follow_the_bundle_not_inputs_edited_after_create() {
    let (d, port, _col) = bundle_and_collector();
    let dir = d.path();
    let _a = agent(dir, port, "master-0", "master-0", &dir.join("agent-pki"));
    wait_for("master-0's reports", 120, || !stored(dir, "master-0").is_empty());
    let s = dir.to_str().unwrap();
    let rows = |args: &[&str]| -> Vec<serde_json::Value> {
        let out = hardshift(args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let listed = |rows: &[serde_json::Value]| -> Vec<String> {
        let mut n: Vec<String> = rows.iter().map(|r| r["node"].as_str().unwrap_or_default().to_string()).collect();
        n.sort();
        n
    };
    let bundle_nodes = ["bootstrap", "master-0", "master-1", "master-2", "worker-0", "worker-1"];
    assert_eq!(listed(&rows(&["status", "--dir", s, "-o", "json"])), bundle_nodes);
    // worker-1 renamed in the inputs, create not run again.
    edit(dir, "agent-config.yaml", "hostname: worker-1", "hostname: worker-9");
    assert_eq!(listed(&rows(&["status", "--dir", s, "-o", "json"])), bundle_nodes);
    let never: Vec<String> = rows(&["diagnose", "--dir", s, "-o", "json"])
        .iter()
        .filter(|f| f["id"] == "HS003")
        .map(|f| f["node"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        never.contains(&"worker-1".to_string()) && !never.contains(&"worker-9".to_string()),
        "{never:?}"
    );
    let out = hardshift(&["diagnose", "worker-9", "--dir", s]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("\"worker-9\" is not a node of this bundle"),
        "{}",
        text(&out.stderr)
    );
    // create again: the bundle, and so its readers, now say worker-9.
    create(dir, &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let after = listed(&rows(&["status", "--dir", s, "-o", "json"]));
    assert!(
        after.contains(&"worker-9".to_string()) && !after.contains(&"worker-1".to_string()),
        "{after:?}"
    );
}

#[test]
fn a_kubelet_failure_becomes_an_event() {
    let (d, port, _col) = bundle_and_collector();
    let dir = d.path();
    let (kport, stop) = healthz_server();
    let _a = agent_with(dir, port, "master-0", "master-0", &dir.join("agent-pki"), |c| {
        c.kubelet_healthz = format!("127.0.0.1:{kport}")
    });
    let events = || {
        let out = hardshift(&["events", "master-0", "--dir", dir.to_str().unwrap(), "-o", "json"]);
        if !out.status.success() {
            return vec![];
        }
        serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).unwrap_or_default()
    };
    wait_for("a healthy kubelet", 120, || events().iter().any(|e| e["to"] == "healthy"));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    // Stopping may catch a probe mid-request (a reset, "healthz error") before the port is
    // closed; what matters is that the kubelet leaves "healthy" and ends up "not listening".
    wait_for("the kubelet failure", 120, || {
        let e = events();
        let left = e.iter().position(|e| e["from"] == "healthy");
        left.is_some_and(|i| e[i..].iter().any(|e| e["to"] == "not listening"))
    });
    let e = events();
    let fail = e.iter().find(|e| e["to"] == "not listening").unwrap();
    assert_eq!(fail["component"], "kubelet");
    assert!(fail["reason"].as_str().unwrap().contains("connection refused"), "{fail}");
    let table = text(&hardshift(&["status", "--dir", dir.to_str().unwrap()]).stdout);
    assert!(table.contains("master-0") && table.contains("not listening"), "{table}");
    // Same machine, same clock: the offset the agent measured from the Acks is known and small.
    let json: serde_json::Value =
        serde_json::from_slice(&hardshift(&["status", "--dir", dir.to_str().unwrap(), "-o", "json"]).stdout).unwrap();
    let off = json[0]["clock_offset_ms"]
        .as_i64()
        .unwrap_or_else(|| panic!("no clock offset: {json}"));
    assert!(off.abs() < 2_000, "{json}");
    assert!(
        json[0]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().starts_with("kubelet: ")),
        "{json}"
    );
}

/// A real journal file (systemd-journal-remote writes it from the export-format fixture), read by
/// the real journalctl on the agent's side.
fn journal_dir(dir: &Path) -> PathBuf {
    journal_from(
        dir,
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/journal/master-0.export"),
    )
}

/// DIR/journal holding master-0's journal, made from an export-format file by the real
/// systemd-journal-remote.
fn journal_from(dir: &Path, fixture: &Path) -> PathBuf {
    let j = dir.join("journal");
    std::fs::create_dir_all(&j).unwrap();
    let (ok, out) = run(
        "/lib/systemd/systemd-journal-remote",
        &[
            "-o",
            j.join("master-0.journal").to_str().unwrap(),
            "--split-mode=none",
            fixture.to_str().unwrap(),
        ],
    );
    assert!(ok, "systemd-journal-remote (hack/setup.sh installs it): {out}");
    j
}

#[test]
fn logs_come_through_the_collector_read_only_and_bounded() {
    let (d, port, _col) = bundle_and_collector();
    let dir = d.path();
    let j = journal_dir(dir);
    let _a = agent_with(dir, port, "master-0", "master-0", &dir.join("agent-pki"), |c| {
        c.journal_directory = Some(j.clone());
        c.units = vec![];
    });
    let d_ = dir.to_str().unwrap();
    wait_for("master-0 to connect", 120, || !stored(dir, "master-0").is_empty());
    let sock = dir.join("collector/admin.sock");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777, 0o600);

    let out = hardshift(&["logs", "master-0", "kubelet", "-n", "2", "--dir", d_]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].contains("csr-7xk2p is issued"), "{lines:?}");
    assert!(lines[1].contains("Unable to register node with API server"), "{lines:?}");

    // Only the allow-listed units: sshd's journal never leaves the node.
    let out = hardshift(&["logs", "master-0", "sshd", "--dir", d_]);
    assert_eq!(out.status.code(), Some(2));
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(all.contains("not one a debug request may read"), "{all}");
    assert!(!all.contains("SECRET-SHOULD-NOT-LEAK"), "{all}");
    // Not even smuggled into journalctl's arguments.
    let out = hardshift(&["logs", "master-0", "kubelet.service -o export", "--dir", d_]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));

    // A node that is not connected is named as such.
    let out = hardshift(&["logs", "master-1", "kubelet", "--dir", d_]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("master-1 is not connected"), "{}", text(&out.stderr));

    // No etcd on this agent: a clear answer, not a hang.
    let out = hardshift(&["logs", "master-0", "etcd-members", "--dir", d_]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no etcd member"), "{}", text(&out.stderr));

    // gather: the same answers and the store's view in one archive, with an index, no secrets.
    let archive = dir.join("support.tar.gz");
    let out = hardshift(&["gather", "master-0", "--dir", d_, "-o", archive.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::metadata(&archive).unwrap().permissions().mode() & 0o777, 0o600);
    let x = dir.join("x");
    std::fs::create_dir_all(&x).unwrap();
    let (ok, out) = run("tar", &["-xzf", archive.to_str().unwrap(), "-C", x.to_str().unwrap()]);
    assert!(ok, "{out}");
    let g = x.join("hardshift-gather");
    for f in [
        "index.json",
        "api.json",
        "master-0/status.json",
        "master-0/diagnose.json",
        "master-0/last-report.json",
        "master-0/events.json",
    ] {
        assert!(g.join(f).is_file(), "{f} missing from the archive");
    }
    let kubelet = std::fs::read_to_string(g.join("master-0/journal/kubelet.log")).unwrap();
    assert!(kubelet.contains("Unable to register node with API server"), "{kubelet}");
    let index: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(g.join("index.json")).unwrap()).unwrap();
    let entries = index["entries"].as_array().unwrap();
    assert!(entries.iter().any(|e| e["file"] == "master-0/journal/kubelet.log"), "{index}");
    // What the node could not answer is said, not silently missing.
    assert!(
        entries
            .iter()
            .any(|e| e["what"] == "etcd's member list" && e["error"].as_str().unwrap_or("").contains("no etcd member")),
        "{index}"
    );
    let (_, all) = run("grep", &["-r", "SECRET-SHOULD-NOT-LEAK", g.to_str().unwrap()]);
    assert!(all.trim().is_empty(), "sshd's journal must not be gathered: {all}");
}

/// The collector keeps two connections to its store (the ingest, and the API watch beside it).
/// Readers that open and close the store (`status`, `wait-for`) must never make a report it
/// stored invisible: before the fix, opening the second connection closed a descriptor of the
/// database, which dropped the process's locks, and the next reader to close took itself for the
/// last one and deleted the WAL the collector was writing.
#[test]
fn readers_never_hide_what_the_collector_writes() {
    agent_bin();
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256"]);
    let dir = d.path();
    // An API that is not there: the watch runs on its own connection and only logs its errors.
    let kc = dir.join("unreachable.kubeconfig");
    let text = std::fs::read_to_string(dir.join("auth/kubeconfig")).unwrap();
    let text: String = text
        .lines()
        .map(|l| match l.trim_start().starts_with("server:") {
            true => "    server: https://127.0.0.1:1".to_string(),
            false => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&kc, text).unwrap();
    let port = free_port();
    let _c = collector_with(dir, port, &["--kubeconfig", kc.to_str().unwrap()]);
    let (_a, _) = agent(dir, port, "master-0", "master-0", &dir.join("agent-pki"));
    let last_seq = || -> u64 {
        let out = hardshift(&["status", "--dir", dir.to_str().unwrap(), "-o", "json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v[0]["last_seq"].as_u64().unwrap_or(0)
    };
    wait_for("the first reports", 120, || last_seq() >= 3);
    for round in 0..8 {
        let before = last_seq();
        for _ in 0..5 {
            let _ = hardshift(&["status", "--dir", dir.to_str().unwrap()]);
        }
        wait_for(
            &format!("round {round}: reports after seq {before} visible to a new reader"),
            10,
            || last_seq() > before + 2,
        );
    }
    let log = std::fs::read_to_string(dir.join("collector.log")).unwrap();
    assert!(log.contains("watching the API"), "{log}");
}

/// The store deleted under a running collector: it notices (the file is no longer the one it
/// opened), stops acknowledging and says so; the agent keeps what was not acknowledged, and a
/// restarted collector receives it. Before, it acked into the unlinked file and those reports
/// were gone after the restart.
#[test]
fn a_deleted_store_is_noticed_and_nothing_acknowledged_is_lost() {
    let (d, port, col) = bundle_and_collector();
    let dir = d.path();
    let pki_dir = dir.join("agent-pki");
    let node = "master-2";
    let (agent_proc, _) = agent(dir, port, node, node, &pki_dir);
    wait_for("10 reports", 120, || stored(dir, node).len() >= 10);
    // The agent paused while the file goes, so that what the old file held is known exactly
    // (reports acknowledged before the deletion went with it, by the user's hand).
    let pid = agent_proc.0.id().to_string();
    let (ok, out) = run("kill", &["-STOP", &pid]);
    assert!(ok, "{out}");
    std::thread::sleep(Duration::from_millis(500));
    let last_before = *stored(dir, node).last().unwrap();
    for f in ["reports.db", "reports.db-wal", "reports.db-shm"] {
        let _ = std::fs::remove_file(dir.join("collector").join(f));
    }
    let (ok, out) = run("kill", &["-CONT", &pid]);
    assert!(ok, "{out}");
    // The agent goes on reporting while the file is gone.
    std::thread::sleep(Duration::from_secs(3));
    let log = std::fs::read_to_string(dir.join("collector.log")).unwrap_or_default();
    assert!(log.contains("was deleted or replaced while the collector ran"), "{log}");
    drop(col);
    let _col = collector(dir, port);
    wait_for("the agent's kept reports in the new store", 180, || {
        stored(dir, node).iter().any(|s| *s > last_before + 5)
    });
    let seqs = stored(dir, node);
    // The first report after the deletion was never acknowledged: the agent resent it.
    assert!(
        seqs.contains(&(last_before + 1)),
        "lost after the deletion: first stored {:?}",
        seqs.first()
    );
}

/// The WAL deleted under a running collector (item 8 of issue 36): before, it went on
/// acknowledging into the unlinked file, and after a kill -9 every report it held was gone
/// (about 30 per node). Now it notices (the -wal file is no longer the one it opened), saves
/// what the unlinked WAL holds into the main file, stops acknowledging and says so in its log
/// and in `status`; the agent keeps what was not acknowledged, and after a kill -9 and a
/// restart every report of the boot is stored, none missing.
#[test]
fn a_deleted_wal_is_noticed_and_nothing_acknowledged_is_lost() {
    let (d, port, mut col) = bundle_and_collector();
    let dir = d.path();
    let pki_dir = dir.join("agent-pki");
    let node = "master-1";
    let (_agent, _) = agent(dir, port, node, node, &pki_dir);
    wait_for("10 reports", 120, || stored(dir, node).len() >= 10);
    std::fs::remove_file(dir.join("collector/reports.db-wal")).unwrap();
    // The agent goes on reporting while the WAL is gone.
    std::thread::sleep(Duration::from_secs(3));
    let log = std::fs::read_to_string(dir.join("collector.log")).unwrap_or_default();
    assert!(log.contains("reports.db-wal was deleted"), "{log}");
    let st = hardshift(&["status", "--dir", dir.to_str().unwrap()]);
    let said = format!("{}{}", text(&st.stdout), text(&st.stderr));
    assert!(
        said.contains("reports.db-wal was deleted") && said.contains("not acknowledg"),
        "status must say the collector stopped acknowledging: {said}"
    );
    // The worst case: the collector killed before anything else happens.
    col.0.kill().unwrap();
    col.0.wait().unwrap();
    let _col = collector(dir, port);
    wait_for("the agent's kept reports in the restarted collector", 180, || {
        stored(dir, node).len() >= 40
    });
    let seqs = stored(dir, node);
    let last = *seqs.last().unwrap();
    let missing: Vec<u64> = (1..=last).filter(|s| !seqs.contains(s)).collect();
    assert!(missing.is_empty(), "acknowledged reports lost: {missing:?}");
    let st = hardshift(&["status", "--dir", dir.to_str().unwrap()]);
    let said = format!("{}{}", text(&st.stdout), text(&st.stderr));
    assert!(
        st.status.success() && !said.contains("was deleted"),
        "a restarted collector clears the note: {said}"
    );
}

/// A copy of the agent PKI with one more certificate from the real agent CA, for "intruder".
fn pki_with_intruder(dir: &Path) -> PathBuf {
    let pki_dir = dir.join("pki-copy");
    std::fs::create_dir_all(&pki_dir).unwrap();
    for f in ["agent-ca.crt", "agent-ca.key", "agent-worker-1.crt", "agent-worker-1.key"] {
        std::fs::copy(dir.join("agent-pki").join(f), pki_dir.join(f)).unwrap();
    }
    let p = |f: &str| pki_dir.join(f).to_string_lossy().to_string();
    let (ok, out) = run(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &p("agent-intruder.key"),
            "-out",
            &p("agent-intruder.crt"),
            "-subj",
            "/O=hardshift:agents/CN=intruder",
            "-CA",
            &p("agent-ca.crt"),
            "-CAkey",
            &p("agent-ca.key"),
            "-days",
            "1",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-addext",
            "extendedKeyUsage=clientAuth",
        ],
    );
    assert!(ok, "{out}");
    pki_dir
}

/// The intruder is refused (and logged) while worker-1 reports.
fn intruder_refused(dir: &Path, port: u16, pki_dir: &Path) {
    let (_bad, _) = agent(dir, port, "intruder", "intruder", pki_dir);
    let (_good, _) = agent(dir, port, "worker-1", "worker-1", pki_dir);
    wait_for("worker-1's reports", 120, || stored(dir, "worker-1").len() >= 5);
    std::thread::sleep(Duration::from_secs(1));
    assert!(stored(dir, "intruder").is_empty(), "a name outside the inventory was stored");
    let log = std::fs::read_to_string(dir.join("collector.log")).unwrap_or_default();
    assert!(
        log.contains("certificate \"intruder\" is signed by the agent CA but names no node"),
        "{log}"
    );
}

/// A certificate the agent CA signed for a name outside the bundle's inventory is refused (and
/// logged), not taken for a new node; the bundle's own agents still report.
#[test]
fn a_certificate_for_a_name_outside_the_inventory_is_refused() {
    let (d, port, _col) = bundle_and_collector();
    let pki_dir = pki_with_intruder(d.path());
    intruder_refused(d.path(), port, &pki_dir);
}

/// Who may report comes from the bundle's inventory, never from the inputs: with
/// install-config.yaml moved away the collector still starts and refuses a name the inventory
/// lacks (signed by the agent CA all the same); without the inventory (a bundle from a hardshift
/// before it) it does not start, and says what to run.
#[test]
fn without_its_inputs_the_collector_admits_only_the_inventorys_nodes() {
    agent_bin();
    let d = example_copy();
    let dir = d.path();
    create(dir, &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    let pki_dir = pki_with_intruder(dir);
    std::fs::rename(dir.join("install-config.yaml"), dir.join("install-config.yaml.away")).unwrap();
    let inventory = dir.join(".hardshift/current/inventory.json");
    let away = dir.join("inventory.json.away");
    std::fs::rename(&inventory, &away).unwrap();
    let out = hardshift(&[
        "collector",
        "--dir",
        dir.to_str().unwrap(),
        "--listen",
        &format!("127.0.0.1:{}", free_port()),
    ]);
    let said = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("inventory.json: missing") && said.contains("run `hardshift create --dir"),
        "{said}"
    );
    std::fs::rename(&away, &inventory).unwrap();
    let port = free_port();
    let _col = collector(dir, port);
    intruder_refused(dir, port, &pki_dir);
}

/// A seq file saying u64::MAX - 1 (corrupt, or forged) is not continued after: the sequence
/// would wrap to 0 and every later report be dropped as a duplicate. The agent starts over and
/// every report is stored.
#[test]
fn a_seq_near_the_top_does_not_wrap_and_lose_every_later_report() {
    let (d, port, _col) = bundle_and_collector();
    let dir = d.path();
    let pki_dir = dir.join("agent-pki");
    let node = "worker-0";
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_string();
    let state = state_dir(dir, node, node);
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("seq"), format!("{node} {boot} {}\n", u64::MAX - 1)).unwrap();
    let (_a, log) = agent(dir, port, node, node, &pki_dir);
    wait_for("10 reports", 120, || stored(dir, node).len() >= 10);
    let seqs = stored(dir, node);
    assert!(seqs.iter().all(|s| *s < i64::MAX as u64), "{seqs:?}");
    let log = std::fs::read_to_string(log).unwrap();
    assert!(log.contains("beyond any real sequence"), "{log}");
}

/// What `hardshift logs` and the dashboard's log view pass on is scrubbed by structure, pattern
/// and value: the bundle's own kubeadmin password in free text, a window of lines that starts
/// inside a private key, a pull-secret credential in escaped JSON; the rest of the journal stays.
#[test]
fn logs_leave_the_node_scrubbed_by_structure_pattern_and_value() {
    let (d, port, _col) = bundle_and_collector();
    let dir = d.path();
    let password = std::fs::read_to_string(dir.join("auth/kubeadmin-password"))
        .unwrap()
        .trim()
        .to_string();
    let key = std::fs::read_to_string(dir.join("pki/admin.key")).unwrap();
    let body: Vec<&str> = key.lines().filter(|l| !l.starts_with("-----")).collect();
    let mut messages = vec![
        format!("console says: log in as kubeadmin with {password}"),
        "config={\\\"auths\\\":{\\\"r\\\":{\\\"auth\\\":\\\"aGFyZHNoaWZ0OmV4YW1wbGU=\\\"}}}".to_string(),
    ];
    messages.extend(body.iter().map(|l| l.to_string()));
    messages.push(key.lines().last().unwrap().to_string());
    messages.push("kubelet is still here".to_string());
    let mut export = String::new();
    for (i, m) in messages.iter().enumerate() {
        export.push_str(&format!(
            "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={}\n_BOOT_ID=5e1a4a53c0f24b8c9d6a2f7b1e3c4d5a\n_HOSTNAME=master-0\n_SYSTEMD_UNIT=kubelet.service\nSYSLOG_IDENTIFIER=kubenswrapper\n_PID=2140\nPRIORITY=6\nMESSAGE={m}\n\n",
            1795684442000000u64 + i as u64 * 1000,
            1000000 + i * 1000
        ));
    }
    let src = dir.join("leaky.export");
    std::fs::write(&src, export).unwrap();
    let j = journal_from(dir, &src);
    let _a = agent_with(dir, port, "master-0", "master-0", &dir.join("agent-pki"), |c| {
        c.journal_directory = Some(j.clone());
        c.units = vec![];
    });
    wait_for("master-0 to connect", 120, || !stored(dir, "master-0").is_empty());
    // Windows that start inside the key too: -n cuts the journal's head.
    for n in ["50", "4", "3", "2"] {
        let out = hardshift(&["logs", "master-0", "kubelet", "-n", n, "--dir", dir.to_str().unwrap()]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{all}");
        assert!(!all.contains(&password), "-n {n}: the kubeadmin password: {all}");
        assert!(!all.contains("aGFyZHNoaWZ0OmV4YW1wbGU="), "-n {n}: {all}");
        for l in &body {
            assert!(!all.contains(l), "-n {n}: a key line: {all}");
        }
        assert!(all.contains("kubelet is still here"), "-n {n}: {all}");
    }
}
