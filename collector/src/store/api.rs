//! What the API watch saw, kept beside the reports: each object's newest view, every change,
//! and the watch's last contact with the API server.

use crate::store::db::{Store, StoreError};
use rusqlite::{params, OptionalExtension};

impl Store {
    /// Record what the API server said of one object (None: it was deleted). Returns the
    /// change recorded, if any. Unchanged objects rewrite nothing.
    pub fn observe(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        view: Option<&serde_json::Value>,
        now_ms: i64,
    ) -> Result<Option<String>, StoreError> {
        let old: Option<(String, bool)> = self
            .db
            .query_row(
                "SELECT view, deleted FROM api_objects WHERE kind = ?1 AND namespace = ?2 AND name = ?3",
                params![kind, namespace, name],
                |r| Ok((r.get(0)?, r.get::<_, i64>(1)? != 0)),
            )
            .optional()?;
        let before: Option<serde_json::Value> = old
            .as_ref()
            .filter(|(_, deleted)| !deleted)
            .and_then(|(v, _)| serde_json::from_str(v).ok());
        if before.as_ref() == view {
            return Ok(None);
        }
        let change = crate::api::change(kind, before.as_ref(), view);
        let text = match view {
            Some(v) => v.to_string(),
            None => old.map(|(v, _)| v).unwrap_or_else(|| "{}".into()),
        };
        self.db.execute(
            "INSERT INTO api_objects (kind, namespace, name, observed_ms, deleted, view) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(kind, namespace, name) DO UPDATE SET observed_ms = ?4, deleted = ?5, view = ?6",
            params![kind, namespace, name, now_ms, view.is_none() as i64, text],
        )?;
        if let Some(c) = &change {
            self.db.execute(
                "INSERT INTO api_changes (observed_ms, kind, namespace, name, change) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![now_ms, kind, namespace, name, c],
            )?;
        }
        Ok(change)
    }

    /// How the last contact with the API server went: Ok(now) or Err(the error).
    pub fn api_contact(&self, result: Result<(), &str>, now_ms: i64) -> Result<(), StoreError> {
        match result {
            Ok(()) => self.db.execute(
                "INSERT INTO api_contact (id, last_ok_ms) VALUES (1, ?1) ON CONFLICT(id) DO UPDATE SET last_ok_ms = ?1",
                params![now_ms],
            )?,
            Err(e) => self.db.execute(
                "INSERT INTO api_contact (id, last_error, last_error_ms) VALUES (1, ?1, ?2)
                 ON CONFLICT(id) DO UPDATE SET last_error = ?1, last_error_ms = ?2",
                params![e, now_ms],
            )?,
        };
        Ok(())
    }

    /// Every object the API server was last seen to hold (deleted ones left out).
    pub fn api_objects(&self) -> Result<Vec<crate::api::ApiObject>, StoreError> {
        let mut stmt = self.db.prepare(
            "SELECT kind, namespace, name, observed_ms, deleted, view FROM api_objects WHERE deleted = 0
             ORDER BY kind, namespace, name",
        )?;
        let rows = stmt.query_map([], |r| {
            let view: String = r.get(5)?;
            Ok(crate::api::ApiObject {
                kind: r.get(0)?,
                namespace: r.get(1)?,
                name: r.get(2)?,
                observed_ms: r.get(3)?,
                deleted: r.get::<_, i64>(4)? != 0,
                view: serde_json::from_str(&view).unwrap_or_default(),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// (last_ok_ms, last_error, last_error_ms) of the API watch; all None if it never ran.
    pub fn api_status(&self) -> Result<ApiContact, StoreError> {
        Ok(self
            .db
            .query_row(
                "SELECT last_ok_ms, last_error, last_error_ms FROM api_contact WHERE id = 1",
                [],
                |r| {
                    Ok(ApiContact {
                        last_ok_ms: r.get(0)?,
                        last_error: r.get(1)?,
                        last_error_ms: r.get(2)?,
                    })
                },
            )
            .optional()?
            .unwrap_or_default())
    }

    /// The API-side timeline, oldest first.
    pub fn api_changes(&self) -> Result<Vec<ApiChange>, StoreError> {
        let mut stmt = self
            .db
            .prepare("SELECT observed_ms, kind, namespace, name, change FROM api_changes ORDER BY rowid")?;
        let rows = stmt.query_map([], |r| {
            Ok(ApiChange {
                time_ms: r.get(0)?,
                kind: r.get(1)?,
                namespace: r.get(2)?,
                name: r.get(3)?,
                change: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// One change the API watch saw.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ApiChange {
    pub time_ms: i64,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub change: String,
}

/// The API watch's last contact.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ApiContact {
    pub last_ok_ms: Option<i64>,
    pub last_error: Option<String>,
    pub last_error_ms: Option<i64>,
}
