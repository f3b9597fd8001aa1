//! `DataRegionStateMachine` (design §5 step 4): a data region's raft state machine. It applies a
//! committed entry through the storage engine; when the lease is fenced (536) it retries the entry
//! up to `data_region_write_retry_max` times, `data_region_write_retry_wait_ms` apart, then hands
//! 536 to the apply proxy, which keeps retrying with its own capped backoff and never skips.
//!
//! The retries never block: the apply proxy runs on the thread that also persists and
//! acknowledges raft entries for every region of the node, and a sleeping state machine would stop
//! the quorum. Instead each call is at most one attempt, and a call that comes before the retry
//! wait has passed (by the injected clock) answers 536 without touching the engine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::codec::Reader;
use common::{envelope, StatusCode, Tablet, TabletLimits};
use consensus::{ApplyError, Clock, SnapshotJob, StateMachine};

use engine::{
    ApplyOutcome, DataRegion, DecodeError, Deletion, LeaseGate, RegionCommand, RegionContent,
    StorageError, Tombstone, DELETE_OPERATIONS_KEPT,
};

/// Retry settings of the state machine (DataNode config keys of the same names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionRetryConfig {
    /// `data_region_write_retry_max`: retries of a fenced write before 536 goes to the proxy
    /// (default 5, as IoTDB's `MAX_WRITE_RETRY_TIMES`).
    pub write_retry_max: u32,
    /// `data_region_write_retry_wait_ms`: time between those retries (default 1000).
    pub write_retry_wait_ms: u64,
}

impl Default for RegionRetryConfig {
    fn default() -> Self {
        RegionRetryConfig {
            write_retry_max: 5,
            write_retry_wait_ms: 1000,
        }
    }
}

/// Counters of one region's state machine.
#[derive(Debug, Default)]
pub struct RegionStateMachineMetrics {
    /// Fenced attempts that scheduled a state-machine retry.
    pub write_retries: AtomicU64,
    /// Times the retry budget ran out and 536 went to the apply proxy.
    pub retries_exhausted: AtomicU64,
}

#[derive(Clone, Copy, Debug)]
struct PendingRetry {
    index: u64,
    /// Attempts made so far for this entry in the current round.
    attempts: u32,
    /// Earliest time (injected clock) of the next attempt.
    next_attempt_ms: u64,
}

/// A data region's state machine.
pub struct DataRegionStateMachine {
    region: Arc<DataRegion>,
    gate: Arc<dyn LeaseGate>,
    clock: Arc<dyn Clock>,
    config: RegionRetryConfig,
    pending: Option<PendingRetry>,
    metrics: Arc<RegionStateMachineMetrics>,
    snapshot_bytes_max: u64,
    streamed: Option<Streamed>,
}

/// How a state machine with streamed snapshots builds and finds them.
struct Streamed {
    node_id: u64,
    region_id: u64,
    fetch: Arc<dyn crate::snapshot::SnapshotFetch>,
}

/// Bytes a snapshot takes per point at least, as [`encode_snapshot`] writes it: a timestamp
/// (8) and a value (8 for numeric types, 4 for INT32/FLOAT, 1 for BOOLEAN) — 12 as the
/// estimate.
const SNAPSHOT_BYTES_PER_POINT: u64 = 12;

impl DataRegionStateMachine {
    /// A state machine applying into `region`, gated by `gate`, timing retries by `clock`.
    pub fn new(
        region: Arc<DataRegion>,
        gate: Arc<dyn LeaseGate>,
        clock: Arc<dyn Clock>,
        config: RegionRetryConfig,
    ) -> DataRegionStateMachine {
        DataRegionStateMachine {
            region,
            gate,
            clock,
            config,
            pending: None,
            metrics: Arc::new(RegionStateMachineMetrics::default()),
            snapshot_bytes_max: 64 << 20,
            streamed: None,
        }
    }

