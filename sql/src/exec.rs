//! Runs parsed statements over a [`Backend`] and turns every answer into an [`Outcome`]: a
//! table of typed columns and rows. The DataNode's client service runs it over its own
//! coordinator and sends the table as TsBlocks; the `fencepost` CLI runs it over a session and
//! renders the table as a box or as JSON.
//!
//! Result shapes follow IoTDB's (`IOTDB_PROTOCOL.md` §9): a raw SELECT is `Time` and one column
//! per series, named by its full path; `SELECT LAST` is `Time`, `Timeseries`, `Value` (as text)
//! and `DataType`; an aggregation one row of `count(<path>)`-like columns, or with GROUP BY
//! `Time` (each window's start) and one row per window. A series named in a SELECT that does
//! not exist is left out, as IoTDB does.
//!
//! INSERT type rules (one tablet per statement, so the server's per-tablet atomicity holds):
//! - a series that exists (its type looked up once per statement with
//!   [`Backend::series_types`], which the DataNode answers from its schema cache): every
//!   literal of its column is converted to the series' type when that is lossless (an integer to
//!   INT32 / INT64 when it fits, to FLOAT up to 2^24 and to DOUBLE up to 2^53 in magnitude; a
//!   float to FLOAT, rounded to single precision, or to DOUBLE); otherwise the column is sent with
//!   the literals' natural type and the server answers 614 DATA_TYPE_MISMATCH, writing nothing;
//! - a new series: integer and float literals → DOUBLE (IoTDB's `integer_string_infer_type` and
//!   `floating_string_infer_type` defaults), `true`/`false` → BOOLEAN, strings → TEXT;
//! - a column mixing literals of different natural types (e.g. `1` and `'a'`) that cannot all
//!   convert is refused here with 614 and nothing is sent;
//! - NULL leaves the cell empty; a column of NULLs only is left out of the tablet.

use std::collections::HashMap;
use std::future::Future;

use common::views::{DatabaseView, TimeseriesView};
use common::{DataType, StatusCode, Tablet, Value};

use crate::{Insert, Literal, ParseError, PathPattern, Projection, Statement};

pub use backend::Backend;

mod aggregate;
mod align;
mod analyze;
mod backend;
mod budget;
mod cursor;
mod explain;
mod fill;
mod filter;
mod join;
mod project;
mod query;
mod rows;
mod schema;
mod show;
mod table;

pub use aggregate::{aggregate_paths, PathAggregation};
pub use budget::{row_bytes, ResultBudget, ResultCharge};
pub use cursor::{Page, ResultCursor};
pub use query::{last_paths, open_raw_paths, raw_paths, value_text};
pub use table::{execute_table, execute_table_charged, insert_table, TableOutcome};

/// Most rows one query may return (a raw SELECT's joined rows, or one series' points); past it
/// the statement fails with 700 and asks for a narrower time range.
pub const RESULT_ROWS_MAX: usize = 1_000_000;

/// Largest integer magnitude a FLOAT holds exactly (2^24).
const FLOAT_EXACT_INTEGER_MAX: i64 = 1 << 24;
/// Largest integer magnitude a DOUBLE holds exactly (2^53).
const DOUBLE_EXACT_INTEGER_MAX: i64 = 1 << 53;

/// The name of a result's time column; a table without it has no time (IoTDB's
/// `ignoreTimeStamp`).
pub const TIME_COLUMN: &str = "Time";
/// The name of ALIGN BY DEVICE's device column.
pub const DEVICE_COLUMN: &str = "Device";

/// One cell of a result; `None` is SQL NULL.
pub type Cell = Option<Value>;

/// What a statement produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// A query (rows to show, even none) or a statement that only succeeded.
    pub kind: OutcomeKind,
    /// Column names; empty for a non-query. A first column named [`TIME_COLUMN`] is the rows'
    /// time.
    pub columns: Vec<String>,
    /// Each column's type, as long as `columns`.
    pub types: Vec<DataType>,
    /// Rows, each as long as `columns`; a cell holds a value of its column's type or nothing.
    pub rows: Vec<Vec<Cell>>,
}

