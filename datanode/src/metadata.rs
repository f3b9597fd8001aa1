//! The DataNode's view of the cluster's metadata: the lease, the fail-closed caches, the
//! in-flight guard and the link to the ConfigNode.
//!
//! The invalidation invariant (an invalidation is acknowledged only after every operation that
//! read the removed entries has finished) is enforced by types here: the caches' lookups exist
//! only on [`Pinned`], which [`MetadataView::pin`] hands out already counted by the in-flight
//! guard. Code holding a `MetadataView` cannot read a cached schema or partition without it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::path::DevicePath;
use common::table::TableView;
use common::views::DatabasesView;
use common::{Status, StatusCode};
use parking_lot::Mutex;
use proto::config_node_service_client::ConfigNodeServiceClient;
use runtime::ConfigNodeClient;

use crate::cache::{DeviceSchema, MetadataCache, NodeAddresses, PulledMetadata, RegionRoute};
use crate::in_flight::{InFlight, InFlightGuard};
use crate::lease::{LeaseState, MetadataLeaseManager};
use crate::metrics::{inc, Metrics};
use engine::LeaseFenced;

mod fetch;
pub(crate) use fetch::{
    DeviceFetch, DeviceSlots, PartitionFetch, PartitionMap, SchemaFetch, TableIncarnation,
    TimeSlots,
};

/// Why a call to the ConfigNode leader gave no answer this DataNode can use.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum LinkError {
    /// No answer within the deadline, or no connection: 712 with `need_retry`, since another
    /// DataNode may reach the ConfigNode.
    #[error("{0}")]
    Unreachable(String),
    /// The ConfigNode answered, and refused.
    #[error("{} {}", .0.code.code(), .0.message)]
    Refused(Status),
    /// The answer makes no sense (no status, fields that disagree, a value that does not parse).
    #[error("{0}")]
    Malformed(String),
}

impl LinkError {
    /// The status a client is answered with.
    pub(crate) fn status(&self) -> Status {
        match self {
            LinkError::Unreachable(m) => {
                Status::new(StatusCode::InternalRequestTimeOut, m.clone()).retry()
            }
            LinkError::Refused(s) => s.clone(),
            LinkError::Malformed(m) => {
                Status::new(StatusCode::InternalServerError, format!("ConfigNode: {m}"))
            }
        }
    }

    /// No answer in time: the request may go to another DataNode.
    pub(crate) fn is_unreachable(&self) -> bool {
        matches!(self, LinkError::Unreachable(_))
    }
}

/// The lease, the caches it gates, and the heartbeat bookkeeping.
pub(crate) struct MetadataView {
    lease: Arc<MetadataLeaseManager>,
    cache: MetadataCache,
    in_flight: InFlight,
    /// `(metadata_lease_fence_ms, lease_proceed_margin_ms)` handed out at registration; a
    /// heartbeat from a leader with other settings is refused (ConfigNodes must agree).
    registered_lease_settings: (u64, u64),
    /// DataNodes holding their lease, as of the last heartbeat processed: where a fenced
    /// coordinator relays writes.
    lease_holders: Mutex<Vec<u64>>,
    /// Newest `(config_node_term, sequence)` of a processed heartbeat.
    heartbeat_order: Mutex<(u64, u64)>,
    recovering: AtomicBool,
    /// The highest fence floor whose round this node acknowledged: a region here raises its
    /// floor to no higher one (REVIEW N9; a forged floor would refuse every write).
    announced_floor: AtomicU64,
}

/// One operation's hold on the metadata: counted by the in-flight guard from creation to drop,
/// and the only way to look the caches up.
pub(crate) struct Pinned<'a> {
    cache: &'a MetadataCache,
    guard: InFlightGuard<'a>,
}

impl MetadataView {
    /// Empty caches of at most `cache_entries_max` entries each, gated by `lease`.
    pub(crate) fn new(
        lease: Arc<MetadataLeaseManager>,
        cache_entries_max: usize,
        registered_lease_settings: (u64, u64),
    ) -> MetadataView {
        MetadataView {
            cache: MetadataCache::new(lease.clone(), cache_entries_max),
            lease,
            in_flight: InFlight::default(),
            registered_lease_settings,
            lease_holders: Mutex::new(Vec::new()),
            heartbeat_order: Mutex::new((0, 0)),
            recovering: AtomicBool::new(false),
            announced_floor: AtomicU64::new(0),
        }
    }

