//! Table-model aggregation: `SELECT region, date_bin(1h, time) AS hour, avg(temperature) FROM t
//! WHERE ... GROUP BY region, hour ORDER BY ... LIMIT n`.
//!
//! The devices that pass the WHERE clause's tag and attribute terms are asked for the partial
//! aggregates of their FIELD columns in the query's windows (one window without `date_bin`),
//! where the data is, as the tree's aggregations are (page statistics where they answer, no raw
//! point fetched); the coordinator merges each group's partials (the devices sharing the GROUP BY
//! columns' values) and finishes them. A group has a row per bin that holds a point of any of its
//! devices' FIELD columns; a query without GROUP BY has exactly one row, as in SQL.
//!
//! Without a time bound on both sides, `date_bin` first asks the devices for their first and last
//! points, so that the bins span the data only. Devices are asked a bounded batch at a time
//! ([`PARTIALS_PER_CALL`]), their partials merged into the groups as they come.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use common::aggregate::{Partial, Windows};
use common::table::{Category, TableSchema};
use common::{DataType, StatusCode, Value};

use super::super::aggregate::{check_type, finish, output_type};
use super::super::filter::{Filter, Lookup};
use super::super::{Backend, Cell, ExecError, ExecResult, Outcome, ResultCharge, RESULT_ROWS_MAX};
use super::filter::TableFilter;
use super::select::{join_device, DeviceRead};
use super::{compare, live_range, one_table, row_cell, Device};
use crate::ast::{AggregateFunction, TableAggregate, TableItemKind};
use crate::TimeRange;

/// Partials one backend call answers at most (devices × FIELD columns × windows).
const PARTIALS_PER_CALL: usize = 1 << 18;

/// Bytes a group's partial is counted as while the groups are built.
const PARTIAL_BYTES: usize = std::mem::size_of::<Partial>() + 32;

/// One aggregation of the select list, resolved against the table.
struct Aggregation {
    /// The item's position in the select list.
    item: usize,
    function: AggregateFunction,
    /// The FIELD column and its type; `None` for `time` (`min(time)`, `max(time)`).
    field: Option<(String, DataType)>,
    /// `last_by(x, time)` (`Some(true)`) or `first_by(x, time)`: the field's value in the
    /// group's last (first) row of the window.
    at_row: Option<bool>,
    /// What an aggregation answered from rows judges each row by.
    rows: Option<RowJudge>,
}

/// How an aggregation answered from rows takes each row into its partial.
enum RowJudge {
    /// `count_if`: a row where the condition holds counts.
    CountIf(TableFilter),
    /// `max_by` / `min_by`: a strictly better y (or as good and earlier) takes the row; the
    /// partial holds the row's time and y as `last`, and x as `first` (none when x is NULL).
    By {
        x: Option<usize>,
        y: Option<usize>,
        max: bool,
    },
}

impl RowJudge {
    /// Takes the row of `device` at `time` into `partial`.
    fn take(
        &self,
        schema: &TableSchema,
        device: &Device<'_>,
        time: i64,
        values: &std::collections::HashMap<&str, Value>,
        partial: &mut Partial,
    ) {
        match self {
            RowJudge::CountIf(condition) => {
                if condition.keeps_row(schema, device, time, values) {
                    partial.count += 1;
                }
            }
            RowJudge::By { x, y, max } => {
                let Some(y) = row_cell(schema, device, time, values, *y) else {
                    return;
                };
                let better = match &partial.last {
                    None => true,
                    Some((best_time, best)) => {
                        let order = compare(&Some(y.clone()), &Some(best.clone()), *max);
                        order.is_lt() || order.is_eq() && time < *best_time
                    }
                };
                if better {
                    partial.count = 1;
                    partial.first = row_cell(schema, device, time, values, *x).map(|v| (time, v));
                    partial.last = Some((time, y));
                }
            }
        }
    }

