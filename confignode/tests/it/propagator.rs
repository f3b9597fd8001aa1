//! The fence propagator with tokio's paused clock: virtual time only moves when every task
//! waits, so elapsed times are exact and the tests take no wall-clock time.

use std::sync::Arc;
use std::time::Duration;

use confignode::propagator::{Propagator, RegionTarget, Target};
use confignode::tracker::{ContactTracker, LeaseTimings};
use confignode::TokioClock;
use consensus::Clock;
use parking_lot::Mutex;

use crate::fake::{Behaviour, FakeClient};

const FENCE_MS: u64 = 20_000;
const MARGIN_MS: u64 = 5000;
const RETRY_MS: u64 = 1000;
const DRAIN_MS: u64 = 10_000;
/// The term every test's propagator acts in.
const TERM: u64 = 4;

struct Setup {
    client: Arc<FakeClient>,
    tracker: Arc<Mutex<ContactTracker>>,
    clock: Arc<TokioClock>,
    propagator: Propagator,
    targets: Vec<Target>,
}

fn setup() -> Setup {
    let client = Arc::new(FakeClient::default());
    let tracker = Arc::new(Mutex::new(ContactTracker::new(LeaseTimings {
        fence_ms: FENCE_MS,
        proceed_margin_ms: MARGIN_MS,
        failure_detector_ms: FENCE_MS,
    })));
    let clock = Arc::new(TokioClock::default());
    let targets: Vec<Target> = (1..=3)
        .map(|id| Target {
            id,
            incarnation_epoch: 1,
            address: format!("dn{id}:10730"),
        })
        .collect();
    {
        let mut t = tracker.lock();
        t.become_leader(TERM, clock.now_ms());
        t.sync_registry(&[(1, 1), (2, 1), (3, 1)], clock.now_ms());
    }
    let propagator = Propagator::new(
        client.clone(),
        tracker.clone(),
        clock.clone(),
        RETRY_MS,
        DRAIN_MS,
    );
    Setup {
        client,
        tracker,
        clock,
        propagator,
        targets,
    }
}

