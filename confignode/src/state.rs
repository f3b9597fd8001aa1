//! The metadata state machine: a pure, deterministic `apply(command)` over the DataNode registry,
//! databases, series, the partition table and region groups (design §2, §4), and the users with
//! their password hashes.
//!
//! Architecture invariant: `apply` reads nothing but the command and the prior state — no clock,
//! no randomness, no configuration — so every ConfigNode replica computes the same state and the
//! same result. The leader's parameters (replication factor, region groups per database, the
//! database's partition cap) travel in the command.
//!
//! Architecture invariant: an allocation costs O(slots · log n), never a pass over the partition
//! table: it runs on the raft thread, where a long apply stalls heartbeats and fences every
//! DataNode (REVIEW H5). What it looks up is in [`PartitionIndex`], derived from the table.

use std::collections::{BTreeMap, BTreeSet};

use codec::SeriesCodec;
use common::codec::Writer;
use common::path::{is_under, DatabasePath, DevicePath, Measurement, PathError};
use common::{envelope, DataType};

pub use crate::command::NodeStatus;
use crate::command::{
    decode_series_keys, encode_series_keys, Command, CommandResult, DeviceAttributes, SeriesSpec,
    TableOrigin,
};
use crate::error::{DecodeError, MetadataError};
use crate::users::{self, StoredPassword, ROOT_USER, USERS_MAX};
use common::table::{self, Category, TableColumn, TableSchema};
use common::views::SeriesMeta;

/// Longest path (database, device) in bytes.
pub const PATH_BYTES_MAX: usize = common::path::PATH_BYTES_MAX;
/// Most DataNodes in the registry.
pub const DATA_NODES_MAX: usize = 4096;
/// Most series in the registry.
pub const SERIES_MAX: usize = 10_000_000;
/// Most region groups in the cluster.
pub const REGION_GROUPS_MAX: usize = 1_000_000;
/// Most fence operations pending at once.
pub const OPERATIONS_PENDING_MAX: usize = 1024;
/// Largest replication factor accepted.
pub const REPLICATION_FACTOR_MAX: u32 = 7;

/// A registered DataNode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataNodeRecord {
    /// Its id.
    pub id: u64,
    /// `host:port` of its internal service.
    pub internal_address: String,
    /// `host:port` of its session service.
    pub rpc_address: String,
    /// Rises on every registration; never on renewal.
    pub incarnation_epoch: u64,
    /// The highest incarnation this DataNode proved it ran: the stored one a registration
    /// carried, or one that answered the leader's heartbeat. A data directory holding an older
    /// one was restored from a backup, and is refused (REVIEW H3). 0: none proved yet.
    pub confirmed_epoch: u64,
    /// As judged by the leader's failure detector.
    pub status: NodeStatus,
}

/// A series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesRecord {
    /// Its type.
    pub data_type: DataType,
    /// A DELETE TIMESERIES is in progress.
    pub pending_delete: bool,
    /// Its declared encoding and compressor.
    pub codec: SeriesCodec,
}

/// A data region group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionGroup {
    /// The region id (also its raft group id on the DataNodes).
    pub id: u64,
    /// The database it belongs to.
    pub database: String,
    /// DataNodes holding a replica, in allocation order.
    pub replicas: Vec<u64>,
    /// The replica that should lead (spreads leaders over DataNodes).
    pub preferred_leader: u64,
}

/// What a pending fence operation deletes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OperationKind {
    /// DELETE TIMESERIES of these (device, measurement) pairs: the ones it still has to delete.
    /// Every one is a pending-delete series that no other operation lists; a DROP DATABASE that
    /// finishes first takes its series out of the list (see [`MetadataState::apply`]).
    DeleteTimeseries(Vec<(String, String)>),
    /// DROP DATABASE.
    DropDatabase(String),
    /// SET / UNSET TTL of a database: deletes nothing, only invalidates (the new TTL is in the
    /// state from the Begin on).
    SetTtl(String),
    /// DROP TABLE: the table left the schema at the Begin; its caches are invalidated and the
    /// series of its devices deleted, as a DELETE TIMESERIES of `series` (which follow the same
    /// rules as that operation's).
    DropTable {
        /// The tree database.
        database: String,
        /// The table.
        table: String,
        /// The series of the table's devices it still has to delete.
        series: Vec<(String, String)>,
    },
}

impl OperationKind {
    /// The series it deletes one by one (DELETE TIMESERIES, DROP TABLE).
    pub fn series(&self) -> &[(String, String)] {
        match self {
            OperationKind::DeleteTimeseries(series) | OperationKind::DropTable { series, .. } => {
                series
            }
            OperationKind::DropDatabase(_) | OperationKind::SetTtl(_) => &[],
        }
    }

    fn series_mut(&mut self) -> Option<&mut Vec<(String, String)>> {
        match self {
            OperationKind::DeleteTimeseries(series) | OperationKind::DropTable { series, .. } => {
                Some(series)
            }
            OperationKind::DropDatabase(_) | OperationKind::SetTtl(_) => None,
        }
    }
}

/// The replicated metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataState {
    applied_index: u64,
    metadata_version: u64,
    next_data_node_id: u64,
    next_region_id: u64,
    next_operation_id: u64,
    data_nodes: BTreeMap<u64, DataNodeRecord>,
    /// Database → pending delete.
    databases: BTreeMap<String, bool>,
    /// (device, measurement) → series.
    series: BTreeMap<(String, String), SeriesRecord>,
    /// The series of `series` whose encoding or compressor was declared (not the defaults):
    /// what every DataNode polls for every few seconds, answered without a pass over every
    /// series. Derived (kept with `series`, rebuilt by a snapshot load), never stored.
    declared_codecs: BTreeSet<(String, String)>,
    /// The series of `series` with an alias, tags or attributes, and those.
    series_meta: BTreeMap<(String, String), SeriesMeta>,
    /// (database, series slot, time slot) → region id.
    partitions: BTreeMap<(String, u32, i64), u64>,
    regions: BTreeMap<u64, RegionGroup>,
    operations: BTreeMap<u64, OperationKind>,
    /// Database → time to live in ms (> 0); absent = none (IoTDB's INF).
    ttls: BTreeMap<String, i64>,
    /// Region → its migration in progress, `(from, to)`: `to` hosts a joining replica that
    /// takes `from`'s place once the region's raft group swapped them.
    migrations: BTreeMap<u64, (u64, u64)>,
    /// User → the Argon2id PHC string of its password. root is always a user, but is here only
    /// once its password was set; until then its password is [`users::ROOT_INITIAL_PASSWORD`].
    /// So the state without this table — a new cluster, a snapshot of version 4 or older — has
    /// root alone with password root, alike on every replica, with no salted hash to agree on.
    users: BTreeMap<String, String>,
    /// (database, table) → a table of the table model (`common::table`), with the attributes of
    /// its devices.
    tables: BTreeMap<(String, String), TableRecord>,
    /// Derived from `partitions` and `regions`; never encoded.
    index: PartitionIndex,
}

/// A table of the table model and the attributes of those of its devices that have any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableRecord {
    /// Its columns and TTL.
    pub schema: TableSchema,
    /// The metadata version its creation made: its incarnation (0 for a table from a version-7
    /// snapshot). A DROP TABLE and a CREATE TABLE of the same name after it make a later one;
    /// writes derived from this schema carry it ([`Command::CreateTableSeries`]).
    pub created_version: u64,
    /// Tag values (trailing nulls left out) → attribute name → value.
    pub devices: BTreeMap<Vec<Option<String>>, BTreeMap<String, String>>,
}

/// Most tables in the cluster.
pub const TABLES_MAX: usize = 100_000;
/// Most series one DROP TABLE deletes: its operation lists them all (in the log, the snapshot,
/// the invalidation and the regions' deletions), as a DELETE TIMESERIES lists at most as many.
/// A larger table goes with its database.
pub const DROP_TABLE_SERIES_MAX: usize = 100_000;
/// Most devices with attributes in one table.
pub const TABLE_DEVICES_MAX: usize = 1_000_000;

/// What an allocation looks up, kept beside the partition table so that it costs a lookup, not
/// a scan. Derived from the partition table and the region groups alone and never encoded:
/// every change to either updates it (allocation, region creation, DROP DATABASE), and decoding
/// a snapshot rebuilds it ([`PartitionIndex::build`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PartitionIndex {
    databases: BTreeMap<String, DatabaseIndex>,
}

/// One database's part of the [`PartitionIndex`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct DatabaseIndex {
    /// Entries of the partition table in the database.
    partitions: u64,
    /// Series slot → the region group holding it, in every time slot.
    series_slots: BTreeMap<u32, u64>,
    /// Every region group of the database → the series slots it holds.
    groups: BTreeMap<u64, u32>,
    /// `(series slots held, group)` of every group: the first is where a new series slot goes
    /// when no group may be created (the least loaded, ties to the lowest id).
    by_load: BTreeSet<(u32, u64)>,
}

impl PartitionIndex {
    /// The index of `partitions` over `regions`, or the first entry that breaks the table's
    /// rules: a series slot in two groups, a partition in a group not of its database.
    fn build(
        partitions: &BTreeMap<(String, u32, i64), u64>,
        regions: &BTreeMap<u64, RegionGroup>,
    ) -> Result<PartitionIndex, String> {
        let mut index = PartitionIndex::default();
        for r in regions.values() {
            index.add_group(&r.database, r.id);
        }
        for ((db, series_slot, time_slot), region) in partitions {
            let entry = format!("partition ({db}, {series_slot}, {time_slot}) → region {region}");
            let Some(d) = index.databases.get(db.as_str()) else {
                return Err(format!("{entry}: {db} has no region group"));
            };
            match d.series_slots.get(series_slot) {
                Some(held) if held != region => {
                    return Err(format!("{entry}: the series slot is in region {held}"))
                }
                Some(_) => {}
                None if !d.groups.contains_key(region) => {
                    return Err(format!("{entry}: not a region group of {db}"))
                }
                None => {}
            }
            index.add_partition(db, *series_slot, *region);
        }
        Ok(index)
    }

