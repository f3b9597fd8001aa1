//! Errors of converting wire messages into internal types.

/// Result of a wire conversion.
pub type Result<T> = std::result::Result<T, Error>;

/// A wire value that does not map to an internal one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A data type code outside IoTDB's table.
    #[error("unknown data type code {0}")]
    UnknownDataType(i32),
    /// An address that is not `host:port` with a port in 1..=65535 (0 only where allowed).
    #[error("bad endpoint {address:?}: {reason}")]
    BadEndpoint {
        /// The text given.
        address: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A table column category outside IoTDB's (TAG 0, FIELD 1, ATTRIBUTE 2).
    #[error("unknown column category {0}")]
    UnknownCategory(u32),
    /// A required message field was absent.
    #[error("missing field {0}")]
    MissingField(&'static str),
    /// A list that must be parallel to another (one entry per entry) is not.
    #[error("{list} is not parallel to {to}")]
    NotParallel {
        /// The list of the wrong length.
        list: &'static str,
        /// The list it must follow.
        to: &'static str,
    },
}
