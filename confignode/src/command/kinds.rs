//! Each command kind's layout (the module doc of [`super`] describes them): its encoder, which
//! writes the kind byte then the fields, beside its decoder, which reads the fields after the
//! kind byte. [`Command::encode`] dispatches a command to its concern's encoder, first in each
//! section, which hands the fields to the kind's; [`Command::decode`] dispatches on the kind
//! byte.

use common::codec::DecodeResult;

use super::*;

// The registry's kinds.

/// Encodes a command of the registry's kinds.
pub(super) fn encode_registry(w: &mut Writer, command: &Command) {
    match command {
        Command::RegisterDataNode {
            data_node_id,
            internal_address,
            rpc_address,
        } => encode_register_data_node(w, *data_node_id, internal_address, rpc_address),
        Command::RegisterNewDataNode {
            internal_address,
            rpc_address,
        } => encode_register_new_data_node(w, internal_address, rpc_address),
        Command::ReregisterDataNode {
            data_node_id,
            stored_epoch,
            internal_address,
            rpc_address,
        } => encode_reregister(
            w,
            *data_node_id,
            *stored_epoch,
            internal_address,
            rpc_address,
        ),
        Command::ConfirmIncarnation {
            data_node_id,
            incarnation_epoch,
        } => encode_confirm_incarnation(w, *data_node_id, *incarnation_epoch),
        Command::SetDataNodeStatus {
            data_node_id,
            status,
        } => encode_set_data_node_status(w, *data_node_id, *status),
        Command::RemoveDataNode { data_node_id } => encode_remove_data_node(w, *data_node_id),
        other => unreachable!("{other:?} is not a registry command"),
    }
}

/// REGISTER_DATA_NODE: `u64 id (0: none), str16 internal, str16 rpc`.
fn encode_register_data_node(
    w: &mut Writer,
    data_node_id: u64,
    internal_address: &str,
    rpc_address: &str,
) {
    w.u8(kind::REGISTER_DATA_NODE);
    w.u64(data_node_id);
    w.str16(internal_address);
    w.str16(rpc_address);
}

pub(super) fn decode_register_data_node(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::RegisterDataNode {
        data_node_id: r.u64()?,
        internal_address: r.str16()?,
        rpc_address: r.str16()?,
    })
}

/// REGISTER_NEW_DATA_NODE: `str16 internal, str16 rpc`.
fn encode_register_new_data_node(w: &mut Writer, internal_address: &str, rpc_address: &str) {
    w.u8(kind::REGISTER_NEW_DATA_NODE);
    w.str16(internal_address);
    w.str16(rpc_address);
}

pub(super) fn decode_register_new_data_node(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::RegisterNewDataNode {
        internal_address: r.str16()?,
        rpc_address: r.str16()?,
    })
}

/// REREGISTER_DATA_NODE: `u64 id, u64 stored epoch, str16 internal, str16 rpc`.
fn encode_reregister(
    w: &mut Writer,
    data_node_id: u64,
    stored_epoch: u64,
    internal_address: &str,
    rpc_address: &str,
) {
    w.u8(kind::REREGISTER_DATA_NODE);
    w.u64(data_node_id);
    w.u64(stored_epoch);
    w.str16(internal_address);
    w.str16(rpc_address);
}

pub(super) fn decode_reregister(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::ReregisterDataNode {
        data_node_id: r.u64()?,
        stored_epoch: r.u64()?,
        internal_address: r.str16()?,
        rpc_address: r.str16()?,
    })
}

/// CONFIRM_INCARNATION: `u64 id, u64 epoch`.
fn encode_confirm_incarnation(w: &mut Writer, data_node_id: u64, epoch: u64) {
    w.u8(kind::CONFIRM_INCARNATION);
    w.u64(data_node_id);
    w.u64(epoch);
}

pub(super) fn decode_confirm_incarnation(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::ConfirmIncarnation {
        data_node_id: r.u64()?,
        incarnation_epoch: r.u64()?,
    })
}

/// SET_DATA_NODE_STATUS: `u64 id, u8 status`.
fn encode_set_data_node_status(w: &mut Writer, data_node_id: u64, status: NodeStatus) {
    w.u8(kind::SET_DATA_NODE_STATUS);
    w.u64(data_node_id);
    w.u8(status.code());
}

