//! `MetadataLeaseManager` (design §4): the DataNode's side of the metadata lease. The ConfigNode's
//! heartbeats renew it; while the last heartbeat this node *processed* is younger than
//! `metadata_lease_fence_ms` (monotonic clock), the node trusts its schema, partition and route
//! caches. Otherwise it is fenced, and it trusts nothing again until it has cleared every cache
//! and pulled fresh metadata.
//!
//! States, as IoTDB's: NORMAL → NEED_CLEAR → CACHE_CLEARING → CACHE_CLEARED → PULLING → NORMAL,
//! or PULL_FAILED (retried). A node starts in NEED_CLEAR: after a restart it has no history.
//!
//! The hot-path check ([`LeaseGate::check`]) is an atomic load, a clock read and a compare: no
//! lock, no syscall beyond the vDSO clock.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use common::LeaseFencedRetryPolicy;
use consensus::Clock;

use engine::{LeaseFenced, LeaseGate};

/// Milliseconds on `CLOCK_BOOTTIME`: monotonic, and unlike `CLOCK_MONOTONIC` (Rust's `Instant`)
/// it keeps counting while the host is suspended. A DataNode whose host slept through its lease
/// must wake up fenced, not believing that no time passed (L2 in REVIEW-2026-12).
#[derive(Debug, Clone)]
pub struct BootClock {
    origin_ns: u128,
}

impl BootClock {
    fn now_ns() -> u128 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the call's duration.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
        assert_eq!(
            rc,
            0,
            "clock_gettime(CLOCK_BOOTTIME): {}",
            std::io::Error::last_os_error()
        );
        ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
    }
}

impl Default for BootClock {
    fn default() -> Self {
        BootClock {
            origin_ns: BootClock::now_ns(),
        }
    }
}

impl Clock for BootClock {
    fn now_ms(&self) -> u64 {
        ((BootClock::now_ns() - self.origin_ns) / 1_000_000) as u64
    }
}

/// Where the lease stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LeaseState {
    /// Heartbeats are fresh; caches are trusted.
    Normal = 0,
    /// The lease lapsed (or the node just started): caches must be cleared.
    NeedClear = 1,
    /// Caches are being cleared.
    CacheClearing = 2,
    /// Caches are empty; nothing stale can be served.
    CacheCleared = 3,
    /// Fresh metadata is being pulled from the ConfigNode.
    Pulling = 4,
    /// The pull failed; recovery runs again on the next heartbeat.
    PullFailed = 5,
}

impl LeaseState {
    fn from_u8(v: u8) -> LeaseState {
        match v {
            0 => LeaseState::Normal,
            1 => LeaseState::NeedClear,
            2 => LeaseState::CacheClearing,
            3 => LeaseState::CacheCleared,
            4 => LeaseState::Pulling,
            5 => LeaseState::PullFailed,
            _ => unreachable!("lease state byte {v} is never stored"),
        }
    }

    /// IoTDB's upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            LeaseState::Normal => "NORMAL",
            LeaseState::NeedClear => "NEED_CLEAR",
            LeaseState::CacheClearing => "CACHE_CLEARING",
            LeaseState::CacheCleared => "CACHE_CLEARED",
            LeaseState::Pulling => "PULLING",
            LeaseState::PullFailed => "PULL_OR_INIT_FAILED",
        }
    }
}

/// Why a heartbeat was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeartbeatError {
    /// The heartbeat names an older incarnation of this DataNode: a message from before its last
    /// registration, which must not renew anything.
    #[error("heartbeat for incarnation {got}, this DataNode is incarnation {current}")]
    StaleIncarnation {
        /// Epoch in the heartbeat.
        got: u64,
        /// This node's epoch.
        current: u64,
    },
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct LeaseMetrics {
    /// NORMAL → NEED_CLEAR transitions (`metadata_lease_fence_transitions_total`).
    pub fence_transitions: AtomicU64,
    /// Completed recoveries (`metadata_lease_recoveries_total`).
    pub recoveries: AtomicU64,
    /// Failed metadata pulls.
    pub pull_failures: AtomicU64,
    /// Heartbeats refused as from an older incarnation.
    pub stale_heartbeats: AtomicU64,
}

/// The DataNode's metadata lease.
pub struct MetadataLeaseManager {
    clock: Arc<dyn Clock>,
    fence_ms: AtomicU64,
    /// Clock time of the last processed heartbeat; `None` is encoded as `u64::MAX`.
    last_heartbeat_ms: AtomicU64,
    state: AtomicU8,
    incarnation: AtomicU64,
    metrics: LeaseMetrics,
}

