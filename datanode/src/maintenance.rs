//! The node's storage upkeep, off the request path: flushes (by memtable size and age, under
//! the node's memtable budget) and compactions (per region, niced threads, TTL removal).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use engine::{DataRegion, StorageError};

use crate::parts::Shared;
use crate::timing;

/// Flushes regions whose memtables are large or old, and while the node's memtables hold more
/// than half of `memtable_budget_bytes` also the largest others, all at once (one blocking task
/// each); then truncates each flushed region's raft log up to its checkpoint. Then removes the
/// snapshots built here that no replica used for `dn_snapshot_keep_ms`.
pub(crate) async fn flush_loop(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(timing::FLUSH_CHECK_INTERVAL).await;
        let chosen = regions_to_flush(
            shared.host.regions(),
            shared.config.storage.memtable_budget_bytes as usize,
        );
        // Failures are logged by `flush_regions`; the next round tries again.
        drop(flush_regions(&shared, chosen).await);
        shared.host.release_idle_snapshots().await;
    }
}

/// `FLUSH`: every local region's memtables to files, answering once they are written (or the
/// first failure).
pub(crate) async fn flush_all(shared: &Arc<Shared>) -> std::result::Result<(), String> {
    flush_regions(shared, shared.host.regions()).await
}

/// Flushes `regions`, each on a thread of its own, then compacts each flushed region's raft log
/// up to the flushed index. Failures are logged; the first is answered.
async fn flush_regions(
    shared: &Arc<Shared>,
    regions: Vec<(u64, Arc<DataRegion>)>,
) -> std::result::Result<(), String> {
    let mut first_failure = None;
    let mut failed = |message: String| {
        tracing::error!("{message}");
        first_failure.get_or_insert(message);
    };
    let mut flushes = tokio::task::JoinSet::new();
    let nice = shared.config.storage.flush_thread_nice;
    for (id, region) in regions {
        let flush = on_niced_thread(format!("flush-r{id}"), nice, move || region.flush());
        flushes.spawn(async move { (id, flush.await) });
    }
    while let Some(joined) = flushes.join_next().await {
        let (id, flushed) = match joined {
            Ok((id, Ok(flushed))) => (id, flushed),
            Ok((id, Err(e))) => {
                failed(format!("region {id}: flush thread: {e}"));
                continue;
            }
            Err(e) => {
                failed(format!("flush task: {e}"));
                continue;
            }
        };
        match flushed {
            Ok(checkpoint) if checkpoint > 0 => {
                // A replica fetching a snapshot continues from the log after it.
                let checkpoint = shared
                    .host
                    .snapshots()
                    .transfer_pin(id)
                    .map_or(checkpoint, |pin| checkpoint.min(pin));
                match shared
                    .host
                    .driver()
                    .call(move |node| node.compact_keeping_followers(id, checkpoint).map(drop))
                    .await
                {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::warn!(region = id, "compacting the raft log: {e}"),
                    Err(e) => tracing::warn!(region = id, "compacting the raft log: {e}"),
                }
            }
            Ok(_) => {}
            Err(e) => failed(format!("region {id}: flush failed: {e}")),
        }
    }
    first_failure.map_or(Ok(()), Err)
}

/// The regions a flush round takes: those over their size or age threshold, and, while the
/// memtables hold more than half the budget, the largest others until a quarter would remain.
fn regions_to_flush(
    regions: Vec<(u64, Arc<DataRegion>)>,
    budget: usize,
) -> Vec<(u64, Arc<DataRegion>)> {
    let now = std::time::Instant::now();
    let mut used: usize = regions.iter().map(|(_, r)| r.memory_bytes()).sum();
    let (mut chosen, mut rest): (Vec<_>, Vec<_>) =
        regions.into_iter().partition(|(_, r)| r.should_flush(now));
    // What flushing the due regions frees. Each region's figures are read a moment after `used`
    // (writes go on), so the difference saturates instead of trusting the two to agree.
    let freed: usize = chosen.iter().map(|(_, r)| r.memtable_bytes()).sum();
    used = used.saturating_sub(freed);
    if used > budget / 2 {
        rest.sort_by_key(|(_, r)| std::cmp::Reverse(r.memtable_bytes()));
        for (id, region) in rest {
            if used <= budget / 4 {
                break;
            }
            let working = region.memtable_bytes();
            if working == 0 {
                continue;
            }
            used = used.saturating_sub(working);
            chosen.push((id, region));
        }
    }
    chosen
}

