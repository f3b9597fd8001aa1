//! `DataRegion`: one replica's data for a region, split into time partitions, each with a working
//! memtable, memtables being flushed and sealed files.
//!
//! Architecture invariant: the region keeps no write-ahead log of its own. The region's log (the
//! raft log, which is fsynced and group-committed before an entry commits) is the log of record;
//! after a restart the caller replays entries after [`DataRegion::applied_index`]. A write attempt
//! therefore touches only memory, and rolling it back is exact: no WAL fragment can survive it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fs;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{DataType, LeaseFencedRetryPolicy, PartitionConfig, Tablet, TabletLimits, Value};
use memtable::{FrozenMemTable, Mark, MemTable, MemTableConfig, MemTableError};
use parking_lot::{Mutex, RwLock};

use crate::command::RegionCommand;
use crate::compaction::CompactionConfig;
use crate::error::{Result, StorageError};
use crate::files::{FileCache, OPEN_FILES_MAX_DEFAULT};
use crate::lease_gate::LeaseGate;
use crate::manifest::{
    device_under, sync_dir, FileEntry, Manifest, Tombstone, DELETE_OPERATIONS_KEPT,
};
use crate::sealed::{self, Header, SealedFile, SealedOptions, SeriesCodecs};

mod aggregate;
mod digest;
mod fences;
mod last_cache;

pub use aggregate::AggregateWork;

use fences::Fences;
use last_cache::LastCache;

pub(crate) const SEALED_DIR: &str = "sealed";
const ALL_TIME: RangeInclusive<i64> = i64::MIN..=i64::MAX;

/// Storage-engine settings for a region.
#[derive(Clone, Debug, PartialEq)]
pub struct StorageConfig {
    /// Time and series partitioning (cluster-wide, from the ConfigNode).
    pub partition: PartitionConfig,
    /// Flush once the region's working memtables hold this many bytes (default 64 MiB).
    pub memtable_flush_bytes: usize,
    /// Flush once the oldest unflushed write is this old, in milliseconds (default 600000).
    pub memtable_flush_age_ms: u64,
    /// Shape limits for tablets.
    pub tablet_limits: TabletLimits,
    /// How sealed files are encoded.
    pub sealed: SealedOptions,
    /// When and how fast sealed files are merged.
    pub compaction: CompactionConfig,
    /// Bytes the region's last-value cache may hold (0: no cache). Default 16 MiB.
    pub last_cache_bytes: usize,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            partition: PartitionConfig::default(),
            memtable_flush_bytes: 64 << 20,
            memtable_flush_age_ms: 600_000,
            tablet_limits: TabletLimits::default(),
            sealed: SealedOptions::default(),
            compaction: CompactionConfig::default(),
            last_cache_bytes: 16 << 20,
        }
    }
}

impl StorageConfig {
    /// What a snapshot's content is checked against on restore. A snapshot holds each series as
    /// one tablet of all its points, and values admitted under the limits of any earlier
    /// configuration: the shape of a session's tablet (`rows_max`, `text_bytes_max`) does not
    /// apply, the structural limits (paths, columns) do.
    pub fn restore_limits(&self) -> TabletLimits {
        TabletLimits {
            rows_max: usize::MAX,
            text_bytes_max: usize::MAX,
            ..self.tablet_limits
        }
    }
}

/// What a successful apply did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Points written by an insert.
    Inserted {
        /// Non-null values written.
        points: usize,
    },
    /// Series or databases deleted.
    Deleted {
        /// Series dropped from memory (sealed data is masked by a tombstone).
        series: usize,
    },
    /// The entry was at or below the applied index (a replay after a flush); nothing changed.
    AlreadyApplied,
    /// The fence floor was raised (or already as high).
    FloorRaised,
}

/// A region's whole logical content ([`DataRegion::export`], [`DataRegion::reset_to`]): the body
/// of a raft snapshot for a replica that fell behind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RegionContent {
    /// The applied index it reflects.
    pub applied_index: u64,
    /// One tablet per series with all its points, sorted.
    pub tablets: Vec<Tablet>,
    /// Every deletion applied so far (their fencing tokens are part of the replicated state).
    pub tombstones: Vec<Tombstone>,
    /// `(log index, operation id)` of the newest `deleteData` operations applied, oldest first.
    pub delete_operations: Vec<(u64, u64)>,
    /// The fence floor (0: none).
    pub fence_floor: u64,
}

/// A region's logical content in one number, the same on every replica holding the same data,
/// whatever its flush state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionDigest {
    /// The applied index the digest was taken at.
    pub applied_index: u64,
    /// Number of distinct (series, timestamp) points.
    pub points: u64,
    /// Hash over every series' type and points, in sorted order.
    pub hash: u64,
}

/// One time partition.
pub(crate) struct Partition {
    working: MemTable,
    /// Frozen memtables being written to sealed files, oldest first, with their checkpoints.
    pub(crate) flushing: Vec<(u64, Arc<FrozenMemTable>)>,
    /// Sealed files, oldest first (the manifest's order): a newer file's point wins.
    pub(crate) sealed: Vec<Arc<SealedFile>>,
    /// When a flush last added a file (or the partition was opened or created): a partition
    /// no flush touched for `CompactionConfig::cold_after_ms` is merged whole.
    pub(crate) flushed_at: std::time::Instant,
}

impl Partition {
    fn new(config: &StorageConfig) -> Partition {
        Partition {
            working: MemTable::new(memtable_config(config)),
            flushing: Vec::new(),
            sealed: Vec::new(),
            flushed_at: std::time::Instant::now(),
        }
    }

    /// True when nothing is buffered for the partition and no flush has added a file for
    /// `cold_after`.
    pub(crate) fn is_cold(&self, cold_after: std::time::Duration) -> bool {
        self.working.is_empty()
            && self.flushing.is_empty()
            && self.flushed_at.elapsed() >= cold_after
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.working.is_empty() && self.flushing.is_empty() && self.sealed.is_empty()
    }
}

fn memtable_config(config: &StorageConfig) -> MemTableConfig {
    MemTableConfig {
        flush_threshold_bytes: config.memtable_flush_bytes,
    }
}

pub(crate) struct RegionState {
    pub(crate) applied_index: u64,
    pub(crate) partitions: BTreeMap<i64, Partition>,
    /// Every live series' type; the type check of an insert reads it, never a cache.
    series_types: HashMap<String, HashMap<String, DataType>>,
    pub(crate) manifest: Manifest,
    /// Deletions newer than the manifest's checkpoint (replayed from the log after a crash).
    recent_tombstones: Vec<Tombstone>,
    /// When the oldest write not yet frozen arrived; drives the age-based flush.
    dirty_since: Option<Instant>,
    /// The deletions' fencing tokens, indexed for the insert check (derived from the tombstones).
    fences: Fences,
    /// `(log index, operation id)` of the newest [`DELETE_OPERATIONS_KEPT`] `deleteData`
    /// operations applied, oldest first: a function of the applied entries alone, so every
    /// replica and every replay judges a redelivery alike. The manifest keeps it as of its
    /// checkpoint.
    delete_operations: VecDeque<(u64, u64)>,
}