    fn database(&self, database: &str) -> Option<&DatabaseIndex> {
        self.databases.get(database)
    }

    /// The region group holding `series_slot` of `database`.
    fn series_slot_region(&self, database: &str, series_slot: u32) -> Option<u64> {
        self.database(database)?
            .series_slots
            .get(&series_slot)
            .copied()
    }

    /// The group of `database` holding the fewest series slots, ties to the lowest id.
    fn least_loaded(&self, database: &str) -> Option<u64> {
        let (_, region) = self.database(database)?.by_load.first()?;
        Some(*region)
    }

    /// A new region group of `database`, holding nothing yet.
    fn add_group(&mut self, database: &str, region: u64) {
        let d = self.databases.entry(database.to_string()).or_default();
        let fresh = d.groups.insert(region, 0).is_none();
        assert!(fresh, "region group {region} of {database} indexed twice");
        d.by_load.insert((0, region));
    }

    /// A new partition (`database`, `series_slot`, any time slot) → `region`, a group of the
    /// database already holding the series slot, or a group of it when the slot is new.
    fn add_partition(&mut self, database: &str, series_slot: u32, region: u64) {
        let d = self
            .databases
            .get_mut(database)
            .unwrap_or_else(|| panic!("partition of {database}, which has no region group"));
        d.partitions += 1;
        match d.series_slots.entry(series_slot) {
            std::collections::btree_map::Entry::Occupied(held) => assert_eq!(
                *held.get(),
                region,
                "series slot {series_slot} of {database} is in region {}, not {region}",
                held.get()
            ),
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(region);
                let load = d.groups.get_mut(&region).unwrap_or_else(|| {
                    panic!("region {region} is not a region group of {database}")
                });
                let moved = d.by_load.remove(&(*load, region));
                assert!(moved, "region {region} missing from the load order");
                *load += 1;
                d.by_load.insert((*load, region));
            }
        }
    }

    /// DROP DATABASE took its partitions and groups.
    fn drop_database(&mut self, database: &str) {
        self.databases.remove(database);
    }
}

fn illegal(e: PathError) -> MetadataError {
    MetadataError::IllegalPath {
        path: e.path,
        reason: e.reason,
    }
}

/// The rules a user command's name and hash follow; the leader checked them before proposing.
fn check_user(username: &str, password_hash: Option<&str>) -> Result<(), MetadataError> {
    users::check_username(username).map_err(MetadataError::IllegalUser)?;
    if let Some(hash) = password_hash {
        users::check_password_hash(hash).map_err(MetadataError::IllegalUser)?;
    }
    Ok(())
}

fn validate_measurement(device: &str, measurement: &str) -> Result<(), MetadataError> {
    Measurement::parse(measurement, PATH_BYTES_MAX).map_err(|e| {
        illegal(PathError {
            path: format!("{device}.{measurement}"),
            ..e
        })
    })?;
    Ok(())
}

impl MetadataState {
    /// An empty state: no DataNodes, no databases.
    pub fn new() -> MetadataState {
        MetadataState {
            next_data_node_id: 1,
            next_region_id: 1,
            next_operation_id: 1,
            ..MetadataState::default()
        }
    }

    /// Index of the last applied log entry.
    pub fn applied_index(&self) -> u64 {
        self.applied_index
    }

    /// Rises with every change DataNodes cache (schema, partitions, regions, nodes).
    pub fn metadata_version(&self) -> u64 {
        self.metadata_version
    }

    /// A registered DataNode.
    pub fn data_node(&self, id: u64) -> Option<&DataNodeRecord> {
        self.data_nodes.get(&id)
    }

    /// Every registered DataNode, by id.
    pub fn data_nodes(&self) -> impl Iterator<Item = &DataNodeRecord> {
        self.data_nodes.values()
    }

    /// Databases with their pending-delete flag.
    pub fn databases(&self) -> impl Iterator<Item = (&str, bool)> {
        self.databases.iter().map(|(d, p)| (d.as_str(), *p))
    }

    /// The time to live of `database` in ms, if one is set.
    pub fn ttl_ms(&self, database: &str) -> Option<i64> {
        self.ttls.get(database).copied()
    }

    /// The database covering `device`, if any, and whether it is being dropped.
    pub fn database_of(&self, device: &str) -> Option<(&str, bool)> {
        self.databases
            .iter()
            .find(|(db, _)| is_under(device, db))
            .map(|(db, pending)| (db.as_str(), *pending))
    }

    /// A series, if it exists (pending-delete ones included).
    pub fn series(&self, device: &str, measurement: &str) -> Option<SeriesRecord> {
        self.series
            .get(&(device.to_string(), measurement.to_string()))
            .copied()
    }

    /// The alias, tags and attributes of a series that declared any.
    pub fn series_meta(&self, device: &str, measurement: &str) -> Option<&SeriesMeta> {
        self.series_meta
            .get(&(device.to_string(), measurement.to_string()))
    }

    /// The measurement of `device` whose alias `alias` is, if any.
    pub fn aliased(&self, device: &str, alias: &str) -> Option<&str> {
        self.series_meta_of(device)
            .find(|(_, meta)| meta.alias.as_deref() == Some(alias))
            .map(|(m, _)| m)
    }

    /// The declared names of `device`'s series that have any: (measurement, meta).
    pub fn series_meta_of(&self, device: &str) -> impl Iterator<Item = (&str, &SeriesMeta)> {
        let device = device.to_string();
        self.series_meta
            .range((device.clone(), String::new())..)
            .take_while(move |((d, _), _)| *d == device)
            .map(|((_, m), meta)| (m.as_str(), meta))
    }

    /// An alias must be a measurement name that no other series of the device has as its name
    /// or alias (in the state or in `batch`), and a new measurement must not be another series'
    /// alias: each names exactly one series. `batch` is the command's series when one of them
    /// has an alias, else empty (every write path's auto-creation: a pass over the batch per
    /// series would be quadratic in its size).
    fn check_names(&self, s: &SeriesSpec, batch: &[SeriesSpec]) -> Result<(), MetadataError> {
        let taken = |name: &str, reason| MetadataError::IllegalPath {
            path: format!("{}.{name}", s.device),
            reason,
        };
        const AN_ALIAS: &str = "the name is another series' alias";
        const TAKEN: &str = "the alias is the name or alias of another series of the device";
        if let Some(owner) = self.aliased(&s.device, &s.measurement) {
            if owner != s.measurement {
                return Err(taken(&s.measurement, AN_ALIAS));
            }
        }
        if batch.iter().any(|o| {
            o.device == s.device
                && o.measurement != s.measurement
                && o.meta.alias.as_deref() == Some(s.measurement.as_str())
        }) {
            return Err(taken(&s.measurement, AN_ALIAS));
        }
        let Some(alias) = s.meta.alias.as_deref() else {
            return Ok(());
        };
        validate_measurement(&s.device, alias)?;
        let own = |m: &str| m == s.measurement;
        if (!own(alias) && self.series(&s.device, alias).is_some())
            || self.aliased(&s.device, alias).is_some_and(|m| !own(m))
            || batch.iter().any(|o| {
                o.device == s.device
                    && !own(&o.measurement)
                    && (o.measurement == alias || o.meta.alias.as_deref() == Some(alias))
            })
        {
            return Err(taken(alias, TAKEN));
        }
        Ok(())
    }

    /// Every series, in path order: (device, measurement, record).
    pub fn all_series(&self) -> impl Iterator<Item = (&str, &str, SeriesRecord)> {
        self.series
            .iter()
            .map(|((d, m), r)| (d.as_str(), m.as_str(), *r))
    }

    /// The series with a declared encoding or compressor, in path order, from an index (no pass
    /// over every series).
    pub fn declared_codec_series(&self) -> impl Iterator<Item = (&str, &str, SeriesRecord)> {
        self.declared_codecs.iter().map(|key| {
            let record = self.series[key];
            (key.0.as_str(), key.1.as_str(), record)
        })
    }

    /// The usable series of a device (not pending delete, database not being dropped).
    pub fn usable_series_of(&self, device: &str) -> Vec<(String, DataType)> {
        if self.database_of(device).is_none_or(|(_, pending)| pending) {
            return Vec::new();
        }
        let start = (device.to_string(), String::new());
        self.series
            .range(start..)
            .take_while(|((d, _), _)| d == device)
            .filter(|(_, r)| !r.pending_delete)
            .map(|((_, m), r)| (m.clone(), r.data_type))
            .collect()
    }

    /// The region a partition slot maps to.
    pub fn partition(&self, database: &str, series_slot: u32, time_slot: i64) -> Option<u64> {
        self.partitions
            .get(&(database.to_string(), series_slot, time_slot))
            .copied()
    }

    /// Every partition entry of a database: (series slot, time slot, region).
    pub fn partitions_of(&self, database: &str) -> Vec<(u32, i64, u64)> {
        let db = database.to_string();
        self.partitions
            .range((db.clone(), 0, i64::MIN)..=(db, u32::MAX, i64::MAX))
            .map(|((_, s, t), r)| (*s, *t, *r))
            .collect()
    }

