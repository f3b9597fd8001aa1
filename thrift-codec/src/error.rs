//! What can be wrong with a frame.

/// Result of reading Thrift.
pub type Result<T> = std::result::Result<T, Error>;

/// Malformed or unacceptable input. Every variant says where and why, so a server can answer it
/// with a clear message and go on serving the connection's other requests or close it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The message ends before a value it announced.
    #[error("message truncated at byte {at}: {wanted} more bytes wanted, {left} left")]
    Truncated {
        /// Offset in the message.
        at: usize,
        /// Bytes the value needs.
        wanted: usize,
        /// Bytes left.
        left: usize,
    },
    /// A value that no correct peer sends (an unknown type code, a negative length, a varint
    /// too long, invalid UTF-8, a container longer than the bytes left, ...).
    #[error("malformed message at byte {at}: {reason}")]
    Malformed {
        /// Offset in the message.
        at: usize,
        /// What is wrong.
        reason: String,
    },
    /// Structs and containers nested deeper than [`crate::DEPTH_MAX`].
    #[error("nesting deeper than {0} levels")]
    TooDeep(usize),
    /// A frame length prefix that is zero or negative.
    #[error("bad frame: {0}")]
    BadFrame(String),
    /// A well-formed value over a limit of the reader's caller (a container with more
    /// elements, or a string with more bytes, than the call accepts).
    #[error("{0}")]
    OverLimit(String),
    /// A frame longer than the configured limit.
    #[error("frame of {length} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge {
        /// Announced length.
        length: usize,
        /// The limit.
        max: usize,
    },
}