pub(super) fn decode_set_data_node_status(r: &mut Reader<'_>) -> DecodeResult<Command> {
    let data_node_id = r.u64()?;
    let code = r.u8()?;
    let Some(status) = NodeStatus::from_code(code) else {
        return r.error(format!("node status {code}"));
    };
    Ok(Command::SetDataNodeStatus {
        data_node_id,
        status,
    })
}

/// REMOVE_DATA_NODE: `u64 id`.
fn encode_remove_data_node(w: &mut Writer, data_node_id: u64) {
    w.u8(kind::REMOVE_DATA_NODE);
    w.u64(data_node_id);
}

pub(super) fn decode_remove_data_node(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::RemoveDataNode {
        data_node_id: r.u64()?,
    })
}

// The schema's kinds.

/// Encodes a command of the schema's kinds.
pub(super) fn encode_schema(w: &mut Writer, command: &Command) {
    match command {
        Command::CreateDatabase {
            database,
            table_model,
        } => encode_create_database(w, database, *table_model),
        Command::CreateTimeseries {
            series,
            auto_create,
        } => encode_create_timeseries(w, series, *auto_create),
        other => unreachable!("{other:?} is not a schema command"),
    }
}

/// CREATE_DATABASE, or CREATE_TABLE_DATABASE for a table-model one: `str16 database`.
fn encode_create_database(w: &mut Writer, database: &str, table_model: bool) {
    w.u8(if table_model {
        kind::CREATE_TABLE_DATABASE
    } else {
        kind::CREATE_DATABASE
    });
    w.str16(database);
}

pub(super) fn decode_create_database(r: &mut Reader<'_>, kind: u8) -> DecodeResult<Command> {
    Ok(Command::CreateDatabase {
        database: r.str16()?,
        table_model: kind == kind::CREATE_TABLE_DATABASE,
    })
}

/// CREATE_TIMESERIES (`bool auto_create, u32 series × { str16 device, str16 measurement, u8
/// type }`), as CREATE_TIMESERIES_WITH_CODECS when a series declares its encoding or
/// compressor, as CREATE_TIMESERIES_WITH_META when one declares an alias, tags or attributes.
fn encode_create_timeseries(w: &mut Writer, series: &[SeriesSpec], auto_create: bool) {
    let meta = series.iter().any(|s| !s.meta.is_empty());
    let codecs = meta || series.iter().any(|s| s.codec.is_declared());
    w.u8(if meta {
        kind::CREATE_TIMESERIES_WITH_META
    } else if codecs {
        kind::CREATE_TIMESERIES_WITH_CODECS
    } else {
        kind::CREATE_TIMESERIES
    });
    w.bool(auto_create);
    w.len32(series.len());
    for s in series {
        w.str16(&s.device);
        w.str16(&s.measurement);
        w.u8(s.data_type.code());
        if codecs {
            w.str16(s.codec.encoding_name());
            w.str16(s.codec.compressor_name());
        }
        if meta {
            encode_meta(w, &s.meta);
        }
    }
}

/// Kind `k`: CREATE_TIMESERIES, CREATE_TIMESERIES_WITH_CODECS or CREATE_TIMESERIES_WITH_META.
pub(super) fn decode_create_timeseries(r: &mut Reader<'_>, k: u8) -> DecodeResult<Command> {
    let auto_create = r.bool()?;
    let n = r.count(5)?;
    let mut series = Vec::with_capacity(n);
    for _ in 0..n {
        let device = r.str16()?;
        let measurement = r.str16()?;
        let data_type = r.data_type()?;
        let codec = if k != kind::CREATE_TIMESERIES {
            let encoding = r.str16()?;
            let compressor = r.str16()?;
            match SeriesCodec::parse(data_type, Some(&encoding), Some(&compressor)) {
                Ok(codec) => codec,
                Err(e) => return r.error(e),
            }
        } else {
            SeriesCodec::default()
        };
        let meta = if k == kind::CREATE_TIMESERIES_WITH_META {
            decode_meta(r)?
        } else {
            SeriesMeta::default()
        };
        series.push(SeriesSpec {
            device,
            measurement,
            data_type,
            codec,
            meta,
        });
    }
    Ok(Command::CreateTimeseries {
        series,
        auto_create,
    })
}

