//! The fence protocol end to end on one ConfigNode with a live fake DataNode and a dead one:
//! the dead one turns Unknown, and DROP DATABASE proceeds only once it counts as fenced; a retry
//! of the drop meanwhile joins it. And a DELETE TIMESERIES overtaken by a DROP DATABASE of its
//! database: both answered 200, the ConfigNode still serving.

use std::sync::Arc;
use std::time::{Duration, Instant};

use confignode::client::GrpcDataNodeClient;
use confignode::ConfigNodeConfig;
use proto::config_node_service_client::ConfigNodeServiceClient;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use crate::fake::FakeDataNode;

const FENCE_MS: u64 = 1000;
const MARGIN_MS: u64 = 600;

/// One ConfigNode, with a data directory of its own, and a fake DataNode registered with it (the
/// fake answers as the incarnation it was given): what each test here starts from.
struct OneNode {
    /// A client of the ConfigNode.
    cn: ConfigNodeServiceClient<Channel>,
    /// The fake DataNode's registration.
    live: proto::RegisterDataNodeResp,
    stop: oneshot::Sender<()>,
    node: JoinHandle<Result<(), String>>,
    dn_server: JoinHandle<Result<(), tonic::transport::Error>>,
    _dir: tempfile::TempDir,
}

/// The ConfigNode settings of these tests: a short fence and margin, the failure detector at
/// the fence, fast ticks, heartbeats and invalidation retries.
fn fence_config() -> ConfigNodeConfig {
    let mut config = ConfigNodeConfig::default();
    config.raft.cn_raft_tick_ms = 20;
    config.lease.heartbeat_interval_ms = 100;
    config.lease.metadata_lease_fence_ms = FENCE_MS;
    config.lease.lease_proceed_margin_ms = MARGIN_MS;
    config.lease.failure_detector_threshold_ms = FENCE_MS;
    config.lease.invalidation_retry_interval_ms = 100;
    config
}

/// A registration of a new DataNode whose internal service is at `internal`.
fn register_request(internal: &str) -> proto::RegisterDataNodeReq {
    proto::RegisterDataNodeReq {
        data_node_id: 0,
        internal_endpoint: proto::parse_endpoint(internal).ok(),
        rpc_endpoint: proto::parse_endpoint("127.0.0.1:6667").ok(),
        ..Default::default()
    }
}