/// Merges sealed files in the background: up to `compaction_concurrency` compactions at once,
/// up to `compaction_workers_per_region` of them in one region (on disjoint files, so a long TTL
/// rewrite does not hold back the merging of the flushes after it), each on a low-priority thread
/// of its own that paces its writes to `compaction_write_bytes_per_sec`; writes never wait for it.
pub(crate) async fn compaction_loop(shared: Arc<Shared>) {
    // A region's worker runs one compaction per permit, so regions take turns; it ends when the
    // region has no work it can claim. Dropping the set (this task aborted at shutdown) aborts
    // the workers; a merge running on its thread stops at its next series once the host
    // cancelled compactions.
    let permits = Arc::new(tokio::sync::Semaphore::new(
        shared.config.compaction.compaction_concurrency.max(1) as usize,
    ));
    let per_region = shared
        .config
        .compaction
        .compaction_workers_per_region
        .max(1) as usize;
    let workers: Arc<parking_lot::Mutex<HashMap<u64, usize>>> = Arc::default();
    let mut running = tokio::task::JoinSet::new();
    let mut removal_clock = RemovalClock::default();
    loop {
        tokio::time::sleep(timing::COMPACTION_CHECK_INTERVAL).await;
        while running.try_join_next().is_some() {}
        // TTLs as the ConfigNode leader has them now. Without an answer no region removes
        // expired points this round: a TTL raised meanwhile must not be enforced at its old value.
        let ttls = match shared.confignode.database_ttls().await {
            Ok((ttls, confignode_ms)) => Some((ttls, confignode_ms)),
            Err(e) => {
                tracing::debug!("no TTLs this round: {e}");
                None
            }
        };
        // Declared encodings likewise; without an answer the regions keep the last ones.
        match shared.confignode.series_codecs().await {
            Ok(codecs) => {
                shared
                    .metrics
                    .confignode
                    .series_codecs_declared
                    .store(codecs.len() as u64, Ordering::Relaxed);
                shared.host.set_series_codecs(Arc::new(codecs));
            }
            Err(e) => tracing::debug!("no declared encodings this round: {e}"),
        }
        let now_ms = ttls.as_ref().map(|(_, confignode_ms)| {
            let local_ms = crate::coordinator::read::wall_clock_ms();
            removal_clock.now(local_ms, *confignode_ms, std::time::Instant::now())
        });
        for (id, database, region) in shared.host.regions_with_databases() {
            let ttl = ttls.as_ref().and_then(|(t, _)| t.get(&database).copied());
            let now_ms = now_ms.unwrap_or(i64::MIN);
            region.set_ttl_cutoff(ttl_removal_cutoff(now_ms, ttl));
            {
                let mut workers = workers.lock();
                let count = workers.entry(id).or_default();
                if *count >= per_region {
                    continue;
                }
                *count += 1;
            }
            let worker = RegionWorker {
                workers: workers.clone(),
                id,
            };
            let (shared, permits) = (shared.clone(), permits.clone());
            running.spawn(async move {
                compact_region(&shared, id, region, &permits).await;
                drop(worker);
            });
        }
    }
}

/// A compaction worker of a region, counted while it lives, however its work ends.
struct RegionWorker {
    workers: Arc<parking_lot::Mutex<HashMap<u64, usize>>>,
    id: u64,
}

impl Drop for RegionWorker {
    fn drop(&mut self) {
        let mut workers = self.workers.lock();
        if let Some(count) = workers.get_mut(&self.id) {
            *count -= 1;
            if *count == 0 {
                workers.remove(&self.id);
            }
        }
    }
}

/// Compacts a region until it has no work this worker can claim, one compaction per permit,
/// each on a thread of its own at `compaction_thread_nice`: a merge takes the CPU that ingest
/// and queries leave.
async fn compact_region(
    shared: &Arc<Shared>,
    id: u64,
    region: Arc<engine::DataRegion>,
    permits: &tokio::sync::Semaphore,
) {
    // Counts the region's work for the metrics page (scrapes do not plan).
    region.storage_stats();
    let nice = shared.config.compaction.compaction_thread_nice;
    loop {
        let Ok(_permit) = permits.acquire().await else {
            return;
        };
        let (shared_for_thread, region) = (shared.clone(), region.clone());
        let done = on_niced_thread(format!("compact-r{id}"), nice, move || {
            compact_step(&shared_for_thread, id, &region)
        });
        match done.await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::error!(region = id, "compaction thread: {e}");
                return;
            }
        }
    }
}

/// Runs at most one compaction of the region (blocking); true when it compacted and more work
/// may be left.
fn compact_step(shared: &Shared, id: u64, region: &engine::DataRegion) -> bool {
    match region.compact_once() {
        Ok(Some(report)) => {
            let m = &shared.metrics.storage;
            m.compactions.fetch_add(1, Ordering::Relaxed);
            m.compaction_input_bytes
                .fetch_add(report.input_bytes, Ordering::Relaxed);
            m.compaction_output_bytes
                .fetch_add(report.output_bytes, Ordering::Relaxed);
            m.ttl_expired_points
                .fetch_add(report.expired_points, Ordering::Relaxed);
            m.compaction_copied_bytes
                .fetch_add(report.copied_bytes, Ordering::Relaxed);
            tracing::debug!(region = id, ?report, "compacted");
            true
        }
        Ok(None) | Err(StorageError::CompactionCancelled) => false,
        Err(e) => {
            tracing::error!(region = id, "compaction failed: {e}");
            false
        }
    }
}

