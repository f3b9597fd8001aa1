//! The coordinator against fakes: a scripted ConfigNode ([`FakeSource`]), scripted peers
//! ([`FakePeers`], which record every call) and local replicas ([`FakeLocal`]), with a real
//! lease on a manual clock and the real caches and in-flight guard.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::{SeriesPath, Value};
use consensus::ManualClock;
use parking_lot::{Mutex, RwLock};

use super::*;
use crate::cache::NodeAddresses;
use crate::convert::{ok, status};
use crate::lease::MetadataLeaseManager;
use crate::metadata::{PartitionFetch, PartitionMap, TimeSlots};
use crate::peers::PeerRpc;
use crate::region_read::{RegionAggregate, RegionPartials, RegionRead, RegionSeries};

const DB: &str = "root.sg";
const DEVICE: &str = "root.sg.d1";
const REGION: u64 = 10;

fn tablet(timestamps: &[i64]) -> Tablet {
    let mut t = Tablet::new(DEVICE, &[("s1", DataType::Double), ("s2", DataType::Int64)]);
    for &ts in timestamps {
        t.push_row(
            ts,
            vec![Some(Value::Double(ts as f64)), Some(Value::Int64(ts))],
        );
    }
    t
}

fn internal(node: u64) -> String {
    format!("127.0.0.{node}:10730")
}

fn rpc(node: u64) -> String {
    format!("127.0.0.{node}:6667")
}

/// A ConfigNode that knows one database, auto-creates what is asked, and maps every time slot
/// of it to region [`REGION`] on nodes 2 and 3 (leader 2).
#[derive(Default)]
struct FakeSource {
    /// Measurement → type, as created.
    series: Mutex<BTreeMap<String, DataType>>,
    /// Alias → measurement.
    aliases: Mutex<BTreeMap<String, String>>,
    /// Answer every call with this status instead (e.g. 712: unreachable).
    fail_with: Mutex<Option<LinkError>>,
    /// The database is a table-model one.
    table_model: AtomicBool,
    schema_calls: AtomicUsize,
    partition_calls: AtomicUsize,
    /// Time slots asked for by every FetchPartitions so far.
    partition_slots: AtomicUsize,
    /// Answer FetchPartitions with this status (and no partitions) instead.
    refuse_partitions: Mutex<Option<proto::Status>>,
    /// Routes of the regions named in `held`: id → (replicas, leader).
    regions: Mutex<BTreeMap<u64, (Vec<u64>, u64)>>,
    /// Device → the regions holding its series slot in every time slot (absent: none), as
    /// FetchPartitions answers `every_time_slot`.
    held: Mutex<BTreeMap<String, Vec<u64>>>,
}

#[tonic::async_trait]
impl MetadataSource for FakeSource {
    async fn fetch_schema(
        &self,
        fetch: &SchemaFetch,
    ) -> Result<Vec<(String, DeviceSchema)>, LinkError> {
        self.schema_calls.fetch_add(1, Ordering::SeqCst);
        if let Some(s) = self.fail_with.lock().clone() {
            return Err(s);
        }
        let mut series = self.series.lock();
        let aliases = self.aliases.lock();
        let devices = fetch
            .devices
            .iter()
            .map(|d| {
                if fetch.auto_create {
                    for (name, t) in d
                        .measurements
                        .iter()
                        .filter(|(name, _)| !aliases.contains_key(name))
                    {
                        series
                            .entry(name.clone())
                            .or_insert(t.expect("a type where the series may be created"));
                    }
                }
                // A lookup naming no measurement (a read's) learns every alias.
                let named: Vec<&String> = if d.measurements.is_empty() {
                    aliases.keys().collect()
                } else {
                    d.measurements.iter().map(|(name, _)| name).collect()
                };
                let schema = DeviceSchema {
                    database: DB.into(),
                    types: series.clone(),
                    aliases: named
                        .into_iter()
                        .filter_map(|name| Some((name.clone(), aliases.get(name)?.clone())))
                        .collect(),
                    version: 7,
                    ttl_ms: None,
                    table_model: self.table_model.load(Ordering::SeqCst),
                };
                (d.device.clone(), schema)
            })
            .collect();
        Ok(devices)
    }

    async fn fetch_partitions(&self, fetch: &PartitionFetch) -> Result<PartitionMap, LinkError> {
        self.partition_calls.fetch_add(1, Ordering::SeqCst);
        if let Some(s) = self.fail_with.lock().clone() {
            return Err(s);
        }
        let asked: usize = fetch
            .devices
            .iter()
            .map(|d| match &d.slots {
                TimeSlots::These(slots) => slots.len(),
                TimeSlots::Every => 0,
            })
            .sum();
        self.partition_slots.fetch_add(asked, Ordering::SeqCst);
        if let Some(s) = self.refuse_partitions.lock().clone() {
            return Err(LinkError::Refused(s.into()));
        }
        let partition = PartitionConfig::default();
        let mut partitions = Vec::new();
        let mut held_slots = Vec::new();
        let held = self.held.lock();
        for d in &fetch.devices {
            let series_slot = partition.series_slot(&d.device);
            match &d.slots {
                TimeSlots::These(slots) => {
                    partitions.extend(slots.iter().map(|slot| ((series_slot, *slot), REGION)))
                }
                TimeSlots::Every => held_slots.push((
                    (DB.to_string(), series_slot),
                    held.get(&d.device).cloned().unwrap_or_default(),
                )),
            }
        }
        let mut routes: BTreeMap<u64, (Vec<u64>, u64)> = BTreeMap::new();
        if !partitions.is_empty() {
            routes.insert(REGION, (vec![2, 3], 2));
        }
        let known = self.regions.lock();
        for id in held_slots.iter().flat_map(|(_, ids)| ids) {
            routes.insert(
                *id,
                known.get(id).cloned().expect("a route for a held region"),
            );
        }
        Ok(PartitionMap {
            partitions,
            held: held_slots,
            routes: routes
                .into_iter()
                .map(|(id, (replicas, leader))| {
                    let route = RegionRoute {
                        database: DB.into(),
                        replicas,
                        leader,
                        migration: None,
                    };
                    (id, route)
                })
                .collect(),
            nodes: [1, 2, 3]
                .into_iter()
                .map(|n| {
                    let addresses = NodeAddresses {
                        internal: internal(n),
                        rpc: rpc(n),
                    };
                    (n, addresses)
                })
                .collect(),
        })
    }
}

