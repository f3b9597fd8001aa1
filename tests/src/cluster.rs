//! A cluster of real `confignode` and `datanode` processes, one network namespace each.
//!
//! Binaries are taken from `FENCEPOST_BIN_DIR`, else from the cargo target directory next to the
//! test executable (`target/debug/deps/..`). Logs, data directories and the failure report live
//! in a temporary directory that is kept (and printed) when the test fails.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use session::{RegionDigestView, Session, SessionConfig};

use crate::netns::Network;
use crate::process::NodeProcess;
use crate::wait_for;

/// The command that builds what the suite runs.
pub const BUILD_COMMAND: &str =
    "cargo build --profile test --workspace --exclude fencepost-benches --all-features --bins";

/// Ports: every node has its own address, so every node uses the defaults.
const CN_PORT: u16 = 10710;
const CN_METRICS_PORT: u16 = 9092;
const DN_RPC_PORT: u16 = 6667;
const DN_INTERNAL_PORT: u16 = 10730;
const DN_METRICS_PORT: u16 = 9091;

/// The failpoint that stalls a DataNode's heartbeat handler (`return(ms)`).
pub const HEARTBEAT_STALL: &str = "datanode::heartbeat::stall";

/// Shape and timing of a test cluster. Short leases keep the suite fast.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// 1 or 3.
    pub config_nodes: usize,
    /// DataNodes.
    pub data_nodes: usize,
    /// `data_replication_factor`.
    pub replication: u32,
    /// `data_region_group_num_per_database`.
    pub region_groups: u32,
    /// `metadata_lease_fence_ms`.
    pub fence_ms: u64,
    /// `heartbeat_interval_ms`.
    pub heartbeat_ms: u64,
    /// `lease_proceed_margin_ms` (must exceed 2 × election ticks × tick on the ConfigNode).
    pub margin_ms: u64,
    /// `time_partition_interval_ms`.
    pub time_partition_ms: i64,
    /// `cn_raft_tick_ms` and `dn_raft_tick_ms`.
    pub raft_tick_ms: u64,
    /// `cn_raft_election_ticks` and `dn_raft_election_ticks`.
    pub election_ticks: u64,
    /// `dn_rpc_timeout_ms`: DataNode → DataNode and DataNode → ConfigNode calls. Short, because
    /// a dropped packet makes a call hang until it expires.
    pub dn_rpc_timeout_ms: u64,
    /// `memtable_flush_age_ms`: short makes every region flush, and so compact, all the time.
    pub memtable_flush_age_ms: u64,
    /// `compaction_files_min`.
    pub compaction_files_min: u64,
    /// `dn_raft_entry_cache_bytes`.
    pub raft_entry_cache_bytes: u64,
    /// `dn_raft_unapplied_bytes_max`.
    pub raft_unapplied_bytes_max: u64,
    /// `dn_raft_log_lag_bytes_max`: small makes a leader truncate past a follower that is down,
    /// which then catches up by snapshot.
    pub raft_log_lag_bytes_max: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            config_nodes: 1,
            data_nodes: 3,
            replication: 3,
            region_groups: 2,
            fence_ms: 3000,
            heartbeat_ms: 400,
            margin_ms: 1500,
            time_partition_ms: 10_000,
            // Elections time out after 0.5–1 s as with 100 ms × 5, but the jitter takes one of
            // ten values instead of five, so split votes rarely repeat (three in a row outlast
            // the 3 s lease).
            raft_tick_ms: 50,
            election_ticks: 10,
            dn_rpc_timeout_ms: 1500,
            memtable_flush_age_ms: 600_000,
            compaction_files_min: 4,
            raft_entry_cache_bytes: 256 << 20,
            raft_unapplied_bytes_max: 256 << 20,
            raft_log_lag_bytes_max: 1 << 30,
        }
    }
}

