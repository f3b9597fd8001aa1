//! The coordinator's metadata resolution for a write: a device's schema and a tablet's time
//! slots' regions, each through the cache under the caller's [`Pinned`] hold, fetched from the
//! ConfigNode (creating what is missing) on a miss, and learned into the caches and the address
//! book.

use std::collections::{BTreeMap, BTreeSet};

use common::path::DevicePath;
use common::{StatusCode, Tablet};

use super::{Coordinator, CoordinatorError, Outcome, Resolved, TableOrigin};
use crate::cache::{DeviceSchema, RegionRoute};
use crate::metadata::{
    DeviceFetch, DeviceSlots, LinkError, PartitionFetch, PartitionMap, Pinned, SchemaFetch,
    TableIncarnation, TimeSlots,
};
use crate::metrics::inc;

impl Coordinator {
    /// The schema a write of `tablet` to `device` is validated against: cached, else fetched
    /// (creating the series missing). A tree write (no `origin`) to a device of a table-model
    /// database is refused: the models keep their namespaces apart.
    pub(super) async fn resolve_schema(
        &self,
        pinned: &Pinned<'_>,
        device: &DevicePath,
        tablet: &Tablet,
        origin: Option<&TableOrigin<'_>>,
    ) -> Outcome<DeviceSchema> {
        let schema = self.schema_of(pinned, device, tablet, origin).await?;
        if origin.is_none() && schema.table_model {
            return Err(CoordinatorError::Invalid(format!(
                "{} lies in {}, a table-model database: write it with the table model",
                tablet.device, schema.database
            )));
        }
        Ok(schema)
    }

    async fn schema_of(
        &self,
        pinned: &Pinned<'_>,
        device: &DevicePath,
        tablet: &Tablet,
        origin: Option<&TableOrigin<'_>>,
    ) -> Outcome<DeviceSchema> {
        let cached = pinned.schema(device).map_err(|_| self.fenced_write())?;
        if let Some(schema) = cached {
            if tablet.measurements.iter().all(|m| schema.knows(m)) {
                return Ok(schema);
            }
        }
        inc(&self.metrics.confignode.schema_fetches);
        let fetch = SchemaFetch {
            devices: vec![DeviceFetch {
                device: tablet.device.clone(),
                measurements: tablet
                    .measurements
                    .iter()
                    .zip(&tablet.data_types)
                    .map(|(m, t)| (m.clone(), Some(*t)))
                    .collect(),
            }],
            auto_create: true,
            table: origin.map(|o| TableIncarnation {
                database: o.database.to_string(),
                table: o.table.to_string(),
                created_version: o.created_version,
            }),
        };
        let schema = self
            .fetch_schema(&fetch)
            .await?
            .into_iter()
            .next()
            .map(|(_, s)| s)
            .unwrap_or_default();
        if schema.database.is_empty() {
            return Err(CoordinatorError::Metadata(format!(
                "no database for {}",
                tablet.device
            )));
        }
        pinned.put_schema(device, schema.clone());
        Ok(schema)
    }

    /// `fetch` of the ConfigNode. A table gone (dropped, maybe created again) is told to the
    /// client as it is; another refusal or a malformed answer is a metadata failure.
    pub(super) async fn fetch_schema(
        &self,
        fetch: &SchemaFetch,
    ) -> Outcome<Vec<(String, DeviceSchema)>> {
        self.source.fetch_schema(fetch).await.map_err(|e| match e {
            LinkError::Refused(s) if !s.is(StatusCode::TableNotExists) => {
                CoordinatorError::Metadata(format!("FetchSchema: {}", LinkError::Refused(s)))
            }
            LinkError::Malformed(m) => CoordinatorError::Metadata(m),
            e => CoordinatorError::ConfigNode(e),
        })
    }