    /// Its cell from a partial it took rows into.
    fn cell(&self, partial: &Partial) -> Cell {
        match self {
            RowJudge::CountIf(_) => Some(Value::Int64(
                i64::try_from(partial.count).expect("fewer rows than i64::MAX"),
            )),
            RowJudge::By { .. } => partial.first.as_ref().map(|(_, x)| x.clone()),
        }
    }
}

/// One group: per aggregation and window its merged partial, and per window the times of its
/// first and last rows (`None`: no row).
struct Group {
    partials: Vec<Vec<Partial>>,
    rows: Vec<Option<(i64, i64)>>,
}

impl Group {
    /// Notes a row (or a point of any field) at each of `first..=last`'s ends in window `w`.
    fn saw(&mut self, w: usize, first: i64, last: i64) {
        let span = &mut self.rows[w];
        *span = Some(match *span {
            Some((a, b)) => (a.min(first), b.max(last)),
            None => (first, last),
        });
    }
}

/// Runs `query` on the table of `database`, points before `now_ms` minus the TTL left out.
pub(super) async fn aggregate<B: Backend>(
    backend: &B,
    database: &str,
    query: &TableAggregate,
    now_ms: i64,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    let view = one_table(backend, database, &query.table, true).await?;
    let schema = &view.schema;
    let aggregations = resolve(schema, query)?;
    let group_columns: Vec<usize> = query
        .group_columns
        .iter()
        .map(|name| grouping_column(schema, name))
        .collect::<ExecResult<_>>()?;
    let filter = TableFilter::new(schema, query.filter.as_ref())?;
    let devices = filter.devices(backend, database, &view).await?;
    let range = live_range(schema, query.range, now_ms);
    let global = query.group_columns.is_empty() && query.date_bin.is_none();
    let windows = match windows(backend, schema, query, &devices, range).await? {
        Some(windows) => windows,
        None if global => {
            // No point can be read: the one row of a query without GROUP BY, over nothing.
            let mut groups = BTreeMap::new();
            groups.insert(Vec::new(), new_group(aggregations.len(), 1));
            return finish_rows(schema, query, &aggregations, &groups, None, true);
        }
        None => return finish_rows(schema, query, &aggregations, &BTreeMap::new(), None, false),
    };
    let moments = aggregations.iter().any(|a| a.function.needs_moments());
    let windows = windows.with_moments(moments);
    let count = usize::try_from(windows.count()).expect("windows are bounded");
    let mut groups: BTreeMap<Vec<Option<String>>, Group> = BTreeMap::new();
    if global {
        groups.insert(Vec::new(), new_group(aggregations.len(), count));
    }
    let key_of = |device: &Device<'_>| -> Vec<Option<String>> {
        group_columns
            .iter()
            .map(|&i| device.value_of(schema, i).map(str::to_string))
            .collect()
    };
    let held = |groups: &BTreeMap<_, _>| groups.len() * count * (aggregations.len() + 1);
    // count(*) counts rows: a device's FIELD columns' points at distinct times, which only
    // its rows tell when it has several.
    let counts_rows = aggregations
        .iter()
        .any(|a| a.field.is_none() && a.function == AggregateFunction::Count);
    let several = devices.iter().any(|d| fields_of(schema, d).len() > 1);
    let by_field = group_columns
        .iter()
        .any(|&i| schema.columns[i].category == Category::Field);
    let judged = aggregations.iter().any(|a| a.rows.is_some());
    if filter.reads_rows() || (counts_rows && several) || by_field || judged {
        // Rows are judged one by one: each device's rows read raw and folded here.
        let fold = Fold {
            schema,
            filter: &filter,
            windows: &windows,
            aggregations: &aggregations,
            group_columns: &group_columns,
        };
        for device in &devices {
            let bytes = (held(&groups) + aggregations.len() * count) * PARTIAL_BYTES;
            fold.device(backend, device, &mut groups, bytes, charge)
                .await?;
            check_rows(&groups, count)?;
        }
    } else {
        for batch in device_batches(schema, &devices, count) {
            let reads: Vec<(String, Vec<String>)> = batch
                .iter()
                .map(|d| (d.path.clone(), fields_of(schema, d)))
                .collect();
            let partials = backend.aggregate(&reads, windows).await?;
            for ((device, (_, fields)), partials) in batch.iter().zip(&reads).zip(partials) {
                let group = groups
                    .entry(key_of(device))
                    .or_insert_with(|| new_group(aggregations.len(), count));
                merge_device(group, &aggregations, fields, &partials);
            }
            check_rows(&groups, count)?;
            charge.settle(held(&groups) * PARTIAL_BYTES)?;
        }
    }
    let outcome = finish_rows(
        schema,
        query,
        &aggregations,
        &groups,
        Some(&windows),
        global,
    );
    charge.settle(0)?;
    outcome
}