/// Peers that answer from scripts, per address and method, and record every call.
#[derive(Default)]
struct FakePeers {
    calls: Mutex<Vec<(String, &'static str)>>,
    /// Answers of ForwardRegionWrite / RelayInsert by address, in turn; 200 once used up.
    answers: Mutex<BTreeMap<String, VecDeque<proto::Status>>>,
    /// Series answered by ReadRegion, by region.
    series: Mutex<BTreeMap<u64, Vec<RegionSeries>>>,
    /// Partials answered by AggregateRegion, by region.
    partials: Mutex<BTreeMap<u64, Vec<RegionPartials>>>,
    /// While held, ForwardRegionWrite waits.
    gate: tokio::sync::RwLock<()>,
}

impl FakePeers {
    fn answer(&self, address: &str, method: &'static str) -> proto::Status {
        self.calls.lock().push((address.to_string(), method));
        self.answers
            .lock()
            .get_mut(address)
            .and_then(VecDeque::pop_front)
            .unwrap_or_else(ok)
    }

    fn script(&self, address: &str, statuses: Vec<proto::Status>) {
        self.answers
            .lock()
            .insert(address.to_string(), statuses.into());
    }

    fn calls(&self) -> Vec<(String, &'static str)> {
        self.calls.lock().clone()
    }
}

#[tonic::async_trait]
impl PeerRpc for Arc<FakePeers> {
    async fn forward_region_write(
        &self,
        address: &str,
        _region: u64,
        _command: &RegionCommand,
    ) -> Status {
        let answer = self.answer(address, "forward");
        let _open = self.gate.read().await;
        answer.into()
    }

    async fn read_region(
        &self,
        address: &str,
        read: &RegionRead,
    ) -> Result<Vec<RegionSeries>, Status> {
        self.calls.lock().push((address.to_string(), "read"));
        Ok(self
            .series
            .lock()
            .get(&read.region)
            .cloned()
            .unwrap_or_default())
    }

    async fn aggregate_region(
        &self,
        address: &str,
        read: &RegionAggregate,
    ) -> Result<Vec<RegionPartials>, Status> {
        self.calls.lock().push((address.to_string(), "aggregate"));
        Ok(self
            .partials
            .lock()
            .get(&read.region)
            .cloned()
            .unwrap_or_default())
    }

    async fn relay_insert(&self, address: &str, _tablet: &Tablet) -> Status {
        let answer = self.answer(address, "relay_insert");
        let _open = self.gate.read().await;
        answer.into()
    }

    async fn relay_delete_data(
        &self,
        address: &str,
        _paths: &[SeriesPath],
        _start: i64,
        _end: i64,
    ) -> Status {
        self.answer(address, "relay_delete_data").into()
    }

    async fn relay_series_types(
        &self,
        address: &str,
        _device: &str,
        _measurements: &[String],
    ) -> Result<Vec<(String, DataType)>, Status> {
        let status: Status = self.answer(address, "relay_series_types").into();
        if status.is_ok() {
            Ok(vec![("s1".into(), DataType::Double)])
        } else {
            Err(status)
        }
    }

    async fn relay_table_insert(
        &self,
        address: &str,
        _database: &str,
        _tablet: &Tablet,
        _categories: &[common::table::Category],
    ) -> Status {
        self.answer(address, "relay_table_insert").into()
    }
}

/// No replica on this node.
struct FakeLocal;

#[tonic::async_trait]
impl LocalReplicas for FakeLocal {
    fn hosts(&self, _region: u64) -> bool {
        false
    }

    fn leader(&self, _region: u64) -> Option<u64> {
        None
    }

    fn leads(&self, _region: u64) -> bool {
        false
    }

    async fn propose(&self, _region: u64, _command: &RegionCommand) -> Result<(), Status> {
        Err(Status::new(
            StatusCode::RegionLeaderChangeError,
            "no local replica",
        ))
    }

    async fn read(&self, _read: &RegionRead) -> Result<Vec<RegionSeries>, Status> {
        Err(Status::new(
            StatusCode::RegionLeaderChangeError,
            "no local replica",
        ))
    }