    pub(super) async fn resolve_partitions(
        &self,
        pinned: &Pinned<'_>,
        device: &DevicePath,
        slots: &BTreeSet<i64>,
    ) -> Outcome<Resolved> {
        let fenced = |_| self.fenced_write();
        let mut regions = BTreeMap::new();
        let mut missing = Vec::new();
        for slot in slots {
            match pinned.partition(device, *slot).map_err(fenced)? {
                Some(region) => {
                    regions.insert(*slot, region);
                }
                None => missing.push(*slot),
            }
        }
        let mut routes = BTreeMap::new();
        if !missing.is_empty() {
            let fetched = self.fetch_partitions(pinned, device, &missing).await?;
            regions.extend(fetched.0);
            routes.extend(fetched.1);
        }
        if let Some(slot) = slots.iter().find(|s| !regions.contains_key(s)) {
            return Err(CoordinatorError::Metadata(format!(
                "no region for {device} in time slot {slot}"
            )));
        }
        for region in regions.values() {
            if routes.contains_key(region) {
                continue;
            }
            if let Some(route) = pinned.region(*region).map_err(fenced)? {
                routes.insert(*region, route);
            }
        }
        Ok((regions, routes))
    }

    /// The regions of `device` in the `missing` time slots, from the ConfigNode (created when
    /// absent), with their routes; stored in the caches and the address book.
    async fn fetch_partitions(
        &self,
        pinned: &Pinned<'_>,
        device: &DevicePath,
        missing: &[i64],
    ) -> Outcome<Resolved> {
        let fetch = PartitionFetch {
            devices: vec![DeviceSlots {
                device: device.to_string(),
                slots: TimeSlots::These(missing.to_vec()),
            }],
            auto_create: true,
        };
        let map = self.ask_partitions(&fetch).await?;
        let series_slot = self.limits.partition.series_slot(device.as_str());
        let mut regions = BTreeMap::new();
        let mut fetched = Vec::new();
        for &((slot, time_slot), region) in &map.partitions {
            if slot == series_slot && missing.contains(&time_slot) {
                regions.insert(time_slot, region);
                fetched.push(((device.to_string(), time_slot), region));
            }
        }
        debug_assert!(
            regions.len() <= missing.len(),
            "only the asked slots are taken"
        );
        let routes = self.learn_routes(pinned, map, fetched);
        Ok((regions, routes.into_iter().collect()))
    }

    /// `fetch` of the ConfigNode leader (counted in `partition_fetches`). A refusal of the
    /// request itself (a database at `cn_database_partitions_max`, a request over the size
    /// FetchPartitions takes) is final: the client gets it as it is.
    pub(crate) async fn ask_partitions(&self, fetch: &PartitionFetch) -> Outcome<PartitionMap> {
        inc(&self.metrics.confignode.partition_fetches);
        self.source
            .fetch_partitions(fetch)
            .await
            .map_err(|e| match e {
                LinkError::Refused(s) if !s.is(StatusCode::IllegalParameter) => {
                    CoordinatorError::Metadata(format!(
                        "FetchPartitions: {}",
                        LinkError::Refused(s)
                    ))
                }
                LinkError::Malformed(m) => {
                    CoordinatorError::Metadata(format!("FetchPartitions: {m}"))
                }
                e => CoordinatorError::ConfigNode(e),
            })
    }

    /// Takes the routes and DataNode addresses of `map` into the caches (with `partitions`,
    /// the (device, time slot) entries taken from it) and the peer table; the routes it named.
    pub(crate) fn learn_routes(
        &self,
        pinned: &Pinned<'_>,
        map: PartitionMap,
        partitions: Vec<((String, i64), u64)>,
    ) -> Vec<(u64, RegionRoute)> {
        self.peers.learn(
            map.nodes
                .iter()
                .filter(|(_, a)| !a.internal.is_empty())
                .map(|(id, a)| (*id, a.internal.clone())),
        );
        pinned.put_partitions(partitions, map.routes.clone(), map.nodes);
        map.routes
    }
}
