//! Session configuration.

use crate::error::{Result, SessionError};

/// Upper bound on `max_attempts`: a limit on retries, so a misconfiguration cannot spin forever.
pub const MAX_ATTEMPTS_LIMIT: u32 = 10_000;

/// How a session retries and how long it waits. Validated once by [`crate::Session::connect`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    /// Attempts per call, the first included (1..=10,000). Default 60, IoTDB's `MAX_RETRY_COUNT`.
    pub max_attempts: u32,
    /// Wait between attempts, in milliseconds (1..=60,000); it grows by one interval per full
    /// round over the endpoints, up to four intervals. Default 500.
    pub retry_interval_ms: u64,
    /// Deadline of one RPC (connecting included), in milliseconds (1..=600,000). Default 10,000.
    pub request_timeout_ms: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            max_attempts: 60,
            retry_interval_ms: 500,
            request_timeout_ms: 10_000,
        }
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
        ] {
            assert!(
                matches!(bad.validate(), Err(SessionError::Config(_))),
                "{bad:?}"
            );
        }
    }
}
