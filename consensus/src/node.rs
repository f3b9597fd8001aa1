//! The multi-raft node: one raft-rs `RawNode` per group, a synchronous and steppable core.
//!
//! Nothing here blocks or reads a clock directly: the owner calls [`RaftNode::tick`] every tick
//! interval, [`RaftNode::step`] for each message received and [`RaftNode::handle_ready`] until
//! [`RaftNode::has_ready`] is false. The servers' driver thread (`runtime::RaftDriver`) and the
//! deterministic simulations drive the same code.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use protobuf::Message as _;
use raft::eraftpb::{
    ConfChange, ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, Entry,
    EntryType, MessageType, Snapshot,
};
use raft::{RawNode, SnapshotStatus, StateRole};

use crate::config::Config;
use crate::error::{ApplyError, Error, ProposalError, Result, StorageError};
use crate::state_machine::{Clock, StateMachine};
use crate::storage::{GroupStorage, LogBackend, NodeStorage};
use crate::ticket::{ticket, Completer, Ticket};
use crate::transport::{RaftMessage, SplitMix64, Transport};
use crate::{GroupId, NodeId};

mod create;
mod snapshots;

pub use snapshots::SnapshotMetrics;
use snapshots::{GroupSnapshots, SnapshotBuilds};

/// Counters of one node, read by the metrics endpoint and the tests.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Recoverable apply (or restore) errors that were scheduled for a retry.
    pub apply_retries: AtomicU64,
    /// Entries whose deterministic apply error was recorded as their result.
    pub apply_deterministic_errors: AtomicU64,
    /// Entries handed to a state machine with a final outcome.
    pub entries_applied: AtomicU64,
    /// Proposals accepted.
    pub proposals: AtomicU64,
    /// Readies handled, across groups.
    pub readies: AtomicU64,
    /// Batches written to the log backend with a sync.
    pub synced_batches: AtomicU64,
    /// Snapshots generated, restored, rebuilt and released.
    pub snapshots: SnapshotMetrics,
    /// Leadership transfers started because this node is fenced.
    pub fenced_transfers: AtomicU64,
    /// Membership changes proposed on this node.
    pub membership_changes: AtomicU64,
    /// Membership changes applied on this node (one already in the stored membership, replayed
    /// after a restart, is not applied again).
    pub membership_changes_applied: AtomicU64,
    /// Append messages refused because the group's log held `unapplied_bytes_max` bytes
    /// of entries not yet applied (an apply held at a fence, or too slow).
    pub appends_refused_unapplied: AtomicU64,
    /// Messages dropped because they were addressed to another node id: a node whose data was
    /// wiped came back under a new id at its old address, and its old peers still send there.
    pub misaddressed_messages: AtomicU64,
    /// Bytes of raft entries held in memory over all groups, after the last flush (a gauge).
    pub entry_cache_bytes: AtomicU64,
}

impl Metrics {
    pub(crate) fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// What a group looks like from this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStatus {
    /// Role of this replica.
    pub role: StateRole,
    /// Current term.
    pub term: u64,
    /// Leader this replica knows of, if any.
    pub leader: Option<NodeId>,
    /// Commit index.
    pub commit: u64,
    /// Index the apply proxy has applied up to (no entry at or below it is left unapplied).
    pub applied: u64,
    /// First index still in the raft log.
    pub first_index: u64,
    /// Last index in the raft log.
    pub last_index: u64,
    /// Whether the apply proxy is waiting to retry a recoverable error.
    pub apply_stuck: bool,
    /// Whether the raft log still keeps a received snapshot (until the state machine restored
    /// it durably, which releases it).
    pub holds_received_snapshot: bool,
    /// Voters as this replica applied them (the incoming ones while joint), ascending.
    pub voters: Vec<NodeId>,
    /// No joint configuration, no learner and no membership change pending.
    pub membership_settled: bool,
}

/// A change of a group's members, proposed on its leader ([`RaftNode::change_membership`]).
/// Replacing a replica takes two: [`MembershipChange::AddLearner`], then once the learner
/// caught up, [`MembershipChange::Replace`] (raft's joint consensus, left by itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MembershipChange {
    /// Adds `node` as a learner: it receives the log (or a snapshot) but neither votes nor
    /// counts towards a quorum, so a new replica catches up without weakening the group.
    AddLearner(NodeId),
    /// Makes learner `add` a voter and removes voter `remove` in one joint-consensus step:
    /// every commit meanwhile needs a majority of both the old and the new voters, and the
    /// leader leaves the joint configuration once it applied it. `remove` may not be the leader
    /// (hand leadership away first).
    Replace {
        /// The learner to promote.
        add: NodeId,
        /// The voter to remove.
        remove: NodeId,
    },
    /// Leaves a joint configuration (raft leaves it by itself; this is for a leader elected
    /// while one was pending).
    LeaveJoint,
    /// Removes learner `node` (one added for a replacement whose target changed since).
    RemoveLearner(NodeId),
}

/// What [`RaftNode::step_replacement`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplacementStep {
    /// Proposed this change.
    Proposed(MembershipChange),
    /// This node was the one leaving: leadership goes to this voter, which continues.
    TransferredLeadership(NodeId),
    /// Nothing to do now: a change is pending or the learner is catching up.
    Waiting,
    /// `to` is a voter and `from` is not.
    Done,
}

/// A group's members as this node applied them, and on its leader their progress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Membership {
    /// Voters (the incoming ones in a joint configuration).
    pub voters: BTreeSet<NodeId>,
    /// Voters of the outgoing configuration while joint; empty otherwise.
    pub outgoing: BTreeSet<NodeId>,
    /// Learners.
    pub learners: BTreeSet<NodeId>,
    /// A membership change was proposed and is not applied yet.
    pub change_pending: bool,
    /// On the leader: per replica, the highest index known to be in its log.
    pub matched: BTreeMap<NodeId, u64>,
    /// Last index of this node's log.
    pub last_index: u64,
}

