//! The structs of `IClientRPCService` a server reads (requests) and writes (responses), with the
//! field ids and types of IoTDB's `client.thrift` and `common.thrift` as the 2.0.11 clients use
//! them (`IOTDB_PROTOCOL.md` §§2-8). A request field of the wrong wire type is skipped, as
//! generated Thrift code does, and then reads as absent; unknown fields are skipped.

use std::collections::BTreeMap;

use thrift_codec::{FieldHeader, Reader, Result, TType, Writer};

/// Reads a struct's fields, handing each to `field`, which answers whether it read the value;
/// the fields it does not read are skipped.
pub fn read_struct(
    r: &mut Reader,
    mut field: impl FnMut(&mut Reader, FieldHeader) -> Result<bool>,
) -> Result<()> {
    r.struct_begin()?;
    while let Some(header) = r.field_begin()? {
        if !field(r, header)? {
            r.skip(header.ttype)?;
        }
    }
    r.struct_end();
    Ok(())
}

fn read_string(r: &mut Reader) -> Result<String> {
    r.string()
}

fn read_binary(r: &mut Reader) -> Result<Vec<u8>> {
    Ok(r.binary()?.to_vec())
}

fn read_i32(r: &mut Reader) -> Result<i32> {
    r.i32()
}

fn read_i64(r: &mut Reader) -> Result<i64> {
    r.i64()
}

fn read_bool(r: &mut Reader) -> Result<bool> {
    r.bool()
}

/// A list of `element` values read with `item`; `None` (skipped) when the list holds another
/// type.
fn read_list<T>(
    r: &mut Reader,
    element: TType,
    mut item: impl FnMut(&mut Reader) -> Result<T>,
) -> Result<Option<Vec<T>>> {
    let (ttype, n) = r.list_begin()?;
    if ttype != element {
        for _ in 0..n {
            r.skip(ttype)?;
        }
        r.container_end();
        return Ok(None);
    }
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        items.push(item(r)?);
    }
    r.container_end();
    Ok(Some(items))
}

fn strings(r: &mut Reader) -> Result<Vec<String>> {
    Ok(read_list(r, TType::String, read_string)?.unwrap_or_default())
}

fn binaries(r: &mut Reader) -> Result<Vec<Vec<u8>>> {
    Ok(read_list(r, TType::String, read_binary)?.unwrap_or_default())
}

fn i32s(r: &mut Reader) -> Result<Vec<i32>> {
    Ok(read_list(r, TType::I32, read_i32)?.unwrap_or_default())
}

fn bytes(r: &mut Reader) -> Result<Vec<i8>> {
    Ok(read_list(r, TType::Byte, |r| r.i8())?.unwrap_or_default())
}

fn i64s(r: &mut Reader) -> Result<Vec<i64>> {
    Ok(read_list(r, TType::I64, read_i64)?.unwrap_or_default())
}

fn string_lists(r: &mut Reader) -> Result<Vec<Vec<String>>> {
    Ok(read_list(r, TType::List, strings)?.unwrap_or_default())
}

fn i32_lists(r: &mut Reader) -> Result<Vec<Vec<i32>>> {
    Ok(read_list(r, TType::List, i32s)?.unwrap_or_default())
}

fn string_maps(r: &mut Reader) -> Result<Vec<BTreeMap<String, String>>> {
    Ok(read_list(r, TType::Map, string_map)?.unwrap_or_default())
}

/// A `map<string, string>`; entries of other types are skipped.
fn string_map(r: &mut Reader) -> Result<BTreeMap<String, String>> {
    let (key, value, n) = r.map_begin()?;
    let mut map = BTreeMap::new();
    for _ in 0..n {
        if key == TType::String && value == TType::String {
            let k = r.string()?;
            map.insert(k, r.string()?);
        } else {
            r.skip(key)?;
            r.skip(value)?;
        }
    }
    r.container_end();
    Ok(map)
}

/// Reads `header`'s value with `read` when its wire type is `ttype` (else it is skipped).
fn typed<T>(
    r: &mut Reader,
    header: FieldHeader,
    ttype: TType,
    slot: &mut T,
    read: impl FnOnce(&mut Reader) -> Result<T>,
) -> Result<bool> {
    if header.ttype != ttype {
        return Ok(false);
    }
    *slot = read(r)?;
    Ok(true)
}

