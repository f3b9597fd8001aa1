//! The in-process cluster harness, shared by the `it` and `failpoints` test binaries (each uses a
//! subset, hence `dead_code` is allowed): one real ConfigNode (`confignode::run_with_listener`) and
//! real DataNodes (`datanode::start` on `127.0.0.1:0`), talking gRPC over loopback. Short lease
//! settings (fence 1.5 s, heartbeat 100 ms); every wait polls a condition until a generous
//! deadline, so a slow machine makes the tests slower, not flaky.
#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{DataType, StatusCode, Tablet, Value};
use confignode::client::GrpcDataNodeClient;
use confignode::ConfigNodeConfig;
use datanode::{DataNodeConfig, DataNodeHandle};
use proto::session_service_client::SessionServiceClient;
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::Channel;

pub const FENCE_MS: u64 = 1500;
/// Time partitions of one second, so a tablet over a few seconds spans several.
pub const INTERVAL_MS: i64 = 1000;
pub const DEADLINE: Duration = Duration::from_secs(60);

pub struct Cluster {
    pub dir: TempDir,
    pub cn_address: String,
    cn_stop: Option<oneshot::Sender<()>>,
    cn_task: Option<tokio::task::JoinHandle<confignode::Result<()>>>,
    pub nodes: Vec<DataNodeHandle>,
}

pub fn datanode_config(dir: &std::path::Path, index: usize, cn_address: &str) -> DataNodeConfig {
    DataNodeConfig {
        dn_rpc_address: "127.0.0.1:0".into(),
        dn_internal_address: "127.0.0.1:0".into(),
        dn_metrics_address: "127.0.0.1:0".into(),
        dn_seed_config_nodes: cn_address.to_string(),
        dn_data_dir: dir.join(format!("dn{index}")),
        data_region_write_retry_wait_ms: 100,
        remote_write_max_retry_ms: 30_000,
        dn_rpc_timeout_ms: 2000,
        dn_raft_tick_ms: 20,
        dn_raft_election_ticks: 10,
        wal_segment_bytes: 1 << 20,
        ..DataNodeConfig::default()
    }
}

impl Cluster {
    /// A cluster with the short test fence ([`FENCE_MS`]).
    pub async fn start(datanodes: usize, replication: u32) -> Cluster {
        Cluster::start_with_fence(datanodes, replication, FENCE_MS).await
    }

    /// A cluster whose DataNodes fence after `fence_ms` without a processed heartbeat. Tests that
    /// do not exercise fencing use a long one, so a slow machine cannot fence a node by accident.
    pub async fn start_with_fence(datanodes: usize, replication: u32, fence_ms: u64) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let cn_address = listener.local_addr().unwrap().to_string();
        let config = ConfigNodeConfig {
            cn_internal_address: cn_address.clone(),
            cn_data_dir: dir.path().join("cn"),
            cn_metrics_address: "127.0.0.1:0".into(),
            cn_raft_tick_ms: 20,
            cn_raft_election_ticks: 10,
            heartbeat_interval_ms: 100,
            metadata_lease_fence_ms: fence_ms,
            lease_proceed_margin_ms: 1000,
            failure_detector_threshold_ms: fence_ms,
            invalidation_retry_interval_ms: 100,
            data_replication_factor: replication,
            data_region_group_num_per_database: 2,
            time_partition_interval_ms: INTERVAL_MS,
            ..ConfigNodeConfig::default()
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let client = Arc::new(GrpcDataNodeClient::new(
            Duration::from_secs(1),
            Duration::from_millis(500),
        ));
        let cn_task = tokio::spawn(confignode::run_with_listener(
            config,
            listener,
            client,
            async {
                drop(stopped.await);
            },
        ));
        let mut cluster = Cluster {
            dir,
            cn_address,
            cn_stop: Some(stop),
            cn_task: Some(cn_task),
            nodes: Vec::new(),
        };
        for i in 0..datanodes {
            let config = datanode_config(cluster.dir.path(), i, &cluster.cn_address);
            cluster
                .nodes
                .push(datanode::start(config).await.expect("DataNode starts"));
        }
        for (i, node) in cluster.nodes.iter().enumerate() {
            wait_for(&format!("DataNode {i} holds its lease"), || async {
                node.lease_is_live()
            })
            .await;
        }
        cluster
    }

    pub async fn client(&self, node: usize) -> SessionServiceClient<Channel> {
        SessionServiceClient::connect(format!("http://{}", self.nodes[node].rpc_address))
            .await
            .expect("session connects")
    }