    /// Snapshots streamed in chunks (the DataNode's way; `crate::snapshot`): the snapshot job
    /// links the region's files into a snapshot that node `node_id` serves, and raft carries
    /// only its descriptor; a restore installs the files downloaded before raft saw the
    /// message, or asks `fetch` for them. No size of region is too large. Without this, a
    /// snapshot is the region's content inline in one raft message, for embedding and tests.
    pub fn with_streamed_snapshots(
        mut self,
        node_id: u64,
        region_id: u64,
        fetch: Arc<dyn crate::snapshot::SnapshotFetch>,
    ) -> DataRegionStateMachine {
        self.streamed = Some(Streamed {
            node_id,
            region_id,
            fetch,
        });
        self
    }

    /// Inline snapshots are sent as one raft message; a region whose snapshot would take more than
    /// `bytes` (the transport's `dn_rpc_max_message_bytes`, default 64 MiB) generates none, as
    /// it could not be delivered. Building it anyway held several copies of the whole region in
    /// memory on the raft thread and took the leader down (issue 18: until snapshots stream in
    /// chunks, a follower that needs one of a larger region does not catch up).
    pub fn with_snapshot_bytes_max(mut self, bytes: u64) -> DataRegionStateMachine {
        self.snapshot_bytes_max = bytes;
        self
    }

    /// The region it applies into.
    pub fn region(&self) -> &Arc<DataRegion> {
        &self.region
    }

    /// Its counters.
    pub fn metrics(&self) -> &Arc<RegionStateMachineMetrics> {
        &self.metrics
    }

    fn fenced(&mut self, index: u64, now_ms: u64) -> ApplyError {
        let attempts = match self.pending {
            Some(p) if p.index == index => p.attempts + 1,
            _ => 1,
        };
        // The first attempt plus `write_retry_max` retries make one round.
        if attempts <= self.config.write_retry_max {
            self.metrics.write_retries.fetch_add(1, Ordering::Relaxed);
            self.pending = Some(PendingRetry {
                index,
                attempts,
                next_attempt_ms: now_ms.saturating_add(self.config.write_retry_wait_ms),
            });
            ApplyError::Recoverable {
                code: StatusCode::MetadataLeaseFencedRetryRequired.code(),
                message: format!(
                    "metadata lease fenced applying entry {index}; state machine retry {attempts} of {} in {} ms",
                    self.config.write_retry_max, self.config.write_retry_wait_ms
                ),
            }
        } else {
            self.metrics
                .retries_exhausted
                .fetch_add(1, Ordering::Relaxed);
            self.pending = None;
            ApplyError::Recoverable {
                code: StatusCode::MetadataLeaseFencedRetryRequired.code(),
                message: format!(
                    "metadata lease fenced applying entry {index} after {} state machine retries; \
                     the apply proxy retries",
                    self.config.write_retry_max
                ),
            }
        }
    }
}

impl StateMachine for DataRegionStateMachine {
    fn apply(&mut self, index: u64, data: &[u8]) -> Result<Vec<u8>, ApplyError> {
        let command = match RegionCommand::decode(data, &self.region.config().tablet_limits) {
            Ok(command) => command,
            // The same bytes fail the same way on every replica.
            Err(e) => {
                return Err(ApplyError::Deterministic {
                    code: StatusCode::IllegalParameter.code(),
                    message: format!(
                        "entry {index} does not decode at offset {}: {}",
                        e.offset, e.reason
                    ),
                })
            }
        };
        if let Some(delayed) = apply_delay_failpoint(index) {
            return Err(delayed);
        }
        let now_ms = self.clock.now_ms();
        if let Some(p) = self.pending {
            if p.index == index && now_ms < p.next_attempt_ms {
                return Err(ApplyError::Recoverable {
                    code: StatusCode::MetadataLeaseFencedRetryRequired.code(),
                    message: format!(
                        "entry {index} waits {} ms more before state machine retry {}",
                        p.next_attempt_ms - now_ms,
                        p.attempts + 1
                    ),
                });
            }
        }
        match self.region.apply(index, &command, self.gate.as_ref()) {
            Ok(outcome) => {
                self.pending = None;
                Ok(encode_outcome(outcome))
            }
            Err(StorageError::MetadataLeaseFenced { .. }) => Err(self.fenced(index, now_ms)),
            Err(e) => {
                let status = e.status();
                if e.is_recoverable() {
                    Err(ApplyError::Recoverable {
                        code: status.code.code(),
                        message: status.message,
                    })
                } else {
                    self.pending = None;
                    Err(ApplyError::Deterministic {
                        code: status.code.code(),
                        message: status.message,
                    })
                }
            }
        }
    }