/// Serves `fake`, starts a ConfigNode with `config` (its addresses and data directory set here)
/// and registers the fake once the ConfigNode leads.
async fn start(fake: &FakeDataNode, config: ConfigNodeConfig) -> OneNode {
    let dir = tempfile::tempdir().unwrap();
    let dn_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dn_address = dn_listener.local_addr().unwrap().to_string();
    let dn_server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(fake.server())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(dn_listener)),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let mut config = config;
    config.node.cn_internal_address = address.clone();
    config.node.cn_data_dir = dir.path().to_path_buf();
    config.node.cn_metrics_address = "127.0.0.1:0".into();
    let (stop, stopped) = oneshot::channel::<()>();
    let run = confignode::run_with_listener(
        config,
        listener,
        Arc::new(GrpcDataNodeClient::new(
            Duration::from_millis(500),
            Duration::from_millis(200),
        )),
        async move {
            drop(stopped.await);
        },
    );
    let node = tokio::spawn(async move { run.await.map_err(|e| e.to_string()) });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .timeout(Duration::from_secs(30))
        .connect_lazy();
    let mut cn = ConfigNodeServiceClient::new(channel);
    let deadline = Instant::now() + Duration::from_secs(20);
    let live = loop {
        if let Ok(resp) = cn.register_data_node(register_request(&dn_address)).await {
            let resp = resp.into_inner();
            if resp.status.as_ref().is_some_and(|s| s.code == 200) {
                break resp;
            }
        }
        assert!(Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    *fake.epoch.lock() = live.incarnation_epoch;
    OneNode {
        cn,
        live,
        stop,
        node,
        dn_server,
        _dir: dir,
    }
}

impl OneNode {
    /// Stops the ConfigNode, which must still be running, and the fake DataNode.
    async fn stop(self) {
        self.stop.send(()).expect("the node is still running");
        self.node.await.unwrap().unwrap();
        self.dn_server.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_database_waits_for_fence_plus_margin_of_an_unreachable_datanode() {
    let fake = FakeDataNode::default();
    let one = start(&fake, fence_config()).await;
    let (mut cn, live) = (one.cn.clone(), one.live.clone());
    // An address nothing listens on: a DataNode that died.
    let dead_address = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };

    // Regions on the live DataNode only, then the dead one registers.
    let partitions = cn
        .fetch_partitions(proto::FetchPartitionsReq {
            requests: vec![proto::DeviceTimeSlots {
                device: "root.sg.d1".into(),
                time_slots: vec![0],
                every_time_slot: false,
            }],
            auto_create: true,
            caller: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(partitions.partitions.len(), 1, "{partitions:?}");
    let dead = cn
        .register_data_node(register_request(&dead_address))
        .await
        .unwrap()
        .into_inner();
    let registered_dead = Instant::now();
    assert_eq!(dead.status.unwrap().code, 200);

    // The drop, and a retry of it sent while the first still waits (a client whose deadline is
    // shorter than fence + margin): the retry joins the operation rather than being refused.
    let drop_database = |mut cn: ConfigNodeServiceClient<tonic::transport::Channel>| async move {
        cn.drop_database(proto::DropDatabaseReq {
            database: "root.sg".into(),
        })
        .await
        .unwrap()
        .into_inner()
    };
    let first = tokio::spawn(drop_database(cn.clone()));
    tokio::time::sleep(Duration::from_millis(FENCE_MS / 4)).await;
    let retry = drop_database(cn.clone()).await;
    let dropped = first.await.unwrap();
    let waited = registered_dead.elapsed();
    assert_eq!(dropped.code, 200, "{dropped:?}");
    assert_eq!(retry.code, 200, "the retry joined the drop: {retry:?}");
    assert!(
        waited > Duration::from_millis(FENCE_MS + MARGIN_MS),
        "the drop proceeded {waited:?} after the dead DataNode's last contact"
    );
    assert!(!fake.invalidations.lock().is_empty());
    let writes = fake.region_writes.lock().clone();
    assert_eq!(writes.len(), 1);
    assert!(matches!(
        writes[0].command,
        Some(proto::region_write_req::Command::DeleteDatabase(ref d)) if d.database == "root.sg"
    ));
    let databases = cn
        .show_databases(proto::ShowDatabasesReq {})
        .await
        .unwrap()
        .into_inner();
    assert!(databases.databases.is_empty());

    // The failure detector marked the dead DataNode Unknown; the live one stays Running and
    // holds its lease.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let cluster = cn
            .show_cluster(proto::ShowClusterReq {})
            .await
            .unwrap()
            .into_inner();
        let status = |id: u64| {
            cluster
                .data_nodes
                .iter()
                .find(|d| d.location.as_ref().is_some_and(|l| l.data_node_id == id))
                .map(|d| d.status.clone())
        };
        if status(dead.data_node_id).as_deref() == Some("Unknown") {
            assert_eq!(status(live.data_node_id).as_deref(), Some("Running"));
            break;
        }
        assert!(Instant::now() < deadline, "never Unknown: {cluster:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let leases = cn
        .show_leases(proto::ShowLeasesReq {})
        .await
        .unwrap()
        .into_inner();
    let lease = |id: u64| {
        leases
            .leases
            .iter()
            .find(|l| l.data_node_id == id)
            .unwrap()
            .clone()
    };
    assert!(lease(live.data_node_id).holds_lease);
    assert!(lease(dead.data_node_id).fenced);

    one.stop().await;
}

/// A DELETE TIMESERIES overtaken by a DROP DATABASE of its database: the delete begins first,
/// its region deletion is held back until the drop's arrived, so the drop's FinishOperation
/// commits first and removes the series. The delete's FinishOperation then applies as a no-op
/// (it used to panic on the raft thread, on every replay too) and its client is answered 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_overtaken_by_a_drop_of_its_database_is_answered_success() {
    let fake = FakeDataNode::default();
    fake.series_deletions_after_database
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let one = start(&fake, fence_config()).await;
    let mut cn = one.cn.clone();

    // root.sg.d1.s1 and a region holding it.
    let schema = cn
        .fetch_schema(proto::FetchSchemaReq {
            devices: vec![proto::DeviceSchemaRequest {
                device: "root.sg.d1".into(),
                measurements: vec![proto::MeasurementSchema {
                    name: "s1".into(),
                    data_type: proto::DataType::Double as i32,
                }],
            }],
            auto_create: true,
            caller: None,
            table: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(schema.devices[0].measurements.len(), 1, "{schema:?}");
    let partitions = cn
        .fetch_partitions(proto::FetchPartitionsReq {
            requests: vec![proto::DeviceTimeSlots {
                device: "root.sg.d1".into(),
                time_slots: vec![0],
                every_time_slot: false,
            }],
            auto_create: true,
            caller: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(partitions.partitions.len(), 1, "{partitions:?}");

    // The delete reaches its region deletion (held back), then the drop begins.
    let delete = tokio::spawn({
        let mut cn = cn.clone();
        async move {
            cn.delete_timeseries(proto::DeleteTimeseriesReq {
                series: vec![proto::SeriesPath {
                    device: "root.sg.d1".into(),
                    measurement: "s1".into(),
                }],
            })
            .await
            .unwrap()
            .into_inner()
        }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.region_writes.lock().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the delete never reached its region"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let dropped = cn
        .drop_database(proto::DropDatabaseReq {
            database: "root.sg".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(dropped.code, 200, "{dropped:?}");
    let deleted = tokio::time::timeout(Duration::from_secs(20), delete)
        .await
        .expect("the delete is answered")
        .unwrap();
    assert_eq!(
        deleted.code, 200,
        "the overtaken delete succeeded: {deleted:?}"
    );
    let kinds: Vec<&str> = fake
        .region_writes
        .lock()
        .iter()
        .map(|w| match w.command {
            Some(proto::region_write_req::Command::DeleteSeries(_)) => "series",
            Some(proto::region_write_req::Command::DeleteDatabase(_)) => "database",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds.first(), Some(&"series"), "{kinds:?}");
    assert!(kinds.contains(&"database"), "{kinds:?}");

    // The ConfigNode still serves: nothing left of the database, and it may be created again.
    let databases = cn
        .show_databases(proto::ShowDatabasesReq {})
        .await
        .unwrap()
        .into_inner();
    assert!(databases.databases.is_empty(), "{databases:?}");
    let created = cn
        .create_database(proto::CreateDatabaseReq {
            database: "root.sg".into(),
            table_model: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.code, 200, "{created:?}");

    one.stop().await;
}

/// A fence-floor round (REVIEW N9): after DROP DATABASE of `root.sg` finishes, and while no
/// operation is pending, the leader re-stamps the DataNode's cache with the current metadata
/// version (an invalidation naming nothing but the floor) and only then orders
/// `RaiseFenceFloor` at that version through the region of `root.other`. No new deletion, no
/// new round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_drop_is_followed_by_one_fence_floor_round() {
    let fake = FakeDataNode::default();
    let mut config = fence_config();
    config.lease.fence_floor_interval_ms = 300;
    let one = start(&fake, config).await;
    let mut cn = one.cn.clone();
    for device in ["root.sg.d1", "root.other.d1"] {
        let partitions = cn
            .fetch_partitions(proto::FetchPartitionsReq {
                requests: vec![proto::DeviceTimeSlots {
                    device: device.into(),
                    time_slots: vec![0],
                    every_time_slot: false,
                }],
                auto_create: true,
                caller: None,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(partitions.partitions.len(), 1, "{partitions:?}");
    }
    let dropped = cn
        .drop_database(proto::DropDatabaseReq {
            database: "root.sg".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(dropped.code, 200, "{dropped:?}");

    let is_floor = |w: &proto::RegionWriteReq| {
        matches!(
            w.command,
            Some(proto::region_write_req::Command::RaiseFenceFloor(_))
        )
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let floor = loop {
        if let Some(w) = fake.region_writes.lock().iter().find(|w| is_floor(w)) {
            break w.clone();
        }
        assert!(Instant::now() < deadline, "no fence-floor round");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let invalidations = fake.invalidations.lock().clone();
    let rounds: Vec<&proto::InvalidateCacheReq> =
        invalidations.iter().filter(|i| i.fence_floor > 0).collect();
    assert_eq!(rounds.len(), 1, "{invalidations:?}");
    let round = rounds[0];
    assert!(
        round.databases.is_empty() && round.series.is_empty() && round.tables.is_empty(),
        "a floor round names nothing to remove: {round:?}"
    );
    assert_eq!(floor.metadata_version, round.fence_floor);
    let drop_invalidation = invalidations
        .iter()
        .find(|i| i.databases == ["root.sg"])
        .expect("the drop's invalidation");
    assert!(
        round.fence_floor > drop_invalidation.metadata_version,
        "the floor passes the drop"
    );
    assert_eq!(floor.region_id, {
        let regions = cn
            .show_regions(proto::ShowRegionsReq::default())
            .await
            .unwrap()
            .into_inner();
        regions
            .regions
            .iter()
            .filter_map(|r| r.replica_set.as_ref())
            .find(|r| r.database == "root.other")
            .map(|r| r.region_id)
            .expect("the region of root.other")
    });

    // Nothing deleted since: the next intervals pass without a round.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let later = fake.invalidations.lock().clone();
    assert_eq!(later.iter().filter(|i| i.fence_floor > 0).count(), 1);
    assert_eq!(
        fake.region_writes
            .lock()
            .iter()
            .filter(|w| is_floor(w))
            .count(),
        1
    );

    one.stop().await;
}
