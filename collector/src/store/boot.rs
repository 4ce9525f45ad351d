//! The boot events the helper saw (`hardshift lab serve`), kept beside the reports with the same
//! durability: a batch is stored whole before the helper counts it written.

use crate::boot::{BootEvent, Step};
use crate::store::db::{Store, StoreError};
use rusqlite::params;

/// The table, made by `Store::open` (and here, for a store an older collector made).
pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS boot_events (
    at_ms INTEGER NOT NULL, node TEXT NOT NULL, mac TEXT NOT NULL, ip TEXT NOT NULL,
    step TEXT NOT NULL, detail TEXT NOT NULL);
 CREATE INDEX IF NOT EXISTS boot_events_by_node ON boot_events (node, at_ms);";

/// The most events one read returns (the newest): a helper flooded by a broadcast storm must not
/// make `status` read millions of rows.
pub const MAX_READ: usize = 100_000;

impl Store {
    /// Store `events` in one transaction (call inside `batch` for its durability checks).
    pub fn add_boot_events(&self, events: &[BootEvent]) -> Result<(), StoreError> {
        let mut stmt = self
            .db
            .prepare_cached("INSERT INTO boot_events (at_ms, node, mac, ip, step, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?;
        for e in events {
            stmt.execute(params![e.at_ms, e.node, e.mac, e.ip, e.step.name(), e.detail])?;
        }
        Ok(())
    }

    /// The detail of `node`'s newest install event (what its live agent last said of its install).
    pub fn last_install_detail(&self, node: &str) -> Result<Option<String>, StoreError> {
        use rusqlite::OptionalExtension;
        Ok(self
            .db
            .query_row(
                "SELECT detail FROM boot_events WHERE node = ?1 AND step = 'install' ORDER BY at_ms DESC, rowid DESC LIMIT 1",
                params![node],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Each node's newest boot step (nodes of the inventory only; HAProxy's checks of it
    /// aside): what a node that has not reported got to, for the dashboard's rows.
    pub fn last_boot_steps(&self) -> Result<Vec<BootEvent>, StoreError> {
        self.read_boot_events(
            "SELECT at_ms, node, mac, ip, step, detail FROM boot_events
             WHERE rowid IN (SELECT max(rowid) FROM boot_events WHERE node != '' AND step != 'backend' GROUP BY node)",
            params![],
        )
    }

    /// Every boot event (of `node` only, if given), oldest first, at most the newest `MAX_READ`.
    pub fn boot_events(&self, node: Option<&str>) -> Result<Vec<BootEvent>, StoreError> {
        self.read_boot_events(
            "SELECT at_ms, node, mac, ip, step, detail FROM (
               SELECT rowid, * FROM boot_events WHERE ?1 IS NULL OR node = ?1 ORDER BY at_ms DESC, rowid DESC LIMIT ?2)
             ORDER BY at_ms, rowid",
            params![node, MAX_READ as i64],
        )
    }

    /// The events a query of (at_ms, node, mac, ip, step, detail) selects. A store made before
    /// boot events existed has none; a step this hardshift does not know (a newer one wrote it)
    /// is left out, not guessed.
    fn read_boot_events(&self, sql: &str, args: &[&dyn rusqlite::ToSql]) -> Result<Vec<BootEvent>, StoreError> {
        let exists: i64 = self.db.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'boot_events'",
            [],
            |r| r.get(0),
        )?;
        if exists == 0 {
            return Ok(vec![]);
        }
        let mut stmt = self.db.prepare(sql)?;
        let rows = stmt.query_map(args, |r| {
            let step: String = r.get(4)?;
            Ok(Step::of(&step).map(|step| -> rusqlite::Result<BootEvent> {
                Ok(BootEvent {
                    at_ms: r.get(0)?,
                    node: r.get(1)?,
                    mac: r.get(2)?,
                    ip: r.get(3)?,
                    step,
                    detail: r.get(5)?,
                })
            }))
        })?;
        let mut out = Vec::new();
        for row in rows {
            if let Some(e) = row? {
                out.push(e?);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_events_are_stored_in_one_batch_and_read_back_in_order() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("reports.db");
        let mut s = Store::open(&p).unwrap();
        let e = |at_ms, node: &str, step| BootEvent {
            at_ms,
            node: node.into(),
            mac: "52:54:00:aa:bb:01".into(),
            ip: "192.168.126.101".into(),
            step,
            detail: String::new(),
        };
        let events = [
            e(2, "master-0", Step::DhcpAck),
            e(1, "master-0", Step::DhcpDiscover),
            e(3, "", Step::DhcpNoAddress),
        ];
        s.batch(|s| s.add_boot_events(&events)).unwrap();
        let r = Store::read(&p).unwrap();
        let all = r.boot_events(None).unwrap();
        assert_eq!(all.iter().map(|e| e.at_ms).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(r.boot_events(Some("master-0")).unwrap().len(), 2);
        assert_eq!(all[2].step, Step::DhcpNoAddress);
        let last = r.last_boot_steps().unwrap();
        assert_eq!(
            (last.len(), last[0].at_ms, last[0].step),
            (1, 1, Step::DhcpDiscover),
            "the newest stored, the inventory's nodes only"
        );
    }
}
