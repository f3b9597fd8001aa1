//! Storage-engine errors, classified the way the apply path needs them: recoverable (retry the
//! same entry later) versus deterministic (record the result, move on).

use std::path::PathBuf;

use common::{DataType, LeaseFencedRetryPolicy, Status, StatusCode, TabletError};

/// What can go wrong in the storage engine.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The metadata lease is fenced; nothing of the attempt is left behind.
    #[error("metadata lease fenced ({policy:?})")]
    MetadataLeaseFenced {
        /// How the caller should treat it: 535 or 536.
        policy: LeaseFencedRetryPolicy,
    },
    /// The tablet is malformed.
    #[error("invalid tablet: {0}")]
    InvalidTablet(#[from] TabletError),
    /// A column's type differs from the series' existing type.
    #[error(
        "data type mismatch for {device}.{measurement}: series is {existing}, write is {requested}"
    )]
    DataTypeMismatch {
        /// Device path.
        device: String,
        /// Measurement name.
        measurement: String,
        /// The series' type.
        existing: DataType,
        /// The write's type.
        requested: DataType,
    },
    /// A log entry or file could not be decoded.
    #[error("corrupt {what} in {path} at offset {offset}: {reason}")]
    Corruption {
        /// What was being read.
        what: &'static str,
        /// The file (or `<entry>` for a log payload).
        path: PathBuf,
        /// Byte offset of the bad data.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// An I/O error on a file the engine owns.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The fencing token: the insert was validated against metadata older than a deletion of its
    /// target that this region has applied. Deterministic (every replica holds the same
    /// deletions); the client retries, and its coordinator validates against fresh metadata.
    #[error(
        "{target} was deleted at metadata version {deleted}; this write was validated against \
         version {validated}: retry with fresh metadata"
    )]
    StaleMetadata {
        /// The deleted series or database.
        target: String,
        /// The insert's metadata version.
        validated: u64,
        /// The deletion's.
        deleted: u64,
    },
    /// An injected failure (failpoints in tests): behaves like a crash of the current step.
    #[error("injected failure at {0}")]
    Injected(&'static str),
    /// A compaction stopped because the region is closing ([`DataRegion::cancel_compactions`]):
    /// its output was removed and its inputs are untouched.
    ///
    /// [`DataRegion::cancel_compactions`]: crate::DataRegion::cancel_compactions
    #[error("compaction cancelled: the region is closing")]
    CompactionCancelled,
}

/// `pub type Result<T>` for the storage engine.
pub type Result<T> = std::result::Result<T, StorageError>;

impl StorageError {
    /// True when applying the same entry again later may succeed (design §5 step 3): a fenced
    /// lease, an I/O failure. Everything else is deterministic: every replica reaches the same
    /// verdict from the same entry and prior state.
    pub fn is_recoverable(&self) -> bool {
        matches!(
            self,
            StorageError::MetadataLeaseFenced { .. }
                | StorageError::Io { .. }
                | StorageError::Injected(_)
        )
    }

    /// The IoTDB status for this error.
    pub fn status(&self) -> Status {
        let code = match self {
            StorageError::MetadataLeaseFenced { policy } => policy.status_code(),
            StorageError::InvalidTablet(_) => StatusCode::IllegalParameter,
            StorageError::DataTypeMismatch { .. } => StatusCode::DataTypeMismatch,
            // The client must retry (the write is lost otherwise); the coordinator turns it into
            // 536 with need_retry once its caches moved on.
            StorageError::StaleMetadata { .. } => StatusCode::MetadataLeaseFencedRetryRequired,
            StorageError::Corruption { .. }
            | StorageError::Io { .. }
            | StorageError::Injected(_)
            | StorageError::CompactionCancelled => StatusCode::InternalServerError,
        };
        Status::new(code, self.to_string())
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> StorageError {
        StorageError::Io {
            path: path.into(),
            source,
        }
    }
}