    fn applied_index(&self) -> u64 {
        self.region.applied_index()
    }

    /// The region's applied index follows raft's over no-ops and membership changes, so a
    /// snapshot built after a learner's addition is at or past it and names the learner
    /// (REVIEW-2026-12-05 N2).
    fn note_applied(&mut self, index: u64) {
        self.region.note_applied(index);
    }

    fn snapshot(&self) -> Result<Vec<u8>, ApplyError> {
        self.build_snapshot()().map(|(_, data)| data)
    }

    /// Built on a thread of its own: a streamed snapshot flushes the region and reads every
    /// file for its checksum, an inline one reads every point back; either on the raft thread
    /// would stall every group of the node.
    fn snapshot_job(&self) -> Option<SnapshotJob> {
        Some(self.build_snapshot())
    }

    fn restore(&mut self, index: u64, snapshot: &[u8]) -> Result<(), ApplyError> {
        if crate::snapshot::Descriptor::is_streamed(snapshot) {
            return self.restore_streamed(index, snapshot);
        }
        let mut content = decode_snapshot(snapshot, &self.region.config().restore_limits())
            .map_err(|e| ApplyError::Recoverable {
                code: StatusCode::InternalServerError.code(),
                message: format!(
                    "snapshot for entry {index} does not decode at offset {}: {}",
                    e.offset, e.reason
                ),
            })?;
        let at = content.applied_index;
        assert!(
            at <= index,
            "snapshot content at {at} is newer than its index {index}"
        );
        self.pending = None;
        content.applied_index = index;
        self.region.reset_to(&content).map_err(|e| recoverable(&e))
    }
}

impl DataRegionStateMachine {
    /// The job that builds this region's snapshot: the index its content reflects and its bytes.
    fn build_snapshot(&self) -> SnapshotJob {
        let region = self.region.clone();
        match &self.streamed {
            Some(s) => {
                let (node_id, region_id) = (s.node_id, s.region_id);
                Box::new(move || {
                    crate::snapshot::build(&region, node_id, region_id).map_err(|e| recoverable(&e))
                })
            }
            None => {
                let bytes_max = self.snapshot_bytes_max;
                Box::new(move || build_snapshot(&region, bytes_max))
            }
        }
    }

    /// Installs a streamed snapshot from the files staged for it; without them (lost, or a
    /// restore after a restart that found none), asks for them and is retried.
    fn restore_streamed(&mut self, index: u64, data: &[u8]) -> Result<(), ApplyError> {
        let unavailable = |message: String| ApplyError::Recoverable {
            code: StatusCode::InternalServerError.code(),
            message,
        };
        let descriptor = crate::snapshot::Descriptor::decode(data).map_err(|e| {
            unavailable(format!(
                "snapshot descriptor for entry {index} does not decode at offset {}: {}",
                e.offset, e.reason
            ))
        })?;
        if descriptor.index() != index {
            return Err(unavailable(format!(
                "snapshot at {index} describes the region at {}",
                descriptor.index()
            )));
        }
        let dir = self.region.dir().to_path_buf();
        if !crate::snapshot::is_staged(&dir, data) {
            if let Some(s) = &self.streamed {
                s.fetch.fetch(descriptor.region, data);
            }
            return Err(unavailable(format!(
                "snapshot at {index} ({} bytes from node {}) is not downloaded yet",
                descriptor.bytes(),
                descriptor.source
            )));
        }
        self.pending = None;
        let staging = crate::snapshot::staging_dir(&dir);
        self.region
            .install_checkpoint(&descriptor.manifest, &staging)
            .map_err(|e| recoverable(&e))?;
        if let Some(s) = &self.streamed {
            s.fetch.installed(descriptor.region, index);
        }
        if let Err(e) = crate::snapshot::remove_staging(&dir) {
            tracing::warn!(dir = %staging.display(), "removing an installed snapshot's staging: {e}");
        }
        tracing::info!(
            region = descriptor.region,
            index,
            bytes = descriptor.bytes(),
            files = descriptor.files.len(),
            "snapshot installed"
        );
        Ok(())
    }
}

