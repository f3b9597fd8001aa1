//! Start-up and the node's shared state: identity, registration, the raft host
//! (`runtime::open_raft_host`: one shared raft log for every region), hosted regions, the lease monitor (fence → consensus steps aside), lease recovery,
//! and the servers.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::PartitionConfig;
use consensus::{Clock, GroupStatus};
use parking_lot::RwLock;
use runtime::{ConfigNodeClient, PeerService, RaftHostConfig};
use tokio::net::TcpListener;

use crate::cache::RegionRoute;
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
use engine::{CompactionConfig, DataRegion, FileCache, StorageConfig, StorageError};

mod maintenance;
mod shared;

pub(crate) use maintenance::flush_all;
use maintenance::{compaction_loop, flush_loop};
pub(crate) use shared::{ClientLimits, InternalLimits, Shared};

/// Who this DataNode is: its id and its bound addresses.
pub(crate) struct Identity {
    pub node_id: u64,
    /// The bound internal address (raft, forwarding, the ConfigNode's calls).
    pub internal_address: String,
    /// The bound session address (what clients are told to use).
    pub rpc_address: String,
}

/// Hooks for tests that drive a DataNode in-process (feature `test-hooks`); without the
/// feature nothing here can be switched on.
#[derive(Default)]
pub(crate) struct TestHooks {
    /// While set, the heartbeat handler waits (like the failpoint `datanode::heartbeat::stall`),
    /// so heartbeats are received but not processed.
    #[cfg(feature = "test-hooks")]
    stall_heartbeats: std::sync::atomic::AtomicBool,
}

impl TestHooks {
    /// True while heartbeats are to be held unprocessed.
    pub(crate) fn heartbeats_stalled(&self) -> bool {
        #[cfg(feature = "test-hooks")]
        {
            self.stall_heartbeats.load(Ordering::SeqCst)
        }
        #[cfg(not(feature = "test-hooks"))]
        {
            false
        }
    }
}

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
    runtime::config::check_open_files(
        config.descriptors_needed(),
        "dn_rpc_max_concurrent_client_num + dn_rpc_handshake_connections_max + \
         dn_rpc_grpc_connections_max + dn_internal_max_connections + sealed_open_files_max + \
         256 reserved",
    );
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
    let identity = Identity {
        node_id,
        internal_address: internal_address.to_string(),
        rpc_address: rpc_address.to_string(),
    };
    let metadata = Arc::new(MetadataView::new(
        lease.clone(),
        config.cache_entries_max as usize,
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
    let rpc_timeout = Duration::from_millis(config.dn_rpc_timeout_ms);
    let message_bytes_max = config.dn_rpc_max_message_bytes as usize;
    let metrics = Arc::new(Metrics::default());
    let addresses: runtime::AddressBook = Arc::new(RwLock::new(BTreeMap::new()));
    addresses
        .write()
        .insert(node_id, identity.internal_address.clone());
    let raft_host = RaftHostConfig {
        node_id,
        service: PeerService::DataNode,
        thread_name: format!("dn-raft-{node_id}"),
        log_dir: config.dn_data_dir.join("raft"),
        segment_bytes: config.wal_segment_bytes,
        tick_ms: config.dn_raft_tick_ms,
        election_ticks: config.dn_raft_election_ticks as usize,
        log_limits: runtime::RaftLogLimits {
            entry_cache_bytes_max: config.dn_raft_entry_cache_bytes as usize,
            unapplied_bytes_max: config.dn_raft_unapplied_bytes_max,
            lag_entries_max: config.dn_raft_log_lag_entries_max,
            lag_bytes_max: config.dn_raft_log_lag_bytes_max,
            snapshot_builds_max: config.dn_raft_snapshot_builds_max as usize,
        },
        transport: runtime::TransportConfig {
            message_bytes_max,
            queue_bytes_max: config.dn_raft_transport_queue_bytes_max as usize,
            channel: config.channel_config(),
            ..runtime::TransportConfig::default()
        },
        step_queue_bytes_max: config.dn_raft_step_queue_bytes_max as usize,
    };
    // Regions are created later, as the ConfigNode assigns them.
    let (driver, raft_transport) =
        runtime::open_raft_host(&raft_host, addresses.clone(), clock.clone(), |_| Ok(()))?;
    let pool = runtime::ChannelPool::new(config.channel_config(), rpc_timeout);
    let peers = Arc::new(Peers::new(
        node_id,
        addresses,
        Box::new(GrpcPeers::new(pool, message_bytes_max)),
    ));
    let storage = StorageConfig {
        partition,
        memtable_flush_bytes: config.memtable_flush_bytes as usize,
        memtable_flush_age_ms: config.memtable_flush_age_ms,
        compaction: CompactionConfig {
            files_min: config.compaction_files_min as usize,
            write_bytes_per_sec: config.compaction_write_bytes_per_sec,
            cold_after_ms: config.compaction_cold_after_ms,
            ..CompactionConfig::default()
        },
        ..StorageConfig::default()
    };
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
        Duration::from_millis(config.dn_confignode_deadline_ms),
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
        gate: runtime::ServerGate::new(config.internal_limits()),
        raft_transport,
        digests: tokio::sync::Semaphore::new(1),
    };
    Ok(Arc::new(Shared {
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

fn region_host_config(config: &DataNodeConfig, storage: StorageConfig) -> RegionHostConfig {
    RegionHostConfig {
        regions_dir: config.dn_data_dir.join("regions"),
        storage,
        files: FileCache::new(config.sealed_open_files_max as usize),
        memtable_budget_bytes: config.memtable_budget_bytes as usize,
        retry: RegionRetryConfig {
            write_retry_max: config.data_region_write_retry_max,
            write_retry_wait_ms: config.data_region_write_retry_wait_ms,
        },
        write_timeout: Duration::from_millis(config.dn_write_timeout_ms),
        query_points_max: config.query_points_max,
        snapshots: crate::snapshot::TransferConfig {
            chunk_bytes: config.dn_snapshot_chunk_bytes as usize,
            send_bytes_per_sec: config.dn_snapshot_send_bytes_per_sec,
            receives_max: config.dn_snapshot_receives_max as usize,
            keep: Duration::from_millis(config.dn_snapshot_keep_ms),
        },
    }
}

fn coordinator_limits(config: &DataNodeConfig, storage: &StorageConfig) -> CoordinatorLimits {
    CoordinatorLimits {
        tablet_rows_max: config.tablet_rows_max as usize,
        tablet_time_partitions_max: config.dn_tablet_time_partitions_max as usize,
        tablet_limits: storage.tablet_limits,
        partition: storage.partition,
        remote_write_retry: Duration::from_millis(config.remote_write_max_retry_ms),
        write_timeout: Duration::from_millis(config.dn_write_timeout_ms),
        rpc_timeout: Duration::from_millis(config.dn_rpc_timeout_ms),
        query_points_max: config.query_points_max,
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

/// Deletes every `regions/<id>/` that has no `regions/<id>.replicas`: a region's replica file is
/// written before its directory is created and deleted before it is removed, so such a
/// directory can only be what a crash left of a removal. Returns their ids.
fn clean_removal_leftovers(dir: &Path) -> Result<Vec<u64>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("listing {}", dir.display()), e)),
    };
    let mut leftovers = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u64>().ok())
        else {
            continue;
        };
        if entry.path().is_dir() && !dir.join(format!("{id}.replicas")).exists() {
            leftovers.push(id);
        }
    }
    leftovers.sort_unstable();
    for id in &leftovers {
        crate::host::remove_region_dir(dir, *id)?;
    }
    Ok(leftovers)
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
    let compaction_task = tokio::spawn(compaction_loop(shared.clone()));
    let reconcile_task = tokio::spawn(region_reconciler(shared.clone()));
    let message_bytes_max = shared.config.dn_rpc_max_message_bytes as usize;
    let net = shared.config.channel_config();
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
                        inc(&shared.metrics.raft_fenced_switches);
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
                    return Err(Error::Registration(e))
                }
                Err(e) => last = e,
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(timing::REGISTRATION_RETRY).await;
    }
    Err(Error::Registration(last))
}

