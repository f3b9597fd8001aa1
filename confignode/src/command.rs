//! The commands of the ConfigNode's raft log and their hand-written encoding (version 2).
//!
//! Layout: `u8 version (2), u8 kind`, then the kind's fields, little-endian; strings are
//! `str16` (u16 length + UTF-8), lists a u32 count then the items. Golden vectors below pin
//! every kind: changing a byte breaks replay of existing logs.
//!
//! Kind 9 (BeginSetTtl, `str16 database, i64 ttl_ms` with 0 = UNSET) was added within version
//! 2: it changes no byte of an existing kind, so every entry written before it decodes as it
//! did; a version marks a changed layout of an existing kind. So were kinds 15 to 17, the user
//! commands: CreateUser and SetUserPassword `str16 user, str16 password hash`, DropUser `str16
//! user`.
//!
//! So was kind 18, CREATE_TIMESERIES_WITH_META: kind 10's series each followed by `str16 alias
//! (empty: none), u32 tags × { str16 key, str16 value }, u32 attributes × { same }`, written only
//! when a series declares one of them.
//!
//! So were kinds 22 and 23 (REVIEW H3): REREGISTER_DATA_NODE `u64 id, u64 stored epoch, str16
//! internal, str16 rpc` and CONFIRM_INCARNATION `u64 id, u64 epoch`.
//!
//! So were kinds 19 and 20, the table model's. CREATE_TABLE: `str16 database, str16 table, i64
//! ttl_ms (0: none), u8 flags (1 if_not_exists, 2 extend), u32 columns × { str16 name, u8
//! category (TAG 0, FIELD 1, ATTRIBUTE 2), u8 type }`. SET_DEVICE_ATTRIBUTES: `str16 database,
//! str16 table, u32 devices × { u32 tags × { bool present, [str16 value] }, u32 attributes ×
//! { str16 name, str16 value } }`.
//!
//! So were kinds 24 and 25, the fence of table writes (REVIEW N1). CREATE_TABLE_SERIES: `str16
//! database, str16 table, u64 created_version`, then kind 4's fields without `auto_create`
//! (series a table write creates declare nothing). SET_TABLE_DEVICE_ATTRIBUTES: `u64
//! table_version`, then kind 20's fields; SetDeviceAttributes with table version 0 is written as
//! kind 20, as before.
//!
//! Version 2 differs from version 1 only in AllocatePartitions, which carries the leader's cap
//! on a database's partitions after `region_groups_max`. Version 1 entries still decode, with
//! no cap (`u64::MAX`): that is how they were applied when they were written, and a replay must
//! reach the same state.

use std::collections::BTreeMap;

use common::table::{Category, TableColumn, TableSchema};
use common::views::SeriesMeta;
use common::DataType;

use crate::error::DecodeError;
use codec::SeriesCodec;
use common::codec::{Reader, Writer};

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

/// Version byte of the encoding.
pub const COMMAND_VERSION: u8 = 2;
/// The previous version: AllocatePartitions without a partition cap.
const COMMAND_VERSION_WITHOUT_PARTITION_CAP: u8 = 1;

/// A series to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeriesSpec {
    /// Device path, e.g. `root.sg.d1`.
    pub device: String,
    /// Measurement name, e.g. `s1`.
    pub measurement: String,
    /// Value type.
    pub data_type: DataType,
    /// The declared encoding and compressor (`CREATE TIMESERIES ... ENCODING=...`).
    pub codec: SeriesCodec,
    /// Its alias, tags and attributes.
    pub meta: SeriesMeta,
}

