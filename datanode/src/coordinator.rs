//! The coordinator (design §5 step 1): the DataNode a session talks to turns a tablet into
//! region writes and a query into region reads.
//!
//! Write: lease gate (fenced → 536) → schema through the cache (miss → ConfigNode FetchSchema with
//! auto-create) → type check (614) → partitions through the cache (miss → FetchPartitions with
//! auto-create) → split by region (series slot of the device × time slot) → dispatch each part to
//! the region leader, locally or over `ForwardRegionWrite`, retrying 536, leader changes and
//! connection loss on another replica or the new leader within `remote_write_max_retry_ms` →
//! aggregate (302 with one sub-status per region when any part failed).
//!
//! Read: lease gate (fenced → 535) → schema → every region of the device's database → a
//! linearizable read on each region's leader (local or `ReadRegion`) → merge.
//!
//! [`Coordinator`] holds only the parts it needs — the metadata view (whose cache lookups need a
//! [`Pinned`] hold, so nothing here reads metadata outside the in-flight guard), the metadata
//! source, the local replicas, the peers and the metrics — and answers a typed
//! [`CoordinatorError`] whose [`CoordinatorError::status`] is the one mapping to the wire.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    DataType, LeaseFencedRetryPolicy, PartitionConfig, Status, StatusCode, Tablet, TabletLimits,
    FETCH_PARTITIONS_SLOTS_MAX,
};

use crate::cache::{DeviceSchema, RegionRoute};
use crate::host::LocalReplicas;
use crate::metadata::{DeviceFetch, LinkError, MetadataSource, MetadataView, Pinned, SchemaFetch};
use crate::metrics::{add, inc, Metrics};
use crate::peers::Peers;
use crate::timing::{INVALIDATION_POLL, WRITE_BACKOFF_MAX, WRITE_BACKOFF_MIN};
use common::path::DevicePath;
use engine::{LeaseGate, RegionCommand};

/// Why the coordinator did not do what was asked; [`CoordinatorError::status`] is its answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum CoordinatorError {
    /// This DataNode is fenced: a write answers 536 with `need_retry` (retry on another
    /// DataNode), a read 535.
    #[error("DataNode {node} is fenced (metadata lease {lease}){detail}")]
    Fenced {
        node: u64,
        lease: &'static str,
        write: bool,
        /// What the client should do and what else was tried ("; retry on another DataNode;
        /// no peer took the write either …"), or empty.
        detail: String,
    },
    /// An invalidation or a recovery moved the caches on while a write was in flight: its
    /// validation is void (536 with `need_retry`).
    #[error("the metadata changed while the write was in flight; retry")]
    MetadataChanged,
    /// The request breaks a limit or is malformed (700 ILLEGAL_PARAMETER).
    #[error("{0}")]
    Invalid(String),
    /// A measurement's type differs from its series' (614).
    #[error("{0}")]
    TypeMismatch(String),
    /// The metadata does not have what the request needs (507).
    #[error("{0}")]
    Metadata(String),
    /// The ConfigNode did not answer in time (712 with `need_retry`) or refused.
    #[error("ConfigNode: {0}")]
    ConfigNode(LinkError),
    /// Parts of one request failed: their statuses, in request order (302 with sub-statuses;
    /// one part's status as it is).
    #[error("{} parts, some failed", .0.len())]
    Parts(Vec<Status>),
    /// A replica, a peer or the local raft group answered this.
    #[error("{} {}", .0.code, .0.message)]
    Remote(Status),
    /// A bug or a task failure here (305 INTERNAL_SERVER_ERROR).
    #[error("{0}")]
    Internal(String),
}

impl CoordinatorError {
    /// The wire status of this error.
    pub(crate) fn status(&self) -> Status {
        match self {
            CoordinatorError::Fenced { write: true, .. } | CoordinatorError::MetadataChanged => {
                Status::new(
                    StatusCode::MetadataLeaseFencedRetryRequired,
                    self.to_string(),
                )
                .retry()
            }
            CoordinatorError::Fenced { write: false, .. } => {
                Status::new(StatusCode::MetadataLeaseFenced, self.to_string())
            }
            CoordinatorError::Invalid(m) => Status::new(StatusCode::IllegalParameter, m.clone()),
            CoordinatorError::TypeMismatch(m) => {
                Status::new(StatusCode::DataTypeMismatch, m.clone())
            }
            CoordinatorError::Metadata(m) => Status::new(StatusCode::MetadataError, m.clone()),
            CoordinatorError::ConfigNode(e) => e.status(),
            CoordinatorError::Remote(s) => s.clone(),
            CoordinatorError::Parts(statuses) => aggregate(statuses.clone()),
            CoordinatorError::Internal(m) => {
                Status::new(StatusCode::InternalServerError, m.clone())
            }
        }
    }

