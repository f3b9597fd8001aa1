//! Fence-floor rounds (REVIEW N9): what lets a data region forget its series deletions.
//!
//! A region keeps every deletion as a tombstone, because a late insert validated before it must
//! be refused whenever it arrives (the fencing token, design §4). A round bounds how late that
//! can be. While no fence operation is pending, the leader takes the current metadata version
//! `F` and
//! 1. has every DataNode re-stamp its cached schemas with `F` and drain the operations that read
//!    them (`InvalidateCacheReq.fence_floor`), waiting, as a fence operation does, until each has
//!    acknowledged or is fenced. Every operation at or below `F` has completed, so each of its
//!    invalidations reached that node (or the node was fenced and clears everything before it
//!    trusts a cache again): whatever is still cached holds as of `F`. From then on no
//!    coordinator validates against an older version, so only a late delivery carries an older
//!    token;
//! 2. orders `RaiseFenceFloor(F)` through every region's log. Apply then refuses any insert or
//!    `deleteData` older than `F` and takes a deletion older than `F` for the repeat it must be,
//!    so a series deletion below `F` decides nothing the floor does not, and the region drops it
//!    once no older file holds the series (`engine::region::fences`).
//!
//! A fence operation that begins during a round gets a version above `F`, so its deletion is
//! never taken for a repeat. A round that does not finish (a lost term, a region that does not
//! confirm) changes nothing that matters: floors only rise, each region's independently, and the
//! next round starts over. Rounds run at most every `fence_floor_interval_ms`, only after a
//! fence operation deleted something (and one interval into a term: a new leader does not know).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::{invalidation_targets, Leadership};
use crate::error::{Error, Result};

/// The leader's volatile record of fence-floor rounds.
#[derive(Debug, Default)]
pub(crate) struct FloorRounds {
    /// A round runs (at most one at a time).
    running: AtomicBool,
    /// When the last round started, on the leader's clock (0: none yet).
    last_started_ms: AtomicU64,
    /// The floor of the last round every region confirmed.
    raised: AtomicU64,
    /// Rounds every region confirmed.
    completed: AtomicU64,
    /// A fence operation deleted something since the last complete round.
    deletions_since: AtomicBool,
}

impl FloorRounds {
    /// A fence operation that deleted something finished, or leadership changed hands: the next
    /// round is worth running.
    pub(crate) fn note_deletions(&self) {
        self.deletions_since.store(true, Ordering::Release);
    }

    /// This node became leader at `now_ms`: it does not know what was deleted since the last
    /// floor, so a round is due, one interval from now (a failover does not add a round's
    /// work to the new leader's first moments).
    pub(crate) fn on_leadership(&self, now_ms: u64) {
        self.last_started_ms.store(now_ms.max(1), Ordering::Release);
        self.note_deletions();
    }

    /// The floor of the last round every region confirmed (0: none under this leader).
    pub(crate) fn raised(&self) -> u64 {
        self.raised.load(Ordering::Acquire)
    }

    /// Rounds every region confirmed under this process.
    pub(crate) fn completed(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }

    /// True when a round should start at `now_ms` with rounds every `interval_ms` (0: never);
    /// claims the round when it says so.
    fn claim(&self, now_ms: u64, interval_ms: u64) -> bool {
        if interval_ms == 0 || !self.deletions_since.load(Ordering::Acquire) {
            return false;
        }
        let last = self.last_started_ms.load(Ordering::Acquire);
        if last != 0 && now_ms.saturating_sub(last) < interval_ms {
            return false;
        }
        if self.running.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.last_started_ms.store(now_ms.max(1), Ordering::Release);
        true
    }
}

impl Leadership {
    /// Starts a fence-floor round when one is due (see the module docs); returns at once.
    pub(crate) fn spawn_floor_round(self: &Arc<Self>, term: u64, now_ms: u64) {
        let floor = &self.fence_work.floor;
        if !floor.claim(now_ms, self.config.lease.fence_floor_interval_ms) {
            return;
        }
        let shared = self.clone();
        tokio::spawn(async move {
            match shared.raise_floor(term).await {
                Ok(Some(version)) => tracing::info!(version, "fence floor raised in every region"),
                Ok(None) => {}
                Err(e) => tracing::warn!("fence-floor round not finished: {e}"),
            }
            shared
                .fence_work
                .floor
                .running
                .store(false, Ordering::Release);
        });
    }

    /// One round in `term`: the floor every region confirmed, or `None` when no round was due
    /// (an operation pending, or nothing new since the last floor).
    async fn raise_floor(&self, term: u64) -> Result<Option<u64>> {
        let floor = &self.fence_work.floor;
        let (version, targets, regions) = {
            let state = self.group.state();
            if state.operations().next().is_some() {
                return Ok(None);
            }
            let version = state.metadata_version();
            if version <= floor.raised() {
                return Ok(None);
            }
            let ids: Vec<u64> = state.regions().map(|r| r.id).collect();
            (
                version,
                invalidation_targets(&state),
                self.region_targets(&state, ids),
            )
        };
        // A deletion that finishes from here on is above `version`: it needs a round of its own.
        floor.deletions_since.store(false, Ordering::Release);
        let request = proto::InvalidateCacheReq {
            config_node_term: term,
            metadata_version: version,
            fence_floor: version,
            ..proto::InvalidateCacheReq::default()
        };
        let outcome = tokio::select! {
            outcome = self.propagator.invalidate(term, &targets, request) => outcome,
            () = self.lost_term(term) => return Err(Error::NotLeader { leader: None }),
        };
        tracing::debug!(version, acknowledged = ?outcome.acknowledged, fenced = ?outcome.fenced,
            "fence-floor invalidation complete");
        if self.group.check_leader().ok() != Some(term) {
            return Err(Error::NotLeader { leader: None });
        }
        let raise =
            self.propagator
                .delete_in_regions(&regions, |region_id| proto::RegionWriteReq {
                    region_id,
                    command: Some(proto::region_write_req::Command::RaiseFenceFloor(
                        proto::RaiseFenceFloorCommand {},
                    )),
                    operation_id: 0,
                    metadata_version: version,
                    table_version: 0,
                });
        let failed = tokio::select! {
            failed = raise => failed,
            () = self.lost_term(term) => return Err(Error::NotLeader { leader: None }),
        };
        if !failed.is_empty() {
            floor.note_deletions();
            return Err(Error::Timeout(format!(
                "regions {failed:?} did not confirm fence floor {version}"
            )));
        }
        floor.raised.fetch_max(version, Ordering::AcqRel);
        floor.completed.fetch_add(1, Ordering::AcqRel);
        Ok(Some(version))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_is_due_only_after_deletions_and_the_interval() {
        let floor = FloorRounds::default();
        assert!(!floor.claim(1_000, 60_000), "nothing deleted yet");
        floor.note_deletions();
        assert!(!floor.claim(1_000, 0), "rounds turned off");
        assert!(floor.claim(1_000, 60_000));
        assert!(
            !floor.claim(1_001, 60_000),
            "one at a time, and the interval"
        );
        floor.running.store(false, Ordering::Release);
        assert!(!floor.claim(60_999, 60_000), "within the interval");
        assert!(floor.claim(61_000, 60_000));
        floor.running.store(false, Ordering::Release);
        floor.on_leadership(100_000);
        assert!(
            !floor.claim(100_001, 60_000),
            "not in a new leader's first moments"
        );
        assert!(floor.claim(160_000, 60_000), "one interval into the term");
    }
}