/// A change to the metadata. Everything apply needs is inside the command (design §5: apply is
/// deterministic), including the leader's allocation parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Registers a DataNode (`data_node_id` 0 = new) and mints its next incarnation epoch.
    RegisterDataNode {
        /// 0 for a first registration, else the persisted id.
        data_node_id: u64,
        /// `host:port` of its internal service.
        internal_address: String,
        /// `host:port` of its session service.
        rpc_address: String,
    },
    /// Registers a DataNode that has no stored identity (a first start, or a data directory
    /// lost or wiped) under a new id, whatever address it comes from: a node that lost its data
    /// lost its raft logs and votes, and must never vote or acknowledge as its old self (REVIEW
    /// H3). Replaces `RegisterDataNode` with `data_node_id` 0, whose entries (written before)
    /// still apply as they did: the old id for a known internal address.
    RegisterNewDataNode {
        /// `host:port` of its internal service.
        internal_address: String,
        /// `host:port` of its session service.
        rpc_address: String,
    },
    /// A DataNode with a stored identity registers again, telling the incarnation its data
    /// directory holds. Refused when that is below the highest incarnation the registry saw it
    /// run: the directory was restored from an older backup (REVIEW H3), so its raft logs and
    /// votes are older than what the node said and did since. Replaces `RegisterDataNode` with
    /// an id, which a DataNode that predates it still sends (and which applies as it did).
    ReregisterDataNode {
        /// The stored id.
        data_node_id: u64,
        /// The stored incarnation epoch (at least 1).
        stored_epoch: u64,
        /// `host:port` of its internal service.
        internal_address: String,
        /// `host:port` of its session service.
        rpc_address: String,
    },
    /// The leader heard from a DataNode's incarnation `incarnation_epoch` (a heartbeat reply):
    /// that incarnation ran, so a data directory holding an older one is stale.
    ConfirmIncarnation {
        /// The DataNode.
        data_node_id: u64,
        /// The incarnation that answered.
        incarnation_epoch: u64,
    },
    /// The leader's failure detector changed a DataNode's status.
    SetDataNodeStatus {
        /// The DataNode.
        data_node_id: u64,
        /// Its new status.
        status: NodeStatus,
    },
    /// Creates a database.
    CreateDatabase {
        /// e.g. `root.sg`.
        database: String,
        /// A table-model database (the table model's `CREATE DATABASE`): only tables live in
        /// it, and tree statements do not see it.
        table_model: bool,
    },
    /// Creates series. With `auto_create`, existing series with the same type are skipped and a
    /// missing database is created at level 1 (`root.<first>`); without, an existing series is
    /// an error.
    CreateTimeseries {
        /// The series.
        series: Vec<SeriesSpec>,
        /// Schema auto-creation on write.
        auto_create: bool,
    },
    /// Maps (series slot, time slot) pairs of a database to region groups, creating region groups
    /// up to `region_groups_max` with `replication_factor` replicas on Running DataNodes. Refused
    /// whole when the database would then hold more than `database_partitions_max` partitions.
    AllocatePartitions {
        /// The database.
        database: String,
        /// (series slot, time slot) pairs; pairs already mapped are left alone.
        slots: Vec<(u32, i64)>,
        /// Replicas per region group.
        replication_factor: u32,
        /// Region groups per database.
        region_groups_max: u32,
        /// Most partitions (series slot, time slot pairs) the database may hold afterwards: the
        /// leader's `cn_database_partitions_max`, in the command so that every replica decides
        /// alike. `u64::MAX` (no cap) for entries of encoding version 1.
        database_partitions_max: u64,
    },
    /// Step 1 of the fence protocol for DELETE TIMESERIES: marks the series pending-delete.
    BeginDeleteTimeseries {
        /// (device, measurement) pairs.
        series: Vec<(String, String)>,
    },
    /// Step 1 of the fence protocol for DROP DATABASE: marks the database pending-delete.
    BeginDropDatabase {
        /// The database.
        database: String,
    },
    /// Step 1 of SET TTL / UNSET TTL: records the database's time to live at once and begins
    /// an operation that invalidates every DataNode's cache of the database before the statement
    /// is acknowledged (no region deletion: expired points are filtered at read time).
    BeginSetTtl {
        /// The database.
        database: String,
        /// Milliseconds; `None` = UNSET (encoded as 0, which SET TTL refuses).
        ttl_ms: Option<i64>,
    },
    /// The last step of the fence protocol: makes the pending deletion final.
    FinishOperation {
        /// The id `Begin*` returned.
        operation_id: u64,
    },
    /// Begins moving region `region_id`'s replica from DataNode `from` to DataNode `to`: `to`
    /// hosts a joining replica, which the region's leader adds as a learner, catches up and
    /// swaps for `from` (raft membership changes). Until the finish, `from` stays among the
    /// replicas. One migration per region at a time.
    BeginRegionMigration {
        /// The region.
        region_id: u64,
        /// The replica leaving.
        from: u64,
        /// The DataNode taking its place.
        to: u64,
    },
    /// REMOVE DATANODE: the DataNode becomes Removing for good; its replicas migrate to other
    /// Running DataNodes. Refused (a migration refusal naming the region) when some region of it
    /// would have no Running DataNode to go to.
    RemoveDataNode {
        /// The DataNode.
        data_node_id: u64,
    },
    /// Ends a migration the region's raft group completed (its voters have `to`, not `from`):
    /// `to` replaces `from` among the replicas.
    FinishRegionMigration {
        /// The region.
        region_id: u64,
        /// The replica that left.
        from: u64,
        /// The DataNode that took its place.
        to: u64,
    },
    /// CREATE USER. The leader checked the issuer's permission and hashed the password.
    CreateUser {
        /// The new user's name.
        username: String,
        /// Its password's Argon2id PHC string.
        password_hash: String,
    },
    /// DROP USER (never root).
    DropUser {
        /// The user.
        username: String,
    },
    /// ALTER USER ... SET PASSWORD (root's too: it then has a stored hash).
    SetUserPassword {
        /// The user.
        username: String,
        /// The new password's Argon2id PHC string.
        password_hash: String,
    },
    /// CREATE TABLE of the table model, or (`extend`) an insert's creation of the table and of
    /// the columns it names that the table lacks.
    CreateTable {
        /// The tree database, `root.<name>`.
        database: String,
        /// The table, with the columns to create.
        table: TableSchema,
        /// An existing table is no error.
        if_not_exists: bool,
        /// Create the table if missing, else add the columns it lacks.
        extend: bool,
    },
    /// Step 1 of the fence protocol for DROP TABLE: takes the table out of the schema at once
    /// and marks the series of its devices pending-delete; the operation invalidates every
    /// DataNode's cache of the table and deletes the series' points.
    BeginDropTable {
        /// The tree database, `root.<name>`.
        database: String,
        /// The table.
        table: String,
    },
    /// The ATTRIBUTE values of devices of a table; each value replaces the device's last.
    SetDeviceAttributes {
        /// The tree database.
        database: String,
        /// The table.
        table: String,
        /// The table's incarnation the write derived them from (its `created_version`): refused
        /// for any other, so a write that read a dropped table sets nothing. 0: any.
        table_version: u64,
        /// Devices (tag values, trailing nulls left out) and the attributes written.
        devices: Vec<DeviceAttributes>,
    },
    /// Creates the series a table write needs (auto-creation, as `CreateTimeseries` with
    /// `auto_create`), refused whole unless the table exists as the incarnation the write derived
    /// its devices from and every series lies under it: a write that read a dropped table's
    /// schema creates nothing under its name (REVIEW N1).
    CreateTableSeries {
        /// The table the devices are derived from.
        origin: TableOrigin,
        /// The series; they declare nothing (no encoding, compressor, alias, tags).
        series: Vec<SeriesSpec>,
    },
}

