//! `EXPLAIN` and `EXPLAIN ANALYZE` of both models' queries.
//!
//! EXPLAIN answers the query's plan without reading data: the steps its rows pass through, the
//! top step first, each over the one under it, down to the reads made of each region's leader
//! (with the time range and what is pushed to the region). One line per row, in IoTDB's column
//! `distribution plan`.
//!
//! EXPLAIN ANALYZE runs the query, drops its rows and answers the plan followed by what the run
//! took: wall time, rows and bytes of the result, and each fragment — the reads of one kind
//! made of one region on the replica that answered, with their calls, series, rows (points or
//! window partials), time and retries — in IoTDB's column `Explain Analyze`.

use std::future::Future;
use std::time::Instant;

use common::views::FragmentView;
use common::{DataType, Value};

use super::{outcome_bytes, Backend, ExecResult, Outcome};
use crate::ast::{Projection, TableItemKind};
use crate::{
    AggregateItem, Fill, GroupByTime, PathPattern, RowWindow, Statement, TableAggregate,
    TableSelect, TableStatement, TimeRange,
};

/// EXPLAIN's column, as IoTDB names it.
pub(super) const PLAN_COLUMN: &str = "distribution plan";
/// EXPLAIN ANALYZE's column, as IoTDB names it.
pub(super) const ANALYZE_COLUMN: &str = "Explain Analyze";

/// EXPLAIN (`run` unused) or EXPLAIN ANALYZE (`run` awaited, its rows dropped) of a query whose
/// plan is `plan`.
pub(super) async fn explain<B: Backend>(
    backend: &B,
    plan: Vec<String>,
    analyze: bool,
    run: impl Future<Output = ExecResult<Outcome>>,
) -> ExecResult<Outcome> {
    if !analyze {
        return Ok(lines(PLAN_COLUMN, plan));
    }
    backend.trace_fragments();
    // Reads made before this statement are not its own.
    backend.take_fragments();
    let started = Instant::now();
    let outcome = run.await?;
    let elapsed = started.elapsed();
    let fragments = backend.take_fragments();
    let mut text = plan;
    text.push(String::new());
    text.push(format!(
        "Execution: {:.3} ms, {} rows, {} bytes of result",
        elapsed.as_secs_f64() * 1e3,
        outcome.rows.len(),
        outcome_bytes(&outcome)
    ));
    text.extend(fragment_lines(&fragments));
    Ok(lines(ANALYZE_COLUMN, text))
}

/// One TEXT column of `name`, a row per line.
fn lines(name: &str, lines: Vec<String>) -> Outcome {
    let rows = lines
        .into_iter()
        .map(|line| vec![Some(Value::Text(line))])
        .collect();
    Outcome::query(vec![(name.to_string(), DataType::Text)], rows)
}

/// The fragments' lines: a summary, then one per fragment.
fn fragment_lines(fragments: &[FragmentView]) -> Vec<String> {
    let regions: std::collections::BTreeSet<u64> = fragments.iter().map(|f| f.region).collect();
    let calls: u64 = fragments.iter().map(|f| f.calls).sum();
    let mut out = vec![format!(
        "Fragments: {} ({calls} region reads of {} regions)",
        fragments.len(),
        regions.len()
    )];
    for f in fragments {
        let place = if f.local { "this DataNode" } else { "a peer" };
        let retries = match f.retries {
            0 => String::new(),
            n => format!(", {n} retries"),
        };
        out.push(format!(
            "  FRAGMENT [{}] region {} on {} ({place}): {} calls, {} series, {} rows, {:.3} ms{retries}",
            f.kind,
            f.region,
            f.replica,
            f.calls,
            f.series,
            f.rows,
            f.elapsed_us as f64 / 1e3,
        ));
    }
    out
}

/// Steps, the top one first: each line under the one before it.
fn chain(steps: Vec<String>) -> Vec<String> {
    steps
        .into_iter()
        .enumerate()
        .map(|(depth, step)| match depth {
            0 => step,
            d => format!("{}└─ {step}", "   ".repeat(d - 1)),
        })
        .collect()
}

