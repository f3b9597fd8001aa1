//! IoTDB's client RPC (`IClientRPCService`, what IoTDB's official clients speak on port 6667),
//! without the service itself (`IOTDB_PROTOCOL.md`):
//!
//! - [`values`]: the tablet values, timestamps and null bitmaps of `insertTablet(s)` and the
//!   typed row of `insertRecord(s)`, all big-endian, decoded into `common`'s columns;
//! - [`tsblock`]: the TsBlock a query's rows go back in (`queryResult`);
//! - [`messages`]: the request and response structs of the minimal method set (§12), read and
//!   written with `thrift-codec`;
//! - [`handshake`]: the bounds on what `openSession`, the one call made before a login, may
//!   carry.
//!
//! Every decoder checks lengths against the bytes given and answers a [`LayoutError`] that says
//! what is wrong, never panics.
//!
//! Architecture invariant: no networking and no server; the DataNode's client service uses it.

pub mod handshake;
pub mod messages;
pub mod tsblock;
pub mod values;

/// A layout that does not decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LayoutError(pub String);

/// The data type of an IoTDB `TSDataType` code (6 VECTOR, 7 UNKNOWN and 12 OBJECT are none).
pub fn data_type(code: i32) -> Result<common::DataType, LayoutError> {
    u8::try_from(code)
        .ok()
        .and_then(common::DataType::from_code)
        .ok_or_else(|| LayoutError(format!("unknown data type code {code}")))
}

/// The name of an IoTDB `TSEncoding` code (`createTimeseries`), as `CREATE TIMESERIES ...
/// ENCODING=` takes it; the server decides whether it supports it.
pub fn encoding_name(code: i32) -> Option<&'static str> {
    Some(match code {
        0 => "PLAIN",
        1 => "DICTIONARY",
        2 => "RLE",
        3 => "DIFF",
        4 => "TS_2DIFF",
        5 => "BITMAP",
        6 => "GORILLA_V1",
        7 => "REGULAR",
        8 => "GORILLA",
        9 => "ZIGZAG",
        11 => "CHIMP",
        12 => "SPRINTZ",
        13 => "RLBE",
        _ => return None,
    })
}

/// The name of an IoTDB `CompressionType` code, as `CREATE TIMESERIES ... COMPRESSOR=` takes it.
pub fn compressor_name(code: i32) -> Option<&'static str> {
    Some(match code {
        0 => "UNCOMPRESSED",
        1 => "SNAPPY",
        2 => "GZIP",
        3 => "LZO",
        4 => "SDT",
        5 => "PAA",
        6 => "PLA",
        7 => "LZ4",
        8 => "ZSTD",
        9 => "LZMA2",
        _ => return None,
    })
}