impl RegionState {
    /// Drops from the manifest the deletions that decide nothing any more, after a flush or a
    /// compaction's install: time ranges no older file holds points in
    /// ([`crate::compaction::prune_range_tombstones`]), and series deletions below the
    /// manifest's fence floor that no older source holds the series of
    /// ([`fences::prune_below_floor`]). True when some were dropped (the caller stores the
    /// manifest; a crash before that keeps them, which is harmless).
    pub(crate) fn prune_tombstones(&mut self) -> bool {
        let ranges = crate::compaction::prune_range_tombstones(self);
        let partitions = &self.partitions;
        let older_source_holds = |device: &str, measurement: &str, index: u64| {
            partitions.values().any(|p| {
                p.sealed
                    .iter()
                    .any(|f| f.checkpoint < index && f.chunk(device, measurement).is_some())
                    || p.flushing.iter().any(|(checkpoint, frozen)| {
                        *checkpoint < index && frozen.series_type(device, measurement).is_some()
                    })
            })
        };
        let floor = self.manifest.fence_floor;
        let series =
            fences::prune_below_floor(&mut self.manifest.tombstones, floor, older_source_holds);
        if series {
            let (floor, raised_at) = self.fences.floor();
            let fences = Fences::new(self.tombstones(), floor, raised_at);
            self.fences = fences;
        }
        ranges || series
    }

    pub(crate) fn tombstones(&self) -> impl Iterator<Item = &Tombstone> {
        self.manifest
            .tombstones
            .iter()
            .chain(self.recent_tombstones.iter())
    }

    /// True when a deletion of fence operation `operation_id` was applied already (a second
    /// delivery of it, e.g. a retry that raced the first, must not delete what was written since).
    fn applied_operation(&self, operation_id: u64) -> bool {
        operation_id != 0
            && self
                .tombstones()
                .any(|t| t.deletion().operation_id == operation_id)
    }

    /// True when `deleteData` operation `operation_id` is among the newest applied ones.
    fn applied_delete_operation(&self, operation_id: u64) -> bool {
        operation_id != 0
            && self
                .delete_operations
                .iter()
                .any(|(_, id)| *id == operation_id)
    }

    /// Records `deleteData` operation `operation_id` applied at `index`, forgetting the oldest
    /// beyond [`DELETE_OPERATIONS_KEPT`].
    fn record_delete_operation(&mut self, index: u64, operation_id: u64) {
        if operation_id == 0 {
            return;
        }
        debug_assert!(self
            .delete_operations
            .back()
            .is_none_or(|(i, _)| *i < index));
        self.delete_operations.push_back((index, operation_id));
        while self.delete_operations.len() > DELETE_OPERATIONS_KEPT {
            self.delete_operations.pop_front();
        }
    }

    /// True when a deletion the manifest holds (at or below its checkpoint) masks the series in
    /// a source with `checkpoint`. Only these may be applied physically: a later deletion is
    /// replayed from the log after a crash, and the entries before it must meet the data they met
    /// the first time.
    pub(crate) fn masked_durably(&self, device: &str, measurement: &str, checkpoint: u64) -> bool {
        self.manifest
            .tombstones
            .iter()
            .any(|t| t.masks(device, measurement, checkpoint))
    }

    pub(crate) fn masked(&self, device: &str, measurement: &str, checkpoint: u64) -> bool {
        let masked = self.fences.masks(device, measurement, checkpoint);
        debug_assert_eq!(
            masked,
            self.tombstones()
                .any(|t| t.masks(device, measurement, checkpoint)),
            "the tombstone index of {device}.{measurement} at {checkpoint}"
        );
        masked
    }

    /// The time ranges deleted from `(device, measurement)` in a source with `checkpoint`.
    pub(crate) fn deleted_ranges(
        &self,
        device: &str,
        measurement: &str,
        checkpoint: u64,
    ) -> Vec<(i64, i64)> {
        self.tombstones()
            .filter_map(|t| t.deletes(device, measurement, checkpoint))
            .collect()
    }

    /// [`RegionState::deleted_ranges`] of the deletions the manifest holds: the ones a
    /// compaction may apply (see [`RegionState::masked_durably`]).
    pub(crate) fn deleted_ranges_durably(
        &self,
        device: &str,
        measurement: &str,
        checkpoint: u64,
    ) -> Vec<(i64, i64)> {
        self.manifest
            .tombstones
            .iter()
            .filter_map(|t| t.deletes(device, measurement, checkpoint))
            .collect()
    }

    /// Every live series and its type, sorted by (device, measurement).
    fn sorted_series(&self) -> Vec<(&str, &str, DataType)> {
        let mut series: Vec<_> = self
            .series_types
            .iter()
            .flat_map(|(d, ms)| ms.iter().map(move |(m, t)| (d.as_str(), m.as_str(), *t)))
            .collect();
        series.sort();
        series
    }

    /// One series' points across every partition and source, last write wins.
    fn all_points(&self, device: &str, measurement: &str) -> Result<BTreeMap<i64, Value>> {
        let mut merged = BTreeMap::new();
        for partition in self.partitions.values() {
            merge_partition(self, partition, device, measurement, ALL_TIME, &mut merged)?;
        }
        Ok(merged)
    }

    /// Bytes of working and frozen memtables.
    fn memory_bytes(&self) -> usize {
        self.partitions
            .values()
            .map(|p| {
                p.working.memory_bytes()
                    + p.flushing
                        .iter()
                        .map(|(_, f)| f.memory_bytes())
                        .sum::<usize>()
            })
            .sum()
    }

    fn working_bytes(&self) -> usize {
        self.partitions
            .values()
            .map(|p| p.working.memory_bytes())
            .sum()
    }
}

