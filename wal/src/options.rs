//! Configuration of a log.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::format::{RECORD_HEADER_BYTES, RECORD_PAYLOAD_BYTES_LIMIT, SEGMENT_HEADER_BYTES};

/// When appended bytes are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Every append is fdatasync'ed by its own caller before it returns.
    Sync,
    /// Concurrent appenders share one fdatasync: the first to wait becomes the syncer, waits up to
    /// `window` while other appenders are still writing, syncs, and wakes every appender whose bytes
    /// are now durable. Each append returns only once its bytes are durable. A lone appender does
    /// not pay the window: the syncer stops waiting as soon as nobody else is writing.
    GroupCommit {
        /// Longest time the syncer waits for appenders that are still writing.
        window: Duration,
    },
    /// Appends return once written; a background thread fdatasyncs every `interval`. A crash can
    /// lose up to about one interval of appends.
    Async {
        /// Time between background syncs.
        interval: Duration,
    },
    /// Appends are written with write(2) and never fsynced by the log except by an explicit
    /// `Wal::sync` (and when a segment is sealed, see `WalOptions::segment_bytes`).
    None,
}

/// Options of a log. Build with [`WalOptions::new`], change fields, and let [`crate::Wal::open`]
/// validate them.
#[derive(Debug, Clone)]
pub struct WalOptions {
    /// Directory holding the segment files; created if missing. One log per directory.
    pub dir: PathBuf,
    /// Size in bytes at which the active segment is sealed and a new one started; new segments are
    /// preallocated to this size. A batch never spans segments, so a segment holding a single large
    /// batch may grow past it. Sealing a segment fdatasyncs it in every durability mode, which keeps
    /// the invariant that only the last segment can have a torn tail. Default 64 MiB; at least 4 KiB.
    pub segment_bytes: u64,
    /// Largest payload in bytes of one record; a larger one is refused with
    /// [`Error::RecordTooLarge`]. Default 16 MiB; at most 2^31 − 1.
    pub record_bytes_max: u32,
    /// Largest encoded size in bytes of one `append_batch` (payloads plus 24 bytes of header per
    /// record); a larger batch is refused with [`Error::BatchTooLarge`]. Bounds the memory and the
    /// single write of one call. Default 64 MiB; at least `record_bytes_max` + 24.
    pub batch_bytes_max: u64,
    /// When appends become durable. Default `GroupCommit { window: 1 ms }`.
    pub durability: Durability,
    /// Preallocate segments with fallocate(2). Writing into preallocated space saves the file-size
    /// update on every fdatasync, which roughly doubles small durable appends on ext4. Default true.
    pub preallocate: bool,
    /// Write segments with `O_DIRECT` from an aligned buffer instead of through the page cache
    /// (see [`crate::direct`]): every record is copied once into the buffer, and the last,
    /// partly filled 4 KiB block is written again with the next batch. Falls back to the page
    /// cache where the file system refuses `O_DIRECT`. Default false.
    ///
    /// It pays for one writer appending large batches and syncing them itself (the raft logs:
    /// 1 MiB appends run at about twice the page cache's rate, at a tenth of its kernel CPU).
    /// It costs where many small appenders share a group commit: each appender's write then
    /// waits for the device under the writer lock, so fewer of them join one fsync (4 KiB × 4
    /// writers: about 0.7× the page cache's rate).
    pub direct_io: bool,
    /// Zero-fill the next segment on a background thread while the active one fills, and roll
    /// into it when it is ready (see `spare.rs`): fdatasync into written blocks needs no journal
    /// commit, where fallocated space needs one per sync (on ext4 about 120 µs against 230 µs
    /// for a 4 KiB append + fdatasync). Costs one extra sequential write of every segment.
    /// Only with `preallocate`. Default true.
    pub prefill_segments: bool,
    /// Bytes of records between two seek points: the log notes where records start (as it
    /// writes, recovers and reads them), at most one note per stride, so reading from the middle
    /// of a segment checks at most this many bytes of earlier records instead of everything
    /// from the segment's start. Costs 24 bytes of memory a stride. Default 1 MiB; at least 1.
    pub seek_stride_bytes: usize,
}

