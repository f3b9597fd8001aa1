//! The `sql` executor's backend inside a DataNode, and running a statement over it: writes and
//! reads go through the coordinator exactly as the session service's do (lease gate, relay when
//! fenced, atomic per region), schema statements and cluster views through `ops::cluster`, which
//! forwards them to the ConfigNode leader. IoTDB's Thrift service, the gRPC session's
//! ExecuteStatement and DeleteData, and a relayed table write all run here.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use common::aggregate::{Partial, Windows};
use common::table::{DeviceAttributes, TableSchema, TableView};
use common::views::{
    ClusterView, DatabaseView, FragmentView, LeasesView, LocalLeaseView, RegionView, SeriesMeta,
    TimeseriesView,
};
use common::{DataType, SeriesPath, Status, StatusCode, Tablet, Value};
use proto::statements;
use sql::{Backend, ExecError, ExecResult};

use super::deadline::QueryDeadline;
use crate::coordinator::read::fragments::Fragments;
use crate::coordinator::{CoordinatorError, Relay, TableOrigin};
use crate::ops::cluster;
use crate::parts::Shared;

/// Points one read of a series asks the coordinator for; a longer series is read in pages.
const READ_PAGE_POINTS: u32 = 100_000;

/// The executor's backend on a DataNode, for one logged-in user.
pub(crate) struct DataNodeBackend {
    shared: Arc<Shared>,
    user: String,
    /// Whether its writes may be relayed: a session's may, a relayed one's never again.
    relay: Relay,
    /// EXPLAIN ANALYZE's record of the region reads, once asked for.
    fragments: OnceLock<Fragments>,
}

impl DataNodeBackend {
    pub(crate) fn new(shared: Arc<Shared>, user: String) -> DataNodeBackend {
        DataNodeBackend {
            shared,
            user,
            relay: Relay::WhenFenced,
            fragments: OnceLock::new(),
        }
    }

    /// Runs a read of the coordinator, its region reads recorded when EXPLAIN ANALYZE asked.
    async fn traced<F: std::future::Future>(&self, read: F) -> F::Output {
        Fragments::scope(self.fragments.get().cloned(), read).await
    }

    /// The user statements run as.
    pub(crate) fn user(&self) -> &str {
        &self.user
    }

    /// The backend of a write a fenced peer relayed here: written here or refused, never
    /// relayed on. It runs no user statement (it has no user).
    pub(crate) fn relayed(shared: Arc<Shared>) -> DataNodeBackend {
        DataNodeBackend {
            relay: Relay::Never,
            ..DataNodeBackend::new(shared, String::new())
        }
    }

    /// A user statement as this backend's user.
    async fn user_statement(
        &self,
        statement: proto::user_statement_req::Statement,
    ) -> ExecResult<()> {
        let answer =
            cluster::user_statement(&self.shared, self.user.clone(), Some(statement)).await;
        status_result(&answer)
    }

    /// Runs a schema statement (forwarded to the ConfigNode).
    async fn schema(&self, statement: proto::schema_statement_req::Statement) -> ExecResult<()> {
        status_result(&cluster::schema_statement(&self.shared, Some(statement)).await)
    }
}

/// The success of a status, or the status as an [`ExecError`]. 400 is a success: the write
/// happened, with a hint.
pub(crate) fn status_result(status: &Status) -> ExecResult<()> {
    if status.is(StatusCode::Success) || status.is(StatusCode::RedirectionRecommend) {
        Ok(())
    } else {
        Err(status_error(status))
    }
}

/// A failed status as an [`ExecError`].
fn status_error(status: &Status) -> ExecError {
    if status.is(StatusCode::MultipleError) {
        // Every 302 keeps its parts: IoTDB's clients read a 302 through its `subStatus`.
        let mut parts: Vec<(i32, String)> = status
            .parts
            .iter()
            .map(|s| (s.code.wire(), s.message.clone()))
            .collect();
        if parts.is_empty() {
            parts.push((
                StatusCode::InternalServerError.wire(),
                status.message.clone(),
            ));
        }
        ExecError::Parts {
            message: status.message.clone(),
            parts,
        }
    } else {
        ExecError::Status {
            code: status.code.wire(),
            message: status.message.clone(),
        }
    }
}

