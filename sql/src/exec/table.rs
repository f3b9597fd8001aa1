//! The table model (`sql_dialect=table`) over a [`Backend`], on the tree as `common::table` maps
//! it: a table's devices are tree devices under `root.<db>.<table>`, its FIELD columns their
//! series, its schema and device attributes the ConfigNode's.
//!
//! Result shapes follow IoTDB's table model: a query's columns are the table's (or those
//! named), `time` first as a TIMESTAMP value column, and no result has a time column of its own
//! (the client's `ignoreTimeStamp`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::time::{SystemTime, UNIX_EPOCH};

use common::table::{self, Category, DeviceAttributes, TableColumn, TableSchema, TableView};
use common::{Column, DataType, StatusCode, Tablet, Value};

use super::budget::ResultCharge;
use super::{outcome_bytes, Backend, Cell, ExecError, ExecResult, Outcome};
use crate::{Insert, TableAggregate, TableSelect, TableStatement, TimeRange};

mod aggregate;
mod filter;
mod select;

/// What a table-model statement produced, and the session's current database after it (`USE`).
#[derive(Debug)]
pub struct TableOutcome {
    /// The result (a non-query's is empty).
    pub outcome: Outcome,
    /// `USE`'s database: the session's current one from now on.
    pub database: Option<String>,
}

impl From<Outcome> for TableOutcome {
    fn from(outcome: Outcome) -> TableOutcome {
        TableOutcome {
            outcome,
            database: None,
        }
    }
}

/// Runs one table-model statement in a session whose current database is `current`, with
/// nothing bounding its result's memory (see [`execute_table_charged`]).
pub async fn execute_table<B: Backend>(
    backend: &B,
    current: Option<&str>,
    statement: &TableStatement,
) -> ExecResult<TableOutcome> {
    execute_table_charged(backend, current, statement, &mut ResultCharge::unbounded()).await
}

/// [`execute_table`], the result charged to `charge` as it is built; on success `charge` holds
/// exactly [`outcome_bytes`] of the outcome (as [`super::execute_charged`]).
pub async fn execute_table_charged<B: Backend>(
    backend: &B,
    current: Option<&str>,
    statement: &TableStatement,
    charge: &mut ResultCharge,
) -> ExecResult<TableOutcome> {
    let outcome = run(backend, current, statement, charge).await?;
    charge.settle(outcome_bytes(&outcome.outcome))?;
    Ok(outcome)
}

async fn run<B: Backend>(
    backend: &B,
    current: Option<&str>,
    statement: &TableStatement,
    charge: &mut ResultCharge,
) -> ExecResult<TableOutcome> {
    match statement {
        TableStatement::CreateDatabase {
            name,
            if_not_exists,
        } => create_database(backend, name, *if_not_exists).await,
        TableStatement::DropDatabase { name, if_exists } => {
            drop_database(backend, name, *if_exists).await
        }
        TableStatement::Use { name } => {
            if !exists(backend, name).await? {
                return Err(no_database(name));
            }
            Ok(TableOutcome {
                outcome: Outcome::done(),
                database: Some(name.clone()),
            })
        }
        TableStatement::ShowDatabases => show_databases(backend).await.map(Into::into),
        TableStatement::CreateTable {
            database,
            table,
            if_not_exists,
        } => {
            let database = database_of(database.as_deref(), current)?;
            backend
                .create_table(
                    &table::database_path(database),
                    table,
                    *if_not_exists,
                    false,
                )
                .await?;
            Ok(Outcome::done().into())
        }
        TableStatement::ShowTables { database } => {
            let database = database_of(database.as_deref(), current)?;
            show_tables(backend, database).await.map(Into::into)
        }
        TableStatement::Describe { database, table } => {
            let database = database_of(database.as_deref(), current)?;
            describe(backend, database, table).await.map(Into::into)
        }
        TableStatement::Select(select) => {
            let database = database_of(select.database.as_deref(), current)?;
            select::query(backend, database, select, now_ms(), charge)
                .await
                .map(Into::into)
        }
        TableStatement::SelectAggregate(query) => {
            let database = database_of(query.database.as_deref(), current)?;
            aggregate::aggregate(backend, database, query, now_ms(), charge)
                .await
                .map(Into::into)
        }
        TableStatement::Insert { database, insert } => {
            let database = database_of(database.as_deref(), current)?;
            insert_rows(backend, database, insert).await?;
            Ok(Outcome::done().into())
        }
        TableStatement::DropTable {
            database,
            table,
            if_exists,
        } => {
            let database = database_of(database.as_deref(), current)?;
            match backend
                .drop_table(&table::database_path(database), table)
                .await
            {
                Err(e) if *if_exists && e.code() == StatusCode::TableNotExists.wire() => {}
                other => other?,
            }
            Ok(Outcome::done().into())
        }
        TableStatement::Delete {
            database,
            table,
            range,
            equals,
        } => {
            let database = database_of(database.as_deref(), current)?;
            delete(backend, database, table, *range, equals).await?;
            Ok(Outcome::done().into())
        }
        TableStatement::Explain { analyze, query } => {
            explain(backend, current, *analyze, query, charge).await
        }
        TableStatement::Shared(statement) => super::execute_charged(backend, statement, charge)
            .await
            .map(Into::into),
    }
}