    /// A ConfigNode request ran out of its deadline ([`crate::metadata::ConfigNodeLink::call`]):
    /// a coordinator that may relay hands the request to a peer.
    fn confignode_unreachable(&self) -> bool {
        matches!(self, CoordinatorError::ConfigNode(e) if e.is_unreachable())
    }
}

type Outcome<T> = Result<T, CoordinatorError>;

/// A written tablet: with the session address of the leader of the device's newest region when
/// another DataNode leads it (IoTDB's REDIRECTION_RECOMMEND, 400).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Written {
    /// `host:port`.
    pub redirect: Option<String>,
}

impl Written {
    /// 200, or 400 with the redirect.
    pub(crate) fn status(&self) -> Status {
        match &self.redirect {
            None => Status::ok(),
            Some(leader) => {
                let mut s = Status::new(
                    StatusCode::RedirectionRecommend,
                    "written; the leader of the device's newest region is elsewhere",
                )
                .retry();
                s.redirect = Some(leader.clone());
                s
            }
        }
    }
}

/// The wire status of a write's outcome.
pub(crate) fn write_status(outcome: &Outcome<Written>) -> Status {
    match outcome {
        Ok(written) => written.status(),
        Err(e) => e.status(),
    }
}

fn backoff(attempt: u32) -> Duration {
    WRITE_BACKOFF_MIN
        .saturating_mul(1u32 << attempt.min(16))
        .min(WRITE_BACKOFF_MAX)
}

/// True for 200 and for 400 REDIRECTION_RECOMMEND (written, with a hint for next time).
fn written(s: &Status) -> bool {
    s.is(StatusCode::Success) || s.is(StatusCode::RedirectionRecommend)
}

/// Combines the statuses of the parts of one request.
///
/// A 400 REDIRECTION_RECOMMEND counts as success. It survives only as the answer of a single part:
/// a hint is about one device, and a request of several parts has no one device to redirect.
pub(crate) fn aggregate(statuses: Vec<Status>) -> Status {
    if statuses.len() == 1 {
        return statuses.into_iter().next().expect("one status");
    }
    if statuses.iter().all(written) {
        return Status::ok();
    }
    let need_retry = statuses.iter().any(|s| !written(s) && s.need_retry);
    let failed = statuses.iter().filter(|s| !written(s)).count();
    let mut s = Status::new(
        StatusCode::MultipleError,
        format!("{failed} of {} parts failed", statuses.len()),
    );
    s.need_retry = need_retry;
    s.parts = statuses;
    s
}

/// Whether a coordinator that cannot validate a write itself hands it to a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Relay {
    /// A fenced coordinator (or one whose ConfigNode does not answer) relays the write,
    /// unvalidated, to a DataNode holding its lease, which validates it itself. Clients that know
    /// nothing of 536 (every official IoTDB client) then see their write succeed while this
    /// DataNode is cut off from the ConfigNode.
    WhenFenced,
    /// A relayed write: it is written here or refused, never relayed on.
    Never,
}

/// The coordinator's settings (from `DataNodeConfig` and the cluster parameters).
#[derive(Clone, Debug)]
pub(crate) struct CoordinatorLimits {
    /// `tablet_rows_max`.
    pub tablet_rows_max: usize,
    /// `dn_tablet_time_partitions_max`.
    pub tablet_time_partitions_max: usize,
    pub tablet_limits: TabletLimits,
    pub partition: PartitionConfig,
    /// `remote_write_max_retry_ms`: how long one region's part of a write is retried.
    pub remote_write_retry: Duration,
    /// `dn_write_timeout_ms`: a relayed write's bound per peer.
    pub write_timeout: Duration,
    /// `dn_rpc_timeout_ms`: a relayed lookup's bound per peer.
    pub rpc_timeout: Duration,
    /// `query_points_max`.
    pub query_points_max: u32,
}

impl CoordinatorLimits {
    /// The distinct time slots of `tablet`'s rows, or 700 naming `dn_tablet_time_partitions_max`
    /// as soon as there are more: each new time partition costs a ConfigNode partition entry
    /// and a memtable and sealed file on every replica (REVIEW H5), so the count stops at the
    /// cap, whatever the number of rows.
    pub(crate) fn time_slots(&self, tablet: &Tablet) -> Outcome<BTreeSet<i64>> {
        let max = self.tablet_time_partitions_max;
        self.partition
            .time_slots_at_most(&tablet.timestamps, max)
            .ok_or_else(|| {
                CoordinatorError::Invalid(format!(
                    "the tablet of {} spans more than {max} time partitions of {} ms; \
                     dn_tablet_time_partitions_max is {max}",
                    tablet.device, self.partition.time_partition_interval_ms
                ))
            })
    }