/// A region replica's storage. Thread-safe: applies take a write lock, queries a read lock, and a
/// flush writes its files without holding either.
pub struct DataRegion {
    pub(crate) dir: PathBuf,
    pub(crate) config: StorageConfig,
    /// The node's sealed-file descriptors (shared by its regions).
    pub(crate) files: Arc<FileCache>,
    pub(crate) state: RwLock<RegionState>,
    /// One manifest change at a time: a flush, a snapshot install or a compaction's install.
    pub(crate) flush_lock: Mutex<()>,
    /// The next sealed-file sequence number: flushes and compactions draw their file names from
    /// it (a name is never reused, even by a file a crash left unnamed).
    pub(crate) sequences: AtomicU64,
    /// Points older than this are expired (the database's TTL, `i64::MIN` = none): compaction
    /// removes them, keeping each series' newest point per file (see `compaction.rs`).
    pub(crate) ttl_cutoff: AtomicI64,
    /// Partitions with compaction work when [`DataRegion::storage_stats`] last planned, or 0
    /// once `compact_once` found none: what [`DataRegion::storage_summary`] reports.
    pub(crate) pending_compactions: AtomicUsize,
    /// Set once the region is closing: a running compaction stops at its next series.
    pub(crate) compactions_cancelled: AtomicBool,
    /// The sealed files running compactions merge: a compaction plans among the others, so
    /// several can run at once on disjoint runs of files (a long TTL rewrite of a partition's
    /// largest file does not hold back the merging of the flushes that follow it).
    pub(crate) compaction_claims: Mutex<HashSet<PathBuf>>,
    /// The declared encodings and compressors flushes and compactions honour.
    pub(crate) series_codecs: RwLock<Arc<SeriesCodecs>>,
    /// Bytes held by working and frozen memtables (kept by every change to them), for the node's
    /// memory budget.
    memory: AtomicUsize,
    /// Each series' newest visible point, as [`DataRegion::last`] answers it.
    pub(crate) last_values: LastCache,
}

/// A sealed file a flush wrote: its manifest entry, the open file, the memtable it holds.
type NewFile = (FileEntry, Arc<SealedFile>, Arc<FrozenMemTable>);

impl DataRegion {
    /// Opens (or creates) the region stored in `dir` with a descriptor cache of its own; see
    /// [`DataRegion::open_with`].
    pub fn open(dir: impl Into<PathBuf>, config: StorageConfig) -> Result<DataRegion> {
        DataRegion::open_with(dir, config, FileCache::new(OPEN_FILES_MAX_DEFAULT))
    }

    /// Opens (or creates) the region stored in `dir`, reading its sealed files through `files`:
    /// loads the manifest and its sealed files and deletes orphans of a crashed flush. The caller
    /// then replays its log from `applied_index() + 1`.
    pub fn open_with(
        dir: impl Into<PathBuf>,
        config: StorageConfig,
        files: Arc<FileCache>,
    ) -> Result<DataRegion> {
        let dir = dir.into();
        let sealed_dir = dir.join(SEALED_DIR);
        let manifest = match Manifest::load(&dir)? {
            Some(manifest) => manifest,
            None => {
                create_durable_dir(&sealed_dir)?;
                Manifest::default()
            }
        };
        let live = manifest.file_names();
        // Orphans of a crashed flush or snapshot install.
        remove_orphans(&sealed_dir, &live)?;
        let state = load_state(&sealed_dir, manifest, &config, &files)?;
        let last_values = LastCache::new(config.last_cache_bytes);
        Ok(DataRegion {
            dir,
            config,
            files,
            sequences: AtomicU64::new(state.manifest.next_sequence),
            ttl_cutoff: AtomicI64::new(i64::MIN),
            pending_compactions: AtomicUsize::new(0),
            compactions_cancelled: AtomicBool::new(false),
            compaction_claims: Mutex::new(HashSet::new()),
            series_codecs: RwLock::new(Arc::new(SeriesCodecs::default())),
            memory: AtomicUsize::new(0),
            last_values,
            state: RwLock::new(state),
            flush_lock: Mutex::new(()),
        })
    }

    /// The region's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The region's settings.
    pub fn config(&self) -> &StorageConfig {
        &self.config
    }

    /// Index of the last entry applied (successfully or with a deterministic error).
    pub fn applied_index(&self) -> u64 {
        self.state.read().applied_index
    }

    /// Raft passed its own entry at `index` (a leader's no-op, a membership change), which is no
    /// region command: the applied index moves to it, so a checkpoint taken now (a flush, a
    /// snapshot) reflects it. Durable with the next manifest store; after a crash before that,
    /// replay passes the entry again. An index at or below the applied one changes nothing.
    pub fn note_applied(&self, index: u64) {
        let mut state = self.state.write();
        state.applied_index = state.applied_index.max(index);
    }

    /// The fence floor (0: none; `RegionCommand::RaiseFenceFloor`).
    pub fn fence_floor(&self) -> u64 {
        self.state.read().fences.floor().0
    }

    /// How many series, prefix and time-range deletions the region keeps (the manifest's and
    /// those applied since its checkpoint): what every flush writes and every open reads.
    pub fn deletions_kept(&self) -> usize {
        self.state.read().tombstones().count()
    }

    /// Index up to which sealed files hold everything: the log may be truncated up to here.
    pub fn checkpoint_index(&self) -> u64 {
        self.state.read().manifest.checkpoint
    }

    /// Applies log entry `index`, which must be above `applied_index()`; entries at or below it
    /// are acknowledged as [`ApplyOutcome::AlreadyApplied`], which makes replay after a flush
    /// idempotent. Gaps are normal: raft's own entries (leader no-ops, configuration changes)
    /// are no region command (they only move the applied index, [`DataRegion::note_applied`]).
    /// That no region command is skipped is the apply proxy's invariant.
    ///
    /// The outcome depends only on the command and the region's prior content, except that a
    /// fenced `gate` delays an insert: then nothing of the attempt remains, the applied index does
    /// not move, and the error is recoverable. On a deterministic error (bad tablet, type
    /// mismatch) the entry counts as applied and the error is its result.
    pub fn apply(
        &self,
        index: u64,
        command: &RegionCommand,
        gate: &dyn LeaseGate,
    ) -> Result<ApplyOutcome> {
        let mut state = self.state.write();
        if index <= state.applied_index {
            return Ok(ApplyOutcome::AlreadyApplied);
        }
        let outcome = match command {
            RegionCommand::InsertTablet {
                tablet,
                metadata_version,
                table_version,
            } => self
                .insert_tablet(
                    &mut state,
                    tablet,
                    (*metadata_version, *table_version),
                    gate,
                )
                .map(|points| ApplyOutcome::Inserted { points }),
            RegionCommand::DeleteSeries { deletion, .. }
            | RegionCommand::DeleteDatabase { deletion, .. }
                if state.applied_operation(deletion.operation_id) =>
            {
                Ok(ApplyOutcome::Deleted { series: 0 })
            }
            RegionCommand::DeleteSeries { series, deletion } => Ok(ApplyOutcome::Deleted {
                series: delete_series(&mut state, index, series, *deletion),
            }),
            RegionCommand::DeleteDatabase { deletion, database }
                if state
                    .fences
                    .supersedes(database, None, deletion.metadata_version) =>
            {
                Ok(ApplyOutcome::Deleted { series: 0 })
            }
            RegionCommand::DeleteDatabase { database, deletion } => {
                let dropped = delete(&mut state, index, |d, _| device_under(d, database));
                record_tombstone(
                    &mut state,
                    Tombstone::Database {
                        database: database.clone(),
                        index,
                        deletion: *deletion,
                    },
                );
                Ok(ApplyOutcome::Deleted { series: dropped })
            }
            RegionCommand::DeleteData { deletion, .. }
                if state.applied_delete_operation(deletion.operation_id) =>
            {
                Ok(ApplyOutcome::Deleted { series: 0 })
            }
            RegionCommand::DeleteData {
                series,
                start,
                end,
                deletion,
            } => match state
                .fences
                .deletion_refusal(series, deletion.metadata_version)
            {
                Some(refusal) => Err(refusal),
                None => {
                    let deleted = delete_data(&mut state, index, series, *start, *end);
                    state.record_delete_operation(index, deletion.operation_id);
                    Ok(ApplyOutcome::Deleted { series: deleted })
                }
            },
            RegionCommand::RaiseFenceFloor { version } => {
                state.fences.raise_floor(*version, index);
                Ok(ApplyOutcome::FloorRaised)
            }
        };
        self.note_in_last_values(command, &outcome);
        match &outcome {
            Err(e) if e.is_recoverable() => {}
            _ => state.applied_index = index,
        }
        if !matches!(outcome, Ok(ApplyOutcome::Inserted { .. })) {
            // Inserts keep the count as they go; deletes and refusals are rare: count afresh.
            self.memory.store(state.memory_bytes(), Ordering::Relaxed);
        }
        debug_assert_eq!(self.memory.load(Ordering::Relaxed), state.memory_bytes());
        outcome
    }

