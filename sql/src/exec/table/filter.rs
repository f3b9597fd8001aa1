//! A table-model WHERE clause past its time bounds, on any column: its conjuncts that name only
//! TAG and ATTRIBUTE columns select devices (evaluated once per device), the others select rows
//! (evaluated on each row with the device's tags and attributes beside its FIELD values).
//!
//! Both are bound to one layout, the table's row: cell 0 the time (INT64 ms), cell `1 + i` the
//! table's column `i` (TAG and ATTRIBUTE columns as STRING). Names are matched without case, as
//! the table model's are.

use std::collections::HashMap;

use common::table::{Category, TableSchema, TableView};
use common::{StatusCode, Value};

use super::super::filter::{Filter, Lookup};
use super::super::{Backend, Cell, ExecError, ExecResult};
use super::{matching_devices, Device};
use crate::expr::Expr;

/// A WHERE clause bound to a table.
pub(super) struct TableFilter {
    devices: Option<Filter>,
    rows: Option<Filter>,
    /// The FIELD columns the row terms read.
    fields: Vec<String>,
}

impl TableFilter {
    /// `expr` (the WHERE clause without its time bounds) split and bound; 700 for a column the
    /// table lacks.
    pub(super) fn new(schema: &TableSchema, expr: Option<&Expr>) -> ExecResult<TableFilter> {
        let mut device_terms = Vec::new();
        let mut row_terms = Vec::new();
        let mut fields = Vec::new();
        for term in expr.cloned().map(Expr::conjuncts).unwrap_or_default() {
            let mut of_rows = term.reads_time();
            for name in term.columns() {
                let column = column_of(schema, &name)?;
                if schema.columns[column].category == Category::Field {
                    of_rows = true;
                    let name = schema.columns[column].name.clone();
                    if !fields.contains(&name) {
                        fields.push(name);
                    }
                }
            }
            if of_rows {
                row_terms.push(term);
            } else {
                device_terms.push(term);
            }
        }
        let lookup = |name: &str| -> Option<(usize, common::DataType)> {
            let i = column_of(schema, name).ok()?;
            let c = &schema.columns[i];
            let data_type = match c.category {
                Category::Field => c.data_type,
                _ => common::DataType::String,
            };
            Some((i + 1, data_type))
        };
        let bind = |terms: Vec<Expr>| -> ExecResult<Option<Filter>> {
            Expr::all(terms)
                .map(|e| Filter::bind(&e, [&lookup as &Lookup<'_>]))
                .transpose()
        };
        Ok(TableFilter {
            devices: bind(device_terms)?,
            rows: bind(row_terms)?,
            fields,
        })
    }

    /// The FIELD columns the row terms read.
    pub(super) fn fields(&self) -> &[String] {
        &self.fields
    }

    /// True when some term reads rows: a query must read them all, no LIMIT pushed down.
    pub(super) fn reads_rows(&self) -> bool {
        self.rows.is_some()
    }

    /// The devices of the table `view` (of `database`) that pass the terms on TAG and
    /// ATTRIBUTE columns.
    pub(super) async fn devices<'v, B: Backend>(
        &self,
        backend: &B,
        database: &str,
        view: &'v TableView,
    ) -> ExecResult<Vec<Device<'v>>> {
        let schema = &view.schema;
        Ok(matching_devices(backend, database, view, &[], false)
            .await?
            .into_iter()
            .filter(|d| self.keeps_device(schema, d))
            .collect())
    }

    /// Whether `device` passes the terms on TAG and ATTRIBUTE columns.
    pub(super) fn keeps_device(&self, schema: &TableSchema, device: &Device<'_>) -> bool {
        let Some(filter) = &self.devices else {
            return true;
        };
        filter.keeps(&device_row(schema, device))
    }

    /// Whether the row of `device` at `time` with FIELD `values` passes the row terms.
    pub(super) fn keeps_row(
        &self,
        schema: &TableSchema,
        device: &Device<'_>,
        time: i64,
        values: &HashMap<&str, Value>,
    ) -> bool {
        let Some(filter) = &self.rows else {
            return true;
        };
        let mut row = device_row(schema, device);
        row[0] = Some(Value::Int64(time));
        for (i, c) in schema.columns.iter().enumerate() {
            if c.category == Category::Field {
                row[i + 1] = values.get(c.name.as_str()).cloned();
            }
        }
        filter.keeps(&row)
    }
}

/// The table's row layout with `device`'s TAG and ATTRIBUTE values, time and FIELD cells NULL.
fn device_row(schema: &TableSchema, device: &Device<'_>) -> Vec<Cell> {
    std::iter::once(None)
        .chain((0..schema.columns.len()).map(|i| {
            device
                .value_of(schema, i)
                .map(|v| Value::String(v.to_string()))
        }))
        .collect()
}

/// The index of the column `name` (any case), or 700.
fn column_of(schema: &TableSchema, name: &str) -> ExecResult<usize> {
    schema
        .columns
        .iter()
        .position(|c| c.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            ExecError::refused(
                StatusCode::IllegalParameter,
                format!("column {name} does not exist in table {}", schema.name),
            )
        })
}
