//! [`run`]: one ConfigNode process — the raft group on the `runtime` driver, the gRPC service,
//! and on the leader the heartbeat pusher, the failure detector and the fence operations.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::StatusCode;
use consensus::{Clock, GroupId, StateRole};
use parking_lot::{Mutex, RwLock};
use runtime::{GrpcTransport, PeerService, RaftDriver, RaftHostConfig, TransportConfig};
use tokio::net::TcpListener;

use crate::client::{DataNodeClient, GrpcDataNodeClient};
use crate::command::{Command, CommandResult};
use crate::config::ConfigNodeConfig;
use crate::error::{Error, Result};
use crate::propagator::{Propagator, RegionTarget, Target};
use crate::sm::MetadataStateMachine;
use crate::state::{MetadataState, NodeStatus, OperationKind};
use crate::tracker::{ContactTracker, LeaseTimings};

/// The raft group id of the ConfigNode group (ConfigNodes host no other group).
pub const CONFIG_GROUP: GroupId = 1;

/// Monotonic milliseconds from tokio's clock, so tests with paused time control it.
#[derive(Debug, Clone)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
}

/// Everything the service handlers and the leader tasks share.
pub(crate) struct Shared {
    pub(crate) config: ConfigNodeConfig,
    pub(crate) members: Vec<(u64, String)>,
    pub(crate) state: Arc<RwLock<MetadataState>>,
    pub(crate) driver: RaftDriver<GrpcTransport>,
    pub(crate) tracker: Arc<Mutex<ContactTracker>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) client: Arc<dyn DataNodeClient>,
    pub(crate) propagator: Propagator,
    /// Region → leader DataNode, from heartbeat replies (a routing hint, not replicated).
    pub(crate) region_leaders: Mutex<BTreeMap<u64, u64>>,
    /// The term this node leads in, as the leader loop last saw it.
    pub(crate) leader_term: Mutex<Option<u64>>,
    running_operations: Mutex<BTreeSet<u64>>,
    /// Set when shutdown begins: long-running handlers and operations end promptly instead of
    /// holding the graceful shutdown open.
    pub(crate) stopping: std::sync::atomic::AtomicBool,
    heartbeat_sequence: AtomicU64,
}

pub(crate) use crate::timing::PROPOSAL_TIMEOUT;

impl Shared {
    pub(crate) fn leader_status(&self) -> Option<consensus::GroupStatus> {
        self.driver.group_status(CONFIG_GROUP)
    }

    /// The leader's address if this node is not the leader (`Ok(())` when it is).
    pub(crate) fn check_leader(&self) -> std::result::Result<u64, Option<String>> {
        match self.leader_status() {
            Some(s) if s.role == StateRole::Leader => Ok(s.term),
            Some(s) => Err(s
                .leader
                .and_then(|l| self.members.iter().find(|(id, _)| *id == l))
                .map(|(_, a)| a.clone())),
            None => Err(None),
        }
    }

    pub(crate) async fn propose(&self, command: Command) -> Result<CommandResult> {
        let bytes = self
            .driver
            .propose(CONFIG_GROUP, command.encode(), PROPOSAL_TIMEOUT)
            .await?;
        Ok(CommandResult::decode(&bytes).map_err(crate::error::MetadataError::Decode)?)
    }

    /// Waits until this leader's state holds everything committed before the call.
    pub(crate) async fn read_barrier(&self) -> Result<()> {
        self.driver
            .read_index(CONFIG_GROUP, PROPOSAL_TIMEOUT)
            .await?;
        Ok(())
    }

    fn lease_timings(config: &ConfigNodeConfig) -> LeaseTimings {
        LeaseTimings {
            fence_ms: config.metadata_lease_fence_ms,
            proceed_margin_ms: config.lease_proceed_margin_ms,
            failure_detector_ms: config.failure_detector_threshold_ms,
        }
    }

    /// Starts fence operation `operation_id` unless it already runs here; returns at once.
    pub(crate) fn spawn_operation(self: &Arc<Self>, operation_id: u64) {
        if !self.running_operations.lock().insert(operation_id) {
            return;
        }
        let shared = self.clone();
        tokio::spawn(async move {
            if let Err(e) = shared.run_operation(operation_id).await {
                tracing::warn!(operation_id, "fence operation not finished yet: {e}");
            }
            shared.running_operations.lock().remove(&operation_id);
        });
    }