/// `[from, to)` in ms, an open end as `-∞` or `+∞`.
fn range_text(range: TimeRange) -> String {
    let from = match range.from {
        i64::MIN => "-∞".to_string(),
        t => t.to_string(),
    };
    let to = match range.to {
        i64::MAX => "+∞".to_string(),
        t => t.to_string(),
    };
    format!("[{from}, {to})")
}

fn patterns_text(from: &[PathPattern]) -> String {
    from.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A computed select item as written: `s1 + 1 AS x`.
fn item_text(item: &crate::SelectItem) -> String {
    match &item.alias {
        Some(alias) => format!("{} AS {alias}", item.expr),
        None => item.expr.to_string(),
    }
}

fn projection_text(projection: &Projection) -> String {
    match projection {
        Projection::Computed { items, .. } => {
            let items: Vec<String> = items.iter().map(item_text).collect();
            items.join(", ")
        }
        _ => match projection.names() {
            None => "*".to_string(),
            Some(names) => names.join(", "),
        },
    }
}

/// The rows step (ORDER BY TIME DESC, OFFSET, LIMIT, SOFFSET, SLIMIT), when any applies.
fn page_step(rows: RowWindow) -> Option<String> {
    let mut parts = Vec::new();
    if rows.descending {
        parts.push("ORDER BY TIME DESC".to_string());
    }
    if rows.offset > 0 {
        parts.push(format!("OFFSET {}", rows.offset));
    }
    if let Some(limit) = rows.limit {
        parts.push(format!("LIMIT {limit}"));
    }
    if rows.series_offset > 0 {
        parts.push(format!("SOFFSET {}", rows.series_offset));
    }
    if let Some(limit) = rows.series_limit {
        parts.push(format!("SLIMIT {limit}"));
    }
    (!parts.is_empty()).then(|| format!("Page  {}", parts.join(", ")))
}

fn fill_step(fill: &Fill) -> String {
    match fill {
        Fill::Previous => "Fill  PREVIOUS".to_string(),
        Fill::Linear => "Fill  LINEAR".to_string(),
        Fill::Constant(value) => format!("Fill  {value}"),
    }
}

fn align_text(by_device: bool) -> &'static str {
    if by_device {
        "ALIGN BY DEVICE"
    } else {
        "ALIGN BY TIME"
    }
}

/// The steps that read rows raw: a join on time under a filter, over each region's reads.
fn raw_steps(
    steps: &mut Vec<String>,
    filter: Option<&crate::Expr>,
    join: String,
    range: TimeRange,
) {
    if let Some(filter) = filter {
        steps.push(format!("Filter  {filter}  (on the joined rows)"));
    }
    steps.push(join);
    steps.push(format!(
        "RegionRead raw  time {}  on each region's leader, a chunk of points per series at a \
         time",
        range_text(range)
    ));
}