    /// 700 for a write request whose tablets together span more than
    /// [`FETCH_PARTITIONS_SLOTS_MAX`] distinct (series slot, time slot) partitions, answered
    /// before any of them is written: a request never needs more partitions than one
    /// FetchPartitions may ask, however many tablets it carries.
    pub(crate) fn check_request_partitions(&self, tablets: &[Tablet]) -> Outcome<()> {
        let max = FETCH_PARTITIONS_SLOTS_MAX;
        // At most one partition per row: most requests are settled without reading a row.
        if tablets.iter().map(Tablet::row_count).sum::<usize>() <= max {
            return Ok(());
        }
        let over = || {
            CoordinatorError::Invalid(format!(
                "the request's tablets span more than {max} time partitions (distinct series \
                 slot and time slot pairs); at most {max} per request: send fewer tablets at once"
            ))
        };
        let mut seen = BTreeSet::new();
        for tablet in tablets {
            let series_slot = self.partition.series_slot(&tablet.device);
            let slots = self
                .partition
                .time_slots_at_most(&tablet.timestamps, max)
                .ok_or_else(over)?;
            for slot in slots {
                if seen.insert((series_slot, slot)) && seen.len() > max {
                    return Err(over());
                }
            }
        }
        Ok(())
    }
}

/// What a relay carries: a write (whose outcome is unknown once a peer timed out) or a lookup
/// (safe to ask the next peer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RelayCall {
    Write,
    Lookup,
}

/// The parts of a DataNode the coordinator works with (built as a struct literal by the node
/// and by the tests).
pub(crate) struct Coordinator {
    pub node_id: u64,
    /// This node's internal address: a target equal to it is served locally.
    pub internal_address: String,
    pub limits: CoordinatorLimits,
    pub metadata: Arc<MetadataView>,
    pub source: Arc<dyn MetadataSource>,
    pub local: Arc<dyn LocalReplicas>,
    pub peers: Arc<Peers>,
    pub metrics: Arc<Metrics>,
}

type Resolved = (BTreeMap<i64, u64>, BTreeMap<u64, RegionRoute>);

/// The table a table write derived its device tablets from: `table` of the tree database
/// `database`, as the incarnation created at metadata version `created_version`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TableOrigin<'a> {
    pub database: &'a str,
    pub table: &'a str,
    pub created_version: u64,
}

/// What a region command carries to be judged against the region's deletions (design §4), and
/// on a forward to the leader: the metadata version the command was validated or resolved
/// against, the table version of a table write's rows (0 otherwise), the operation id of a
/// `deleteData` (0 otherwise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tokens {
    pub metadata_version: u64,
    pub table_version: u64,
    pub operation_id: u64,
}

/// A tablet validated and resolved ([`Coordinator::plan_write`]), ready to be written.
#[derive(Debug)]
struct WritePlan {
    /// When its write started (for the latency metric).
    started: Instant,
    /// Time slot → region.
    regions: BTreeMap<i64, u64>,
    /// The routes of those regions that the lookup learned.
    routes: BTreeMap<u64, RegionRoute>,
    /// The region of the newest rows.
    newest_region: Option<u64>,
    tokens: Tokens,
}

impl Default for WritePlan {
    fn default() -> WritePlan {
        WritePlan {
            started: Instant::now(),
            regions: BTreeMap::new(),
            routes: BTreeMap::new(),
            newest_region: None,
            tokens: Tokens::default(),
        }
    }
}

impl Coordinator {
    fn fenced(&self, write: bool) -> CoordinatorError {
        inc(if write {
            &self.metrics.fencing.fenced_writes
        } else {
            &self.metrics.fencing.fenced_reads
        });
        CoordinatorError::Fenced {
            node: self.node_id,
            lease: self.metadata.lease().state().name(),
            write,
            detail: if write {
                "; retry on another DataNode".into()
            } else {
                String::new()
            },
        }
    }

    fn fenced_write(&self) -> CoordinatorError {
        self.fenced(true)
    }

    fn fenced_read(&self) -> CoordinatorError {
        self.fenced(false)
    }

    pub(crate) fn write_gate(&self) -> bool {
        self.metadata
            .lease()
            .check(LeaseFencedRetryPolicy::RetryUntilSuccess)
            .is_ok()
    }