/// Whether an [`Outcome`] is a result set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutcomeKind {
    /// SELECT and SHOW.
    Query,
    /// Every other statement.
    Done,
}

impl Outcome {
    fn done() -> Outcome {
        Outcome {
            kind: OutcomeKind::Done,
            columns: Vec::new(),
            types: Vec::new(),
            rows: Vec::new(),
        }
    }

    fn query(header: Vec<(String, DataType)>, rows: Vec<Vec<Cell>>) -> Outcome {
        let (columns, types): (Vec<String>, Vec<DataType>) = header.into_iter().unzip();
        debug_assert!(rows.iter().all(|r| r.len() == columns.len()));
        debug_assert!(rows.iter().all(|r| r
            .iter()
            .zip(&types)
            .all(|(c, t)| c.as_ref().is_none_or(|v| v.data_type() == *t))));
        Outcome {
            kind: OutcomeKind::Query,
            columns,
            types,
            rows,
        }
    }

    /// True when the first column is the rows' time.
    pub fn has_time(&self) -> bool {
        self.columns.first().is_some_and(|c| c == TIME_COLUMN)
    }
}

/// IoTDB's UNSUPPORTED_OPERATION: a statement Fencepost does not run yet.
pub const UNSUPPORTED_OPERATION: i32 = 300;

/// The result of a backend call or a statement.
pub type ExecResult<T> = Result<T, ExecError>;

/// Why a statement failed; each carries an IoTDB status code.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The statement does not parse (700, IoTDB's SQL_PARSE_ERROR number).
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// The backend answered a status other than success.
    #[error("{message}")]
    Status {
        /// The IoTDB status code.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// Parts of one request failed (IoTDB's 302 MULTIPLE_ERROR): each part's status, in
    /// request order, successes included, as IoTDB's clients read them from `subStatus`.
    #[error("{message}")]
    Parts {
        /// What failed, in a sentence.
        message: String,
        /// Each part's code and message.
        parts: Vec<(i32, String)>,
    },
    /// Refused here before anything was sent.
    #[error("{message}")]
    Refused {
        /// The status code.
        code: StatusCode,
        /// Why.
        message: String,
    },
}

impl ExecError {
    /// The IoTDB status code.
    pub fn code(&self) -> i32 {
        match self {
            ExecError::Parse(e) if e.unsupported => UNSUPPORTED_OPERATION,
            ExecError::Parse(_) => StatusCode::IllegalParameter.wire(),
            ExecError::Status { code, .. } => *code,
            ExecError::Parts { .. } => StatusCode::MultipleError.wire(),
            ExecError::Refused { code, .. } => code.wire(),
        }
    }

    /// A refusal with `code`.
    pub fn refused(code: StatusCode, message: impl Into<String>) -> ExecError {
        ExecError::Refused {
            code,
            message: message.into(),
        }
    }
}

/// The bytes of an outcome's rows, as results are charged ([`ResultCharge`]).
pub fn outcome_bytes(outcome: &Outcome) -> usize {
    outcome.rows.iter().map(|row| row_bytes(row)).sum()
}

/// Runs one statement, with nothing bounding its result's memory (see [`execute_charged`]).
pub async fn execute<B: Backend>(backend: &B, statement: &Statement) -> ExecResult<Outcome> {
    execute_charged(backend, statement, &mut ResultCharge::unbounded()).await
}

/// Runs one statement, its result charged to `charge` as it is built; on success `charge`
/// holds exactly [`outcome_bytes`] of the outcome, for the caller to give back as the rows are
/// sent (or all at once by dropping it). [`Statement::Quit`] is the caller's business and
/// succeeds here.
pub async fn execute_charged<B: Backend>(
    backend: &B,
    statement: &Statement,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    let outcome = run(backend, statement, charge).await?;
    charge.settle(outcome_bytes(&outcome))?;
    Ok(outcome)
}

