//! The aggregations answered from a device's rows, read raw, rather than from partial
//! aggregates: `MAX_BY(x, y)` and `MIN_BY(x, y)`, `COUNT_IF(predicate, keep)` and `MODE(s)`.
//!
//! MAX_BY and MIN_BY: x in the row where y is greatest (least), the earliest such row on a tie
//! (IoTDB's `MaxMinByBaseAccumulator`); NULL where x has no value in that row, and where y has
//! none in the window. `x` may be `time`: the row's time. x and y are measurements of one
//! device: each device that holds both (y alone, for `time`) is a column. No statistics say
//! which row holds a greatest value, so each device's series are read raw, joined on time
//! ([`join::scan`]), under the WHERE filter when there is one.
//!
//! COUNT_IF: the runs of consecutive rows (of the predicate's series joined on time) where the
//! predicate holds, counted when their length passes `keep` (IoTDB's `CountIfAccumulator`); a
//! row where the predicate is NULL is passed over, or ends the run with `'ignoreNull'='false'`.
//! Each device holding every measurement the predicate names is a column; its series are read
//! on their own, so rows of other series do not break its runs.
//!
//! MODE: the most frequent value of a series in the window, the earliest seen on a tie; at most
//! [`MODE_DISTINCT_MAX`] distinct values over a query's windows (700 past it), charged to the
//! result's memory as they are kept.
//!
//! Every row is judged for every window holding its time (with a sliding step, windows
//! overlap). A column's answer per row is kept as a [`Partial`] in a slot of its own after its
//! device's measurements (`Column::series`), so the result is shaped as every other column's:
//! MAX_BY's chosen x and MODE's value as the partial's first point, COUNT_IF's runs as its
//! count.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Range;

use common::aggregate::Partial;
use common::{DataType, StatusCode, Value};

use super::super::analyze::Series;
use super::super::budget::{value_heap_bytes, ResultCharge};
use super::super::filter::Filter;
use super::super::{join, query, Backend, ExecError, ExecResult};
use super::{partial_heap_bytes, partials_bytes, AggregateQuery, Column, Cut, Plan};
use crate::{AggregateFunction, AggregateItem, CountIf, TimeRange};

/// What a column answered from rows reads besides its slot.
#[derive(Clone, Debug)]
pub(super) enum RowInput {
    /// MAX_BY or MIN_BY.
    By {
        /// x's index among its device's measurements; `None`: x is the row's time.
        x: Option<usize>,
        /// y's index among its device's measurements.
        y: usize,
        /// y's name as the query gave it.
        y_label: String,
    },
    /// MODE of the measurement at this index among its device's.
    Mode { x: usize },
    /// COUNT_IF, and the series its predicate names (read on their own).
    CountIf {
        count_if: Box<CountIf>,
        series: Vec<Series>,
    },
}

/// Whether a MAX_BY/MIN_BY argument names the row's time.
pub(super) fn is_time(name: &str) -> bool {
    name.eq_ignore_ascii_case("time") || name.eq_ignore_ascii_case("timestamp")
}