// Placement's kinds.

/// Encodes a command of placement's kinds.
pub(super) fn encode_placement(w: &mut Writer, command: &Command) {
    match command {
        Command::AllocatePartitions {
            database,
            slots,
            replication_factor,
            region_groups_max,
            database_partitions_max,
        } => encode_allocate_partitions(
            w,
            database,
            slots,
            *replication_factor,
            *region_groups_max,
            *database_partitions_max,
        ),
        Command::BeginRegionMigration {
            region_id,
            from,
            to,
        } => encode_region_migration(w, kind::BEGIN_REGION_MIGRATION, *region_id, *from, *to),
        Command::FinishRegionMigration {
            region_id,
            from,
            to,
        } => encode_region_migration(w, kind::FINISH_REGION_MIGRATION, *region_id, *from, *to),
        other => unreachable!("{other:?} is not a placement command"),
    }
}

/// ALLOCATE_PARTITIONS: `str16 database, u32 replication factor, u32 region groups max, u64
/// database partitions max (not in version 1), u32 slots × { u32 series slot, i64 time slot }`.
fn encode_allocate_partitions(
    w: &mut Writer,
    database: &str,
    slots: &[(u32, i64)],
    replication_factor: u32,
    region_groups_max: u32,
    database_partitions_max: u64,
) {
    w.u8(kind::ALLOCATE_PARTITIONS);
    w.str16(database);
    w.u32(replication_factor);
    w.u32(region_groups_max);
    w.u64(database_partitions_max);
    w.len32(slots.len());
    for (series_slot, time_slot) in slots {
        w.u32(*series_slot);
        w.i64(*time_slot);
    }
}

/// `version`: of the command's encoding; version 1 has no cap (`u64::MAX`).
pub(super) fn decode_allocate_partitions(r: &mut Reader<'_>, version: u8) -> DecodeResult<Command> {
    let database = r.str16()?;
    let replication_factor = r.u32()?;
    let region_groups_max = r.u32()?;
    let database_partitions_max = if version == COMMAND_VERSION {
        r.u64()?
    } else {
        u64::MAX
    };
    let n = r.count(12)?;
    let mut slots = Vec::with_capacity(n);
    for _ in 0..n {
        slots.push((r.u32()?, r.i64()?));
    }
    Ok(Command::AllocatePartitions {
        database,
        slots,
        replication_factor,
        region_groups_max,
        database_partitions_max,
    })
}

/// BEGIN_REGION_MIGRATION and FINISH_REGION_MIGRATION (kind `k`): `u64 region, u64 from, u64
/// to`.
fn encode_region_migration(w: &mut Writer, k: u8, region_id: u64, from: u64, to: u64) {
    w.u8(k);
    w.u64(region_id);
    w.u64(from);
    w.u64(to);
}

pub(super) fn decode_begin_region_migration(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::BeginRegionMigration {
        region_id: r.u64()?,
        from: r.u64()?,
        to: r.u64()?,
    })
}

pub(super) fn decode_finish_region_migration(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::FinishRegionMigration {
        region_id: r.u64()?,
        from: r.u64()?,
        to: r.u64()?,
    })
}

// The fence operations' kinds.

/// Encodes a command of the fence operations' kinds.
pub(super) fn encode_operation(w: &mut Writer, command: &Command) {
    match command {
        Command::BeginDeleteTimeseries { series } => encode_begin_delete_timeseries(w, series),
        Command::BeginDropDatabase { database } => encode_begin_drop_database(w, database),
        Command::BeginSetTtl { database, ttl_ms } => encode_begin_set_ttl(w, database, *ttl_ms),
        Command::FinishOperation { operation_id } => encode_finish_operation(w, *operation_id),
        other => unreachable!("{other:?} is not a fence operation command"),
    }
}

/// BEGIN_DELETE_TIMESERIES: `u32 series × { str16 device, str16 measurement }`.
fn encode_begin_delete_timeseries(w: &mut Writer, series: &[(String, String)]) {
    w.u8(kind::BEGIN_DELETE_TIMESERIES);
    encode_series_keys(w, series);
}

pub(super) fn decode_begin_delete_timeseries(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::BeginDeleteTimeseries {
        series: decode_series_keys(r)?,
    })
}

