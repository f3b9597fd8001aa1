//! The state machine a raft group drives, and the clock the apply proxy's backoff reads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::error::ApplyError;

/// What a raft group replicates into. The apply proxy calls it with committed entries strictly in
/// log order and never skips one.
///
/// Threading contract: `apply` runs on the node's raft thread, between the `Ready` rounds of every
/// group on the node. It must not sleep or wait for long: a call that blocks stalls ticks,
/// heartbeats and log persistence of all groups on the node (a blocked second is an election
/// timeout). To wait out a transient condition, return [`ApplyError::Recoverable`] at once; the
/// proxy calls again after its backoff (`Config::apply_retry_backoff_min_ms`..`_max_ms`). A
/// bounded in-state-machine retry (IoTDB's 5 × 1000 ms) should count attempts across calls rather
/// than sleep inside one.
///
/// Determinism contract (design §5): the outcome of `apply` depends only on `data` and the prior
/// state — never on local lease state, caches or clocks. A lease problem may make `apply` return
/// [`ApplyError::Recoverable`] (it is retried, the result is then decided by a later call); it must
/// never turn into a [`ApplyError::Deterministic`] result on one replica only.
pub trait StateMachine: Send {
    /// Applies the committed entry at `index`. `Ok` bytes or a `Deterministic` error are the entry's
    /// result; a `Recoverable` error leaves the state unchanged and the proxy calls again later.
    /// Raft's empty no-op entries and configuration changes are not passed in.
    fn apply(&mut self, index: u64, data: &[u8]) -> Result<Vec<u8>, ApplyError>;

    /// Index of the last entry applied (or restored from a snapshot). After a restart the proxy
    /// resumes at `applied_index() + 1`, so a durable state machine must make this durable
    /// together with its state. It may lag the group's applied index over no-op entries.
    fn applied_index(&self) -> u64;

    /// The proxy passed raft's own entry at `index` (a leader's no-op or a membership change),
    /// which [`StateMachine::apply`] never sees; every entry before it is applied. A state
    /// machine that moves its applied index here (made durable with its next state write, and
    /// learnt again by replay if a crash comes first) lets a [`StateMachine::snapshot_job`]
    /// reflect the group's applied index, so its snapshot carries the membership of that index:
    /// a learner added after the last write is named in the next snapshot, not never
    /// (REVIEW-2026-12-05 N2). The default ignores it; its jobs' snapshots are then labelled
    /// with the last index [`StateMachine::apply`] saw.
    fn note_applied(&mut self, _index: u64) {}

    /// The full state as of `applied_index()`, sent to a replica that fell behind a compacted log.
    /// The proxy labels it with the group's applied index, which is higher only across entries
    /// the state machine never sees (no-ops, configuration changes). An error (e.g. an unreadable
    /// file) generates no snapshot: it is logged and raft asks again when it next needs one.
    fn snapshot(&self) -> Result<Vec<u8>, ApplyError>;

    /// A job that builds the snapshot on a thread of its own, for a state machine whose snapshot
    /// takes long (a region read back from disk): meanwhile the node goes on ticking, persisting
    /// and applying every group, and this group's log is not compacted past the state machine's
    /// applied index at the job's start, so the snapshot still joins the log when it is done.
    /// The job answers the index its content reflects (at or past that applied index) and the
    /// bytes. `None` (the default): [`StateMachine::snapshot`] runs on the raft thread.
    fn snapshot_job(&self) -> Option<SnapshotJob> {
        None
    }

    /// Replaces the whole state with `snapshot`, taken at `index`. Afterwards `applied_index()`
    /// returns `index`, and the state must be durable: once this returns `Ok` the raft log stops
    /// keeping the snapshot (and entries up to `index`). A `Recoverable` error is retried like
    /// an apply.
    fn restore(&mut self, index: u64, snapshot: &[u8]) -> Result<(), ApplyError>;
}

/// Builds a snapshot away from the raft thread ([`StateMachine::snapshot_job`]): the index its
/// content reflects and its bytes, or why it could not (raft asks again later).
pub type SnapshotJob = Box<dyn FnOnce() -> Result<(u64, Vec<u8>), ApplyError> + Send>;

/// Monotonic milliseconds, injected so the simulation decides what time it is.
pub trait Clock: Send + Sync {
    /// Milliseconds since an arbitrary fixed origin; never decreases.
    fn now_ms(&self) -> u64;
}

/// The real monotonic clock.
#[derive(Debug, Clone)]
pub struct MonotonicClock {
    origin: Instant,
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock {
            origin: Instant::now(),
        }
    }
}

impl Clock for MonotonicClock {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
}

/// A clock that only moves when told to; clones share the time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now_ms: Arc<AtomicU64>,
}

impl ManualClock {
    /// Moves the time forward by `ms`.
    pub fn advance_ms(&self, ms: u64) {
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the time; panics if it would move backwards.
    pub fn set_ms(&self, now_ms: u64) {
        let prev = self.now_ms.swap(now_ms, Ordering::SeqCst);
        assert!(prev <= now_ms, "clock moved backwards: {prev} -> {now_ms}");
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}
