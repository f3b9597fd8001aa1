//! Fence operations in the replicated state: beginning DELETE TIMESERIES, DROP TABLE and the
//! others, the limit on pending ones, and the check that they stay consistent.

use super::*;

impl MetadataState {
    /// Applies `Command::BeginDropDatabase`.
    pub(super) fn begin_drop_database(
        &mut self,
        database: &str,
    ) -> Result<CommandResult, MetadataError> {
        self.check_operations_limit()?;
        match self.databases.get_mut(database) {
            None => return Err(MetadataError::DatabaseNotFound(database.to_string())),
            Some(true) => return Err(MetadataError::PendingDelete(database.to_string())),
            Some(pending) => *pending = true,
        }
        Ok(self.begin_operation(OperationKind::DropDatabase(database.to_string())))
    }

    /// Applies `Command::BeginSetTtl`.
    pub(super) fn begin_set_ttl(
        &mut self,
        database: &str,
        ttl_ms: &Option<i64>,
    ) -> Result<CommandResult, MetadataError> {
        self.check_operations_limit()?;
        self.check_live_database(database)?;
        match ttl_ms {
            Some(t) if *t <= 0 => return Err(MetadataError::IllegalTtl(*t)),
            Some(t) => self.ttls.insert(database.to_string(), *t),
            None => self.ttls.remove(database),
        };
        Ok(self.begin_operation(OperationKind::SetTtl(database.to_string())))
    }

    /// Applies `Command::FinishOperation`.
    pub(super) fn finish_operation(
        &mut self,
        operation_id: &u64,
    ) -> Result<CommandResult, MetadataError> {
        let kind = self
            .operations
            .remove(operation_id)
            .ok_or(MetadataError::OperationNotFound(*operation_id))?;
        match kind {
            OperationKind::DeleteTimeseries(series) | OperationKind::DropTable { series, .. } => {
                // Only series still its own are listed (a finished DROP DATABASE took
                // the others out), so each one is here and pending.
                for key in series {
                    let removed = self.series.remove(&key);
                    assert!(
                        removed.is_some_and(|r| r.pending_delete),
                        "series {key:?} of operation {operation_id} was not pending delete"
                    );
                }
            }
            OperationKind::DropDatabase(database) => {
                let pending = self.databases.remove(&database);
                assert_eq!(
                    pending,
                    Some(true),
                    "database {database} of operation {operation_id} was not pending"
                );
                self.series.drop_database(&database);
                self.forget_vanished_deletions();
                self.placement
                    .partitions
                    .retain(|(db, _, _), _| *db != database);
                self.placement.regions.retain(|_, r| r.database != database);
                let regions = &self.placement.regions;
                self.placement
                    .migrations
                    .retain(|id, _| regions.contains_key(id));
                self.placement.index.drop_database(&database);
                self.ttls.remove(&database);
                self.tables.retain(|(db, _), _| *db != database);
                self.table_databases.remove(&database);
            }
            OperationKind::SetTtl(_) => {}
        }
        self.bump();
        Ok(CommandResult::Done)
    }

    /// Pending fence operations.
    pub fn operations(&self) -> impl Iterator<Item = (u64, &OperationKind)> {
        self.operations.iter().map(|(id, k)| (*id, k))
    }

    pub(super) fn check_operations_limit(&self) -> Result<(), MetadataError> {
        if self.operations.len() >= OPERATIONS_PENDING_MAX {
            return Err(MetadataError::Limit(format!(
                "{OPERATIONS_PENDING_MAX} fence operations pending"
            )));
        }
        Ok(())
    }

    pub(super) fn begin_operation(&mut self, kind: OperationKind) -> CommandResult {
        let id = self.ids.next_operation_id;
        self.ids.next_operation_id += 1;
        self.operations.insert(id, kind);
        self.bump();
        CommandResult::OperationBegun(id)
    }

    pub(super) fn begin_delete_timeseries(
        &mut self,
        series: &[(String, String)],
    ) -> Result<CommandResult, MetadataError> {
        self.check_operations_limit()?;
        let unique: BTreeSet<(String, String)> = series.iter().cloned().collect();
        for (device, measurement) in &unique {
            let path = format!("{device}.{measurement}");
            match self
                .series
                .records
                .get(&(device.clone(), measurement.clone()))
            {
                None => return Err(MetadataError::SeriesNotFound(path)),
                Some(r) if r.pending_delete => return Err(MetadataError::PendingDelete(path)),
                Some(_) => {}
            }
            if let Some((db, true)) = self.database_of(device) {
                return Err(MetadataError::PendingDelete(db.to_string()));
            }
        }
        for key in &unique {
            self.series
                .records
                .get_mut(key)
                .expect("checked")
                .pending_delete = true;
        }
        Ok(self.begin_operation(OperationKind::DeleteTimeseries(
            unique.into_iter().collect(),
        )))
    }

