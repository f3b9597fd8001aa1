//! The rows of a raw query as a source read as it is asked ([`RawRows`]): one or more parts,
//! each a join of series on time ([`Join`]) whose rows take the result's shape — `Time` and the
//! part's columns, or ALIGN BY DEVICE's `Time`, `Device` and a column per measurement — read
//! one after another, OFFSET and LIMIT counted across them.
//!
//! In time order a part is read as its rows are asked, so a result far larger than memory is
//! sent a page at a time. Newest first, or with FILL, a part is read whole first (its rows in
//! reverse, or filled), bounded by the result's memory and [`RESULT_ROWS_MAX`] rows.

use std::collections::VecDeque;

use common::{DataType, Value};

use super::analyze::Series;
use super::budget::{row_bytes, ResultCharge};
use super::fill;
use super::filter::{Filter, Scalar};
use super::join::{too_many_rows, Join};
use super::{Backend, Cell, ExecResult, RESULT_ROWS_MAX};
use crate::{Fill, RowWindow, TimeRange};

/// How a part's rows take the result's shape.
pub(super) enum Shape {
    /// `Time`, then the part's output cells.
    Time,
    /// ALIGN BY DEVICE: `Time`, the device, then each output cell in its column (`slots`, one
    /// per output) of `width` measurement columns.
    Device {
        device: Value,
        slots: Vec<usize>,
        width: usize,
    },
}

impl Shape {
    /// A joined row cut to its time and output cells, in the result's shape.
    fn apply(&self, row: Vec<Cell>) -> Vec<Cell> {
        match self {
            Shape::Time => row,
            Shape::Device {
                device,
                slots,
                width,
            } => {
                let mut cells = row.into_iter();
                let mut aligned = Vec::with_capacity(width + 2);
                aligned.push(cells.next().expect("a joined row starts with its time"));
                aligned.push(Some(device.clone()));
                aligned.resize(width + 2, None);
                for (cell, slot) in cells.zip(slots) {
                    aligned[slot + 2] = cell;
                }
                aligned
            }
        }
    }
}

/// How a joined row (its time, then a cell per series read) becomes a row's output cells.
pub(super) enum Cut {
    /// The first `n` series read are the outputs; the rest only the filter's.
    First(usize),
    /// Each output is an expression over the row; a row whose outputs are all NULL is not
    /// shown, as IoTDB shows none.
    Compute(Vec<Scalar>),
}

impl Cut {
    /// The row's time and output cells; `None` when the row is not shown.
    fn apply(&self, mut row: Vec<Cell>) -> Option<Vec<Cell>> {
        match self {
            Cut::First(n) => {
                row.truncate(1 + n);
                Some(row)
            }
            Cut::Compute(outputs) => {
                let mut cells = Vec::with_capacity(outputs.len() + 1);
                cells.push(row[0].clone());
                cells.extend(outputs.iter().map(|o| o.eval(&row)));
                cells[1..].iter().any(Option::is_some).then_some(cells)
            }
        }
    }

    /// The output cells' types, over rows that read `read`.
    fn types(&self, read: &[Series]) -> Vec<DataType> {
        match self {
            Cut::First(n) => read[..*n].iter().map(|s| s.data_type).collect(),
            Cut::Compute(outputs) => outputs.iter().map(Scalar::data_type).collect(),
        }
    }
}

/// Series joined on time whose rows are one stretch of the result.
pub(super) struct Part {
    /// The series read.
    pub(super) read: Vec<Series>,
    /// How the result's cells come from them.
    pub(super) cut: Cut,
    pub(super) filter: Option<Filter>,
    pub(super) shape: Shape,
}

/// The part being read.
enum Reading {
    /// Read as rows are asked.
    Joined { join: Join, cut: Cut, shape: Shape },
    /// Read whole: the rows, each charged [`row_bytes`] as it is (not yet shaped).
    Whole {
        rows: std::vec::IntoIter<Vec<Cell>>,
        shape: Shape,
    },
}

impl Reading {
    /// The next row cut to its time and outputs, and what it is charged now.
    async fn next<B: Backend>(
        &mut self,
        backend: &B,
        charge: &mut ResultCharge,
    ) -> ExecResult<Option<(Vec<Cell>, usize)>> {
        Ok(match self {
            Reading::Joined { join, cut, .. } => loop {
                let Some(row) = join.next(backend, charge).await? else {
                    break None;
                };
                if let Some(row) = cut.apply(row) {
                    break Some((row, 0));
                }
            },
            Reading::Whole { rows, .. } => rows.next().map(|row| {
                let bytes = row_bytes(&row);
                (row, bytes)
            }),
        })
    }

