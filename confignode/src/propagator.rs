//! The fence protocol's waiting steps (DESIGN §4): broadcast an invalidation until every
//! DataNode acknowledged it or is fenced, then order the data deletion through each affected
//! region's raft log. Time comes from an injected clock and `tokio::time` (tests pause it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use common::StatusCode;
use consensus::Clock;
use parking_lot::Mutex;

use crate::client::DataNodeClient;
use crate::tracker::ContactTracker;

/// A DataNode that must acknowledge an invalidation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Its id.
    pub id: u64,
    /// Its current incarnation epoch (an ack from another one does not count).
    pub incarnation_epoch: u64,
    /// `host:port` of its internal service.
    pub address: String,
}

/// How an invalidation round ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InvalidationOutcome {
    /// DataNodes that acknowledged.
    pub acknowledged: BTreeSet<u64>,
    /// DataNodes the protocol went ahead without: fenced (`fence + margin` since last contact).
    pub fenced: BTreeSet<u64>,
    /// Broadcast rounds sent.
    pub rounds: u32,
}

/// A region and where its replicas are, for the deletion step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionTarget {
    /// The region.
    pub region_id: u64,
    /// (DataNode id, internal address) of every replica; the known leader first.
    pub replicas: Vec<(u64, String)>,
}

/// Runs the waiting steps of fence operations.
pub struct Propagator {
    client: Arc<dyn DataNodeClient>,
    tracker: Arc<Mutex<ContactTracker>>,
    clock: Arc<dyn Clock>,
    retry_interval_ms: u64,
}

impl Propagator {
    /// Rounds of a region deletion before giving up on this attempt (the operation stays
    /// pending and is resumed by the next sweep or leader).
    pub const REGION_WRITE_ROUNDS_MAX: u32 = 30;

    /// A propagator that retries every `retry_interval_ms` (IoTDB: 1000).
    pub fn new(
        client: Arc<dyn DataNodeClient>,
        tracker: Arc<Mutex<ContactTracker>>,
        clock: Arc<dyn Clock>,
        retry_interval_ms: u64,
    ) -> Self {
        assert!(retry_interval_ms > 0, "retry interval must be > 0");
        Propagator {
            client,
            tracker,
            clock,
            retry_interval_ms,
        }
    }

    /// Sends `request` (its `data_node_id` and `incarnation_epoch` filled per target) to every
    /// target until each one acknowledged (200 with its current epoch) or is fenced. Returns at
    /// once when all acknowledge; an unreachable DataNode holds it until `fence + margin` past
    /// its last contact (or past this leader's election).
    pub async fn invalidate(
        &self,
        targets: &[Target],
        request: proto::InvalidateCacheReq,
    ) -> InvalidationOutcome {
        let mut outcome = InvalidationOutcome::default();
        loop {
            let round_start = self.clock.now_ms();
            let pending: Vec<&Target> = {
                let tracker = self.tracker.lock();
                targets
                    .iter()
                    .filter(|t| !outcome.acknowledged.contains(&t.id))
                    .filter(|t| {
                        if tracker.is_fenced(t.id, round_start) {
                            outcome.fenced.insert(t.id);
                            false
                        } else {
                            true
                        }
                    })
                    .collect()
            };
            if pending.is_empty() {
                return outcome;
            }
            outcome.rounds += 1;
            let mut calls = tokio::task::JoinSet::new();
            for t in &pending {
                let req = proto::InvalidateCacheReq {
                    data_node_id: t.id,
                    incarnation_epoch: t.incarnation_epoch,
                    ..request.clone()
                };
                let call = self.client.invalidate(&t.address, req);
                let timeout = Duration::from_millis(self.retry_interval_ms);
                let target = (*t).clone();
                calls.spawn(async move { (target, tokio::time::timeout(timeout, call).await) });
            }
            while let Some(joined) = calls.join_next().await {
                let Ok((target, result)) = joined else {
                    continue;
                };
                match result {
                    Ok(Ok(resp))
                        if resp.status.as_ref().is_some_and(|s| s.code == 200)
                            && resp.incarnation_epoch == target.incarnation_epoch =>
                    {
                        let now = self.clock.now_ms();
                        // An ack is a contact too; a refused one (stale) simply is not counted.
                        let recorded = self.tracker.lock().record_contact(
                            target.id,
                            target.incarnation_epoch,
                            now,
                        );
                        if recorded.is_ok() {
                            outcome.acknowledged.insert(target.id);
                        }
                    }
                    // A newer incarnation answered: the targeted one is gone with its caches (a
                    // registration starts a DataNode with empty caches), and the newer one
                    // registered after the pending state was committed, so it never saw the old
                    // metadata as usable.
                    Ok(Ok(resp)) if resp.incarnation_epoch > target.incarnation_epoch => {
                        outcome.acknowledged.insert(target.id);
                    }
                    Ok(Ok(resp)) => tracing::debug!(
                        node = target.id,
                        "invalidation refused: {:?}, epoch {}",
                        resp.status,
                        resp.incarnation_epoch
                    ),
                    Ok(Err(e)) => tracing::debug!(node = target.id, "invalidation failed: {e}"),
                    Err(_) => tracing::debug!(node = target.id, "invalidation timed out"),
                }
            }
            if targets.iter().all(|t| outcome.acknowledged.contains(&t.id)) {
                return outcome;
            }
            // Sleep until the next broadcast, or until the first pending node counts as fenced.
            let now = self.clock.now_ms();
            let next_fence = {
                let tracker = self.tracker.lock();
                targets
                    .iter()
                    .filter(|t| !outcome.acknowledged.contains(&t.id))
                    .map(|t| tracker.fenced_at_ms(t.id, now))
                    .min()
                    .unwrap_or(now)
            };
            let wake = (round_start + self.retry_interval_ms).min(next_fence);
            tokio::time::sleep(Duration::from_millis(wake.saturating_sub(now))).await;
        }
    }

