//! Typed errors of the consensus layer.

use common::StatusCode;

use crate::{GroupId, NodeId};

/// Result of a synchronous call into the consensus layer.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a call on a [`crate::RaftNode`] failed at once.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A new group must list this node among its peers.
    #[error("node {node} is not among the peers of new group {group}")]
    NotAPeer {
        /// The group.
        group: GroupId,
        /// This node.
        node: NodeId,
    },
    /// No raft group with this id is hosted on this node.
    #[error("raft group {0} is not hosted on this node")]
    GroupNotFound(GroupId),
    /// `create_group` was called twice for one group.
    #[error("raft group {0} already exists on this node")]
    GroupExists(GroupId),
    /// Proposals and reads go to the leader; `leader` is the last leader this node heard of.
    #[error("node {node} is not the leader of group {group} (leader hint {leader:?})")]
    NotLeader {
        /// The group.
        group: GroupId,
        /// This node.
        node: NodeId,
        /// The leader this node knows of, if any.
        leader: Option<NodeId>,
    },
    /// The group already has `max` proposals (or reads) waiting for their result.
    #[error("group {group} has {in_flight} requests in flight (max {max}); retry later")]
    Backpressure {
        /// The group.
        group: GroupId,
        /// Requests currently waiting.
        in_flight: usize,
        /// The configured limit.
        max: usize,
    },
    /// This node's metadata lease is fenced: it takes no new proposals (status 536) and hands
    /// leadership to a replica that holds its lease.
    #[error("node {node} is fenced; group {group} rejects new proposals")]
    Fenced {
        /// The group.
        group: GroupId,
        /// This node.
        node: NodeId,
    },
    /// Raft dropped the proposal, e.g. while a leadership transfer is in progress.
    #[error("group {group} dropped the proposal (leadership transfer in progress?)")]
    ProposalDropped {
        /// The group.
        group: GroupId,
    },
    /// A new leader takes linearizable reads only once it committed an entry of its own term
    /// (soon after its election); retry shortly.
    #[error("group {group}: the leader has not committed an entry of its term yet")]
    LeaderNotReady {
        /// The group.
        group: GroupId,
    },
    /// A proposal larger than `Config::proposal_bytes_max`.
    #[error("proposal of {bytes} bytes exceeds the limit of {max} bytes")]
    ProposalTooLarge {
        /// Size of the rejected proposal.
        bytes: usize,
        /// The configured limit.
        max: usize,
    },
    /// A membership change that cannot be proposed now (see [`crate::MembershipChange`]).
    #[error("group {group}: membership change refused: {reason}")]
    MembershipChange {
        /// The group.
        group: GroupId,
        /// Why.
        reason: String,
    },
    /// The configuration failed validation.
    #[error("invalid consensus config: {0}")]
    Config(String),
    /// raft-rs refused an operation.
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    /// The raft log could not be read or written.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl Error {
    /// The IoTDB status code a server reports for this error.
    pub fn status_code(&self) -> StatusCode {
        match self {
            Error::Fenced { .. } => StatusCode::MetadataLeaseFencedRetryRequired,
            Error::NotLeader { .. }
            | Error::ProposalDropped { .. }
            | Error::LeaderNotReady { .. } => StatusCode::RegionLeaderChangeError,
            Error::Backpressure { .. } => StatusCode::WriteProcessReject,
            _ => StatusCode::InternalServerError,
        }
    }
}

/// Failure of the raft log storage or of its encoding.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The log backend (the `wal` crate, or the in-memory model) failed. Sticky in the backend.
    #[error("raft log backend: {0}")]
    Backend(String),
    /// A record read back from the log does not decode.
    #[error("corrupt raft log record at log index {log_index}: {reason}")]
    Corrupt {
        /// Index of the record in the log backend.
        log_index: u64,
        /// What was wrong.
        reason: String,
    },
    /// The state machine's applied index is behind the compacted log and no snapshot is stored.
    #[error(
        "group {group}: state machine applied index {applied} is behind the log's first index {first_index} and no snapshot is stored"
    )]
    StateMachineBehindLog {
        /// The group.
        group: GroupId,
        /// The state machine's applied index.
        applied: u64,
        /// First index still in the log.
        first_index: u64,
    },
    /// The state machine claims entries the raft log never stored (its log was lost or swapped).
    #[error(
        "group {group}: state machine applied index {applied} is past the raft log's last index {last_index}"
    )]
    StateMachineAheadOfLog {
        /// The group.
        group: GroupId,
        /// The state machine's applied index.
        applied: u64,
        /// Last index in the raft log.
        last_index: u64,
    },
    /// `compact` was asked to drop entries the state machine has not applied yet.
    #[error("group {group}: cannot compact to {index}, applied index is {applied}")]
    CompactBeyondApplied {
        /// The group.
        group: GroupId,
        /// Requested compaction index.
        index: u64,
        /// The state machine's applied index.
        applied: u64,
    },
}

/// How applying one committed entry failed. The classification decides what the apply proxy does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// A transient condition (536 lease fenced, a busy engine): the proxy retries the same entry with
    /// capped exponential backoff, indefinitely, and the applied index does not move.
    #[error("recoverable apply error {code}: {message}")]
    Recoverable {
        /// IoTDB status code.
        code: u16,
        /// Human-readable detail.
        message: String,
    },
    /// The entry can never apply (614 type mismatch): recorded as the entry's result on every
    /// replica alike, and the applied index moves on.
    #[error("deterministic apply error {code}: {message}")]
    Deterministic {
        /// IoTDB status code.
        code: u16,
        /// Human-readable detail.
        message: String,
    },
}

/// Why a proposal or read accepted by [`crate::RaftNode`] did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposalError {
    /// The entry was committed and applied, and the state machine rejected it deterministically.
    #[error("entry {index} applied with error {code}: {message}")]
    Apply {
        /// Log index of the entry.
        index: u64,
        /// IoTDB status code.
        code: u16,
        /// Human-readable detail.
        message: String,
    },
    /// Leadership was lost or the entry was overwritten before it applied here. The outcome is
    /// unknown: the entry may still commit under the new leader. Writes are idempotent upserts,
    /// so the caller retries on the new leader (905).
    #[error("group {group}: leadership changed before the request completed (term {term}, index {index})")]
    LeaderChanged {
        /// The group.
        group: GroupId,
        /// Term the request was accepted in.
        term: u64,
        /// Log index of the proposal (0 for reads).
        index: u64,
    },
    /// The group was removed or the node shut down.
    #[error("group {group} was removed or its node stopped")]
    Stopped {
        /// The group.
        group: GroupId,
    },
}

impl ProposalError {
    /// The IoTDB status code a server reports for this outcome.
    pub fn status_code(&self) -> u16 {
        match self {
            ProposalError::Apply { code, .. } => *code,
            ProposalError::LeaderChanged { .. } => StatusCode::RegionLeaderChangeError.code(),
            ProposalError::Stopped { .. } => StatusCode::InternalServerError.code(),
        }
    }
}