/// The table a write derived its devices from: `table` of the tree database `database`, created
/// at metadata version `created_version` (one incarnation of the name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableOrigin {
    /// The tree database, `root.<name>`.
    pub database: String,
    /// The table.
    pub table: String,
    /// Its incarnation.
    pub created_version: u64,
}

/// One device's tag values and attributes written ([`Command::SetDeviceAttributes`]).
pub type DeviceAttributes = (Vec<Option<String>>, BTreeMap<String, String>);

mod kind {
    pub const REGISTER_DATA_NODE: u8 = 1;
    pub const SET_DATA_NODE_STATUS: u8 = 2;
    pub const CREATE_DATABASE: u8 = 3;
    pub const CREATE_TIMESERIES: u8 = 4;
    pub const ALLOCATE_PARTITIONS: u8 = 5;
    pub const BEGIN_DELETE_TIMESERIES: u8 = 6;
    pub const BEGIN_DROP_DATABASE: u8 = 7;
    pub const FINISH_OPERATION: u8 = 8;
    pub const BEGIN_SET_TTL: u8 = 9;
    /// CREATE_TIMESERIES whose series carry their declared encoding and compressor (names,
    /// `str16` each, empty when undeclared) after the type; written only when one declares.
    pub const CREATE_TIMESERIES_WITH_CODECS: u8 = 10;
    pub const REGISTER_NEW_DATA_NODE: u8 = 11;
    pub const BEGIN_REGION_MIGRATION: u8 = 12;
    pub const FINISH_REGION_MIGRATION: u8 = 13;
    pub const REMOVE_DATA_NODE: u8 = 14;
    pub const CREATE_USER: u8 = 15;
    pub const DROP_USER: u8 = 16;
    pub const SET_USER_PASSWORD: u8 = 17;
    /// CREATE_TIMESERIES_WITH_CODECS whose series also carry their alias, tags and attributes;
    /// written only when one declares any.
    pub const CREATE_TIMESERIES_WITH_META: u8 = 18;
    pub const CREATE_TABLE: u8 = 19;
    pub const SET_DEVICE_ATTRIBUTES: u8 = 20;
    pub const BEGIN_DROP_TABLE: u8 = 21;
    pub const REREGISTER_DATA_NODE: u8 = 22;
    pub const CONFIRM_INCARNATION: u8 = 23;
    pub const CREATE_TABLE_SERIES: u8 = 24;
    /// SET_DEVICE_ATTRIBUTES preceded by the table version it was derived from.
    pub const SET_TABLE_DEVICE_ATTRIBUTES: u8 = 25;
    /// CREATE_DATABASE of a table-model database.
    pub const CREATE_TABLE_DATABASE: u8 = 26;
}

