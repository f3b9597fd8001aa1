//! The coordinator's read path: lease gate (fenced → 535) → schemas through the cache → the
//! regions holding the devices' series slots (through the cache; a miss asks the ConfigNode) →
//! a linearizable read on each region's leader (local or
//! `ReadRegion`), retried on leader changes within [`READ_RETRY`] → merge, cut at
//! `query_points_max`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use common::{DataType, SeriesBatch, SeriesPath, Status, StatusCode, Value};

use super::{backoff, Coordinator, CoordinatorError, Outcome, Targets};
use crate::cache::{DeviceSchema, RegionRoute};
use crate::host::LocalReplicas;
use crate::metadata::{DeviceFetch, DeviceSlots, PartitionFetch, Pinned, SchemaFetch, TimeSlots};
use crate::metrics::inc;
use crate::peers::PeerRpc;
use crate::region_read::{ReadKind, RegionAggregate, RegionPartials, RegionRead, RegionSeries};
use crate::timing::READ_RETRY;
use common::path::DevicePath;
use common::views::FragmentView;
use fragments::Fragments;

pub(crate) mod fragments;

/// The points of one asked series in a range, gathered from every region holding it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SeriesRange {
    /// As asked (an alias stays an alias).
    pub path: SeriesPath,
    /// Never empty.
    pub batch: SeriesBatch,
    /// The points limit cut the series short: more lie after the batch's last point.
    pub truncated: bool,
}

/// The newest point of one asked series.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SeriesLast {
    /// As asked.
    pub path: SeriesPath,
    pub data_type: DataType,
    pub time: i64,
    pub value: Value,
}

/// A read's paths resolved against their schemas: by database, with the TTL cutoff of each.
#[derive(Default)]
pub(super) struct ResolvedPaths {
    /// Database → the series' own paths (an alias resolved).
    pub(super) by_database: BTreeMap<String, BTreeSet<SeriesPath>>,
    /// Database → the oldest timestamp a TTL leaves visible.
    pub(super) cutoffs: BTreeMap<String, i64>,
    /// Asked path → its type; a path absent here names no series. (Looked up per path, so
    /// hashed: a LAST over 10,000 series spent a tenth of its time comparing paths in trees.)
    pub(super) types: HashMap<SeriesPath, DataType>,
    /// Asked path → the series' own path, where they differ (an alias).
    aliased: HashMap<SeriesPath, SeriesPath>,
}

impl ResolvedPaths {
    /// The series an asked path names.
    pub(super) fn series<'a>(&'a self, asked: &'a SeriesPath) -> &'a SeriesPath {
        self.aliased.get(asked).unwrap_or(asked)
    }
}

/// A request of the read path, made of each region holding its paths: a read of points
/// ([`RegionRead`]) or of partial aggregates ([`RegionAggregate`]).
pub(super) trait RegionQuery: Clone + Send + Sync + 'static {
    /// One series' answer.
    type Answer: Send + 'static;
    /// What it reads, as EXPLAIN ANALYZE names it.
    fn kind(&self) -> &'static str;
    /// The points or partials `answers` hold.
    fn rows(answers: &[Self::Answer]) -> u64;
    fn region(&self) -> u64;
    fn paths(&self) -> &[SeriesPath];
    /// The same request, of `paths` of `region`.
    fn of_region(&self, region: u64, paths: Vec<SeriesPath>) -> Self;
    /// Asked of the replica here.
    fn local<'a>(
        &'a self,
        local: &'a dyn LocalReplicas,
    ) -> impl Future<Output = Result<Vec<Self::Answer>, Status>> + Send + 'a;
    /// Asked of the replica at `address`.
    fn remote<'a>(
        &'a self,
        rpc: &'a dyn PeerRpc,
        address: &'a str,
    ) -> impl Future<Output = Result<Vec<Self::Answer>, Status>> + Send + 'a;
}

impl RegionQuery for RegionRead {
    type Answer = RegionSeries;

