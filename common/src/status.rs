//! IoTDB status codes (design §3). Numbers are IoTDB's; a number is never reused for another meaning.

use std::fmt;

/// A status code with IoTDB's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum StatusCode {
    /// 200: the operation succeeded.
    Success = 200,
    /// 300: the statement or call is one this server does not run.
    UnsupportedOperation = 300,
    /// 302: several sub-operations failed; the sub-statuses say which.
    MultipleError = 302,
    /// 305: a bug or an unexpected failure inside the server.
    InternalServerError = 305,
    /// 400: the request succeeded, but another node is the better target next time.
    RedirectionRecommend = 400,
    /// 507: metadata is missing or inconsistent (unknown database, series, region).
    MetadataError = 507,
    /// 535: the node's metadata lease is fenced; not retried by the server (queries, cache lookups).
    MetadataLeaseFenced = 535,
    /// 536: the node's metadata lease is fenced; the write path retries, here or elsewhere.
    MetadataLeaseFencedRetryRequired = 536,
    /// 550: the table-model table does not exist.
    TableNotExists = 550,
    /// 551: the table-model table exists already.
    TableAlreadyExists = 551,
    /// 600: the node is read-only (e.g. after an fsync failure).
    SystemReadOnly = 600,
    /// 606: the write was rejected, e.g. by a memory or size limit.
    WriteProcessReject = 606,
    /// 614: a value's type does not match the series' type.
    DataTypeMismatch = 614,
    /// 700: the request is malformed (shape, path or value out of range).
    IllegalParameter = 700,
    /// 801: wrong user name or password; never retried.
    WrongLoginPassword = 801,
    /// 802: the session has not logged in.
    NotLogin = 802,
    /// 803: the user may not do this (only root manages other users).
    NoPermission = 803,
    /// 804: no such user.
    UserNotExist = 804,
    /// 805: the user exists already.
    UserAlreadyExist = 805,
    /// 822: too many failed logins; the user is locked for a while. Never retried.
    UserLoginLocked = 822,
    /// 712: an internal request timed out.
    InternalRequestTimeOut = 712,
    /// 720: the query ran past its deadline (`query_timeout_ms`, or the client's own); it was
    /// stopped and closed. Not retried: the same query would take as long again.
    QueryTimeout = 720,
    /// 714: `KILL QUERY` named no query running (or not the user's).
    NoSuchQuery = 714,
    /// 715: the query was killed (`KILL QUERY`, `cancelOperation`); it was stopped and closed.
    QueryWasKilled = 715,
    /// 905: the region's leader changed; retry on the new leader.
    RegionLeaderChangeError = 905,
    /// 1007: a DataNode could not be reached.
    CanNotConnectDatanode = 1007,
}

impl StatusCode {
    /// Every code, for tables and round-trip tests.
    pub const ALL: [StatusCode; 26] = [
        StatusCode::Success,
        StatusCode::UnsupportedOperation,
        StatusCode::MultipleError,
        StatusCode::InternalServerError,
        StatusCode::RedirectionRecommend,
        StatusCode::MetadataError,
        StatusCode::MetadataLeaseFenced,
        StatusCode::MetadataLeaseFencedRetryRequired,
        StatusCode::TableNotExists,
        StatusCode::TableAlreadyExists,
        StatusCode::SystemReadOnly,
        StatusCode::WriteProcessReject,
        StatusCode::DataTypeMismatch,
        StatusCode::IllegalParameter,
        StatusCode::WrongLoginPassword,
        StatusCode::NotLogin,
        StatusCode::NoPermission,
        StatusCode::UserNotExist,
        StatusCode::UserAlreadyExist,
        StatusCode::UserLoginLocked,
        StatusCode::InternalRequestTimeOut,
        StatusCode::QueryTimeout,
        StatusCode::NoSuchQuery,
        StatusCode::QueryWasKilled,
        StatusCode::RegionLeaderChangeError,
        StatusCode::CanNotConnectDatanode,
    ];

    /// Answers that say nothing against the request itself, only against where or when it was
    /// sent: a session, a coordinator and a relaying DataNode retry them on another DataNode (or
    /// the same one later). Every other code is final.
    pub const RETRYABLE: [StatusCode; 5] = [
        StatusCode::MetadataLeaseFencedRetryRequired,
        StatusCode::RegionLeaderChangeError,
        StatusCode::InternalRequestTimeOut,
        StatusCode::WriteProcessReject,
        StatusCode::CanNotConnectDatanode,
    ];

    /// The IoTDB number.
    pub fn code(self) -> u16 {
        self as u16
    }

    /// The number as protobuf carries it.
    pub fn wire(self) -> i32 {
        i32::from(self.code())
    }

    /// The code for a protobuf number, if Fencepost knows it.
    pub fn from_wire(code: i32) -> Option<StatusCode> {
        StatusCode::from_code(u16::try_from(code).ok()?)
    }

    /// Whether the code is in [`StatusCode::RETRYABLE`].
    pub fn is_retryable(self) -> bool {
        StatusCode::RETRYABLE.contains(&self)
    }

    /// The code for an IoTDB number, if Fencepost knows it.
    pub fn from_code(code: u16) -> Option<StatusCode> {
        StatusCode::ALL.into_iter().find(|c| c.code() == code)
    }

