//! Fencepost's shared vocabulary: the IoTDB tree-model data types, tablets, status codes and the
//! partition math every node must agree on (design §2, §3).
//!
//! It also holds the one byte codec ([`codec`]), the one sealed-file envelope ([`envelope`]),
//! the one durable file replacement ([`durable`]) every node uses, and the open-files limit
//! ([`process`]) both node binaries raise.
//!
//! Architecture invariant: this crate does no networking, no async and knows no server (its only
//! file I/O is [`durable`]); the client (`session`) may depend on it.
#![deny(missing_docs)]

pub mod aggregate;
mod batch;
pub mod codec;
pub mod date;
pub mod durable;
pub mod envelope;
mod partition;
pub mod path;
pub mod process;
mod status;
pub mod table;
mod tablet;
pub mod views;

pub use batch::{merge as merge_batches, SeriesBatch, SeriesPath};
pub use partition::{series_slot, time_slot, PartitionConfig, FETCH_PARTITIONS_SLOTS_MAX};
pub use status::{LeaseFencedRetryPolicy, Status, StatusCode};
pub use tablet::{
    blob_from_hex, retain_points, Bitmap, Column, DataType, Tablet, TabletError, TabletLimits,
    Value, NULL_DATE,
};