/// What the ConfigNode answers a registration its registry refuses (507).
const REFUSED: common::StatusCode = common::StatusCode::MetadataError;

/// The peers a new replica of a region on `node` starts its raft group with: the replica set,
/// or none for a replica joining by a migration to `node` (its raft group learns its members
/// from the leader's snapshot; [`consensus::RaftNode::create_group`]).
fn founding_peers(node: u64, replicas: &[u64], migration: Option<(u64, u64)>) -> &[u64] {
    match migration {
        Some((_, to)) if to == node && !replicas.contains(&node) => &[],
        _ => replicas,
    }
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

/// `regions/<id>.replicas` holds `"<database>\n<id>,<id>,...\n"` (no ids for a joining
/// replica).
pub(crate) fn write_replicas(
    dir: &Path,
    region_id: u64,
    database: &str,
    peers: &[u64],
) -> Result<()> {
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
            .filter(|p| !p.trim().is_empty())
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
    fn the_exempt_raft_stream_is_the_generated_method_path() {
        let service = proto::data_node_internal_service_server::SERVICE_NAME;
        assert_eq!(
            RAFT_STREAM_PATHS,
            [format!("/{service}/StreamRaftMessages").as_str()]
        );
    }

    #[test]
    fn ttl_removal_trails_the_read_cutoff_by_the_margin() {
        use maintenance::ttl_removal_cutoff;
        assert_eq!(ttl_removal_cutoff(1_000_000, None), None);
        assert_eq!(
            ttl_removal_cutoff(1_000_000, Some(100_000)),
            Some(900_000 - timing::TTL_REMOVAL_MARGIN_MS)
        );
        assert_eq!(ttl_removal_cutoff(i64::MIN + 5, Some(100)), Some(i64::MIN));
    }

    /// REVIEW N12: TTL removal follows no clock ahead of the ConfigNode's, never moves back, and
    /// follows a forward step at no more than twice real time.
    #[test]
    fn the_removal_clock_is_bounded_by_the_confignode_and_real_time() {
        use maintenance::RemovalClock;
        use std::time::{Duration, Instant};
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut clock = RemovalClock::default();
        // This node's clock stepped an hour ahead: the ConfigNode's bounds it.
        assert_eq!(clock.now(3_600_000 + 1_000, 1_000, at(0)), 1_000);
        // One second later both agree again.
        assert_eq!(clock.now(2_000, 2_000, at(1_000)), 2_000);
        // Both step an hour forward: followed at twice real time (10 s → 20 s), not at once.
        assert_eq!(clock.now(3_600_000, 3_600_000, at(11_000)), 22_000);
        // Either steps back: the removal clock stays.
        assert_eq!(clock.now(500, 3_600_000, at(12_000)), 22_000);
        // And catches up with the real time meanwhile.
        assert_eq!(clock.now(30_000, 30_000, at(20_000)), 30_000);
    }

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
        write_replicas(dir.path(), 8, "root.sg", &[]).unwrap();
        assert_eq!(
            stored_regions(dir.path()).unwrap(),
            vec![
                (7, "root.sg".to_string(), vec![1, 2, 3]),
                (8, "root.sg".to_string(), vec![])
            ]
        );
    }
}