/// Defines a request struct read field by field: `name: Type = id, wire type, reader`.
macro_rules! request {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident: $ty:ty = $id:literal, $ttype:ident, $read:expr;)* }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $name {
            /// Reads the struct; absent fields keep their defaults.
            pub fn read(r: &mut Reader) -> Result<$name> {
                let mut out = $name::default();
                read_struct(r, |r, header| match header.id {
                    $($id => typed(r, header, TType::$ttype, &mut out.$field, $read),)*
                    _ => Ok(false),
                })?;
                Ok(out)
            }
        }
    };
}

fn some<T>(
    read: impl FnOnce(&mut Reader) -> Result<T>,
) -> impl FnOnce(&mut Reader) -> Result<Option<T>> {
    move |r| read(r).map(Some)
}

request!(
    /// `openSession`'s `TSOpenSessionReq`.
    OpenSessionReq {
        /// 2 = IOTDB_SERVICE_PROTOCOL_V3.
        client_protocol: i32 = 1, I32, read_i32;
        zone_id: String = 2, String, read_string;
        username: String = 3, String, read_string;
        password: Option<String> = 4, String, some(read_string);
        /// `version`, `sql_dialect` ("tree" or "table"), `db`; bounded
        /// ([`crate::handshake`]).
        configuration: BTreeMap<String, String> = 5, Map, crate::handshake::configuration;
    }
);

request!(
    /// `insertTablet`'s `TSInsertTabletReq` (fields 11-13 are never set by the clients).
    InsertTabletReq {
        session_id: i64 = 1, I64, read_i64;
        prefix_path: String = 2, String, read_string;
        measurements: Vec<String> = 3, List, strings;
        /// See [`crate::values::tablet_columns`].
        values: Vec<u8> = 4, String, read_binary;
        /// See [`crate::values::timestamps`].
        timestamps: Vec<u8> = 5, String, read_binary;
        types: Vec<i32> = 6, List, i32s;
        size: i32 = 7, I32, read_i32;
        is_aligned: bool = 8, Bool, read_bool;
        write_to_table: bool = 9, Bool, read_bool;
        /// With `write_to_table`: each column's ColumnCategory (TAG 0, FIELD 1, ATTRIBUTE 2).
        column_categories: Vec<i8> = 10, List, bytes;
    }
);

request!(
    /// `insertTablets`' `TSInsertTabletsReq`.
    InsertTabletsReq {
        session_id: i64 = 1, I64, read_i64;
        prefix_paths: Vec<String> = 2, List, strings;
        measurements_list: Vec<Vec<String>> = 3, List, string_lists;
        values_list: Vec<Vec<u8>> = 4, List, binaries;
        timestamps_list: Vec<Vec<u8>> = 5, List, binaries;
        types_list: Vec<Vec<i32>> = 6, List, i32_lists;
        size_list: Vec<i32> = 7, List, i32s;
        is_aligned: bool = 8, Bool, read_bool;
    }
);

request!(
    /// `insertRecord`'s `TSInsertRecordReq`.
    InsertRecordReq {
        session_id: i64 = 1, I64, read_i64;
        prefix_path: String = 2, String, read_string;
        measurements: Vec<String> = 3, List, strings;
        /// See [`crate::values::record`].
        values: Vec<u8> = 4, String, read_binary;
        timestamp: i64 = 5, I64, read_i64;
        is_aligned: bool = 6, Bool, read_bool;
    }
);

request!(
    /// `insertStringRecord`'s `TSInsertStringRecordReq`: values as text.
    InsertStringRecordReq {
        session_id: i64 = 1, I64, read_i64;
        prefix_path: String = 2, String, read_string;
        measurements: Vec<String> = 3, List, strings;
        values: Vec<String> = 4, List, strings;
        timestamp: i64 = 5, I64, read_i64;
        is_aligned: bool = 6, Bool, read_bool;
    }
);

request!(
    /// `insertRecords`' `TSInsertRecordsReq`.
    InsertRecordsReq {
        session_id: i64 = 1, I64, read_i64;
        prefix_paths: Vec<String> = 2, List, strings;
        measurements_list: Vec<Vec<String>> = 3, List, string_lists;
        values_list: Vec<Vec<u8>> = 4, List, binaries;
        timestamps: Vec<i64> = 5, List, i64s;
        is_aligned: bool = 6, Bool, read_bool;
    }
);

