//! A collector process: the store's one writer, the store opened, the API watched, the agents
//! (and the dashboard) served until SIGINT or SIGTERM, then drained.

use crate::server::{self, Options, Tls};
use crate::store::Store;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// What a collector serves, and where it keeps what it is told.
pub struct Setup {
    pub listen: SocketAddr,
    pub tls: Tls,
    /// The report database.
    pub db: PathBuf,
    /// The admin socket (`hardshift logs`, `gather`).
    pub admin: PathBuf,
    /// This collector, in words, for a second one that finds the store taken.
    pub what: String,
    /// Watch the API through this kubeconfig.
    pub kubeconfig: Option<PathBuf>,
    pub opts: Options,
}

/// Why the collector did not serve: the user's input (exit 2), or else (exit 1).
#[derive(Debug)]
pub enum Error {
    Input(String),
    Other(String),
}

fn other(path: &Path) -> impl Fn(String) -> Error + '_ {
    move |e| Error::Other(format!("{}: {e}", path.display()))
}

/// Serve until SIGINT or SIGTERM.
pub fn run(mut s: Setup) -> Result<(), Error> {
    lock_store(&s.db)?;
    // What a collector before this one said when it stopped acknowledging no longer holds.
    crate::store::clear_halted(&s.db);
    let store = Store::open(&s.db).map_err(|e| other(&s.db)(e.to_string()))?;
    store
        .set_writer(std::process::id(), &s.what)
        .map_err(|e| other(&s.db)(e.to_string()))?;
    let rt = tokio::runtime::Runtime::new().map_err(|e| Error::Other(e.to_string()))?;
    tracing::info!(
        "listening on {} (reports in {}, admin socket {})",
        s.listen,
        s.db.display(),
        s.admin.display()
    );
    let dashboard = s.opts.web.as_ref().map_or(0, |w| w.max_connections);
    let (agents, dashboard) = fit_to_descriptors(s.opts.limits.max_connections.max(1), dashboard);
    s.opts.limits.max_connections = agents;
    if let Some(w) = s.opts.web.as_mut() {
        w.max_connections = dashboard;
    }
    // The API side writes through its own connection: WAL lets it and the ingest share the file.
    let api_store = match &s.kubeconfig {
        Some(_) => Some(Store::open(&s.db).map_err(|e| other(&s.db)(e.to_string()))?),
        None => None,
    };
    let (stop_api, api_stopped) = tokio::sync::oneshot::channel::<()>();
    rt.block_on(async {
        if let (Some(k), Some(store)) = (&s.kubeconfig, api_store) {
            let client = crate::watch::client(k).await.map_err(|e| match e {
                crate::watch::ClientError::Kubeconfig(m) => Error::Input(m),
                crate::watch::ClientError::Client(m) => Error::Other(m),
            })?;
            tracing::info!("watching the API through {}", k.display());
            tokio::spawn(crate::watch::run_api_watch(client, store, async move {
                let _ = api_stopped.await;
            }));
        }
        // SIGINT (Ctrl-C) and SIGTERM (systemctl stop, kill) both drain, then exit.
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| Error::Other(format!("SIGTERM handler: {e}")))?;
        let stop = async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        };
        server::serve(s.listen, s.tls, store, Some(&s.admin), s.opts, stop)
            .await
            .map_err(|e| Error::Other(e.to_string()))
    })?;
    let _ = stop_api.send(());
    Ok(())
}

