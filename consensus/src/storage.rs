//! Durable raft storage: one log backend shared by every group on a node, an in-memory index per
//! group rebuilt by replaying that log on open, and raft-rs's `Storage` trait on top.
//!
//! Record format (little-endian, one backend record each):
//! `[format version u8 = 1][kind u8][group id u64][payload]`, where the payload is
//! - `KIND_ENTRIES`: `[count u32]` then per entry `[length u32][protobuf eraftpb::Entry]`; the
//!   entries are contiguous and replace any stored entry at or after the first one's index;
//! - `KIND_HARD_STATE`: protobuf `eraftpb::HardState`;
//! - `KIND_CONF_STATE`: protobuf `eraftpb::ConfState` (written before membership changes: the
//!   initial voters, as of index 0);
//! - `KIND_CONF_STATE_AT`: `[index u64]` then protobuf `eraftpb::ConfState`: the membership as
//!   of the conf-change entry at `index` (0: the initial one); replay keeps the last
//!   [`crate::conf_history::CONF_HISTORY_MAX`] of them as the group's membership history, and a
//!   purge writes that history again;
//! - `KIND_SNAPSHOT`: protobuf `eraftpb::Snapshot` (metadata and state-machine bytes); the log
//!   restarts after its index;
//! - `KIND_COMPACTION`: `[index u64][term u64]`: entries up to `index` are dropped;
//! - `KIND_REMOVED`: empty: the group left this node; its earlier records are void.
//!
//! Durability: every `Ready` of every group on the node is encoded into one batch, written with one
//! `append_batch` and made durable with one `sync` (one fdatasync) — see [`NodeStorage::flush`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError as RaftStorageError};

use common::codec::{len32, DecodeError, Reader, Writer};

use crate::conf_history::ConfHistory;
use crate::error::StorageError;
use crate::GroupId;

const FORMAT_VERSION: u8 = 1;
const KIND_ENTRIES: u8 = 1;
const KIND_HARD_STATE: u8 = 2;
const KIND_CONF_STATE: u8 = 3;
const KIND_SNAPSHOT: u8 = 4;
const KIND_COMPACTION: u8 = 5;
const KIND_REMOVED: u8 = 6;
const KIND_CONF_STATE_AT: u8 = 7;
const HEADER_BYTES: usize = 10;

/// Bytes of entries a node holds in memory by default ([`NodeStorage::open`]): 256 MiB.
pub const DEFAULT_ENTRY_CACHE_BYTES: usize = 256 << 20;

/// Entry bytes per entries record at most (but a single larger entry): well below the `wal`
/// backend's default `record_bytes_max` (16 MiB).
const RECORD_BYTES_TARGET: usize = 4 << 20;

/// Record bytes per backend batch at most (but a single larger record): well below the `wal`
/// backend's default `batch_bytes_max` (64 MiB).
const BATCH_BYTES_TARGET: usize = 32 << 20;

/// Visitor of replayed records: `(backend index, record bytes)`; answers whether to go on.
pub type RecordVisitor<'a> = dyn FnMut(u64, &[u8]) -> Result<bool, StorageError> + 'a;

/// An append-only record log with group commit: the `wal` crate in production, [`MemLog`] in the
/// simulation. Indexes start at 1 and are contiguous.
pub trait LogBackend: Send + Sync {
    /// Appends `records` together; returns the index of the first.
    fn append_batch(&self, records: &[&[u8]]) -> Result<u64, StorageError>;
    /// Makes everything appended so far durable (one fdatasync).
    fn sync(&self) -> Result<(), StorageError>;
    /// Index of the oldest record kept.
    fn first_index(&self) -> u64;
    /// Index the next appended record gets.
    fn next_index(&self) -> u64;
    /// Calls `visit` with every record from `index` on, in order, until it answers false.
    fn read_from(&self, index: u64, visit: &mut RecordVisitor<'_>) -> Result<(), StorageError>;
    /// Drops records before `index` (may keep more, at segment granularity).
    fn truncate_prefix(&self, index: u64) -> Result<(), StorageError>;
    /// fsyncs issued so far, for the one-fsync-per-batch accounting.
    fn fsyncs(&self) -> u64;
}

/// A shared backend, e.g. a `wal::Wal` whose stats the owner also reads.
impl<B: LogBackend + ?Sized> LogBackend for Arc<B> {
    fn append_batch(&self, records: &[&[u8]]) -> Result<u64, StorageError> {
        (**self).append_batch(records)
    }

    fn sync(&self) -> Result<(), StorageError> {
        (**self).sync()
    }

    fn first_index(&self) -> u64 {
        (**self).first_index()
    }

    fn next_index(&self) -> u64 {
        (**self).next_index()
    }

    fn read_from(&self, index: u64, visit: &mut RecordVisitor<'_>) -> Result<(), StorageError> {
        (**self).read_from(index, visit)
    }

    fn truncate_prefix(&self, index: u64) -> Result<(), StorageError> {
        (**self).truncate_prefix(index)
    }

    fn fsyncs(&self) -> u64 {
        (**self).fsyncs()
    }
}

/// Where in the backend the live entries of a group are: entries `first..=last` at `position`.
#[derive(Debug, Clone, Copy)]
struct EntryRecord {
    first: u64,
    last: u64,
    position: u64,
}

/// What is kept in memory of every live entry, cached or not.
#[derive(Debug, Clone, Copy)]
struct EntryMeta {
    term: u64,
    /// Bytes of the group's entries from the start of its log through this one (a running
    /// total: the bytes between two indexes are a subtraction).
    end_bytes: u64,
}

/// Bytes an entry counts for: its data and context (what dominates its memory).
fn entry_bytes(entry: &Entry) -> usize {
    entry.data.len() + entry.context.len()
}

/// One group's raft state as stored, plus the backend positions that keep it alive.
#[derive(Debug)]
pub(crate) struct GroupLog {
    hard_state: HardState,
    /// The hard state changed only in its commit index and is not written yet: it rides along
    /// with the next synced batch, so a commit-only change costs no write and no fsync of its
    /// own. Losing it in a crash is safe; the leader tells the commit index again.
    hard_state_dirty: bool,
    /// The membership, by the index of the conf-change entry (or snapshot) it holds from (0
    /// for the initial one); the latest is raft's, the earlier ones label snapshot jobs.
    conf_history: ConfHistory,
    /// Index and term of the last compacted (or snapshot) entry; entries start after it.
    boundary_index: u64,
    boundary_term: u64,
    /// Term and size of every live entry, `first_index()..=last_index()` (16 bytes each).
    meta: VecDeque<EntryMeta>,
    /// Running total of entry bytes at the boundary ([`EntryMeta::end_bytes`] counts on from it).
    boundary_bytes: u64,
    /// The newest live entries, `cache_first()..=last_index()`, in memory; older ones are read
    /// back from the backend ([`GroupStorage::read_entries`]).
    cache: VecDeque<Entry>,
    /// Bytes of the entries in `cache` ([`entry_bytes`]).
    cache_bytes: usize,
    /// A received snapshot, kept until `compact` at or past its index says the state machine
    /// holds it durably (a restart before that restores from it).
    received_snapshot: Option<Snapshot>,
    /// The snapshot generated for lagging followers, and whether raft asked for a new one.
    generated_snapshot: Option<Snapshot>,
    snapshot_requested: AtomicBool,
    entry_records: VecDeque<EntryRecord>,
    /// Positions of the latest hard state, compaction and snapshot records (the conf states'
    /// are in `conf_history`).
    hard_state_position: u64,
    compaction_position: u64,
    snapshot_position: u64,
}

impl GroupLog {
    fn new() -> Self {
        GroupLog {
            hard_state: HardState::default(),
            hard_state_dirty: false,
            conf_history: ConfHistory::stand_in(),
            boundary_index: 0,
            boundary_term: 0,
            meta: VecDeque::new(),
            boundary_bytes: 0,
            cache: VecDeque::new(),
            cache_bytes: 0,
            received_snapshot: None,
            generated_snapshot: None,
            snapshot_requested: AtomicBool::new(false),
            entry_records: VecDeque::new(),
            hard_state_position: u64::MAX,
            compaction_position: u64::MAX,
            snapshot_position: u64::MAX,
        }
    }