    fn read_gate(&self) -> bool {
        self.metadata
            .lease()
            .check(LeaseFencedRetryPolicy::None)
            .is_ok()
    }

    /// Writes one tablet through the cluster.
    pub(crate) async fn insert_tablet(
        self: &Arc<Self>,
        mut tablet: Tablet,
        relay: Relay,
    ) -> Outcome<Written> {
        if !self.write_gate() {
            return match relay {
                Relay::WhenFenced => self.relay_tablet(&tablet).await,
                Relay::Never => Err(self.fenced_write()),
            };
        }
        // Held until the tablet's answer is decided: an invalidation is acknowledged only after
        // every tablet validated against the entries it removed has been answered.
        let pinned = self.metadata.pin();
        let plan = match self.plan_write(&pinned, &mut tablet, None).await {
            Ok(plan) => plan,
            Err(e) if relay == Relay::WhenFenced && e.confignode_unreachable() => {
                drop(pinned);
                return self.relay_tablet(&tablet).await;
            }
            Err(e) => return Err(e),
        };
        self.write_planned(&pinned, tablet, plan).await
    }

    /// Writes one device's tablet of a table write, under the pin the whole table write holds
    /// (so an invalidation waits for the table write, and one that moved the caches since the
    /// pin voids it). Its devices were derived from the table `origin` names: a FetchSchema says
    /// so (the ConfigNode creates nothing for another incarnation), and the region refuses it
    /// after a deletion of the table's prefix (the table version in the command). Never
    /// relayed on its own: a fenced table write is relayed whole, and re-derived by its peer.
    pub(crate) async fn insert_table_device(
        self: &Arc<Self>,
        pinned: &Pinned<'_>,
        mut tablet: Tablet,
        origin: &TableOrigin<'_>,
    ) -> Outcome<Written> {
        debug_assert!(
            common::path::is_under(&tablet.device, origin.database)
                && tablet.device[origin.database.len() + 1..].starts_with(origin.table),
            "device {} of table {}.{}",
            tablet.device,
            origin.database,
            origin.table
        );
        if !self.write_gate() {
            return Err(self.fenced_write());
        }
        if !self.metadata.is_current(pinned.generation()) {
            return Err(CoordinatorError::MetadataChanged);
        }
        let plan = self.plan_write(pinned, &mut tablet, Some(origin)).await?;
        self.write_planned(pinned, tablet, plan).await
    }

    /// Validates `tablet` against the metadata under `pinned` (creating its series and
    /// partitions when missing) and resolves where each of its rows goes. The tablet is renamed
    /// by its aliases here and left otherwise as it was: a caller may still relay it.
    async fn plan_write(
        &self,
        pinned: &Pinned<'_>,
        tablet: &mut Tablet,
        origin: Option<&TableOrigin<'_>>,
    ) -> Outcome<WritePlan> {
        let started = Instant::now();
        if tablet.row_count() > self.limits.tablet_rows_max {
            return Err(CoordinatorError::Invalid(format!(
                "tablet has {} rows; tablet_rows_max is {}",
                tablet.row_count(),
                self.limits.tablet_rows_max
            )));
        }
        // The device path is parsed here, once; the metadata is looked up by the parsed path.
        let device = tablet
            .validate(&self.limits.tablet_limits)
            .map_err(|e| CoordinatorError::Invalid(e.to_string()))?;
        // Counted before anything is asked of the ConfigNode, and bounded by the cap.
        let slots = self.limits.time_slots(tablet)?;
        if tablet.row_count() == 0 {
            return Ok(WritePlan {
                started,
                ..WritePlan::default()
            });
        }
        let schema = self.resolve_schema(pinned, &device, tablet, origin).await?;
        by_measurement_names(tablet, &schema.aliases)?;
        check_types(tablet, &schema.types)?;
        let (regions, routes) = self.resolve_partitions(pinned, &device, &slots).await?;
        debug_assert!(
            slots.iter().all(|slot| regions.contains_key(slot)),
            "every time slot of the tablet resolved to a region"
        );
        Ok(WritePlan {
            started,
            // The region of the newest rows: where the device's next writes most likely go.
            newest_region: slots.last().map(|slot| regions[slot]),
            regions,
            routes,
            tokens: Tokens {
                metadata_version: schema.version,
                table_version: origin.map_or(0, |o| o.created_version),
                operation_id: 0,
            },
        })
    }

