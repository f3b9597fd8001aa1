//! Aggregate queries of the tree model: IoTDB's aggregations of a device's series over the
//! WHERE range, or in GROUP BY's windows. The backend answers one [`Partial`] per series and
//! window where the data is ([`Backend::aggregate`], one call for every series the query
//! names); each column is finished here from its series' partials. No raw point is read.
//!
//! Shapes are IoTDB 2.x's: without GROUP BY one row and no time column; with it a `Time` column
//! (each window's start) and one row per window in order, empty windows included (COUNT 0,
//! every other function NULL). A column is named `count(root.sg.d1.s1)`; `*` is every series of
//! the device, and a series that does not exist is left out (none at all: an empty result).
//!
//! GROUP BY's windows keep their boundaries when a WHERE range cuts them: only the points in
//! both ranges are aggregated (the WHERE range is the windows' visible range). Under a value
//! filter the rows it keeps are read raw and folded here ([`filtered`]): statistics cannot say
//! which points a filter keeps.

use std::ops::Range;

use common::aggregate::{Partial, Windows};
use common::{DataType, StatusCode, Value};

use super::analyze::{self, Series};
use super::budget::{value_heap_bytes, ResultCharge};
use super::fill;
use super::{Backend, Cell, ExecError, ExecResult, Outcome, RESULT_ROWS_MAX, TIME_COLUMN};
use crate::expr::Expr;
use crate::{
    AggregateFunction, AggregateItem, Fill, GroupByTime, PathPattern, RowWindow, TimeRange,
};

mod filtered;
mod having;
mod tags;

/// An aggregate query, as the statement gives it.
#[derive(Clone, Copy, Debug)]
pub(super) struct AggregateQuery<'q> {
    pub(super) from: &'q [PathPattern],
    pub(super) items: &'q [AggregateItem],
    /// The WHERE clause's time range.
    pub(super) range: TimeRange,
    /// The WHERE clause's value filter.
    pub(super) filter: Option<&'q Expr>,
    pub(super) group_by: Option<GroupByTime>,
    /// GROUP BY LEVEL's levels.
    pub(super) levels: Option<&'q [usize]>,
    /// GROUP BY TAGS' keys.
    pub(super) tags: Option<&'q [String]>,
    /// The windows kept and their order; the columns kept (SLIMIT, SOFFSET).
    pub(super) rows: RowWindow,
    /// FILL's way.
    pub(super) fill: Option<&'q Fill>,
    /// HAVING's condition.
    pub(super) having: Option<&'q Expr>,
    pub(super) align_by_device: bool,
}

/// `SELECT <aggregations> FROM paths [WHERE ...] [GROUP BY ...] [ALIGN BY DEVICE]`; the
/// partials are charged to `charge` while they are held.
pub(super) async fn select_aggregate<B: Backend>(
    backend: &B,
    query: &AggregateQuery<'_>,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    let names: Vec<String> = query.items.iter().map(|i| i.measurement.clone()).collect();
    let by_item = analyze::expand(backend, query.from, &names).await?;
    answer(backend, query, by_item, charge).await
}

/// IoTDB's aggregation query by path (`executeAggregationQueryV2`): `functions[i]` of the series
/// `paths[i]`, over `range`, in `group_by`'s windows when set.
#[derive(Clone, Debug, PartialEq)]
pub struct PathAggregation {
    /// Full series paths.
    pub paths: Vec<String>,
    /// One function per path.
    pub functions: Vec<AggregateFunction>,
    /// The points aggregated.
    pub range: TimeRange,
    /// The windows, if any.
    pub group_by: Option<GroupByTime>,
}

/// [`PathAggregation`]'s result, in the shape of the same SELECT (`count(root.sg.d1.s1)`; a path
/// that is no series is left out); 700 when the lists differ in length.
pub async fn aggregate_paths<B: Backend>(
    backend: &B,
    request: &PathAggregation,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    if request.paths.len() != request.functions.len() {
        return Err(ExecError::refused(
            StatusCode::IllegalParameter,
            format!(
                "{} paths and {} aggregations: give one aggregation per path",
                request.paths.len(),
                request.functions.len()
            ),
        ));
    }
    let found = analyze::resolve_paths(backend, &request.paths).await?;
    let by_item: Vec<Vec<Series>> = request
        .paths
        .iter()
        .map(|path| {
            found
                .iter()
                .filter(|s| s.path() == *path)
                .take(1)
                .cloned()
                .collect()
        })
        .collect();
    let items: Vec<AggregateItem> = request
        .functions
        .iter()
        .map(|&function| AggregateItem {
            function,
            measurement: String::new(),
            alias: None,
        })
        .collect();
    let query = AggregateQuery {
        from: &[],
        items: &items,
        range: request.range,
        filter: None,
        group_by: request.group_by,
        levels: None,
        tags: None,
        rows: RowWindow::default(),
        fill: None,
        having: None,
        align_by_device: false,
    };
    let outcome = answer(backend, &query, by_item, charge).await?;
    charge.settle(super::outcome_bytes(&outcome))?;
    Ok(outcome)
}