mod kinds;

impl Command {
    /// The version-2 encoding: the version byte, then the kind's layout (module `kinds`).
    pub fn encode(&self) -> Vec<u8> {
        let mut writer = Writer::new();
        writer.u8(COMMAND_VERSION);
        let w = &mut writer;
        // Dispatched by concern to module `kinds`, where each kind's encoder (which writes the
        // kind byte and the fields) sits beside its decoder.
        match self {
            Command::RegisterDataNode { .. }
            | Command::RegisterNewDataNode { .. }
            | Command::ReregisterDataNode { .. }
            | Command::ConfirmIncarnation { .. }
            | Command::SetDataNodeStatus { .. }
            | Command::RemoveDataNode { .. } => kinds::encode_registry(w, self),
            Command::CreateDatabase { .. } | Command::CreateTimeseries { .. } => {
                kinds::encode_schema(w, self)
            }
            Command::AllocatePartitions { .. }
            | Command::BeginRegionMigration { .. }
            | Command::FinishRegionMigration { .. } => kinds::encode_placement(w, self),
            Command::BeginDeleteTimeseries { .. }
            | Command::BeginDropDatabase { .. }
            | Command::BeginSetTtl { .. }
            | Command::FinishOperation { .. } => kinds::encode_operation(w, self),
            Command::CreateUser { .. }
            | Command::DropUser { .. }
            | Command::SetUserPassword { .. } => kinds::encode_user(w, self),
            Command::CreateTable { .. }
            | Command::BeginDropTable { .. }
            | Command::SetDeviceAttributes { .. }
            | Command::CreateTableSeries { .. } => kinds::encode_table(w, self),
        }
        let bytes = writer.into_bytes();
        debug_assert_eq!(
            Command::decode(&bytes).as_ref(),
            Ok(self),
            "command round trip"
        );
        bytes
    }

