//! The region host: the raft driver (one shared raft log for every region,
//! `runtime::open_raft_host`) and the region replicas on this node — their creation, proposals
//! to the regions led here, and linearizable reads of them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::{LeaseFencedRetryPolicy, SeriesBatch, Status, StatusCode};
use consensus::{Clock, GroupStatus, StateRole};
use parking_lot::RwLock;
use runtime::{GrpcTransport, RaftDriver};

use crate::error::{Error, Result};
use crate::lease::MetadataLeaseManager;
use crate::metrics::{inc, Metrics};
use crate::peers::Peers;
use crate::region_read::{ReadKind, RegionAggregate, RegionPartials, RegionRead, RegionSeries};
use crate::region_state_machine::{
    DataRegionStateMachine, RegionRetryConfig, RegionStateMachineMetrics,
};
use crate::snapshot::SnapshotTransfers;
use engine::{DataRegion, FileCache, LeaseGate, RegionCommand, StorageConfig};

/// The longest a removal waits for the flush or compaction loop to let go of a region before
/// deleting its directory anyway.
const REMOVAL_WAIT: Duration = Duration::from_secs(30);

/// A region replica hosted here.
pub(crate) struct LocalRegion {
    pub region: Arc<DataRegion>,
    pub metrics: Arc<RegionStateMachineMetrics>,
    /// The database the region belongs to.
    pub database: String,
}

/// The region host's settings (from `DataNodeConfig`).
#[derive(Clone, Debug)]
pub(crate) struct RegionHostConfig {
    /// `<dn_data_dir>/regions`.
    pub regions_dir: PathBuf,
    pub storage: StorageConfig,
    /// The node's sealed-file descriptor cache (`sealed_open_files_max`), shared by its regions.
    pub files: Arc<FileCache>,
    /// `memtable_budget_bytes`: inserts are refused with 606 while the memtables hold this much.
    pub memtable_budget_bytes: usize,
    pub retry: RegionRetryConfig,
    /// `dn_write_timeout_ms`: a proposal's and a ReadIndex's bound.
    pub write_timeout: Duration,
    /// `query_points_max`.
    pub query_points_max: u32,
    /// How region snapshots are streamed.
    pub snapshots: crate::snapshot::TransferConfig,
}

/// The region replicas on this DataNode and the guards of their lifecycle.
#[derive(Default)]
struct Replicas {
    hosted: RwLock<BTreeMap<u64, LocalRegion>>,
    /// Held while a region is created or removed: one change to the set of regions at a time.
    creating: tokio::sync::Mutex<()>,
    /// Regions removed in this run (the ConfigNode said they were dropped): never created again,
    /// whatever a stale route list or a late CreateRegion says. Grows by one per dropped region
    /// this node hosted, bounded by the regions it ever hosted. A restart forgets it; by then
    /// the replica files are gone and the ConfigNode no longer lists the regions.
    removed: RwLock<BTreeSet<u64>>,
}

/// The raft driver and the region replicas on this DataNode.
pub(crate) struct RegionHost {
    node_id: u64,
    config: RegionHostConfig,
    driver: RaftDriver<GrpcTransport>,
    raft_metrics: OnceLock<Arc<consensus::Metrics>>,
    replicas: Replicas,
    /// The declared encodings last fetched from the ConfigNode: every region has them, one
    /// created later too (its first flush may come before the next fetch).
    series_codecs: RwLock<Arc<engine::SeriesCodecs>>,
    lease: Arc<MetadataLeaseManager>,
    clock: Arc<dyn Clock>,
    peers: Arc<Peers>,
    metrics: Arc<Metrics>,
    /// Region snapshots streamed to and from other DataNodes.
    snapshots: Arc<SnapshotTransfers>,
}