    /// The fence protocol after its pending state is committed: invalidate until every DataNode
    /// acknowledged or is fenced, delete through every affected region's raft log, commit.
    async fn run_operation(&self, operation_id: u64) -> Result<()> {
        let term = self
            .check_leader()
            .map_err(|leader| Error::NotLeader { leader })?;
        // The term's clock starts no later than here: if raft made this node leader after the
        // leader loop's last round, every DataNode counts as contacted now.
        self.track_leadership(Some(term), self.clock.now_ms());
        let (kind, targets, version, regions) = {
            let state = self.state.read();
            let Some((_, kind)) = state.operations().find(|(id, _)| *id == operation_id) else {
                return Ok(());
            };
            let kind = kind.clone();
            let targets: Vec<Target> = state
                .data_nodes()
                .map(|n| Target {
                    id: n.id,
                    incarnation_epoch: n.incarnation_epoch,
                    address: n.internal_address.clone(),
                })
                .collect();
            let regions = self.affected_regions(&state, &kind);
            (kind, targets, state.metadata_version(), regions)
        };
        // Lock order everywhere: state before tracker (the state lock is released here).
        {
            let registry: Vec<(u64, u64)> = targets
                .iter()
                .map(|t| (t.id, t.incarnation_epoch))
                .collect();
            let now = self.clock.now_ms();
            let mut tracker = self.tracker.lock();
            if tracker.leading_term() == Some(term) {
                tracker.sync_registry(&registry, now);
            }
        }
        let (databases, series) = match &kind {
            OperationKind::DropDatabase(db) => (vec![db.clone()], Vec::new()),
            OperationKind::DeleteTimeseries(series) => (
                Vec::new(),
                series
                    .iter()
                    .map(|(d, m)| proto::SeriesPath {
                        device: d.clone(),
                        measurement: m.clone(),
                    })
                    .collect(),
            ),
        };
        let request = proto::InvalidateCacheReq {
            data_node_id: 0,
            incarnation_epoch: 0,
            config_node_term: term,
            metadata_version: version,
            operation_id,
            databases: databases.clone(),
            series: series.clone(),
            // Filled per target by the propagator.
            drain_timeout_ms: 0,
        };
        // A deposed leader stops at once; the new leader resumes the operation.
        let outcome = tokio::select! {
            outcome = self.propagator.invalidate(term, &targets, request) => outcome,
            () = self.lost_term(term) => return Err(Error::NotLeader { leader: None }),
        };
        tracing::info!(
            operation_id,
            acknowledged = ?outcome.acknowledged,
            fenced = ?outcome.fenced,
            "invalidation complete"
        );
        // A leader that lost its term in between must not order deletions: the new leader
        // resumes the operation with its own (stricter) view.
        if self.check_leader().ok() != Some(term) {
            return Err(Error::NotLeader { leader: None });
        }
        let command = match &kind {
            OperationKind::DropDatabase(db) => {
                proto::region_write_req::Command::DeleteDatabase(proto::DeleteDatabaseCommand {
                    database: db.clone(),
                })
            }
            OperationKind::DeleteTimeseries(_) => {
                proto::region_write_req::Command::DeleteSeries(proto::DeleteSeriesCommand {
                    series,
                })
            }
        };
        let deletion =
            self.propagator
                .delete_in_regions(&regions, |region_id| proto::RegionWriteReq {
                    region_id,
                    command: Some(command.clone()),
                    operation_id,
                    // The fencing token: at or after the pending state, which hides the target
                    // from every later fetch, so every insert validated against metadata that
                    // still showed it carries an older version.
                    metadata_version: version,
                });
        let failed = tokio::select! {
            failed = deletion => failed,
            () = self.lost_term(term) => return Err(Error::NotLeader { leader: None }),
        };
        if !failed.is_empty() {
            return Err(Error::Timeout(format!(
                "regions {failed:?} did not confirm the deletion of operation {operation_id}"
            )));
        }
        self.propose(Command::FinishOperation { operation_id })
            .await?;
        Ok(())
    }

