//! Session configuration.

use crate::error::{Result, SessionError};

/// Upper bound on `max_attempts`: a limit on retries, so a misconfiguration cannot spin forever.
pub const MAX_ATTEMPTS_LIMIT: u32 = 10_000;

/// Who the session logs in as, how it retries and how long it waits. Validated once by
/// [`crate::Session::connect`].
#[derive(Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// The user every call is made as. Default `root`.
    pub username: String,
    /// Its password, sent with every call (the DataNode checks it with the ConfigNode and
    /// remembers it for a while). Default `root`.
    pub password: String,
    /// Attempts per call, the first included (1..=10,000). Default 60, IoTDB's `MAX_RETRY_COUNT`.
    pub max_attempts: u32,
    /// Wait between attempts, in milliseconds (1..=60,000); it grows by one interval per full
    /// round over the endpoints, up to four intervals. Default 500.
    pub retry_interval_ms: u64,
    /// Deadline of one RPC (connecting included), in milliseconds (1..=600,000). Default 10,000.
    pub request_timeout_ms: u64,
    /// Largest gRPC message sent or taken, in bytes (1 MiB..=2 GiB); keep it within the
    /// DataNodes' `dn_rpc_max_message_bytes`. Default 64 MiB.
    pub max_message_bytes: usize,
    /// Points of one series asked per query RPC (1..=10,000,000); `query_raw` pages through
    /// larger results. The DataNode's `query_points_max` may cut a page shorter. Default 100,000.
    pub query_page_points: u32,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            username: "root".into(),
            password: "root".into(),
            max_attempts: 60,
            retry_interval_ms: 500,
            request_timeout_ms: 10_000,
            max_message_bytes: 64 << 20,
            query_page_points: 100_000,
        }
    }
}

/// Every field but the password.
impl std::fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionConfig")
            .field("username", &self.username)
            .field("password", &"<hidden>")
            .field("max_attempts", &self.max_attempts)
            .field("retry_interval_ms", &self.retry_interval_ms)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("query_page_points", &self.query_page_points)
            .finish()
    }
}

impl SessionConfig {
    /// Checks every field against its range.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(SessionError::Config(what));
        if !(1..=MAX_ATTEMPTS_LIMIT).contains(&self.max_attempts) {
            return bad(format!(
                "max_attempts is {}, not in 1..={MAX_ATTEMPTS_LIMIT}",
                self.max_attempts
            ));
        }
        if !(1..=60_000).contains(&self.retry_interval_ms) {
            return bad(format!(
                "retry_interval_ms is {}, not in 1..=60000",
                self.retry_interval_ms
            ));
        }
        if !(1..=600_000).contains(&self.request_timeout_ms) {
            return bad(format!(
                "request_timeout_ms is {}, not in 1..=600000",
                self.request_timeout_ms
            ));
        }
        if !(1 << 20..=1 << 31).contains(&self.max_message_bytes) {
            return bad(format!(
                "max_message_bytes is {}, not in 1 MiB..=2 GiB",
                self.max_message_bytes
            ));
        }
        if !(1..=10_000_000).contains(&self.query_page_points) {
            return bad(format!(
                "query_page_points is {}, not in 1..=10000000",
                self.query_page_points
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_ranges_are_checked() {
        assert_eq!(SessionConfig::default().validate(), Ok(()));
        for bad in [
            SessionConfig {
                max_attempts: 0,
                ..SessionConfig::default()
            },
            SessionConfig {
                max_attempts: MAX_ATTEMPTS_LIMIT + 1,
                ..SessionConfig::default()
            },
            SessionConfig {
                retry_interval_ms: 0,
                ..SessionConfig::default()
            },
            SessionConfig {
                request_timeout_ms: 0,
                ..SessionConfig::default()
            },
            SessionConfig {
                max_message_bytes: 1000,
                ..SessionConfig::default()
            },
            SessionConfig {
                query_page_points: 0,
                ..SessionConfig::default()
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(SessionError::Config(_))),
                "{bad:?}"
            );
        }
    }
}
