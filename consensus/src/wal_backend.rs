//! The `wal` crate as the raft log backend of a node.

use crate::error::StorageError;
use crate::storage::{LogBackend, RecordVisitor};

fn backend_error(e: wal::Error) -> StorageError {
    StorageError::Backend(e.to_string())
}

/// One `wal::Wal` holds the raft records of every group on the node. Open it with
/// `Durability::None`: [`crate::RaftNode::handle_ready`] calls `sync` once per batch that raft
/// needs durable, which is the one fdatasync per round. (With `GroupCommit` every batch, even a
/// commit-index-only one, is synced inside `append_batch`; the explicit `sync` is then free.)
impl LogBackend for wal::Wal {
    fn append_batch(&self, records: &[&[u8]]) -> Result<u64, StorageError> {
        wal::Wal::append_batch(self, records).map_err(backend_error)
    }

    fn sync(&self) -> Result<(), StorageError> {
        wal::Wal::sync(self).map_err(backend_error)
    }

    fn first_index(&self) -> u64 {
        wal::Wal::first_index(self)
    }

    fn next_index(&self) -> u64 {
        wal::Wal::next_index(self)
    }

    fn read_from(&self, index: u64, visit: &mut RecordVisitor<'_>) -> Result<(), StorageError> {
        for record in self.iter_from(index).map_err(backend_error)? {
            let (position, bytes) = record.map_err(backend_error)?;
            if !visit(position, &bytes)? {
                break;
            }
        }
        Ok(())
    }

    fn truncate_prefix(&self, index: u64) -> Result<(), StorageError> {
        wal::Wal::truncate_prefix(self, index).map_err(backend_error)
    }

    fn fsyncs(&self) -> u64 {
        self.stats().fsyncs
    }
}
