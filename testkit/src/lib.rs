//! An in-process cluster for tests: one real ConfigNode and real DataNodes on `127.0.0.1:0`.
//! Every wait polls a condition until a generous deadline, so a slow machine makes the tests
//! slower, not flaky.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{DataType, Tablet, Value};
use confignode::client::GrpcDataNodeClient;
use confignode::ConfigNodeConfig;
use datanode::{DataNodeConfig, DataNodeHandle};
use proto::session_service_client::SessionServiceClient;
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::Channel;

pub mod raw;

/// A raw `SessionService` client logged in as root (every call carries the credentials).
pub type RawClient = SessionServiceClient<
    tonic::service::interceptor::InterceptedService<Channel, session::Credentials>,
>;

/// The short test fence.
pub const FENCE_MS: u64 = 1500;
/// For clusters whose tests do not exercise fencing, so a slow machine cannot fence by accident.
pub const LONG_FENCE_MS: u64 = 20_000;
pub const DEADLINE: Duration = Duration::from_secs(60);
/// Time partitions of one second, so a tablet over a few seconds spans several.
pub const INTERVAL_MS: i64 = 1000;

pub struct Cluster {
    pub dir: TempDir,
    /// The ConfigNode's address.
    pub cn_address: String,
    cn_stop: Option<oneshot::Sender<()>>,
    cn_task: Option<tokio::task::JoinHandle<confignode::Result<()>>>,
    pub nodes: Vec<DataNodeHandle>,
}

/// The DataNode settings of node `index` (short raft ticks, ports picked by the OS).
pub fn datanode_config(dir: &std::path::Path, index: usize, cn_address: &str) -> DataNodeConfig {
    let mut c = DataNodeConfig::default();
    c.rpc.dn_rpc_address = "127.0.0.1:0".into();
    c.internal.dn_internal_address = "127.0.0.1:0".into();
    c.node.dn_metrics_address = "127.0.0.1:0".into();
    c.internal.dn_seed_config_nodes = cn_address.to_string();
    c.node.dn_data_dir = dir.join(format!("dn{index}"));
    c.writes.data_region_write_retry_wait_ms = 100;
    c.writes.remote_write_max_retry_ms = 30_000;
    c.internal.dn_rpc_timeout_ms = 2000;
    c.raft.dn_raft_tick_ms = 20;
    c.raft.dn_raft_election_ticks = 10;
    c.raft.wal_segment_bytes = 1 << 20;
    c
}

impl Cluster {
    /// A cluster whose DataNodes fence after `fence_ms` without a processed heartbeat.
    pub async fn start(datanodes: usize, replication: u32, fence_ms: u64) -> Cluster {
        Cluster::start_with(datanodes, replication, fence_ms, |_| {}).await
    }

    /// [`Cluster::start`], with every DataNode's settings changed by `tweak` first.
    pub async fn start_with(
        datanodes: usize,
        replication: u32,
        fence_ms: u64,
        tweak: impl Fn(&mut DataNodeConfig),
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let cn_address = listener.local_addr().unwrap().to_string();
        let mut config = ConfigNodeConfig::default();
        config.node.cn_internal_address = cn_address.clone();
        config.node.cn_data_dir = dir.path().join("cn");
        config.node.cn_metrics_address = "127.0.0.1:0".into();
        config.raft.cn_raft_tick_ms = 20;
        config.raft.cn_raft_election_ticks = 10;
        config.lease.heartbeat_interval_ms = 100;
        config.lease.metadata_lease_fence_ms = fence_ms;
        config.lease.lease_proceed_margin_ms = 1000;
        config.lease.failure_detector_threshold_ms = fence_ms;
        config.lease.invalidation_retry_interval_ms = 100;
        config.partitioning.data_replication_factor = replication;
        config.partitioning.data_region_group_num_per_database = 2;
        config.partitioning.time_partition_interval_ms = INTERVAL_MS;
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
            cn_address: cn_address.clone(),
            cn_stop: Some(stop),
            cn_task: Some(cn_task),
            nodes: Vec::new(),
        };
        for i in 0..datanodes {
            let mut config = datanode_config(cluster.dir.path(), i, &cn_address);
            tweak(&mut config);
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

    /// Every DataNode's session address, in node order.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| n.rpc_address.to_string())
            .collect()
    }