/// Each item's series (x's), and beside each what else its column reads: for MAX_BY and
/// MIN_BY the y of the same device, for COUNT_IF the predicate's series. `xs[i]` is the
/// expansion of item i's first argument, `ys` those of the second arguments of the items that
/// take two, in order, `predicates` each COUNT_IF's names' expansions, in order. A device holding
/// only some of what a column reads is left out; for x `time`, each y's device is a column (its
/// x series is y itself, labelled `time`), for COUNT_IF each device holding every name (its
/// series is the first name's, labelled by the predicate).
pub(super) fn pair(
    items: &[AggregateItem],
    xs: Vec<Vec<Series>>,
    ys: Vec<Vec<Series>>,
    predicates: Vec<Vec<Vec<Series>>>,
) -> (Vec<Vec<Series>>, Vec<Vec<Vec<Series>>>) {
    let mut ys = ys.into_iter();
    let mut predicates = predicates.into_iter();
    let mut by_item = Vec::with_capacity(items.len());
    let mut extra_of_item = Vec::with_capacity(items.len());
    for (item, x_series) in items.iter().zip(xs) {
        let (mut kept_x, mut kept_extra) = (Vec::new(), Vec::new());
        if let Some(count_if) = &item.count_if {
            let names = predicates.next().expect("one expansion per COUNT_IF");
            let label = format!("{}, {}", count_if.predicate, count_if.keep_text());
            for first in names.first().into_iter().flatten() {
                let of_device: Option<Vec<Series>> = names
                    .iter()
                    .map(|name| name.iter().find(|s| s.device == first.device).cloned())
                    .collect();
                if let Some(series) = of_device {
                    kept_x.push(Series {
                        label: label.clone(),
                        data_type: DataType::Int64,
                        ..first.clone()
                    });
                    kept_extra.push(series);
                }
            }
        } else if item.function.takes_two() {
            let y_series = ys.next().expect("one expansion of y per MAX_BY/MIN_BY");
            for y in y_series {
                let x = if is_time(&item.measurement) {
                    Some(Series {
                        label: "time".to_string(),
                        data_type: DataType::Int64,
                        ..y.clone()
                    })
                } else {
                    x_series.iter().find(|x| x.device == y.device).cloned()
                };
                if let Some(x) = x {
                    kept_x.push(x);
                    kept_extra.push(vec![y]);
                }
            }
        } else if item.function.reads_rows() {
            // MODE: the series alone.
            kept_extra = vec![Vec::new(); x_series.len()];
            kept_x = x_series;
        } else {
            kept_x = x_series;
        }
        by_item.push(kept_x);
        extra_of_item.push(kept_extra);
    }
    (by_item, extra_of_item)
}

/// 700 unless y is of a type MAX_BY and MIN_BY compare: INT32, INT64, FLOAT, DOUBLE, STRING,
/// TIMESTAMP or DATE.
pub(super) fn check_y(item: &AggregateItem, y: &Series) -> ExecResult<()> {
    use DataType::{Date, Double, Float, Int32, Int64, String, Timestamp};
    if matches!(
        y.data_type,
        Int32 | Int64 | Float | Double | String | Timestamp | Date
    ) {
        return Ok(());
    }
    let name = item.function.name().to_ascii_uppercase();
    Err(ExecError::refused(
        StatusCode::IllegalParameter,
        format!(
            "{name}'s second argument {} is {}: it takes INT32, INT64, FLOAT, DOUBLE, STRING, \
             TIMESTAMP or DATE",
            y.path(),
            y.data_type.name()
        ),
    ))
}

/// The order of two values of one type that MAX_BY and MIN_BY compare (`None` for NaN).
fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int32(a), Value::Int32(b)) | (Value::Date(a), Value::Date(b)) => Some(a.cmp(b)),
        (Value::Int64(a), Value::Int64(b)) | (Value::Timestamp(a), Value::Timestamp(b)) => {
            Some(a.cmp(b))
        }
        (Value::Float(a), Value::Float(b)) => a.partial_cmp(b),
        (Value::Double(a), Value::Double(b)) => a.partial_cmp(b),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

/// The best row of a window so far: its y, and x there.
#[derive(Clone, Debug)]
struct Best {
    y: Value,
    x: Option<Value>,
}

/// The rows whose windows hold `time` (a time within the cut's span).
fn rows_at(cut: &Cut, time: i64) -> Range<usize> {
    let Some(w) = cut.windows else {
        return 0..1;
    };
    let Some(slide) = &cut.slide else {
        return match w.index(time) {
            Some(i) => i..i + 1,
            None => 0..0,
        };
    };
    let since = i128::from(time) - i128::from(w.start);
    if since < 0 {
        return 0..0;
    }
    slide.rows_at(since)
}