    /// Writes a planned tablet: each region's part to its leader.
    async fn write_planned(
        self: &Arc<Self>,
        pinned: &Pinned<'_>,
        tablet: Tablet,
        plan: WritePlan,
    ) -> Outcome<Written> {
        if tablet.row_count() == 0 {
            return Ok(Written::default());
        }
        let split = split_by_region(tablet, &plan.regions, &self.limits.partition);
        let statuses = self
            .write_parts(split, &plan.routes, pinned.generation(), plan.tokens)
            .await;
        add(
            &self.metrics.writes.write_latency_us_sum,
            plan.started.elapsed().as_micros() as u64,
        );
        if !statuses.iter().all(written) {
            return Err(CoordinatorError::Parts(statuses));
        }
        let redirect = plan
            .newest_region
            .and_then(|r| self.redirect_hint(pinned, r));
        if redirect.is_some() {
            inc(&self.metrics.writes.write_redirects);
        }
        Ok(Written { redirect })
    }

    /// Dispatches each region's part at once; their statuses in region order. `tokens` are the
    /// fencing tokens: the versions of the metadata the tablet was validated against.
    async fn write_parts(
        self: &Arc<Self>,
        split: Vec<(u64, Tablet)>,
        routes: &BTreeMap<u64, RegionRoute>,
        generation: u64,
        tokens: Tokens,
    ) -> Vec<Status> {
        let mut parts = tokio::task::JoinSet::new();
        for (index, (region, part)) in split.into_iter().enumerate() {
            let route = routes.get(&region).cloned().unwrap_or_default();
            let coordinator = self.clone();
            parts.spawn(async move {
                let points = part.point_count() as u64;
                let command = RegionCommand::InsertTablet {
                    tablet: part,
                    metadata_version: tokens.metadata_version,
                    table_version: tokens.table_version,
                };
                let s = coordinator
                    .write_region(region, route, command, generation)
                    .await;
                if s.is_ok() {
                    add(&coordinator.metrics.writes.write_points, points);
                    inc(&coordinator.metrics.writes.write_requests);
                }
                (index, s)
            });
        }
        let dispatched = parts.len();
        let mut statuses = Vec::new();
        while let Some(joined) = parts.join_next().await {
            statuses.push(joined.unwrap_or_else(|e| {
                (
                    usize::MAX,
                    CoordinatorError::Internal(format!("region write task: {e}")).status(),
                )
            }));
        }
        statuses.sort_by_key(|(i, _)| *i);
        debug_assert_eq!(statuses.len(), dispatched, "every part answered once");
        statuses.into_iter().map(|(_, s)| s).collect()
    }

    /// Hands `tablet` to a DataNode that holds its lease (the ConfigNode's last word on who
    /// does, else any peer), which validates and writes it itself: nothing here is trusted, so a
    /// fenced coordinator may do this. 536 with `need_retry` when no peer takes it.
    async fn relay_tablet(&self, tablet: &Tablet) -> Outcome<Written> {
        let rpc = self.peers.rpc();
        let outcome = self
            .relay("took the write", RelayCall::Write, |address| async move {
                let s = rpc.relay_insert(&address, tablet).await;
                if written(&s) {
                    Ok(s)
                } else {
                    Err(s)
                }
            })
            .await?;
        inc(&self.metrics.fencing.relayed_writes);
        Ok(Written {
            redirect: outcome.redirect,
        })
    }

