//! The boot's progress on a terminal: a bar per node through its four steps (lease, config
//! fetched, Ignition done, first report) with the last thing seen of it. Not a terminal: nothing
//! here, the caller prints a line per step.

use hardshift_boot_lab::watch::Milestones;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub const STEPS: u64 = 4;

/// How many of the four steps a node has passed.
pub fn steps_done(seen: &Milestones) -> u64 {
    [
        seen.lease.is_some(),
        seen.fetched.is_some(),
        seen.ignition_done.is_some(),
        seen.report.is_some(),
    ]
    .iter()
    .filter(|s| **s)
    .count() as u64
}

pub struct Bars {
    bars: Vec<ProgressBar>,
    _multi: Option<MultiProgress>,
}

impl Bars {
    pub fn new(nodes: &[String]) -> Bars {
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        if !std::io::stderr().is_terminal() || dumb {
            return Bars {
                bars: vec![],
                _multi: None,
            };
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let width = nodes.iter().map(String::len).max().unwrap_or(0);
        let style = ProgressStyle::with_template(&format!("{{prefix:<{width}}} {{elapsed:>4}} [{{bar:4}}] {{msg}}"))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("#>-");
        let bars = nodes
            .iter()
            .map(|n| {
                let b = multi.add(ProgressBar::new(STEPS));
                b.set_style(style.clone());
                b.set_prefix(n.clone());
                b.enable_steady_tick(std::time::Duration::from_secs(1));
                b
            })
            .collect();
        Bars { bars, _multi: Some(multi) }
    }

    /// Whether bars are drawn (a terminal) rather than lines.
    pub fn drawn(&self) -> bool {
        !self.bars.is_empty()
    }

    pub fn show(&self, i: usize, done: u64, last_seen: &str) {
        if let Some(b) = self.bars.get(i) {
            b.set_position(done);
            b.set_message(last_seen.to_string());
        }
    }

    /// The bars stay on screen above the table that follows, as the last word on each node.
    pub fn finish(&self) {
        for b in &self.bars {
            b.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_steps_count_in_order() {
        let mut m = Milestones::default();
        assert_eq!(steps_done(&m), 0);
        m.lease = Some(Duration::from_secs(1));
        m.fetched = Some(Duration::from_secs(2));
        assert_eq!(steps_done(&m), 2);
        m.ignition_done = Some(Duration::from_secs(3));
        m.report = Some(Duration::from_secs(4));
        assert_eq!(steps_done(&m), STEPS);
    }
}