/// `EXPLAIN [ANALYZE] query` in a session whose current database is `current`.
async fn explain<B: Backend>(
    backend: &B,
    current: Option<&str>,
    analyze: bool,
    query: &TableStatement,
    charge: &mut ResultCharge,
) -> ExecResult<TableOutcome> {
    let database = match query {
        TableStatement::Select(TableSelect { database, .. })
        | TableStatement::SelectAggregate(TableAggregate { database, .. }) => {
            database_of(database.as_deref(), current)?
        }
        _ => current.unwrap_or_default(),
    };
    let plan = super::explain::table_plan(query, database)
        .ok_or_else(|| ExecError::refused(StatusCode::IllegalParameter, "EXPLAIN takes a query"))?;
    let inner = Box::pin(run(backend, current, query, charge));
    let run = async { inner.await.map(|o| o.outcome) };
    super::explain::explain(backend, plan, analyze, run)
        .await
        .map(Into::into)
}

/// `CREATE DATABASE` of the table model: the tree database `root.<name>`.
async fn create_database<B: Backend>(
    backend: &B,
    name: &str,
    if_not_exists: bool,
) -> ExecResult<TableOutcome> {
    if exists(backend, name).await? {
        if if_not_exists {
            return Ok(Outcome::done().into());
        }
        return Err(ExecError::refused(
            StatusCode::MetadataError,
            format!("database {name} already exists"),
        ));
    }
    backend
        .create_database(&table::database_path(name), true)
        .await?;
    Ok(Outcome::done().into())
}

/// `DROP DATABASE` of the table model.
async fn drop_database<B: Backend>(
    backend: &B,
    name: &str,
    if_exists: bool,
) -> ExecResult<TableOutcome> {
    if !exists(backend, name).await? {
        if if_exists {
            return Ok(Outcome::done().into());
        }
        return Err(no_database(name));
    }
    backend.drop_database(&table::database_path(name)).await?;
    Ok(Outcome::done().into())
}

/// `SHOW TABLES`: each table of `database` with its TTL.
async fn show_tables<B: Backend>(backend: &B, database: &str) -> ExecResult<Outcome> {
    let rows = backend
        .tables(&table::database_path(database), None, false)
        .await?
        .into_iter()
        .map(|t| vec![text(t.schema.name), text(ttl_text(t.schema.ttl_ms))])
        .collect();
    Ok(Outcome::query(
        vec![
            ("TableName".to_string(), DataType::String),
            ("TTL(ms)".to_string(), DataType::String),
        ],
        rows,
    ))
}

/// `DESCRIBE` a table: its time column, then each column with its type and category.
async fn describe<B: Backend>(backend: &B, database: &str, table: &str) -> ExecResult<Outcome> {
    let view = one_table(backend, database, table, false).await?;
    let mut rows = vec![vec![
        text(table::TIME_COLUMN.to_string()),
        text(DataType::Timestamp.to_string()),
        text("TIME".to_string()),
    ]];
    rows.extend(view.schema.columns.iter().map(|c| {
        vec![
            text(c.name.clone()),
            text(c.data_type.to_string()),
            text(c.category.name().to_string()),
        ]
    }));
    Ok(Outcome::query(
        vec![
            ("ColumnName".to_string(), DataType::String),
            ("DataType".to_string(), DataType::String),
            ("Category".to_string(), DataType::String),
        ],
        rows,
    ))
}