/// An `ops::cluster` answer as the executor's result.
fn answered<T>(answer: Result<T, Status>) -> ExecResult<T> {
    answer.map_err(|s| status_error(&s))
}

/// The status of an executor's error; a 302 keeps its parts.
pub(crate) fn exec_status(e: &ExecError) -> Status {
    let status = |code: i32, message: String| match StatusCode::from_wire(code) {
        Some(code) => Status::new(code, message),
        None => Status::new(
            StatusCode::InternalServerError,
            format!("unknown status code {code}: {message}"),
        ),
    };
    let mut s = status(e.code(), e.to_string());
    if let ExecError::Parts { parts, .. } = e {
        s.parts = parts
            .iter()
            .map(|(code, message)| status(*code, message.clone()))
            .collect();
    }
    s
}

fn coordinator_error(e: CoordinatorError) -> ExecError {
    let status = e.status();
    ExecError::Status {
        code: status.code.wire(),
        message: status.message,
    }
}

fn split_path(path: &str) -> ExecResult<(String, String)> {
    proto::statements::split_series_path(path).ok_or_else(|| {
        ExecError::refused(
            StatusCode::IllegalParameter,
            format!("{path} is not a series path like root.sg.d1.s1"),
        )
    })
}

impl Backend for DataNodeBackend {
    async fn create_database(&self, database: &str, table_model: bool) -> ExecResult<()> {
        self.schema(statements::create_database(database, table_model))
            .await
    }

    async fn drop_database(&self, database: &str) -> ExecResult<()> {
        self.schema(statements::drop_database(database)).await
    }

    async fn set_ttl(&self, database: &str, ttl_ms: i64) -> ExecResult<()> {
        if ttl_ms <= 0 {
            return Err(ExecError::refused(
                StatusCode::IllegalParameter,
                format!("TTL {ttl_ms} ms: a TTL must be positive"),
            ));
        }
        self.schema(statements::set_ttl(database, ttl_ms)).await
    }

    async fn unset_ttl(&self, database: &str) -> ExecResult<()> {
        self.schema(statements::set_ttl(database, 0)).await
    }

    async fn remove_data_node(&self, data_node_id: u64) -> ExecResult<()> {
        self.schema(statements::remove_data_node(data_node_id))
            .await
    }

    async fn create_timeseries(
        &self,
        path: &str,
        data_type: DataType,
        encoding: Option<&str>,
        compressor: Option<&str>,
        meta: &SeriesMeta,
    ) -> ExecResult<()> {
        let (device, measurement) = split_path(path)?;
        self.schema(statements::create_timeseries(
            device,
            measurement,
            data_type,
            encoding,
            compressor,
            meta,
        ))
        .await
    }

    async fn delete_timeseries(&self, path: &str) -> ExecResult<()> {
        let (device, measurement) = split_path(path)?;
        self.schema(statements::delete_timeseries(device, measurement))
            .await
    }

    async fn delete_data(
        &self,
        series: &[(String, String)],
        start: i64,
        end: i64,
    ) -> ExecResult<()> {
        let paths = series.iter().map(|(d, m)| SeriesPath::new(d, m)).collect();
        self.shared
            .coordinator
            .delete_data(paths, start, end, self.relay)
            .await
            .map_err(coordinator_error)
    }

    async fn insert_tablet(&self, tablet: Tablet) -> ExecResult<()> {
        let status =
            crate::ops::write::insert_tablets(&self.shared, vec![tablet], self.relay).await;
        status_result(&status)
    }

    async fn series_types(
        &self,
        device: &str,
        measurements: &[String],
    ) -> ExecResult<Vec<(String, DataType)>> {
        self.shared
            .coordinator
            .series_types(device, measurements, self.relay)
            .await
            .map_err(coordinator_error)
    }

    async fn show_timeseries(&self, prefix: &str) -> ExecResult<Vec<TimeseriesView>> {
        answered(cluster::show_timeseries(&self.shared, prefix.to_string()).await)
    }

