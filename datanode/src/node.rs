//! Start-up and the node's shared state: identity, registration, the raft host
//! (`runtime::open_raft_host`: one shared raft log for every region), hosted regions, the lease monitor (fence → consensus steps aside), lease recovery,
//! and the servers.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::{PartitionConfig, StatusCode};
use consensus::{Clock, GroupStatus, StateRole};
use parking_lot::{Mutex, RwLock};
use proto::config_node_service_client::ConfigNodeServiceClient;
use proto::data_node_internal_service_client::DataNodeInternalServiceClient;
use runtime::{
    ConfigNodeClient, GrpcTransport, PeerService, PooledChannel, RaftDriver, RaftHostConfig,
};
use tokio::net::TcpListener;

use crate::cache::{MetadataCache, NodeAddresses, PulledMetadata, RegionRoute};
use crate::config::DataNodeConfig;
use crate::error::{Error, Result};
use crate::lease::{LeaseState, MetadataLeaseManager};
use crate::metrics::{inc, Metrics};
use crate::region_state_machine::{
    DataRegionStateMachine, RegionRetryConfig, RegionStateMachineMetrics,
};
use crate::timing;
use engine::{DataRegion, RegionCommand, StorageConfig};

/// A region replica hosted here.
pub(crate) struct LocalRegion {
    pub region: Arc<DataRegion>,
    pub metrics: Arc<RegionStateMachineMetrics>,
}

/// State shared by the services and background tasks of one DataNode.
pub(crate) struct Shared {
    pub config: DataNodeConfig,
    pub node_id: u64,
    pub internal_address: String,
    /// The bound session address (what clients are told to use).
    pub rpc_address: String,
    pub lease: Arc<MetadataLeaseManager>,
    /// `(metadata_lease_fence_ms, lease_proceed_margin_ms)` handed out at registration; a
    /// heartbeat from a leader with other settings is refused (ConfigNodes must agree).
    pub registered_lease_settings: (u64, u64),
    pub clock: Arc<dyn Clock>,
    pub driver: RaftDriver<GrpcTransport>,
    pub raft_metrics: OnceLock<Arc<consensus::Metrics>>,
    pub addresses: runtime::AddressBook,
    pub regions: RwLock<BTreeMap<u64, LocalRegion>>,
    pub cache: MetadataCache,
    pub confignode: ConfigNodeClient,
    pub partition: PartitionConfig,
    pub storage_config: StorageConfig,
    pub metrics: Metrics,
    /// DataNodes holding their lease, as of the last heartbeat processed: where a fenced
    /// coordinator relays writes.
    pub lease_holders: Mutex<Vec<u64>>,
    /// Newest `(config_node_term, sequence)` of a processed heartbeat.
    pub heartbeat_order: Mutex<(u64, u64)>,
    /// Operations that use cached metadata, by the cache generation they started under; an
    /// invalidation is acknowledged only once those older than its bump finished.
    pub in_flight: crate::in_flight::InFlight,
    /// Test hook: while set, the heartbeat handler waits (like the failpoint
    /// `datanode::heartbeat::stall`), so heartbeats are received but not processed.
    pub stall_heartbeats: AtomicBool,
    pub recovering: AtomicBool,
    pub region_create: tokio::sync::Mutex<()>,
    peers: runtime::ChannelPool,
    next_session: AtomicU64,
}

/// What the caller of [`start`] holds: addresses and hooks, and the way to stop the node.
pub struct DataNodeHandle {
    shared: Arc<Shared>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<()>>,
    /// The bound session address.
    pub rpc_address: SocketAddr,
    /// The bound internal address.
    pub internal_address: SocketAddr,
    /// The bound metrics address.
    pub metrics_address: SocketAddr,
}

impl DataNodeHandle {
    /// This DataNode's id.
    pub fn node_id(&self) -> u64 {
        self.shared.node_id
    }

    /// The incarnation epoch of this run.
    pub fn incarnation(&self) -> u64 {
        self.shared.lease.incarnation()
    }

    /// The lease state.
    pub fn lease_state(&self) -> LeaseState {
        self.shared.lease.state()
    }

    /// True while the lease is live.
    pub fn lease_is_live(&self) -> bool {
        self.shared.lease.is_live()
    }

    /// Completed lease recoveries (clear + pull).
    pub fn lease_recoveries(&self) -> u64 {
        self.shared
            .lease
            .metrics()
            .recoveries
            .load(Ordering::Relaxed)
    }

    /// Test hook equivalent to the `datanode::heartbeat::stall` failpoint: while `true`, the
    /// heartbeat handler holds every heartbeat without processing it.
    pub fn stall_heartbeats(&self, stall: bool) {
        self.shared.stall_heartbeats.store(stall, Ordering::SeqCst);
    }