    /// Keeps the last-value cache exact after `command` applied (called under the state's write
    /// lock): a whole insert moves its series' entries forward, a deletion forgets the entries it
    /// may have touched (whether or not it deleted anything: it is rare, and forgetting is safe).
    fn note_in_last_values(&self, command: &RegionCommand, outcome: &Result<ApplyOutcome>) {
        match command {
            RegionCommand::InsertTablet { tablet, .. } => {
                if matches!(outcome, Ok(ApplyOutcome::Inserted { .. })) {
                    self.last_values.note_insert(tablet);
                }
            }
            RegionCommand::DeleteSeries { series, .. }
            | RegionCommand::DeleteData { series, .. } => {
                self.last_values
                    .forget_where(|d, m, _| series.iter().any(|(sd, sm)| sd == d && sm == m));
            }
            RegionCommand::DeleteDatabase { database, .. } => {
                self.last_values
                    .forget_where(|d, _, _| device_under(d, database));
            }
            RegionCommand::RaiseFenceFloor { .. } => {}
        }
    }

    /// Writes a tablet fragment by fragment (one per time partition), consulting the lease gate
    /// before each. If any fragment fails, every fragment of this attempt is rolled back. A
    /// tablet validated against metadata older than a deletion of one of its series is refused
    /// whole (the fencing token), before the type check: its type verdict came from metadata
    /// that no longer holds.
    fn insert_tablet(
        &self,
        state: &mut RegionState,
        tablet: &Tablet,
        (metadata_version, table_version): (u64, u64),
        gate: &dyn LeaseGate,
    ) -> Result<usize> {
        tablet.validate(&self.config.tablet_limits)?;
        if let Some(refusal) = state
            .fences
            .refusal(tablet, metadata_version, table_version)
        {
            return Err(refusal);
        }
        check_types(state, tablet)?;
        let fragments = split_by_time_slot(tablet, &self.config.partition);

        // (slot, mark, partition created by this attempt)
        let mut written: Vec<(i64, Mark, bool)> = Vec::with_capacity(fragments.len());
        let mut points = 0;
        let mut grown: isize = 0;
        let mut failure = None;
        for (slot, rows) in &fragments {
            if let Err(fenced) = gate.check(LeaseFencedRetryPolicy::RetryUntilSuccess) {
                failure = Some(StorageError::MetadataLeaseFenced {
                    policy: fenced.policy,
                });
                break;
            }
            if let Some(e) = fragment_failpoint() {
                failure = Some(e);
                break;
            }
            let created = !state.partitions.contains_key(slot);
            let partition = state
                .partitions
                .entry(*slot)
                .or_insert_with(|| Partition::new(&self.config));
            let mark = partition.working.mark();
            written.push((*slot, mark, created));
            let before = partition.working.memory_bytes();
            match partition.working.insert_tablet(tablet, rows) {
                Ok(n) => {
                    points += n;
                    grown += partition.working.memory_bytes() as isize - before as isize;
                }
                Err(e) => {
                    // check_types saw the region-wide registry; a memtable disagreeing with it
                    // is a bug, but rolling back keeps the replica consistent regardless.
                    failure = Some(mismatch(e));
                    break;
                }
            }
        }
        if let Some(error) = failure {
            for (slot, mark, created) in written.into_iter().rev() {
                let partition = state
                    .partitions
                    .get_mut(&slot)
                    .expect("a partition written by this attempt exists");
                partition.working.rollback(mark);
                if created {
                    assert!(
                        partition.is_empty(),
                        "partition {slot} created by the attempt is not empty after rollback"
                    );
                    state.partitions.remove(&slot);
                }
            }
            return Err(error);
        }
        // The attempt is whole: no rollback can follow, so the marks' undo entries are released
        // (they count against memory and would grow with every write).
        for (slot, _, _) in &written {
            if let Some(partition) = state.partitions.get_mut(slot) {
                let before = partition.working.memory_bytes();
                partition.working.release_marks();
                grown += partition.working.memory_bytes() as isize - before as isize;
            }
        }
        if grown >= 0 {
            self.memory.fetch_add(grown as usize, Ordering::Relaxed);
        } else {
            self.memory
                .fetch_sub(grown.unsigned_abs(), Ordering::Relaxed);
        }
        register_types(state, tablet);
        if state.dirty_since.is_none() {
            state.dirty_since = Some(Instant::now());
        }
        Ok(points)
    }

    /// Raw points of one series with `from <= time < to`, sorted, last write wins.
    pub fn query(
        &self,
        device: &str,
        measurement: &str,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, Value)>> {
        if from >= to {
            return Ok(Vec::new());
        }
        let state = self.state.read();
        let first = self.config.partition.time_slot(from);
        let last = self.config.partition.time_slot(to - 1);
        let mut merged = BTreeMap::new();
        for (_, partition) in state.partitions.range(first..=last) {
            merge_partition(
                &state,
                partition,
                device,
                measurement,
                from..=to - 1,
                &mut merged,
            )?;
        }
        Ok(merged
            .range(from..to)
            .map(|(t, v)| (*t, v.clone()))
            .collect())
    }

    /// The type of a live series, or `None` when the region holds no such series.
    pub fn series_type(&self, device: &str, measurement: &str) -> Option<DataType> {
        let state = self.state.read();
        state.series_types.get(device)?.get(measurement).copied()
    }

