//! Region commands: the payload of a region's log entries. Everything the apply needs travels in
//! the command (DESIGN §5, "apply is deterministic"): the tablet carries its own types, so an
//! apply never consults a cache.
//!
//! Encoding (all integers little-endian), format version 1:
//!
//! ```text
//! u8 version = 1, u8 kind
//! kind 1 InsertTablet:  str16 device, u32 rows M, u32 columns N, i64 × M timestamps,
//!                       N × { str16 measurement, u8 type, u8 has_bitmap,
//!                             [u64 × ceil(M/64) null bitmap], values }
//!                       values: BOOLEAN u8 (0/1) × M, INT32 i32 × M, INT64 i64 × M,
//!                               FLOAT f32 bits × M, DOUBLE f64 bits × M,
//!                               TEXT { u32 len, UTF-8 bytes } × M
//! kind 2 DeleteSeries:  u32 count, count × { str16 device, str16 measurement }
//! kind 3 DeleteDatabase: str16 database
//! ```

use common::{Tablet, TabletLimits};

use super::bytes::{write_bitmap_rows, DecodeError, DecodeResult, Reader, Writer};

const FORMAT_VERSION: u8 = 1;
const KIND_INSERT_TABLET: u8 = 1;
const KIND_DELETE_SERIES: u8 = 2;
const KIND_DELETE_DATABASE: u8 = 3;

/// A command applied to a data region, in log order.
#[derive(Clone, Debug, PartialEq)]
pub enum RegionCommand {
    /// Upsert the tablet's rows (IoTDB's InsertTabletNode; a batch of records becomes one tablet
    /// per device).
    InsertTablet(Tablet),
    /// Drop these series' data (DELETE TIMESERIES), ordered through the log.
    DeleteSeries(Vec<(String, String)>),
    /// Drop every series under a database, e.g. `root.sg` (DROP DATABASE).
    DeleteDatabase(String),
}

impl RegionCommand {
    /// The command's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len_hint());
        w.u8(FORMAT_VERSION);
        match self {
            RegionCommand::InsertTablet(tablet) => {
                w.u8(KIND_INSERT_TABLET);
                encode_tablet(&mut w, tablet);
            }
            RegionCommand::DeleteSeries(series) => {
                w.u8(KIND_DELETE_SERIES);
                w.u32(series.len() as u32);
                for (device, measurement) in series {
                    w.str16(device);
                    w.str16(measurement);
                }
            }
            RegionCommand::DeleteDatabase(database) => {
                w.u8(KIND_DELETE_DATABASE);
                w.str16(database);
            }
        }
        w.buf
    }

    fn encoded_len_hint(&self) -> usize {
        match self {
            RegionCommand::InsertTablet(t) => 64 + t.row_count() * (8 + 9 * t.columns.len()),
            _ => 64,
        }
    }

    /// Decodes a command, checking the tablet's shape against `limits`. A bad payload is an
    /// error naming the offset, never a panic.
    pub fn decode(bytes: &[u8], limits: &TabletLimits) -> DecodeResult<RegionCommand> {
        let mut r = Reader::new(bytes);
        let version = r.u8()?;
        if version != FORMAT_VERSION {
            return r.error(format!("unknown command format version {version}"));
        }
        let command = match r.u8()? {
            KIND_INSERT_TABLET => RegionCommand::InsertTablet(decode_tablet(&mut r, limits)?),
            KIND_DELETE_SERIES => {
                let count = r.u32()? as usize;
                if count.saturating_mul(4) > r.remaining() {
                    return r.error(format!("{count} series cannot fit the remaining bytes"));
                }
                let mut series = Vec::with_capacity(count);
                for _ in 0..count {
                    series.push((r.str16()?, r.str16()?));
                }
                RegionCommand::DeleteSeries(series)
            }
            KIND_DELETE_DATABASE => RegionCommand::DeleteDatabase(r.str16()?),
            kind => return r.error(format!("unknown command kind {kind}")),
        };
        r.finish()?;
        Ok(command)
    }
}

fn encode_tablet(w: &mut Writer, tablet: &Tablet) {
    let rows = tablet.row_count();
    w.str16(&tablet.device);
    w.u32(rows as u32);
    w.u32(tablet.columns.len() as u32);
    w.i64s(&tablet.timestamps);
    let all_rows: Vec<usize> = (0..rows).collect();
    for (i, column) in tablet.columns.iter().enumerate() {
        w.str16(&tablet.measurements[i]);
        w.u8(tablet.data_types[i].code());
        match &tablet.bitmaps[i] {
            Some(bitmap) => {
                w.u8(1);
                write_bitmap_rows(w, bitmap, &all_rows);
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
        let bytes = RegionCommand::InsertTablet(tablet()).encode();
        #[rustfmt::skip]
        let golden: Vec<u8> = vec![
            1, 1,                                   // version, kind InsertTablet
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
        assert_eq!(decoded, RegionCommand::InsertTablet(tablet()));
    }

    #[test]
    fn golden_deletes() {
        let bytes = RegionCommand::DeleteSeries(vec![("root.a.b".into(), "s".into())]).encode();
        #[rustfmt::skip]
        let golden: Vec<u8> = vec![1, 2, 1, 0, 0, 0, 8, 0, b'r', b'o', b'o', b't', b'.', b'a', b'.', b'b', 1, 0, b's'];
        assert_eq!(bytes, golden);
        let bytes = RegionCommand::DeleteDatabase("root.a".into()).encode();
        assert_eq!(bytes, vec![1, 3, 6, 0, b'r', b'o', b'o', b't', b'.', b'a']);
    }

    #[test]
    fn every_truncation_and_bit_flip_is_an_error_or_a_valid_command() {
        let limits = TabletLimits::default();
        let bytes = RegionCommand::InsertTablet(tablet()).encode();
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
        let mut bytes = vec![1, 1, 6, 0];
        bytes.extend_from_slice(b"root.a");
        bytes.extend_from_slice(&1_000_000u32.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        let err = RegionCommand::decode(&bytes, &limits).unwrap_err();
        assert!(err.reason.contains("cannot fit"), "{err:?}");
    }
}