/// Where the binaries are; fails naming the build command when one is missing.
pub fn bin_dir() -> Result<PathBuf> {
    let dir = match std::env::var_os("FENCEPOST_BIN_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let exe = std::env::current_exe().context("current_exe")?;
            // target/<profile>/deps/<test> → target/<profile>
            exe.parent()
                .and_then(Path::parent)
                .context("test executable has no target dir")?
                .to_path_buf()
        }
    };
    for binary in ["confignode", "datanode", "fencepost"] {
        if !dir.join(binary).is_file() {
            bail!(
                "binary `{binary}` not found in {} — build it first with `{BUILD_COMMAND}` \
                 (or set FENCEPOST_BIN_DIR)",
                dir.display()
            );
        }
    }
    Ok(dir)
}

/// One HTTP/1.0 exchange with a node's metrics server.
pub fn http(address: SocketAddr, method: &str, path: &str, body: &str) -> Result<String> {
    let timeout = Duration::from_secs(2);
    let mut stream = TcpStream::connect_timeout(&address, timeout)
        .with_context(|| format!("connecting to {address}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: {address}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .with_context(|| format!("reading from {address}"))?;
    let (head, content) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("malformed HTTP answer from {address}: {response:?}"))?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        bail!("{method} {path} on {address}: {head}: {content}");
    }
    Ok(content.to_string())
}

/// Parses Prometheus text into `name{labels}` → value.
pub fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// A running cluster. Dropping it kills every process and removes the network; when the
/// thread is panicking it first prints every log's tail and keeps the directory's logs (its
/// data too under `FENCEPOST_KEEP_DATA=1`: a failed run's data is gigabytes, and failed runs
/// left behind must not fill the disk the next run needs).
pub struct Cluster {
    /// Its configuration.
    pub config: ClusterConfig,
    /// ConfigNode processes; index `i` is network node `i`.
    pub config_nodes: Vec<NodeProcess>,
    /// DataNode processes; index `j` is network node `config_nodes + j`.
    pub data_nodes: Vec<NodeProcess>,
    /// The network.
    pub net: Network,
    /// Runs sessions and the workload.
    pub runtime: tokio::runtime::Runtime,
    dir: Option<tempfile::TempDir>,
    /// Printed with the logs when the test fails (the seed, the faults injected).
    notes: Mutex<Vec<String>>,
    started: Instant,
    /// Ids of DataNodes whose data directory a scenario wiped ([`Cluster::wipe_data_node`]):
    /// they never come back (their process returned under a new id), so health and replica
    /// checks leave them out.
    retired: Mutex<std::collections::BTreeSet<u64>>,
}

