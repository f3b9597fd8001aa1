//! A one-shot slot through which the node hands a proposal's or read's outcome to the caller.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::error::ProposalError;
use crate::GroupId;

#[derive(Debug)]
struct State<T> {
    value: Option<Result<T, ProposalError>>,
    /// Set once the outcome was filled, so a second fill is caught even after a take.
    filled: bool,
    waker: Option<Waker>,
}

#[derive(Debug)]
struct Slot<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

/// The caller's end: poll it (simulation), block on it (threads) or `.await` it (async code).
/// The outcome can be taken once.
#[derive(Debug)]
pub struct Ticket<T> {
    slot: Arc<Slot<T>>,
}

/// The node's end; completing it wakes the caller. Dropping it uncompleted (the node stopped or
/// the group was removed) resolves the ticket with [`ProposalError::Stopped`], so no caller waits
/// forever.
#[derive(Debug)]
pub(crate) struct Completer<T> {
    slot: Option<Arc<Slot<T>>>,
    group: GroupId,
}

pub(crate) fn ticket<T>(group: GroupId) -> (Completer<T>, Ticket<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State {
            value: None,
            filled: false,
            waker: None,
        }),
        ready: Condvar::new(),
    });
    (
        Completer {
            slot: Some(slot.clone()),
            group,
        },
        Ticket { slot },
    )
}

fn fill<T>(slot: &Slot<T>, value: Result<T, ProposalError>) {
    let waker = {
        let mut state = slot.state.lock();
        assert!(!state.filled, "ticket completed twice");
        state.filled = true;
        state.value = Some(value);
        state.waker.take()
    };
    slot.ready.notify_all();
    if let Some(waker) = waker {
        waker.wake();
    }
}

impl<T> Completer<T> {
    pub(crate) fn complete(mut self, value: Result<T, ProposalError>) {
        let slot = self.slot.take().expect("a completer completes once");
        fill(&slot, value);
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            fill(&slot, Err(ProposalError::Stopped { group: self.group }));
        }
    }
}

impl<T> Ticket<T> {
    /// Takes the outcome if it is there.
    pub fn try_take(&self) -> Option<Result<T, ProposalError>> {
        self.slot.state.lock().value.take()
    }

    /// Whether the outcome is there (and not taken yet).
    pub fn is_done(&self) -> bool {
        self.slot.state.lock().value.is_some()
    }

    /// Blocks up to `timeout` for the outcome.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<T, ProposalError>> {
        let mut state = self.slot.state.lock();
        if !state.filled {
            let _timed_out = self.slot.ready.wait_for(&mut state, timeout);
        }
        state.value.take()
    }
}

/// Resolves with the outcome. Polling again after it resolved (or after `try_take`) stays
/// pending: the outcome is handed out once.
impl<T> Future for Ticket<T> {
    type Output = Result<T, ProposalError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.slot.state.lock();
        match state.value.take() {
            Some(value) => Poll::Ready(value),
            None => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Flag(std::sync::atomic::AtomicBool);

    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_ticket_resolves_once_by_poll_wait_or_drop() {
        let (completer, mut first) = ticket::<u32>(1);
        let flag = Arc::new(Flag(false.into()));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut first).poll(&mut cx).is_pending());
        completer.complete(Ok(7));
        assert!(flag.0.load(std::sync::atomic::Ordering::SeqCst));
        assert_eq!(Pin::new(&mut first).poll(&mut cx), Poll::Ready(Ok(7)));

        let (completer, second) = ticket::<u32>(2);
        drop(completer);
        assert_eq!(
            second.wait_timeout(Duration::from_secs(1)),
            Some(Err(ProposalError::Stopped { group: 2 }))
        );
    }
}