impl Membership {
    /// Whether the group is in a joint configuration.
    pub fn is_joint(&self) -> bool {
        !self.outgoing.is_empty()
    }
}

#[derive(Debug)]
struct PendingProposal {
    term: u64,
    completer: Completer<Vec<u8>>,
}

#[derive(Debug)]
struct PendingRead {
    id: u64,
    term: u64,
    /// Known once raft confirmed leadership with a quorum.
    index: Option<u64>,
    completer: Completer<u64>,
}

#[derive(Debug, Clone, Copy)]
struct Retry {
    attempt: u32,
    at_ms: u64,
}

struct Group {
    raw: RawNode<GroupStorage>,
    state_machine: Box<dyn StateMachine>,
    /// Every entry at or below this index is applied; the next one to apply is `applied + 1`.
    applied: u64,
    /// Highest index raft handed out as committed and persisted.
    apply_upper: u64,
    /// A snapshot to restore into the state machine before applying anything else.
    pending_restore: Option<Snapshot>,
    /// The snapshots this replica generates for followers.
    snapshots: GroupSnapshots,
    retry: Option<Retry>,
    /// Proposals by log index.
    proposals: BTreeMap<u64, PendingProposal>,
    reads: VecDeque<PendingRead>,
    /// Role and term seen after the last raft call, to spot election-timer resets.
    seen_role: StateRole,
    seen_term: u64,
}

impl Group {
    fn in_flight(&self) -> usize {
        self.proposals.len() + self.reads.len()
    }

    /// Appends one entry on the leader by `propose` and registers its proposer: the entry's
    /// index and the ticket its outcome resolves.
    fn append_proposal(
        &mut self,
        group: GroupId,
        propose: impl FnOnce(&mut RawNode<GroupStorage>) -> raft::Result<()>,
    ) -> Result<(u64, Ticket<Vec<u8>>)> {
        let last_before = self.raw.raft.raft_log.last_index();
        match propose(&mut self.raw) {
            Ok(()) => {}
            Err(raft::Error::ProposalDropped) => return Err(Error::ProposalDropped { group }),
            Err(e) => return Err(e.into()),
        }
        let index = self.raw.raft.raft_log.last_index();
        assert_eq!(
            index,
            last_before + 1,
            "a proposal appends exactly one entry"
        );
        let term = self.raw.raft.term;
        let (completer, ticket) = ticket(group);
        self.proposals
            .insert(index, PendingProposal { term, completer });
        Ok((index, ticket))
    }

    fn fail_all(&mut self, group: GroupId) {
        for (index, p) in std::mem::take(&mut self.proposals) {
            p.completer.complete(Err(ProposalError::LeaderChanged {
                group,
                term: p.term,
                index,
            }));
        }
        for r in self.reads.drain(..) {
            r.completer.complete(Err(ProposalError::LeaderChanged {
                group,
                term: r.term,
                index: 0,
            }));
        }
    }

    /// Answers the proposer of the entry at (`index`, `term`), if this node proposed it.
    fn finish_proposal(
        &mut self,
        group: GroupId,
        index: u64,
        term: u64,
        outcome: std::result::Result<Vec<u8>, ProposalError>,
    ) {
        // Anything older was overwritten by another leader's entries.
        while let Some(entry) = self.proposals.first_entry() {
            if *entry.key() >= index {
                break;
            }
            let (stale_index, p) = entry.remove_entry();
            p.completer.complete(Err(ProposalError::LeaderChanged {
                group,
                term: p.term,
                index: stale_index,
            }));
        }
        if let Some(p) = self.proposals.remove(&index) {
            if p.term == term {
                p.completer.complete(outcome);
            } else {
                p.completer.complete(Err(ProposalError::LeaderChanged {
                    group,
                    term: p.term,
                    index,
                }));
            }
        }
    }

    fn fail_reads_of_other_terms(&mut self, group: GroupId) {
        let term = self.raw.raft.term;
        if self.reads.iter().all(|r| r.term == term) {
            return;
        }
        let (keep, stale): (VecDeque<PendingRead>, VecDeque<PendingRead>) =
            std::mem::take(&mut self.reads)
                .into_iter()
                .partition(|r| r.term == term);
        self.reads = keep;
        for r in stale {
            r.completer.complete(Err(ProposalError::LeaderChanged {
                group,
                term: r.term,
                index: 0,
            }));
        }
    }

    fn finish_reads(&mut self) {
        if !self
            .reads
            .iter()
            .any(|r| r.index.is_some_and(|i| i <= self.applied))
        {
            return;
        }
        let applied = self.applied;
        let (done, waiting): (VecDeque<PendingRead>, VecDeque<PendingRead>) =
            std::mem::take(&mut self.reads)
                .into_iter()
                .partition(|r| r.index.is_some_and(|i| i <= applied));
        self.reads = waiting;
        for r in done {
            r.completer
                .complete(Ok(r.index.expect("partitioned on it")));
        }
    }
}

/// Outgoing messages, batched per destination node.
#[derive(Default)]
struct Outbox {
    by_node: BTreeMap<NodeId, Vec<RaftMessage>>,
}

impl Outbox {
    fn push(&mut self, group: GroupId, messages: Vec<raft::eraftpb::Message>) {
        for message in messages {
            self.by_node
                .entry(message.to)
                .or_default()
                .push(RaftMessage { group, message });
        }
    }

    fn flush(&mut self, transport: &impl Transport) {
        for (to, messages) in std::mem::take(&mut self.by_node) {
            transport.send(to, messages);
        }
    }
}