    /// Every live series and its type, sorted.
    pub fn series(&self) -> Vec<(String, String, DataType)> {
        let state = self.state.read();
        state
            .sorted_series()
            .into_iter()
            .map(|(d, m, t)| (d.to_string(), m.to_string(), t))
            .collect()
    }

    /// The digest of the region's logical content at its applied index.
    ///
    /// A series is read one time partition at a time, in time order (partitions hold disjoint
    /// time ranges), so memory is bounded by a partition's points of one series, not a whole
    /// series' (a series of hundreds of millions of points had made a digest run out of time).
    pub fn digest(&self) -> Result<RegionDigest> {
        self.digest_visible_from(i64::MIN)
    }

    /// At least as many points as [`DataRegion::export`] would return, from the files' indexes
    /// and the memtables' counts, without reading a point: a point overwritten in a newer source
    /// or masked by a deletion is counted where it is stored.
    pub fn points_upper_bound(&self) -> u64 {
        let state = self.state.read();
        state
            .partitions
            .values()
            .map(|p| {
                let sealed: u64 = p.sealed.iter().map(|f| f.point_count()).sum();
                let frozen: usize = p.flushing.iter().map(|(_, f)| f.point_count()).sum();
                sealed + (frozen + p.working.point_count()) as u64
            })
            .sum()
    }

    /// The region's whole logical content as one tablet per series (all points, sorted), with the
    /// applied index it reflects, every deletion applied so far (their fencing tokens are part
    /// of the replicated state) and the `deleteData` operations remembered: the body of a raft
    /// snapshot for a replica that fell behind.
    pub fn export(&self) -> Result<RegionContent> {
        let state = self.state.read();
        let series = state.sorted_series();
        let mut tablets = Vec::with_capacity(series.len());
        for (device, measurement, data_type) in series {
            let merged = state.all_points(device, measurement)?;
            if merged.is_empty() {
                continue;
            }
            let mut tablet = Tablet::new(device, &[(measurement, data_type)]);
            tablet.timestamps.reserve(merged.len());
            for (t, v) in merged {
                tablet.timestamps.push(t);
                assert!(
                    tablet.columns[0].push(v),
                    "stored value of {device}.{measurement} is not {data_type}"
                );
            }
            tablets.push(tablet);
        }
        // All applied, so all may be coalesced, and the series deletions below the floor go:
        // the receiver's sources are all at this applied index, so they mask nothing there.
        let mut tombstones: Vec<Tombstone> = state.tombstones().cloned().collect();
        fences::coalesce(&mut tombstones);
        let (fence_floor, _) = state.fences.floor();
        fences::prune_below_floor(&mut tombstones, fence_floor, |_, _, _| false);
        Ok(RegionContent {
            applied_index: state.applied_index,
            tablets,
            tombstones,
            delete_operations: state.delete_operations.iter().copied().collect(),
            fence_floor,
        })
    }

    /// Replaces the region's whole content with `content` (installing a snapshot), and makes it
    /// durable: the content is flushed under a manifest whose checkpoint is its applied index,
    /// and the old sealed files are deleted once that manifest is installed.
    pub fn reset_to(&self, content: &RegionContent) -> Result<()> {
        let RegionContent {
            applied_index: index,
            tablets,
            tombstones,
            delete_operations,
            fence_floor,
        } = content;
        let index = *index;
        assert!(
            delete_operations.len() <= DELETE_OPERATIONS_KEPT
                && delete_operations.iter().all(|(i, _)| *i <= index),
            "a snapshot at {index} remembers {} deleteData operations, or one from a later entry",
            delete_operations.len()
        );
        let replaced: Vec<String>;
        {
            let _one_flush = self.flush_lock.lock();
            let mut state = self.state.write();
            replaced = state.manifest.file_names();
            self.last_values.clear();
            state.partitions.clear();
            state.series_types.clear();
            state.recent_tombstones.clear();
            state.manifest.files.clear();
            assert!(
                tombstones.iter().all(|t| t.index() <= index),
                "a snapshot at {index} holds a deletion from a later entry"
            );
            // Every restored source is at checkpoint `index`, so these mask nothing restored;
            // they are kept for their fencing tokens.
            state.manifest.tombstones = tombstones.to_vec();
            state.fences = Fences::new(tombstones.iter(), *fence_floor, index);
            state.delete_operations = delete_operations.iter().copied().collect();
            state.manifest.delete_operations = delete_operations.clone();
            state.manifest.fence_floor = *fence_floor;
            state.applied_index = index;
            state.dirty_since = None;
            let limits = self.config.restore_limits();
            for tablet in tablets {
                tablet.validate(&limits)?;
                check_types(&state, tablet)?;
                for (slot, rows) in split_by_time_slot(tablet, &self.config.partition) {
                    let partition = state
                        .partitions
                        .entry(slot)
                        .or_insert_with(|| Partition::new(&self.config));
                    partition
                        .working
                        .insert_tablet(tablet, &rows)
                        .map_err(mismatch)?;
                }
                register_types(&mut state, tablet);
            }
            register_kept_types(&mut state);
            self.memory.store(state.memory_bytes(), Ordering::Relaxed);
        }
        self.flush()?;
        let live = self.state.read().manifest.file_names();
        remove_replaced(&self.dir.join(SEALED_DIR), &replaced, &live)
    }

    /// Bytes held by working memtables.
    pub fn memtable_bytes(&self) -> usize {
        self.state.read().working_bytes()
    }

    /// Bytes held by working and frozen memtables, without taking a lock: what the node's
    /// memtable budget counts.
    pub fn memory_bytes(&self) -> usize {
        self.memory.load(Ordering::Relaxed)
    }

    /// True when the working memtables are over the size threshold or older than the age limit.
    pub fn should_flush(&self, now: Instant) -> bool {
        let state = self.state.read();
        if state.working_bytes() >= self.config.memtable_flush_bytes {
            return true;
        }
        state.dirty_since.is_some_and(|since| {
            now.saturating_duration_since(since)
                >= Duration::from_millis(self.config.memtable_flush_age_ms)
        })
    }

    /// Flushes when [`DataRegion::should_flush`] says so; returns the new checkpoint if it did.
    pub fn flush_if_needed(&self, now: Instant) -> Result<Option<u64>> {
        if self.should_flush(now) {
            return self.flush().map(Some);
        }
        Ok(None)
    }

    /// Freezes every working memtable, writes each as a sealed file, fsyncs, then atomically
    /// installs a manifest whose checkpoint is the applied index at the freeze. Writes go on
    /// during the file writes. Returns the checkpoint: the log up to it is no longer needed.
    pub fn flush(&self) -> Result<u64> {
        let _one_flush = self.flush_lock.lock();
        self.flush_locked()
    }

