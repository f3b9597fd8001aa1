//! Start-up and the node's shared state: identity, registration, the raft host
//! (`runtime::open_raft_host`: one shared raft log for every region), hosted regions, the lease monitor (fence → consensus steps aside), lease recovery,
//! and the servers.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::PartitionConfig;
use consensus::{Clock, GroupStatus};
use parking_lot::RwLock;
use runtime::{ConfigNodeClient, PeerService, RaftHostConfig};
use tokio::net::TcpListener;

use crate::config::DataNodeConfig;
use crate::coordinator::{Coordinator, CoordinatorLimits};
use crate::error::{Error, Result};
use crate::host::{RegionHost, RegionHostConfig};
use crate::lease::{LeaseState, MetadataLeaseManager};
use crate::metadata::{check_status, ConfigNodeLink, MetadataView};
use crate::metrics::{inc, Metrics};
use crate::peers::{GrpcPeers, Peers};
use crate::region_state_machine::RegionRetryConfig;
use crate::timing;
use engine::{CompactionConfig, FileCache, StorageConfig};

use crate::layout::{clean_removal_leftovers, read_identity, stored_regions, write_identity};
use crate::maintenance::{compaction_loop, flush_loop};
use crate::parts::{ClientLimits, Identity, InternalLimits, Shared, TestHooks};
use crate::recovery::founding_peers;