impl Cluster {
    /// Creates the network, starts every node and waits until every DataNode is registered and
    /// holds its lease.
    pub fn start(config: ClusterConfig) -> Result<Cluster> {
        let bins = bin_dir()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let dir = tempfile::Builder::new()
            .prefix("fencepost-faults-")
            .tempdir()?;
        ensure_free_space(dir.path())?;
        let net = Network::create(config.config_nodes + config.data_nodes)?;
        let c = config.config_nodes;
        let members: Vec<String> = (0..c)
            .map(|i| format!("{}@{}:{CN_PORT}", i + 1, net.ip(i)))
            .collect();
        let mut config_nodes = Vec::new();
        for i in 0..c {
            let ip = net.ip(i);
            let data = dir.path().join(format!("cn{}", i + 1));
            let args = [
                ("--cn-node-id", (i + 1).to_string()),
                ("--cn-internal-address", format!("{ip}:{CN_PORT}")),
                ("--cn-initial-members", members.join(",")),
                ("--cn-data-dir", data.display().to_string()),
                ("--cn-metrics-address", format!("{ip}:{CN_METRICS_PORT}")),
                ("--cn-raft-tick-ms", config.raft_tick_ms.to_string()),
                (
                    "--cn-raft-election-ticks",
                    config.election_ticks.to_string(),
                ),
                ("--heartbeat-interval-ms", config.heartbeat_ms.to_string()),
                ("--metadata-lease-fence-ms", config.fence_ms.to_string()),
                ("--lease-proceed-margin-ms", config.margin_ms.to_string()),
                (
                    "--failure-detector-threshold-ms",
                    config.fence_ms.to_string(),
                ),
                ("--invalidation-retry-interval-ms", "300".to_string()),
                // Fence-floor rounds far more often than in production, so that every scenario
                // and the nemesis run them under their faults (REVIEW N9).
                ("--fence-floor-interval-ms", "3000".to_string()),
                ("--data-replication-factor", config.replication.to_string()),
                (
                    "--data-region-group-num-per-database",
                    config.region_groups.to_string(),
                ),
                (
                    "--time-partition-interval-ms",
                    config.time_partition_ms.to_string(),
                ),
            ];
            config_nodes.push(NodeProcess::new(
                &format!("confignode-{}", i + 1),
                net.namespace(i),
                &bins.join("confignode"),
                flatten(&args),
                vec![("NO_COLOR".into(), "1".into())],
                dir.path().join(format!("confignode-{}.log", i + 1)),
            ));
        }
        let seeds: Vec<String> = (0..c).map(|i| format!("{}:{CN_PORT}", net.ip(i))).collect();
        let mut data_nodes = Vec::new();
        for j in 0..config.data_nodes {
            let ip = net.ip(c + j);
            let data = dir.path().join(format!("dn{}", j + 1));
            let args = [
                ("--dn-rpc-address", format!("{ip}:{DN_RPC_PORT}")),
                ("--dn-internal-address", format!("{ip}:{DN_INTERNAL_PORT}")),
                ("--dn-seed-config-nodes", seeds.join(",")),
                ("--dn-data-dir", data.display().to_string()),
                ("--dn-metrics-address", format!("{ip}:{DN_METRICS_PORT}")),
                ("--dn-raft-tick-ms", config.raft_tick_ms.to_string()),
                (
                    "--dn-raft-election-ticks",
                    config.election_ticks.to_string(),
                ),
                ("--data-region-write-retry-wait-ms", "200".to_string()),
                ("--remote-write-max-retry-ms", "8000".to_string()),
                ("--dn-write-timeout-ms", "5000".to_string()),
                ("--dn-rpc-timeout-ms", config.dn_rpc_timeout_ms.to_string()),
                (
                    "--memtable-flush-age-ms",
                    config.memtable_flush_age_ms.to_string(),
                ),
                (
                    "--compaction-files-min",
                    config.compaction_files_min.to_string(),
                ),
                (
                    "--dn-raft-entry-cache-bytes",
                    config.raft_entry_cache_bytes.to_string(),
                ),
                (
                    "--dn-raft-unapplied-bytes-max",
                    config.raft_unapplied_bytes_max.to_string(),
                ),
                (
                    "--dn-raft-log-lag-bytes-max",
                    config.raft_log_lag_bytes_max.to_string(),
                ),
            ];
            data_nodes.push(NodeProcess::new(
                &format!("datanode-{}", j + 1),
                net.namespace(c + j),
                &bins.join("datanode"),
                flatten(&args),
                vec![
                    ("RUST_LOG".into(), data_node_log_filter()),
                    ("NO_COLOR".into(), "1".into()),
                ],
                dir.path().join(format!("datanode-{}.log", j + 1)),
            ));
        }
        let mut cluster = Cluster {
            config,
            config_nodes,
            data_nodes,
            net,
            runtime,
            dir: Some(dir),
            notes: Mutex::new(Vec::new()),
            started: Instant::now(),
            retired: Mutex::default(),
        };
        eprintln!(
            "harness: cluster in {} ({} ConfigNodes, {} DataNodes, bridge {})",
            cluster.dir().display(),
            cluster.config.config_nodes,
            cluster.config.data_nodes,
            cluster.net.bridge_ip()
        );
        for p in &mut cluster.config_nodes {
            p.start()?;
        }
        for p in &mut cluster.data_nodes {
            p.start()?;
        }
        // A panic here, while the cluster is alive, prints the logs and keeps the directory.
        if let Err(e) = cluster.wait_healthy() {
            panic!("the cluster did not become healthy: {e:#}");
        }
        Ok(cluster)
    }

