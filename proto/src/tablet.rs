//! Hand conversions of tablets, columns and values between `common` and the wire, shared by the
//! DataNode and the session (which links no server crate).
//!
//! Columns of a fixed-width type and a tablet's timestamps travel as little-endian words
//! (`Column.fixed_le`, `Tablet.timestamps_le`): encoding and decoding them is a copy, where
//! protobuf's packed repeated fields are encoded and decoded value by value. The repeated forms
//! are still read, so a sender from before the words is understood.

use common::{Bitmap, Column, DataType, Tablet, Value};
use prost::bytes::Bytes;

use crate as proto;
use crate::column::Values;

/// A null bitmap as little-endian u64 words, bit `row % 64` of word `row / 64`.
pub fn bitmap_to_words(bitmap: &Bitmap) -> Vec<u64> {
    let mut words = vec![0u64; bitmap.len().div_ceil(64)];
    for row in 0..bitmap.len() {
        if bitmap.get(row) {
            words[row / 64] |= 1 << (row % 64);
        }
    }
    words
}

/// The bitmap of `rows` bits that `words` hold (missing words are clear bits).
fn bitmap_from_words(words: &[u64], rows: usize) -> Bitmap {
    let mut bitmap = Bitmap::new(rows);
    for row in 0..rows {
        if words
            .get(row / 64)
            .is_some_and(|w| w >> (row % 64) & 1 == 1)
        {
            bitmap.set(row);
        }
    }
    bitmap
}

/// `values` as `N`-byte little-endian words.
fn to_words<T: Copy, const N: usize>(values: &[T], word: impl Fn(T) -> [u8; N]) -> Bytes {
    let mut out = vec![0u8; values.len() * N];
    for (chunk, value) in out.chunks_exact_mut(N).zip(values) {
        chunk.copy_from_slice(&word(*value));
    }
    Bytes::from(out)
}

/// The values of `N`-byte words; `bytes` is a whole number of words.
fn from_words<T, const N: usize>(bytes: &[u8], value: impl Fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|chunk| value(chunk.try_into().expect("chunks of N bytes")))
        .collect()
}

/// The wire form of a column: a fixed-width type as words, TEXT as strings.
pub fn column_to_wire(column: &Column, bitmap: Option<&Bitmap>) -> proto::Column {
    let values = match column {
        Column::Boolean(v) => Values::FixedLe(to_words(v, |b| [u8::from(b)])),
        Column::Int32(v) => Values::FixedLe(to_words(v, i32::to_le_bytes)),
        Column::Int64(v) | Column::Timestamp(v) => Values::FixedLe(to_words(v, i64::to_le_bytes)),
        Column::Date(v) => Values::FixedLe(to_words(v, i32::to_le_bytes)),
        Column::Float(v) => Values::FixedLe(to_words(v, f32::to_le_bytes)),
        Column::Double(v) => Values::FixedLe(to_words(v, f64::to_le_bytes)),
        Column::Text(v) | Column::String(v) => {
            Values::TextValues(proto::TextValues { values: v.clone() })
        }
        Column::Blob(v) => Values::BlobValues(proto::BlobValues { values: v.clone() }),
    };
    proto::Column {
        values: Some(values),
        null_bitmap: bitmap.map(bitmap_to_words).unwrap_or_default(),
        has_null_bitmap: bitmap.is_some(),
    }
}

