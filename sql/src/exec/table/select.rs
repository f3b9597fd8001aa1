//! The table model's raw query: `SELECT * | c, ... FROM t [WHERE ...] [ORDER BY time] [OFFSET n]
//! [LIMIT n]`. The devices that pass the WHERE clause's terms on TAG and ATTRIBUTE columns are
//! read one at a time, their FIELD columns joined on time, each row kept when it passes the
//! terms on FIELD columns and time ([`TableFilter`]).

use std::collections::{BTreeMap, HashMap};

use common::table::{self, Category, TableColumn, TableSchema};
use common::{DataType, Value};

use super::super::budget::{
    row_bytes, value_heap_bytes, ResultCharge, CELL_BYTES, ROW_OVERHEAD_BYTES,
};
use super::super::join::{too_many_rows, SeriesReader};
use super::super::{Backend, Cell, ExecResult, Outcome, RESULT_ROWS_MAX};
use super::filter::TableFilter;
use super::{column_index, live_range, one_table, row_cell, Device};
use crate::{TableSelect, TimeRange};

/// A column of a query's result.
#[derive(Clone, Copy)]
enum Output {
    Time,
    /// A column of the table, by index.
    Column(usize),
}

impl Output {
    /// The table column it is (`None`: the time).
    fn column(self) -> Option<usize> {
        match self {
            Output::Time => None,
            Output::Column(i) => Some(i),
        }
    }
}

/// A row of the result, with its time and its ORDER BY keys.
type KeyedRow = (i64, Vec<Cell>, Vec<Cell>);

/// `SELECT ... FROM table`: the table's devices that pass the WHERE clause's device terms, each
/// joined on time and its rows filtered; device by device, or across devices in time order with
/// ORDER BY time. Points older than the table's TTL are not read.
pub(super) async fn query<B: Backend>(
    backend: &B,
    database: &str,
    select: &TableSelect,
    now_ms: i64,
    charge: &mut ResultCharge,
) -> ExecResult<Outcome> {
    let view = one_table(backend, database, &select.table, true).await?;
    let schema = &view.schema;
    let outputs: Vec<Output> = match &select.columns {
        None => std::iter::once(Output::Time)
            .chain((0..schema.columns.len()).map(Output::Column))
            .collect(),
        Some(names) => names
            .iter()
            .map(|name| match name.as_str() {
                table::TIME_COLUMN => Ok(Output::Time),
                name => column_index(schema, name).map(Output::Column),
            })
            .collect::<ExecResult<_>>()?,
    };
    let filter = TableFilter::new(schema, select.filter.as_ref())?;
    let devices = filter.devices(backend, database, &view).await?;
    let rows_window = select.rows;
    let keys = order_keys(schema, &select.order_by)?;
    let needed = match rows_window.limit {
        Some(limit) if !rows_window.descending && !filter.reads_rows() && keys.is_empty() => {
            rows_window.offset.saturating_add(limit)
        }
        _ => RESULT_ROWS_MAX,
    };
    let read = RowsRead {
        schema,
        filter: &filter,
        outputs: &outputs,
        keys: &keys,
        range: live_range(schema, select.range, now_ms),
        needed,
    };
    let mut rows = read.rows(backend, &devices, charge).await?;
    order_rows(&mut rows, select, &keys);
    let kept = rows
        .into_iter()
        .skip(rows_window.offset)
        .take(rows_window.limit.unwrap_or(usize::MAX))
        .map(|(_, row, _)| row)
        .collect();
    Ok(Outcome::query(header(&outputs, schema), kept))
}

/// What a raw table query reads of each device, and how its rows are made.
struct RowsRead<'q> {
    schema: &'q TableSchema,
    filter: &'q TableFilter,
    outputs: &'q [Output],
    keys: &'q [(Output, bool)],
    range: TimeRange,
    /// Points read of each series at most.
    needed: usize,
}