/// One node's share of every raft group it hosts.
pub struct RaftNode<T: Transport> {
    id: NodeId,
    config: Config,
    clock: Arc<dyn Clock>,
    transport: T,
    storage: NodeStorage,
    groups: BTreeMap<GroupId, Group>,
    logger: slog::Logger,
    rng: SplitMix64,
    fenced: bool,
    fenced_peers: BTreeSet<NodeId>,
    next_read_id: u64,
    metrics: Arc<Metrics>,
    /// Snapshot jobs running on their threads, and where they hand their results.
    builds: SnapshotBuilds,
}

impl<T: Transport> std::fmt::Debug for RaftNode<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftNode")
            .field("id", &self.id)
            .field("groups", &self.groups.keys().collect::<Vec<_>>())
            .field("fenced", &self.fenced)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> RaftNode<T> {
    /// Opens node `id` on `backend`, replaying every group's raft state. Groups come back to life
    /// with [`RaftNode::create_group`], which then finds their stored state.
    pub fn new(
        id: NodeId,
        config: Config,
        clock: Arc<dyn Clock>,
        transport: T,
        backend: Box<dyn LogBackend>,
    ) -> Result<Self> {
        config.validate()?;
        assert!(id != 0, "raft node id 0 is reserved");
        let storage = NodeStorage::open_with_cache(backend, config.entry_cache_bytes_max)?;
        let rng = SplitMix64::new(config.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        Ok(RaftNode {
            id,
            config,
            clock,
            transport,
            storage,
            groups: BTreeMap::new(),
            logger: crate::logger::raft_logger(id),
            rng,
            fenced: false,
            fenced_peers: BTreeSet::new(),
            next_read_id: 1,
            metrics: Arc::new(Metrics::default()),
            builds: SnapshotBuilds::default(),
        })
    }

    /// This node's id (also its raft peer id in every group).
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The node's counters.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Groups whose state the log holds, e.g. to re-create them after a restart.
    pub fn stored_groups(&self) -> Vec<GroupId> {
        self.storage.group_ids()
    }

    /// Groups hosted now.
    pub fn groups(&self) -> Vec<GroupId> {
        self.groups.keys().copied().collect()
    }

    /// fsyncs issued by the log backend so far.
    pub fn fsyncs(&self) -> u64 {
        self.storage.fsyncs()
    }

    /// Index of the oldest record the node's log backend still keeps (moves on with `compact`).
    pub fn log_first_index(&self) -> u64 {
        self.storage.backend_first_index()
    }

    fn group_mut(&mut self, group: GroupId) -> Result<&mut Group> {
        self.groups
            .get_mut(&group)
            .ok_or(Error::GroupNotFound(group))
    }

    /// Advances every group's logical clock by one tick.
    pub fn tick(&mut self) {
        for g in self.groups.values_mut() {
            g.raw.tick();
            jitter_election(&mut self.rng, &self.config, g, false);
        }
        self.step_aside_if_fenced();
    }

    /// Feeds a message received from another node into its group.
    pub fn step(&mut self, message: RaftMessage) -> Result<()> {
        // A message for another node id is never this node's to answer: a wiped node that came
        // back under a new id must not vote or acknowledge as its old self (it lost that log).
        if message.message.to != self.id {
            Metrics::inc(&self.metrics.misaddressed_messages);
            return Ok(());
        }
        let g = self
            .groups
            .get_mut(&message.group)
            .ok_or(Error::GroupNotFound(message.group))?;
        // A follower whose apply is held (fenced) or behind keeps what it appended in its log:
        // past the bound it takes no more entries, as if the message were lost. The leader sees
        // it as lagging and sends again after the next heartbeat; by then the apply has moved
        // or the bound still holds. Memory and log stay bounded however long the hold lasts.
        if message.message.get_msg_type() == MessageType::MsgAppend
            && !message.message.entries.is_empty()
            && g.raw.store().log().read().bytes_after(g.applied) >= self.config.unapplied_bytes_max
        {
            Metrics::inc(&self.metrics.appends_refused_unapplied);
            return Ok(());
        }
        g.raw.step(message.message)?;
        jitter_election(&mut self.rng, &self.config, g, false);
        Ok(())
    }

    /// Starts an election in `group` now (tests, and a node that wants leadership back).
    pub fn campaign(&mut self, group: GroupId) -> Result<()> {
        let g = self.group_mut(group)?;
        g.raw.campaign()?;
        Ok(())
    }

    /// Proposes `data` to `group`. The ticket resolves with the state machine's result for the
    /// entry, as applied on this (leader) node, or with why that can no longer happen.
    pub fn propose(&mut self, group: GroupId, data: Vec<u8>) -> Result<Ticket<Vec<u8>>> {
        let (id, fenced, in_flight_max, bytes_max) = (
            self.id,
            self.fenced,
            self.config.in_flight_proposals_max,
            self.config.proposal_bytes_max,
        );
        let g = self.group_mut(group)?;
        if fenced {
            return Err(Error::Fenced { group, node: id });
        }
        if data.len() > bytes_max {
            return Err(Error::ProposalTooLarge {
                bytes: data.len(),
                max: bytes_max,
            });
        }
        check_leader(g, group, id)?;
        if g.in_flight() >= in_flight_max {
            return Err(Error::Backpressure {
                group,
                in_flight: g.in_flight(),
                max: in_flight_max,
            });
        }
        if g.raw.raft.lead_transferee.is_some() {
            return Err(Error::ProposalDropped { group });
        }
        let (_, ticket) = g.append_proposal(group, |raw| raw.propose(Vec::new(), data))?;
        Metrics::inc(&self.metrics.proposals);
        Ok(ticket)
    }

    /// A linearizable read barrier on the leader (raft ReadIndex): the ticket resolves with an
    /// index once leadership was confirmed by a quorum and this node applied up to that index;
    /// reading the state machine then sees every write acknowledged before the call.
    pub fn read_index(&mut self, group: GroupId) -> Result<Ticket<u64>> {
        let (id, in_flight_max) = (self.id, self.config.in_flight_proposals_max);
        let read_id = self.next_read_id;
        let g = self
            .groups
            .get_mut(&group)
            .ok_or(Error::GroupNotFound(group))?;
        check_leader(g, group, id)?;
        if g.in_flight() >= in_flight_max {
            return Err(Error::Backpressure {
                group,
                in_flight: g.in_flight(),
                max: in_flight_max,
            });
        }
        if !g.raw.raft.commit_to_current_term() {
            // raft-rs silently drops a read on a leader that has not committed an entry of its
            // term yet; refusing here keeps every accepted read answerable.
            return Err(Error::LeaderNotReady { group });
        }
        self.next_read_id += 1;
        g.raw.read_index(read_id.to_le_bytes().to_vec());
        let (completer, ticket) = ticket(group);
        g.reads.push_back(PendingRead {
            id: read_id,
            term: g.raw.raft.term,
            index: None,
            completer,
        });
        Ok(ticket)
    }

    /// Proposes a change of `group`'s members on its leader (this node). The ticket resolves
    /// once the entry is applied here, which may be as a no-op: raft takes one membership
    /// change at a time, so callers compare [`RaftNode::membership`] with what they want and
    /// propose the next step (a reconciliation loop), rather than trust the ticket.
    pub fn change_membership(
        &mut self,
        group: GroupId,
        change: MembershipChange,
    ) -> Result<Ticket<Vec<u8>>> {
        let (id, fenced) = (self.id, self.fenced);
        let g = self.group_mut(group)?;
        if fenced {
            return Err(Error::Fenced { group, node: id });
        }
        check_leader(g, group, id)?;
        let refuse = |reason: String| Err(Error::MembershipChange { group, reason });
        let raft = &g.raw.raft;
        if raft.has_pending_conf() {
            return refuse("a membership change is already pending".into());
        }
        if raft.lead_transferee.is_some() {
            return Err(Error::ProposalDropped { group });
        }
        let conf = g.raw.store().log().read().conf_state().clone();
        let joint = !conf.voters_outgoing.is_empty();
        let single = |change_type: ConfChangeType, node_id: NodeId| {
            let mut c = ConfChangeSingle::default();
            c.set_change_type(change_type);
            c.node_id = node_id;
            c
        };
        if joint != (change == MembershipChange::LeaveJoint) {
            return refuse(if joint {
                "the group is in a joint configuration".into()
            } else {
                "the group is not in a joint configuration".into()
            });
        }
        let mut cc = ConfChangeV2::default();
        cc.set_transition(ConfChangeTransition::Auto);
        match change {
            MembershipChange::AddLearner(node) => {
                if conf.voters.contains(&node) {
                    return refuse(format!("node {node} is a voter already"));
                }
                cc.set_changes(vec![single(ConfChangeType::AddLearnerNode, node)].into());
            }
            MembershipChange::Replace { add, remove } => {
                if !conf.learners.contains(&add) {
                    return refuse(format!("node {add} is not a learner"));
                }
                if !conf.voters.contains(&remove) {
                    return refuse(format!("node {remove} is not a voter"));
                }
                if remove == id {
                    return refuse(format!(
                        "node {remove} leads the group; hand leadership away first"
                    ));
                }
                cc.set_changes(
                    vec![
                        single(ConfChangeType::AddNode, add),
                        single(ConfChangeType::RemoveNode, remove),
                    ]
                    .into(),
                );
            }
            MembershipChange::LeaveJoint => {}
            MembershipChange::RemoveLearner(node) => {
                if !conf.learners.contains(&node) {
                    return refuse(format!("node {node} is not a learner"));
                }
                cc.set_changes(vec![single(ConfChangeType::RemoveNode, node)].into());
            }
        }
        let (index, ticket) =
            g.append_proposal(group, |raw| raw.propose_conf_change(Vec::new(), cc))?;
        Metrics::inc(&self.metrics.membership_changes);
        tracing::info!(group, ?change, index, "membership change proposed");
        Ok(ticket)
    }

    /// Moves the replacement of voter `from` by node `to` one step on, on `group`'s leader (this
    /// node): a reconciliation step, called again until it answers
    /// [`ReplacementStep::Done`]. In order: leave a joint configuration a previous leader left
    /// behind; hand leadership away when this node is `from`; remove a learner added for an
    /// earlier target (the group's only learners are replacements'); add `to` as a learner; once the
    /// learner's log is within `catch_up_entries` of the leader's, replace `from` with it
    /// ([`MembershipChange::Replace`]). Waits ([`ReplacementStep::Waiting`]) while a change is
    /// pending or the learner catches up.
    pub fn step_replacement(
        &mut self,
        group: GroupId,
        from: NodeId,
        to: NodeId,
        catch_up_entries: u64,
    ) -> Result<ReplacementStep> {
        let m = self.membership(group)?;
        if m.voters.contains(&to) && !m.voters.contains(&from) && !m.is_joint() {
            return Ok(ReplacementStep::Done);
        }
        if m.change_pending {
            return Ok(ReplacementStep::Waiting);
        }
        if m.is_joint() {
            self.change_membership(group, MembershipChange::LeaveJoint)?;
            return Ok(ReplacementStep::Proposed(MembershipChange::LeaveJoint));
        }
        if from == self.id {
            let target = m
                .voters
                .iter()
                .copied()
                .filter(|&v| v != from && !self.fenced_peers.contains(&v))
                .max_by_key(|v| (m.matched.get(v).copied().unwrap_or(0), *v));
            return match target {
                Some(target) => {
                    self.transfer_leader(group, target)?;
                    Ok(ReplacementStep::TransferredLeadership(target))
                }
                None => Ok(ReplacementStep::Waiting),
            };
        }
        // A learner other than `to` was added for an earlier target of this replacement.
        if let Some(&stale) = m.learners.iter().find(|&&l| l != to) {
            let change = MembershipChange::RemoveLearner(stale);
            self.change_membership(group, change)?;
            return Ok(ReplacementStep::Proposed(change));
        }
        let change = if m.learners.contains(&to) {
            let matched = m.matched.get(&to).copied().unwrap_or(0);
            if matched == 0 || matched + catch_up_entries < m.last_index {
                return Ok(ReplacementStep::Waiting);
            }
            MembershipChange::Replace {
                add: to,
                remove: from,
            }
        } else {
            MembershipChange::AddLearner(to)
        };
        self.change_membership(group, change)?;
        Ok(ReplacementStep::Proposed(change))
    }

    /// `group`'s members as this node applied them, with the leader's view of their progress.
    pub fn membership(&self, group: GroupId) -> Result<Membership> {
        let g = self.groups.get(&group).ok_or(Error::GroupNotFound(group))?;
        let raft = &g.raw.raft;
        let conf = g.raw.store().log().read().conf_state().clone();
        let matched = if raft.state == StateRole::Leader {
            raft.prs()
                .iter()
                .map(|(id, pr)| (*id, pr.matched))
                .collect()
        } else {
            BTreeMap::new()
        };
        Ok(Membership {
            voters: conf.voters.iter().copied().collect(),
            outgoing: conf.voters_outgoing.iter().copied().collect(),
            learners: conf
                .learners
                .iter()
                .chain(&conf.learners_next)
                .copied()
                .collect(),
            change_pending: raft.has_pending_conf(),
            matched,
            last_index: raft.raft_log.last_index(),
        })
    }

    /// Asks the leader of `group` (this node) to hand leadership to `to`.
    pub fn transfer_leader(&mut self, group: GroupId, to: NodeId) -> Result<()> {
        let id = self.id;
        let g = self.group_mut(group)?;
        check_leader(g, group, id)?;
        g.raw.transfer_leader(to);
        Ok(())
    }

    /// Sets this node's lease state. While fenced it rejects proposals with [`Error::Fenced`]
    /// (536) and hands leadership of its groups to replicas that hold their lease.
    pub fn set_fenced(&mut self, fenced: bool) {
        self.fenced = fenced;
        self.step_aside_if_fenced();
    }

    /// Whether this node is fenced.
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// Tells the node whether `peer` holds its metadata lease; fenced peers are never chosen as
    /// the target of a leadership transfer.
    pub fn set_peer_fenced(&mut self, peer: NodeId, fenced: bool) {
        if fenced {
            self.fenced_peers.insert(peer);
        } else {
            self.fenced_peers.remove(&peer);
        }
    }

    fn step_aside_if_fenced(&mut self) {
        if !self.fenced {
            return;
        }
        for g in self.groups.values_mut() {
            let raft = &g.raw.raft;
            if raft.state != StateRole::Leader || raft.lead_transferee.is_some() {
                continue;
            }
            // Prefer the most caught-up replica with a lease: the transfer completes sooner.
            let target = g
                .raw
                .store()
                .log()
                .read()
                .conf_state()
                .voters
                .iter()
                .copied()
                .filter(|&p| p != self.id && !self.fenced_peers.contains(&p))
                .max_by_key(|&p| (raft.prs().get(p).map_or(0, |pr| pr.matched), p));
            if let Some(target) = target {
                g.raw.transfer_leader(target);
                Metrics::inc(&self.metrics.fenced_transfers);
            }
        }
    }

    /// The leader's view of every replica's replication progress, for debugging output.
    #[doc(hidden)]
    pub fn debug_progress(&self, group: GroupId) -> String {
        let g = &self.groups[&group];
        format!("{:?}", g.raw.raft.prs().iter().collect::<Vec<_>>())
    }

    /// What `group` looks like from here.
    pub fn status(&self, group: GroupId) -> Result<GroupStatus> {
        let g = self.groups.get(&group).ok_or(Error::GroupNotFound(group))?;
        let raft = &g.raw.raft;
        let (mut voters, membership_settled, holds_received_snapshot) = {
            let log = g.raw.store().log().read();
            let cs = log.conf_state();
            let settled = cs.voters_outgoing.is_empty()
                && cs.learners.is_empty()
                && cs.learners_next.is_empty()
                && !raft.has_pending_conf();
            (
                cs.voters.clone(),
                settled,
                log.received_snapshot().is_some(),
            )
        };
        voters.sort_unstable();
        Ok(GroupStatus {
            voters,
            membership_settled,
            role: raft.state,
            term: raft.term,
            leader: (raft.leader_id != raft::INVALID_ID).then_some(raft.leader_id),
            commit: raft.raft_log.committed,
            applied: g.applied,
            first_index: raft.raft_log.first_index(),
            last_index: raft.raft_log.last_index(),
            apply_stuck: g.retry.is_some(),
            holds_received_snapshot,
        })
    }

    /// The state machine of `group`, e.g. for a read after [`RaftNode::read_index`].
    pub fn state_machine(&self, group: GroupId) -> Result<&dyn StateMachine> {
        let g = self.groups.get(&group).ok_or(Error::GroupNotFound(group))?;
        Ok(g.state_machine.as_ref())
    }

    /// Stops hosting `group` on this node (the replica moved away or the region was dropped):
    /// its pending requests resolve as [`ProposalError::Stopped`], and its raft state is voided
    /// durably before this returns. Membership is not changed: that is the leader's business.
    pub fn remove_group(&mut self, group: GroupId) -> Result<()> {
        self.groups
            .remove(&group)
            .ok_or(Error::GroupNotFound(group))?;
        self.storage.remove_group(group);
        self.storage.flush(true)?;
        self.storage.purge()?;
        Ok(())
    }

    /// Drops `group`'s raft log up to `index` and frees log space no group needs. The state
    /// machine must hold everything up to `index` durably; `index` may not pass its applied index.
    pub fn compact(&mut self, group: GroupId, index: u64) -> Result<()> {
        let g = self.groups.get(&group).ok_or(Error::GroupNotFound(group))?;
        let applied = g.state_machine.applied_index().min(g.applied);
        if index > applied {
            return Err(StorageError::CompactBeyondApplied {
                group,
                index,
                applied,
            }
            .into());
        }
        // A snapshot being built must still join the log when it is done.
        let index = g.snapshots.pin.map_or(index, |pin| index.min(pin));
        self.storage.compact(group, index);
        self.storage.purge()?;
        Ok(())
    }

    /// [`RaftNode::compact`] to `index` or, on a leader, to below the slowest follower's
    /// matched index where that is lower, so a follower that was down or cut off catches up
    /// from the log rather than by a snapshot. A follower further behind than the lag allowance
    /// (`log_lag_entries_max` entries or `log_lag_bytes_max` bytes after its matched index) is
    /// not waited for: it catches up by snapshot. Returns the index the log now starts after.
    pub fn compact_keeping_followers(&mut self, group: GroupId, index: u64) -> Result<u64> {
        let g = self.groups.get(&group).ok_or(Error::GroupNotFound(group))?;
        let mut upto = index;
        if g.raw.raft.state == StateRole::Leader {
            let log = g.raw.store().log().read();
            let last = log.last_index();
            for (&peer, progress) in g.raw.raft.prs().iter() {
                if peer == self.id {
                    continue;
                }
                let matched = progress.matched;
                let within_allowance = last.saturating_sub(matched)
                    <= self.config.log_lag_entries_max
                    && log.bytes_after(matched) <= self.config.log_lag_bytes_max;
                if within_allowance {
                    upto = upto.min(matched);
                }
            }
            upto = upto.max(log.first_index() - 1);
        }
        if upto > g.raw.store().log().read().first_index() - 1 {
            self.compact(group, upto)?;
        }
        Ok(self.groups[&group].raw.store().log().read().first_index() - 1)
    }

    /// Whether [`RaftNode::handle_ready`] has work: a raft `Ready`, a snapshot to generate, or
    /// committed entries to apply whose retry time has come.
    pub fn has_ready(&self) -> bool {
        let now_ms = self.clock.now_ms();
        self.builds.has_results()
            || self.groups.values().any(|g| {
                g.raw.has_ready()
                    || ((g.applied < g.apply_upper || g.pending_restore.is_some())
                        && g.retry.is_none_or(|r| r.at_ms <= now_ms))
            })
    }

    /// Earliest time an apply retry is due, if one is waiting (a driver sleeps until then).
    pub fn next_retry_ms(&self) -> Option<u64> {
        self.groups
            .values()
            .filter_map(|g| g.retry.map(|r| r.at_ms))
            .min()
    }

    /// Processes the `Ready` of every group with one durable write, in the order raft-rs
    /// documents, then applies committed entries:
    ///
    /// 1. leader messages are sent at once (raft thesis 10.2.1: replicate while persisting);
    /// 2. a received snapshot is installed in storage (restored into the state machine in 8);
    /// 3. new entries are appended and 4. the hard state recorded, for all groups, then written
    ///    as one batch with one fsync (when any group needs it);
    /// 5. messages that must follow persistence (votes, append responses) are sent;
    /// 6. `advance_append` yields the light ready: 7. its commit index is recorded (written
    ///    lazily: it is recoverable) and its messages sent;
    /// 8. the apply proxy applies committed entries from storage, independent of 1–7, so a
    ///    stuck state machine never keeps this node from persisting and acknowledging entries.
    pub fn handle_ready(&mut self) -> Result<()> {
        self.generate_requested_snapshots();
        let mut outbox = Outbox::default();
        let mut readies = Vec::new();
        let mut must_sync = false;
        for (&gid, g) in self.groups.iter_mut() {
            if !g.raw.has_ready() {
                continue;
            }
            let (rd, snapshots_sent) =
                take_ready(gid, g, &mut self.storage, &self.metrics, &mut outbox);
            must_sync |= rd.must_sync();
            readies.push((gid, rd, snapshots_sent));
        }
        outbox.flush(&self.transport);
        if readies.is_empty()
            && !self
                .groups
                .values()
                .any(|g| g.applied < g.apply_upper || g.pending_restore.is_some())
        {
            return Ok(());
        }
        if must_sync || self.storage.has_pending() {
            self.storage.flush(must_sync)?;
            self.metrics
                .entry_cache_bytes
                .store(self.storage.cached_entry_bytes() as u64, Ordering::Relaxed);
        }
        if must_sync {
            Metrics::inc(&self.metrics.synced_batches);
        }
        for (gid, rd, snapshots_sent) in readies {
            let g = self.groups.get_mut(&gid).expect("group of a ready");
            let clock = &*self.clock;
            advance_ready(
                gid,
                g,
                rd,
                snapshots_sent,
                &mut self.storage,
                &mut outbox,
                clock,
            );
        }
        outbox.flush(&self.transport);
        let gids: Vec<GroupId> = self.groups.keys().copied().collect();
        for gid in gids {
            self.apply_group(gid)?;
        }
        Ok(())
    }

    /// The apply proxy for one group: applies committed entries strictly in order, never moving
    /// the applied index past an entry whose outcome is not final.
    fn apply_group(&mut self, gid: GroupId) -> Result<()> {
        let now_ms = self.clock.now_ms();
        let config = &self.config;
        let metrics = &self.metrics;
        let storage = &mut self.storage;
        let g = self.groups.get_mut(&gid).expect("group exists");
        if g.retry.is_some_and(|r| now_ms < r.at_ms) {
            return Ok(());
        }
        if !restore_pending(g, gid, storage, config, metrics, now_ms)? {
            return Ok(());
        }
        let mut budget = config.apply_batch_entries_max;
        let conf_applied = g.raw.store().log().read().conf_state_index();
        'apply: while g.applied < g.apply_upper && budget > 0 {
            let entries: Vec<Entry> =
                g.raw
                    .store()
                    .read_entries(g.applied + 1, g.apply_upper + 1, None, budget)?;
            assert!(
                entries.first().is_some_and(|e| e.index == g.applied + 1),
                "group {gid}: committed entry {} is missing from the log (first index {})",
                g.applied + 1,
                g.raw.store().log().read().first_index()
            );
            for entry in entries {
                let outcome = match entry.get_entry_type() {
                    EntryType::EntryNormal if entry.data.is_empty() => {
                        g.state_machine.note_applied(entry.index);
                        Ok(Vec::new())
                    }
                    EntryType::EntryNormal => {
                        match g.state_machine.apply(entry.index, &entry.data) {
                            Ok(result) => Ok(result),
                            Err(ApplyError::Deterministic { code, message }) => {
                                Metrics::inc(&metrics.apply_deterministic_errors);
                                Err(ProposalError::Apply {
                                    index: entry.index,
                                    code,
                                    message,
                                })
                            }
                            Err(ApplyError::Recoverable { code, message }) => {
                                schedule_retry(
                                    g,
                                    gid,
                                    entry.index,
                                    code,
                                    &message,
                                    config,
                                    metrics,
                                    now_ms,
                                );
                                break 'apply;
                            }
                        }
                    }
                    EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => {
                        if entry.index > conf_applied {
                            apply_conf_change(g, gid, storage, metrics, &entry)?;
                        }
                        // Only once the membership is durable: the state machine may persist
                        // this index next, and a restart resumes after it.
                        g.state_machine.note_applied(entry.index);
                        Ok(Vec::new())
                    }
                };
                Metrics::inc(&metrics.entries_applied);
                tracing::trace!(
                    group = gid,
                    index = entry.index,
                    term = entry.term,
                    commit = g.raw.raft.raft_log.committed,
                    role = ?g.raw.raft.state,
                    proposed_here = g.proposals.contains_key(&entry.index),
                    "applied"
                );
                g.retry = None;
                g.applied = entry.index;
                budget -= 1;
                g.finish_proposal(gid, entry.index, entry.term, outcome);
            }
        }
        if g.applied > g.raw.raft.raft_log.applied {
            g.raw.advance_apply_to(g.applied);
        }
        g.finish_reads();
        Ok(())
    }
}