    /// Shutdown has begun (or the raft driver died).
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst) || self.driver.is_stopped()
    }

    /// Resolves once this node no longer leads in `term` (or its raft driver stopped).
    async fn lost_term(&self, term: u64) {
        let interval = Duration::from_millis(self.config.heartbeat_interval_ms);
        loop {
            if self.is_stopping() || self.check_leader().ok() != Some(term) {
                return;
            }
            tokio::time::sleep(interval).await;
        }
    }

    fn affected_regions(&self, state: &MetadataState, kind: &OperationKind) -> Vec<RegionTarget> {
        let mut ids = BTreeSet::new();
        match kind {
            OperationKind::DropDatabase(db) => {
                ids.extend(state.regions().filter(|r| r.database == *db).map(|r| r.id));
            }
            OperationKind::DeleteTimeseries(series) => {
                let partition = self.config.partition_config();
                for (device, _) in series {
                    if let Some((db, _)) = state.database_of(device) {
                        let slot = partition.series_slot(device);
                        ids.extend(
                            state
                                .partitions_of(db)
                                .into_iter()
                                .filter(|(s, _, _)| *s == slot)
                                .map(|(_, _, r)| r),
                        );
                    }
                }
            }
        }
        let leaders = self.region_leaders.lock().clone();
        ids.into_iter()
            .filter_map(|id| state.region(id))
            .map(|r| {
                let mut replicas: Vec<u64> = r.replicas.clone();
                // Known leader first, then the preferred leader, then the rest.
                let first = leaders.get(&r.id).copied().unwrap_or(r.preferred_leader);
                replicas.sort_by_key(|n| (*n != first, *n != r.preferred_leader, *n));
                RegionTarget {
                    region_id: r.id,
                    replicas: replicas
                        .into_iter()
                        .filter_map(|n| state.data_node(n).map(|d| (n, d.internal_address.clone())))
                        .collect(),
                }
            })
            .collect()
    }

    /// Records that this node leads in `term` (or no longer leads) as of `now_ms`: the tracker
    /// starts the term's clock (every DataNode counts as contacted now) and the region-leader
    /// hints of an earlier term are forgotten. Idempotent within a term; called by the leader
    /// loop and, before anything else, by every fence operation, so that no operation judges
    /// a DataNode with a clock that this term has not started (C1 in REVIEW-2026-12).
    pub(crate) fn track_leadership(&self, leading_term: Option<u64>, now_ms: u64) {
        let mut current = self.leader_term.lock();
        if *current == leading_term {
            return;
        }
        let mut tracker = self.tracker.lock();
        match leading_term {
            Some(term) => {
                tracing::info!(node = self.config.cn_node_id, term, "ConfigNode leader");
                tracker.become_leader(term, now_ms);
                self.region_leaders.lock().clear();
            }
            None => tracker.step_down(),
        }
        *current = leading_term;
    }

    /// One leader round: notice leadership changes, heartbeat every DataNode, judge failures,
    /// resume pending fence operations.
    async fn leader_round(self: &Arc<Self>) {
        let now = self.clock.now_ms();
        let status = self.leader_status();
        let leading_term = status
            .as_ref()
            .filter(|s| s.role == StateRole::Leader)
            .map(|s| s.term);
        self.track_leadership(leading_term, now);
        let Some(term) = leading_term else {
            return;
        };
        let registry: Vec<(u64, u64, String, NodeStatus)> = self
            .state
            .read()
            .data_nodes()
            .map(|n| {
                (
                    n.id,
                    n.incarnation_epoch,
                    n.internal_address.clone(),
                    n.status,
                )
            })
            .collect();
        // Lock order everywhere: state before tracker.
        let version = self.state.read().metadata_version();
        let lease_holders = {
            let mut tracker = self.tracker.lock();
            let ids: Vec<(u64, u64)> = registry.iter().map(|(id, e, _, _)| (*id, *e)).collect();
            tracker.sync_registry(&ids, now);
            tracker.lease_holders(now)
        };
        let region_leaders: Vec<proto::RegionLeader> = self
            .region_leaders
            .lock()
            .iter()
            .map(|(r, l)| proto::RegionLeader {
                region_id: *r,
                leader_id: *l,
            })
            .collect();
        let timeout = Duration::from_millis(self.config.heartbeat_interval_ms);
        for (id, epoch, address, _) in &registry {
            let request = proto::HeartbeatReq {
                data_node_id: *id,
                incarnation_epoch: *epoch,
                metadata_version: version,
                config_node_term: term,
                config_node_id: self.config.cn_node_id,
                lease_holder_ids: lease_holders.clone(),
                region_leaders: region_leaders.clone(),
                sequence: self.heartbeat_sequence.fetch_add(1, Ordering::Relaxed) + 1,
                metadata_lease_fence_ms: self.config.metadata_lease_fence_ms,
                lease_proceed_margin_ms: self.config.lease_proceed_margin_ms,
            };
            let call = self.client.heartbeat(address, request);
            let shared = self.clone();
            let (id, epoch) = (*id, *epoch);
            // Each heartbeat is its own task so one slow DataNode never delays the others or
            // the next round.
            tokio::spawn(async move {
                match tokio::time::timeout(timeout, call).await {
                    Ok(Ok(resp)) => shared.on_heartbeat_reply(id, epoch, term, resp),
                    Ok(Err(e)) => tracing::debug!(node = id, "heartbeat failed: {e}"),
                    Err(_) => tracing::debug!(node = id, "heartbeat timed out"),
                }
            });
        }
        // Failure detector: statuses are replicated, so changes go through the log.
        for (id, _, _, status) in &registry {
            let unresponsive = self.tracker.lock().is_unresponsive(*id, now);
            let new_status = match (status, unresponsive) {
                (NodeStatus::Running, true) => NodeStatus::Unknown,
                (NodeStatus::Unknown, false) => NodeStatus::Running,
                _ => continue,
            };
            let shared = self.clone();
            let data_node_id = *id;
            tokio::spawn(async move {
                let command = Command::SetDataNodeStatus {
                    data_node_id,
                    status: new_status,
                };
                if let Err(e) = shared.propose(command).await {
                    tracing::debug!(node = data_node_id, "status change not committed: {e}");
                }
            });
        }
        let pending: Vec<u64> = self.state.read().operations().map(|(id, _)| id).collect();
        for operation_id in pending {
            self.spawn_operation(operation_id);
        }
    }

    fn on_heartbeat_reply(&self, id: u64, epoch: u64, term: u64, resp: proto::HeartbeatResp) {
        if self.leader_term.lock().as_ref() != Some(&term) {
            return;
        }
        if resp.status.as_ref().is_none_or(|s| !s.is_success()) || resp.incarnation_epoch != epoch {
            tracing::debug!(
                node = id,
                "heartbeat refused: {:?} (epoch {} vs {epoch})",
                resp.status,
                resp.incarnation_epoch
            );
            return;
        }
        let now = self.clock.now_ms();
        if let Err(refused) = self.tracker.lock().record_contact(id, epoch, now) {
            tracing::debug!(node = id, "heartbeat reply not counted: {refused:?}");
            return;
        }
        let mut leaders = self.region_leaders.lock();
        for l in resp.region_leaders {
            if l.leader_id != 0 {
                leaders.insert(l.region_id, l.leader_id);
            }
        }
    }

    /// Creates freshly allocated region groups on their DataNodes (best effort: a DataNode also
    /// learns its regions at registration).
    pub(crate) async fn create_regions(&self, region_ids: &[u64]) {
        let requests: Vec<(String, proto::CreateRegionReq)> = {
            let state = self.state.read();
            let mut out = Vec::new();
            for id in region_ids {
                let Some(r) = state.region(*id) else { continue };
                let replicas: Vec<proto::DataNodeLocation> = r
                    .replicas
                    .iter()
                    .filter_map(|n| state.data_node(*n))
                    .map(location)
                    .collect();
                let request = proto::CreateRegionReq {
                    replica_set: Some(replica_set(r)),
                    replicas,
                };
                for n in &r.replicas {
                    if let Some(node) = state.data_node(*n) {
                        out.push((node.internal_address.clone(), request.clone()));
                    }
                }
            }
            out
        };
        let timeout = crate::timing::CREATE_REGION_TIMEOUT;
        let mut calls = tokio::task::JoinSet::new();
        for (address, request) in requests {
            let call = self.client.create_region(&address, request);
            calls.spawn(async move { (address, tokio::time::timeout(timeout, call).await) });
        }
        while let Some(joined) = calls.join_next().await {
            match joined {
                Ok((_, Ok(Ok(status)))) if status.is_success() => {}
                Ok((address, outcome)) => {
                    tracing::warn!(address, "creating a region replica: {outcome:?}")
                }
                Err(e) => tracing::warn!("creating a region replica: {e}"),
            }
        }
    }
}