    fn kind(&self) -> &'static str {
        match self.kind {
            ReadKind::Range => "raw",
            ReadKind::Last => "last",
        }
    }

    fn rows(answers: &[RegionSeries]) -> u64 {
        answers.iter().map(|(_, batch)| batch.len() as u64).sum()
    }

    fn region(&self) -> u64 {
        self.region
    }

    fn paths(&self) -> &[SeriesPath] {
        &self.paths
    }

    fn of_region(&self, region: u64, paths: Vec<SeriesPath>) -> Self {
        RegionRead {
            region,
            paths,
            ..self.clone()
        }
    }

    fn local<'a>(
        &'a self,
        local: &'a dyn LocalReplicas,
    ) -> impl Future<Output = Result<Vec<RegionSeries>, Status>> + Send + 'a {
        local.read(self)
    }

    fn remote<'a>(
        &'a self,
        rpc: &'a dyn PeerRpc,
        address: &'a str,
    ) -> impl Future<Output = Result<Vec<RegionSeries>, Status>> + Send + 'a {
        rpc.read_region(address, self)
    }
}

impl RegionQuery for RegionAggregate {
    type Answer = RegionPartials;

    fn kind(&self) -> &'static str {
        "aggregate"
    }

    fn rows(answers: &[RegionPartials]) -> u64 {
        answers
            .iter()
            .map(|(_, partials)| partials.len() as u64)
            .sum()
    }

    fn region(&self) -> u64 {
        self.region
    }

    fn paths(&self) -> &[SeriesPath] {
        &self.paths
    }

    fn of_region(&self, region: u64, paths: Vec<SeriesPath>) -> Self {
        RegionAggregate {
            region,
            paths,
            windows: self.windows,
        }
    }

    fn local<'a>(
        &'a self,
        local: &'a dyn LocalReplicas,
    ) -> impl Future<Output = Result<Vec<RegionPartials>, Status>> + Send + 'a {
        local.aggregate(self)
    }

    fn remote<'a>(
        &'a self,
        rpc: &'a dyn PeerRpc,
        address: &'a str,
    ) -> impl Future<Output = Result<Vec<RegionPartials>, Status>> + Send + 'a {
        rpc.aggregate_region(address, self)
    }
}

impl Coordinator {
    /// Reads one region on its leader, here or on a peer, retried on leader changes within
    /// [`READ_RETRY`].
    async fn read_region<Q: RegionQuery>(
        &self,
        route: &RegionRoute,
        read: Q,
    ) -> Outcome<Vec<Q::Answer>> {
        let region = read.region();
        let started = Instant::now();
        let deadline = started + READ_RETRY;
        let mut targets = Targets::new(self, region, route);
        let mut attempt = 0u32;
        loop {
            if !self.read_gate() {
                return Err(self.fenced_read());
            }
            let target = targets.next();
            let answer = match &target {
                None => Err(Status::new(
                    StatusCode::CanNotConnectDatanode,
                    format!("no known replica of region {region}"),
                )),
                Some(address) if *address == self.internal_address => {
                    read.local(self.local.as_ref()).await
                }
                Some(address) => read.remote(self.peers.rpc(), address).await,
            };
            let s = match answer {
                Ok(series) => {
                    let replica = target.unwrap_or_default();
                    Fragments::record(FragmentView {
                        kind: read.kind(),
                        region,
                        local: replica == self.internal_address,
                        replica,
                        calls: 1,
                        series: read.paths().len() as u64,
                        rows: Q::rows(&series),
                        elapsed_us: started.elapsed().as_micros() as u64,
                        retries: u64::from(attempt),
                    });
                    return Ok(series);
                }
                Err(s) => s,
            };
            // A fenced replica (535) is not the place to read; another may be.
            if !s.is_retryable() && !s.is(StatusCode::MetadataLeaseFenced) {
                return Err(CoordinatorError::Remote(s));
            }
            targets.redirected(&s);
            let pause = backoff(attempt).min(deadline.saturating_duration_since(Instant::now()));
            if pause.is_zero() {
                return Err(CoordinatorError::Remote(s));
            }
            attempt += 1;
            tokio::time::sleep(pause).await;
        }
    }