/// The snapshot of `region`: the index its content reflects and its bytes, or why there is none
/// (over `bytes_max`, an unreadable file — never a wrong one: raft asks again later).
fn build_snapshot(region: &DataRegion, bytes_max: u64) -> Result<(u64, Vec<u8>), ApplyError> {
    let estimate = region
        .points_upper_bound()
        .saturating_mul(SNAPSHOT_BYTES_PER_POINT);
    if estimate > bytes_max {
        return Err(ApplyError::Recoverable {
            code: StatusCode::WriteProcessReject.code(),
            message: format!(
                "region in {} holds about {} MiB, more than one snapshot message may carry \
                 ({} MiB, dn_rpc_max_message_bytes); no snapshot is built",
                region.dir().display(),
                estimate >> 20,
                bytes_max >> 20
            ),
        });
    }
    let content = region.export().map_err(|e| recoverable(&e))?;
    Ok((content.applied_index, encode_snapshot(&content)))
}

/// A storage error as an outcome raft retries later (a snapshot's export or install).
fn recoverable(e: &StorageError) -> ApplyError {
    let status = e.status();
    ApplyError::Recoverable {
        code: status.code.code(),
        message: status.message,
    }
}

/// `datanode::apply::delay` (feature `failpoints`): holds the apply of an entry as a recoverable
/// error, so the apply proxy retries it later. It delays without blocking: the apply thread also
/// persists and acknowledges raft entries, which must go on.
#[cfg(feature = "failpoints")]
fn apply_delay_failpoint(index: u64) -> Option<ApplyError> {
    fail::fail_point!("datanode::apply::delay", |_| Some(
        ApplyError::Recoverable {
            code: StatusCode::InternalServerError.code(),
            message: format!("apply of entry {index} delayed by failpoint"),
        }
    ));
    None
}

#[cfg(not(feature = "failpoints"))]
fn apply_delay_failpoint(_index: u64) -> Option<ApplyError> {
    None
}

/// The bytes a leader answers a proposer with: `u8 kind (1 inserted, 2 deleted, 3 already
/// applied, 4 fence floor raised), u64 count` (little-endian).
pub fn encode_outcome(outcome: ApplyOutcome) -> Vec<u8> {
    let (kind, count) = match outcome {
        ApplyOutcome::Inserted { points } => (1u8, points as u64),
        ApplyOutcome::Deleted { series } => (2, series as u64),
        ApplyOutcome::AlreadyApplied => (3, 0),
        ApplyOutcome::FloorRaised => (4, 0),
    };
    let mut out = Vec::with_capacity(9);
    out.push(kind);
    out.extend_from_slice(&count.to_le_bytes());
    out
}

/// Reads [`encode_outcome`]'s bytes.
pub fn decode_outcome(bytes: &[u8]) -> Option<ApplyOutcome> {
    let (&kind, rest) = bytes.split_first()?;
    let count = u64::from_le_bytes(rest.try_into().ok()?) as usize;
    match kind {
        1 => Some(ApplyOutcome::Inserted { points: count }),
        2 => Some(ApplyOutcome::Deleted { series: count }),
        3 if count == 0 => Some(ApplyOutcome::AlreadyApplied),
        4 if count == 0 => Some(ApplyOutcome::FloorRaised),
        _ => None,
    }
}

const SNAPSHOT_MAGIC: &[u8; 8] = b"FPRSNAP6";
const SNAPSHOT_MAGIC_WITHOUT_FLOOR: &[u8; 8] = b"FPRSNAP5";
const SNAPSHOT_MAGIC_WITHOUT_OPERATIONS: &[u8; 8] = b"FPRSNAP4";
const SNAPSHOT_MAGIC_WITHOUT_RANGES: &[u8; 8] = b"FPRSNAP2";
const SNAPSHOT_MAGIC_WITHOUT_DELETIONS: &[u8; 8] = b"FPRSNAP1";

