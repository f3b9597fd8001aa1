//! The lease gate the engine consults once per time-partition fragment (design §5 step 5).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::LeaseFencedRetryPolicy;

/// Answers "may this node act on its cached metadata right now?". The real implementation is the
/// DataNode's metadata lease manager; the check must be cheap (an atomic load and a monotonic
/// clock compare) because it runs once per fragment.
pub trait LeaseGate: Send + Sync {
    /// `Ok` while the lease is live; otherwise the fenced error with the caller's policy.
    fn check(&self, policy: LeaseFencedRetryPolicy) -> Result<(), LeaseFenced>;
}

/// The gate is closed: the node's metadata lease is fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("metadata lease fenced ({policy:?})")]
pub struct LeaseFenced {
    /// 535 or 536, as the caller asked.
    pub policy: LeaseFencedRetryPolicy,
}

/// A gate that never fences: single-node tools and benchmarks with the lease switched off.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenGate;

impl LeaseGate for OpenGate {
    fn check(&self, _policy: LeaseFencedRetryPolicy) -> Result<(), LeaseFenced> {
        Ok(())
    }
}

/// A gate switched by hand, with an optional countdown: after `fence_after(n)` the gate lets `n`
/// more checks pass and then fences. Tests use it to fence exactly between fragment k and k+1.
#[derive(Debug, Default)]
pub struct ManualGate {
    fenced: AtomicBool,
    /// Checks still allowed before fencing; `u64::MAX` means no countdown.
    remaining: AtomicU64,
    checks: AtomicU64,
}

impl ManualGate {
    /// An open gate.
    pub fn new() -> ManualGate {
        ManualGate {
            fenced: AtomicBool::new(false),
            remaining: AtomicU64::new(u64::MAX),
            checks: AtomicU64::new(0),
        }
    }

    /// Fences (true) or unfences (false) now; clears any countdown.
    pub fn set_fenced(&self, fenced: bool) {
        self.remaining.store(u64::MAX, Ordering::SeqCst);
        self.fenced.store(fenced, Ordering::SeqCst);
    }

    /// Lets `checks` more checks pass, then fences.
    pub fn fence_after(&self, checks: u64) {
        self.fenced.store(false, Ordering::SeqCst);
        self.remaining.store(checks, Ordering::SeqCst);
    }

    /// How many checks were made.
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::SeqCst)
    }
}

impl LeaseGate for ManualGate {
    fn check(&self, policy: LeaseFencedRetryPolicy) -> Result<(), LeaseFenced> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        if self.fenced.load(Ordering::SeqCst) {
            return Err(LeaseFenced { policy });
        }
        let remaining = self.remaining.load(Ordering::SeqCst);
        if remaining == u64::MAX {
            return Ok(());
        }
        if remaining == 0 {
            self.fenced.store(true, Ordering::SeqCst);
            return Err(LeaseFenced { policy });
        }
        self.remaining.store(remaining - 1, Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_gate_counts_down_then_fences() {
        let gate = ManualGate::new();
        let p = LeaseFencedRetryPolicy::RetryUntilSuccess;
        gate.fence_after(2);
        assert!(gate.check(p).is_ok());
        assert!(gate.check(p).is_ok());
        assert_eq!(gate.check(p), Err(LeaseFenced { policy: p }));
        assert!(gate.check(p).is_err(), "stays fenced");
        gate.set_fenced(false);
        assert!(gate.check(p).is_ok());
        assert_eq!(gate.checks(), 5);
    }
}
