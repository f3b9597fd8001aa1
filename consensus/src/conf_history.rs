//! A group's membership over its recent indexes, kept with its raft storage and persisted: a
//! snapshot job's index may trail the group's applied index past membership changes, and its
//! snapshot must carry the membership as of its own index ([`ConfHistory::at`]), also after the
//! leader restarted (REVIEW-2026-12-05 N2: a history rebuilt from the latest state alone could
//! not label a snapshot below the last change, so none was built until a write moved on).
//!
//! Persistence costs no new record kind: each state is the conf-state record raft storage wrote
//! when the change applied (`KIND_CONF_STATE_AT`, its index in it). Replay keeps every such
//! record it meets ([`ConfHistory::replay`]) instead of the last alone, and a purge that frees
//! the old records writes the whole history again, oldest first. A log written before the
//! history was kept replays to the states its records still hold (at least the latest), so a
//! newer binary reads an older log, and an older binary reading a newer log takes the last
//! record it meets, as it always did.

use std::collections::VecDeque;

use raft::eraftpb::ConfState;

/// Membership states kept (at most this many changes back).
pub(crate) const CONF_HISTORY_MAX: usize = 8;

/// One membership state: from which index on it holds, and where its record is.
#[derive(Debug, Clone)]
struct ConfAt {
    index: u64,
    conf_state: ConfState,
    /// Backend position of the record that holds it (`u64::MAX` while not written).
    position: u64,
}

/// `(index, membership from that index on)`, oldest first; never empty.
#[derive(Debug, Clone)]
pub(crate) struct ConfHistory {
    states: VecDeque<ConfAt>,
    /// The one state is a stand-in (a group's log before replay met a record of its
    /// membership): the first state recorded replaces it rather than follows it.
    stand_in: bool,
}

impl ConfHistory {
    /// A history of one state, not written yet.
    pub(crate) fn new(index: u64, conf_state: ConfState) -> Self {
        ConfHistory {
            states: VecDeque::from([ConfAt {
                index,
                conf_state,
                position: u64::MAX,
            }]),
            stand_in: false,
        }
    }

    /// The history of a group whose records are still to be replayed: an empty membership
    /// that the first state recorded replaces.
    pub(crate) fn stand_in() -> Self {
        ConfHistory {
            stand_in: true,
            ..ConfHistory::new(0, ConfState::default())
        }
    }

    /// The latest membership and the index it holds from.
    pub(crate) fn latest(&self) -> (u64, &ConfState) {
        let last = self.states.back().expect("a history is never empty");
        (last.index, &last.conf_state)
    }

    /// Mutable access to the latest membership (a group's founding voters, before any record).
    pub(crate) fn latest_mut(&mut self) -> &mut ConfState {
        self.stand_in = false;
        &mut self
            .states
            .back_mut()
            .expect("a history is never empty")
            .conf_state
    }

    /// Records the membership from `index` on (a change applied there). A state at or after
    /// `index` is replaced: a record replayed again after a purge rewrote the history.
    pub(crate) fn record(&mut self, index: u64, conf_state: ConfState) {
        self.replay(index, conf_state, u64::MAX);
    }

    /// [`ConfHistory::record`] of a state read back from the record at `position`.
    pub(crate) fn replay(&mut self, index: u64, conf_state: ConfState, position: u64) {
        if std::mem::take(&mut self.stand_in) {
            self.states.clear();
        }
        while self.states.back().is_some_and(|s| s.index >= index) {
            self.states.pop_back();
        }
        self.states.push_back(ConfAt {
            index,
            conf_state,
            position,
        });
        while self.states.len() > CONF_HISTORY_MAX {
            self.states.pop_front();
        }
    }

    /// Starts over from a snapshot's membership at its index, held by the snapshot's record
    /// at `position` (`u64::MAX` until written).
    pub(crate) fn reset(&mut self, index: u64, conf_state: ConfState, position: u64) {
        self.stand_in = false;
        self.states.clear();
        self.states.push_back(ConfAt {
            index,
            conf_state,
            position,
        });
    }