    /// Records that this node acknowledged the fence-floor round of `floor` (its caches
    /// re-stamped, the older operations drained).
    pub(crate) fn announce_floor(&self, floor: u64) {
        self.announced_floor.fetch_max(floor, Ordering::AcqRel);
    }

    /// The highest fence floor this node acknowledged a round of.
    pub(crate) fn announced_floor(&self) -> u64 {
        self.announced_floor.load(Ordering::Acquire)
    }

    pub(crate) fn lease(&self) -> &Arc<MetadataLeaseManager> {
        &self.lease
    }

    /// Starts an operation that reads cached metadata; it counts until the `Pinned` is dropped.
    pub(crate) fn pin(&self) -> Pinned<'_> {
        Pinned {
            cache: &self.cache,
            guard: self.in_flight.enter(&self.cache),
        }
    }

    /// True while no invalidation or recovery moved the caches past `generation` (a
    /// [`Pinned::generation`] carried into a task that cannot hold the pin itself).
    pub(crate) fn is_current(&self, generation: u64) -> bool {
        self.cache.generation() == generation
    }

    pub(crate) fn registered_lease_settings(&self) -> (u64, u64) {
        self.registered_lease_settings
    }

    /// Takes `order` as the newest heartbeat processed, unless one at least as new was: a
    /// delayed heartbeat from an older leader (or an older one of this leader) must not renew
    /// the lease after a fresher one. `Err` says why it is refused.
    pub(crate) fn accept_heartbeat_order(&self, order: (u64, u64)) -> Result<(), String> {
        let mut newest = self.heartbeat_order.lock();
        if order <= *newest {
            return Err(format!(
                "heartbeat {order:?} is not newer than {:?}",
                *newest
            ));
        }
        *newest = order;
        Ok(())
    }

    pub(crate) fn set_lease_holders(&self, holders: Vec<u64>) {
        *self.lease_holders.lock() = holders;
    }

    pub(crate) fn lease_holders(&self) -> Vec<u64> {
        self.lease_holders.lock().clone()
    }

    /// A leader hint from a heartbeat (not metadata a write is validated against).
    pub(crate) fn set_leader(&self, region: u64, leader: u64) {
        self.cache.set_leader(region, leader);
    }

    /// Drops a table's cached schema.
    pub(crate) fn forget_table(&self, database: &str, table: &str) {
        self.cache.forget_table(database, table);
    }

    /// Removes the entries of `databases`, `series` and `tables`; the epoch the drain waits
    /// below.
    pub(crate) fn invalidate(
        &self,
        databases: &[String],
        series: &[(String, String)],
        tables: &[(String, String)],
    ) -> u64 {
        self.cache.invalidate(databases, series, tables);
        self.cache.epoch()
    }

    /// Re-stamps the cached schemas older than fence floor `floor` with it
    /// ([`MetadataCache::restamp`]); the epoch the drain waits below.
    pub(crate) fn restamp(&self, floor: u64) -> u64 {
        self.cache.restamp(floor);
        self.cache.epoch()
    }

    /// Waits until no operation pinned before `epoch` runs; false after `timeout`.
    pub(crate) async fn drain(&self, epoch: u64, timeout: Duration) -> bool {
        self.in_flight.drain(epoch, timeout).await
    }

    /// Operations pinned before `epoch` still running.
    pub(crate) fn pinned_before(&self, epoch: u64) -> usize {
        self.in_flight.older_than(epoch)
    }

    /// Starts a lease recovery (design §4); `None` while another one runs.
    pub(crate) fn begin_recovery(&self) -> Option<Recovery<'_>> {
        (!self.recovering.swap(true, Ordering::AcqRel)).then_some(Recovery { view: self })
    }
}

/// A lease recovery under way: at most one at a time ([`MetadataView::begin_recovery`]).
pub(crate) struct Recovery<'a> {
    view: &'a MetadataView,
}

impl Recovery<'_> {
    /// Clears every cache, then installs `pulled` (pulled after the heartbeat that started the
    /// recovery; `install` runs first with it, for the address book); the lease returns to
    /// NORMAL only if it is still fresh by then.
    pub(crate) fn finish(
        self,
        pulled: Result<PulledMetadata, LinkError>,
        install: impl FnOnce(&PulledMetadata),
    ) -> Result<LeaseState, String> {
        let view = self.view;
        view.lease.recover(
            || view.cache.clear(),
            || {
                let pulled = pulled.map_err(|e| e.to_string())?;
                install(&pulled);
                view.cache.install(pulled);
                Ok(())
            },
        )
    }
}