    pub(crate) fn first_index(&self) -> u64 {
        self.boundary_index + 1
    }

    pub(crate) fn last_index(&self) -> u64 {
        self.boundary_index + self.meta.len() as u64
    }

    /// Index of the oldest entry held in memory (`last_index() + 1` when none is).
    pub(crate) fn cache_first(&self) -> u64 {
        self.last_index() + 1 - self.cache.len() as u64
    }

    /// Bytes of the entries in memory.
    pub(crate) fn cache_bytes(&self) -> usize {
        self.cache_bytes
    }

    /// Bytes of the live entries after `index` (0 at or past the last one).
    pub(crate) fn bytes_after(&self, index: u64) -> u64 {
        let total = self
            .meta
            .back()
            .map_or(self.boundary_bytes, |m| m.end_bytes);
        let at = if index <= self.boundary_index {
            self.boundary_bytes
        } else if index >= self.last_index() {
            total
        } else {
            self.meta[(index - self.first_index()) as usize].end_bytes
        };
        total - at
    }

    pub(crate) fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    pub(crate) fn received_snapshot(&self) -> Option<&Snapshot> {
        self.received_snapshot.as_ref()
    }

    pub(crate) fn conf_state(&self) -> &ConfState {
        self.conf_history.latest().1
    }

    /// Index of the conf-change entry or snapshot [`GroupLog::conf_state`] is as of (0: the
    /// group's initial membership): conf changes at or below it are already in it.
    pub(crate) fn conf_state_index(&self) -> u64 {
        self.conf_history.latest().0
    }

    /// The membership as of `index` (what a snapshot at `index` carries), if still known.
    pub(crate) fn conf_state_at(&self, index: u64) -> Option<&ConfState> {
        self.conf_history.at(index)
    }

    pub(crate) fn term_of(&self, index: u64) -> Option<u64> {
        if index == self.boundary_index {
            return Some(self.boundary_term);
        }
        if index < self.boundary_index || index > self.last_index() {
            return None;
        }
        Some(self.meta[(index - self.first_index()) as usize].term)
    }

    fn append(&mut self, entries: &[Entry]) {
        let Some(first) = entries.first() else { return };
        let first_index = first.index;
        assert!(
            first_index <= self.last_index() + 1,
            "append at {first_index} leaves a gap after the last index {}",
            self.last_index()
        );
        assert!(
            first_index > self.boundary_index,
            "append at {first_index} at or below the compacted index {}",
            self.boundary_index
        );
        let cache_first = self.cache_first();
        self.meta
            .truncate((first_index - self.first_index()) as usize);
        let keep = first_index.saturating_sub(cache_first) as usize;
        while self.cache.len() > keep {
            let gone = self.cache.pop_back().expect("longer than keep");
            self.cache_bytes -= entry_bytes(&gone);
        }
        let mut end_bytes = self
            .meta
            .back()
            .map_or(self.boundary_bytes, |m| m.end_bytes);
        for (offset, entry) in entries.iter().enumerate() {
            assert_eq!(
                entry.index,
                first_index + offset as u64,
                "non-contiguous entries"
            );
            let bytes = entry_bytes(entry);
            end_bytes += bytes as u64;
            self.meta.push_back(EntryMeta {
                term: entry.term,
                end_bytes,
            });
            self.cache.push_back(entry.clone());
            self.cache_bytes += bytes;
        }
    }

    /// Drops the oldest entries from memory until at most `bytes_max` remain (they stay in
    /// the backend, where every live entry has a record); returns the bytes freed.
    fn evict(&mut self, bytes_max: usize) -> usize {
        let before = self.cache_bytes;
        while self.cache_bytes > bytes_max {
            let Some(entry) = self.cache.front() else {
                break;
            };
            // Records cover the live entries from the first on, up to the last one written.
            if self
                .entry_records
                .back()
                .is_none_or(|r| r.last < entry.index)
            {
                break; // Not written yet: it stays until the next flush notes its record.
            }
            let gone = self.cache.pop_front().expect("checked above");
            self.cache_bytes -= entry_bytes(&gone);
        }
        before - self.cache_bytes
    }

    fn compact_to(&mut self, index: u64, term: u64) {
        if index <= self.boundary_index {
            return;
        }
        if index >= self.last_index() {
            self.boundary_bytes = self
                .meta
                .back()
                .map_or(self.boundary_bytes, |m| m.end_bytes);
            self.meta.clear();
            self.cache.clear();
            self.cache_bytes = 0;
        } else {
            let drop = (index - self.boundary_index) as usize;
            self.boundary_bytes = self.meta[drop - 1].end_bytes;
            self.meta.drain(..drop);
            while self.cache.front().is_some_and(|e| e.index <= index) {
                let gone = self.cache.pop_front().expect("checked above");
                self.cache_bytes -= entry_bytes(&gone);
            }
        }
        self.boundary_index = index;
        self.boundary_term = term;
        while self.entry_records.front().is_some_and(|r| r.last <= index) {
            self.entry_records.pop_front();
        }
        self.release_received_snapshot(index);
    }

    /// Forgets the received snapshot if it is at or below `index`, which the state machine holds
    /// durably.
    fn release_received_snapshot(&mut self, index: u64) {
        if self
            .received_snapshot
            .as_ref()
            .is_some_and(|s| s.get_metadata().index <= index)
        {
            self.received_snapshot = None;
            self.snapshot_position = u64::MAX;
        }
    }

    /// Forgets every entry (the log restarts after the boundary).
    fn clear_entries(&mut self) {
        self.meta.clear();
        self.boundary_bytes = 0;
        self.cache.clear();
        self.cache_bytes = 0;
    }

