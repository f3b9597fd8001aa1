//! The storage engine (design §5 step 5): a region's committed commands become memtable rows,
//! split by time partition, gated by the metadata lease per fragment and rolled back as a whole
//! when any fragment fails; memtables flush to sealed files; queries merge all of them.
//!
//! Architecture invariant: the engine does no network I/O, runs no async runtime and never reads a
//! metadata cache; everything an apply needs is in the command. Its Cargo dependencies (`common`,
//! `wal`, `memtable`; no tokio, no wire types) hold this, checked by `scripts/test.sh`.
#![deny(missing_docs)]

mod command;
mod compaction;
mod digest;
mod error;
mod files;
mod lease_gate;
mod manifest;
mod region;
mod sealed;

pub use codec::{Choice, Compressor, Encoding, SeriesCodec};
pub use command::{Deletion, RegionCommand};
pub use common::codec::DecodeError;
pub use compaction::{CompactionConfig, CompactionReport, StorageStats};
pub use error::{Result, StorageError};
pub use files::{FileCache, FileId, OPEN_FILES_MAX_DEFAULT};
pub use lease_gate::{LeaseFenced, LeaseGate, ManualGate, OpenGate};
pub use manifest::{FileEntry, Manifest, Tombstone, DELETE_OPERATIONS_KEPT};
pub use region::{
    AggregateWork, ApplyOutcome, DataRegion, RegionContent, RegionDigest, StorageConfig,
};
pub use sealed::{ChunkIndex, PageIndex, SealedFile, SealedOptions, SeriesCodecs, Stats};
