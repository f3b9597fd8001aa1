//! Fencepost's shared vocabulary: the IoTDB tree-model data types, tablets, status codes and the
//! partition math every node must agree on (DESIGN §2, §3).
//!
//! Architecture invariant: this crate does no I/O and knows no server; the client (`session`) may
//! depend on it.
#![deny(missing_docs)]

mod partition;
mod status;
mod tablet;

pub use partition::{series_slot, time_slot, PartitionConfig};
pub use status::{LeaseFencedRetryPolicy, Status, StatusCode};
pub use tablet::{Bitmap, Column, DataType, Tablet, TabletError, TabletLimits, Value};
