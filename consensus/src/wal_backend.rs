//! The `wal` crate as the raft log backend of a node.

use std::time::Duration;

use crate::error::StorageError;
use crate::storage::{LogBackend, RecordVisitor};

/// Attempts of an append the log refused without changing anything (a segment roll found no
/// file descriptor, `wal::Error::is_retryable`) before the error goes to raft, which stops the
/// node: descriptors freed meanwhile (a client connection closed) let the append through.
const RETRYABLE_ATTEMPTS_MAX: u32 = 20;
/// Wait between those attempts. The raft thread waits with them, so all of them together stay
/// well under an election timeout (a second by default).
const RETRYABLE_WAIT: Duration = Duration::from_millis(25);

/// Runs `op` until it succeeds, fails for good, or has been refused retryably
/// [`RETRYABLE_ATTEMPTS_MAX`] times, `wait` apart.
fn retrying<T>(mut op: impl FnMut() -> wal::Result<T>, wait: impl Fn(Duration)) -> wal::Result<T> {
    let mut attempt = 1;
    loop {
        match op() {
            Err(e) if e.is_retryable() && attempt < RETRYABLE_ATTEMPTS_MAX => {
                if attempt == 1 {
                    tracing::warn!("raft log append refused ({e}); retrying");
                }
                attempt += 1;
                wait(RETRYABLE_WAIT);
            }
            outcome => return outcome,
        }
    }
}

fn backend_error(e: wal::Error) -> StorageError {
    StorageError::Backend(e.to_string())
}

/// One `wal::Wal` holds the raft records of every group on the node. Open it with
/// `Durability::None`: [`crate::RaftNode::handle_ready`] calls `sync` once per batch that raft
/// needs durable, which is the one fdatasync per round. (With `GroupCommit` every batch, even a
/// commit-index-only one, is synced inside `append_batch`; the explicit `sync` is then free.)
impl LogBackend for wal::Wal {
    fn append_batch(&self, records: &[&[u8]]) -> Result<u64, StorageError> {
        retrying(|| wal::Wal::append_batch(self, records), std::thread::sleep)
            .map_err(backend_error)
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

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn out_of_descriptors() -> wal::Error {
        wal::Error::OutOfDescriptors {
            path: "00000000000000000005.wal.tmp".into(),
            source: std::io::Error::other("EMFILE"),
        }
    }

    #[test]
    fn a_retryable_refusal_is_tried_again_and_others_are_not() {
        let (calls, waits) = (Cell::new(0), Cell::new(0));
        let wait = |_| waits.set(waits.get() + 1);
        let outcome = retrying(
            || {
                calls.set(calls.get() + 1);
                if calls.get() < 3 {
                    Err(out_of_descriptors())
                } else {
                    Ok(7)
                }
            },
            wait,
        );
        assert_eq!((outcome.unwrap(), calls.get(), waits.get()), (7, 3, 2));

        // Refused on every attempt: the error after a bounded number of them.
        calls.set(0);
        let outcome: wal::Result<u64> = retrying(
            || {
                calls.set(calls.get() + 1);
                Err(out_of_descriptors())
            },
            |_| {},
        );
        assert!(matches!(outcome, Err(wal::Error::OutOfDescriptors { .. })));
        assert_eq!(calls.get(), RETRYABLE_ATTEMPTS_MAX);

        // A poisoned log is final at once.
        calls.set(0);
        let outcome: wal::Result<u64> = retrying(
            || {
                calls.set(calls.get() + 1);
                Err(wal::Error::Poisoned)
            },
            |_| {},
        );
        assert!(matches!(outcome, Err(wal::Error::Poisoned)));
        assert_eq!(calls.get(), 1);
    }
}
