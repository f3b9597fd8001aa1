//! The operations that use cached metadata, counted by the cache epoch they started under.
//!
//! An invalidation (or a fence-floor re-stamp) bumps the cache epoch, then waits until no
//! operation of an older epoch is still running ([`InFlight::drain`]); only then does the
//! DataNode acknowledge it. Operations that start meanwhile carry the new epoch and are not
//! waited for — they cannot see the removed entries or old stamps — so a drain never blocks new
//! requests, and one long request delays only the drain, never other clients (a write-preferring
//! lock did both, M3 in REVIEW-2026-12). Each operation also keeps the cache generation it
//! started under (which only invalidations and clears move): what its coordinator re-checks.

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;

use crate::cache::MetadataCache;

/// Running operations per cache epoch.
#[derive(Default)]
pub struct InFlight {
    running: Mutex<BTreeMap<u64, usize>>,
    finished: tokio::sync::Notify,
}

/// One running operation; dropping it ends the operation.
pub struct InFlightGuard<'a> {
    owner: &'a InFlight,
    epoch: u64,
    generation: u64,
}

impl InFlightGuard<'_> {
    /// The cache generation the operation validates against.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

impl InFlight {
    /// Starts an operation under the cache's current epoch. The epoch is read and counted
    /// under one lock, which [`InFlight::drain`] also takes after the bump: an operation either
    /// counts for the drain or started after the bump.
    pub fn enter<'a>(&'a self, cache: &MetadataCache) -> InFlightGuard<'a> {
        let mut running = self.running.lock();
        let epoch = cache.epoch();
        // Read after the epoch: a bump of both between the reads leaves an older epoch with a
        // newer generation, which the drain still waits for.
        let generation = cache.generation();
        *running.entry(epoch).or_default() += 1;
        InFlightGuard {
            owner: self,
            epoch,
            generation,
        }
    }

    /// Operations running that started before epoch `epoch`.
    pub fn older_than(&self, epoch: u64) -> usize {
        self.running.lock().range(..epoch).map(|(_, n)| n).sum()
    }

    /// Waits until every operation that started before epoch `epoch` has finished; false if
    /// some are still running after `timeout`.
    pub async fn drain(&self, epoch: u64, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // Registered before the check, so a finish in between is not missed.
            let finished = self.finished.notified();
            if self.older_than(epoch) == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, finished).await.is_err() {
                return self.older_than(epoch) == 0;
            }
        }
    }
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        let mut running = self.owner.running.lock();
        let count = running
            .get_mut(&self.epoch)
            .expect("a running operation is counted");
        *count -= 1;
        if *count == 0 {
            running.remove(&self.epoch);
        }
        drop(running);
        self.owner.finished.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use consensus::ManualClock;

    use crate::lease::MetadataLeaseManager;

    fn cache() -> MetadataCache {
        let clock = ManualClock::default();
        let lease = Arc::new(MetadataLeaseManager::new(Arc::new(clock), 100));
        MetadataCache::new(lease, 10)
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_waits_for_older_operations_only() {
        let cache = cache();
        let in_flight = InFlight::default();
        let old = in_flight.enter(&cache);
        cache.invalidate(&["root.sg".into()], &[], &[]);
        let (generation, epoch) = (cache.generation(), cache.epoch());
        // An operation that starts after the bump is not waited for, and is not blocked.
        let new = in_flight.enter(&cache);
        assert_eq!(new.generation(), generation);
        assert!(!in_flight.drain(epoch, Duration::from_secs(1)).await);
        drop(old);
        assert!(in_flight.drain(epoch, Duration::from_secs(1)).await);
        drop(new);
        assert_eq!(in_flight.older_than(u64::MAX), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_restamp_drains_older_operations_without_voiding_them() {
        let cache = cache();
        let in_flight = InFlight::default();
        let old = in_flight.enter(&cache);
        cache.restamp(10);
        assert_eq!(old.generation(), cache.generation(), "its validation holds");
        assert!(!in_flight.drain(cache.epoch(), Duration::from_secs(1)).await);
        drop(old);
        assert!(in_flight.drain(cache.epoch(), Duration::from_secs(1)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_wakes_when_the_last_older_operation_ends() {
        let cache = Arc::new(cache());
        let in_flight = Arc::new(InFlight::default());
        let generation_before = cache.generation();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let held = {
            let (cache, in_flight) = (cache.clone(), in_flight.clone());
            tokio::spawn(async move {
                let guard = in_flight.enter(&cache);
                assert_eq!(guard.generation(), generation_before);
                rx.await.unwrap();
            })
        };
        tokio::task::yield_now().await;
        cache.invalidate(&[], &[], &[]);
        let drain = {
            let (cache, in_flight) = (cache.clone(), in_flight.clone());
            tokio::spawn(async move {
                in_flight
                    .drain(cache.epoch(), Duration::from_secs(60))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!drain.is_finished());
        tx.send(()).unwrap();
        held.await.unwrap();
        assert!(drain.await.unwrap());
    }
}
