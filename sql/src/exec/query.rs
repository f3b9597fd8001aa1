//! Queries of the tree model: raw SELECT (series joined on time by [`super::join`], read as
//! their cursor is asked, [`super::rows`]), SELECT LAST, and IoTDB's raw and last data queries
//! by path (aggregations are [`super::aggregate`]'s). Rows are charged to the result's
//! [`ResultCharge`] as they are held, so a query too large for memory is refused rather than
//! running the node out of it (REVIEW N5).

use std::collections::HashMap;

use common::{DataType, StatusCode, Value};

use super::analyze::{self, Series};
use super::budget::ResultCharge;
use super::cursor::ResultCursor;
use super::filter::Filter;
use super::rows::{Cut, Part, RawRows, Shape};
use super::{
    align, join, outcome_bytes, show, Backend, ExecError, ExecResult, Outcome, TIME_COLUMN,
};
use crate::expr::Expr;
use crate::{Fill, PathPattern, Projection, RowWindow, TimeRange};

/// A raw query, as the statement gives it.
#[derive(Clone, Copy, Debug)]
pub(super) struct RawSelect<'q> {
    pub(super) from: &'q [PathPattern],
    pub(super) projection: &'q Projection,
    pub(super) range: TimeRange,
    pub(super) filter: Option<&'q Expr>,
    pub(super) rows: RowWindow,
    pub(super) fill: Option<&'q Fill>,
    pub(super) align_by_device: bool,
}

/// `Time` and one column per series, outer-joined on time, the rows `filter` keeps; ALIGN BY
/// DEVICE's shape with `align_by_device`. The rows are read as the cursor is asked for them.
pub(super) async fn open_raw<B: Backend>(
    backend: &B,
    query: &RawSelect<'_>,
) -> ExecResult<ResultCursor> {
    let RawSelect {
        from,
        projection,
        range,
        filter,
        rows,
        fill,
        align_by_device,
    } = *query;
    let referenced = match filter {
        Some(expr) => referenced_series(backend, from, expr).await?,
        None => Vec::new(),
    };
    if align_by_device {
        let names = analyze::names_of(projection);
        let renamed: HashMap<String, String> = names
            .iter()
            .enumerate()
            .filter_map(|(i, name)| Some((name.clone(), projection.alias(i)?.to_string())))
            .collect();
        let by_name = analyze::expand(backend, from, &names).await?;
        let query = align::RawQuery {
            range,
            filter: filter.map(|expr| (expr, referenced.as_slice())),
            rows,
            fill,
            renamed: &renamed,
        };
        return align::raw(by_name, &query);
    }
    let series = rows.series(analyze::expand_projection(backend, from, projection).await?);
    let mut header = vec![(TIME_COLUMN.to_string(), DataType::Int64)];
    header.extend(series.iter().map(|s| (s.column_name(), s.data_type)));
    let outputs = series.len();
    let read = join::with_referenced(series, &referenced);
    let filter = match filter {
        Some(expr) => Some(Filter::over(expr, &read, &referenced)?),
        None => None,
    };
    let part = Part {
        read,
        cut: Cut::First(outputs),
        filter,
        shape: Shape::Time,
    };
    let rows = RawRows::new(vec![part], range, rows, fill.cloned());
    Ok(ResultCursor::raw(header, rows))
}

/// The series a filter's names name under `from`, each labelled by its name.
pub(super) async fn referenced_series<B: Backend>(
    backend: &B,
    from: &[PathPattern],
    expr: &Expr,
) -> ExecResult<Vec<Series>> {
    let names = expr.columns();
    Ok(analyze::expand(backend, from, &names)
        .await?
        .into_iter()
        .flatten()
        .collect())
}

/// IoTDB's raw data query (`executeRawDataQuery`): `Time` and one column per existing series of
/// the full `paths`, in `[from, to)`, read as the cursor is asked for them.
pub async fn open_raw_paths<B: Backend>(
    backend: &B,
    paths: &[String],
    range: TimeRange,
) -> ExecResult<ResultCursor> {
    let series = analyze::resolve_paths(backend, paths).await?;
    let mut header = vec![(TIME_COLUMN.to_string(), DataType::Int64)];
    header.extend(series.iter().map(|s| (s.path(), s.data_type)));
    let part = Part {
        cut: Cut::First(series.len()),
        read: series,
        filter: None,
        shape: Shape::Time,
    };
    let rows = RawRows::new(vec![part], range, RowWindow::default(), None);
    Ok(ResultCursor::raw(header, rows))
}

/// [`open_raw_paths`]'s result whole, charged to `charge`.
pub async fn raw_paths<B: Backend>(
    backend: &B,
    paths: &[String],
    range: TimeRange,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    let cursor = open_raw_paths(backend, paths, range).await?;
    let outcome = cursor.collect(backend, charge).await?;
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
    let series = analyze::resolve_paths(backend, paths).await?;
    let outcome = last(backend, &series, since).await?;
    charge.settle(outcome_bytes(&outcome))?;
    Ok(outcome)
}

/// IoTDB's last query: `Time`, `Timeseries`, `Value` (as text), `DataType`, one row per series
/// with a point at or after `since`.
pub(super) async fn select_last<B: Backend>(
    backend: &B,
    from: &[PathPattern],
    projection: &Projection,
    since: i64,
) -> ExecResult<Outcome> {
    let series = analyze::expand_projection(backend, from, projection).await?;
    last(backend, &series, since).await
}

/// Series one backend call asks the last point of at most.
const LAST_CALL_SERIES_MAX: usize = 4096;

/// The last point at or after `since` of each series, one row each; the backend is asked
/// [`LAST_CALL_SERIES_MAX`] series a call.
async fn last<B: Backend>(backend: &B, series: &[Series], since: i64) -> ExecResult<Outcome> {
    let mut rows = Vec::new();
    for batch in series.chunks(LAST_CALL_SERIES_MAX) {
        let asked: Vec<(String, String)> = batch
            .iter()
            .map(|s| (s.device.clone(), s.measurement.clone()))
            .collect();
        let answered = backend.query_last(&asked).await?;
        if answered.len() != batch.len() {
            return Err(ExecError::refused(
                StatusCode::InternalServerError,
                format!(
                    "the last points of {} series came back as {}",
                    batch.len(),
                    answered.len()
                ),
            ));
        }
        last_rows(batch, answered, since, &mut rows);
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

/// The rows of `series`' last points (`answered`, parallel) at or after `since`.
fn last_rows(
    series: &[Series],
    answered: Vec<Option<(i64, Value)>>,
    since: i64,
    rows: &mut Vec<Vec<Option<Value>>>,
) {
    for (s, answer) in series.iter().zip(answered) {
        let Some((time, value)) = answer else {
            continue;
        };
        if time < since {
            continue;
        }
        rows.push(vec![
            Some(Value::Int64(time)),
            Some(Value::Text(s.path())),
            Some(Value::Text(value_text(&value))),
            Some(Value::Text(value.data_type().name().to_string())),
        ]);
    }
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