    /// Points of one series a query may answer: the request's limit (0 = none asked) capped
    /// by `query_points_max`.
    fn points_limit(&self, requested: u32) -> u32 {
        match requested {
            0 => self.limits.query_points_max,
            n => n.min(self.limits.query_points_max),
        }
    }

    /// The points of `paths` in `range` through the region leaders, at most `points_limit` per
    /// series (0: `query_points_max`), under `pinned` (the caller's hold on the metadata, so an
    /// invalidation waits for the read). Series that do not exist or hold no point in the range
    /// are absent; the rest come in the order asked.
    pub(crate) async fn read_range(
        self: &Arc<Self>,
        pinned: &Pinned<'_>,
        paths: &[SeriesPath],
        range: Range<i64>,
        points_limit: u32,
    ) -> Outcome<Vec<SeriesRange>> {
        let limit = self.points_limit(points_limit);
        // One more than answered: a region holding more tells the merge it was cut.
        let (resolved, merged) = self
            .read_regions(
                pinned,
                paths,
                range,
                limit.saturating_add(1),
                ReadKind::Range,
            )
            .await?;
        let limit = limit as usize;
        let mut out = Vec::new();
        for asked in paths {
            // Looked up, not taken: a series asked twice (by its name and by its alias) answers
            // both.
            let Some(batch) = merged.get(resolved.series(asked)) else {
                continue;
            };
            let truncated = batch.len() > limit;
            let batch = batch.head(limit);
            debug_assert!(!batch.is_empty() && batch.len() <= limit);
            out.push(SeriesRange {
                path: asked.clone(),
                batch,
                truncated,
            });
        }
        Ok(out)
    }

    /// The newest point of each of `paths` through the region leaders, under `pinned`. Series
    /// that do not exist, hold no point or whose newest point expired are absent; the rest come
    /// in the order asked.
    pub(crate) async fn read_last(
        self: &Arc<Self>,
        pinned: &Pinned<'_>,
        paths: &[SeriesPath],
    ) -> Outcome<Vec<SeriesLast>> {
        let (resolved, merged) = self
            .read_regions(pinned, paths, i64::MIN..i64::MAX, 1, ReadKind::Last)
            .await?;
        let mut out = Vec::new();
        for asked in paths {
            let newest = merged
                .get(resolved.series(asked))
                .and_then(SeriesBatch::last);
            let (Some((time, value)), Some(data_type)) = (newest, resolved.types.get(asked)) else {
                continue;
            };
            out.push(SeriesLast {
                path: asked.clone(),
                data_type: *data_type,
                time,
                value,
            });
        }
        Ok(out)
    }

    /// Resolves `paths` and reads them from every region holding them (each database's regions
    /// at once): each series' batches from its regions merged into one.
    async fn read_regions(
        self: &Arc<Self>,
        pinned: &Pinned<'_>,
        paths: &[SeriesPath],
        range: Range<i64>,
        points_limit: u32,
        kind: ReadKind,
    ) -> Outcome<(ResolvedPaths, HashMap<SeriesPath, SeriesBatch>)> {
        if !self.read_gate() {
            return Err(self.fenced_read());
        }
        let resolved = self.resolve_paths(pinned, paths).await?;
        let mut parts: HashMap<SeriesPath, Vec<SeriesBatch>> = HashMap::new();
        for (database, db_paths) in &resolved.by_database {
            // Expired points (older than the TTL's cutoff) are invisible; the region applies
            // the same bound to the newest point.
            let cutoff = resolved.cutoffs.get(database).copied().unwrap_or(i64::MIN);
            let start = range.start.max(cutoff);
            if start >= range.end {
                continue;
            }
            let read = RegionRead {
                region: 0,
                paths: db_paths.iter().cloned().collect(),
                range: start..range.end,
                points_limit,
                kind,
            };
            for (path, batch) in self.read_database(pinned, database, read).await? {
                parts.entry(path).or_default().push(batch);
            }
        }
        let merged = parts
            .into_iter()
            .filter_map(|(path, batches)| Some((path, common::merge_batches(batches)?)))
            .collect();
        Ok((resolved, merged))
    }