/// Internal calls the request limit never refuses: a peer's raft messages (a stream per peer
/// and lane, held open for the connection's life) must always be taken, or a busy node would
/// stop hearing heartbeats; the connection limit bounds them.
const RAFT_STREAM_PATHS: &[&str] = &["/fencepost.DataNodeInternalService/StreamRaftMessages"];

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
        self.shared.identity.node_id
    }

    /// The incarnation epoch of this run.
    pub fn incarnation(&self) -> u64 {
        self.shared.metadata.lease().incarnation()
    }

    /// The lease state.
    pub fn lease_state(&self) -> LeaseState {
        self.shared.metadata.lease().state()
    }

    /// True while the lease is live.
    pub fn lease_is_live(&self) -> bool {
        self.shared.metadata.lease().is_live()
    }

    /// Completed lease recoveries (clear + pull).
    pub fn lease_recoveries(&self) -> u64 {
        self.shared
            .metadata
            .lease()
            .metrics()
            .recoveries
            .load(Ordering::Relaxed)
    }

    /// Test hook equivalent to the `datanode::heartbeat::stall` failpoint: while `true`, the
    /// heartbeat handler holds every heartbeat without processing it.
    #[cfg(feature = "test-hooks")]
    pub fn stall_heartbeats(&self, stall: bool) {
        self.shared
            .hooks
            .stall_heartbeats
            .store(stall, Ordering::SeqCst);
    }

    /// Regions hosted here with this node's view of their raft group.
    pub fn region_status(&self) -> BTreeMap<u64, GroupStatus> {
        let host = &self.shared.host;
        host.region_ids()
            .into_iter()
            .filter_map(|id| host.group_status(id).map(|s| (id, s)))
            .collect()
    }

    /// Starts an election for `region` on this node (operators and tests: move a leader here).
    pub async fn campaign(&self, region: u64) -> Result<()> {
        self.shared
            .host
            .driver()
            .call(move |node| node.campaign(region))
            .await?
            .map_err(|e| Error::Runtime(runtime::Error::Consensus(e)))
    }

    /// Asks this node, if it leads `region`, to hand the leadership to node `to` (operators and
    /// tests: an election by campaign alone is refused while the current leader is healthy).
    pub async fn transfer_leader(&self, region: u64, to: u64) -> Result<()> {
        self.shared
            .host
            .driver()
            .call(move |node| node.transfer_leader(region, to))
            .await?
            .map_err(|e| Error::Runtime(runtime::Error::Consensus(e)))
    }

    /// The metrics page as served on `/metrics`.
    pub fn metrics_text(&self) -> String {
        crate::exporter::render(&self.shared)
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
    runtime::config::check_open_files(
        config.descriptors_needed(),
        "dn_rpc_max_concurrent_client_num + dn_rpc_handshake_connections_max + \
         dn_rpc_grpc_connections_max + dn_internal_max_connections + sealed_open_files_max + \
         256 reserved",
    );
    std::fs::create_dir_all(&config.node.dn_data_dir).map_err(|e| {
        Error::io(
            format!("creating dn_data_dir {}", config.node.dn_data_dir.display()),
            e,
        )
    })?;
    let rpc_listener = bind("dn_rpc_address", &config.rpc.dn_rpc_address).await?;
    let internal_listener =
        bind("dn_internal_address", &config.internal.dn_internal_address).await?;
    let metrics_listener = bind("dn_metrics_address", &config.node.dn_metrics_address).await?;
    let rpc_address = local_addr(&rpc_listener)?;
    let internal_address = local_addr(&internal_listener)?;
    let metrics_address = local_addr(&metrics_listener)?;

    let rpc_timeout = Duration::from_millis(config.internal.dn_rpc_timeout_ms);
    let confignode = ConfigNodeClient::new(config.internal.seed_config_nodes(), rpc_timeout, 10)
        .with_channel_config(config.internal.channel_config())
        .with_message_bytes_max(config.rpc.dn_rpc_max_message_bytes as usize);
    let (registration, parameters) = register_incarnation(
        &confignode,
        &config.node.dn_data_dir.join("identity"),
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
    let identity = Identity {
        node_id,
        internal_address: internal_address.to_string(),
        rpc_address: rpc_address.to_string(),
    };
    let metadata = Arc::new(MetadataView::new(
        lease.clone(),
        config.writes.cache_entries_max as usize,
        (
            parameters.metadata_lease_fence_ms,
            parameters.lease_proceed_margin_ms,
        ),
    ));
    let shared = assemble(config, identity, metadata, confignode, partition, clock)?;
    shared.host.start_fenced().await?;
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

/// Opens the raft host and puts the parts of a registered DataNode together.
fn assemble(
    config: DataNodeConfig,
    identity: Identity,
    metadata: Arc<MetadataView>,
    confignode: ConfigNodeClient,
    partition: PartitionConfig,
    clock: Arc<dyn Clock>,
) -> Result<Arc<Shared>> {
    let node_id = identity.node_id;
    let rpc_timeout = Duration::from_millis(config.internal.dn_rpc_timeout_ms);
    let message_bytes_max = config.rpc.dn_rpc_max_message_bytes as usize;
    let metrics = Arc::new(Metrics::default());
    let addresses: runtime::AddressBook = Arc::new(RwLock::new(BTreeMap::new()));
    addresses
        .write()
        .insert(node_id, identity.internal_address.clone());
    // Regions are created later, as the ConfigNode assigns them.
    let (driver, raft_transport) = runtime::open_raft_host(
        &raft_host_config(&config, node_id),
        addresses.clone(),
        clock.clone(),
        |_| Ok(()),
    )?;
    let pool = runtime::ChannelPool::new(config.internal.channel_config(), rpc_timeout);
    let peers = Arc::new(Peers::new(
        node_id,
        addresses,
        Box::new(GrpcPeers::new(node_id, pool, message_bytes_max)),
    ));
    let storage = storage_config(&config, partition);
    let host = Arc::new(RegionHost::new(
        node_id,
        region_host_config(&config, storage.clone()),
        driver,
        metadata.lease().clone(),
        clock,
        peers.clone(),
        metrics.clone(),
    ));
    let confignode = Arc::new(ConfigNodeLink::new(
        confignode,
        node_id,
        metadata.lease().clone(),
        metrics.clone(),
        Duration::from_millis(config.internal.dn_confignode_deadline_ms),
        rpc_timeout,
    ));
    let coordinator = Arc::new(Coordinator {
        node_id,
        internal_address: identity.internal_address.clone(),
        limits: coordinator_limits(&config, &storage),
        metadata: metadata.clone(),
        source: confignode.clone(),
        local: host.clone(),
        peers: peers.clone(),
        metrics: metrics.clone(),
    });
    let clients = ClientLimits::new(&config);
    let internal = InternalLimits {
        gate: runtime::ServerGate::new(config.internal.server_limits()),
        raft_transport,
        digests: tokio::sync::Semaphore::new(1),
    };
    let queries = crate::ops::queries::QueryRegistry::new(identity.node_id);
    Ok(Arc::new(Shared {
        queries,
        config,
        identity,
        metadata,
        confignode,
        host,
        peers,
        coordinator,
        metrics,
        hooks: TestHooks::default(),
        clients,
        internal,
    }))
}

/// The raft host of this node: one log for every region it hosts, under `<dn_data_dir>/raft`.
fn raft_host_config(config: &DataNodeConfig, node_id: u64) -> RaftHostConfig {
    RaftHostConfig {
        node_id,
        service: PeerService::DataNode,
        thread_name: format!("dn-raft-{node_id}"),
        log_dir: config.node.dn_data_dir.join("raft"),
        segment_bytes: config.raft.wal_segment_bytes,
        tick_ms: config.raft.dn_raft_tick_ms,
        election_ticks: config.raft.dn_raft_election_ticks as usize,
        log_limits: runtime::RaftLogLimits {
            entry_cache_bytes_max: config.raft.dn_raft_entry_cache_bytes as usize,
            unapplied_bytes_max: config.raft.dn_raft_unapplied_bytes_max,
            lag_entries_max: config.raft.dn_raft_log_lag_entries_max,
            lag_bytes_max: config.raft.dn_raft_log_lag_bytes_max,
            snapshot_builds_max: config.snapshot.dn_raft_snapshot_builds_max as usize,
        },
        transport: runtime::TransportConfig {
            message_bytes_max: config.rpc.dn_rpc_max_message_bytes as usize,
            queue_bytes_max: config.raft.dn_raft_transport_queue_bytes_max as usize,
            channel: config.internal.channel_config(),
            ..runtime::TransportConfig::default()
        },
        step_queue_bytes_max: config.raft.dn_raft_step_queue_bytes_max as usize,
    }
}

/// Every region's storage settings: the cluster's partitioning, flushes, compaction.
fn storage_config(config: &DataNodeConfig, partition: PartitionConfig) -> StorageConfig {
    StorageConfig {
        partition,
        memtable_flush_bytes: config.storage.memtable_flush_bytes as usize,
        memtable_flush_age_ms: config.storage.memtable_flush_age_ms,
        last_cache_bytes: config.storage.last_cache_bytes_per_region as usize,
        compaction: CompactionConfig {
            files_min: config.compaction.compaction_files_min as usize,
            write_bytes_per_sec: config.compaction.compaction_write_bytes_per_sec,
            cold_after_ms: config.compaction.compaction_cold_after_ms,
            ..CompactionConfig::default()
        },
        ..StorageConfig::default()
    }
}

fn region_host_config(config: &DataNodeConfig, storage: StorageConfig) -> RegionHostConfig {
    RegionHostConfig {
        regions_dir: config.node.dn_data_dir.join("regions"),
        storage,
        files: FileCache::new(config.storage.sealed_open_files_max as usize),
        memtable_budget_bytes: config.storage.memtable_budget_bytes as usize,
        retry: RegionRetryConfig {
            write_retry_max: config.writes.data_region_write_retry_max,
            write_retry_wait_ms: config.writes.data_region_write_retry_wait_ms,
        },
        write_timeout: Duration::from_millis(config.writes.dn_write_timeout_ms),
        query_points_max: config.query.query_points_max,
        snapshots: crate::snapshot::TransferConfig {
            chunk_bytes: config.snapshot.dn_snapshot_chunk_bytes as usize,
            send_bytes_per_sec: config.snapshot.dn_snapshot_send_bytes_per_sec,
            receives_max: config.snapshot.dn_snapshot_receives_max as usize,
            keep: Duration::from_millis(config.snapshot.dn_snapshot_keep_ms),
        },
    }
}

fn coordinator_limits(config: &DataNodeConfig, storage: &StorageConfig) -> CoordinatorLimits {
    CoordinatorLimits {
        tablet_rows_max: config.writes.tablet_rows_max as usize,
        tablet_time_partitions_max: config.writes.dn_tablet_time_partitions_max as usize,
        tablet_limits: storage.tablet_limits,
        partition: storage.partition,
        remote_write_retry: Duration::from_millis(config.writes.remote_write_max_retry_ms),
        write_timeout: Duration::from_millis(config.writes.dn_write_timeout_ms),
        rpc_timeout: Duration::from_millis(config.internal.dn_rpc_timeout_ms),
        query_points_max: config.query.query_points_max,
    }
}

/// Registers with the ConfigNode under the identity stored at `identity_path` (none on a first
/// start), checks that the incarnation it minted is above the stored one and that the cluster
/// parameters are usable, and stores the new identity before anything else runs under it. The
/// stored incarnation goes with the registration: a directory restored from an older backup
/// is refused (REVIEW H3), before its raft log is even opened.
async fn register_incarnation(
    confignode: &ConfigNodeClient,
    identity_path: &Path,
    internal_address: &str,
    rpc_address: &str,
) -> Result<(proto::RegisterDataNodeResp, proto::ClusterParameters)> {
    let (stored_id, stored_epoch) = read_identity(identity_path)?;
    let stored = (stored_id, stored_epoch);
    let registration = register(confignode, stored, internal_address, rpc_address).await?;
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
/// registry says this node hosts. Before, it finishes removals a crash interrupted (the region
/// directories whose replica file is gone); after, it removes the raft groups the shared log
/// still holds for no hosted region (a crash between a removal's replica file and its raft
/// group), so they neither tick nor pin the log.
async fn open_regions(shared: &Arc<Shared>, registered: &[proto::RegionReplicaSet]) -> Result<()> {
    let node = shared.identity.node_id;
    for region_id in clean_removal_leftovers(shared.host.regions_dir())? {
        tracing::info!(node, region_id, "finished removing a dropped region");
    }
    for (region_id, database, peers) in stored_regions(shared.host.regions_dir())? {
        shared
            .host
            .create_region(region_id, &database, &peers, 0)
            .await?;
    }
    for r in registered {
        let migration = (r.migrating_to != 0).then_some((r.migrating_from, r.migrating_to));
        shared
            .host
            .create_region(
                r.region_id,
                &r.database,
                founding_peers(node, &r.data_node_ids, migration),
                r.preferred_leader_id,
            )
            .await?;
    }
    let hosted = shared.host.region_ids();
    let orphans = shared
        .host
        .driver()
        .call(move |raft| {
            let orphans: Vec<u64> = raft
                .stored_groups()
                .into_iter()
                .filter(|g| !hosted.contains(g))
                .collect();
            for group in &orphans {
                raft.remove_group(*group)?;
            }
            Ok::<Vec<u64>, consensus::Error>(orphans)
        })
        .await?
        .map_err(|e| Error::Runtime(runtime::Error::Consensus(e)))?;
    for region_id in orphans {
        tracing::info!(
            node,
            region_id,
            "removed the raft group of a removed region"
        );
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
    let metrics_task = tokio::spawn(crate::exporter::serve(metrics_listener, shared.clone()));
    let monitor_task = tokio::spawn(lease_monitor(shared.clone()));
    let flush_task = tokio::spawn(flush_loop(shared.clone()));
    let compaction_task = tokio::spawn(compaction_loop(shared.clone()));
    let reconcile_task = tokio::spawn(region_reconciler(shared.clone()));
    let message_bytes_max = shared.config.rpc.dn_rpc_max_message_bytes as usize;
    let net = shared.config.internal.channel_config();
    let internal = {
        let mut stop = stop.clone();
        let gate = &shared.internal.gate;
        runtime::server(&net)
            .add_service(
                gate.service(
                    proto::data_node_internal_service_server::DataNodeInternalServiceServer::new(
                        crate::internal::InternalService::new(shared.clone(), stop.clone()),
                    )
                    .max_decoding_message_size(message_bytes_max)
                    .max_encoding_message_size(message_bytes_max),
                    RAFT_STREAM_PATHS,
                ),
            )
            .serve_with_incoming_shutdown(
                runtime::incoming(internal_listener, &net, gate),
                async move {
                    drop(stop.changed().await);
                },
            )
    };
    // One port, two protocols: gRPC sessions and IoTDB's Thrift clients (`client_rpc`).
    let (grpc_connections, thrift_connections) =
        runtime::incoming_split(rpc_listener, &net, &shared.clients.port_gate);
    let thrift_task = tokio::spawn(crate::client_rpc::serve(
        shared.clone(),
        thrift_connections,
        stop.clone(),
    ));
    let session = {
        let mut stop = stop.clone();
        let gate = &shared.clients.session_gate;
        runtime::server(&net)
            .add_service(
                gate.service(
                    crate::auth::Authenticated::new(
                        proto::session_service_server::SessionServiceServer::new(
                            crate::session::SessionServiceImpl::new(shared.clone()),
                        )
                        .max_decoding_message_size(message_bytes_max)
                        .max_encoding_message_size(message_bytes_max),
                        shared.clone(),
                    ),
                    &[],
                ),
            )
            .serve_with_incoming_shutdown(grpc_connections, async move {
                drop(stop.changed().await);
            })
    };
    let watchdog = async {
        while !shared.host.driver().is_stopped() && !*stop.borrow() {
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
    thrift_task.abort();
    monitor_task.abort();
    flush_task.abort();
    shared.host.cancel_compactions();
    compaction_task.abort();
    reconcile_task.abort();
    let driver_failed = shared.host.driver().is_stopped();
    shared.host.driver().shutdown();
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
        let live = shared.metadata.lease().is_live();
        if live == raft_fenced {
            let fenced = !live;
            match shared
                .host
                .driver()
                .call(move |node| node.set_fenced(fenced))
                .await
            {
                Ok(()) => {
                    raft_fenced = fenced;
                    if fenced {
                        inc(&shared.metrics.fencing.raft_fenced_switches);
                        tracing::warn!(
                            node = shared.identity.node_id,
                            "fenced: regions step aside"
                        );
                    } else {
                        tracing::info!(
                            node = shared.identity.node_id,
                            "lease live: regions take writes"
                        );
                    }
                }
                Err(e) => tracing::warn!("switching raft fencing: {e}"),
            }
        }
        tokio::time::sleep(timing::LEASE_MONITOR_POLL).await;
    }
}

/// Region reconciliation, every [`timing::REGION_RECONCILE_INTERVAL`]:
/// - the pull side of region creation: while the lease is live, creates the replicas the
///   ConfigNode assigned to this node that it does not host. A CreateRegion push can be lost
///   (the node was cut off, or the ConfigNode's handler was dropped mid-way); without this the
///   region would run one replica short for good;
/// - the removal of dropped regions (REVIEW L1): a hosted region the ConfigNode leader
///   positively reports dropped ([`crate::metadata::RegionSurvey`]) is removed. No answer, an
///   error, or a region merely missing from the answer removes nothing. This does not wait for
///   the lease: the signal is final whatever the lease, and a fenced node's dropped regions
///   would otherwise keep taking stale writes.
///
/// And every [`timing::MIGRATION_STEP_INTERVAL`], with the routes of the last survey, the next
/// step of every migration of a region this node leads ([`Shared::step_migrations`]).
async fn region_reconciler(shared: Arc<Shared>) {
    let mut routes = BTreeMap::new();
    let mut last_survey: Option<tokio::time::Instant> = None;
    loop {
        tokio::time::sleep(timing::MIGRATION_STEP_INTERVAL).await;
        if last_survey.is_none_or(|at| at.elapsed() >= timing::REGION_RECONCILE_INTERVAL) {
            last_survey = Some(tokio::time::Instant::now());
            if let Some(assigned) = shared.reconcile_regions().await {
                routes = assigned;
            }
        }
        shared.step_migrations(&routes).await;
    }
}

async fn register(
    confignode: &ConfigNodeClient,
    (stored_id, stored_epoch): (u64, u64),
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
        stored_incarnation_epoch: stored_epoch,
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
                // The registry refused this node (a data directory restored from an older
                // backup, too many DataNodes, a bad address): asking again changes nothing.
                Err(e) if resp.status.as_ref().is_some_and(|s| s.is(REFUSED)) => {
                    return Err(Error::Registration(e.to_string()))
                }
                Err(e) => last = e.to_string(),
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(timing::REGISTRATION_RETRY).await;
    }
    Err(Error::Registration(last))
}

/// What the ConfigNode answers a registration its registry refuses (507).
const REFUSED: common::StatusCode = common::StatusCode::MetadataError;

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn the_exempt_raft_stream_is_the_generated_method_path() {
        let service = proto::data_node_internal_service_server::SERVICE_NAME;
        assert_eq!(
            RAFT_STREAM_PATHS,
            [format!("/{service}/StreamRaftMessages").as_str()]
        );
    }
}
