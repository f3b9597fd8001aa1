//! Series joined on time, one row at a time: each series is read a chunk at a time
//! ([`SeriesReader`]), and a row is made of the earliest time any series holds next (its time
//! cell, then one cell per series, NULL where a series has no point then). Only one chunk per
//! series is held; what it holds is charged while it is. A filter drops rows as they are made,
//! so a filtered query reads its series whole but holds only the rows it keeps.

use common::{DataType, StatusCode, Value};

use super::analyze::Series;
use super::budget::{points_bytes, row_bytes, value_heap_bytes, ResultCharge};
use super::filter::Filter;
use super::{Backend, Cell, ExecError, ExecResult, RESULT_ROWS_MAX};
use crate::{RowWindow, TimeRange};

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
    /// A series longer than [`RESULT_ROWS_MAX`] is refused (every point of it is a row).
    bounded: bool,
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
            bounded: true,
        }
    }

    /// A reader of every point in `range`, however many: for a filtered scan, whose rows are
    /// counted as they are kept.
    pub(super) fn scan(
        device: &'s str,
        measurement: &'s str,
        data_type: DataType,
        range: TimeRange,
    ) -> SeriesReader<'s> {
        let mut reader = SeriesReader::new(device, measurement, data_type, range, 0);
        reader.bounded = false;
        reader.left = if range.is_empty() { 0 } else { usize::MAX };
        reader
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
        if self.bounded && self.read > RESULT_ROWS_MAX {
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

/// What one point of a chunk was charged, as [`points_bytes`] counts it.
fn point_bytes(value: &Value) -> usize {
    std::mem::size_of::<(i64, Value)>() + value_heap_bytes(value)
}

/// One series' place in a join.
struct Cursor<'s> {
    reader: SeriesReader<'s>,
    data_type: DataType,
    chunk: std::vec::IntoIter<(i64, Value)>,
    /// What the chunk was charged.
    held: usize,
    /// The series' next point not yet in a row.
    head: Option<(i64, Value)>,
    done: bool,
}

impl Cursor<'_> {
    /// The head's value, moved into a row: its share of the chunk's charge is given back (the
    /// row that takes it is charged for it), so a value is never charged twice.
    fn take(&mut self, charge: &mut ResultCharge) -> Cell {
        let (_, value) = self.head.take()?;
        let share = point_bytes(&value).min(self.held);
        self.held -= share;
        charge.release(share);
        Some(value)
    }

    /// Fills `head` from the chunk, reading the next chunk when it is spent.
    async fn fill<B: Backend>(&mut self, backend: &B, charge: &mut ResultCharge) -> ExecResult<()> {
        while self.head.is_none() && !self.done {
            if let Some(point) = self.chunk.next() {
                // A point of another type (the series was dropped and created again with
                // another type while the query ran) is left out rather than mistyping the
                // column.
                if point.1.data_type() == self.data_type {
                    self.head = Some(point);
                }
                continue;
            }
            charge.release(std::mem::take(&mut self.held));
            match self.reader.next(backend).await? {
                Some(points) => {
                    self.held = points_bytes(&points);
                    charge.add(self.held)?;
                    self.chunk = points.into_iter();
                }
                None => self.done = true,
            }
        }
        Ok(())
    }
}

/// Rows of `series` joined on time in `range`, those `filter` keeps (all without one), handed to
/// `keep` in time order until it answers false. Each series is read up to `per_series` points;
/// without a filter, a series with more points than a result may have rows is refused.
pub(super) async fn scan<B: Backend>(
    backend: &B,
    series: &[Series],
    range: TimeRange,
    per_series: usize,
    filter: Option<&Filter>,
    charge: &mut ResultCharge,
    mut keep: impl FnMut(Vec<Cell>, &mut ResultCharge) -> ExecResult<bool>,
) -> ExecResult<()> {
    let mut cursors: Vec<Cursor<'_>> = series
        .iter()
        .map(|s| {
            let reader = match filter {
                Some(_) => SeriesReader::scan(&s.device, &s.measurement, s.data_type, range),
                None => {
                    SeriesReader::new(&s.device, &s.measurement, s.data_type, range, per_series)
                }
            };
            Cursor {
                reader,
                data_type: s.data_type,
                chunk: Vec::new().into_iter(),
                held: 0,
                head: None,
                done: false,
            }
        })
        .collect();
    loop {
        for cursor in &mut cursors {
            cursor.fill(backend, charge).await?;
        }
        let Some(time) = cursors
            .iter()
            .filter_map(|c| Some(c.head.as_ref()?.0))
            .min()
        else {
            break;
        };
        let mut row = Vec::with_capacity(cursors.len() + 1);
        row.push(Some(Value::Int64(time)));
        for cursor in &mut cursors {
            let at_time = cursor.head.as_ref().is_some_and(|(t, _)| *t == time);
            row.push(if at_time { cursor.take(charge) } else { None });
        }
        if filter.is_some_and(|f| !f.keeps(&row)) {
            continue;
        }
        if !keep(row, charge)? {
            break;
        }
    }
    for cursor in &mut cursors {
        charge.release(std::mem::take(&mut cursor.held));
    }
    Ok(())
}

/// The rows `rows` picks of `read` joined on time (those `filter` keeps), each as its time and
/// the cells of `output` (indices into `read`), charged as they are kept.
///
/// In time order each series is read only as far as the rows kept need (without a filter, the
/// first `offset + limit` rows' times are among each series' first `offset + limit` points);
/// newest first, or with a filter, every series is read whole.
pub(super) async fn select_rows<B: Backend>(
    backend: &B,
    read: &[Series],
    output: &[usize],
    range: TimeRange,
    filter: Option<&Filter>,
    rows: RowWindow,
    charge: &mut ResultCharge,
) -> ExecResult<Vec<Vec<Cell>>> {
    let per_series = match rows.limit {
        Some(limit) if !rows.descending => rows.offset.saturating_add(limit),
        _ => RESULT_ROWS_MAX,
    };
    let limit = rows.limit.unwrap_or(usize::MAX);
    let mut skip = if rows.descending { 0 } else { rows.offset };
    let identity = output.len() == read.len() && output.iter().enumerate().all(|(i, o)| i == *o);
    let mut kept: Vec<Vec<Cell>> = Vec::new();
    let take = |row: Vec<Cell>, charge: &mut ResultCharge| {
        if skip > 0 {
            skip -= 1;
            return Ok(true);
        }
        if !rows.descending && kept.len() >= limit {
            return Ok(false);
        }
        let row = if identity { row } else { project(row, output) };
        charge.add(row_bytes(&row))?;
        kept.push(row);
        if kept.len() > RESULT_ROWS_MAX {
            return Err(too_many_rows());
        }
        Ok(rows.descending || kept.len() < limit)
    };
    scan(backend, read, range, per_series, filter, charge, take).await?;
    if rows.descending {
        kept.reverse();
        kept = rows.page(kept);
    }
    Ok(kept)
}

/// A joined row's time and the cells of `output`.
fn project(mut row: Vec<Cell>, output: &[usize]) -> Vec<Cell> {
    let mut projected = Vec::with_capacity(output.len() + 1);
    projected.push(row[0].take());
    projected.extend(output.iter().map(|i| row[i + 1].take()));
    projected
}

/// `read` with the series of `referenced` it lacks appended (a filter's columns that are not
/// selected).
pub(super) fn with_referenced(mut read: Vec<Series>, referenced: &[Series]) -> Vec<Series> {
    for r in referenced {
        if !read
            .iter()
            .any(|s| s.device == r.device && s.measurement == r.measurement)
        {
            read.push(r.clone());
        }
    }
    read
}