    /// `paths` by database with their types, aliases and TTL cutoffs; a path naming no series
    /// is left out.
    pub(super) async fn resolve_paths(
        &self,
        pinned: &Pinned<'_>,
        paths: &[SeriesPath],
    ) -> Outcome<ResolvedPaths> {
        let schemas = self.read_schemas(pinned, paths).await?;
        // Wall-clock, read once per request, so every region and series of it cut alike.
        let now_ms = wall_clock_ms();
        let mut resolved = ResolvedPaths::default();
        for asked in paths {
            let Some(schema) = schemas.get(&asked.device) else {
                continue;
            };
            let measurement = schema.series_name(&asked.measurement);
            let Some(t) = schema.types.get(measurement) else {
                continue;
            };
            resolved.types.insert(asked.clone(), *t);
            let series = SeriesPath::new(asked.device.clone(), measurement);
            if series != *asked {
                resolved.aliased.insert(asked.clone(), series.clone());
            }
            // The strictest TTL the database's schemas carry (they differ only between a
            // SET TTL's commit and its acknowledgement).
            let cutoff = ttl_cutoff_ms(now_ms, schema.ttl_ms);
            match resolved.cutoffs.get_mut(&schema.database) {
                Some(entry) => *entry = (*entry).max(cutoff),
                None => {
                    resolved.cutoffs.insert(schema.database.clone(), cutoff);
                }
            }
            match resolved.by_database.get_mut(&schema.database) {
                Some(set) => {
                    set.insert(series);
                }
                None => {
                    resolved
                        .by_database
                        .insert(schema.database.clone(), BTreeSet::from([series]));
                }
            }
        }
        Ok(resolved)
    }

    /// The schemas of the devices of `paths`, through the cache (a miss asks the ConfigNode,
    /// creating nothing).
    pub(super) async fn read_schemas(
        &self,
        pinned: &Pinned<'_>,
        paths: &[SeriesPath],
    ) -> Outcome<BTreeMap<String, DeviceSchema>> {
        // Each device's measurements, looked up once per device (a LAST over 10,000 series
        // asks for 1,000 devices).
        let mut devices: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for p in paths {
            devices
                .entry(p.device.as_str())
                .or_default()
                .push(p.measurement.as_str());
        }
        let mut schemas = BTreeMap::new();
        let mut missing = Vec::new();
        for (d, measurements) in devices {
            // A path the rules refuse names no series: absent from the answer.
            let Ok(device) = DevicePath::parse(d, self.limits.tablet_limits.path_bytes_max) else {
                continue;
            };
            match pinned.schema(&device).map_err(|_| self.fenced_read())? {
                Some(s) if measurements.iter().all(|m| s.knows(m)) => {
                    schemas.insert(d.to_string(), s);
                }
                _ => missing.push(device),
            }
        }
        if missing.is_empty() {
            return Ok(schemas);
        }
        inc(&self.metrics.confignode.schema_fetches);
        let fetch = SchemaFetch {
            devices: missing
                .iter()
                .map(|d| DeviceFetch {
                    device: d.to_string(),
                    measurements: Vec::new(),
                })
                .collect(),
            auto_create: false,
            table: None,
        };
        let missing: BTreeMap<&str, &DevicePath> =
            missing.iter().map(|d| (d.as_str(), d)).collect();
        for (device, schema) in self.fetch_schema(&fetch).await? {
            let Some(&path) = missing.get(device.as_str()) else {
                continue;
            };
            if !schema.database.is_empty() {
                pinned.put_schema(path, schema.clone());
                schemas.insert(device, schema);
            }
        }
        Ok(schemas)
    }