    /// Inverse of [`Command::encode`], also of the version-1 encoding; refuses unknown versions
    /// and kinds and trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Command, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.u8()?;
        if version != COMMAND_VERSION && version != COMMAND_VERSION_WITHOUT_PARTITION_CAP {
            return r.error(format!("command version {version}"));
        }
        let command = match r.u8()? {
            kind::REGISTER_DATA_NODE => kinds::decode_register_data_node(&mut r)?,
            kind::REGISTER_NEW_DATA_NODE => kinds::decode_register_new_data_node(&mut r)?,
            kind::REREGISTER_DATA_NODE => kinds::decode_reregister(&mut r)?,
            kind::CONFIRM_INCARNATION => kinds::decode_confirm_incarnation(&mut r)?,
            kind::SET_DATA_NODE_STATUS => kinds::decode_set_data_node_status(&mut r)?,
            kind::REMOVE_DATA_NODE => kinds::decode_remove_data_node(&mut r)?,
            k @ (kind::CREATE_DATABASE | kind::CREATE_TABLE_DATABASE) => {
                kinds::decode_create_database(&mut r, k)?
            }
            k @ (kind::CREATE_TIMESERIES
            | kind::CREATE_TIMESERIES_WITH_CODECS
            | kind::CREATE_TIMESERIES_WITH_META) => kinds::decode_create_timeseries(&mut r, k)?,
            kind::ALLOCATE_PARTITIONS => kinds::decode_allocate_partitions(&mut r, version)?,
            kind::BEGIN_REGION_MIGRATION => kinds::decode_begin_region_migration(&mut r)?,
            kind::FINISH_REGION_MIGRATION => kinds::decode_finish_region_migration(&mut r)?,
            kind::BEGIN_DELETE_TIMESERIES => kinds::decode_begin_delete_timeseries(&mut r)?,
            kind::BEGIN_DROP_DATABASE => kinds::decode_begin_drop_database(&mut r)?,
            kind::BEGIN_SET_TTL => kinds::decode_begin_set_ttl(&mut r)?,
            kind::FINISH_OPERATION => kinds::decode_finish_operation(&mut r)?,
            kind::CREATE_USER => kinds::decode_create_user(&mut r)?,
            kind::DROP_USER => kinds::decode_drop_user(&mut r)?,
            kind::SET_USER_PASSWORD => kinds::decode_set_user_password(&mut r)?,
            kind::CREATE_TABLE => kinds::decode_create_table(&mut r)?,
            kind::BEGIN_DROP_TABLE => kinds::decode_begin_drop_table(&mut r)?,
            k @ (kind::SET_DEVICE_ATTRIBUTES | kind::SET_TABLE_DEVICE_ATTRIBUTES) => {
                kinds::decode_set_device_attributes(&mut r, k)?
            }
            kind::CREATE_TABLE_SERIES => kinds::decode_create_table_series(&mut r)?,
            other => return r.error(format!("command kind {other}")),
        };
        r.finish()?;
        Ok(command)
    }
}

/// The result of an applied command, returned to the proposer (encoded the same way: `u8 kind`
/// then fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandResult {
    /// Nothing to report.
    Done,
    /// A DataNode's id and its new incarnation epoch.
    Registered {
        /// The id.
        data_node_id: u64,
        /// The new epoch.
        incarnation_epoch: u64,
    },
    /// Region groups created by an allocation (the leader creates them on the DataNodes).
    RegionsCreated(Vec<u64>),
    /// The id of a begun fence operation.
    OperationBegun(u64),
}

impl CommandResult {
    /// Encoding: `u8 tag` (0 Done, 1 Registered, 2 RegionsCreated, 3 OperationBegun) then fields.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        match self {
            CommandResult::Done => w.u8(0),
            CommandResult::Registered {
                data_node_id,
                incarnation_epoch,
            } => {
                w.u8(1);
                w.u64(*data_node_id);
                w.u64(*incarnation_epoch);
            }
            CommandResult::RegionsCreated(ids) => {
                w.u8(2);
                w.len32(ids.len());
                ids.iter().for_each(|id| w.u64(*id));
            }
            CommandResult::OperationBegun(id) => {
                w.u8(3);
                w.u64(*id);
            }
        }
        let bytes = w.into_bytes();
        debug_assert_eq!(
            CommandResult::decode(&bytes).as_ref(),
            Ok(self),
            "command result round trip"
        );
        bytes
    }

    /// Inverse of [`CommandResult::encode`].
    pub fn decode(bytes: &[u8]) -> Result<CommandResult, DecodeError> {
        let mut r = Reader::new(bytes);
        let result = match r.u8()? {
            0 => CommandResult::Done,
            1 => CommandResult::Registered {
                data_node_id: r.u64()?,
                incarnation_epoch: r.u64()?,
            },
            2 => {
                let n = r.count(8)?;
                let mut ids = Vec::with_capacity(n);
                for _ in 0..n {
                    ids.push(r.u64()?);
                }
                CommandResult::RegionsCreated(ids)
            }
            3 => CommandResult::OperationBegun(r.u64()?),
            tag => return r.error(format!("result tag {tag}")),
        };
        r.finish()?;
        Ok(result)
    }
}