impl Drop for Recovery<'_> {
    fn drop(&mut self) {
        self.view.recovering.store(false, Ordering::Release);
    }
}

impl Pinned<'_> {
    /// The cache generation this operation validates against.
    pub(crate) fn generation(&self) -> u64 {
        self.guard.generation()
    }

    pub(crate) fn schema(&self, device: &DevicePath) -> Result<Option<DeviceSchema>, LeaseFenced> {
        self.cache.schema(device.as_str())
    }

    /// The cached schema and incarnation of a table-model table.
    pub(crate) fn table(
        &self,
        database: &str,
        table: &str,
    ) -> Result<Option<TableView>, LeaseFenced> {
        self.cache.table(database, table)
    }

    /// Caches a table's schema and incarnation fetched under this pin (dropped if the caches
    /// moved on since).
    pub(crate) fn put_table(&self, database: &str, table: TableView) -> bool {
        self.cache.put_table(self.generation(), database, table)
    }

    pub(crate) fn partition(
        &self,
        device: &DevicePath,
        slot: i64,
    ) -> Result<Option<u64>, LeaseFenced> {
        self.cache.partition(device.as_str(), slot)
    }

    pub(crate) fn region(&self, region: u64) -> Result<Option<RegionRoute>, LeaseFenced> {
        self.cache.region(region)
    }

    pub(crate) fn series_slot_regions(
        &self,
        database: &str,
        series_slot: u32,
    ) -> Result<Option<Vec<u64>>, LeaseFenced> {
        self.cache.series_slot_regions(database, series_slot)
    }

    /// Stores where series slots live (dropped if the caches moved on).
    pub(crate) fn put_series_slot_regions(&self, entries: Vec<((String, u32), Vec<u64>)>) -> bool {
        self.cache
            .put_series_slot_regions(self.generation(), entries)
    }

    pub(crate) fn node(&self, node: u64) -> Result<Option<NodeAddresses>, LeaseFenced> {
        self.cache.node(node)
    }

    /// Stores what was fetched under this pin (dropped if the caches moved on since).
    pub(crate) fn put_schema(&self, device: &DevicePath, schema: DeviceSchema) -> bool {
        self.cache
            .put_schema(self.generation(), device.as_str(), schema)
    }

    /// Stores fetched partitions, routes and addresses (dropped if the caches moved on).
    pub(crate) fn put_partitions(
        &self,
        partitions: Vec<((String, i64), u64)>,
        regions: Vec<(u64, RegionRoute)>,
        nodes: Vec<(u64, NodeAddresses)>,
    ) -> bool {
        self.cache
            .put_partitions(self.generation(), partitions, regions, nodes)
    }
}

/// Where the coordinator's metadata comes from when the caches miss: the ConfigNode leader.
/// A trait so the coordinator can be tested against a fake.
#[tonic::async_trait]
pub(crate) trait MetadataSource: Send + Sync {
    /// The schemas asked, by device; a refusal is [`LinkError::Refused`].
    async fn fetch_schema(
        &self,
        fetch: &SchemaFetch,
    ) -> Result<Vec<(String, DeviceSchema)>, LinkError>;
    /// The partitions asked, with the routes of their regions.
    async fn fetch_partitions(&self, fetch: &PartitionFetch) -> Result<PartitionMap, LinkError>;
}

/// The ConfigNode leader as this DataNode calls it: every call bounded by a deadline, so a
/// node cut off from the ConfigNode answers in time and the client moves on.
pub(crate) struct ConfigNodeLink {
    client: ConfigNodeClient,
    node_id: u64,
    lease: Arc<MetadataLeaseManager>,
    metrics: Arc<Metrics>,
    /// `dn_confignode_deadline_ms`.
    deadline: Duration,
    /// `dn_rpc_timeout_ms`: one attempt's bound.
    attempt_timeout: Duration,
}

impl ConfigNodeLink {
    pub(crate) fn new(
        client: ConfigNodeClient,
        node_id: u64,
        lease: Arc<MetadataLeaseManager>,
        metrics: Arc<Metrics>,
        deadline: Duration,
        attempt_timeout: Duration,
    ) -> ConfigNodeLink {
        ConfigNodeLink {
            client,
            node_id,
            lease,
            metrics,
            deadline,
            attempt_timeout,
        }
    }

