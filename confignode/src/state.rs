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
pub use index::RegionGroup;
use index::{PartitionIndex, Placement};

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
    ids: IdCounters,
    data_nodes: BTreeMap<u64, DataNodeRecord>,
    /// Database → pending delete.
    databases: BTreeMap<String, bool>,
    series: SeriesCatalog,
    placement: Placement,
    operations: BTreeMap<u64, OperationKind>,
    /// Database → time to live in ms (> 0); absent = none (IoTDB's INF).
    ttls: BTreeMap<String, i64>,
    /// User → the Argon2id PHC string of its password. root is always a user, but is here only
    /// once its password was set; until then its password is [`users::ROOT_INITIAL_PASSWORD`].
    /// So the state without this table — a new cluster, a snapshot of version 4 or older — has
    /// root alone with password root, alike on every replica, with no salted hash to agree on.
    users: BTreeMap<String, String>,
    /// (database, table) → a table of the table model (`common::table`), with the attributes of
    /// its devices.
    tables: BTreeMap<(String, String), TableRecord>,
    /// The databases of `databases` that are the table model's: tables live in them, tree
    /// series do not (the models keep their namespaces apart, as in IoTDB).
    table_databases: BTreeSet<String>,
}

/// The next id of each kind the state hands out (1 in a new state; never reused).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct IdCounters {
    next_data_node_id: u64,
    next_region_id: u64,
    next_operation_id: u64,
}

/// Every series, with what is kept beside them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct SeriesCatalog {
    /// (device, measurement) → series.
    records: BTreeMap<(String, String), SeriesRecord>,
    /// The series of `records` whose encoding or compressor was declared (not the defaults):
    /// what every DataNode polls for every few seconds, answered without a pass over every
    /// series. Derived (kept with `records`, rebuilt by a snapshot load), never stored.
    declared_codecs: BTreeSet<(String, String)>,
    /// The series of `records` with an alias, tags or attributes, and those.
    meta: BTreeMap<(String, String), SeriesMeta>,
}

impl SeriesCatalog {
    /// Takes series `key` out, with its declared codec and its alias, tags and attributes.
    fn remove(&mut self, key: &(String, String)) -> Option<SeriesRecord> {
        self.declared_codecs.remove(key);
        self.meta.remove(key);
        self.records.remove(key)
    }

    /// Takes out every series under `database`.
    fn drop_database(&mut self, database: &str) {
        self.records
            .retain(|(device, _), _| !is_under(device, database));
        self.declared_codecs
            .retain(|(device, _)| !is_under(device, database));
        self.meta
            .retain(|(device, _), _| !is_under(device, database));
    }
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
            ids: IdCounters {
                next_data_node_id: 1,
                next_region_id: 1,
                next_operation_id: 1,
            },
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

    /// Whether `database` is a table-model database.
    pub fn is_table_database(&self, database: &str) -> bool {
        self.table_databases.contains(database)
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
            .records
            .get(&(device.to_string(), measurement.to_string()))
            .copied()
    }

    /// The alias, tags and attributes of a series that declared any.
    pub fn series_meta(&self, device: &str, measurement: &str) -> Option<&SeriesMeta> {
        self.series
            .meta
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
        self.series
            .meta
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
            .records
            .iter()
            .map(|((d, m), r)| (d.as_str(), m.as_str(), *r))
    }

    /// The series whose path (`device.measurement`) starts with `prefix` as text, in path order,
    /// with their declared names: a range of the catalog from the prefix's parent path, not a
    /// pass over every series (`""` is every series).
    pub fn series_under<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a str, SeriesRecord, Option<&'a SeriesMeta>)> + 'a {
        // A path starting with `prefix` has a device starting with the prefix's parent.
        let parent = prefix.rsplit_once('.').map_or("", |(parent, _)| parent);
        self.series
            .records
            .range((parent.to_string(), String::new())..)
            .take_while(move |((d, _), _)| d.starts_with(parent))
            .filter(move |((d, m), _)| path_starts_with(d, m, prefix))
            .map(|(key, r)| {
                (
                    key.0.as_str(),
                    key.1.as_str(),
                    *r,
                    self.series.meta.get(key),
                )
            })
    }

