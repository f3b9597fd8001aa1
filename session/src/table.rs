//! IoTDB's table model through the session: table-model tablets and statements (as IoTDB's
//! `TableSession` sends them over its client protocol), on the same retrying calls as the tree
//! model's.

use common::table::Category;
use common::{Tablet, TabletLimits};

use crate::convert::tablet_to_wire;
use crate::error::{Result, SessionError};
use crate::session::{Session, StatementResult};

impl Session {
    /// Writes a table-model tablet (IoTDB's `TableSession.insert`): `tablet.device` names a
    /// table of the table database `database` (no `root.`), `categories` says what each column
    /// is. The table and the columns it lacks are created on the way. A retry sends it again
    /// (writes are upserts).
    pub async fn insert_table_tablet(
        &self,
        database: &str,
        tablet: &Tablet,
        categories: &[Category],
    ) -> Result<()> {
        if categories.len() != tablet.measurements.len() {
            return Err(SessionError::InvalidArgument(format!(
                "{} column categories for {} columns",
                categories.len(),
                tablet.measurements.len()
            )));
        }
        // Its shape as a tree tablet's (the table's name is no tree path: the DataNode checks it).
        let mut shape = Tablet::new("root.table.rows", &[]);
        shape.measurements.clone_from(&tablet.measurements);
        shape.data_types.clone_from(&tablet.data_types);
        shape.timestamps.clone_from(&tablet.timestamps);
        shape.columns.clone_from(&tablet.columns);
        shape.bitmaps.clone_from(&tablet.bitmaps);
        shape.validate(&TabletLimits::default())?;
        let wire = tablet_to_wire(tablet);
        let categories: Vec<u32> = categories.iter().map(|c| u32::from(c.wire())).collect();
        self.call(None, |mut c, session_id| {
            let req = proto::InsertTableTabletReq {
                session_id,
                database: database.to_string(),
                tablet: Some(wire.clone()),
                categories: categories.clone(),
            };
            async move { Ok((c.insert_table_tablet(req).await?.into_inner(), ())) }
        })
        .await
    }

    /// Runs one statement of the table model (IoTDB's `sql_dialect=table`) with `database` as
    /// the current database: CREATE/DROP TABLE, SELECT from a table, SHOW TABLES, ...
    pub async fn execute_table_statement(
        &self,
        database: Option<&str>,
        statement: &str,
    ) -> Result<StatementResult> {
        self.execute(statement, Some(database)).await
    }
}