/// Take the store's one writer's lock, or say who holds it. The lock is an open file
/// description lock on one byte of the database file itself, far past the bytes SQLite locks
/// (so it neither conflicts with them nor is dropped by theirs): any path to the same file
/// meets it. Its descriptor stays open for the life of the process, as closing any descriptor
/// of the database would drop SQLite's own POSIX locks.
pub fn lock_store(db: &Path) -> Result<(), Error> {
    use nix::fcntl::{fcntl, FcntlArg};
    use nix::libc;
    let io = |e: std::io::Error| other(db)(e.to_string());
    // A whole empty store first, never an empty file a reader would take for a broken store.
    Store::create(db).map_err(|e| other(db)(e.to_string()))?;
    let file = std::fs::OpenOptions::new().read(true).write(true).open(db).map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(Error::Input(format!("{}: --db must be a file", db.display())));
    }
    // SAFETY: a plain C struct; all-zero is a valid value before the fields are set.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = 1 << 40;
    lock.l_len = 1;
    match fcntl(&file, FcntlArg::F_OFD_SETLK(&lock)) {
        Ok(_) => {
            // Held until the process ends; see above for why it is never closed.
            std::mem::forget(file);
            Ok(())
        }
        Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => {
            drop(file);
            let holder = Store::writer_of(db)
                .filter(|(pid, _)| Path::new("/proc").join(pid.to_string()).exists())
                .map(|(pid, what)| format!("pid {pid} ({what})"))
                .unwrap_or_else(|| "holder unknown".into());
            Err(Error::Other(format!(
                "{}: another collector writes this database ({holder}); give this one another --db",
                db.display()
            )))
        }
        Err(e) => Err(Error::Other(format!("{}: cannot lock: {e}", db.display()))),
    }
}

/// Descriptors the collector keeps beyond its two doors' caps: the store's connections (each with
/// its WAL and shared memory), the log, the admin socket, the API watch, the runtime's own, the
/// listening sockets (about 24 in all, measured), and each door's `ACCEPT_SLACK` (sockets
/// accepted over its cap and not yet closed).
const BASE_FDS: u64 = 32 + 2 * crate::listener::ACCEPT_SLACK as u64;

/// The two doors' caps within `limit` open files: the dashboard at most a quarter of what the
/// base leaves (a dashboard has a few viewers) and never more than it asks, the agents the rest.
/// Under both caps the process never runs out of descriptors, so a flood on either port is shed
/// by its own gate and never takes the other's (an accept failing with EMFILE locks everyone out).
pub fn split_descriptors(limit: u64, agents: usize, dashboard: usize) -> (usize, usize) {
    let room = limit.saturating_sub(BASE_FDS) as usize;
    let dash = dashboard.min((room / 4).max(4));
    let agents = agents.min(room.saturating_sub(dash).max(16));
    (agents, dash)
}

/// Raise the soft limit on open files to the hard one and fit both doors' caps to it
/// (`split_descriptors`); says so when either is lowered. `dashboard`: 0 when none is served.
pub fn fit_to_descriptors(agents: usize, dashboard: usize) -> (usize, usize) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return (agents, dashboard);
    };
    let limit = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let (a, d) = split_descriptors(limit, agents, dashboard);
    if a < agents || d < dashboard {
        tracing::warn!(
            "the open-file limit is {limit}: the agents' connections are capped at {a} (asked {agents}) and the dashboard's at {d} (asked {dashboard}), {BASE_FDS} descriptors kept for the store and the rest"
        );
    }
    (a, d)
}

#[cfg(test)]
mod tests {
    use super::split_descriptors;

    #[test]
    fn both_doors_fit_the_open_file_limit_with_room_for_the_rest() {
        // The probe's case: 256 open files, where the dashboard alone used to be allowed 256.
        let (a, d) = split_descriptors(256, 10_000, 256);
        assert_eq!((a, d), (144, 48));
        assert!(a + d + super::BASE_FDS as usize <= 256);
        // Plenty of room: what was asked.
        assert_eq!(split_descriptors(1 << 20, 10_000, 256), (10_000, 256));
        // No dashboard: the agents take it all.
        assert_eq!(split_descriptors(256, 10_000, 0), (192, 0));
        // Absurdly low: still something for each.
        let (a, d) = split_descriptors(32, 10_000, 256);
        assert!(a >= 16 && d >= 4, "{a} {d}");
    }
}