    /// The cluster's directory (logs, data).
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("dir until drop").path()
    }

    /// Adds a line to the failure report (seeds, faults).
    pub fn note(&self, line: impl Into<String>) {
        let line = line.into();
        eprintln!("harness: {line}");
        self.notes.lock().expect("notes").push(line);
    }

    /// Network node index of DataNode `j`.
    pub fn dn_net(&self, j: usize) -> usize {
        self.config.config_nodes + j
    }

    /// DataNode `j`'s session endpoint.
    pub fn dn_endpoint(&self, j: usize) -> String {
        format!("{}:{DN_RPC_PORT}", self.net.ip(self.dn_net(j)))
    }

    /// Every DataNode's session endpoint.
    pub fn dn_endpoints(&self) -> Vec<String> {
        (0..self.data_nodes.len())
            .map(|j| self.dn_endpoint(j))
            .collect()
    }

    /// DataNode `j`'s internal endpoint (`DataNodeInternalService`).
    pub fn dn_internal_endpoint(&self, j: usize) -> String {
        format!("{}:{DN_INTERNAL_PORT}", self.net.ip(self.dn_net(j)))
    }

    /// ConfigNode `i`'s endpoint.
    pub fn cn_endpoint(&self, i: usize) -> String {
        format!("{}:{CN_PORT}", self.net.ip(i))
    }

    /// Every ConfigNode's endpoint.
    pub fn cn_endpoints(&self) -> Vec<String> {
        (0..self.config_nodes.len())
            .map(|i| self.cn_endpoint(i))
            .collect()
    }

    /// DataNode `j`'s metrics address.
    pub fn dn_metrics_address(&self, j: usize) -> SocketAddr {
        SocketAddr::new(self.net.ip(self.dn_net(j)).into(), DN_METRICS_PORT)
    }

    /// ConfigNode `i`'s metrics address.
    pub fn cn_metrics_address(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.net.ip(i).into(), CN_METRICS_PORT)
    }

    /// DataNode `j`'s metrics.
    pub fn dn_metrics(&self, j: usize) -> Result<BTreeMap<String, f64>> {
        Ok(parse_metrics(&http(
            self.dn_metrics_address(j),
            "GET",
            "/metrics",
            "",
        )?))
    }

    /// One metric of DataNode `j` (`None` when unreachable).
    pub fn dn_metric(&self, j: usize, name: &str) -> Option<f64> {
        self.dn_metrics(j).ok()?.get(name).copied()
    }

    /// Whether DataNode `j` reports a live lease (`None` when its metrics do not answer).
    pub fn lease_live(&self, j: usize) -> Option<bool> {
        self.dn_metric(j, "metadata_lease_live").map(|v| v == 1.0)
    }

    /// DataNode `j`'s lease state (`metadata_lease_state`: 0 NORMAL, 1 NEED_CLEAR, 2
    /// CACHE_CLEARING, 3 CACHE_CLEARED, 4 PULLING, 5 PULL_FAILED); `None` when unreachable.
    pub fn lease_state(&self, j: usize) -> Option<u8> {
        self.dn_metric(j, "metadata_lease_state").map(|v| v as u8)
    }

    /// Whether DataNode `j` is NORMAL: state 0 with a live lease.
    pub fn lease_normal(&self, j: usize) -> bool {
        let Ok(m) = self.dn_metrics(j) else {
            return false;
        };
        m.get("metadata_lease_state") == Some(&0.0) && m.get("metadata_lease_live") == Some(&1.0)
    }

    /// ConfigNode `i`'s (is leader, raft term), `None` when its metrics do not answer.
    pub fn cn_role(&self, i: usize) -> Option<(bool, u64)> {
        let m = parse_metrics(&http(self.cn_metrics_address(i), "GET", "/metrics", "").ok()?);
        Some((
            m.get("confignode_is_leader")? == &1.0,
            *m.get("confignode_raft_term")? as u64,
        ))
    }

    /// One metric of ConfigNode `i` (`None` when unreachable or absent).
    pub fn cn_metric(&self, i: usize, name: &str) -> Option<f64> {
        let text = http(self.cn_metrics_address(i), "GET", "/metrics", "").ok()?;
        parse_metrics(&text).get(name).copied()
    }

    /// The ConfigNode that reports itself leader, if exactly one does.
    pub fn cn_leader(&self) -> Option<usize> {
        let leaders: Vec<usize> = (0..self.config_nodes.len())
            .filter(|&i| {
                http(self.cn_metrics_address(i), "GET", "/metrics", "")
                    .ok()
                    .and_then(|t| parse_metrics(&t).get("confignode_is_leader").copied())
                    == Some(1.0)
            })
            .collect();
        (leaders.len() == 1).then(|| leaders[0])
    }

    /// Arms failpoint `name` with `action` in DataNode `j` (`PUT /fail/<name>`).
    pub fn arm_failpoint(&self, j: usize, name: &str, action: &str) -> Result<()> {
        let answer = http(
            self.dn_metrics_address(j),
            "PUT",
            &format!("/fail/{name}"),
            action,
        )?;
        if !answer.starts_with(&format!("{name}=")) {
            bail!(
                "datanode-{} did not arm failpoint {name} (answer: {:.80}…); was it built with \
                 `{BUILD_COMMAND}`?",
                j + 1,
                answer
            );
        }
        self.data_nodes[j].log_line(&format!("failpoint {name}={action}"));
        Ok(())
    }

    /// Disarms failpoint `name` in DataNode `j` (`DELETE /fail/<name>`).
    pub fn disarm_failpoint(&self, j: usize, name: &str) -> Result<()> {
        http(
            self.dn_metrics_address(j),
            "DELETE",
            &format!("/fail/{name}"),
            "",
        )?;
        self.data_nodes[j].log_line(&format!("failpoint {name} removed"));
        Ok(())
    }

    /// Silently drops every packet between DataNode `j` and every ConfigNode, both ways; its
    /// DataNode peers and the test process still reach it.
    pub fn cut_from_config_nodes(&self, j: usize) -> Result<()> {
        for i in 0..self.config_nodes.len() {
            self.net.drop_both_ways(self.dn_net(j), i)?;
        }
        self.data_nodes[j].log_line("cut from every ConfigNode");
        Ok(())
    }

    /// Removes every network fault.
    pub fn heal_network(&self) -> Result<()> {
        for p in &self.data_nodes {
            p.log_line("network healed");
        }
        self.net.heal()
    }

    /// The session configuration of the workload: short timeouts, because dropped packets make
    /// calls hang rather than fail.
    pub fn session_config() -> SessionConfig {
        SessionConfig {
            max_attempts: 60,
            retry_interval_ms: 150,
            request_timeout_ms: 3000,
            ..SessionConfig::default()
        }
    }

    /// The session configuration for DELETE TIMESERIES / DROP DATABASE: such a call legitimately
    /// takes fence + margin when a DataNode is unreachable, and a session that times it out and
    /// retries gets 507 ("is being deleted") for its own pending operation.
    pub fn ddl_session_config() -> SessionConfig {
        SessionConfig {
            max_attempts: 10,
            retry_interval_ms: 300,
            request_timeout_ms: 30_000,
            ..SessionConfig::default()
        }
    }

    /// A session over the given DataNodes.
    pub fn session_on(&self, data_nodes: &[usize], config: SessionConfig) -> Result<Session> {
        let endpoints: Vec<String> = data_nodes.iter().map(|&j| self.dn_endpoint(j)).collect();
        let refs: Vec<&str> = endpoints.iter().map(String::as_str).collect();
        self.runtime
            .block_on(Session::connect(&refs, config))
            .context("connecting a session")
    }

    /// A session over every DataNode.
    pub fn session(&self) -> Result<Arc<Session>> {
        let all: Vec<usize> = (0..self.data_nodes.len()).collect();
        Ok(Arc::new(self.session_on(&all, Self::session_config())?))
    }

    /// DataNode `j`'s region replicas with their digests (each reads every point of its region:
    /// up to two minutes).
    pub fn digests(&self, session: &Session, j: usize) -> Result<Vec<RegionDigestView>> {
        Ok(self.runtime.block_on(
            session.region_digests_within(&self.dn_endpoint(j), Duration::from_secs(120)),
        )?)
    }

    /// Maps each DataNode id (assigned by the ConfigNode) to its index here.
    pub fn data_node_ids(&self, session: &Session) -> Result<BTreeMap<u64, usize>> {
        let view = self.runtime.block_on(session.show_cluster())?;
        let retired = self.retired();
        let mut ids = BTreeMap::new();
        for d in view
            .data_nodes
            .into_iter()
            .filter(|d| !retired.contains(&d.data_node_id))
        {
            let j = (0..self.data_nodes.len())
                .find(|&j| self.dn_endpoint(j) == d.rpc_endpoint)
                .with_context(|| format!("unknown DataNode {d:?}"))?;
            ids.insert(d.data_node_id, j);
        }
        Ok(ids)
    }

    /// DataNode `j`'s region replicas without digests: ids, applied indexes, leadership.
    pub fn replicas(&self, session: &Session, j: usize) -> Result<Vec<RegionDigestView>> {
        Ok(self
            .runtime
            .block_on(session.region_leaders_at(&self.dn_endpoint(j)))?)
    }

    /// Regions DataNode `j` leads, by its own account (`None` when it does not answer).
    pub fn regions_led(&self, session: &Session, j: usize) -> Option<Vec<u64>> {
        let digests = self.replicas(session, j).ok()?;
        Some(
            digests
                .iter()
                .filter(|d| d.is_leader)
                .map(|d| d.region_id)
                .collect(),
        )
    }

    /// Waits until every process runs, every DataNode holds its lease and answers sessions, and
    /// every region replica has a leader somewhere.
    pub fn wait_healthy(&self) -> Result<()> {
        wait_for(
            "every DataNode to hold its lease",
            Duration::from_secs(90),
            Duration::from_millis(200),
            || {
                (0..self.data_nodes.len())
                    .all(|j| self.lease_live(j) == Some(true))
                    .then_some(())
            },
        )?;
        let session = self.session()?;
        // A DataNode being removed (REMOVE DATANODE) stays registered and running as Removing.
        wait_for(
            "every DataNode registered and Running (or Removing)",
            Duration::from_secs(60),
            Duration::from_millis(200),
            || {
                let view = self.runtime.block_on(session.show_cluster()).ok()?;
                let retired = self.retired();
                let live: Vec<_> = view
                    .data_nodes
                    .iter()
                    .filter(|d| !retired.contains(&d.data_node_id))
                    .collect();
                let up =
                    |d: &&session::DataNodeView| d.status == "Running" || d.status == "Removing";
                (live.len() == self.data_nodes.len() && live.iter().all(up)).then_some(())
            },
        )?;
        wait_for(
            "a leader for every region",
            Duration::from_secs(60),
            Duration::from_millis(200),
            || {
                let mut replicas: BTreeMap<u64, usize> = BTreeMap::new();
                for j in 0..self.data_nodes.len() {
                    for d in self.replicas(&session, j).ok()? {
                        *replicas.entry(d.region_id).or_default() += usize::from(d.is_leader);
                    }
                }
                replicas.values().all(|&leaders| leaders == 1).then_some(())
            },
        )?;
        Ok(())
    }

    /// Waits until DataNode `j` has fenced itself (metrics: lease not live).
    pub fn wait_fenced(&self, j: usize) -> Result<()> {
        wait_for(
            &format!("datanode-{} to fence itself", j + 1),
            Duration::from_secs(60),
            Duration::from_millis(100),
            || (self.lease_live(j) == Some(false)).then_some(()),
        )
    }

    /// kill -9 of DataNode `j` (id `old_id`), its data directory removed, and a start: it
    /// registers afresh and gets a new id, while `old_id` stays in the cluster view (Unknown) with
    /// its replicas, which checks leave out from now on.
    pub fn wipe_data_node(&mut self, j: usize, old_id: u64) -> Result<()> {
        self.data_nodes[j].kill9()?;
        let data = self.dir().join(format!("dn{}", j + 1));
        std::fs::remove_dir_all(&data).with_context(|| format!("wiping {}", data.display()))?;
        self.retired.lock().expect("retired").insert(old_id);
        self.data_nodes[j].start()
    }

    /// The ids of wiped DataNodes ([`Cluster::wipe_data_node`]).
    pub fn retired(&self) -> std::collections::BTreeSet<u64> {
        self.retired.lock().expect("retired").clone()
    }

    /// Restarts DataNode `j` after a kill (same data directory).
    pub fn restart_data_node(&mut self, j: usize) -> Result<()> {
        self.data_nodes[j].kill9()?;
        self.data_nodes[j].start()
    }

    /// Time since start, for notes.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Seconds from the cluster's start to `at`, for notes (the nemesis notes its faults so).
    pub fn t(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64()
    }
}

