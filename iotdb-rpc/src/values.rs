//! The values IoTDB's clients send in inserts (`IOTDB_PROTOCOL.md` §5), big-endian throughout.
//!
//! **Tablet** (`TSInsertTabletReq.values`): column-major, one section per column of exactly
//! `size` entries (BOOLEAN 1 byte, INT32, FLOAT and DATE 4, INT64, DOUBLE and TIMESTAMP 8, TEXT,
//! STRING and BLOB `i32` length and bytes; a null cell holds a placeholder), then, only when some cell is null, per column a flag
//! byte and, when it is 1, `size / 8 + 1` bytes of null bitmap, LSB-first, a set bit a null.
//! **Timestamps** (`TSInsertTabletReq.timestamps`): `size` × `i64`. **Record**
//! (`TSInsertRecordReq.values`): per measurement a type byte, then the value.

use common::{Bitmap, Column, DataType, Value};

use crate::{data_type, LayoutError};

/// A column's values and nulls.
pub type DecodedColumn = (Column, Option<Bitmap>);

struct Bytes<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], LayoutError> {
        if n > self.buf.len() - self.pos {
            return Err(LayoutError(format!(
                "{what} needs {n} bytes at offset {}, {} left",
                self.pos,
                self.buf.len() - self.pos
            )));
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], LayoutError> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }

    fn blob(&mut self, what: &str) -> Result<Vec<u8>, LayoutError> {
        let length = i32::from_be_bytes(self.array(what)?);
        let length = usize::try_from(length)
            .map_err(|_| LayoutError(format!("{what} of negative length {length}")))?;
        Ok(self.take(length, what)?.to_vec())
    }

    fn text(&mut self, what: &str) -> Result<String, LayoutError> {
        String::from_utf8(self.blob(what)?)
            .map_err(|e| LayoutError(format!("{what} is not UTF-8: {e}")))
    }

    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }
}