    /// A raw `SessionService` client of DataNode `node`, taking replies up to 64 MiB as the
    /// session does (`SessionConfig::max_message_bytes`).
    pub async fn client(&self, node: usize) -> RawClient {
        let channel = Channel::from_shared(format!("http://{}", self.nodes[node].rpc_address))
            .expect("an address")
            .connect()
            .await
            .expect("session connects");
        SessionServiceClient::with_interceptor(channel, session::Credentials::new("root", "root"))
            .max_decoding_message_size(64 << 20)
    }

    /// Stops every DataNode, then the ConfigNode.
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

/// Settings under which a stopped replica needs a snapshot: every flush-loop round flushes and
/// truncates, a replica more than two entries behind is not waited for, and snapshots stream in
/// 4 KiB chunks.
pub fn truncating_logs(config: &mut DataNodeConfig) {
    config.storage.memtable_flush_age_ms = 100;
    config.raft.dn_raft_log_lag_entries_max = 2;
    config.snapshot.dn_snapshot_chunk_bytes = 4096;
}

/// Every replica's (applied index, digest) per region, by node index (a node that does not
/// answer is left out).
pub async fn replica_digests(
    cluster: &Cluster,
) -> std::collections::BTreeMap<u64, std::collections::BTreeMap<usize, (u64, u64)>> {
    let mut regions: std::collections::BTreeMap<
        u64,
        std::collections::BTreeMap<usize, (u64, u64)>,
    > = std::collections::BTreeMap::new();
    for node in 0..cluster.nodes.len() {
        let mut c = cluster.client(node).await;
        let Ok(resp) = c
            .region_digest(proto::RegionDigestReq {
                session_id: 1,
                region_id: 0,
                leaders_only: false,
                ..Default::default()
            })
            .await
        else {
            continue;
        };
        for d in resp.into_inner().digests {
            regions
                .entry(d.region_id)
                .or_default()
                .insert(node, (d.applied_index, d.digest));
        }
    }
    regions
}

/// Waits until every node holds every region, all replicas of each with one digest.
pub async fn wait_until_replicas_agree(cluster: &Cluster, what: &str) {
    wait_for(what, || async {
        let regions = replica_digests(cluster).await;
        !regions.is_empty()
            && regions.values().all(|replicas| {
                replicas.len() == cluster.nodes.len()
                    && replicas
                        .values()
                        .collect::<std::collections::BTreeSet<_>>()
                        .len()
                        == 1
            })
    })
    .await;
}

/// Restarts a stopped DataNode `index` of `cluster` with `tweak`ed settings on the internal
/// address it had (the one its peers' raft transports know).
pub async fn restart_on(
    cluster: &mut Cluster,
    index: usize,
    internal_address: String,
    tweak: impl Fn(&mut DataNodeConfig),
) {
    let mut config = datanode_config(cluster.dir.path(), index, &cluster.cn_address);
    tweak(&mut config);
    config.internal.dn_internal_address = internal_address;
    cluster.nodes.insert(
        index,
        datanode::start(config).await.expect("DataNode restarts"),
    );
}

/// Rows of `noise` DOUBLE full-precision noise (about 8 bytes a point on disk) at `from, from + 1,
/// ...`.
pub fn noise_tablet(device: &str, from: i64, rows: i64) -> Tablet {
    let mut t = Tablet::new(device, &[("noise", DataType::Double)]);
    for ts in from..from + rows {
        let bits = (ts as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
        t.push_row(
            ts,
            vec![Some(Value::Double(bits as f64 / (1u64 << 53) as f64))],
        );
    }
    t
}

/// Rows at `from, from + step, ...` (`rows` of them) of s1 INT64 (= 10 × time) and s2 DOUBLE.
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

/// The s1 points of [`tablet`]s.
pub fn s1_points(tablets: &[&Tablet]) -> Vec<(i64, Value)> {
    let mut points: Vec<(i64, Value)> = tablets
        .iter()
        .flat_map(|t| t.timestamps.iter().map(|ts| (*ts, Value::Int64(ts * 10))))
        .collect();
    points.sort_by_key(|(t, _)| *t);
    points.dedup_by_key(|(t, _)| *t);
    points
}