    async fn aggregate(
        &self,
        reads: &[(String, Vec<String>)],
        windows: Windows,
    ) -> ExecResult<Vec<Vec<Vec<Partial>>>> {
        let paths: Vec<SeriesPath> = reads
            .iter()
            .flat_map(|(device, measurements)| {
                measurements
                    .iter()
                    .map(move |m| SeriesPath::new(device, m.as_str()))
            })
            .collect();
        let pinned = self.shared.metadata.pin();
        let answered = self
            .traced(
                self.shared
                    .coordinator
                    .read_aggregate(&pinned, &paths, windows),
            )
            .await
            .map_err(coordinator_error)?;
        let count = usize::try_from(windows.count()).expect("windows bounded by the executor");
        let by_path: HashMap<SeriesPath, Vec<Partial>> =
            answered.into_iter().map(|s| (s.path, s.partials)).collect();
        // In the order asked (a path asked twice answered twice); a series gone meanwhile has
        // empty windows.
        let mut paths = paths.into_iter();
        Ok(reads
            .iter()
            .map(|(_, measurements)| {
                paths
                    .by_ref()
                    .take(measurements.len())
                    .map(|path| {
                        by_path
                            .get(&path)
                            .cloned()
                            .unwrap_or_else(|| vec![Partial::default(); count])
                    })
                    .collect()
            })
            .collect())
    }

    async fn query_raw(
        &self,
        device: &str,
        measurement: &str,
        from: i64,
        to: i64,
        limit: usize,
    ) -> ExecResult<Vec<(i64, Value)>> {
        let path = SeriesPath::new(device, measurement);
        let mut points = Vec::new();
        let mut start = from;
        while points.len() < limit {
            let page_points =
                READ_PAGE_POINTS.min(u32::try_from(limit - points.len()).unwrap_or(u32::MAX));
            let pinned = self.shared.metadata.pin();
            let read = self.shared.coordinator.read_range(
                &pinned,
                std::slice::from_ref(&path),
                start..to,
                page_points,
            );
            let series = self.traced(read).await.map_err(coordinator_error)?;
            let Some(page) = series.into_iter().find(|s| s.path == path) else {
                return Ok(points);
            };
            let last = page.batch.last().map(|(t, _)| t);
            points.extend(page.batch.points());
            match last {
                Some(t) if page.truncated && t < i64::MAX => start = t + 1,
                _ => return Ok(points),
            }
        }
        // Each page asked at most the points still wanted, and a read answers at most that.
        Ok(points)
    }

    async fn query_last(
        &self,
        series: &[(String, String)],
    ) -> ExecResult<Vec<Option<(i64, Value)>>> {
        let paths: Vec<SeriesPath> = series
            .iter()
            .map(|(device, measurement)| SeriesPath::new(device, measurement.as_str()))
            .collect();
        let pinned = self.shared.metadata.pin();
        let answered = self
            .traced(self.shared.coordinator.read_last(&pinned, &paths))
            .await
            .map_err(coordinator_error)?;
        // The answers come in the order asked, the paths without a point left out.
        let mut answered = answered.into_iter().peekable();
        Ok(paths
            .iter()
            .map(|p| {
                answered
                    .next_if(|s| s.path == *p)
                    .map(|s| (s.time, s.value))
            })
            .collect())
    }

    fn trace_fragments(&self) {
        self.fragments.get_or_init(Fragments::default);
    }

    fn take_fragments(&self) -> Vec<FragmentView> {
        self.fragments
            .get()
            .map(Fragments::take)
            .unwrap_or_default()
    }

    async fn show_databases(&self) -> ExecResult<Vec<DatabaseView>> {
        answered(cluster::show_databases(&self.shared).await).map(|v| v.into_rows())
    }

    async fn show_cluster(&self) -> ExecResult<ClusterView> {
        answered(cluster::show_cluster(&self.shared).await)
    }

    async fn show_regions(&self) -> ExecResult<Vec<RegionView>> {
        answered(cluster::show_regions(&self.shared).await)
    }

    async fn show_leases(&self) -> ExecResult<LeasesView> {
        answered(cluster::show_leases(&self.shared).await)
    }

    async fn local_lease(&self) -> ExecResult<LocalLeaseView> {
        Ok(cluster::local_lease(&self.shared))
    }

    async fn show_queries(&self) -> ExecResult<Vec<common::views::QueryView>> {
        Ok(super::queries::show(&self.shared, &self.user).await)
    }

    async fn kill_query(&self, id: Option<&str>) -> ExecResult<usize> {
        super::queries::kill(&self.shared, id, &self.user)
            .await
            .map_err(|s| status_error(&s))
    }