fn flatten(args: &[(&str, String)]) -> Vec<String> {
    args.iter()
        .flat_map(|(k, v)| [k.to_string(), v.clone()])
        .collect()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Processes first (a stopped one gets SIGKILL like the rest), then the network.
        let panicking = std::thread::panicking();
        if panicking {
            eprintln!("\n======== FAULT TEST FAILED — node logs (tails) ========");
            for p in self.config_nodes.iter().chain(&self.data_nodes) {
                eprintln!(
                    "-------- {} ({}) --------\n{}",
                    p.name,
                    p.log_path().display(),
                    p.log_tail(6000)
                );
            }
            eprintln!(
                "-------- faults installed --------\n{}",
                self.net.describe_faults()
            );
        }
        self.config_nodes.clear();
        self.data_nodes.clear();
        if let Some(dir) = self.dir.take() {
            if panicking {
                let kept = dir.keep();
                if !std::env::var("FENCEPOST_KEEP_DATA").is_ok_and(|v| v == "1") {
                    remove_data_dirs(&kept);
                }
                eprintln!("======== notes ========");
                for n in self.notes.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                    eprintln!("{n}");
                }
                eprintln!(
                    "======== kept the cluster directory (logs; data only under FENCEPOST_KEEP_DATA=1): {} ========",
                    kept.display()
                );
            }
        }
    }
}