/// 700 past [`RESULT_ROWS_MAX`] rows (groups times bins).
fn check_rows(groups: &BTreeMap<Vec<Option<String>>, Group>, bins: usize) -> ExecResult<()> {
    if groups.len().saturating_mul(bins) > RESULT_ROWS_MAX {
        return Err(super::super::join::too_many_rows());
    }
    Ok(())
}

/// Folds the rows a WHERE clause on FIELD columns keeps into their groups' partials.
struct Fold<'a> {
    schema: &'a TableSchema,
    filter: &'a TableFilter,
    windows: &'a Windows,
    aggregations: &'a [Aggregation],
    /// GROUP BY's columns: a row's group is its device's values of the TAG and ATTRIBUTE ones
    /// and its own of the FIELD ones.
    group_columns: &'a [usize],
}

impl Fold<'_> {
    /// Reads every FIELD column of `device` in the windows' span, joined on time, and folds
    /// each row the filter keeps into its group of `groups` (charged on top of `held` bytes;
    /// 700 past [`RESULT_ROWS_MAX`] groups).
    async fn device<B: Backend>(
        &self,
        backend: &B,
        device: &Device<'_>,
        groups: &mut BTreeMap<Vec<Option<String>>, Group>,
        held: usize,
        charge: &mut ResultCharge,
    ) -> ExecResult<()> {
        let bins = usize::try_from(self.windows.count()).expect("windows are bounded");
        let columns: Vec<&common::table::TableColumn> = self
            .schema
            .of(Category::Field)
            .filter(|c| device.fields.get(&c.name) == Some(&c.data_type))
            .collect();
        let span = self.windows.range();
        let read = DeviceRead {
            device,
            columns: &columns,
            range: TimeRange {
                from: span.start,
                to: span.end,
            },
            needed: RESULT_ROWS_MAX,
        };
        let rows = join_device(backend, &read, held, charge).await?;
        for (time, values) in &rows {
            let Some(w) = self.windows.index(*time) else {
                continue;
            };
            if !self.filter.keeps_row(self.schema, device, *time, values) {
                continue;
            }
            let key: Vec<Option<String>> = self
                .group_columns
                .iter()
                .map(|&i| {
                    let column = &self.schema.columns[i];
                    match column.category {
                        Category::Field => values.get(column.name.as_str()).map(key_text),
                        _ => device.value_of(self.schema, i).map(str::to_string),
                    }
                })
                .collect();
            if !groups.contains_key(&key) {
                if (groups.len() + 1).saturating_mul(bins) > RESULT_ROWS_MAX {
                    return Err(super::super::join::too_many_rows());
                }
                charge.add(bins * (self.aggregations.len() + 1) * PARTIAL_BYTES)?;
            }
            let group = groups
                .entry(key)
                .or_insert_with(|| new_group(self.aggregations.len(), bins));
            group.saw(w, *time, *time);
            for (partials, aggregation) in group.partials.iter_mut().zip(self.aggregations) {
                if let Some(judge) = &aggregation.rows {
                    judge.take(self.schema, device, *time, values, &mut partials[w]);
                    continue;
                }
                match &aggregation.field {
                    Some((name, _)) => {
                        if let Some(value) = values.get(name.as_str()) {
                            partials[w].push(*time, value);
                        }
                    }
                    None => partials[w].push(*time, &Value::Timestamp(*time)),
                }
            }
        }
        Ok(())
    }
}

