//! What the dashboard's handlers share: the collector's parts, the store, the inventory and the
//! snapshot of the view every page shows. Below the handlers and the snapshot's rebuild.

use crate::agents::Agents;
use crate::listener::Gate;
use crate::metrics::{self, Metrics};
use crate::phase::Member;
use crate::store::Store;
use crate::view::View;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// What the collector shares with the dashboard.
pub struct Deps {
    pub agents: Arc<Agents>,
    pub gate: Arc<Gate>,
    /// The dashboard's own caps and refusals (its front door), apart from the agents'.
    pub web_gate: Arc<Gate>,
    pub metrics: Arc<Metrics>,
    pub changed: watch::Receiver<u64>,
}

pub(super) struct Shared {
    pub(super) store: Mutex<Store>,
    pub(super) inventory: Option<Vec<Member>>,
    pub(super) snap: watch::Sender<Arc<Snapshot>>,
    /// Asks for a rebuild now: a page opened while the snapshot has no grid (nobody was
    /// watching), or a one-shot read found the view stale (`snapshot::fresh`).
    pub(super) want_rebuild: tokio::sync::Notify,
    pub(super) deps: Deps,
    /// Plain HTTP on loopback: the Host header must name loopback too.
    pub(super) check_host: bool,
    /// For logs fetched from nodes: by pattern and by the bundle's own secret values.
    pub(super) scrubber: crate::scrub::Scrubber,
    /// For what nodes reported: by pattern, as every other output.
    pub(super) reports: crate::scrub::Scrubber,
    pub(super) bundle: metrics::Bundle,
}

impl Shared {
    /// What nodes sent, scrubbed before any page, stream or JSON shows it, as the terminal and
    /// every `-o json` are (by structure and pattern; logs are scrubbed by value too).
    pub(super) fn scrubbed(
        &self,
        mut reports: Vec<(String, hardshift_proto::v1::NodeReport)>,
    ) -> Vec<(String, hardshift_proto::v1::NodeReport)> {
        for (_, r) in &mut reports {
            self.reports.report(r);
        }
        reports
    }
}

pub(super) struct Snapshot {
    pub(super) view: View,
    /// The grid in parts: pages are sent only the rows that changed while the rest holds.
    pub(super) head: String,
    pub(super) rows: Vec<Arc<str>>,
    pub(super) tail: String,
    pub(super) met_at: BTreeMap<&'static str, i64>,
    /// Whether head, rows and tail were rendered (a page was watching).
    pub(super) grid_built: bool,
    /// The store's commit count (`Deps::changed`) when this view was read: a one-shot read
    /// after a commit waits for a view that holds it.
    pub(super) commits: u64,
}

impl Snapshot {
    pub(super) fn grid(&self) -> String {
        let mut g = String::with_capacity(self.head.len() + self.tail.len() + self.rows.iter().map(|r| r.len()).sum::<usize>());
        g.push_str(&self.head);
        for r in &self.rows {
            g.push_str(r);
        }
        g.push_str(&self.tail);
        g
    }
}