/// What the coordinator needs of the regions on its own node. A trait so the coordinator can be
/// tested without a raft host.
#[tonic::async_trait]
pub(crate) trait LocalReplicas: Send + Sync {
    /// True when a replica of `region` is hosted here.
    fn hosts(&self, region: u64) -> bool;
    /// The leader of `region` as this node's raft group sees it.
    fn leader(&self, region: u64) -> Option<u64>;
    /// True when this node leads `region` now.
    fn leads(&self, region: u64) -> bool;
    /// Proposes `command` to `region` led here: applied, or why not.
    async fn propose(
        &self,
        region: u64,
        command: &RegionCommand,
    ) -> std::result::Result<(), Status>;
    /// A linearizable read of a region led here.
    async fn read(&self, read: &RegionRead) -> std::result::Result<Vec<RegionSeries>, Status>;
    /// A linearizable aggregate read of a region led here.
    async fn aggregate(
        &self,
        read: &RegionAggregate,
    ) -> std::result::Result<Vec<RegionPartials>, Status>;
}

impl RegionHost {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        node_id: u64,
        config: RegionHostConfig,
        driver: RaftDriver<GrpcTransport>,
        lease: Arc<MetadataLeaseManager>,
        clock: Arc<dyn Clock>,
        peers: Arc<Peers>,
        metrics: Arc<Metrics>,
    ) -> RegionHost {
        let snapshots = SnapshotTransfers::new(
            node_id,
            config.regions_dir.clone(),
            config.snapshots,
            peers.clone(),
        );
        RegionHost {
            node_id,
            snapshots,
            config,
            driver,
            raft_metrics: OnceLock::new(),
            replicas: Replicas::default(),
            series_codecs: RwLock::new(Arc::new(engine::SeriesCodecs::default())),
            lease,
            clock,
            peers,
            metrics,
        }
    }

    /// Reads the raft node's metrics handle and starts the node fenced: the lease starts
    /// NEED_CLEAR and nothing may be proposed before the first heartbeat and recovery.
    pub(crate) async fn start_fenced(&self) -> Result<()> {
        let raft_metrics = self.driver.call(|node| node.metrics().clone()).await?;
        self.raft_metrics
            .set(raft_metrics)
            .expect("raft metrics are set once, at start");
        self.driver.call(|node| node.set_fenced(true)).await?;
        Ok(())
    }

    pub(crate) fn driver(&self) -> &RaftDriver<GrpcTransport> {
        &self.driver
    }

    /// The node's snapshot transfers.
    pub(crate) fn snapshots(&self) -> &Arc<SnapshotTransfers> {
        &self.snapshots
    }

    /// The replica of `region` hosted here.
    pub(crate) fn region(&self, region: u64) -> Option<Arc<DataRegion>> {
        self.replicas
            .hosted
            .read()
            .get(&region)
            .map(|r| r.region.clone())
    }

    pub(crate) fn raft_metrics(&self) -> Option<&Arc<consensus::Metrics>> {
        self.raft_metrics.get()
    }

    pub(crate) fn regions_dir(&self) -> &std::path::Path {
        &self.config.regions_dir
    }

    /// Ids of the regions hosted here.
    pub(crate) fn region_ids(&self) -> Vec<u64> {
        self.replicas.hosted.read().keys().copied().collect()
    }

    /// The node's sealed-file descriptor cache.
    pub(crate) fn files(&self) -> &Arc<FileCache> {
        &self.config.files
    }

    /// Bytes held by the memtables (working and being flushed) of every region here.
    pub(crate) fn memtable_bytes(&self) -> usize {
        self.replicas
            .hosted
            .read()
            .values()
            .map(|r| r.region.memory_bytes())
            .sum()
    }

    /// 606 WRITE_PROCESS_REJECT (with `need_retry`) for an insert while the node's memtables hold
    /// `memtable_budget_bytes` or more: writes wait for flushes instead of growing memory without
    /// bound. Deletions pass (they free memory). Checked by the leader before proposing, so
    /// every replica still applies every committed entry.
    fn over_memory_budget(&self, command: &RegionCommand) -> Option<Status> {
        if !matches!(command, RegionCommand::InsertTablet { .. }) {
            return None;
        }
        let used = self.memtable_bytes();
        let budget = self.config.memtable_budget_bytes;
        if used < budget {
            return None;
        }
        self.metrics
            .storage
            .budget_rejections
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let refusal = Status::new(
            StatusCode::WriteProcessReject,
            format!(
                "node {}: memtables hold {used} bytes, at the memtable_budget_bytes of {budget}; \
                 retry once a flush has freed memory",
                self.node_id
            ),
        );
        Some(refusal.retry())
    }

    /// How many regions are hosted here.
    pub(crate) fn region_count(&self) -> usize {
        self.replicas.hosted.read().len()
    }

    /// The regions hosted here, for the flush loop and digests.
    pub(crate) fn regions(&self) -> Vec<(u64, Arc<DataRegion>)> {
        self.replicas
            .hosted
            .read()
            .iter()
            .map(|(id, r)| (*id, r.region.clone()))
            .collect()
    }

    /// Each hosted region with its database.
    pub(crate) fn regions_with_databases(&self) -> Vec<(u64, String, Arc<DataRegion>)> {
        self.replicas
            .hosted
            .read()
            .iter()
            .map(|(id, r)| (*id, r.database.clone(), r.region.clone()))
            .collect()
    }

    /// Hands the declared encodings to every hosted region and to regions created from now on.
    pub(crate) fn set_series_codecs(&self, codecs: Arc<engine::SeriesCodecs>) {
        *self.series_codecs.write() = codecs.clone();
        for r in self.replicas.hosted.read().values() {
            r.region.set_series_codecs(codecs.clone());
        }
    }

    /// Stops every hosted region's compactions (running ones at their next series), for
    /// shutdown: a throttled merge of a large partition must not hold the process up.
    pub(crate) fn cancel_compactions(&self) {
        for r in self.replicas.hosted.read().values() {
            r.region.cancel_compactions();
        }
    }

    /// Each hosted region's state-machine metrics.
    pub(crate) fn state_machine_metrics(&self) -> Vec<Arc<RegionStateMachineMetrics>> {
        self.replicas
            .hosted
            .read()
            .values()
            .map(|r| r.metrics.clone())
            .collect()
    }

    /// A region hosted here.
    pub(crate) fn local_region(&self, region_id: u64) -> Option<Arc<DataRegion>> {
        self.replicas
            .hosted
            .read()
            .get(&region_id)
            .map(|r| r.region.clone())
    }

    /// Every region of `regions` that names this node a replica and is not hosted here.
    pub(crate) fn missing<'a>(
        &self,
        regions: &'a BTreeMap<u64, crate::cache::RegionRoute>,
    ) -> Vec<(u64, &'a crate::cache::RegionRoute)> {
        let hosted = self.replicas.hosted.read();
        regions
            .iter()
            .filter(|(id, r)| {
                let joining = r.migration.is_some_and(|(_, to)| to == self.node_id);
                (r.replicas.contains(&self.node_id) || joining) && !hosted.contains_key(id)
            })
            .map(|(id, r)| (*id, r))
            .collect()
    }

    /// This node's view of `region`'s raft group.
    pub(crate) fn group_status(&self, region: u64) -> Option<GroupStatus> {
        self.driver.group_status(region)
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
        let host = self.clone();
        let database = database.to_string();
        let peers = peers.to_vec();
        tokio::spawn(async move {
            host.create_region_to_completion(region_id, &database, &peers, preferred_leader)
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
        let _creating = self.replicas.creating.lock().await;
        if self.replicas.hosted.read().contains_key(&region_id) {
            return Ok(());
        }
        if self.replicas.removed.read().contains(&region_id) {
            return Err(Error::RegionRemoved(region_id));
        }
        let dir = self.config.regions_dir.clone();
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        crate::layout::write_replicas(&dir, region_id, database, peers)?;
        let region_dir = dir.join(region_id.to_string());
        let config = self.config.storage.clone();
        let files = self.config.files.clone();
        let region = tokio::task::spawn_blocking(move || {
            // A snapshot built before a restart is offered no more: raft forgot it.
            crate::snapshot::remove_built(&region_dir)
                .map_err(|e| Error::io(format!("clearing {}", region_dir.display()), e))?;
            let region = DataRegion::open_with(&region_dir, config, files)?;
            crate::snapshot::tidy_staging(&region_dir, region.applied_index())
                .map_err(|e| Error::io(format!("tidying {}", region_dir.display()), e))?;
            Ok::<_, Error>(region)
        })
        .await
        .map_err(|e| Error::Transport(format!("opening a region: {e}")))??;
        region.set_series_codecs(self.series_codecs.read().clone());
        let region = Arc::new(region);
        let state_machine = DataRegionStateMachine::new(
            region.clone(),
            self.lease.clone(),
            self.clock.clone(),
            self.config.retry,
        )
        .with_streamed_snapshots(self.node_id, region_id, self.snapshots.clone());
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
        self.replicas.hosted.write().insert(
            region_id,
            LocalRegion {
                region,
                metrics,
                database: database.to_string(),
            },
        );
        tracing::info!(
            node = self.node_id,
            region_id,
            database,
            "region replica hosted"
        );
        Ok(())
    }

    /// Removes the replica of `region_id`, which the ConfigNode leader said was dropped
    /// ([`crate::metadata::RegionSurvey`]); idempotent. Like creation it runs to completion in
    /// a task of its own.
    ///
    /// Order, so that a crash at any point leaves either the whole region (reopened, and removed
    /// again by the next reconciliation) or a leftover that start-up finishes removing
    /// (`layout::clean_removal_leftovers`), never a half region that is reopened:
    /// 1. out of the host map: new requests get 905 (not hosted here), so do the in-flight ones
    ///    the raft group's removal stops;
    /// 2. `regions/<id>.replicas` deleted and `regions/` fsynced — the commit point: a restart
    ///    no longer opens the region;
    /// 3. the raft group removed (a durable removal record; its entries no longer pin the shared
    ///    raft log, which `purge` truncates past them);
    /// 4. once the flush and compaction loops let go of the region, `regions/<id>/` deleted and
    ///    `regions/` fsynced.
    pub(crate) async fn remove_region(self: &Arc<Self>, region_id: u64) -> Result<()> {
        let host = self.clone();
        tokio::spawn(async move { host.remove_region_to_completion(region_id).await })
            .await
            .map_err(|e| Error::Transport(format!("removing region {region_id}: {e}")))?
    }

    async fn remove_region_to_completion(&self, region_id: u64) -> Result<()> {
        let _creating = self.replicas.creating.lock().await;
        self.replicas.removed.write().insert(region_id);
        let region = self.replicas.hosted.write().remove(&region_id);
        let dir = self.config.regions_dir.clone();
        let replicas = dir.join(format!("{region_id}.replicas"));
        match std::fs::remove_file(&replicas) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("removing {}", replicas.display()), e)),
        }
        common::durable::sync_dir(&dir)
            .map_err(|e| Error::io(format!("syncing {}", dir.display()), e))?;
        let removed = self
            .driver
            .call(move |node| match node.remove_group(region_id) {
                Ok(()) | Err(consensus::Error::GroupNotFound(_)) => Ok(()),
                Err(e) => Err(e),
            })
            .await?;
        if let Err(e) = removed {
            return Err(Error::Runtime(runtime::Error::Consensus(e)));
        }
        if let Some(region) = region {
            region.region.cancel_compactions();
            // The raft group held the other reference; a flush or compaction running now holds
            // one until it ends. Waiting is bounded: past it the directory goes anyway and the
            // straggler's write fails (it is logged), which loses nothing anyone still wants.
            let held_since = std::time::Instant::now();
            while Arc::strong_count(&region.region) > 1 && held_since.elapsed() < REMOVAL_WAIT {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        crate::layout::remove_region_dir(&dir, region_id)?;
        tracing::info!(
            node = self.node_id,
            region_id,
            "dropped region replica removed"
        );
        Ok(())
    }

    /// Removes the snapshots built here that no replica used for `dn_snapshot_keep_ms`
    /// (REVIEW-2026-12-05 N10: their hard links kept compacted, expired and deleted data on
    /// disk until the next build or restart), and counts what the others hold. A region's are
    /// removed when no replica fetched a chunk of one for that long and consensus released its
    /// generated snapshot (none sent for as long, none being built); they are renamed aside in
    /// the same raft-thread call, so no build starts in between, and deleted off that thread.
    pub(crate) async fn release_idle_snapshots(&self) {
        let regions: Vec<(u64, PathBuf)> = self
            .region_ids()
            .into_iter()
            .map(|id| (id, self.config.regions_dir.join(id.to_string())))
            .collect();
        let Some(usage) = snapshot_usage(regions).await else {
            return;
        };
        let idle: Vec<(u64, PathBuf)> = usage
            .iter()
            .filter(|(id, _, u)| u.snapshots > 0 && !self.snapshots.fetched_lately(*id))
            .map(|(id, dir, _)| (*id, dir.clone()))
            .collect();
        let mut retired = 0;
        if !idle.is_empty() {
            let keep_ms = self.snapshots.keep().as_millis() as u64;
            let node = self.node_id;
            match self
                .driver
                .call(move |raft| retire_released(raft, node, &idle, keep_ms))
                .await
            {
                Ok(n) => retired = n,
                Err(e) => tracing::warn!("releasing idle snapshots: {e}"),
            }
        }
        let metrics = self.snapshots.metrics();
        metrics
            .released
            .fetch_add(retired as u64, std::sync::atomic::Ordering::Relaxed);
        let usage = if retired > 0 {
            let regions = usage.into_iter().map(|(id, dir, _)| (id, dir)).collect();
            match snapshot_usage(regions).await {
                Some(usage) => usage,
                None => return,
            }
        } else {
            usage
        };
        let (bytes, pinned) = usage.iter().fold((0, 0), |(b, p), (_, _, u)| {
            (b + u.bytes, p + u.pinned_bytes)
        });
        metrics
            .built_bytes
            .store(bytes, std::sync::atomic::Ordering::Relaxed);
        metrics
            .pinned_bytes
            .store(pinned, std::sync::atomic::Ordering::Relaxed);
    }

    /// Proposes `command` to a region led here: the log index it applied at, or why not.
    pub(crate) async fn propose_command(
        &self,
        region_id: u64,
        command: &RegionCommand,
    ) -> std::result::Result<u64, Status> {
        if let Some(refusal) = self.over_memory_budget(command) {
            return Err(refusal);
        }
        match self
            .driver
            .propose(region_id, command.encode(), self.config.write_timeout)
            .await
        {
            Ok(_) => {
                let applied = self.driver.group_status(region_id).map_or(0, |s| s.applied);
                if let RegionCommand::InsertTablet { tablet, .. } = command {
                    tracing::trace!(
                        region_id,
                        applied,
                        device = tablet.device,
                        rows = tablet.row_count(),
                        "insert applied here as leader"
                    );
                }
                Ok(applied)
            }
            Err(e) => Err(self.driver_error_status(region_id, &e)),
        }
    }

    /// The status for a failed driver call, with a redirect to the leader when one is known.
    pub(crate) fn driver_error_status(&self, region_id: u64, e: &runtime::Error) -> Status {
        // A request the removal of its region stopped (or that raced it): not hosted here.
        if !self.replicas.hosted.read().contains_key(&region_id)
            && self.replicas.removed.read().contains(&region_id)
        {
            return self.not_hosted(region_id);
        }
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
        let mut status = Status::new(code, format!("region {region_id}: {e}"));
        if code == StatusCode::RegionLeaderChangeError {
            status.redirect = leader.and_then(|l| self.peers.address(l));
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

    /// Points of one region's part of a query: the request's limit (0 = none asked) capped by
    /// one more than `query_points_max`, so the coordinator can tell a region that held more
    /// than it answers (`SeriesData.truncated`).
    pub(crate) fn region_points_limit(&self, requested: u32) -> u32 {
        let cap = self.config.query_points_max.saturating_add(1);
        match requested {
            0 => cap,
            n => n.min(cap),
        }
    }

    /// 905 with `need_retry`: `region_id` has no replica here.
    fn not_hosted(&self, region_id: u64) -> Status {
        Status::new(
            StatusCode::RegionLeaderChangeError,
            format!("region {region_id} has no replica on node {}", self.node_id),
        )
        .retry()
    }

    /// The region admission gate (design §5 step 2) for a write forwarded here: 536 with
    /// `need_retry` when fenced, 905 when the region is not hosted here, else the proposal.
    pub(crate) async fn admit_forwarded(
        &self,
        region_id: u64,
        command: &RegionCommand,
    ) -> std::result::Result<u64, Status> {
        if let Err(e) = self.lease.check(LeaseFencedRetryPolicy::RetryUntilSuccess) {
            let fenced = Status::new(
                e.policy.status_code(),
                format!("node {} is fenced", self.node_id),
            );
            return Err(fenced.retry());
        }
        if self.local_region(region_id).is_none() {
            return Err(self.not_hosted(region_id));
        }
        self.propose_command(region_id, command).await
    }

    /// The replica of `region_id`, led here and caught up with its leader's commit (ReadIndex):
    /// what a linearizable read reads. 535 when fenced, 905 (with a redirect when known) when
    /// this node does not lead the region.
    async fn linearizable(&self, region_id: u64) -> std::result::Result<Arc<DataRegion>, Status> {
        if let Err(e) = self.lease.check(LeaseFencedRetryPolicy::None) {
            inc(&self.metrics.fencing.fenced_reads);
            return Err(Status::new(
                e.policy.status_code(),
                format!("node {} is fenced", self.node_id),
            ));
        }
        let Some(region) = self.local_region(region_id) else {
            return Err(self.not_hosted(region_id));
        };
        if let Err(e) = self
            .driver
            .read_index(region_id, self.config.write_timeout)
            .await
        {
            return Err(self.driver_error_status(region_id, &e));
        }
        Ok(region)
    }

    /// A linearizable read of a region led here.
    pub(crate) async fn read_local(
        &self,
        read: &RegionRead,
    ) -> std::result::Result<Vec<RegionSeries>, Status> {
        let region = self.linearizable(read.region).await?;
        read_series(&region, read, self.region_points_limit(read.points_limit))
    }

    /// A linearizable aggregate read of a region led here. Its windows are bounded by
    /// `query_points_max`, as a read's points are (a peer's request is not trusted with the
    /// size of the answer).
    pub(crate) async fn aggregate_local(
        &self,
        read: &RegionAggregate,
    ) -> std::result::Result<Vec<RegionPartials>, Status> {
        let max = u64::from(self.config.query_points_max);
        if read.windows.count() > max {
            return Err(Status::new(
                StatusCode::IllegalParameter,
                format!(
                    "{} windows in one aggregate read; the limit is {max} (dn_query_points_max)",
                    read.windows.count()
                ),
            ));
        }
        let region = self.linearizable(read.region).await?;
        aggregate_series(&region, read)
    }
}

/// Deletes what earlier passes retired of each region's built snapshots and reads what the
/// rest hold, off the async workers; `None` (logged) when the task failed.
async fn snapshot_usage(
    regions: Vec<(u64, PathBuf)>,
) -> Option<Vec<(u64, PathBuf, crate::snapshot::BuiltUsage)>> {
    let scanned = tokio::task::spawn_blocking(move || {
        regions
            .into_iter()
            .map(|(id, dir)| {
                if let Err(e) = crate::snapshot::remove_retired(&dir) {
                    tracing::warn!(region = id, "removing released snapshots: {e}");
                }
                // A region removed meanwhile has nothing left.
                let usage = crate::snapshot::built_usage(&dir).unwrap_or_default();
                (id, dir, usage)
            })
            .collect()
    })
    .await;
    match scanned {
        Ok(usage) => Some(usage),
        Err(e) => {
            tracing::warn!("reading built snapshots: {e}");
            None
        }
    }
}

/// On the raft thread: for each idle region whose generated snapshot consensus releases (or
/// holds none and builds none), renames its built snapshots aside; answers how many.
fn retire_released<T: consensus::Transport>(
    raft: &mut consensus::RaftNode<T>,
    node: u64,
    idle: &[(u64, PathBuf)],
    keep_ms: u64,
) -> usize {
    let mut retired = 0;
    for (id, dir) in idle {
        match raft.release_idle_snapshot(*id, keep_ms) {
            Ok(true) => match crate::snapshot::retire_built(dir) {
                Ok(n) => {
                    retired += n;
                    tracing::info!(
                        node,
                        region = id,
                        snapshots = n,
                        "unused snapshots released"
                    );
                }
                Err(e) => tracing::warn!(region = id, "retiring built snapshots: {e}"),
            },
            Ok(false) => {}
            // Removed meanwhile: its directory goes with it.
            Err(e) => tracing::debug!(region = id, "releasing a snapshot: {e}"),
        }
    }
    retired
}

/// The points of `read`'s paths in one region (the newest one each, with [`ReadKind::Last`]), at
/// most `limit` per series; series that do not exist or hold no point are absent.
fn read_series(
    region: &DataRegion,
    read: &RegionRead,
    limit: u32,
) -> std::result::Result<Vec<RegionSeries>, Status> {
    let limit = limit as usize;
    let mut out = Vec::new();
    for path in &read.paths {
        let Some(data_type) = region.series_type(&path.device, &path.measurement) else {
            continue;
        };
        let points = match read.kind {
            ReadKind::Last => region
                .last(&path.device, &path.measurement)
                // The coordinator's TTL cutoff: the newest point older than it means the
                // whole series expired.
                .map(|p| {
                    p.into_iter()
                        .filter(|(t, _)| *t >= read.range.start)
                        .collect()
                }),
            ReadKind::Range => region.query(
                &path.device,
                &path.measurement,
                read.range.start,
                read.range.end,
            ),
        };
        let points: Vec<(i64, common::Value)> = points.map_err(|e| e.status())?;
        if points.is_empty() {
            continue;
        }
        let batch = SeriesBatch::from_points(data_type, points.into_iter().take(limit));
        out.push((path.clone(), batch));
    }
    Ok(out)
}

/// The partials of each of `read.paths` the region holds a visible point of.
fn aggregate_series(
    region: &DataRegion,
    read: &RegionAggregate,
) -> std::result::Result<Vec<RegionPartials>, Status> {
    let mut out = Vec::new();
    for path in &read.paths {
        let (partials, _) = region
            .aggregate(&path.device, &path.measurement, &read.windows)
            .map_err(|e| e.status())?;
        if partials.iter().any(|p| p.count > 0) {
            out.push((path.clone(), partials));
        }
    }
    Ok(out)
}

#[tonic::async_trait]
impl LocalReplicas for RegionHost {
    fn hosts(&self, region: u64) -> bool {
        self.local_region(region).is_some()
    }

    fn leader(&self, region: u64) -> Option<u64> {
        self.driver.group_status(region).and_then(|s| s.leader)
    }

    fn leads(&self, region: u64) -> bool {
        self.driver
            .group_status(region)
            .is_some_and(|s| s.role == StateRole::Leader)
    }

    async fn propose(
        &self,
        region: u64,
        command: &RegionCommand,
    ) -> std::result::Result<(), Status> {
        self.propose_command(region, command).await.map(drop)
    }

    async fn read(&self, read: &RegionRead) -> std::result::Result<Vec<RegionSeries>, Status> {
        self.read_local(read).await
    }

    async fn aggregate(
        &self,
        read: &RegionAggregate,
    ) -> std::result::Result<Vec<RegionPartials>, Status> {
        self.aggregate_local(read).await
    }
}