    /// Regions hosted here with this node's view of their raft group.
    pub fn region_status(&self) -> BTreeMap<u64, GroupStatus> {
        let ids: Vec<u64> = self.shared.regions.read().keys().copied().collect();
        ids.into_iter()
            .filter_map(|id| self.shared.driver.group_status(id).map(|s| (id, s)))
            .collect()
    }

    /// Starts an election for `region` on this node (operators and tests: move a leader here).
    pub async fn campaign(&self, region: u64) -> Result<()> {
        self.shared
            .driver
            .call(move |node| node.campaign(region))
            .await?
            .map_err(|e| Error::Runtime(runtime::Error::Consensus(e)))
    }

    /// Asks this node, if it leads `region`, to hand the leadership to node `to` (operators and
    /// tests: an election by campaign alone is refused while the current leader is healthy).
    pub async fn transfer_leader(&self, region: u64, to: u64) -> Result<()> {
        self.shared
            .driver
            .call(move |node| node.transfer_leader(region, to))
            .await?
            .map_err(|e| Error::Runtime(runtime::Error::Consensus(e)))
    }

    /// The metrics page as served on `/metrics`.
    pub fn metrics_text(&self) -> String {
        crate::metrics::render(&self.shared)
    }

    /// Stops the node and waits for it.
    pub async fn stop(self) -> Result<()> {
        self.stop.send_replace(true);
        match self.task.await {
            Ok(outcome) => outcome,
            Err(e) => Err(Error::Transport(format!("DataNode task: {e}"))),
        }
    }
}

async fn bind(key: &str, address: &str) -> Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .map_err(|e| Error::io(format!("binding {key} {address}"), e))
}

fn local_addr(listener: &TcpListener) -> Result<SocketAddr> {
    listener
        .local_addr()
        .map_err(|e| Error::io("reading a bound address", e))
}

/// Starts a DataNode: binds its three addresses (port 0 picks free ports), registers, opens its
/// raft log and regions and serves. Returns once it serves.
pub async fn start(config: DataNodeConfig) -> Result<DataNodeHandle> {
    config.validate()?;
    std::fs::create_dir_all(&config.dn_data_dir).map_err(|e| {
        Error::io(
            format!("creating dn_data_dir {}", config.dn_data_dir.display()),
            e,
        )
    })?;
    let rpc_listener = bind("dn_rpc_address", &config.dn_rpc_address).await?;
    let internal_listener = bind("dn_internal_address", &config.dn_internal_address).await?;
    let metrics_listener = bind("dn_metrics_address", &config.dn_metrics_address).await?;
    let rpc_address = local_addr(&rpc_listener)?;
    let internal_address = local_addr(&internal_listener)?;
    let metrics_address = local_addr(&metrics_listener)?;

    let rpc_timeout = Duration::from_millis(config.dn_rpc_timeout_ms);
    let confignode = ConfigNodeClient::new(config.seed_config_nodes(), rpc_timeout, 10)
        .with_channel_config(config.channel_config())
        .with_message_bytes_max(config.dn_rpc_max_message_bytes as usize);
    let (registration, parameters) = register_incarnation(
        &confignode,
        &config.dn_data_dir.join("identity"),
        &internal_address.to_string(),
        &rpc_address.to_string(),
    )
    .await?;
    let (node_id, epoch) = (registration.data_node_id, registration.incarnation_epoch);
    let partition = PartitionConfig {
        series_slot_num: parameters.series_slot_num,
        time_partition_interval_ms: parameters.time_partition_interval_ms,
        time_partition_origin_ms: parameters.time_partition_origin_ms,
    };
    // CLOCK_BOOTTIME: a suspended host's lease keeps ageing.
    let clock: Arc<dyn Clock> = Arc::new(crate::lease::BootClock::default());
    let lease = Arc::new(MetadataLeaseManager::new(
        clock.clone(),
        parameters.metadata_lease_fence_ms,
    ));
    lease.set_incarnation(epoch);
    tracing::info!(
        node_id,
        incarnation_epoch = epoch,
        fence_ms = parameters.metadata_lease_fence_ms,
        "DataNode registered"
    );

    let addresses: runtime::AddressBook = Arc::new(RwLock::new(BTreeMap::new()));
    addresses
        .write()
        .insert(node_id, internal_address.to_string());
    let raft_host = RaftHostConfig {
        node_id,
        service: PeerService::DataNode,
        thread_name: format!("dn-raft-{node_id}"),
        log_dir: config.dn_data_dir.join("raft"),
        segment_bytes: config.wal_segment_bytes,
        tick_ms: config.dn_raft_tick_ms,
        election_ticks: config.dn_raft_election_ticks as usize,
        transport: runtime::TransportConfig {
            message_bytes_max: config.dn_rpc_max_message_bytes as usize,
            channel: config.channel_config(),
            ..runtime::TransportConfig::default()
        },
    };
    // Regions are created later, as the ConfigNode assigns them.
    let driver = runtime::open_raft_host(&raft_host, addresses.clone(), clock.clone(), |_| Ok(()))?;
    let storage_config = StorageConfig {
        partition,
        memtable_flush_bytes: config.memtable_flush_bytes as usize,
        memtable_flush_age_ms: config.memtable_flush_age_ms,
        ..StorageConfig::default()
    };
    let peers = runtime::ChannelPool::new(config.channel_config(), rpc_timeout);
    let shared = Arc::new(Shared {
        cache: MetadataCache::new(lease.clone(), config.cache_entries_max as usize),
        config,
        node_id,
        internal_address: internal_address.to_string(),
        rpc_address: rpc_address.to_string(),
        lease,
        registered_lease_settings: (
            parameters.metadata_lease_fence_ms,
            parameters.lease_proceed_margin_ms,
        ),
        clock,
        driver,
        raft_metrics: OnceLock::new(),
        addresses,
        regions: RwLock::new(BTreeMap::new()),
        confignode,
        partition,
        storage_config,
        metrics: Metrics::default(),
        lease_holders: Mutex::new(Vec::new()),
        heartbeat_order: Mutex::new((0, 0)),
        in_flight: crate::in_flight::InFlight::default(),
        stall_heartbeats: AtomicBool::new(false),
        recovering: AtomicBool::new(false),
        region_create: tokio::sync::Mutex::new(()),
        peers,
        next_session: AtomicU64::new(1),
    });
    let raft_metrics = shared.driver.call(|node| node.metrics().clone()).await?;
    // Set once, here, before anything reads it.
    shared
        .raft_metrics
        .set(raft_metrics)
        .expect("raft metrics are set once");
    // The raft node starts fenced: the lease starts NEED_CLEAR and nothing may be proposed
    // before the first heartbeat and recovery.
    shared.driver.call(|node| node.set_fenced(true)).await?;

    open_regions(&shared, &registration.regions).await?;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(serve(
        shared.clone(),
        rpc_listener,
        internal_listener,
        metrics_listener,
        stop_rx,
    ));
    tracing::info!(node_id, %rpc_address, %internal_address, %metrics_address, "DataNode serving");
    Ok(DataNodeHandle {
        shared,
        stop: stop_tx,
        task,
        rpc_address,
        internal_address,
        metrics_address,
    })
}