    /// Orders `command` through the raft log of every region: sends it to the known leader and
    /// follows 905 redirects / tries the other replicas, retrying every interval. Returns the
    /// regions that did not confirm within [`Propagator::REGION_WRITE_ROUNDS_MAX`] rounds.
    pub async fn delete_in_regions(
        &self,
        regions: &[RegionTarget],
        make_request: impl Fn(u64) -> proto::RegionWriteReq,
    ) -> Vec<u64> {
        let mut remaining: BTreeMap<u64, &RegionTarget> =
            regions.iter().map(|r| (r.region_id, r)).collect();
        for _ in 0..Self::REGION_WRITE_ROUNDS_MAX {
            let mut done = Vec::new();
            for (&region_id, region) in &remaining {
                if self.write_one(region, make_request(region_id)).await {
                    done.push(region_id);
                }
            }
            for id in done {
                remaining.remove(&id);
            }
            if remaining.is_empty() {
                return Vec::new();
            }
            tokio::time::sleep(Duration::from_millis(self.retry_interval_ms)).await;
        }
        remaining.into_keys().collect()
    }

    async fn write_one(&self, region: &RegionTarget, request: proto::RegionWriteReq) -> bool {
        let timeout = Duration::from_millis(self.retry_interval_ms.max(1000) * 5);
        let mut tried = BTreeSet::new();
        let mut candidates: Vec<String> = region.replicas.iter().map(|(_, a)| a.clone()).collect();
        while let Some(address) = candidates.first().cloned() {
            candidates.remove(0);
            if !tried.insert(address.clone()) {
                continue;
            }
            let call = self.client.region_write(&address, request.clone());
            match tokio::time::timeout(timeout, call).await {
                Ok(Ok(resp)) => {
                    let status = resp.status.unwrap_or_default();
                    if status.code == i32::from(StatusCode::Success.code()) {
                        return true;
                    }
                    if let Some(redirect) = status.redirect {
                        candidates.insert(0, proto::endpoint(&redirect));
                    }
                    tracing::debug!(
                        region = region.region_id,
                        address,
                        "region write: {}",
                        status.message
                    );
                }
                Ok(Err(e)) => tracing::debug!(
                    region = region.region_id,
                    address,
                    "region write failed: {e}"
                ),
                Err(_) => {
                    tracing::debug!(region = region.region_id, address, "region write timed out")
                }
            }
        }
        false
    }
}