fn text(s: String) -> Cell {
    Some(Value::String(s))
}

fn ttl_text(ttl_ms: Option<i64>) -> String {
    ttl_ms.map_or_else(|| "INF".to_string(), |t| t.to_string())
}

fn no_database(name: &str) -> ExecError {
    ExecError::refused(
        StatusCode::MetadataError,
        format!("database {name} does not exist"),
    )
}

/// The database a statement names, else the session's current one.
fn database_of<'a>(named: Option<&'a str>, current: Option<&'a str>) -> ExecResult<&'a str> {
    named.or(current).ok_or_else(|| {
        ExecError::refused(
            StatusCode::IllegalParameter,
            "no database selected: USE one, or name it with the table (db.table)",
        )
    })
}

/// Whether the table database `name` exists (a tree database of its path is none: the models
/// keep their namespaces apart).
async fn exists<B: Backend>(backend: &B, name: &str) -> ExecResult<bool> {
    let path = table::database_path(name);
    Ok(backend
        .show_databases()
        .await?
        .iter()
        .any(|d| d.name == path && d.table_model))
}

/// The table databases, by name (`root.x` is `x`).
async fn show_databases<B: Backend>(backend: &B) -> ExecResult<Outcome> {
    let rows = backend
        .show_databases()
        .await?
        .into_iter()
        .filter(|d| d.table_model)
        .filter_map(|d| {
            let name = d.name.strip_prefix("root.")?;
            (!name.contains('.')).then(|| {
                vec![
                    text(name.to_string()),
                    text(ttl_text(d.ttl_ms)),
                    Some(Value::Int32(d.schema_replication_factor as i32)),
                    Some(Value::Int32(d.data_replication_factor as i32)),
                    Some(Value::Int64(d.time_partition_interval_ms)),
                ]
            })
        })
        .collect();
    Ok(Outcome::query(
        vec![
            ("Database".to_string(), DataType::String),
            ("TTL(ms)".to_string(), DataType::String),
            ("SchemaReplicationFactor".to_string(), DataType::Int32),
            ("DataReplicationFactor".to_string(), DataType::Int32),
            ("TimePartitionInterval".to_string(), DataType::Int64),
        ],
        rows,
    ))
}

/// The wall clock, in ms since the epoch: what a table's TTL is counted back from.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `range` without the points older than the table's TTL at `now_ms`.
fn live_range(schema: &TableSchema, mut range: TimeRange, now_ms: i64) -> TimeRange {
    if let Some(ttl_ms) = schema.ttl_ms {
        range.from = range.from.max(now_ms.saturating_sub(ttl_ms));
    }
    range
}

/// One table, or 550.
async fn one_table<B: Backend>(
    backend: &B,
    database: &str,
    name: &str,
    with_devices: bool,
) -> ExecResult<TableView> {
    backend
        .tables(&table::database_path(database), Some(name), with_devices)
        .await?
        .pop()
        .ok_or_else(|| {
            ExecError::refused(
                StatusCode::TableNotExists,
                format!("table {database}.{name} does not exist"),
            )
        })
}

/// One device of a table being read.
struct Device<'v> {
    path: String,
    tags: Vec<Option<String>>,
    /// Its series, by FIELD column.
    fields: HashMap<String, DataType>,
    /// Its attributes, as the ConfigNode keeps them.
    attributes: Option<&'v BTreeMap<String, String>>,
}

impl Device<'_> {
    /// The value of the table's TAG or ATTRIBUTE column `index` for this device (`None` for a
    /// FIELD column, a null tag or an attribute never set).
    fn value_of(&self, schema: &TableSchema, index: usize) -> Option<&str> {
        let column = &schema.columns[index];
        match column.category {
            Category::Tag => {
                let tag = schema.tags().position(|t| t.name == column.name)?;
                self.tags[tag].as_deref()
            }
            Category::Attribute => self.attributes?.get(&column.name).map(String::as_str),
            Category::Field => None,
        }
    }
}