/// The metadata as of the last snapshot file, or an empty state.
fn load_snapshot(path: &std::path::Path) -> Result<MetadataState> {
    match std::fs::read(path) {
        Ok(bytes) => MetadataState::decode_snapshot(&bytes).map_err(|e| Error::Io {
            context: format!("ConfigNode snapshot {}", path.display()),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(MetadataState::new()),
        Err(source) => Err(Error::Io {
            context: format!("reading {}", path.display()),
            source,
        }),
    }
}

/// Every second: once `cn_snapshot_interval_entries` entries were applied since the last
/// snapshot, write a new one durably, then let raft drop the log up to it. The file is written
/// first, so after a crash at any point the snapshot plus the remaining log hold everything.
async fn snapshot_loop(shared: Arc<Shared>, path: std::path::PathBuf, mut last_index: u64) {
    let interval = shared.config.cn_snapshot_interval_entries;
    loop {
        tokio::time::sleep(crate::timing::SNAPSHOT_CHECK_INTERVAL).await;
        let (index, bytes) = {
            let state = shared.state.read();
            if state.applied_index() < last_index + interval {
                continue;
            }
            (state.applied_index(), state.encode_snapshot())
        };
        let written = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || common::durable::replace_durably(&path, &bytes))
                .await
        };
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!("writing the ConfigNode snapshot at {index}: {e}");
                continue;
            }
            Err(e) => {
                tracing::error!("snapshot writer task: {e}");
                continue;
            }
        }
        match shared
            .driver
            .call(move |node| node.compact(CONFIG_GROUP, index))
            .await
        {
            Ok(Ok(())) => {
                tracing::info!(index, "ConfigNode snapshot written, raft log compacted");
                last_index = index;
            }
            Ok(Err(e)) => tracing::warn!(index, "compacting the ConfigNode raft log: {e}"),
            Err(e) => tracing::warn!(index, "compacting the ConfigNode raft log: {e}"),
        }
    }
}

