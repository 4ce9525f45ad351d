//! The helper's programs (dnsmasq, HAProxy), each supervised: started, its output kept in a log
//! file and handed line by line to a reader (dnsmasq's log becomes boot events), started again
//! with a growing pause when it stops (each restart an event), and stopped with the helper.
//! A program dies with the helper even when the helper is killed with -9: each runs under a
//! small shell that stops it once the helper's end of its stdin closes. (The kernel's
//! parent-death signal would not do: it is cleared when a program changes its credentials, as
//! dnsmasq does when it drops its capabilities.)

use crate::record::Recorder;
use hardshift_collector::boot::{BootEvent, Step};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One program to keep running.
pub struct Program {
    /// What the events and logs call it.
    pub name: &'static str,
    pub argv: Vec<String>,
    /// Its stdout and stderr, appended.
    pub log: PathBuf,
    /// Each line of its output, as it comes.
    pub on_line: Box<dyn Fn(&str) + Send + Sync>,
}

/// The pauses before a restart: doubling from 1 s to 30 s, from 1 s again after a minute up.
pub fn backoff(previous: Duration, ran: Duration) -> Duration {
    if ran >= Duration::from_secs(60) {
        Duration::from_secs(1)
    } else {
        (previous * 2).clamp(Duration::from_secs(1), Duration::from_secs(30))
    }
}

/// The running programs; `stop` ends them all.
pub struct Supervisor {
    stopping: Arc<AtomicBool>,
    slots: Vec<Arc<Slot>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// One program as it runs now: its arguments (replaced by `Supervisor::replace`) and its
/// process group.
struct Slot {
    name: &'static str,
    argv: Mutex<Vec<String>>,
    pid: AtomicU32,
    /// Stopped to start again with new arguments: no pause, no "stopped" event.
    replaced: AtomicBool,
}

/// `sh -c BABYSIT babysit PROGRAM ARGS…`: run the program, and stop it (TERM, then KILL after
/// 5 s) when stdin reaches its end, which the helper holds open while it lives.
const BABYSIT: &str = r#"exec 3<&0 </dev/null
"$@" &
child=$!
(read -r _ <&3; kill -TERM "$child" 2>/dev/null; sleep 5; kill -KILL "$child" 2>/dev/null) &
watcher=$!
exec 3<&-
wait "$child"
status=$?
kill "$watcher" 2>/dev/null
exit "$status""#;

fn spawn(p: &Program, argv: &[String]) -> std::io::Result<Child> {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(&p.log)?;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(BABYSIT)
        .arg("babysit")
        .args(argv)
        .stdin(Stdio::piped())
        .stdout(log)
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: only async-signal-safe calls between fork and exec (prctl).
    unsafe {
        cmd.pre_exec(|| nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(std::io::Error::from));
    }
    cmd.spawn()
}

impl Supervisor {
    /// Start every program; an error names the one that cannot be started at all.
    pub fn start(programs: Vec<Program>, recorder: Recorder) -> Result<Supervisor, String> {
        let stopping = Arc::new(AtomicBool::new(false));
        let mut s = Supervisor {
            stopping: stopping.clone(),
            slots: vec![],
            threads: vec![],
        };
        for p in programs {
            let first = match spawn(&p, &p.argv) {
                Ok(c) => c,
                Err(e) => {
                    s.stop();
                    return Err(format!("{}: cannot start {}: {e}", p.name, p.argv[0]));
                }
            };
            let slot = Arc::new(Slot {
                name: p.name,
                argv: Mutex::new(p.argv.clone()),
                pid: AtomicU32::new(first.id()),
                replaced: AtomicBool::new(false),
            });
            s.slots.push(slot.clone());
            let (stopping, rec) = (stopping.clone(), recorder.clone());
            let t = std::thread::Builder::new()
                .name(format!("run-{}", p.name))
                .spawn(move || keep(p, first, slot, stopping, rec))
                .expect("a thread");
            s.threads.push(t);
        }
        Ok(s)
    }

    /// Start program `name` again with `argv` (HAProxy on another config): the running one gets
    /// SIGTERM, the next starts at once. False if there is no such program.
    pub fn replace(&self, name: &str, argv: Vec<String>) -> bool {
        self.handle().replace(name, argv)
    }