    /// Hands a table-model tablet (`tablet.device` names the table of the table database
    /// `database`) to a DataNode that holds its lease, which creates the table's missing columns
    /// and writes the rows itself, as [`Coordinator::relay_tablet`] does a tree tablet. 536
    /// with `need_retry` when no peer takes it.
    pub(crate) async fn relay_table_insert(
        &self,
        database: &str,
        tablet: &Tablet,
        categories: &[common::table::Category],
    ) -> Outcome<()> {
        let rpc = self.peers.rpc();
        self.relay("took the write", RelayCall::Write, |address| async move {
            let s = rpc
                .relay_table_insert(&address, database, tablet, categories)
                .await;
            if s.is_ok() {
                Ok(())
            } else {
                Err(s)
            }
        })
        .await?;
        inc(&self.metrics.fencing.relayed_writes);
        Ok(())
    }
    /// Asks the peers [`Coordinator::relay_peers`] names in turn, all within one deadline
    /// (`dn_write_timeout_ms` for a write, `dn_rpc_timeout_ms` for a lookup; REVIEW N11): `call`
    /// gives a peer's answer (`Ok`, taken at once) or its refusal. A final refusal is the
    /// outcome; a retryable one moves on to the next peer. A write a peer did not answer in time
    /// may have landed there: it is not sent to another peer, and the answer is 712 with
    /// `need_retry` (outcome unknown; writes are upserts, so a retry is safe), never 536. When no
    /// peer takes it: 536 with `need_retry`, saying the last refusal ("no peer `what` either").
    async fn relay<T, F, Fut>(&self, what: &str, kind: RelayCall, mut call: F) -> Outcome<T>
    where
        F: FnMut(String) -> Fut,
        Fut: std::future::Future<Output = Result<T, Status>>,
    {
        let budget = match kind {
            RelayCall::Write => self.limits.write_timeout,
            RelayCall::Lookup => self.limits.rpc_timeout,
        };
        let deadline = Instant::now() + budget;
        let mut last: Option<Status> = None;
        for (node, address) in self.relay_peers() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let s = match tokio::time::timeout(left, call(address.clone())).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(refused)) => refused,
                Err(_) if kind == RelayCall::Write => {
                    inc(&self.metrics.fencing.relay_timeouts);
                    let s = Status::new(
                        StatusCode::InternalRequestTimeOut,
                        format!(
                            "DataNode {} is fenced and relayed the request to {address}, which \
                             did not answer within {} ms: it may have been applied; retry",
                            self.node_id,
                            budget.as_millis()
                        ),
                    );
                    return Err(CoordinatorError::Remote(s.retry()));
                }
                Err(_) => Status::new(
                    StatusCode::InternalRequestTimeOut,
                    format!("{address}: no answer within {} ms", budget.as_millis()),
                ),
            };
            if !s.is_retryable() && !s.need_retry {
                return Err(CoordinatorError::Remote(s));
            }
            tracing::debug!(node, "relay refused: {} {}", s.code, s.message);
            last = Some(s);
        }
        let mut fenced = self.fenced_write();
        if let (CoordinatorError::Fenced { detail, .. }, Some(last)) = (&mut fenced, last) {
            detail.push_str(&format!("; no peer {what} either (last: {})", last.message));
        }
        Err(fenced)
    }

    /// Where a fenced coordinator relays: the DataNodes the ConfigNode last named as lease
    /// holders, then every other one known (the holder list may be as stale as the lease), never
    /// itself; each with its internal address.
    fn relay_peers(&self) -> Vec<(u64, String)> {
        let mut candidates = self.metadata.lease_holders();
        for node in self.peers.others() {
            if !candidates.contains(&node) {
                candidates.push(node);
            }
        }
        candidates
            .into_iter()
            .filter(|n| *n != self.node_id)
            .filter_map(|n| Some((n, self.peers.address(n)?)))
            .collect()
    }

    /// The types of `measurements` of `device` that exist in the tree model (none of a
    /// table-model database's device), in the request's order, for a client that types its
    /// literals (the CLI's INSERT): from the schema cache when it holds every
    /// name, else from the ConfigNode (without creating anything). A fenced node, or one whose
    /// ConfigNode does not answer within its deadline, relays the lookup when `relay` allows, so
    /// the lookup never waits on a ConfigNode round trip this node cannot make; unrelayed it
    /// answers 536 (the lookup belongs to a write) with `need_retry`.
    pub(crate) async fn series_types(
        &self,
        device: &str,
        measurements: &[String],
        relay: Relay,
    ) -> Outcome<Vec<(String, DataType)>> {
        let max = self.limits.tablet_limits.measurements_max;
        if measurements.len() > max {
            return Err(CoordinatorError::Invalid(format!(
                "{} measurements named; at most {max} per lookup",
                measurements.len(),
            )));
        }
        let device = &DevicePath::parse(device, self.limits.tablet_limits.path_bytes_max)
            .map_err(|e| CoordinatorError::Invalid(e.to_string()))?;
        // A name that is an alias has its series' type; a table's device has no tree series.
        let pick = |schema: &DeviceSchema| -> Vec<(String, DataType)> {
            if schema.table_model {
                return Vec::new();
            }
            measurements
                .iter()
                .filter_map(|m| Some((m.clone(), *schema.types.get(schema.series_name(m))?)))
                .collect()
        };
        let pinned = self.metadata.pin();
        match pinned.schema(device) {
            Err(_) => {
                drop(pinned);
                return match relay {
                    Relay::WhenFenced => {
                        self.relay_series_types(device.as_str(), measurements).await
                    }
                    Relay::Never => Err(self.fenced_write()),
                };
            }
            Ok(Some(schema)) if measurements.iter().all(|m| schema.knows(m)) => {
                return Ok(pick(&schema));
            }
            Ok(_) => {}
        }
        inc(&self.metrics.confignode.schema_fetches);
        let fetch = SchemaFetch {
            devices: vec![DeviceFetch {
                device: device.to_string(),
                measurements: measurements.iter().map(|m| (m.clone(), None)).collect(),
            }],
            auto_create: false,
            table: None,
        };
        match self.fetch_schema(&fetch).await {
            Ok(devices) => Ok(devices
                .into_iter()
                .find(|(d, _)| d == device.as_str())
                .map(|(_, schema)| pick(&schema))
                .unwrap_or_default()),
            Err(e) if relay == Relay::WhenFenced && e.confignode_unreachable() => {
                drop(pinned);
                self.relay_series_types(device.as_str(), measurements).await
            }
            Err(e) => Err(e),
        }
    }

    /// [`Coordinator::series_types`] asked of the peers [`Coordinator::relay_peers`] names,
    /// first answer wins.
    async fn relay_series_types(
        &self,
        device: &str,
        measurements: &[String],
    ) -> Outcome<Vec<(String, DataType)>> {
        let rpc = self.peers.rpc();
        let outcome = self
            .relay("answered the lookup", RelayCall::Lookup, |address| async move {
                rpc.relay_series_types(&address, device, measurements).await
            })
            .await?;
        inc(&self.metrics.fencing.relayed_lookups);
        Ok(outcome)
    }

    /// IoTDB's REDIRECTION_RECOMMEND hint: the session address of `region`'s leader when another
    /// DataNode leads it, so the session sends the device's next writes there and saves a
    /// forward. `None` when this node leads it or the leader or its session address is unknown.
    fn redirect_hint(&self, pinned: &Pinned<'_>, region: u64) -> Option<String> {
        if self.local.leads(region) {
            return None;
        }
        // A replica here knows the current leader best; else the route's hint.
        let leader = match self.local.leader(region) {
            Some(leader) => leader,
            None => pinned.region(region).ok()??.leader,
        };
        if leader == 0 || leader == self.node_id {
            return None;
        }
        let node = pinned.node(leader).ok()??;
        // Only an address a client can dial.
        proto::parse_endpoint(&node.rpc).ok().map(|_| node.rpc)
    }

    /// One region's part of a write (its command carries its tokens), retried within
    /// `remote_write_max_retry_ms`.
    async fn write_region(
        self: &Arc<Self>,
        region: u64,
        route: RegionRoute,
        command: RegionCommand,
        generation: u64,
    ) -> Status {
        let deadline = Instant::now() + self.limits.remote_write_retry;
        let mut targets = Targets::new(self, region, &route);
        let mut attempt = 0u32;
        loop {
            // The part was validated against cached metadata of `generation`; if an
            // invalidation or a recovery moved the caches on, the validation is void.
            if !self.metadata.is_current(generation) {
                return CoordinatorError::MetadataChanged.status();
            }
            if !self.write_gate() {
                return self.fenced_write().status();
            }
            let last = match targets.next() {
                None => Status::new(
                    StatusCode::CanNotConnectDatanode,
                    format!("no known replica of region {region}"),
                ),
                Some(address) => self.deliver(region, address, &command).await,
            };
            if last.is_ok() || !last.is_retryable() {
                return last;
            }
            targets.redirected(&last);
            let pause = backoff(attempt).min(deadline.saturating_duration_since(Instant::now()));
            if pause.is_zero() {
                tracing::debug!(
                    region,
                    "region write gives up: {} {}",
                    last.code,
                    last.message
                );
                let mut last = last;
                last.need_retry = true;
                return last;
            }
            inc(&self.metrics.writes.coordinator_retries);
            attempt += 1;
            tracing::debug!(
                region,
                attempt,
                "retrying region write after {} {}",
                last.code,
                last.message
            );
            self.sleep_unless_invalidated(pause, generation).await;
        }
    }

    /// Sleeps `pause`, waking early when the cache generation moves: an invalidation waits for
    /// this write to finish, so it must not sit out a long backoff first.
    async fn sleep_unless_invalidated(&self, pause: Duration, generation: u64) {
        let until = Instant::now() + pause;
        while self.metadata.is_current(generation) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left.min(INVALIDATION_POLL)).await;
        }
    }
}