const NEVER: u64 = u64::MAX;

impl MetadataLeaseManager {
    /// A lease that has never been renewed (state NEED_CLEAR), fencing after `fence_ms`.
    pub fn new(clock: Arc<dyn Clock>, fence_ms: u64) -> MetadataLeaseManager {
        assert!(fence_ms > 0, "metadata_lease_fence_ms must be positive");
        MetadataLeaseManager {
            clock,
            fence_ms: AtomicU64::new(fence_ms),
            last_heartbeat_ms: AtomicU64::new(NEVER),
            state: AtomicU8::new(LeaseState::NeedClear as u8),
            incarnation: AtomicU64::new(0),
            metrics: LeaseMetrics::default(),
        }
    }

    /// The current state. Reading it does not move it; [`MetadataLeaseManager::is_live`] does.
    pub fn state(&self) -> LeaseState {
        LeaseState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Milliseconds since the last processed heartbeat (`metadata_lease_heartbeat_age_ms`).
    pub fn heartbeat_age_ms(&self) -> Option<u64> {
        match self.last_heartbeat_ms.load(Ordering::Acquire) {
            NEVER => None,
            last => Some(self.clock.now_ms().saturating_sub(last)),
        }
    }

    /// The fence threshold in force.
    pub fn fence_ms(&self) -> u64 {
        self.fence_ms.load(Ordering::Relaxed)
    }

    /// Adopts the cluster-wide fence threshold handed out at registration.
    pub fn set_fence_ms(&self, fence_ms: u64) {
        assert!(fence_ms > 0, "metadata_lease_fence_ms must be positive");
        self.fence_ms.store(fence_ms, Ordering::Relaxed);
    }

    /// Adopts the incarnation epoch minted by a registration. Epochs only rise.
    pub fn set_incarnation(&self, epoch: u64) {
        self.incarnation.fetch_max(epoch, Ordering::AcqRel);
    }

    /// This node's incarnation epoch.
    pub fn incarnation(&self) -> u64 {
        self.incarnation.load(Ordering::Acquire)
    }

    /// Counters.
    pub fn metrics(&self) -> &LeaseMetrics {
        &self.metrics
    }

    /// True when the last processed heartbeat is younger than the fence threshold.
    fn fresh(&self, now_ms: u64) -> bool {
        match self.last_heartbeat_ms.load(Ordering::Acquire) {
            NEVER => false,
            last => now_ms.saturating_sub(last) <= self.fence_ms.load(Ordering::Relaxed),
        }
    }

    /// True while caches may be trusted. A lapsed lease moves NORMAL → NEED_CLEAR here, once.
    pub fn is_live(&self) -> bool {
        if self.state.load(Ordering::Acquire) != LeaseState::Normal as u8 {
            return false;
        }
        if self.fresh(self.clock.now_ms()) {
            return true;
        }
        self.lapse();
        false
    }

    fn lapse(&self) {
        if self
            .state
            .compare_exchange(
                LeaseState::Normal as u8,
                LeaseState::NeedClear as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            self.metrics
                .fence_transitions
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                fence_ms = self.fence_ms(),
                age_ms = ?self.heartbeat_age_ms(),
                "metadata lease fenced: caches are no longer trusted"
            );
        }
    }

    /// Records a heartbeat this node has processed (call it after handling, never on receipt).
    /// A heartbeat arriving after the lease lapsed does not make stale caches trusted: the lease
    /// first moves to NEED_CLEAR, and only [`MetadataLeaseManager::recover`] returns it to
    /// NORMAL. Returns true when recovery must run.
    pub fn on_heartbeat(&self, incarnation: u64) -> Result<bool, HeartbeatError> {
        let current = self.incarnation();
        if incarnation < current {
            self.metrics
                .stale_heartbeats
                .fetch_add(1, Ordering::Relaxed);
            return Err(HeartbeatError::StaleIncarnation {
                got: incarnation,
                current,
            });
        }
        let now = self.clock.now_ms();
        if !self.fresh(now) {
            // Invalidations may have been missed while the lease was lapsed.
            self.lapse();
        }
        // A renewal never moves the heartbeat time backwards.
        let last = self.last_heartbeat_ms.load(Ordering::Acquire);
        if last == NEVER || last < now {
            self.last_heartbeat_ms.store(now, Ordering::Release);
        }
        debug_assert!(self.fresh(now), "a processed heartbeat renews the lease");
        Ok(self.state() != LeaseState::Normal)
    }

