//! Hand conversions between wire messages (`proto`) and internal types (`common`). Wire types stay
//! at the edge: everything behind the services works on `common::Tablet` and `common::Value`.

use common::{SeriesBatch, SeriesPath, StatusCode, Tablet};

use crate::region_read::{ReadKind, RegionRead, RegionSeries};

pub use proto::{bitmap_to_words, column_to_wire, tablet_to_wire, value_from_wire, value_to_wire};

/// A wire tablet that does not make an internal one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad tablet: {0}")]
pub struct BadTablet(pub String);

/// The internal tablet of a wire tablet; shape problems are reported, the tablet's own
/// `validate` runs later with the limits.
pub fn tablet_from_wire(wire: proto::Tablet) -> Result<Tablet, BadTablet> {
    if wire.schema.len() != wire.columns.len() {
        return Err(BadTablet(format!(
            "{} measurements but {} columns",
            wire.schema.len(),
            wire.columns.len()
        )));
    }
    let timestamps =
        proto::timestamps_from_wire(wire.timestamps, &wire.timestamps_le).map_err(BadTablet)?;
    let rows = timestamps.len();
    let mut tablet = Tablet {
        device: wire.device,
        measurements: Vec::with_capacity(wire.schema.len()),
        data_types: Vec::with_capacity(wire.schema.len()),
        timestamps,
        columns: Vec::with_capacity(wire.schema.len()),
        bitmaps: Vec::with_capacity(wire.schema.len()),
    };
    for (schema, column) in wire.schema.into_iter().zip(wire.columns) {
        let data_type = proto::data_type(schema.data_type).map_err(|e| BadTablet(e.to_string()))?;
        let (values, bitmap) = proto::column_from_wire(column, data_type, rows)
            .map_err(|e| BadTablet(format!("column {}: {e}", schema.name)))?;
        tablet.measurements.push(schema.name);
        tablet.data_types.push(data_type);
        tablet.columns.push(values);
        tablet.bitmaps.push(bitmap);
    }
    Ok(tablet)
}

/// The wire form of a region read.
pub(crate) fn region_read_to_wire(read: &RegionRead) -> proto::RegionReadReq {
    proto::RegionReadReq {
        region_id: read.region,
        paths: read.paths.iter().cloned().map(Into::into).collect(),
        start_time: read.range.start,
        end_time: read.range.end,
        points_limit: read.points_limit,
        last: read.kind == ReadKind::Last,
    }
}

/// The region read of a wire request.
pub(crate) fn region_read_from_wire(req: proto::RegionReadReq) -> RegionRead {
    RegionRead {
        region: req.region_id,
        paths: req.paths.into_iter().map(Into::into).collect(),
        range: req.start_time..req.end_time,
        points_limit: req.points_limit,
        kind: if req.last {
            ReadKind::Last
        } else {
            ReadKind::Range
        },
    }
}

/// The wire form of one series' answer: its columns as they are.
pub(crate) fn region_series_to_wire((path, batch): RegionSeries) -> proto::RegionSeries {
    let data_type = proto::data_type_to_wire(batch.data_type()) as i32;
    let (timestamps, values) = batch.into_columns();
    proto::RegionSeries {
        path: Some(path.into()),
        data_type,
        values: Some(column_to_wire(&values, None)),
        timestamps,
    }
}

/// One series of a peer's answer, or what is malformed in it.
pub(crate) fn region_series_from_wire(wire: proto::RegionSeries) -> Result<RegionSeries, String> {
    let path: SeriesPath = wire.path.ok_or("a series without a path")?.into();
    let data_type = proto::data_type(wire.data_type).map_err(|e| format!("{path}: {e}"))?;
    let column = wire.values.ok_or_else(|| format!("{path}: no values"))?;
    let rows = wire.timestamps.len();
    let (values, nulls) =
        proto::column_from_wire(column, data_type, rows).map_err(|e| format!("{path}: {e}"))?;
    if nulls.is_some_and(|n| n.count_ones() > 0) {
        return Err(format!("{path}: null values"));
    }
    let batch = SeriesBatch::from_columns(wire.timestamps, values)
        .ok_or_else(|| format!("{path}: timestamps not strictly increasing"))?;
    Ok((path, batch))
}

/// A status with a code and message.
pub fn status(code: StatusCode, message: impl Into<String>) -> proto::Status {
    proto::status(code, message)
}

/// 200.
pub fn ok() -> proto::Status {
    proto::status(StatusCode::Success, "")
}

/// The wire answer of an application-layer answer (`ops`): its view, or its failure's status
/// alone.
pub(crate) fn reply<V, R>(answer: Result<V, common::Status>) -> R
where
    R: From<V> + Failed,
{
    match answer {
        Ok(view) => R::from(view),
        Err(status) => R::failed(status.into()),
    }
}

/// A wire answer that carries only a failed status.
pub(crate) trait Failed {
    fn failed(status: proto::Status) -> Self;
}

macro_rules! failed_answers {
    ($($resp:ty),*) => {$(
        impl Failed for $resp {
            fn failed(status: proto::Status) -> Self {
                Self {
                    status: Some(status),
                    ..Default::default()
                }
            }
        }
    )*};
}

failed_answers!(
    proto::ShowDatabasesResp,
    proto::ShowTimeseriesResp,
    proto::ShowClusterResp,
    proto::ShowRegionsResp,
    proto::ShowLeasesResp,
    proto::ListUsersResp,
    proto::SeriesTypesResp
);

/// 305 INTERNAL_SERVER_ERROR for a reply that carries no status.
pub fn no_status() -> proto::Status {
    status(StatusCode::InternalServerError, "reply without status")
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{DataType, Value};

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
        let mut t = Tablet::new("root.sg.d1", &[("s1", DataType::Int64)]);
        t.push_row(1, vec![Some(Value::Int64(7))]);
        let mut wire = tablet_to_wire(&t);
        // Words of another width: 8 bytes are two INT32 words for one row.
        wire.schema[0].data_type = proto::DataType::Int32 as i32;
        let refused = tablet_from_wire(wire.clone()).unwrap_err();
        assert!(
            refused.0.contains("column s1: 2 values for 1 rows"),
            "{refused}"
        );
        wire.columns.clear();
        assert!(tablet_from_wire(wire).is_err());
    }
}