/// Runs `work` on a new thread named `name` at nice value `nice` (background work that must not
/// take the CPU from writes and queries; a tokio blocking thread cannot be used, since a nice
/// value once raised cannot be lowered again without privilege and the pool reuses threads) and
/// answers its result. An `Err` when the thread could not start or ended without answering.
async fn on_niced_thread<R: Send + 'static>(
    name: String,
    nice: u32,
    work: impl FnOnce() -> R + Send + 'static,
) -> std::result::Result<R, String> {
    let (done, finished) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            lower_thread_priority(nice);
            // No receiver means the caller was aborted (shutdown): nobody waits for the answer.
            let _ = done.send(work());
        })
        .map_err(|e| format!("starting the thread: {e}"))?;
    finished
        .await
        .map_err(|_| "the thread ended without answering".to_string())
}

/// Raises the calling thread's nice value to `nice` (Linux keeps one per thread); a failure
/// leaves it as it was.
fn lower_thread_priority(nice: u32) {
    if nice == 0 {
        return;
    }
    // SAFETY: gettid has no preconditions; setpriority only changes the calling thread's nice
    // value (`who` is its own id) and reports failure through its return value.
    let refused = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice as libc::c_int) != 0
    };
    if refused {
        tracing::debug!(
            "background thread keeps its priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The clock TTL removal follows (REVIEW N12): removal deletes points physically, so a forward
/// step of one replica's wall clock must not delete points that have not expired. It is the
/// older of this node's wall clock and the ConfigNode leader's (read with the TTLs), it never
/// moves back, and it moves forward at most twice as fast as real time (the monotonic clock):
/// a clock stepped forward by Δ on every node at once is followed over Δ of real time, not at
/// once. Reads hide expired points by the local clock; only removal waits.
#[derive(Debug, Default)]
pub(crate) struct RemovalClock {
    last: Option<(i64, std::time::Instant)>,
}

impl RemovalClock {
    /// The removal clock at monotonic instant `at`, given this node's wall clock and the
    /// ConfigNode's, both in ms since the epoch.
    pub(crate) fn now(&mut self, local_ms: i64, confignode_ms: i64, at: std::time::Instant) -> i64 {
        let wall = local_ms.min(confignode_ms);
        let now = match self.last {
            None => wall,
            Some((last, then)) => {
                let elapsed = at.saturating_duration_since(then).as_millis() as i64;
                wall.min(last.saturating_add(elapsed.saturating_mul(2)))
                    .max(last)
            }
        };
        self.last = Some((now, at));
        now
    }
}

/// The cutoff compaction removes points below, for a database's TTL at `now_ms`: the read
/// cutoff (`now - ttl`) less [`timing::TTL_REMOVAL_MARGIN_MS`]; `None` without a TTL.
pub(crate) fn ttl_removal_cutoff(now_ms: i64, ttl_ms: Option<i64>) -> Option<i64> {
    ttl_ms.map(|ttl| {
        crate::coordinator::read::ttl_cutoff_ms(now_ms, Some(ttl))
            .saturating_sub(timing::TTL_REMOVAL_MARGIN_MS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ttl_removal_trails_the_read_cutoff_by_the_margin() {
        assert_eq!(ttl_removal_cutoff(1_000_000, None), None);
        assert_eq!(
            ttl_removal_cutoff(1_000_000, Some(100_000)),
            Some(900_000 - timing::TTL_REMOVAL_MARGIN_MS)
        );
        assert_eq!(ttl_removal_cutoff(i64::MIN + 5, Some(100)), Some(i64::MIN));
    }

    /// REVIEW N12: TTL removal follows no clock ahead of the ConfigNode's, never moves back, and
    /// follows a forward step at no more than twice real time.
    #[test]
    fn the_removal_clock_is_bounded_by_the_confignode_and_real_time() {
        use std::time::{Duration, Instant};
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut clock = RemovalClock::default();
        // This node's clock stepped an hour ahead: the ConfigNode's bounds it.
        assert_eq!(clock.now(3_600_000 + 1_000, 1_000, at(0)), 1_000);
        // One second later both agree again.
        assert_eq!(clock.now(2_000, 2_000, at(1_000)), 2_000);
        // Both step an hour forward: followed at twice real time (10 s → 20 s), not at once.
        assert_eq!(clock.now(3_600_000, 3_600_000, at(11_000)), 22_000);
        // Either steps back: the removal clock stays.
        assert_eq!(clock.now(500, 3_600_000, at(12_000)), 22_000);
        // And catches up with the real time meanwhile.
        assert_eq!(clock.now(30_000, 30_000, at(20_000)), 30_000);
    }
}