    /// A consistent copy of the region's durable state for a replica that fell behind: flushes,
    /// then, before another flush or compaction can change the manifest, hard-links every live
    /// sealed file into `dest` (a new directory on the region's file system). Returns the
    /// manifest those files make up; its checkpoint is the log index the copy reflects. The
    /// links keep the files' contents however the region compacts meanwhile, at no copying
    /// cost; deleting `dest` releases them.
    pub fn checkpoint_into(&self, dest: &Path) -> Result<Manifest> {
        let _one_change = self.flush_lock.lock();
        self.flush_locked()?;
        let manifest = self.state.read().manifest.clone();
        fs::create_dir_all(dest).map_err(|e| StorageError::io(dest, e))?;
        let sealed_dir = self.dir.join(SEALED_DIR);
        for entry in &manifest.files {
            let name = entry.file_name();
            let link = dest.join(&name);
            fs::hard_link(sealed_dir.join(&name), &link).map_err(|e| StorageError::io(&link, e))?;
        }
        sync_dir(dest)?;
        Ok(manifest)
    }

    /// Replaces the region's whole content with a checkpoint another replica made
    /// ([`DataRegion::checkpoint_into`]): `manifest` and the files it names, found in `staged`
    /// (a directory on the region's file system). The files are linked into `sealed/` under
    /// names of this region's own sequence; the new manifest, stored atomically, is the commit
    /// point: a crash before it leaves the old content (the links are orphans, removed when the
    /// region opens), after it the new. Afterwards `applied_index()` is the manifest's checkpoint.
    /// `staged` is left as it was.
    pub fn install_checkpoint(&self, manifest: &Manifest, staged: &Path) -> Result<()> {
        let _one_change = self.flush_lock.lock();
        let sealed_dir = self.dir.join(SEALED_DIR);
        let mut installed = Manifest {
            checkpoint: manifest.checkpoint,
            next_sequence: 0,
            files: Vec::with_capacity(manifest.files.len()),
            tombstones: manifest.tombstones.clone(),
            delete_operations: manifest.delete_operations.clone(),
            fence_floor: manifest.fence_floor,
        };
        for entry in &manifest.files {
            let local = FileEntry {
                sequence: self.sequences.fetch_add(1, Ordering::Relaxed),
                ..entry.clone()
            };
            let (from, to) = (
                staged.join(entry.file_name()),
                sealed_dir.join(local.file_name()),
            );
            fs::hard_link(&from, &to).map_err(|e| StorageError::io(&from, e))?;
            installed.files.push(local);
        }
        sync_dir(&sealed_dir)?;
        installed.next_sequence = self.sequences.load(Ordering::Relaxed);
        // Every file opens and matches its entry before anything changes.
        let loaded = load_state(&sealed_dir, installed.clone(), &self.config, &self.files)?;
        installed.store(&self.dir)?;
        let replaced = {
            let mut state = self.state.write();
            let replaced = state.manifest.file_names();
            *state = loaded;
            self.last_values.clear();
            self.memory.store(state.memory_bytes(), Ordering::Relaxed);
            replaced
        };
        remove_replaced(&sealed_dir, &replaced, &installed.file_names())
    }

    /// Writes each frozen memtable as a sealed file (named by a new sequence number) and syncs
    /// the directory: the files a flush's manifest will name, with the memtables they hold.
    fn write_frozen(&self, frozen: &[(i64, u64, Arc<FrozenMemTable>)]) -> Result<Vec<NewFile>> {
        let sealed_dir = self.dir.join(SEALED_DIR);
        let mut new_files = Vec::with_capacity(frozen.len());
        for (slot, frozen_at, snapshot) in frozen {
            let entry = FileEntry {
                time_slot: *slot,
                sequence: self.sequences.fetch_add(1, Ordering::Relaxed),
                checkpoint: *frozen_at,
            };
            let path = sealed_dir.join(entry.file_name());
            let header = Header {
                time_slot: *slot,
                checkpoint: *frozen_at,
            };
            let file = sealed::write(
                &path,
                snapshot,
                header,
                &self.config.sealed,
                &self.series_codecs(),
                &self.files,
            )?;
            new_files.push((entry, Arc::new(file), snapshot.clone()));
        }
        sync_dir(&sealed_dir)?;
        Ok(new_files)
    }

    fn flush_locked(&self) -> Result<u64> {
        let (checkpoint, frozen, mut manifest) = {
            let mut state = self.state.write();
            let checkpoint = state.applied_index;
            for partition in state.partitions.values_mut() {
                if partition.working.is_empty() {
                    continue;
                }
                let successor = partition.working.successor();
                let working = std::mem::replace(&mut partition.working, successor);
                partition
                    .flushing
                    .push((checkpoint, Arc::new(working.freeze())));
            }
            // Every frozen memtable is written, including any left by a failed earlier flush:
            // the new checkpoint covers their entries too, so none may stay memory-only.
            let frozen: Vec<(i64, u64, Arc<FrozenMemTable>)> = state
                .partitions
                .iter()
                .flat_map(|(slot, p)| p.flushing.iter().map(|(c, f)| (*slot, *c, f.clone())))
                .collect();
            state.dirty_since = None;
            self.memory.store(state.memory_bytes(), Ordering::Relaxed);
            let mut manifest = state.manifest.clone();
            // Deletions at or below the checkpoint move into the manifest; newer ones stay in
            // the log and are replayed.
            manifest.tombstones.extend(
                state
                    .recent_tombstones
                    .iter()
                    .filter(|t| t.index() <= checkpoint)
                    .cloned(),
            );
            // Every deletion coalesced is at or below the checkpoint, so replay meets the same.
            fences::coalesce(&mut manifest.tombstones);
            // The operations as of the checkpoint: every one applied up to here.
            manifest.delete_operations = state.delete_operations.iter().copied().collect();
            // The floor as of the checkpoint; one raised after it is replayed from the log.
            let (floor, raised_at) = state.fences.floor();
            if raised_at <= checkpoint {
                manifest.fence_floor = floor;
            }
            (checkpoint, frozen, manifest)
        };

        let new_files = self.write_frozen(&frozen)?;
        fail::fail_point!("storage::flush::before_manifest", |_| Err(
            StorageError::Injected("storage::flush::before_manifest")
        ));
        manifest.checkpoint = checkpoint;
        manifest.next_sequence = self.sequences.load(Ordering::Relaxed);
        manifest
            .files
            .extend(new_files.iter().map(|(e, _, _)| e.clone()));
        manifest.store(&self.dir)?;

        // The installed manifest names the new files: the in-memory state follows it before
        // anything else can fail, or the next flush would reuse the live files' names (REVIEW M1).
        let mut state = self.state.write();
        for (entry, file, snapshot) in new_files {
            let partition = state
                .partitions
                .get_mut(&entry.time_slot)
                .expect("a partition being flushed is never removed");
            partition
                .flushing
                .retain(|(_, f)| !Arc::ptr_eq(f, &snapshot));
            partition.sealed.push(file);
            partition.flushed_at = std::time::Instant::now();
        }
        state.recent_tombstones.retain(|t| t.index() > checkpoint);
        state.manifest = manifest;
        // A time range that held no point of an older file masks nothing from the start, nor
        // does a series deletion below the floor whose older files are gone: they go now
        // rather than at the next compaction.
        if state.prune_tombstones() {
            state.manifest.store(&self.dir)?;
        }
        self.memory.store(state.memory_bytes(), Ordering::Relaxed);
        drop(state);
        fail::fail_point!("storage::flush::after_manifest", |_| Err(
            StorageError::Injected("storage::flush::after_manifest")
        ));
        Ok(checkpoint)
    }
}