/// Snapshot body (little-endian): `magic "FPRSNAP6" (`FPRSNAP3` is the streamed snapshot's
/// descriptor, `crate::snapshot`), u64 applied index, u32 tablets, tablets ×
/// { u32 length, InsertTablet command bytes }, u32 deletions, deletions × { u64 log index, u32
/// length, DeleteSeries (one series), DeleteDatabase or DeleteData (one series) command bytes,
/// [DeleteData: u8 the series' type] }, u32 operations × { u64 log index, u64 operation id },
/// u64 fence floor, u32 CRC32 of everything before it`. The deletions are part of the replicated state: their
/// fencing tokens decide later inserts, and a `deleteData` keeps its series' type; so are the
/// `deleteData` operations remembered (a redelivery of one is a no-op), and the fence floor.
/// `FPRSNAP5` (no floor), `FPRSNAP4` (no operations), `FPRSNAP2` (no DeleteData) and `FPRSNAP1` (no deletions) still decode.
pub fn encode_snapshot(content: &RegionContent) -> Vec<u8> {
    let RegionContent {
        applied_index: index,
        tablets,
        tombstones,
        delete_operations,
        fence_floor,
    } = content;
    envelope::seal(SNAPSHOT_MAGIC, |w| {
        w.u64(*index);
        w.len32(tablets.len());
        for tablet in tablets {
            w.bytes32(&RegionCommand::insert(tablet.clone()).encode());
        }
        w.len32(tombstones.len());
        for tombstone in tombstones {
            let command = match tombstone {
                Tombstone::Series {
                    device,
                    measurement,
                    deletion,
                    ..
                } => RegionCommand::DeleteSeries {
                    series: vec![(device.clone(), measurement.clone())],
                    deletion: *deletion,
                },
                Tombstone::Database {
                    database, deletion, ..
                } => RegionCommand::DeleteDatabase {
                    database: database.clone(),
                    deletion: *deletion,
                },
                Tombstone::Range {
                    device,
                    measurement,
                    start,
                    end,
                    ..
                } => RegionCommand::DeleteData {
                    series: vec![(device.clone(), measurement.clone())],
                    start: *start,
                    end: *end,
                    deletion: Deletion::default(),
                },
            };
            w.u64(tombstone.index());
            w.bytes32(&command.encode());
            if let Tombstone::Range { data_type, .. } = tombstone {
                w.u8(data_type.code());
            }
        }
        w.len32(delete_operations.len());
        for (index, operation) in delete_operations {
            w.u64(*index);
            w.u64(*operation);
        }
        w.u64(*fence_floor);
    })
}

/// Reads [`encode_snapshot`]'s bytes.
pub fn decode_snapshot(bytes: &[u8], limits: &TabletLimits) -> Result<RegionContent, DecodeError> {
    let (magic, mut r) = envelope::open(
        bytes,
        &[
            SNAPSHOT_MAGIC,
            SNAPSHOT_MAGIC_WITHOUT_FLOOR,
            SNAPSHOT_MAGIC_WITHOUT_OPERATIONS,
            SNAPSHOT_MAGIC_WITHOUT_RANGES,
            SNAPSHOT_MAGIC_WITHOUT_DELETIONS,
        ],
    )
    .map_err(|e| DecodeError {
        reason: format!("region snapshot: {}", e.reason),
        ..e
    })?;
    let with_floor = magic == 0;
    let with_operations = magic <= 1;
    let with_ranges = magic <= 2;
    let with_deletions = magic <= 3;
    let index = r.u64()?;
    let tablets = decode_snapshot_tablets(&mut r, limits)?;
    let tombstones = if with_deletions {
        decode_snapshot_tombstones(&mut r, index, with_ranges, limits)?
    } else {
        Vec::new()
    };
    let delete_operations = if with_operations {
        decode_snapshot_operations(&mut r, index)?
    } else {
        Vec::new()
    };
    let fence_floor = if with_floor { r.u64()? } else { 0 };
    r.finish()?;
    Ok(RegionContent {
        applied_index: index,
        tablets,
        tombstones,
        delete_operations,
        fence_floor,
    })
}

