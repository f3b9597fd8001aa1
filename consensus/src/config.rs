//! Configuration of a [`crate::RaftNode`]: every limit is a field with a documented default.

use crate::error::{Error, Result};

/// Settings shared by every raft group hosted on one node.
#[derive(Debug, Clone)]
pub struct Config {
    /// Ticks without hearing from a leader before a follower campaigns (the lower bound; the
    /// effective timeout is drawn from `(election_tick, 2 * election_tick]` with the node's seeded
    /// RNG). Also the leader's check-quorum window. Default 10.
    pub election_tick: usize,
    /// Ticks between leader heartbeats. Must be below `election_tick`. Default 2.
    pub heartbeat_tick: usize,
    /// A leader steps down when it has not heard from a quorum for an election timeout. Default true.
    pub check_quorum: bool,
    /// Pre-vote keeps a partitioned node from disrupting the group when it rejoins. Default true.
    pub pre_vote: bool,
    /// Byte limit of one append message (raft-rs `max_size_per_msg`). Default 1 MiB.
    pub message_bytes_max: u64,
    /// Append messages in flight per follower (raft-rs `max_inflight_msgs`): with
    /// `message_bytes_max`, what one round may send a lagging follower (64 MiB, the transport's
    /// bulk lane bound). Default 64.
    pub inflight_messages_max: usize,
    /// Proposals plus linearizable reads waiting for their result, per group. Past it, `propose`
    /// returns `Error::Backpressure`. Default 1024.
    pub in_flight_proposals_max: usize,
    /// Byte limit of one proposal. Default 16 MiB.
    pub proposal_bytes_max: usize,
    /// Entries the apply proxy hands to a state machine per group per `handle_ready`, so that one
    /// group cannot starve the others. Default 256.
    pub apply_batch_entries_max: usize,
    /// First backoff after a recoverable apply error, in milliseconds. Default 10.
    pub apply_retry_backoff_min_ms: u64,
    /// Cap of the exponential apply-retry backoff, in milliseconds. Default 1000.
    pub apply_retry_backoff_max_ms: u64,
    /// Bytes of entries all groups on the node hold in memory (the newest of each; older ones
    /// are read back from the log when a follower or the apply needs them). Default 256 MiB.
    pub entry_cache_bytes_max: usize,
    /// Bytes of appended but unapplied entries past which a follower refuses new entries (its
    /// apply is held at a fence, or behind): what a held group keeps in its log is bounded.
    /// Default 256 MiB.
    pub unapplied_bytes_max: u64,
    /// A leader keeps its log for a follower this many entries behind at most
    /// ([`crate::RaftNode::compact_keeping_followers`]); one further behind catches up by
    /// snapshot. Default 1000000.
    pub log_lag_entries_max: u64,
    /// Likewise in bytes of entries after the follower's matched index. Default 1 GiB.
    pub log_lag_bytes_max: u64,
    /// Snapshots built at once on threads of their own, over all groups of the node
    /// ([`crate::StateMachine::snapshot_job`]); a group asking for one more waits (raft asks
    /// again at the follower's next heartbeat response). Default 2.
    pub snapshot_builds_max: usize,
    /// Seed of the node's RNG, used for election jitter (mixed with the node id). Default 0.
    /// Simulations fix it to replay a run; servers draw it per process
    /// (`runtime::entropy_seed`), or every cluster would share one jitter sequence.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            election_tick: 10,
            heartbeat_tick: 2,
            check_quorum: true,
            pre_vote: true,
            message_bytes_max: 1 << 20,
            inflight_messages_max: 64,
            in_flight_proposals_max: 1024,
            proposal_bytes_max: 16 << 20,
            apply_batch_entries_max: 256,
            apply_retry_backoff_min_ms: 10,
            apply_retry_backoff_max_ms: 1000,
            entry_cache_bytes_max: crate::storage::DEFAULT_ENTRY_CACHE_BYTES,
            unapplied_bytes_max: 256 << 20,
            log_lag_entries_max: 1_000_000,
            log_lag_bytes_max: 1 << 30,
            snapshot_builds_max: 2,
            seed: 0,
        }
    }
}

impl Config {
    /// Checks the settings once at start-up.
    pub fn validate(&self) -> Result<()> {
        let fail = |msg: String| Err(Error::Config(msg));
        if self.heartbeat_tick == 0 {
            return fail("heartbeat_tick must be > 0".into());
        }
        if self.election_tick <= self.heartbeat_tick {
            return fail(format!(
                "election_tick ({}) must be greater than heartbeat_tick ({})",
                self.election_tick, self.heartbeat_tick
            ));
        }
        if self.message_bytes_max == 0 || self.inflight_messages_max == 0 {
            return fail("message_bytes_max and inflight_messages_max must be > 0".into());
        }
        if self.snapshot_builds_max == 0 {
            return fail("snapshot_builds_max must be > 0".into());
        }
        if self.in_flight_proposals_max == 0 || self.apply_batch_entries_max == 0 {
            return fail("in_flight_proposals_max and apply_batch_entries_max must be > 0".into());
        }
        if self.proposal_bytes_max == 0 || self.unapplied_bytes_max == 0 {
            return fail("proposal_bytes_max and unapplied_bytes_max must be > 0".into());
        }
        if self.apply_retry_backoff_min_ms == 0
            || self.apply_retry_backoff_max_ms < self.apply_retry_backoff_min_ms
        {
            return fail(format!(
                "need 0 < apply_retry_backoff_min_ms ({}) <= apply_retry_backoff_max_ms ({})",
                self.apply_retry_backoff_min_ms, self.apply_retry_backoff_max_ms
            ));
        }
        Ok(())
    }

    /// Backoff before retry number `attempt` (1-based) of a recoverable apply error.
    pub fn apply_backoff_ms(&self, attempt: u32) -> u64 {
        let shift = attempt.saturating_sub(1).min(32);
        self.apply_retry_backoff_min_ms
            .saturating_mul(1u64 << shift)
            .min(self.apply_retry_backoff_max_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_backoff_is_capped() {
        let config = Config::default();
        config.validate().unwrap();
        let backoffs: Vec<u64> = (1..=9).map(|a| config.apply_backoff_ms(a)).collect();
        assert_eq!(backoffs, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(config.apply_backoff_ms(u32::MAX), 1000);
    }

    #[test]
    fn invalid_settings_are_refused() {
        for bad in [
            Config {
                heartbeat_tick: 0,
                ..Config::default()
            },
            Config {
                election_tick: 2,
                heartbeat_tick: 2,
                ..Config::default()
            },
            Config {
                in_flight_proposals_max: 0,
                ..Config::default()
            },
            Config {
                apply_retry_backoff_min_ms: 100,
                apply_retry_backoff_max_ms: 10,
                ..Config::default()
            },
        ] {
            assert!(matches!(bad.validate(), Err(Error::Config(_))), "{bad:?}");
        }
    }
}