pub(crate) fn location(n: &crate::state::DataNodeRecord) -> proto::DataNodeLocation {
    proto::DataNodeLocation {
        data_node_id: n.id,
        internal_endpoint: proto::parse_endpoint(&n.internal_address).ok(),
        rpc_endpoint: proto::parse_endpoint(&n.rpc_address).ok(),
    }
}

pub(crate) fn replica_set(r: &crate::state::RegionGroup) -> proto::RegionReplicaSet {
    proto::RegionReplicaSet {
        region_id: r.id,
        database: r.database.clone(),
        data_node_ids: r.replicas.clone(),
        preferred_leader_id: r.preferred_leader,
    }
}

pub(crate) fn status_ok() -> proto::Status {
    proto::status(StatusCode::Success, "")
}

/// Binds `cn_internal_address` and runs until `shutdown` resolves.
pub async fn run(
    config: ConfigNodeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    config.validate()?;
    let listener = TcpListener::bind(&config.cn_internal_address)
        .await
        .map_err(|source| Error::Io {
            context: format!("binding {}", config.cn_internal_address),
            source,
        })?;
    let client = GrpcDataNodeClient::with_channel_config(
        crate::timing::DATANODE_RPC_TIMEOUT,
        config.channel_config(),
    );
    run_with_listener(config, listener, Arc::new(client), shutdown).await
}

/// The ConfigNode's raft host: one group, [`CONFIG_GROUP`], over every member, applying to
/// `state`.
fn open_raft(
    config: &ConfigNodeConfig,
    members: &[(u64, String)],
    state: Arc<RwLock<MetadataState>>,
) -> Result<RaftDriver<GrpcTransport>> {
    let node_id = config.cn_node_id;
    let addresses: runtime::AddressBook = Arc::new(RwLock::new(members.iter().cloned().collect()));
    let peers: Vec<u64> = members.iter().map(|(id, _)| *id).collect();
    let raft_host = RaftHostConfig {
        node_id,
        service: PeerService::ConfigNode,
        thread_name: format!("cn-raft-{node_id}"),
        log_dir: config.cn_data_dir.join("raft"),
        segment_bytes: CN_RAFT_SEGMENT_BYTES,
        tick_ms: config.cn_raft_tick_ms,
        election_ticks: config.cn_raft_election_ticks as usize,
        transport: TransportConfig {
            message_bytes_max: config.cn_rpc_max_message_bytes as usize,
            channel: config.channel_config(),
            ..TransportConfig::default()
        },
    };
    let driver = runtime::open_raft_host(
        &raft_host,
        addresses,
        Arc::new(consensus::MonotonicClock::default()),
        move |node| {
            node.create_group(
                CONFIG_GROUP,
                &peers,
                Box::new(MetadataStateMachine::new(state)),
            )
        },
    )?;
    Ok(driver)
}