/// BEGIN_DROP_DATABASE: `str16 database`.
fn encode_begin_drop_database(w: &mut Writer, database: &str) {
    w.u8(kind::BEGIN_DROP_DATABASE);
    w.str16(database);
}

pub(super) fn decode_begin_drop_database(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::BeginDropDatabase {
        database: r.str16()?,
    })
}

/// BEGIN_SET_TTL: `str16 database, i64 ttl_ms (0: UNSET)`.
fn encode_begin_set_ttl(w: &mut Writer, database: &str, ttl_ms: Option<i64>) {
    assert!(
        ttl_ms.is_none_or(|t| t != 0),
        "a TTL of 0 would decode as UNSET"
    );
    w.u8(kind::BEGIN_SET_TTL);
    w.str16(database);
    w.i64(ttl_ms.unwrap_or(0));
}

pub(super) fn decode_begin_set_ttl(r: &mut Reader<'_>) -> DecodeResult<Command> {
    let database = r.str16()?;
    let ttl_ms = r.i64()?;
    Ok(Command::BeginSetTtl {
        database,
        ttl_ms: (ttl_ms != 0).then_some(ttl_ms),
    })
}

/// FINISH_OPERATION: `u64 operation id`.
fn encode_finish_operation(w: &mut Writer, operation_id: u64) {
    w.u8(kind::FINISH_OPERATION);
    w.u64(operation_id);
}

pub(super) fn decode_finish_operation(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::FinishOperation {
        operation_id: r.u64()?,
    })
}

// The users' kinds.

/// Encodes a command of the users' kinds.
pub(super) fn encode_user(w: &mut Writer, command: &Command) {
    match command {
        Command::CreateUser {
            username,
            password_hash,
        } => encode_user_password(w, kind::CREATE_USER, username, password_hash),
        Command::DropUser { username } => encode_drop_user(w, username),
        Command::SetUserPassword {
            username,
            password_hash,
        } => encode_user_password(w, kind::SET_USER_PASSWORD, username, password_hash),
        other => unreachable!("{other:?} is not a user command"),
    }
}

/// CREATE_USER and SET_USER_PASSWORD (kind `k`): `str16 user, str16 password hash`.
fn encode_user_password(w: &mut Writer, k: u8, username: &str, password_hash: &str) {
    w.u8(k);
    w.str16(username);
    w.str16(password_hash);
}

pub(super) fn decode_create_user(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::CreateUser {
        username: r.str16()?,
        password_hash: r.str16()?,
    })
}

pub(super) fn decode_set_user_password(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::SetUserPassword {
        username: r.str16()?,
        password_hash: r.str16()?,
    })
}

/// DROP_USER: `str16 user`.
fn encode_drop_user(w: &mut Writer, username: &str) {
    w.u8(kind::DROP_USER);
    w.str16(username);
}

pub(super) fn decode_drop_user(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::DropUser {
        username: r.str16()?,
    })
}

// The table model's kinds.

/// Encodes a command of the table model's kinds.
pub(super) fn encode_table(w: &mut Writer, command: &Command) {
    match command {
        Command::CreateTable {
            database,
            table,
            if_not_exists,
            extend,
        } => encode_create_table(w, database, table, *if_not_exists, *extend),
        Command::BeginDropTable { database, table } => encode_begin_drop_table(w, database, table),
        Command::SetDeviceAttributes {
            database,
            table,
            table_version,
            devices,
        } => encode_set_device_attributes(w, database, table, *table_version, devices),
        Command::CreateTableSeries { origin, series } => {
            encode_create_table_series(w, origin, series)
        }
        other => unreachable!("{other:?} is not a table model command"),
    }
}

/// CREATE_TABLE: `str16 database, str16 table, i64 ttl_ms (0: none), u8 flags (1
/// if_not_exists, 2 extend)`, then the columns.
fn encode_create_table(
    w: &mut Writer,
    database: &str,
    table: &TableSchema,
    if_not_exists: bool,
    extend: bool,
) {
    w.u8(kind::CREATE_TABLE);
    w.str16(database);
    w.str16(&table.name);
    w.i64(table.ttl_ms.unwrap_or(0));
    w.u8(u8::from(if_not_exists) | u8::from(extend) << 1);
    encode_table_columns(w, &table.columns);
}