    /// Clears every cache, pulls fresh metadata, and returns to NORMAL if the lease is still
    /// fresh by then. Runs from NEED_CLEAR or PULL_FAILED; does nothing (returns the state) if
    /// another recovery is under way or the lease is NORMAL.
    pub fn recover<E>(
        &self,
        clear_caches: impl FnOnce(),
        pull_metadata: impl FnOnce() -> Result<(), E>,
    ) -> Result<LeaseState, E> {
        let start = self.state.load(Ordering::Acquire);
        if start != LeaseState::NeedClear as u8 && start != LeaseState::PullFailed as u8 {
            return Ok(self.state());
        }
        if self
            .state
            .compare_exchange(
                start,
                LeaseState::CacheClearing as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            return Ok(self.state());
        }
        clear_caches();
        self.advance(LeaseState::CacheClearing, LeaseState::CacheCleared);
        self.advance(LeaseState::CacheCleared, LeaseState::Pulling);
        if let Err(e) = pull_metadata() {
            self.metrics.pull_failures.fetch_add(1, Ordering::Relaxed);
            self.advance(LeaseState::Pulling, LeaseState::PullFailed);
            return Err(e);
        }
        // The pull took time: trust the fresh metadata only under a live lease.
        let next = if self.fresh(self.clock.now_ms()) {
            self.metrics.recoveries.fetch_add(1, Ordering::Relaxed);
            LeaseState::Normal
        } else {
            LeaseState::NeedClear
        };
        self.advance(LeaseState::Pulling, next);
        Ok(next)
    }

    /// A recovery step `from` → `to`. Only the recovery that won the CAS into CACHE_CLEARING
    /// moves the state out of the recovery states (a lapse moves only NORMAL), so `from` is
    /// always what is found.
    fn advance(&self, from: LeaseState, to: LeaseState) {
        let found = self.state.swap(to as u8, Ordering::AcqRel);
        debug_assert_eq!(
            found, from as u8,
            "lease recovery step {from:?} → {to:?} found state {found}"
        );
    }
}

impl LeaseGate for MetadataLeaseManager {
    fn check(&self, policy: LeaseFencedRetryPolicy) -> Result<(), LeaseFenced> {
        if self.is_live() {
            Ok(())
        } else {
            Err(LeaseFenced { policy })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use consensus::ManualClock;

    #[test]
    fn the_lease_clock_is_the_boot_clock() {
        let clock = BootClock::default();
        let start = BootClock::now_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let elapsed = clock.now_ms();
        assert!(elapsed >= 20, "{elapsed} ms");
        // It reads the same clock as clock_gettime(CLOCK_BOOTTIME).
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec.
        assert_eq!(
            unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) },
            0
        );
        let boot_ns = ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128;
        assert!(boot_ns >= start && boot_ns - start < 10_000_000_000);
    }

    fn lease() -> (MetadataLeaseManager, ManualClock) {
        let clock = ManualClock::default();
        clock.set_ms(1000);
        (
            MetadataLeaseManager::new(Arc::new(clock.clone()), 100),
            clock,
        )
    }

    fn recover(l: &MetadataLeaseManager) -> LeaseState {
        l.recover(|| {}, || Ok::<(), ()>(())).unwrap()
    }

    #[test]
    fn starts_fenced_and_trusts_only_after_heartbeat_clear_and_pull() {
        let (l, _clock) = lease();
        assert_eq!(l.state(), LeaseState::NeedClear);
        assert!(!l.is_live());
        assert_eq!(
            l.check(LeaseFencedRetryPolicy::RetryUntilSuccess),
            Err(LeaseFenced {
                policy: LeaseFencedRetryPolicy::RetryUntilSuccess
            })
        );
        assert_eq!(l.on_heartbeat(0), Ok(true), "recovery needed");
        assert!(!l.is_live(), "a heartbeat alone does not restore trust");
        let mut cleared = false;
        let state = l.recover(|| cleared = true, || Ok::<(), ()>(())).unwrap();
        assert!(cleared);
        assert_eq!(state, LeaseState::Normal);
        assert!(l.is_live());
        assert_eq!(l.check(LeaseFencedRetryPolicy::None), Ok(()));
    }

