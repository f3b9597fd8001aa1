//! Queries of the tree model: raw SELECT (series joined on time), SELECT LAST, and IoTDB's raw
//! and last data queries by path (aggregations are [`super::aggregate`]'s). Series are read a chunk at a time
//! ([`SeriesReader`]) and rows are charged to the result's [`ResultCharge`] as they are built,
//! so a query too large for memory is refused while it is built (REVIEW N5).

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap};

use common::{DataType, StatusCode, Value};

use super::budget::{empty_row_bytes, points_bytes, value_heap_bytes, ResultCharge};
use super::{
    outcome_bytes, resolve, show, Backend, Cell, ExecError, ExecResult, Outcome, RESULT_ROWS_MAX,
    TIME_COLUMN,
};
use crate::{Projection, RowWindow, TimeRange};

pub(super) fn too_many_rows() -> ExecError {
    ExecError::refused(
        StatusCode::IllegalParameter,
        format!("the result has more than {RESULT_ROWS_MAX} rows; narrow the time range"),
    )
}

/// Points asked of the backend at once for a series of fixed-width values: a long series is
/// read a chunk at a time, never whole, so what a query holds besides its rows is one chunk.
const CHUNK_POINTS_FIXED: usize = 65_536;
/// Likewise for TEXT, STRING and BLOB values (up to 64 KiB each).
const CHUNK_POINTS_VARIABLE: usize = 1024;

/// The points of one series in a time range, read a chunk at a time in time order: the first
/// `limit` of them, and a series with more than [`RESULT_ROWS_MAX`] there is refused, read no
/// further than that.
pub(super) struct SeriesReader<'s> {
    device: &'s str,
    measurement: &'s str,
    range: TimeRange,
    /// Points still to read (one past [`RESULT_ROWS_MAX`] at most, to see a series too long).
    left: usize,
    read: usize,
    chunk: usize,
}

impl<'s> SeriesReader<'s> {
    pub(super) fn new(
        device: &'s str,
        measurement: &'s str,
        data_type: DataType,
        range: TimeRange,
        limit: usize,
    ) -> SeriesReader<'s> {
        let chunk = match data_type {
            DataType::Text | DataType::String | DataType::Blob => CHUNK_POINTS_VARIABLE,
            _ => CHUNK_POINTS_FIXED,
        };
        let left = if range.is_empty() {
            0
        } else {
            limit.min(RESULT_ROWS_MAX + 1)
        };
        SeriesReader {
            device,
            measurement,
            range,
            left,
            read: 0,
            chunk,
        }
    }

    /// The next points, or `None` once the series (or the limit) is done.
    pub(super) async fn next<B: Backend>(
        &mut self,
        backend: &B,
    ) -> ExecResult<Option<Vec<(i64, Value)>>> {
        if self.left == 0 {
            return Ok(None);
        }
        let asked = self.left.min(self.chunk);
        let points = backend
            .query_raw(
                self.device,
                self.measurement,
                self.range.from,
                self.range.to,
                asked,
            )
            .await?;
        self.read += points.len();
        if self.read > RESULT_ROWS_MAX {
            return Err(too_many_rows());
        }
        self.left -= points.len().min(self.left);
        match points.last() {
            Some(&(time, _)) if points.len() >= asked && time < i64::MAX => {
                self.range.from = time + 1;
            }
            // Fewer than asked: the series has no more in the range.
            _ => self.left = 0,
        }
        Ok((!points.is_empty()).then_some(points))
    }
}

/// `Time` and one column per series, outer-joined on time.
pub(super) async fn select_raw<B: Backend>(
    backend: &B,
    device: &str,
    projection: &Projection,
    range: TimeRange,
    rows: RowWindow,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    let series = resolve_series(backend, device, projection).await?;
    join(backend, &series, range, rows, charge).await
}

/// [`resolve`], as series of `device`.
async fn resolve_series<B: Backend>(
    backend: &B,
    device: &str,
    projection: &Projection,
) -> ExecResult<Vec<Series>> {
    Ok(resolve(backend, device, projection)
        .await?
        .into_iter()
        .map(|(label, measurement, data_type)| Series {
            device: device.to_string(),
            label,
            measurement,
            data_type,
        })
        .collect())
}

/// One resolved series.
#[derive(Clone, Debug)]
struct Series {
    device: String,
    /// The name the query used: the measurement, or its alias.
    label: String,
    measurement: String,
    data_type: DataType,
}

/// The series of full `paths` that exist, in the order given, with their types (one lookup per
/// device).
async fn resolve_paths<B: Backend>(backend: &B, paths: &[String]) -> ExecResult<Vec<Series>> {
    let mut by_device: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut split = Vec::with_capacity(paths.len());
    for path in paths {
        let Some((device, measurement)) = path.rsplit_once('.') else {
            return Err(ExecError::refused(
                StatusCode::IllegalParameter,
                format!("{path} is not a series path like root.sg.d1.s1"),
            ));
        };
        by_device
            .entry(device)
            .or_default()
            .push(measurement.to_string());
        split.push((device, measurement));
    }
    let mut types: HashMap<(String, String), DataType> = HashMap::new();
    for (device, measurements) in by_device {
        for (measurement, data_type) in backend.series_types(device, &measurements).await? {
            types.insert((device.to_string(), measurement), data_type);
        }
    }
    Ok(split
        .into_iter()
        .filter_map(|(device, measurement)| {
            let key = (device.to_string(), measurement.to_string());
            let data_type = *types.get(&key)?;
            Some(Series {
                device: key.0,
                label: key.1.clone(),
                measurement: key.1,
                data_type,
            })
        })
        .collect())
}