    fn install_snapshot(&mut self, snapshot: &Snapshot) {
        let meta = snapshot.get_metadata();
        self.clear_entries();
        self.entry_records.clear();
        self.boundary_index = meta.index;
        self.boundary_term = meta.term;
        // Held by the snapshot's record until a purge writes it as a conf state of its own.
        self.conf_history
            .reset(meta.index, meta.get_conf_state().clone(), u64::MAX);
        if self.hard_state.commit < meta.index {
            self.hard_state.commit = meta.index;
        }
        if self.hard_state.term < meta.term {
            self.hard_state.term = meta.term;
        }
        self.received_snapshot = Some(snapshot.clone());
    }

    fn note_entries_position(&mut self, first: u64, last: u64, position: u64) {
        while self.entry_records.back().is_some_and(|r| r.first >= first) {
            self.entry_records.pop_back();
        }
        if let Some(back) = self.entry_records.back_mut() {
            back.last = back.last.min(first - 1);
        }
        if last > self.boundary_index {
            self.entry_records.push_back(EntryRecord {
                first,
                last,
                position,
            });
        }
    }

    /// Oldest backend position this group's state (not its entries) lives at.
    fn state_position(&self) -> u64 {
        self.hard_state_position
            .min(self.conf_history.oldest_position())
            .min(self.compaction_position)
    }
}

/// An entries record read back from the backend: its position and its decoded entries.
type ReadBack = (u64, Arc<Vec<Entry>>);

/// A group's view for raft-rs; clones share the state.
#[derive(Clone)]
pub struct GroupStorage {
    log: Arc<RwLock<GroupLog>>,
    /// The node's backend, to read back entries no longer held in memory.
    backend: Arc<dyn LogBackend>,
    /// The last entries record read back (its position and entries): raft reads a lagging
    /// follower's entries a message (1 MiB) at a time from records of up to 4 MiB, so the next
    /// read usually starts in the record the previous one ended in. A record at a position never
    /// changes; which of its entries are live is decided by `entry_records` at each read.
    read_back: Arc<Mutex<Option<ReadBack>>>,
}

impl std::fmt::Debug for GroupStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupStorage")
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

impl GroupStorage {
    pub(crate) fn log(&self) -> &Arc<RwLock<GroupLog>> {
        &self.log
    }