/// Restores the snapshot a group received, if one waits, before anything else is applied;
/// false while it cannot be (a retry is scheduled).
fn restore_pending(
    g: &mut Group,
    gid: GroupId,
    storage: &mut NodeStorage,
    config: &Config,
    metrics: &Metrics,
    now_ms: u64,
) -> Result<bool> {
    let Some(snapshot) = g.pending_restore.take() else {
        return Ok(true);
    };
    let index = snapshot.get_metadata().index;
    match g.state_machine.restore(index, snapshot.get_data()) {
        Ok(()) => {
            assert_eq!(
                g.state_machine.applied_index(),
                index,
                "group {gid}: state machine restored to the wrong index"
            );
            g.applied = g.applied.max(index);
            g.apply_upper = g.apply_upper.max(index);
            g.retry = None;
            Metrics::inc(&metrics.snapshots.restored);
            // The state machine holds the snapshot durably: the log stops keeping it (and what
            // it pins of the shared log). A replica whose apply is held at a fence flushes
            // nothing, so nothing else would release it.
            storage.compact(gid, index);
            storage.purge()?;
            Ok(true)
        }
        Err(ApplyError::Recoverable { code, message }) => {
            g.pending_restore = Some(snapshot);
            schedule_retry(g, gid, index, code, &message, config, metrics, now_ms);
            Ok(false)
        }
        Err(ApplyError::Deterministic { code, message }) => panic!(
            "group {gid}: restoring the snapshot at {index} failed deterministically ({code}: {message})"
        ),
    }
}