    /// DROP TABLE: the table leaves the schema now (a query or SHOW TABLES no longer finds it,
    /// and a CREATE TABLE of its name makes a new one), and the series of its devices that no
    /// other operation is deleting become pending delete, for the operation to delete.
    pub(super) fn begin_drop_table(
        &mut self,
        database: &str,
        table: &str,
    ) -> Result<CommandResult, MetadataError> {
        self.check_operations_limit()?;
        self.check_live_database(database)?;
        let key = (database.to_string(), table.to_string());
        if !self.tables.contains_key(&key) {
            return Err(MetadataError::TableNotFound(format!("{database}.{table}")));
        }
        // Every check before the first change: a refused command changes nothing.
        let prefix = format!("{database}.{table}");
        let mut series = Vec::new();
        for (key, record) in self
            .series
            .records
            .range((prefix.clone(), String::new())..)
            .take_while(|((device, _), _)| device.starts_with(&prefix))
        {
            // The table's device of no tag values is its own path.
            let of_table = key.0 == prefix || is_under(&key.0, &prefix);
            if of_table && !record.pending_delete {
                if series.len() == DROP_TABLE_SERIES_MAX {
                    return Err(MetadataError::Limit(format!(
                        "table {table} has over {DROP_TABLE_SERIES_MAX} series for DROP TABLE; \
                         drop its database instead"
                    )));
                }
                series.push(key.clone());
            }
        }
        self.tables.remove(&key);
        for key in &series {
            self.series
                .records
                .get_mut(key)
                .expect("listed")
                .pending_delete = true;
        }
        Ok(self.begin_operation(OperationKind::DropTable {
            database: database.to_string(),
            table: table.to_string(),
            series,
        }))
    }

    /// Takes out of every pending DELETE TIMESERIES or DROP TABLE the series that are no longer
    /// its to delete: gone (a DROP DATABASE finished first and removed them), not pending delete
    /// (created again since), or listed by a later operation (pending delete again, under that
    /// one).
    ///
    /// At a drop's Finish this takes out exactly the series of the dropped database, since
    /// everything else still holds [`MetadataState::check_operations`]. A snapshot written
    /// by a version without this rule, between a drop's Finish and an overtaken delete's,
    /// still lists removed series; decoding applies the rule so that such a replica reaches
    /// the state that replaying the log reaches, instead of panicking at the delete's Finish.
    pub(super) fn forget_vanished_deletions(&mut self) {
        let series = &self.series.records;
        let mut claimed: BTreeSet<&(String, String)> = BTreeSet::new();
        // Latest first: of two operations listing one series, the later one began after the
        // earlier one's series was removed, so the series pending now is the later one's.
        for kind in self.operations.values_mut().rev() {
            if let Some(keys) = kind.series_mut() {
                keys.retain(|key| match series.get_key_value(key) {
                    Some((stored, r)) if r.pending_delete => claimed.insert(stored),
                    _ => false,
                });
            }
        }
    }

    /// Whether the pending operations and the pending flags agree, or why not: every database
    /// pending drop has exactly one DROP DATABASE, and every DROP DATABASE names a pending
    /// database; every series pending delete is listed by exactly one DELETE TIMESERIES, and
    /// every listed series is pending delete. A pass over the series: for tests, snapshot
    /// decoding and debug assertions, never on apply.
    pub fn check_operations(&self) -> Result<(), String> {
        let mut drops: BTreeSet<&str> = BTreeSet::new();
        let mut deletes: BTreeSet<&(String, String)> = BTreeSet::new();
        for (id, kind) in &self.operations {
            match kind {
                OperationKind::DropDatabase(db) => {
                    if self.databases.get(db) != Some(&true) {
                        return Err(format!(
                            "operation {id} drops {db}, which is not pending drop"
                        ));
                    }
                    if !drops.insert(db) {
                        return Err(format!("operation {id} drops {db} a second time"));
                    }
                }
                OperationKind::DeleteTimeseries(keys)
                | OperationKind::DropTable { series: keys, .. } => {
                    for key in keys {
                        if !self
                            .series
                            .records
                            .get(key)
                            .is_some_and(|r| r.pending_delete)
                        {
                            return Err(format!(
                                "operation {id} deletes {key:?}, which is not pending delete"
                            ));
                        }
                        if !deletes.insert(key) {
                            return Err(format!("operation {id} deletes {key:?} a second time"));
                        }
                    }
                }
                // A TTL change flags nothing: its value is recorded at Begin.
                OperationKind::SetTtl(_) => {}
            }
        }
        if let Some((db, _)) = self
            .databases
            .iter()
            .find(|(db, pending)| **pending && !drops.contains(db.as_str()))
        {
            return Err(format!("{db} is pending drop with no operation"));
        }
        if let Some((key, _)) = self
            .series
            .records
            .iter()
            .find(|(key, r)| r.pending_delete && !deletes.contains(key))
        {
            return Err(format!("{key:?} is pending delete with no operation"));
        }
        Ok(())
    }
}
