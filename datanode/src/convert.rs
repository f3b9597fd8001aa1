//! Hand conversions between wire messages (`proto`) and internal types (`common`). Wire types stay
//! at the edge: everything behind the services works on `common::Tablet` and `common::Value`.

use common::{SeriesBatch, SeriesPath, Status, StatusCode, Tablet};
use engine::{Deletion, RegionCommand};

use crate::region_read::{ReadKind, RegionRead, RegionSeries};

pub use proto::{bitmap_to_words, column_to_wire, tablet_to_wire, value_from_wire, value_to_wire};

mod aggregate;
pub(crate) use aggregate::{
    partials_from_wire, partials_to_wire, region_aggregate_from_wire, region_aggregate_to_wire,
};

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

/// The `ForwardRegionWrite` request carrying `command` to `region`'s replica elsewhere: the
/// tokens travel beside it (the metadata version, a table write's table version, a deletion's
/// operation id), and the receiver rebuilds the same command from them.
pub(crate) fn region_write_to_wire(region: u64, command: &RegionCommand) -> proto::RegionWriteReq {
    use proto::region_write_req::Command;
    let series = |series: &[(String, String)]| -> Vec<proto::SeriesPath> {
        series
            .iter()
            .map(|(device, measurement)| proto::SeriesPath {
                device: device.clone(),
                measurement: measurement.clone(),
            })
            .collect()
    };
    let (command, metadata_version, table_version, operation_id) = match command {
        RegionCommand::InsertTablet {
            tablet,
            metadata_version,
            table_version,
        } => (
            Command::InsertTablet(tablet_to_wire(tablet)),
            *metadata_version,
            *table_version,
            0,
        ),
        RegionCommand::DeleteSeries {
            series: s,
            deletion,
        } => (
            Command::DeleteSeries(proto::DeleteSeriesCommand { series: series(s) }),
            deletion.metadata_version,
            0,
            deletion.operation_id,
        ),
        RegionCommand::DeleteDatabase { database, deletion } => (
            Command::DeleteDatabase(proto::DeleteDatabaseCommand {
                database: database.clone(),
            }),
            deletion.metadata_version,
            0,
            deletion.operation_id,
        ),
        RegionCommand::DeleteData {
            series: s,
            start,
            end,
            deletion,
        } => (
            Command::DeleteData(proto::DeleteDataCommand {
                series: series(s),
                start_time: *start,
                end_time: *end,
            }),
            deletion.metadata_version,
            0,
            deletion.operation_id,
        ),
        RegionCommand::RaiseFenceFloor { version } => (
            Command::RaiseFenceFloor(proto::RaiseFenceFloorCommand {}),
            *version,
            0,
            0,
        ),
    };
    proto::RegionWriteReq {
        region_id: region,
        command: Some(command),
        operation_id,
        metadata_version,
        table_version,
    }
}

/// Wire tablets decoded, all or none (301 ILLEGAL_PARAMETER names the first bad one).
pub(crate) fn tablets_from_wire(wire: Vec<proto::Tablet>) -> Result<Vec<Tablet>, Status> {
    wire.into_iter()
        .map(|t| {
            tablet_from_wire(t)
                .map_err(|e| Status::new(StatusCode::IllegalParameter, e.to_string()))
        })
        .collect()
}

/// The command a `ForwardRegionWrite` request carries, its tokens taken from the request: the
/// token travels into the log with the command, so whenever it is proposed, however late,
/// apply judges it against the deletions ordered before it. The inverse of
/// [`region_write_to_wire`].
pub(crate) fn region_command_from_wire(
    req: proto::RegionWriteReq,
) -> Result<RegionCommand, Status> {
    use proto::region_write_req::Command;
    let deletion = Deletion {
        metadata_version: req.metadata_version,
        operation_id: req.operation_id,
    };
    let series = |series: Vec<proto::SeriesPath>| -> Vec<(String, String)> {
        series
            .into_iter()
            .map(|s| (s.device, s.measurement))
            .collect()
    };
    Ok(match req.command {
        Some(Command::InsertTablet(t)) => RegionCommand::InsertTablet {
            tablet: tablet_from_wire(t)
                .map_err(|e| Status::new(StatusCode::IllegalParameter, e.to_string()))?,
            metadata_version: req.metadata_version,
            table_version: req.table_version,
        },
        Some(Command::DeleteSeries(d)) => RegionCommand::DeleteSeries {
            series: series(d.series),
            deletion,
        },
        Some(Command::DeleteDatabase(d)) => RegionCommand::DeleteDatabase {
            database: d.database,
            deletion,
        },
        Some(Command::DeleteData(d)) => RegionCommand::DeleteData {
            series: series(d.series),
            start: d.start_time,
            end: d.end_time,
            deletion,
        },
        Some(Command::RaiseFenceFloor(_)) => RegionCommand::RaiseFenceFloor {
            version: req.metadata_version,
        },
        None => return Err(Status::new(StatusCode::IllegalParameter, "no command")),
    })
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

    /// Every command a coordinator forwards arrives as itself, tokens included.
    #[test]
    fn region_commands_round_trip_with_their_tokens() {
        let mut tablet = Tablet::new("root.sg.d1", &[("s1", DataType::Int64)]);
        tablet.push_row(5, vec![Some(Value::Int64(50))]);
        let deletion = Deletion {
            metadata_version: 12,
            operation_id: 99,
        };
        let series = vec![("root.sg.d1".to_string(), "s1".to_string())];
        let commands = [
            RegionCommand::InsertTablet {
                tablet,
                metadata_version: 7,
                table_version: 3,
            },
            RegionCommand::DeleteSeries {
                series: series.clone(),
                deletion,
            },
            RegionCommand::DeleteDatabase {
                database: "root.sg".into(),
                deletion,
            },
            RegionCommand::DeleteData {
                series,
                start: -4,
                end: 40,
                deletion,
            },
            RegionCommand::RaiseFenceFloor { version: 21 },
        ];
        for command in commands {
            let wire = region_write_to_wire(8, &command);
            assert_eq!(wire.region_id, 8);
            assert_eq!(region_command_from_wire(wire), Ok(command));
        }
        let empty = proto::RegionWriteReq::default();
        assert!(region_command_from_wire(empty).is_err_and(|s| s.is(StatusCode::IllegalParameter)));
    }

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