/// Applies the membership change `entry` to raft and stores the new membership durably (one
/// fsync; changes are rare) before the apply moves past it. Were it written lazily, the state
/// machine could persist a later applied index first, and a crash would restart past a change
/// the stored membership lacks. A change re-applied after a restart is skipped by the caller:
/// the stored membership raft started from already holds it.
fn apply_conf_change(
    g: &mut Group,
    gid: GroupId,
    storage: &mut NodeStorage,
    metrics: &Metrics,
    entry: &Entry,
) -> Result<()> {
    let corrupt = |e: protobuf::ProtobufError| StorageError::Corrupt {
        log_index: entry.index,
        reason: e.to_string(),
    };
    let conf_state = if entry.get_entry_type() == EntryType::EntryConfChange {
        let cc = ConfChange::parse_from_bytes(&entry.data).map_err(corrupt)?;
        g.raw.apply_conf_change(&cc)?
    } else {
        let cc = ConfChangeV2::parse_from_bytes(&entry.data).map_err(corrupt)?;
        g.raw.apply_conf_change(&cc)?
    };
    tracing::info!(
        group = gid,
        index = entry.index,
        voters = ?conf_state.voters,
        outgoing = ?conf_state.voters_outgoing,
        learners = ?conf_state.learners,
        "membership changed"
    );
    storage.set_conf_state(gid, entry.index, &conf_state);
    storage.flush(true)?;
    Metrics::inc(&metrics.membership_changes_applied);
    Ok(())
}