    fn shape(&self) -> &Shape {
        match self {
            Reading::Joined { shape, .. } | Reading::Whole { shape, .. } => shape,
        }
    }

    /// Gives back what the part still holds.
    fn release(self, charge: &mut ResultCharge) {
        match self {
            Reading::Joined { mut join, .. } => join.release(charge),
            Reading::Whole { rows, .. } => {
                charge.release(rows.map(|row| row_bytes(&row)).sum());
            }
        }
    }
}

/// A raw query's rows, read part by part as they are asked.
pub(super) struct RawRows {
    parts: VecDeque<Part>,
    current: Option<Reading>,
    range: TimeRange,
    descending: bool,
    fill: Option<Fill>,
    /// Rows still to skip (OFFSET) and to send (LIMIT).
    skip: usize,
    left: usize,
}

impl RawRows {
    pub(super) fn new(
        parts: Vec<Part>,
        range: TimeRange,
        rows: RowWindow,
        fill: Option<Fill>,
    ) -> RawRows {
        RawRows {
            parts: parts.into(),
            current: None,
            range,
            descending: rows.descending,
            fill,
            skip: rows.offset,
            left: rows.limit.unwrap_or(usize::MAX),
        }
    }

    /// The result's next row, charged [`row_bytes`]; `None` once every part is read or LIMIT
    /// is reached (what was held is then given back).
    pub(super) async fn next_row<B: Backend>(
        &mut self,
        backend: &B,
        charge: &mut ResultCharge,
    ) -> ExecResult<Option<Vec<Cell>>> {
        while self.left > 0 {
            let reading = match &mut self.current {
                Some(reading) => reading,
                None => {
                    let Some(part) = self.parts.pop_front() else {
                        break;
                    };
                    let reading = self.start(part, backend, charge).await?;
                    self.current.insert(reading)
                }
            };
            let Some((row, charged)) = reading.next(backend, charge).await? else {
                self.current = None;
                continue;
            };
            charge.release(charged);
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            let row = reading.shape().apply(row);
            charge.add(row_bytes(&row))?;
            self.left -= 1;
            return Ok(Some(row));
        }
        if let Some(reading) = self.current.take() {
            reading.release(charge);
        }
        self.parts.clear();
        Ok(None)
    }

    /// Starts reading `part`: a join read as asked, or read whole newest first or with FILL.
    async fn start<B: Backend>(
        &self,
        part: Part,
        backend: &B,
        charge: &mut ResultCharge,
    ) -> ExecResult<Reading> {
        let whole = self.descending || self.fill.is_some();
        // Read in time order without a filter, the rows still to skip and send are among each
        // series' first that many points.
        // A computed row may not be shown, so no such bound holds for it.
        let per_series = match (&part.filter, &part.cut) {
            (None, Cut::First(_)) if !whole => self.skip.saturating_add(self.left),
            _ => usize::MAX,
        };
        let Part {
            read,
            cut,
            filter,
            shape,
        } = part;
        let mut join = Join::new(&read, self.range, per_series, filter, charge);
        if !whole {
            return Ok(Reading::Joined { join, cut, shape });
        }
        let mut rows = Vec::new();
        while let Some(row) = join.next(backend, charge).await? {
            let Some(row) = cut.apply(row) else {
                continue;
            };
            charge.add(row_bytes(&row))?;
            rows.push(row);
            if rows.len() > RESULT_ROWS_MAX {
                return Err(too_many_rows());
            }
        }
        if self.descending {
            rows.reverse();
        }
        if let Some(how) = &self.fill {
            let types: Vec<DataType> = std::iter::once(DataType::Int64)
                .chain(cut.types(&read))
                .collect();
            let values: Vec<usize> = (1..types.len()).collect();
            let before: usize = rows.iter().map(|row| row_bytes(row)).sum();
            fill::fill_rows(&mut rows, &types, &values, Some(0), how);
            // A filled text or blob value takes heap bytes of its own.
            let after: usize = rows.iter().map(|row| row_bytes(row)).sum();
            charge.add(after.saturating_sub(before))?;
        }
        Ok(Reading::Whole {
            rows: rows.into_iter(),
            shape,
        })
    }
}