    /// Entries `low..high` (clamped to what is stored), at most `count_max` of them and, past
    /// the first, at most `size_max` bytes (raft's `limit_size`): from memory where the entry
    /// cache holds them, else read back from the backend.
    pub(crate) fn read_entries(
        &self,
        low: u64,
        high: u64,
        size_max: Option<u64>,
        count_max: usize,
    ) -> Result<Vec<Entry>, StorageError> {
        let log = self.log.read();
        let low = low.max(log.first_index());
        let high = high
            .min(log.last_index() + 1)
            .min(low.saturating_add(count_max as u64));
        if low >= high {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity((high - low).min(1024) as usize);
        let mut bytes = 0u64;
        let full = |bytes: u64| size_max.is_some_and(|max| bytes > max);
        let cache_first = log.cache_first();
        if low < cache_first {
            let upto = high.min(cache_first);
            let records: Vec<EntryRecord> = log
                .entry_records
                .iter()
                .filter(|r| r.last >= low && r.first < upto)
                .copied()
                .collect();
            let mut next = 0;
            let mut want = low;
            // Takes the live entries `want..` of `records[next]` from its decoded `entries`.
            let mut take = |entries: &[Entry], next: &mut usize| {
                let live = records[*next];
                *next += 1;
                for entry in entries {
                    if entry.index == want && entry.index <= live.last && want < upto {
                        bytes += entry_bytes(entry) as u64;
                        out.push(entry.clone());
                        want += 1;
                    }
                }
                *next < records.len() && want < upto && !full(bytes)
            };
            let mut more = !records.is_empty();
            let cached = self.read_back.lock().clone();
            if let (Some((position, entries)), Some(first)) = (&cached, records.first()) {
                if *position == first.position {
                    more = take(entries, &mut next);
                }
            }
            if more {
                let mut last_read = None;
                self.backend
                    .read_from(records[next].position, &mut |position, record| {
                        if position != records[next].position {
                            return Ok(true); // Another group's, or this one's state.
                        }
                        let Ok((_, Record::Entries(entries))) = decode_record(position, record)
                        else {
                            return Err(StorageError::Corrupt {
                                log_index: position,
                                reason: "an entries record reads back as something else".into(),
                            });
                        };
                        let more = take(&entries, &mut next);
                        last_read = Some((position, Arc::new(entries)));
                        Ok(more)
                    })?;
                if last_read.is_some() {
                    *self.read_back.lock() = last_read;
                }
            }
            if want < upto && !full(bytes) {
                return Err(StorageError::Corrupt {
                    log_index: records.first().map_or(0, |r| r.position),
                    reason: format!("entry {want} is not in the backend records that hold it"),
                });
            }
        }
        if !full(bytes) && high > cache_first {
            let from = low.max(cache_first);
            let start = (from - cache_first) as usize;
            for entry in log.cache.range(start..(high - cache_first) as usize) {
                if full(bytes) {
                    break;
                }
                bytes += entry_bytes(entry) as u64;
                out.push(entry.clone());
            }
        }
        raft::util::limit_size(&mut out, size_max);
        Ok(out)
    }

    /// Index of the snapshot generated to serve followers, if one is held.
    pub(crate) fn generated_snapshot_index(&self) -> Option<u64> {
        let log = self.log.read();
        log.generated_snapshot
            .as_ref()
            .map(|s| s.get_metadata().index)
    }

    /// Drops the generated snapshot (raft asks for a new one when it needs one); its index.
    pub(crate) fn drop_generated_snapshot(&self) -> Option<u64> {
        self.log
            .write()
            .generated_snapshot
            .take()
            .map(|s| s.get_metadata().index)
    }

    /// Stores a freshly generated snapshot to serve followers that need one.
    pub(crate) fn set_generated_snapshot(&self, snapshot: Snapshot) {
        let log = self.log.write();
        log.snapshot_requested.store(false, Ordering::SeqCst);
        drop(log);
        self.log.write().generated_snapshot = Some(snapshot);
    }

    /// Whether raft asked for a snapshot that is not generated yet (cleared by the call).
    pub(crate) fn take_snapshot_request(&self) -> bool {
        self.log
            .read()
            .snapshot_requested
            .swap(false, Ordering::SeqCst)
    }
}

impl raft::Storage for GroupStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let log = self.log.read();
        Ok(RaftState::new(
            log.hard_state.clone(),
            log.conf_state().clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let log = self.log.read();
        if low < log.first_index() {
            return Err(raft::Error::Store(RaftStorageError::Compacted));
        }
        if high > log.last_index() + 1 {
            return Err(raft::Error::Store(RaftStorageError::Unavailable));
        }
        drop(log);
        // An entry that cannot be read back makes raft send a snapshot instead.
        self.read_entries(low, high, max_size.into(), usize::MAX)
            .map_err(|e| raft::Error::Store(RaftStorageError::Other(Box::new(e))))
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        let log = self.log.read();
        if index < log.boundary_index {
            return Err(raft::Error::Store(RaftStorageError::Compacted));
        }
        log.term_of(index)
            .ok_or(raft::Error::Store(RaftStorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.log.read().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.log.read().last_index())
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let log = self.log.read();
        if let Some(snapshot) = &log.generated_snapshot {
            let meta = snapshot.get_metadata();
            let cs = meta.get_conf_state();
            // A replica added after the snapshot's index is not in its membership and would
            // refuse it: build a newer one.
            let names_to = cs
                .voters
                .iter()
                .chain(&cs.learners)
                .chain(&cs.voters_outgoing)
                .chain(&cs.learners_next)
                .any(|&id| id == to);
            if meta.index >= request_index && meta.index >= log.boundary_index && names_to {
                return Ok(snapshot.clone());
            }
        }
        // The node generates one from the state machine on its next `handle_ready`; raft asks
        // again on the follower's next heartbeat response.
        log.snapshot_requested.store(true, Ordering::SeqCst);
        Err(raft::Error::Store(
            RaftStorageError::SnapshotTemporarilyUnavailable,
        ))
    }
}

#[derive(Debug)]
enum PendingKind {
    Entries {
        first: u64,
        last: u64,
    },
    HardState,
    /// The membership from `index` on.
    ConfState {
        index: u64,
    },
    Snapshot {
        index: u64,
    },
    Compaction,
    Removed,
}

#[derive(Debug)]
struct Pending {
    group: GroupId,
    kind: PendingKind,
    bytes: Vec<u8>,
}

/// Every group's raft log on one node, over one shared [`LogBackend`].
pub struct NodeStorage {
    backend: Arc<dyn LogBackend>,
    groups: BTreeMap<GroupId, GroupStorage>,
    /// Bytes of entries all groups hold in memory at most after a flush (the newest of each
    /// group; older ones are read back from the backend).
    cache_bytes_max: usize,
    pending: Vec<Pending>,
}

impl std::fmt::Debug for NodeStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStorage")
            .field("groups", &self.groups.len())
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

/// A record's header, `u8 version, u8 kind, u64 group`, with room for the payload behind it.
fn encode_header(kind: u8, group: GroupId, payload_hint: usize) -> Writer {
    let mut w = Writer::with_capacity(HEADER_BYTES + payload_hint);
    w.u8(FORMAT_VERSION);
    w.u8(kind);
    w.u64(group);
    w
}

fn encode_message(kind: u8, group: GroupId, message: &dyn protobuf::Message) -> Vec<u8> {
    let mut out = encode_header(kind, group, message.compute_size() as usize).into_bytes();
    message
        .write_to_vec(&mut out)
        .expect("raft protobuf messages in memory always encode");
    out
}

fn encode_entries(group: GroupId, entries: &[Entry]) -> Vec<u8> {
    // Sized up front: the data dominates, plus a few bytes of fields per entry.
    let hint = 4 + entries
        .iter()
        .map(|e| 4 + 32 + e.data.len() + e.context.len())
        .sum::<usize>();
    let mut w = encode_header(KIND_ENTRIES, group, hint);
    w.len32(entries.len());
    let mut out = w.into_bytes();
    for entry in entries {
        // The length word is patched once the entry is encoded in place behind it.
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        entry
            .write_to_vec(&mut out)
            .expect("raft entries in memory always encode");
        let len = len32(out.len() - at - 4);
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
    out
}

fn encode_conf_state(group: GroupId, index: u64, cs: &ConfState) -> Vec<u8> {
    let mut w = encode_header(KIND_CONF_STATE_AT, group, 8 + cs.compute_size() as usize);
    w.u64(index);
    let mut out = w.into_bytes();
    cs.write_to_vec(&mut out)
        .expect("raft protobuf messages in memory always encode");
    out
}

fn encode_compaction(group: GroupId, index: u64, term: u64) -> Vec<u8> {
    let mut w = encode_header(KIND_COMPACTION, group, 16);
    w.u64(index);
    w.u64(term);
    let out = w.into_bytes();
    debug_assert_eq!(
        decode_record(0, &out).ok(),
        Some((group, Record::Compaction { index, term }))
    );
    out
}

/// A decoded record.
#[derive(Debug, PartialEq)]
enum Record {
    Entries(Vec<Entry>),
    HardState(HardState),
    ConfState { index: u64, conf_state: ConfState },
    Snapshot(Snapshot),
    Compaction { index: u64, term: u64 },
    Removed,
}

fn decode_record(position: u64, bytes: &[u8]) -> Result<(GroupId, Record), StorageError> {
    let corrupt = |reason: String| StorageError::Corrupt {
        log_index: position,
        reason,
    };
    let codec = |e: DecodeError| corrupt(e.to_string());
    let pb = |e: protobuf::ProtobufError| corrupt(e.to_string());
    let mut r = Reader::new(bytes);
    let version = r.u8().map_err(codec)?;
    if version != FORMAT_VERSION {
        return Err(corrupt(format!("unknown format version {version}")));
    }
    let kind = r.u8().map_err(codec)?;
    let group = r.u64().map_err(codec)?;
    debug_assert_eq!(r.position(), HEADER_BYTES);
    let payload = &bytes[HEADER_BYTES..];
    let record = match kind {
        KIND_ENTRIES => {
            // Each entry is at least its 4-byte length word.
            let count = r.count(4).map_err(codec)?;
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                let entry = r.bytes32().map_err(codec)?;
                entries.push(Entry::parse_from_bytes(entry).map_err(pb)?);
            }
            r.finish().map_err(codec)?;
            for pair in entries.windows(2) {
                if pair[1].index != pair[0].index + 1 {
                    return Err(corrupt("non-contiguous entries".into()));
                }
            }
            Record::Entries(entries)
        }
        KIND_HARD_STATE => Record::HardState(HardState::parse_from_bytes(payload).map_err(pb)?),
        KIND_CONF_STATE => Record::ConfState {
            index: 0,
            conf_state: ConfState::parse_from_bytes(payload).map_err(pb)?,
        },
        KIND_CONF_STATE_AT => {
            let index = r.u64().map_err(codec)?;
            Record::ConfState {
                index,
                conf_state: ConfState::parse_from_bytes(&payload[8..]).map_err(pb)?,
            }
        }
        KIND_SNAPSHOT => Record::Snapshot(Snapshot::parse_from_bytes(payload).map_err(pb)?),
        KIND_COMPACTION => {
            let (index, term) = (r.u64().map_err(codec)?, r.u64().map_err(codec)?);
            r.finish().map_err(codec)?;
            Record::Compaction { index, term }
        }
        KIND_REMOVED => {
            r.finish().map_err(codec)?;
            Record::Removed
        }
        other => return Err(corrupt(format!("unknown record kind {other}"))),
    };
    Ok((group, record))
}

impl NodeStorage {
    /// Opens the node's raft storage, rebuilding every group's state by replaying `backend`,
    /// with an entry cache of [`DEFAULT_ENTRY_CACHE_BYTES`].
    pub fn open(backend: Box<dyn LogBackend>) -> Result<Self, StorageError> {
        NodeStorage::open_with_cache(backend, DEFAULT_ENTRY_CACHE_BYTES)
    }

    /// [`NodeStorage::open`] holding at most `cache_bytes_max` bytes of entries in memory
    /// (also while replaying: a log of any length opens in bounded memory).
    pub fn open_with_cache(
        backend: Box<dyn LogBackend>,
        cache_bytes_max: usize,
    ) -> Result<Self, StorageError> {
        let backend: Arc<dyn LogBackend> = Arc::from(backend);
        let mut groups: BTreeMap<GroupId, GroupLog> = BTreeMap::new();
        // Per group, the last compaction (or snapshot) point replayed: (index, term).
        let mut known: BTreeMap<GroupId, (u64, u64)> = BTreeMap::new();
        let first = backend.first_index();
        backend.read_from(first, &mut |position, bytes| {
            let (group, record) = decode_record(position, bytes)?;
            if record == Record::Removed {
                groups.remove(&group);
                known.remove(&group);
                return Ok(true);
            }
            let log = groups.entry(group).or_insert_with(GroupLog::new);
            match record {
                Record::Entries(entries) => {
                    let (first, last) = match (entries.first(), entries.last()) {
                        (Some(f), Some(l)) => (f.index, l.index),
                        _ => return Ok(true),
                    };
                    let (known_index, known_term) = *known.entry(group).or_default();
                    let live: Vec<Entry> = entries
                        .into_iter()
                        .filter(|e| e.index > known_index)
                        .collect();
                    let Some(live_first) = live.first().map(|e| e.index) else {
                        return Ok(true); // Compacted away by a compaction record replayed before.
                    };
                    if live_first > log.last_index() + 1 || live_first <= log.boundary_index {
                        // The records before this one were truncated from the backend (or this
                        // one lies below such a guessed start): start the log here. The latest
                        // compaction record, always kept, settles the boundary and its term.
                        log.clear_entries();
                        log.boundary_index = live_first - 1;
                        log.boundary_term = if live_first - 1 == known_index {
                            known_term
                        } else {
                            0
                        };
                    }
                    log.append(&live);
                    log.note_entries_position(first, last, position);
                    log.evict(cache_bytes_max);
                }
                Record::HardState(hs) => {
                    log.hard_state = hs;
                    log.hard_state_position = position;
                }
                Record::ConfState { index, conf_state } => {
                    log.conf_history.replay(index, conf_state, position);
                }
                Record::Snapshot(snapshot) => {
                    let meta = snapshot.get_metadata();
                    known.insert(group, (meta.index, meta.term));
                    log.install_snapshot(&snapshot);
                    log.conf_history.note_position(meta.index, position);
                    log.snapshot_position = position;
                    log.compaction_position = position;
                }
                Record::Compaction { index, term } => {
                    known.insert(group, (index, term));
                    if index >= log.boundary_index {
                        log.compact_to(index, term);
                        log.boundary_term = term;
                    }
                    log.compaction_position = position;
                }
                Record::Removed => unreachable!("handled above"),
            }
            Ok(true)
        })?;
        let storage = NodeStorage {
            groups: groups
                .into_iter()
                .map(|(id, log)| {
                    (
                        id,
                        GroupStorage {
                            log: Arc::new(RwLock::new(log)),
                            backend: backend.clone(),
                            read_back: Arc::default(),
                        },
                    )
                })
                .collect(),
            backend,
            cache_bytes_max,
            pending: Vec::new(),
        };
        storage.evict();
        Ok(storage)
    }

    /// Ids of the groups that have state in the log.
    pub fn group_ids(&self) -> Vec<GroupId> {
        self.groups.keys().copied().collect()
    }

    /// The stored group, if the log knows it.
    pub fn group(&self, group: GroupId) -> Option<GroupStorage> {
        self.groups.get(&group).cloned()
    }

    /// Creates a group whose initial voters are `voters` (queued; durable at the next flush).
    pub(crate) fn create_group(&mut self, group: GroupId, voters: &[u64]) -> GroupStorage {
        if let Some(existing) = self.groups.get(&group) {
            return existing.clone();
        }
        let mut log = GroupLog::new();
        log.conf_history.latest_mut().voters = voters.to_vec();
        let storage = GroupStorage {
            log: Arc::new(RwLock::new(log)),
            backend: self.backend.clone(),
            read_back: Arc::default(),
        };
        self.groups.insert(group, storage.clone());
        let cs = storage.log.read().conf_state().clone();
        self.queue(
            group,
            PendingKind::ConfState { index: 0 },
            encode_conf_state(group, 0, &cs),
        );
        storage
    }

    fn queue(&mut self, group: GroupId, kind: PendingKind, bytes: Vec<u8>) {
        self.pending.push(Pending { group, kind, bytes });
    }

    fn log(&self, group: GroupId) -> &Arc<RwLock<GroupLog>> {
        &self
            .groups
            .get(&group)
            .unwrap_or_else(|| panic!("group {group} has no storage"))
            .log
    }

    /// Appends `entries` (replacing any at or after the first's index), visible to raft at once,
    /// durable at the next flush.
    pub(crate) fn append(&mut self, group: GroupId, entries: &[Entry]) {
        if entries.is_empty() {
            return;
        }
        self.log(group).write().append(entries);
        // One record per RECORD_BYTES_TARGET of entries: a follower catching up takes many
        // messages' worth in one ready, more than the backend takes in one record.
        let mut start = 0;
        while start < entries.len() {
            let mut end = start + 1;
            let mut bytes = entry_bytes(&entries[start]);
            while end < entries.len() && bytes + entry_bytes(&entries[end]) <= RECORD_BYTES_TARGET {
                bytes += entry_bytes(&entries[end]);
                end += 1;
            }
            let kind = PendingKind::Entries {
                first: entries[start].index,
                last: entries[end - 1].index,
            };
            self.queue(group, kind, encode_entries(group, &entries[start..end]));
            start = end;
        }
    }

    /// Records the group's hard state (a new term or vote: written with the next batch).
    pub(crate) fn set_hard_state(&mut self, group: GroupId, hs: &HardState) {
        {
            let mut log = self.log(group).write();
            log.hard_state = hs.clone();
            log.hard_state_dirty = false;
        }
        self.queue(
            group,
            PendingKind::HardState,
            encode_message(KIND_HARD_STATE, group, hs),
        );
    }

    /// Records a hard state that differs from the stored one only in its commit index: kept in
    /// memory and written with the next synced batch.
    pub(crate) fn set_hard_state_lazily(&mut self, group: GroupId, hs: &HardState) {
        let mut log = self.log(group).write();
        assert_eq!(
            (log.hard_state.term, log.hard_state.vote),
            (hs.term, hs.vote),
            "group {group}: a term or vote change must be written eagerly"
        );
        log.hard_state = hs.clone();
        log.hard_state_dirty = true;
    }

    /// Records a new commit index (from a light ready), lazily.
    pub(crate) fn set_commit(&mut self, group: GroupId, commit: u64) {
        let hs = {
            let log = self.log(group).read();
            let mut hs = log.hard_state.clone();
            hs.commit = commit;
            hs
        };
        self.set_hard_state_lazily(group, &hs);
    }

    /// Whether records are waiting for the next flush.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Records the group's conf state as of the conf-change entry at `index` (kept in its
    /// history, [`GroupLog::conf_state_at`]).
    pub(crate) fn set_conf_state(&mut self, group: GroupId, index: u64, cs: &ConfState) {
        self.log(group)
            .write()
            .conf_history
            .record(index, cs.clone());
        self.queue(
            group,
            PendingKind::ConfState { index },
            encode_conf_state(group, index, cs),
        );
    }

    /// Installs a snapshot received from the leader: the log restarts after its index.
    pub(crate) fn apply_snapshot(&mut self, group: GroupId, snapshot: &Snapshot) {
        self.log(group).write().install_snapshot(snapshot);
        self.queue(
            group,
            PendingKind::Snapshot {
                index: snapshot.get_metadata().index,
            },
            encode_message(KIND_SNAPSHOT, group, snapshot),
        );
    }

    /// Forgets the group: a removal record voids its earlier records (durable at the next flush)
    /// and it no longer pins the backend.
    pub(crate) fn remove_group(&mut self, group: GroupId) {
        if self.groups.remove(&group).is_some() {
            self.queue(
                group,
                PendingKind::Removed,
                encode_header(KIND_REMOVED, group, 0).into_bytes(),
            );
        }
    }

    /// Drops the group's entries up to `index`. The caller guarantees the state machine holds
    /// everything up to `index` durably. Durable at the next flush.
    pub(crate) fn compact(&mut self, group: GroupId, index: u64) {
        let term = {
            let mut log = self.log(group).write();
            if index <= log.boundary_index {
                // The log starts after `index` already (a snapshot was installed there): what
                // is left is to stop keeping that snapshot, recorded as a compaction to the
                // log's start, so it pins the backend no longer (before, a replica whose apply
                // is held kept every received snapshot and the log after it).
                if log.received_snapshot.is_none() || index < log.boundary_index {
                    return;
                }
                let (boundary, term) = (log.boundary_index, log.boundary_term);
                log.release_received_snapshot(index);
                drop(log);
                self.queue(
                    group,
                    PendingKind::Compaction,
                    encode_compaction(group, boundary, term),
                );
                return;
            }
            assert!(
                index <= log.last_index(),
                "compact to {index} past the last index {}",
                log.last_index()
            );
            let term = log.term_of(index).expect("index within the log");
            log.compact_to(index, term);
            term
        };
        self.queue(
            group,
            PendingKind::Compaction,
            encode_compaction(group, index, term),
        );
    }

    /// Writes every queued record in one batch and, if `sync`, makes it durable with one fsync.
    pub(crate) fn flush(&mut self, sync: bool) -> Result<(), StorageError> {
        if sync {
            let dirty: Vec<(GroupId, HardState)> = self
                .groups
                .iter()
                .filter_map(|(&id, g)| {
                    let mut log = g.log.write();
                    let dirty = std::mem::take(&mut log.hard_state_dirty);
                    dirty.then(|| (id, log.hard_state.clone()))
                })
                .collect();
            for (group, hs) in dirty {
                self.queue(
                    group,
                    PendingKind::HardState,
                    encode_message(KIND_HARD_STATE, group, &hs),
                );
            }
        }
        if self.pending.is_empty() {
            if sync {
                self.backend.sync()?;
            }
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let records: Vec<&[u8]> = pending.iter().map(|p| p.bytes.as_slice()).collect();
        // One backend batch, or several where the records exceed what one takes (a follower
        // catching up); the sync after them makes them durable together.
        let mut positions = Vec::with_capacity(records.len());
        let mut start = 0;
        while start < records.len() {
            let mut end = start + 1;
            let mut bytes = records[start].len();
            while end < records.len() && bytes + records[end].len() <= BATCH_BYTES_TARGET {
                bytes += records[end].len();
                end += 1;
            }
            let first = self.backend.append_batch(&records[start..end])?;
            positions.extend((first..).take(end - start));
            start = end;
        }
        if sync {
            self.backend.sync()?;
        }
        let last_removal: BTreeMap<GroupId, usize> = pending
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p.kind, PendingKind::Removed))
            .map(|(offset, p)| (p.group, offset))
            .collect();
        for (offset, p) in pending.iter().enumerate() {
            let position = positions[offset];
            if last_removal.get(&p.group).is_some_and(|&at| offset <= at) {
                continue; // Voided by a removal record in this batch.
            }
            let Some(group) = self.groups.get(&p.group) else {
                continue; // Removed by a later call: nothing of it is kept.
            };
            let mut log = group.log.write();
            match p.kind {
                PendingKind::Entries { first, last } => {
                    log.note_entries_position(first, last, position)
                }
                PendingKind::HardState => log.hard_state_position = position,
                PendingKind::ConfState { index } => log.conf_history.note_position(index, position),
                PendingKind::Compaction => log.compaction_position = position,
                PendingKind::Snapshot { index } => {
                    log.snapshot_position = position;
                    log.compaction_position = position;
                    log.conf_history.note_position(index, position);
                }
                PendingKind::Removed => unreachable!("skipped above"),
            }
        }
        self.evict();
        Ok(())
    }

    /// Bytes of entries held in memory, over all groups.
    pub fn cached_entry_bytes(&self) -> usize {
        self.groups
            .values()
            .map(|g| g.log.read().cache_bytes())
            .sum()
    }

    /// Drops entries from memory, the largest group's oldest first, until all groups together
    /// hold at most `cache_bytes_max` (entries not yet written stay).
    fn evict(&self) {
        let mut total = self.cached_entry_bytes();
        while total > self.cache_bytes_max {
            let Some(largest) = self
                .groups
                .values()
                .max_by_key(|g| g.log.read().cache_bytes())
            else {
                return;
            };
            let mut log = largest.log.write();
            let keep = log
                .cache_bytes()
                .saturating_sub(total - self.cache_bytes_max);
            let freed = log.evict(keep);
            if freed == 0 {
                return; // What is left is not written yet.
            }
            total -= freed;
        }
    }

    /// Frees backend records no group needs any more. Group state (hard state, conf state,
    /// compaction point) written before the oldest live entries is written again first, so that
    /// old segments become free; a received snapshot pins the log until it is compacted past.
    pub(crate) fn purge(&mut self) -> Result<(), StorageError> {
        // Compaction records must be durable before the entries they drop leave the backend;
        // otherwise a crash would replay a log whose start has no known term.
        if !self.pending.is_empty() {
            self.flush(true)?;
        }
        let next = self.backend.next_index();
        let entries_min = self
            .groups
            .values()
            .filter_map(|g| g.log.read().entry_records.front().map(|r| r.position))
            .min()
            .unwrap_or(next);
        let stale: Vec<GroupId> = self
            .groups
            .iter()
            .filter(|(_, g)| g.log.read().state_position() < entries_min)
            .map(|(id, _)| *id)
            .collect();
        for group in &stale {
            let (hs, history, index, term) = {
                let log = self.log(*group).read();
                let history: Vec<(u64, ConfState)> = log
                    .conf_history
                    .states()
                    .map(|(index, cs)| (index, cs.clone()))
                    .collect();
                (
                    log.hard_state.clone(),
                    history,
                    log.boundary_index,
                    log.boundary_term,
                )
            };
            self.queue(
                *group,
                PendingKind::HardState,
                encode_message(KIND_HARD_STATE, *group, &hs),
            );
            // The whole membership history, oldest first: replay rebuilds it as it is.
            for (cs_index, cs) in history {
                self.queue(
                    *group,
                    PendingKind::ConfState { index: cs_index },
                    encode_conf_state(*group, cs_index, &cs),
                );
            }
            self.queue(
                *group,
                PendingKind::Compaction,
                encode_compaction(*group, index, term),
            );
        }
        if !self.pending.is_empty() {
            self.flush(true)?;
        }
        let keep_from = self
            .groups
            .values()
            .map(|g| {
                let log = g.log.read();
                log.state_position()
                    .min(log.snapshot_position)
                    .min(log.entry_records.front().map_or(u64::MAX, |r| r.position))
            })
            .min()
            .unwrap_or(u64::MAX)
            .min(self.backend.next_index());
        if keep_from > self.backend.first_index() {
            self.backend.truncate_prefix(keep_from)?;
        }
        Ok(())
    }

    /// fsyncs the backend has issued.
    pub fn fsyncs(&self) -> u64 {
        self.backend.fsyncs()
    }

    /// Index of the oldest backend record kept.
    pub fn backend_first_index(&self) -> u64 {
        self.backend.first_index()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem_log::MemLog;

    fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
        Entry {
            index,
            term,
            data: data.to_vec().into(),
            ..Default::default()
        }
    }

    /// The live entries of one group as raft would see them.
    fn model_range(model: &[Entry], first: u64, low: u64, high: u64) -> Vec<Entry> {
        model
            .iter()
            .filter(|e| e.index >= low.max(first) && e.index < high)
            .cloned()
            .collect()
    }

    #[derive(Debug, Clone)]
    enum CacheOp {
        /// Append `count` entries of `size` bytes to `group`, starting `back` entries before
        /// its next index (overwriting those).
        Append {
            group: u64,
            back: u64,
            count: u64,
            size: usize,
        },
        Flush,
        /// Compact `group` to `fraction` of the way to its last index.
        Compact {
            group: u64,
            fraction: f64,
        },
        Reopen,
    }

    fn cache_op() -> impl proptest::strategy::Strategy<Value = CacheOp> {
        use proptest::prelude::*;
        prop_oneof![
            5 => (1u64..3, 0u64..3, 1u64..5, 0usize..40)
                .prop_map(|(group, back, count, size)| CacheOp::Append { group, back, count, size }),
            3 => Just(CacheOp::Flush),
            1 => (1u64..3, 0.0f64..1.0).prop_map(|(group, fraction)| CacheOp::Compact { group, fraction }),
            1 => Just(CacheOp::Reopen),
        ]
    }

    proptest::proptest! {
        /// However small the entry cache, every live entry reads back as it was appended, across
        /// overwrites, compactions and restarts, and memory holds at most the bound after a flush.
        #[test]
        fn entries_read_back_beyond_the_cache(
            ops in proptest::collection::vec(cache_op(), 1..60),
            cache_max in 0usize..120,
        ) {
            let mem = MemLog::default();
            let mut storage = NodeStorage::open_with_cache(Box::new(mem.clone()), cache_max).unwrap();
            let mut model: BTreeMap<u64, (u64, Vec<Entry>)> = BTreeMap::new(); // group → (first, entries)
            for g in 1..3 {
                storage.create_group(g, &[1]);
                model.insert(g, (1, Vec::new()));
            }
            let mut term = 1;
            for op in ops {
                match op {
                    CacheOp::Append { group, back, count, size } => {
                        let (first, entries) = model.get_mut(&group).unwrap();
                        let next = *first + entries.len() as u64;
                        let start = next.saturating_sub(back).max(*first);
                        term += 1;
                        let new: Vec<Entry> = (start..start + count)
                            .map(|i| entry(i, term, &vec![i as u8; size]))
                            .collect();
                        entries.truncate((start - *first) as usize);
                        entries.extend(new.iter().cloned());
                        storage.append(group, &new);
                    }
                    CacheOp::Flush => {
                        storage.flush(true).unwrap();
                        proptest::prop_assert!(storage.cached_entry_bytes() <= cache_max);
                    }
                    CacheOp::Compact { group, fraction } => {
                        storage.flush(true).unwrap();
                        let (first, entries) = model.get_mut(&group).unwrap();
                        let Some(last) = entries.last().map(|e| e.index) else { continue };
                        let to = *first - 1 + ((last + 1 - *first) as f64 * fraction) as u64;
                        if to >= *first {
                            storage.compact(group, to);
                            entries.drain(..(to + 1 - *first) as usize);
                            *first = to + 1;
                        }
                        storage.purge().unwrap();
                    }
                    CacheOp::Reopen => {
                        storage.flush(true).unwrap();
                        drop(storage);
                        storage = NodeStorage::open_with_cache(Box::new(mem.clone()), cache_max).unwrap();
                        proptest::prop_assert!(storage.cached_entry_bytes() <= cache_max);
                    }
                }
                for (group, (first, entries)) in &model {
                    let Some(g) = storage.group(*group) else { continue };
                    let last = first + entries.len() as u64;
                    for (low, high) in [(*first, last), (first + entries.len() as u64 / 2, last), (*first, first + 1)] {
                        let got = g.read_entries(low, high, None, usize::MAX).unwrap();
                        proptest::prop_assert_eq!(&got, &model_range(entries, *first, low, high), "group {} {}..{}", group, low, high);
                    }
                    // A size limit keeps at least one entry and cuts where raft would.
                    if !entries.is_empty() {
                        let got = g.read_entries(*first, last, Some(50), usize::MAX).unwrap();
                        let mut want = model_range(entries, *first, *first, last);
                        raft::util::limit_size(&mut want, Some(50));
                        proptest::prop_assert_eq!(got, want);
                    }
                }
            }
        }
    }

    #[test]
    fn golden_compaction_and_entries_records() {
        assert_eq!(
            encode_compaction(7, 5, 2),
            [1, 5, 7, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]
        );
        let bytes = encode_entries(3, &[entry(1, 1, b"ab")]);
        assert_eq!(
            &bytes[..HEADER_BYTES + 4],
            &[1, 1, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]
        );
        let (group, record) = decode_record(1, &bytes).unwrap();
        assert_eq!(group, 3);
        assert_eq!(record, Record::Entries(vec![entry(1, 1, b"ab")]));
        assert!(decode_record(1, &bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn malformed_records_are_corruption_at_their_position() {
        let corrupt_at = |bytes: &[u8]| match decode_record(9, bytes) {
            Err(StorageError::Corrupt { log_index, reason }) => {
                assert_eq!(log_index, 9);
                reason
            }
            other => panic!("{bytes:?} decoded as {other:?}"),
        };
        // A header cut short, an unknown version or kind.
        corrupt_at(&[1, 5, 7, 0]);
        assert!(corrupt_at(&[2, 5, 7, 0, 0, 0, 0, 0, 0, 0]).contains("version 2"));
        assert!(corrupt_at(&[1, 99, 7, 0, 0, 0, 0, 0, 0, 0]).contains("kind 99"));
        // A compaction of the wrong length, a removal with a payload.
        let compaction = encode_compaction(7, 5, 2);
        corrupt_at(&compaction[..compaction.len() - 1]);
        assert!(corrupt_at(&[compaction.as_slice(), &[0]].concat()).contains("trailing"));
        let mut removal = encode_header(KIND_REMOVED, 7, 0).into_bytes();
        assert_eq!(decode_record(0, &removal).unwrap(), (7, Record::Removed));
        removal.push(0);
        corrupt_at(&removal);
        // An entry count the record cannot hold is refused before anything is allocated.
        let mut entries = encode_header(KIND_ENTRIES, 7, 4);
        entries.u32(u32::MAX);
        assert!(corrupt_at(&entries.into_bytes()).contains("count"));
    }

    #[test]
    fn replay_rebuilds_groups_and_survives_purge() {
        let mem = MemLog::default();
        let mut storage = NodeStorage::open(Box::new(mem.clone())).unwrap();
        storage.create_group(1, &[1, 2, 3]);
        storage.create_group(2, &[1, 2, 3]);
        for i in 1..=10 {
            storage.append(1, &[entry(i, 1, b"x")]);
            storage.append(2, &[entry(i, 1, b"y")]);
            let hs = HardState {
                term: 1,
                commit: i,
                ..Default::default()
            };
            storage.set_hard_state(1, &hs);
            storage.set_hard_state(2, &hs);
            storage.flush(true).unwrap();
        }
        // Overwrite a suffix of group 2, as a follower does on conflict.
        storage.append(2, &[entry(9, 2, b"z"), entry(10, 2, b"z")]);
        storage.compact(1, 8);
        storage.compact(2, 6);
        storage.flush(true).unwrap();
        storage.purge().unwrap();
        assert!(storage.backend_first_index() > 1);
        // Unsynced writes are lost in a crash.
        storage.append(1, &[entry(11, 1, b"lost")]);
        storage.flush(false).unwrap();
        mem.crash();

        let reopened = NodeStorage::open(Box::new(mem.clone())).unwrap();
        let g1 = reopened.group(1).unwrap();
        let g2 = reopened.group(2).unwrap();
        use raft::Storage;
        assert_eq!(g1.first_index().unwrap(), 9);
        assert_eq!(g1.last_index().unwrap(), 10);
        assert_eq!(g1.term(8).unwrap(), 1);
        assert_eq!(g2.first_index().unwrap(), 7);
        assert_eq!(g2.last_index().unwrap(), 10);
        assert_eq!(g2.term(9).unwrap(), 2);
        assert_eq!(g2.term(6).unwrap(), 1);
        assert_eq!(g1.initial_state().unwrap().hard_state.commit, 10);
        assert_eq!(g1.initial_state().unwrap().conf_state.voters, vec![1, 2, 3]);
    }

    /// Per group: id, boundary index and term, (index, term) of every entry, hard state, and
    /// the membership history (index, voters).
    type View = Vec<(
        GroupId,
        u64,
        u64,
        Vec<(u64, u64)>,
        HardState,
        Vec<(u64, Vec<u64>)>,
    )>;

    fn view(storage: &NodeStorage) -> View {
        storage
            .groups
            .iter()
            .map(|(&id, g)| {
                let log = g.log.read();
                (
                    id,
                    log.boundary_index,
                    log.boundary_term,
                    (log.first_index()..=log.last_index())
                        .map(|i| (i, log.term_of(i).unwrap()))
                        .collect(),
                    log.hard_state.clone(),
                    log.conf_history
                        .states()
                        .map(|(i, cs)| (i, cs.voters.clone()))
                        .collect(),
                )
            })
            .collect()
    }

    /// Random appends (with suffix overwrites), hard states, compactions and purges: after every
    /// synced flush, replaying the backend gives exactly the live state.
    #[test]
    fn replay_matches_live_state_under_random_operations() {
        for seed in 0..300u64 {
            let mut rng = crate::transport::SplitMix64::new(seed);
            let mem = MemLog::default();
            let mut storage = NodeStorage::open(Box::new(mem.clone())).unwrap();
            let groups = 1 + rng.range(0, 4);
            for g in 1..=groups {
                storage.create_group(g, &[1, 2, 3]);
            }
            storage.flush(true).unwrap();
            let mut synced_at = mem.fsyncs();
            let mut synced_view = view(&storage);
            let mut term = 1;
            for _ in 0..rng.range(10, 200) {
                let g = 1 + rng.range(0, groups);
                let (first, last) = {
                    let log = storage.log(g).read();
                    (log.first_index(), log.last_index())
                };
                match rng.range(0, 10) {
                    0..=5 => {
                        // Append, sometimes overwriting a suffix with a newer term.
                        let from = if last >= first && rng.chance(200) {
                            term += 1;
                            rng.range(first, last + 1)
                        } else {
                            last + 1
                        };
                        let entries: Vec<Entry> = (from..from + rng.range(1, 6))
                            .map(|i| entry(i, term, b"e"))
                            .collect();
                        storage.append(g, &entries);
                    }
                    6 => {
                        let hs = HardState {
                            term,
                            commit: last,
                            ..Default::default()
                        };
                        storage.set_hard_state(g, &hs);
                    }
                    7 if rng.chance(300) => {
                        // A membership change applied at an index past the latest one.
                        let index = storage.log(g).read().conf_state_index().max(last) + 1;
                        let cs = ConfState {
                            voters: vec![1, 2, 3 + rng.range(0, 3)],
                            ..Default::default()
                        };
                        storage.set_conf_state(g, index, &cs);
                    }
                    7 => storage.set_commit(g, last),
                    8 if last >= first => storage.compact(g, rng.range(first, last + 1)),
                    9 if rng.chance(50) => {
                        storage.remove_group(g);
                        storage.create_group(g, &[1, 2, 3]);
                    }
                    9 if rng.chance(300) => {
                        term += 1;
                        let mut snapshot = Snapshot::default();
                        snapshot.mut_metadata().index = last + rng.range(0, 5);
                        snapshot.mut_metadata().term = term;
                        snapshot.set_data(b"state".to_vec().into());
                        storage.apply_snapshot(g, &snapshot);
                    }
                    _ => storage.purge().unwrap(),
                }
                if mem.fsyncs() != synced_at {
                    synced_at = mem.fsyncs();
                    synced_view = view(&storage);
                }
                if rng.chance(150) {
                    storage.flush(true).unwrap();
                    let reopened = NodeStorage::open(Box::new(mem.clone())).unwrap();
                    assert_eq!(view(&reopened), view(&storage), "seed {seed}");
                    synced_at = mem.fsyncs();
                    synced_view = view(&storage);
                } else if rng.chance(100) {
                    // A crash keeps exactly what the last sync made durable.
                    storage.flush(false).unwrap();
                    mem.crash();
                    storage = NodeStorage::open(Box::new(mem.clone())).unwrap();
                    assert_eq!(view(&storage), synced_view, "seed {seed} after a crash");
                }
            }
        }
    }
}
