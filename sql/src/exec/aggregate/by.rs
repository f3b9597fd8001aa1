//! `MAX_BY(x, y)` and `MIN_BY(x, y)`: x in the row where y is greatest (least), the earliest
//! such row on a tie (IoTDB's `MaxMinByBaseAccumulator`); NULL where x has no value in that row,
//! and where y has none in the window. `x` may be `time`: the row's time.
//!
//! x and y are measurements of one device: each device that holds both (y alone, for `time`)
//! is a column. No statistics say which row holds a greatest value, so each device's series are
//! read raw, joined on time ([`join::scan`]), under the WHERE filter when there is one, and each
//! row is judged for every window holding its time (with a sliding step, windows overlap).
//!
//! A column's answer per row is kept as a [`Partial`] in a slot of its own after its device's
//! measurements (`Column::series`): one point, the chosen x as its `first`, so the result is
//! shaped as every other column's.

use std::cmp::Ordering;
use std::ops::Range;

use common::aggregate::Partial;
use common::{DataType, StatusCode, Value};

use super::super::analyze::Series;
use super::super::budget::ResultCharge;
use super::super::filter::Filter;
use super::super::{join, query, Backend, ExecError, ExecResult};
use super::{partial_heap_bytes, partials_bytes, AggregateQuery, Column, Cut, Plan};
use crate::{AggregateItem, TimeRange};

/// What a MAX_BY or MIN_BY column reads besides its slot.
#[derive(Clone, Debug)]
pub(super) struct ByInput {
    /// x's index among its device's measurements; `None`: x is the row's time.
    pub(super) x: Option<usize>,
    /// y's index among its device's measurements.
    pub(super) y: usize,
    /// y's name as the query gave it.
    pub(super) y_label: String,
}

/// Whether a MAX_BY/MIN_BY argument names the row's time.
pub(super) fn is_time(name: &str) -> bool {
    name.eq_ignore_ascii_case("time") || name.eq_ignore_ascii_case("timestamp")
}

/// Each item's series (x's), and for MAX_BY and MIN_BY the y of the same device beside each:
/// `xs[i]` the expansion of item i's first argument, `ys` those of the second arguments of the
/// items that take two, in order. A device holding one of the two is left out; for x `time`,
/// each y's device is a column (its x series is y itself, labelled `time`).
pub(super) fn pair(
    items: &[AggregateItem],
    xs: Vec<Vec<Series>>,
    ys: Vec<Vec<Series>>,
) -> (Vec<Vec<Series>>, Vec<Vec<Series>>) {
    let mut ys = ys.into_iter();
    let mut by_item = Vec::with_capacity(items.len());
    let mut y_of_item = Vec::with_capacity(items.len());
    for (item, x_series) in items.iter().zip(xs) {
        if !item.function.takes_two() {
            by_item.push(x_series);
            y_of_item.push(Vec::new());
            continue;
        }
        let y_series = ys.next().expect("one expansion of y per MAX_BY/MIN_BY");
        let (mut kept_x, mut kept_y) = (Vec::new(), Vec::new());
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
                kept_y.push(y);
            }
        }
        by_item.push(kept_x);
        y_of_item.push(kept_y);
    }
    (by_item, y_of_item)
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
    let Some(slide) = cut.slide else {
        return match w.index(time) {
            Some(i) => i..i + 1,
            None => 0..0,
        };
    };
    let since = i128::from(time) - i128::from(w.start);
    let (step, interval) = (i128::from(slide.step), i128::from(slide.interval));
    if since < 0 {
        return 0..0;
    }
    // Row r's window is [start + r·step, start + r·step + interval).
    let last = since / step;
    let first = ((since - interval + 1).max(0) + step - 1) / step;
    let clamp = |r: i128| usize::try_from(r).unwrap_or(usize::MAX).min(slide.rows);
    clamp(first)..clamp(last + 1)
}

/// Appends each MAX_BY and MIN_BY column's slot to its device's partials (`[device][series]
/// [row]`, rows as the result has them), in column order, reading each device's rows that
/// `query`'s filter keeps; what the slots hold is charged to `charge` and added to `held`.
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
    let columns: Vec<&Column> = plan.columns.iter().filter(|c| c.by.is_some()).collect();
    let fixed = partials_bytes(rows, columns.len());
    charge.add(fixed)?;
    *held += fixed;
    let referenced = match query.filter {
        Some(expr) => query::referenced_series(backend, query.from, expr).await?,
        None => Vec::new(),
    };
    for (device, slots) in partials.iter_mut().enumerate() {
        let mine: Vec<&ByInput> = columns
            .iter()
            .filter(|c| c.device == device)
            .filter_map(|c| c.by.as_ref())
            .collect();
        if mine.is_empty() {
            continue;
        }
        let mut best: Vec<Vec<Option<Best>>> = vec![vec![None; rows]; mine.len()];
        if let Some(windows) = cut.call() {
            let name = &plan.reads[device].0;
            let refs: Vec<Series> = referenced
                .iter()
                .filter(|r| r.device == *name)
                .cloned()
                .collect();
            let read = join::with_referenced(plan.series_of(device), &refs);
            let filter = match query.filter {
                Some(expr) => Some(Filter::over(expr, &read, &refs)?),
                None => None,
            };
            let greatest = columns
                .iter()
                .filter(|c| c.device == device)
                .map(|c| c.function == crate::AggregateFunction::MaxBy)
                .collect::<Vec<_>>();
            let fold = |row: Vec<_>, _: &mut ResultCharge| {
                let Some(Some(Value::Int64(time))) = row.first() else {
                    unreachable!("a joined row starts with its time");
                };
                let time = *time;
                for (k, input) in mine.iter().enumerate() {
                    let Some(y) = &row[1 + input.y] else {
                        continue;
                    };
                    let wanted = if greatest[k] {
                        Ordering::Greater
                    } else {
                        Ordering::Less
                    };
                    for r in rows_at(cut, time) {
                        let better = best[k][r]
                            .as_ref()
                            .is_none_or(|b| order(y, &b.y) == Some(wanted));
                        if better && order(y, y).is_some() {
                            let x = match input.x {
                                None => Some(Value::Int64(time)),
                                Some(x) => row[1 + x].clone(),
                            };
                            best[k][r] = Some(Best { y: y.clone(), x });
                        }
                    }
                }
                Ok(true)
            };
            let span = windows.range();
            let range = TimeRange {
                from: span.start,
                to: span.end,
            };
            join::scan(backend, &read, range, usize::MAX, filter, charge, fold).await?;
        }
        for column in best {
            let slot: Vec<Partial> = column
                .into_iter()
                .map(|b| match b {
                    None => Partial::default(),
                    Some(b) => Partial {
                        count: 1,
                        first: b.x.map(|x| (0, x)),
                        ..Partial::default()
                    },
                })
                .collect();
            let heap: usize = slot.iter().map(partial_heap_bytes).sum();
            charge.add(heap)?;
            *held += heap;
            slots.push(slot);
        }
    }
    Ok(())
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
