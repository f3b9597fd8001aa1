//! Hand conversions between wire messages (`proto`) and internal types (`common`). Wire types stay
//! at the edge: everything behind the services works on `common::Tablet` and `common::Value`.

use common::{Bitmap, Column, DataType, StatusCode, Tablet, Value};
use proto::column::Values;

pub use proto::{bitmap_to_words, column_to_wire, tablet_to_wire, value_from_wire, value_to_wire};

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

/// The internal tablet of a wire tablet, taking its vectors without copying them; shape problems
/// are reported, the tablet's own `validate` runs later with the limits.
pub fn tablet_from_wire(wire: proto::Tablet) -> Result<Tablet, BadTablet> {
    if wire.schema.len() != wire.columns.len() {
        return Err(BadTablet(format!(
            "{} measurements but {} columns",
            wire.schema.len(),
            wire.columns.len()
        )));
    }
    let rows = wire.timestamps.len();
    let mut tablet = Tablet {
        device: wire.device,
        measurements: Vec::with_capacity(wire.schema.len()),
        data_types: Vec::with_capacity(wire.schema.len()),
        timestamps: wire.timestamps,
        columns: Vec::with_capacity(wire.schema.len()),
        bitmaps: Vec::with_capacity(wire.schema.len()),
    };
    for (schema, column) in wire.schema.into_iter().zip(wire.columns) {
        let data_type = proto::data_type(schema.data_type).map_err(|e| BadTablet(e.to_string()))?;
        let values = match column.values {
            Some(Values::BoolValues(v)) => Column::Boolean(v.values),
            Some(Values::Int32Values(v)) => Column::Int32(v.values),
            Some(Values::Int64Values(v)) => Column::Int64(v.values),
            Some(Values::FloatValues(v)) => Column::Float(v.values),
            Some(Values::DoubleValues(v)) => Column::Double(v.values),
            Some(Values::TextValues(v)) => Column::Text(v.values),
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
        tablet.measurements.push(schema.name);
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

/// 305 INTERNAL_SERVER_ERROR for a reply that carries no status.
pub fn no_status() -> proto::Status {
    status(StatusCode::InternalServerError, "reply without status")
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
        let back = tablet_from_wire(tablet_to_wire(&t)).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn mismatched_columns_are_refused() {
        let t = Tablet::new("root.sg.d1", &[("s1", DataType::Int64)]);
        let mut wire = tablet_to_wire(&t);
        wire.schema[0].data_type = proto::DataType::Double as i32;
        assert!(tablet_from_wire(wire.clone()).is_err());
        wire.columns.clear();
        assert!(tablet_from_wire(wire).is_err());
    }
}
