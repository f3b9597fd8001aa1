//! Integration tests of the consensus crate: one binary, modules per topic.
//!
//! - `proxy`: a recoverable error is retried with the index held; a deterministic one (614) is
//!   recorded on every replica; a stuck follower still persists and acknowledges; the leader
//!   answers with its own apply result; in-flight proposals are bounded (backpressure);
//!   proposals on a follower name the leader (NotLeader hints); ReadIndex is linearizable on the
//!   leader; acknowledged writes survive a full restart; a state machine ahead of its log is
//!   refused.
//! - `fencing`: a fenced leader answers 536 and transfers leadership, only to a lease holder.
//! - `snapshot`: a lagging replica installs a snapshot; compaction is bounded by the applied index.
//! - `snapshot_lifecycle`: a snapshot is rebuilt only once the state machine moved past the one
//!   held; a restarted leader still labels a job's snapshot below its last membership change.
//! - `wal_storage`: one fsync per ready batch across groups, compaction frees segments and a
//!   restart replays the rest, a removed group stays removed after restart.
//! - `simulation`: 3 000 schedules with 3 replicas and 2 000 with 5 on `MemLog`, 60 with 3
//!   replicas on real `wal` directories — drop, delay/reorder, directed partitions, crashes
//!   (losing unsynced records) and restarts, lease fencing, compaction (snapshots), leader
//!   transfers and linearizable reads. `FENCEPOST_SIM_SEED=<seed>` re-runs one schedule,
//!   `FENCEPOST_SIM_SCHEDULES=<n>` changes the count, `FENCEPOST_SIM_BASE=<n>` shifts the seed
//!   range, `FENCEPOST_SIM_VERBOSE=1` prints a line per schedule.
//!
//! Outside this binary, `src/storage.rs` has a randomized replay/crash test against the live state
//! at every sync point.

mod fencing;
mod harness;
mod membership;
mod proxy;
mod simulation;
mod snapshot;
mod snapshot_lifecycle;
mod wal_storage;
