//! Region commands: the payload of a region's log entries. Everything the apply needs travels in
//! the command (design §5, "apply is deterministic"): the tablet carries its own types, so an
//! apply never consults a cache.
//!
//! The fencing token (design §4): an insert carries the ConfigNode metadata version its
//! coordinator validated it against, a deletion the version (and fence operation) that ordered it.
//! The region keeps its deletions, and apply rejects an insert older than a deletion of its target
//! — the same verdict on every replica and at every replay, whenever the insert arrives.
//!
//! Encoding (all integers little-endian), format version 2:
//!
//! ```text
//! u8 version = 2, u8 kind
//! kind 1 InsertTablet:  u64 metadata_version, tablet
//! kind 2 DeleteSeries:  u64 metadata_version, u64 operation_id,
//!                       u32 count, count × { str16 device, str16 measurement }
//! kind 3 DeleteDatabase: u64 metadata_version, u64 operation_id, str16 database
//! kind 4 DeleteData:    i64 start, i64 end (both inclusive),
//!                       u32 count, count × { str16 device, str16 measurement }
//! kind 5 InsertTableTablet: u64 metadata_version, u64 table_version, tablet
//! kind 6 DeleteDataFenced:  u64 metadata_version, u64 operation_id, then kind 4's fields
//! kind 7 RaiseFenceFloor:   u64 version
//! tablet:               str16 device, u32 rows M, u32 columns N, i64 × M timestamps,
//!                       N × { str16 measurement, u8 type, u8 has_bitmap,
//!                             [u64 × ceil(M/64) null bitmap], values }
//!                       values: BOOLEAN u8 (0/1) × M, INT32 i32 × M, INT64 i64 × M,
//!                               FLOAT f32 bits × M, DOUBLE f64 bits × M,
//!                               TEXT { u32 len, UTF-8 bytes } × M
//! ```
//!
//! Version 1 (before the token) is the same without the u64 fields; it still decodes, with
//! version and operation 0. Kinds 5, 6 and 7 were added within version 2 (they change no byte of
//! an existing kind): an insert derived from a table of the table model is written as kind 5,
//! any other as kind 1; a `deleteData` with a token or an operation id as kind 6, else as
//! kind 4 (so entries written before decode as they did, with no token).

use common::{Tablet, TabletLimits};

use common::codec::{DecodeError, DecodeResult, Reader, Writer};

const FORMAT_VERSION: u8 = 2;
const FORMAT_VERSION_WITHOUT_TOKEN: u8 = 1;
const KIND_INSERT_TABLET: u8 = 1;
const KIND_DELETE_SERIES: u8 = 2;
const KIND_DELETE_DATABASE: u8 = 3;
const KIND_DELETE_DATA: u8 = 4;
const KIND_INSERT_TABLE_TABLET: u8 = 5;
const KIND_DELETE_DATA_FENCED: u8 = 6;
const KIND_RAISE_FENCE_FLOOR: u8 = 7;

/// What ordered a deletion: its fencing token.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deletion {
    /// The ConfigNode metadata version of the fence operation (at or after its pending state
    /// was committed). Inserts validated against an older version lose to this deletion.
    pub metadata_version: u64,
    /// The ConfigNode fence operation; a second delivery of the same operation is a no-op
    /// (0: none, every delivery applies).
    pub operation_id: u64,
}

