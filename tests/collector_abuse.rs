//! The collector under abuse, with the real collector and real agents on loopback: a flood of
//! idle sockets does not lock agents out; a client that never says Hello is closed; every
//! refusal is logged with its reason; a second collector on the same directory is refused;
//! SIGTERM and SIGINT drain and exit with agents connected; the store is 0600; retention prunes.

mod common;

use common::*;
use hardshift_collector::store::Store;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn agent(dir: &Path, port: u16, node: &str, interval_ms: u64) -> Kill {
    let pki = dir.join("agent-pki");
    let cfg = dir.join(format!("agent-{node}.toml"));
    let mut c = agent_config(port, node, &pki, node);
    c.role = "master".into();
    c.interval_ms = interval_ms;
    c.state_dir = dir.join(format!("state-{node}"));
    c.cri_socket = PathBuf::new();
    c.units = vec![];
    write_agent_config(&cfg, &c);
    spawn_agent(&cfg, &dir.join(format!("agent-{node}.log")))
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("collector.log")).unwrap_or_default()
}

/// `hardshift collector` for `dir` under `prlimit --nofile=N:N`, agents on `port`, the
/// dashboard on `web`, `extra` flags; its stderr in DIR/collector.log.
fn collector_limited(dir: &Path, nofile: u32, port: u16, web: u16, extra: &[&str]) -> Kill {
    let log_file = std::fs::File::create(dir.join("collector.log")).unwrap();
    Kill(
        Command::new("prlimit")
            .arg(format!("--nofile={nofile}:{nofile}"))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_hardshift"))
            .args(["collector", "--dir", dir.to_str().unwrap()])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--web", &format!("127.0.0.1:{web}")])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap(),
    )
}

/// The dashboard's answer to a viewer (`/api/view.json`): curl's success and the HTTP code.
fn dashboard_answer(web: u16) -> (bool, String) {
    let url = format!("http://127.0.0.1:{web}/api/view.json");
    let (ok, out) = run("curl", &["-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", &url]);
    (ok, out.trim().to_string())
}

/// The descriptors process `pid` holds now.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|r| r.count()).unwrap_or(0)
}

fn bundle() -> tempfile::TempDir {
    agent_bin();
    let d = example_copy();
    create(d.path(), &["--key-algorithm", "ecdsa-p256", "--no-agent"]);
    d
}

