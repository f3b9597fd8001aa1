//! [`Session::call`]'s retry loop: where a call starts (a redirect hint, else the current
//! endpoint), what each attempt's outcome means, and how a retry moves the session on.

use std::future::Future;
use std::time::Duration;

use common::StatusCode;
use tokio::time::error::Elapsed;

use super::{
    connection_failure, login_refusal, overloaded, status_error, verdict, Client, RpcResult,
    Session, Verdict,
};
use crate::error::{Result, SessionError};

/// What one attempt of a call came to.
enum Attempt<T> {
    /// Final: the answer, or an error that no other endpoint would change.
    Done(Result<T>),
    /// A retryable failure, and a redirect target among the session's endpoints if it named one.
    Retry(SessionError, Option<usize>),
}

impl Session {
    /// The wait before attempt `attempt` (1-based retries): the configured interval, one more
    /// interval per full round over the endpoints, at most four.
    fn backoff(&self, attempt: u32) -> Duration {
        let rounds = u64::from(attempt - 1) / self.endpoints.len() as u64;
        Duration::from_millis(self.config.retry_interval_ms * (1 + rounds.min(3)))
    }

    /// Sends one request with the retry policy: a retryable failure moves to a different
    /// endpoint (a known redirect target, else the next one in the list) after a wait; 535 and
    /// final statuses return at once. `device` selects and feeds the redirect cache.
    pub(crate) async fn call<T, F, Fut>(&self, device: Option<&str>, mut rpc: F) -> Result<T>
    where
        F: FnMut(Client, u64) -> Fut,
        Fut: Future<Output = RpcResult<T>>,
    {
        let n = self.endpoints.len();
        let timeout = Duration::from_millis(self.config.request_timeout_ms);
        let mut index = self.first_endpoint(device);
        let mut attempt: u32 = 0;
        loop {
            assert!(index < n, "endpoint index {index} of {n}");
            let outcome =
                tokio::time::timeout(timeout, rpc(self.clients[index].clone(), self.session_id))
                    .await;
            let (error, redirect) = match self.judge(index, device, outcome) {
                Attempt::Done(result) => return result,
                Attempt::Retry(error, redirect) => (error, redirect),
            };
            attempt += 1;
            if attempt >= self.config.max_attempts {
                return Err(SessionError::RetriesExhausted {
                    attempts: attempt,
                    last: Box::new(error),
                });
            }
            let next = match redirect {
                Some(r) if r != index => r,
                _ => (index + 1) % n,
            };
            debug_assert!(n == 1 || next != index, "a retry goes to another endpoint");
            self.note_retry(device, index, next, &error);
            let from = &self.endpoints[index];
            tracing::debug!(%error, attempt, %from, to = %self.endpoints[next], "retrying");
            tokio::time::sleep(self.backoff(attempt)).await;
            index = next;
        }
    }

    /// The endpoint a call starts at: the redirect hint of `device`, if one is cached, else the
    /// session's current endpoint.
    fn first_endpoint(&self, device: Option<&str>) -> usize {
        let mut state = self.state();
        match device.and_then(|d| state.redirects.get(d)) {
            Some(cached) => {
                state.stats.redirect_hits += 1;
                cached
            }
            None => state.current,
        }
    }

    /// What the outcome of one attempt at endpoint `index` means for the call; a success records
    /// the redirect hint it carries for `device`.
    fn judge<T>(
        &self,
        index: usize,
        device: Option<&str>,
        outcome: std::result::Result<RpcResult<T>, Elapsed>,
    ) -> Attempt<T> {
        let endpoint = &self.endpoints[index];
        match outcome {
            Err(_elapsed) => Attempt::Retry(
                SessionError::Timeout {
                    endpoint: endpoint.clone(),
                    timeout_ms: self.config.request_timeout_ms,
                },
                None,
            ),
            Ok(Err(status)) if connection_failure(&status) => Attempt::Retry(
                SessionError::Connection {
                    endpoint: endpoint.clone(),
                    message: status.message().to_string(),
                },
                None,
            ),
            Ok(Err(status)) if status.code() == tonic::Code::ResourceExhausted => {
                Attempt::Retry(overloaded(endpoint, &status), None)
            }
            Ok(Err(status)) if status.code() == tonic::Code::Unauthenticated => {
                // The login check: 801, 802 and 822 are final; 712 (the DataNode could not ask
                // the ConfigNode) may pass on another DataNode.
                let refused = login_refusal(&status);
                if refused.code() != Some(StatusCode::InternalRequestTimeOut.wire()) {
                    return Attempt::Done(Err(refused));
                }
                Attempt::Retry(refused, None)
            }
            Ok(Err(status)) => Attempt::Done(Err(SessionError::Rpc {
                endpoint: endpoint.clone(),
                code: status.code(),
                message: status.message().to_string(),
            })),
            Ok(Ok((status, value))) => match verdict(&status) {
                Verdict::Success => {
                    self.record_redirect(device, &status);
                    Attempt::Done(Ok(value))
                }
                Verdict::Fenced => Attempt::Done(Err(SessionError::LeaseFenced {
                    endpoint: endpoint.clone(),
                    message: status_error(&status).to_string(),
                })),
                Verdict::Final => Attempt::Done(Err(status_error(&status))),
                Verdict::Retry => Attempt::Retry(status_error(&status), self.known(&status)),
            },
        }
    }

    /// Counts a retry of `error` by its cause, forgets the redirect hint that led `device` to
    /// endpoint `index`, and moves the session's current endpoint on to `next` if it was there.
    fn note_retry(&self, device: Option<&str>, index: usize, next: usize, error: &SessionError) {
        let mut state = self.state();
        match error {
            SessionError::Timeout { .. } => state.stats.timeout_retries += 1,
            SessionError::Connection { .. } => state.stats.connection_retries += 1,
            other => {
                let code = other.code().expect("a status error has a code");
                *state.stats.retries_by_code.entry(code).or_default() += 1;
            }
        }
        if let Some(d) = device {
            state.redirects.forget(d, index);
        }
        if state.current == index {
            state.current = next;
        }
    }

    /// The index of a status's redirect target when it is one of this session's endpoints. A
    /// redirect elsewhere is ignored: the server may name a node's internal address, which
    /// serves no session.
    fn known(&self, status: &proto::Status) -> Option<usize> {
        let target = proto::endpoint(status.redirect.as_ref()?);
        self.endpoints.iter().position(|e| *e == target)
    }

    fn record_redirect(&self, device: Option<&str>, status: &proto::Status) {
        let (Some(device), Some(index)) = (device, self.known(status)) else {
            return;
        };
        let mut state = self.state();
        state.redirects.record(device, index);
        state.stats.redirects_recorded += 1;
    }
}