/// Opens one statement's result as a cursor: a raw SELECT reads its rows as the cursor is asked
/// for them (see [`ResultCursor`]); every other statement runs whole, as
/// [`execute_charged`] runs it, its rows charged to `charge`.
pub async fn open<B: Backend>(
    backend: &B,
    statement: &Statement,
    charge: &mut ResultCharge,
) -> ExecResult<ResultCursor> {
    match raw_select(statement) {
        Some(query) => open_raw(backend, &query).await,
        None => Ok(ResultCursor::built(
            execute_charged(backend, statement, charge).await?,
        )),
    }
}

/// A raw SELECT's parts, borrowed from its statement.
fn raw_select(statement: &Statement) -> Option<query::RawSelect<'_>> {
    let Statement::Select {
        from,
        measurements,
        range,
        filter,
        rows,
        fill,
        align_by_device,
    } = statement
    else {
        return None;
    };
    Some(query::RawSelect {
        from,
        projection: measurements,
        range: *range,
        filter: filter.as_ref(),
        rows: *rows,
        fill: fill.as_ref(),
        align_by_device: *align_by_device,
    })
}

async fn run<B: Backend>(
    backend: &B,
    statement: &Statement,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    match statement {
        Statement::CreateDatabase { database } => {
            done(backend.create_database(database, false)).await
        }
        Statement::DropDatabase { database } => done(drop_tree_database(backend, database)).await,
        Statement::SetTtl { database, ttl_ms } => done(backend.set_ttl(database, *ttl_ms)).await,
        Statement::UnsetTtl { database } => done(backend.unset_ttl(database)).await,
        Statement::RemoveDataNode { data_node_id } => {
            done(backend.remove_data_node(*data_node_id)).await
        }
        Statement::CreateTimeseries {
            path,
            data_type,
            encoding,
            compressor,
            meta,
        } => {
            let (encoding, compressor) = (encoding.as_deref(), compressor.as_deref());
            done(backend.create_timeseries(path, *data_type, encoding, compressor, meta)).await
        }
        Statement::DeleteTimeseries { path } => done(backend.delete_timeseries(path)).await,
        Statement::DeleteData { paths, range } => {
            if range.is_empty() {
                return Ok(Outcome::done());
            }
            delete_paths(backend, paths, range.from, range.inclusive_end()).await?;
            Ok(Outcome::done())
        }
        Statement::Insert(insert) => done(insert_values(backend, insert)).await,
        Statement::Flush => done(backend.flush()).await,
        Statement::CreateUser { name, password } => done(backend.create_user(name, password)).await,
        Statement::DropUser { name } => done(backend.drop_user(name)).await,
        Statement::AlterUserPassword { name, password } => {
            done(backend.alter_user_password(name, password)).await
        }
        Statement::ListUsers => list_users(backend).await,
        Statement::Select { .. }
        | Statement::SelectLast { .. }
        | Statement::SelectAggregate { .. } => select(backend, statement, charge).await,
        Statement::ShowDatabases { pattern } => show::databases(backend, pattern.as_ref()).await,
        Statement::CountTimeseries { pattern, level } => {
            schema::count_timeseries(backend, pattern.as_ref(), *level).await
        }
        Statement::CountDevices { pattern } => {
            schema::count_devices(backend, pattern.as_ref()).await
        }
        Statement::ShowChild { pattern, nodes } => {
            schema::child(backend, pattern.as_ref(), *nodes).await
        }
        Statement::ShowTimeseries { pattern } => show::timeseries(backend, pattern.as_ref()).await,
        Statement::ShowDevices { pattern } => show::devices(backend, pattern.as_ref()).await,
        Statement::ShowCluster => show::cluster(backend).await,
        Statement::ShowRegions => show::regions(backend).await,
        Statement::ShowLeases => show::leases(backend).await,
        Statement::ShowLocalLease => show::local_lease(backend).await,
        Statement::ShowQueries => show::queries(backend).await,
        Statement::KillQuery { id } => {
            let killed = backend.kill_query(id.as_deref()).await?;
            match id {
                Some(id) if killed == 0 => Err(ExecError::refused(
                    StatusCode::NoSuchQuery,
                    format!("no query {id} is running (or it is not yours to kill)"),
                )),
                _ => Ok(Outcome::done()),
            }
        }
        Statement::Explain { analyze, query } => {
            let plan = explain::tree_plan(query).ok_or_else(|| {
                ExecError::refused(StatusCode::IllegalParameter, "EXPLAIN takes a query")
            })?;
            explain::explain(
                backend,
                plan,
                *analyze,
                Box::pin(run(backend, query, charge)),
            )
            .await
        }
        Statement::Quit => Ok(Outcome::done()),
    }
}