/// The devices of the table `view` (of `database`) whose TAG and ATTRIBUTE values equal those
/// of `equals` (only TAG columns when `tags_only`), in tag order, each with the FIELD series
/// it has; series being deleted, and series whose type is not their column's, are left out.
async fn matching_devices<'v, B: Backend>(
    backend: &B,
    database: &str,
    view: &'v TableView,
    equals: &[(String, String)],
    tags_only: bool,
) -> ExecResult<Vec<Device<'v>>> {
    let schema = &view.schema;
    let mut terms = Vec::with_capacity(equals.len());
    for (name, value) in equals {
        let index = column_index(schema, name)?;
        let category = schema.columns[index].category;
        let message = match category {
            Category::Field => {
                format!("value filters on the FIELD column {name} are not supported yet")
            }
            Category::Attribute if tags_only => {
                format!("a DELETE selects devices by TAG columns, not by the ATTRIBUTE {name}")
            }
            _ => {
                terms.push((index, value.as_str()));
                continue;
            }
        };
        return Err(ExecError::Status {
            code: super::UNSUPPORTED_OPERATION,
            message,
        });
    }

    let path = table::database_path(database);
    let tags = schema.tags().count();
    let attributes: BTreeMap<&[Option<String>], &BTreeMap<String, String>> = view
        .devices
        .iter()
        .map(|(tags, attributes)| (table::identifying_tags(tags), attributes))
        .collect();
    let mut devices: BTreeMap<String, Device<'v>> = BTreeMap::new();
    for series in backend
        .show_timeseries(&format!("{path}.{}", schema.name))
        .await?
    {
        let field = schema.column(&series.measurement);
        if series.pending_delete
            || field
                .is_none_or(|f| f.category != Category::Field || f.data_type != series.data_type)
        {
            continue;
        }
        let Some(device_tags) = table::device_tags(&path, &schema.name, &series.device, tags)
        else {
            continue;
        };
        devices
            .entry(series.device.clone())
            .or_insert_with(|| Device {
                path: series.device.clone(),
                attributes: attributes
                    .get(table::identifying_tags(&device_tags))
                    .copied(),
                tags: device_tags,
                fields: HashMap::new(),
            })
            .fields
            .insert(series.measurement, series.data_type);
    }
    let mut kept: Vec<Device<'v>> = devices
        .into_values()
        .filter(|d| {
            terms
                .iter()
                .all(|(index, value)| d.value_of(schema, *index) == Some(*value))
        })
        .collect();
    kept.sort_by(|a, b| a.tags.cmp(&b.tags));
    Ok(kept)
}

/// `DELETE FROM table [WHERE ...]`: the points in `range` of every series of the devices whose
/// tags match, through the tree's deletion (atomic per region, relayed by a cut-off DataNode).
async fn delete<B: Backend>(
    backend: &B,
    database: &str,
    table: &str,
    range: TimeRange,
    equals: &[(String, String)],
) -> ExecResult<()> {
    let view = one_table(backend, database, table, true).await?;
    if range.is_empty() {
        return Ok(());
    }
    let series: Vec<(String, String)> = matching_devices(backend, database, &view, equals, true)
        .await?
        .into_iter()
        .flat_map(|d| {
            let path = d.path;
            d.fields.into_keys().map(move |m| (path.clone(), m))
        })
        .collect();
    if series.is_empty() {
        return Ok(());
    }
    backend
        .delete_data(&series, range.from, range.inclusive_end())
        .await
}

fn column_index(schema: &TableSchema, name: &str) -> ExecResult<usize> {
    schema
        .columns
        .iter()
        .position(|c| c.name == name)
        .ok_or_else(|| {
            ExecError::refused(
                StatusCode::IllegalParameter,
                format!("column {name} does not exist in table {}", schema.name),
            )
        })
}

