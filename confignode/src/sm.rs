//! [`consensus::StateMachine`] over the shared [`MetadataState`].

use std::sync::Arc;

use consensus::ApplyError;
use parking_lot::RwLock;

use crate::command::Command;
use crate::error::MetadataError;
use crate::state::MetadataState;

/// The ConfigNode group's state machine. The state is shared with the gRPC handlers, which read
/// it under the lock; only the raft driver writes it, through `apply` and `restore`.
pub struct MetadataStateMachine {
    state: Arc<RwLock<MetadataState>>,
}

impl MetadataStateMachine {
    /// A state machine writing into `state`.
    pub fn new(state: Arc<RwLock<MetadataState>>) -> Self {
        MetadataStateMachine { state }
    }
}

impl consensus::StateMachine for MetadataStateMachine {
    fn apply(&mut self, index: u64, data: &[u8]) -> Result<Vec<u8>, ApplyError> {
        let mut state = self.state.write();
        let outcome = match Command::decode(data) {
            Ok(command) => state.apply(index, &command),
            Err(e) => {
                // Every replica holds the same bytes, so refusing them is deterministic too.
                state.skip(index);
                Err(MetadataError::Decode(e))
            }
        };
        outcome
            .map(|result| result.encode())
            .map_err(|e| ApplyError::Deterministic {
                code: e.status_code().code(),
                message: e.to_string(),
            })
    }

    fn applied_index(&self) -> u64 {
        self.state.read().applied_index()
    }

    /// Leader no-ops and membership changes move the state's applied index too: a snapshot is
    /// labelled with the group's applied index, and `restore` checks the label against the
    /// state's (a snapshot taken right after an election carried the no-op's index).
    fn note_applied(&mut self, index: u64) {
        let mut state = self.state.write();
        if index > state.applied_index() {
            state.skip(index);
        }
    }

    fn snapshot(&self) -> Result<Vec<u8>, ApplyError> {
        Ok(self.state.read().encode_snapshot())
    }

    fn restore(&mut self, index: u64, snapshot: &[u8]) -> Result<(), ApplyError> {
        let restored = MetadataState::decode_snapshot(snapshot).map_err(|e| {
            // A snapshot that does not decode was damaged in transit or storage; retrying
            // lets raft send it again rather than corrupt this replica.
            ApplyError::Recoverable {
                code: common::StatusCode::InternalServerError.code(),
                message: format!("ConfigNode snapshot at {index}: {e}"),
            }
        })?;
        assert_eq!(
            restored.applied_index(),
            index,
            "ConfigNode snapshot taken at {} delivered as index {index}",
            restored.applied_index()
        );
        *self.state.write() = restored;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use consensus::StateMachine;

    use super::*;

    /// A snapshot taken after entries the state machine never sees (a new leader's no-op, a
    /// membership change) is labelled with the group's applied index; the replica restoring it
    /// must find the same index in it (it panicked before).
    #[test]
    fn a_snapshot_after_a_leader_no_op_restores() {
        let mut leader = MetadataStateMachine::new(Arc::default());
        let create = Command::CreateDatabase {
            database: "root.sg".into(),
            table_model: false,
        };
        leader.apply(1, &create.encode()).unwrap();
        leader.note_applied(2);
        assert_eq!(leader.applied_index(), 2);
        let bytes = leader.snapshot().unwrap();
        let mut follower = MetadataStateMachine::new(Arc::default());
        follower.restore(2, &bytes).unwrap();
        assert_eq!(follower.applied_index(), 2);
        // Noting an index at or below the applied one changes nothing.
        follower.note_applied(1);
        assert_eq!(follower.applied_index(), 2);
    }
}