/// The plan of a tree-model query; `None` for a statement that is no query.
pub(super) fn tree_plan(statement: &Statement) -> Option<Vec<String>> {
    let mut steps = Vec::new();
    match statement {
        Statement::Select {
            from,
            measurements,
            range,
            filter,
            rows,
            fill,
            align_by_device,
        } => {
            steps.push(format!("Raw query  {}", align_text(*align_by_device)));
            steps.extend(page_step(*rows));
            steps.extend(fill.as_ref().map(fill_step));
            let join = format!(
                "TimeJoin  SELECT {} FROM {}  (patterns expanded against the schema{})",
                projection_text(measurements),
                patterns_text(from),
                if *align_by_device { ", per device" } else { "" }
            );
            raw_steps(&mut steps, filter.as_ref(), join, *range);
        }
        Statement::SelectLast {
            from,
            measurements,
            since,
        } => {
            steps.push("Last query".to_string());
            let since = match *since {
                i64::MIN => String::new(),
                t => format!(", time >= {t}"),
            };
            steps.push(format!(
                "RegionRead last  SELECT LAST {} FROM {}{since}  the newest point of each series \
                 from each region's leader (its last-value cache)",
                projection_text(measurements),
                patterns_text(from)
            ));
        }
        Statement::SelectAggregate {
            from,
            items,
            range,
            filter,
            group_by,
            levels,
            tags,
            having,
            rows,
            fill,
            align_by_device,
            outputs,
        } => {
            steps.push(format!("Aggregate query  {}", align_text(*align_by_device)));
            if let Some(outputs) = outputs {
                let outputs: Vec<String> = outputs.iter().map(item_text).collect();
                steps.push(format!("Project  {}", outputs.join(", ")));
            }
            steps.extend(page_step(*rows));
            steps.extend(fill.as_ref().map(fill_step));
            steps.extend(having.as_ref().map(|h| format!("Having  {h}")));
            if let Some(levels) = levels {
                let levels: Vec<String> = levels.iter().map(ToString::to_string).collect();
                steps.push(format!("GroupByLevel  LEVEL = {}", levels.join(", ")));
            }
            if let Some(tags) = tags {
                steps.push(format!("GroupByTags  TAGS({})", tags.join(", ")));
            }
            steps.push(format!(
                "Finish  {}  over {}",
                items_text(items),
                windows_text(*group_by)
            ));
            let what = format!("FROM {}", patterns_text(from));
            if items.iter().any(|i| i.function.reads_rows()) {
                steps.push(
                    "RowAggregate  MAX_BY, MIN_BY, COUNT_IF and MODE: each device's rows read raw and \
                     judged in every window holding them"
                        .to_string(),
                );
            }
            match filter {
                Some(_) => {
                    steps.push("Fold  the kept rows into each window's partials".to_string());
                    let join = format!("TimeJoin  {what}  (the aggregated and filtered series)");
                    raw_steps(&mut steps, filter.as_ref(), join, *range);
                }
                None => steps.push(region_aggregate(&what, *range, items)),
            }
        }
        Statement::Explain { query, .. } => return tree_plan(query),
        _ => return None,
    }
    Some(chain(steps))
}