/// A SELECT of the tree model: raw, LAST or aggregate.
async fn select<B: Backend>(
    backend: &B,
    statement: &Statement,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    match statement {
        Statement::Select { .. } => {
            let query = raw_select(statement).expect("a raw SELECT");
            let cursor = open_raw(backend, &query).await?;
            cursor.collect(backend, charge).await
        }
        Statement::SelectLast {
            from,
            measurements,
            since,
        } => query::select_last(backend, from, measurements, *since).await,
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
            let query = aggregate::AggregateQuery {
                from,
                items,
                range: *range,
                filter: filter.as_ref(),
                group_by: *group_by,
                levels: levels.as_deref(),
                tags: tags.as_deref(),
                rows: *rows,
                fill: fill.as_ref(),
                having: having.as_ref(),
                align_by_device: *align_by_device,
            };
            let outcome = aggregate::select_aggregate(backend, &query, charge).await?;
            match outputs {
                Some(outputs) => project::aggregates(outcome, outputs),
                None => Ok(outcome),
            }
        }
        other => unreachable!("select takes SELECT statements, not {other:?}"),
    }
}

/// A raw SELECT's cursor: a select list with expressions computed ([`project`]), else the
/// series' own columns ([`query::open_raw`]).
async fn open_raw<B: Backend>(
    backend: &B,
    query: &query::RawSelect<'_>,
) -> ExecResult<cursor::ResultCursor> {
    match query.projection {
        Projection::Computed { names, items } => project::open(backend, query, names, items).await,
        _ => query::open_raw(backend, query).await,
    }
}

/// The outcome of a statement that answers nothing but success: `call`'s, once it succeeded.
async fn done(call: impl Future<Output = ExecResult<()>>) -> ExecResult<Outcome> {
    call.await?;
    Ok(Outcome::done())
}

/// `INSERT INTO ... VALUES`: one tablet, its literals typed by the series that exist (see the
/// module's INSERT type rules).
async fn insert_values<B: Backend>(backend: &B, insert: &Insert) -> ExecResult<()> {
    let existing = backend
        .series_types(&insert.device, &insert.measurements)
        .await?
        .into_iter()
        .collect();
    backend
        .insert_tablet(build_tablet(insert, &existing)?)
        .await
}

/// `LIST USER`: one row per user.
async fn list_users<B: Backend>(backend: &B) -> ExecResult<Outcome> {
    let rows = backend
        .list_users()
        .await?
        .into_iter()
        .map(|u| vec![Some(Value::Text(u))])
        .collect();
    Ok(Outcome::query(
        vec![("User".to_string(), DataType::Text)],
        rows,
    ))
}