/// Appends the slot of each column answered from rows to its device's partials (`[device]
/// [series][row]`, rows as the result has them), in column order, reading each device's rows
/// that `query`'s filter keeps; what the slots hold is charged to `charge` and added to `held`.
pub(super) async fn append<B: Backend>(
    backend: &B,
    plan: &Plan,
    query: &AggregateQuery<'_>,
    cut: &Cut,
    charge: &mut ResultCharge,
    held: &mut usize,
    partials: &mut [Vec<Vec<Partial>>],
) -> ExecResult<()> {
    let rows = cut.rows();
    let columns: Vec<&Column> = plan.columns.iter().filter(|c| c.rows.is_some()).collect();
    let fixed = partials_bytes(rows, columns.len());
    charge.add(fixed)?;
    *held += fixed;
    let referenced = match query.filter {
        Some(expr) => query::referenced_series(backend, query.from, expr).await?,
        None => Vec::new(),
    };
    for (device, slots) in partials.iter_mut().enumerate() {
        let mine: Vec<&Column> = columns
            .iter()
            .filter(|c| c.device == device)
            .copied()
            .collect();
        if mine.is_empty() {
            continue;
        }
        let name = &plan.reads[device].0;
        let refs: Vec<Series> = referenced
            .iter()
            .filter(|r| r.device == *name)
            .cloned()
            .collect();
        let reads = Reads {
            query,
            cut,
            refs: &refs,
        };
        let of_device: Vec<&Column> = mine
            .iter()
            .filter(|c| !matches!(c.rows, Some(RowInput::CountIf { .. })))
            .copied()
            .collect();
        let mut device_slots = if of_device.is_empty() {
            Vec::new()
        } else {
            reads
                .device_rows(backend, plan.series_of(device), &of_device, charge)
                .await?
        }
        .into_iter();
        for column in mine {
            let slot = match &column.rows {
                Some(RowInput::CountIf { count_if, series }) => {
                    reads
                        .count_if(backend, count_if, series.clone(), charge)
                        .await?
                }
                _ => device_slots
                    .next()
                    .expect("a slot per MAX_BY, MIN_BY and MODE"),
            };
            let heap: usize = slot.iter().map(partial_heap_bytes).sum();
            charge.add(heap)?;
            *held += heap;
            slots.push(slot);
        }
    }
    Ok(())
}

/// How one device's rows are read: the query's range and filter, the filter's series of the
/// device (`refs`).
struct Reads<'a> {
    query: &'a AggregateQuery<'a>,
    cut: &'a Cut,
    refs: &'a [Series],
}

impl Reads<'_> {
    /// Scans `read` (with the filter's series) over the cut's span, each kept row given to
    /// `fold` with its time; nothing when the span is empty.
    async fn scan<B: Backend>(
        &self,
        backend: &B,
        read: Vec<Series>,
        charge: &mut ResultCharge,
        mut fold: impl FnMut(i64, &[Option<Value>], &mut ResultCharge) -> ExecResult<()>,
    ) -> ExecResult<()> {
        let read = join::with_referenced(read, self.refs);
        let Some(windows) = self.cut.call() else {
            return Ok(());
        };
        let filter = match self.query.filter {
            Some(expr) => Some(Filter::over(expr, &read, self.refs)?),
            None => None,
        };
        let keep = |row: Vec<_>, charge: &mut ResultCharge| {
            let Some(Some(Value::Int64(time))) = row.first() else {
                unreachable!("a joined row starts with its time");
            };
            fold(*time, &row, charge)?;
            Ok(true)
        };
        let span = windows.range();
        let range = TimeRange {
            from: span.start,
            to: span.end,
        };
        join::scan(backend, &read, range, usize::MAX, filter, charge, keep).await
    }

    /// The slots of a device's MAX_BY, MIN_BY and MODE `columns`, reading its measurements
    /// `read` once for all of them.
    async fn device_rows<B: Backend>(
        &self,
        backend: &B,
        read: Vec<Series>,
        columns: &[&Column],
        charge: &mut ResultCharge,
    ) -> ExecResult<Vec<Vec<Partial>>> {
        let rows = self.cut.rows();
        let mut states: Vec<State> = columns
            .iter()
            .map(|c| match c.rows {
                Some(RowInput::Mode { .. }) => State::Mode(vec![Modes::default(); rows]),
                _ => State::Best(vec![None; rows]),
            })
            .collect();
        let mut distinct = 0usize;
        let cut = self.cut;
        let fold = |time: i64, row: &[Option<Value>], charge: &mut ResultCharge| {
            for (column, state) in columns.iter().zip(states.iter_mut()) {
                match (&column.rows, state) {
                    (Some(RowInput::By { x, y, .. }), State::Best(best)) => {
                        let greatest = column.function == AggregateFunction::MaxBy;
                        judge_best(best, cut, time, row, *x, *y, greatest);
                    }
                    (Some(RowInput::Mode { x }), State::Mode(modes)) => {
                        let Some(value) = &row[1 + x] else {
                            continue;
                        };
                        for r in rows_at(cut, time) {
                            if modes[r].take(time, value) {
                                distinct += 1;
                                charge.add(MODE_ENTRY_BYTES + value_heap_bytes(value))?;
                            }
                        }
                        if distinct > MODE_DISTINCT_MAX {
                            return Err(ExecError::refused(
                                StatusCode::IllegalParameter,
                                format!(
                                    "MODE over more than {MODE_DISTINCT_MAX} distinct values; \
                                     narrow the time range or the windows"
                                ),
                            ));
                        }
                    }
                    _ => unreachable!("MAX_BY, MIN_BY and MODE columns"),
                }
            }
            Ok(())
        };
        self.scan(backend, read, charge, fold).await?;
        Ok(states.into_iter().map(State::finish).collect())
    }

    /// The slot of a COUNT_IF column whose predicate names `series` (of one device).
    async fn count_if<B: Backend>(
        &self,
        backend: &B,
        count_if: &CountIf,
        series: Vec<Series>,
        charge: &mut ResultCharge,
    ) -> ExecResult<Vec<Partial>> {
        let rows = self.cut.rows();
        // The layout `scan` reads: the predicate's series, then the filter's it lacks.
        let layout = join::with_referenced(series.clone(), self.refs);
        let predicate = Filter::over(&count_if.predicate, &layout, &series)?;
        let mut runs = vec![Runs::default(); rows];
        let cut = self.cut;
        let fold = |time: i64, row: &[Option<Value>], _: &mut ResultCharge| {
            let truth = predicate.judge(row);
            for r in rows_at(cut, time) {
                runs[r].take(truth, count_if);
            }
            Ok(())
        };
        self.scan(backend, series, charge, fold).await?;
        Ok(runs
            .into_iter()
            .map(|r| Partial {
                count: r.finish(count_if),
                ..Partial::default()
            })
            .collect())
    }
}

