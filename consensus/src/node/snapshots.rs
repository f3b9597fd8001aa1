//! Snapshots a replica generates for followers behind its compacted log: built on the raft
//! thread ([`StateMachine::snapshot`]) or by a job on a thread of its own
//! ([`StateMachine::snapshot_job`]), labelled with the index their content reflects and the
//! membership as of that index, rebuilt at most once per index, and released once no follower
//! was sent one for a while ([`RaftNode::release_idle_snapshot`]).
//!
//! **Why a rebuild needs a newer index** (REVIEW-2026-12-05 N2): raft asks again for a snapshot
//! that does not serve a follower (it is below the compacted log, or its membership does not
//! name the follower). A snapshot rebuilt at the index of the one held carries the same content
//! and the same membership (the history at a given index never changes), so it cannot serve
//! better: a rebuild waits until the state machine moved past the held snapshot. Before, a
//! learner added to an idle region asked at every heartbeat response, and the leader flushed and
//! read the whole region each time, forever.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use raft::eraftpb::Snapshot;
use raft::ProgressState;

use super::{Group, RaftNode};
use crate::error::{ApplyError, Result};
use crate::node::Metrics;
use crate::transport::Transport;
use crate::GroupId;

/// Milliseconds between two warnings of one group's failing snapshot generation.
const SNAPSHOT_FAILURE_LOG_MS: u64 = 10_000;

/// Counters of the snapshots of one node.
#[derive(Debug, Default)]
pub struct SnapshotMetrics {
    /// Snapshots generated for lagging followers.
    pub generated: AtomicU64,
    /// Of those, snapshots that replaced one held for the same group (a rebuild: the held one
    /// was below the log's start, or its membership did not name a follower).
    pub rebuilt: AtomicU64,
    /// Requests for a snapshot not rebuilt, because the state machine has not moved past the
    /// one held: a rebuild would carry the same index and membership.
    pub rebuilds_refused: AtomicU64,
    /// Generated snapshots dropped after no follower was sent one for a while
    /// ([`RaftNode::release_idle_snapshot`]).
    pub released: AtomicU64,
    /// Snapshots restored into a state machine.
    pub restored: AtomicU64,
    /// Snapshot jobs running on their own threads (a gauge).
    pub builds: AtomicU64,
}

/// What a group keeps about the snapshots it generates.
#[derive(Debug, Default)]
pub(super) struct GroupSnapshots {
    /// When a failed snapshot generation was last logged (raft asks again at every probe).
    failure_logged_ms: Option<u64>,
    /// While a snapshot job runs: the state machine's applied index at its start, past which
    /// the log is not compacted (the snapshot must still join it).
    pub(super) pin: Option<u64>,
    /// When the generated snapshot was last stored or sent to a follower (by the node's clock).
    pub(super) used_ms: Option<u64>,
}

/// A snapshot job's result, for its group.
type BuiltSnapshot = (GroupId, std::result::Result<(u64, Vec<u8>), ApplyError>);

/// The node's snapshot jobs running on their threads, and where they hand their results.
#[derive(Debug)]
pub(super) struct SnapshotBuilds {
    running: usize,
    results: (Sender<BuiltSnapshot>, Receiver<BuiltSnapshot>),
    /// Results sent and not yet collected, so [`RaftNode::has_ready`] sees them.
    pending: Arc<AtomicUsize>,
}