/// Deletes the points with `start <= time <= end` of the series `patterns` name (IoTDB's
/// `deleteData`): a pattern without a wildcard is that one series, one with a wildcard every
/// existing series it matches. Names of no series are passed over.
pub async fn delete_paths<B: Backend>(
    backend: &B,
    patterns: &[PathPattern],
    start: i64,
    end: i64,
) -> ExecResult<()> {
    let mut series: Vec<(String, String)> = Vec::new();
    for pattern in patterns {
        if let Some(one) = pattern.as_series() {
            series.push(one);
            continue;
        }
        if !pattern.has_wildcard() {
            return Err(ExecError::refused(
                StatusCode::IllegalParameter,
                format!("{pattern} is not a series path like root.sg.d1.s1"),
            ));
        }
        for (_, s) in show::series_matching(backend, Some(pattern)).await? {
            if !s.pending_delete {
                series.push((s.device, s.measurement));
            }
        }
    }
    series.sort();
    series.dedup();
    if series.is_empty() {
        return Ok(());
    }
    backend.delete_data(&series, start, end).await
}

/// The series of `device` (exactly that device), in the server's order; series being deleted
/// are left out.
async fn device_views<B: Backend>(backend: &B, device: &str) -> ExecResult<Vec<TimeseriesView>> {
    Ok(tree_series(backend, &format!("{device}."))
        .await?
        .into_iter()
        .filter(|s| s.device == device && !s.pending_delete)
        .collect())
}

/// The series under `prefix` that tree statements see: those of tree-model databases (a table's
/// columns on its devices belong to the table model, as in IoTDB).
async fn tree_series<B: Backend>(backend: &B, prefix: &str) -> ExecResult<Vec<TimeseriesView>> {
    let mut series = backend.show_timeseries(prefix).await?;
    series.retain(|s| !s.table_model);
    Ok(series)
}

/// The databases tree statements see: the tree model's.
async fn tree_databases<B: Backend>(backend: &B) -> ExecResult<Vec<DatabaseView>> {
    let mut databases = backend.show_databases().await?;
    databases.retain(|d| !d.table_model);
    Ok(databases)
}

/// DROP DATABASE of the tree model (the statement and IoTDB's `deleteStorageGroups`): a
/// table-model database is the table model's to drop.
pub async fn drop_tree_database<B: Backend>(backend: &B, database: &str) -> ExecResult<()> {
    let table_model = backend
        .show_databases()
        .await?
        .iter()
        .any(|d| d.name == database && d.table_model);
    if table_model {
        return Err(ExecError::refused(
            StatusCode::IllegalParameter,
            format!("{database} is a table-model database: drop it with the table model"),
        ));
    }
    backend.drop_database(database).await
}

/// [`device_views`]' measurements and their types.
async fn device_series<B: Backend>(
    backend: &B,
    device: &str,
) -> ExecResult<Vec<(String, DataType)>> {
    Ok(device_views(backend, device)
        .await?
        .into_iter()
        .map(|s| (s.measurement, s.data_type))
        .collect())
}

/// The series a projection names that exist, as (the name asked for, the measurement, its
/// type): `*` is every series of the device; a name that is no measurement of the device may be
/// a series' alias.
async fn resolve<B: Backend>(
    backend: &B,
    device: &str,
    projection: &Projection,
) -> ExecResult<Vec<(String, String, DataType)>> {
    let names = match projection {
        Projection::All => {
            return Ok(device_series(backend, device)
                .await?
                .into_iter()
                .map(|(m, t)| (m.clone(), m, t))
                .collect())
        }
        Projection::Measurements(names)
        | Projection::Aliased { names, .. }
        | Projection::Computed { names, .. } => names,
    };
    let found: HashMap<String, DataType> = backend
        .series_types(device, names)
        .await?
        .into_iter()
        .collect();
    let mut aliases: HashMap<String, (String, DataType)> = HashMap::new();
    if names.iter().any(|n| !found.contains_key(n)) {
        for s in device_views(backend, device).await? {
            if let Some(alias) = s.meta.alias {
                aliases.insert(alias, (s.measurement, s.data_type));
            }
        }
    }
    Ok(names
        .iter()
        .filter_map(|name| match found.get(name) {
            Some(t) => Some((name.clone(), name.clone(), *t)),
            None => aliases
                .get(name)
                .map(|(m, t)| (name.clone(), m.clone(), *t)),
        })
        .collect())
}

