//! Conversions between `common`'s types and the wire that only the session needs; tablets and
//! values convert with `proto`'s shared functions.

use common::Value;

pub(crate) use proto::{tablet_to_wire, value_from_wire};

use crate::error::{Result, SessionError};

/// The wire form of a value; `None` is a null.
pub(crate) fn value_to_wire(value: Option<&Value>) -> proto::Value {
    value.map_or_else(proto::Value::default, proto::value_to_wire)
}

/// The points of one queried series: `(timestamp, value)` with nulls left out. The column must
/// hold values of the declared type, one per timestamp.
pub(crate) fn series_points(series: proto::SeriesData) -> Result<Vec<(i64, Value)>> {
    let declared = proto::data_type(series.data_type)
        .map_err(|e| SessionError::Protocol(format!("series data type: {e}")))?;
    let rows = series.timestamps.len();
    let Some(column) = series.values else {
        if rows == 0 {
            return Ok(Vec::new());
        }
        return Err(SessionError::Protocol(format!(
            "{rows} timestamps and no values"
        )));
    };
    if rows == 0 && column.values.is_none() {
        return Ok(Vec::new());
    }
    let (values, nulls) = proto::column_from_wire(column, declared, rows)
        .map_err(|e| SessionError::Protocol(format!("series values: {e}")))?;
    Ok(series
        .timestamps
        .iter()
        .enumerate()
        .filter(|(row, _)| !nulls.as_ref().is_some_and(|n| n.get(*row)))
        .map(|(row, t)| (*t, values.value(row)))
        .collect())
}

/// Splits `root.sg.d1.s1` into device `root.sg.d1` and measurement `s1`.
pub(crate) fn split_path(path: &str) -> Result<(String, String)> {
    proto::statements::split_series_path(path)
        .filter(|(device, _)| device.starts_with("root."))
        .ok_or_else(|| {
            SessionError::InvalidArgument(format!(
                "{path:?} is not a series path root.<database>.<device...>.<measurement>"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{DataType, Tablet};

    #[test]
    fn query_columns_decode_with_nulls_left_out() {
        let t = {
            let mut t = Tablet::new("root.sg.d1", &[("s1", DataType::Int64)]);
            for i in 0..70 {
                t.push_row(i, vec![(i % 3 != 0).then_some(Value::Int64(i * 10))]);
            }
            t
        };
        let wire = tablet_to_wire(&t);
        let series = proto::SeriesData {
            path: None,
            data_type: proto::data_type_to_wire(DataType::Int64) as i32,
            timestamps: t.timestamps.clone(),
            truncated: false,
            values: Some(wire.columns[0].clone()),
        };
        let points = series_points(series.clone()).unwrap();
        let want: Vec<(i64, Value)> = (0..70)
            .filter(|i| i % 3 != 0)
            .map(|i| (i, Value::Int64(i * 10)))
            .collect();
        assert_eq!(points, want);

        let mut short = series.clone();
        short.timestamps.push(99);
        assert!(matches!(
            series_points(short),
            Err(SessionError::Protocol(_))
        ));
        let mut wrong_type = series;
        wrong_type.data_type = proto::data_type_to_wire(DataType::Text) as i32;
        assert!(matches!(
            series_points(wrong_type),
            Err(SessionError::Protocol(_))
        ));
    }

    #[test]
    fn paths_split_at_the_last_dot() {
        assert_eq!(
            split_path("root.sg.d1.s1").unwrap(),
            ("root.sg.d1".to_string(), "s1".to_string())
        );
        assert!(split_path("s1").is_err());
        assert!(split_path("root.sg.").is_err());
        assert!(split_path("other.d1.s1").is_err());
    }
}
