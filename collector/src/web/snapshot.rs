//! The one view every page shows: rebuilt from the store when a commit lands (at most four
//! times a second, at least every 2 s), kept as a snapshot each page's stream holds a receiver
//! of, with the grid in rows so a page is sent only the rows that changed. The grid is rendered
//! only while a page holds a receiver: unwatched, a rebuild is the view alone (what /metrics and
//! the phase times need), which at 20,000 nodes saves rendering 20,000 rows every 2 s. Unwatched,
//! the view is rebuilt only every 10 s, or at once when a scrape or a page asks for it
//! (`Shared::want_rebuild`): each rebuild reads and decodes every node's newest report.

use crate::api::ApiObject;
use crate::now_ms;
use crate::store::{ApiContact, NodeRow};
use crate::view;
use crate::web::pages;
use crate::web::shared::{Shared, Snapshot};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Rebuilds of the view at most this often, however fast reports arrive.
const MIN_REBUILD: Duration = Duration::from_millis(250);
/// …and at least this often while a page watches, so "seen" clocks and API changes show
/// without a report. A one-shot read (a scrape, the JSON view) gets a view no older than this.
pub(super) const MAX_REBUILD: Duration = Duration::from_secs(2);
/// Nobody watching: the tick that keeps the phase times (when each check was first met).
const UNWATCHED_REBUILD: Duration = Duration::from_secs(10);

/// What a rebuild keeps between runs.
#[derive(Default)]
pub(super) struct Memory {
    /// When this collector first saw each install check met.
    met_at: BTreeMap<&'static str, i64>,
    /// Reports stored and lost per node: counting them reads the whole history, so it is done
    /// every `COUNTS_EVERY` and not on every rebuild.
    counts: HashMap<String, (u64, u64)>,
    counted: Option<Instant>,
}

const COUNTS_EVERY: Duration = Duration::from_secs(15);

/// What the store holds for a view: every node's row (with its counts when `recount`), the
/// API's objects and the collector's contact with the API. None when it cannot be read (said).
async fn read_store(s: &Arc<Shared>, recount: bool) -> Option<(Vec<NodeRow>, Vec<ApiObject>, ApiContact, Vec<crate::boot::BootEvent>)> {
    let s2 = s.clone();
    let built = tokio::task::spawn_blocking(move || {
        let st = s2.store.lock().map_err(|_| "store lock".to_string())?;
        let rows = if recount { st.nodes() } else { st.latest() }.map_err(|e| e.to_string())?;
        let api = st.api_objects().map_err(|e| e.to_string())?;
        let contact = st.api_status().map_err(|e| e.to_string())?;
        let boot = st.last_boot_steps().map_err(|e| e.to_string())?;
        drop(st);
        Ok::<_, String>((rows, api, contact, boot))
    })
    .await;
    match built {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            tracing::error!("dashboard: {e}");
            None
        }
        Err(_) => None,
    }
}

/// Reports stored and lost per node: freshly counted when `recount`, else the last count's.
fn counts(mem: &mut Memory, rows: &mut [NodeRow], recount: bool) {
    if recount {
        mem.counts = rows.iter().map(|r| (r.node.clone(), (r.reports, r.dropped))).collect();
        mem.counted = Some(Instant::now());
    } else {
        for r in rows {
            // A node new since the last count has at least the report just read.
            let (n, lost) = mem.counts.get(&r.node).copied().unwrap_or((1, 0));
            (r.reports, r.dropped) = (n.max(1), lost);
        }
    }
}

pub(super) async fn rebuild(s: &Arc<Shared>, mem: &mut Memory) {
    let recount = mem.counted.is_none_or(|t| t.elapsed() >= COUNTS_EVERY);
    // Read before the store: a commit landing meanwhile makes this view count as older.
    let commits = *s.deps.changed.borrow();
    let Some((mut rows, api, contact, boot)) = read_store(s, recount).await else {
        return;
    };
    // What nodes sent is scrubbed before the view, its pages and its streams are made of it.
    for r in rows.iter_mut().filter_map(|r| r.last.as_mut()) {
        s.reports.report(r);
    }
    counts(mem, &mut rows, recount);
    let mut view = view::build(&rows, s.inventory.as_deref(), &api, &contact, now_ms());
    view::with_boot_steps(&mut view, &boot);
    let met_at = &mut mem.met_at;
    for c in view.checks.iter().filter(|c| c.met) {
        met_at.entry(c.id).or_insert(view.now_ms);
    }
    let met_at = met_at.clone();
    let grid_built = s.snap.receiver_count() > 0;
    if !grid_built {
        s.snap.send_replace(Arc::new(Snapshot {
            view,
            head: String::new(),
            rows: vec![],
            tail: String::new(),
            met_at,
            grid_built,
            commits,
        }));
        return;
    }
    let head = pages::grid_head(&view);
    let tail = pages::grid_tail(&view);
    // Pages are told only when what they show changed: an idle install costs no traffic. An
    // unchanged row keeps its allocation, so a page's stream compares it by pointer.
    s.snap.send_if_modified(|cur| {
        let rows: Vec<Arc<str>> = view
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let r = pages::grid_row(&view, n);
                match cur.rows.get(i) {
                    Some(old) if **old == *r => old.clone(),
                    _ => Arc::from(r),
                }
            })
            .collect();
        let same = cur.grid_built
            && cur.head == head
            && cur.tail == tail
            && cur.met_at == met_at
            && cur.rows.len() == rows.len()
            && cur.rows.iter().zip(&rows).all(|(a, b)| Arc::ptr_eq(a, b));
        *cur = Arc::new(Snapshot {
            view,
            head,
            rows,
            tail,
            met_at,
            grid_built,
            commits,
        });
        !same
    });
}