/// The in-memory state of a region whose durable state is `manifest` and the sealed files it
/// names in `sealed_dir` (opening a region, installing a checkpoint).
fn load_state(
    sealed_dir: &Path,
    manifest: Manifest,
    config: &StorageConfig,
    files: &Arc<FileCache>,
) -> Result<RegionState> {
    let mut state = RegionState {
        applied_index: manifest.checkpoint,
        partitions: BTreeMap::new(),
        series_types: HashMap::new(),
        manifest,
        recent_tombstones: Vec::new(),
        dirty_since: None,
        fences: Fences::default(),
        delete_operations: VecDeque::new(),
    };
    // The manifest's floor was raised at or below its checkpoint.
    state.fences = Fences::new(
        state.manifest.tombstones.iter(),
        state.manifest.fence_floor,
        state.manifest.checkpoint,
    );
    state.delete_operations = state.manifest.delete_operations.iter().copied().collect();
    for entry in state.manifest.files.clone() {
        let path = sealed_dir.join(entry.file_name());
        let file = SealedFile::open(&path, files)?;
        if file.time_slot != entry.time_slot || file.checkpoint != entry.checkpoint {
            return Err(StorageError::Corruption {
                what: "sealed file",
                path,
                offset: 0,
                reason: format!(
                    "header says slot {} checkpoint {}, manifest says slot {} checkpoint {}",
                    file.time_slot, file.checkpoint, entry.time_slot, entry.checkpoint
                ),
            });
        }
        for (device, measurement, chunk) in file.series() {
            if !state.masked(device, measurement, file.checkpoint) {
                state
                    .series_types
                    .entry(device.to_string())
                    .or_default()
                    .insert(measurement.to_string(), chunk.data_type);
            }
        }
        state
            .partitions
            .entry(entry.time_slot)
            .or_insert_with(|| Partition::new(config))
            .sealed
            .push(Arc::new(file));
    }
    register_kept_types(&mut state);
    Ok(state)
}

/// Registers the types the time-range tombstones record: a series whose points `deleteData`
/// removed keeps its type, unless a later deletion dropped the series.
fn register_kept_types(state: &mut RegionState) {
    let kept: Vec<(String, String, DataType, u64)> = state
        .manifest
        .tombstones
        .iter()
        .filter_map(|t| match t {
            Tombstone::Range {
                device,
                measurement,
                data_type,
                index,
                ..
            } => Some((device.clone(), measurement.clone(), *data_type, *index)),
            _ => None,
        })
        .collect();
    for (device, measurement, data_type, index) in kept {
        if !state.masked(&device, &measurement, index) {
            state
                .series_types
                .entry(device)
                .or_default()
                .entry(measurement)
                .or_insert(data_type);
        }
    }
}

/// Applies a `deleteData` at log index `index`: the working memtables lose the points at once,
/// older sources are masked by the tombstones recorded. The series keep their types (IoTDB keeps
/// the series; and whether any point is left may differ between replicas below a TTL cutoff, so
/// it must not decide the registry). A series with no type here has no point to delete; returns
/// how many series had one.
fn delete_data(
    state: &mut RegionState,
    index: u64,
    series: &[(String, String)],
    start: i64,
    end: i64,
) -> usize {
    if start > end {
        return 0;
    }
    let mut deleted = 0;
    for (device, measurement) in series {
        let Some(data_type) = state
            .series_types
            .get(device)
            .and_then(|ms| ms.get(measurement))
            .copied()
        else {
            continue;
        };
        for partition in state.partitions.values_mut() {
            partition
                .working
                .delete_range(device, measurement, start, end);
        }
        record_tombstone(
            state,
            Tombstone::Range {
                device: device.clone(),
                measurement: measurement.clone(),
                data_type,
                start,
                end,
                index,
            },
        );
        deleted += 1;
    }
    deleted
}

/// True when `t` lies in one of `ranges` (inclusive bounds).
pub(crate) fn in_ranges(ranges: &[(i64, i64)], t: i64) -> bool {
    ranges
        .iter()
        .any(|(start, end)| (*start..=*end).contains(&t))
}

/// True when the deleted range `(start, end)` meets the times `min..=max` (a chunk's or a
/// page's): some of their points may be deleted.
pub(crate) fn overlaps((start, end): (i64, i64), min: i64, max: i64) -> bool {
    start <= max && min <= end
}

/// Applies a DELETE TIMESERIES at `index`: each series not deleted since at a version as new
/// (`Fences::supersedes`) is removed from memory and masked, and fenced, by a tombstone. The
/// series dropped from memory.
fn delete_series(
    state: &mut RegionState,
    index: u64,
    series: &[(String, String)],
    deletion: crate::Deletion,
) -> usize {
    let mut dropped = 0;
    for (device, measurement) in series {
        let version = deletion.metadata_version;
        if state.fences.supersedes(device, Some(measurement), version) {
            continue;
        }
        dropped += delete(state, index, |d, m| d == device && m == measurement);
        record_tombstone(
            state,
            Tombstone::Series {
                device: device.clone(),
                measurement: measurement.clone(),
                index,
                deletion,
            },
        );
    }
    dropped
}

/// Records an applied deletion: it masks older sources and fences older inserts.
fn record_tombstone(state: &mut RegionState, tombstone: Tombstone) {
    state.fences.add(&tombstone);
    state.recent_tombstones.push(tombstone);
}

/// True when the column holds at least one non-null value. An all-null column writes nothing and
/// defines no series: the registry must be rebuildable from stored points alone, or a replica's
/// verdict on a later write would depend on whether it restarted in between.
fn has_value(tablet: &Tablet, column: usize) -> bool {
    match &tablet.bitmaps[column] {
        None => true,
        Some(bitmap) => bitmap.count_ones() < tablet.row_count(),
    }
}

fn mismatch(error: MemTableError) -> StorageError {
    match error {
        MemTableError::TypeMismatch {
            device,
            measurement,
            existing,
            requested,
        } => StorageError::DataTypeMismatch {
            device,
            measurement,
            existing,
            requested,
        },
    }
}

