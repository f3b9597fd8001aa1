//! Segmented append-only log: record framing with CRC32, group commit, recovery, truncation.
//!
//! `wal` is a plain synchronous library. It knows nothing of raft, of the storage engine or of
//! any other Fencepost crate: a record is an index and an opaque payload.
//!
//! # Layout
//! A log is a directory of segment files named `{first_index:020}.wal`, plus a `LOCK` file.
//! Each segment starts with a 32-byte header (magic, format version, first index, CRC32) and
//! holds records back to back: a 16-byte header (CRC32, length word, index) and the payload. All
//! integers are little-endian. `docs/wal-format.md` at the repository root has the exact layout.
//!
//! # Durability
//! See [`Durability`]. Sealing a segment always fdatasyncs it, and a new segment appears under its
//! name only with a durable header, so whatever the mode, only the last segment can have a torn
//! tail after a crash.
//!
//! # Recovery
//! [`Wal::open`] checks every segment header and scans the last segment. A torn tail — a partial
//! last record, zeroed preallocated space, garbage after the last valid record with nothing valid
//! after it, or a batch whose last record is missing — is dropped silently and overwritten by
//! later appends. A bad record followed by a valid one, or any bad record in a sealed segment
//! (found when it is read), is [`Error::Corruption`] naming the file and byte offset. The log
//! never skips a record and never returns bytes that fail their checksum.
//!
//! One limit follows from having no commit marker: a record damaged after it was synced, when it
//! is the very last record of the log and nothing valid follows, looks exactly like a torn write
//! and is dropped as one.
//!
//! # Failure
//! After a failed write or fsync the log is poisoned: every later append and sync returns
//! [`Error::Poisoned`] until it is reopened. An fsync is never retried, because after a failed
//! fsync the kernel may have dropped the dirty pages and a second fsync can report success.
#![deny(missing_docs)]

pub mod direct;
mod error;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
mod iter;
mod log;
mod options;
mod segment;
mod spare;
mod sys;

pub use error::{Error, Result};
pub use iter::WalIter;
pub use log::{Wal, WalStats};
pub use options::{
    Durability, WalOptions, DEFAULT_BATCH_BYTES_MAX, DEFAULT_RECORD_BYTES_MAX,
    DEFAULT_SEGMENT_BYTES, SEGMENT_BYTES_MIN,
};