/// The result of `query` over the series each of its items reads (`by_item`).
async fn answer<B: Backend>(
    backend: &B,
    query: &AggregateQuery<'_>,
    by_item: Vec<Vec<Series>>,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    let mut cut = Cut::new(query.range, query.group_by)?;
    if (query.align_by_device || query.levels.is_some() || query.tags.is_some())
        && query.items.iter().any(|i| i.alias.is_some())
    {
        return Err(ExecError::refused(
            StatusCode::UnsupportedOperation,
            "AS on an aggregation with ALIGN BY DEVICE or GROUP BY LEVEL or TAGS is not supported \
             yet",
        ));
    }
    let plan = Plan::new(query.items, series_window(by_item, query.rows))?;
    cut.moments = plan.columns.iter().any(|c| c.function.needs_moments());
    if plan.columns.is_empty() {
        return Ok(Outcome::query(Vec::new(), Vec::new()));
    }
    let keys = if query.align_by_device || query.tags.is_some() {
        Some(plan.keys()?)
    } else {
        None
    };
    let tag_groups = match query.tags {
        Some(tags) => Some(tags::TagGroups::new(backend, query.from, &plan, tags).await?),
        None => None,
    };
    let groups = match query.levels {
        Some(levels) => Some(plan.groups(levels)?),
        None => None,
    };
    let mut held = 0;
    let partials = match query.filter {
        None => fetch(backend, &plan.reads, &cut, charge, &mut held).await,
        Some(expr) => filtered::fetch(backend, &plan, query, expr, &cut, charge, &mut held).await,
    }
    .map(|units| cut.rows_of(units));
    let outcome = partials.and_then(|partials| {
        let outcome = match (&keys, &groups) {
            (Some(keys), _) if tag_groups.is_some() => {
                let tags = tag_groups.as_ref().expect("checked");
                tags.finish(&plan, keys, &cut, &partials)
            }
            (Some(keys), _) => plan.finish_by_device(keys, &cut, &partials),
            (None, Some(groups)) => plan.finish_by_level(groups, &cut, &partials),
            (None, None) => plan.finish(&cut, &partials),
        };
        window_rows(outcome, query, cut.rows())
    });
    charge.release(held);
    outcome
}

/// The series SOFFSET and SLIMIT keep of each item's (counted over every item's in turn).
fn series_window(by_item: Vec<Vec<Series>>, rows: RowWindow) -> Vec<Vec<Series>> {
    if rows.series_offset == 0 && rows.series_limit.is_none() {
        return by_item;
    }
    let items = by_item.len();
    let flat: Vec<(usize, Series)> = by_item
        .into_iter()
        .enumerate()
        .flat_map(|(i, series)| series.into_iter().map(move |s| (i, s)))
        .collect();
    let mut kept = vec![Vec::new(); items];
    for (i, s) in rows.series(flat) {
        kept[i].push(s);
    }
    kept
}

/// The rows of a finished result that `query` keeps, its rows running in windows of
/// `per_device` (each device's, aligned by device; all of them otherwise): newest window first
/// within each run with ORDER BY TIME DESC, those HAVING keeps, FILL within each device, then
/// OFFSET and LIMIT over the whole result.
fn window_rows(
    mut outcome: Outcome,
    query: &AggregateQuery<'_>,
    per_device: usize,
) -> ExecResult<Outcome> {
    let rows = query.rows;
    if rows.descending && per_device > 0 {
        for run in outcome.rows.chunks_mut(per_device) {
            run.reverse();
        }
    }
    if let Some(condition) = query.having {
        having::keep(&mut outcome, condition)?;
    }
    if let Some(how) = query.fill {
        fill::fill(&mut outcome, how);
    }
    outcome.rows = rows.page(std::mem::take(&mut outcome.rows));
    Ok(outcome)
}

/// One column of the result: a function of one series.
#[derive(Debug)]
struct Column {
    function: AggregateFunction,
    /// The name the query used: the measurement, or its alias.
    label: String,
    /// The column's name given with `AS`, if any.
    alias: Option<String>,
    /// The series' device: its index among the devices asked of the backend.
    device: usize,
    /// The series' index among its device's measurements asked of the backend.
    series: usize,
    data_type: DataType,
}

