//! The fence protocol's waiting steps (design §4): broadcast an invalidation until every
//! DataNode acknowledged it or is fenced, then order the data deletion through each affected
//! region's raft log. Time comes from an injected clock and `tokio::time` (tests pause it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use common::StatusCode;
use consensus::Clock;
use parking_lot::Mutex;

use crate::client::DataNodeClient;
use crate::tracker::{ContactRefused, ContactTracker};

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
    /// DataNodes the protocol went ahead without: fenced (`fence + margin` since last contact,
    /// or, when a newer incarnation answered, since the last contact with the older one).
    pub fenced: BTreeSet<u64>,
    /// The most attempts sent to any one DataNode.
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
    drain_timeout_ms: u64,
}

/// Where one target of an invalidation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TargetState {
    /// Not settled; the next attempt may go out at this time (if none is in flight).
    Pending { next_attempt_ms: u64 },
    /// A newer incarnation answered: the targeted process may still be alive (paused, or on
    /// another host with the same data directory), so only time settles it.
    Superseded,
    /// Settled.
    Done,
}

impl Propagator {
    /// Rounds of a region deletion before giving up on this attempt (the operation stays
    /// pending and is resumed by the next sweep or leader).
    pub const REGION_WRITE_ROUNDS_MAX: u32 = 30;

    /// Slack on top of the drain timeout before an invalidation call is abandoned.
    pub const CALL_SLACK_MS: u64 = 2000;

    /// A propagator that retries every `retry_interval_ms` (IoTDB: 1000) and lets a DataNode
    /// drain its in-flight operations for up to `drain_timeout_ms` per attempt.
    pub fn new(
        client: Arc<dyn DataNodeClient>,
        tracker: Arc<Mutex<ContactTracker>>,
        clock: Arc<dyn Clock>,
        retry_interval_ms: u64,
        drain_timeout_ms: u64,
    ) -> Self {
        assert!(retry_interval_ms > 0, "retry interval must be > 0");
        assert!(drain_timeout_ms > 0, "drain timeout must be > 0");
        Propagator {
            client,
            tracker,
            clock,
            retry_interval_ms,
            drain_timeout_ms,
        }
    }

    /// Sends `request` (its `data_node_id`, `incarnation_epoch` and drain timeout filled per
    /// target) to every target until each one acknowledged (200 with its current epoch) or is
    /// fenced, as judged in `term`. Returns at once when all acknowledge; an unreachable DataNode
    /// holds it until `fence + margin` past its last contact (or past this leader's election).
    ///
    /// Each target has at most one call in flight, and a call may take as long as the DataNode's
    /// drain (plus slack): abandoning a call sooner than the DataNode gives up draining would let
    /// a node under long requests never acknowledge (a livelock, M3 in REVIEW-2026-12). Targets
    /// are independent: a slow one delays neither the others nor the fencing verdicts.
    pub async fn invalidate(
        &self,
        term: u64,
        targets: &[Target],
        request: proto::InvalidateCacheReq,
    ) -> InvalidationOutcome {
        let mut outcome = InvalidationOutcome::default();
        let mut states: BTreeMap<u64, TargetState> = targets
            .iter()
            .map(|t| (t.id, TargetState::Pending { next_attempt_ms: 0 }))
            .collect();
        let mut attempts: BTreeMap<u64, u32> = BTreeMap::new();
        let mut in_flight: BTreeSet<u64> = BTreeSet::new();
        let mut calls = tokio::task::JoinSet::new();
        let call_timeout = Duration::from_millis(self.drain_timeout_ms + Self::CALL_SLACK_MS);
        loop {
            let now = self.clock.now_ms();
            // Verdicts first: time alone settles fenced and superseded targets.
            self.settle_by_time(term, targets, &mut states, &mut outcome, now);
            if states.values().all(|s| *s == TargetState::Done) {
                debug_assert!(
                    targets
                        .iter()
                        .all(|t| outcome.acknowledged.contains(&t.id)
                            || outcome.fenced.contains(&t.id)),
                    "every target acknowledged the invalidation or is fenced"
                );
                return outcome;
            }
            // Attempts that are due.
            for t in targets {
                let TargetState::Pending { next_attempt_ms } = states[&t.id] else {
                    continue;
                };
                if next_attempt_ms > now || in_flight.contains(&t.id) {
                    continue;
                }
                let attempt = attempts.entry(t.id).or_default();
                *attempt += 1;
                outcome.rounds = outcome.rounds.max(*attempt);
                states.insert(
                    t.id,
                    TargetState::Pending {
                        next_attempt_ms: now + self.retry_interval_ms,
                    },
                );
                let req = proto::InvalidateCacheReq {
                    data_node_id: t.id,
                    incarnation_epoch: t.incarnation_epoch,
                    drain_timeout_ms: self.drain_timeout_ms,
                    ..request.clone()
                };
                let call = self.client.invalidate(&t.address, req);
                let target = t.clone();
                in_flight.insert(t.id);
                calls
                    .spawn(async move { (target, tokio::time::timeout(call_timeout, call).await) });
            }
            // Sleep until the next attempt is due, a target may count as fenced, or a call ends.
            let wake = self.next_wake(targets, &states, &in_flight, now);
            let sleep = tokio::time::sleep(Duration::from_millis(wake.saturating_sub(now).max(1)));
            let joined = tokio::select! {
                joined = calls.join_next(), if !calls.is_empty() => joined,
                () = sleep => None,
            };
            let Some(Ok((target, result))) = joined else {
                continue;
            };
            in_flight.remove(&target.id);
            if states[&target.id] == TargetState::Done {
                continue;
            }
            self.on_reply(&target, result, &mut states, &mut outcome);
        }
    }