/// One tablet holding every row of `insert`, typed by the rules in the module comment.
pub fn build_tablet(
    insert: &Insert,
    existing: &HashMap<String, DataType>,
) -> Result<Tablet, ExecError> {
    let mut schema: Vec<(&str, DataType)> = Vec::new();
    let mut columns: Vec<Vec<Option<Value>>> = Vec::new();
    for (index, measurement) in insert.measurements.iter().enumerate() {
        let literals: Vec<&Literal> = insert.rows.iter().map(|r| &r.values[index]).collect();
        let path = format!("{}.{measurement}", insert.device);
        if let Some((data_type, values)) = type_column(&path, &literals, existing.get(measurement))?
        {
            schema.push((measurement, data_type));
            columns.push(values);
        }
    }
    if schema.is_empty() {
        return Err(ExecError::refused(
            StatusCode::IllegalParameter,
            format!(
                "every value for {} is NULL: nothing to insert",
                insert.device
            ),
        ));
    }
    let mut tablet = Tablet::new(insert.device.clone(), &schema);
    for (row_index, row) in insert.rows.iter().enumerate() {
        let values = columns.iter().map(|c| c[row_index].clone()).collect();
        tablet.push_row(row.timestamp, values);
    }
    Ok(tablet)
}

/// A column's type and its cells, one per row (`None` is NULL).
type TypedColumn = (DataType, Vec<Option<Value>>);

/// A column's type and values, `None` when it holds only NULLs.
fn type_column(
    path: &str,
    literals: &[&Literal],
    existing: Option<&DataType>,
) -> Result<Option<TypedColumn>, ExecError> {
    if literals.iter().all(|l| **l == Literal::Null) {
        return Ok(None);
    }
    if let Some(&data_type) = existing {
        let converted: Option<Vec<Option<Value>>> = literals
            .iter()
            .map(|l| match l {
                Literal::Null => Some(None),
                l => convert(l, data_type).map(Some),
            })
            .collect();
        if let Some(values) = converted {
            return Ok(Some((data_type, values)));
        }
    }
    let values: Vec<Option<Value>> = literals.iter().map(|l| natural(l)).collect();
    let mut types = values.iter().flatten().map(Value::data_type);
    let first = types.next().expect("a column with a non-NULL literal");
    if let Some(other) = types.find(|t| *t != first) {
        return Err(ExecError::refused(
            StatusCode::DataTypeMismatch,
            format!("values for {path} are of different types ({first} and {other})"),
        ));
    }
    Ok(Some((first, values)))
}

/// `literal` as a value of `data_type`, if the conversion loses nothing (FLOAT rounds a float
/// literal to single precision, as IoTDB does).
pub fn convert(literal: &Literal, data_type: DataType) -> Option<Value> {
    match (literal, data_type) {
        (Literal::Integer(i), DataType::Int32) => i32::try_from(*i).ok().map(Value::Int32),
        (Literal::Integer(i), DataType::Int64) => Some(Value::Int64(*i)),
        (Literal::Integer(i), DataType::Float) => {
            (i.unsigned_abs() <= FLOAT_EXACT_INTEGER_MAX as u64).then_some(Value::Float(*i as f32))
        }
        (Literal::Integer(i), DataType::Double) => (i.unsigned_abs()
            <= DOUBLE_EXACT_INTEGER_MAX as u64)
            .then_some(Value::Double(*i as f64)),
        (Literal::Float(f), DataType::Float) => {
            let single = *f as f32;
            single.is_finite().then_some(Value::Float(single))
        }
        (Literal::Float(f), DataType::Double) => Some(Value::Double(*f)),
        (Literal::Boolean(b), DataType::Boolean) => Some(Value::Boolean(*b)),
        (Literal::Text(s), DataType::Text) => Some(Value::Text(s.clone())),
        (Literal::Text(s), DataType::String) => Some(Value::String(s.clone())),
        (Literal::Text(s), DataType::Date) => common::date::parse(s).map(Value::Date),
        (Literal::Integer(i), DataType::Timestamp) => Some(Value::Timestamp(*i)),
        (Literal::Blob(b), DataType::Blob) => Some(Value::Blob(b.clone())),
        _ => None,
    }
}