/// A command applied to a data region, in log order.
#[derive(Clone, Debug, PartialEq)]
pub enum RegionCommand {
    /// Upsert the tablet's rows (IoTDB's InsertTabletNode; a batch of records becomes one tablet
    /// per device).
    InsertTablet {
        /// The rows.
        tablet: Tablet,
        /// The metadata version the coordinator validated the tablet against (the oldest of the
        /// cache entries it used).
        metadata_version: u64,
        /// For rows derived from a table of the table model (their device path, from the
        /// table's tags): the metadata version the table was created at, which identifies that
        /// table among tables of the same name. A deletion of a path prefix (DROP TABLE, DROP
        /// DATABASE) newer than it refuses the insert. 0 for a tree write.
        table_version: u64,
    },
    /// Drop these series' data (DELETE TIMESERIES), ordered through the log.
    DeleteSeries {
        /// (device, measurement) pairs.
        series: Vec<(String, String)>,
        /// Its token.
        deletion: Deletion,
    },
    /// Drop every series under a path prefix: a database, e.g. `root.sg` (DROP DATABASE), or a
    /// table's devices, e.g. `root.db.t` (DROP TABLE). Its token fences the whole prefix: an
    /// insert under it validated before the deletion is refused, whichever device it names.
    DeleteDatabase {
        /// e.g. `root.sg`, or `root.db.t`.
        database: String,
        /// Its token.
        deletion: Deletion,
    },
    /// Drop these series' points with `start <= time <= end` (IoTDB's `deleteData`, `DELETE
    /// FROM ... WHERE time ...`): the points written by earlier entries. The series stay; writes
    /// after it are visible again. It makes no insert's validation stale, but its own series
    /// list was resolved against metadata: `deletion.metadata_version` is that version, and a
    /// deletion of one of its series (or of a prefix of it) newer than it refuses the command, so
    /// a late delivery cannot delete the points of a series created again since. A non-zero
    /// `deletion.operation_id` makes a second delivery a no-op.
    DeleteData {
        /// (device, measurement) pairs.
        series: Vec<(String, String)>,
        /// First timestamp deleted.
        start: i64,
        /// Last timestamp deleted.
        end: i64,
        /// Its token and operation id (zeroes: none, as entries written before them).
        deletion: Deletion,
    },
    /// The ConfigNode's fence floor (REVIEW N9): no DataNode validates against metadata older
    /// than `version` any more, and every fence operation below it has completed. From here on
    /// the region refuses an insert or a `deleteData` whose token is older (only a late
    /// delivery can carry one), and takes a series or prefix deletion older than it for the
    /// repeat it must be. Its series deletions below it therefore fence nothing the floor does
    /// not, and go once they mask no data. Raises only: a lower version changes nothing.
    RaiseFenceFloor {
        /// The floor: a ConfigNode metadata version.
        version: u64,
    },
}

impl RegionCommand {
    /// An insert validated against metadata version 0 (tests and tools: it loses to every
    /// deletion with a version).
    pub fn insert(tablet: Tablet) -> RegionCommand {
        RegionCommand::InsertTablet {
            tablet,
            metadata_version: 0,
            table_version: 0,
        }
    }

    /// A DELETE TIMESERIES without a token.
    pub fn delete_series(series: Vec<(String, String)>) -> RegionCommand {
        RegionCommand::DeleteSeries {
            series,
            deletion: Deletion::default(),
        }
    }

    /// A DROP DATABASE without a token.
    pub fn delete_database(database: impl Into<String>) -> RegionCommand {
        RegionCommand::DeleteDatabase {
            database: database.into(),
            deletion: Deletion::default(),
        }
    }