/// Steps 1 to 4 of [`RaftNode::handle_ready`] for one group: takes its `Ready`, queues the
/// leader's messages, installs a received snapshot, appends the new entries and records the hard
/// state (written by the caller's one flush), and notes reads, role changes and committed entries.
/// Returns the ready and the nodes sent a snapshot so far.
fn take_ready(
    gid: GroupId,
    g: &mut Group,
    storage: &mut NodeStorage,
    metrics: &Metrics,
    outbox: &mut Outbox,
) -> (raft::Ready, Vec<NodeId>) {
    let mut rd = g.raw.ready();
    Metrics::inc(&metrics.readies);
    let messages = rd.take_messages();
    let snapshots_sent = snapshot_targets(&messages);
    outbox.push(gid, messages);
    if !rd.snapshot().is_empty() {
        storage.apply_snapshot(gid, rd.snapshot());
        g.pending_restore = Some(rd.snapshot().clone());
        g.retry = None;
    }
    storage.append(gid, rd.entries());
    debug_assert!(
        rd.entries()
            .last()
            .is_none_or(|e| e.index == g.raw.store().log().read().last_index()),
        "group {gid}: the ready's entries end the log"
    );
    if let Some(hs) = rd.hs() {
        if rd.must_sync() {
            storage.set_hard_state(gid, hs);
        } else {
            // Only the commit index moved (raft sets must_sync on a term or vote change).
            storage.set_hard_state_lazily(gid, hs);
        }
    }
    if let Some(ss) = rd.ss() {
        if ss.raft_state != StateRole::Leader {
            g.fail_all(gid);
        }
    }
    // A leader that lost and regained leadership between two readies shows no role change;
    // raft dropped the read requests of its earlier term.
    g.fail_reads_of_other_terms(gid);
    for rs in rd.take_read_states() {
        let id = u64::from_le_bytes(
            rs.request_ctx
                .as_slice()
                .try_into()
                .expect("read contexts are 8-byte ids"),
        );
        if let Some(read) = g.reads.iter_mut().find(|r| r.id == id) {
            read.index = Some(rs.index);
        }
    }
    note_committed(g, rd.committed_entries());
    (rd, snapshots_sent)
}