/// Registers with the ConfigNode under the identity stored at `identity_path` (none on a first
/// start), checks that the incarnation it minted is above the stored one and that the cluster
/// parameters are usable, and stores the new identity before anything else runs under it.
async fn register_incarnation(
    confignode: &ConfigNodeClient,
    identity_path: &Path,
    internal_address: &str,
    rpc_address: &str,
) -> Result<(proto::RegisterDataNodeResp, proto::ClusterParameters)> {
    let (stored_id, stored_epoch) = read_identity(identity_path)?;
    let registration = register(confignode, stored_id, internal_address, rpc_address).await?;
    let (node_id, epoch) = (registration.data_node_id, registration.incarnation_epoch);
    if epoch <= stored_epoch {
        return Err(Error::Registration(format!(
            "the ConfigNode minted incarnation {epoch}, not above the stored {stored_epoch}"
        )));
    }
    write_identity(identity_path, node_id, epoch)?;
    let parameters = registration.parameters.unwrap_or_default();
    if parameters.metadata_lease_fence_ms == 0 || parameters.series_slot_num == 0 {
        return Err(Error::Registration(format!(
            "the ConfigNode sent unusable cluster parameters {parameters:?}"
        )));
    }
    Ok((registration, parameters))
}

/// Opens the regions on disk first (they restart from their own raft state), then whatever the
/// registry says this node hosts.
async fn open_regions(shared: &Arc<Shared>, registered: &[proto::RegionReplicaSet]) -> Result<()> {
    for (region_id, database, peers) in stored_regions(&shared.regions_dir())? {
        shared
            .create_region(region_id, &database, &peers, 0)
            .await?;
    }
    for r in registered {
        shared
            .create_region(
                r.region_id,
                &r.database,
                &r.data_node_ids,
                r.preferred_leader_id,
            )
            .await?;
    }
    Ok(())
}

/// Runs a DataNode until `shutdown` resolves (the binary's entry point).
pub async fn run(
    config: DataNodeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let handle = start(config).await?;
    shutdown.await;
    handle.stop().await
}