/// Keep up to `n` idle TCP connections from `from` open to `to` until `stop`: each one the
/// server closes is opened again, so the flood lasts as long as the test needs it.
fn flood(from: &str, to: SocketAddr, n: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    let from: std::net::IpAddr = from.parse().unwrap();
    std::thread::spawn(move || {
        let mut opened = 0;
        let mut socks: Vec<TcpStream> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            // Drop the ones the server closed (a read of 0 bytes or an error), then top up.
            socks.retain_mut(|s| {
                let mut b = [0u8; 1];
                s.set_nonblocking(true).unwrap();
                match s.read(&mut b) {
                    Ok(0) => false,
                    Ok(_) => true,
                    Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
                }
            });
            while socks.len() < n {
                let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
                sock.bind(&SocketAddr::new(from, 0).into()).unwrap();
                if sock.connect(&to.into()).is_err() {
                    break;
                }
                opened += 1;
                socks.push(sock.into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        opened
    })
}

#[test]
fn a_flood_of_idle_sockets_does_not_lock_agents_out() {
    let d = bundle();
    let dir = d.path();
    let port = free_port();
    let _col = collector_with(
        dir,
        port,
        &["--max-per-address", "64", "--handshake-timeout", "2s", "--hello-timeout", "2s"],
    );
    wait_for("the collector to listen", 120, || TcpStream::connect(("127.0.0.1", port)).is_ok());
    // 200 idle sockets from another address, kept up for the whole test.
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = flood("127.0.0.2", format!("127.0.0.1:{port}").parse().unwrap(), 200, stop.clone());
    std::thread::sleep(Duration::from_secs(1));
    let _a = agent(dir, port, "master-0", 200);
    wait_for("20 reports from a real agent during the flood", 180, || {
        stored(dir, "master-0").len() >= 20
    });
    // Let at least one round of idle sockets reach the handshake deadline.
    wait_for("a handshake timeout", 120, || log(dir).contains("handshake_timeout"));
    stop.store(true, Ordering::Relaxed);
    let opened = attacker.join().unwrap();
    assert!(opened >= 200, "the flood opened {opened} sockets");
    let l = log(dir);
    assert!(
        l.contains("refused 127.0.0.2:") && l.contains("address_cap: 64 connections from this address already"),
        "{l}"
    );
    assert!(l.contains("no TLS handshake within 2s"), "{l}");
    // The log is rate-limited: a flood cannot fill the disk through it.
    for reason in ["address_cap", "handshake_timeout"] {
        let lines = l.lines().filter(|x| x.contains("refused 127.0.0.2") && x.contains(reason)).count();
        assert!((1..=20).contains(&lines), "{lines} {reason} lines in one minute");
    }
}

#[test]
fn refusals_are_logged_and_a_silent_client_is_closed() {
    let d = bundle();
    let dir = d.path();
    let pki = dir.join("agent-pki");
    let port = free_port();
    let _col = collector_with(dir, port, &["--hello-timeout", "2s"]);
    wait_for("the collector to listen", 120, || TcpStream::connect(("127.0.0.1", port)).is_ok());
    // A valid agent certificate, TLS up, then nothing: closed once the Hello deadline passes.
    let mut s_client = Command::new("openssl")
        .args(["s_client", "-quiet", "-alpn", "h2", "-connect", &format!("127.0.0.1:{port}")])
        .arg("-cert")
        .arg(pki.join("agent-master-1.crt"))
        .arg("-key")
        .arg(pki.join("agent-master-1.key"))
        .arg("-CAfile")
        .arg(pki.join("agent-ca.crt"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let closed = loop {
        if let Some(st) = s_client.try_wait().unwrap() {
            break Some(st);
        }
        if started.elapsed() > Duration::from_secs(60) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = s_client.kill();
    assert!(closed.is_some(), "a client that never says Hello must be closed\n{}", log(dir));
    wait_for("the no_hello refusal in the log", 180, || log(dir).contains("no_hello"));
    // No client certificate: refused in the handshake, and the reason is logged.
    let (ok, _) = run(
        "curl",
        &[
            "-sS",
            "--http2-prior-knowledge",
            "--max-time",
            "5",
            "--cacert",
            pki.join("agent-ca.crt").to_str().unwrap(),
            &format!("https://127.0.0.1:{port}/"),
        ],
    );
    assert!(!ok);
    wait_for("the handshake refusal in the log", 180, || {
        log(dir).contains("handshake_failed: TLS:") && log(dir).to_lowercase().contains("certificate")
    });
}

#[test]
fn one_collector_per_directory_and_signals_drain() {
    for signal in ["TERM", "INT"] {
        let d = bundle();
        let dir = d.path();
        let port = free_port();
        let mut col = collector(dir, port);
        let _a = agent(dir, port, "master-0", 100);
        wait_for("reports", 180, || stored(dir, "master-0").len() >= 10);
        let admin: PathBuf = dir.join("collector/admin.sock");
        assert!(admin.exists());

        // A second collector on the same directory is refused and leaves the first alone.
        let out = hardshift(&[
            "collector",
            "--dir",
            dir.to_str().unwrap(),
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
        ]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("another collector serves this bundle (pid ") && err.contains(&col.0.id().to_string()),
            "{err}"
        );
        assert!(admin.exists(), "the first collector's admin socket must stay");
        // Nor does another directory get to share its database.
        if signal == "TERM" {
            let other = bundle();
            let db = dir.join("collector/reports.db");
            // Bounded: a collector that is not refused would serve until stopped.
            let out = Command::new("timeout")
                .arg("20")
                .arg(env!("CARGO_BIN_EXE_hardshift"))
                .args([
                    "collector",
                    "--dir",
                    other.path().to_str().unwrap(),
                    "--db",
                    db.to_str().unwrap(),
                    "--listen",
                    &format!("127.0.0.1:{}", free_port()),
                    "--no-web",
                ])
                .output()
                .unwrap();
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{err}");
            assert!(err.contains("another collector writes this database (pid "), "{err}");
        }

        // The store and its WAL are this user's only.
        use std::os::unix::fs::PermissionsExt;
        for f in ["reports.db", "reports.db-wal"] {
            let mode = std::fs::metadata(dir.join("collector").join(f)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{f}");
        }

        // The signal with an agent streaming: drain, then exit 0.
        let pid = col.0.id().to_string();
        assert!(Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap().success());
        let started = Instant::now();
        let status = loop {
            if let Some(st) = col.0.try_wait().unwrap() {
                break st;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "SIG{signal}: the collector did not exit with an agent connected\n{}",
                log(dir)
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(status.success(), "SIG{signal}: {status:?}\n{}", log(dir));
        let l = log(dir);
        assert!(l.contains("draining 1 agent streams") && l.contains("collector stopped"), "{l}");
        assert!(!admin.exists(), "the admin socket is removed on exit");
    }
}

/// One writer per store, whatever path reaches it (issue 36, low): a second collector on another
/// directory whose --db is a symlink, or a hard link, to the first one's store is refused,
/// naming the first. Before, the lock was keyed on the --db path and both ran.
#[test]
fn a_store_reached_by_a_symlink_or_a_hard_link_gets_no_second_collector() {
    let d = bundle();
    let dir = d.path();
    let port = free_port();
    let col = collector(dir, port);
    let _a = agent(dir, port, "master-0", 100);
    wait_for("reports", 180, || stored(dir, "master-0").len() >= 3);
    let db = dir.join("collector/reports.db");
    let links = tempfile::tempdir().unwrap();
    let symlink = links.path().join("via-symlink.db");
    std::os::unix::fs::symlink(&db, &symlink).unwrap();
    let hard = dir.join("collector/via-hard-link.db");
    std::fs::hard_link(&db, &hard).unwrap();
    for (how, path) in [("symlink", &symlink), ("hard link", &hard)] {
        let other = bundle();
        // Bounded: a collector that is not refused would serve until stopped.
        let out = Command::new("timeout")
            .arg("20")
            .arg(env!("CARGO_BIN_EXE_hardshift"))
            .args([
                "collector",
                "--dir",
                other.path().to_str().unwrap(),
                "--db",
                path.to_str().unwrap(),
                "--listen",
                &format!("127.0.0.1:{}", free_port()),
                "--no-web",
            ])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{how}: {err}");
        assert!(
            err.contains("another collector writes this database (pid ") && err.contains(&col.0.id().to_string()),
            "{how}: the second is refused naming the first: {err}"
        );
    }
}

#[test]
fn retention_prunes_old_reports_without_counting_them_lost() {
    let d = bundle();
    let dir = d.path();
    let port = free_port();
    let _col = collector_with(dir, port, &["--retain", "2s"]);
    let _a = agent(dir, port, "master-0", 100);
    wait_for("seq 80", 90, || stored(dir, "master-0").last().is_some_and(|s| *s >= 80));
    wait_for("a prune", 120, || log(dir).contains("retention: deleted"));
    let seqs = stored(dir, "master-0");
    let last = *seqs.last().unwrap();
    assert!(
        (seqs.len() as u64) < last,
        "old reports were pruned: {} stored of {last}",
        seqs.len()
    );
    assert!(!seqs.contains(&1), "the first report is older than 2 s");
    let s = Store::open(&dir.join("collector/reports.db")).unwrap();
    let row = s.nodes().unwrap().into_iter().find(|r| r.node == "master-0").unwrap();
    assert_eq!(row.dropped, 0, "pruned reports are not lost reports");
}

/// The dashboard's port is a front door with caps and deadlines of its own: a flood of idle
/// sockets there (more than the process may open files) is shed as it comes, the collector's
/// descriptors stay bounded, agents keep reporting, and the dashboard still answers others.
#[test]
fn a_flood_on_the_dashboard_port_does_not_exhaust_the_collector() {
    let d = bundle();
    let dir = d.path();
    let (port, web) = (free_port(), free_port());
    // 1,024 descriptors in all, so that exhaustion is reachable by a bounded flood.
    let col = collector_limited(dir, 1024, port, web, &[]);
    wait_for("the collector to listen", 120, || {
        TcpStream::connect(("127.0.0.1", port)).is_ok() && TcpStream::connect(("127.0.0.1", web)).is_ok()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = flood("127.0.0.3", format!("127.0.0.1:{web}").parse().unwrap(), 1500, stop.clone());
    std::thread::sleep(Duration::from_secs(2));
    let _a = agent(dir, port, "master-0", 200);
    wait_for("10 reports from an agent during the flood", 180, || {
        stored(dir, "master-0").len() >= 10
    });
    // The dashboard answers a viewer from another address.
    let (ok, code) = dashboard_answer(web);
    assert!(ok && code == "200", "the dashboard during the flood: {code}\n{}", log(dir));
    // Bounded: the dashboard's cap, the agents', and the collector's own, far from the limit.
    let fds = descriptors(col.0.id());
    assert!(fds > 0 && fds < 512, "the collector holds {fds} descriptors");
    // Full, the dashboard closes the oldest idle socket for each newcomer (issue 36, item 6).
    wait_for("an idle dashboard socket closed for a newer one", 120, || {
        log(dir).contains("dashboard: closed 127.0.0.3:")
    });
    stop.store(true, Ordering::Relaxed);
    let opened = attacker.join().unwrap();
    assert!(opened >= 1500, "the flood opened {opened} sockets");
    let l = log(dir);
    assert!(
        l.contains("its oldest idle connection (or live stream), for a newer one (address_cap"),
        "{l}"
    );
    assert!(!l.contains("Too many open files"), "{l}");
}

/// What a node sends reaches the terminal escaped and scrubbed: a kubelet health body with
/// escape sequences (clear screen, colours), a carriage return and a Bearer token, stored as a
/// hostile node would report it, is printed by `status`, `events` and `diagnose` as visible
/// escapes, the token redacted.
#[test]
fn node_text_reaches_the_terminal_escaped_and_scrubbed() {
    use hardshift_proto::v1::{ComponentState, Health, NodeReport};
    let d = bundle();
    let dir = d.path();
    std::fs::create_dir_all(dir.join("collector")).unwrap();
    let store = Store::open(&dir.join("collector/reports.db")).unwrap();
    let hostile = "\u{1b}[2J\u{1b}[31mkubelet dead\r\u{7} Authorization: Bearer sekrit-token-42";
    let now = hardshift_collector::now_ms();
    store.hello("master-0", "master", "boot-1", "test", now).unwrap();
    for (seq, health, state) in [(1, Health::Ok, "ok"), (2, Health::Failing, hostile)] {
        let r = NodeReport {
            seq,
            time_ms: now,
            components: vec![ComponentState {
                name: "kubelet".into(),
                health: health as i32,
                state: state.into(),
                reason: hostile.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        store.insert("master-0", "boot-1", &r, now).unwrap();
    }
    drop(store);
    for cmd in ["status", "events", "diagnose"] {
        let out = hardshift(&[cmd, "--dir", dir.to_str().unwrap()]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(all.contains("kubelet dead"), "{cmd}: the node's words are shown: {all}");
        assert!(
            !all.contains('\u{1b}') && !all.contains('\r') && !all.contains('\u{7}'),
            "{cmd}: raw control characters: {all:?}"
        );
        assert!(all.contains("\\u{1b}[2J"), "{cmd}: the escape is shown, not obeyed: {all}");
        assert!(!all.contains("sekrit-token-42"), "{cmd}: {all}");
    }
}

/// `hardshift CMD --dir DIR` under a deadline (a reader must never hang on its store): (exit
/// code, stdout + stderr). 124 is `timeout`'s own: the command hung.
fn reader(cmd: &str, dir: &Path) -> (i32, String) {
    let archive = dir.join("gathered.tar.gz");
    let mut args = vec!["20", env!("CARGO_BIN_EXE_hardshift"), cmd, "--dir", dir.to_str().unwrap()];
    if cmd == "gather" {
        args.extend(["-o", archive.to_str().unwrap()]);
    }
    let out = Command::new("timeout").args(&args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

/// A good store of 300 reports from master-0, closed (so all of it is in the main file).
fn good_store(db: &Path) {
    use hardshift_proto::v1::{ComponentState, Health, NodeReport};
    for f in ["", "-wal", "-shm"] {
        let p = PathBuf::from(format!("{}{f}", db.display()));
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_dir_all(&p);
    }
    let store = Store::open(db).unwrap();
    let now = hardshift_collector::now_ms();
    store.hello("master-0", "master", "boot-1", "test", now).unwrap();
    for seq in 1..=300 {
        let r = NodeReport {
            seq,
            time_ms: now,
            components: vec![ComponentState {
                name: "kubelet".into(),
                health: Health::Ok as i32,
                state: format!("healthy after {seq} probes, and some words to fill the page"),
                ..Default::default()
            }],
            ..Default::default()
        };
        store.insert("master-0", "boot-1", &r, now).unwrap();
    }
}

/// A broken store is an error naming the file, with exit status 1, for every reader (issue 36,
/// item 10): not a SQLite file, empty, a damaged header, damaged pages, a directory, a FIFO.
/// Before, an empty file was taken for a new store (every node "NEVER REPORTED", exit 0), a FIFO
/// hung `status`, and damaged pages said "store: database disk image is malformed" without
/// saying which file.
#[test]
fn a_broken_store_is_an_error_naming_the_file() {
    let d = bundle();
    let dir = d.path();
    std::fs::create_dir_all(dir.join("collector")).unwrap();
    let db = dir.join("collector/reports.db");
    let overwrite = |at: u64, bytes: &[u8]| {
        use std::io::{Seek, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
        f.seek(std::io::SeekFrom::Start(at)).unwrap();
        f.write_all(bytes).unwrap();
    };
    type Break<'a> = Box<dyn Fn() + 'a>;
    let cases: Vec<(&str, Break)> = vec![
        ("not a SQLite file", Box::new(|| std::fs::write(&db, "garbage\n").unwrap())),
        ("empty", Box::new(|| std::fs::write(&db, "").unwrap())),
        ("a damaged header", Box::new(|| overwrite(0, &[0x5a; 100]))),
        ("damaged pages", Box::new(|| overwrite(4096, &vec![0u8; 4096 * 64]))),
        (
            "a directory",
            Box::new(|| {
                std::fs::remove_file(&db).unwrap();
                std::fs::create_dir(&db).unwrap();
            }),
        ),
        (
            "a FIFO",
            Box::new(|| {
                std::fs::remove_file(&db).unwrap();
                let (ok, out) = run("mkfifo", &[db.to_str().unwrap()]);
                assert!(ok, "{out}");
            }),
        ),
    ];
    for (what, break_it) in &cases {
        good_store(&db);
        let (code, out) = reader("status", dir);
        assert_eq!(code, 0, "{what}: the good store first: {out}");
        break_it();
        for cmd in ["status", "events", "diagnose", "gather"] {
            let (code, out) = reader(cmd, dir);
            assert_eq!(code, 1, "{what}: {cmd} must fail (1: a broken store): {out}");
            assert!(out.contains(db.to_str().unwrap()), "{what}: {cmd} must name the file: {out}");
            assert!(!out.contains("NEVER REPORTED"), "{what}: {cmd}: {out}");
        }
    }
}

/// (secret value, the line a node could report it in): every form the scrubber once missed.
const NODE_SECRETS: &[(&str, &str)] = &[
    ("S3cr3tDbPass", "app env DB_PASSWORD=S3cr3tDbPass DB_HOST=db"),
    ("S3cr3tRegistryPass", "REGISTRY_PASSWORD: S3cr3tRegistryPass"),
    ("S3cr3tPgPass", "PGPASSWORD=S3cr3tPgPass psql -h db"),
    ("S3cr3tUrlPass", "GET https://admin:S3cr3tUrlPass@mirror.lab:5000/v2/ failed"),
    ("S3cr3tCurlUser", "curl -u admin:S3cr3tCurlUser http://mirror.lab:5000/v2/"),
    ("eyJ1c2VybmFtZSI6S3cr3tXRegAuth", "X-Registry-Auth: eyJ1c2VybmFtZSI6S3cr3tXRegAuth"),
    ("S3cr3tAwsSecretKey", "aws_secret_access_key = S3cr3tAwsSecretKey"),
    ("S3cr3tPrivateKey", r#"{"name":"sa","privateKey":"S3cr3tPrivateKey"}"#),
    ("S3cr3tPassphrase", "openssl passphrase=S3cr3tPassphrase"),
    ("S3cr3tBearerTok", "Authorization: Bearer S3cr3tBearerTok"),
];

/// One scrubber for every output (issue 36, item 7): a stored report carrying each secret form
/// (in a unit's reason, the registry's, a container's message and a unit's details) is shown by
/// `status`, `events` and `diagnose` (table and `-o json`) and by the dashboard (node page, its
/// live update, /api/view.json) with every secret redacted and the node's other words kept.
/// Before, `-o json` and the dashboard showed them as stored.
#[test]
fn every_output_scrubs_a_stored_report() {
    use hardshift_proto::v1::{ComponentState, ContainerInfo, Health, NodeReport};
    let d = bundle();
    let dir = d.path();
    std::fs::create_dir_all(dir.join("collector")).unwrap();
    let store = Store::open(&dir.join("collector/reports.db")).unwrap();
    let now = hardshift_collector::now_ms();
    store.hello("master-0", "master", "boot-1", "test", now).unwrap();
    let all: Vec<&str> = NODE_SECRETS.iter().map(|(_, line)| *line).collect();
    let comp = |name: &str, health: Health, reason: String| ComponentState {
        name: name.into(),
        health: health as i32,
        state: "activating/auto-restart".into(),
        reason,
        details: NODE_SECRETS
            .iter()
            .enumerate()
            .map(|(i, (_, line))| (format!("line{i}"), line.to_string()))
            .collect(),
    };
    for (seq, health) in [(1, Health::Ok), (2, Health::Failing)] {
        let r = NodeReport {
            seq,
            time_ms: now,
            components: vec![
                comp("kubelet.service", health, all.join("; ")),
                comp("registry", health, all.join("; ")),
            ],
            containers: NODE_SECRETS
                .iter()
                .map(|(_, line)| ContainerInfo {
                    pod: "openshift-etcd/etcd".into(),
                    name: "etcd".into(),
                    state: "exited".into(),
                    exit_code: 1,
                    reason: "Error".into(),
                    message: line.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        store.insert("master-0", "boot-1", &r, now).unwrap();
    }
    drop(store);
    let check = |what: &str, out: &str| {
        assert!(out.contains("mirror.lab"), "{what}: the node's words are shown: {out}");
        let leaked: Vec<&str> = NODE_SECRETS.iter().map(|(s, _)| *s).filter(|s| out.contains(s)).collect();
        assert!(leaked.is_empty(), "{what} leaked {leaked:?}:\n{out}");
    };
    for cmd in ["status", "events", "diagnose"] {
        for json in [false, true] {
            let mut args = vec![cmd, "--dir", dir.to_str().unwrap()];
            if json {
                args.extend(["-o", "json"]);
            }
            let out = hardshift(&args);
            let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
            check(&args.join(" "), &all);
        }
    }
    // The dashboard, from the same store.
    let (port, web) = (free_port(), free_port());
    let _col = collector_with(dir, port, &["--web", &format!("127.0.0.1:{web}"), "--no-api-watch"]);
    let site = format!("http://127.0.0.1:{web}");
    wait_for("the dashboard", 120, || TcpStream::connect(("127.0.0.1", web)).is_ok());
    let get = |path: &str| run("curl", &["-sS", "-N", "--max-time", "5", &format!("{site}{path}")]).1;
    wait_for("the node on the dashboard", 120, || get("/api/view.json").contains("mirror.lab"));
    for path in ["/node/master-0", "/events/node/master-0", "/api/view.json", "/", "/timeline"] {
        let out = get(path);
        if path == "/" || path == "/timeline" {
            let leaked: Vec<&str> = NODE_SECRETS.iter().map(|(s, _)| *s).filter(|s| out.contains(s)).collect();
            assert!(leaked.is_empty(), "{path} leaked {leaked:?}");
            continue;
        }
        check(path, &out);
    }
}

/// One node with an unusable name in the store (`..`, from a collector that did not check) is
/// skipped by `gather` and said so in the index; every other node is still gathered.
#[test]
fn gather_skips_a_node_named_dot_dot_and_keeps_the_others() {
    use hardshift_proto::v1::NodeReport;
    let d = bundle();
    let dir = d.path();
    std::fs::create_dir_all(dir.join("collector")).unwrap();
    let store = Store::open(&dir.join("collector/reports.db")).unwrap();
    let now = hardshift_collector::now_ms();
    for node in ["..", "master-0"] {
        store.hello(node, "master", "boot-1", "test", now).unwrap();
        let r = NodeReport {
            seq: 1,
            time_ms: now,
            ..Default::default()
        };
        store.insert(node, "boot-1", &r, now).unwrap();
    }
    drop(store);
    let out_file = dir.join("gather.tar.gz");
    let out = hardshift(&["gather", "--dir", dir.to_str().unwrap(), "-o", out_file.to_str().unwrap()]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{all}");
    let (ok, list) = run("tar", &["-tzf", out_file.to_str().unwrap()]);
    assert!(ok, "{list}");
    assert!(list.contains("hardshift-gather/master-0/status.json"), "{list}");
    let (_, index) = run("tar", &["-xzOf", out_file.to_str().unwrap(), "hardshift-gather/index.json"]);
    assert!(index.contains("not a plain file name"), "{index}");
}

/// Another site's page cannot make a node run journalctl through the dashboard: a cross-site
/// request (as a browser marks it) for a node's logs is refused, and the node is not asked.
#[test]
fn a_cross_site_request_for_logs_is_refused() {
    let d = bundle();
    let dir = d.path();
    let (port, web) = (free_port(), free_port());
    let _col = collector_with(dir, port, &["--web", &format!("127.0.0.1:{web}")]);
    wait_for("the dashboard", 120, || TcpStream::connect(("127.0.0.1", web)).is_ok());
    let url = format!("http://127.0.0.1:{web}/node/master-0/logs?unit=kubelet");
    let code = |extra: &[&str]| {
        let mut args = vec!["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10"];
        args.extend_from_slice(extra);
        args.push(&url);
        run("curl", &args).1.trim().to_string()
    };
    assert_eq!(code(&["-H", "Sec-Fetch-Site: cross-site"]), "403");
    assert_eq!(code(&["-H", "Origin: http://evil.example"]), "403");
    assert_eq!(code(&["-H", "Sec-Fetch-Site: same-origin"]), "200");
}

/// Under a low open-file limit (256, as some systemd units and containers set), both doors are
/// fitted to it: 400 idle sockets on the agents' port and 400 on the dashboard's, kept up the
/// whole time, neither run the process out of descriptors (every accept would fail: agents
/// locked out), an agent reports, and the dashboard answers another viewer.
#[test]
fn both_doors_fit_a_low_open_file_limit_under_floods_on_each() {
    let d = bundle();
    let dir = d.path();
    let (port, web) = (free_port(), free_port());
    let col = collector_limited(dir, 256, port, web, &["--handshake-timeout", "3s", "--hello-timeout", "3s"]);
    wait_for("the collector to listen", 120, || {
        TcpStream::connect(("127.0.0.1", port)).is_ok() && TcpStream::connect(("127.0.0.1", web)).is_ok()
    });
    let l = log(dir);
    assert!(
        l.contains("the open-file limit is 256: the agents' connections are capped at 144") && l.contains("the dashboard's at 48"),
        "{l}"
    );
    let stop = Arc::new(AtomicBool::new(false));
    // The agents' port from two addresses (each held to its address's share), the dashboard's
    // from one.
    let floods = [
        flood("127.0.0.2", format!("127.0.0.1:{port}").parse().unwrap(), 200, stop.clone()),
        flood("127.0.0.4", format!("127.0.0.1:{port}").parse().unwrap(), 200, stop.clone()),
        flood("127.0.0.3", format!("127.0.0.1:{web}").parse().unwrap(), 400, stop.clone()),
    ];
    // Let the floods reach their caps before the agent comes.
    wait_for("both floods refused at their caps", 120, || {
        let l = log(dir);
        l.contains("refused 127.0.0.2:") && l.contains("dashboard: closed 127.0.0.3:")
    });
    let _a = agent(dir, port, "master-0", 200);
    wait_for("10 reports from an agent during the floods", 240, || {
        stored(dir, "master-0").len() >= 10
    });
    let (ok, code) = dashboard_answer(web);
    assert!(ok && code == "200", "the dashboard during the floods: {code}\n{}", log(dir));
    let fds = descriptors(col.0.id());
    assert!(fds > 0 && fds < 256, "the collector holds {fds} descriptors");
    stop.store(true, Ordering::Relaxed);
    let opened: usize = floods.into_iter().map(|f| f.join().unwrap()).sum();
    assert!(opened >= 800, "the floods opened {opened} sockets");
    let l = log(dir);
    assert!(!l.contains("Too many open files"), "{l}");
}