    /// How many partition entries a database holds (what `cn_database_partitions_max` caps).
    pub fn partition_count(&self, database: &str) -> u64 {
        self.index.database(database).map_or(0, |d| d.partitions)
    }

    /// The region group holding a series slot of a database in every time slot, if any.
    pub fn series_slot_region(&self, database: &str, series_slot: u32) -> Option<u64> {
        self.index.series_slot_region(database, series_slot)
    }

    /// Whether the allocation index is exactly what the partition table and the region groups
    /// give, or why not. A pass over both: for tests and debug assertions, never on apply.
    pub fn check_index(&self) -> Result<(), String> {
        let rebuilt = PartitionIndex::build(&self.partitions, &self.regions)?;
        if rebuilt != self.index {
            return Err(format!(
                "the allocation index drifted from the partition table: kept {:?}, rebuilt {:?}",
                self.index, rebuilt
            ));
        }
        Ok(())
    }

    /// Panics unless [`MetadataState::check_index`] holds (tests).
    pub fn assert_index_consistent(&self) {
        if let Err(e) = self.check_index() {
            panic!("{e}");
        }
    }

    /// A region group.
    pub fn region(&self, id: u64) -> Option<&RegionGroup> {
        self.regions.get(&id)
    }

    /// True when region group `id` was allocated here and has since been deleted (a finished
    /// DROP DATABASE): the positive signal on which a DataNode removes its replica for good.
    ///
    /// Region ids are allocated in increasing order (`next_region_id`, never reused) and a group
    /// leaves `regions` only when DROP DATABASE finishes, so "below `next_region_id` and absent"
    /// can only become true and never false again as entries apply: any applied state, however
    /// far behind the leader's, tells only the truth. A state that predates the allocation of
    /// `id` answers false. Id 0 is never allocated.
    pub fn region_dropped(&self, id: u64) -> bool {
        id != 0 && id < self.next_region_id && !self.regions.contains_key(&id)
    }

    /// Every region group, by id.
    pub fn regions(&self) -> impl Iterator<Item = &RegionGroup> {
        self.regions.values()
    }

    /// Region `id`'s migration in progress: `(from, to)`.
    pub fn region_migration(&self, id: u64) -> Option<(u64, u64)> {
        self.migrations.get(&id).copied()
    }

    /// Every migration in progress: `(region, from, to)`.
    pub fn migrations(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.migrations.iter().map(|(r, (f, t))| (*r, *f, *t))
    }

    /// The migrations that replace DataNodes which came back as new nodes: for every region
    /// replica on a DataNode `old` whose internal address a newer DataNode registered from
    /// (a node that lost its data directory registers anew, REVIEW H3), `(region, old, new)`,
    /// when `new` is Running and not already a replica. A region migrating already is due only
    /// when its target was itself superseded so (wiped again before the migration finished):
    /// the migration is then retargeted from the same `from`. The ConfigNode leader begins these.
    ///
    /// And for every region replica on a DataNode being removed (REMOVE DATANODE), a migration
    /// to the Running DataNode holding the fewest replicas (and migration targets) that holds
    /// none of the region's.
    pub fn replacements_due(&self) -> Vec<(u64, u64, u64)> {
        let mut load: BTreeMap<u64, usize> = self
            .data_nodes
            .values()
            .filter(|n| n.status == NodeStatus::Running)
            .map(|n| (n.id, 0))
            .collect();
        let holders = self
            .regions
            .values()
            .flat_map(|r| r.replicas.iter())
            .chain(self.migrations.values().map(|(_, to)| to));
        for n in holders {
            if let Some(l) = load.get_mut(n) {
                *l += 1;
            }
        }
        // One pass over the registry rather than one per replica.
        let superseded: BTreeMap<u64, u64> = self
            .data_nodes
            .keys()
            .filter_map(|&id| Some((id, self.superseding(id)?)))
            .collect();
        let mut due = Vec::new();
        for r in self.regions.values() {
            if let Some(&(from, to)) = self.migrations.get(&r.id) {
                if let Some(&new) = superseded.get(&to) {
                    if !r.replicas.contains(&new) {
                        due.push((r.id, from, new));
                    }
                }
                continue;
            }
            for &old in &r.replicas {
                let new = superseded.get(&old).copied().or_else(|| {
                    let removing = self
                        .data_nodes
                        .get(&old)
                        .is_some_and(|n| n.status == NodeStatus::Removing);
                    removing.then_some(())?;
                    load.iter()
                        .filter(|(n, _)| !r.replicas.contains(n))
                        .min_by_key(|(n, l)| (**l, **n))
                        .map(|(n, _)| *n)
                });
                if let Some(new) = new.filter(|new| !r.replicas.contains(new)) {
                    if let Some(l) = load.get_mut(&new) {
                        *l += 1;
                    }
                    due.push((r.id, old, new));
                    break;
                }
            }
        }
        due
    }

    /// Of `hosted`, the regions DataNode `node` has left for good: it is being removed (REMOVE
    /// DATANODE, never a replica target again) and is neither a replica nor a migration's target
    /// of the region, which still exists. (A dropped region is [`MetadataState::region_dropped`].)
    pub fn left_regions(&self, node: u64, hosted: &[u64]) -> Vec<u64> {
        let removing = self
            .data_nodes
            .get(&node)
            .is_some_and(|n| n.status == NodeStatus::Removing);
        if !removing {
            return Vec::new();
        }
        hosted
            .iter()
            .copied()
            .filter(|id| {
                self.regions.get(id).is_some_and(|r| {
                    !r.replicas.contains(&node)
                        && self.migrations.get(id).is_none_or(|(_, to)| *to != node)
                })
            })
            .collect()
    }

    /// The newest Running DataNode registered from `node`'s internal address after it, if one
    /// is: `node` lost its data and came back as that one.
    fn superseding(&self, node: u64) -> Option<u64> {
        let address = &self.data_nodes.get(&node)?.internal_address;
        self.data_nodes
            .values()
            .filter(|n| n.id > node && n.internal_address == *address)
            .max_by_key(|n| n.id)
            .filter(|n| n.status == NodeStatus::Running)
            .map(|n| n.id)
    }

    /// Pending fence operations.
    pub fn operations(&self) -> impl Iterator<Item = (u64, &OperationKind)> {
        self.operations.iter().map(|(id, k)| (*id, k))
    }

    /// Whether `username` is a user (root always is).
    pub fn user_exists(&self, username: &str) -> bool {
        username == ROOT_USER || self.users.contains_key(username)
    }

    /// What `username`'s password is checked against; `None` when it is not a user.
    pub fn user_password(&self, username: &str) -> Option<StoredPassword> {
        match self.users.get(username) {
            Some(hash) => Some(StoredPassword::Hash(hash.clone())),
            None if username == ROOT_USER => Some(StoredPassword::RootInitial),
            None => None,
        }
    }