request!(
    /// `insertRecordsOfOneDevice`'s `TSInsertRecordsOfOneDeviceReq`.
    InsertRecordsOfOneDeviceReq {
        session_id: i64 = 1, I64, read_i64;
        prefix_path: String = 2, String, read_string;
        measurements_list: Vec<Vec<String>> = 3, List, string_lists;
        values_list: Vec<Vec<u8>> = 4, List, binaries;
        timestamps: Vec<i64> = 5, List, i64s;
        is_aligned: bool = 6, Bool, read_bool;
    }
);

request!(
    /// `insertStringRecordsOfOneDevice`'s request: values as text (timestamps never assumed
    /// sorted: a client bug sends them unsorted with sorted rows).
    InsertStringRecordsOfOneDeviceReq {
        session_id: i64 = 1, I64, read_i64;
        prefix_path: String = 2, String, read_string;
        measurements_list: Vec<Vec<String>> = 3, List, string_lists;
        values_list: Vec<Vec<String>> = 4, List, string_lists;
        timestamps: Vec<i64> = 5, List, i64s;
        is_aligned: bool = 6, Bool, read_bool;
    }
);

request!(
    /// `executeStatementV2`, `executeQueryStatementV2` and `executeUpdateStatementV2`'s
    /// `TSExecuteStatementReq`. `fetch_size` ≤ 0 or absent means the server's default (a client
    /// bug passes `timeout` into it).
    ExecuteStatementReq {
        session_id: i64 = 1, I64, read_i64;
        statement: String = 2, String, read_string;
        statement_id: i64 = 3, I64, read_i64;
        fetch_size: i32 = 4, I32, read_i32;
        timeout_ms: i64 = 5, I64, read_i64;
    }
);

request!(
    /// `fetchResultsV2`'s `TSFetchResultsReq`. Its session and statement ids arrive swapped
    /// from some calls of the 2.0.11 client: a server keys queries by connection and `query_id`.
    FetchResultsReq {
        session_id: i64 = 1, I64, read_i64;
        statement: String = 2, String, read_string;
        fetch_size: i32 = 3, I32, read_i32;
        query_id: i64 = 4, I64, read_i64;
        is_align: bool = 5, Bool, read_bool;
    }
);

request!(
    /// `closeOperation`'s `TSCloseOperationReq` (ids possibly swapped, as for fetches).
    CloseOperationReq {
        session_id: i64 = 1, I64, read_i64;
        query_id: Option<i64> = 2, I64, some(read_i64);
        statement_id: Option<i64> = 3, I64, some(read_i64);
    }
);

request!(
    /// `cancelOperation`'s `TSCancelOperationReq`.
    CancelOperationReq {
        session_id: i64 = 1, I64, read_i64;
        query_id: i64 = 2, I64, read_i64;
    }
);

request!(
    /// `setTimeZone`'s `TSSetTimeZoneReq`.
    SetTimeZoneReq {
        session_id: i64 = 1, I64, read_i64;
        time_zone: String = 2, String, read_string;
    }
);

request!(
    /// `createTimeseries`' `TSCreateTimeseriesReq` (props are refused by the server: Fencepost
    /// has no deadband filters).
    CreateTimeseriesReq {
        session_id: i64 = 1, I64, read_i64;
        path: String = 2, String, read_string;
        data_type: i32 = 3, I32, read_i32;
        encoding: i32 = 4, I32, read_i32;
        compressor: i32 = 5, I32, read_i32;
        props: BTreeMap<String, String> = 6, Map, string_map;
        tags: BTreeMap<String, String> = 7, Map, string_map;
        attributes: BTreeMap<String, String> = 8, Map, string_map;
        alias: Option<String> = 9, String, some(read_string);
    }
);

request!(
    /// `createAlignedTimeseries`' `TSCreateAlignedTimeseriesReq` (the client sets 1-6).
    CreateAlignedTimeseriesReq {
        session_id: i64 = 1, I64, read_i64;
        prefix_path: String = 2, String, read_string;
        measurements: Vec<String> = 3, List, strings;
        data_types: Vec<i32> = 4, List, i32s;
        encodings: Vec<i32> = 5, List, i32s;
        compressors: Vec<i32> = 6, List, i32s;
    }
);

request!(
    /// `createMultiTimeseries`' `TSCreateMultiTimeseriesReq`: per path its type, encoding and
    /// compressor, and optionally its props, tags, attributes and alias.
    CreateMultiTimeseriesReq {
        session_id: i64 = 1, I64, read_i64;
        paths: Vec<String> = 2, List, strings;
        data_types: Vec<i32> = 3, List, i32s;
        encodings: Vec<i32> = 4, List, i32s;
        compressors: Vec<i32> = 5, List, i32s;
        props_list: Vec<BTreeMap<String, String>> = 6, List, string_maps;
        tags_list: Vec<BTreeMap<String, String>> = 7, List, string_maps;
        attributes_list: Vec<BTreeMap<String, String>> = 8, List, string_maps;
        alias_list: Vec<String> = 9, List, strings;
    }
);