    /// The series with a declared encoding or compressor, in path order, from an index (no pass
    /// over every series).
    pub fn declared_codec_series(&self) -> impl Iterator<Item = (&str, &str, SeriesRecord)> {
        self.series.declared_codecs.iter().map(|key| {
            let record = self.series.records[key];
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
            .records
            .range(start..)
            .take_while(|((d, _), _)| d == device)
            .filter(|(_, r)| !r.pending_delete)
            .map(|((_, m), r)| (m.clone(), r.data_type))
            .collect()
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
            } => self.set_data_node_status(data_node_id, status),
            Command::CreateDatabase {
                database,
                table_model,
            } => {
                self.create_database(database, *table_model)?;
                Ok(CommandResult::Done)
            }
            Command::CreateTimeseries {
                series,
                auto_create,
            } => self.create_series(series, *auto_create, false),
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
            Command::BeginDropDatabase { database } => self.begin_drop_database(database),
            Command::BeginSetTtl { database, ttl_ms } => self.begin_set_ttl(database, ttl_ms),
            Command::BeginRegionMigration {
                region_id,
                from,
                to,
            } => self.begin_region_migration(region_id, from, to),
            Command::RemoveDataNode { data_node_id } => self.remove_data_node(data_node_id),
            Command::FinishRegionMigration {
                region_id,
                from,
                to,
            } => self.finish_region_migration(region_id, from, to),
            Command::CreateUser {
                username,
                password_hash,
            } => self.create_user(username, password_hash),
            Command::DropUser { username } => self.drop_user(username),
            Command::SetUserPassword {
                username,
                password_hash,
            } => self.set_user_password(username, password_hash),
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
            Command::FinishOperation { operation_id } => self.finish_operation(operation_id),
        }
    }

    fn create_database(&mut self, database: &str, table_model: bool) -> Result<(), MetadataError> {
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
        if table_model {
            self.table_databases.insert(database.to_string());
        }
        self.bump();
        Ok(())
    }

    /// Creates `series`: the tree model's (`table` false), refused in a table-model database,
    /// or a table's, which [`MetadataState::create_table_series`] checked lie under it.
    fn create_series(
        &mut self,
        series: &[SeriesSpec],
        auto_create: bool,
        table: bool,
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
                Some((db, _)) if !table && self.is_table_database(db) => {
                    return Err(MetadataError::WrongModel(format!(
                        "{db} is a table-model database: its series are its tables' columns, \
                         written and read with the table model"
                    )))
                }
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
        if self.series.records.len() + series.len() > SERIES_MAX {
            return Err(MetadataError::Limit(format!("{SERIES_MAX} series")));
        }
        for db in new_databases {
            // Checked above: no database covers or lies inside it, so this cannot fail.
            self.create_database(&db, false)
                .unwrap_or_else(|e| panic!("auto-creating checked database {db}: {e}"));
        }
        let mut changed = false;
        for s in series {
            let key = (s.device.clone(), s.measurement.clone());
            if let std::collections::btree_map::Entry::Vacant(v) = self.series.records.entry(key) {
                if s.codec.is_declared() {
                    self.series.declared_codecs.insert(v.key().clone());
                }
                if !s.meta.is_empty() {
                    self.series.meta.insert(v.key().clone(), s.meta.clone());
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

    /// Refuses a database that does not exist (507) or is being dropped.
    fn check_live_database(&self, database: &str) -> Result<(), MetadataError> {
        match self.databases.get(database) {
            None => Err(MetadataError::DatabaseNotFound(database.to_string())),
            Some(true) => Err(MetadataError::PendingDelete(database.to_string())),
            Some(false) => Ok(()),
        }
    }
}

mod accounts;
mod index;
mod operations;
mod placement;
mod registry;
mod snapshot;
mod tables;
/// Whether `device.measurement` starts with `prefix`, as text, without building the path.
fn path_starts_with(device: &str, measurement: &str, prefix: &str) -> bool {
    match prefix.strip_prefix(device) {
        None => device.starts_with(prefix),
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('.')
            .is_some_and(|rest| measurement.starts_with(rest)),
    }
}

#[cfg(test)]
mod tests;