    /// A fingerprint of the users and their stored hashes: it changes whenever a user is
    /// created, dropped or given a new password (a new salt makes a new hash even for the same
    /// password). Heartbeats carry it, so DataNodes forget the passwords they remembered.
    pub fn users_fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.users.hash(&mut hasher);
        hasher.finish()
    }

    /// Every user name, root included, sorted.
    pub fn user_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.users.keys().map(String::as_str).collect();
        if !self.users.contains_key(ROOT_USER) {
            let at = names.partition_point(|n| *n < ROOT_USER);
            names.insert(at, ROOT_USER);
        }
        names
    }

    /// Applies the committed command at `index`. A refusal changes nothing but the applied index.
    ///
    /// Apply is total over every order in which the leader can commit legal requests; how the
    /// fence operations of overlapping targets interleave:
    ///
    /// - **DELETE TIMESERIES begun, then DROP DATABASE of its database begun.** Both are
    ///   accepted: refusing the drop because one of its series is being deleted would fail a
    ///   DROP DATABASE for a reason the user did not ask about. Whichever finishes first wins:
    ///   - the delete first: its series go, then the drop takes the rest;
    ///   - the drop first: it removes the database with every series in it, pending ones
    ///     included, and takes those series out of every pending DELETE TIMESERIES. The
    ///     delete's own Finish then removes what is left (nothing, when all its series were
    ///     there) and the operation is no longer pending, so its client is answered success.
    ///     That is what an IoTDB or CockroachDB user expects: the series are gone and their
    ///     data deleted, by the drop's own invalidation and region deletion, which completed
    ///     before the drop's Finish was proposed. The delete did not fail; it was overtaken.
    ///     Merely skipping missing series at the delete's Finish would not do: once the
    ///     database and a series of the same name are created again, the old delete's Finish
    ///     would remove the new series, and a leader resuming the old delete would order the
    ///     new data's deletion in the new database's regions.
    /// - **DROP DATABASE begun, then DELETE TIMESERIES of one of its series, CREATE TIMESERIES
    ///   in it (also by auto-creation), CREATE DATABASE of it or an allocation in it.** Refused
    ///   at apply with [`MetadataError::PendingDelete`] naming the database (507 "root.sg is
    ///   being deleted", like CockroachDB's "relation is being dropped"): the pending drop
    ///   already hides the database from every new request, and the outcome is the same
    ///   whatever the drop's timing.
    /// - **Two DROP DATABASE of one database, or a DELETE TIMESERIES of a series already
    ///   pending delete.** The second Begin is refused with `PendingDelete`. (The service first
    ///   joins a pending operation of exactly the same kind and target, so a client's retry
    ///   waits for it and is answered success.)
    /// - **FinishOperation of an operation that is not pending** (finished already, e.g. by a
    ///   deposed leader's runner): refused with [`MetadataError::OperationNotFound`], changing
    ///   nothing.
    ///
    /// The user commands change no metadata a DataNode caches, so they leave the metadata
    /// version alone. Who may run them is the leader's check before it proposes (only root
    /// manages other users); apply checks what the state alone decides: the name and hash
    /// rules, existence, and that root is never dropped.
    pub fn apply(&mut self, index: u64, command: &Command) -> Result<CommandResult, MetadataError> {
        assert!(
            index > self.applied_index,
            "entry {index} applied after {}",
            self.applied_index
        );
        self.applied_index = index;
        self.apply_inner(command)
    }

    /// Consumes an entry that does not decode: only the applied index moves.
    pub fn skip(&mut self, index: u64) {
        assert!(
            index > self.applied_index,
            "entry {index} skipped after {}",
            self.applied_index
        );
        self.applied_index = index;
    }

    /// Any change DataNodes could have cached moves the version.
    fn bump(&mut self) {
        self.metadata_version += 1;
    }

    fn apply_inner(&mut self, command: &Command) -> Result<CommandResult, MetadataError> {
        match command {
            Command::RegisterDataNode {
                data_node_id,
                internal_address,
                rpc_address,
            } => self.register(*data_node_id, internal_address, rpc_address, true),
            Command::RegisterNewDataNode {
                internal_address,
                rpc_address,
            } => self.register(0, internal_address, rpc_address, false),
            Command::ReregisterDataNode {
                data_node_id,
                stored_epoch,
                internal_address,
                rpc_address,
            } => self.reregister(*data_node_id, *stored_epoch, internal_address, rpc_address),
            Command::ConfirmIncarnation {
                data_node_id,
                incarnation_epoch,
            } => self.confirm_incarnation(*data_node_id, *incarnation_epoch),
            Command::SetDataNodeStatus {
                data_node_id,
                status,
            } => {
                let node = self
                    .data_nodes
                    .get_mut(data_node_id)
                    .ok_or(MetadataError::DataNodeNotFound(*data_node_id))?;
                if node.status != *status {
                    node.status = *status;
                    self.bump();
                }
                Ok(CommandResult::Done)
            }
            Command::CreateDatabase { database } => {
                self.create_database(database)?;
                Ok(CommandResult::Done)
            }
            Command::CreateTimeseries {
                series,
                auto_create,
            } => self.create_timeseries(series, *auto_create),
            Command::AllocatePartitions {
                database,
                slots,
                replication_factor,
                region_groups_max,
                database_partitions_max,
            } => self.allocate(
                database,
                slots,
                *replication_factor,
                *region_groups_max,
                *database_partitions_max,
            ),
            Command::BeginDeleteTimeseries { series } => self.begin_delete_timeseries(series),
            Command::BeginDropTable { database, table } => self.begin_drop_table(database, table),
            Command::BeginDropDatabase { database } => {
                self.check_operations_limit()?;
                match self.databases.get_mut(database) {
                    None => return Err(MetadataError::DatabaseNotFound(database.clone())),
                    Some(true) => return Err(MetadataError::PendingDelete(database.clone())),
                    Some(pending) => *pending = true,
                }
                Ok(self.begin_operation(OperationKind::DropDatabase(database.clone())))
            }
            Command::BeginSetTtl { database, ttl_ms } => {
                self.check_operations_limit()?;
                self.check_live_database(database)?;
                match ttl_ms {
                    Some(t) if *t <= 0 => return Err(MetadataError::IllegalTtl(*t)),
                    Some(t) => self.ttls.insert(database.clone(), *t),
                    None => self.ttls.remove(database),
                };
                Ok(self.begin_operation(OperationKind::SetTtl(database.clone())))
            }
            Command::BeginRegionMigration {
                region_id,
                from,
                to,
            } => {
                let refuse = |reason: String| {
                    Err(MetadataError::MigrationRefused {
                        region_id: *region_id,
                        reason,
                    })
                };
                let Some(region) = self.regions.get(region_id) else {
                    return refuse("no such region".into());
                };
                if let Some(&(f, t)) = self.migrations.get(region_id) {
                    // Only a retarget: same `from`, and the target lost its data since.
                    if f != *from || self.superseding(t) != Some(*to) {
                        return refuse(format!("moving from {f} to {t} already"));
                    }
                }
                if !region.replicas.contains(from) {
                    return refuse(format!("DataNode {from} holds no replica"));
                }
                if region.replicas.contains(to) {
                    return refuse(format!("DataNode {to} holds a replica already"));
                }
                match self.data_nodes.get(to) {
                    Some(n) if n.status == NodeStatus::Running => {}
                    Some(n) => {
                        return refuse(format!("DataNode {to} is {}", n.status.name()));
                    }
                    None => return Err(MetadataError::DataNodeNotFound(*to)),
                }
                self.migrations.insert(*region_id, (*from, *to));
                self.bump();
                Ok(CommandResult::Done)
            }
            Command::RemoveDataNode { data_node_id } => {
                let node = self
                    .data_nodes
                    .get(data_node_id)
                    .ok_or(MetadataError::DataNodeNotFound(*data_node_id))?;
                if node.status == NodeStatus::Removing {
                    return Ok(CommandResult::Done);
                }
                let running: Vec<u64> = self
                    .data_nodes
                    .values()
                    .filter(|n| n.status == NodeStatus::Running && n.id != *data_node_id)
                    .map(|n| n.id)
                    .collect();
                for r in self.regions.values() {
                    if r.replicas.contains(data_node_id)
                        && running.iter().all(|n| r.replicas.contains(n))
                    {
                        return Err(MetadataError::MigrationRefused {
                            region_id: r.id,
                            reason: format!(
                                "DataNode {data_node_id} cannot be removed: each of the {} other \
                                 Running DataNodes holds a replica of the region already; add a \
                                 DataNode first",
                                running.len()
                            ),
                        });
                    }
                }
                self.data_nodes
                    .get_mut(data_node_id)
                    .expect("looked up above")
                    .status = NodeStatus::Removing;
                self.bump();
                Ok(CommandResult::Done)
            }
            Command::FinishRegionMigration {
                region_id,
                from,
                to,
            } => {
                if self.migrations.get(region_id) != Some(&(*from, *to)) {
                    return Err(MetadataError::MigrationRefused {
                        region_id: *region_id,
                        reason: format!("no migration from {from} to {to} in progress"),
                    });
                }
                self.migrations.remove(region_id);
                let region = self
                    .regions
                    .get_mut(region_id)
                    .expect("a migrating region exists (a drop removes its migration)");
                for replica in region.replicas.iter_mut() {
                    if replica == from {
                        *replica = *to;
                    }
                }
                if region.preferred_leader == *from {
                    region.preferred_leader = *to;
                }
                self.bump();
                Ok(CommandResult::Done)
            }
            Command::CreateUser {
                username,
                password_hash,
            } => {
                check_user(username, Some(password_hash))?;
                if self.user_exists(username) {
                    return Err(MetadataError::UserExists(username.clone()));
                }
                // root counts though absent from the table until its password is set.
                let users = self.users.len() + usize::from(!self.users.contains_key(ROOT_USER));
                if users >= USERS_MAX {
                    return Err(MetadataError::Limit(format!("{USERS_MAX} users")));
                }
                self.users.insert(username.clone(), password_hash.clone());
                Ok(CommandResult::Done)
            }
            Command::DropUser { username } => {
                check_user(username, None)?;
                if username == ROOT_USER {
                    return Err(MetadataError::NoPermission(
                        "the root user cannot be dropped".into(),
                    ));
                }
                self.users
                    .remove(username)
                    .ok_or_else(|| MetadataError::UserNotFound(username.clone()))?;
                Ok(CommandResult::Done)
            }
            Command::SetUserPassword {
                username,
                password_hash,
            } => {
                check_user(username, Some(password_hash))?;
                if !self.user_exists(username) {
                    return Err(MetadataError::UserNotFound(username.clone()));
                }
                self.users.insert(username.clone(), password_hash.clone());
                Ok(CommandResult::Done)
            }
            Command::CreateTable {
                database,
                table,
                if_not_exists,
                extend,
            } => {
                self.create_table(database, table, *if_not_exists, *extend)?;
                Ok(CommandResult::Done)
            }
            Command::SetDeviceAttributes {
                database,
                table,
                table_version,
                devices,
            } => {
                self.set_device_attributes(database, table, *table_version, devices)?;
                Ok(CommandResult::Done)
            }
            Command::CreateTableSeries { origin, series } => {
                self.create_table_series(origin, series)
            }
            Command::FinishOperation { operation_id } => {
                let kind = self
                    .operations
                    .remove(operation_id)
                    .ok_or(MetadataError::OperationNotFound(*operation_id))?;
                match kind {
                    OperationKind::DeleteTimeseries(series)
                    | OperationKind::DropTable { series, .. } => {
                        // Only series still its own are listed (a finished DROP DATABASE took
                        // the others out), so each one is here and pending.
                        for key in series {
                            let removed = self.series.remove(&key);
                            self.declared_codecs.remove(&key);
                            self.series_meta.remove(&key);
                            assert!(
                                removed.is_some_and(|r| r.pending_delete),
                                "series {key:?} of operation {operation_id} was not pending delete"
                            );
                        }
                    }
                    OperationKind::DropDatabase(database) => {
                        let pending = self.databases.remove(&database);
                        assert_eq!(
                            pending,
                            Some(true),
                            "database {database} of operation {operation_id} was not pending"
                        );
                        self.series
                            .retain(|(device, _), _| !is_under(device, &database));
                        self.declared_codecs
                            .retain(|(device, _)| !is_under(device, &database));
                        self.series_meta
                            .retain(|(device, _), _| !is_under(device, &database));
                        self.forget_vanished_deletions();
                        self.partitions.retain(|(db, _, _), _| *db != database);
                        self.regions.retain(|_, r| r.database != database);
                        let regions = &self.regions;
                        self.migrations.retain(|id, _| regions.contains_key(id));
                        self.index.drop_database(&database);
                        self.ttls.remove(&database);
                        self.tables.retain(|(db, _), _| *db != database);
                    }
                    OperationKind::SetTtl(_) => {}
                }
                self.bump();
                Ok(CommandResult::Done)
            }
        }
    }

    /// CREATE TABLE, or an insert's extension of a table (see [`Command::CreateTable`]).
    fn create_table(
        &mut self,
        database: &str,
        table: &TableSchema,
        if_not_exists: bool,
        extend: bool,
    ) -> Result<(), MetadataError> {
        self.check_live_database(database)?;
        let illegal = |reason: String| MetadataError::IllegalTable(reason);
        table::check_name(&table.name).map_err(illegal)?;
        if table.ttl_ms.is_some_and(|t| t <= 0) {
            return Err(MetadataError::IllegalTtl(table.ttl_ms.unwrap_or(0)));
        }
        let mut names = BTreeSet::new();
        for c in &table.columns {
            table::check_name(&c.name).map_err(illegal)?;
            if !names.insert(c.name.as_str()) {
                return Err(illegal(format!("column {} named twice", c.name)));
            }
            if c.category != Category::Field && c.data_type != common::DataType::String {
                return Err(illegal(format!(
                    "{} column {} must be STRING, not {}",
                    c.category.name(),
                    c.name,
                    c.data_type
                )));
            }
        }
        let key = (database.to_string(), table.name.clone());
        if self.table_drop_pending(database, &table.name) {
            // As CockroachDB's "relation is being dropped": the drop's deletion covers the
            // table's whole prefix, so a table of the name may exist again only after it.
            return Err(MetadataError::PendingDelete(format!(
                "{database}.{}",
                table.name
            )));
        }
        let Some(existing) = self.tables.get_mut(&key) else {
            if table.columns.len() > table::COLUMNS_MAX {
                return Err(MetadataError::Limit(format!(
                    "{} columns in a table",
                    table::COLUMNS_MAX
                )));
            }
            if self.tables.len() >= TABLES_MAX {
                return Err(MetadataError::Limit(format!("{TABLES_MAX} tables")));
            }
            self.bump();
            self.tables.insert(
                key,
                TableRecord {
                    schema: table.clone(),
                    created_version: self.metadata_version,
                    devices: BTreeMap::new(),
                },
            );
            return Ok(());
        };
        if !extend {
            return if if_not_exists {
                Ok(())
            } else {
                Err(MetadataError::TableExists(format!(
                    "{database}.{}",
                    table.name
                )))
            };
        }
        let mut added: Vec<TableColumn> = Vec::new();
        for c in &table.columns {
            match existing.schema.column(&c.name) {
                Some(have) if have.category == c.category && have.data_type == c.data_type => {}
                Some(have) => {
                    return Err(MetadataError::ColumnMismatch(format!(
                        "column {} of table {} is a {} {} column, not {} {}",
                        c.name,
                        table.name,
                        have.data_type,
                        have.category.name(),
                        c.data_type,
                        c.category.name()
                    )))
                }
                None => added.push(c.clone()),
            }
        }
        if added.is_empty() {
            return Ok(());
        }
        if existing.schema.columns.len() + added.len() > table::COLUMNS_MAX {
            return Err(MetadataError::Limit(format!(
                "{} columns in a table",
                table::COLUMNS_MAX
            )));
        }
        existing.schema.columns.extend(added);
        self.bump();
        Ok(())
    }

    /// Sets attributes of devices of a table, each replacing the device's last value; refused
    /// unless the table is the incarnation `table_version` (0: any).
    fn set_device_attributes(
        &mut self,
        database: &str,
        table: &str,
        table_version: u64,
        devices: &[DeviceAttributes],
    ) -> Result<(), MetadataError> {
        self.check_table_incarnation(database, table, table_version)?;
        let key = (database.to_string(), table.to_string());
        let record = self
            .tables
            .get_mut(&key)
            .ok_or_else(|| MetadataError::TableNotFound(format!("{database}.{table}")))?;
        let tags = record.schema.tags().count();
        for (values, attributes) in devices {
            if values.len() > tags {
                return Err(MetadataError::IllegalTable(format!(
                    "{} tag values for table {table} of {tags} tags",
                    values.len()
                )));
            }
            for (name, value) in attributes {
                if record
                    .schema
                    .column(name)
                    .is_none_or(|c| c.category != Category::Attribute)
                {
                    return Err(MetadataError::IllegalTable(format!(
                        "table {table} has no attribute {name}"
                    )));
                }
                if value.len() > table::ATTRIBUTE_BYTES_MAX {
                    return Err(MetadataError::IllegalTable(format!(
                        "attribute {name}: {} bytes, at most {}",
                        value.len(),
                        table::ATTRIBUTE_BYTES_MAX
                    )));
                }
            }
        }
        let trimmed = |values: &[Option<String>]| table::identifying_tags(values).to_vec();
        let new: BTreeSet<Vec<Option<String>>> = devices
            .iter()
            .map(|(values, _)| trimmed(values))
            .filter(|d| !record.devices.contains_key(d))
            .collect();
        if record.devices.len() + new.len() > TABLE_DEVICES_MAX {
            return Err(MetadataError::Limit(format!(
                "{TABLE_DEVICES_MAX} devices with attributes in a table"
            )));
        }
        for (values, attributes) in devices {
            let device = trimmed(values);
            record
                .devices
                .entry(device)
                .or_default()
                .extend(attributes.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Ok(())
    }

    /// 550 unless `table` of `database` exists as the incarnation `created_version` (0: any):
    /// a write that read another incarnation's schema (one dropped since) derived its devices
    /// and columns from metadata that no longer holds.
    pub fn check_table_incarnation(
        &self,
        database: &str,
        table: &str,
        created_version: u64,
    ) -> Result<(), MetadataError> {
        match self.table(database, table) {
            Some(t) if created_version == 0 || t.created_version == created_version => Ok(()),
            Some(_) => Err(MetadataError::TableNotFound(format!(
                "{database}.{table} (dropped and created again since the write read its \
                 schema; retry)"
            ))),
            None => Err(MetadataError::TableNotFound(format!("{database}.{table}"))),
        }
    }

    /// True while a DROP TABLE of `table` of `database` is pending.
    fn table_drop_pending(&self, database: &str, table: &str) -> bool {
        self.operations.values().any(|k| {
            matches!(k, OperationKind::DropTable { database: d, table: t, .. }
                if d == database && t == table)
        })
    }

    /// The pending DROP TABLE whose table's devices `device` would be one of, as its prefix.
    fn dropping_table_of(&self, device: &str) -> Option<String> {
        self.operations.values().find_map(|k| match k {
            OperationKind::DropTable {
                database, table, ..
            } => {
                let prefix = format!("{database}.{table}");
                (device == prefix || is_under(device, &prefix)).then_some(prefix)
            }
            _ => None,
        })
    }

    /// CreateTableSeries: the series a table write needs, only under the incarnation it read.
    fn create_table_series(
        &mut self,
        origin: &TableOrigin,
        series: &[SeriesSpec],
    ) -> Result<CommandResult, MetadataError> {
        self.check_table_incarnation(&origin.database, &origin.table, origin.created_version)?;
        let prefix = format!("{}.{}", origin.database, origin.table);
        if let Some(s) = series
            .iter()
            .find(|s| s.device != prefix && !is_under(&s.device, &prefix))
        {
            return Err(MetadataError::IllegalTable(format!(
                "device {} is not a device of table {prefix}",
                s.device
            )));
        }
        self.create_timeseries(series, true)
    }

    /// The tables of `database`, by name.
    pub fn tables_of<'a>(
        &'a self,
        database: &'a str,
    ) -> impl Iterator<Item = &'a TableRecord> + 'a {
        self.tables
            .range((database.to_string(), String::new())..)
            .take_while(move |((db, _), _)| db == database)
            .map(|(_, t)| t)
    }

    /// One table.
    pub fn table(&self, database: &str, table: &str) -> Option<&TableRecord> {
        self.tables.get(&(database.to_string(), table.to_string()))
    }

    fn create_database(&mut self, database: &str) -> Result<(), MetadataError> {
        DatabasePath::parse(database, PATH_BYTES_MAX).map_err(illegal)?;
        if let Some(pending) = self.databases.get(database) {
            return Err(if *pending {
                MetadataError::PendingDelete(database.to_string())
            } else {
                MetadataError::DatabaseExists(database.to_string())
            });
        }
        if let Some(other) = self
            .databases
            .keys()
            .find(|db| is_under(database, db) || is_under(db, database))
        {
            return Err(MetadataError::DatabaseOverlap(
                database.to_string(),
                other.clone(),
            ));
        }
        self.databases.insert(database.to_string(), false);
        self.bump();
        Ok(())
    }

    fn create_timeseries(
        &mut self,
        series: &[SeriesSpec],
        auto_create: bool,
    ) -> Result<CommandResult, MetadataError> {
        // Validate everything first so that a refused command changes nothing.
        let mut new_databases = BTreeSet::new();
        let aliased_batch: &[SeriesSpec] = if series.iter().any(|s| s.meta.alias.is_some()) {
            series
        } else {
            &[]
        };
        for s in series {
            let device = DevicePath::parse(&s.device, PATH_BYTES_MAX).map_err(illegal)?;
            validate_measurement(&s.device, &s.measurement)?;
            if let Some(prefix) = self.dropping_table_of(&s.device) {
                // The drop deletes every device under the table's prefix, those created after
                // its Begin included: none may be created until it finished.
                return Err(MetadataError::PendingDelete(prefix));
            }
            match self.database_of(&s.device) {
                Some((db, true)) => return Err(MetadataError::PendingDelete(db.to_string())),
                Some(_) => {}
                None if auto_create => {
                    let level1 = device.level1_database().into_string();
                    if let Some(inner) = self.databases.keys().find(|db| is_under(db, &level1)) {
                        return Err(MetadataError::DatabaseOverlap(level1, inner.clone()));
                    }
                    new_databases.insert(level1);
                }
                None => return Err(MetadataError::DatabaseNotFound(s.device.clone())),
            }
            self.check_names(s, aliased_batch)?;
            if let Some(existing) = self.series(&s.device, &s.measurement) {
                let path = format!("{}.{}", s.device, s.measurement);
                if existing.pending_delete {
                    return Err(MetadataError::PendingDelete(path));
                }
                if existing.data_type != s.data_type {
                    return Err(MetadataError::TypeMismatch {
                        path,
                        existing: existing.data_type,
                        requested: s.data_type,
                    });
                }
                if !auto_create {
                    return Err(MetadataError::Limit(format!(
                        "series {path} already exists"
                    )));
                }
            }
        }
        if self.series.len() + series.len() > SERIES_MAX {
            return Err(MetadataError::Limit(format!("{SERIES_MAX} series")));
        }
        for db in new_databases {
            // Checked above: no database covers or lies inside it, so this cannot fail.
            self.create_database(&db)
                .unwrap_or_else(|e| panic!("auto-creating checked database {db}: {e}"));
        }
        let mut changed = false;
        for s in series {
            let key = (s.device.clone(), s.measurement.clone());
            if let std::collections::btree_map::Entry::Vacant(v) = self.series.entry(key) {
                if s.codec.is_declared() {
                    self.declared_codecs.insert(v.key().clone());
                }
                if !s.meta.is_empty() {
                    self.series_meta.insert(v.key().clone(), s.meta.clone());
                }
                v.insert(SeriesRecord {
                    data_type: s.data_type,
                    pending_delete: false,
                    codec: s.codec,
                });
                changed = true;
            }
        }
        if changed {
            self.bump();
        }
        Ok(CommandResult::Done)
    }

    fn allocate(
        &mut self,
        database: &str,
        slots: &[(u32, i64)],
        replication_factor: u32,
        region_groups_max: u32,
        database_partitions_max: u64,
    ) -> Result<CommandResult, MetadataError> {
        self.check_live_database(database)?;
        if replication_factor == 0 || replication_factor > REPLICATION_FACTOR_MAX {
            return Err(MetadataError::Limit(format!(
                "replication factor {replication_factor} outside 1..={REPLICATION_FACTOR_MAX}"
            )));
        }
        let running = self
            .data_nodes
            .values()
            .filter(|n| n.status == NodeStatus::Running)
            .count();
        // Checked once, before anything changes, so a refused allocation changes nothing.
        let can_create = running >= replication_factor as usize
            && self.regions.len() + slots.len() <= REGION_GROUPS_MAX;
        let mut new: BTreeSet<(u32, i64)> = BTreeSet::new();
        for &(series_slot, time_slot) in slots {
            let key = (database.to_string(), series_slot, time_slot);
            if !self.partitions.contains_key(&key) {
                new.insert((series_slot, time_slot));
            }
        }
        let held = self.partition_count(database);
        let wanted = new.len() as u64;
        if held.saturating_add(wanted) > database_partitions_max {
            return Err(MetadataError::PartitionsLimit {
                database: database.to_string(),
                held,
                wanted,
                max: database_partitions_max,
            });
        }
        let mut created = Vec::new();
        // In the command's order, which decides the groups: a replay must place every slot
        // where the first apply did.
        for &(series_slot, time_slot) in slots {
            // Mapped before this command, or earlier in it.
            if !new.remove(&(series_slot, time_slot)) {
                continue;
            }
            // A series slot stays in one region group across time slots: a device's data and
            // its deletions then live in one raft log.
            let region = match self.index.series_slot_region(database, series_slot) {
                Some(region) => region,
                None => {
                    let groups = self.index.database(database).map_or(0, |d| d.groups.len());
                    if groups == 0 && !can_create {
                        // Nothing was inserted yet: with no group, every slot needs one.
                        return Err(MetadataError::NotEnoughDataNodes {
                            running,
                            replication_factor,
                        });
                    }
                    if can_create && groups < region_groups_max.max(1) as usize {
                        let id = self.create_region_group(database, replication_factor);
                        created.push(id);
                        id
                    } else {
                        self.index
                            .least_loaded(database)
                            .expect("a database with at least one group")
                    }
                }
            };
            self.partitions
                .insert((database.to_string(), series_slot, time_slot), region);
            self.index.add_partition(database, series_slot, region);
        }
        debug_assert!(new.is_empty(), "every new slot was placed");
        if !slots.is_empty() {
            self.bump();
        }
        Ok(CommandResult::RegionsCreated(created))
    }

    /// Places `replication_factor` replicas on the Running DataNodes holding the fewest replicas
    /// (ties to the lowest id), and the preferred leader on the replica leading the fewest groups.
    fn create_region_group(&mut self, database: &str, replication_factor: u32) -> u64 {
        let mut replicas_on: BTreeMap<u64, (usize, usize)> = self
            .data_nodes
            .values()
            .filter(|n| n.status == NodeStatus::Running)
            .map(|n| (n.id, (0, 0)))
            .collect();
        assert!(
            replicas_on.len() >= replication_factor as usize,
            "{} Running DataNodes for replication factor {replication_factor}",
            replicas_on.len()
        );
        for r in self.regions.values() {
            for n in &r.replicas {
                if let Some(load) = replicas_on.get_mut(n) {
                    load.0 += 1;
                }
            }
            if let Some(load) = replicas_on.get_mut(&r.preferred_leader) {
                load.1 += 1;
            }
        }
        let mut by_load: Vec<(usize, u64)> = replicas_on.iter().map(|(id, l)| (l.0, *id)).collect();
        by_load.sort();
        let replicas: Vec<u64> = by_load
            .iter()
            .take(replication_factor as usize)
            .map(|(_, id)| *id)
            .collect();
        let preferred_leader = *replicas
            .iter()
            .min_by_key(|id| (replicas_on[id].1, **id))
            .expect("at least one replica");
        let id = self.next_region_id;
        self.next_region_id += 1;
        self.regions.insert(
            id,
            RegionGroup {
                id,
                database: database.to_string(),
                replicas,
                preferred_leader,
            },
        );
        self.index.add_group(database, id);
        id
    }

    /// Refuses a database that does not exist (507) or is being dropped.
    fn check_live_database(&self, database: &str) -> Result<(), MetadataError> {
        match self.databases.get(database) {
            None => Err(MetadataError::DatabaseNotFound(database.to_string())),
            Some(true) => Err(MetadataError::PendingDelete(database.to_string())),
            Some(false) => Ok(()),
        }
    }

    fn check_operations_limit(&self) -> Result<(), MetadataError> {
        if self.operations.len() >= OPERATIONS_PENDING_MAX {
            return Err(MetadataError::Limit(format!(
                "{OPERATIONS_PENDING_MAX} fence operations pending"
            )));
        }
        Ok(())
    }

    fn begin_operation(&mut self, kind: OperationKind) -> CommandResult {
        let id = self.next_operation_id;
        self.next_operation_id += 1;
        self.operations.insert(id, kind);
        self.bump();
        CommandResult::OperationBegun(id)
    }

    fn begin_delete_timeseries(
        &mut self,
        series: &[(String, String)],
    ) -> Result<CommandResult, MetadataError> {
        self.check_operations_limit()?;
        let unique: BTreeSet<(String, String)> = series.iter().cloned().collect();
        for (device, measurement) in &unique {
            let path = format!("{device}.{measurement}");
            match self.series.get(&(device.clone(), measurement.clone())) {
                None => return Err(MetadataError::SeriesNotFound(path)),
                Some(r) if r.pending_delete => return Err(MetadataError::PendingDelete(path)),
                Some(_) => {}
            }
            if let Some((db, true)) = self.database_of(device) {
                return Err(MetadataError::PendingDelete(db.to_string()));
            }
        }
        for key in &unique {
            self.series.get_mut(key).expect("checked").pending_delete = true;
        }
        Ok(self.begin_operation(OperationKind::DeleteTimeseries(
            unique.into_iter().collect(),
        )))
    }

    /// DROP TABLE: the table leaves the schema now (a query or SHOW TABLES no longer finds it,
    /// and a CREATE TABLE of its name makes a new one), and the series of its devices that no
    /// other operation is deleting become pending delete, for the operation to delete.
    fn begin_drop_table(
        &mut self,
        database: &str,
        table: &str,
    ) -> Result<CommandResult, MetadataError> {
        self.check_operations_limit()?;
        self.check_live_database(database)?;
        let key = (database.to_string(), table.to_string());
        if !self.tables.contains_key(&key) {
            return Err(MetadataError::TableNotFound(format!("{database}.{table}")));
        }
        // Every check before the first change: a refused command changes nothing.
        let prefix = format!("{database}.{table}");
        let mut series = Vec::new();
        for (key, record) in self
            .series
            .range((prefix.clone(), String::new())..)
            .take_while(|((device, _), _)| device.starts_with(&prefix))
        {
            // The table's device of no tag values is its own path.
            let of_table = key.0 == prefix || is_under(&key.0, &prefix);
            if of_table && !record.pending_delete {
                if series.len() == DROP_TABLE_SERIES_MAX {
                    return Err(MetadataError::Limit(format!(
                        "table {table} has over {DROP_TABLE_SERIES_MAX} series for DROP TABLE; \
                         drop its database instead"
                    )));
                }
                series.push(key.clone());
            }
        }
        self.tables.remove(&key);
        for key in &series {
            self.series.get_mut(key).expect("listed").pending_delete = true;
        }
        Ok(self.begin_operation(OperationKind::DropTable {
            database: database.to_string(),
            table: table.to_string(),
            series,
        }))
    }

    /// Takes out of every pending DELETE TIMESERIES or DROP TABLE the series that are no longer
    /// its to delete: gone (a DROP DATABASE finished first and removed them), not pending delete
    /// (created again since), or listed by a later operation (pending delete again, under that
    /// one).
    ///
    /// At a drop's Finish this takes out exactly the series of the dropped database, since
    /// everything else still holds [`MetadataState::check_operations`]. A snapshot written
    /// by a version without this rule, between a drop's Finish and an overtaken delete's,
    /// still lists removed series; decoding applies the rule so that such a replica reaches
    /// the state that replaying the log reaches, instead of panicking at the delete's Finish.
    fn forget_vanished_deletions(&mut self) {
        let series = &self.series;
        let mut claimed: BTreeSet<&(String, String)> = BTreeSet::new();
        // Latest first: of two operations listing one series, the later one began after the
        // earlier one's series was removed, so the series pending now is the later one's.
        for kind in self.operations.values_mut().rev() {
            if let Some(keys) = kind.series_mut() {
                keys.retain(|key| match series.get_key_value(key) {
                    Some((stored, r)) if r.pending_delete => claimed.insert(stored),
                    _ => false,
                });
            }
        }
    }

    /// Whether the pending operations and the pending flags agree, or why not: every database
    /// pending drop has exactly one DROP DATABASE, and every DROP DATABASE names a pending
    /// database; every series pending delete is listed by exactly one DELETE TIMESERIES, and
    /// every listed series is pending delete. A pass over the series: for tests, snapshot
    /// decoding and debug assertions, never on apply.
    pub fn check_operations(&self) -> Result<(), String> {
        let mut drops: BTreeSet<&str> = BTreeSet::new();
        let mut deletes: BTreeSet<&(String, String)> = BTreeSet::new();
        for (id, kind) in &self.operations {
            match kind {
                OperationKind::DropDatabase(db) => {
                    if self.databases.get(db) != Some(&true) {
                        return Err(format!(
                            "operation {id} drops {db}, which is not pending drop"
                        ));
                    }
                    if !drops.insert(db) {
                        return Err(format!("operation {id} drops {db} a second time"));
                    }
                }
                OperationKind::DeleteTimeseries(keys)
                | OperationKind::DropTable { series: keys, .. } => {
                    for key in keys {
                        if !self.series.get(key).is_some_and(|r| r.pending_delete) {
                            return Err(format!(
                                "operation {id} deletes {key:?}, which is not pending delete"
                            ));
                        }
                        if !deletes.insert(key) {
                            return Err(format!("operation {id} deletes {key:?} a second time"));
                        }
                    }
                }
                // A TTL change flags nothing: its value is recorded at Begin.
                OperationKind::SetTtl(_) => {}
            }
        }
        if let Some((db, _)) = self
            .databases
            .iter()
            .find(|(db, pending)| **pending && !drops.contains(db.as_str()))
        {
            return Err(format!("{db} is pending drop with no operation"));
        }
        if let Some((key, _)) = self
            .series
            .iter()
            .find(|(key, r)| r.pending_delete && !deletes.contains(key))
        {
            return Err(format!("{key:?} is pending delete with no operation"));
        }
        Ok(())
    }

    /// Magic of the snapshot encoding (version 8).
    pub const SNAPSHOT_MAGIC: &'static [u8; 8] = b"FPCNSNP8";
    /// Magic of version 7, still read: tables without their incarnation (read as 0), no
    /// confirmed incarnations (0, none proved).
    pub const SNAPSHOT_MAGIC_V7: &'static [u8; 8] = b"FPCNSNP7";
    /// Magic of version 6, still read: no tables.
    pub const SNAPSHOT_MAGIC_V6: &'static [u8; 8] = b"FPCNSNP6";
    /// Magic of version 5, still read: no aliases, tags or attributes.
    pub const SNAPSHOT_MAGIC_V5: &'static [u8; 8] = b"FPCNSNP5";
    /// Magic of version 4, still read: no users (root alone, password root).
    pub const SNAPSHOT_MAGIC_V4: &'static [u8; 8] = b"FPCNSNP4";
    /// Magic of version 3, still read: no migrations.
    pub const SNAPSHOT_MAGIC_V3: &'static [u8; 8] = b"FPCNSNP3";
    /// Magic of version 2, still read: series without declared encodings.
    pub const SNAPSHOT_MAGIC_V2: &'static [u8; 8] = b"FPCNSNP2";
    /// Magic of version 1, still read: no TTL table, no operation kind 3.
    pub const SNAPSHOT_MAGIC_V1: &'static [u8; 8] = b"FPCNSNP1";

    /// The snapshot encoding, version 8: version 7 with each table's incarnation (`u64
    /// created_version`) after its name, followed by the DataNodes' confirmed incarnations
    /// (`u64 id, u64 confirmed epoch`, a u32 count then items, by id; only those above 0) before
    /// the CRC.
    ///
    /// Version 7: version 6 followed by the tables of the table model
    /// (`str16 database, str16 table, i64 ttl_ms (0: none), u32 columns × { str16 name, u8
    /// category, u8 type }, u32 devices × { u32 tags × { bool present, [str16 value] }, u32
    /// attributes × { str16 name, str16 value } }`, a u32 count then items, by database and
    /// name) before the CRC.
    ///
    /// Version 6: version 5 followed by the series' aliases, tags and
    /// attributes (`str16 device, str16 measurement, str16 alias (empty: none), u32 tags ×
    /// { str16 key, str16 value }, u32 attributes × { same }`, a u32 count then items, in path
    /// order; only series that declared any) before the CRC.
    ///
    /// Version 5: version 4 followed by the users table (`str16 user,
    /// str16 password hash`, a u32 count then items, by name; root only once its password was
    /// set) before the CRC.
    ///
    /// Version 4: version 3 followed by the migrations in progress (`u64 region, u64 from, u64
    /// to`, a u32 count then items) before the CRC.
    ///
    /// Version 3: magic `FPCNSNP3`, u64 applied index, u64 metadata
    /// version, u64 next ids (DataNode, region, operation), then the registry, databases, series
    /// (`str16 device, str16 measurement, u8 type, bool pending delete, str16 encoding, str16
    /// compressor`, the names empty when undeclared), partitions, regions, operations (kind 3 =
    /// SetTtl, str16 database) and TTLs (`str16 database, i64 ttl_ms`), each a u32 count then
    /// items, then CRC32 of all preceding bytes. Version 2 (`FPCNSNP2`) is version 3 without the
    /// two names; version 1 (`FPCNSNP1`) is version 2 without the TTL table.
    pub fn encode_snapshot(&self) -> Vec<u8> {
        // The index is not encoded (decoding rebuilds it); what is encoded must obey its rules.
        debug_assert_eq!(self.check_index(), Ok(()));
        debug_assert_eq!(self.check_operations(), Ok(()));
        envelope::seal(Self::SNAPSHOT_MAGIC, |w| self.encode_snapshot_body(w))
    }

    fn encode_snapshot_body(&self, w: &mut Writer) {
        w.u64(self.applied_index);
        w.u64(self.metadata_version);
        w.u64(self.next_data_node_id);
        w.u64(self.next_region_id);
        w.u64(self.next_operation_id);
        w.len32(self.data_nodes.len());
        for n in self.data_nodes.values() {
            w.u64(n.id);
            w.str16(&n.internal_address);
            w.str16(&n.rpc_address);
            w.u64(n.incarnation_epoch);
            w.u8(n.status.code());
        }
        w.len32(self.databases.len());
        for (db, pending) in &self.databases {
            w.str16(db);
            w.bool(*pending);
        }
        w.len32(self.series.len());
        for ((device, measurement), r) in &self.series {
            w.str16(device);
            w.str16(measurement);
            w.u8(r.data_type.code());
            w.bool(r.pending_delete);
            w.str16(r.codec.encoding_name());
            w.str16(r.codec.compressor_name());
        }
        w.len32(self.partitions.len());
        for ((db, s, t), r) in &self.partitions {
            w.str16(db);
            w.u32(*s);
            w.i64(*t);
            w.u64(*r);
        }
        w.len32(self.regions.len());
        for r in self.regions.values() {
            w.u64(r.id);
            w.str16(&r.database);
            w.len32(r.replicas.len());
            r.replicas.iter().for_each(|n| w.u64(*n));
            w.u64(r.preferred_leader);
        }
        w.len32(self.operations.len());
        for (id, kind) in &self.operations {
            w.u64(*id);
            match kind {
                OperationKind::DeleteTimeseries(series) => {
                    w.u8(1);
                    encode_series_keys(w, series);
                }
                OperationKind::DropDatabase(db) => {
                    w.u8(2);
                    w.str16(db);
                }
                OperationKind::SetTtl(db) => {
                    w.u8(3);
                    w.str16(db);
                }
                OperationKind::DropTable {
                    database,
                    table,
                    series,
                } => {
                    w.u8(4);
                    w.str16(database);
                    w.str16(table);
                    encode_series_keys(w, series);
                }
            }
        }
        w.len32(self.ttls.len());
        for (db, ttl_ms) in &self.ttls {
            assert!(*ttl_ms > 0, "TTL {ttl_ms} of {db} in the state");
            w.str16(db);
            w.i64(*ttl_ms);
        }
        w.len32(self.migrations.len());
        for (region, (from, to)) in &self.migrations {
            w.u64(*region);
            w.u64(*from);
            w.u64(*to);
        }
        w.len32(self.users.len());
        for (username, hash) in &self.users {
            assert!(
                check_user(username, Some(hash)).is_ok(),
                "user {username:?} with hash {hash:?} in the state"
            );
            w.str16(username);
            w.str16(hash);
        }
        w.len32(self.series_meta.len());
        for ((device, measurement), meta) in &self.series_meta {
            w.str16(device);
            w.str16(measurement);
            crate::command::encode_meta(w, meta);
        }
        w.len32(self.tables.len());
        for ((db, name), t) in &self.tables {
            w.str16(db);
            w.str16(name);
            w.u64(t.created_version);
            w.i64(t.schema.ttl_ms.unwrap_or(0));
            crate::command::encode_table_columns(w, &t.schema.columns);
            w.len32(t.devices.len());
            for (tags, attributes) in &t.devices {
                crate::command::encode_device(w, tags, attributes);
            }
        }
        registry::encode_confirmed(w, &self.data_nodes);
    }

    /// Inverse of [`MetadataState::encode_snapshot`]; checks magic and CRC first.
    pub fn decode_snapshot(bytes: &[u8]) -> Result<MetadataState, DecodeError> {
        let (magic, mut r) = envelope::open(
            bytes,
            &[
                Self::SNAPSHOT_MAGIC,
                Self::SNAPSHOT_MAGIC_V7,
                Self::SNAPSHOT_MAGIC_V6,
                Self::SNAPSHOT_MAGIC_V5,
                Self::SNAPSHOT_MAGIC_V4,
                Self::SNAPSHOT_MAGIC_V3,
                Self::SNAPSHOT_MAGIC_V2,
                Self::SNAPSHOT_MAGIC_V1,
            ],
        )
        .map_err(|e| DecodeError {
            reason: format!("ConfigNode snapshot: {}", e.reason),
            ..e
        })?;
        let mut s = MetadataState {
            applied_index: r.u64()?,
            metadata_version: r.u64()?,
            next_data_node_id: r.u64()?,
            next_region_id: r.u64()?,
            next_operation_id: r.u64()?,
            ..MetadataState::default()
        };
        for _ in 0..r.count(21)? {
            let id = r.u64()?;
            let internal_address = r.str16()?;
            let rpc_address = r.str16()?;
            let incarnation_epoch = r.u64()?;
            let code = r.u8()?;
            let Some(status) = NodeStatus::from_code(code) else {
                return r.error(format!("node status {code}"));
            };
            s.data_nodes.insert(
                id,
                DataNodeRecord {
                    id,
                    internal_address,
                    rpc_address,
                    incarnation_epoch,
                    confirmed_epoch: 0,
                    status,
                },
            );
        }
        for _ in 0..r.count(3)? {
            let db = r.str16()?;
            s.databases.insert(db, r.bool()?);
        }
        for _ in 0..r.count(6)? {
            let key = (r.str16()?, r.str16()?);
            let data_type = r.data_type()?;
            let pending_delete = r.bool()?;
            let codec = if magic <= 5 {
                let encoding = r.str16()?;
                let compressor = r.str16()?;
                match SeriesCodec::parse(data_type, Some(&encoding), Some(&compressor)) {
                    Ok(codec) => codec,
                    Err(e) => return r.error(format!("series {}.{}: {e}", key.0, key.1)),
                }
            } else {
                SeriesCodec::default()
            };
            if codec.is_declared() {
                s.declared_codecs.insert(key.clone());
            }
            s.series.insert(
                key,
                SeriesRecord {
                    data_type,
                    pending_delete,
                    codec,
                },
            );
        }
        for _ in 0..r.count(22)? {
            let key = (r.str16()?, r.u32()?, r.i64()?);
            s.partitions.insert(key, r.u64()?);
        }
        for _ in 0..r.count(22)? {
            let id = r.u64()?;
            let database = r.str16()?;
            let n = r.count(8)?;
            let mut replicas = Vec::with_capacity(n);
            for _ in 0..n {
                replicas.push(r.u64()?);
            }
            let preferred_leader = r.u64()?;
            s.regions.insert(
                id,
                RegionGroup {
                    id,
                    database,
                    replicas,
                    preferred_leader,
                },
            );
        }
        for _ in 0..r.count(11)? {
            let id = r.u64()?;
            let kind = match r.u8()? {
                1 => OperationKind::DeleteTimeseries(decode_series_keys(&mut r)?),
                2 => OperationKind::DropDatabase(r.str16()?),
                3 if magic <= 6 => OperationKind::SetTtl(r.str16()?),
                4 if magic <= 1 => OperationKind::DropTable {
                    database: r.str16()?,
                    table: r.str16()?,
                    series: decode_series_keys(&mut r)?,
                },
                tag => return r.error(format!("operation kind {tag}")),
            };
            s.operations.insert(id, kind);
        }
        // Magic 0 is version 8, 1 version 7, 2 version 6, 3 version 5, 4 version 4, 5 version 3,
        // 6 version 2; version 1 has no TTL table.
        if magic <= 6 {
            for _ in 0..r.count(10)? {
                let db = r.str16()?;
                let ttl_ms = r.i64()?;
                if ttl_ms <= 0 || !s.databases.contains_key(&db) {
                    return r.error(format!("TTL {ttl_ms} of database {db:?}"));
                }
                s.ttls.insert(db, ttl_ms);
            }
        }
        if magic <= 4 {
            for _ in 0..r.count(24)? {
                let region = r.u64()?;
                let (from, to) = (r.u64()?, r.u64()?);
                if !s.regions.contains_key(&region) {
                    return r.error(format!("migration of unknown region {region}"));
                }
                s.migrations.insert(region, (from, to));
            }
        }
        // Versions before 5 knew no users: root alone, with its initial password.
        if magic <= 3 {
            for _ in 0..r.count(4)? {
                let username = r.str16()?;
                let hash = r.str16()?;
                if let Err(e) = check_user(&username, Some(&hash)) {
                    return r.error(format!("user {username:?}: {e}"));
                }
                if s.users.insert(username.clone(), hash).is_some() {
                    return r.error(format!("user {username:?} appears twice"));
                }
            }
            if s.users.len() > USERS_MAX {
                return r.error(format!("{} users; at most {USERS_MAX}", s.users.len()));
            }
        }
        // Versions before 6 knew no aliases, tags or attributes.
        if magic <= 2 {
            for _ in 0..r.count(14)? {
                let key = (r.str16()?, r.str16()?);
                let meta = crate::command::decode_meta(&mut r)?;
                if !s.series.contains_key(&key) || meta.is_empty() {
                    return r.error(format!(
                        "meta of {}.{}: no such series, or empty",
                        key.0, key.1
                    ));
                }
                s.series_meta.insert(key, meta);
            }
        }
        // Versions before 7 knew no tables, version 7 no incarnations (read as 0).
        if magic <= 1 {
            for _ in 0..r.count(20)? {
                let key = (r.str16()?, r.str16()?);
                let created_version = if magic == 0 { r.u64()? } else { 0 };
                if created_version > s.metadata_version {
                    return r.error(format!(
                        "table {}.{} created at version {created_version}, after the state's {}",
                        key.0, key.1, s.metadata_version
                    ));
                }
                let ttl_ms = r.i64()?;
                let columns = crate::command::decode_table_columns(&mut r)?;
                let mut devices = BTreeMap::new();
                for _ in 0..r.count(8)? {
                    let (tags, attributes) = crate::command::decode_device(&mut r)?;
                    devices.insert(tags, attributes);
                }
                if !s.databases.contains_key(&key.0) {
                    return r.error(format!("table {}.{} of no database", key.0, key.1));
                }
                let schema = TableSchema {
                    name: key.1.clone(),
                    columns,
                    ttl_ms: (ttl_ms != 0).then_some(ttl_ms),
                };
                s.tables.insert(
                    key,
                    TableRecord {
                        schema,
                        created_version,
                        devices,
                    },
                );
            }
        }
        // Versions before 8 knew no confirmed incarnations.
        if magic == 0 {
            registry::decode_confirmed(&mut r, &mut s.data_nodes)?;
        }
        r.finish()?;
        // The allocation index is derived, so it is rebuilt here, never read from the bytes.
        s.index = match PartitionIndex::build(&s.partitions, &s.regions) {
            Ok(index) => index,
            Err(e) => return r.error(format!("partition table: {e}")),
        };
        // Earlier versions left an overtaken delete's removed series in its list.
        s.forget_vanished_deletions();
        if let Err(e) = s.check_operations() {
            return r.error(format!("pending operations: {e}"));
        }
        Ok(s)
    }
}

mod registry;
#[cfg(test)]
mod tests;