    /// A handle that can replace programs from another thread or task.
    pub fn handle(&self) -> Handle {
        Handle(self.slots.clone())
    }
}

/// Replaces the supervisor's programs (`Supervisor::handle`).
#[derive(Clone)]
pub struct Handle(Vec<Arc<Slot>>);

impl Handle {
    pub fn replace(&self, name: &str, argv: Vec<String>) -> bool {
        let Some(slot) = self.0.iter().find(|s| s.name == name) else {
            return false;
        };
        *slot.argv.lock().unwrap_or_else(|e| e.into_inner()) = argv;
        slot.replaced.store(true, Ordering::SeqCst);
        let group = nix::unistd::Pid::from_raw(slot.pid.load(Ordering::SeqCst) as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
        true
    }
}

impl Supervisor {
    /// SIGTERM to every program's process group, SIGKILL to what is left after 5 s; returns
    /// once every program is gone.
    pub fn stop(&mut self) {
        use nix::sys::signal::{killpg, Signal};
        use nix::unistd::Pid;
        self.stopping.store(true, Ordering::SeqCst);
        let groups: Vec<Pid> = self
            .slots
            .iter()
            .map(|s| Pid::from_raw(s.pid.load(Ordering::SeqCst) as i32))
            .collect();
        for g in &groups {
            let _ = killpg(*g, Signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.threads.iter().any(|t| !t.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        for g in &groups {
            let _ = killpg(*g, Signal::SIGKILL);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.stop();
        }
    }
}

/// Run `p` until the helper stops: read its stderr into its log and reader, wait, start again.
fn keep(p: Program, mut child: Child, slot: Arc<Slot>, stopping: Arc<AtomicBool>, rec: Recorder) {
    let tail: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut pause = Duration::ZERO;
    loop {
        let started = Instant::now();
        // Held while this run lives: its end is the program's signal that the helper is gone.
        let _lifeline = child.stdin.take();
        if let Some(err) = child.stderr.take() {
            let mut log = std::fs::OpenOptions::new().create(true).append(true).open(&p.log).ok();
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if let Some(l) = log.as_mut() {
                    let _ = writeln!(l, "{line}");
                }
                (p.on_line)(&line);
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                t.push(line);
                if t.len() > 5 {
                    t.remove(0);
                }
            }
        }
        let status = child.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let ran = started.elapsed();
        let argv = slot.argv.lock().map(|a| a.clone()).unwrap_or_default();
        let detail = if slot.replaced.swap(false, Ordering::SeqCst) {
            pause = Duration::ZERO;
            format!("{} started again as asked: {}", p.name, argv.join(" "))
        } else {
            pause = backoff(pause, ran);
            let last = tail.lock().map(|t| t.join(" | ")).unwrap_or_default();
            format!(
                "{} stopped ({status}) after {} s; again in {} s; last said: {last}",
                p.name,
                ran.as_secs(),
                pause.as_secs()
            )
        };
        rec.record(BootEvent {
            at_ms: hardshift_proto::now_ms(),
            node: String::new(),
            mac: String::new(),
            ip: String::new(),
            step: Step::HelperRestart,
            detail,
        });
        if !pause_unless_stopped(&stopping, pause) {
            return;
        }
        child = loop {
            match spawn(&p, &argv) {
                Ok(c) => break c,
                Err(e) => {
                    tracing::error!("{}: cannot start again: {e}", p.name);
                    if !pause_unless_stopped(&stopping, Duration::from_secs(30)) {
                        return;
                    }
                }
            }
        };
        slot.pid.store(child.id(), Ordering::SeqCst);
    }
}

/// Sleep `pause` in steps; false as soon as the helper is stopping.
fn pause_unless_stopped(stopping: &AtomicBool, pause: Duration) -> bool {
    let until = Instant::now() + pause;
    while Instant::now() < until {
        if stopping.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    !stopping.load(Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_to_half_a_minute_and_resets_after_a_good_run() {
        let s = Duration::from_secs;
        assert_eq!(backoff(Duration::ZERO, s(0)), s(1));
        assert_eq!(backoff(s(1), s(2)), s(2));
        assert_eq!(backoff(s(16), s(2)), s(30));
        assert_eq!(backoff(s(30), s(2)), s(30));
        assert_eq!(backoff(s(30), s(61)), s(1));
    }

    /// A program that stops is started again, its stop an event; stopping the supervisor ends it
    /// and leaves no process of it.
    #[test]
    fn a_stopped_program_restarts_and_stop_leaves_nothing_running() {
        let d = tempfile::tempdir().unwrap();
        let (tap, events) = std::sync::mpsc::sync_channel(100);
        let rec = Recorder::discard().with_tap(tap);
        let marker = d.path().join("runs");
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = lines.clone();
        let seen_lines = lines.clone();
        let prog = Program {
            name: "flaky",
            argv: vec![
                "sh".into(),
                "-c".into(),
                format!(
                    "echo run >> {0}; echo said-it >&2; [ $(wc -l < {0}) -ge 2 ] && exec sleep 600; exit 3",
                    marker.display()
                ),
            ],
            log: d.path().join("flaky.log"),
            on_line: Box::new(move |l| seen.lock().unwrap().push(l.to_string())),
        };
        let mut s = Supervisor::start(vec![prog], rec).unwrap();
        let e = events.recv_timeout(Duration::from_secs(60)).expect("the stop is an event");
        assert_eq!(e.step, Step::HelperRestart);
        assert!(
            e.detail.contains("flaky stopped (exit status: 3)") && e.detail.contains("said-it"),
            "{}",
            e.detail
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::fs::read_to_string(&marker).map(|t| t.lines().count()).unwrap_or(0) < 2 {
            assert!(Instant::now() < deadline, "not started again");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(s.replace("flaky", vec!["sh".into(), "-c".into(), "echo replaced >&2; exec sleep 600".into()]));
        let e = events.recv_timeout(Duration::from_secs(60)).expect("the replacement is an event");
        assert!(e.detail.starts_with("flaky started again as asked: sh -c"), "{}", e.detail);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !seen_lines.lock().unwrap().iter().any(|l| l == "replaced") {
            assert!(Instant::now() < deadline, "the replacement never ran");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!s.replace("nothing", vec![]));
        let group = nix::unistd::Pid::from_raw(s.slots[0].pid.load(Ordering::SeqCst) as i32);
        s.stop();
        // No process is left in the program's group (signal 0 reaches none), once init has
        // reaped what the shell left it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while nix::sys::signal::killpg(group, None) != Err(nix::errno::Errno::ESRCH) {
            assert!(Instant::now() < deadline, "still running");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(lines.lock().unwrap().iter().any(|l| l == "said-it"));
        assert!(std::fs::read_to_string(d.path().join("flaky.log")).unwrap().contains("said-it"));
    }
}