/// Default of [`WalOptions::segment_bytes`].
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;
/// Default of [`WalOptions::record_bytes_max`].
pub const DEFAULT_RECORD_BYTES_MAX: u32 = 16 << 20;
/// Default of [`WalOptions::batch_bytes_max`].
pub const DEFAULT_BATCH_BYTES_MAX: u64 = 64 << 20;
/// Default of [`WalOptions::seek_stride_bytes`].
pub const DEFAULT_SEEK_STRIDE_BYTES: usize = 1 << 20;
/// Smallest accepted [`WalOptions::segment_bytes`].
pub const SEGMENT_BYTES_MIN: u64 = 4096;

impl WalOptions {
    /// Options with every default, for a log in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        WalOptions {
            dir: dir.into(),
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            record_bytes_max: DEFAULT_RECORD_BYTES_MAX,
            batch_bytes_max: DEFAULT_BATCH_BYTES_MAX,
            durability: Durability::GroupCommit {
                window: Duration::from_millis(1),
            },
            preallocate: true,
            direct_io: false,
            prefill_segments: true,
            seek_stride_bytes: DEFAULT_SEEK_STRIDE_BYTES,
        }
    }

    /// Bytes of the zero-filled segments the log prepares (`segment_bytes`), or `None` when it
    /// prepares none (`prefill_segments` or `preallocate` off).
    pub(crate) fn prefilled_segment_bytes(&self) -> Option<u64> {
        (self.preallocate && self.prefill_segments).then_some(self.segment_bytes)
    }

    /// Checks every field; `Wal::open` calls it.
    pub fn validate(&self) -> Result<()> {
        fn invalid(field: &'static str, reason: String) -> Result<()> {
            Err(Error::InvalidOptions { field, reason })
        }
        if self.dir.as_os_str().is_empty() {
            return invalid("dir", "must not be empty".to_string());
        }
        if self.segment_bytes < SEGMENT_BYTES_MIN {
            return invalid(
                "segment_bytes",
                format!(
                    "{} is below the minimum {SEGMENT_BYTES_MIN}",
                    self.segment_bytes
                ),
            );
        }
        if self.seek_stride_bytes == 0 {
            return invalid("seek_stride_bytes", "must be at least 1".to_string());
        }
        // Offsets inside a segment are computed in u64 but handed to the kernel as off_t.
        if self.segment_bytes > i64::MAX as u64 / 2 {
            return invalid(
                "segment_bytes",
                format!("{} is too large", self.segment_bytes),
            );
        }
        if self.record_bytes_max == 0 || self.record_bytes_max > RECORD_PAYLOAD_BYTES_LIMIT {
            return invalid(
                "record_bytes_max",
                format!(
                    "{} is outside 1..={RECORD_PAYLOAD_BYTES_LIMIT}",
                    self.record_bytes_max
                ),
            );
        }
        let record_encoded = u64::from(self.record_bytes_max) + RECORD_HEADER_BYTES as u64;
        if self.batch_bytes_max < record_encoded {
            return invalid(
                "batch_bytes_max",
                format!(
                    "{} is below record_bytes_max + {RECORD_HEADER_BYTES} = {record_encoded}",
                    self.batch_bytes_max
                ),
            );
        }
        // A batch is written into one segment, growing it if needed: keep that growth bounded
        // and representable.
        if self.batch_bytes_max > i64::MAX as u64 / 4 - SEGMENT_HEADER_BYTES as u64 {
            return invalid(
                "batch_bytes_max",
                format!("{} is too large", self.batch_bytes_max),
            );
        }
        match self.durability {
            Durability::GroupCommit { window } if window > Duration::from_secs(1) => {
                return invalid(
                    "durability",
                    format!("group commit window {window:?} is above 1 s"),
                );
            }
            Durability::Async { interval } if interval.is_zero() => {
                return invalid("durability", "async interval must be positive".to_string());
            }
            _ => {}
        }
        Ok(())
    }
}
