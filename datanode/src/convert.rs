//! Hand conversions between wire messages (`proto`) and internal types (`common`). Wire types stay
//! at the edge: everything behind the services works on `common::Tablet` and `common::Value`.

use common::{Bitmap, Column, DataType, StatusCode, Tablet, Value};
use proto::column::Values;

/// A wire tablet that does not make an internal one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad tablet: {0}")]
pub struct BadTablet(pub String);

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

fn bitmap_to_words(bitmap: &Bitmap) -> Vec<u64> {
    let mut words = vec![0u64; bitmap.len().div_ceil(64)];
    for row in 0..bitmap.len() {
        if bitmap.get(row) {
            words[row / 64] |= 1 << (row % 64);
        }
    }
    words
}

/// The internal tablet of a wire tablet; shape problems are reported, the tablet's own
/// `validate` runs later with the limits.
pub fn tablet_from_wire(wire: &proto::Tablet) -> Result<Tablet, BadTablet> {
    if wire.schema.len() != wire.columns.len() {
        return Err(BadTablet(format!(
            "{} measurements but {} columns",
            wire.schema.len(),
            wire.columns.len()
        )));
    }
    let rows = wire.timestamps.len();
    let mut tablet = Tablet {
        device: wire.device.clone(),
        measurements: Vec::with_capacity(wire.schema.len()),
        data_types: Vec::with_capacity(wire.schema.len()),
        timestamps: wire.timestamps.clone(),
        columns: Vec::with_capacity(wire.schema.len()),
        bitmaps: Vec::with_capacity(wire.schema.len()),
    };
    for (schema, column) in wire.schema.iter().zip(&wire.columns) {
        let data_type = proto::data_type(schema.data_type).map_err(|e| BadTablet(e.to_string()))?;
        let values = match &column.values {
            Some(Values::BoolValues(v)) => Column::Boolean(v.values.clone()),
            Some(Values::Int32Values(v)) => Column::Int32(v.values.clone()),
            Some(Values::Int64Values(v)) => Column::Int64(v.values.clone()),
            Some(Values::FloatValues(v)) => Column::Float(v.values.clone()),
            Some(Values::DoubleValues(v)) => Column::Double(v.values.clone()),
            Some(Values::TextValues(v)) => Column::Text(v.values.clone()),
            None => return Err(BadTablet(format!("column {} has no values", schema.name))),
        };
        if values.data_type() != data_type {
            return Err(BadTablet(format!(
                "column {} is declared {data_type} but holds {} values",
                schema.name,
                values.data_type()
            )));
        }
        if values.len() != rows {
            return Err(BadTablet(format!(
                "column {} has {} values for {rows} timestamps",
                schema.name,
                values.len()
            )));
        }
        tablet.measurements.push(schema.name.clone());
        tablet.data_types.push(data_type);
        tablet.columns.push(values);
        tablet.bitmaps.push(
            column
                .has_null_bitmap
                .then(|| bitmap_from_words(&column.null_bitmap, rows)),
        );
    }
    Ok(tablet)
}

/// The wire form of a column.
pub fn column_to_wire(column: &Column, bitmap: Option<&Bitmap>) -> proto::Column {
    let values = match column {
        Column::Boolean(v) => Values::BoolValues(proto::BoolValues { values: v.clone() }),
        Column::Int32(v) => Values::Int32Values(proto::Int32Values { values: v.clone() }),
        Column::Int64(v) => Values::Int64Values(proto::Int64Values { values: v.clone() }),
        Column::Float(v) => Values::FloatValues(proto::FloatValues { values: v.clone() }),
        Column::Double(v) => Values::DoubleValues(proto::DoubleValues { values: v.clone() }),
        Column::Text(v) => Values::TextValues(proto::TextValues { values: v.clone() }),
    };
    proto::Column {
        values: Some(values),
        null_bitmap: bitmap.map(bitmap_to_words).unwrap_or_default(),
        has_null_bitmap: bitmap.is_some(),
    }
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
        timestamps: tablet.timestamps.clone(),
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
    })
}

/// A column of `data_type` from values that all have that type.
pub fn column_of(data_type: DataType, values: impl IntoIterator<Item = Value>) -> Column {
    let mut column = Column::with_capacity(data_type, 0);
    for v in values {
        let t = v.data_type();
        assert!(column.push(v), "value of type {t} in a {data_type} column");
    }
    column
}

/// A status with a code and message.
pub fn status(code: StatusCode, message: impl Into<String>) -> proto::Status {
    proto::status(code, message)
}

/// 200.
pub fn ok() -> proto::Status {
    proto::status(StatusCode::Success, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tablets_round_trip_with_nulls() {
        let mut t = Tablet::new(
            "root.sg.d1",
            &[("s1", DataType::Int64), ("s2", DataType::Text)],
        );
        for i in 0..70 {
            let text = (i % 3 != 0).then(|| Value::Text(format!("v{i}")));
            t.push_row(i, vec![Some(Value::Int64(i * 10)), text]);
        }
        let back = tablet_from_wire(&tablet_to_wire(&t)).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn mismatched_columns_are_refused() {
        let t = Tablet::new("root.sg.d1", &[("s1", DataType::Int64)]);
        let mut wire = tablet_to_wire(&t);
        wire.schema[0].data_type = proto::DataType::Double as i32;
        assert!(tablet_from_wire(&wire).is_err());
        wire.columns.clear();
        assert!(tablet_from_wire(&wire).is_err());
    }
}
