//! Series joined on time, one row at a time ([`Join`]): each series is read a chunk at a time
//! ([`SeriesReader`]), and a row is made of the earliest time any series holds next (its time
//! cell, then one cell per series, NULL where a series has no point then). Only one chunk per
//! series is held; what it holds is charged while it is, and chunks are shorter the more series
//! a query joins. A filter drops rows as they are made, so a filtered query reads its series
//! whole but holds only the rows it keeps.

use common::{DataType, StatusCode, Value};

use super::analyze::Series;
use super::budget::{points_bytes, value_heap_bytes, ResultCharge};
use super::filter::Filter;
use super::{Backend, Cell, ExecError, ExecResult, RESULT_ROWS_MAX};
use crate::TimeRange;

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
/// Fewest points of a chunk of fixed-width values, however wide the query: a sealed page holds
/// up to 10,000 points, and each chunk read decodes the pages it touches.
const CHUNK_POINTS_MIN: usize = 256;

/// The points of one series in a time range, read a chunk at a time in time order: the first
/// `limit` of them, and a series with more than [`RESULT_ROWS_MAX`] there is refused, read no
/// further than that.
pub(super) struct SeriesReader {
    device: String,
    measurement: String,
    range: TimeRange,
    /// Points still to read (one past [`RESULT_ROWS_MAX`] at most, to see a series too long).
    left: usize,
    read: usize,
    chunk: usize,
    /// A series longer than [`RESULT_ROWS_MAX`] is refused (every point of it is a row).
    bounded: bool,
}

impl SeriesReader {
    pub(super) fn new(
        device: &str,
        measurement: &str,
        data_type: DataType,
        range: TimeRange,
        limit: usize,
    ) -> SeriesReader {
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
            device: device.to_string(),
            measurement: measurement.to_string(),
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
        device: &str,
        measurement: &str,
        data_type: DataType,
        range: TimeRange,
    ) -> SeriesReader {
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
                &self.device,
                &self.measurement,
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
struct SeriesCursor {
    reader: SeriesReader,
    data_type: DataType,
    chunk: std::vec::IntoIter<(i64, Value)>,
    /// What the chunk was charged.
    held: usize,
    /// The series' next point not yet in a row.
    head: Option<(i64, Value)>,
    done: bool,
}

impl SeriesCursor {
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

/// Points of a chunk for one of `series` series when a result has `room` bytes left: the
/// chunks of all series together take at most half the room, within each type's bounds, so a
/// wide query reads short chunks rather than being refused.
fn chunk_points(data_type: DataType, series: usize, room: usize) -> usize {
    let (min, max) = match data_type {
        DataType::Text | DataType::String | DataType::Blob => (16, CHUNK_POINTS_VARIABLE),
        _ => (CHUNK_POINTS_MIN, CHUNK_POINTS_FIXED),
    };
    let point = std::mem::size_of::<(i64, Value)>();
    (room / 2 / series.max(1) / point).clamp(min, max)
}

/// Series outer-joined on time, a row at a time, those the filter keeps (all without one).
pub(super) struct Join {
    cursors: Vec<SeriesCursor>,
    filter: Option<Filter>,
}

impl Join {
    /// A join of `series` in `range`, each read up to `per_series` points (every point with a
    /// filter), in chunks sized by what `charge` has room for. Nothing is read yet.
    pub(super) fn new(
        series: &[Series],
        range: TimeRange,
        per_series: usize,
        filter: Option<Filter>,
        charge: &ResultCharge,
    ) -> Join {
        let room = charge.room();
        let cursors = series
            .iter()
            .map(|s| {
                let mut reader = match filter {
                    Some(_) => SeriesReader::scan(&s.device, &s.measurement, s.data_type, range),
                    None => {
                        SeriesReader::new(&s.device, &s.measurement, s.data_type, range, per_series)
                    }
                };
                reader.bounded = false;
                reader.chunk = chunk_points(s.data_type, series.len(), room);
                SeriesCursor {
                    reader,
                    data_type: s.data_type,
                    chunk: Vec::new().into_iter(),
                    held: 0,
                    head: None,
                    done: false,
                }
            })
            .collect();
        Join { cursors, filter }
    }

    /// The next row the filter keeps: its time cell, then one cell per series (NULL where a
    /// series has no point then); `None` once every series is spent. The row's values are no
    /// longer charged as read points: the caller charges the row if it keeps it.
    pub(super) async fn next<B: Backend>(
        &mut self,
        backend: &B,
        charge: &mut ResultCharge,
    ) -> ExecResult<Option<Vec<Cell>>> {
        loop {
            for cursor in &mut self.cursors {
                cursor.fill(backend, charge).await?;
            }
            let Some(time) = self
                .cursors
                .iter()
                .filter_map(|c| Some(c.head.as_ref()?.0))
                .min()
            else {
                self.release(charge);
                return Ok(None);
            };
            let mut row = Vec::with_capacity(self.cursors.len() + 1);
            row.push(Some(Value::Int64(time)));
            for cursor in &mut self.cursors {
                let at_time = cursor.head.as_ref().is_some_and(|(t, _)| *t == time);
                row.push(if at_time { cursor.take(charge) } else { None });
            }
            if self.filter.as_ref().is_some_and(|f| !f.keeps(&row)) {
                continue;
            }
            return Ok(Some(row));
        }
    }

    /// Gives back what the chunks still held are charged (the join reads no further).
    pub(super) fn release(&mut self, charge: &mut ResultCharge) {
        for cursor in &mut self.cursors {
            charge.release(std::mem::take(&mut cursor.held));
            cursor.chunk = Vec::new().into_iter();
            cursor.head = None;
            cursor.done = true;
        }
    }
}

/// Rows of `series` joined on time in `range`, those `filter` keeps (all without one), handed to
/// `keep` in time order until it answers false. Each series is read up to `per_series` points.
pub(super) async fn scan<B: Backend>(
    backend: &B,
    series: &[Series],
    range: TimeRange,
    per_series: usize,
    filter: Option<Filter>,
    charge: &mut ResultCharge,
    mut keep: impl FnMut(Vec<Cell>, &mut ResultCharge) -> ExecResult<bool>,
) -> ExecResult<()> {
    let mut join = Join::new(series, range, per_series, filter, charge);
    while let Some(row) = join.next(backend, charge).await? {
        if !keep(row, charge)? {
            break;
        }
    }
    join.release(charge);
    Ok(())
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