/// Free bytes a scenario needs where its cluster lives (`FENCEPOST_MIN_FREE_GIB`, default 8):
/// the bulk scenarios write tens of millions of points three times over, and a node that runs
/// out of disk stops its raft driver, which reads as a failure of whatever the scenario tests.
fn ensure_free_space(dir: &Path) -> Result<()> {
    let min_gib: u64 = match std::env::var("FENCEPOST_MIN_FREE_GIB") {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| anyhow!("FENCEPOST_MIN_FREE_GIB={v:?} is not a number"))?,
        Err(_) => 8,
    };
    let free = free_bytes(dir)?;
    if free < min_gib << 30 {
        bail!(
            "only {} MiB free under {} and a scenario needs {min_gib} GiB \
             (FENCEPOST_MIN_FREE_GIB); remove old /tmp/fencepost-faults-* directories",
            free >> 20,
            dir.display()
        );
    }
    Ok(())
}

/// Bytes available to an unprivileged writer on the file system holding `dir`.
fn free_bytes(dir: &Path) -> Result<u64> {
    common::durable::free_bytes(dir).with_context(|| format!("statvfs {}", dir.display()))
}

/// Removes a kept cluster directory's node data (`cn*`, `dn*`), leaving its logs.
fn remove_data_dirs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if let Err(e) = std::fs::remove_dir_all(entry.path()) {
                eprintln!("removing {}: {e}", entry.path().display());
            }
        }
    }
}