    /// Settles the targets time alone decides: a pending one whose lease this leader's tracker
    /// calls fenced in `term`, a superseded one whose older incarnations are all fenced.
    fn settle_by_time(
        &self,
        term: u64,
        targets: &[Target],
        states: &mut BTreeMap<u64, TargetState>,
        outcome: &mut InvalidationOutcome,
        now: u64,
    ) {
        let tracker = self.tracker.lock();
        for t in targets {
            let state = states.get_mut(&t.id).expect("every target has a state");
            match *state {
                TargetState::Pending { .. } if tracker.is_fenced_in(term, t.id, now) => {
                    outcome.fenced.insert(t.id);
                    *state = TargetState::Done;
                }
                TargetState::Superseded
                    if tracker.older_incarnations_fenced_in(
                        term,
                        t.id,
                        t.incarnation_epoch + 1,
                        now,
                    ) =>
                {
                    outcome.fenced.insert(t.id);
                    *state = TargetState::Done;
                }
                _ => {}
            }
        }
    }

    /// When something may next change: an attempt falls due, a target may count as fenced.
    fn next_wake(
        &self,
        targets: &[Target],
        states: &BTreeMap<u64, TargetState>,
        in_flight: &BTreeSet<u64>,
        now: u64,
    ) -> u64 {
        let tracker = self.tracker.lock();
        targets
            .iter()
            .filter_map(|t| match states[&t.id] {
                TargetState::Pending { next_attempt_ms } => {
                    let fenced_at = tracker.fenced_at_ms(t.id, now);
                    Some(if in_flight.contains(&t.id) {
                        fenced_at
                    } else {
                        fenced_at.min(next_attempt_ms)
                    })
                }
                TargetState::Superseded => Some(tracker.older_incarnations_fenced_at_ms(
                    t.id,
                    t.incarnation_epoch + 1,
                    now,
                )),
                TargetState::Done => None,
            })
            .min()
            .unwrap_or(now)
    }

    /// Takes one invalidation call's outcome for `target`.
    fn on_reply<T>(
        &self,
        target: &Target,
        result: Result<Result<proto::InvalidateCacheResp, String>, T>,
        states: &mut BTreeMap<u64, TargetState>,
        outcome: &mut InvalidationOutcome,
    ) {
        match result {
            Ok(Ok(resp))
                if resp.status.as_ref().is_some_and(|s| s.is_success())
                    && resp.incarnation_epoch == target.incarnation_epoch =>
            {
                let now = self.clock.now_ms();
                // An ack is a contact too; a refused one (stale) simply is not counted.
                let recorded =
                    self.tracker
                        .lock()
                        .record_contact(target.id, target.incarnation_epoch, now);
                // The reply names the targeted incarnation, so it is the ack asked for; only
                // a registry that already knows a newer incarnation makes it stale.
                if !matches!(recorded, Err(ContactRefused::StaleIncarnation { .. })) {
                    outcome.acknowledged.insert(target.id);
                    states.insert(target.id, TargetState::Done);
                }
            }
            // A newer incarnation answered: it registered after the pending state was
            // committed (the targets were read after it), so it never saw the old metadata
            // as usable. The targeted process, though, may still be alive: wait it out.
            Ok(Ok(resp)) if resp.incarnation_epoch > target.incarnation_epoch => {
                tracing::debug!(
                    node = target.id,
                    "invalidation answered by incarnation {} (targeted {}): waiting out the \
                     older one's lease",
                    resp.incarnation_epoch,
                    target.incarnation_epoch
                );
                states.insert(target.id, TargetState::Superseded);
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
                    if status.is(StatusCode::Success) {
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