/// The select list's aggregations, each column checked: a FIELD column of a type the function
/// takes, or `time` for `min` and `max`.
fn resolve(schema: &TableSchema, query: &TableAggregate) -> ExecResult<Vec<Aggregation>> {
    let mut out = Vec::new();
    for (item, entry) in query.items.iter().enumerate() {
        let (function, column, at_row) = match &entry.kind {
            TableItemKind::Aggregate { function, column } => (*function, column, None),
            TableItemKind::ValueAtRow { column, last: true } => {
                (AggregateFunction::LastValue, column, Some(true))
            }
            TableItemKind::ValueAtRow {
                column,
                last: false,
            } => (AggregateFunction::FirstValue, column, Some(false)),
            TableItemKind::CountIf(condition) => {
                let judge = RowJudge::CountIf(TableFilter::new(schema, Some(condition))?);
                out.push(row_aggregation(item, AggregateFunction::CountIf, judge));
                continue;
            }
            TableItemKind::ExtremeBy { x, y, max } => {
                let at = |name: &str| match name {
                    common::table::TIME_COLUMN => Ok(None),
                    name => schema
                        .columns
                        .iter()
                        .position(|c| c.name == name)
                        .map(Some)
                        .ok_or_else(|| no_column(schema, name)),
                };
                let (x, y, max) = (at(x)?, at(y)?, *max);
                let function = if max {
                    AggregateFunction::MaxBy
                } else {
                    AggregateFunction::MinBy
                };
                out.push(row_aggregation(item, function, RowJudge::By { x, y, max }));
                continue;
            }
            _ => continue,
        };
        let field = if column == common::table::TIME_COLUMN {
            None
        } else {
            let c = schema
                .column(column)
                .ok_or_else(|| no_column(schema, column))?;
            if c.category != Category::Field {
                return Err(ExecError::refused(
                    StatusCode::UnsupportedOperation,
                    format!(
                        "{}({column}) aggregates the {} column {column}; aggregations take FIELD \
                         columns",
                        function.name(),
                        category_name(c.category)
                    ),
                ));
            }
            check_type(function, &format!("{}.{column}", schema.name), c.data_type)?;
            Some((column.clone(), c.data_type))
        };
        out.push(Aggregation {
            item,
            function,
            field,
            at_row,
            rows: None,
        });
    }
    Ok(out)
}

/// An aggregation answered from rows, by `judge`.
fn row_aggregation(item: usize, function: AggregateFunction, judge: RowJudge) -> Aggregation {
    Aggregation {
        item,
        function,
        field: None,
        at_row: None,
        rows: Some(judge),
    }
}