/// The values of a `data_type` column held as words, or what is wrong with them.
fn column_from_words(data_type: DataType, bytes: &[u8]) -> Result<Column, String> {
    let width = match data_type.physical() {
        DataType::Boolean => 1,
        DataType::Int32 | DataType::Float => 4,
        DataType::Int64 | DataType::Double => 8,
        _ => return Err(format!("{data_type} values cannot be fixed-width words")),
    };
    if !bytes.len().is_multiple_of(width) {
        return Err(format!(
            "{} bytes of {data_type} words, not a multiple of {width}",
            bytes.len()
        ));
    }
    Ok(match data_type {
        DataType::Boolean => {
            if let Some(b) = bytes.iter().find(|b| **b > 1) {
                return Err(format!("BOOLEAN word {b}, not 0 or 1"));
            }
            Column::Boolean(bytes.iter().map(|b| *b == 1).collect())
        }
        DataType::Int32 => Column::Int32(from_words(bytes, i32::from_le_bytes)),
        DataType::Int64 => Column::Int64(from_words(bytes, i64::from_le_bytes)),
        DataType::Float => Column::Float(from_words(bytes, f32::from_le_bytes)),
        DataType::Double => Column::Double(from_words(bytes, f64::from_le_bytes)),
        DataType::Timestamp => Column::Timestamp(from_words(bytes, i64::from_le_bytes)),
        DataType::Date => Column::Date(from_words(bytes, i32::from_le_bytes)),
        DataType::Text | DataType::Blob | DataType::String => unreachable!("refused above"),
    })
}

/// The values and null bitmap of a wire column declared `data_type` with one value per row, in
/// either form; `Err` says what is wrong (no values, another type, another length).
pub fn column_from_wire(
    column: proto::Column,
    data_type: DataType,
    rows: usize,
) -> Result<(Column, Option<Bitmap>), String> {
    let values = match column.values {
        Some(Values::FixedLe(bytes)) => column_from_words(data_type, &bytes)?,
        Some(Values::BoolValues(v)) => Column::Boolean(v.values),
        Some(Values::Int32Values(v)) => Column::Int32(v.values),
        Some(Values::Int64Values(v)) => Column::Int64(v.values),
        Some(Values::FloatValues(v)) => Column::Float(v.values),
        Some(Values::DoubleValues(v)) => Column::Double(v.values),
        Some(Values::TextValues(v)) => Column::Text(v.values),
        Some(Values::BlobValues(v)) => Column::Blob(v.values),
        None => return Err("no values".to_string()),
    }
    // STRING values travel as TEXT's, TIMESTAMP's and DATE's in the repeated forms as INT64's
    // and INT32's: the declared type tells them apart.
    .with_type(data_type);
    if values.data_type() != data_type {
        return Err(format!(
            "declared {data_type} but holds {} values",
            values.data_type()
        ));
    }
    if values.len() != rows {
        return Err(format!("{} values for {rows} rows", values.len()));
    }
    let bitmap = column
        .has_null_bitmap
        .then(|| bitmap_from_words(&column.null_bitmap, rows));
    Ok((values, bitmap))
}

/// A tablet's timestamps from whichever form it sent.
pub fn timestamps_from_wire(varints: Vec<i64>, words: &[u8]) -> Result<Vec<i64>, String> {
    if words.is_empty() {
        return Ok(varints);
    }
    if !varints.is_empty() {
        return Err("timestamps sent in both forms".to_string());
    }
    if !words.len().is_multiple_of(8) {
        return Err(format!(
            "{} bytes of timestamps, not a multiple of 8",
            words.len()
        ));
    }
    Ok(from_words(words, i64::from_le_bytes))
}

/// The wire form of a tablet.
pub fn tablet_to_wire(tablet: &Tablet) -> proto::Tablet {
    proto::Tablet {
        device: tablet.device.clone(),
        schema: tablet
            .measurements
            .iter()
            .zip(&tablet.data_types)
            .map(|(name, t)| proto::MeasurementSchema {
                name: name.clone(),
                data_type: proto::data_type_to_wire(*t) as i32,
            })
            .collect(),
        timestamps: Vec::new(),
        timestamps_le: to_words(&tablet.timestamps, i64::to_le_bytes),
        columns: tablet
            .columns
            .iter()
            .zip(&tablet.bitmaps)
            .map(|(c, b)| column_to_wire(c, b.as_ref()))
            .collect(),
    }
}