request!(
    /// `deleteData`'s `TSDeleteDataReq`: points with `start_time <= t <= end_time`.
    DeleteDataReq {
        session_id: i64 = 1, I64, read_i64;
        paths: Vec<String> = 2, List, strings;
        start_time: i64 = 3, I64, read_i64;
        end_time: i64 = 4, I64, read_i64;
    }
);

request!(
    /// `executeRawDataQueryV2`'s `TSRawDataQueryReq`: `select <paths> where time >= start_time
    /// and time < end_time`.
    RawDataQueryReq {
        session_id: i64 = 1, I64, read_i64;
        paths: Vec<String> = 2, List, strings;
        fetch_size: i32 = 3, I32, read_i32;
        start_time: i64 = 4, I64, read_i64;
        end_time: i64 = 5, I64, read_i64;
        statement_id: i64 = 6, I64, read_i64;
    }
);

request!(
    /// `executeAggregationQueryV2`'s `TSAggregationQueryReq`: `select <aggregations[i]>(<paths[i]>)`
    /// over `[start_time, end_time)`, in windows of `interval` when it is set.
    AggregationQueryReq {
        session_id: i64 = 1, I64, read_i64;
        statement_id: i64 = 2, I64, read_i64;
        paths: Vec<String> = 3, List, strings;
        /// `TAggregationType` values, one per path.
        aggregations: Vec<i32> = 4, List, i32s;
        start_time: Option<i64> = 5, I64, some(read_i64);
        end_time: Option<i64> = 6, I64, some(read_i64);
        interval: Option<i64> = 7, I64, some(read_i64);
        sliding_step: Option<i64> = 8, I64, some(read_i64);
        fetch_size: i32 = 9, I32, read_i32;
        timeout: Option<i64> = 10, I64, some(read_i64);
    }
);

request!(
    /// `executeLastDataQueryV2`'s `TSLastDataQueryReq`: `select last <paths> where time >= time`.
    LastDataQueryReq {
        session_id: i64 = 1, I64, read_i64;
        paths: Vec<String> = 2, List, strings;
        fetch_size: i32 = 3, I32, read_i32;
        time: i64 = 4, I64, read_i64;
        statement_id: i64 = 5, I64, read_i64;
    }
);

/// The arguments of the calls that take a session id and a string or a list of strings rather
/// than a request struct: `setStorageGroup(1: i64, 2: string)`, `deleteStorageGroups(1: i64, 2:
/// list<string>)`, `deleteTimeseries(1: i64, 2: list<string>)`; and of `requestStatementId(1:
/// i64)` and `getTimeZone(1: i64)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionArgs {
    /// Field 1.
    pub session_id: i64,
    /// Field 2 as a string.
    pub name: String,
    /// Field 2 as a list of strings.
    pub names: Vec<String>,
}

impl SessionArgs {
    /// Reads the arguments struct itself (not a request inside it).
    pub fn read(r: &mut Reader) -> Result<SessionArgs> {
        let mut out = SessionArgs::default();
        read_struct(r, |r, header| match (header.id, header.ttype) {
            (1, TType::I64) => {
                out.session_id = r.i64()?;
                Ok(true)
            }
            (2, TType::String) => {
                out.name = r.string()?;
                Ok(true)
            }
            (2, TType::List) => {
                out.names = strings(r)?;
                Ok(true)
            }
            _ => Ok(false),
        })?;
        Ok(out)
    }
}

impl OpenSessionReq {
    /// Writes the struct, as a client sends it.
    pub fn write(&self, w: &mut Writer) {
        w.struct_begin();
        w.field_begin(TType::I32, 1);
        w.i32(self.client_protocol);
        w.field_begin(TType::String, 2);
        w.string(&self.zone_id);
        w.field_begin(TType::String, 3);
        w.string(&self.username);
        if let Some(password) = &self.password {
            w.field_begin(TType::String, 4);
            w.string(password);
        }
        w.field_begin(TType::Map, 5);
        w.map_begin(TType::String, TType::String, self.configuration.len());
        for (k, v) in &self.configuration {
            w.string(k);
            w.string(v);
        }
        w.field_stop();
        w.struct_end();
    }
}