/// Renames each of `tablet`'s measurements that is an alias to the series it names (IoTDB
/// writes by an alias to its series). 700 when that makes a name appear twice (a series written
/// both by its name and by its alias in one tablet).
fn by_measurement_names(tablet: &mut Tablet, aliases: &BTreeMap<String, String>) -> Outcome<()> {
    if aliases.is_empty() || !tablet.measurements.iter().any(|m| aliases.contains_key(m)) {
        return Ok(());
    }
    for m in &mut tablet.measurements {
        if let Some(series) = aliases.get(m) {
            *m = series.clone();
        }
    }
    let mut seen = BTreeSet::new();
    if let Some(twice) = tablet.measurements.iter().find(|m| !seen.insert(*m)) {
        return Err(CoordinatorError::Invalid(format!(
            "{}.{twice} is written twice in one tablet, by its name and by its alias",
            tablet.device
        )));
    }
    Ok(())
}

/// Every measurement of `tablet` has the type the schema gives it: 614 for another type, 507
/// for a series the schema does not have (it was not auto-created).
fn check_types(tablet: &Tablet, types: &BTreeMap<String, DataType>) -> Outcome<()> {
    for (m, t) in tablet.measurements.iter().zip(&tablet.data_types) {
        match types.get(m) {
            Some(existing) if existing == t => {}
            Some(existing) => {
                return Err(CoordinatorError::TypeMismatch(format!(
                    "{}.{m} is {existing}, the write is {t}",
                    tablet.device
                )))
            }
            None => {
                return Err(CoordinatorError::Metadata(format!(
                    "{}.{m} does not exist and was not created",
                    tablet.device
                )))
            }
        }
    }
    Ok(())
}