impl Column {
    /// The column's type, as IoTDB's `getBuiltinAggregationDataType`.
    fn output_type(&self) -> DataType {
        output_type(self.function, self.data_type)
    }

    /// The column's cell for one window's partial of its series.
    fn cell(&self, p: &Partial) -> Cell {
        finish(self.function, self.data_type, p)
    }
}

/// The type of `function` over a series of `data_type`, as IoTDB's
/// `getBuiltinAggregationDataType`.
pub(super) fn output_type(function: AggregateFunction, data_type: DataType) -> DataType {
    match function {
        AggregateFunction::Count
        | AggregateFunction::MinTime
        | AggregateFunction::MaxTime
        | AggregateFunction::TimeDuration => DataType::Int64,
        f if f.needs_moments() => DataType::Double,
        AggregateFunction::Sum | AggregateFunction::Avg => DataType::Double,
        _ => data_type,
    }
}

/// `function` finished from the partial `p` of a series of `data_type`.
pub(super) fn finish(function: AggregateFunction, data_type: DataType, p: &Partial) -> Cell {
    // A value of another type (the series was dropped and created again with another type
    // while the query ran) is left out rather than mistyping the column.
    let of_series = |v: Option<&Value>| v.filter(|v| v.data_type() == data_type).cloned();
    match function {
        AggregateFunction::Count => Some(Value::Int64(
            i64::try_from(p.count).expect("fewer points than i64::MAX"),
        )),
        AggregateFunction::Sum => (p.count > 0).then_some(Value::Double(p.sum)),
        AggregateFunction::Avg => p.avg().map(Value::Double),
        AggregateFunction::MinValue => of_series(p.min.as_ref()),
        AggregateFunction::MaxValue => of_series(p.max.as_ref()),
        AggregateFunction::Extreme => of_series(p.extreme().as_ref()),
        AggregateFunction::FirstValue => of_series(p.first.as_ref().map(|(_, v)| v)),
        AggregateFunction::LastValue => of_series(p.last.as_ref().map(|(_, v)| v)),
        AggregateFunction::MinTime => p.first.as_ref().map(|(t, _)| Value::Int64(*t)),
        AggregateFunction::MaxTime => p.last.as_ref().map(|(t, _)| Value::Int64(*t)),
        AggregateFunction::TimeDuration => match (&p.first, &p.last) {
            (Some((first, _)), Some((last, _))) => Some(Value::Int64(last.wrapping_sub(*first))),
            _ => None,
        },
        AggregateFunction::VarPop => p.var_pop().map(Value::Double),
        AggregateFunction::Variance | AggregateFunction::VarSamp => p.var_samp().map(Value::Double),
        AggregateFunction::StddevPop => p.var_pop().map(|v| Value::Double(v.sqrt())),
        AggregateFunction::Stddev | AggregateFunction::StddevSamp => {
            p.var_samp().map(|v| Value::Double(v.sqrt()))
        }
    }
}

/// 700 unless `function` takes a series of `data_type`, as IoTDB: SUM, AVG, EXTREME and the
/// deviations and variances take numbers (INT32, INT64, FLOAT, DOUBLE), MIN_VALUE and MAX_VALUE
/// numbers, TIMESTAMP and DATE; the others every type.
pub(super) fn check_type(
    function: AggregateFunction,
    path: &str,
    data_type: DataType,
) -> ExecResult<()> {
    use DataType::{Date, Double, Float, Int32, Int64, Timestamp};
    let (takes, types) = match function {
        f if f.needs_moments() => (
            matches!(data_type, Int32 | Int64 | Float | Double),
            "INT32, INT64, FLOAT or DOUBLE",
        ),
        AggregateFunction::Sum | AggregateFunction::Avg | AggregateFunction::Extreme => (
            matches!(data_type, Int32 | Int64 | Float | Double),
            "INT32, INT64, FLOAT or DOUBLE",
        ),
        AggregateFunction::MinValue | AggregateFunction::MaxValue => (
            matches!(data_type, Int32 | Int64 | Float | Double | Timestamp | Date),
            "INT32, INT64, FLOAT, DOUBLE, TIMESTAMP or DATE",
        ),
        _ => (true, ""),
    };
    if takes {
        return Ok(());
    }
    let name = function.name();
    Err(ExecError::refused(
        StatusCode::IllegalParameter,
        format!(
            "{name}({path}): {} takes a series of {types}, and {path} is {}",
            name.to_ascii_uppercase(),
            data_type.name()
        ),
    ))
}

