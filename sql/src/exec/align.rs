//! `ALIGN BY DEVICE`: IoTDB's shape that puts devices under each other rather than side by side.
//! The columns are `Time`, `Device`, then one per measurement name of the select list (a `*`
//! adds every measurement any device has, in first-seen order); the rows are each device's in
//! turn, devices in ascending order, each device's rows in time order (or newest first).
//! LIMIT and OFFSET count rows of the whole result. A column whose series have different types
//! on different devices is refused (700), as IoTDB refuses it.

use std::collections::HashMap;

use common::{DataType, StatusCode, Value};

use super::analyze::{by_device, Series};
use super::cursor::ResultCursor;
use super::filter::Filter;
use super::join::with_referenced;
use super::rows::{Cut, Part, RawRows, Shape};
use super::{ExecError, ExecResult, DEVICE_COLUMN, TIME_COLUMN};
use crate::expr::Expr;
use crate::{Fill, RowWindow, TimeRange};

/// The measurement columns of an aligned-by-device result: labels and their types.
#[derive(Debug, Default)]
pub(super) struct Columns {
    labels: Vec<(String, DataType)>,
}

impl Columns {
    /// The columns of `by_name` (each name's series, in the select list's order): a label once,
    /// where it first appears. 700 when a label's series differ in type.
    pub(super) fn of(by_name: &[Vec<Series>]) -> ExecResult<Columns> {
        let mut columns = Columns::default();
        for s in by_name.iter().flatten() {
            match columns.index(&s.label) {
                Some(i) if columns.labels[i].1 != s.data_type => {
                    return Err(ExecError::refused(
                        StatusCode::IllegalParameter,
                        format!(
                            "ALIGN BY DEVICE: {} is {} on {} but {} on another device; a column \
                             takes one type",
                            s.label,
                            s.data_type.name(),
                            s.device,
                            columns.labels[i].1.name()
                        ),
                    ));
                }
                Some(_) => {}
                None => columns.labels.push((s.label.clone(), s.data_type)),
            }
        }
        Ok(columns)
    }

    /// The column of `label`.
    pub(super) fn index(&self, label: &str) -> Option<usize> {
        self.labels.iter().position(|(l, _)| l == label)
    }

    /// How many there are.
    pub(super) fn len(&self) -> usize {
        self.labels.len()
    }

    /// The header: `Time` (when `time`), `Device`, then the columns named by `name`.
    pub(super) fn header(
        &self,
        time: bool,
        name: impl Fn(&str, DataType) -> (String, DataType),
    ) -> Vec<(String, DataType)> {
        let mut header = Vec::with_capacity(self.labels.len() + 2);
        if time {
            header.push((TIME_COLUMN.to_string(), DataType::Int64));
        }
        header.push((DEVICE_COLUMN.to_string(), DataType::Text));
        header.extend(self.labels.iter().map(|(l, t)| name(l, *t)));
        header
    }

    /// The columns SOFFSET and SLIMIT keep.
    pub(super) fn window(self, rows: RowWindow) -> Columns {
        Columns {
            labels: rows.series(self.labels),
        }
    }

    /// One device's series with a column, in the order read, each label once, and each one's
    /// column.
    fn pick(&self, series: Vec<Series>) -> (Vec<Series>, Vec<usize>) {
        let mut picked: Vec<Series> = Vec::new();
        let mut slots = Vec::new();
        for s in series {
            if picked.iter().any(|p| p.label == s.label) {
                continue;
            }
            let Some(slot) = self.index(&s.label) else {
                continue;
            };
            slots.push(slot);
            picked.push(s);
        }
        (picked, slots)
    }
}

/// What a raw query aligned by device reads besides its series.
pub(super) struct RawQuery<'q> {
    pub(super) range: TimeRange,
    /// The value filter and the series its names name.
    pub(super) filter: Option<(&'q Expr, &'q [Series])>,
    pub(super) rows: RowWindow,
    /// FILL's way, applied to each device's rows on their own.
    pub(super) fill: Option<&'q Fill>,
    /// The columns named with `AS`: a measurement's alias.
    pub(super) renamed: &'q HashMap<String, String>,
}

/// A raw query aligned by device: each device's series outer-joined on time (and filtered by
/// that device's own columns), the devices' rows one after another, read as the cursor is asked
/// for them.
pub(super) fn raw(by_name: Vec<Vec<Series>>, query: &RawQuery<'_>) -> ExecResult<ResultCursor> {
    let columns = Columns::of(&by_name)?.window(query.rows);
    let header = columns.header(true, |l, t| {
        let name = query.renamed.get(l).map_or(l, String::as_str);
        (name.to_string(), t)
    });
    let mut parts = Vec::new();
    for (device, series) in by_device(by_name.into_iter().flatten().collect()) {
        let (picked, slots) = columns.pick(series);
        if picked.is_empty() {
            continue;
        }
        let outputs = picked.len();
        let (read, filter) = match query.filter {
            Some((expr, referenced)) => {
                let referenced: Vec<Series> = referenced
                    .iter()
                    .filter(|s| s.device == device)
                    .cloned()
                    .collect();
                let read = with_referenced(picked, &referenced);
                let filter = Filter::over(expr, &read, &referenced)?;
                (read, Some(filter))
            }
            None => (picked, None),
        };
        parts.push(Part {
            read,
            cut: Cut::First(outputs),
            filter,
            shape: Shape::Device {
                device: Value::Text(device),
                slots,
                width: columns.len(),
            },
        });
    }
    let rows = RawRows::new(parts, query.range, query.rows, query.fill.cloned());
    Ok(ResultCursor::raw(header, rows))
}