/// Registers the types of the tablet's columns that hold a value.
fn register_types(state: &mut RegionState, tablet: &Tablet) {
    let types = state.series_types.entry(tablet.device.clone()).or_default();
    for (column, (measurement, data_type)) in tablet
        .measurements
        .iter()
        .zip(&tablet.data_types)
        .enumerate()
    {
        if has_value(tablet, column) && !types.contains_key(measurement) {
            types.insert(measurement.clone(), *data_type);
        }
    }
    if types.is_empty() {
        state.series_types.remove(&tablet.device);
    }
}

/// Creates a new region's `sealed/` directory and makes its entries durable up to the region's
/// parent (REVIEW L3: `regions/<id>` was never fsynced in `regions/`, so on some file systems a
/// crash could lose a region whose log had already been truncated past its first checkpoint).
fn create_durable_dir(sealed_dir: &Path) -> Result<()> {
    fs::create_dir_all(sealed_dir).map_err(|e| StorageError::io(sealed_dir, e))?;
    let mut dir = sealed_dir;
    for _ in 0..2 {
        let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) else {
            break;
        };
        sync_dir(parent)?;
        dir = parent;
    }
    Ok(())
}

/// Deletes the files of `replaced` (the manifest's before a snapshot install) that `live` does
/// not name. Only those: a compaction may be writing its output in `sealed_dir` meanwhile (it
/// takes the region's lock only to install), and deleting every unnamed file took that output
/// away under a compaction that then installed it (seen in scenario 11b: "No such file" on every
/// read of the region). Orphans of a crash are removed when the region opens.
fn remove_replaced(sealed_dir: &Path, replaced: &[String], live: &[String]) -> Result<()> {
    let live: std::collections::HashSet<&String> = live.iter().collect();
    let mut removed = 0usize;
    for name in replaced.iter().filter(|n| !live.contains(n)) {
        let path = sealed_dir.join(name);
        match fs::remove_file(&path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StorageError::io(path, e)),
        }
    }
    tracing::debug!(dir = %sealed_dir.display(), removed, "removed the sealed files a snapshot replaced");
    Ok(())
}

/// Deletes every file in `sealed_dir` whose name is not in `live`.
fn remove_orphans(sealed_dir: &Path, live: &[String]) -> Result<()> {
    let entries = fs::read_dir(sealed_dir).map_err(|e| StorageError::io(sealed_dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StorageError::io(sealed_dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !live.contains(&name) {
            tracing::info!(file = %entry.path().display(), "removing a sealed file no manifest names");
            fs::remove_file(entry.path()).map_err(|e| StorageError::io(entry.path(), e))?;
        }
    }
    Ok(())
}

/// Checks every column's type against the region's series, before anything is written.
fn check_types(state: &RegionState, tablet: &Tablet) -> Result<()> {
    let Some(types) = state.series_types.get(&tablet.device) else {
        return Ok(());
    };
    for (column, (measurement, requested)) in tablet
        .measurements
        .iter()
        .zip(&tablet.data_types)
        .enumerate()
    {
        if !has_value(tablet, column) {
            continue;
        }
        if let Some(existing) = types.get(measurement) {
            if existing != requested {
                return Err(StorageError::DataTypeMismatch {
                    device: tablet.device.clone(),
                    measurement: measurement.clone(),
                    existing: *existing,
                    requested: *requested,
                });
            }
        }
    }
    Ok(())
}

/// Row indexes of the tablet grouped by time slot, slots ascending.
pub(crate) fn split_by_time_slot(
    tablet: &Tablet,
    config: &PartitionConfig,
) -> Vec<(i64, Vec<u32>)> {
    let interval = config.time_partition_interval_ms as i128;
    // (slot, start, end) of the previous row's slot: sorted tablets stay in one slot for long
    // runs, so the division is skipped while they do. i128 so that bounds never overflow.
    let mut current: Option<(i64, i128, i128)> = None;
    let mut groups: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    for (row, &t) in tablet.timestamps.iter().enumerate() {
        let t_wide = t as i128;
        let slot = match current {
            Some((slot, start, end)) if start <= t_wide && t_wide < end => slot,
            _ => {
                let slot = config.time_slot(t);
                let start = config.time_partition_origin_ms as i128 + slot as i128 * interval;
                current = Some((slot, start, start + interval));
                slot
            }
        };
        groups.entry(slot).or_default().push(row as u32);
    }
    groups.into_iter().collect()
}

/// Drops matching series from every working memtable and the type registry; frozen memtables and
/// sealed files are masked by the tombstone the caller records.
fn delete(state: &mut RegionState, _index: u64, pred: impl Fn(&str, &str) -> bool) -> usize {
    let mut dropped = 0;
    for partition in state.partitions.values_mut() {
        dropped += partition.working.delete_where(&pred);
    }
    for (device, measurements) in state.series_types.iter_mut() {
        measurements.retain(|m, _| !pred(device, m));
    }
    state.series_types.retain(|_, ms| !ms.is_empty());
    dropped
}

/// Merges one partition's sources for a series into `out`, oldest first, so newer writes win.
/// Sealed pages wholly outside `times` are not read (the caller cuts `out` to the range).
fn merge_partition(
    state: &RegionState,
    partition: &Partition,
    device: &str,
    measurement: &str,
    times: RangeInclusive<i64>,
    out: &mut BTreeMap<i64, Value>,
) -> Result<()> {
    for file in &partition.sealed {
        if state.masked(device, measurement, file.checkpoint) {
            continue;
        }
        let read = file.read_range(device, measurement, *times.start(), *times.end())?;
        if let Some((timestamps, values)) = read {
            let deleted = state.deleted_ranges(device, measurement, file.checkpoint);
            for (i, t) in timestamps.into_iter().enumerate() {
                if !in_ranges(&deleted, t) {
                    out.insert(t, values.value(i));
                }
            }
        }
    }
    for (checkpoint, frozen) in &partition.flushing {
        if state.masked(device, measurement, *checkpoint) {
            continue;
        }
        let deleted = state.deleted_ranges(device, measurement, *checkpoint);
        out.extend(
            frozen
                .query(device, measurement, i64::MIN, i64::MAX)
                .into_iter()
                .filter(|(t, _)| !in_ranges(&deleted, *t)),
        );
    }
    out.extend(
        partition
            .working
            .query(device, measurement, i64::MIN, i64::MAX),
    );
    Ok(())
}

#[cfg(feature = "failpoints")]
fn fragment_failpoint() -> Option<StorageError> {
    fail::fail_point!("storage::before_fragment", |_| Some(
        StorageError::Injected("storage::before_fragment")
    ));
    None
}

#[cfg(not(feature = "failpoints"))]
fn fragment_failpoint() -> Option<StorageError> {
    None
}