/// Every `heartbeat_interval_ms`, the leader's round (heartbeats, fencing, operations) until
/// `stop` changes. A round that overruns delays the next rather than bunching them.
async fn leader_loop(shared: Arc<Shared>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut ticker =
        tokio::time::interval(Duration::from_millis(shared.config.heartbeat_interval_ms));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => shared.leader_round().await,
            _ = stop.changed() => break,
        }
    }
}

/// Bytes per segment of the ConfigNode's raft log: its entries are small metadata commands.
const CN_RAFT_SEGMENT_BYTES: u64 = 8 << 20;

/// Runs on an already bound listener (tests bind `127.0.0.1:0`), calling DataNodes through
/// `client`, until `shutdown` resolves.
pub async fn run_with_listener(
    config: ConfigNodeConfig,
    listener: TcpListener,
    client: Arc<dyn DataNodeClient>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    config.validate()?;
    let members = config.members()?;
    let node_id = config.cn_node_id;
    let snapshot_path = config.cn_data_dir.join("snapshot");
    let state = Arc::new(RwLock::new(load_snapshot(&snapshot_path)?));
    let snapshot_index = state.read().applied_index();
    let driver = open_raft(&config, &members, state.clone())?;
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::default());
    let tracker = Arc::new(Mutex::new(ContactTracker::new(Shared::lease_timings(
        &config,
    ))));
    let propagator = Propagator::new(
        client.clone(),
        tracker.clone(),
        clock.clone(),
        config.invalidation_retry_interval_ms,
        config.invalidation_drain_timeout_ms,
    );
    let shared = Arc::new(Shared {
        config: config.clone(),
        members,
        state,
        driver,
        tracker,
        clock,
        client,
        propagator,
        region_leaders: Mutex::new(BTreeMap::new()),
        leader_term: Mutex::new(None),
        running_operations: Mutex::new(BTreeSet::new()),
        stopping: std::sync::atomic::AtomicBool::new(false),
        heartbeat_sequence: AtomicU64::new(0),
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let leader_task = tokio::spawn(leader_loop(shared.clone(), stop_rx.clone()));
    let metrics_listener = TcpListener::bind(&config.cn_metrics_address)
        .await
        .map_err(|source| Error::Io {
            context: format!("binding cn_metrics_address {}", config.cn_metrics_address),
            source,
        })?;
    let metrics_task = tokio::spawn(crate::metrics::serve(metrics_listener, shared.clone()));
    let snapshot_task = tokio::spawn(snapshot_loop(shared.clone(), snapshot_path, snapshot_index));
    tracing::info!(node_id, address = ?listener.local_addr().ok(), "ConfigNode serving");
    let message_bytes_max = shared.config.cn_rpc_max_message_bytes as usize;
    let (streams_stop_tx, streams_stop_rx) = tokio::sync::watch::channel(false);
    let service = crate::service::ConfigNodeServiceImpl::new(shared.clone(), streams_stop_rx);
    let mut stop = stop_rx;
    let stopping = shared.clone();
    let net = shared.config.channel_config();
    let serve = runtime::server(&net)
        .add_service(
            proto::config_node_service_server::ConfigNodeServiceServer::new(service)
                .max_decoding_message_size(message_bytes_max)
                .max_encoding_message_size(message_bytes_max),
        )
        .serve_with_incoming_shutdown(runtime::incoming(listener, &net), async move {
            // Stop on the caller's shutdown, or when the raft driver died.
            tokio::select! {
                _ = shutdown => {}
                _ = stop.changed() => {}
            }
            stopping.stopping.store(true, Ordering::SeqCst);
            streams_stop_tx.send_replace(true);
        });
    let watchdog = {
        let shared = shared.clone();
        let stop_tx = stop_tx.clone();
        tokio::spawn(async move {
            while !shared.driver.is_stopped() {
                tokio::time::sleep(crate::timing::DRIVER_WATCHDOG_POLL).await;
            }
            tracing::error!("the ConfigNode raft driver stopped");
            stop_tx.send_replace(true);
        })
    };
    let served = serve.await;
    stop_tx.send_replace(true);
    watchdog.abort();
    metrics_task.abort();
    snapshot_task.abort();
    if let Err(e) = leader_task.await {
        tracing::warn!("leader task: {e}");
    }
    let driver_failed = shared.driver.is_stopped();
    shared.driver.shutdown();
    served.map_err(|e| Error::Transport(e.to_string()))?;
    if driver_failed {
        return Err(Error::Runtime(runtime::Error::Stopped));
    }
    Ok(())
}