/// Distinct values MODE keeps at most over a query's windows (700 past it).
const MODE_DISTINCT_MAX: usize = 1_000_000;
/// What a distinct value costs MODE besides its heap bytes: its key, count and first time.
const MODE_ENTRY_BYTES: usize = 96;

/// A column's state in each window while a device's rows are read.
enum State {
    /// MAX_BY or MIN_BY: the best row so far.
    Best(Vec<Option<Best>>),
    /// MODE: each value's count.
    Mode(Vec<Modes>),
}

impl State {
    /// The column's slot: the chosen value as each window's partial's first point.
    fn finish(self) -> Vec<Partial> {
        let chosen = |x: Option<Value>| Partial {
            count: 1,
            first: x.map(|x| (0, x)),
            ..Partial::default()
        };
        match self {
            State::Best(best) => best
                .into_iter()
                .map(|b| b.map_or_else(Partial::default, |b| chosen(b.x)))
                .collect(),
            State::Mode(modes) => modes
                .into_iter()
                .map(|m| m.mode().map_or_else(Partial::default, |v| chosen(Some(v))))
                .collect(),
        }
    }
}

/// Judges one row for MAX_BY (`greatest`) or MIN_BY in every window holding `time`.
fn judge_best(
    best: &mut [Option<Best>],
    cut: &Cut,
    time: i64,
    row: &[Option<Value>],
    x: Option<usize>,
    y: usize,
    greatest: bool,
) {
    let Some(y) = &row[1 + y] else {
        return;
    };
    let wanted = if greatest {
        Ordering::Greater
    } else {
        Ordering::Less
    };
    for r in rows_at(cut, time) {
        let better = best[r]
            .as_ref()
            .is_none_or(|b| order(y, &b.y) == Some(wanted));
        if better && order(y, y).is_some() {
            let x = match x {
                None => Some(Value::Int64(time)),
                Some(x) => row[1 + x].clone(),
            };
            best[r] = Some(Best { y: y.clone(), x });
        }
    }
}

/// A value as MODE tells values apart: its type and bits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ModeKey {
    Fixed(u8, u64),
    Bytes(u8, Vec<u8>),
}