impl InsertTabletReq {
    /// Writes the struct, as a client sends it (fields 1-8, and 9-10 for a table).
    pub fn write(&self, w: &mut Writer) {
        w.struct_begin();
        w.field_begin(TType::I64, 1);
        w.i64(self.session_id);
        w.field_begin(TType::String, 2);
        w.string(&self.prefix_path);
        w.field_begin(TType::List, 3);
        write_strings(w, &self.measurements);
        w.field_begin(TType::String, 4);
        w.binary(&self.values);
        w.field_begin(TType::String, 5);
        w.binary(&self.timestamps);
        w.field_begin(TType::List, 6);
        w.list_begin(TType::I32, self.types.len());
        for t in &self.types {
            w.i32(*t);
        }
        w.field_begin(TType::I32, 7);
        w.i32(self.size);
        w.field_begin(TType::Bool, 8);
        w.bool(self.is_aligned);
        if self.write_to_table {
            w.field_begin(TType::Bool, 9);
            w.bool(true);
            w.field_begin(TType::List, 10);
            w.list_begin(TType::Byte, self.column_categories.len());
            for c in &self.column_categories {
                w.i8(*c);
            }
        }
        w.field_stop();
        w.struct_end();
    }
}

/// Reads a `TSStatus` (a client reads replies with it).
pub fn read_status(r: &mut Reader) -> Result<Status> {
    let mut status = Status::default();
    read_struct(r, |r, header| match (header.id, header.ttype) {
        (1, TType::I32) => {
            status.code = r.i32()?;
            Ok(true)
        }
        (2, TType::String) => {
            status.message = Some(r.string()?);
            Ok(true)
        }
        (4, TType::Struct) => {
            let mut endpoint = (String::new(), 0);
            read_struct(r, |r, h| match (h.id, h.ttype) {
                (1, TType::String) => {
                    endpoint.0 = r.string()?;
                    Ok(true)
                }
                (2, TType::I32) => {
                    endpoint.1 = r.i32()?;
                    Ok(true)
                }
                _ => Ok(false),
            })?;
            status.redirect_node = Some(endpoint);
            Ok(true)
        }
        _ => Ok(false),
    })?;
    Ok(status)
}

/// IoTDB's `TSStatus`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// 200 success; see `common::StatusCode`.
    pub code: i32,
    /// Said to the user on failure.
    pub message: Option<String>,
    /// Per-item statuses of a 302 MULTIPLE_ERROR.
    pub sub_status: Option<Vec<Status>>,
    /// `host:port` of a DataNode that leads the written device's region: only a real endpoint
    /// (the client opens a connection to it).
    pub redirect_node: Option<(String, i32)>,
}

impl Status {
    /// A status with a code and message.
    pub fn new(code: i32, message: impl Into<String>) -> Status {
        Status {
            code,
            message: Some(message.into()),
            ..Status::default()
        }
    }

    /// 200.
    pub fn ok() -> Status {
        Status {
            code: 200,
            ..Status::default()
        }
    }

    /// Writes the struct.
    pub fn write(&self, w: &mut Writer) {
        w.struct_begin();
        w.field_begin(TType::I32, 1);
        w.i32(self.code);
        if let Some(message) = &self.message {
            w.field_begin(TType::String, 2);
            w.string(message);
        }
        if let Some(sub) = &self.sub_status {
            w.field_begin(TType::List, 3);
            w.list_begin(TType::Struct, sub.len());
            for s in sub {
                s.write(w);
            }
        }
        if let Some((ip, port)) = &self.redirect_node {
            w.field_begin(TType::Struct, 4);
            w.struct_begin();
            w.field_begin(TType::String, 1);
            w.string(ip);
            w.field_begin(TType::I32, 2);
            w.i32(*port);
            w.field_stop();
            w.struct_end();
        }
        w.field_stop();
        w.struct_end();
    }
}

/// `TSOpenSessionResp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenSessionResp {
    /// 200, or 801 for wrong credentials.
    pub status: Status,
    /// 2 (V3).
    pub server_protocol_version: i32,
    /// The session's id (-1 when refused).
    pub session_id: i64,
    /// `timestamp_precision`: "ms".
    pub configuration: BTreeMap<String, String>,
}