    async fn create_user(&self, name: &str, password: &str) -> ExecResult<()> {
        use proto::user_statement_req::Statement;
        self.user_statement(Statement::CreateUser(proto::CreateUserReq {
            username: name.to_string(),
            password: password.to_string(),
        }))
        .await
    }

    async fn drop_user(&self, name: &str) -> ExecResult<()> {
        use proto::user_statement_req::Statement;
        self.user_statement(Statement::DropUser(proto::DropUserReq {
            username: name.to_string(),
        }))
        .await
    }

    async fn alter_user_password(&self, name: &str, password: &str) -> ExecResult<()> {
        use proto::user_statement_req::Statement;
        self.user_statement(Statement::AlterPassword(proto::AlterUserPasswordReq {
            username: name.to_string(),
            password: password.to_string(),
        }))
        .await
    }

    async fn list_users(&self) -> ExecResult<Vec<String>> {
        answered(cluster::list_users(&self.shared).await)
    }

    async fn insert_table_tablets(
        &self,
        database: &str,
        table: &str,
        created_version: u64,
        tablets: Vec<Tablet>,
    ) -> ExecResult<()> {
        let origin = TableOrigin {
            database,
            table,
            created_version,
        };
        let status = crate::ops::write::insert_table_tablets(&self.shared, &origin, tablets).await;
        status_result(&status)
    }

    async fn create_table(
        &self,
        database: &str,
        table: &TableSchema,
        if_not_exists: bool,
        extend: bool,
    ) -> ExecResult<()> {
        // The next write's lookup reads the extended schema from the ConfigNode.
        self.shared.metadata.forget_table(database, &table.name);
        self.schema(statements::create_table(
            database,
            table,
            if_not_exists,
            extend,
        ))
        .await
    }

    async fn drop_table(&self, database: &str, table: &str) -> ExecResult<()> {
        // The operation invalidates every DataNode's copy; this one's goes at once.
        self.shared.metadata.forget_table(database, table);
        self.schema(statements::drop_table(database, table)).await
    }

    async fn tables(
        &self,
        database: &str,
        table: Option<&str>,
        with_devices: bool,
    ) -> ExecResult<Vec<TableView>> {
        let request = proto::ShowTablesReq {
            database: database.to_string(),
            table: table.unwrap_or_default().to_string(),
            with_devices,
        };
        let answer = self
            .shared
            .confignode
            .call(None, |mut c| {
                let request = request.clone();
                async move { c.show_tables(request).await }
            })
            .await;
        let reply = match answer {
            Ok(reply) => reply,
            Err(e) => {
                let status = e.status();
                return Err(ExecError::Status {
                    code: status.code.wire(),
                    message: status.message,
                });
            }
        };
        if let Some(status) = &reply.status {
            status_result(&status.clone().into())?;
        }
        reply
            .tables
            .iter()
            .map(|t| {
                let columns: Result<Vec<_>, _> =
                    t.columns.iter().map(proto::table_column).collect();
                let columns = columns.map_err(|e| ExecError::Status {
                    code: StatusCode::InternalServerError.wire(),
                    message: e.to_string(),
                })?;
                Ok(TableView {
                    schema: TableSchema {
                        name: t.name.clone(),
                        columns,
                        ttl_ms: (t.ttl_ms > 0).then_some(t.ttl_ms),
                    },
                    created_version: t.created_version,
                    devices: t
                        .devices
                        .iter()
                        .map(|d| (proto::tag_values(d), d.attributes.clone()))
                        .collect(),
                })
            })
            .collect()
    }