impl Default for SnapshotBuilds {
    fn default() -> Self {
        SnapshotBuilds {
            running: 0,
            results: channel(),
            pending: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl SnapshotBuilds {
    /// Whether a finished job's result waits to be collected.
    pub(super) fn has_results(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0
    }
}

/// What [`install_snapshot`] made of a result.
#[derive(Debug, PartialEq, Eq)]
enum Stored {
    /// Nothing: the build failed or its label is unknown (logged; raft asks again).
    No,
    /// The group's first generated snapshot, or one after a release.
    New,
    /// A snapshot that replaced the one held.
    Replaced,
}

impl<T: Transport> RaftNode<T> {
    /// Builds the snapshots raft asked for: a job on its own thread where the state machine
    /// hands one out (at most `snapshot_builds_max` at once, one per group), else on this
    /// thread. A request is refused while the state machine has not moved past the snapshot
    /// held (the module's doc says why).
    pub(super) fn generate_requested_snapshots(&mut self) {
        self.collect_built_snapshots();
        let now_ms = self.clock.now_ms();
        for (gid, g) in self.groups.iter_mut() {
            let storage = g.raw.store().clone();
            if !storage.take_snapshot_request() {
                continue;
            }
            if g.snapshots.pin.is_some() {
                // One is being built; raft asks again once it is there.
                continue;
            }
            let job = g.state_machine.snapshot_job();
            // A job's snapshot reflects at least the state machine's applied index; one built
            // here is labelled with the group's.
            let reach = match job {
                Some(_) => g.state_machine.applied_index(),
                None => g.applied,
            };
            if storage
                .generated_snapshot_index()
                .is_some_and(|held| held >= reach)
            {
                Metrics::inc(&self.metrics.snapshots.rebuilds_refused);
                continue;
            }
            if let Some(job) = job {
                if self.builds.running >= self.config.snapshot_builds_max {
                    continue;
                }
                let (done, pending, gid) = (
                    self.builds.results.0.clone(),
                    self.builds.pending.clone(),
                    *gid,
                );
                let spawned = std::thread::Builder::new()
                    .name(format!("snapshot-{gid}"))
                    .spawn(move || {
                        let result = job();
                        // The node may be gone (stopped meanwhile): nobody wants the result.
                        if done.send((gid, result)).is_ok() {
                            pending.fetch_add(1, Ordering::AcqRel);
                        }
                    });
                match spawned {
                    Ok(_) => {
                        g.snapshots.pin = Some(g.state_machine.applied_index());
                        self.builds.running += 1;
                        self.metrics
                            .snapshots
                            .builds
                            .store(self.builds.running as u64, Ordering::Relaxed);
                    }
                    Err(e) => tracing::warn!(group = gid, "starting a snapshot build: {e}"),
                }
                continue;
            }
            // Entries between the state machine's applied index and the group's are no-ops and
            // configuration changes, which the state machine never sees: its state is the state
            // at the group's applied index, and labelling it so keeps the snapshot's conf state
            // (the latest applied) consistent with its index.
            let index = g.applied;
            let result = g.state_machine.snapshot().map(|data| (index, data));
            count_stored(&self.metrics, install_snapshot(*gid, g, result, now_ms));
        }
    }

    /// Takes the results of finished snapshot jobs into their groups' storage.
    fn collect_built_snapshots(&mut self) {
        let now_ms = self.clock.now_ms();
        while let Ok((gid, result)) = self.builds.results.1.try_recv() {
            self.builds.pending.fetch_sub(1, Ordering::AcqRel);
            self.builds.running -= 1;
            self.metrics
                .snapshots
                .builds
                .store(self.builds.running as u64, Ordering::Relaxed);
            // The group may have been removed while its snapshot was built.
            let Some(g) = self.groups.get_mut(&gid) else {
                continue;
            };
            g.snapshots.pin = None;
            count_stored(&self.metrics, install_snapshot(gid, g, result, now_ms));
        }
    }

    /// Drops `group`'s generated snapshot once it was neither stored nor sent to a follower for
    /// `idle_ms` (by the node's clock), no follower's progress is in raft's Snapshot state and
    /// no build runs; raft asks for a new one when a follower next needs one. Answers whether
    /// the group now holds no generated snapshot and builds none: then whatever the state
    /// machine keeps for one (a streamed snapshot's files, which pin the disk space of data
    /// compacted or deleted since, REVIEW-2026-12-05 N10) may go.
    pub fn release_idle_snapshot(&mut self, group: GroupId, idle_ms: u64) -> Result<bool> {
        let now_ms = self.clock.now_ms();
        let g = self.group_mut(group)?;
        if g.snapshots.pin.is_some() {
            return Ok(false);
        }
        let storage = g.raw.store().clone();
        if storage.generated_snapshot_index().is_none() {
            return Ok(true);
        }
        let used_lately = g
            .snapshots
            .used_ms
            .is_some_and(|at| now_ms.saturating_sub(at) < idle_ms);
        let sending = g
            .raw
            .raft
            .prs()
            .iter()
            .any(|(_, progress)| progress.state == ProgressState::Snapshot);
        if used_lately || sending {
            return Ok(false);
        }
        storage.drop_generated_snapshot();
        g.snapshots.used_ms = None;
        Metrics::inc(&self.metrics.snapshots.released);
        Ok(true)
    }
}

fn count_stored(metrics: &Metrics, stored: Stored) {
    match stored {
        Stored::No => {}
        Stored::New => Metrics::inc(&metrics.snapshots.generated),
        Stored::Replaced => {
            Metrics::inc(&metrics.snapshots.generated);
            Metrics::inc(&metrics.snapshots.rebuilt);
        }
    }
}

/// Stores a generated snapshot of the state at `index` (its term and the membership as of
/// `index` as labels) to serve followers. A job's `index` may trail the group's applied index,
/// past membership changes: the label comes from the group's membership history
/// ([`crate::conf_history::ConfHistory`]), never the latest membership. A failure is logged
/// once per [`SNAPSHOT_FAILURE_LOG_MS`]; so is a snapshot whose index the log no longer holds
/// (compacted past it) or whose membership is no longer known: raft asks again and another is
/// built.
fn install_snapshot(
    gid: GroupId,
    g: &mut Group,
    result: std::result::Result<(u64, Vec<u8>), ApplyError>,
    now_ms: u64,
) -> Stored {
    let storage = g.raw.store().clone();
    let outcome = result.and_then(|(index, data)| {
        let (term, conf_state) = {
            let log = storage.log().read();
            (log.term_of(index), log.conf_state_at(index).cloned())
        };
        match (term, conf_state) {
            (Some(term), Some(conf_state)) => Ok((index, term, conf_state, data)),
            (Some(_), None) => Err(ApplyError::Recoverable {
                code: 0,
                message: format!("the membership as of index {index} is no longer known"),
            }),
            // Behind the log (a restore is pending), or compacted past: raft asks again.
            (None, _) => Err(ApplyError::Recoverable {
                code: 0,
                message: format!("the log no longer holds index {index}, the snapshot's"),
            }),
        }
    });
    match outcome {
        Ok((index, term, conf_state, data)) => {
            let mut snapshot = Snapshot::default();
            snapshot.set_data(data.into());
            let meta = snapshot.mut_metadata();
            meta.index = index;
            meta.term = term;
            meta.set_conf_state(conf_state);
            let replaced = storage.generated_snapshot_index().is_some();
            storage.set_generated_snapshot(snapshot);
            g.snapshots.used_ms = Some(now_ms);
            if replaced {
                Stored::Replaced
            } else {
                Stored::New
            }
        }
        Err(e) => {
            if g.snapshots
                .failure_logged_ms
                .is_none_or(|at| now_ms.saturating_sub(at) >= SNAPSHOT_FAILURE_LOG_MS)
            {
                g.snapshots.failure_logged_ms = Some(now_ms);
                tracing::warn!(group = gid, "generating a snapshot failed: {e:?}");
            }
            Stored::No
        }
    }
}
