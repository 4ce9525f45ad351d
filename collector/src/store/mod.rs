//! Durable store of every report: SQLite in WAL mode, one row per (node, boot, seq), so a report
//! resent after a reconnect or a collector crash is stored once.

use hardshift_proto::v1::NodeReport;
use prost::Message;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;

mod api;
mod boot;
mod db;
mod note;

pub use api::{ApiChange, ApiContact};
use db::{beside, identity, Halted};
pub use db::{Store, StoreError};
use note::write_note;
pub use note::{clear_halted, halted, note_path};

/// The tables every reader reads: without them a file is not a collector's store.
const TABLES: [&str; 2] = ["reports", "nodes"];

/// The last report of a node, for `hardshift status`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct NodeRow {
    pub node: String,
    pub role: String,
    pub boot_id: String,
    pub last_seq: u64,
    pub last_seen_ms: i64,
    pub reports: u64,
    pub dropped: u64,
    #[serde(skip)]
    pub last: Option<NodeReport>,
}

impl Store {
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        // Reports name every node, address and failing unit of the lab: this user's only.
        // SQLite gives the -wal and -shm files the database file's mode, so create it 0600 first.
        private(path).map_err(|e| StoreError::Broken(format!("{}: {e}", path.display())))?;
        let db = Connection::open(path)?;
        // WAL: readers (status) never block the writer; synchronous=FULL: an acknowledged report
        // survives a power cut, not only a killed process.
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "FULL")?;
        db.busy_timeout(std::time::Duration::from_secs(5))?;
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS reports (
                node TEXT NOT NULL, boot_id TEXT NOT NULL, seq INTEGER NOT NULL,
                agent_time_ms INTEGER NOT NULL, received_ms INTEGER NOT NULL,
                dropped_before INTEGER NOT NULL, body BLOB NOT NULL,
                PRIMARY KEY (node, boot_id, seq)) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS nodes (
                node TEXT PRIMARY KEY, role TEXT NOT NULL, boot_id TEXT NOT NULL, agent_version TEXT NOT NULL,
                last_seen_ms INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS pruned (
                node TEXT NOT NULL, boot_id TEXT NOT NULL, n INTEGER NOT NULL,
                PRIMARY KEY (node, boot_id)) WITHOUT ROWID;
             -- What the API server says (hardshift watch): each object's newest projection,
             -- every change a person would look at, and how the last contact went.
             CREATE TABLE IF NOT EXISTS api_objects (
                kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
                observed_ms INTEGER NOT NULL, deleted INTEGER NOT NULL, view TEXT NOT NULL,
                PRIMARY KEY (kind, namespace, name)) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS api_changes (
                observed_ms INTEGER NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL,
                name TEXT NOT NULL, change TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS api_contact (
                id INTEGER PRIMARY KEY CHECK (id = 1), last_ok_ms INTEGER, last_error TEXT,
                last_error_ms INTEGER);
             -- The collector writing this store, for a second one to name when refused.
             CREATE TABLE IF NOT EXISTS writer (
                id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, what TEXT NOT NULL);",
        )?;
        db.execute_batch(boot::SCHEMA)?;
        // The schema above read the database, so its WAL is open (and exists) by now.
        Ok(Store {
            db,
            path: path.to_path_buf(),
            identity: identity(path),
            wal_identity: identity(&beside(path, "-wal")),
            halted: None,
        })
    }

    /// Make an empty store at `path` if there is none, whole or not at all: built beside it and
    /// linked into place (never over a file another process made meanwhile). A reader never sees
    /// a half-made store, and a writer can lock the file before it opens it.
    pub fn create(path: &Path) -> Result<(), StoreError> {
        if path.exists() {
            return Ok(());
        }
        // Unique per call, not per process: the collector and `lab serve`'s boot events may make it
        // at once from two threads of one process.
        let tmp = beside(path, &format!(".new-{}-{}", std::process::id(), hardshift_bundle::fsio::nanos()));
        let made = Store::open(&tmp).map(drop).and_then(|_| match std::fs::hard_link(&tmp, path) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(StoreError::Broken(format!("{}: {e}", path.display()))),
            _ => Ok(()),
        });
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(beside(&tmp, suffix));
        }
        made
    }

    /// Open an existing store to read it (`status`, `events`, `diagnose`, `gather`, `wait-for`):
    /// nothing is created or written, and a file that is not a collector's store (another kind
    /// of file, empty, not SQLite, damaged, without the tables) is an error saying what it is.
    pub fn read(path: &Path) -> Result<Store, StoreError> {
        use rusqlite::OpenFlags;
        use std::os::unix::fs::FileTypeExt;
        let m = std::fs::metadata(path).map_err(|e| StoreError::Broken(format!("cannot read it: {e}")))?;
        let kind = m.file_type();
        let not_a_file = [
            (kind.is_dir(), "a directory"),
            (kind.is_fifo(), "a FIFO"),
            (kind.is_socket(), "a socket"),
            (kind.is_block_device() || kind.is_char_device(), "a device"),
        ];
        if let Some((_, what)) = not_a_file.iter().find(|(is, _)| *is) {
            return Err(StoreError::Broken(format!("{what}, not a report store (a SQLite file)")));
        }
        if m.len() == 0 {
            return Err(StoreError::Broken("empty (0 bytes): not a report store".into()));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let db = Connection::open_with_flags(path, flags)?;
        db.busy_timeout(std::time::Duration::from_secs(5))?;
        let mut stmt = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
        let tables: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        drop(stmt);
        if let Some(t) = TABLES.iter().find(|t| !tables.iter().any(|x| x == *t)) {
            return Err(StoreError::Broken(format!("a SQLite file without a {t} table: not a report store")));
        }
        Ok(Store {
            db,
            path: path.to_path_buf(),
            identity: None,
            wal_identity: None,
            halted: None,
        })
    }

    /// Whether the database file is still the one opened (not deleted, not replaced).
    pub fn still_there(&self) -> bool {
        self.identity.is_some() && identity(&self.path) == self.identity
    }

    /// Why writing on would lose what is acknowledged, if it would: the database file or its
    /// WAL deleted or replaced since they were opened (SQLite goes on writing to the unlinked
    /// inode, which is gone with the process).
    fn lost(&self) -> Option<String> {
        let gone = |p: &Path| format!("{} was deleted or replaced while the collector ran", p.display());
        if !self.still_there() {
            return Some(gone(&self.path));
        }
        let wal = beside(&self.path, "-wal");
        (self.wal_identity.is_some() && identity(&wal) != self.wal_identity).then(|| gone(&wal))
    }

    /// Stop writing, for `why`: save what an unlinked WAL holds into the main file (when that
    /// is still this one), say so in the note beside the store, and refuse every batch from now
    /// on. Called again on each refused batch, it retries a save that failed.
    fn halt(&mut self, why: String) -> StoreError {
        let was_saved = self.halted.as_ref().is_some_and(|h| h.saved);
        let main_gone = !self.still_there();
        let saved = was_saved || main_gone || self.rescue();
        let then = if main_gone {
            "restart the collector to open a new one, the agents resend what they kept".to_string()
        } else if saved {
            format!(
                "what the WAL held is saved into {}; restart the collector, the agents resend what they kept",
                self.path.display()
            )
        } else {
            "saving what the WAL held into the database failed and is retried (see the log): restart the collector once it is saved"
                .to_string()
        };
        let message = format!("{why}: not acknowledging any more reports (they would be lost with the unlinked file); {then}");
        if self.halted.as_ref().is_none_or(|h| h.saved != saved) {
            write_note(&self.path, &message);
        }
        self.halted = Some(Halted { why, saved });
        StoreError::Broken(message)
    }

    /// Copy every page the WAL holds into the main file through this connection's descriptor,
    /// which still reaches the unlinked WAL; true when all of it was copied.
    fn rescue(&self) -> bool {
        let r = self.db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        });
        match r {
            Ok((0, log, done)) if done >= log => true,
            Ok((busy, log, done)) => {
                tracing::warn!("saving the deleted WAL: {done} of {log} pages (busy {busy}); retried at the next batch");
                false
            }
            Err(e) => {
                tracing::error!("saving the deleted WAL: {e}");
                false
            }
        }
    }

    /// Run `f` in one transaction: all of it is stored (one fsync), or none. Refused, and the
    /// store halted, once a file of the store is no longer the one opened: before the
    /// transaction, and after its commit (then it went to an unlinked WAL: not acknowledged).
    pub fn batch<T>(&mut self, f: impl FnOnce(&Store) -> Result<T, StoreError>) -> Result<T, StoreError> {
        if let Some(why) = self.halted.as_ref().map(|h| h.why.clone()) {
            return Err(self.halt(why));
        }
        if let Some(why) = self.lost() {
            return Err(self.halt(why));
        }
        self.db.execute_batch("BEGIN IMMEDIATE")?;
        let v = match f(self) {
            Ok(v) => v,
            Err(e) => {
                let _ = self.db.execute_batch("ROLLBACK");
                return Err(e);
            }
        };
        self.db.execute_batch("COMMIT")?;
        if self.wal_identity.is_none() {
            self.wal_identity = identity(&beside(&self.path, "-wal"));
        }
        if let Some(why) = self.lost() {
            return Err(self.halt(why));
        }
        Ok(v)
    }

    pub fn hello(&self, node: &str, role: &str, boot_id: &str, version: &str, now_ms: i64) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO nodes (node, role, boot_id, agent_version, last_seen_ms) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(node) DO UPDATE SET role = ?2, boot_id = ?3, agent_version = ?4, last_seen_ms = ?5",
            params![node, role, boot_id, version, now_ms],
        )?;
        Ok(())
    }

    /// Store a report; false when it was already stored (a resend).
    pub fn insert(&self, node: &str, boot_id: &str, r: &NodeReport, now_ms: i64) -> Result<bool, StoreError> {
        let n = self.db.execute(
            "INSERT OR IGNORE INTO reports (node, boot_id, seq, agent_time_ms, received_ms, dropped_before, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                node,
                boot_id,
                r.seq as i64,
                r.time_ms,
                now_ms,
                r.dropped_before as i64,
                r.encode_to_vec()
            ],
        )?;
        self.db
            .execute("UPDATE nodes SET last_seen_ms = ?2 WHERE node = ?1", params![node, now_ms])?;
        Ok(n == 1)
    }

    /// Delete reports received before `before_ms`, except each boot's newest (status reads it).
    /// What is deleted is counted per boot, so it is not mistaken for reports lost on the way.
    pub fn prune(&self, before_ms: i64) -> Result<u64, StoreError> {
        let keep = "(node, boot_id, seq) NOT IN (SELECT node, boot_id, MAX(seq) FROM reports GROUP BY node, boot_id)";
        self.db.execute(
            &format!(
                "INSERT INTO pruned (node, boot_id, n)
                 SELECT node, boot_id, COUNT(*) FROM reports WHERE received_ms < ?1 AND {keep} GROUP BY node, boot_id
                 ON CONFLICT(node, boot_id) DO UPDATE SET n = n + excluded.n"
            ),
            params![before_ms],
        )?;
        let n = self.db.execute(
            &format!("DELETE FROM reports WHERE received_ms < ?1 AND {keep}"),
            params![before_ms],
        )?;
        Ok(n as u64)
    }

    /// Highest seq stored for this node and boot (what the agent may forget).
    pub fn highest(&self, node: &str, boot_id: &str) -> Result<u64, StoreError> {
        let v: Option<i64> = self.db.query_row(
            "SELECT MAX(seq) FROM reports WHERE node = ?1 AND boot_id = ?2",
            params![node, boot_id],
            |r| r.get(0),
        )?;
        Ok(v.unwrap_or(0) as u64)
    }

    /// Every node with its latest report.
    pub fn nodes(&self) -> Result<Vec<NodeRow>, StoreError> {
        let mut stmt = self.db.prepare(
            "SELECT n.node, n.role, n.boot_id, n.last_seen_ms,
                    (SELECT COUNT(*) FROM reports r WHERE r.node = n.node),
                    COALESCE(g.lost, 0),
                    (SELECT seq FROM reports r WHERE r.node = n.node AND r.boot_id = n.boot_id ORDER BY seq DESC LIMIT 1),
                    (SELECT body FROM reports r WHERE r.node = n.node AND r.boot_id = n.boot_id ORDER BY seq DESC LIMIT 1)
             FROM nodes n
             -- Seqs are dense within a boot (the agent keeps its seq across restarts), so what
             -- is missing below each boot's highest seq was never stored: a full outbox dropped
             -- it, or an agent was killed before sending it.
             LEFT JOIN (SELECT r.node, SUM(r.m - r.c - COALESCE(p.n, 0)) AS lost FROM
                          (SELECT node, boot_id, MAX(seq) AS m, COUNT(*) AS c FROM reports GROUP BY node, boot_id) r
                          LEFT JOIN pruned p ON p.node = r.node AND p.boot_id = r.boot_id
                        GROUP BY r.node) g ON g.node = n.node
             ORDER BY n.node",
        )?;
        let rows = stmt.query_map([], |r| {
            let body: Option<Vec<u8>> = r.get(7)?;
            Ok(NodeRow {
                node: r.get(0)?,
                role: r.get(1)?,
                boot_id: r.get(2)?,
                last_seen_ms: r.get(3)?,
                reports: r.get::<_, i64>(4)? as u64,
                dropped: r.get::<_, i64>(5)? as u64,
                last_seq: r.get::<_, Option<i64>>(6)?.unwrap_or(0) as u64,
                last: body.map(|b| decode(&b)).transpose()?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every node with its latest report, without `reports` and `dropped` (left 0): two primary
    /// key lookups per node, so its cost does not grow with the history kept. The dashboard
    /// rebuilds from this several times a second and takes the counts from `nodes` now and then.
    pub fn latest(&self) -> Result<Vec<NodeRow>, StoreError> {
        let mut stmt = self.db.prepare(
            "SELECT n.node, n.role, n.boot_id, n.last_seen_ms,
                    (SELECT seq FROM reports r WHERE r.node = n.node AND r.boot_id = n.boot_id ORDER BY seq DESC LIMIT 1),
                    (SELECT body FROM reports r WHERE r.node = n.node AND r.boot_id = n.boot_id ORDER BY seq DESC LIMIT 1)
             FROM nodes n ORDER BY n.node",
        )?;
        let rows = stmt.query_map([], |r| {
            let body: Option<Vec<u8>> = r.get(5)?;
            Ok(NodeRow {
                node: r.get(0)?,
                role: r.get(1)?,
                boot_id: r.get(2)?,
                last_seen_ms: r.get(3)?,
                reports: 0,
                dropped: 0,
                last_seq: r.get::<_, Option<i64>>(4)?.unwrap_or(0) as u64,
                last: body.map(|b| decode(&b)).transpose()?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// (seq) of every stored report of a node and boot, ascending: for gap and duplicate checks.
    pub fn seqs(&self, node: &str, boot_id: &str) -> Result<Vec<u64>, StoreError> {
        let mut stmt = self
            .db
            .prepare("SELECT seq FROM reports WHERE node = ?1 AND boot_id = ?2 ORDER BY seq")?;
        let rows = stmt.query_map(params![node, boot_id], |r| r.get::<_, i64>(0))?;
        Ok(rows.map(|r| r.map(|v| v as u64)).collect::<Result<_, _>>()?)
    }

    /// Every stored report of a node, in (boot, seq) order (boots in order of first arrival).
    pub fn reports(&self, node: &str) -> Result<Vec<(String, NodeReport)>, StoreError> {
        let mut stmt = self.db.prepare(
            "SELECT boot_id, body FROM reports WHERE node = ?1
             ORDER BY (SELECT MIN(received_ms) FROM reports r2 WHERE r2.node = ?1 AND r2.boot_id = reports.boot_id), seq",
        )?;
        let rows = stmt.query_map(params![node], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (b, body) = row?;
            out.push((b, decode(&body)?));
        }
        Ok(out)
    }

    /// The newest `limit` reports of a node's current boot, oldest first (the dashboard's
    /// recent events). Walks the primary key backwards: cheap however long the history.
    pub fn recent_reports(&self, node: &str, limit: usize) -> Result<Vec<(String, NodeReport)>, StoreError> {
        let mut stmt = self.db.prepare(
            "SELECT boot_id, body FROM reports
             WHERE node = ?1 AND boot_id = (SELECT boot_id FROM nodes WHERE node = ?1)
             ORDER BY seq DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![node, limit as i64], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (b, body) = row?;
            out.push((b, decode(&body)?));
        }
        out.reverse();
        Ok(out)
    }

    /// Record this process as the store's writer (`what` it is), for another to name; copied
    /// into the main file at once, where a reader through a hard link (which has a WAL of its
    /// own name) finds it.
    pub fn set_writer(&self, pid: u32, what: &str) -> Result<(), StoreError> {
        self.db.execute(
            "INSERT INTO writer (id, pid, what) VALUES (1, ?1, ?2) ON CONFLICT(id) DO UPDATE SET pid = ?1, what = ?2",
            params![pid, what],
        )?;
        self.db.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        Ok(())
    }

    /// The writer recorded in the main file of the store at `path`: (pid, what it is). Read as
    /// immutable: no lock, no WAL, nothing created beside a file another process writes.
    pub fn writer_of(path: &Path) -> Option<(u32, String)> {
        use rusqlite::OpenFlags;
        let escaped = path.to_str()?.replace('%', "%25").replace('?', "%3f").replace('#', "%23");
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let db = Connection::open_with_flags(format!("file:{escaped}?immutable=1"), flags).ok()?;
        db.query_row("SELECT pid, what FROM writer WHERE id = 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .ok()
    }

    pub fn boot_of(&self, node: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .db
            .query_row("SELECT boot_id FROM nodes WHERE node = ?1", params![node], |r| r.get(0))
            .optional()?)
    }
}

/// A stored report's body, decoded: one that does not decode means a damaged store.
fn decode(body: &[u8]) -> rusqlite::Result<NodeReport> {
    NodeReport::decode(body).map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Blob, Box::new(e)))
}

/// Create `path` 0600 if absent; make it and its -wal and -shm files 0600 if present.
/// Never opens the file when it exists: closing any descriptor of a database file drops every
/// POSIX lock this process holds on it, and another connection of this process (the collector's
/// ingest beside its API watch) would lose its locks; a reader closing last would then take
/// itself for the last connection and delete the WAL under the writer.
fn private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if !path.exists() {
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    for suffix in ["", "-wal", "-shm"] {
        match std::fs::set_permissions(beside(path, suffix), std::fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_store_is_made_whole_and_read_without_writing() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("db");
        Store::create(&path).unwrap();
        Store::create(&path).unwrap();
        let names: Vec<String> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert_eq!(names, ["db"], "nothing left beside it");
        assert!(Store::read(&path).unwrap().nodes().unwrap().is_empty());
        std::fs::write(&path, "").unwrap();
        let e = Store::read(&path).err().unwrap().to_string();
        assert!(e.contains("empty"), "{e}");
    }

    #[test]
    fn resends_are_stored_once() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(&t.path().join("db")).unwrap();
        s.hello("m0", "master", "b1", "0.1", 1).unwrap();
        let r = NodeReport {
            seq: 1,
            time_ms: 5,
            ..Default::default()
        };
        assert!(s.insert("m0", "b1", &r, 10).unwrap());
        assert!(!s.insert("m0", "b1", &r, 11).unwrap());
        assert!(s.insert("m0", "b2", &r, 12).unwrap(), "a new boot restarts seq");
        assert_eq!(s.highest("m0", "b1").unwrap(), 1);
        assert_eq!(s.seqs("m0", "b1").unwrap(), vec![1]);
        let rows = s.nodes().unwrap();
        assert_eq!(rows[0].reports, 2);
    }

    #[test]
    fn latest_and_recent_read_the_current_boot_newest_first() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(&t.path().join("db")).unwrap();
        s.hello("m0", "master", "b1", "0.1", 1).unwrap();
        for seq in 1..=5 {
            let r = NodeReport {
                seq,
                time_ms: seq as i64,
                ..Default::default()
            };
            s.insert("m0", "b1", &r, 10 + seq as i64).unwrap();
        }
        s.hello("m0", "master", "b2", "0.1", 20).unwrap();
        for seq in 1..=2 {
            let r = NodeReport {
                seq,
                time_ms: 100 + seq as i64,
                ..Default::default()
            };
            s.insert("m0", "b2", &r, 30 + seq as i64).unwrap();
        }
        let (full, light) = (s.nodes().unwrap(), s.latest().unwrap());
        assert_eq!(light.len(), 1);
        assert_eq!((light[0].last_seq, &light[0].boot_id), (full[0].last_seq, &full[0].boot_id));
        assert_eq!(light[0].last, full[0].last);
        assert_eq!(light[0].last.as_ref().unwrap().time_ms, 102);
        let recent = s.recent_reports("m0", 10).unwrap();
        let seqs: Vec<(String, u64)> = recent.iter().map(|(b, r)| (b.clone(), r.seq)).collect();
        assert_eq!(seqs, [("b2".to_string(), 1), ("b2".to_string(), 2)]);
        assert_eq!(s.recent_reports("m0", 1).unwrap()[0].1.seq, 2);
    }

    #[test]
    fn api_observations_keep_the_newest_view_and_each_change() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(&t.path().join("db")).unwrap();
        let v = |st: &str| serde_json::json!({"conditions": [{"type": "Ready", "status": st}]});
        assert_eq!(
            s.observe("Node", "", "m0", Some(&v("False")), 1).unwrap().as_deref(),
            Some("created (Ready=False)")
        );
        assert_eq!(s.observe("Node", "", "m0", Some(&v("False")), 2).unwrap(), None, "unchanged");
        assert_eq!(
            s.observe("Node", "", "m0", Some(&v("True")), 3).unwrap().as_deref(),
            Some("Ready False → True")
        );
        let objs = s.api_objects().unwrap();
        assert_eq!((objs.len(), objs[0].observed_ms, objs[0].is_true("Ready")), (1, 3, true));
        assert_eq!(s.observe("Node", "", "m0", None, 4).unwrap().as_deref(), Some("deleted"));
        assert!(s.api_objects().unwrap().is_empty());
        assert_eq!(s.api_changes().unwrap().len(), 3);
        s.api_contact(Err("connection refused"), 5).unwrap();
        s.api_contact(Ok(()), 6).unwrap();
        let c = s.api_status().unwrap();
        assert_eq!((c.last_ok_ms, c.last_error.as_deref()), (Some(6), Some("connection refused")));
    }

    #[test]
    fn lost_reports_are_the_gaps_of_each_boot() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(&t.path().join("db")).unwrap();
        s.hello("m0", "master", "b2", "0.1", 1).unwrap();
        let put = |boot: &str, seq: u64| {
            let r = NodeReport { seq, ..Default::default() };
            s.insert("m0", boot, &r, 1).unwrap();
        };
        // Boot 1: 4, 5 and 6 never arrived; boot 2: 3 never arrived.
        for seq in [1, 2, 3, 7] {
            put("b1", seq);
        }
        for seq in [1, 2, 4] {
            put("b2", seq);
        }
        let rows = s.nodes().unwrap();
        assert_eq!((rows[0].reports, rows[0].dropped, rows[0].last_seq), (7, 4, 4));
    }

    #[test]
    fn pruning_keeps_the_newest_and_is_not_counted_as_lost() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("db");
        let s = Store::open(&path).unwrap();
        s.hello("m0", "master", "b1", "0.1", 1).unwrap();
        for seq in 1..=10u64 {
            let r = NodeReport { seq, ..Default::default() };
            s.insert("m0", "b1", &r, seq as i64 * 100).unwrap();
        }
        // Everything received before 1000 goes, but seq 10 (received at 1000) is the newest anyway.
        assert_eq!(s.prune(2000).unwrap(), 9);
        assert_eq!(s.seqs("m0", "b1").unwrap(), vec![10]);
        let row = &s.nodes().unwrap()[0];
        assert_eq!((row.reports, row.dropped, row.last_seq), (1, 0, 10));
        for f in ["db", "db-wal", "db-shm"] {
            let mode = std::fs::metadata(t.path().join(f)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{f}");
        }
    }
}