/// A FIELD value as a group's key (exact: [`key_value`] reads it back).
fn key_text(value: &Value) -> String {
    match value {
        Value::Text(s) | Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A group's key of a FIELD column of `data_type` as the value it was made from.
fn key_value(text: &str, data_type: DataType) -> Option<Value> {
    Some(match data_type {
        DataType::Boolean => Value::Boolean(text.parse().ok()?),
        DataType::Int32 => Value::Int32(text.parse().ok()?),
        DataType::Int64 => Value::Int64(text.parse().ok()?),
        DataType::Timestamp => Value::Timestamp(text.parse().ok()?),
        DataType::Float => Value::Float(text.parse().ok()?),
        DataType::Double => Value::Double(text.parse().ok()?),
        DataType::Text => Value::Text(text.to_string()),
        _ => Value::String(text.to_string()),
    })
}

/// The index of a GROUP BY column: a TAG, ATTRIBUTE or FIELD column of the table (a FIELD
/// groups rows, so its groups are made as rows are read).
fn grouping_column(schema: &TableSchema, name: &str) -> ExecResult<usize> {
    let index = schema
        .columns
        .iter()
        .position(|c| c.name == name)
        .ok_or_else(|| no_column(schema, name))?;
    let column = &schema.columns[index];
    if column.category == Category::Field
        && matches!(column.data_type, DataType::Date | DataType::Blob)
    {
        return Err(ExecError::refused(
            StatusCode::UnsupportedOperation,
            format!(
                "GROUP BY the {} FIELD column {name} is not supported yet",
                column.data_type.name()
            ),
        ));
    }
    Ok(index)
}

fn no_column(schema: &TableSchema, name: &str) -> ExecError {
    ExecError::refused(
        StatusCode::IllegalParameter,
        format!("column {name} does not exist in table {}", schema.name),
    )
}

fn category_name(category: Category) -> &'static str {
    match category {
        Category::Tag => "TAG",
        Category::Attribute => "ATTRIBUTE",
        Category::Field => "FIELD",
    }
}

/// The query's windows: `date_bin`'s bins over the range (over the data's span where the range
/// is open), or one window over the range. `None` when nothing can be read.
async fn windows<B: Backend>(
    backend: &B,
    schema: &TableSchema,
    query: &TableAggregate,
    devices: &[Device<'_>],
    range: TimeRange,
) -> ExecResult<Option<Windows>> {
    if range.is_empty() {
        return Ok(None);
    }
    let Some(bin) = query.date_bin else {
        return Ok(Windows::whole(range.from..range.to));
    };
    let open = |r: TimeRange| r.from == i64::MIN || r.to == i64::MAX;
    if bin.gapfill && open(query.range) {
        return Err(ExecError::refused(
            StatusCode::IllegalParameter,
            "date_bin_gapfill fills the bins of a bounded time range: bound time on both sides \
             in WHERE (time >= a AND time < b)",
        ));
    }
    let (mut from, mut to) = (range.from, range.to);
    if open(range) {
        let Some((first, last)) = span(backend, schema, devices, range).await? else {
            return Ok(None);
        };
        from = from.max(first);
        to = to.min(last.saturating_add(1));
    }
    let start = bin.bin_start(from);
    let Some(windows) = Windows::new(start..to, bin.interval_ms, RESULT_ROWS_MAX as u64) else {
        return Err(ExecError::refused(
            StatusCode::IllegalParameter,
            format!(
                "date_bin({}ms, time) makes more than {RESULT_ROWS_MAX} bins from {from} to {to}; \
                 narrow the time range or widen the bins",
                bin.interval_ms
            ),
        ));
    };
    Ok(Some(windows.visible(range.from..range.to)))
}

/// The first and last timestamps of the devices' points in `range`.
async fn span<B: Backend>(
    backend: &B,
    schema: &TableSchema,
    devices: &[Device<'_>],
    range: TimeRange,
) -> ExecResult<Option<(i64, i64)>> {
    let whole = Windows::whole(range.from..range.to).expect("a range that is not empty");
    let mut span: Option<(i64, i64)> = None;
    for batch in device_batches(schema, devices, 1) {
        let reads: Vec<(String, Vec<String>)> = batch
            .iter()
            .map(|d| (d.path.clone(), fields_of(schema, d)))
            .collect();
        for device in backend.aggregate(&reads, whole).await? {
            for partial in device.iter().flatten() {
                if let (Some((first, _)), Some((last, _))) = (&partial.first, &partial.last) {
                    let (lo, hi) = span.unwrap_or((*first, *last));
                    span = Some((lo.min(*first), hi.max(*last)));
                }
            }
        }
    }
    Ok(span)
}

/// The devices in batches of at most [`PARTIALS_PER_CALL`] partials over `windows` windows.
fn device_batches<'a, 'v>(
    schema: &TableSchema,
    devices: &'a [Device<'v>],
    windows: usize,
) -> std::slice::Chunks<'a, Device<'v>> {
    let fields = schema.of(Category::Field).count().max(1);
    let per_device = fields.saturating_mul(windows).max(1);
    devices.chunks((PARTIALS_PER_CALL / per_device).max(1))
}

/// The table's FIELD columns `device` holds, with the table's type.
fn fields_of(schema: &TableSchema, device: &Device<'_>) -> Vec<String> {
    schema
        .of(Category::Field)
        .filter(|c| device.fields.get(&c.name) == Some(&c.data_type))
        .map(|c| c.name.clone())
        .collect()
}

fn new_group(aggregations: usize, windows: usize) -> Group {
    Group {
        partials: vec![vec![Partial::default(); windows]; aggregations],
        rows: vec![None; windows],
    }
}

/// Merges one device's partials (`partials[field][window]`, `fields` in that order) into its
/// group.
fn merge_device(
    group: &mut Group,
    aggregations: &[Aggregation],
    fields: &[String],
    partials: &[Vec<Partial>],
) {
    for field in partials {
        for (w, p) in field.iter().enumerate() {
            if let (Some((first, _)), Some((last, _))) = (&p.first, &p.last) {
                group.saw(w, *first, *last);
            }
        }
    }
    for (merged, aggregation) in group.partials.iter_mut().zip(aggregations) {
        let of: Vec<&Vec<Partial>> = match &aggregation.field {
            Some((name, _)) => fields
                .iter()
                .position(|f| f == name)
                .map(|i| &partials[i])
                .into_iter()
                .collect(),
            None => partials.iter().collect(),
        };
        for field in of {
            for (m, p) in merged.iter_mut().zip(field) {
                m.merge(p);
            }
        }
    }
}

/// The result: one row per group and bin with a point (the one row of a `global` query), in
/// ORDER BY's order (else the groups' and then the bins'), cut by OFFSET and LIMIT.
fn finish_rows(
    schema: &TableSchema,
    query: &TableAggregate,
    aggregations: &[Aggregation],
    groups: &BTreeMap<Vec<Option<String>>, Group>,
    windows: Option<&Windows>,
    global: bool,
) -> ExecResult<Outcome> {
    let mut header: Vec<(String, DataType)> = query
        .items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let name = match (&item.alias, &item.kind) {
                (Some(alias), _) => alias.clone(),
                (None, TableItemKind::Column(name)) => name.clone(),
                (None, _) => format!("_col{i}"),
            };
            (name, item_type(schema, &item.kind))
        })
        .collect();
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    let gapfill = query.date_bin.is_some_and(|b| b.gapfill);
    for (key, group) in groups {
        // date_bin_gapfill: every bin of a group that has a row.
        let every = global || (gapfill && group.rows.iter().any(Option::is_some));
        for (w, span) in group.rows.iter().enumerate() {
            if !(every || span.is_some()) {
                continue;
            }
            let row = query
                .items
                .iter()
                .enumerate()
                .map(|(i, item)| match &item.kind {
                    TableItemKind::Column(name) => {
                        let at = query.group_columns.iter().position(|c| c == name)?;
                        let text = key[at].as_deref()?;
                        match schema.column(name) {
                            Some(c) if c.category == Category::Field => {
                                key_value(text, c.data_type)
                            }
                            _ => Some(Value::String(text.to_string())),
                        }
                    }
                    TableItemKind::DateBin(_) => {
                        windows.map(|windows| Value::Timestamp(windows.window_start(w)))
                    }
                    _ => {
                        let at = aggregations.iter().position(|a| a.item == i)?;
                        cell(&aggregations[at], &group.partials[at][w], *span)
                    }
                })
                .collect();
            rows.push(row);
        }
    }
    if let Some(condition) = &query.having {
        let filter = having(query, &header, condition)?;
        rows.retain(|row| filter.keeps(row));
    }
    if !query.order_by.is_empty() {
        rows.sort_by(|a, b| {
            query
                .order_by
                .iter()
                .map(|&(i, descending)| compare(&a[i], &b[i], descending))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        });
    }
    // What HAVING alone named goes.
    header.truncate(query.shown);
    let rows = rows
        .into_iter()
        .skip(query.offset)
        .take(query.limit.unwrap_or(usize::MAX))
        .map(|mut row| {
            row.truncate(query.shown);
            row
        })
        .collect();
    Ok(Outcome::query(header, rows))
}