/// Writes a table-model tablet (`insertTablet` with `writeToTable`): `tablet.device` names the
/// table of the database `database`, `categories` say what each column is. The table and the
/// columns it lacks are created first (as IoTDB's schema auto-creation does); then the rows are
/// written as one tree tablet per device through the ordinary write path, and the devices'
/// attributes (each device's last non-null value per ATTRIBUTE column) are set.
pub async fn insert_table<B: Backend>(
    backend: &B,
    database: &str,
    mut tablet: Tablet,
    categories: &[Category],
) -> ExecResult<()> {
    if categories.len() != tablet.measurements.len() {
        return Err(illegal(format!(
            "{} column categories for {} columns",
            categories.len(),
            tablet.measurements.len()
        )));
    }
    let name = tablet.device.to_lowercase();
    table::check_name(&name).map_err(|e| illegal(format!("table {e}")))?;
    let columns = table_columns(&mut tablet, categories)?;
    let path = table::database_path(database);
    let wanted = TableSchema {
        name: name.clone(),
        columns,
        ttl_ms: None,
    };
    let table = match backend.table_for_write(&path, &name).await? {
        Some(table) if covers(&table.schema, &wanted) => table,
        _ => extend(backend, database, &wanted).await?,
    };
    let (schema, created_version) = (table.schema, table.created_version);
    let groups = device_rows(&tablet, &schema);
    let attributes = device_attributes(&tablet, categories, &groups);
    let devices: Vec<(String, Vec<usize>)> = groups
        .into_iter()
        .map(|(tags, rows)| (table::device_path(&path, &name, &tags), rows))
        .collect();
    let tablets = field_tablets(tablet, categories, &devices);
    if !tablets.is_empty() {
        backend
            .insert_table_tablets(&path, &name, created_version, tablets)
            .await?;
    }
    for part in attribute_batches(&attributes) {
        backend
            .set_device_attributes(&path, &name, created_version, part)
            .await?;
    }
    Ok(())
}

/// A refusal of an insert's parameters (301).
fn illegal(message: String) -> ExecError {
    ExecError::refused(StatusCode::IllegalParameter, message)
}

/// The columns a table write names, as the table must have them: names checked and lower
/// case (in `tablet` too), TAG and ATTRIBUTE columns STRING (their values retyped in `tablet`,
/// which IoTDB's clients may send as TEXT).
fn table_columns(tablet: &mut Tablet, categories: &[Category]) -> ExecResult<Vec<TableColumn>> {
    let mut columns = Vec::with_capacity(categories.len());
    for (i, category) in categories.iter().enumerate() {
        let column = tablet.measurements[i].to_lowercase();
        table::check_name(&column).map_err(|e| illegal(format!("column {e}")))?;
        let mut data_type = tablet.data_types[i];
        if *category != Category::Field {
            // TAG and ATTRIBUTE values are strings; IoTDB's clients may send them as TEXT.
            if !matches!(data_type, DataType::String | DataType::Text) {
                return Err(ExecError::refused(
                    StatusCode::DataTypeMismatch,
                    format!(
                        "the {} column {column} takes STRING, not {data_type}",
                        category.name()
                    ),
                ));
            }
            data_type = DataType::String;
            let values = std::mem::replace(&mut tablet.columns[i], Column::String(Vec::new()));
            tablet.columns[i] = values.with_type(DataType::String);
            tablet.data_types[i] = DataType::String;
        }
        tablet.measurements[i] = column.clone();
        columns.push(TableColumn {
            name: column,
            category: *category,
            data_type,
        });
    }
    Ok(columns)
}

/// A write's rows grouped by device (its tag values in the order of `schema`'s tags), in
/// first-seen order; a run of rows of one device costs no lookup.
fn device_rows<'t>(
    tablet: &'t Tablet,
    schema: &TableSchema,
) -> Vec<(Vec<Option<&'t str>>, Vec<usize>)> {
    let tag_columns: Vec<Option<usize>> = schema
        .tags()
        .map(|t| tablet.measurements.iter().position(|m| *m == t.name))
        .collect();
    let tags_of = |row: usize| -> Vec<Option<&str>> {
        tag_columns
            .iter()
            .map(|c| match (*c, &tablet.columns[(*c)?]) {
                (Some(c), Column::String(values)) if !tablet.is_null(row, c) => {
                    Some(values[row].as_str())
                }
                _ => None,
            })
            .collect()
    };
    let mut groups: Vec<(Vec<Option<&str>>, Vec<usize>)> = Vec::new();
    let mut index: HashMap<Vec<Option<&str>>, usize> = HashMap::new();
    let mut previous: Option<usize> = None;
    for row in 0..tablet.timestamps.len() {
        let tags = tags_of(row);
        let group = match previous {
            Some(g) if groups[g].0 == tags => g,
            _ => *index.entry(tags.clone()).or_insert_with(|| {
                groups.push((tags, Vec::new()));
                groups.len() - 1
            }),
        };
        groups[group].1.push(row);
        previous = Some(group);
    }
    debug_assert_eq!(
        groups.iter().map(|(_, rows)| rows.len()).sum::<usize>(),
        tablet.timestamps.len(),
        "every row belongs to one device"
    );
    groups
}