impl OpenSessionResp {
    /// Writes the struct.
    pub fn write(&self, w: &mut Writer) {
        w.struct_begin();
        w.field_begin(TType::Struct, 1);
        self.status.write(w);
        w.field_begin(TType::I32, 2);
        w.i32(self.server_protocol_version);
        w.field_begin(TType::I64, 3);
        w.i64(self.session_id);
        w.field_begin(TType::Map, 4);
        w.map_begin(TType::String, TType::String, self.configuration.len());
        for (k, v) in &self.configuration {
            w.string(k);
            w.string(v);
        }
        w.field_stop();
        w.struct_end();
    }
}

/// `TSExecuteStatementResp`, as far as the 2.0.11 clients read it (§6.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecuteStatementResp {
    /// The outcome.
    pub status: Status,
    /// The query's id, for fetches (absent for non-queries).
    pub query_id: Option<i64>,
    /// Output column names without `Time` (empty for a non-query).
    pub columns: Vec<String>,
    /// True: no `Time` column (aggregations, SHOW); false: the TsBlock times are a `Time` column.
    pub ignore_time_stamp: bool,
    /// Type names parallel to `columns` (`BOOLEAN` .. `TEXT`).
    pub data_types: Vec<String>,
    /// TsBlocks ([`crate::tsblock::encode`]), none of zero rows.
    pub query_result: Vec<Vec<u8>>,
    /// More rows may be fetched.
    pub more_data: bool,
    /// The current database after `USE` (table model).
    pub database: Option<String>,
}

impl ExecuteStatementResp {
    /// Writes the struct; `columnIndex2TsBlockColumnIndexList` is the identity.
    pub fn write(&self, w: &mut Writer) {
        w.struct_begin();
        w.field_begin(TType::Struct, 1);
        self.status.write(w);
        if let Some(id) = self.query_id {
            w.field_begin(TType::I64, 2);
            w.i64(id);
        }
        w.field_begin(TType::List, 3);
        write_strings(w, &self.columns);
        w.field_begin(TType::Bool, 5);
        w.bool(self.ignore_time_stamp);
        w.field_begin(TType::List, 6);
        write_strings(w, &self.data_types);
        w.field_begin(TType::List, 13);
        write_binaries(w, &self.query_result);
        w.field_begin(TType::Bool, 14);
        w.bool(self.more_data);
        if let Some(database) = &self.database {
            w.field_begin(TType::String, 15);
            w.string(database);
        }
        w.field_begin(TType::List, 17);
        w.list_begin(TType::I32, self.columns.len());
        for i in 0..self.columns.len() {
            w.i32(i as i32);
        }
        w.field_stop();
        w.struct_end();
    }
}

/// `TSFetchResultsResp` (§8): never `has_result_set` with zero rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchResultsResp {
    /// The outcome.
    pub status: Status,
    /// TsBlocks of at least one row each; empty when the query is finished.
    pub query_result: Vec<Vec<u8>>,
    /// More rows may be fetched.
    pub more_data: bool,
}

impl FetchResultsResp {
    /// Writes the struct.
    pub fn write(&self, w: &mut Writer) {
        w.struct_begin();
        w.field_begin(TType::Struct, 1);
        self.status.write(w);
        w.field_begin(TType::Bool, 2);
        w.bool(!self.query_result.is_empty());
        w.field_begin(TType::Bool, 3);
        w.bool(true);
        w.field_begin(TType::List, 6);
        write_binaries(w, &self.query_result);
        w.field_begin(TType::Bool, 7);
        w.bool(self.more_data);
        w.field_stop();
        w.struct_end();
    }
}

/// `TSGetTimeZoneResp`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetTimeZoneResp {
    /// The outcome.
    pub status: Status,
    /// The session's time zone.
    pub time_zone: String,
}

impl GetTimeZoneResp {
    /// Writes the struct.
    pub fn write(&self, w: &mut Writer) {
        w.struct_begin();
        w.field_begin(TType::Struct, 1);
        self.status.write(w);
        w.field_begin(TType::String, 2);
        w.string(&self.time_zone);
        w.field_stop();
        w.struct_end();
    }
}

fn write_binaries(w: &mut Writer, items: &[Vec<u8>]) {
    w.list_begin(TType::String, items.len());
    for item in items {
        w.binary(item);
    }
}

fn write_strings(w: &mut Writer, items: &[String]) {
    w.list_begin(TType::String, items.len());
    for item in items {
        w.string(item);
    }
}

#[cfg(test)]
mod tests {
    use thrift_codec::{MessageType, Protocol};

    use super::*;

