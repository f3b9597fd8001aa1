//! The TsBlock layout query rows go back in (`TSExecuteStatementResp.queryResult`,
//! `IOTDB_PROTOCOL.md` §7), as IoTDB's Python client decodes it (tsfile `tsblock_serde.py`),
//! big-endian throughout:
//!
//! ```text
//! i32 value columns N, N × u8 physical type, i32 rows P,
//! (N + 1) × u8 column encoding (time first: 2 INT64_ARRAY),
//! time column: u8 0 (no nulls), P × i64
//! N × value column: u8 may-have-null, [ceil(P/8) bytes null bitmap, MSB-first, 1 = null],
//!     BOOLEAN (encoding 0): ceil(P/8) bytes, MSB-first, a bit for every row
//!     INT32, FLOAT, DATE (encoding 1): i32 / f32 bits for the non-null rows
//!     INT64, DOUBLE, TIMESTAMP (encoding 2): i64 / f64 bits for the non-null rows
//!     TEXT, STRING, BLOB (encoding 3): i32 length + bytes for the non-null rows
//! ```
//!
//! Only the plain encodings are written (the Python client has no dictionary decoder, and its
//! run-length path serves TEXT and BOOLEAN only), and the type bytes are physical types, as
//! Java's columns report them (§9): TIMESTAMP goes as INT64 (2), DATE as INT32 (1), STRING and
//! BLOB as TEXT (5). The logical types travel in the response's `dataTypeList`.

use common::{Bitmap, Column, DataType};

/// The column encoding byte of a value column of `data_type`.
fn encoding(data_type: DataType) -> u8 {
    match data_type.physical() {
        DataType::Boolean => 0,
        DataType::Int32 | DataType::Float => 1,
        DataType::Int64 | DataType::Double => 2,
        _ => 3,
    }
}

/// `bits(row)` for every row, packed MSB-first.
fn pack_msb_first(rows: usize, bits: impl Fn(usize) -> bool) -> Vec<u8> {
    let mut out = vec![0u8; rows.div_ceil(8)];
    for row in 0..rows {
        if bits(row) {
            out[row / 8] |= 0x80 >> (row % 8);
        }
    }
    out
}

/// One TsBlock of `times.len()` rows: the times and, per value column, its values (one per row,
/// a null row holding a placeholder) and nulls.
pub fn encode(times: &[i64], columns: &[(Column, Option<Bitmap>)]) -> Vec<u8> {
    let rows = times.len();
    for (column, nulls) in columns {
        assert_eq!(column.len(), rows, "a column of another length");
        assert!(
            nulls.as_ref().is_none_or(|n| n.len() == rows),
            "a null bitmap of another length"
        );
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(columns.len() as i32).to_be_bytes());
    out.extend(columns.iter().map(|(c, _)| c.data_type().physical().code()));
    out.extend_from_slice(&(rows as i32).to_be_bytes());
    out.push(2);
    out.extend(columns.iter().map(|(c, _)| encoding(c.data_type())));
    out.push(0);
    for t in times {
        out.extend_from_slice(&t.to_be_bytes());
    }
    for (column, nulls) in columns {
        let nulls = nulls.as_ref().filter(|n| n.count_ones() > 0);
        let is_null = |row: usize| nulls.is_some_and(|n| n.get(row));
        match nulls {
            Some(n) => {
                out.push(1);
                out.extend(pack_msb_first(rows, |row| n.get(row)));
            }
            None => out.push(0),
        }
        let present = (0..rows).filter(|row| !is_null(*row));
        match column {
            Column::Boolean(v) => out.extend(pack_msb_first(rows, |row| v[row])),
            Column::Int32(v) | Column::Date(v) => {
                present.for_each(|r| out.extend_from_slice(&v[r].to_be_bytes()))
            }
            Column::Int64(v) | Column::Timestamp(v) => {
                present.for_each(|r| out.extend_from_slice(&v[r].to_be_bytes()))
            }
            Column::Float(v) => present.for_each(|r| out.extend_from_slice(&v[r].to_be_bytes())),
            Column::Double(v) => present.for_each(|r| out.extend_from_slice(&v[r].to_be_bytes())),
            Column::Text(v) | Column::String(v) => present.for_each(|r| {
                out.extend_from_slice(&(v[r].len() as i32).to_be_bytes());
                out.extend_from_slice(v[r].as_bytes());
            }),
            Column::Blob(v) => present.for_each(|r| {
                out.extend_from_slice(&(v[r].len() as i32).to_be_bytes());
                out.extend_from_slice(&v[r]);
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nulls(rows: usize, null_rows: &[usize]) -> Option<Bitmap> {
        let mut bitmap = Bitmap::new(rows);
        for row in null_rows {
            bitmap.set(*row);
        }
        Some(bitmap)
    }

    /// The test vector of `IOTDB_PROTOCOL.md` §7: INT32 {10, null}, TEXT {"a", null},
    /// BOOLEAN {true, false}, times {1, 2}.
    #[test]
    fn the_protocol_documents_test_vector() {
        let columns = [
            (Column::Int32(vec![10, 0]), nulls(2, &[1])),
            (
                Column::Text(vec!["a".into(), String::new()]),
                nulls(2, &[1]),
            ),
            (Column::Boolean(vec![true, false]), None),
        ];
        let mut want = vec![0, 0, 0, 3, 1, 5, 0, 0, 0, 0, 2, 2, 1, 3, 0, 0];
        want.extend_from_slice(&1i64.to_be_bytes());
        want.extend_from_slice(&2i64.to_be_bytes());
        want.extend_from_slice(&[1, 0x40, 0, 0, 0, 0x0a]);
        want.extend_from_slice(&[1, 0x40, 0, 0, 0, 1, b'a']);
        want.extend_from_slice(&[0, 0x80]);
        assert_eq!(encode(&[1, 2], &columns), want);
    }

    #[test]
    fn iotdb_2_types_go_as_their_physical_types() {
        let logical = [
            (Column::Timestamp(vec![5]), None),
            (Column::Date(vec![20240105]), None),
            (Column::String(vec!["s".into()]), None),
            (Column::Blob(vec![vec![b's']]), None),
        ];
        let physical = [
            (Column::Int64(vec![5]), None),
            (Column::Int32(vec![20240105]), None),
            (Column::Text(vec!["s".into()]), None),
            (Column::Text(vec!["s".into()]), None),
        ];
        let block = encode(&[1], &logical);
        assert_eq!(block, encode(&[1], &physical));
        assert_eq!(&block[4..8], &[2, 1, 5, 5]);
    }

    #[test]
    fn an_empty_bitmap_is_no_bitmap_and_wide_types_are_eight_bytes() {
        let columns = [
            (Column::Double(vec![0.5; 9]), nulls(9, &[])),
            (Column::Int64(vec![-1; 9]), nulls(9, &[8])),
        ];
        let block = encode(&[7; 9], &columns);
        // Header 4 + 2 + 4 + 3, time 1 + 72, DOUBLE 1 + 72, INT64 1 + 2 (bitmap) + 64.
        assert_eq!(block.len(), 13 + 73 + 73 + 67);
        assert_eq!(&block[4..6], &[4, 2]);
        let int64 = &block[13 + 73 + 73..];
        assert_eq!(
            &int64[..3],
            &[1, 0, 0x80],
            "row 8 is the first bit of the second byte"
        );
    }
}