/// The command of a snapshot whose bytes `bytes` begin at `start` in the snapshot; its errors'
/// offsets are offsets in the whole snapshot.
fn snapshot_command(
    bytes: &[u8],
    start: usize,
    limits: &TabletLimits,
) -> Result<RegionCommand, DecodeError> {
    RegionCommand::decode(bytes, limits).map_err(|e| DecodeError {
        offset: (start as u64) + e.offset,
        reason: e.reason,
    })
}

/// The snapshot's tablets: `u32 tablets, tablets × { u32 length, InsertTablet command bytes }`.
fn decode_snapshot_tablets(
    r: &mut Reader<'_>,
    limits: &TabletLimits,
) -> Result<Vec<Tablet>, DecodeError> {
    // Each tablet is at least its u32 length.
    let count = r.count(4)?;
    let mut tablets = Vec::new();
    for _ in 0..count {
        let start = envelope::MAGIC_LEN + r.position() + 4;
        match snapshot_command(r.bytes32()?, start, limits)? {
            RegionCommand::InsertTablet { tablet, .. } => tablets.push(tablet),
            _ => {
                return Err(DecodeError {
                    offset: start as u64,
                    reason: "snapshot holds a command that is not a tablet".into(),
                })
            }
        }
    }
    Ok(tablets)
}

/// The snapshot's deletions (`FPRSNAP2` and later; DeleteData ones from `FPRSNAP4`), none newer
/// than the snapshot's applied index `index`: `u32 deletions, deletions × { u64 log index, u32
/// length, command bytes, [DeleteData: u8 the series' type] }`.
fn decode_snapshot_tombstones(
    r: &mut Reader<'_>,
    index: u64,
    with_ranges: bool,
    limits: &TabletLimits,
) -> Result<Vec<Tombstone>, DecodeError> {
    let count = r.count(12)?;
    let mut tombstones = Vec::new();
    for _ in 0..count {
        let log_index = r.u64()?;
        if log_index > index {
            return r.error("deletion newer than the snapshot");
        }
        let start = envelope::MAGIC_LEN + r.position() + 4;
        match snapshot_command(r.bytes32()?, start, limits)? {
            RegionCommand::DeleteSeries { series, deletion } if series.len() == 1 => {
                let (device, measurement) = series.into_iter().next().expect("one series");
                tombstones.push(Tombstone::Series {
                    device,
                    measurement,
                    index: log_index,
                    deletion,
                });
            }
            RegionCommand::DeleteDatabase { database, deletion } => {
                tombstones.push(Tombstone::Database {
                    database,
                    index: log_index,
                    deletion,
                })
            }
            RegionCommand::DeleteData {
                series, start, end, ..
            } if series.len() == 1 && with_ranges => {
                let (device, measurement) = series.into_iter().next().expect("one series");
                tombstones.push(Tombstone::Range {
                    device,
                    measurement,
                    data_type: r.data_type()?,
                    start,
                    end,
                    index: log_index,
                });
            }
            _ => {
                return Err(DecodeError {
                    offset: start as u64,
                    reason: "snapshot deletion is not one deletion".into(),
                })
            }
        }
    }
    Ok(tombstones)
}

/// The `deleteData` operations the snapshot remembers (`FPRSNAP5` and later), at most
/// [`DELETE_OPERATIONS_KEPT`], none newer than its applied index `index`: `u32 operations,
/// operations × { u64 log index, u64 operation id }`.
fn decode_snapshot_operations(
    r: &mut Reader<'_>,
    index: u64,
) -> Result<Vec<(u64, u64)>, DecodeError> {
    let count = r.count(16)?;
    if count > DELETE_OPERATIONS_KEPT {
        return r.error(format!(
            "{count} deleteData operations; at most {DELETE_OPERATIONS_KEPT} are kept"
        ));
    }
    let mut delete_operations = Vec::new();
    for _ in 0..count {
        let (log_index, operation) = (r.u64()?, r.u64()?);
        if log_index > index {
            return r.error("deleteData operation newer than the snapshot");
        }
        delete_operations.push((log_index, operation));
    }
    Ok(delete_operations)
}
