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

use common::aggregate::Partial;
use common::{DataType, StatusCode, Value};

use super::analyze::{self, Series};
use super::budget::{value_heap_bytes, ResultCharge};
use super::fill;
use super::{Backend, Cell, ExecError, ExecResult, Outcome, TIME_COLUMN};
use crate::expr::Expr;
use crate::{
    AggregateFunction, AggregateItem, Fill, GroupByTime, PathPattern, RowWindow, TimeRange,
};

mod by;
mod cut;
mod filtered;
mod having;
mod tags;

use cut::Cut;

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
    let mut names: Vec<String> = query.items.iter().map(|i| i.measurement.clone()).collect();
    // MAX_BY's and MIN_BY's second arguments, after the items.
    names.extend(query.items.iter().filter_map(|i| i.by.clone()));
    let mut by_item = analyze::expand(backend, query.from, &names).await?;
    let ys = by_item.split_off(query.items.len());
    let mut predicates = Vec::new();
    for count_if in query.items.iter().filter_map(|i| i.count_if.as_ref()) {
        let columns = count_if.predicate.columns();
        predicates.push(analyze::expand(backend, query.from, &columns).await?);
    }
    let (by_item, extra) = by::pair(query.items, by_item, ys, predicates);
    answer(backend, query, by_item, extra, charge).await
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
    let more_than_a_series =
        |f: &&AggregateFunction| f.takes_two() || **f == AggregateFunction::CountIf;
    if let Some(f) = request.functions.iter().find(more_than_a_series) {
        return Err(ExecError::refused(
            StatusCode::UnsupportedOperation,
            format!(
                "{} takes more than a series; ask it in SQL",
                f.name().to_ascii_uppercase()
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
            by: None,
            count_if: None,
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
    // MODE reads its series alone.
    let extra = by_item.iter().map(|s| vec![Vec::new(); s.len()]).collect();
    let outcome = answer(backend, &query, by_item, extra, charge).await?;
    charge.settle(super::outcome_bytes(&outcome))?;
    Ok(outcome)
}

/// The result of `query` over the series each of its items reads (`by_item`; for the columns
/// answered from rows, `extra` holds what else each reads: [`by::pair`]).
async fn answer<B: Backend>(
    backend: &B,
    query: &AggregateQuery<'_>,
    by_item: Vec<Vec<Series>>,
    extra: Vec<Vec<Vec<Series>>>,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    let mut cut = Cut::new(query.range, query.group_by)?;
    if (query.levels.is_some() || query.tags.is_some())
        && query.items.iter().any(|i| i.alias.is_some())
    {
        return Err(ExecError::refused(
            StatusCode::UnsupportedOperation,
            "AS on an aggregation with GROUP BY LEVEL or TAGS is not supported yet",
        ));
    }
    if (query.levels.is_some() || query.tags.is_some())
        && query.items.iter().any(|i| i.function.reads_rows())
    {
        return Err(ExecError::refused(
            StatusCode::UnsupportedOperation,
            "MAX_BY, MIN_BY, COUNT_IF and MODE with GROUP BY LEVEL or TAGS are not supported yet",
        ));
    }
    let (by_item, extra) = series_window(by_item, extra, query.rows);
    let plan = Plan::new(query.items, by_item, extra, query.align_by_device)?;
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
    let partials = match partials {
        Ok(mut partials) if plan.columns.iter().any(|c| c.rows.is_some()) => by::append(
            backend,
            &plan,
            query,
            &cut,
            charge,
            &mut held,
            &mut partials,
        )
        .await
        .map(|()| partials),
        other => other,
    };
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

/// The series SOFFSET and SLIMIT keep of each item's (counted over every item's in turn), with
/// what else each kept one reads ([`by::pair`]).
fn series_window(
    by_item: Vec<Vec<Series>>,
    extra: Vec<Vec<Vec<Series>>>,
    rows: RowWindow,
) -> (Vec<Vec<Series>>, Vec<Vec<Vec<Series>>>) {
    if rows.series_offset == 0 && rows.series_limit.is_none() {
        return (by_item, extra);
    }
    let items = by_item.len();
    let flat: Vec<(usize, Series, Option<Vec<Series>>)> = by_item
        .into_iter()
        .zip(extra)
        .enumerate()
        .flat_map(|(i, (series, extra))| {
            let mut extra = extra.into_iter();
            series.into_iter().map(move |s| (i, s, extra.next()))
        })
        .collect();
    let (mut kept, mut kept_extra) = (vec![Vec::new(); items], vec![Vec::new(); items]);
    for (i, s, e) in rows.series(flat) {
        kept[i].push(s);
        kept_extra[i].extend(e);
    }
    (kept, kept_extra)
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
    /// The series' index among its device's measurements asked of the backend; for MAX_BY
    /// and MIN_BY, the index of the column's own slot after them ([`by`]).
    series: usize,
    /// The type of the series (of x for MAX_BY and MIN_BY; INT64 for `time`).
    data_type: DataType,
    /// What a column answered from rows (MAX_BY, MIN_BY, COUNT_IF) reads.
    rows: Option<by::RowInput>,
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

    /// The name it goes by aligned by device: the label (`s1`), MAX_BY's two (`x, y`),
    /// COUNT_IF's predicate and keep (`s1 > 0, 3`).
    fn key_label(&self) -> String {
        match &self.rows {
            Some(by::RowInput::By { y_label, .. }) => format!("{}, {y_label}", self.label),
            _ => self.label.clone(),
        }
    }

    /// The column's name aligned by time: `count(root.sg.d1.s1)`, `max_by(root.sg.d1.x,
    /// root.sg.d1.y)` (`time` as is), `count_if(root.sg.d1.s1 > 0, 3)`.
    fn name(&self, device: &str) -> String {
        let path = |label: &str| format!("{device}.{label}");
        let f = self.function.name();
        match &self.rows {
            None | Some(by::RowInput::Mode { .. }) => format!("{f}({})", path(&self.label)),
            Some(by::RowInput::By { x, y_label, .. }) => {
                let x = match x {
                    None => self.label.clone(),
                    Some(_) => path(&self.label),
                };
                format!("{f}({x}, {})", path(y_label))
            }
            Some(by::RowInput::CountIf { count_if, .. }) => {
                let predicate = count_if.predicate.rename_columns(&|c| path(c));
                format!("{f}({predicate}, {})", count_if.keep_text())
            }
        }
    }
}

/// The type of `function` over a series of `data_type`, as IoTDB's
/// `getBuiltinAggregationDataType`.
pub(super) fn output_type(function: AggregateFunction, data_type: DataType) -> DataType {
    match function {
        AggregateFunction::Count
        | AggregateFunction::CountIf
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
        // A COUNT_IF slot holds the runs counted as its count (see `by`).
        AggregateFunction::Count | AggregateFunction::CountIf => Some(Value::Int64(
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
        // A MAX_BY, MIN_BY or MODE slot holds the chosen value as its first point (see `by`).
        AggregateFunction::MaxBy | AggregateFunction::MinBy | AggregateFunction::Mode => {
            of_series(p.first.as_ref().map(|(_, v)| v))
        }
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
    /// The type of each measurement of `reads`.
    types: Vec<Vec<DataType>>,
}

/// A column of an aligned-by-device result: a function of a measurement name, and its type.
/// A column aligned by device: the function, the measurement (or alias) it reads, its type and
/// its `AS` name.
type Key = (AggregateFunction, String, DataType, Option<String>);

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
    /// The plan of `items`, each with the series it reads (`by_item`) and, for the columns
    /// answered from rows, what else each reads (`extra`, [`by::pair`]); 700 when a function
    /// does not take a series' type, or an alias names more than one column (aligned by device
    /// a column is one measurement's on every device).
    fn new(
        items: &[AggregateItem],
        by_item: Vec<Vec<Series>>,
        extra: Vec<Vec<Vec<Series>>>,
        by_device: bool,
    ) -> ExecResult<Plan> {
        assert_eq!(items.len(), by_item.len(), "one list of series per item");
        let mut plan = Plan {
            reads: Vec::new(),
            columns: Vec::new(),
            types: Vec::new(),
        };
        for ((item, series), extra) in items.iter().zip(by_item).zip(extra) {
            let mut named: Vec<&str> = series.iter().map(|s| s.label.as_str()).collect();
            named.sort_unstable();
            named.dedup();
            let columns = if by_device { named.len() } else { series.len() };
            if let Some(alias) = item.alias.as_ref().filter(|_| columns > 1) {
                return Err(analyze::alias_of_many(alias, columns));
            }
            let mut extra = extra.into_iter();
            for s in series {
                let device = plan.device_index(&s.device);
                let rows = match item.function.reads_rows() {
                    true => {
                        let extra = extra.next().expect("what a column of rows reads");
                        Some(plan.row_input(item, device, &s, extra)?)
                    }
                    false => {
                        check_type(item.function, &s.path(), s.data_type)?;
                        None
                    }
                };
                let index = match &rows {
                    None => plan.measurement_index(device, &s.measurement, s.data_type),
                    Some(_) => usize::MAX, // its slot, given below
                };
                plan.columns.push(Column {
                    function: item.function,
                    label: s.label,
                    alias: item.alias.clone(),
                    device,
                    series: index,
                    data_type: s.data_type,
                    rows,
                });
            }
        }
        // The slots of the columns answered from rows follow their device's measurements, in
        // column order.
        let mut slots = vec![0; plan.reads.len()];
        for c in plan.columns.iter_mut().filter(|c| c.rows.is_some()) {
            c.series = plan.reads[c.device].1.len() + slots[c.device];
            slots[c.device] += 1;
        }
        Ok(plan)
    }

    /// What `item`'s column of `device` (x: `s`) reads besides its slot, `extra` being MAX_BY's
    /// y or COUNT_IF's series; MAX_BY's measurements are read with the device's.
    fn row_input(
        &mut self,
        item: &AggregateItem,
        device: usize,
        s: &Series,
        extra: Vec<Series>,
    ) -> ExecResult<by::RowInput> {
        if let Some(count_if) = &item.count_if {
            return Ok(by::RowInput::CountIf {
                count_if: count_if.clone(),
                series: extra,
            });
        }
        if item.function == AggregateFunction::Mode {
            let x = self.measurement_index(device, &s.measurement, s.data_type);
            return Ok(by::RowInput::Mode { x });
        }
        let y = extra.into_iter().next().expect("MAX_BY's y");
        by::check_y(item, &y)?;
        let y_index = self.measurement_index(device, &y.measurement, y.data_type);
        let x = match by::is_time(&item.measurement) {
            true => None,
            false => Some(self.measurement_index(device, &s.measurement, s.data_type)),
        };
        Ok(by::RowInput::By {
            x,
            y: y_index,
            y_label: y.label,
        })
    }

    /// The index of `device` in `reads`, added if new.
    fn device_index(&mut self, device: &str) -> usize {
        match self.reads.iter().position(|(d, _)| d == device) {
            Some(i) => i,
            None => {
                self.reads.push((device.to_string(), Vec::new()));
                self.types.push(Vec::new());
                self.reads.len() - 1
            }
        }
    }

    /// The index of `measurement` (of `data_type`) among device `device`'s, added if new.
    fn measurement_index(
        &mut self,
        device: usize,
        measurement: &str,
        data_type: DataType,
    ) -> usize {
        let measurements = &mut self.reads[device].1;
        match measurements.iter().position(|m| m == measurement) {
            Some(i) => i,
            None => {
                measurements.push(measurement.to_string());
                self.types[device].push(data_type);
                measurements.len() - 1
            }
        }
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
                data_type: self.types[device][m],
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
            let label = c.key_label();
            match keys.iter().find(|k| k.0 == c.function && k.1 == label) {
                Some(k) if k.2 != output => {
                    return Err(ExecError::refused(
                        StatusCode::IllegalParameter,
                        format!(
                            "ALIGN BY DEVICE: {}({}) is {} on {} but {} on another device; a \
                             column takes one type",
                            c.function.name(),
                            label,
                            output.name(),
                            self.reads[c.device].0,
                            k.2.name()
                        ),
                    ))
                }
                Some(_) => {}
                None => keys.push((c.function, label, output, c.alias.clone())),
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
                None => c.name(device),
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
        header.extend(keys.iter().map(|(f, label, t, alias)| {
            let name = alias.clone();
            (name.unwrap_or_else(|| format!("{}({label})", f.name())), *t)
        }));
        let mut devices: Vec<usize> = (0..self.reads.len()).collect();
        devices.sort_by(|a, b| self.reads[*a].0.cmp(&self.reads[*b].0));
        let mut rows = Vec::with_capacity(devices.len() * cut.rows());
        for device in devices {
            let of_key: Vec<Option<&Column>> = keys
                .iter()
                .map(|(f, label, _, _)| {
                    self.columns
                        .iter()
                        .find(|c| c.device == device && c.function == *f && c.key_label() == *label)
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
}