/// `rows` timestamps.
pub fn timestamps(bytes: &[u8], rows: usize) -> Result<Vec<i64>, LayoutError> {
    if bytes.len() != rows.saturating_mul(8) {
        return Err(LayoutError(format!(
            "{} bytes of timestamps for {rows} rows",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| i64::from_be_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// The columns of a tablet of `rows` rows and these column types, with their nulls.
pub fn tablet_columns(
    types: &[DataType],
    rows: usize,
    values: &[u8],
) -> Result<Vec<DecodedColumn>, LayoutError> {
    let mut r = Bytes {
        buf: values,
        pos: 0,
    };
    let mut columns = Vec::with_capacity(types.len());
    for (i, &data_type) in types.iter().enumerate() {
        let what = format!("column {i} ({data_type})");
        let width = match data_type.physical() {
            DataType::Boolean => 1,
            DataType::Int32 | DataType::Float => 4,
            DataType::Int64 | DataType::Double => 8,
            _ => 0,
        };
        let column = if width > 0 {
            let section = r.take(rows.saturating_mul(width), &what)?;
            fixed(data_type.physical(), section).with_type(data_type)
        } else {
            // Each entry takes at least its 4-byte length: bound the allocation by the bytes.
            if rows > r.left() / 4 {
                return Err(LayoutError(format!(
                    "{what}: {rows} rows need more than the {} bytes left",
                    r.left()
                )));
            }
            if data_type == DataType::Blob {
                let mut blobs = Vec::with_capacity(rows);
                for _ in 0..rows {
                    blobs.push(r.blob(&what)?);
                }
                Column::Blob(blobs)
            } else {
                let mut texts = Vec::with_capacity(rows);
                for _ in 0..rows {
                    texts.push(r.text(&what)?);
                }
                Column::Text(texts).with_type(data_type)
            }
        };
        columns.push((column, None));
    }
    if r.left() == 0 {
        return Ok(columns);
    }
    let bitmap_bytes = rows / 8 + 1;
    for (i, (_, nulls)) in columns.iter_mut().enumerate() {
        let what = format!("null bitmap of column {i}");
        match r.take(1, &what)?[0] {
            0 => {}
            1 => {
                let bits = r.take(bitmap_bytes, &what)?;
                let mut bitmap = Bitmap::new(rows);
                for row in 0..rows {
                    if bits[row / 8] & (1 << (row % 8)) != 0 {
                        bitmap.set(row);
                    }
                }
                *nulls = Some(bitmap);
            }
            flag => return Err(LayoutError(format!("{what}: flag {flag}, not 0 or 1"))),
        }
    }
    if r.left() > 0 {
        return Err(LayoutError(format!(
            "{} bytes after the null bitmaps",
            r.left()
        )));
    }
    Ok(columns)
}

/// A whole section of fixed-width values of a physical type (its length already checked).
fn fixed(data_type: DataType, section: &[u8]) -> Column {
    fn words<const N: usize, T>(section: &[u8], value: impl Fn([u8; N]) -> T) -> Vec<T> {
        section
            .chunks_exact(N)
            .map(|c| value(c.try_into().expect("N bytes")))
            .collect()
    }
    match data_type {
        DataType::Boolean => Column::Boolean(section.iter().map(|b| *b != 0).collect()),
        DataType::Int32 => Column::Int32(words(section, i32::from_be_bytes)),
        DataType::Int64 => Column::Int64(words(section, i64::from_be_bytes)),
        DataType::Float => Column::Float(words(section, f32::from_be_bytes)),
        DataType::Double => Column::Double(words(section, f64::from_be_bytes)),
        other => unreachable!("{other} is no fixed-width physical type"),
    }
}

/// A tablet's timestamps as a client sends them: big-endian `i64`s.
pub fn encode_timestamps(timestamps: &[i64]) -> Vec<u8> {
    timestamps.iter().flat_map(|t| t.to_be_bytes()).collect()
}

/// A tablet's values as a client sends them (the layout [`tablet_columns`] reads): one
/// big-endian section per column, then, when any column has a null, the bitmap block.
pub fn encode_tablet_columns(columns: &[Column], nulls: &[Option<Bitmap>]) -> Vec<u8> {
    let rows = columns.first().map_or(0, Column::len);
    let mut out = Vec::new();
    for column in columns {
        match column {
            Column::Boolean(v) => out.extend(v.iter().map(|b| u8::from(*b))),
            Column::Int32(v) | Column::Date(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
            Column::Int64(v) | Column::Timestamp(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
            Column::Float(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
            Column::Double(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
            Column::Text(v) | Column::String(v) => {
                for text in v {
                    out.extend_from_slice(&(text.len() as i32).to_be_bytes());
                    out.extend_from_slice(text.as_bytes());
                }
            }
            Column::Blob(v) => {
                for blob in v {
                    out.extend_from_slice(&(blob.len() as i32).to_be_bytes());
                    out.extend_from_slice(blob);
                }
            }
        }
    }
    if nulls
        .iter()
        .any(|n| n.as_ref().is_some_and(|b| b.count_ones() > 0))
    {
        for bitmap in nulls {
            match bitmap {
                Some(bitmap) if bitmap.count_ones() > 0 => {
                    out.push(1);
                    let mut bits = vec![0u8; rows / 8 + 1];
                    for row in (0..rows).filter(|&r| bitmap.get(r)) {
                        bits[row / 8] |= 1 << (row % 8);
                    }
                    out.extend_from_slice(&bits);
                }
                _ => out.push(0),
            }
        }
    }
    out
}

/// The values of one record of `measurements` measurements: per measurement a type byte, then
/// the value. Records never carry nulls (clients leave those measurements out).
pub fn record(bytes: &[u8], measurements: usize) -> Result<Vec<Value>, LayoutError> {
    let mut r = Bytes { buf: bytes, pos: 0 };
    let mut values = Vec::with_capacity(measurements.min(bytes.len() / 2));
    for i in 0..measurements {
        let what = format!("value {i}");
        let code = r.take(1, &what)?[0] as i8;
        let value = match data_type(i32::from(code))? {
            DataType::Boolean => Value::Boolean(r.take(1, &what)?[0] != 0),
            DataType::Int32 => Value::Int32(i32::from_be_bytes(r.array(&what)?)),
            DataType::Int64 => Value::Int64(i64::from_be_bytes(r.array(&what)?)),
            DataType::Float => Value::Float(f32::from_be_bytes(r.array(&what)?)),
            DataType::Double => Value::Double(f64::from_be_bytes(r.array(&what)?)),
            DataType::Text => Value::Text(r.text(&what)?),
            DataType::Timestamp => Value::Timestamp(i64::from_be_bytes(r.array(&what)?)),
            DataType::Date => Value::Date(i32::from_be_bytes(r.array(&what)?)),
            DataType::Blob => Value::Blob(r.blob(&what)?),
            DataType::String => Value::String(r.text(&what)?),
        };
        values.push(value);
    }
    if r.left() > 0 {
        return Err(LayoutError(format!(
            "{} bytes after {measurements} values",
            r.left()
        )));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 3-row tablet of `IOTDB_PROTOCOL.md` §5.3 with the types common stores: BOOLEAN,
    /// INT32, TEXT, INT64, a null in each, every byte consumed.
    #[test]
    fn a_tablet_with_nulls_decodes_every_byte() {
        let mut values = Vec::new();
        values.extend_from_slice(&[1, 0, 1]); // BOOLEAN: true, (null), true
        for v in [7i32, 0, -9] {
            values.extend_from_slice(&v.to_be_bytes()); // INT32: 7, (null), -9
        }
        for text in ["a", "", "ccc"] {
            values.extend_from_slice(&(text.len() as i32).to_be_bytes());
            values.extend_from_slice(text.as_bytes()); // TEXT: "a", (null), "ccc"
        }
        for v in [0i64, 1 << 40, 2] {
            values.extend_from_slice(&v.to_be_bytes()); // INT64: (null), 2^40, 2
        }
        // Null bitmaps: flag, then 3 / 8 + 1 = 1 byte, LSB-first.
        values.extend_from_slice(&[1, 0b010, 1, 0b010, 1, 0b010, 1, 0b001]);
        let types = [
            DataType::Boolean,
            DataType::Int32,
            DataType::Text,
            DataType::Int64,
        ];
        let columns = tablet_columns(&types, 3, &values).unwrap();
        assert_eq!(columns[0].0, Column::Boolean(vec![true, false, true]));
        assert_eq!(columns[1].0, Column::Int32(vec![7, 0, -9]));
        assert_eq!(
            columns[2].0,
            Column::Text(vec!["a".into(), "".into(), "ccc".into()])
        );
        assert_eq!(columns[3].0, Column::Int64(vec![0, 1 << 40, 2]));
        let nulls: Vec<Vec<bool>> = columns
            .iter()
            .map(|(_, n)| (0..3).map(|r| n.as_ref().unwrap().get(r)).collect())
            .collect();
        assert_eq!(nulls[0], [false, true, false]);
        assert_eq!(nulls[3], [true, false, false]);

        // Without nulls there is no bitmap block at all.
        let plain = tablet_columns(&types, 3, &values[..values.len() - 8]).unwrap();
        assert!(plain.iter().all(|(_, n)| n.is_none()));
    }

    #[test]
    fn encoded_tablets_decode_to_the_same_columns() {
        let columns = vec![
            Column::Boolean(vec![true, false, true]),
            Column::Int32(vec![1, 0, -3]),
            Column::Int64(vec![i64::MIN, 0, i64::MAX]),
            Column::Float(vec![1.5, 0.0, -2.25]),
            Column::Double(vec![0.1, 0.0, 1e300]),
            Column::Text(vec!["a".into(), "".into(), "h\u{e9}".into()]),
            Column::Timestamp(vec![-1, 0, 1]),
            Column::Date(vec![20240101, 19700101, 99991231]),
            Column::Blob(vec![vec![0xff], vec![], vec![0, 1]]),
            Column::String(vec!["s".into(), "".into(), "t".into()]),
        ];
        let types: Vec<DataType> = columns.iter().map(Column::data_type).collect();
        let mut nulls: Vec<Option<Bitmap>> = vec![None; columns.len()];
        let plain = encode_tablet_columns(&columns, &nulls);
        let decoded = tablet_columns(&types, 3, &plain).unwrap();
        assert!(decoded
            .iter()
            .zip(&columns)
            .all(|((c, n), e)| c == e && n.is_none()));
        let mut bitmap = Bitmap::new(3);
        bitmap.set(1);
        nulls[1] = Some(bitmap.clone());
        nulls[5] = Some(bitmap);
        let with_nulls = encode_tablet_columns(&columns, &nulls);
        let decoded = tablet_columns(&types, 3, &with_nulls).unwrap();
        assert_eq!(
            decoded.iter().map(|(_, n)| n.clone()).collect::<Vec<_>>(),
            nulls
        );
        assert_eq!(
            timestamps(&encode_timestamps(&[5, -1]), 2).unwrap(),
            [5, -1]
        );
    }

    #[test]
    fn floats_doubles_and_timestamps_are_big_endian() {
        let mut values = Vec::new();
        values.extend_from_slice(&1.5f32.to_be_bytes());
        values.extend_from_slice(&(-0.25f64).to_be_bytes());
        let columns = tablet_columns(&[DataType::Float, DataType::Double], 1, &values).unwrap();
        assert_eq!(columns[0].0, Column::Float(vec![1.5]));
        assert_eq!(columns[1].0, Column::Double(vec![-0.25]));
        let ts = [1i64, 1_700_000_000_000];
        let bytes: Vec<u8> = ts.iter().flat_map(|t| t.to_be_bytes()).collect();
        assert_eq!(timestamps(&bytes, 2).unwrap(), ts);
        assert!(timestamps(&bytes, 3).is_err());
    }

    #[test]
    fn a_record_decodes_each_typed_value() {
        let mut bytes = vec![0, 1, 1];
        bytes.extend_from_slice(&42i32.to_be_bytes());
        bytes.push(4);
        bytes.extend_from_slice(&2.5f64.to_be_bytes());
        bytes.push(5);
        bytes.extend_from_slice(&2i32.to_be_bytes());
        bytes.extend_from_slice(b"hi");
        assert_eq!(
            record(&bytes, 4).unwrap(),
            vec![
                Value::Boolean(true),
                Value::Int32(42),
                Value::Double(2.5),
                Value::Text("hi".into())
            ]
        );
        assert!(record(&bytes, 5).unwrap_err().0.contains("value 4"));
        assert!(record(&bytes, 3).unwrap_err().0.contains("bytes after"));
        let mut new_types = vec![8u8];
        new_types.extend_from_slice(&(-5i64).to_be_bytes());
        new_types.push(9);
        new_types.extend_from_slice(&20240229i32.to_be_bytes());
        new_types.push(10);
        new_types.extend_from_slice(&2i32.to_be_bytes());
        new_types.extend_from_slice(&[0xff, 0]);
        new_types.push(11);
        new_types.extend_from_slice(&1i32.to_be_bytes());
        new_types.push(b's');
        assert_eq!(
            record(&new_types, 4).unwrap(),
            vec![
                Value::Timestamp(-5),
                Value::Date(20240229),
                Value::Blob(vec![0xff, 0]),
                Value::String("s".into())
            ]
        );
        let object = [12u8, 0, 0, 0, 1];
        assert!(record(&object, 1)
            .unwrap_err()
            .0
            .contains("unknown data type code 12"));
    }

    #[test]
    fn malformed_tablets_are_refused_with_a_reason() {
        let short = tablet_columns(&[DataType::Int64], 2, &[0; 15]).unwrap_err();
        assert!(
            short.0.contains("column 0 (INT64) needs 16 bytes"),
            "{short}"
        );
        // A TEXT column claiming more rows than its bytes could hold: refused before allocating.
        let huge = tablet_columns(&[DataType::Text], 1 << 40, &[0; 8]).unwrap_err();
        assert!(huge.0.contains("rows need more than"), "{huge}");
        let negative = tablet_columns(&[DataType::Text], 1, &[0xff; 4]).unwrap_err();
        assert!(negative.0.contains("negative length"), "{negative}");
        let flag = tablet_columns(&[DataType::Boolean], 1, &[1, 7]).unwrap_err();
        assert!(flag.0.contains("flag 7"), "{flag}");
        let trailing = tablet_columns(&[DataType::Boolean], 1, &[1, 0, 9]).unwrap_err();
        assert!(trailing.0.contains("after the null bitmaps"), "{trailing}");
    }

    proptest::proptest! {
        /// The decoders' fuzz target: any bytes decode or are refused, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128),
            rows in 0usize..40,
        ) {
            let _ = tablet_columns(&DataType::ALL, rows, &bytes);
            let _ = timestamps(&bytes, rows);
            let _ = record(&bytes, rows);
        }
    }
}