    /// The command's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len_hint());
        w.u8(FORMAT_VERSION);
        match self {
            RegionCommand::InsertTablet {
                tablet,
                metadata_version,
                table_version,
            } => {
                if *table_version == 0 {
                    w.u8(KIND_INSERT_TABLET);
                    w.u64(*metadata_version);
                } else {
                    w.u8(KIND_INSERT_TABLE_TABLET);
                    w.u64(*metadata_version);
                    w.u64(*table_version);
                }
                encode_tablet(&mut w, tablet);
            }
            RegionCommand::DeleteSeries { series, deletion } => {
                w.u8(KIND_DELETE_SERIES);
                w.u64(deletion.metadata_version);
                w.u64(deletion.operation_id);
                encode_series(&mut w, series);
            }
            RegionCommand::DeleteDatabase { database, deletion } => {
                w.u8(KIND_DELETE_DATABASE);
                w.u64(deletion.metadata_version);
                w.u64(deletion.operation_id);
                w.str16(database);
            }
            RegionCommand::DeleteData {
                series,
                start,
                end,
                deletion,
            } => {
                if *deletion == Deletion::default() {
                    w.u8(KIND_DELETE_DATA);
                } else {
                    w.u8(KIND_DELETE_DATA_FENCED);
                    w.u64(deletion.metadata_version);
                    w.u64(deletion.operation_id);
                }
                w.i64(*start);
                w.i64(*end);
                encode_series(&mut w, series);
            }
            RegionCommand::RaiseFenceFloor { version } => {
                w.u8(KIND_RAISE_FENCE_FLOOR);
                w.u64(*version);
            }
        }
        w.into_bytes()
    }

    fn encoded_len_hint(&self) -> usize {
        match self {
            RegionCommand::InsertTablet { tablet: t, .. } => {
                64 + t.row_count() * (8 + 9 * t.columns.len())
            }
            _ => 64,
        }
    }

    /// Decodes a command, checking the tablet's shape against `limits`. A bad payload is an
    /// error naming the offset, never a panic.
    pub fn decode(bytes: &[u8], limits: &TabletLimits) -> DecodeResult<RegionCommand> {
        let mut r = Reader::new(bytes);
        let version = r.u8()?;
        let tokens = match version {
            FORMAT_VERSION => true,
            FORMAT_VERSION_WITHOUT_TOKEN => false,
            _ => return r.error(format!("unknown command format version {version}")),
        };
        let kind = r.u8()?;
        let token = |r: &mut Reader<'_>| -> DecodeResult<u64> {
            if tokens {
                r.u64()
            } else {
                Ok(0)
            }
        };
        let command = match kind {
            KIND_INSERT_TABLET => {
                let metadata_version = token(&mut r)?;
                RegionCommand::InsertTablet {
                    metadata_version,
                    table_version: 0,
                    tablet: decode_tablet(&mut r, limits)?,
                }
            }
            KIND_INSERT_TABLE_TABLET if tokens => {
                let metadata_version = r.u64()?;
                let table_version = r.u64()?;
                if table_version == 0 {
                    return r.error("a table insert with table version 0");
                }
                RegionCommand::InsertTablet {
                    metadata_version,
                    table_version,
                    tablet: decode_tablet(&mut r, limits)?,
                }
            }
            KIND_DELETE_SERIES => {
                let deletion = Deletion {
                    metadata_version: token(&mut r)?,
                    operation_id: token(&mut r)?,
                };
                let series = decode_series(&mut r)?;
                RegionCommand::DeleteSeries { series, deletion }
            }
            KIND_DELETE_DATA if tokens => RegionCommand::DeleteData {
                start: r.i64()?,
                end: r.i64()?,
                series: decode_series(&mut r)?,
                deletion: Deletion::default(),
            },
            KIND_DELETE_DATA_FENCED if tokens => {
                let deletion = Deletion {
                    metadata_version: r.u64()?,
                    operation_id: r.u64()?,
                };
                if deletion == Deletion::default() {
                    return r.error("a fenced deleteData without a token or an operation");
                }
                RegionCommand::DeleteData {
                    start: r.i64()?,
                    end: r.i64()?,
                    series: decode_series(&mut r)?,
                    deletion,
                }
            }
            KIND_DELETE_DATABASE => {
                let deletion = Deletion {
                    metadata_version: token(&mut r)?,
                    operation_id: token(&mut r)?,
                };
                RegionCommand::DeleteDatabase {
                    database: r.str16()?,
                    deletion,
                }
            }
            KIND_RAISE_FENCE_FLOOR if tokens => {
                RegionCommand::RaiseFenceFloor { version: r.u64()? }
            }
            kind => return r.error(format!("unknown command kind {kind}")),
        };
        r.finish()?;
        Ok(command)
    }
}

fn encode_series(w: &mut Writer, series: &[(String, String)]) {
    w.len32(series.len());
    for (device, measurement) in series {
        w.str16(device);
        w.str16(measurement);
    }
}

fn decode_series(r: &mut Reader<'_>) -> DecodeResult<Vec<(String, String)>> {
    let count = r.u32()? as usize;
    if count.saturating_mul(4) > r.remaining() {
        return r.error(format!("{count} series cannot fit the remaining bytes"));
    }
    let mut series = Vec::with_capacity(count);
    for _ in 0..count {
        series.push((r.str16()?, r.str16()?));
    }
    Ok(series)
}

fn encode_tablet(w: &mut Writer, tablet: &Tablet) {
    let rows = tablet.row_count();
    w.str16(&tablet.device);
    w.len32(rows);
    w.len32(tablet.columns.len());
    w.i64s(&tablet.timestamps);
    let all_rows: Vec<usize> = (0..rows).collect();
    for (i, column) in tablet.columns.iter().enumerate() {
        w.str16(&tablet.measurements[i]);
        w.u8(tablet.data_types[i].code());
        match &tablet.bitmaps[i] {
            Some(bitmap) => {
                w.u8(1);
                w.bitmap_rows(bitmap, &all_rows);
            }
            None => w.u8(0),
        }
        w.column_rows(column, 0..rows);
    }
}

