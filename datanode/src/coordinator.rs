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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{DataType, LeaseFencedRetryPolicy, PartitionConfig, StatusCode, Tablet, Value};
use proto::data_node_internal_service_client::DataNodeInternalServiceClient;

use crate::cache::{DeviceSchema, NodeAddresses, RegionRoute};
use crate::convert::{ok, status, tablet_to_wire, value_from_wire};
use crate::metrics::{add, inc};
use crate::node::{check_status, Shared};
use engine::{LeaseGate, RegionCommand};

type Outcome<T> = Result<T, proto::Status>;

use crate::timing::{INVALIDATION_POLL, READ_RETRY, WRITE_BACKOFF_MAX, WRITE_BACKOFF_MIN};

fn fenced_write(shared: &Shared) -> proto::Status {
    inc(&shared.metrics.fenced_writes);
    let mut s = status(
        StatusCode::MetadataLeaseFencedRetryRequired,
        format!(
            "DataNode {} is fenced (metadata lease {}); retry on another DataNode",
            shared.node_id,
            shared.lease.state().name()
        ),
    );
    s.need_retry = true;
    s
}

fn fenced_read(shared: &Shared) -> proto::Status {
    inc(&shared.metrics.fenced_reads);
    status(
        StatusCode::MetadataLeaseFenced,
        format!(
            "DataNode {} is fenced (metadata lease {})",
            shared.node_id,
            shared.lease.state().name()
        ),
    )
}

fn backoff(attempt: u32) -> Duration {
    WRITE_BACKOFF_MIN
        .saturating_mul(1u32 << attempt.min(16))
        .min(WRITE_BACKOFF_MAX)
}

/// True for 200 and for 400 REDIRECTION_RECOMMEND (written, with a hint for next time).
fn written(s: &proto::Status) -> bool {
    s.is(StatusCode::Success) || s.is(StatusCode::RedirectionRecommend)
}

