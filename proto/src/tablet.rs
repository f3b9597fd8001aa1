//! Hand conversions of tablets, columns and values between `common` and the wire, shared by the
//! DataNode and the session (which links no server crate).

use common::{Bitmap, Column, Tablet, Value};

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