/// A ConfigNode leader's election as a [`LeaderWatch`] saw it.
#[derive(Clone, Copy, Debug)]
pub struct Election {
    /// The ConfigNode (index).
    pub node: usize,
    /// Its raft term.
    pub term: u64,
    /// A lower bound of the election: a scrape begun then still saw the node not leading at
    /// this term (or the node was not running yet). `None` when the watch never saw it not
    /// leading (it led when the watch started).
    pub not_before: Option<Instant>,
    /// When the watch first saw it lead at this term.
    pub seen_at: Instant,
}

/// Polls every ConfigNode's `confignode_is_leader` / `confignode_raft_term` every 20 ms on a
/// thread of its own, and records each election with bounds on when it happened: a safety
/// assertion needs a lower bound (the drop must wait fence + margin from the election).
pub struct LeaderWatch {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    state: Arc<Mutex<WatchState>>,
}

#[derive(Default)]
struct WatchState {
    /// Per node: the start of the latest scrape that saw it not leading (or a noted start).
    not_leading_at: BTreeMap<usize, (Instant, u64)>,
    elections: Vec<Election>,
}

impl LeaderWatch {
    /// Starts watching `cluster`'s ConfigNodes.
    pub fn start(cluster: &Cluster) -> LeaderWatch {
        let addresses: Vec<SocketAddr> = (0..cluster.config_nodes.len())
            .map(|i| cluster.cn_metrics_address(i))
            .collect();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let state = Arc::new(Mutex::new(WatchState::default()));
        let thread = std::thread::spawn({
            let (stop, state) = (stop.clone(), state.clone());
            move || {
                // Bounded like every loop of the suite: at most an hour of polling.
                let started = Instant::now();
                while !stop.load(std::sync::atomic::Ordering::Relaxed)
                    && started.elapsed() < Duration::from_secs(3600)
                {
                    for (i, &address) in addresses.iter().enumerate() {
                        let asked = Instant::now();
                        let Some(m) = http(address, "GET", "/metrics", "")
                            .ok()
                            .map(|t| parse_metrics(&t))
                        else {
                            continue;
                        };
                        let (Some(leader), Some(term)) =
                            (m.get("confignode_is_leader"), m.get("confignode_raft_term"))
                        else {
                            continue;
                        };
                        let term = *term as u64;
                        let mut s = state.lock().expect("watch");
                        if *leader == 1.0 {
                            let known = s.elections.iter().any(|e| e.node == i && e.term == term);
                            if !known {
                                let not_before = match s.not_leading_at.get(&i) {
                                    Some(&(at, t)) if t <= term => Some(at),
                                    _ => None,
                                };
                                s.elections.push(Election {
                                    node: i,
                                    term,
                                    not_before,
                                    seen_at: asked,
                                });
                            }
                        } else {
                            s.not_leading_at.insert(i, (asked, term));
                        }
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        });
        LeaderWatch {
            stop,
            thread: Some(thread),
            state,
        }
    }

    /// Records that ConfigNode `i` does not lead at `at` (e.g. it is (re)started then; a
    /// process cannot lead before it runs).
    pub fn not_leading(&self, i: usize, at: Instant) {
        let mut s = self.state.lock().expect("watch");
        s.not_leading_at.insert(i, (at, 0));
    }

    /// Every election seen so far, in the order seen.
    pub fn elections(&self) -> Vec<Election> {
        self.state.lock().expect("watch").elections.clone()
    }

    /// The first election seen at a term above `term`.
    pub fn first_after_term(&self, term: u64) -> Option<Election> {
        self.elections().into_iter().find(|e| e.term > term)
    }
}

impl Drop for LeaderWatch {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                eprintln!("harness: the ConfigNode leader watch panicked");
            }
        }
    }
}

/// The DataNodes' log filter: `FENCEPOST_DN_LOG` (e.g. `info,raft=info` to trace raft-rs's
/// elections and log truncations while chasing a fault), else `info,raft=warn`.
fn data_node_log_filter() -> String {
    std::env::var("FENCEPOST_DN_LOG").unwrap_or_else(|_| "info,raft=warn".into())
}