    /// The membership as of `index`, if still known.
    pub(crate) fn at(&self, index: u64) -> Option<&ConfState> {
        self.states
            .iter()
            .rev()
            .find(|s| s.index <= index)
            .map(|s| &s.conf_state)
    }

    /// Notes that the state from `index` on was written at `position`.
    pub(crate) fn note_position(&mut self, index: u64, position: u64) {
        if let Some(state) = self.states.iter_mut().find(|s| s.index == index) {
            state.position = position;
        }
    }

    /// The oldest backend position a state's record is at (`u64::MAX`: none written).
    pub(crate) fn oldest_position(&self) -> u64 {
        self.states
            .iter()
            .map(|s| s.position)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Every state, oldest first: what a purge writes again.
    pub(crate) fn states(&self) -> impl Iterator<Item = (u64, &ConfState)> {
        self.states.iter().map(|s| (s.index, &s.conf_state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voters(ids: &[u64]) -> ConfState {
        ConfState {
            voters: ids.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn the_history_answers_the_membership_as_of_an_index() {
        let mut h = ConfHistory::new(5, voters(&[1, 2, 3]));
        h.record(10, voters(&[1, 2, 3, 4]));
        h.record(12, voters(&[1, 2, 4]));
        assert_eq!(h.at(4), None, "before what is known");
        assert_eq!(h.at(5), Some(&voters(&[1, 2, 3])));
        assert_eq!(h.at(9), Some(&voters(&[1, 2, 3])));
        assert_eq!(h.at(10), Some(&voters(&[1, 2, 3, 4])));
        assert_eq!(h.at(11), Some(&voters(&[1, 2, 3, 4])));
        assert_eq!(h.at(100), Some(&voters(&[1, 2, 4])));
        assert_eq!(h.latest(), (12, &voters(&[1, 2, 4])));
        for i in 0..CONF_HISTORY_MAX as u64 {
            h.record(20 + i, voters(&[i]));
        }
        assert_eq!(h.states.len(), CONF_HISTORY_MAX);
        assert_eq!(h.at(12), None, "forgotten");
        assert_eq!(h.at(20), Some(&voters(&[0])));
    }

    #[test]
    fn a_rewritten_history_replays_to_itself_and_a_snapshot_starts_over() {
        let mut h = ConfHistory::stand_in();
        h.replay(0, voters(&[1, 2, 3]), 1);
        h.replay(10, voters(&[1, 2, 3, 4]), 7);
        assert_eq!(h.oldest_position(), 1);
        // A purge wrote both states again at 40 and 41; replay meets them after the originals.
        let rewritten: Vec<(u64, ConfState)> = h.states().map(|(i, cs)| (i, cs.clone())).collect();
        for (offset, (index, cs)) in rewritten.into_iter().enumerate() {
            h.replay(index, cs, 40 + offset as u64);
        }
        assert_eq!(h.states.len(), 2);
        assert_eq!(h.oldest_position(), 40);
        assert_eq!(h.at(3), Some(&voters(&[1, 2, 3])));
        assert_eq!(h.at(10), Some(&voters(&[1, 2, 3, 4])));
        h.reset(50, voters(&[2, 3, 4]), 60);
        assert_eq!(h.at(49), None);
        assert_eq!(h.latest(), (50, &voters(&[2, 3, 4])));
        assert_eq!(h.oldest_position(), 60);
        // A log whose first record left is a rewritten state past 0 (the snapshot's record was
        // truncated): the stand-in does not survive as a state at 0.
        let mut h = ConfHistory::stand_in();
        h.replay(50, voters(&[2, 3, 4]), 70);
        assert_eq!(h.at(0), None);
        assert_eq!(h.states.len(), 1);
    }
}