    /// Calls the ConfigNode leader, bounded by `dn_confignode_deadline_ms` — or by `long`, for a
    /// statement the ConfigNode legitimately holds (a DROP waiting out a fenced DataNode), but
    /// only while this node holds its lease: a fenced node is most likely cut off from the
    /// ConfigNode, and must answer in time so the client moves on. Past the deadline: 712 with
    /// `need_retry`.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        long: Option<Duration>,
        call: F,
    ) -> Result<T, LinkError>
    where
        T: runtime::HasStatus,
        F: Fn(ConfigNodeServiceClient<runtime::PooledChannel>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        inc(&self.metrics.confignode.confignode_requests);
        let deadline = match long {
            Some(long) if self.lease.is_live() => long,
            _ => self.deadline,
        };
        // A long statement gets one attempt for the whole deadline: re-sent after a shorter one,
        // the ConfigNode would answer the copy "being deleted" while the first runs on.
        let attempt_timeout = match long {
            Some(_) => deadline,
            None => deadline.min(self.attempt_timeout),
        };
        match tokio::time::timeout(
            deadline,
            self.client.call_with_timeout(attempt_timeout, call),
        )
        .await
        {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(LinkError::Unreachable(e.to_string())),
            Err(_) => {
                inc(&self.metrics.confignode.confignode_deadlines);
                Err(LinkError::Unreachable(format!(
                    "DataNode {} got no answer from the ConfigNode within {} ms (metadata \
                     lease {}); retry on another DataNode",
                    self.node_id,
                    deadline.as_millis(),
                    self.lease.state().name()
                )))
            }
        }
    }

    /// The regions the ConfigNode knows, with their replica sets.
    pub(crate) async fn assigned_regions(&self) -> Result<BTreeMap<u64, RegionRoute>, LinkError> {
        let regions = self
            .client
            .call(|mut c| async move { c.show_regions(proto::ShowRegionsReq::default()).await })
            .await
            .map_err(|e| LinkError::Unreachable(e.to_string()))?;
        check_status(regions.status.as_ref())?;
        Ok(region_routes(regions.regions))
    }

    /// Who asks, on every lookup: the ConfigNode refuses an incarnation older than the
    /// registered one (507), so a replaced process cannot act on the cluster's metadata.
    fn caller(&self) -> proto::Caller {
        proto::Caller {
            data_node_id: self.node_id,
            incarnation_epoch: self.lease.incarnation(),
        }
    }

    /// The reconciler's question: every region the ConfigNode leader knows, and which of
    /// `hosted` (the regions this node hosts) it positively records as dropped.
    pub(crate) async fn survey_regions(&self, hosted: &[u64]) -> Result<RegionSurvey, LinkError> {
        let request = proto::ShowRegionsReq {
            region_ids: hosted.to_vec(),
            data_node_id: self.node_id,
        };
        let answer = self
            .client
            .call(|mut c| {
                let request = request.clone();
                async move { c.show_regions(request).await }
            })
            .await
            .map_err(|e| LinkError::Unreachable(e.to_string()))?;
        RegionSurvey::from_answer(hosted, answer)
    }

    /// Every database's time to live in ms (databases without one are absent), from the
    /// ConfigNode leader, with its wall clock when it answered: what the compaction loop removes
    /// expired points by.
    pub(crate) async fn database_ttls(&self) -> Result<(BTreeMap<String, i64>, i64), LinkError> {
        let answer = self
            .client
            .call(|mut c| async move { c.show_databases(proto::ShowDatabasesReq {}).await })
            .await
            .map_err(|e| LinkError::Unreachable(e.to_string()))?;
        check_status(answer.status.as_ref())?;
        let view = DatabasesView::try_from(answer)
            .map_err(|e| LinkError::Malformed(format!("ShowDatabases: {e}")))?;
        let ttls = view
            .databases
            .into_iter()
            .filter_map(|(database, ttl)| Some((database, ttl?)))
            .collect();
        Ok((ttls, view.now_ms))
    }

    /// The series that declared an encoding or compressor, as the ConfigNode leader has them
    /// now (flushes and compactions write those series so). A declaration that no longer
    /// parses is refused here like a malformed answer.
    pub(crate) async fn series_codecs(&self) -> Result<engine::SeriesCodecs, LinkError> {
        let answer = self
            .client
            .call(|mut c| async move {
                c.show_timeseries(proto::ShowTimeseriesReq {
                    prefix: String::new(),
                    declared_codecs_only: true,
                })
                .await
            })
            .await
            .map_err(|e| LinkError::Unreachable(e.to_string()))?;
        check_status(answer.status.as_ref())?;
        let mut codecs = engine::SeriesCodecs::default();
        for s in answer.series {
            let malformed = |e: String| {
                LinkError::Malformed(format!("series {}.{}: {e}", s.device, s.measurement))
            };
            let data_type = proto::data_type(s.data_type).map_err(|e| malformed(e.to_string()))?;
            let codec =
                engine::SeriesCodec::parse(data_type, Some(&s.encoding), Some(&s.compressor))
                    .map_err(|e| malformed(e.to_string()))?;
            codecs.insert(&s.device, &s.measurement, codec);
        }
        Ok(codecs)
    }

    /// Everything a lease recovery installs: every DataNode's addresses, every region's route.
    pub(crate) async fn pull_metadata(&self) -> Result<PulledMetadata, LinkError> {
        let nodes = self.data_node_addresses().await?;
        Ok(PulledMetadata {
            regions: self.assigned_regions().await?,
            nodes,
        })
    }

    /// Every registered DataNode's addresses (SHOW CLUSTER).
    pub(crate) async fn data_node_addresses(
        &self,
    ) -> Result<BTreeMap<u64, NodeAddresses>, LinkError> {
        let cluster = self
            .client
            .call(|mut c| async move { c.show_cluster(proto::ShowClusterReq {}).await })
            .await
            .map_err(|e| LinkError::Unreachable(e.to_string()))?;
        check_status(cluster.status.as_ref())?;
        Ok(cluster
            .data_nodes
            .into_iter()
            .filter_map(|n| n.location)
            .map(|location| (location.data_node_id, node_addresses(&location)))
            .collect())
    }
}