/// Each device's last non-null value of each ATTRIBUTE column, for the devices of `groups`
/// that have any.
fn device_attributes(
    tablet: &Tablet,
    categories: &[Category],
    groups: &[(Vec<Option<&str>>, Vec<usize>)],
) -> Vec<DeviceAttributes> {
    let mut attributes: Vec<DeviceAttributes> = Vec::new();
    for (tags, rows) in groups {
        let mut set = BTreeMap::new();
        for (c, category) in categories.iter().enumerate() {
            if *category != Category::Attribute {
                continue;
            }
            let last = rows.iter().rev().find(|&&r| !tablet.is_null(r, c));
            if let (Some(&row), Column::String(values)) = (last, &tablet.columns[c]) {
                set.insert(tablet.measurements[c].clone(), values[row].clone());
            }
        }
        if !set.is_empty() {
            let tags = tags.iter().map(|t| t.map(str::to_string)).collect();
            attributes.push((tags, set));
        }
    }
    attributes
}

/// The tree tablets of a write's FIELD columns, one per device of `devices` (its path and its
/// rows), none when the write has no FIELD column. The columns are moved out of `tablet`: one
/// device's rows are written as they are, several devices' are copied out per device.
fn field_tablets(
    tablet: Tablet,
    categories: &[Category],
    devices: &[(String, Vec<usize>)],
) -> Vec<Tablet> {
    let rows = tablet.timestamps.len();
    let mut fields = Tablet::new(String::new(), &[]);
    let Tablet {
        measurements,
        data_types,
        timestamps,
        columns,
        bitmaps,
        ..
    } = tablet;
    fields.timestamps = timestamps;
    let parts = measurements
        .into_iter()
        .zip(data_types)
        .zip(columns)
        .zip(bitmaps)
        .zip(categories);
    for ((((measurement, data_type), column), bitmap), category) in parts {
        if *category == Category::Field {
            fields.measurements.push(measurement);
            fields.data_types.push(data_type);
            fields.columns.push(column);
            fields.bitmaps.push(bitmap);
        }
    }
    let mut tablets = Vec::with_capacity(devices.len());
    if fields.measurements.is_empty() {
        return tablets;
    }
    if let [(device, _)] = devices {
        fields.device = device.clone();
        tablets.push(fields);
    } else {
        for (device, rows) in devices {
            let mut part = fields.select_rows(rows);
            part.device = device.clone();
            tablets.push(part);
        }
    }
    debug_assert_eq!(
        tablets.iter().map(|t| t.timestamps.len()).sum::<usize>(),
        rows,
        "each row is written once, to its device"
    );
    tablets
}

/// Most devices in one attribute update (one ConfigNode log entry).
const ATTRIBUTE_BATCH_DEVICES: usize = 1000;
/// Most attribute bytes in one attribute update.
const ATTRIBUTE_BATCH_BYTES: usize = 1 << 20;