fn decode_tablet(r: &mut Reader<'_>, limits: &TabletLimits) -> DecodeResult<Tablet> {
    let start = r.position();
    let device = r.str16()?;
    let rows = r.u32()? as usize;
    let columns = r.u32()? as usize;
    if rows > limits.rows_max || columns > limits.measurements_max {
        return r.error(format!(
            "tablet of {rows} rows × {columns} columns exceeds the limits ({} × {})",
            limits.rows_max, limits.measurements_max
        ));
    }
    let timestamps = r.i64s(rows)?;
    let mut tablet = Tablet {
        device,
        measurements: Vec::with_capacity(columns),
        data_types: Vec::with_capacity(columns),
        timestamps,
        columns: Vec::with_capacity(columns),
        bitmaps: Vec::with_capacity(columns),
    };
    for _ in 0..columns {
        tablet.measurements.push(r.str16()?);
        let data_type = r.data_type()?;
        tablet.data_types.push(data_type);
        let bitmap = match r.u8()? {
            0 => None,
            1 => Some(r.bitmap(rows)?),
            b => return r.error(format!("bitmap flag {b}")),
        };
        tablet.bitmaps.push(bitmap);
        tablet.columns.push(r.column(data_type, rows)?);
    }
    tablet.validate(limits).map_err(|e| DecodeError {
        offset: start as u64,
        reason: e.to_string(),
    })?;
    Ok(tablet)
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{DataType, Value};

    fn tablet() -> Tablet {
        let mut t = Tablet::new(
            "root.sg.d1",
            &[("s1", DataType::Int32), ("s2", DataType::Text)],
        );
        t.push_row(7, vec![Some(Value::Int32(-2)), None]);
        t
    }

    #[test]
    fn golden_insert_tablet() {
        let command = RegionCommand::InsertTablet {
            tablet: tablet(),
            metadata_version: 0x0102,
            table_version: 0,
        };
        let bytes = command.encode();
        #[rustfmt::skip]
        let golden: Vec<u8> = vec![
            2, 1,                                   // version, kind InsertTablet
            2, 1, 0, 0, 0, 0, 0, 0,                 // metadata version 0x0102
            10, 0, b'r', b'o', b'o', b't', b'.', b's', b'g', b'.', b'd', b'1',
            1, 0, 0, 0,                             // rows
            2, 0, 0, 0,                             // columns
            7, 0, 0, 0, 0, 0, 0, 0,                 // timestamp 7
            2, 0, b's', b'1', 1, 0,                 // "s1", INT32, no bitmap
            0xfe, 0xff, 0xff, 0xff,                 // -2
            2, 0, b's', b'2', 5, 1,                 // "s2", TEXT, bitmap
            1, 0, 0, 0, 0, 0, 0, 0,                 // row 0 null
            0, 0, 0, 0,                             // placeholder ""
        ];
        assert_eq!(bytes, golden);
        let decoded = RegionCommand::decode(&golden, &TabletLimits::default()).unwrap();
        assert_eq!(decoded, command);
        // Format version 1 (no token) still decodes, as version 0.
        let mut v1 = vec![1u8, 1];
        v1.extend_from_slice(&golden[10..]);
        let decoded = RegionCommand::decode(&v1, &TabletLimits::default()).unwrap();
        assert_eq!(decoded, RegionCommand::insert(tablet()));
    }

    #[test]
    fn golden_deletes() {
        let deletion = Deletion {
            metadata_version: 7,
            operation_id: 3,
        };
        let bytes = RegionCommand::DeleteSeries {
            series: vec![("root.a.b".into(), "s".into())],
            deletion,
        }
        .encode();
        #[rustfmt::skip]
        let golden: Vec<u8> = vec![
            2, 2, 7, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0,
            1, 0, 0, 0, 8, 0, b'r', b'o', b'o', b't', b'.', b'a', b'.', b'b', 1, 0, b's',
        ];
        assert_eq!(bytes, golden);
        let bytes = RegionCommand::DeleteDatabase {
            database: "root.a".into(),
            deletion,
        }
        .encode();
        #[rustfmt::skip]
        let golden: Vec<u8> = vec![
            2, 3, 7, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0,
            6, 0, b'r', b'o', b'o', b't', b'.', b'a',
        ];
        assert_eq!(bytes, golden);
        let command = RegionCommand::DeleteData {
            series: vec![("root.a.b".into(), "s".into())],
            start: -1,
            end: 0x0201,
            deletion: Deletion::default(),
        };
        #[rustfmt::skip]
        let golden: Vec<u8> = vec![
            2, 4,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // start -1
            1, 2, 0, 0, 0, 0, 0, 0,                         // end 0x0201
            1, 0, 0, 0, 8, 0, b'r', b'o', b'o', b't', b'.', b'a', b'.', b'b', 1, 0, b's',
        ];
        assert_eq!(command.encode(), golden);
        assert_eq!(
            RegionCommand::decode(&golden, &TabletLimits::default()).unwrap(),
            command
        );
        // Format version 1.
        let limits = TabletLimits::default();
        assert_eq!(
            RegionCommand::decode(&[1, 3, 6, 0, b'r', b'o', b'o', b't', b'.', b'a'], &limits)
                .unwrap(),
            RegionCommand::delete_database("root.a")
        );
        let v1 = [
            1, 2, 1, 0, 0, 0, 8, 0, b'r', b'o', b'o', b't', b'.', b'a', b'.', b'b', 1, 0, b's',
        ];
        assert_eq!(
            RegionCommand::decode(&v1, &limits).unwrap(),
            RegionCommand::delete_series(vec![("root.a.b".into(), "s".into())])
        );
    }

    #[test]
    fn golden_table_insert_and_fenced_delete_data() {
        let limits = TabletLimits::default();
        let command = RegionCommand::InsertTablet {
            tablet: tablet(),
            metadata_version: 0x0102,
            table_version: 0x03,
        };
        let bytes = command.encode();
        let tree = RegionCommand::InsertTablet {
            tablet: tablet(),
            metadata_version: 0x0102,
            table_version: 0,
        }
        .encode();
        #[rustfmt::skip]
        let head: Vec<u8> = vec![
            2, 5,                                   // version, kind InsertTableTablet
            2, 1, 0, 0, 0, 0, 0, 0,                 // metadata version 0x0102
            3, 0, 0, 0, 0, 0, 0, 0,                 // table version 3
        ];
        assert_eq!(&bytes[..18], &head[..]);
        assert_eq!(&bytes[18..], &tree[10..], "the tablet as kind 1 writes it");
        assert_eq!(RegionCommand::decode(&bytes, &limits).unwrap(), command);
        let mut zero = bytes.clone();
        zero[10] = 0;
        assert!(
            RegionCommand::decode(&zero, &limits).is_err(),
            "kind 5 always names a table version"
        );

        let command = RegionCommand::DeleteData {
            series: vec![("root.a.b".into(), "s".into())],
            start: -1,
            end: 0x0201,
            deletion: Deletion {
                metadata_version: 7,
                operation_id: 3,
            },
        };
        #[rustfmt::skip]
        let golden: Vec<u8> = vec![
            2, 6,
            7, 0, 0, 0, 0, 0, 0, 0,                         // metadata version 7
            3, 0, 0, 0, 0, 0, 0, 0,                         // operation 3
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // start -1
            1, 2, 0, 0, 0, 0, 0, 0,                         // end 0x0201
            1, 0, 0, 0, 8, 0, b'r', b'o', b'o', b't', b'.', b'a', b'.', b'b', 1, 0, b's',
        ];
        assert_eq!(command.encode(), golden);
        assert_eq!(RegionCommand::decode(&golden, &limits).unwrap(), command);
    }

    #[test]
    fn golden_fence_floor() {
        let limits = TabletLimits::default();
        let command = RegionCommand::RaiseFenceFloor { version: 0x0102 };
        #[rustfmt::skip]
        let golden = [
            2, 7,                                   // version, kind RaiseFenceFloor
            0x02, 0x01, 0, 0, 0, 0, 0, 0,           // the floor
        ];
        assert_eq!(command.encode(), golden);
        assert_eq!(RegionCommand::decode(&golden, &limits).unwrap(), command);
        let without_token = [1, 7, 0x02, 0x01, 0, 0, 0, 0, 0, 0];
        assert!(
            RegionCommand::decode(&without_token, &limits).is_err(),
            "format 1 never had a floor"
        );
    }

    #[test]
    fn every_truncation_and_bit_flip_is_an_error_or_a_valid_command() {
        let limits = TabletLimits::default();
        let bytes = RegionCommand::insert(tablet()).encode();
        for cut in 0..bytes.len() {
            assert!(
                RegionCommand::decode(&bytes[..cut], &limits).is_err(),
                "cut at {cut}"
            );
        }
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut flipped = bytes.clone();
                flipped[i] ^= 1 << bit;
                // Must not panic; a flip may still decode to another valid command.
                let _outcome = RegionCommand::decode(&flipped, &limits);
            }
        }
    }

    #[test]
    fn huge_declared_counts_do_not_allocate() {
        let limits = TabletLimits::default();
        let mut bytes = vec![2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0];
        bytes.extend_from_slice(b"root.a");
        bytes.extend_from_slice(&1_000_000u32.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        let err = RegionCommand::decode(&bytes, &limits).unwrap_err();
        assert!(err.reason.contains("cannot fit"), "{err:?}");
    }
}