impl ModeKey {
    fn of(value: &Value) -> ModeKey {
        match value {
            Value::Boolean(b) => ModeKey::Fixed(0, u64::from(*b)),
            Value::Int32(v) => ModeKey::Fixed(1, *v as u64),
            Value::Int64(v) => ModeKey::Fixed(2, *v as u64),
            Value::Float(v) => ModeKey::Fixed(3, u64::from(v.to_bits())),
            Value::Double(v) => ModeKey::Fixed(4, v.to_bits()),
            Value::Timestamp(v) => ModeKey::Fixed(5, *v as u64),
            Value::Date(v) => ModeKey::Fixed(6, *v as u64),
            Value::Text(v) => ModeKey::Bytes(7, v.as_bytes().to_vec()),
            Value::String(v) => ModeKey::Bytes(8, v.as_bytes().to_vec()),
            Value::Blob(v) => ModeKey::Bytes(9, v.clone()),
        }
    }
}

/// MODE's state in one window: each value's count and first time.
#[derive(Clone, Debug, Default)]
struct Modes(HashMap<ModeKey, (u64, i64, Value)>);

impl Modes {
    /// Counts `value` at `time`; whether it is new here.
    fn take(&mut self, time: i64, value: &Value) -> bool {
        let mut new = false;
        let entry = self.0.entry(ModeKey::of(value)).or_insert_with(|| {
            new = true;
            (0, time, value.clone())
        });
        entry.0 += 1;
        new
    }

    /// The most frequent value, the earliest seen on a tie (IoTDB's rule); `None` when empty.
    fn mode(self) -> Option<Value> {
        self.0
            .into_values()
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|(_, _, value)| value)
    }
}

/// COUNT_IF's state in one window.
#[derive(Clone, Copy, Debug, Default)]
struct Runs {
    /// Runs counted.
    counted: u64,
    /// Length of the run going on.
    length: i64,
}

impl Runs {
    /// Takes one row whose predicate is `truth` (`None`: NULL).
    fn take(&mut self, truth: Option<bool>, count_if: &CountIf) {
        match truth {
            Some(true) => self.length += 1,
            None if count_if.ignore_null => {}
            _ => self.end(count_if),
        }
    }

    /// Ends the run going on, counting it if `keep` accepts it.
    fn end(&mut self, count_if: &CountIf) {
        if self.length > 0 && count_if.keeps(self.length) {
            self.counted += 1;
        }
        self.length = 0;
    }

    /// The runs counted, the last one ended.
    fn finish(mut self, count_if: &CountIf) -> u64 {
        self.end(count_if);
        self.counted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GroupByTime;

    #[test]
    fn values_order_within_a_type_and_nan_is_never_best() {
        let v = |x: f64| Value::Double(x);
        assert_eq!(order(&v(1.0), &v(2.0)), Some(Ordering::Less));
        assert_eq!(order(&v(f64::NAN), &v(2.0)), None);
        assert_eq!(
            order(&Value::String("b".into()), &Value::String("a".into())),
            Some(Ordering::Greater)
        );
        assert_eq!(order(&Value::Int32(1), &Value::Int64(1)), None);
    }

    #[test]
    fn a_time_is_judged_in_every_window_that_holds_it() {
        let g = |interval_ms, step_ms| {
            Some(GroupByTime {
                start: 0,
                end: 100,
                interval_ms,
                step_ms,
                interval_months: 0,
                step_months: 0,
                left_open: false,
            })
        };
        let cut = Cut::new(TimeRange::ALL, g(10, 10)).unwrap();
        assert_eq!(rows_at(&cut, 25), 2..3);
        // Windows of 30 every 10: [0, 30), [10, 40), [20, 50) hold 25.
        let cut = Cut::new(TimeRange::ALL, g(30, 10)).unwrap();
        assert_eq!(rows_at(&cut, 25), 0..3);
        assert_eq!(rows_at(&cut, 95), 7..10);
        // Windows of 10 every 30: [0, 10), [30, 40), ...: 15 is in none.
        let cut = Cut::new(TimeRange::ALL, g(10, 30)).unwrap();
        assert_eq!(rows_at(&cut, 15), 1..1);
        assert_eq!(rows_at(&cut, 35), 1..2);
        let cut = Cut::new(TimeRange::ALL, None).unwrap();
        assert_eq!(rows_at(&cut, 12345), 0..1);
    }
}
