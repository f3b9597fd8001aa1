//! A query's deadline (`query_timeout_ms`, issue 40's governance): from its statement to its
//! last page, whichever protocol runs it. Past it the query is stopped where it waits (a
//! region read, a peer, the ConfigNode) and answered 720 QUERY_TIMEOUT; its owner then drops
//! its result, which gives back the result's memory.

use std::future::Future;
use std::time::Duration;

use common::StatusCode;
use sql::ExecError;
use tokio::time::Instant;

/// When a query must have finished, or never.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueryDeadline {
    at: Option<Instant>,
    /// The bound it was made from, for the message.
    ms: u64,
}

impl QueryDeadline {
    /// A deadline `config_ms` from now (0: none), or `client_ms` when the client sent a smaller
    /// positive one.
    pub(crate) fn new(config_ms: u64, client_ms: i64) -> QueryDeadline {
        let client = u64::try_from(client_ms).ok().filter(|&ms| ms > 0);
        let ms = match (config_ms, client) {
            (0, None) => return QueryDeadline { at: None, ms: 0 },
            (0, Some(c)) => c,
            (m, Some(c)) => m.min(c),
            (m, None) => m,
        };
        QueryDeadline {
            at: Instant::now().checked_add(Duration::from_millis(ms)),
            ms,
        }
    }

    /// Runs `step` of the query within the deadline: 720 once it has passed, before or while
    /// the step runs (the step is dropped then).
    pub(crate) async fn run<T>(
        &self,
        step: impl Future<Output = Result<T, ExecError>>,
    ) -> Result<T, ExecError> {
        let Some(at) = self.at else {
            return step.await;
        };
        if Instant::now() >= at {
            return Err(self.expired());
        }
        match tokio::time::timeout_at(at, step).await {
            Ok(result) => result,
            Err(_) => Err(self.expired()),
        }
    }

    /// [`QueryDeadline::run`] when `applies` (the step belongs to a query), else `step` unbounded.
    pub(crate) async fn run_if<T>(
        &self,
        applies: bool,
        step: impl Future<Output = Result<T, ExecError>>,
    ) -> Result<T, ExecError> {
        if applies {
            self.run(step).await
        } else {
            step.await
        }
    }

    fn expired(&self) -> ExecError {
        ExecError::refused(
            StatusCode::QueryTimeout,
            format!(
                "Query execution is time out: the query ran past its {} ms (query_timeout_ms, or \
                 the client's timeout) and was closed",
                self.ms
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_query_past_its_deadline_is_stopped_and_answered_720() {
        let deadline = QueryDeadline::new(1_000, 0);
        // A step that never ends is stopped at the deadline.
        let started = Instant::now();
        let stuck = deadline
            .run(std::future::pending::<Result<(), ExecError>>())
            .await
            .unwrap_err();
        assert_eq!(stuck.code(), StatusCode::QueryTimeout.wire());
        assert_eq!(started.elapsed(), Duration::from_millis(1_000));
        // Past it, a later page is refused before it runs.
        let later = deadline.run(async { Ok(()) }).await.unwrap_err();
        assert!(later.to_string().contains("1000 ms"), "{later}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_smaller_of_the_servers_and_the_clients_timeout_wins() {
        assert_eq!(QueryDeadline::new(60_000, 500).ms, 500);
        assert_eq!(QueryDeadline::new(500, 60_000).ms, 500);
        assert_eq!(QueryDeadline::new(0, 500).ms, 500);
        assert_eq!(QueryDeadline::new(500, -1).ms, 500);
        let never = QueryDeadline::new(0, 0);
        tokio::time::advance(Duration::from_secs(1 << 30)).await;
        never.run(async { Ok(()) }).await.expect("no deadline");
    }
}