/// Combines the statuses of the parts of one request.
///
/// A 400 REDIRECTION_RECOMMEND counts as success. It survives only as the answer of a single part:
/// a hint is about one device, and a request of several parts has no one device to redirect.
pub(crate) fn aggregate(statuses: Vec<proto::Status>) -> proto::Status {
    if statuses.len() == 1 {
        return statuses.into_iter().next().expect("one status");
    }
    if statuses.iter().all(written) {
        return ok();
    }
    let need_retry = statuses.iter().any(|s| !written(s) && s.need_retry);
    let failed = statuses.iter().filter(|s| !written(s)).count();
    let mut s = status(
        StatusCode::MultipleError,
        format!("{failed} of {} parts failed", statuses.len()),
    );
    s.need_retry = need_retry;
    s.sub_status = statuses;
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

/// Writes one tablet through the cluster.
pub(crate) async fn insert_tablet(
    shared: &Arc<Shared>,
    tablet: Tablet,
    relay: Relay,
) -> proto::Status {
    let started = Instant::now();
    if shared
        .lease
        .check(LeaseFencedRetryPolicy::RetryUntilSuccess)
        .is_err()
    {
        return match relay {
            Relay::WhenFenced => relay_tablet(shared, &tablet).await,
            Relay::Never => fenced_write(shared),
        };
    }
    if tablet.row_count() > shared.config.tablet_rows_max as usize {
        return status(
            StatusCode::IllegalParameter,
            format!(
                "tablet has {} rows; tablet_rows_max is {}",
                tablet.row_count(),
                shared.config.tablet_rows_max
            ),
        );
    }
    if let Err(e) = tablet.validate(&shared.storage_config.tablet_limits) {
        return status(StatusCode::IllegalParameter, e.to_string());
    }
    if tablet.row_count() == 0 {
        return ok();
    }
    // Counted until the tablet's answer is decided: an invalidation is acknowledged only after
    // every tablet validated against the entries it removed has been answered.
    let in_flight = shared.in_flight.enter(&shared.cache);
    let generation = in_flight.generation();
    let schema = match resolve_schema(shared, &tablet, generation).await {
        Ok(schema) => schema,
        Err(s) if relay == Relay::WhenFenced && confignode_unreachable(&s) => {
            drop(in_flight);
            return relay_tablet(shared, &tablet).await;
        }
        Err(s) => return s,
    };
    if let Err(s) = check_types(&tablet, &schema.types) {
        return s;
    }
    let slots: BTreeSet<i64> = tablet
        .timestamps
        .iter()
        .map(|t| shared.partition.time_slot(*t))
        .collect();
    let (regions, routes) =
        match resolve_partitions(shared, &tablet.device, &slots, generation).await {
            Ok(resolved) => resolved,
            Err(s) if relay == Relay::WhenFenced && confignode_unreachable(&s) => {
                drop(in_flight);
                return relay_tablet(shared, &tablet).await;
            }
            Err(s) => return s,
        };
    // The region of the newest rows: where the device's next writes most likely go.
    let newest_region = slots.last().map(|slot| regions[slot]);
    let split = split_by_region(tablet, &regions, &shared.partition);
    // The fencing token: the version of the metadata the tablet was validated against.
    let schema_version = schema.version;
    let mut parts = tokio::task::JoinSet::new();
    for (index, (region, part)) in split.into_iter().enumerate() {
        let route = routes.get(&region).cloned().unwrap_or_default();
        let shared = shared.clone();
        parts.spawn(async move {
            let points = part.point_count() as u64;
            let s = write_region(&shared, region, route, part, generation, schema_version).await;
            if s.is_success() {
                add(&shared.metrics.write_points, points);
                inc(&shared.metrics.write_requests);
            }
            (index, s)
        });
    }
    let mut statuses = Vec::new();
    while let Some(joined) = parts.join_next().await {
        match joined {
            Ok(part) => statuses.push(part),
            Err(e) => statuses.push((
                usize::MAX,
                status(
                    StatusCode::InternalServerError,
                    format!("region write task: {e}"),
                ),
            )),
        }
    }
    statuses.sort_by_key(|(i, _)| *i);
    add(
        &shared.metrics.write_latency_us_sum,
        started.elapsed().as_micros() as u64,
    );
    let outcome = aggregate(statuses.into_iter().map(|(_, s)| s).collect());
    match newest_region.and_then(|r| redirect_hint(shared, r)) {
        Some(leader) if outcome.is(StatusCode::Success) => {
            inc(&shared.metrics.write_redirects);
            proto::status_with_redirect(
                StatusCode::RedirectionRecommend,
                "written; the leader of the device's newest region is elsewhere",
                Some(leader),
            )
        }
        _ => outcome,
    }
}

/// Every measurement of `tablet` has the type the schema gives it: 614 for another type, 507
/// for a series the schema does not have (it was not auto-created).
fn check_types(
    tablet: &Tablet,
    types: &BTreeMap<String, DataType>,
) -> std::result::Result<(), proto::Status> {
    for (m, t) in tablet.measurements.iter().zip(&tablet.data_types) {
        match types.get(m) {
            Some(existing) if existing == t => {}
            Some(existing) => {
                return Err(status(
                    StatusCode::DataTypeMismatch,
                    format!("{}.{m} is {existing}, the write is {t}", tablet.device),
                ))
            }
            None => {
                return Err(status(
                    StatusCode::MetadataError,
                    format!("{}.{m} does not exist and was not created", tablet.device),
                ))
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

/// A ConfigNode request ran out of its deadline (`Shared::call_confignode`).
fn confignode_unreachable(s: &proto::Status) -> bool {
    s.is(StatusCode::InternalRequestTimeOut) && s.need_retry
}

/// Hands `tablet` to a DataNode that holds its lease (the ConfigNode's last word on who does,
/// else any peer), which validates and writes it itself: nothing here is trusted, so a fenced
/// coordinator may do this. 536 with `need_retry` when no peer takes it.
async fn relay_tablet(shared: &Arc<Shared>, tablet: &Tablet) -> proto::Status {
    let wire = tablet_to_wire(tablet);
    let timeout = Duration::from_millis(shared.config.dn_write_timeout_ms);
    let outcome = relay(shared, "took the write", timeout, |mut peer| {
        let request = proto::RelayInsertReq {
            tablets: vec![wire.clone()],
            from_data_node_id: shared.node_id,
        };
        async move {
            let s = peer.relay_insert(request).await?.into_inner();
            Ok(if written(&s) { Ok(s) } else { Err(s) })
        }
    })
    .await;
    if outcome.is_ok() {
        inc(&shared.metrics.relayed_writes);
    }
    outcome.unwrap_or_else(|s| s)
}

/// Asks the peers [`relay_peers`] names in turn, each within `timeout`: `call` gives a peer's
/// answer (`Ok`, taken at once) or its refusal. A final refusal is the outcome; a retryable one
/// moves on to the next peer. When no peer takes it: 536 with `need_retry`, saying the last
/// refusal ("no peer `what` either").
async fn relay<T, F, Fut>(shared: &Shared, what: &str, timeout: Duration, mut call: F) -> Outcome<T>
where
    F: FnMut(DataNodeInternalServiceClient<runtime::PooledChannel>) -> Fut,
    Fut: std::future::Future<Output = Result<Outcome<T>, tonic::Status>>,
{
    let mut last = None;
    for (node, address) in relay_peers(shared) {
        let s = match tokio::time::timeout(timeout, call(shared.peer(&address))).await {
            Ok(Ok(Ok(answer))) => return Ok(answer),
            Ok(Ok(Err(refused))) => refused,
            Ok(Err(e)) => status(
                StatusCode::CanNotConnectDatanode,
                format!("{address}: {}", e.message()),
            ),
            Err(_) => status(
                StatusCode::InternalRequestTimeOut,
                format!("{address}: no answer within {} ms", timeout.as_millis()),
            ),
        };
        if !s.is_retryable() && !s.need_retry {
            return Err(s);
        }
        tracing::debug!(node, "relay refused: {} {}", s.code, s.message);
        last = Some(s);
    }
    let mut s = fenced_write(shared);
    if let Some(last) = last {
        s.message = format!(
            "{}; no peer {what} either (last: {})",
            s.message, last.message
        );
    }
    Err(s)
}

/// Where a fenced coordinator relays: the DataNodes the ConfigNode last named as lease holders,
/// then every other one known (the holder list may be as stale as the lease), never itself; each
/// with its internal address.
fn relay_peers(shared: &Shared) -> Vec<(u64, String)> {
    let mut candidates: Vec<u64> = shared.lease_holders.lock().clone();
    let known: Vec<u64> = shared.addresses.read().keys().copied().collect();
    for node in known {
        if !candidates.contains(&node) {
            candidates.push(node);
        }
    }
    candidates
        .into_iter()
        .filter(|n| *n != shared.node_id)
        .filter_map(|n| Some((n, shared.node_address(n)?)))
        .collect()
}

/// The types of `measurements` of `device` that exist, in the request's order, for a client that
/// types its literals (the CLI's INSERT): from the schema cache when it holds every name, else
/// from the ConfigNode (without creating anything). A fenced node, or one whose ConfigNode does
/// not answer within its deadline, relays the lookup when `relay` allows, so the lookup never
/// waits on a ConfigNode round trip this node cannot make; unrelayed it answers 536 (the lookup
/// belongs to a write) with `need_retry`.
pub(crate) async fn series_types(
    shared: &Arc<Shared>,
    device: &str,
    measurements: &[String],
    relay: Relay,
) -> Outcome<Vec<(String, DataType)>> {
    if measurements.len() > shared.storage_config.tablet_limits.measurements_max {
        return Err(status(
            StatusCode::IllegalParameter,
            format!(
                "{} measurements named; at most {} per lookup",
                measurements.len(),
                shared.storage_config.tablet_limits.measurements_max
            ),
        ));
    }
    let pick = |types: &BTreeMap<String, DataType>| -> Vec<(String, DataType)> {
        measurements
            .iter()
            .filter_map(|m| Some((m.clone(), *types.get(m)?)))
            .collect()
    };
    match shared.cache.schema(device) {
        Err(_) => {
            return match relay {
                Relay::WhenFenced => relay_series_types(shared, device, measurements).await,
                Relay::Never => Err(fenced_write(shared)),
            }
        }
        Ok(Some(schema)) if measurements.iter().all(|m| schema.types.contains_key(m)) => {
            return Ok(pick(&schema.types));
        }
        Ok(_) => {}
    }
    inc(&shared.metrics.schema_fetches);
    let request = proto::FetchSchemaReq {
        devices: vec![proto::DeviceSchemaRequest {
            device: device.to_string(),
            measurements: measurements
                .iter()
                .map(|m| proto::MeasurementSchema {
                    name: m.clone(),
                    data_type: 0,
                })
                .collect(),
        }],
        auto_create: false,
        caller: Some(shared.caller()),
    };
    match fetch_schema(shared, request).await {
        Ok(devices) => Ok(devices
            .into_iter()
            .find(|(d, _)| d == device)
            .map(|(_, schema)| pick(&schema.types))
            .unwrap_or_default()),
        Err(s) if relay == Relay::WhenFenced && confignode_unreachable(&s) => {
            relay_series_types(shared, device, measurements).await
        }
        Err(s) => Err(s),
    }
}

/// [`series_types`] asked of the peers [`relay_peers`] names, first answer wins.
async fn relay_series_types(
    shared: &Arc<Shared>,
    device: &str,
    measurements: &[String],
) -> Outcome<Vec<(String, DataType)>> {
    let timeout = Duration::from_millis(shared.config.dn_rpc_timeout_ms);
    let outcome = relay(shared, "answered the lookup", timeout, |mut peer| {
        let request = proto::SeriesTypesReq {
            session_id: 0,
            device: device.to_string(),
            measurements: measurements.to_vec(),
        };
        async move {
            let resp = peer.relay_series_types(request).await?.into_inner();
            Ok(match resp.status {
                Some(s) if !s.is_success() => Err(s),
                _ => series_from_wire(resp.series),
            })
        }
    })
    .await;
    if outcome.is_ok() {
        inc(&shared.metrics.relayed_lookups);
    }
    outcome
}

/// Series types off the wire; a type this build does not know is a metadata error.
pub(crate) fn series_from_wire(
    series: Vec<proto::MeasurementSchema>,
) -> Outcome<Vec<(String, DataType)>> {
    series
        .into_iter()
        .map(|m| {
            let t = proto::data_type(m.data_type)
                .map_err(|e| status(StatusCode::MetadataError, e.to_string()))?;
            Ok((m.name, t))
        })
        .collect()
}

/// IoTDB's REDIRECTION_RECOMMEND hint: the session address of `region`'s leader when another
/// DataNode leads it, so the session sends the device's next writes there and saves a forward.
/// `None` when this node leads it or the leader or its session address is unknown.
fn redirect_hint(shared: &Shared, region: u64) -> Option<proto::Endpoint> {
    if shared.leads(region) {
        return None;
    }
    // A replica here knows the current leader best; else the route's hint.
    let leader = match shared.driver.group_status(region).and_then(|s| s.leader) {
        Some(leader) => leader,
        None => shared.cache.region(region).ok()??.leader,
    };
    if leader == 0 || leader == shared.node_id {
        return None;
    }
    let node = shared.cache.node(leader).ok()??;
    proto::parse_endpoint(&node.rpc).ok()
}

async fn resolve_schema(
    shared: &Shared,
    tablet: &Tablet,
    generation: u64,
) -> Outcome<DeviceSchema> {
    let cached = shared
        .cache
        .schema(&tablet.device)
        .map_err(|_| fenced_write(shared))?;
    if let Some(schema) = cached {
        if tablet
            .measurements
            .iter()
            .all(|m| schema.types.contains_key(m))
        {
            return Ok(schema);
        }
    }
    inc(&shared.metrics.schema_fetches);
    let request = proto::FetchSchemaReq {
        devices: vec![proto::DeviceSchemaRequest {
            device: tablet.device.clone(),
            measurements: tablet
                .measurements
                .iter()
                .zip(&tablet.data_types)
                .map(|(m, t)| proto::MeasurementSchema {
                    name: m.clone(),
                    data_type: proto::data_type_to_wire(*t) as i32,
                })
                .collect(),
        }],
        auto_create: true,
        caller: Some(shared.caller()),
    };
    let schema = fetch_schema(shared, request).await?;
    let schema = schema
        .into_iter()
        .next()
        .map(|(_, s)| s)
        .unwrap_or_default();
    if schema.database.is_empty() {
        return Err(status(
            StatusCode::MetadataError,
            format!("no database for {}", tablet.device),
        ));
    }
    shared
        .cache
        .put_schema(generation, &tablet.device, schema.clone());
    Ok(schema)
}

async fn fetch_schema(
    shared: &Shared,
    request: proto::FetchSchemaReq,
) -> Outcome<Vec<(String, DeviceSchema)>> {
    let resp = shared
        .call_confignode(None, |mut c| {
            let request = request.clone();
            async move { c.fetch_schema(request).await }
        })
        .await?;
    check_status(resp.status.as_ref())
        .map_err(|e| status(StatusCode::MetadataError, format!("FetchSchema: {e}")))?;
    let mut out = Vec::new();
    for d in resp.devices {
        let mut types = BTreeMap::new();
        for m in d.measurements {
            let t = proto::data_type(m.data_type)
                .map_err(|e| status(StatusCode::MetadataError, e.to_string()))?;
            types.insert(m.name, t);
        }
        out.push((
            d.device,
            DeviceSchema {
                database: d.database,
                types,
                version: resp.metadata_version,
            },
        ));
    }
    Ok(out)
}

type Resolved = (BTreeMap<i64, u64>, BTreeMap<u64, RegionRoute>);

async fn resolve_partitions(
    shared: &Shared,
    device: &str,
    slots: &BTreeSet<i64>,
    generation: u64,
) -> Outcome<Resolved> {
    let fenced = |_| fenced_write(shared);
    let mut regions = BTreeMap::new();
    let mut missing = Vec::new();
    for slot in slots {
        match shared.cache.partition(device, *slot).map_err(fenced)? {
            Some(region) => {
                regions.insert(*slot, region);
            }
            None => missing.push(*slot),
        }
    }
    let mut routes = BTreeMap::new();
    if !missing.is_empty() {
        inc(&shared.metrics.partition_fetches);
        let request = proto::FetchPartitionsReq {
            requests: vec![proto::DeviceTimeSlots {
                device: device.to_string(),
                time_slots: missing.clone(),
            }],
            auto_create: true,
            caller: Some(shared.caller()),
        };
        let resp = shared
            .call_confignode(None, |mut c| {
                let request = request.clone();
                async move { c.fetch_partitions(request).await }
            })
            .await?;
        check_status(resp.status.as_ref())
            .map_err(|e| status(StatusCode::MetadataError, format!("FetchPartitions: {e}")))?;
        let series_slot = shared.partition.series_slot(device);
        let mut fetched = Vec::new();
        for p in &resp.partitions {
            if p.series_slot == series_slot && missing.contains(&p.time_slot) {
                regions.insert(p.time_slot, p.region_id);
                fetched.push(((device.to_string(), p.time_slot), p.region_id));
            }
        }
        let leaders: BTreeMap<u64, u64> = resp
            .leaders
            .iter()
            .map(|l| (l.region_id, l.leader_id))
            .collect();
        let fetched_routes: Vec<(u64, RegionRoute)> = resp
            .regions
            .iter()
            .map(|r| {
                (
                    r.region_id,
                    RegionRoute {
                        database: r.database.clone(),
                        replicas: r.data_node_ids.clone(),
                        leader: leaders.get(&r.region_id).copied().unwrap_or(0),
                    },
                )
            })
            .collect();
        let nodes: Vec<(u64, NodeAddresses)> = resp
            .data_nodes
            .iter()
            .map(|n| {
                (
                    n.data_node_id,
                    NodeAddresses {
                        internal: n
                            .internal_endpoint
                            .as_ref()
                            .map(proto::endpoint)
                            .unwrap_or_default(),
                        rpc: n
                            .rpc_endpoint
                            .as_ref()
                            .map(proto::endpoint)
                            .unwrap_or_default(),
                    },
                )
            })
            .collect();
        shared.learn_nodes(
            nodes
                .iter()
                .filter(|(_, a)| !a.internal.is_empty())
                .map(|(id, a)| (*id, a.internal.clone())),
        );
        routes.extend(fetched_routes.iter().cloned());
        shared
            .cache
            .put_partitions(generation, fetched, fetched_routes, nodes);
    }
    if let Some(slot) = slots.iter().find(|s| !regions.contains_key(s)) {
        return Err(status(
            StatusCode::MetadataError,
            format!("no region for {device} in time slot {slot}"),
        ));
    }
    for region in regions.values() {
        if routes.contains_key(region) {
            continue;
        }
        if let Some(route) = shared.cache.region(*region).map_err(fenced)? {
            routes.insert(*region, route);
        }
    }
    Ok((regions, routes))
}

/// Where to send the next attempt of a region operation: the leader as this node's raft group
/// sees it, else the route's hint, else the replicas in turn.
struct Targets<'a> {
    shared: &'a Shared,
    region: u64,
    replicas: Vec<u64>,
    next_replica: usize,
    last_tried: Option<u64>,
    redirect: Option<String>,
}

impl<'a> Targets<'a> {
    fn new(shared: &'a Shared, region: u64, route: &RegionRoute) -> Self {
        let mut replicas = route.replicas.clone();
        // The hinted leader first, then the others.
        if route.leader != 0 {
            let h = route.leader;
            replicas.retain(|r| *r != h);
            replicas.insert(0, h);
        }
        if replicas.is_empty() && shared.local_region(region).is_some() {
            replicas.push(shared.node_id);
        }
        Targets {
            shared,
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
        if let Some(leader) = self
            .shared
            .driver
            .group_status(self.region)
            .and_then(|s| s.leader)
        {
            if self.last_tried != Some(leader) {
                self.last_tried = Some(leader);
                return self.shared.node_address(leader);
            }
        }
        if self.replicas.is_empty() {
            return None;
        }
        let node = self.replicas[self.next_replica % self.replicas.len()];
        self.next_replica += 1;
        self.last_tried = Some(node);
        self.shared.node_address(node)
    }

    fn redirected(&mut self, status: &proto::Status) {
        self.redirect = status.redirect.as_ref().map(proto::endpoint);
    }
}

/// One region's part of a write, retried within `remote_write_max_retry_ms`.
async fn write_region(
    shared: &Arc<Shared>,
    region: u64,
    route: RegionRoute,
    part: Tablet,
    generation: u64,
    metadata_version: u64,
) -> proto::Status {
    let deadline = Instant::now() + Duration::from_millis(shared.config.remote_write_max_retry_ms);
    let wire = tablet_to_wire(&part);
    let command = RegionCommand::InsertTablet {
        tablet: part,
        metadata_version,
    };
    let mut targets = Targets::new(shared, region, &route);
    let mut attempt = 0u32;
    loop {
        // The part was validated against cached metadata of `generation`; if an invalidation or a
        // recovery moved the caches on, the validation is void.
        if shared.cache.generation() != generation {
            let mut s = status(
                StatusCode::MetadataLeaseFencedRetryRequired,
                "the metadata changed while the write was in flight; retry",
            );
            s.need_retry = true;
            return s;
        }
        if shared
            .lease
            .check(LeaseFencedRetryPolicy::RetryUntilSuccess)
            .is_err()
        {
            return fenced_write(shared);
        }
        let last = match targets.next() {
            None => status(
                StatusCode::CanNotConnectDatanode,
                format!("no known replica of region {region}"),
            ),
            Some(address) if address == shared.internal_address => {
                if shared.local_region(region).is_some() {
                    shared.propose_local(region, &command).await.0
                } else {
                    status(StatusCode::RegionLeaderChangeError, "no local replica")
                }
            }
            Some(address) => {
                inc(&shared.metrics.forwarded_writes);
                let request = proto::RegionWriteReq {
                    region_id: region,
                    command: Some(proto::region_write_req::Command::InsertTablet(wire.clone())),
                    operation_id: 0,
                    metadata_version,
                };
                match shared.peer(&address).forward_region_write(request).await {
                    Ok(resp) => resp.into_inner().status.unwrap_or_else(|| {
                        status(StatusCode::InternalServerError, "reply without status")
                    }),
                    Err(e) => status(
                        StatusCode::CanNotConnectDatanode,
                        format!("{address}: {}", e.message()),
                    ),
                }
            }
        };
        if last.is_success() || !last.is_retryable() {
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
        inc(&shared.metrics.coordinator_retries);
        attempt += 1;
        tracing::debug!(
            region,
            attempt,
            "retrying region write after {} {}",
            last.code,
            last.message
        );
        sleep_unless_invalidated(shared, pause, generation).await;
    }
}

/// Sleeps `pause`, waking early when the cache generation moves: an invalidation waits for this
/// write to finish, so it must not sit out a long backoff first.
async fn sleep_unless_invalidated(shared: &Shared, pause: Duration, generation: u64) {
    let until = Instant::now() + pause;
    while shared.cache.generation() == generation {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        tokio::time::sleep(left.min(INVALIDATION_POLL)).await;
    }
}

/// Reads `paths` (all of one database) from one region's leader.
async fn read_region(
    shared: &Arc<Shared>,
    region: u64,
    route: &RegionRoute,
    request: proto::RegionReadReq,
) -> Outcome<Vec<proto::RegionSeries>> {
    let deadline = Instant::now() + READ_RETRY;
    let mut targets = Targets::new(shared, region, route);
    let mut attempt = 0u32;
    loop {
        if shared.lease.check(LeaseFencedRetryPolicy::None).is_err() {
            return Err(fenced_read(shared));
        }
        let (s, series) = match targets.next() {
            None => (
                status(
                    StatusCode::CanNotConnectDatanode,
                    format!("no known replica of region {region}"),
                ),
                Vec::new(),
            ),
            Some(address) if address == shared.internal_address => {
                crate::internal::read_region_local(shared, &request).await
            }
            Some(address) => match shared.peer(&address).read_region(request.clone()).await {
                Ok(resp) => {
                    let resp = resp.into_inner();
                    (
                        resp.status.unwrap_or_else(|| {
                            status(StatusCode::InternalServerError, "reply without status")
                        }),
                        resp.series,
                    )
                }
                Err(e) => (
                    status(
                        StatusCode::CanNotConnectDatanode,
                        format!("{address}: {}", e.message()),
                    ),
                    Vec::new(),
                ),
            },
        };
        if s.is_success() {
            return Ok(series);
        }
        // A fenced replica (535) is not the place to read; another may be.
        if !s.is_retryable() && !s.is(StatusCode::MetadataLeaseFenced) {
            return Err(s);
        }
        targets.redirected(&s);
        let pause = backoff(attempt).min(deadline.saturating_duration_since(Instant::now()));
        if pause.is_zero() {
            return Err(s);
        }
        attempt += 1;
        tokio::time::sleep(pause).await;
    }
}

/// Points of one series gathered from every region.
pub(crate) struct SeriesPoints {
    pub path: proto::SeriesPath,
    pub data_type: DataType,
    pub points: BTreeMap<i64, Value>,
    /// The points limit cut the series short.
    pub truncated: bool,
}

/// Reads `paths` in `[start, end)` (or, with `last`, the newest point) through the region
/// leaders. Series that do not exist or hold no point are absent.
pub(crate) async fn read(
    shared: &Arc<Shared>,
    paths: &[proto::SeriesPath],
    start: i64,
    end: i64,
    points_limit: u32,
    last: bool,
) -> Outcome<Vec<SeriesPoints>> {
    if shared.lease.check(LeaseFencedRetryPolicy::None).is_err() {
        return Err(fenced_read(shared));
    }
    let points_limit = shared.points_limit(points_limit);
    let generation = shared.cache.generation();
    // Schemas of the devices, through the cache.
    let devices: BTreeSet<&str> = paths.iter().map(|p| p.device.as_str()).collect();
    let mut schemas: BTreeMap<String, DeviceSchema> = BTreeMap::new();
    let mut missing = Vec::new();
    for d in devices {
        match shared.cache.schema(d).map_err(|_| fenced_read(shared))? {
            Some(s)
                if paths
                    .iter()
                    .filter(|p| p.device == d)
                    .all(|p| s.types.contains_key(&p.measurement)) =>
            {
                schemas.insert(d.to_string(), s);
            }
            _ => missing.push(d.to_string()),
        }
    }
    if !missing.is_empty() {
        inc(&shared.metrics.schema_fetches);
        let request = proto::FetchSchemaReq {
            devices: missing
                .iter()
                .map(|d| proto::DeviceSchemaRequest {
                    device: d.clone(),
                    measurements: Vec::new(),
                })
                .collect(),
            auto_create: false,
            caller: Some(shared.caller()),
        };
        for (device, schema) in fetch_schema(shared, request).await? {
            if !schema.database.is_empty() {
                shared.cache.put_schema(generation, &device, schema.clone());
                schemas.insert(device, schema);
            }
        }
    }
    // Paths by database.
    let mut by_database: BTreeMap<String, Vec<proto::SeriesPath>> = BTreeMap::new();
    let mut types = BTreeMap::new();
    for p in paths {
        let Some(schema) = schemas.get(&p.device) else {
            continue;
        };
        let Some(t) = schema.types.get(&p.measurement) else {
            continue;
        };
        types.insert((p.device.clone(), p.measurement.clone()), *t);
        by_database
            .entry(schema.database.clone())
            .or_default()
            .push(p.clone());
    }
    let mut merged: BTreeMap<(String, String), BTreeMap<i64, Value>> = BTreeMap::new();
    for (database, db_paths) in by_database {
        let mut regions = shared
            .cache
            .database_regions(&database)
            .map_err(|_| fenced_read(shared))?;
        if regions.is_empty() {
            refresh_regions(shared, generation).await?;
            regions = shared
                .cache
                .database_regions(&database)
                .map_err(|_| fenced_read(shared))?;
        }
        let mut reads = tokio::task::JoinSet::new();
        for region in regions {
            let route = shared
                .cache
                .region(region)
                .map_err(|_| fenced_read(shared))?
                .unwrap_or_default();
            let request = proto::RegionReadReq {
                region_id: region,
                paths: db_paths.clone(),
                start_time: start,
                end_time: end,
                // One more than answered: a region holding more tells the merge it was cut.
                points_limit: points_limit.saturating_add(1),
                last,
            };
            let shared = shared.clone();
            reads.spawn(async move { read_region(&shared, region, &route, request).await });
        }
        while let Some(joined) = reads.join_next().await {
            let series = joined.map_err(|e| {
                status(StatusCode::InternalServerError, format!("read task: {e}"))
            })??;
            for s in series {
                let Some(path) = s.path else { continue };
                let points = merged.entry((path.device, path.measurement)).or_default();
                for (t, v) in s.timestamps.iter().zip(&s.values) {
                    if let Some(v) = value_from_wire(v) {
                        points.insert(*t, v);
                    }
                }
            }
        }
    }
    let limit = points_limit as usize;
    let mut out = Vec::new();
    for p in paths {
        let key = (p.device.clone(), p.measurement.clone());
        let (Some(points), Some(t)) = (merged.get(&key), types.get(&key)) else {
            continue;
        };
        let merged_len = points.len();
        let points: BTreeMap<i64, Value> = if last {
            points
                .iter()
                .next_back()
                .map(|(t, v)| (*t, v.clone()))
                .into_iter()
                .collect()
        } else {
            points
                .iter()
                .take(limit)
                .map(|(t, v)| (*t, v.clone()))
                .collect()
        };
        if points.is_empty() {
            continue;
        }
        out.push(SeriesPoints {
            path: p.clone(),
            data_type: *t,
            truncated: !last && points.len() < merged_len,
            points,
        });
    }
    Ok(out)
}

/// Pulls region routes and DataNode addresses from the ConfigNode into the cache.
async fn refresh_regions(shared: &Shared, generation: u64) -> Outcome<()> {
    let regions = shared
        .call_confignode(None, |mut c| async move {
            c.show_regions(proto::ShowRegionsReq {}).await
        })
        .await?;
    check_status(regions.status.as_ref())
        .map_err(|e| status(StatusCode::MetadataError, format!("ShowRegions: {e}")))?;
    let routes = regions
        .regions
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
        .collect();
    shared
        .cache
        .put_partitions(generation, Vec::new(), routes, Vec::new());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tablet(timestamps: &[i64]) -> Tablet {
        let mut t = Tablet::new(
            "root.sg.d1",
            &[("s1", DataType::Double), ("s2", DataType::Int64)],
        );
        for &ts in timestamps {
            t.push_row(
                ts,
                vec![Some(Value::Double(ts as f64)), Some(Value::Int64(ts))],
            );
        }
        t
    }

    #[test]
    fn a_tablet_splits_by_the_region_of_each_rows_time_slot() {
        let partition = PartitionConfig {
            time_partition_interval_ms: 10,
            ..PartitionConfig::default()
        };
        // Slots 0 and 2 map to region 7, slot 1 to region 5.
        let regions: BTreeMap<i64, u64> = [(0, 7), (1, 5), (2, 7)].into();
        let split = split_by_region(tablet(&[1, 12, 25, 3, 18]), &regions, &partition);
        let rows: Vec<(u64, Vec<i64>)> = split
            .iter()
            .map(|(r, t)| (*r, t.timestamps.clone()))
            .collect();
        assert_eq!(rows, [(5, vec![12, 18]), (7, vec![1, 25, 3])]);
        for (_, t) in &split {
            assert_eq!(t.measurements, ["s1", "s2"]);
        }
        // One region: the tablet itself, rows in their order.
        let one = split_by_region(tablet(&[3, 1, 2]), &regions, &partition);
        assert_eq!(one.len(), 1);
        assert_eq!((one[0].0, one[0].1.timestamps.clone()), (7, vec![3, 1, 2]));
    }

    #[test]
    fn types_are_checked_against_the_schema_614_or_507() {
        let t = tablet(&[1]);
        let types = |s2| -> BTreeMap<String, DataType> {
            [("s1".into(), DataType::Double), ("s2".into(), s2)].into()
        };
        assert!(check_types(&t, &types(DataType::Int64)).is_ok());
        let mismatch = check_types(&t, &types(DataType::Text)).unwrap_err();
        assert!(mismatch.is(StatusCode::DataTypeMismatch), "{mismatch:?}");
        assert!(mismatch.message.contains("root.sg.d1.s2"), "{mismatch:?}");
        let missing: BTreeMap<String, DataType> = [("s1".into(), DataType::Double)].into();
        let missing = check_types(&t, &missing).unwrap_err();
        assert!(missing.is(StatusCode::MetadataError), "{missing:?}");
    }

    #[test]
    fn backoff_doubles_from_100_ms_to_20_s() {
        let b: Vec<u64> = (0..10).map(|a| backoff(a).as_millis() as u64).collect();
        assert_eq!(
            b,
            [100, 200, 400, 800, 1600, 3200, 6400, 12800, 20000, 20000]
        );
        assert_eq!(backoff(u32::MAX), WRITE_BACKOFF_MAX);
    }

    #[test]
    fn aggregation_reports_302_with_sub_statuses() {
        assert_eq!(aggregate(vec![ok(), ok()]).code, 200);
        let one = status(StatusCode::DataTypeMismatch, "x");
        assert_eq!(aggregate(vec![one.clone()]), one);
        let mut fenced = status(StatusCode::MetadataLeaseFencedRetryRequired, "f");
        fenced.need_retry = true;
        let s = aggregate(vec![ok(), fenced]);
        assert_eq!(s.code, 302);
        assert!(s.need_retry);
        assert_eq!(s.sub_status.len(), 2);
        let hint = status(StatusCode::RedirectionRecommend, "leader elsewhere");
        assert_eq!(
            aggregate(vec![hint.clone()]),
            hint,
            "one part keeps its hint"
        );
        assert_eq!(
            aggregate(vec![ok(), hint.clone()]).code,
            200,
            "a hint is no failure"
        );
        let s = aggregate(vec![hint, one]);
        assert_eq!((s.code, s.sub_status.len()), (302, 2));
    }
}