/// What an aggregate query asks of the backend and how it makes its columns.
#[derive(Debug)]
struct Plan {
    /// Each device asked and its measurements, each once, in first-seen order.
    reads: Vec<(String, Vec<String>)>,
    /// The result's columns, in the order of the items and their series.
    columns: Vec<Column>,
}

/// A column of an aligned-by-device result: a function of a measurement name, and its type.
type Key = (AggregateFunction, String, DataType);

/// A column of a GROUP BY LEVEL result: its name and the columns merged into it.
#[derive(Debug)]
struct Group {
    name: String,
    columns: Vec<usize>,
}

/// `path` as GROUP BY LEVEL names it: the nodes at `levels` (and `root`, and the measurement)
/// kept, every other one `*`.
fn level_path(path: &str, levels: &[usize]) -> String {
    let nodes: Vec<&str> = path.split('.').collect();
    let last = nodes.len() - 1;
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if i == 0 || i == last || levels.contains(&i) {
                *n
            } else {
                "*"
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

impl Plan {
    /// The plan of `items`, each with the series it reads (`by_item`); 700 when a function does
    /// not take a series' type.
    fn new(items: &[AggregateItem], by_item: Vec<Vec<Series>>) -> ExecResult<Plan> {
        assert_eq!(items.len(), by_item.len(), "one list of series per item");
        let mut plan = Plan {
            reads: Vec::new(),
            columns: Vec::new(),
        };
        for (item, series) in items.iter().zip(by_item) {
            if let Some(alias) = item.alias.as_ref().filter(|_| series.len() > 1) {
                return Err(analyze::alias_of_many(alias, series.len()));
            }
            for s in series {
                check_type(item.function, &s.path(), s.data_type)?;
                let device = match plan.reads.iter().position(|(d, _)| *d == s.device) {
                    Some(i) => i,
                    None => {
                        plan.reads.push((s.device.clone(), Vec::new()));
                        plan.reads.len() - 1
                    }
                };
                let measurements = &mut plan.reads[device].1;
                let index = match measurements.iter().position(|m| *m == s.measurement) {
                    Some(i) => i,
                    None => {
                        measurements.push(s.measurement.clone());
                        measurements.len() - 1
                    }
                };
                plan.columns.push(Column {
                    function: item.function,
                    label: s.label,
                    alias: item.alias.clone(),
                    device,
                    series: index,
                    data_type: s.data_type,
                });
            }
        }
        Ok(plan)
    }

    /// The series read of device `device` (an index into `reads`), in `reads`' order.
    fn series_of(&self, device: usize) -> Vec<Series> {
        let (name, measurements) = &self.reads[device];
        measurements
            .iter()
            .enumerate()
            .map(|(m, measurement)| Series {
                device: name.clone(),
                label: measurement.clone(),
                measurement: measurement.clone(),
                data_type: self
                    .columns
                    .iter()
                    .find(|c| c.device == device && c.series == m)
                    .expect("every measurement read is some column's")
                    .data_type,
                column: None,
            })
            .collect()
    }

    /// The columns of the result aligned by device: each function of a name once; 700 when a
    /// column's type differs between devices.
    fn keys(&self) -> ExecResult<Vec<Key>> {
        let mut keys: Vec<Key> = Vec::new();
        for c in &self.columns {
            let output = c.output_type();
            match keys.iter().find(|k| k.0 == c.function && k.1 == c.label) {
                Some(k) if k.2 != output => {
                    return Err(ExecError::refused(
                        StatusCode::IllegalParameter,
                        format!(
                            "ALIGN BY DEVICE: {}({}) is {} on {} but {} on another device; a \
                             column takes one type",
                            c.function.name(),
                            c.label,
                            output.name(),
                            self.reads[c.device].0,
                            k.2.name()
                        ),
                    ))
                }
                Some(_) => {}
                None => keys.push((c.function, c.label.clone(), output)),
            }
        }
        Ok(keys)
    }

    /// GROUP BY LEVEL's columns: the columns of one function whose paths agree at `levels`,
    /// merged, in first-seen order; 700 when a merged column's series differ in type where the
    /// function answers values of the series' type.
    fn groups(&self, levels: &[usize]) -> ExecResult<Vec<Group>> {
        let mut groups: Vec<Group> = Vec::new();
        for (i, c) in self.columns.iter().enumerate() {
            let path = level_path(&format!("{}.{}", self.reads[c.device].0, c.label), levels);
            let name = format!("{}({path})", c.function.name());
            match groups.iter_mut().find(|g| g.name == name) {
                Some(g) => {
                    let first = &self.columns[g.columns[0]];
                    if first.output_type() != c.output_type() {
                        return Err(ExecError::refused(
                            StatusCode::IllegalParameter,
                            format!(
                                "GROUP BY LEVEL: {name} merges series of {} and {}",
                                first.data_type.name(),
                                c.data_type.name()
                            ),
                        ));
                    }
                    g.columns.push(i);
                }
                None => groups.push(Group {
                    name,
                    columns: vec![i],
                }),
            }
        }
        Ok(groups)
    }

    /// The result of GROUP BY LEVEL: as [`Plan::finish`], one column per [`Group`], each window's
    /// partials of its columns merged.
    fn finish_by_level(
        &self,
        groups: &[Group],
        cut: &Cut,
        partials: &[Vec<Vec<Partial>>],
    ) -> Outcome {
        let mut header = Vec::with_capacity(groups.len() + 1);
        if cut.windows.is_some() {
            header.push((TIME_COLUMN.to_string(), DataType::Int64));
        }
        header.extend(
            groups
                .iter()
                .map(|g| (g.name.clone(), self.columns[g.columns[0]].output_type())),
        );
        let rows = (0..cut.rows())
            .map(|row| {
                let mut cells = Vec::with_capacity(header.len());
                if let Some(w) = cut.windows {
                    cells.push(Some(Value::Int64(cut.row_time(&w, row))));
                }
                cells.extend(groups.iter().map(|g| {
                    let mut merged = Partial::default();
                    for &i in &g.columns {
                        let c = &self.columns[i];
                        merged.merge(&partials[c.device][c.series][row]);
                    }
                    self.columns[g.columns[0]].cell(&merged)
                }));
                cells
            })
            .collect();
        Outcome::query(header, rows)
    }

    /// The result: a `Time` column with GROUP BY, then one column per [`Column`]
    /// (`count(root.sg.d1.s1)`), one row per window.
    fn finish(&self, cut: &Cut, partials: &[Vec<Vec<Partial>>]) -> Outcome {
        let mut header = Vec::with_capacity(self.columns.len() + 1);
        if cut.windows.is_some() {
            header.push((TIME_COLUMN.to_string(), DataType::Int64));
        }
        header.extend(self.columns.iter().map(|c| {
            let device = &self.reads[c.device].0;
            let name = match &c.alias {
                Some(alias) => alias.clone(),
                None => format!("{}({device}.{})", c.function.name(), c.label),
            };
            (name, c.output_type())
        }));
        let rows = (0..cut.rows())
            .map(|row| {
                let mut cells = Vec::with_capacity(header.len());
                if let Some(w) = cut.windows {
                    cells.push(Some(Value::Int64(cut.row_time(&w, row))));
                }
                cells.extend(
                    self.columns
                        .iter()
                        .map(|c| c.cell(&partials[c.device][c.series][row])),
                );
                cells
            })
            .collect();
        Outcome::query(header, rows)
    }

    /// The result aligned by device: `Time` with GROUP BY, `Device`, then one column per key
    /// (`count(s1)`); each device's rows in turn, devices in ascending order. A device without
    /// a key's series has NULL there.
    fn finish_by_device(&self, keys: &[Key], cut: &Cut, partials: &[Vec<Vec<Partial>>]) -> Outcome {
        let mut header = Vec::with_capacity(keys.len() + 2);
        if cut.windows.is_some() {
            header.push((TIME_COLUMN.to_string(), DataType::Int64));
        }
        header.push((super::DEVICE_COLUMN.to_string(), DataType::Text));
        header.extend(
            keys.iter()
                .map(|(f, label, t)| (format!("{}({label})", f.name()), *t)),
        );
        let mut devices: Vec<usize> = (0..self.reads.len()).collect();
        devices.sort_by(|a, b| self.reads[*a].0.cmp(&self.reads[*b].0));
        let mut rows = Vec::with_capacity(devices.len() * cut.rows());
        for device in devices {
            let of_key: Vec<Option<&Column>> = keys
                .iter()
                .map(|(f, label, _)| {
                    self.columns
                        .iter()
                        .find(|c| c.device == device && c.function == *f && c.label == *label)
                })
                .collect();
            let name = Value::Text(self.reads[device].0.clone());
            let of_device = &partials[device];
            rows.extend((0..cut.rows()).map(|row| {
                let mut cells = Vec::with_capacity(header.len());
                if let Some(w) = cut.windows {
                    cells.push(Some(Value::Int64(cut.row_time(&w, row))));
                }
                cells.push(Some(name.clone()));
                cells.extend(
                    of_key
                        .iter()
                        .map(|c| c.and_then(|c| c.cell(&of_device[c.series][row]))),
                );
                cells
            }));
        }
        Outcome::query(header, rows)
    }
}

/// The rows of an aggregate query and the points they take.
#[derive(Clone, Debug, PartialEq)]
struct Cut {
    /// GROUP BY's windows, one row each; `None`: one row, without GROUP BY. With a sliding step,
    /// the units the rows are made of ([`Slide`]).
    windows: Option<Windows>,
    /// GROUP BY's step differs from its interval: each row merges the units its window covers.
    slide: Option<Slide>,
    /// GROUP BY was written left-open: a row is labelled with its window's right end.
    left_open: bool,
    /// The points aggregated: the WHERE range, within GROUP BY's.
    span: Range<i64>,
    /// A function needs the second moment: the backend decodes every page.
    moments: bool,
}

impl Cut {
    /// The cut of a query; 700 when GROUP BY makes more than [`RESULT_ROWS_MAX`] windows.
    fn new(range: TimeRange, group_by: Option<GroupByTime>) -> ExecResult<Cut> {
        let Some(g) = group_by else {
            return Ok(Cut {
                windows: None,
                slide: None,
                left_open: false,
                span: range.from..range.to,
                moments: false,
            });
        };
        if g.start >= g.end || g.interval_ms == 0 || g.step_ms == 0 {
            return Err(ExecError::refused(
                StatusCode::IllegalParameter,
                format!(
                    "GROUP BY ([{}, {}), {}ms, {}ms) has no window: the start must be before the \
                     end, and the interval and the step positive",
                    g.start, g.end, g.interval_ms, g.step_ms
                ),
            ));
        }
        let span = (i128::from(g.end) - i128::from(g.start)) as u128;
        let slide = if g.step_ms == g.interval_ms {
            None
        } else {
            Some(Slide::new(&g, span)?)
        };
        let unit = slide.map_or(g.interval_ms, |s| s.unit);
        let Some(windows) = Windows::new(g.start..g.end, unit, RESULT_ROWS_MAX as u64) else {
            let count = span.div_ceil(u128::from(unit));
            let message = match slide {
                None => format!(
                    "GROUP BY ([{}, {}), {}ms) makes {count} windows, more than the \
                     {RESULT_ROWS_MAX} rows a query may return; widen the interval or narrow \
                     the range",
                    g.start, g.end, g.interval_ms
                ),
                Some(_) => format!(
                    "GROUP BY ([{}, {}), {}ms, {}ms) is aggregated in units of {unit}ms (the \
                     greatest common divisor of the interval and the step): {count} of them, \
                     more than {RESULT_ROWS_MAX}; choose an interval and a step with a larger \
                     common divisor, or narrow the range",
                    g.start, g.end, g.interval_ms, g.step_ms
                ),
            };
            return Err(ExecError::refused(StatusCode::IllegalParameter, message));
        };
        Ok(Cut {
            windows: Some(windows),
            slide,
            left_open: g.left_open,
            span: range.from.max(g.start)..range.to.min(g.end),
            moments: false,
        })
    }

    /// The time of row `row` of a GROUP BY result: its window's start, or, written left-open, the
    /// window's last millisecond (its right end as written).
    fn row_time(&self, w: &Windows, row: usize) -> i64 {
        let (step, interval) = self
            .slide
            .map_or((w.interval, w.interval), |s| (s.step, s.interval));
        let start = i128::from(w.start) + row as i128 * i128::from(step);
        let at = if self.left_open {
            (start + i128::from(interval)).min(i128::from(w.end)) - 1
        } else {
            start
        };
        i64::try_from(at).expect("a window lies within i64")
    }

    /// Partials the backend answers per series: one per window, or per unit when sliding.
    fn call_rows(&self) -> usize {
        self.windows.map_or(1, |w| {
            usize::try_from(w.count()).expect("at most RESULT_ROWS_MAX windows")
        })
    }

    /// Each series' per-unit partials merged into its rows' windows (as they are without a
    /// sliding step).
    fn rows_of(&self, partials: Vec<Vec<Vec<Partial>>>) -> Vec<Vec<Vec<Partial>>> {
        let Some(slide) = self.slide else {
            return partials;
        };
        let per_row = |units: Vec<Partial>| -> Vec<Partial> {
            (0..slide.rows)
                .map(|row| {
                    let mut merged = Partial::default();
                    for unit in &units[slide.units(row, units.len())] {
                        merged.merge(unit);
                    }
                    merged
                })
                .collect()
        };
        partials
            .into_iter()
            .map(|device| device.into_iter().map(per_row).collect())
            .collect()
    }

    /// Rows of the result.
    fn rows(&self) -> usize {
        match self.slide {
            Some(slide) => slide.rows,
            None => self.call_rows(),
        }
    }

    /// The one backend call that covers the span, `None` when the span is empty: GROUP BY's
    /// windows with the span as their visible range, or one window over the span.
    fn call(&self) -> Option<Windows> {
        let span = self.span.clone();
        if span.is_empty() {
            return None;
        }
        let windows = match self.windows {
            Some(w) => w.visible(span),
            None => Windows::whole(span).expect("a span that is not empty"),
        };
        Some(windows.with_moments(self.moments))
    }
}

/// GROUP BY's windows when they slide by a step other than their interval: the backend
/// aggregates units of the greatest common divisor of the two, which tile every window, and each
/// row merges its window's units (partials of disjoint points merge exactly).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slide {
    interval: u64,
    step: u64,
    /// The units' width: gcd(interval, step).
    unit: u64,
    /// Windows: one for every `start + k·step < end`.
    rows: usize,
}

impl Slide {
    /// 700 when the windows are more than [`RESULT_ROWS_MAX`].
    fn new(g: &GroupByTime, span: u128) -> ExecResult<Slide> {
        let (interval, step) = (g.interval_ms, g.step_ms);
        let rows = span.div_ceil(u128::from(step));
        if rows > RESULT_ROWS_MAX as u128 {
            return Err(ExecError::refused(
                StatusCode::IllegalParameter,
                format!(
                    "GROUP BY ([{}, {}), {interval}ms, {step}ms) makes {rows} windows, more than \
                     the {RESULT_ROWS_MAX} rows a query may return; widen the step or narrow the \
                     range",
                    g.start, g.end
                ),
            ));
        }
        let (mut a, mut b) = (interval, step);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        Ok(Slide {
            interval,
            step,
            unit: a,
            rows: rows as usize,
        })
    }

    /// The units of row `row`'s window among `count`.
    fn units(&self, row: usize, count: usize) -> Range<usize> {
        let per = |ms: u64| usize::try_from(ms / self.unit).unwrap_or(usize::MAX);
        let first = row.saturating_mul(per(self.step)).min(count);
        first..first.saturating_add(per(self.interval)).min(count)
    }
}

/// The bytes of `series` partials in each of `rows` windows, besides their values.
fn partials_bytes(rows: usize, series: usize) -> usize {
    rows.saturating_mul(series)
        .saturating_mul(std::mem::size_of::<Partial>())
}

/// The heap bytes of a partial's values besides the partial.
fn partial_heap_bytes(p: &Partial) -> usize {
    let values = [p.min.as_ref(), p.max.as_ref()]
        .into_iter()
        .chain([p.first.as_ref(), p.last.as_ref()].map(|f| f.map(|(_, v)| v)));
    values.flatten().map(value_heap_bytes).sum()
}

/// Partials one backend call asks for at most (series × windows): a call's answer stays well
/// inside a peer message, however many devices a query reads.
const CALL_PARTIALS_MAX: usize = 64 * 1024;

/// The reads of `reads` in consecutive batches of at most [`CALL_PARTIALS_MAX`] partials in
/// `rows` windows (a device whose series alone pass it is a batch of its own).
fn batches(reads: &[(String, Vec<String>)], rows: usize) -> Vec<&[(String, Vec<String>)]> {
    let mut out = Vec::new();
    let (mut start, mut partials) = (0, 0usize);
    for (i, (_, measurements)) in reads.iter().enumerate() {
        let mine = measurements.len().saturating_mul(rows.max(1));
        if i > start && partials.saturating_add(mine) > CALL_PARTIALS_MAX {
            out.push(&reads[start..i]);
            (start, partials) = (i, 0);
        }
        partials = partials.saturating_add(mine);
    }
    if start < reads.len() {
        out.push(&reads[start..]);
    }
    out
}

/// Each device's measurements' partial in each row (`[device][measurement][row]`), from the
/// backend, many devices a call ([`batches`]); what they hold is charged to `charge` and added
/// to `held`, for the caller to give back.
async fn fetch<B: Backend>(
    backend: &B,
    reads: &[(String, Vec<String>)],
    cut: &Cut,
    charge: &mut ResultCharge,
    held: &mut usize,
) -> ExecResult<Vec<Vec<Vec<Partial>>>> {
    let rows = cut.call_rows();
    let series: usize = reads.iter().map(|(_, m)| m.len()).sum();
    // Charged before the rows are asked for, so a result too large is refused before it is
    // computed (or, with nothing to ask, its empty rows are).
    let fixed = partials_bytes(rows, series);
    charge.add(fixed)?;
    *held += fixed;
    let Some(windows) = cut.call() else {
        return Ok(reads
            .iter()
            .map(|(_, m)| vec![vec![Partial::default(); rows]; m.len()])
            .collect());
    };
    let mut all = Vec::with_capacity(reads.len());
    for batch in batches(reads, rows) {
        let answer = backend.aggregate(batch, windows).await?;
        let shaped = answer.len() == batch.len()
            && answer.iter().zip(batch).all(|(device, (_, measurements))| {
                device.len() == measurements.len() && device.iter().all(|a| a.len() == rows)
            });
        if !shaped {
            return Err(ExecError::refused(
                StatusCode::InternalServerError,
                format!(
                    "the aggregate of {} devices in {rows} windows came back with another shape",
                    batch.len()
                ),
            ));
        }
        let heap: usize = answer
            .iter()
            .flatten()
            .flatten()
            .map(partial_heap_bytes)
            .sum();
        charge.add(heap)?;
        *held += heap;
        all.extend(answer);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_keep_order_and_stay_under_the_bound() {
        let read = |d: usize, n: usize| (format!("root.sg.d{d}"), vec!["s".to_string(); n]);
        let reads: Vec<_> = (0..100).map(|d| read(d, 10)).collect();
        // 10 series × 1,000 windows a device: 6 devices a call.
        let cut = batches(&reads, 1000);
        assert_eq!(cut.iter().map(|b| b.len()).sum::<usize>(), 100);
        assert!(
            cut.iter().all(|b| b.len() == 6 || b.len() == 100 % 6),
            "{:?}",
            cut.len()
        );
        assert_eq!(cut.concat(), reads);
        // Few windows: one call; a device over the bound alone: its own call.
        assert_eq!(batches(&reads, 1).len(), 1);
        let wide = vec![read(0, 1), read(1, 100_000), read(2, 1)];
        assert_eq!(
            batches(&wide, 1)
                .iter()
                .map(|b| b.len())
                .collect::<Vec<_>>(),
            [1, 1, 1]
        );
        assert!(batches(&[], 10).is_empty());
    }

    fn group_by(start: i64, end: i64, interval_ms: u64) -> Option<GroupByTime> {
        Some(GroupByTime {
            start,
            end,
            interval_ms,
            step_ms: interval_ms,
            left_open: false,
        })
    }

    fn calls(range: TimeRange, g: Option<GroupByTime>) -> Vec<(Range<i64>, u64, usize)> {
        Cut::new(range, g)
            .expect("a cut")
            .call()
            .into_iter()
            .map(|w| (w.range(), w.interval, 0))
            .collect()
    }

    #[test]
    fn a_where_range_is_the_visible_part_of_group_by_windows() {
        let r = |from, to| TimeRange { from, to };
        // No WHERE: one call over GROUP BY's windows.
        assert_eq!(
            calls(TimeRange::ALL, group_by(0, 1000, 100)),
            [(0..1000, 100, 0)]
        );
        // WHERE cuts the windows' visible range; they keep their boundaries (row 0 is the
        // window at 0 whatever WHERE says).
        assert_eq!(
            calls(r(150, 750), group_by(0, 1000, 100)),
            [(150..750, 100, 0)]
        );
        let cut = Cut::new(r(150, 750), group_by(0, 1000, 100)).unwrap();
        let w = cut.call().expect("a call");
        assert_eq!(
            (w.index(149), w.index(150), w.index(750)),
            (None, Some(1), None)
        );
        // Nothing in common: no call; without GROUP BY, the WHERE range whole.
        assert_eq!(calls(r(5000, 6000), group_by(0, 1000, 100)), []);
        assert_eq!(calls(r(3, 9), None), [(3..9, 6, 0)]);
        assert_eq!(calls(r(9, 3), None), []);
    }

    #[test]
    fn windows_past_the_row_bound_are_refused_naming_it() {
        let e = Cut::new(TimeRange::ALL, group_by(0, 2_000_001, 2)).unwrap_err();
        assert_eq!(e.code(), 700);
        assert!(e.to_string().contains("1000001 windows"), "{e}");
        assert!(e.to_string().contains(&RESULT_ROWS_MAX.to_string()), "{e}");
        let at_bound = Cut::new(TimeRange::ALL, group_by(0, 2_000_000, 2)).unwrap();
        assert_eq!(at_bound.rows(), RESULT_ROWS_MAX);
        assert!(Cut::new(TimeRange::ALL, group_by(5, 5, 1)).is_err());
        assert!(Cut::new(TimeRange::ALL, group_by(0, 5, 0)).is_err());
    }
}