    /// `read` on the regions holding its paths (each region asked for its own paths), at
    /// once.
    pub(super) async fn read_database<Q: RegionQuery>(
        self: &Arc<Self>,
        pinned: &Pinned<'_>,
        database: &str,
        read: Q,
    ) -> Outcome<Vec<Q::Answer>> {
        let by_region = self
            .regions_of_paths(pinned, database, read.paths())
            .await?;
        let fenced = |_| self.fenced_read();
        let mut reads = tokio::task::JoinSet::new();
        // The reads record into the statement's fragments, as the statement's task would.
        let fragments = Fragments::current();
        for (region, paths) in by_region {
            let route = pinned.region(region).map_err(fenced)?.unwrap_or_default();
            let read = read.of_region(region, paths);
            let coordinator = self.clone();
            let fragments = fragments.clone();
            reads.spawn(Fragments::scope(fragments, async move {
                coordinator.read_region(&route, read).await
            }));
        }
        let mut series = Vec::new();
        while let Some(joined) = reads.join_next().await {
            let part = joined.map_err(|e| CoordinatorError::Internal(format!("read task: {e}")))?;
            series.extend(part?);
        }
        Ok(series)
    }

    /// `paths` (all of `database`) by the regions holding their devices' series slots in any
    /// time slot: a device's points are in those regions and nowhere else. What the cache lacks
    /// (a series slot, or the route of its region) is asked of the ConfigNode, which creates
    /// nothing; a series slot no region holds has no points, and its paths are left out.
    ///
    /// Not every region of the database: the regions a coordinator happens to have cached are
    /// those its own writes touched, and a read that trusted them missed acknowledged writes
    /// other coordinators made (found by fault scenario 4d).
    pub(super) async fn regions_of_paths(
        &self,
        pinned: &Pinned<'_>,
        database: &str,
        paths: &[SeriesPath],
    ) -> Outcome<BTreeMap<u64, Vec<SeriesPath>>> {
        let fenced = |_| self.fenced_read();
        let mut by_slot: BTreeMap<u32, Vec<&SeriesPath>> = BTreeMap::new();
        for p in paths {
            by_slot
                .entry(self.limits.partition.series_slot(&p.device))
                .or_default()
                .push(p);
        }
        let mut held: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        // One device per series slot the cache cannot place.
        let mut missing: Vec<String> = Vec::new();
        for (&slot, slot_paths) in &by_slot {
            match pinned.series_slot_regions(database, slot).map_err(fenced)? {
                Some(regions) if self.routes_known(pinned, &regions)? => {
                    held.insert(slot, regions);
                }
                _ => missing.push(slot_paths[0].device.clone()),
            }
        }
        for devices in missing.chunks(common::FETCH_PARTITIONS_SLOTS_MAX) {
            let fetch = PartitionFetch {
                devices: devices
                    .iter()
                    .map(|d| DeviceSlots {
                        device: d.clone(),
                        slots: TimeSlots::Every,
                    })
                    .collect(),
                auto_create: false,
            };
            let mut map = self.ask_partitions(&fetch).await?;
            let found = std::mem::take(&mut map.held);
            self.learn_routes(pinned, map, Vec::new());
            pinned.put_series_slot_regions(found.clone());
            for ((db, slot), regions) in found {
                if db == database && by_slot.contains_key(&slot) {
                    held.insert(slot, regions);
                }
            }
        }
        let mut by_region: BTreeMap<u64, Vec<SeriesPath>> = BTreeMap::new();
        for (slot, regions) in held {
            for region in regions {
                by_region
                    .entry(region)
                    .or_default()
                    .extend(by_slot[&slot].iter().map(|p| (*p).clone()));
            }
        }
        Ok(by_region)
    }

    /// Whether the cache holds the route of every one of `regions`.
    fn routes_known(&self, pinned: &Pinned<'_>, regions: &[u64]) -> Outcome<bool> {
        for &region in regions {
            if pinned
                .region(region)
                .map_err(|_| self.fenced_read())?
                .is_none()
            {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Milliseconds since the Unix epoch by the wall clock (a TTL is about wall-clock age).
pub(crate) fn wall_clock_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// The oldest timestamp visible at `now_ms` under `ttl_ms`: points with `time < now - ttl`
/// are expired (IoTDB's rule); no TTL hides nothing.
pub(crate) fn ttl_cutoff_ms(now_ms: i64, ttl_ms: Option<i64>) -> i64 {
    match ttl_ms {
        Some(ttl) => now_ms.saturating_sub(ttl),
        None => i64::MIN,
    }
}
