//! The crate's error type.

/// Why bytes did not decode (or decompress).
///
/// Every decoder answers garbage, truncated or mismatched input with this error and never panics.
/// `offset` counts bytes from the start of the slice handed to the public function
/// ([`decode_column`](crate::decode_column), [`decode_timestamps`](crate::decode_timestamps),
/// [`decompress`](crate::decompress)); inside a bit stream it is the byte holding the bad bit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("codec error at byte {offset}: {reason}")]
pub struct CodecError {
    /// Byte offset of the problem in the decoded slice.
    pub offset: usize,
    /// What check failed, with the values involved.
    pub reason: String,
}

/// The result of a decode.
pub type Result<T> = std::result::Result<T, CodecError>;

impl CodecError {
    /// An error at `offset`.
    pub(crate) fn new(offset: usize, reason: impl Into<String>) -> CodecError {
        CodecError {
            offset,
            reason: reason.into(),
        }
    }
}
