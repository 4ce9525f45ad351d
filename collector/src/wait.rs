//! `wait-for`'s work: a look at the store (the phase's checks over the bundle's nodes, and their
//! rows), and what a look says: the target reached, the phase it waits in, or, at the timeout,
//! every unmet check with its last error and each node's root cause.

use crate::diagnose::{self, Finding};
use crate::phase::{self, Check, Member};
use crate::store::{NodeRow, Store, StoreError};
use std::path::Path;
use std::time::Duration;

/// The installer's own waits: 45m for bootstrap-complete, 60m for pivot-ready, 40m for
/// install-complete.
pub fn default_timeout(target: &str) -> Duration {
    Duration::from_secs(60)
        * match target {
            "bootstrap-complete" => 45,
            "pivot-ready" => 60,
            _ => 40,
        }
}

/// What the store said at one look: no checks while it does not exist yet.
#[derive(Default)]
pub struct Look {
    pub checks: Vec<Check>,
    pub rows: Vec<NodeRow>,
}

/// Read the store at `db` once. It appears when the collector first starts: until then,
/// nothing is known (an empty look).
pub fn look(db: &Path, inventory: &[Member], now_ms: i64) -> Result<Look, StoreError> {
    if !db.exists() {
        return Ok(Look::default());
    }
    let s = Store::read(db)?;
    let rows = s.nodes()?;
    let checks = phase::checks(inventory, &rows, &s.api_objects()?, &s.api_status()?, now_ms);
    Ok(Look { checks, rows })
}

impl Look {
    /// The checks up to the target's `last` that are not met.
    pub fn unmet(&self, last: &str) -> Vec<&Check> {
        if self.checks.is_empty() {
            return vec![];
        }
        phase::unmet_until(&self.checks, last)
    }

    pub fn reached(&self, last: &str) -> bool {
        !self.checks.is_empty() && self.unmet(last).is_empty()
    }

    /// Where the install waits, in a line (or that there is no store at `db` yet).
    pub fn waiting_for(&self, last: &str, db: &Path) -> String {
        self.unmet(last)
            .first()
            .map(|c| format!("{} ({})", c.title, c.evidence.first().cloned().unwrap_or_default()))
            .unwrap_or_else(|| format!("no store yet at {}: is `hardshift collector` running?", db.display()))
    }

    /// The progress line: how far, after how long.
    pub fn progress(&self, secs: u64, waiting_for: &str) -> String {
        let done = self.checks.iter().take_while(|c| c.met).count();
        format!("[{secs:>5} s] phase {done}/{}: {waiting_for}", self.checks.len())
    }

    /// The first finding of each node: what to look at first.
    pub fn firsts(&self, now_ms: i64) -> Vec<Finding> {
        self.rows
            .iter()
            .filter_map(|r| {
                let last = r.last.as_ref()?;
                diagnose::diagnose(&r.node, &r.role, last, now_ms - r.last_seen_ms)
                    .into_iter()
                    .next()
            })
            .collect()
    }

    /// The outcome for `-o json`: reached or not, after how long, every check (met or not, with
    /// its evidence) and each node's first finding.
    pub fn json(&self, target: &str, reached: bool, secs: u64, findings: &[Finding]) -> serde_json::Value {
        serde_json::json!({
            "target": target,
            "reached": reached,
            "seconds": secs,
            "checks": self.checks,
            "findings": findings,
        })
    }

    /// The target reached, with what showed its last check met.
    pub fn reached_line(&self, target: &str, last: &str, secs: u64) -> String {
        let evidence = self.checks.iter().find(|c| c.id == last).map(|c| c.evidence.join("; "));
        format!("{target} reached after {secs} s: {}", evidence.unwrap_or_default())
    }

    /// The timeout, said: the phase, every unmet check with its evidence, each node's first finding.
    pub fn timed_out(&self, target: &str, last: &str, timeout: Duration, waiting_for: &str, firsts: &[Finding]) -> Vec<String> {
        let unmet = self.unmet(last);
        let at = unmet.first().map(|c| c.title).unwrap_or("no store");
        let mut out = vec![format!(
            "timed out after {} waiting for {target}: the install is at \"{at}\"",
            fmt_duration(timeout)
        )];
        if unmet.is_empty() {
            out.push(format!("  {waiting_for}"));
        }
        for c in &unmet {
            out.push(format!("  unmet: {}", c.title));
            out.extend(c.evidence.iter().map(|e| format!("      {e}")));
        }
        out.extend(
            firsts
                .iter()
                .map(|f| format!("  {} {} {:?}: {}", f.node, f.id, f.severity, f.title)),
        );
        out
    }
}

/// `1h`, `45m`, `90s`: whole hours or minutes as such.
fn fmt_duration(d: Duration) -> String {
    match d.as_secs() {
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// How a wait ended: as one JSON object and as lines for a person.
pub struct Outcome {
    pub reached: bool,
    pub json: serde_json::Value,
    pub lines: Vec<String>,
}

/// Look at the store every `interval` until `last`'s checks are all met or `timeout` passes;
/// each new "waiting for" goes to `progress` as its line.
pub fn until(
    db: &Path,
    inventory: &[Member],
    (target, last): (&str, &str),
    timeout: Duration,
    interval: Duration,
    progress: &mut dyn FnMut(&str),
) -> Result<Outcome, StoreError> {
    let start = std::time::Instant::now();
    let mut shown: Option<String> = None;
    loop {
        let now = crate::now_ms();
        let look = look(db, inventory, now)?;
        let secs = start.elapsed().as_secs();
        if look.reached(last) {
            let lines = vec![look.reached_line(target, last, secs)];
            return Ok(Outcome {
                reached: true,
                json: look.json(target, true, secs, &[]),
                lines,
            });
        }
        let waiting_for = look.waiting_for(last, db);
        if shown.as_ref() != Some(&waiting_for) {
            progress(&look.progress(secs, &waiting_for));
            shown = Some(waiting_for.clone());
        }
        if start.elapsed() >= timeout {
            let firsts = look.firsts(now);
            let lines = look.timed_out(target, last, timeout, &waiting_for, &firsts);
            return Ok(Outcome {
                reached: false,
                json: look.json(target, false, secs, &firsts),
                lines,
            });
        }
        std::thread::sleep(interval.min(timeout.saturating_sub(start.elapsed())).max(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_store_nothing_is_reached_and_the_timeout_says_so() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("reports.db");
        let l = look(&db, &[], 0).unwrap();
        assert!(!l.reached("cvo") && l.unmet("cvo").is_empty());
        let w = l.waiting_for("cvo", &db);
        assert!(w.starts_with("no store yet at "), "{w}");
        let said = l.timed_out("bootstrap-complete", "cvo", default_timeout("bootstrap-complete"), &w, &[]);
        assert_eq!(
            said,
            [
                "timed out after 45m waiting for bootstrap-complete: the install is at \"no store\"".to_string(),
                format!("  {w}")
            ]
        );
        assert_eq!(l.progress(7, &w), format!("[    7 s] phase 0/0: {w}"));
    }

    #[test]
    fn durations_are_said_in_whole_units() {
        assert_eq!(fmt_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(fmt_duration(Duration::from_secs(90 * 60)), "90m");
        assert_eq!(fmt_duration(Duration::from_secs(61)), "61s");
    }
}