/// (device, measurement) pairs (kind 6, and the snapshot's operations): `u32 n × {str16
/// device, str16 measurement}`.
pub(crate) fn encode_series_keys(w: &mut Writer, series: &[(String, String)]) {
    w.len32(series.len());
    for (device, measurement) in series {
        w.str16(device);
        w.str16(measurement);
    }
}

pub(crate) fn decode_series_keys(
    r: &mut Reader<'_>,
) -> common::codec::DecodeResult<Vec<(String, String)>> {
    let n = r.count(4)?;
    let mut series = Vec::with_capacity(n);
    for _ in 0..n {
        series.push((r.str16()?, r.str16()?));
    }
    Ok(series)
}

/// A table's columns (kind 19, and the snapshot's tables): `u32 n × {str16 name, u8 category,
/// u8 type}`.
pub(crate) fn encode_table_columns(w: &mut Writer, columns: &[TableColumn]) {
    w.len32(columns.len());
    for c in columns {
        w.str16(&c.name);
        w.u8(c.category.wire());
        w.u8(c.data_type.code());
    }
}

pub(crate) fn decode_table_columns(
    r: &mut Reader<'_>,
) -> common::codec::DecodeResult<Vec<TableColumn>> {
    let n = r.count(4)?;
    let mut columns = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.str16()?;
        let byte = r.u8()?;
        let Some(category) = Category::from_wire(byte) else {
            return r.error(format!("column category {byte}"));
        };
        columns.push(TableColumn {
            name,
            category,
            data_type: r.data_type()?,
        });
    }
    Ok(columns)
}

/// A table device's tag values and attributes (kind 20, and the snapshot's tables): `u32 tags ×
/// {bool present, [str16]}, u32 attributes × {str16, str16}`.
pub(crate) fn encode_device(
    w: &mut Writer,
    tags: &[Option<String>],
    attributes: &BTreeMap<String, String>,
) {
    w.len32(tags.len());
    for tag in tags {
        w.bool(tag.is_some());
        if let Some(tag) = tag {
            w.str16(tag);
        }
    }
    w.len32(attributes.len());
    for (k, v) in attributes {
        w.str16(k);
        w.str16(v);
    }
}

pub(crate) fn decode_device(r: &mut Reader<'_>) -> common::codec::DecodeResult<DeviceAttributes> {
    let mut tags = Vec::new();
    for _ in 0..r.count(1)? {
        tags.push(if r.bool()? { Some(r.str16()?) } else { None });
    }
    let mut attributes = BTreeMap::new();
    for _ in 0..r.count(4)? {
        attributes.insert(r.str16()?, r.str16()?);
    }
    Ok((tags, attributes))
}

/// A series' alias, tags and attributes (kind 18, and the snapshot's series meta table).
pub(crate) fn encode_meta(w: &mut Writer, meta: &SeriesMeta) {
    w.str16(meta.alias.as_deref().unwrap_or(""));
    for map in [&meta.tags, &meta.attributes] {
        w.len32(map.len());
        for (key, value) in map {
            w.str16(key);
            w.str16(value);
        }
    }
}

pub(crate) fn decode_meta(r: &mut Reader<'_>) -> common::codec::DecodeResult<SeriesMeta> {
    let alias = r.str16()?;
    let mut maps = [
        std::collections::BTreeMap::new(),
        std::collections::BTreeMap::new(),
    ];
    for map in &mut maps {
        for _ in 0..r.count(4)? {
            let key = r.str16()?;
            let value = r.str16()?;
            if map.insert(key.clone(), value).is_some() {
                return r.error(format!("key {key:?} appears twice"));
            }
        }
    }
    let [tags, attributes] = maps;
    Ok(SeriesMeta {
        alias: (!alias.is_empty()).then_some(alias),
        tags,
        attributes,
    })
}

#[cfg(test)]
pub(crate) mod tests;
