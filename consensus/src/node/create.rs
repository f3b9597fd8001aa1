//! Bringing a group to life on this node ([`RaftNode::create_group`]): its storage, found or
//! created; the stored log reconciled with the state machine's applied index; raft-rs
//! configured and started from there.

use std::collections::{BTreeMap, VecDeque};

use raft::eraftpb::Snapshot;
use raft::RawNode;

use super::{jitter_election, Group, GroupSnapshots, RaftNode};
use crate::error::{Error, Result, StorageError};
use crate::state_machine::StateMachine;
use crate::storage::GroupStorage;
use crate::transport::Transport;
use crate::{GroupId, NodeId};

impl<T: Transport> RaftNode<T> {
    /// Hosts group `group` with replicas on `peers` (node ids, this node among them), applying
    /// into `state_machine`. After a restart the stored raft state wins over `peers`, and applying
    /// resumes after `state_machine.applied_index()`.
    ///
    /// With `peers` empty the replica is *joining* an existing group: it knows no members, never
    /// campaigns, and waits for the leader, which added it as a learner
    /// ([`super::MembershipChange::AddLearner`]), to send it the log or a snapshot (which carry
    /// the membership).
    pub fn create_group(
        &mut self,
        group: GroupId,
        peers: &[NodeId],
        state_machine: Box<dyn StateMachine>,
    ) -> Result<()> {
        if self.groups.contains_key(&group) {
            return Err(Error::GroupExists(group));
        }
        let storage = self.group_storage(group, peers)?;
        let sm_applied = state_machine.applied_index();
        let (pending_restore, raft_applied) = self.reconcile(group, &storage, sm_applied)?;
        debug_assert!(
            {
                let log = storage.log().read();
                sm_applied <= log.hard_state().commit && sm_applied <= log.last_index()
            },
            "group {group}: state machine at {sm_applied} past the stored commit or log"
        );
        let logger = self.logger.new(slog::o!("group" => group));
        let mut raw = RawNode::new(&self.raft_config(raft_applied), storage, &logger)?;
        let joining = {
            let log = raw.store().log().read();
            let cs = log.conf_state();
            cs.voters.is_empty() && cs.learners.is_empty() && log.received_snapshot().is_none()
        };
        if joining {
            // A joining replica knows no members: replaying the log from its start would apply
            // membership changes to an empty membership (the founders are no log entry). It
            // answers every append with a snapshot request instead (raft's own mechanism); the
            // snapshot carries the membership, and restoring it clears the request.
            raw.raft.pending_request_snapshot = 1;
        }
        let (seen_role, seen_term) = (raw.raft.state, raw.raft.term);
        let applied = if pending_restore.is_some() {
            sm_applied
        } else {
            raft_applied
        };
        let mut g = Group {
            raw,
            state_machine,
            applied,
            apply_upper: applied,
            pending_restore,
            snapshots: GroupSnapshots::default(),
            retry: None,
            proposals: BTreeMap::new(),
            reads: VecDeque::new(),
            seen_role,
            seen_term,
        };
        jitter_election(&mut self.rng, &self.config, &mut g, true);
        self.groups.insert(group, g);
        Ok(())
    }

    /// The group's stored raft state, or a new one with `peers` as its voters (written
    /// durably) when the log holds none.
    fn group_storage(&mut self, group: GroupId, peers: &[NodeId]) -> Result<GroupStorage> {
        if let Some(existing) = self.storage.group(group) {
            return Ok(existing);
        }
        if !peers.is_empty() && !peers.contains(&self.id) {
            return Err(Error::NotAPeer {
                group,
                node: self.id,
            });
        }
        let created = self.storage.create_group(group, peers);
        self.storage.flush(true)?;
        Ok(created)
    }

    /// Reconciles the group's stored log with the state machine, applied up to `sm_applied`:
    /// releases a received snapshot already restored, picks the received snapshot to restore
    /// when the state machine is behind the log's start, refuses a state machine ahead of the
    /// log, and raises a commit index that a crash lost below it. Returns the snapshot to
    /// restore before applying anything, if any, and the applied index raft starts from (0
    /// while a snapshot waits).
    fn reconcile(
        &mut self,
        group: GroupId,
        storage: &GroupStorage,
        sm_applied: u64,
    ) -> Result<(Option<Snapshot>, u64)> {
        let (first_index, last_index, commit, received) = {
            let log = storage.log().read();
            (
                log.first_index(),
                log.last_index(),
                log.hard_state().commit,
                log.received_snapshot().cloned(),
            )
        };
        let restored = received
            .as_ref()
            .map(|s| s.get_metadata().index)
            .filter(|&index| index <= sm_applied);
        if let Some(index) = restored {
            // Restored before a crash that came before its release: released now.
            self.storage.compact(group, index);
        }
        let mut pending_restore = None;
        if sm_applied + 1 < first_index {
            match received {
                Some(snapshot) if snapshot.get_metadata().index > sm_applied => {
                    pending_restore = Some(snapshot)
                }
                _ => {
                    return Err(StorageError::StateMachineBehindLog {
                        group,
                        applied: sm_applied,
                        first_index,
                    }
                    .into())
                }
            }
        }
        if sm_applied > last_index {
            return Err(StorageError::StateMachineAheadOfLog {
                group,
                applied: sm_applied,
                last_index,
            }
            .into());
        }
        if sm_applied > commit {
            // The state machine only applies committed entries; the commit index was written
            // lazily and lost in a crash. Raising it is safe because those entries are stored.
            let mut hs = storage.log().read().hard_state().clone();
            hs.commit = sm_applied;
            self.storage.set_hard_state(group, &hs);
            self.storage.flush(true)?;
        }
        let raft_applied = if pending_restore.is_some() {
            0
        } else {
            sm_applied.max(first_index - 1)
        };
        Ok((pending_restore, raft_applied))
    }

    /// The raft-rs configuration of a group on this node, starting at `applied`.
    fn raft_config(&self, applied: u64) -> raft::Config {
        raft::Config {
            id: self.id,
            election_tick: self.config.election_tick,
            heartbeat_tick: self.config.heartbeat_tick,
            // raft-rs draws the election timeout from the thread RNG; a one-value range makes
            // it deterministic, and `jitter_election` adds seeded jitter instead.
            min_election_tick: 2 * self.config.election_tick,
            max_election_tick: 2 * self.config.election_tick + 1,
            applied,
            max_size_per_msg: self.config.message_bytes_max,
            max_inflight_msgs: self.config.inflight_messages_max,
            check_quorum: self.config.check_quorum,
            pre_vote: self.config.pre_vote,
            ..raft::Config::default()
        }
    }
}
