//! [`MemLog`]: an in-memory [`LogBackend`] that models a disk, for the simulations and tests.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::StorageError;
use crate::storage::{LogBackend, RecordVisitor};

#[derive(Debug, Default)]
struct MemLogState {
    first_index: u64,
    records: VecDeque<Vec<u8>>,
    /// Records below this index survived the last sync.
    synced_next_index: u64,
    fsyncs: u64,
}

/// An in-memory [`LogBackend`] that models a disk: [`MemLog::crash`] forgets what was not synced.
/// Clones share the log, so a restarted node can reopen what its predecessor persisted.
#[derive(Debug, Clone)]
pub struct MemLog {
    state: Arc<Mutex<MemLogState>>,
}

impl Default for MemLog {
    fn default() -> Self {
        MemLog {
            state: Arc::new(Mutex::new(MemLogState {
                first_index: 1,
                synced_next_index: 1,
                ..MemLogState::default()
            })),
        }
    }
}

impl MemLog {
    /// Loses every record appended after the last sync, as a power cut would.
    pub fn crash(&self) {
        let mut state = self.state.lock();
        let keep = (state.synced_next_index - state.first_index) as usize;
        state.records.truncate(keep);
    }

    /// Number of records kept.
    pub fn len(&self) -> usize {
        self.state.lock().records.len()
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl LogBackend for MemLog {
    fn append_batch(&self, records: &[&[u8]]) -> Result<u64, StorageError> {
        let mut state = self.state.lock();
        let first = state.first_index + state.records.len() as u64;
        state.records.extend(records.iter().map(|r| r.to_vec()));
        Ok(first)
    }

    fn sync(&self) -> Result<(), StorageError> {
        let mut state = self.state.lock();
        state.synced_next_index = state.first_index + state.records.len() as u64;
        state.fsyncs += 1;
        Ok(())
    }

    fn first_index(&self) -> u64 {
        self.state.lock().first_index
    }

    fn next_index(&self) -> u64 {
        let state = self.state.lock();
        state.first_index + state.records.len() as u64
    }

    fn read_from(&self, index: u64, visit: &mut RecordVisitor<'_>) -> Result<(), StorageError> {
        let end = self.next_index();
        for i in index..end {
            // One record at a time: a visitor that stops early costs only what it read.
            let record = {
                let state = self.state.lock();
                match i.checked_sub(state.first_index) {
                    Some(at) => state.records.get(at as usize).cloned(),
                    None => None,
                }
            };
            let Some(record) = record else { continue };
            if !visit(i, &record)? {
                break;
            }
        }
        Ok(())
    }

    fn truncate_prefix(&self, index: u64) -> Result<(), StorageError> {
        let mut state = self.state.lock();
        let next = state.first_index + state.records.len() as u64;
        let index = index.min(next);
        while state.first_index < index {
            state.records.pop_front();
            state.first_index += 1;
        }
        state.synced_next_index = state.synced_next_index.max(state.first_index);
        Ok(())
    }

    fn fsyncs(&self) -> u64 {
        self.state.lock().fsyncs
    }
}
