//! A query's deadline (`query_timeout_ms`, issue 40's governance): from its statement to its
//! last page, whichever protocol runs it. Past it the query is stopped where it waits (a
//! region read, a peer, the ConfigNode) and answered 720 QUERY_TIMEOUT; its owner then drops
//! its result, which gives back the result's memory. A registered query (`queries.rs`) is
//! stopped the same way when killed, and answered 715 QUERY_WAS_KILLED.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use common::StatusCode;
use sql::ExecError;
use tokio::time::Instant;

use super::queries::QueryTicket;

/// When a query must have finished, or never; and its registration, by which it is killed.
#[derive(Clone)]
pub(crate) struct QueryDeadline {
    at: Option<Instant>,
    /// The bound it was made from, for the message.
    ms: u64,
    /// Held while the query runs or its result is open (the last copy dropped deregisters).
    ticket: Option<Arc<QueryTicket>>,
}

impl QueryDeadline {
    /// A deadline `config_ms` from now (0: none), or `client_ms` when the client sent a smaller
    /// positive one.
    pub(crate) fn new(config_ms: u64, client_ms: i64) -> QueryDeadline {
        let client = u64::try_from(client_ms).ok().filter(|&ms| ms > 0);
        let ms = match (config_ms, client) {
            (0, None) => {
                return QueryDeadline {
                    at: None,
                    ms: 0,
                    ticket: None,
                }
            }
            (0, Some(c)) => c,
            (m, Some(c)) => m.min(c),
            (m, None) => m,
        };
        QueryDeadline {
            at: Instant::now().checked_add(Duration::from_millis(ms)),
            ms,
            ticket: None,
        }
    }

    /// The same deadline for the query `ticket` registered.
    pub(crate) fn registered(self, ticket: Arc<QueryTicket>) -> QueryDeadline {
        QueryDeadline {
            ticket: Some(ticket),
            ..self
        }
    }

    /// Runs `step` of the query within the deadline: 720 once it has passed, 715 once the query
    /// was killed, before or while the step runs (the step is dropped then).
    pub(crate) async fn run<T>(
        &self,
        step: impl Future<Output = Result<T, ExecError>>,
    ) -> Result<T, ExecError> {
        if self.ticket.as_ref().is_some_and(|t| t.is_killed()) {
            return Err(killed());
        }
        if self.at.is_some_and(|at| Instant::now() >= at) {
            return Err(self.expired());
        }
        let expiry = async {
            match self.at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let kill = async {
            match &self.ticket {
                Some(ticket) => ticket.killed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = step => result,
            () = expiry => Err(self.expired()),
            () = kill => Err(killed()),
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

/// 715 for a query killed.
fn killed() -> ExecError {
    ExecError::refused(
        StatusCode::QueryWasKilled,
        "Query was killed by others (KILL QUERY or cancelOperation); it was stopped and closed",
    )
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

#[cfg(test)]
mod kill_tests {
    use super::super::queries::QueryRegistry;
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_killed_query_is_stopped_where_it_waits_and_refused_after() {
        let registry = QueryRegistry::new(1);
        let ticket = registry.register("select * from root.sg.d1", "root");
        let id = ticket.id().to_string();
        let deadline = QueryDeadline::new(0, 0).registered(ticket);
        let stuck = tokio::spawn({
            let deadline = deadline.clone();
            async move {
                deadline
                    .run(std::future::pending::<Result<(), ExecError>>())
                    .await
            }
        });
        tokio::task::yield_now().await;
        assert_eq!(registry.kill(Some(&id), "root"), 1);
        let error = stuck.await.unwrap().unwrap_err();
        assert_eq!(error.code(), StatusCode::QueryWasKilled.wire());
        let later = deadline.run(async { Ok(()) }).await.unwrap_err();
        assert_eq!(later.code(), StatusCode::QueryWasKilled.wire());
        assert_eq!(
            registry.list("root").len(),
            1,
            "held while its result is open"
        );
        drop(deadline);
        assert!(registry.list("root").is_empty());
    }
}