/// The tablet's rows grouped by the region their time slot maps to (`regions`: time slot →
/// region, covering every row's slot), in region order. One region takes the whole tablet in the
/// common case: decided from the region map alone, it is handed on without a copy or a pass over
/// the rows.
fn split_by_region(
    tablet: Tablet,
    regions: &BTreeMap<i64, u64>,
    partition: &PartitionConfig,
) -> Vec<(u64, Tablet)> {
    let distinct: BTreeSet<u64> = regions.values().copied().collect();
    if distinct.len() == 1 {
        let region = *distinct.first().expect("one region");
        return vec![(region, tablet)];
    }
    let region_of = |t: &i64| regions[&partition.time_slot(*t)];
    let mut rows_by_region: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (row, t) in tablet.timestamps.iter().enumerate() {
        rows_by_region.entry(region_of(t)).or_default().push(row);
    }
    let split: Vec<(u64, Tablet)> = rows_by_region
        .iter()
        .map(|(region, rows)| (*region, tablet.select_rows(rows)))
        .collect();
    debug_assert_eq!(
        split.iter().map(|(_, t)| t.row_count()).sum::<usize>(),
        tablet.row_count(),
        "every row goes to exactly one region"
    );
    split
}

/// Where to send the next attempt of a region operation: the leader as this node's raft group
/// sees it, else the route's hint, else the replicas in turn.
struct Targets<'a> {
    coordinator: &'a Coordinator,
    region: u64,
    replicas: Vec<u64>,
    next_replica: usize,
    last_tried: Option<u64>,
    redirect: Option<String>,
}

impl<'a> Targets<'a> {
    fn new(coordinator: &'a Coordinator, region: u64, route: &RegionRoute) -> Self {
        let mut replicas = route.replicas.clone();
        // The hinted leader first, then the others.
        if route.leader != 0 {
            let h = route.leader;
            replicas.retain(|r| *r != h);
            replicas.insert(0, h);
        }
        debug_assert!(route.leader == 0 || replicas.first() == Some(&route.leader));
        if replicas.is_empty() && coordinator.local.hosts(region) {
            replicas.push(coordinator.node_id);
        }
        Targets {
            coordinator,
            region,
            replicas,
            next_replica: 0,
            last_tried: None,
            redirect: None,
        }
    }

    /// The next address to try.
    fn next(&mut self) -> Option<String> {
        if let Some(address) = self.redirect.take() {
            return Some(address);
        }
        // A replica on this node knows the current leader best (it may have just changed).
        if let Some(leader) = self.coordinator.local.leader(self.region) {
            if self.last_tried != Some(leader) {
                self.last_tried = Some(leader);
                return self.coordinator.peers.address(leader);
            }
        }
        if self.replicas.is_empty() {
            return None;
        }
        let node = self.replicas[self.next_replica % self.replicas.len()];
        self.next_replica += 1;
        self.last_tried = Some(node);
        self.coordinator.peers.address(node)
    }

    fn redirected(&mut self, status: &Status) {
        self.redirect = status.redirect.clone();
    }
}

pub(crate) mod aggregate_read;
mod delete;
mod deliver;
pub(crate) mod read;
mod resolve;
#[cfg(test)]
mod tests;
