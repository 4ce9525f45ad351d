//! Reports not yet acknowledged by the collector. Bounded: when full, the oldest is dropped and
//! counted, and the count travels with the next report so the collector can show the gap. A
//! count is never lost: if the report carrying it is dropped in turn, the next one carries both.

use hardshift_proto::v1::NodeReport;
use std::collections::VecDeque;

pub struct Outbox {
    queue: VecDeque<NodeReport>,
    capacity: usize,
    next_seq: u64,
    dropped: u64,
}

impl Outbox {
    /// An outbox whose first report gets `last + 1`: a restarted agent continues its boot's sequence.
    pub fn after_seq(capacity: usize, last: u64) -> Self {
        Outbox {
            queue: VecDeque::new(),
            capacity: capacity.max(1),
            // Never past what the store keeps (seq_state::MAX_SEQ), never wrapping.
            next_seq: last.min(crate::seq_state::MAX_SEQ - 1) + 1,
            dropped: 0,
        }
    }

    /// The seq the next `push` will use.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Number and queue a report; returns its seq.
    pub fn push(&mut self, mut r: NodeReport) -> u64 {
        if self.queue.len() == self.capacity {
            if let Some(gone) = self.queue.pop_front() {
                self.dropped += 1 + gone.dropped_before;
            }
        }
        r.seq = self.next_seq;
        if r.seq == crate::seq_state::MAX_SEQ {
            // Never reached by a real boot (seq_state::PLAUSIBLE_SEQ): say so rather than have
            // the collector drop every report as a duplicate in silence.
            tracing::error!("the report sequence is exhausted at {}: the collector drops these reports as duplicates; restart the agent with a fresh seq file", r.seq);
        }
        r.dropped_before = std::mem::take(&mut self.dropped);
        self.next_seq = (self.next_seq + 1).min(crate::seq_state::MAX_SEQ);
        self.queue.push_back(r);
        self.next_seq - 1
    }

    /// Forget everything the collector has stored.
    pub fn ack(&mut self, highest: u64) {
        while self.queue.front().is_some_and(|r| r.seq <= highest) {
            self.queue.pop_front();
        }
    }

    /// Reports with seq > `after`, in order: what to (re)send.
    pub fn after(&self, after: u64) -> impl Iterator<Item = &NodeReport> {
        self.queue.iter().filter(move |r| r.seq > after)
    }

    /// Whether the collector has stored every report queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_acks_and_counts_overflow() {
        let mut o = Outbox::after_seq(3, 0);
        for _ in 0..5 {
            o.push(NodeReport::default());
        }
        // 1 and 2 were dropped to keep the newest three; the count rides on the report after.
        let seqs: Vec<u64> = o.after(0).map(|r| r.seq).collect();
        assert_eq!(seqs, vec![3, 4, 5]);
        assert_eq!(o.after(0).map(|r| r.dropped_before).sum::<u64>(), 2);
        o.ack(4);
        assert_eq!(o.after(0).map(|r| r.seq).collect::<Vec<_>>(), vec![5]);
        assert_eq!(o.after(5).count(), 0);
        assert_eq!(o.last_seq(), 5);
    }

    #[test]
    fn a_drop_count_survives_its_carrier_being_dropped() {
        // Capacity 1: every push drops the one before, and with it the count it carried.
        let mut o = Outbox::after_seq(1, 0);
        for _ in 0..10 {
            o.push(NodeReport::default());
        }
        let left: Vec<_> = o.after(0).collect();
        assert_eq!((left[0].seq, left[0].dropped_before), (10, 9), "all nine drops are counted");
    }

    #[test]
    fn continues_a_sequence() {
        let mut o = Outbox::after_seq(4, 41);
        assert_eq!(o.next_seq(), 42);
        assert_eq!(o.push(NodeReport::default()), 42);
        assert_eq!(o.last_seq(), 42);
    }
}
