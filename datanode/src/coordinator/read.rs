//! The coordinator's read path: lease gate (fenced → 535) → schemas through the cache → the
//! regions holding the devices' series slots (through the cache; a miss asks the ConfigNode) →
//! a linearizable read on each region's leader (local or
//! `ReadRegion`), retried on leader changes within [`READ_RETRY`] → merge, cut at
//! `query_points_max`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use common::{DataType, StatusCode, Value};

use super::{backoff, Coordinator, CoordinatorError, Outcome, Targets};
use crate::cache::{DeviceSchema, RegionRoute};
use crate::convert::{status, value_from_wire};
use crate::metadata::Pinned;
use crate::metrics::inc;
use crate::timing::READ_RETRY;
use common::path::DevicePath;

/// Points of one series gathered from every region.
pub(crate) struct SeriesPoints {
    pub path: proto::SeriesPath,
    pub data_type: DataType,
    pub points: BTreeMap<i64, Value>,
    /// The points limit cut the series short.
    pub truncated: bool,
}

impl Coordinator {
    /// Reads `paths` (all of one database) from one region's leader.
    async fn read_region(
        &self,
        region: u64,
        route: &RegionRoute,
        request: proto::RegionReadReq,
    ) -> Outcome<Vec<proto::RegionSeries>> {
        let deadline = Instant::now() + READ_RETRY;
        let mut targets = Targets::new(self, region, route);
        let mut attempt = 0u32;
        loop {
            if !self.read_gate() {
                return Err(self.fenced_read());
            }
            let (s, series) = match targets.next() {
                None => (
                    status(
                        StatusCode::CanNotConnectDatanode,
                        format!("no known replica of region {region}"),
                    ),
                    Vec::new(),
                ),
                Some(address) if address == self.internal_address => {
                    self.local.read(&request).await
                }
                Some(address) => {
                    match self
                        .peers
                        .rpc()
                        .read_region(&address, request.clone())
                        .await
                    {
                        Ok(resp) => (
                            resp.status.unwrap_or_else(crate::convert::no_status),
                            resp.series,
                        ),
                        Err(e) => (
                            status(
                                StatusCode::CanNotConnectDatanode,
                                format!("{address}: {}", e.message()),
                            ),
                            Vec::new(),
                        ),
                    }
                }
            };
            if s.is_success() {
                return Ok(series);
            }
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

    /// Reads `paths` in `[start, end)` (or, with `last`, the newest point) through the region
    /// leaders, under `pinned` (the caller's hold on the metadata, so an invalidation waits for
    /// the read). Series that do not exist or hold no point are absent.
    pub(crate) async fn read(
        self: &Arc<Self>,
        pinned: &Pinned<'_>,
        paths: &[proto::SeriesPath],
        range: std::ops::Range<i64>,
        points_limit: u32,
        last: bool,
    ) -> Outcome<Vec<SeriesPoints>> {
        if !self.read_gate() {
            return Err(self.fenced_read());
        }
        let points_limit = self.points_limit(points_limit);
        let schemas = self.read_schemas(pinned, paths).await?;
        // Paths by database, and the type of each.
        let mut by_database: BTreeMap<String, Vec<proto::SeriesPath>> = BTreeMap::new();
        // Per database, the oldest timestamp a TTL leaves visible: the strictest TTL its
        // schemas carry (they differ only between a SET TTL's commit and its acknowledgement).
        let mut cutoffs: BTreeMap<String, i64> = BTreeMap::new();
        // Wall-clock, read once per request, so every region and series of it cut alike.
        let now_ms = wall_clock_ms();
        let mut types = BTreeMap::new();
        // An asked path that names a series by its alias → the series' own path.
        let mut aliased = BTreeMap::new();
        for p in paths {
            let Some(schema) = schemas.get(&p.device) else {
                continue;
            };
            let measurement = schema.series_name(&p.measurement);
            let Some(t) = schema.types.get(measurement) else {
                continue;
            };
            let asked = (p.device.clone(), p.measurement.clone());
            types.insert(asked.clone(), *t);
            let p = &proto::SeriesPath {
                device: p.device.clone(),
                measurement: measurement.to_string(),
            };
            if measurement != asked.1 {
                aliased.insert(asked, (p.device.clone(), p.measurement.clone()));
            }
            let cutoff = ttl_cutoff_ms(now_ms, schema.ttl_ms);
            let entry = cutoffs.entry(schema.database.clone()).or_insert(cutoff);
            *entry = (*entry).max(cutoff);
            by_database
                .entry(schema.database.clone())
                .or_default()
                .push(p.clone());
        }
        let mut merged: BTreeMap<(String, String), BTreeMap<i64, Value>> = BTreeMap::new();
        for (database, db_paths) in by_database {
            let cutoff = cutoffs.get(&database).copied().unwrap_or(i64::MIN);
            let start_time = range.start.max(cutoff);
            if start_time >= range.end {
                continue;
            }
            let request = proto::RegionReadReq {
                region_id: 0,
                paths: db_paths,
                // Expired points (older than the TTL's cutoff) are invisible; the region
                // applies the same bound to `last`.
                start_time,
                end_time: range.end,
                // One more than answered: a region holding more tells the merge it was cut.
                points_limit: points_limit.saturating_add(1),
                last,
            };
            for s in self.read_database(pinned, &database, request).await? {
                let Some(path) = s.path else { continue };
                let points = merged.entry((path.device, path.measurement)).or_default();
                for (t, v) in s.timestamps.iter().zip(&s.values) {
                    if let Some(v) = value_from_wire(v) {
                        points.insert(*t, v);
                    }
                }
            }
        }
        Ok(answer_series(
            paths,
            &merged,
            &types,
            &aliased,
            points_limit as usize,
            last,
        ))
    }

    /// The schemas of the devices of `paths`, through the cache (a miss asks the ConfigNode,
    /// creating nothing).
    pub(super) async fn read_schemas(
        &self,
        pinned: &Pinned<'_>,
        paths: &[proto::SeriesPath],
    ) -> Outcome<BTreeMap<String, DeviceSchema>> {
        let devices: BTreeSet<&str> = paths.iter().map(|p| p.device.as_str()).collect();
        let mut schemas = BTreeMap::new();
        let mut missing = Vec::new();
        for d in devices {
            // A path the rules refuse names no series: absent from the answer.
            let Ok(device) = DevicePath::parse(d, self.limits.tablet_limits.path_bytes_max) else {
                continue;
            };
            match pinned.schema(&device).map_err(|_| self.fenced_read())? {
                Some(s)
                    if paths
                        .iter()
                        .filter(|p| p.device == d)
                        .all(|p| s.knows(&p.measurement)) =>
                {
                    schemas.insert(d.to_string(), s);
                }
                _ => missing.push(device),
            }
        }
        if missing.is_empty() {
            return Ok(schemas);
        }
        inc(&self.metrics.confignode.schema_fetches);
        let request = proto::FetchSchemaReq {
            devices: missing
                .iter()
                .map(|d| proto::DeviceSchemaRequest {
                    device: d.to_string(),
                    measurements: Vec::new(),
                })
                .collect(),
            auto_create: false,
            caller: Some(self.caller()),
            table: None,
        };
        for (device, schema) in self.fetch_schema(request).await? {
            let Some(path) = missing.iter().find(|m| m.as_str() == device) else {
                continue;
            };
            if !schema.database.is_empty() {
                pinned.put_schema(path, schema.clone());
                schemas.insert(device, schema);
            }
        }
        Ok(schemas)
    }

    /// `request` on the regions holding its paths (each region asked for its own paths), at
    /// once.
    async fn read_database(
        self: &Arc<Self>,
        pinned: &Pinned<'_>,
        database: &str,
        request: proto::RegionReadReq,
    ) -> Outcome<Vec<proto::RegionSeries>> {
        let by_region = self
            .regions_of_paths(pinned, database, &request.paths)
            .await?;
        let fenced = |_| self.fenced_read();
        let mut reads = tokio::task::JoinSet::new();
        for (region, paths) in by_region {
            let route = pinned.region(region).map_err(fenced)?.unwrap_or_default();
            let request = proto::RegionReadReq {
                region_id: region,
                paths,
                ..request.clone()
            };
            let coordinator = self.clone();
            reads.spawn(async move { coordinator.read_region(region, &route, request).await });
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
        paths: &[proto::SeriesPath],
    ) -> Outcome<BTreeMap<u64, Vec<proto::SeriesPath>>> {
        let fenced = |_| self.fenced_read();
        let mut by_slot: BTreeMap<u32, Vec<&proto::SeriesPath>> = BTreeMap::new();
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
            let request = proto::FetchPartitionsReq {
                requests: devices
                    .iter()
                    .map(|d| proto::DeviceTimeSlots {
                        device: d.clone(),
                        time_slots: Vec::new(),
                        every_time_slot: true,
                    })
                    .collect(),
                auto_create: false,
                caller: Some(self.caller()),
            };
            let resp = self.ask_partitions(request).await?;
            self.learn_routes(pinned, &resp, Vec::new());
            pinned.put_series_slot_regions(
                resp.device_regions
                    .iter()
                    .map(|d| ((d.database.clone(), d.series_slot), d.region_ids.clone()))
                    .collect(),
            );
            for d in resp.device_regions {
                if d.database == database && by_slot.contains_key(&d.series_slot) {
                    held.insert(d.series_slot, d.region_ids);
                }
            }
        }
        let mut by_region: BTreeMap<u64, Vec<proto::SeriesPath>> = BTreeMap::new();
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

/// The merged points of each asked path, in the request's order, cut at `limit` points (the
/// newest one each, with `last`); a path by an alias (`aliased`: asked → series) has its series'.
fn answer_series(
    paths: &[proto::SeriesPath],
    merged: &BTreeMap<(String, String), BTreeMap<i64, Value>>,
    types: &BTreeMap<(String, String), DataType>,
    aliased: &BTreeMap<(String, String), (String, String)>,
    limit: usize,
    last: bool,
) -> Vec<SeriesPoints> {
    let mut out = Vec::new();
    for p in paths {
        let key = (p.device.clone(), p.measurement.clone());
        let series = aliased.get(&key).unwrap_or(&key);
        let (Some(points), Some(t)) = (merged.get(series), types.get(&key)) else {
            continue;
        };
        let kept: BTreeMap<i64, Value> = if last {
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
        if kept.is_empty() {
            continue;
        }
        debug_assert!(
            kept.len() <= limit.max(1),
            "at most the limit, or the one newest point"
        );
        out.push(SeriesPoints {
            path: p.clone(),
            data_type: *t,
            truncated: !last && kept.len() < points.len(),
            points: kept,
        });
    }
    out
}