/// The type a literal gets for a new series: numbers DOUBLE, booleans BOOLEAN, strings TEXT,
/// `X'..'` BLOB.
pub fn natural(literal: &Literal) -> Option<Value> {
    match literal {
        Literal::Integer(i) => Some(Value::Double(*i as f64)),
        Literal::Float(f) => Some(Value::Double(*f)),
        Literal::Boolean(b) => Some(Value::Boolean(*b)),
        Literal::Text(s) => Some(Value::Text(s.clone())),
        Literal::Blob(b) => Some(Value::Blob(b.clone())),
        Literal::Null => None,
    }
}

#[cfg(test)]
mod aggregate_by_tests;
#[cfg(test)]
mod aggregate_tests;
#[cfg(test)]
mod backend_tests;
#[cfg(test)]
mod calendar_tests;
#[cfg(test)]
mod cursor_tests;
#[cfg(test)]
mod explain_tests;
#[cfg(test)]
mod filter_tests;
#[cfg(test)]
mod memory_backend;
#[cfg(test)]
mod project_tests;
#[cfg(test)]
mod query_tests;
#[cfg(test)]
mod table_aggregate_tests;
#[cfg(test)]
mod wildcard_tests;
#[cfg(test)]
mod windows_model_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::InsertRow;

    fn insert(measurements: &[&str], rows: Vec<(i64, Vec<Literal>)>) -> Insert {
        Insert {
            device: "root.sg.d1".into(),
            measurements: measurements.iter().map(|m| m.to_string()).collect(),
            rows: rows
                .into_iter()
                .map(|(timestamp, values)| InsertRow { timestamp, values })
                .collect(),
        }
    }

    #[test]
    fn new_series_infer_double_boolean_and_text() {
        let tablet = build_tablet(
            &insert(
                &["a", "b", "c", "d"],
                vec![
                    (
                        1,
                        vec![
                            Literal::Integer(2),
                            Literal::Float(1.5),
                            Literal::Boolean(true),
                            Literal::Text("x".into()),
                        ],
                    ),
                    (
                        2,
                        vec![
                            Literal::Float(0.5),
                            Literal::Null,
                            Literal::Boolean(false),
                            Literal::Null,
                        ],
                    ),
                ],
            ),
            &HashMap::new(),
        )
        .expect("builds");
        assert_eq!(
            tablet.data_types,
            vec![
                DataType::Double,
                DataType::Double,
                DataType::Boolean,
                DataType::Text
            ]
        );
        assert_eq!(tablet.timestamps, vec![1, 2]);
        assert!(tablet.is_null(1, 1) && tablet.is_null(1, 3) && !tablet.is_null(0, 0));
        assert_eq!(tablet.point_count(), 6);
        tablet.validate(&Default::default()).expect("valid");
    }

    #[test]
    fn existing_series_convert_when_lossless() {
        let existing: HashMap<String, DataType> = [
            ("i32", DataType::Int32),
            ("i64", DataType::Int64),
            ("f", DataType::Float),
        ]
        .into_iter()
        .map(|(m, t)| (m.to_string(), t))
        .collect();
        let tablet = build_tablet(
            &insert(
                &["i32", "i64", "f"],
                vec![(
                    1,
                    vec![
                        Literal::Integer(7),
                        Literal::Integer(-8),
                        Literal::Float(0.25),
                    ],
                )],
            ),
            &existing,
        )
        .expect("builds");
        assert_eq!(
            tablet.data_types,
            vec![DataType::Int32, DataType::Int64, DataType::Float]
        );
        // Lossy or impossible conversions keep the natural type, for the server to refuse.
        let tablet = build_tablet(
            &insert(
                &["i32", "f"],
                vec![(
                    1,
                    vec![Literal::Integer(1 << 40), Literal::Text("x".into())],
                )],
            ),
            &existing,
        )
        .expect("builds");
        assert_eq!(tablet.data_types, vec![DataType::Double, DataType::Text]);
    }

    #[test]
    fn conversions() {
        assert_eq!(
            convert(&Literal::Integer(1 << 24), DataType::Float),
            Some(Value::Float(16_777_216.0))
        );
        assert_eq!(
            convert(&Literal::Integer((1 << 24) + 1), DataType::Float),
            None
        );
        assert_eq!(
            convert(&Literal::Integer(i64::from(i32::MAX) + 1), DataType::Int32),
            None
        );
        assert_eq!(convert(&Literal::Float(1.5), DataType::Int64), None);
        assert_eq!(convert(&Literal::Float(1e300), DataType::Float), None);
        assert_eq!(convert(&Literal::Boolean(true), DataType::Text), None);
        assert_eq!(convert(&Literal::Text("1".into()), DataType::Int32), None);
        // IoTDB 2.0's types: a day as 'yyyy-mm-dd', an instant as an integer, X'..' bytes.
        assert_eq!(
            convert(&Literal::Text("2024-02-29".into()), DataType::Date),
            Some(Value::Date(20240229))
        );
        assert_eq!(
            convert(&Literal::Text("2023-02-29".into()), DataType::Date),
            None
        );
        assert_eq!(
            convert(&Literal::Integer(-1), DataType::Timestamp),
            Some(Value::Timestamp(-1))
        );
        assert_eq!(
            convert(&Literal::Text("s".into()), DataType::String),
            Some(Value::String("s".into()))
        );
        assert_eq!(
            convert(&Literal::Blob(vec![1]), DataType::Blob),
            Some(Value::Blob(vec![1]))
        );
        assert_eq!(convert(&Literal::Text("01".into()), DataType::Blob), None);
        assert_eq!(convert(&Literal::Blob(vec![1]), DataType::Text), None);
    }

    #[test]
    fn mixed_columns_and_all_null_statements_are_refused() {
        let mixed = build_tablet(
            &insert(
                &["a"],
                vec![
                    (1, vec![Literal::Integer(1)]),
                    (2, vec![Literal::Text("x".into())]),
                ],
            ),
            &HashMap::new(),
        );
        assert!(
            matches!(
                mixed,
                Err(ExecError::Refused {
                    code: StatusCode::DataTypeMismatch,
                    ..
                })
            ),
            "{mixed:?}"
        );
        let nulls = build_tablet(
            &insert(&["a"], vec![(1, vec![Literal::Null])]),
            &HashMap::new(),
        );
        assert!(
            matches!(
                nulls,
                Err(ExecError::Refused {
                    code: StatusCode::IllegalParameter,
                    ..
                })
            ),
            "{nulls:?}"
        );
    }

    #[test]
    fn error_codes() {
        let parse = ExecError::Parse(ParseError::new(crate::Position::START, "x"));
        assert_eq!(parse.code(), 700);
        let unsupported = ExecError::Parse(ParseError {
            unsupported: true,
            ..ParseError::new(crate::Position::START, "GROUP BY")
        });
        assert_eq!(unsupported.code(), 300);
        let status = ExecError::Status {
            code: 614,
            message: "m".into(),
        };
        assert_eq!((status.code(), status.to_string()), (614, "m".to_string()));
        let refused = ExecError::refused(StatusCode::DataTypeMismatch, "r");
        assert_eq!(refused.code(), 614);
    }

    #[test]
    fn last_values_print_as_java_does() {
        assert_eq!(value_text(&Value::Double(2.0)), "2.0");
        assert_eq!(value_text(&Value::Double(1.5)), "1.5");
        assert_eq!(value_text(&Value::Float(-3.0)), "-3.0");
        assert_eq!(value_text(&Value::Int64(7)), "7");
        assert_eq!(value_text(&Value::Boolean(true)), "true");
    }
}