/// `devices` in runs of at most [`ATTRIBUTE_BATCH_DEVICES`] devices and about
/// [`ATTRIBUTE_BATCH_BYTES`] bytes of names and values (a run holds one device at least), so
/// no update makes an oversized ConfigNode log entry.
fn attribute_batches(devices: &[DeviceAttributes]) -> Vec<&[DeviceAttributes]> {
    let size = |(tags, attributes): &DeviceAttributes| {
        let tags: usize = tags.iter().flatten().map(String::len).sum();
        tags + attributes
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>()
    };
    let mut batches = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, device) in devices.iter().enumerate() {
        let full =
            i - start == ATTRIBUTE_BATCH_DEVICES || bytes + size(device) > ATTRIBUTE_BATCH_BYTES;
        if full && i > start {
            batches.push(&devices[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size(device);
    }
    if start < devices.len() {
        batches.push(&devices[start..]);
    }
    batches
}

/// `INSERT INTO table(...) VALUES ...`: the table and every column named must exist (their
/// categories say what the values are); literals are typed by the columns, as the tree model's
/// INSERT types them by existing series.
async fn insert_rows<B: Backend>(backend: &B, database: &str, insert: &Insert) -> ExecResult<()> {
    let schema = one_table(backend, database, &insert.device, false)
        .await?
        .schema;
    let mut types = HashMap::new();
    for name in &insert.measurements {
        let index = column_index(&schema, name)?;
        types.insert(name.clone(), schema.columns[index].data_type);
    }
    let tablet = super::build_tablet(insert, &types)?;
    let categories: Vec<Category> = tablet
        .measurements
        .iter()
        .map(|m| schema.column(m).map(|c| c.category))
        .collect::<Option<_>>()
        .expect("every column was found above");
    insert_table(backend, database, tablet, &categories).await
}

/// Whether `schema` has every column of `wanted` as it is there.
fn covers(schema: &TableSchema, wanted: &TableSchema) -> bool {
    wanted
        .columns
        .iter()
        .all(|c| schema.column(&c.name) == Some(c))
}

/// Creates the table or the columns it lacks in the table database `database`, and reads back
/// its schema (whose tag order names the devices, whoever added the tags) and incarnation.
async fn extend<B: Backend>(
    backend: &B,
    database: &str,
    wanted: &TableSchema,
) -> ExecResult<TableView> {
    backend
        .create_table(&table::database_path(database), wanted, false, true)
        .await?;
    one_table(backend, database, &wanted.name, false).await
}

/// Column `column` (`None`: the time) of the row of `device` at `time`: a FIELD's value in
/// `values`, a TAG's or ATTRIBUTE's the device's, as STRING.
fn row_cell(
    schema: &TableSchema,
    device: &Device<'_>,
    time: i64,
    values: &HashMap<&str, Value>,
    column: Option<usize>,
) -> Cell {
    let Some(at) = column else {
        return Some(Value::Timestamp(time));
    };
    match schema.columns[at].category {
        Category::Field => values.get(schema.columns[at].name.as_str()).cloned(),
        _ => device
            .value_of(schema, at)
            .map(|v| Value::String(v.to_string())),
    }
}

/// ORDER BY's order of two cells of one column: NULL last either way, as IoTDB.
fn compare(a: &Cell, b: &Cell, descending: bool) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(a), Some(b)) => {
            let order = match (a, b) {
                (Value::Text(x) | Value::String(x), Value::Text(y) | Value::String(y)) => x.cmp(y),
                (Value::Blob(x), Value::Blob(y)) => x.cmp(y),
                (Value::Timestamp(x), Value::Timestamp(y)) | (Value::Int64(x), Value::Int64(y)) => {
                    x.cmp(y)
                }
                (Value::Int32(x), Value::Int32(y)) | (Value::Date(x), Value::Date(y)) => x.cmp(y),
                (Value::Boolean(x), Value::Boolean(y)) => x.cmp(y),
                _ => match (common::aggregate::numeric(a), common::aggregate::numeric(b)) {
                    (Some(x), Some(y)) => x.total_cmp(&y),
                    _ => Ordering::Equal,
                },
            };
            if descending {
                order.reverse()
            } else {
                order
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_updates_are_batched_by_devices_and_bytes() {
        let device = |i: usize, bytes: usize| -> DeviceAttributes {
            (
                vec![Some(i.to_string())],
                [("a".to_string(), "x".repeat(bytes))].into(),
            )
        };
        assert!(attribute_batches(&[]).is_empty());
        let many: Vec<_> = (0..2500).map(|i| device(i, 1)).collect();
        let lens: Vec<usize> = attribute_batches(&many).iter().map(|b| b.len()).collect();
        assert_eq!(lens, [1000, 1000, 500]);
        let big: Vec<_> = (0..5).map(|i| device(i, 600 << 10)).collect();
        let lens: Vec<usize> = attribute_batches(&big).iter().map(|b| b.len()).collect();
        assert_eq!(lens, [1, 1, 1, 1, 1], "each over half the byte budget");
        let huge = vec![device(0, 2 << 20)];
        assert_eq!(
            attribute_batches(&huge).len(),
            1,
            "one device is one batch whatever its size"
        );
    }
}