/// HAVING bound to the rows of every item: an aggregation by its call (`max_value(t)` as the
/// parser names it), an alias, a GROUP BY column by its name.
fn having(
    query: &TableAggregate,
    header: &[(String, DataType)],
    condition: &crate::expr::Expr,
) -> ExecResult<Filter> {
    let lookup = |name: &str| -> Option<(usize, DataType)> {
        let name = name.to_lowercase();
        let i = query.items.iter().position(|item| {
            item.alias.as_deref() == Some(name.as_str())
                || match &item.kind {
                    TableItemKind::Column(c) => *c == name,
                    TableItemKind::Aggregate { function, column } => {
                        format!("{}({column})", function.name()) == name
                    }
                    _ => false,
                }
        })?;
        Some((i, header[i].1))
    };
    Filter::bind(condition, [&lookup as &Lookup<'_>])
}

/// The type of an item's column: TAG and ATTRIBUTE columns are STRING, bins and times TIMESTAMP.
fn item_type(schema: &TableSchema, kind: &TableItemKind) -> DataType {
    match kind {
        TableItemKind::Column(name) => match schema.column(name) {
            Some(c) if c.category == Category::Field => c.data_type,
            _ => DataType::String,
        },
        TableItemKind::DateBin(_) => DataType::Timestamp,
        TableItemKind::Aggregate {
            function: AggregateFunction::Count,
            ..
        } => DataType::Int64,
        TableItemKind::Aggregate {
            function: AggregateFunction::MinTime | AggregateFunction::MaxTime,
            ..
        } => DataType::Timestamp,
        TableItemKind::ValueAtRow { column, .. } => schema
            .column(column)
            .map_or(DataType::Double, |c| c.data_type),
        TableItemKind::CountIf(_) => DataType::Int64,
        TableItemKind::ExtremeBy { x, .. } => match schema.column(x) {
            Some(c) if c.category == Category::Field => c.data_type,
            Some(_) => DataType::String,
            None => DataType::Timestamp,
        },
        TableItemKind::Aggregate { function, column } => {
            let data_type = schema
                .column(column)
                .map_or(DataType::Double, |c| c.data_type);
            output_type(*function, data_type)
        }
    }
}

/// An aggregation's cell for one merged partial, in a window whose rows span `rows`.
fn cell(aggregation: &Aggregation, partial: &Partial, rows: Option<(i64, i64)>) -> Cell {
    if let Some(judge) = &aggregation.rows {
        return judge.cell(partial);
    }
    if let Some(last) = aggregation.at_row {
        // The field's newest (oldest) point is the row's value only if it lies in that row.
        let (row, point) = match last {
            true => (rows.map(|(_, t)| t), &partial.last),
            false => (rows.map(|(t, _)| t), &partial.first),
        };
        return point
            .as_ref()
            .filter(|(t, _)| Some(*t) == row)
            .map(|(_, v)| v.clone());
    }
    let time = |p: Option<&(i64, Value)>| p.map(|(t, _)| Value::Timestamp(*t));
    match &aggregation.field {
        Some(_) if aggregation.function == AggregateFunction::MinTime => {
            time(partial.first.as_ref())
        }
        Some(_) if aggregation.function == AggregateFunction::MaxTime => {
            time(partial.last.as_ref())
        }
        Some((_, data_type)) => finish(aggregation.function, *data_type, partial),
        None => {
            let point = match aggregation.function {
                AggregateFunction::Count => {
                    let rows = i64::try_from(partial.count).expect("fewer rows than i64::MAX");
                    return Some(Value::Int64(rows));
                }
                AggregateFunction::MinTime => partial.first.as_ref(),
                _ => partial.last.as_ref(),
            };
            point.map(|(t, _)| Value::Timestamp(*t))
        }
    }
}