/// 712 with `need_retry`: the ConfigNode did not answer in time.
#[tonic::async_trait]
impl MetadataSource for ConfigNodeLink {
    async fn fetch_schema(
        &self,
        fetch: &SchemaFetch,
    ) -> Result<Vec<(String, DeviceSchema)>, LinkError> {
        let request = fetch::schema_request(fetch, self.caller());
        let resp = self
            .call(None, |mut c| {
                let request = request.clone();
                async move { c.fetch_schema(request).await }
            })
            .await?;
        fetch::schemas(resp)
    }

    async fn fetch_partitions(&self, fetch: &PartitionFetch) -> Result<PartitionMap, LinkError> {
        let request = fetch::partition_request(fetch, self.caller());
        let resp = self
            .call(None, |mut c| {
                let request = request.clone();
                async move { c.fetch_partitions(request).await }
            })
            .await?;
        fetch::partition_map(resp)
    }
}

/// What one ShowRegions answer of the ConfigNode leader says about this node's regions.
///
/// **Why removal waits for a positive signal.** A replica is the only copy of acknowledged data
/// on its node, so "the ConfigNode does not mention region 7" must never delete region 7: the
/// ConfigNode may be unreachable, a follower with stale state, an error path answering an empty
/// list, or its state may predate the allocation of a region this node created a moment ago. So
/// absence means nothing here. The ConfigNode instead answers, for the region ids the DataNode
/// asks about, those whose region group it allocated and has since deleted
/// (`MetadataState::region_dropped`: below its next region id and gone from its region groups —
/// ids are never reused and a group leaves the table only when DROP DATABASE finishes). That
/// predicate only ever turns from false to true as the ConfigNode applies entries, so even a
/// stale state can only under-report: it delays a removal, never causes a wrong one. The list
/// is the ConfigNode's own derived record of deleted region groups (tombstones for free: the
/// id counter is already replicated and snapshotted), so no new replicated state is needed.
/// This end accepts it only from a 200 answer, only for ids it asked about, and refuses an
/// answer that lists a region both live and dropped.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct RegionSurvey {
    /// Every region group the ConfigNode knows, with its replica set.
    pub assigned: BTreeMap<u64, RegionRoute>,
    /// Of the regions asked about, those dropped for good.
    pub dropped: BTreeSet<u64>,
    /// Of the regions asked about, those this DataNode, being removed, left for good (their
    /// replicas migrated to other DataNodes).
    pub left: BTreeSet<u64>,
}