/// The wire form of a value.
pub fn value_to_wire(value: &Value) -> proto::Value {
    use proto::value::Value as W;
    proto::Value {
        value: Some(match value {
            Value::Boolean(v) => W::BoolValue(*v),
            Value::Int32(v) => W::Int32Value(*v),
            Value::Int64(v) => W::Int64Value(*v),
            Value::Float(v) => W::FloatValue(*v),
            Value::Double(v) => W::DoubleValue(*v),
            Value::Text(v) => W::TextValue(v.clone()),
            Value::Timestamp(v) => W::TimestampValue(*v),
            Value::Date(v) => W::DateValue(*v),
            Value::Blob(v) => W::BlobValue(v.clone()),
            Value::String(v) => W::StringValue(v.clone()),
        }),
    }
}

/// The internal value of a wire value; `None` for a null.
pub fn value_from_wire(value: &proto::Value) -> Option<Value> {
    use proto::value::Value as W;
    Some(match value.value.as_ref()? {
        W::BoolValue(v) => Value::Boolean(*v),
        W::Int32Value(v) => Value::Int32(*v),
        W::Int64Value(v) => Value::Int64(*v),
        W::FloatValue(v) => Value::Float(*v),
        W::DoubleValue(v) => Value::Double(*v),
        W::TextValue(v) => Value::Text(v.clone()),
        W::TimestampValue(v) => Value::Timestamp(*v),
        W::DateValue(v) => Value::Date(*v),
        W::BlobValue(v) => Value::Blob(v.clone()),
        W::StringValue(v) => Value::String(v.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn every_type() -> Tablet {
        let mut t = Tablet::new(
            "root.sg.d1",
            &[
                ("b", DataType::Boolean),
                ("i", DataType::Int32),
                ("l", DataType::Int64),
                ("f", DataType::Float),
                ("d", DataType::Double),
                ("t", DataType::Text),
                ("ts", DataType::Timestamp),
                ("day", DataType::Date),
                ("blob", DataType::Blob),
                ("str", DataType::String),
            ],
        );
        for row in 0..70i64 {
            let null = row % 5 == 0;
            let v = |value: Value| (!null).then_some(value);
            t.push_row(
                1_700_000_000_000 + row,
                vec![
                    v(Value::Boolean(row % 2 == 0)),
                    v(Value::Int32(-(row as i32))),
                    v(Value::Int64(row << 40)),
                    v(Value::Float(row as f32 * 0.5)),
                    v(Value::Double(-0.01 * row as f64)),
                    v(Value::Text(format!("v{row}"))),
                    v(Value::Timestamp(-row)),
                    v(Value::Date(20240101 + row as i32 % 28)),
                    v(Value::Blob(vec![row as u8; row as usize % 3])),
                    v(Value::String(format!("s{row}"))),
                ],
            );
        }
        t
    }

    /// A column's values and null bitmap.
    type Decoded = (Column, Option<Bitmap>);

    fn from_wire(wire: proto::Tablet) -> Result<(Vec<i64>, Vec<Decoded>), String> {
        let timestamps = timestamps_from_wire(wire.timestamps, &wire.timestamps_le)?;
        let columns = wire
            .schema
            .iter()
            .zip(wire.columns)
            .map(|(s, c)| {
                column_from_wire(c, crate::data_type(s.data_type).unwrap(), timestamps.len())
            })
            .collect::<Result<_, _>>()?;
        Ok((timestamps, columns))
    }

    #[test]
    fn every_type_round_trips_through_the_wire_bytes() {
        let tablet = every_type();
        let bytes = tablet_to_wire(&tablet).encode_to_vec();
        let (timestamps, columns) =
            from_wire(proto::Tablet::decode(bytes.as_slice()).unwrap()).unwrap();
        assert_eq!(timestamps, tablet.timestamps);
        for (i, (values, bitmap)) in columns.into_iter().enumerate() {
            assert_eq!(values, tablet.columns[i]);
            let words = bitmap.as_ref().map(bitmap_to_words);
            assert_eq!(words, tablet.bitmaps[i].as_ref().map(bitmap_to_words));
        }
    }

    #[test]
    fn the_repeated_forms_still_read() {
        let tablet = every_type();
        let mut wire = tablet_to_wire(&tablet);
        wire.timestamps = tablet.timestamps.clone();
        wire.timestamps_le = Bytes::new();
        for (column, values) in wire.columns.iter_mut().zip(&tablet.columns) {
            column.values = Some(match values.clone() {
                Column::Boolean(values) => Values::BoolValues(proto::BoolValues { values }),
                Column::Int32(values) => Values::Int32Values(proto::Int32Values { values }),
                Column::Float(values) => Values::FloatValues(proto::FloatValues { values }),
                Column::Double(values) => Values::DoubleValues(proto::DoubleValues { values }),
                Column::Int64(values) | Column::Timestamp(values) => {
                    Values::Int64Values(proto::Int64Values { values })
                }
                Column::Text(values) | Column::String(values) => {
                    Values::TextValues(proto::TextValues { values })
                }
                Column::Blob(values) => Values::BlobValues(proto::BlobValues { values }),
                Column::Date(values) => Values::Int32Values(proto::Int32Values { values }),
            });
        }
        let (timestamps, columns) = from_wire(wire).unwrap();
        assert_eq!(timestamps, tablet.timestamps);
        let values: Vec<Column> = columns.into_iter().map(|(c, _)| c).collect();
        assert_eq!(values, tablet.columns);
    }

    #[test]
    fn golden_bytes_of_a_fixed_width_tablet() {
        // Fixes the field numbers and the word layout on the wire.
        let mut t = Tablet::new("d", &[("s", DataType::Int32)]);
        t.push_row(1, vec![Some(Value::Int32(-2))]);
        t.push_row(2, vec![Some(Value::Int32(3))]);
        let bytes = tablet_to_wire(&t).encode_to_vec();
        #[rustfmt::skip]
        let want = vec![
            0x0a, 0x01, b'd', // device
            0x12, 0x05, 0x0a, 0x01, b's', 0x10, 0x01, // schema { name "s", INT32 }
            0x22, 0x0a, 0x4a, 0x08, // columns { fixed_le (field 9), 8 bytes:
            0xfe, 0xff, 0xff, 0xff, 0x03, 0x00, 0x00, 0x00, //   -2, 3 }
            0x2a, 0x10, // timestamps_le (field 5), 16 bytes: 1, 2
            0x01, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(bytes, want);
    }

    #[test]
    fn malformed_columns_are_refused_with_a_reason() {
        let words = |bytes: &[u8]| proto::Column {
            values: Some(Values::FixedLe(Bytes::copy_from_slice(bytes))),
            ..proto::Column::default()
        };
        let refused =
            |column, data_type, rows| column_from_wire(column, data_type, rows).unwrap_err();
        assert!(refused(words(&[0; 7]), DataType::Int64, 1).contains("not a multiple of 8"));
        assert!(refused(words(&[0; 8]), DataType::Int64, 2).contains("1 values for 2 rows"));
        assert!(refused(words(&[2]), DataType::Boolean, 1).contains("not 0 or 1"));
        assert!(refused(words(&[]), DataType::Text, 0).contains("TEXT"));
        assert!(refused(proto::Column::default(), DataType::Int32, 0).contains("no values"));
        let doubles = proto::Column {
            values: Some(Values::DoubleValues(proto::DoubleValues {
                values: vec![1.0],
            })),
            ..proto::Column::default()
        };
        assert!(refused(doubles, DataType::Int64, 1).contains("declared INT64"));
        assert!(timestamps_from_wire(vec![1], &[0; 8])
            .unwrap_err()
            .contains("both forms"));
        assert!(timestamps_from_wire(Vec::new(), &[0; 9])
            .unwrap_err()
            .contains("multiple of 8"));
    }
}