impl RowsRead<'_> {
    /// The rows of `devices` the filter keeps, device by device, charged as they are held.
    async fn rows<B: Backend>(
        &self,
        backend: &B,
        devices: &[Device<'_>],
        charge: &mut ResultCharge,
    ) -> ExecResult<Vec<KeyedRow>> {
        let schema = self.schema;
        let mut rows: Vec<KeyedRow> = Vec::new();
        let mut rows_bytes = 0;
        // The same for every device: a device lacking a column has no points of it.
        let read = self.fields_read();
        for device in devices {
            let reads = DeviceRead {
                device,
                columns: &read,
                range: self.range,
                needed: self.needed,
            };
            let joined = join_device(backend, &reads, rows_bytes, charge).await?;
            for (time, mut values) in joined {
                if !self.filter.keeps_row(schema, device, time, &values) {
                    continue;
                }
                let cell =
                    |o: Output, values: &_| row_cell(schema, device, time, values, o.column());
                let sort_keys: Vec<Cell> =
                    self.keys.iter().map(|(o, _)| cell(*o, &values)).collect();
                let row: Vec<Cell> = self
                    .outputs
                    .iter()
                    .map(|&o| match o {
                        // Each FIELD value moves into its row, uncopied.
                        Output::Column(i) if schema.columns[i].category == Category::Field => {
                            values.remove(schema.columns[i].name.as_str())
                        }
                        o => cell(o, &values),
                    })
                    .collect();
                rows_bytes += row_bytes(&row) + row_bytes(&sort_keys);
                rows.push((time, row, sort_keys));
                if rows.len() > RESULT_ROWS_MAX {
                    return Err(too_many_rows());
                }
            }
            charge.settle(rows_bytes)?;
        }
        Ok(rows)
    }

    /// The FIELD columns read: those output, or every one when none is (a query of tags alone
    /// lists each device's rows), and those the filter reads.
    fn fields_read(&self) -> Vec<&TableColumn> {
        let schema = self.schema;
        let mut read: Vec<&TableColumn> = self
            .outputs
            .iter()
            .filter_map(|o| match o {
                Output::Column(i) if schema.columns[*i].category == Category::Field => {
                    Some(&schema.columns[*i])
                }
                _ => None,
            })
            .collect();
        if read.is_empty() {
            read = schema.of(Category::Field).collect();
        }
        for name in self.filter.fields() {
            if !read.iter().any(|c| &c.name == name) {
                read.extend(schema.column(name));
            }
        }
        read
    }
}

/// ORDER BY time (stable: rows of one time keep the devices' order), or ORDER BY `keys`
/// (stable: rows of equal keys keep the devices' and the times' order).
fn order_rows(rows: &mut [KeyedRow], select: &TableSelect, keys: &[(Output, bool)]) {
    if select.order_by_time {
        if select.rows.descending {
            rows.sort_by_key(|r| std::cmp::Reverse(r.0));
        } else {
            rows.sort_by_key(|r| r.0);
        }
    }
    if !keys.is_empty() {
        rows.sort_by(|a, b| {
            keys.iter()
                .enumerate()
                .map(|(k, (_, desc))| super::compare(&a.2[k], &b.2[k], *desc))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
    }
}

/// ORDER BY's keys: each column (or time) and whether it is descending; 700 for a column the
/// table lacks.
fn order_keys(
    schema: &TableSchema,
    order_by: &[(String, bool)],
) -> ExecResult<Vec<(Output, bool)>> {
    order_by
        .iter()
        .map(|(name, desc)| match name.as_str() {
            table::TIME_COLUMN => Ok((Output::Time, *desc)),
            name => column_index(schema, name).map(|i| (Output::Column(i), *desc)),
        })
        .collect()
}

/// A table query's columns: `time`, and each column named with its type (tags and attributes
/// as STRING).
fn header(outputs: &[Output], schema: &TableSchema) -> Vec<(String, DataType)> {
    outputs
        .iter()
        .map(|o| match *o {
            Output::Time => (table::TIME_COLUMN.to_string(), DataType::Timestamp),
            Output::Column(i) => {
                let c = &schema.columns[i];
                let data_type = match c.category {
                    Category::Field => c.data_type,
                    _ => DataType::String,
                };
                (c.name.clone(), data_type)
            }
        })
        .collect()
}

/// The FIELD columns of one device a query reads, in a time range, the first `needed` points
/// of each.
pub(super) struct DeviceRead<'a> {
    pub(super) device: &'a Device<'a>,
    pub(super) columns: &'a [&'a TableColumn],
    pub(super) range: TimeRange,
    pub(super) needed: usize,
}

/// The device's points by time, charged to `charge` (on top of `charged` bytes of rows) as they
/// arrive: a map entry per time, a cell and the heap bytes per value.
pub(super) async fn join_device<'a, B: Backend>(
    backend: &B,
    read: &DeviceRead<'a>,
    charged: usize,
    charge: &mut ResultCharge,
) -> ExecResult<BTreeMap<i64, HashMap<&'a str, Value>>> {
    let mut joined: BTreeMap<i64, HashMap<&'a str, Value>> = BTreeMap::new();
    let mut joined_bytes = 0;
    for column in read.columns {
        if read.device.fields.get(&column.name) != Some(&column.data_type) {
            continue;
        }
        let (path, name) = (read.device.path.as_str(), column.name.as_str());
        let mut reader = SeriesReader::new(path, name, column.data_type, read.range, read.needed);
        while let Some(points) = reader.next(backend).await? {
            for (time, value) in points {
                if value.data_type() != column.data_type {
                    continue;
                }
                let values = joined.entry(time).or_insert_with(|| {
                    joined_bytes += ROW_OVERHEAD_BYTES;
                    HashMap::new()
                });
                joined_bytes += 2 * CELL_BYTES + value_heap_bytes(&value);
                values.insert(name, value);
            }
            charge.settle(charged + joined_bytes)?;
            if joined.len() > RESULT_ROWS_MAX {
                return Err(too_many_rows());
            }
        }
    }
    Ok(joined)
}
