//! The table model's tables in the replicated state: creation (with its devices' series),
//! device attributes, incarnations, and what a pending DROP TABLE refuses.

use super::*;

impl MetadataState {
    /// CREATE TABLE, or an insert's extension of a table (see [`Command::CreateTable`]).
    pub(super) fn create_table(
        &mut self,
        database: &str,
        table: &TableSchema,
        if_not_exists: bool,
        extend: bool,
    ) -> Result<(), MetadataError> {
        self.check_live_database(database)?;
        if !self.is_table_database(database) {
            return Err(MetadataError::WrongModel(format!(
                "{database} is a tree-model database: tables live in databases the table model \
                 created"
            )));
        }
        check_schema(table)?;
        let key = (database.to_string(), table.name.clone());
        if self.table_drop_pending(database, &table.name) {
            // As CockroachDB's "relation is being dropped": the drop's deletion covers the
            // table's whole prefix, so a table of the name may exist again only after it.
            return Err(MetadataError::PendingDelete(format!(
                "{database}.{}",
                table.name
            )));
        }
        let Some(existing) = self.tables.get_mut(&key) else {
            if table.columns.len() > table::COLUMNS_MAX {
                return Err(MetadataError::Limit(format!(
                    "{} columns in a table",
                    table::COLUMNS_MAX
                )));
            }
            if self.tables.len() >= TABLES_MAX {
                return Err(MetadataError::Limit(format!("{TABLES_MAX} tables")));
            }
            self.bump();
            self.tables.insert(
                key,
                TableRecord {
                    schema: table.clone(),
                    created_version: self.metadata_version,
                    devices: BTreeMap::new(),
                },
            );
            return Ok(());
        };
        if !extend {
            return if if_not_exists {
                Ok(())
            } else {
                Err(MetadataError::TableExists(format!(
                    "{database}.{}",
                    table.name
                )))
            };
        }
        let added = added_columns(&existing.schema, table)?;
        if added.is_empty() {
            return Ok(());
        }
        if existing.schema.columns.len() + added.len() > table::COLUMNS_MAX {
            return Err(MetadataError::Limit(format!(
                "{} columns in a table",
                table::COLUMNS_MAX
            )));
        }
        existing.schema.columns.extend(added);
        self.bump();
        Ok(())
    }