    #[test]
    fn lapses_after_fence_ms_and_a_late_heartbeat_forces_a_clear() {
        let (l, clock) = lease();
        l.on_heartbeat(0).unwrap();
        recover(&l);
        clock.advance_ms(100);
        assert!(l.is_live(), "exactly fence_ms old is still live");
        clock.advance_ms(1);
        // No check ran during the lapse; the late heartbeat must still force a clear.
        assert_eq!(l.on_heartbeat(0), Ok(true));
        assert_eq!(l.state(), LeaseState::NeedClear);
        assert!(!l.is_live());
        assert_eq!(l.metrics().fence_transitions.load(Ordering::Relaxed), 1);
        assert_eq!(recover(&l), LeaseState::Normal);

        clock.advance_ms(500);
        assert!(!l.is_live(), "fenced by the check itself");
        assert!(!l.is_live());
        assert_eq!(
            l.metrics().fence_transitions.load(Ordering::Relaxed),
            2,
            "transition counted once"
        );
    }

    #[test]
    fn a_failed_pull_is_retried_and_a_slow_pull_does_not_restore_trust() {
        let (l, clock) = lease();
        l.on_heartbeat(0).unwrap();
        assert_eq!(
            l.recover(|| {}, || Err("configNode unreachable")),
            Err("configNode unreachable")
        );
        assert_eq!(l.state(), LeaseState::PullFailed);
        assert!(!l.is_live());
        // The pull outlasts the lease: recovery ends fenced again.
        let state = l
            .recover(
                || {},
                || {
                    clock.advance_ms(150);
                    Ok::<(), ()>(())
                },
            )
            .unwrap();
        assert_eq!(state, LeaseState::NeedClear);
        l.on_heartbeat(0).unwrap();
        assert_eq!(recover(&l), LeaseState::Normal);
    }

    #[test]
    fn heartbeats_of_an_older_incarnation_are_refused() {
        let (l, clock) = lease();
        l.set_incarnation(3);
        assert_eq!(
            l.on_heartbeat(2),
            Err(HeartbeatError::StaleIncarnation { got: 2, current: 3 })
        );
        assert_eq!(
            l.heartbeat_age_ms(),
            None,
            "a refused heartbeat renews nothing"
        );
        l.on_heartbeat(3).unwrap();
        clock.advance_ms(7);
        assert_eq!(l.heartbeat_age_ms(), Some(7));
        l.set_incarnation(2);
        assert_eq!(l.incarnation(), 3, "epochs only rise");
    }

    mod model {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Advance(u64),
            Heartbeat,
            Check,
            Recover { pull_ok: bool, pull_ms: u64 },
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                (0u64..80).prop_map(Op::Advance),
                Just(Op::Heartbeat),
                Just(Op::Check),
                (any::<bool>(), 0u64..30)
                    .prop_map(|(pull_ok, pull_ms)| Op::Recover { pull_ok, pull_ms }),
            ]
        }

        proptest! {
            /// The fence guarantee's DataNode half: the lease is live only if the last processed
            /// heartbeat is at most fence_ms old and no lapse happened since the last completed
            /// clear-and-pull.
            #[test]
            fn live_only_with_a_fresh_heartbeat_and_no_lapse_since_recovery(ops in prop::collection::vec(op(), 1..200)) {
                let (l, clock) = lease();
                let mut last_heartbeat: Option<u64> = None;
                // Whether caches were cleared and pulled since the last lapse.
                let mut recovered_since_lapse = false;
                for op in ops {
                    let now = clock.now_ms();
                    let lapsed = last_heartbeat.is_none_or(|t| now - t > 100);
                    if lapsed {
                        recovered_since_lapse = false;
                    }
                    match op {
                        Op::Advance(ms) => clock.advance_ms(ms),
                        Op::Heartbeat => {
                            l.on_heartbeat(0).unwrap();
                            last_heartbeat = Some(now);
                        }
                        Op::Check => {}
                        Op::Recover { pull_ok, pull_ms } => {
                            let result = l.recover(|| {}, || {
                                clock.advance_ms(pull_ms);
                                if pull_ok { Ok(()) } else { Err(()) }
                            });
                            let after = clock.now_ms();
                            let fresh = last_heartbeat.is_some_and(|t| after - t <= 100);
                            if result == Ok(LeaseState::Normal) {
                                prop_assert!(fresh);
                                recovered_since_lapse = true;
                            }
                        }
                    }
                    let now = clock.now_ms();
                    let fresh = last_heartbeat.is_some_and(|t| now - t <= 100);
                    if !fresh {
                        recovered_since_lapse = false;
                    }
                    let live = l.is_live();
                    prop_assert!(!live || (fresh && recovered_since_lapse), "live with fresh={} recovered={}", fresh, recovered_since_lapse);
                }
            }
        }
    }
}