/// Steps 5 to 7 of [`RaftNode::handle_ready`] for one group, once its ready is durable: queues
/// the messages that must follow persistence, advances raft past the ready, records the light
/// ready's commit index and queues its messages, and reports the snapshots sent.
fn advance_ready(
    gid: GroupId,
    g: &mut Group,
    mut rd: raft::Ready,
    mut snapshots_sent: Vec<NodeId>,
    storage: &mut NodeStorage,
    outbox: &mut Outbox,
    clock: &dyn Clock,
) {
    let persisted = rd.take_persisted_messages();
    snapshots_sent.extend(snapshot_targets(&persisted));
    outbox.push(gid, persisted);
    let snapshot_index = rd.snapshot().get_metadata().index;
    let mut light = g.raw.advance_append(rd);
    if snapshot_index > g.raw.raft.raft_log.applied {
        // The log now starts after the snapshot, and raft reads [applied + 1, commit] when it
        // campaigns; the proxy's own applied index still waits for the restore.
        g.raw.advance_apply_to(snapshot_index);
    }
    if let Some(commit) = light.commit_index() {
        storage.set_commit(gid, commit);
    }
    note_committed(g, light.committed_entries());
    let light_messages = light.take_messages();
    snapshots_sent.extend(snapshot_targets(&light_messages));
    outbox.push(gid, light_messages);
    // The transport is fire-and-forget; reporting the snapshot as sent moves the follower to
    // probing, and a lost snapshot shows up as a rejected probe that triggers a new one.
    if !snapshots_sent.is_empty() {
        g.snapshots.used_ms = Some(clock.now_ms());
    }
    for to in snapshots_sent {
        g.raw.report_snapshot(to, SnapshotStatus::Finish);
    }
}

