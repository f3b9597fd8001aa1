//! The metadata state machine: a pure, deterministic `apply(command)` over the DataNode registry,
//! databases, series, the partition table and region groups (design §2, §4).
//!
//! Architecture invariant: `apply` reads nothing but the command and the prior state — no clock,
//! no randomness, no configuration — so every ConfigNode replica computes the same state and the
//! same result. The leader's parameters (replication factor, region groups per database) travel
//! in the command.

use std::collections::{BTreeMap, BTreeSet};

use common::codec::Writer;
use common::path::{is_under, DatabasePath, DevicePath, Measurement, PathError};
use common::{envelope, DataType};

use crate::command::{Command, CommandResult, SeriesSpec};
use crate::error::{DecodeError, MetadataError};

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

/// A DataNode's status as the ConfigNode judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeStatus {
    /// Registered and heard from within the failure-detector threshold.
    Running,
    /// Not heard from for longer than the failure-detector threshold.
    Unknown,
    /// Being removed from the cluster; gets no new replicas.
    Removing,
}

impl NodeStatus {
    /// Encoding byte.
    pub fn code(self) -> u8 {
        match self {
            NodeStatus::Running => 0,
            NodeStatus::Unknown => 1,
            NodeStatus::Removing => 2,
        }
    }

    /// The status of an encoding byte.
    pub fn from_code(code: u8) -> Option<NodeStatus> {
        match code {
            0 => Some(NodeStatus::Running),
            1 => Some(NodeStatus::Unknown),
            2 => Some(NodeStatus::Removing),
            _ => None,
        }
    }

    /// IoTDB's name.
    pub fn name(self) -> &'static str {
        match self {
            NodeStatus::Running => "Running",
            NodeStatus::Unknown => "Unknown",
            NodeStatus::Removing => "Removing",
        }
    }
}

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
    /// DELETE TIMESERIES of these (device, measurement) pairs.
    DeleteTimeseries(Vec<(String, String)>),
    /// DROP DATABASE.
    DropDatabase(String),
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
    /// (database, series slot, time slot) → region id.
    partitions: BTreeMap<(String, u32, i64), u64>,
    regions: BTreeMap<u64, RegionGroup>,
    operations: BTreeMap<u64, OperationKind>,
}