async fn serve(
    shared: Arc<Shared>,
    rpc_listener: TcpListener,
    internal_listener: TcpListener,
    metrics_listener: TcpListener,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<()> {
    let metrics_task = tokio::spawn(crate::metrics::serve(metrics_listener, shared.clone()));
    let monitor_task = tokio::spawn(lease_monitor(shared.clone()));
    let flush_task = tokio::spawn(flush_loop(shared.clone()));
    let reconcile_task = tokio::spawn(region_reconciler(shared.clone()));
    let message_bytes_max = shared.config.dn_rpc_max_message_bytes as usize;
    let net = shared.config.channel_config();
    let internal = {
        let mut stop = stop.clone();
        runtime::server(&net)
            .add_service(
                proto::data_node_internal_service_server::DataNodeInternalServiceServer::new(
                    crate::internal::InternalService::new(shared.clone(), stop.clone()),
                )
                .max_decoding_message_size(message_bytes_max)
                .max_encoding_message_size(message_bytes_max),
            )
            .serve_with_incoming_shutdown(runtime::incoming(internal_listener, &net), async move {
                drop(stop.changed().await);
            })
    };
    let session = {
        let mut stop = stop.clone();
        runtime::server(&net)
            .add_service(
                proto::session_service_server::SessionServiceServer::new(
                    crate::session::SessionServiceImpl::new(shared.clone()),
                )
                .max_decoding_message_size(message_bytes_max)
                .max_encoding_message_size(message_bytes_max),
            )
            .serve_with_incoming_shutdown(runtime::incoming(rpc_listener, &net), async move {
                drop(stop.changed().await);
            })
    };
    let watchdog = async {
        while !shared.driver.is_stopped() && !*stop.borrow() {
            tokio::select! {
                _ = tokio::time::sleep(timing::DRIVER_WATCHDOG_POLL) => {}
                _ = stop.changed() => {}
            }
        }
    };
    let (internal, session, ()) = tokio::join!(internal, session, async {
        watchdog.await;
    });
    metrics_task.abort();
    monitor_task.abort();
    flush_task.abort();
    reconcile_task.abort();
    let driver_failed = shared.driver.is_stopped();
    shared.driver.shutdown();
    internal.map_err(|e| Error::Transport(e.to_string()))?;
    session.map_err(|e| Error::Transport(e.to_string()))?;
    if driver_failed {
        return Err(Error::Runtime(runtime::Error::Stopped));
    }
    Ok(())
}

/// Keeps consensus in step with the lease: fenced → the node rejects proposals with 536 and
/// transfers the leadership of its regions to replicas that hold their lease (consensus repeats
/// the transfer on every tick while fenced); NORMAL again → it takes proposals again.
async fn lease_monitor(shared: Arc<Shared>) {
    let mut raft_fenced = true;
    loop {
        let live = shared.lease.is_live();
        if live == raft_fenced {
            let fenced = !live;
            match shared
                .driver
                .call(move |node| node.set_fenced(fenced))
                .await
            {
                Ok(()) => {
                    raft_fenced = fenced;
                    if fenced {
                        inc(&shared.metrics.raft_fenced_switches);
                        tracing::warn!(node = shared.node_id, "fenced: regions step aside");
                    } else {
                        tracing::info!(node = shared.node_id, "lease live: regions take writes");
                    }
                }
                Err(e) => tracing::warn!("switching raft fencing: {e}"),
            }
        }
        tokio::time::sleep(timing::LEASE_MONITOR_POLL).await;
    }
}

/// The pull side of region creation: every [`timing::REGION_RECONCILE_INTERVAL`] while the lease is live,
/// creates the replicas the ConfigNode assigned to this node that it does not host. A CreateRegion
/// push can be lost (the node was cut off, or the ConfigNode's handler was dropped mid-way);
/// without this the region would run one replica short for good.
async fn region_reconciler(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(timing::REGION_RECONCILE_INTERVAL).await;
        if !shared.lease.is_live() {
            continue;
        }
        match shared.assigned_regions().await {
            Ok(assigned) => shared.create_missing_regions(&assigned).await,
            Err(e) => tracing::debug!(node = shared.node_id, "region reconciliation: {e}"),
        }
    }
}