    async fn aggregate(&self, _read: &RegionAggregate) -> Result<Vec<RegionPartials>, Status> {
        Err(Status::new(
            StatusCode::RegionLeaderChangeError,
            "no local replica",
        ))
    }
}

struct Harness {
    coordinator: Arc<Coordinator>,
    metadata: Arc<MetadataView>,
    source: Arc<FakeSource>,
    peers: Arc<FakePeers>,
    metrics: Arc<Metrics>,
}

/// Coordinator of node 1, which knows the addresses of nodes 2 and 3; its lease is live when
/// `live`.
fn harness(live: bool) -> Harness {
    let lease = Arc::new(MetadataLeaseManager::new(
        Arc::new(ManualClock::default()),
        10_000,
    ));
    if live {
        assert_eq!(lease.on_heartbeat(0), Ok(true));
        lease.recover(|| {}, || Ok::<(), ()>(())).unwrap();
        assert!(lease.is_live());
    }
    let metadata = Arc::new(MetadataView::new(lease, 1000, (10_000, 0)));
    let source = Arc::new(FakeSource::default());
    let fake_peers = Arc::new(FakePeers::default());
    let addresses: runtime::AddressBook =
        Arc::new(RwLock::new((1..=3).map(|n| (n, internal(n))).collect()));
    let peers = Arc::new(Peers::new(1, addresses, Box::new(fake_peers.clone())));
    let metrics = Arc::new(Metrics::default());
    let coordinator = Arc::new(Coordinator {
        node_id: 1,
        internal_address: internal(1),
        limits: CoordinatorLimits {
            tablet_rows_max: 10_000,
            tablet_time_partitions_max: 1000,
            tablet_limits: TabletLimits::default(),
            partition: PartitionConfig::default(),
            remote_write_retry: Duration::from_secs(5),
            write_timeout: Duration::from_secs(1),
            rpc_timeout: Duration::from_secs(1),
            query_points_max: 3,
        },
        metadata: metadata.clone(),
        source: source.clone(),
        local: Arc::new(FakeLocal),
        peers,
        metrics: metrics.clone(),
    });
    Harness {
        coordinator,
        metadata,
        source,
        peers: fake_peers,
        metrics,
    }
}

/// A ConfigNode that does not answer in time.
fn unreachable() -> LinkError {
    LinkError::Unreachable("no answer from the ConfigNode".into())
}

fn retryable(code: StatusCode) -> proto::Status {
    let mut s = status(code, format!("{code:?}"));
    s.need_retry = true;
    s
}

#[tokio::test]
async fn a_cache_miss_asks_the_confignode_once_and_the_write_goes_to_the_leader() {
    let h = harness(true);
    let written = h
        .coordinator
        .insert_tablet(tablet(&[1, 2]), Relay::WhenFenced)
        .await
        .unwrap();
    // The leader is node 2, so the client is told to write there next time.
    assert_eq!(written.redirect, Some(rpc(2)));
    assert_eq!(written.status().code.code(), 400);
    assert_eq!(h.peers.calls(), [(internal(2), "forward")]);
    let second = h
        .coordinator
        .insert_tablet(tablet(&[3]), Relay::WhenFenced)
        .await;
    assert!(second.is_ok(), "{second:?}");
    assert_eq!(h.source.schema_calls.load(Ordering::SeqCst), 1, "cached");
    assert_eq!(h.source.partition_calls.load(Ordering::SeqCst), 1, "cached");
    assert_eq!(get(&h.metrics.writes.write_points), 6);
}

fn get(counter: &std::sync::atomic::AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

#[tokio::test(start_paused = true)]
async fn a_part_refused_by_the_leader_is_retried_on_the_other_replica() {
    let h = harness(true);
    h.peers.script(
        &internal(2),
        vec![retryable(StatusCode::MetadataLeaseFencedRetryRequired)],
    );
    let outcome = h
        .coordinator
        .insert_tablet(tablet(&[1]), Relay::WhenFenced)
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(
        h.peers.calls(),
        [(internal(2), "forward"), (internal(3), "forward")]
    );
    assert_eq!(get(&h.metrics.writes.coordinator_retries), 1);
}

#[tokio::test]
async fn a_final_refusal_is_answered_as_it_is_and_not_retried() {
    let h = harness(true);
    let refusal = status(StatusCode::DataTypeMismatch, "no");
    h.peers.script(&internal(2), vec![refusal.clone()]);
    let outcome = h
        .coordinator
        .insert_tablet(tablet(&[1]), Relay::WhenFenced)
        .await;
    assert_eq!(
        outcome.as_ref().map_err(CoordinatorError::status),
        Err(refusal.into())
    );
    assert_eq!(h.peers.calls().len(), 1);
}

#[tokio::test]
async fn a_wrong_type_is_614_and_nothing_is_sent() {
    let h = harness(true);
    h.source.series.lock().insert("s1".into(), DataType::Text);
    let e = h
        .coordinator
        .insert_tablet(tablet(&[1]), Relay::WhenFenced)
        .await
        .unwrap_err();
    assert!(matches!(e, CoordinatorError::TypeMismatch(_)), "{e:?}");
    assert_eq!(e.status().code.code(), 614);
    assert!(h.peers.calls().is_empty());
}

#[tokio::test]
async fn a_fenced_coordinator_relays_to_a_lease_holder_and_a_relayed_write_is_never_relayed() {
    let h = harness(false);
    h.metadata.set_lease_holders(vec![3]);
    let outcome = h
        .coordinator
        .insert_tablet(tablet(&[1]), Relay::WhenFenced)
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(h.peers.calls(), [(internal(3), "relay_insert")]);
    assert_eq!(h.source.schema_calls.load(Ordering::SeqCst), 0);

    let e = h
        .coordinator
        .insert_tablet(tablet(&[1]), Relay::Never)
        .await
        .unwrap_err();
    let s = e.status();
    assert_eq!((s.code.code(), s.need_retry), (536, true), "{s:?}");
    assert_eq!(h.peers.calls().len(), 1, "not relayed");
}

#[tokio::test]
async fn when_no_peer_takes_a_relayed_write_the_answer_is_536_saying_so() {
    let h = harness(false);
    for node in [2, 3] {
        h.peers.script(
            &internal(node),
            vec![retryable(StatusCode::MetadataLeaseFencedRetryRequired)],
        );
    }
    let s = h
        .coordinator
        .insert_tablet(tablet(&[1]), Relay::WhenFenced)
        .await
        .unwrap_err()
        .status();
    assert_eq!((s.code.code(), s.need_retry), (536, true));
    assert!(
        s.message
            .contains("retry on another DataNode; no peer took the write either"),
        "{}",
        s.message
    );
    assert_eq!(h.peers.calls().len(), 2);
}

/// REVIEW N11: a relayed write whose peer does not answer in time may have landed there; it is
/// sent to no other peer, and answered 712 (outcome unknown, retry), never 536, within one
/// deadline for the whole relay.
#[tokio::test]
async fn a_relay_that_times_out_is_an_unknown_outcome_sent_nowhere_else() {
    let h = harness(false);
    let held = h.peers.gate.write().await;
    let started = std::time::Instant::now();
    let s = h
        .coordinator
        .insert_tablet(tablet(&[1]), Relay::WhenFenced)
        .await
        .unwrap_err()
        .status();
    let took = started.elapsed();
    drop(held);
    assert_eq!((s.code.code(), s.need_retry), (712, true), "{s:?}");
    assert!(s.message.contains("may have been applied"), "{}", s.message);
    assert_eq!(
        h.peers.calls().len(),
        1,
        "no second peer: {:?}",
        h.peers.calls()
    );
    assert!(
        took < std::time::Duration::from_secs(2),
        "one deadline for the whole relay, took {took:?}"
    );
}

#[tokio::test]
async fn an_unreachable_confignode_makes_the_coordinator_relay() {
    let h = harness(true);
    *h.source.fail_with.lock() = Some(unreachable());
    let outcome = h
        .coordinator
        .insert_tablet(tablet(&[1]), Relay::WhenFenced)
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(h.peers.calls(), [(internal(2), "relay_insert")]);
    // Relayed itself, it answers the ConfigNode's status.
    let e = h
        .coordinator
        .insert_tablet(tablet(&[1]), Relay::Never)
        .await
        .unwrap_err();
    assert_eq!(e.status().code.code(), 712);

    let types = h
        .coordinator
        .series_types(DEVICE, &["s1".into()], Relay::WhenFenced)
        .await
        .unwrap();
    assert_eq!(types, [("s1".to_string(), DataType::Double)]);
}

/// Issue 40: a table-model database's devices are not the tree's. A tree write to one is
/// refused (700) before anything is written, and a tree lookup finds none of its series.
#[tokio::test]
async fn the_tree_neither_writes_nor_types_a_table_models_device() {
    let h = harness(true);
    h.source.table_model.store(true, Ordering::SeqCst);
    let e = h
        .coordinator
        .insert_tablet(tablet(&[1]), Relay::WhenFenced)
        .await
        .unwrap_err();
    assert_eq!(e.status().code.code(), 700, "{e}");
    assert!(e.to_string().contains("table-model database"), "{e}");
    assert_eq!(h.source.partition_calls.load(Ordering::SeqCst), 0);
    assert!(h.peers.calls().is_empty(), "{:?}", h.peers.calls());
    let types = h
        .coordinator
        .series_types(DEVICE, &["s1".into()], Relay::WhenFenced)
        .await
        .unwrap();
    assert!(types.is_empty(), "{types:?}");
}

#[tokio::test(start_paused = true)]
async fn an_invalidation_waits_for_a_write_in_flight() {
    let h = harness(true);
    // Warm the caches, then hold the next forward.
    h.coordinator
        .insert_tablet(tablet(&[1]), Relay::WhenFenced)
        .await
        .unwrap();
    let held = h.peers.gate.write().await;
    let write = {
        let coordinator = h.coordinator.clone();
        tokio::spawn(async move {
            coordinator
                .insert_tablet(tablet(&[2]), Relay::WhenFenced)
                .await
        })
    };
    while h.peers.calls().len() < 2 {
        tokio::task::yield_now().await;
    }
    let epoch = h.metadata.invalidate(&[DB.to_string()], &[], &[]);
    assert!(!h.metadata.drain(epoch, Duration::from_secs(1)).await);
    assert_eq!(h.metadata.pinned_before(epoch), 1);
    drop(held);
    assert!(write.await.unwrap().is_ok());
    assert!(h.metadata.drain(epoch, Duration::from_secs(1)).await);
}

#[tokio::test(start_paused = true)]
async fn an_invalidation_cancels_a_write_backing_off() {
    let h = harness(true);
    h.peers.script(
        &internal(2),
        vec![retryable(StatusCode::RegionLeaderChangeError)],
    );
    h.peers.script(
        &internal(3),
        vec![retryable(StatusCode::RegionLeaderChangeError)],
    );
    let write = {
        let coordinator = h.coordinator.clone();
        tokio::spawn(async move {
            coordinator
                .insert_tablet(tablet(&[1]), Relay::WhenFenced)
                .await
        })
    };
    while h.peers.calls().is_empty() {
        tokio::task::yield_now().await;
    }
    let epoch = h.metadata.invalidate(&[DB.to_string()], &[], &[]);
    let e = write.await.unwrap().unwrap_err();
    assert!(matches!(e, CoordinatorError::Parts(_)), "{e:?}");
    let s = e.status();
    assert_eq!((s.code.code(), s.need_retry), (536, true), "{s:?}");
    assert!(h.metadata.drain(epoch, Duration::from_secs(1)).await);
}

fn region_series(timestamps: &[i64]) -> RegionSeries {
    device_series(DEVICE, timestamps)
}

fn device_series(device: &str, timestamps: &[i64]) -> RegionSeries {
    let points = timestamps.iter().map(|t| (*t, Value::Double(*t as f64)));
    (
        SeriesPath::new(device, "s1"),
        common::SeriesBatch::from_points(DataType::Double, points),
    )
}

#[tokio::test]
async fn a_read_merges_every_region_holding_the_device_and_says_when_it_was_cut() {
    let h = harness(true);
    h.source.series.lock().insert("s1".into(), DataType::Double);
    *h.source.regions.lock() = [(10, (vec![2], 2)), (11, (vec![3], 3))].into();
    // Today's ConfigNode keeps a series slot in one group; the wire allows more, and a read
    // reads every one named.
    h.source.held.lock().insert(DEVICE.into(), vec![10, 11]);
    h.peers
        .series
        .lock()
        .insert(10, vec![region_series(&[1, 5])]);
    h.peers
        .series
        .lock()
        .insert(11, vec![region_series(&[3, 7])]);
    let paths = [SeriesPath::new(DEVICE, "s1")];
    let pinned = h.metadata.pin();
    let read = h
        .coordinator
        .read_range(&pinned, &paths, 0..100, 0)
        .await
        .unwrap();
    assert_eq!(read.len(), 1);
    // query_points_max is 3: the fourth point is cut, and the answer says so.
    assert_eq!(read[0].batch.timestamps(), [1, 3, 5]);
    assert!(read[0].truncated);
    let calls = h.peers.calls();
    assert!(calls.contains(&(internal(2), "read")) && calls.contains(&(internal(3), "read")));

    let last = h.coordinator.read_last(&pinned, &paths).await.unwrap();
    assert_eq!((last[0].time, &last[0].value), (7, &Value::Double(7.0)));
    drop(pinned);

    let fenced = harness(false);
    let pinned = fenced.metadata.pin();
    let e = fenced
        .coordinator
        .read_range(&pinned, &paths, 0..100, 0)
        .await
        .err()
        .unwrap();
    assert_eq!(e.status().code.code(), 535);
}

/// An aggregate asks each region holding the series for partials (never points), merges them
/// window by window, answers an existing series without points with empty windows, and fails
/// closed on a fenced coordinator.
#[tokio::test]
async fn an_aggregate_merges_the_regions_partials_window_by_window() {
    use common::aggregate::{Partial, Windows};
    let h = harness(true);
    h.source.series.lock().insert("s1".into(), DataType::Double);
    h.source.series.lock().insert("s2".into(), DataType::Int64);
    *h.source.regions.lock() = [(10, (vec![2], 2)), (11, (vec![3], 3))].into();
    h.source.held.lock().insert(DEVICE.into(), vec![10, 11]);
    let windows = Windows::new(0..20, 10, 3).unwrap();
    let partial = |points: &[(i64, f64)]| {
        let mut p = Partial::default();
        for (t, v) in points {
            p.push(*t, &Value::Double(*v));
        }
        p
    };
    let s1 = SeriesPath::new(DEVICE, "s1");
    h.peers.partials.lock().insert(
        10,
        vec![(
            s1.clone(),
            vec![partial(&[(1, 4.0)]), partial(&[(12, 1.0)])],
        )],
    );
    h.peers.partials.lock().insert(
        11,
        vec![(s1.clone(), vec![partial(&[(5, -2.0)]), Partial::default()])],
    );
    let paths = [
        s1,
        SeriesPath::new(DEVICE, "s2"),
        SeriesPath::new(DEVICE, "nope"),
    ];
    let pinned = h.metadata.pin();
    let answer = h
        .coordinator
        .read_aggregate(&pinned, &paths, windows)
        .await
        .unwrap();
    assert_eq!(answer.len(), 2, "a series that does not exist is absent");
    let first = &answer[0].partials;
    assert_eq!((first[0].count, first[0].sum), (2, 2.0));
    assert_eq!(first[0].min, Some(Value::Double(-2.0)));
    assert_eq!(first[0].first, Some((1, Value::Double(4.0))));
    assert_eq!(first[1].last, Some((12, Value::Double(1.0))));
    assert_eq!(answer[1].data_type, DataType::Int64);
    assert!(answer[1].partials.iter().all(|p| *p == Partial::default()));
    let calls = h.peers.calls();
    assert!(calls.contains(&(internal(2), "aggregate")) && !calls.iter().any(|c| c.1 == "read"));
    // query_points_max (3) bounds the windows too.
    let many = Windows::new(0..20, 1, 100).unwrap();
    let e = h
        .coordinator
        .read_aggregate(&pinned, &paths, many)
        .await
        .err()
        .unwrap();
    assert_eq!(e.status().code, StatusCode::IllegalParameter);
    drop(pinned);

    let fenced = harness(false);
    let pinned = fenced.metadata.pin();
    let e = fenced
        .coordinator
        .read_aggregate(&pinned, &paths, windows)
        .await
        .err()
        .unwrap();
    assert_eq!(e.status().code.code(), 535);
}

/// A series asked by its name and by its alias in one read answers under both.
#[tokio::test]
async fn a_series_asked_by_name_and_alias_answers_both() {
    let h = harness(true);
    h.source.series.lock().insert("s1".into(), DataType::Double);
    h.source
        .aliases
        .lock()
        .insert("temperature".into(), "s1".into());
    *h.source.regions.lock() = [(REGION, (vec![2], 2))].into();
    h.source.held.lock().insert(DEVICE.into(), vec![REGION]);
    h.peers
        .series
        .lock()
        .insert(REGION, vec![region_series(&[1, 2])]);
    let paths = [
        SeriesPath::new(DEVICE, "s1"),
        SeriesPath::new(DEVICE, "temperature"),
    ];
    let pinned = h.metadata.pin();
    let read = h
        .coordinator
        .read_range(&pinned, &paths, 0..100, 0)
        .await
        .unwrap();
    let answered: Vec<(&str, &[i64])> = read
        .iter()
        .map(|s| (s.path.measurement.as_str(), s.batch.timestamps()))
        .collect();
    assert_eq!(
        answered,
        [("s1", &[1, 2][..]), ("temperature", &[1, 2][..])]
    );
    let last = h.coordinator.read_last(&pinned, &paths).await.unwrap();
    assert_eq!(last.len(), 2);
}

/// `s1` of `device` in [0, 100), through the harness's coordinator.
async fn read_s1(h: &Harness, device: &str) -> Vec<read::SeriesRange> {
    let paths = [SeriesPath::new(device, "s1")];
    let pinned = h.metadata.pin();
    h.coordinator
        .read_range(&pinned, &paths, 0..100, 0)
        .await
        .unwrap()
}

/// Scenario 4d's read bug: a coordinator whose cache held only the region its own writes went
/// to read only that region, and answered "no points" for a device of another region.
#[tokio::test]
async fn a_read_finds_the_region_of_a_device_this_coordinator_never_wrote() {
    const OTHER: &str = "root.sg.d2";
    let h = harness(true);
    h.source.series.lock().insert("s1".into(), DataType::Double);
    *h.source.regions.lock() = [(REGION, (vec![2, 3], 2)), (12, (vec![3], 3))].into();
    h.source.held.lock().insert(DEVICE.into(), vec![REGION]);
    h.source.held.lock().insert(OTHER.into(), vec![12]);
    h.peers
        .series
        .lock()
        .insert(12, vec![device_series(OTHER, &[4, 8])]);
    // A write caches region 10's route, and only it.
    h.coordinator
        .insert_tablet(tablet(&[1]), Relay::Never)
        .await
        .unwrap();
    let read = read_s1(&h, OTHER).await;
    assert_eq!(read.len(), 1, "the device's points are found");
    assert_eq!(read[0].batch.timestamps(), [4, 8]);
    let reads: Vec<_> = h
        .peers
        .calls()
        .into_iter()
        .filter(|(_, m)| *m == "read")
        .collect();
    assert_eq!(
        reads,
        [(internal(3), "read")],
        "region 12 alone, on its leader"
    );

    // The placement is cached: a second read asks the ConfigNode nothing.
    let fetches = h.source.partition_calls.load(Ordering::SeqCst);
    read_s1(&h, OTHER).await;
    assert_eq!(h.source.partition_calls.load(Ordering::SeqCst), fetches);
}

/// A device whose series slot no region holds has no points: nothing is read, nothing created.
#[tokio::test]
async fn a_read_of_a_device_no_region_holds_reads_nothing_and_creates_nothing() {
    let h = harness(true);
    h.source.series.lock().insert("s1".into(), DataType::Double);
    let read = read_s1(&h, DEVICE).await;
    assert!(read.is_empty(), "{}", read.len());
    assert!(h.peers.calls().is_empty(), "{:?}", h.peers.calls());
    assert_eq!(h.source.partition_slots.load(Ordering::SeqCst), 0);
    // Not cached as empty: once a write places the slot, a read finds it.
    h.source.held.lock().insert(DEVICE.into(), vec![REGION]);
    *h.source.regions.lock() = [(REGION, (vec![2, 3], 2))].into();
    h.peers
        .series
        .lock()
        .insert(REGION, vec![region_series(&[5])]);
    let read = read_s1(&h, DEVICE).await;
    assert_eq!(read[0].batch.timestamps(), [5]);
}

#[test]
fn every_error_maps_to_one_status() {
    let fenced = |write| CoordinatorError::Fenced {
        node: 4,
        lease: "NEED_CLEAR",
        write,
        detail: String::new(),
    };
    let cases: Vec<(CoordinatorError, i32, bool)> = vec![
        (fenced(true), 536, true),
        (fenced(false), 535, false),
        (CoordinatorError::MetadataChanged, 536, true),
        (CoordinatorError::Invalid("x".into()), 700, false),
        (CoordinatorError::TypeMismatch("x".into()), 614, false),
        (CoordinatorError::Metadata("x".into()), 507, false),
        (CoordinatorError::ConfigNode(unreachable()), 712, true),
        (
            CoordinatorError::Parts(vec![Status::ok(), fenced(true).status()]),
            302,
            true,
        ),
        (CoordinatorError::Internal("x".into()), 305, false),
    ];
    for (e, code, need_retry) in cases {
        let s = e.status();
        assert_eq!((s.code.wire(), s.need_retry), (code, need_retry), "{e:?}");
        assert!(!s.message.is_empty(), "{e:?}");
    }
    let s = fenced(false).status();
    assert_eq!(
        s.message,
        "DataNode 4 is fenced (metadata lease NEED_CLEAR)"
    );
}

#[test]
fn a_tablet_splits_by_the_region_of_each_rows_time_slot() {
    let partition = PartitionConfig {
        time_partition_interval_ms: 10,
        ..PartitionConfig::default()
    };
    // Slots 0 and 2 map to region 7, slot 1 to region 5.
    let regions: BTreeMap<i64, u64> = [(0, 7), (1, 5), (2, 7)].into();
    let split = split_by_region(tablet(&[1, 12, 25, 3, 18]), &regions, &partition);
    let rows: Vec<(u64, Vec<i64>)> = split
        .iter()
        .map(|(r, t)| (*r, t.timestamps.clone()))
        .collect();
    assert_eq!(rows, [(5, vec![12, 18]), (7, vec![1, 25, 3])]);
    for (_, t) in &split {
        assert_eq!(t.measurements, ["s1", "s2"]);
    }
    // One region: the tablet itself, rows in their order.
    let one = split_by_region(tablet(&[3, 1, 2]), &regions, &partition);
    assert_eq!(one.len(), 1);
    assert_eq!((one[0].0, one[0].1.timestamps.clone()), (7, vec![3, 1, 2]));
}

#[test]
fn types_are_checked_against_the_schema_614_or_507() {
    let t = tablet(&[1]);
    let types = |s2| -> BTreeMap<String, DataType> {
        [("s1".into(), DataType::Double), ("s2".into(), s2)].into()
    };
    assert!(check_types(&t, &types(DataType::Int64)).is_ok());
    let mismatch = check_types(&t, &types(DataType::Text))
        .unwrap_err()
        .status();
    assert!(mismatch.is(StatusCode::DataTypeMismatch), "{mismatch:?}");
    assert!(mismatch.message.contains("root.sg.d1.s2"), "{mismatch:?}");
    let missing: BTreeMap<String, DataType> = [("s1".into(), DataType::Double)].into();
    let missing = check_types(&t, &missing).unwrap_err().status();
    assert!(missing.is(StatusCode::MetadataError), "{missing:?}");
}

#[test]
fn backoff_doubles_from_100_ms_to_20_s() {
    let b: Vec<u64> = (0..10).map(|a| backoff(a).as_millis() as u64).collect();
    assert_eq!(
        b,
        [100, 200, 400, 800, 1600, 3200, 6400, 12800, 20000, 20000]
    );
    assert_eq!(backoff(u32::MAX), WRITE_BACKOFF_MAX);
}

#[test]
fn aggregation_reports_302_with_sub_statuses() {
    let ok = Status::ok;
    assert_eq!(aggregate(vec![ok(), ok()]).code, StatusCode::Success);
    let one = Status::new(StatusCode::DataTypeMismatch, "x");
    assert_eq!(aggregate(vec![one.clone()]), one);
    let fenced = Status::new(StatusCode::MetadataLeaseFencedRetryRequired, "f").retry();
    let s = aggregate(vec![ok(), fenced]);
    assert_eq!(s.code, StatusCode::MultipleError);
    assert!(s.need_retry);
    assert_eq!(s.parts.len(), 2);
    let hint = Status::new(StatusCode::RedirectionRecommend, "leader elsewhere");
    assert_eq!(
        aggregate(vec![hint.clone()]),
        hint,
        "one part keeps its hint"
    );
    assert_eq!(
        aggregate(vec![ok(), hint.clone()]),
        ok(),
        "a hint is no failure"
    );
    let s = aggregate(vec![hint, one]);
    assert_eq!((s.code, s.parts.len()), (StatusCode::MultipleError, 2));
}

#[tokio::test]
async fn a_path_the_rules_refuse_is_answered_at_the_edge_and_never_looked_up() {
    let h = harness(true);
    let mut bad = tablet(&[1]);
    bad.device = "root.sg".into();
    let e = h
        .coordinator
        .insert_tablet(bad, Relay::WhenFenced)
        .await
        .unwrap_err();
    assert_eq!(e.status().code.code(), 700, "{e:?}");
    let e = h
        .coordinator
        .series_types("root.sg.d 1", &["s1".into()], Relay::WhenFenced)
        .await
        .unwrap_err();
    assert_eq!(e.status().code.code(), 700, "{e:?}");
    let pinned = h.metadata.pin();
    let paths = [SeriesPath::new("root..d1", "s1")];
    let read = h
        .coordinator
        .read_range(&pinned, &paths, 0..100, 0)
        .await
        .unwrap();
    assert!(read.is_empty());
    assert_eq!(h.source.schema_calls.load(Ordering::SeqCst), 0);
    assert!(h.peers.calls().is_empty());
}

/// A tablet of `slots` rows, each in its own time partition, from partition `first` on.
fn tablet_across_partitions(first: i64, slots: i64) -> Tablet {
    let interval = PartitionConfig::default().time_partition_interval_ms;
    let timestamps: Vec<i64> = (first..first + slots).map(|i| i * interval).collect();
    tablet(&timestamps)
}

#[tokio::test]
async fn a_tablet_over_the_time_partition_cap_is_700_and_nothing_is_asked_or_sent() {
    let h = harness(true);
    // A session's tablet and a relayed one are held to the cap alike.
    for relay in [Relay::WhenFenced, Relay::Never] {
        let e = h
            .coordinator
            .insert_tablet(tablet_across_partitions(0, 1001), relay)
            .await
            .unwrap_err();
        let s = e.status();
        assert_eq!((s.code.code(), s.need_retry), (700, false), "{s:?}");
        assert!(
            s.message.contains("more than 1000 time partitions")
                && s.message.contains("dn_tablet_time_partitions_max is 1000"),
            "{}",
            s.message
        );
    }
    assert_eq!(h.source.schema_calls.load(Ordering::SeqCst), 0);
    assert_eq!(h.source.partition_calls.load(Ordering::SeqCst), 0);
    assert!(h.peers.calls().is_empty());

    // Many rows in few partitions are not many partitions.
    let interval = PartitionConfig::default().time_partition_interval_ms;
    let dense: Vec<i64> = (0..5000).map(|i| (i % 10) * interval + i).collect();
    let outcome = h
        .coordinator
        .insert_tablet(tablet(&dense), Relay::WhenFenced)
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(h.source.partition_slots.load(Ordering::SeqCst), 10);

    // Exactly the cap goes through, in one FetchPartitions.
    let outcome = h
        .coordinator
        .insert_tablet(tablet_across_partitions(10, 1000), Relay::WhenFenced)
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(h.source.partition_calls.load(Ordering::SeqCst), 2);
    assert_eq!(h.source.partition_slots.load(Ordering::SeqCst), 1010);
    assert_eq!(get(&h.metrics.writes.write_points), 2 * 6000);
}

#[test]
fn a_request_spanning_more_partitions_than_fetch_partitions_takes_is_700() {
    let h = harness(true);
    let limits = &h.coordinator.limits;
    // Each tablet within its own cap; together one partition past what one FetchPartitions may
    // ask. Partitions two tablets share count once.
    let mut tablets: Vec<Tablet> = (0..100)
        .map(|k| tablet_across_partitions(k * 1000, 1000))
        .collect();
    tablets.push(tablet_across_partitions(0, 1000));
    assert_eq!(limits.check_request_partitions(&tablets), Ok(()));
    tablets.push(tablet_across_partitions(100_000, 1));
    let s = limits
        .check_request_partitions(&tablets)
        .unwrap_err()
        .status();
    assert_eq!((s.code.code(), s.need_retry), (700, false), "{s:?}");
    assert!(
        s.message.contains("at most 100000 per request"),
        "{}",
        s.message
    );
    // Small requests are settled by their row count alone.
    assert_eq!(limits.check_request_partitions(&[tablet(&[1, 2])]), Ok(()));
}

#[tokio::test]
async fn a_database_full_at_the_confignode_is_answered_as_it_is_and_not_retried() {
    let h = harness(true);
    let refusal = status(
        StatusCode::IllegalParameter,
        "database root.sg holds 1000000 partitions and the write needs 1 more; \
         cn_database_partitions_max is 1000000",
    );
    *h.source.refuse_partitions.lock() = Some(refusal.clone());
    let e = h
        .coordinator
        .insert_tablet(tablet(&[1]), Relay::WhenFenced)
        .await
        .unwrap_err();
    assert_eq!(e.status(), refusal.into());
    assert_eq!(h.source.partition_calls.load(Ordering::SeqCst), 1);
    assert!(h.peers.calls().is_empty());
}

fn delete_paths() -> Vec<SeriesPath> {
    vec![SeriesPath::new(DEVICE, "s1")]
}

#[tokio::test]
async fn a_fenced_coordinator_relays_a_deletion_and_a_relayed_one_is_never_relayed() {
    let h = harness(false);
    h.metadata.set_lease_holders(vec![3]);
    let outcome = h
        .coordinator
        .delete_data(delete_paths(), 0, 10, Relay::WhenFenced)
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(h.peers.calls(), [(internal(3), "relay_delete_data")]);
    assert_eq!(h.source.schema_calls.load(Ordering::SeqCst), 0);

    let s = h
        .coordinator
        .delete_data(delete_paths(), 0, 10, Relay::Never)
        .await
        .unwrap_err()
        .status();
    assert_eq!((s.code.code(), s.need_retry), (536, true), "{s:?}");
    assert_eq!(h.peers.calls().len(), 1, "not relayed");

    // A malformed range is refused here, relayed nowhere.
    let e = h
        .coordinator
        .delete_data(delete_paths(), 10, 0, Relay::WhenFenced)
        .await
        .unwrap_err();
    assert!(matches!(e, CoordinatorError::Invalid(_)), "{e:?}");
    assert_eq!(h.peers.calls().len(), 1);
}

#[tokio::test]
async fn an_unreachable_confignode_makes_the_coordinator_relay_a_deletion() {
    let h = harness(true);
    *h.source.fail_with.lock() = Some(unreachable());
    let outcome = h
        .coordinator
        .delete_data(delete_paths(), 0, 10, Relay::WhenFenced)
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(h.peers.calls(), [(internal(2), "relay_delete_data")]);
}

#[tokio::test]
async fn a_write_by_an_alias_writes_its_series_and_both_names_at_once_are_refused() {
    let h = harness(true);
    h.source.series.lock().insert("s1".into(), DataType::Double);
    h.source
        .aliases
        .lock()
        .insert("temperature".into(), "s1".into());
    let mut by_alias = Tablet::new(
        DEVICE,
        &[("temperature", DataType::Double), ("s2", DataType::Int64)],
    );
    by_alias.push_row(1, vec![Some(Value::Double(1.5)), Some(Value::Int64(1))]);
    let outcome = h
        .coordinator
        .insert_tablet(by_alias, Relay::WhenFenced)
        .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    let created: Vec<String> = h.source.series.lock().keys().cloned().collect();
    assert_eq!(created, ["s1", "s2"], "no series named after the alias");

    // The type lookup of a string record or an INSERT answers for the alias too.
    let types = h
        .coordinator
        .series_types(DEVICE, &["temperature".to_string()], Relay::WhenFenced)
        .await
        .unwrap();
    assert_eq!(types, [("temperature".to_string(), DataType::Double)]);

    let mut both = Tablet::new(
        DEVICE,
        &[("temperature", DataType::Double), ("s1", DataType::Double)],
    );
    both.push_row(2, vec![Some(Value::Double(1.0)), Some(Value::Double(2.0))]);
    let e = h
        .coordinator
        .insert_tablet(both, Relay::WhenFenced)
        .await
        .unwrap_err();
    assert!(matches!(e, CoordinatorError::Invalid(_)), "{e:?}");
    assert_eq!(e.status().code.code(), 700);
}
