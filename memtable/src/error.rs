//! The memtable's errors: one enum per operation whose callers react differently.

use common::DataType;

/// Why [`MemTable::insert_tablet`](crate::MemTable::insert_tablet) refused a tablet. A refused
/// call has changed nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemTableError {
    /// A measurement already holds values of another type in this memtable (status 614
    /// DATA_TYPE_MISMATCH at the service layer).
    #[error("series {device}.{measurement} holds {existing} values; cannot write {requested}")]
    TypeMismatch {
        /// The tablet's device.
        device: String,
        /// The measurement whose type differs.
        measurement: String,
        /// The type the series already has in this memtable.
        existing: DataType,
        /// The type the tablet declares.
        requested: DataType,
    },
}

/// The result of a memtable write.
pub type Result<T> = std::result::Result<T, MemTableError>;

/// Why a [`MemTableConfig`](crate::MemTableConfig) is unusable; reported once at start-up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `flush_threshold_bytes` is zero, which would flush after every write.
    #[error("memtable flush_threshold_bytes must be greater than 0")]
    FlushThresholdZero,
}