fn request() -> proto::InvalidateCacheReq {
    proto::InvalidateCacheReq {
        operation_id: 7,
        databases: vec!["root.sg".into()],
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn all_acknowledge_completes_without_waiting() {
    let s = setup();
    let start = s.clock.now_ms();
    let outcome = s.propagator.invalidate(TERM, &s.targets, request()).await;
    assert_eq!(outcome.acknowledged.len(), 3);
    assert!(outcome.fenced.is_empty());
    assert_eq!(outcome.rounds, 1);
    assert_eq!(
        s.clock.now_ms() - start,
        0,
        "no waiting when everyone acknowledges"
    );
    let sent = s.client.invalidations.lock();
    assert!(sent
        .iter()
        .all(|(_, r)| r.operation_id == 7 && r.incarnation_epoch == 1));
    assert_eq!(sent.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn one_unreachable_completes_only_after_fence_plus_margin() {
    let s = setup();
    s.client
        .behaviour
        .lock()
        .insert("dn3:10730".into(), Behaviour::Unreachable);
    // Last contact with dn3 at t = 2 s.
    tokio::time::advance(Duration::from_millis(2000)).await;
    s.tracker
        .lock()
        .record_contact(3, 1, s.clock.now_ms())
        .unwrap();
    let contact = s.clock.now_ms();
    let outcome = s.propagator.invalidate(TERM, &s.targets, request()).await;
    let done = s.clock.now_ms();
    assert_eq!(
        outcome.acknowledged.iter().copied().collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(outcome.fenced.iter().copied().collect::<Vec<_>>(), vec![3]);
    assert!(
        done - contact > FENCE_MS + MARGIN_MS,
        "proceeded after {} ms",
        done - contact
    );
    assert!(done - contact <= FENCE_MS + MARGIN_MS + RETRY_MS);
    // It kept retrying the unreachable node about once per interval meanwhile.
    let to_dn3 = s
        .client
        .invalidations
        .lock()
        .iter()
        .filter(|(a, _)| a == "dn3:10730")
        .count();
    assert!(to_dn3 >= 20, "{to_dn3} broadcasts to dn3");
    assert_eq!(outcome.rounds as usize, to_dn3);
}

#[tokio::test(start_paused = true)]
async fn after_a_leader_change_the_new_leader_waits_from_its_election() {
    let s = setup();
    s.client
        .behaviour
        .lock()
        .insert("dn3:10730".into(), Behaviour::Unreachable);
    // dn3 was last reached long ago, under another leader; this node is elected at t = 100 s.
    s.tracker.lock().step_down();
    tokio::time::advance(Duration::from_millis(100_000)).await;
    let elected = s.clock.now_ms();
    s.tracker.lock().become_leader(TERM, elected);
    let outcome = s.propagator.invalidate(TERM, &s.targets, request()).await;
    let done = s.clock.now_ms();
    assert_eq!(outcome.fenced.iter().copied().collect::<Vec<_>>(), vec![3]);
    assert!(
        done - elected > FENCE_MS + MARGIN_MS,
        "the new leader proceeded {} ms after its election",
        done - elected
    );
}

#[tokio::test(start_paused = true)]
async fn an_ack_from_an_older_incarnation_does_not_count() {
    let mut s = setup();
    // dn2 re-registered: the registry says epoch 2, but the ack comes from epoch 1.
    s.targets[1].incarnation_epoch = 2;
    s.tracker
        .lock()
        .sync_registry(&[(1, 1), (2, 2), (3, 1)], s.clock.now_ms());
    s.client
        .behaviour
        .lock()
        .insert("dn2:10730".into(), Behaviour::AckFromEpoch(1));
    let start = s.clock.now_ms();
    let outcome = s.propagator.invalidate(TERM, &s.targets, request()).await;
    assert!(!outcome.acknowledged.contains(&2));
    assert!(outcome.fenced.contains(&2));
    assert!(s.clock.now_ms() - start > FENCE_MS + MARGIN_MS);
}

#[tokio::test(start_paused = true)]
async fn a_reply_from_a_newer_incarnation_waits_out_the_older_ones_lease() {
    // M4: dn2 re-registered (epoch 2) after the targets were read with epoch 1. The old process
    // may still be alive (paused, or elsewhere with the same data directory) and trust its
    // caches until its own lease ends: fence + margin after its last contact.
    let s = setup();
    s.client
        .behaviour
        .lock()
        .insert("dn2:10730".into(), Behaviour::AckFromEpoch(2));
    tokio::time::advance(Duration::from_millis(3000)).await;
    let last_old_contact = s.clock.now_ms();
    s.tracker
        .lock()
        .record_contact(2, 1, last_old_contact)
        .unwrap();
    // The new incarnation registers and is heard from all along.
    s.tracker
        .lock()
        .sync_registry(&[(1, 1), (2, 2), (3, 1)], s.clock.now_ms());
    let heartbeats = keep_contact(&s, 2, 2);
    let outcome = s.propagator.invalidate(TERM, &s.targets, request()).await;
    heartbeats.abort();
    let done = s.clock.now_ms();
    assert_eq!(
        outcome.acknowledged.iter().copied().collect::<Vec<_>>(),
        vec![1, 3]
    );
    assert!(outcome.fenced.contains(&2));
    assert!(
        done - last_old_contact > FENCE_MS + MARGIN_MS,
        "proceeded {} ms after the old incarnation's last contact",
        done - last_old_contact
    );
    assert!(done - last_old_contact <= FENCE_MS + MARGIN_MS + RETRY_MS);
}

/// Records a contact with `(id, epoch)` every 500 ms, as heartbeat replies would.
fn keep_contact(s: &Setup, id: u64, epoch: u64) -> tokio::task::JoinHandle<()> {
    let (tracker, clock) = (s.tracker.clone(), s.clock.clone());
    tokio::spawn(async move {
        loop {
            let now = clock.now_ms();
            tracker.lock().record_contact(id, epoch, now).unwrap();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_tracker_that_never_led_fences_nobody_until_its_terms_clock_ran() {
    // C1: a ConfigNode whose raft group just elected it starts an operation before its leader
    // loop ran. The tracker has no history; before the fix every DataNode read as fenced and the
    // invalidation returned at once without sending anything.
    let s = setup();
    s.tracker.lock().step_down();
    s.client
        .behaviour
        .lock()
        .insert("dn3:10730".into(), Behaviour::Unreachable);
    let start = s.clock.now_ms();
    let fresh = Arc::new(Mutex::new(ContactTracker::new(LeaseTimings {
        fence_ms: FENCE_MS,
        proceed_margin_ms: MARGIN_MS,
        failure_detector_ms: FENCE_MS,
    })));
    let propagator = Propagator::new(
        s.client.clone(),
        fresh.clone(),
        s.clock.clone(),
        RETRY_MS,
        DRAIN_MS,
    );
    // Not leading at all: nobody is fenced, so the unreachable node holds the operation.
    let waited = tokio::time::timeout(
        Duration::from_millis(4 * (FENCE_MS + MARGIN_MS)),
        propagator.invalidate(TERM, &s.targets, request()),
    )
    .await;
    assert!(
        waited.is_err(),
        "returned without the term's clock: {waited:?}"
    );
    assert!(s
        .client
        .invalidations
        .lock()
        .iter()
        .any(|(a, _)| a == "dn3:10730"));
    // Leading another term is no evidence either.
    fresh.lock().become_leader(TERM + 1, s.clock.now_ms());
    let waited = tokio::time::timeout(
        Duration::from_millis(2 * (FENCE_MS + MARGIN_MS)),
        propagator.invalidate(TERM, &s.targets, request()),
    )
    .await;
    assert!(waited.is_err(), "judged with another term's clock");
    // Once this term's clock starts, dn3 counts as fenced fence + margin later.
    fresh.lock().step_down();
    let elected = s.clock.now_ms();
    fresh.lock().become_leader(TERM, elected);
    let outcome = propagator.invalidate(TERM, &s.targets, request()).await;
    assert_eq!(outcome.fenced.iter().copied().collect::<Vec<_>>(), vec![3]);
    assert!(s.clock.now_ms() - elected > FENCE_MS + MARGIN_MS);
    assert!(s.clock.now_ms() > start);
}

#[tokio::test(start_paused = true)]
async fn a_slow_drain_is_waited_for_not_abandoned_every_interval() {
    // M3: dn2 answers only after 3 s (it drains a long request) while its heartbeats keep it
    // in contact. Abandoning each attempt after the 1 s retry interval never got an answer.
    let s = setup();
    s.client
        .behaviour
        .lock()
        .insert("dn2:10730".into(), Behaviour::SlowAck(3000));
    let heartbeats = keep_contact(&s, 2, 1);
    let start = s.clock.now_ms();
    let outcome = tokio::time::timeout(
        Duration::from_millis(FENCE_MS),
        s.propagator.invalidate(TERM, &s.targets, request()),
    )
    .await
    .expect("the slow DataNode's answer was never taken");
    heartbeats.abort();
    assert_eq!(outcome.acknowledged.len(), 3);
    assert_eq!(s.clock.now_ms() - start, 3000);
    let sent = s.client.invalidations.lock();
    assert!(sent.iter().all(|(_, r)| r.drain_timeout_ms == DRAIN_MS));
    assert_eq!(
        sent.iter().filter(|(a, _)| a == "dn2:10730").count(),
        1,
        "one attempt in flight at a time"
    );
}

#[tokio::test(start_paused = true)]
async fn region_deletion_follows_the_leader_redirect() {
    let s = setup();
    s.client
        .region_redirects
        .lock()
        .insert("dn1:10730".into(), "dn2:10730".into());
    let regions = vec![RegionTarget {
        region_id: 5,
        replicas: vec![(1, "dn1:10730".into()), (2, "dn2:10730".into())],
    }];
    let failed = s
        .propagator
        .delete_in_regions(&regions, |region_id| proto::RegionWriteReq {
            region_id,
            command: Some(proto::region_write_req::Command::DeleteDatabase(
                proto::DeleteDatabaseCommand {
                    database: "root.sg".into(),
                },
            )),
            operation_id: 7,
            metadata_version: 9,
            table_version: 0,
        })
        .await;
    assert!(failed.is_empty());
    let writes: Vec<String> = s
        .client
        .region_writes
        .lock()
        .iter()
        .map(|(a, _)| a.clone())
        .collect();
    assert_eq!(
        writes,
        vec!["dn1:10730".to_string(), "dn2:10730".to_string()]
    );
}
