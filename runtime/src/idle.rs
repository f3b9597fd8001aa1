//! Closing a gRPC connection that has run no call for a while: the session port's
//! `dn_rpc_idle_timeout_ms`, which its Thrift connections have too (REVIEW N4).
//!
//! HTTP/2 keepalive PINGs move bytes on a connection that does nothing, both ways, so idleness
//! is counted in calls, not bytes: a connection is idle once no call has run on it for the
//! timeout. The connection ([`crate::limits::GatedStream`]) and the service in front of its
//! calls ([`crate::limits::Gated`]) share one [`Activity`]; tonic hands it to every call on the
//! connection in the request's extensions, as the connection's [`ConnectionInfo`].
//!
//! A connection closed for idleness runs no call, so nothing it asked for is lost; a client
//! connects again on its next call (tonic's channels do so by themselves).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tonic::transport::server::TcpConnectInfo;

/// One connection's calls: how many run now, and when the last one ended.
#[derive(Debug)]
pub struct Activity {
    born: Instant,
    calls: AtomicUsize,
    /// Milliseconds from `born` to the end of the last call (0: none has ended).
    last_end_ms: AtomicU64,
}

impl Activity {
    /// The activity of a connection accepted now.
    pub(crate) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            born: Instant::now(),
            calls: AtomicUsize::new(0),
            last_end_ms: AtomicU64::new(0),
        })
    }

    /// Counts one call as running until the guard is dropped.
    pub(crate) fn call(self: &Arc<Self>) -> CallGuard {
        self.calls.fetch_add(1, Ordering::SeqCst);
        CallGuard(self.clone())
    }

    /// Calls running now.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Since when the connection has run no call, or `None` while one runs.
    fn idle_since(&self) -> Option<Instant> {
        if self.calls() > 0 {
            return None;
        }
        let ended = Duration::from_millis(self.last_end_ms.load(Ordering::SeqCst));
        Some(self.born + ended)
    }
}

/// One running call ([`Activity::call`]).
#[derive(Debug)]
pub(crate) struct CallGuard(Arc<Activity>);

impl Drop for CallGuard {
    fn drop(&mut self) {
        let activity = &self.0;
        // The end is stamped before the call stops counting: whoever sees no call running
        // sees this end too.
        let ended = u64::try_from(activity.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        activity.last_end_ms.fetch_max(ended, Ordering::SeqCst);
        let before = activity.calls.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(before > 0, "a call ended that never started");
    }
}

/// What tonic puts in each request's extensions for a connection accepted through
/// [`crate::incoming`] or [`crate::incoming_split`].
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    /// The peer and local addresses.
    pub tcp: TcpConnectInfo,
    /// The connection's calls, when it closes once idle.
    pub activity: Option<Arc<Activity>>,
}

/// The clock of a connection that closes after `timeout` without a call.
#[derive(Debug)]
pub(crate) struct IdleClock {
    activity: Arc<Activity>,
    timeout: Duration,
    timer: Pin<Box<Sleep>>,
}

impl IdleClock {
    pub(crate) fn new(activity: Arc<Activity>, timeout: Duration) -> IdleClock {
        assert!(
            !timeout.is_zero(),
            "an idle timeout of 0 closes nothing: pass None"
        );
        let timer = Box::pin(tokio::time::sleep(timeout));
        IdleClock {
            activity,
            timeout,
            timer,
        }
    }

    /// Ready once the connection has run no call for the timeout. Otherwise pending, with the
    /// timer set to wake `cx` when that could next be true: a timeout after the last call's
    /// end, or a timeout from now while a call runs (looked at again then).
    pub(crate) fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let now = Instant::now();
            match self.activity.idle_since() {
                Some(since) => {
                    let deadline = since + self.timeout;
                    if deadline <= now {
                        return Poll::Ready(());
                    }
                    if self.timer.deadline() != deadline {
                        self.timer.as_mut().reset(deadline);
                    }
                }
                None if self.timer.deadline() <= now => {
                    self.timer.as_mut().reset(now + self.timeout);
                }
                None => {}
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expired(clock: &mut IdleClock) -> bool {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        clock.poll_expired(&mut cx).is_ready()
    }

    #[tokio::test(start_paused = true)]
    async fn idle_counts_from_the_last_calls_end_and_never_while_one_runs() {
        let timeout = Duration::from_secs(60);
        let activity = Activity::new();
        let mut clock = IdleClock::new(activity.clone(), timeout);
        assert!(!expired(&mut clock));
        let call = activity.call();
        tokio::time::advance(timeout * 3).await;
        assert!(!expired(&mut clock), "a call runs: never idle");
        tokio::time::advance(Duration::from_secs(10)).await;
        drop(call);
        tokio::time::advance(timeout - Duration::from_secs(1)).await;
        assert!(
            !expired(&mut clock),
            "a timeout from the call's end, not its start"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(expired(&mut clock));
        assert_eq!(activity.calls(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_never_calls_is_idle_a_timeout_after_accept() {
        let timeout = Duration::from_millis(500);
        let activity = Activity::new();
        let mut clock = IdleClock::new(activity, timeout);
        tokio::time::advance(timeout - Duration::from_millis(1)).await;
        assert!(!expired(&mut clock));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(expired(&mut clock));
    }
}