    /// The captured binary `openSession` call of `IOTDB_PROTOCOL.md` §14 reads into its
    /// request, and the captured reply is what [`OpenSessionResp::write`] writes.
    #[test]
    fn the_captured_open_session_exchange() {
        let mut call = Vec::new();
        call.extend_from_slice(&[0x80, 1, 0, 1, 0, 0, 0, 11]);
        call.extend_from_slice(b"openSession");
        call.extend_from_slice(&[0, 0, 0, 0, 0x0c, 0, 1, 8, 0, 1, 0, 0, 0, 2]);
        for (id, text) in [(2u8, "Asia/Shanghai"), (3, "root"), (4, "root")] {
            call.extend_from_slice(&[0x0b, 0, id]);
            call.extend_from_slice(&(text.len() as i32).to_be_bytes());
            call.extend_from_slice(text.as_bytes());
        }
        call.extend_from_slice(&[0x0d, 0, 5, 0x0b, 0x0b, 0, 0, 0, 2]);
        for text in ["version", "V_1_0", "sql_dialect", "tree"] {
            call.extend_from_slice(&(text.len() as i32).to_be_bytes());
            call.extend_from_slice(text.as_bytes());
        }
        call.extend_from_slice(&[0, 0]);
        let mut r = Reader::new(&call, Protocol::Binary);
        assert_eq!(r.message_begin().unwrap().name, "openSession");
        let mut req = None;
        read_struct(&mut r, |r, h| match h.id {
            1 => {
                req = Some(OpenSessionReq::read(r)?);
                Ok(true)
            }
            _ => Ok(false),
        })
        .unwrap();
        r.finish().unwrap();
        let req = req.unwrap();
        assert_eq!(req.client_protocol, 2);
        assert_eq!(req.zone_id, "Asia/Shanghai");
        assert_eq!(
            (req.username.as_str(), req.password.as_deref()),
            ("root", Some("root"))
        );
        assert_eq!(req.configuration["sql_dialect"], "tree");

        let mut w = Writer::new(Protocol::Binary);
        w.message_begin("openSession", MessageType::Reply, 0);
        w.struct_begin();
        w.field_begin(TType::Struct, 0);
        OpenSessionResp {
            status: Status::new(200, "Login successfully"),
            server_protocol_version: 2,
            session_id: 7,
            configuration: BTreeMap::from([("timestamp_precision".into(), "ms".into())]),
        }
        .write(&mut w);
        w.field_stop();
        w.struct_end();
        let mut want = Vec::new();
        want.extend_from_slice(&[0x80, 1, 0, 2, 0, 0, 0, 11]);
        want.extend_from_slice(b"openSession");
        want.extend_from_slice(&[0, 0, 0, 0, 0x0c, 0, 0, 0x0c, 0, 1, 8, 0, 1, 0, 0, 0, 0xc8]);
        want.extend_from_slice(&[0x0b, 0, 2, 0, 0, 0, 0x12]);
        want.extend_from_slice(b"Login successfully");
        want.extend_from_slice(&[0, 8, 0, 2, 0, 0, 0, 2, 0x0a, 0, 3, 0, 0, 0, 0, 0, 0, 0, 7]);
        want.extend_from_slice(&[0x0d, 0, 4, 0x0b, 0x0b, 0, 0, 0, 1, 0, 0, 0, 0x13]);
        want.extend_from_slice(b"timestamp_precision");
        want.extend_from_slice(&[0, 0, 0, 2, b'm', b's', 0, 0]);
        assert_eq!(w.into_bytes(), want);
    }