    /// Sets attributes of devices of a table, each replacing the device's last value; refused
    /// unless the table is the incarnation `table_version` (0: any).
    pub(super) fn set_device_attributes(
        &mut self,
        database: &str,
        table: &str,
        table_version: u64,
        devices: &[DeviceAttributes],
    ) -> Result<(), MetadataError> {
        self.check_table_incarnation(database, table, table_version)?;
        let key = (database.to_string(), table.to_string());
        let record = self
            .tables
            .get_mut(&key)
            .ok_or_else(|| MetadataError::TableNotFound(format!("{database}.{table}")))?;
        let tags = record.schema.tags().count();
        for (values, attributes) in devices {
            if values.len() > tags {
                return Err(MetadataError::IllegalTable(format!(
                    "{} tag values for table {table} of {tags} tags",
                    values.len()
                )));
            }
            for (name, value) in attributes {
                if record
                    .schema
                    .column(name)
                    .is_none_or(|c| c.category != Category::Attribute)
                {
                    return Err(MetadataError::IllegalTable(format!(
                        "table {table} has no attribute {name}"
                    )));
                }
                if value.len() > table::ATTRIBUTE_BYTES_MAX {
                    return Err(MetadataError::IllegalTable(format!(
                        "attribute {name}: {} bytes, at most {}",
                        value.len(),
                        table::ATTRIBUTE_BYTES_MAX
                    )));
                }
            }
        }
        let trimmed = |values: &[Option<String>]| table::identifying_tags(values).to_vec();
        let new: BTreeSet<Vec<Option<String>>> = devices
            .iter()
            .map(|(values, _)| trimmed(values))
            .filter(|d| !record.devices.contains_key(d))
            .collect();
        if record.devices.len() + new.len() > TABLE_DEVICES_MAX {
            return Err(MetadataError::Limit(format!(
                "{TABLE_DEVICES_MAX} devices with attributes in a table"
            )));
        }
        for (values, attributes) in devices {
            let device = trimmed(values);
            record
                .devices
                .entry(device)
                .or_default()
                .extend(attributes.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Ok(())
    }

    /// 550 unless `table` of `database` exists as the incarnation `created_version` (0: any):
    /// a write that read another incarnation's schema (one dropped since) derived its devices
    /// and columns from metadata that no longer holds.
    pub fn check_table_incarnation(
        &self,
        database: &str,
        table: &str,
        created_version: u64,
    ) -> Result<(), MetadataError> {
        match self.table(database, table) {
            Some(t) if created_version == 0 || t.created_version == created_version => Ok(()),
            Some(_) => Err(MetadataError::TableNotFound(format!(
                "{database}.{table} (dropped and created again since the write read its \
                 schema; retry)"
            ))),
            None => Err(MetadataError::TableNotFound(format!("{database}.{table}"))),
        }
    }

    /// True while a DROP TABLE of `table` of `database` is pending.
    pub(super) fn table_drop_pending(&self, database: &str, table: &str) -> bool {
        self.operations.values().any(|k| {
            matches!(k, OperationKind::DropTable { database: d, table: t, .. }
                if d == database && t == table)
        })
    }

    /// The pending DROP TABLE whose table's devices `device` would be one of, as its prefix.
    pub(super) fn dropping_table_of(&self, device: &str) -> Option<String> {
        self.operations.values().find_map(|k| match k {
            OperationKind::DropTable {
                database, table, ..
            } => {
                let prefix = format!("{database}.{table}");
                (device == prefix || is_under(device, &prefix)).then_some(prefix)
            }
            _ => None,
        })
    }

    /// CreateTableSeries: the series a table write needs, only under the incarnation it read.
    pub(super) fn create_table_series(
        &mut self,
        origin: &TableOrigin,
        series: &[SeriesSpec],
    ) -> Result<CommandResult, MetadataError> {
        self.check_table_incarnation(&origin.database, &origin.table, origin.created_version)?;
        let prefix = format!("{}.{}", origin.database, origin.table);
        if let Some(s) = series
            .iter()
            .find(|s| s.device != prefix && !is_under(&s.device, &prefix))
        {
            return Err(MetadataError::IllegalTable(format!(
                "device {} is not a device of table {prefix}",
                s.device
            )));
        }
        self.create_series(series, true, true)
    }

    /// The tables of `database`, by name.
    pub fn tables_of<'a>(
        &'a self,
        database: &'a str,
    ) -> impl Iterator<Item = &'a TableRecord> + 'a {
        self.tables
            .range((database.to_string(), String::new())..)
            .take_while(move |((db, _), _)| db == database)
            .map(|(_, t)| t)
    }

    /// One table.
    pub fn table(&self, database: &str, table: &str) -> Option<&TableRecord> {
        self.tables.get(&(database.to_string(), table.to_string()))
    }
}

/// A table schema's own checks: legal names, a positive TTL, columns named once, TAG and
/// ATTRIBUTE columns STRING.
fn check_schema(table: &TableSchema) -> Result<(), MetadataError> {
    let illegal = |reason: String| MetadataError::IllegalTable(reason);
    table::check_name(&table.name).map_err(illegal)?;
    if table.ttl_ms.is_some_and(|t| t <= 0) {
        return Err(MetadataError::IllegalTtl(table.ttl_ms.unwrap_or(0)));
    }
    let mut names = BTreeSet::new();
    for c in &table.columns {
        table::check_name(&c.name).map_err(illegal)?;
        if !names.insert(c.name.as_str()) {
            return Err(illegal(format!("column {} named twice", c.name)));
        }
        if c.category != Category::Field && c.data_type != common::DataType::String {
            return Err(illegal(format!(
                "{} column {} must be STRING, not {}",
                c.category.name(),
                c.name,
                c.data_type
            )));
        }
    }
    Ok(())
}

/// The columns of `table` that `existing` lacks; a column both have must agree in category
/// and type.
fn added_columns(
    existing: &TableSchema,
    table: &TableSchema,
) -> Result<Vec<TableColumn>, MetadataError> {
    let mut added = Vec::new();
    for c in &table.columns {
        match existing.column(&c.name) {
            Some(have) if have.category == c.category && have.data_type == c.data_type => {}
            Some(have) => {
                return Err(MetadataError::ColumnMismatch(format!(
                    "column {} of table {} is a {} {} column, not {} {}",
                    c.name,
                    table.name,
                    have.data_type,
                    have.category.name(),
                    c.data_type,
                    c.category.name()
                )))
            }
            None => added.push(c.clone()),
        }
    }
    Ok(added)
}