    pub async fn stop(mut self) {
        for node in self.nodes.drain(..) {
            node.stop().await.expect("DataNode stops cleanly");
        }
        if let Some(stop) = self.cn_stop.take() {
            if stop.send(()).is_err() {
                eprintln!("the ConfigNode had already stopped");
            }
        }
        if let Some(task) = self.cn_task.take() {
            task.await
                .expect("ConfigNode task")
                .expect("ConfigNode ran cleanly");
        }
    }
}

/// Polls `condition` every 50 ms until it holds; panics with `what` after [`DEADLINE`].
pub async fn wait_for<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !condition().await {
        assert!(
            start.elapsed() < DEADLINE,
            "timed out after {DEADLINE:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Rows at `from, from + step, ...` (`rows` of them) of two measurements.
pub fn tablet(device: &str, from: i64, step: i64, rows: i64) -> Tablet {
    let mut t = Tablet::new(device, &[("s1", DataType::Int64), ("s2", DataType::Double)]);
    for i in 0..rows {
        let ts = from + i * step;
        t.push_row(
            ts,
            vec![
                Some(Value::Int64(ts * 10)),
                Some(Value::Double(ts as f64 / 2.0)),
            ],
        );
    }
    t
}

/// One InsertTablet RPC. A 400 REDIRECTION_RECOMMEND (written; the leader is elsewhere) is answered as 200 so tests
/// assert on the outcome; [`insert_raw`] keeps the hint.
pub async fn insert(client: &mut SessionServiceClient<Channel>, t: &Tablet) -> proto::Status {
    let mut s = insert_raw(client, t).await;
    if s.code == i32::from(StatusCode::RedirectionRecommend.code()) {
        s.code = i32::from(StatusCode::Success.code());
        s.redirect = None;
    }
    s
}

/// One InsertTablet RPC, the status as answered.
pub async fn insert_raw(client: &mut SessionServiceClient<Channel>, t: &Tablet) -> proto::Status {
    client
        .insert_tablet(proto::InsertTabletReq {
            session_id: 1,
            tablet: Some(datanode::convert::tablet_to_wire(t)),
        })
        .await
        .expect("InsertTablet RPC")
        .into_inner()
}

/// Inserts until the answer is not a retryable one (as a session does with 536 and leader
/// changes), within [`DEADLINE`]; returns the last status.
pub async fn insert_retrying(
    client: &mut SessionServiceClient<Channel>,
    t: &Tablet,
) -> proto::Status {
    let start = Instant::now();
    loop {
        let s = insert(client, t).await;
        if s.code == 200 || !s.need_retry || start.elapsed() > DEADLINE {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Queries until the answer is 200 (a node may be fenced for a moment on a slow machine; reads
/// fail closed and the client tries again), within [`DEADLINE`]; returns the last answer.
pub async fn query_ok(
    client: &mut SessionServiceClient<Channel>,
    device: &str,
    from: i64,
    to: i64,
) -> proto::QueryRawResp {
    let start = Instant::now();
    loop {
        let r = query(client, device, from, to).await;
        if code(&r.status) == 200 || start.elapsed() > DEADLINE {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of a counter on a `/metrics` page.
pub fn metric(page: &str, name: &str) -> u64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in\n{page}"))
}

pub fn path(device: &str, measurement: &str) -> proto::SeriesPath {
    proto::SeriesPath {
        device: device.into(),
        measurement: measurement.into(),
    }
}

pub async fn query(
    client: &mut SessionServiceClient<Channel>,
    device: &str,
    from: i64,
    to: i64,
) -> proto::QueryRawResp {
    client
        .query_raw(proto::QueryRawReq {
            session_id: 1,
            paths: vec![path(device, "s1"), path(device, "s2")],
            start_time: from,
            end_time: to,
            points_limit: 0,
        })
        .await
        .expect("QueryRaw RPC")
        .into_inner()
}

pub fn code(status: &Option<proto::Status>) -> i32 {
    status.as_ref().map_or(-1, |s| s.code)
}

/// Asserts that the query returned exactly the tablet's points for s1.
pub fn assert_s1_matches(resp: &proto::QueryRawResp, expected: &Tablet) {
    assert_eq!(code(&resp.status), 200, "{:?}", resp.status);
    let s1 = resp
        .series
        .iter()
        .find(|s| s.path.as_ref().is_some_and(|p| p.measurement == "s1"))
        .expect("s1 is returned");
    assert_eq!(s1.timestamps, expected.timestamps);
    match s1.values.as_ref().and_then(|c| c.values.as_ref()) {
        Some(proto::column::Values::Int64Values(v)) => {
            let want: Vec<i64> = expected.timestamps.iter().map(|t| t * 10).collect();
            assert_eq!(v.values, want);
        }
        other => panic!("s1 values: {other:?}"),
    }
}
