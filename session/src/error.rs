//! Errors of the session. Callers react to three kinds differently: [`SessionError::LeaseFenced`]
//! (535: the node's metadata may be stale; never retried), [`SessionError::Status`] (a final
//! IoTDB status such as 614 or 700) and [`SessionError::RetriesExhausted`] (every retryable
//! failure, wrapped around the last one once the attempts run out).

use common::StatusCode;

/// Result of a session call.
pub type Result<T> = std::result::Result<T, SessionError>;

/// Why a session call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SessionError {
    /// The configuration or endpoint list is unusable.
    #[error("invalid session config: {0}")]
    Config(String),
    /// A tablet failed validation before anything was sent.
    #[error("invalid tablet: {0}")]
    InvalidTablet(#[from] common::TabletError),
    /// An argument failed validation before anything was sent (path, batch size).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The server answered with a final IoTDB status (e.g. 614 DATA_TYPE_MISMATCH, 700, 507).
    #[error("status {code}: {message}")]
    Status {
        /// The IoTDB status code.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// 535 METADATA_LEASE_FENCED: the answering DataNode's metadata lease is fenced. Never retried,
    /// here or elsewhere: a query must not silently move on from a node that cannot vouch for its
    /// metadata.
    #[error("DataNode {endpoint} is fenced (535): {message}")]
    LeaseFenced {
        /// The DataNode that answered.
        endpoint: String,
        /// The server's message.
        message: String,
    },
    /// The DataNode could not be reached, or the connection broke (retried elsewhere).
    #[error("cannot reach DataNode {endpoint}: {message}")]
    Connection {
        /// The DataNode tried.
        endpoint: String,
        /// What the transport said.
        message: String,
    },
    /// No answer within `request_timeout_ms` (retried elsewhere).
    #[error("DataNode {endpoint} did not answer within {timeout_ms} ms")]
    Timeout {
        /// The DataNode tried.
        endpoint: String,
        /// The timeout that expired.
        timeout_ms: u64,
    },
    /// A gRPC failure that is not a connection problem (e.g. UNIMPLEMENTED); final.
    #[error("RPC to {endpoint} failed: {code:?}: {message}")]
    Rpc {
        /// The DataNode tried.
        endpoint: String,
        /// The gRPC code.
        code: tonic::Code,
        /// The gRPC message.
        message: String,
    },
    /// The server's answer is malformed (a missing field, a column of the wrong length).
    #[error("malformed answer: {0}")]
    Protocol(String),
    /// Every attempt failed with a retryable error.
    #[error("gave up after {attempts} attempts; last: {last}")]
    RetriesExhausted {
        /// Attempts made, the first included.
        attempts: u32,
        /// The last failure.
        last: Box<SessionError>,
    },
    /// The blocking wrapper could not build its runtime.
    #[error("cannot build the runtime: {0}")]
    Runtime(String),
}

impl SessionError {
    /// The IoTDB status code of this error, where one applies: the server's for
    /// [`SessionError::Status`], 535 for a fenced lease, 1007 for a connection failure, 712 for a
    /// timeout, 700 for a request refused before sending, the last failure's after retries.
    pub fn code(&self) -> Option<i32> {
        let code = |c: StatusCode| Some(i32::from(c.code()));
        match self {
            SessionError::Status { code, .. } => Some(*code),
            SessionError::LeaseFenced { .. } => code(StatusCode::MetadataLeaseFenced),
            SessionError::Connection { .. } => code(StatusCode::CanNotConnectDatanode),
            SessionError::Timeout { .. } => code(StatusCode::InternalRequestTimeOut),
            SessionError::InvalidTablet(_) | SessionError::InvalidArgument(_) => {
                code(StatusCode::IllegalParameter)
            }
            SessionError::RetriesExhausted { last, .. } => last.code(),
            SessionError::Config(_)
            | SessionError::Rpc { .. }
            | SessionError::Protocol(_)
            | SessionError::Runtime(_) => None,
        }
    }
}