/// Flushes regions whose memtables are large or old, then truncates the raft log up to the
/// flushed checkpoint.
async fn flush_loop(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(timing::FLUSH_CHECK_INTERVAL).await;
        let regions: Vec<(u64, Arc<DataRegion>)> = shared
            .regions
            .read()
            .iter()
            .map(|(id, r)| (*id, r.region.clone()))
            .collect();
        for (id, region) in regions {
            let flushed = tokio::task::spawn_blocking(move || {
                region.flush_if_needed(std::time::Instant::now())
            })
            .await;
            match flushed {
                Ok(Ok(Some(checkpoint))) if checkpoint > 0 => {
                    match shared
                        .driver
                        .call(move |node| node.compact(id, checkpoint))
                        .await
                    {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => tracing::warn!(region = id, "compacting the raft log: {e}"),
                        Err(e) => tracing::warn!(region = id, "compacting the raft log: {e}"),
                    }
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::error!(region = id, "flush failed: {e}"),
                Err(e) => tracing::error!(region = id, "flush task: {e}"),
            }
        }
    }
}

impl Shared {
    pub(crate) fn regions_dir(&self) -> PathBuf {
        self.config.dn_data_dir.join("regions")
    }

    /// Who this DataNode is, for ConfigNode requests (an older incarnation is refused).
    /// Calls the ConfigNode leader, bounded by `dn_confignode_deadline_ms` — or by `long`, for a
    /// statement the ConfigNode legitimately holds (a DROP waiting out a fenced DataNode), but
    /// only while this node holds its lease: a fenced node is most likely cut off from the
    /// ConfigNode, and must answer in time so the client moves on. Past the deadline: 712 with
    /// `need_retry`.
    pub(crate) async fn call_confignode<T, F, Fut>(
        &self,
        long: Option<Duration>,
        call: F,
    ) -> std::result::Result<T, proto::Status>
    where
        T: runtime::HasStatus,
        F: Fn(ConfigNodeServiceClient<runtime::PooledChannel>) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        inc(&self.metrics.confignode_requests);
        let short = Duration::from_millis(self.config.dn_confignode_deadline_ms);
        let deadline = match long {
            Some(long) if self.lease.is_live() => long,
            _ => short,
        };
        // A long statement gets one attempt for the whole deadline: re-sent after a shorter one,
        // the ConfigNode would answer the copy "being deleted" while the first runs on.
        let attempt_timeout = match long {
            Some(_) => deadline,
            None => deadline.min(Duration::from_millis(self.config.dn_rpc_timeout_ms)),
        };
        match tokio::time::timeout(
            deadline,
            self.confignode.call_with_timeout(attempt_timeout, call),
        )
        .await
        {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => {
                let mut s =
                    crate::convert::status(StatusCode::InternalRequestTimeOut, e.to_string());
                s.need_retry = true;
                Err(s)
            }
            Err(_) => {
                inc(&self.metrics.confignode_deadlines);
                let mut s = crate::convert::status(
                    StatusCode::InternalRequestTimeOut,
                    format!(
                        "DataNode {} got no answer from the ConfigNode within {} ms (metadata \
                         lease {}); retry on another DataNode",
                        self.node_id,
                        deadline.as_millis(),
                        self.lease.state().name()
                    ),
                );
                s.need_retry = true;
                Err(s)
            }
        }
    }

    pub(crate) fn caller(&self) -> proto::Caller {
        proto::Caller {
            data_node_id: self.node_id,
            incarnation_epoch: self.lease.incarnation(),
        }
    }

    pub(crate) fn next_session_id(&self) -> u64 {
        self.next_session.fetch_add(1, Ordering::Relaxed)
    }

    /// Hosts a replica of `region_id` (idempotent): its directory, its replica-set file (so a
    /// restart finds it without the ConfigNode) and its raft group.
    ///
    /// Runs to completion in a task of its own even when the caller is dropped (a ConfigNode
    /// whose CreateRegion call timed out): stopping between creating the raft group and
    /// registering the region would leave a group no reconciliation could ever host.
    pub(crate) async fn create_region(
        self: &Arc<Self>,
        region_id: u64,
        database: &str,
        peers: &[u64],
        preferred_leader: u64,
    ) -> Result<()> {
        let shared = self.clone();
        let database = database.to_string();
        let peers = peers.to_vec();
        tokio::spawn(async move {
            shared
                .create_region_to_completion(region_id, &database, &peers, preferred_leader)
                .await
        })
        .await
        .map_err(|e| Error::Transport(format!("creating region {region_id}: {e}")))?
    }

    async fn create_region_to_completion(
        &self,
        region_id: u64,
        database: &str,
        peers: &[u64],
        preferred_leader: u64,
    ) -> Result<()> {
        let _creating = self.region_create.lock().await;
        if self.regions.read().contains_key(&region_id) {
            return Ok(());
        }
        let dir = self.regions_dir();
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        write_replicas(&dir, region_id, database, peers)?;
        let region_dir = dir.join(region_id.to_string());
        let config = self.storage_config.clone();
        let region = tokio::task::spawn_blocking(move || DataRegion::open(region_dir, config))
            .await
            .map_err(|e| Error::Transport(format!("opening a region: {e}")))??;
        let region = Arc::new(region);
        let state_machine = DataRegionStateMachine::new(
            region.clone(),
            self.lease.clone(),
            self.clock.clone(),
            RegionRetryConfig {
                write_retry_max: self.config.data_region_write_retry_max,
                write_retry_wait_ms: self.config.data_region_write_retry_wait_ms,
            },
        );
        let metrics = state_machine.metrics().clone();
        let peers = peers.to_vec();
        let me = self.node_id;
        let created = self
            .driver
            .call(move |node| {
                node.create_group(region_id, &peers, Box::new(state_machine))?;
                // The preferred leader campaigns at once instead of waiting for a timeout.
                if preferred_leader == me {
                    node.campaign(region_id)?;
                }
                Ok::<(), consensus::Error>(())
            })
            .await?;
        if let Err(e) = created {
            return Err(Error::Runtime(runtime::Error::Consensus(e)));
        }
        self.regions
            .write()
            .insert(region_id, LocalRegion { region, metrics });
        tracing::info!(
            node = self.node_id,
            region_id,
            database,
            "region replica hosted"
        );
        Ok(())
    }

    /// A region hosted here.
    pub(crate) fn local_region(&self, region_id: u64) -> Option<Arc<DataRegion>> {
        self.regions
            .read()
            .get(&region_id)
            .map(|r| r.region.clone())
    }

    /// Learns DataNode addresses (for raft and forwarding).
    pub(crate) fn learn_nodes(&self, nodes: impl IntoIterator<Item = (u64, String)>) {
        let mut book = self.addresses.write();
        for (id, address) in nodes {
            book.insert(id, address);
        }
    }

    /// A channel to another DataNode's internal service, replaced after a transport failure or
    /// a timeout (`runtime::ChannelPool`).
    pub(crate) fn peer(&self, address: &str) -> DataNodeInternalServiceClient<PooledChannel> {
        let channel = self
            .peers
            .channel(address)
            .expect("addresses are validated host:port");
        let limit = self.config.dn_rpc_max_message_bytes as usize;
        DataNodeInternalServiceClient::new(channel)
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit)
    }

    /// Points of one series a query may answer: the request's limit (0 = none asked) capped
    /// by `query_points_max`.
    pub(crate) fn points_limit(&self, requested: u32) -> u32 {
        match requested {
            0 => self.config.query_points_max,
            n => n.min(self.config.query_points_max),
        }
    }

    /// The same for one region's part of a query: one point more, so the coordinator can tell a
    /// region that held more than it answers (`SeriesData.truncated`).
    pub(crate) fn region_points_limit(&self, requested: u32) -> u32 {
        let cap = self.config.query_points_max.saturating_add(1);
        match requested {
            0 => cap,
            n => n.min(cap),
        }
    }

    /// The internal address of a DataNode, from the address book (not lease-gated: it is the
    /// transport's, and an address is not metadata a write is validated against).
    pub(crate) fn node_address(&self, node: u64) -> Option<String> {
        self.addresses.read().get(&node).cloned()
    }

    /// Proposes `command` to a region led here; the status of the outcome and the log index.
    pub(crate) async fn propose_local(
        &self,
        region_id: u64,
        command: &RegionCommand,
    ) -> (proto::Status, u64) {
        let timeout = Duration::from_millis(self.config.dn_write_timeout_ms);
        match self
            .driver
            .propose(region_id, command.encode(), timeout)
            .await
        {
            Ok(_) => (
                crate::convert::ok(),
                self.driver.group_status(region_id).map_or(0, |s| s.applied),
            ),
            Err(e) => (self.driver_error_status(region_id, &e), 0),
        }
    }

    /// The status for a failed driver call, with a redirect to the leader when one is known.
    pub(crate) fn driver_error_status(&self, region_id: u64, e: &runtime::Error) -> proto::Status {
        let (code, leader) = match e {
            runtime::Error::Consensus(c) => (
                c.status_code(),
                match c {
                    consensus::Error::NotLeader { leader, .. } => *leader,
                    _ => None,
                },
            ),
            runtime::Error::Proposal(p) => (
                StatusCode::from_code(p.status_code()).unwrap_or(StatusCode::InternalServerError),
                None,
            ),
            runtime::Error::Timeout(_) => (StatusCode::InternalRequestTimeOut, None),
            runtime::Error::Backpressure(_) => (StatusCode::WriteProcessReject, None),
            _ => (StatusCode::InternalServerError, None),
        };
        let leader = leader.or_else(|| {
            self.driver
                .group_status(region_id)
                .and_then(|s| s.leader)
                .filter(|l| *l != self.node_id)
        });
        let mut status = proto::status(code, format!("region {region_id}: {e}"));
        if code == StatusCode::RegionLeaderChangeError {
            if let Some(address) = leader.and_then(|l| self.node_address(l)) {
                status.redirect = proto::parse_endpoint(&address).ok();
            }
        }
        status.need_retry = matches!(
            code,
            StatusCode::RegionLeaderChangeError
                | StatusCode::MetadataLeaseFencedRetryRequired
                | StatusCode::InternalRequestTimeOut
                | StatusCode::WriteProcessReject
        );
        status
    }

    /// True when this node leads the region now (as last published by the driver).
    pub(crate) fn leads(&self, region_id: u64) -> bool {
        self.driver
            .group_status(region_id)
            .is_some_and(|s| s.role == StateRole::Leader)
    }

    /// Lease recovery (design §4): pull fresh routes from the ConfigNode, then clear every cache
    /// and install them; the lease returns to NORMAL only if it is still fresh by then.
    pub(crate) async fn recover_lease(self: &Arc<Self>) {
        if self.recovering.swap(true, Ordering::AcqRel) {
            return;
        }
        // The pull happens after the heartbeat that triggered recovery was received, so it reads
        // metadata at least as new as every invalidation this node may have missed.
        let pulled = self.pull_metadata().await;
        if let Ok(pulled) = &pulled {
            self.create_missing_regions(&pulled.regions).await;
        }
        let outcome = self.lease.recover(
            || self.cache.clear(),
            || match pulled {
                Ok(pulled) => {
                    self.learn_nodes(pulled.nodes.iter().map(|(id, a)| (*id, a.internal.clone())));
                    self.cache.install(pulled);
                    Ok(())
                }
                Err(e) => Err(e),
            },
        );
        match outcome {
            Ok(state) => {
                tracing::info!(node = self.node_id, state = state.name(), "lease recovery")
            }
            Err(e) => tracing::warn!(
                node = self.node_id,
                "lease recovery failed, retried on the next heartbeat: {e}"
            ),
        }
        self.recovering.store(false, Ordering::Release);
    }

    /// Creates every replica `regions` assigns to this node that it does not host yet (preferred
    /// leader: none, the group's existing replicas lead). Failures are logged and retried by the
    /// next reconciliation.
    async fn create_missing_regions(self: &Arc<Self>, regions: &BTreeMap<u64, RegionRoute>) {
        let missing: Vec<(u64, &RegionRoute)> = {
            let hosted = self.regions.read();
            regions
                .iter()
                .filter(|(id, r)| r.replicas.contains(&self.node_id) && !hosted.contains_key(id))
                .map(|(id, r)| (*id, r))
                .collect()
        };
        for (id, route) in missing {
            match self
                .create_region(id, &route.database, &route.replicas, 0)
                .await
            {
                Ok(()) => tracing::info!(
                    node = self.node_id,
                    region = id,
                    "created a missing replica"
                ),
                Err(e) => tracing::warn!(
                    node = self.node_id,
                    region = id,
                    "creating a missing replica: {e}"
                ),
            }
        }
    }

    /// The regions the ConfigNode knows, with their replica sets.
    async fn assigned_regions(&self) -> std::result::Result<BTreeMap<u64, RegionRoute>, String> {
        let regions = self
            .confignode
            .call(|mut c| async move { c.show_regions(proto::ShowRegionsReq {}).await })
            .await
            .map_err(|e| e.to_string())?;
        check_status(regions.status.as_ref())?;
        Ok(region_routes(regions.regions))
    }

    async fn pull_metadata(&self) -> std::result::Result<PulledMetadata, String> {
        let cluster = self
            .confignode
            .call(|mut c| async move { c.show_cluster(proto::ShowClusterReq {}).await })
            .await
            .map_err(|e| e.to_string())?;
        check_status(cluster.status.as_ref())?;
        let regions = self
            .confignode
            .call(|mut c| async move { c.show_regions(proto::ShowRegionsReq {}).await })
            .await
            .map_err(|e| e.to_string())?;
        check_status(regions.status.as_ref())?;
        let mut pulled = PulledMetadata::default();
        for n in cluster.data_nodes {
            let Some(location) = n.location else { continue };
            pulled.nodes.insert(
                location.data_node_id,
                NodeAddresses {
                    internal: location
                        .internal_endpoint
                        .as_ref()
                        .map(proto::endpoint)
                        .unwrap_or_default(),
                    rpc: location
                        .rpc_endpoint
                        .as_ref()
                        .map(proto::endpoint)
                        .unwrap_or_default(),
                },
            );
        }
        pulled.regions = region_routes(regions.regions);
        Ok(pulled)
    }
}

