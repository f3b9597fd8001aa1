//! The crate's error type.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in the log.
///
/// I/O failures carry the path they happened on and corruption names the segment file and the byte
/// offset of the first bad byte, so an operator can look at the exact spot.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call on `path` failed.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file or directory the call was made on.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// A file could not be opened because the process or the system ran out of file descriptors
    /// (`EMFILE`, `ENFILE`). Nothing was written and the log is not poisoned: a segment roll that
    /// meets it leaves the active segment as it was, and the append may be retried once
    /// descriptors are freed ([`Error::is_retryable`]).
    #[error("no file descriptor to open {}: {source}; nothing was written, retry", path.display())]
    OutOfDescriptors {
        /// The file that could not be opened.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// Bytes that were once written as valid records are no longer valid, or a record is missing
    /// where the layout says one must be. The log never skips such a record and never returns its
    /// bytes.
    #[error("corruption in {} at byte {offset}: {reason}", segment.display())]
    Corruption {
        /// The segment file.
        segment: PathBuf,
        /// Byte offset inside the segment file of the bad segment header or record.
        offset: u64,
        /// What check failed, with the values involved.
        reason: String,
    },

    /// A segment was written by a format version this build does not read.
    #[error("{} has format version {version}, this build reads versions 1 to {supported}", segment.display())]
    UnsupportedVersion {
        /// The segment file.
        segment: PathBuf,
        /// The version found in its header.
        version: u32,
        /// The newest version this build reads, the one it writes.
        supported: u32,
    },

    /// A payload is larger than `WalOptions::record_bytes_max`.
    #[error("record payload exceeds record_bytes_max")]
    RecordTooLarge,

    /// A batch's encoded size (payloads plus record headers) exceeds `WalOptions::batch_bytes_max`.
    #[error("batch exceeds batch_bytes_max")]
    BatchTooLarge,

    /// `append_batch` was called with no payloads; there is no first index to return.
    #[error("append_batch called with an empty batch")]
    EmptyBatch,

    /// An earlier write or fsync failed. The state of the file after a failed fsync is unknown (the
    /// kernel may have dropped the dirty pages), so the log refuses appends and syncs until it is
    /// reopened, which recovers from what is really on disk.
    #[error("the log is poisoned by an earlier I/O failure; reopen it to recover")]
    Poisoned,

    /// `iter_from` asked for an index that `truncate_prefix` already removed.
    #[error("index {index} was truncated away; the first readable index is {first_index}")]
    IndexCompacted {
        /// The requested index.
        index: u64,
        /// The lowest index still readable.
        first_index: u64,
    },

    /// `iter_from` asked for an index past the end of the log.
    #[error("index {index} is past the end of the log; the next index is {next_index}")]
    IndexBeyondEnd {
        /// The requested index.
        index: u64,
        /// The index the next append gets.
        next_index: u64,
    },

    /// Another `Wal` (in this or another process) has the directory open.
    #[error("{} is locked by another open log", dir.display())]
    Locked {
        /// The log directory.
        dir: PathBuf,
    },

    /// A `WalOptions` field is out of range.
    #[error("invalid option {field}: {reason}")]
    InvalidOptions {
        /// The field name.
        field: &'static str,
        /// Why it is rejected, with the value.
        reason: String,
    },
}

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Whether the call failed without changing the log, so that the same call may succeed
    /// later: [`Error::OutOfDescriptors`].
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::OutOfDescriptors { .. })
    }

    /// The error of opening `path`: [`Error::OutOfDescriptors`] when descriptors ran out, else
    /// an I/O error.
    pub(crate) fn opening(path: impl Into<PathBuf>, source: io::Error) -> Self {
        match source.raw_os_error() {
            Some(libc::EMFILE | libc::ENFILE) => Error::OutOfDescriptors {
                path: path.into(),
                source,
            },
            _ => Error::io(path, source),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corruption(segment: impl Into<PathBuf>, offset: u64, reason: String) -> Self {
        Error::Corruption {
            segment: segment.into(),
            offset,
            reason,
        }
    }
}