    /// An `insertTablet` request in both protocols, with a field of the wrong wire type and an
    /// unknown field, which are skipped.
    #[test]
    fn an_insert_tablet_request_reads_in_both_protocols() {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let mut w = Writer::new(protocol);
            w.struct_begin();
            w.field_begin(TType::I64, 1);
            w.i64(9);
            w.field_begin(TType::String, 2);
            w.string("root.sg.d1");
            w.field_begin(TType::List, 3);
            write_strings(&mut w, &["s1".into(), "s2".into()]);
            w.field_begin(TType::String, 4);
            w.binary(&[1, 2, 3]);
            w.field_begin(TType::String, 5);
            w.binary(&[4; 8]);
            w.field_begin(TType::List, 6);
            w.list_begin(TType::I32, 2);
            w.i32(2);
            w.i32(4);
            w.field_begin(TType::String, 7); // size, of the wrong type: skipped
            w.string("1");
            w.field_begin(TType::Bool, 8);
            w.bool(true);
            w.field_begin(TType::Double, 77); // unknown: skipped
            w.double(1.0);
            w.field_stop();
            w.struct_end();
            let bytes = w.into_bytes();
            let mut r = Reader::new(&bytes, protocol);
            let req = InsertTabletReq::read(&mut r).unwrap();
            r.finish().unwrap();
            assert_eq!(
                req,
                InsertTabletReq {
                    session_id: 9,
                    prefix_path: "root.sg.d1".into(),
                    measurements: vec!["s1".into(), "s2".into()],
                    values: vec![1, 2, 3],
                    timestamps: vec![4; 8],
                    types: vec![2, 4],
                    size: 0,
                    is_aligned: true,
                    write_to_table: false,
                    column_categories: vec![],
                },
                "{protocol:?}"
            );
        }
    }

    #[test]
    fn a_query_response_lists_its_blocks_and_identity_columns() {
        let resp = ExecuteStatementResp {
            status: Status::ok(),
            query_id: Some(3),
            columns: vec!["root.sg.d1.s1".into()],
            data_types: vec!["INT64".into()],
            query_result: vec![vec![1, 2]],
            more_data: true,
            ..ExecuteStatementResp::default()
        };
        let mut w = Writer::new(Protocol::Compact);
        resp.write(&mut w);
        let bytes = w.into_bytes();
        // Read back generically: every field the client reads is present with its type.
        let mut r = Reader::new(&bytes, Protocol::Compact);
        let mut seen = Vec::new();
        read_struct(&mut r, |r, h| {
            seen.push((h.id, h.ttype));
            match (h.id, h.ttype) {
                (17, TType::List) => {
                    assert_eq!(i32s(r)?, vec![0]);
                    Ok(true)
                }
                (14, TType::Bool) => {
                    assert!(r.bool()?);
                    Ok(true)
                }
                _ => Ok(false),
            }
        })
        .unwrap();
        r.finish().unwrap();
        assert_eq!(
            seen,
            vec![
                (1, TType::Struct),
                (2, TType::I64),
                (3, TType::List),
                (5, TType::Bool),
                (6, TType::List),
                (13, TType::List),
                (14, TType::Bool),
                (17, TType::List),
            ]
        );
    }
}

#[cfg(test)]
mod client_side_tests {
    use thrift_codec::{Protocol, Reader, Writer};

    use super::*;

    #[test]
    fn what_a_client_writes_the_server_reads() {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let open = OpenSessionReq {
                client_protocol: 2,
                zone_id: "UTC".into(),
                username: "root".into(),
                password: Some("root".into()),
                configuration: [("version".to_string(), "V_1_0".to_string())].into(),
            };
            let mut w = Writer::new(protocol);
            open.write(&mut w);
            let bytes = w.into_bytes();
            assert_eq!(
                OpenSessionReq::read(&mut Reader::new(&bytes, protocol)).unwrap(),
                open
            );

            let tablet = InsertTabletReq {
                session_id: 7,
                prefix_path: "root.sg.d1".into(),
                measurements: vec!["s1".into()],
                values: crate::values::encode_tablet_columns(
                    &[common::Column::Double(vec![1.5, 2.5])],
                    &[None],
                ),
                timestamps: crate::values::encode_timestamps(&[1, 2]),
                types: vec![4],
                size: 2,
                is_aligned: false,
                write_to_table: false,
                column_categories: vec![],
            };
            let mut w = Writer::new(protocol);
            tablet.write(&mut w);
            let bytes = w.into_bytes();
            assert_eq!(
                InsertTabletReq::read(&mut Reader::new(&bytes, protocol)).unwrap(),
                tablet
            );
            // A table-model tablet: the table's name, writeToTable and the categories.
            let table = InsertTabletReq {
                prefix_path: "table5".into(),
                write_to_table: true,
                column_categories: vec![1],
                ..tablet
            };
            let mut w = Writer::new(protocol);
            table.write(&mut w);
            let bytes = w.into_bytes();
            assert_eq!(
                InsertTabletReq::read(&mut Reader::new(&bytes, protocol)).unwrap(),
                table
            );

            let status = Status {
                code: 400,
                message: Some("elsewhere".into()),
                sub_status: None,
                redirect_node: Some(("10.0.0.2".into(), 6667)),
            };
            let mut w = Writer::new(protocol);
            status.write(&mut w);
            let bytes = w.into_bytes();
            assert_eq!(
                read_status(&mut Reader::new(&bytes, protocol)).unwrap(),
                status
            );
        }
    }
}