pub(super) fn decode_create_table(r: &mut Reader<'_>) -> DecodeResult<Command> {
    let database = r.str16()?;
    let name = r.str16()?;
    let ttl_ms = r.i64()?;
    let flags = r.u8()?;
    if flags > 3 {
        return r.error(format!("CREATE TABLE flags {flags}"));
    }
    let columns = decode_table_columns(r)?;
    Ok(Command::CreateTable {
        database,
        table: TableSchema {
            name,
            columns,
            ttl_ms: (ttl_ms != 0).then_some(ttl_ms),
        },
        if_not_exists: flags & 1 != 0,
        extend: flags & 2 != 0,
    })
}

/// BEGIN_DROP_TABLE: `str16 database, str16 table`.
fn encode_begin_drop_table(w: &mut Writer, database: &str, table: &str) {
    w.u8(kind::BEGIN_DROP_TABLE);
    w.str16(database);
    w.str16(table);
}

pub(super) fn decode_begin_drop_table(r: &mut Reader<'_>) -> DecodeResult<Command> {
    Ok(Command::BeginDropTable {
        database: r.str16()?,
        table: r.str16()?,
    })
}

/// SET_DEVICE_ATTRIBUTES (`str16 database, str16 table, u32 devices × device`) for table
/// version 0, else SET_TABLE_DEVICE_ATTRIBUTES: `u64 table_version`, then the same.
fn encode_set_device_attributes(
    w: &mut Writer,
    database: &str,
    table: &str,
    table_version: u64,
    devices: &[DeviceAttributes],
) {
    if table_version == 0 {
        w.u8(kind::SET_DEVICE_ATTRIBUTES);
    } else {
        w.u8(kind::SET_TABLE_DEVICE_ATTRIBUTES);
        w.u64(table_version);
    }
    w.str16(database);
    w.str16(table);
    w.len32(devices.len());
    for (tags, attributes) in devices {
        encode_device(w, tags, attributes);
    }
}

/// Kind `k`: SET_DEVICE_ATTRIBUTES or SET_TABLE_DEVICE_ATTRIBUTES.
pub(super) fn decode_set_device_attributes(r: &mut Reader<'_>, k: u8) -> DecodeResult<Command> {
    let table_version = if k == kind::SET_TABLE_DEVICE_ATTRIBUTES {
        match r.u64()? {
            0 => return r.error("SET_TABLE_DEVICE_ATTRIBUTES of table version 0"),
            v => v,
        }
    } else {
        0
    };
    let database = r.str16()?;
    let table = r.str16()?;
    let n = r.count(8)?;
    let mut devices = Vec::with_capacity(n);
    for _ in 0..n {
        devices.push(decode_device(r)?);
    }
    Ok(Command::SetDeviceAttributes {
        database,
        table,
        table_version,
        devices,
    })
}

/// CREATE_TABLE_SERIES: `str16 database, str16 table, u64 created_version, u32 series × {
/// str16 device, str16 measurement, u8 type }` (the series declare nothing).
fn encode_create_table_series(w: &mut Writer, origin: &TableOrigin, series: &[SeriesSpec]) {
    w.u8(kind::CREATE_TABLE_SERIES);
    w.str16(&origin.database);
    w.str16(&origin.table);
    w.u64(origin.created_version);
    w.len32(series.len());
    for s in series {
        assert!(
            !s.codec.is_declared() && s.meta.is_empty(),
            "a table write's series {}.{} declares nothing",
            s.device,
            s.measurement
        );
        w.str16(&s.device);
        w.str16(&s.measurement);
        w.u8(s.data_type.code());
    }
}

pub(super) fn decode_create_table_series(r: &mut Reader<'_>) -> DecodeResult<Command> {
    let origin = TableOrigin {
        database: r.str16()?,
        table: r.str16()?,
        created_version: r.u64()?,
    };
    let n = r.count(5)?;
    let mut series = Vec::with_capacity(n);
    for _ in 0..n {
        series.push(SeriesSpec {
            device: r.str16()?,
            measurement: r.str16()?,
            data_type: r.data_type()?,
            codec: SeriesCodec::default(),
            meta: SeriesMeta::default(),
        });
    }
    Ok(Command::CreateTableSeries { origin, series })
}