fn illegal(e: PathError) -> MetadataError {
    MetadataError::IllegalPath {
        path: e.path,
        reason: e.reason,
    }
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

    /// Every series, in path order: (device, measurement, record).
    pub fn all_series(&self) -> impl Iterator<Item = (&str, &str, SeriesRecord)> {
        self.series
            .iter()
            .map(|((d, m), r)| (d.as_str(), m.as_str(), *r))
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
        self.partitions
            .iter()
            .filter(|((db, _, _), _)| db == database)
            .map(|((_, s, t), r)| (*s, *t, *r))
            .collect()
    }

    /// A region group.
    pub fn region(&self, id: u64) -> Option<&RegionGroup> {
        self.regions.get(&id)
    }

    /// Every region group, by id.
    pub fn regions(&self) -> impl Iterator<Item = &RegionGroup> {
        self.regions.values()
    }

    /// Pending fence operations.
    pub fn operations(&self) -> impl Iterator<Item = (u64, &OperationKind)> {
        self.operations.iter().map(|(id, k)| (*id, k))
    }

    /// Applies the committed command at `index`. A refusal changes nothing but the applied index.
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
            } => self.register(*data_node_id, internal_address, rpc_address),
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
            } => self.allocate(database, slots, *replication_factor, *region_groups_max),
            Command::BeginDeleteTimeseries { series } => self.begin_delete_timeseries(series),
            Command::BeginDropDatabase { database } => {
                self.check_operations_limit()?;
                match self.databases.get_mut(database) {
                    None => return Err(MetadataError::DatabaseNotFound(database.clone())),
                    Some(true) => return Err(MetadataError::PendingDelete(database.clone())),
                    Some(pending) => *pending = true,
                }
                Ok(self.begin_operation(OperationKind::DropDatabase(database.clone())))
            }
            Command::FinishOperation { operation_id } => {
                let kind = self
                    .operations
                    .remove(operation_id)
                    .ok_or(MetadataError::OperationNotFound(*operation_id))?;
                match kind {
                    OperationKind::DeleteTimeseries(series) => {
                        for key in series {
                            let removed = self.series.remove(&key);
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
                        self.partitions.retain(|(db, _, _), _| *db != database);
                        self.regions.retain(|_, r| r.database != database);
                    }
                }
                self.bump();
                Ok(CommandResult::Done)
            }
        }
    }

    fn register(
        &mut self,
        data_node_id: u64,
        internal_address: &str,
        rpc_address: &str,
    ) -> Result<CommandResult, MetadataError> {
        for address in [internal_address, rpc_address] {
            if address.is_empty() || address.len() > PATH_BYTES_MAX {
                return Err(MetadataError::IllegalPath {
                    path: address.to_string(),
                    reason: "an address is 1 to 1024 bytes of host:port",
                });
            }
        }
        // A DataNode that lost its id file comes back on the same internal address: it is the
        // same node, not a second one, so it gets its old id and a new epoch.
        let id = if data_node_id != 0 {
            data_node_id
        } else {
            self.data_nodes
                .values()
                .find(|n| n.internal_address == internal_address)
                .map_or(self.next_data_node_id, |n| n.id)
        };
        if !self.data_nodes.contains_key(&id) && self.data_nodes.len() >= DATA_NODES_MAX {
            return Err(MetadataError::Limit(format!(
                "{DATA_NODES_MAX} DataNodes registered"
            )));
        }
        let node = self.data_nodes.entry(id).or_insert(DataNodeRecord {
            id,
            internal_address: String::new(),
            rpc_address: String::new(),
            incarnation_epoch: 0,
            status: NodeStatus::Running,
        });
        node.internal_address = internal_address.to_string();
        node.rpc_address = rpc_address.to_string();
        node.incarnation_epoch += 1;
        node.status = NodeStatus::Running;
        let epoch = node.incarnation_epoch;
        self.next_data_node_id = self.next_data_node_id.max(id + 1);
        self.bump();
        Ok(CommandResult::Registered {
            data_node_id: id,
            incarnation_epoch: epoch,
        })
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
        for s in series {
            let device = DevicePath::parse(&s.device, PATH_BYTES_MAX).map_err(illegal)?;
            validate_measurement(&s.device, &s.measurement)?;
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
                v.insert(SeriesRecord {
                    data_type: s.data_type,
                    pending_delete: false,
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
    ) -> Result<CommandResult, MetadataError> {
        match self.databases.get(database) {
            None => return Err(MetadataError::DatabaseNotFound(database.to_string())),
            Some(true) => return Err(MetadataError::PendingDelete(database.to_string())),
            Some(false) => {}
        }
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
        let mut created = Vec::new();
        for &(series_slot, time_slot) in slots {
            let key = (database.to_string(), series_slot, time_slot);
            if self.partitions.contains_key(&key) {
                continue;
            }
            // A series slot stays in one region group across time slots: a device's data and
            // its deletions then live in one raft log.
            let same_slot = self
                .partitions
                .iter()
                .find(|((db, s, _), _)| db == database && *s == series_slot)
                .map(|(_, r)| *r);
            let region = match same_slot {
                Some(region) => region,
                None => {
                    let groups: Vec<u64> = self
                        .regions
                        .values()
                        .filter(|r| r.database == database)
                        .map(|r| r.id)
                        .collect();
                    if groups.is_empty() && !can_create {
                        // Nothing was inserted yet: with no group, every slot needs one.
                        return Err(MetadataError::NotEnoughDataNodes {
                            running,
                            replication_factor,
                        });
                    }
                    if can_create && groups.len() < region_groups_max.max(1) as usize {
                        let id = self.create_region_group(database, replication_factor);
                        created.push(id);
                        id
                    } else {
                        // The group holding the fewest series slots; ties to the lowest id.
                        let mut slots_per_group: BTreeMap<u64, BTreeSet<u32>> =
                            groups.iter().map(|g| (*g, BTreeSet::new())).collect();
                        for ((db, s, _), r) in &self.partitions {
                            if db == database {
                                slots_per_group.entry(*r).or_default().insert(*s);
                            }
                        }
                        slots_per_group
                            .iter()
                            .min_by_key(|(id, s)| (s.len(), **id))
                            .map(|(id, _)| *id)
                            .expect("a database with at least one group")
                    }
                }
            };
            self.partitions.insert(key, region);
        }
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
        id
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

    /// Magic of the snapshot encoding.
    pub const SNAPSHOT_MAGIC: &'static [u8; 8] = b"FPCNSNP1";

    /// The snapshot encoding, version 1: magic `FPCNSNP1`, u64 applied index, u64 metadata
    /// version, u64 next ids (DataNode, region, operation), then the registry, databases, series,
    /// partitions, regions and operations (each a u32 count then items), then CRC32 of all
    /// preceding bytes.
    pub fn encode_snapshot(&self) -> Vec<u8> {
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
                    w.len32(series.len());
                    for (d, m) in series {
                        w.str16(d);
                        w.str16(m);
                    }
                }
                OperationKind::DropDatabase(db) => {
                    w.u8(2);
                    w.str16(db);
                }
            }
        }
    }

    /// Inverse of [`MetadataState::encode_snapshot`]; checks magic and CRC first.
    pub fn decode_snapshot(bytes: &[u8]) -> Result<MetadataState, DecodeError> {
        let (_, mut r) =
            envelope::open(bytes, &[Self::SNAPSHOT_MAGIC]).map_err(|e| DecodeError {
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
            s.series.insert(
                key,
                SeriesRecord {
                    data_type,
                    pending_delete,
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
                1 => {
                    let n = r.count(4)?;
                    let mut series = Vec::with_capacity(n);
                    for _ in 0..n {
                        series.push((r.str16()?, r.str16()?));
                    }
                    OperationKind::DeleteTimeseries(series)
                }
                2 => OperationKind::DropDatabase(r.str16()?),
                tag => return r.error(format!("operation kind {tag}")),
            };
            s.operations.insert(id, kind);
        }
        r.finish()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::tests::arb_command;
    use proptest::prelude::*;

    struct Harness {
        state: MetadataState,
        index: u64,
    }

    impl Harness {
        fn new() -> Self {
            Harness {
                state: MetadataState::new(),
                index: 0,
            }
        }
        fn apply(&mut self, command: Command) -> Result<CommandResult, MetadataError> {
            self.index += 1;
            self.state.apply(self.index, &command)
        }
        fn register(&mut self, id: u64, address: &str) -> (u64, u64) {
            match self
                .apply(Command::RegisterDataNode {
                    data_node_id: id,
                    internal_address: address.into(),
                    rpc_address: format!("{address}-rpc"),
                })
                .unwrap()
            {
                CommandResult::Registered {
                    data_node_id,
                    incarnation_epoch,
                } => (data_node_id, incarnation_epoch),
                other => panic!("{other:?}"),
            }
        }
    }

    fn spec(device: &str, measurement: &str, data_type: DataType) -> SeriesSpec {
        SeriesSpec {
            device: device.into(),
            measurement: measurement.into(),
            data_type,
        }
    }

    #[test]
    fn registering_twice_raises_the_epoch_and_keeps_the_id() {
        let mut h = Harness::new();
        let (id, e1) = h.register(0, "a:1");
        assert_eq!((id, e1), (1, 1));
        assert_eq!(h.register(id, "a:1"), (1, 2));
        // Lost its id file, same address: same node, next epoch.
        assert_eq!(h.register(0, "a:1"), (1, 3));
        assert_eq!(h.register(0, "b:1"), (2, 1));
        assert_eq!(h.state.data_node(1).unwrap().status, NodeStatus::Running);
    }

    #[test]
    fn auto_create_makes_the_level1_database_and_keeps_existing_types() {
        let mut h = Harness::new();
        h.apply(Command::CreateTimeseries {
            series: vec![spec("root.sg.d1", "s1", DataType::Int64)],
            auto_create: true,
        })
        .unwrap();
        assert_eq!(h.state.database_of("root.sg.d1"), Some(("root.sg", false)));
        let v = h.state.metadata_version();
        let again = h.apply(Command::CreateTimeseries {
            series: vec![spec("root.sg.d1", "s1", DataType::Double)],
            auto_create: true,
        });
        assert!(matches!(again, Err(MetadataError::TypeMismatch { .. })));
        assert_eq!(
            again.unwrap_err().status_code(),
            common::StatusCode::DataTypeMismatch
        );
        assert_eq!(
            h.state.metadata_version(),
            v,
            "a refused command changes nothing"
        );
        assert!(h
            .apply(Command::CreateTimeseries {
                series: vec![spec("root.other.d1", "s1", DataType::Int64)],
                auto_create: false,
            })
            .is_err());
        assert!(matches!(
            h.apply(Command::CreateDatabase {
                database: "root.sg.inner".into()
            }),
            Err(MetadataError::DatabaseOverlap(..))
        ));
    }

    #[test]
    fn allocation_spreads_replicas_and_leaders_and_keeps_a_series_slot_in_one_group() {
        let mut h = Harness::new();
        for a in ["a:1", "b:1", "c:1"] {
            h.register(0, a);
        }
        h.apply(Command::CreateDatabase {
            database: "root.sg".into(),
        })
        .unwrap();
        let created = h
            .apply(Command::AllocatePartitions {
                database: "root.sg".into(),
                slots: vec![(1, 0), (2, 0), (3, 0), (1, 1)],
                replication_factor: 2,
                region_groups_max: 3,
            })
            .unwrap();
        assert_eq!(created, CommandResult::RegionsCreated(vec![1, 2, 3]));
        let regions: Vec<&RegionGroup> = h.state.regions().collect();
        let mut replicas_per_node = BTreeMap::new();
        let mut leaders = BTreeSet::new();
        for r in &regions {
            assert_eq!(r.replicas.len(), 2);
            assert!(r.replicas.contains(&r.preferred_leader));
            leaders.insert(r.preferred_leader);
            for n in &r.replicas {
                *replicas_per_node.entry(*n).or_insert(0) += 1;
            }
        }
        assert_eq!(
            replicas_per_node.values().copied().collect::<Vec<_>>(),
            vec![2, 2, 2]
        );
        assert_eq!(
            leaders.len(),
            3,
            "every DataNode leads one group: {regions:?}"
        );
        assert_eq!(
            h.state.partition("root.sg", 1, 0),
            h.state.partition("root.sg", 1, 1)
        );
        // A fourth series slot reuses the least-loaded group.
        assert_eq!(
            h.apply(Command::AllocatePartitions {
                database: "root.sg".into(),
                slots: vec![(4, 0)],
                replication_factor: 2,
                region_groups_max: 3,
            })
            .unwrap(),
            CommandResult::RegionsCreated(vec![])
        );
        // Too few Running DataNodes for a first group: refused, nothing changes.
        h.apply(Command::CreateDatabase {
            database: "root.x".into(),
        })
        .unwrap();
        let before = h.state.clone();
        let refused = h.apply(Command::AllocatePartitions {
            database: "root.x".into(),
            slots: vec![(1, 0)],
            replication_factor: 4,
            region_groups_max: 1,
        });
        assert!(matches!(
            refused,
            Err(MetadataError::NotEnoughDataNodes { .. })
        ));
        assert_eq!(
            h.state.partitions_of("root.x"),
            before.partitions_of("root.x")
        );
    }

    #[test]
    fn delete_goes_through_pending_then_final() {
        let mut h = Harness::new();
        h.apply(Command::CreateTimeseries {
            series: vec![
                spec("root.sg.d1", "s1", DataType::Int64),
                spec("root.sg.d1", "s2", DataType::Int64),
            ],
            auto_create: true,
        })
        .unwrap();
        let op = match h
            .apply(Command::BeginDeleteTimeseries {
                series: vec![("root.sg.d1".into(), "s1".into())],
            })
            .unwrap()
        {
            CommandResult::OperationBegun(id) => id,
            other => panic!("{other:?}"),
        };
        assert!(h.state.series("root.sg.d1", "s1").unwrap().pending_delete);
        assert_eq!(
            h.state.usable_series_of("root.sg.d1"),
            vec![("s2".to_string(), DataType::Int64)]
        );
        // While pending, neither a re-create nor a second delete is accepted.
        assert!(matches!(
            h.apply(Command::CreateTimeseries {
                series: vec![spec("root.sg.d1", "s1", DataType::Int64)],
                auto_create: true,
            }),
            Err(MetadataError::PendingDelete(_))
        ));
        assert!(h
            .apply(Command::BeginDeleteTimeseries {
                series: vec![("root.sg.d1".into(), "s1".into())],
            })
            .is_err());
        h.apply(Command::FinishOperation { operation_id: op })
            .unwrap();
        assert!(h.state.series("root.sg.d1", "s1").is_none());
        assert_eq!(h.state.operations().count(), 0);
        // After the final commit the series may be created again, with another type.
        h.apply(Command::CreateTimeseries {
            series: vec![spec("root.sg.d1", "s1", DataType::Text)],
            auto_create: true,
        })
        .unwrap();

        let op = match h
            .apply(Command::BeginDropDatabase {
                database: "root.sg".into(),
            })
            .unwrap()
        {
            CommandResult::OperationBegun(id) => id,
            other => panic!("{other:?}"),
        };
        assert!(h.state.usable_series_of("root.sg.d1").is_empty());
        h.apply(Command::FinishOperation { operation_id: op })
            .unwrap();
        assert_eq!(h.state.databases().count(), 0);
        assert_eq!(h.state.all_series().count(), 0);
    }

    #[test]
    fn snapshot_golden_vector() {
        let mut h = Harness::new();
        h.register(0, "a");
        let bytes = h.state.encode_snapshot();
        let mut expected: Vec<u8> = b"FPCNSNP1".to_vec();
        for v in [1u64, 1, 2, 1, 1] {
            // applied index, metadata version, next DataNode / region / operation ids
            expected.extend_from_slice(&v.to_le_bytes());
        }
        expected.extend_from_slice(&[1, 0, 0, 0]); // one DataNode
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(&[1, 0, b'a', 5, 0, b'a', b'-', b'r', b'p', b'c']);
        expected.extend_from_slice(&1u64.to_le_bytes()); // epoch
        expected.push(0); // Running
        for _ in 0..5 {
            expected.extend_from_slice(&[0, 0, 0, 0]); // empty tables
        }
        let crc = crc32fast::hash(&expected);
        expected.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(crc, 0xb614_9986, "CRC of the golden snapshot");
    }

    #[test]
    fn snapshot_rejects_damage() {
        let mut h = Harness::new();
        h.register(0, "a:1");
        let mut bytes = h.state.encode_snapshot();
        assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), h.state);
        let mid = bytes.len() / 2;
        bytes[mid] ^= 1;
        assert!(MetadataState::decode_snapshot(&bytes).is_err());
        assert!(MetadataState::decode_snapshot(b"FPCNSNP1").is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Two replicas applying the same log agree on every result and state; the snapshot
        /// round-trips at every step; a refused command changes nothing but the applied index;
        /// a DataNode's epoch only rises.
        #[test]
        fn replicas_agree_and_snapshots_round_trip(commands in prop::collection::vec(arb_command(), 0..40)) {
            let mut a = Harness::new();
            let mut b = Harness::new();
            for command in commands {
                let before = a.state.clone();
                let ra = a.apply(command.clone());
                let rb = b.apply(command.clone());
                prop_assert_eq!(&ra, &rb);
                prop_assert_eq!(&a.state, &b.state);
                if ra.is_err() {
                    let mut expected = before.clone();
                    expected.applied_index = a.index;
                    prop_assert_eq!(&a.state, &expected);
                }
                for n in before.data_nodes() {
                    prop_assert!(a.state.data_node(n.id).unwrap().incarnation_epoch >= n.incarnation_epoch);
                }
                if let Ok(CommandResult::Registered { data_node_id, incarnation_epoch }) = ra {
                    let old = before.data_node(data_node_id).map_or(0, |n| n.incarnation_epoch);
                    prop_assert!(incarnation_epoch > old);
                }
                prop_assert!(a.state.metadata_version() >= before.metadata_version());
                let restored = MetadataState::decode_snapshot(&a.state.encode_snapshot()).unwrap();
                prop_assert_eq!(&restored, &a.state);
                // Every partition points at an existing region of the same database.
                for (db, _) in a.state.databases() {
                    for (_, _, r) in a.state.partitions_of(db) {
                        prop_assert_eq!(a.state.region(r).map(|g| g.database.as_str()), Some(db));
                    }
                }
            }
        }
    }
}
