//! A bound on the bytes waiting in a queue, counted by its producers and its consumer.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes queued and their bound. One item always fits an empty queue, however large, so an
/// item above the bound is never refused forever.
#[derive(Debug)]
pub(crate) struct ByteBudget {
    queued: AtomicUsize,
    max: usize,
}

impl ByteBudget {
    /// A budget of `max` bytes (`usize::MAX`: counted, never refused).
    pub(crate) fn new(max: usize) -> ByteBudget {
        ByteBudget {
            queued: AtomicUsize::new(0),
            max,
        }
    }

    /// Counts `bytes` in, unless the queue holds some already and would pass the bound with
    /// them. A caller whose item then does not go into the queue gives them back (`release`).
    pub(crate) fn try_reserve(&self, bytes: usize) -> bool {
        let queued = self.queued.fetch_add(bytes, Ordering::AcqRel);
        if queued > 0 && queued.saturating_add(bytes) > self.max {
            self.release(bytes);
            return false;
        }
        true
    }

    /// Counts `bytes` out: the consumer took them, or a reservation was not used.
    pub(crate) fn release(&self, bytes: usize) {
        self.queued.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// The bound.
    pub(crate) fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_item_always_fits_and_the_bound_holds_after() {
        let budget = ByteBudget::new(10);
        assert!(budget.try_reserve(25), "one item fits an empty queue");
        assert!(!budget.try_reserve(1));
        budget.release(25);
        assert!(budget.try_reserve(6));
        assert!(budget.try_reserve(4));
        assert!(!budget.try_reserve(1));
        budget.release(4);
        assert!(budget.try_reserve(4));
    }
}