impl RegionSurvey {
    /// The survey in `answer` to a ShowRegions that asked about `asked`; `Err` for anything
    /// but a coherent 200 answer, so an error path can never read as "dropped".
    pub(crate) fn from_answer(
        asked: &[u64],
        answer: proto::ShowRegionsResp,
    ) -> Result<RegionSurvey, LinkError> {
        check_status(answer.status.as_ref())?;
        let asked: BTreeSet<u64> = asked.iter().copied().collect();
        let dropped: BTreeSet<u64> = answer
            .dropped_region_ids
            .into_iter()
            .filter(|id| asked.contains(id))
            .collect();
        let left: BTreeSet<u64> = answer
            .left_region_ids
            .into_iter()
            .filter(|id| asked.contains(id))
            .collect();
        let assigned = region_routes(answer.regions);
        if let Some(both) = dropped.iter().find(|id| assigned.contains_key(id)) {
            return Err(LinkError::Malformed(format!(
                "the ConfigNode answered region {both} both live and dropped"
            )));
        }
        Ok(RegionSurvey {
            assigned,
            dropped,
            left,
        })
    }
}

/// Routes of a ShowRegions answer.
pub(crate) fn region_routes(regions: Vec<proto::RegionInfo>) -> BTreeMap<u64, RegionRoute> {
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
                    migration: (set.migrating_to != 0)
                        .then_some((set.migrating_from, set.migrating_to)),
                },
            ))
        })
        .collect()
}

/// A DataNode's addresses off the wire (empty when absent).
pub(crate) fn node_addresses(location: &proto::DataNodeLocation) -> NodeAddresses {
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
    }
}

/// A refusal unless the status is 200.
pub(crate) fn check_status(status: Option<&proto::Status>) -> Result<(), LinkError> {
    match status {
        Some(s) if s.is_success() => Ok(()),
        Some(s) => Err(LinkError::Refused(s.clone().into())),
        None => Err(LinkError::Malformed("response without a status".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: StatusCode, live: &[u64], dropped: &[u64]) -> proto::ShowRegionsResp {
        proto::ShowRegionsResp {
            status: Some(proto::status(code, "")),
            regions: live
                .iter()
                .map(|id| proto::RegionInfo {
                    replica_set: Some(proto::RegionReplicaSet {
                        region_id: *id,
                        database: "root.sg".into(),
                        data_node_ids: vec![1],
                        ..Default::default()
                    }),
                    leader_id: 0,
                })
                .collect(),
            dropped_region_ids: dropped.to_vec(),
            left_region_ids: Vec::new(),
        }
    }

    #[test]
    fn only_a_coherent_leader_answer_names_regions_dropped() {
        let hosted = [3, 4, 5];
        // The leader says 3 and 5 were dropped; 9 was not asked about and is ignored.
        let survey =
            RegionSurvey::from_answer(&hosted, answer(StatusCode::Success, &[4], &[3, 5, 9]))
                .unwrap();
        assert_eq!(survey.dropped, BTreeSet::from([3, 5]));
        assert_eq!(survey.assigned.keys().copied().collect::<Vec<_>>(), [4]);
        // Regions a node being removed left: only those it asked about.
        let mut left = answer(StatusCode::Success, &[3, 4, 5], &[]);
        left.left_region_ids = vec![4, 8];
        let survey = RegionSurvey::from_answer(&hosted, left).unwrap();
        assert_eq!(survey.left, BTreeSet::from([4]));
        // A stale or partial answer that merely lacks a region drops nothing.
        let survey =
            RegionSurvey::from_answer(&hosted, answer(StatusCode::Success, &[], &[])).unwrap();
        assert!(survey.dropped.is_empty());
        // A follower's redirect, an error, or an answer without a status is no answer at all,
        // whatever it carries.
        for code in [
            StatusCode::RedirectionRecommend,
            StatusCode::InternalServerError,
            StatusCode::InternalRequestTimeOut,
        ] {
            assert!(RegionSurvey::from_answer(&hosted, answer(code, &[], &[3])).is_err());
        }
        let mut no_status = answer(StatusCode::Success, &[], &[3]);
        no_status.status = None;
        assert!(RegionSurvey::from_answer(&hosted, no_status).is_err());
        // A region both live and dropped: the answer is not believed.
        assert!(
            RegionSurvey::from_answer(&hosted, answer(StatusCode::Success, &[3], &[3])).is_err()
        );
    }
}
