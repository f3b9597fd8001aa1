//! Segmented append-only log: record framing with CRC32, group commit, recovery, truncation.
//!
//! `wal` is a plain synchronous library. It knows nothing of raft, of the storage engine or of
//! any other Fencepost crate: a record is an index and an opaque payload.
//!
//! # Layout
//! A log is a directory of segment files named `{first_index:020}.wal`, plus a `LOCK` file.
//! Each segment starts with a 32-byte header (magic, format version, first index, CRC32) and
//! holds records back to back: a 24-byte header (CRC32, length word, index, index of the first
//! record of the record's batch) and the payload. All integers are little-endian.
//! `docs/wal-format.md` at the repository root has the exact layout, and that of format version 1
//! (16-byte record headers without the batch), which the log still reads; it appends only to
//! segments of the current version.
//!
//! # Durability
//! See [`Durability`]. Sealing a segment always fdatasyncs it, and a new segment appears under its
//! name only with a durable header, so whatever the mode, only the last segment can have a torn
//! tail after a crash.
//!
//! # Recovery
//! [`Wal::open`] checks every segment header and scans the last segment. A torn tail is dropped
//! silently and overwritten by later appends: a partial last record, zeroed preallocated space,
//! garbage after the last valid record with nothing valid after it, a batch whose last record is
//! missing, and the last batch with a hole in it followed only by more of that batch's own
//! records (the blocks of one write reach the disk in any order, so a crash during it can lose a
//! block and keep a later one). A bad record followed by a valid record of any other batch, or any
//! bad record in a sealed segment (found when it is read), is [`Error::Corruption`] naming the
//! file and byte offset. The log never skips a record and never returns bytes that fail their
//! checksum.
//!
//! One limit follows from having no commit marker: damage to the last batch of the log after it
//! was synced, with nothing of a later batch after it, looks exactly like a torn write of that
//! batch and is dropped as one. Conversely, a crash that tears an unsynced batch which another
//! unsynced batch follows is reported as corruption: from the bytes alone, the hole could as
//! well be damage to a batch that was synced before the later one was written.
//!
//! # Failure
//! After a failed write or fsync the log is poisoned: every later append and sync returns
//! [`Error::Poisoned`] until it is reopened. An fsync is never retried, because after a failed
//! fsync the kernel may have dropped the dirty pages and a second fsync can report success.
#![deny(missing_docs)]

mod appender;
pub mod direct;
mod error;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
mod iter;
mod log;
mod names;
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