/// Routes of a ShowRegions answer.
fn region_routes(regions: Vec<proto::RegionInfo>) -> BTreeMap<u64, RegionRoute> {
    regions
        .into_iter()
        .filter_map(|r| {
            let set = r.replica_set?;
            Some((
                set.region_id,
                RegionRoute {
                    database: set.database,
                    replicas: set.data_node_ids,
                    leader: r.leader_id,
                },
            ))
        })
        .collect()
}

/// `Err(description)` unless the status is 200.
pub(crate) fn check_status(status: Option<&proto::Status>) -> std::result::Result<(), String> {
    match status {
        Some(s) if s.is_success() => Ok(()),
        Some(s) => Err(format!("{} {}", s.code, s.message)),
        None => Err("response without a status".into()),
    }
}

async fn register(
    confignode: &ConfigNodeClient,
    stored_id: u64,
    internal: &str,
    rpc: &str,
) -> Result<proto::RegisterDataNodeResp> {
    let internal_endpoint =
        proto::parse_endpoint(internal).map_err(|e| Error::Registration(e.to_string()))?;
    let rpc_endpoint =
        proto::parse_endpoint(rpc).map_err(|e| Error::Registration(e.to_string()))?;
    let request = proto::RegisterDataNodeReq {
        data_node_id: stored_id,
        internal_endpoint: Some(internal_endpoint),
        rpc_endpoint: Some(rpc_endpoint),
    };
    // The ConfigNode may still be starting (cluster scripts start everything at once): keep
    // trying for a bounded time.
    let mut last = String::new();
    for _ in 0..30 {
        let request = request.clone();
        match confignode
            .call(move |mut c| {
                let request = request.clone();
                async move { c.register_data_node(request).await }
            })
            .await
        {
            Ok(resp) => match check_status(resp.status.as_ref()) {
                Ok(()) => return Ok(resp),
                Err(e) => last = e,
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(timing::REGISTRATION_RETRY).await;
    }
    Err(Error::Registration(last))
}

/// `identity` holds `"<node id> <incarnation epoch>\n"`.
fn read_identity(path: &Path) -> Result<(u64, u64)> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    let bad = |reason: &str| Error::Identity {
        path: path.display().to_string(),
        reason: reason.to_string(),
    };
    let mut parts = text.split_whitespace();
    let id = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no node id"))?;
    let epoch = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no incarnation epoch"))?;
    Ok((id, epoch))
}

/// Replaces a small file atomically and durably ([`common::durable::replace_durably`]).
fn write_durably(path: &Path, text: &str) -> Result<()> {
    common::durable::replace_durably(path, text.as_bytes())
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

fn write_identity(path: &Path, id: u64, epoch: u64) -> Result<()> {
    write_durably(path, &format!("{id} {epoch}\n"))
}

/// `regions/<id>.replicas` holds `"<database>\n<id>,<id>,...\n"`.
fn write_replicas(dir: &Path, region_id: u64, database: &str, peers: &[u64]) -> Result<()> {
    let peers: Vec<String> = peers.iter().map(u64::to_string).collect();
    write_durably(
        &dir.join(format!("{region_id}.replicas")),
        &format!("{database}\n{}\n", peers.join(",")),
    )
}

fn stored_regions(dir: &Path) -> Result<Vec<(u64, String, Vec<u64>)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("listing {}", dir.display()), e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(id) = name.strip_suffix(".replicas").and_then(|s| s.parse().ok()) else {
            continue;
        };
        let path = entry.path();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let bad = || Error::Identity {
            path: path.display().to_string(),
            reason: "not <database>\\n<id>,<id>...".into(),
        };
        let mut lines = text.lines();
        let database = lines.next().ok_or_else(bad)?.to_string();
        let peers = lines
            .next()
            .ok_or_else(bad)?
            .split(',')
            .map(|p| p.trim().parse::<u64>().map_err(|_| bad()))
            .collect::<Result<Vec<u64>>>()?;
        out.push((id, database, peers));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_and_replica_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("identity");
        assert_eq!(read_identity(&path).unwrap(), (0, 0));
        write_identity(&path, 4, 9).unwrap();
        assert_eq!(read_identity(&path).unwrap(), (4, 9));
        std::fs::write(&path, "x").unwrap();
        assert!(read_identity(&path).is_err());

        write_replicas(dir.path(), 7, "root.sg", &[1, 2, 3]).unwrap();
        assert_eq!(
            stored_regions(dir.path()).unwrap(),
            vec![(7, "root.sg".to_string(), vec![1, 2, 3])]
        );
    }
}