    /// IoTDB's upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            StatusCode::Success => "SUCCESS_STATUS",
            StatusCode::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            StatusCode::MultipleError => "MULTIPLE_ERROR",
            StatusCode::InternalServerError => "INTERNAL_SERVER_ERROR",
            StatusCode::RedirectionRecommend => "REDIRECTION_RECOMMEND",
            StatusCode::MetadataError => "METADATA_ERROR",
            StatusCode::MetadataLeaseFenced => "METADATA_LEASE_FENCED",
            StatusCode::MetadataLeaseFencedRetryRequired => "METADATA_LEASE_FENCED_RETRY_REQUIRED",
            StatusCode::TableNotExists => "TABLE_NOT_EXISTS",
            StatusCode::TableAlreadyExists => "TABLE_ALREADY_EXISTS",
            StatusCode::SystemReadOnly => "SYSTEM_READ_ONLY",
            StatusCode::WriteProcessReject => "WRITE_PROCESS_REJECT",
            StatusCode::DataTypeMismatch => "DATA_TYPE_MISMATCH",
            StatusCode::IllegalParameter => "ILLEGAL_PARAMETER",
            StatusCode::WrongLoginPassword => "WRONG_LOGIN_PASSWORD",
            StatusCode::NotLogin => "NOT_LOGIN",
            StatusCode::NoPermission => "NO_PERMISSION",
            StatusCode::UserNotExist => "USER_NOT_EXIST",
            StatusCode::UserAlreadyExist => "USER_ALREADY_EXIST",
            StatusCode::UserLoginLocked => "USER_LOGIN_LOCKED",
            StatusCode::InternalRequestTimeOut => "INTERNAL_REQUEST_TIME_OUT",
            StatusCode::QueryTimeout => "QUERY_TIMEOUT",
            StatusCode::NoSuchQuery => "NO_SUCH_QUERY",
            StatusCode::QueryWasKilled => "QUERY_WAS_KILLED",
            StatusCode::RegionLeaderChangeError => "REGION_LEADER_CHANGE_ERROR",
            StatusCode::CanNotConnectDatanode => "CAN_NOT_CONNECT_DATANODE",
        }
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code(), self.name())
    }
}

/// How a fenced lease is reported: IoTDB's `LeaseFencedRetryPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeaseFencedRetryPolicy {
    /// Fail closed, never retried by the server: 535 (queries, cache lookups).
    None,
    /// The write path retries until the lease is back or another node takes the write: 536.
    RetryUntilSuccess,
}

impl LeaseFencedRetryPolicy {
    /// The status code this policy maps to.
    pub fn status_code(self) -> StatusCode {
        match self {
            LeaseFencedRetryPolicy::None => StatusCode::MetadataLeaseFenced,
            LeaseFencedRetryPolicy::RetryUntilSuccess => {
                StatusCode::MetadataLeaseFencedRetryRequired
            }
        }
    }
}

/// A status code with a human-readable message, and what a caller may do next: retry, go to
/// another node, or read the outcome of each part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The code.
    pub code: StatusCode,
    /// What happened, for a person.
    pub message: String,
    /// The answering node judges the request worth retrying (536, a leader change, a lost
    /// connection, a deadline).
    pub need_retry: bool,
    /// `host:port` to go to instead: the leader, with 400 REDIRECTION_RECOMMEND or 905.
    pub redirect: Option<String>,
    /// With 302 MULTIPLE_ERROR: the outcome of each part, in request order.
    pub parts: Vec<Status>,
}

impl Status {
    /// A status with a message.
    pub fn new(code: StatusCode, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
            need_retry: false,
            redirect: None,
            parts: Vec::new(),
        }
    }

    /// 200 with an empty message.
    pub fn ok() -> Status {
        Status::new(StatusCode::Success, "")
    }

    /// The same status, marked worth retrying.
    pub fn retry(mut self) -> Status {
        self.need_retry = true;
        self
    }

    /// True for 200.
    pub fn is_ok(&self) -> bool {
        self.code == StatusCode::Success
    }

    /// Whether the status carries `code`.
    pub fn is(&self, code: StatusCode) -> bool {
        self.code == code
    }

    /// Whether the code is one of [`StatusCode::RETRYABLE`].
    pub fn is_retryable(&self) -> bool {
        self.code.is_retryable()
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_iotdb_numbers_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in StatusCode::ALL {
            assert!(seen.insert(code.code()), "{code} reused");
            assert_eq!(StatusCode::from_code(code.code()), Some(code));
        }
        assert_eq!(StatusCode::MetadataLeaseFenced.code(), 535);
        assert_eq!(StatusCode::MetadataLeaseFencedRetryRequired.code(), 536);
        assert_eq!(StatusCode::DataTypeMismatch.code(), 614);
        assert_eq!(StatusCode::from_code(1), None);
    }

    #[test]
    fn policy_maps_to_535_and_536() {
        assert_eq!(LeaseFencedRetryPolicy::None.status_code().code(), 535);
        assert_eq!(
            LeaseFencedRetryPolicy::RetryUntilSuccess
                .status_code()
                .code(),
            536
        );
    }
}