    async fn table_for_write(&self, database: &str, table: &str) -> ExecResult<Option<TableView>> {
        let metadata = &self.shared.metadata;
        {
            let pinned = metadata.pin();
            // Not cached, or the lease is not live: the ConfigNode's answer (a fenced node cannot
            // reach it, and its write is relayed).
            if let Ok(Some(view)) = pinned.table(database, table) {
                return Ok(Some(view));
            }
        }
        // Pinned across the lookup, so an answer from before an invalidation is not cached.
        let pinned = metadata.pin();
        match self.tables(database, Some(table), false).await {
            Ok(mut found) => {
                let view = found.pop();
                if let Some(view) = &view {
                    pinned.put_table(database, view.clone());
                }
                Ok(view)
            }
            Err(e) if e.code() == StatusCode::TableNotExists.wire() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn set_device_attributes(
        &self,
        database: &str,
        table: &str,
        created_version: u64,
        devices: &[DeviceAttributes],
    ) -> ExecResult<()> {
        self.schema(statements::set_device_attributes(
            database,
            table,
            created_version,
            devices,
        ))
        .await
    }

    async fn flush(&self) -> ExecResult<()> {
        crate::maintenance::flush_all(&self.shared)
            .await
            .map_err(|message| ExecError::Status {
                code: StatusCode::InternalServerError.wire(),
                message,
            })
    }
}

/// IoTDB's `deleteData`, over Thrift and gRPC: the points with `start <= t <= end` of the series
/// `paths` (series paths or path patterns) name. An empty range deletes nothing.
pub(crate) async fn delete_data(
    backend: &DataNodeBackend,
    paths: &[String],
    start: i64,
    end: i64,
) -> Result<(), ExecError> {
    let mut patterns = Vec::with_capacity(paths.len());
    for path in paths {
        let pattern = sql::PathPattern::parse(path).ok_or_else(|| {
            ExecError::refused(
                StatusCode::IllegalParameter,
                format!("{path} is not a path like root.sg.d1.s1 or root.sg.d1.*"),
            )
        })?;
        patterns.push(pattern);
    }
    if start > end {
        return Ok(());
    }
    sql::delete_paths(backend, &patterns, start, end).await
}

/// The one statement of `text`, parsed (refused: none, several, or QUIT).
fn one_statement(text: &str) -> Result<sql::Statement, ExecError> {
    let mut parsed = sql::parse_script(text, sql::Position::START);
    let statement = match (parsed.len(), parsed.pop()) {
        (1, Some(p)) => p.result?,
        (0, _) => {
            return Err(ExecError::refused(
                StatusCode::IllegalParameter,
                "no statement",
            ))
        }
        _ => {
            return Err(ExecError::refused(
                StatusCode::IllegalParameter,
                "one statement per call",
            ))
        }
    };
    if statement == sql::Statement::Quit {
        return Err(ExecError::Status {
            code: 300,
            message: "QUIT ends a CLI session; it is no statement for the server".into(),
        });
    }
    Ok(statement)
}

/// Parses and runs the one statement of `text` over `backend` (IoTDB's clients and the gRPC
/// session's ExecuteStatement alike), its result charged to `charge` as it is built.
pub(crate) async fn run_statement(
    backend: &DataNodeBackend,
    text: &str,
    charge: &mut sql::ResultCharge,
    deadline: &QueryDeadline,
) -> Result<sql::Outcome, ExecError> {
    let statement = one_statement(text)?;
    let run = sql::execute_charged(backend, &statement, charge);
    deadline.run_if(is_query(&statement), run).await
}

/// [`run_statement`]'s result as a cursor: a raw SELECT reads its rows as they are paged.
pub(crate) async fn open_statement(
    backend: &DataNodeBackend,
    text: &str,
    charge: &mut sql::ResultCharge,
    deadline: &QueryDeadline,
) -> Result<sql::exec::ResultCursor, ExecError> {
    let statement = one_statement(text)?;
    let open = sql::exec::open(backend, &statement, charge);
    deadline.run_if(is_query(&statement), open).await
}

/// Whether a statement only reads: a query, under its deadline. A write or a schema change is
/// never cut off midway by one (its own deadlines bound it).
pub(crate) fn is_query(statement: &sql::Statement) -> bool {
    use sql::Statement as S;
    matches!(
        statement,
        S::Select { .. }
            | S::SelectLast { .. }
            | S::SelectAggregate { .. }
            | S::ShowDatabases { .. }
            | S::CountTimeseries { .. }
            | S::CountDevices { .. }
            | S::ShowChild { .. }
            | S::ShowTimeseries { .. }
            | S::ShowDevices { .. }
            | S::Explain { .. }
    )
}

/// [`is_query`] for the table model: SELECT.
pub(crate) fn is_table_query(statement: &sql::TableStatement) -> bool {
    match statement {
        sql::TableStatement::Select(_)
        | sql::TableStatement::SelectAggregate(_)
        | sql::TableStatement::Explain { .. } => true,
        sql::TableStatement::Shared(shared) => is_query(shared),
        _ => false,
    }
}
