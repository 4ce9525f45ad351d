//! The note a collector that stopped acknowledging leaves beside its store, for every reader to
//! tell: written whole or not at all, read naming the collector, cleared by the next one.

use crate::store::db::beside;
use std::path::{Path, PathBuf};

/// Where a collector that stopped acknowledging says why, beside its store, for every reader
/// (`status`, `events`, `diagnose`) to tell; a collector starting removes it.
pub fn note_path(db: &Path) -> PathBuf {
    beside(db, ".halted")
}

/// Write the note (pid, then the message), whole or not at all: a temporary file renamed.
pub(super) fn write_note(db: &Path, message: &str) {
    let (tmp, note) = (beside(db, ".halted.tmp"), note_path(db));
    let text = format!("pid {}\n{message}\n", std::process::id());
    if let Err(e) = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, &note)) {
        tracing::error!("{}: {e}", note.display());
    }
}

/// What a collector that stopped acknowledging into `db` said, naming it (and saying when it
/// no longer runs); None when no collector said anything.
pub fn halted(db: &Path) -> Option<String> {
    let text = std::fs::read_to_string(note_path(db)).ok()?;
    let (first, message) = text.split_once('\n')?;
    let pid = first.strip_prefix("pid ")?.trim();
    let gone = if Path::new("/proc").join(pid).exists() {
        ""
    } else {
        ", no longer running"
    };
    Some(format!("the collector (pid {pid}{gone}) stopped: {}", message.trim()))
}

/// Forget what a collector that ran before said (this one starts afresh).
pub fn clear_halted(db: &Path) {
    let _ = std::fs::remove_file(note_path(db));
}