fn check_leader(g: &Group, group: GroupId, node: NodeId) -> Result<()> {
    if g.raw.raft.state == StateRole::Leader {
        return Ok(());
    }
    let leader = g.raw.raft.leader_id;
    Err(Error::NotLeader {
        group,
        node,
        leader: (leader != raft::INVALID_ID).then_some(leader),
    })
}

fn snapshot_targets(messages: &[raft::eraftpb::Message]) -> Vec<NodeId> {
    messages
        .iter()
        .filter(|m| m.get_msg_type() == MessageType::MsgSnapshot)
        .map(|m| m.to)
        .collect()
}

fn note_committed(g: &mut Group, committed: &[Entry]) {
    if let Some(last) = committed.last() {
        g.apply_upper = g.apply_upper.max(last.index);
    }
}

#[allow(clippy::too_many_arguments)]
fn schedule_retry(
    g: &mut Group,
    gid: GroupId,
    index: u64,
    code: u16,
    message: &str,
    config: &Config,
    metrics: &Metrics,
    now_ms: u64,
) {
    let attempt = g.retry.map_or(1, |r| r.attempt.saturating_add(1));
    let backoff_ms = config.apply_backoff_ms(attempt);
    g.retry = Some(Retry {
        attempt,
        at_ms: now_ms + backoff_ms,
    });
    Metrics::inc(&metrics.apply_retries);
    tracing::warn!(
        group = gid,
        index,
        code,
        attempt,
        backoff_ms,
        "apply failed with a recoverable error, retrying: {message}"
    );
}

/// raft-rs re-arms a follower's election timer from its thread RNG; our config pins that to
/// `2 * election_tick`, and here, whenever the timer was re-armed (role or term changed), the
/// node's seeded RNG pre-ages it so the effective timeout falls in `(election_tick,
/// 2 * election_tick]`. Leaders are left alone: their elapsed counter drives check-quorum.
fn jitter_election(rng: &mut SplitMix64, config: &Config, g: &mut Group, force: bool) {
    let raft = &mut g.raw.raft;
    let changed = raft.state != g.seen_role || raft.term != g.seen_term;
    g.seen_role = raft.state;
    g.seen_term = raft.term;
    if (changed || force) && raft.state != StateRole::Leader {
        raft.election_elapsed = rng.range(0, config.election_tick as u64) as usize;
    }
}
