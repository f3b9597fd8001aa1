//! In-memory columnar series buffers for one time partition, with rollback marks (design §2, §5).
//!
//! A [`MemTable`] takes tablets ([`MemTable::insert_tablet`]), answers raw and last-point reads,
//! and rolls back to a [`Mark`] exactly, so the storage engine can undo every fragment of a failed
//! write attempt. Writes are upserts keyed by (series, timestamp), the value written last winning;
//! each series appends in insertion order and resolves upserts when read or frozen (IoTDB's
//! TVList). [`MemTable::freeze`] turns it into a sorted, deduplicated [`FrozenMemTable`] for
//! flushing.
//!
//! Architecture invariant: this crate does no I/O, starts no thread, and knows nothing of the WAL
//! or of raft. It depends only on `common`.
#![deny(missing_docs)]

mod error;
mod frozen;
mod memtable;
mod series;

pub use error::{ConfigError, MemTableError, Result};
pub use frozen::{FrozenMemTable, SeriesData};
pub use memtable::{Mark, MemTable, MemTableConfig};
pub use series::{
    estimated_point_bytes, SERIES_OVERHEAD_BYTES, TEXT_VALUE_OVERHEAD_BYTES, TIMESTAMP_BYTES,
};