pub(super) async fn refresh(s: Arc<Shared>, mut changed: watch::Receiver<u64>, mut stop: watch::Receiver<bool>) {
    let mut mem = Memory::default();
    loop {
        let started = Instant::now();
        rebuild(&s, &mut mem).await;
        let watched = s.snap.receiver_count() > 0;
        tokio::select! {
            _ = changed.changed(), if watched => {}
            // A page opened and wants the grid now, or a scrape wants a fresh view.
            _ = s.want_rebuild.notified() => {}
            _ = tokio::time::sleep(if watched { MAX_REBUILD } else { UNWATCHED_REBUILD }) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        tokio::time::sleep_until((started + MIN_REBUILD).into()).await;
    }
}

/// The view for a one-shot read (a scrape, the JSON view, a page's first load): one that holds
/// every report committed before the read and is at most `MAX_REBUILD` old; a stale one is
/// rebuilt at once and awaited. It polls rather than subscribes: a receiver would make that
/// rebuild render the grid nobody is watching.
pub(super) async fn fresh(s: &Shared) -> Arc<Snapshot> {
    let asked = now_ms();
    let commits = *s.deps.changed.borrow();
    let stale = |snap: &Snapshot| snap.commits < commits || snap.view.now_ms + (MAX_REBUILD.as_millis() as i64) < asked;
    if stale(&s.snap.borrow()) {
        s.want_rebuild.notify_one();
        let deadline = Instant::now() + MAX_REBUILD * 2;
        while stale(&s.snap.borrow()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let snap = s.snap.borrow().clone();
    snap
}

/// What one page of the grid is sent for a new snapshot, given what it was sent last: the
/// whole grid when its frame changed, else the changed rows, else nothing.
pub(super) fn grid_update(last: Option<&Snapshot>, now: &Snapshot) -> Option<(Option<&'static str>, String)> {
    let Some(last) = last else {
        return Some((None, now.grid()));
    };
    if last.head != now.head || last.tail != now.tail || last.rows.len() != now.rows.len() {
        return Some((None, now.grid()));
    }
    let changed: String = last
        .rows
        .iter()
        .zip(&now.rows)
        .filter(|(a, b)| !Arc::ptr_eq(a, b) && a != b)
        .map(|(_, b)| &**b)
        .collect();
    (!changed.is_empty()).then_some((Some("rows"), changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(head: &str, rows: &[&str]) -> Snapshot {
        Snapshot {
            view: view::build(&[], None, &[], &Default::default(), 0),
            head: head.into(),
            rows: rows.iter().map(|r| Arc::from(*r)).collect(),
            tail: String::new(),
            met_at: BTreeMap::new(),
            grid_built: true,
            commits: 0,
        }
    }

    #[test]
    fn pages_get_the_rows_that_changed_or_the_whole_grid() {
        let a = snap("h", &["<tr id=a>1</tr>", "<tr id=b>1</tr>"]);
        assert_eq!(grid_update(None, &a), Some((None, a.grid())));
        let mut b = snap("h", &["<tr id=a>1</tr>", "<tr id=b>2</tr>"]);
        b.rows[0] = a.rows[0].clone();
        assert_eq!(grid_update(Some(&a), &b), Some((Some("rows"), "<tr id=b>2</tr>".to_string())));
        assert_eq!(grid_update(Some(&b), &b), None);
        // Equal text in a new allocation is not a change either.
        let c = snap("h", &["<tr id=a>1</tr>", "<tr id=b>2</tr>"]);
        assert_eq!(grid_update(Some(&b), &c), None);
        let d = snap("h2", &["<tr id=a>1</tr>", "<tr id=b>2</tr>"]);
        assert_eq!(grid_update(Some(&c), &d), Some((None, d.grid())));
        let e = snap("h2", &["<tr id=a>1</tr>"]);
        assert_eq!(grid_update(Some(&d), &e), Some((None, e.grid())));
    }
}