fn items_text(items: &[AggregateItem]) -> String {
    items
        .iter()
        .map(|i| match (&i.by, &i.count_if) {
            (Some(y), _) => format!("{}({}, {y})", i.function.name(), i.measurement),
            (_, Some(c)) => format!("count_if({}, {})", c.predicate, c.keep_text()),
            _ => format!("{}({})", i.function.name(), i.measurement),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn windows_text(group_by: Option<GroupByTime>) -> String {
    match group_by {
        None => "the WHERE range".to_string(),
        Some(g) if g.interval_months > 0 || g.step_months > 0 => {
            let text = |months: u32, ms: u64| match ms {
                0 => format!("{months} months"),
                ms => format!("{months} months {ms} ms"),
            };
            let step = match (g.step_months, g.step_ms) == (g.interval_months, g.interval_ms) {
                true => String::new(),
                false => format!(", step {}", text(g.step_months, g.step_ms)),
            };
            format!(
                "windows of {} on the UTC calendar from {}{step}",
                text(g.interval_months, g.interval_ms),
                g.start
            )
        }
        Some(g) => {
            let step = match g.step_ms == g.interval_ms {
                true => String::new(),
                false => format!(", step {} ms", g.step_ms),
            };
            let windows = (g.end - g.start).unsigned_abs().div_ceil(g.step_ms);
            format!(
                "{windows} windows of {} ms from {}{step}",
                g.interval_ms, g.start
            )
        }
    }
}

/// The region step of an aggregation without a filter.
fn region_aggregate(what: &str, range: TimeRange, items: &[AggregateItem]) -> String {
    let moments = items.iter().any(|i| i.function.needs_moments());
    let decode = if moments {
        "; STDDEV and VARIANCE decode pages for the second moment"
    } else {
        ""
    };
    format!(
        "RegionAggregate  {what}, time {}  partial aggregates per window on each region's \
         leader, from page statistics where a page lies wholly in a window{decode}",
        range_text(range)
    )
}

/// The plan of a table-model query in `database`; `None` for a statement that is no query.
pub(super) fn table_plan(statement: &TableStatement, database: &str) -> Option<Vec<String>> {
    match statement {
        TableStatement::Select(select) => Some(chain(table_select_steps(select, database))),
        TableStatement::SelectAggregate(query) => {
            Some(chain(table_aggregate_steps(query, database)))
        }
        TableStatement::Explain { query, .. } => table_plan(query, database),
        TableStatement::Shared(statement) => tree_plan(statement),
        _ => None,
    }
}

fn table_name(database: Option<&str>, table: &str, current: &str) -> String {
    format!("{}.{table}", database.unwrap_or(current))
}

fn table_select_steps(select: &TableSelect, current: &str) -> Vec<String> {
    let table = table_name(select.database.as_deref(), &select.table, current);
    let mut steps = vec![format!("Table query  {table}")];
    let mut page = Vec::new();
    if select.order_by_time {
        let direction = if select.rows.descending {
            "DESC"
        } else {
            "ASC"
        };
        page.push(format!("ORDER BY time {direction}"));
    }
    if !select.order_by.is_empty() {
        let keys: Vec<String> = select
            .order_by
            .iter()
            .map(|(c, desc)| format!("{c} {}", if *desc { "DESC" } else { "ASC" }))
            .collect();
        page.push(format!("ORDER BY {}", keys.join(", ")));
    }
    if select.rows.offset > 0 {
        page.push(format!("OFFSET {}", select.rows.offset));
    }
    if let Some(limit) = select.rows.limit {
        page.push(format!("LIMIT {limit}"));
    }
    if !page.is_empty() {
        steps.push(format!("Page  {}", page.join(", ")));
    }
    let columns = match &select.columns {
        None => "*".to_string(),
        Some(columns) => columns.join(", "),
    };
    let join = format!(
        "DeviceScan  {columns}  the table's devices the WHERE clause's TAG and ATTRIBUTE terms \
         keep, each device's FIELD columns joined on time"
    );
    raw_steps(&mut steps, select.filter.as_ref(), join, select.range);
    steps
}

fn table_aggregate_steps(query: &TableAggregate, current: &str) -> Vec<String> {
    let table = table_name(query.database.as_deref(), &query.table, current);
    let mut steps = vec![format!("Table aggregate  {table}")];
    let mut page = Vec::new();
    if !query.order_by.is_empty() {
        let keys: Vec<String> = query
            .order_by
            .iter()
            .map(|(i, desc)| format!("{}{}", i + 1, if *desc { " DESC" } else { "" }))
            .collect();
        page.push(format!("ORDER BY {}", keys.join(", ")));
    }
    if query.offset > 0 {
        page.push(format!("OFFSET {}", query.offset));
    }
    if let Some(limit) = query.limit {
        page.push(format!("LIMIT {limit}"));
    }
    if !page.is_empty() {
        steps.push(format!("Page  {}", page.join(", ")));
    }
    steps.extend(query.having.as_ref().map(|h| format!("Having  {h}")));
    let mut keys = query.group_columns.clone();
    if let Some(bin) = query.date_bin {
        let name = if bin.gapfill {
            "date_bin_gapfill"
        } else {
            "date_bin"
        };
        keys.push(format!(
            "{name}({} ms, time, {})",
            bin.interval_ms, bin.origin_ms
        ));
    }
    if !keys.is_empty() {
        steps.push(format!("Group  GROUP BY {}", keys.join(", ")));
    }
    let items: Vec<String> = query
        .items
        .iter()
        .filter_map(|item| match &item.kind {
            TableItemKind::Aggregate { function, column } => {
                Some(format!("{}({column})", function.name()))
            }
            TableItemKind::ValueAtRow { column, last } => Some(format!(
                "{}({column}, time)",
                if *last { "last_by" } else { "first_by" }
            )),
            TableItemKind::CountIf(condition) => Some(format!("count_if({condition})")),
            TableItemKind::ExtremeBy { x, y, max } => Some(format!(
                "{}({x}, {y})",
                if *max { "max_by" } else { "min_by" }
            )),
            TableItemKind::Column(_) | TableItemKind::DateBin(_) => None,
        })
        .collect();
    steps.push(format!("Finish  {}", items.join(", ")));
    if let Some(filter) = &query.filter {
        steps.push(format!(
            "Filter  {filter}  (TAG and ATTRIBUTE terms choose the devices; terms on FIELD \
             columns are judged row by row, those devices' rows read raw and folded here)"
        ));
    }
    steps.push(format!(
        "RegionAggregate  the devices kept, time {}  partials per bin on each region's leader, \
         from page statistics where a page lies wholly in a bin (rows read raw when count(*) \
         counts the rows of devices with several FIELD columns)",
        range_text(query.range)
    ));
    steps
}