/// IoTDB's raw data query (`executeRawDataQuery`): `Time` and one column per existing series of
/// the full `paths`, in `[from, to)`.
pub async fn raw_paths<B: Backend>(
    backend: &B,
    paths: &[String],
    range: TimeRange,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    let series = resolve_paths(backend, paths).await?;
    let outcome = join(backend, &series, range, RowWindow::default(), charge).await?;
    charge.settle(outcome_bytes(&outcome))?;
    Ok(outcome)
}

/// IoTDB's last data query (`executeLastDataQuery`): the last point of each existing series of
/// the full `paths` at or after `since`, in the shape of `SELECT LAST`.
pub async fn last_paths<B: Backend>(
    backend: &B,
    paths: &[String],
    since: i64,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    let series = resolve_paths(backend, paths).await?;
    let outcome = last(backend, &series, since).await?;
    charge.settle(outcome_bytes(&outcome))?;
    Ok(outcome)
}

/// `Time` and one column per series, outer-joined on time, charged to `charge` as it is built.
///
/// `rows` picks the rows kept. In time order with a LIMIT, each series is read only as far as
/// the rows kept need (the first `offset + limit` rows' times are among each series' first
/// `offset + limit` points); newest first, every series is read whole.
async fn join<B: Backend>(
    backend: &B,
    series: &[Series],
    range: TimeRange,
    rows: RowWindow,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    let width = series.len() + 1;
    let needed = match rows.limit {
        Some(limit) if !rows.descending => rows.offset.saturating_add(limit),
        _ => RESULT_ROWS_MAX,
    };
    // Each row has its time cell first from the start: no row is copied to prepend it.
    let mut joined: BTreeMap<i64, Vec<Cell>> = BTreeMap::new();
    for (column, s) in series.iter().enumerate() {
        let mut reader = SeriesReader::new(&s.device, &s.measurement, s.data_type, range, needed);
        while let Some(points) = reader.next(backend).await? {
            // The chunk is charged while it is held, and its values again as rows take them.
            let points_charged = points_bytes(&points);
            charge.add(points_charged)?;
            for (time, value) in points {
                // A point of another type (the series was dropped and created again with
                // another type while the query ran) is left out rather than mistyping the
                // column.
                if value.data_type() != s.data_type {
                    continue;
                }
                let row = match joined.entry(time) {
                    Entry::Occupied(row) => row.into_mut(),
                    Entry::Vacant(slot) => {
                        charge.add(empty_row_bytes(width))?;
                        let mut row = vec![None; width];
                        row[0] = Some(Value::Int64(time));
                        slot.insert(row)
                    }
                };
                charge.add(value_heap_bytes(&value))?;
                row[column + 1] = Some(value);
            }
            charge.release(points_charged);
            if joined.len() > RESULT_ROWS_MAX {
                return Err(too_many_rows());
            }
        }
    }
    let mut header = vec![(TIME_COLUMN.to_string(), DataType::Int64)];
    header.extend(
        series
            .iter()
            .map(|s| (format!("{}.{}", s.device, s.label), s.data_type)),
    );
    let limit = rows.limit.unwrap_or(usize::MAX);
    let kept = if rows.descending {
        joined
            .into_values()
            .rev()
            .skip(rows.offset)
            .take(limit)
            .collect()
    } else {
        joined.into_values().skip(rows.offset).take(limit).collect()
    };
    Ok(Outcome::query(header, kept))
}

/// IoTDB's last query: `Time`, `Timeseries`, `Value` (as text), `DataType`, one row per series
/// with a point.
pub(super) async fn select_last<B: Backend>(
    backend: &B,
    device: &str,
    projection: &Projection,
) -> ExecResult<Outcome> {
    let series = resolve_series(backend, device, projection).await?;
    last(backend, &series, i64::MIN).await
}

/// The last point at or after `since` of each series, one row each.
async fn last<B: Backend>(backend: &B, series: &[Series], since: i64) -> ExecResult<Outcome> {
    let mut rows = Vec::new();
    for s in series {
        let Some((time, value)) = backend.query_last(&s.device, &s.measurement).await? else {
            continue;
        };
        if time < since {
            continue;
        }
        rows.push(vec![
            Some(Value::Int64(time)),
            Some(Value::Text(format!("{}.{}", s.device, s.label))),
            Some(Value::Text(value_text(&value))),
            Some(Value::Text(value.data_type().name().to_string())),
        ]);
    }
    Ok(Outcome::query(
        show::header(&[
            (TIME_COLUMN, DataType::Int64),
            ("Timeseries", DataType::Text),
            ("Value", DataType::Text),
            ("DataType", DataType::Text),
        ]),
        rows,
    ))
}

/// A value as IoTDB prints it in a last query (Java's `toString`: `1.5`, `2.0`, `true`; a DATE
/// as `2024-01-05`, a BLOB as `0x0a0b`).
pub fn value_text(value: &Value) -> String {
    match value {
        Value::Float(f) => java_float(f64::from(*f), f.to_string()),
        Value::Double(d) => java_float(*d, d.to_string()),
        Value::Text(s) | Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Java prints a whole float with `.0` (`2.0`), Rust without (`2`).
fn java_float(value: f64, text: String) -> String {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e7 {
        format!("{text}.0")
    } else {
        text
    }
}
