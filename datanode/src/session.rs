//! `SessionService` on `dn_rpc_address`: the client API. Writes and reads go through the
//! coordinator under the in-flight guard (so an invalidation waits for them); schema statements
//! and cluster views are forwarded to the ConfigNode leader.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::{DataType, StatusCode, Tablet};
use proto::session_service_server::SessionService;
use tonic::{Request, Response};

use crate::convert::{column_of, ok, status, tablet_from_wire, value_from_wire, value_to_wire};
use crate::coordinator::{aggregate, write_status, Relay, TableOrigin};
use crate::host::LocalReplicas;
use crate::parts::Shared;

type RpcResult<T> = Result<Response<T>, tonic::Status>;

/// Tablets in one InsertTablets call and records in one InsertRecords call.
const BATCH_ITEMS_MAX: usize = 10_000;
/// Paths in one query.
const QUERY_PATHS_MAX: usize = 10_000;

/// The session service of one DataNode.
pub(crate) struct SessionServiceImpl {
    shared: Arc<Shared>,
}

impl SessionServiceImpl {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SessionServiceImpl { shared }
    }

    /// Each tablet counts as its own in-flight operation (`coordinator::insert_tablet`), so an
    /// invalidation waits for the tablet being written, not for a whole batch.
    async fn insert_all(&self, tablets: Vec<Tablet>) -> proto::Status {
        insert_tablets(&self.shared, tablets, Relay::WhenFenced).await
    }
}

/// Writes `tablets` one by one; a request spanning more partitions than one FetchPartitions may
/// ask is refused whole (700) before any of them is written.
pub(crate) async fn insert_tablets(
    shared: &Arc<Shared>,
    tablets: Vec<Tablet>,
    relay: Relay,
) -> proto::Status {
    if let Err(e) = shared.coordinator.limits.check_request_partitions(&tablets) {
        return e.status();
    }
    let mut statuses = Vec::with_capacity(tablets.len());
    for tablet in tablets {
        let outcome = shared.coordinator.insert_tablet(tablet, relay).await;
        statuses.push(write_status(&outcome));
    }
    aggregate(statuses)
}

/// Writes the device tablets of one table write (`sql::insert_table`), derived from the table
/// `origin` names, under one pin held until the last is answered: an invalidation (DROP TABLE)
/// waits for the whole table write, and once it moved the caches the rest is refused. Stops at
/// the first device refused and answers its status, so the client (or the Thrift layer's relay)
/// retries the whole write, which is idempotent; a device tablet is never relayed on its own.
pub(crate) async fn insert_table_tablets(
    shared: &Arc<Shared>,
    origin: &TableOrigin<'_>,
    tablets: Vec<Tablet>,
) -> proto::Status {
    if let Err(e) = shared.coordinator.limits.check_request_partitions(&tablets) {
        return e.status();
    }
    let pinned = shared.metadata.pin();
    let mut redirect = None;
    let devices = tablets.len();
    for tablet in tablets {
        match shared
            .coordinator
            .insert_table_device(&pinned, tablet, origin)
            .await
        {
            Ok(written) => redirect = written.redirect.or(redirect),
            Err(e) => return e.status(),
        }
    }
    // A hint is about one device.
    let written = crate::coordinator::Written {
        redirect: redirect.filter(|_| devices == 1),
    };
    written.status()
}

/// A table-model tablet written for a client (Thrift's `writeToTable`, gRPC's
/// `InsertTableTablet`): by `sql::insert_table` here while this node holds its lease, else — or
/// when that fails because the lease is gone or the ConfigNode does not answer — handed whole to
/// a lease holder, which derives its devices from the table itself (a device tablet is never
/// relayed alone: it was derived from this node's view of the table). `decode` gives the tablet
/// afresh for each attempt, so none is copied for a relay that may not come.
pub(crate) async fn write_table<E>(
    shared: &Arc<Shared>,
    backend: &crate::client_rpc::DataNodeBackend,
    database: &str,
    categories: &[common::table::Category],
    decode: impl Fn() -> Result<Tablet, E>,
) -> Result<proto::Status, E> {
    let coordinator = &shared.coordinator;
    if coordinator.write_gate() {
        let outcome = sql::insert_table(backend, database, decode()?, categories).await;
        match outcome {
            Ok(()) => return Ok(ok()),
            Err(e) if relayable(e.code()) => {
                tracing::debug!("table write relayed after {}: {e}", e.code())
            }
            Err(e) => return Ok(crate::client_rpc::exec_status(&e)),
        }
    }
    let tablet = decode()?;
    Ok(
        match coordinator
            .relay_table_insert(database, &tablet, categories)
            .await
        {
            Ok(()) => ok(),
            Err(e) => e.status(),
        },
    )
}

/// Whether a table write that failed with `code` is relayed to a lease holder: this node's
/// lease is fenced (535, 536) or its ConfigNode did not answer (712).
fn relayable(code: i32) -> bool {
    [
        StatusCode::MetadataLeaseFenced,
        StatusCode::MetadataLeaseFencedRetryRequired,
        StatusCode::InternalRequestTimeOut,
    ]
    .iter()
    .any(|c| c.wire() == code)
}

/// Sets its flag when dropped: a blocking task's way to learn its caller went away.
struct CancelOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Decodes and writes wire tablets (a relayed write), with the session's limits.
pub(crate) async fn insert_wire_tablets(
    shared: &Arc<Shared>,
    wire: Vec<proto::Tablet>,
    relay: Relay,
) -> proto::Status {
    if let Some(s) = too_many("tablets", wire.len(), BATCH_ITEMS_MAX) {
        return s;
    }
    let mut tablets = Vec::with_capacity(wire.len());
    for t in wire {
        match tablet_from_wire(t) {
            Ok(t) => tablets.push(t),
            Err(e) => return status(StatusCode::IllegalParameter, e.to_string()),
        }
    }
    insert_tablets(shared, tablets, relay).await
}

/// Answers a series-type lookup ([`crate::coordinator::series_types`]) on the wire: the
/// session's, or one a fenced peer relayed here (`relay` = [`Relay::Never`]).
pub(crate) async fn answer_series_types(
    shared: &Arc<Shared>,
    req: proto::SeriesTypesReq,
    relay: Relay,
) -> proto::SeriesTypesResp {
    let outcome = shared
        .coordinator
        .series_types(&req.device, &req.measurements, relay)
        .await;
    match outcome {
        Ok(series) => proto::SeriesTypesResp {
            status: Some(ok()),
            series: series
                .into_iter()
                .map(|(name, t)| proto::MeasurementSchema {
                    name,
                    data_type: proto::data_type_to_wire(t) as i32,
                })
                .collect(),
        },
        Err(e) => proto::SeriesTypesResp {
            status: Some(e.status()),
            series: Vec::new(),
        },
    }
}

/// A status of an IoTDB code Fencepost may not name (e.g. 801, 300).
fn too_many(what: &str, n: usize, max: usize) -> Option<proto::Status> {
    (n > max).then(|| {
        status(
            StatusCode::IllegalParameter,
            format!("{n} {what} in one request; the limit is {max}"),
        )
    })
}

#[tonic::async_trait]
impl SessionService for SessionServiceImpl {
    async fn open_session(
        &self,
        _request: Request<proto::OpenSessionReq>,
    ) -> RpcResult<proto::OpenSessionResp> {
        Ok(Response::new(proto::OpenSessionResp {
            status: Some(ok()),
            session_id: self.shared.next_session_id(),
        }))
    }

    async fn close_session(
        &self,
        _request: Request<proto::CloseSessionReq>,
    ) -> RpcResult<proto::Status> {
        Ok(Response::new(ok()))
    }

    async fn insert_tablet(
        &self,
        request: Request<proto::InsertTabletReq>,
    ) -> RpcResult<proto::Status> {
        let Some(wire) = request.into_inner().tablet else {
            return Ok(Response::new(status(
                StatusCode::IllegalParameter,
                "no tablet",
            )));
        };
        match tablet_from_wire(wire) {
            Ok(tablet) => Ok(Response::new(self.insert_all(vec![tablet]).await)),
            Err(e) => Ok(Response::new(status(
                StatusCode::IllegalParameter,
                e.to_string(),
            ))),
        }
    }

    async fn insert_tablets(
        &self,
        request: Request<proto::InsertTabletsReq>,
    ) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        if let Some(s) = too_many("tablets", req.tablets.len(), BATCH_ITEMS_MAX) {
            return Ok(Response::new(s));
        }
        let mut tablets = Vec::with_capacity(req.tablets.len());
        for wire in req.tablets {
            match tablet_from_wire(wire) {
                Ok(t) => tablets.push(t),
                Err(e) => {
                    return Ok(Response::new(status(
                        StatusCode::IllegalParameter,
                        e.to_string(),
                    )))
                }
            }
        }
        Ok(Response::new(self.insert_all(tablets).await))
    }

    async fn insert_records(
        &self,
        request: Request<proto::InsertRecordsReq>,
    ) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        if let Some(s) = too_many("records", req.records.len(), BATCH_ITEMS_MAX) {
            return Ok(Response::new(s));
        }
        // One single-row tablet per record; null values are left out.
        let mut tablets = Vec::with_capacity(req.records.len());
        for record in &req.records {
            if record.measurements.len() != record.values.len() {
                return Ok(Response::new(status(
                    StatusCode::IllegalParameter,
                    format!(
                        "record for {} has {} measurements and {} values",
                        record.device,
                        record.measurements.len(),
                        record.values.len()
                    ),
                )));
            }
            let present: Vec<(&str, common::Value)> = record
                .measurements
                .iter()
                .zip(&record.values)
                .filter_map(|(m, v)| Some((m.as_str(), value_from_wire(v)?)))
                .collect();
            let schema: Vec<(&str, DataType)> =
                present.iter().map(|(m, v)| (*m, v.data_type())).collect();
            let mut tablet = Tablet::new(record.device.clone(), &schema);
            tablet.push_row(
                record.timestamp,
                present.into_iter().map(|(_, v)| Some(v)).collect(),
            );
            tablets.push(tablet);
        }
        Ok(Response::new(self.insert_all(tablets).await))
    }

    async fn query_raw(
        &self,
        request: Request<proto::QueryRawReq>,
    ) -> RpcResult<proto::QueryRawResp> {
        let req = request.into_inner();
        if let Some(s) = too_many("paths", req.paths.len(), QUERY_PATHS_MAX) {
            return Ok(Response::new(proto::QueryRawResp {
                status: Some(s),
                series: Vec::new(),
            }));
        }
        let pinned = self.shared.metadata.pin();
        let outcome = self
            .shared
            .coordinator
            .read(
                &pinned,
                &req.paths,
                req.start_time..req.end_time,
                req.points_limit,
                false,
            )
            .await;
        Ok(Response::new(match outcome {
            Ok(series) => proto::QueryRawResp {
                status: Some(ok()),
                series: series
                    .into_iter()
                    .map(|s| proto::SeriesData {
                        truncated: s.truncated,
                        path: Some(s.path),
                        data_type: proto::data_type_to_wire(s.data_type) as i32,
                        timestamps: s.points.keys().copied().collect(),
                        values: Some(crate::convert::column_to_wire(
                            &column_of(s.data_type, s.points.into_values()),
                            None,
                        )),
                    })
                    .collect(),
            },
            Err(e) => proto::QueryRawResp {
                status: Some(e.status()),
                series: Vec::new(),
            },
        }))
    }

    async fn query_last(
        &self,
        request: Request<proto::QueryLastReq>,
    ) -> RpcResult<proto::QueryLastResp> {
        let req = request.into_inner();
        if let Some(s) = too_many("paths", req.paths.len(), QUERY_PATHS_MAX) {
            return Ok(Response::new(proto::QueryLastResp {
                status: Some(s),
                points: Vec::new(),
            }));
        }
        let pinned = self.shared.metadata.pin();
        let outcome = self
            .shared
            .coordinator
            .read(&pinned, &req.paths, i64::MIN..i64::MAX, 0, true)
            .await;
        Ok(Response::new(match outcome {
            Ok(series) => proto::QueryLastResp {
                status: Some(ok()),
                points: series
                    .into_iter()
                    .filter_map(|s| {
                        let (t, v) = s.points.into_iter().next_back()?;
                        Some(proto::LastPoint {
                            path: Some(s.path),
                            data_type: proto::data_type_to_wire(s.data_type) as i32,
                            timestamp: t,
                            value: Some(value_to_wire(&v)),
                        })
                    })
                    .collect(),
            },
            Err(e) => proto::QueryLastResp {
                status: Some(e.status()),
                points: Vec::new(),
            },
        }))
    }

    async fn execute_schema_statement(
        &self,
        request: Request<proto::SchemaStatementReq>,
    ) -> RpcResult<proto::Status> {
        use proto::schema_statement_req::Statement;
        let Some(statement) = request.into_inner().statement else {
            return Ok(Response::new(status(
                StatusCode::IllegalParameter,
                "no statement",
            )));
        };
        // A DROP DATABASE / DELETE TIMESERIES / SET TTL waits until every DataNode acknowledged the
        // invalidation or is fenced (fence + margin), then deletes through the regions' logs:
        // the ConfigNode gives it fence + margin + 60 s before it answers "still in progress".
        // A shorter deadline here would re-send the statement while the first still runs.
        let timeout = Duration::from_millis(self.shared.metadata.lease().fence_ms() * 2)
            + crate::timing::SCHEMA_STATEMENT_SLACK;
        let outcome = self
            .shared
            .confignode
            .call(Some(timeout), |mut c| {
                let statement = statement.clone();
                async move {
                    match statement {
                        Statement::CreateDatabase(r) => c.create_database(r).await,
                        Statement::DropDatabase(r) => c.drop_database(r).await,
                        Statement::CreateTimeseries(r) => c.create_timeseries(r).await,
                        Statement::DeleteTimeseries(r) => c.delete_timeseries(r).await,
                        // Also a fence operation: answered once every DataNode dropped its
                        // cached copy of the database (and so its TTL) or is fenced.
                        Statement::SetTtl(r) => c.set_ttl(r).await,
                        Statement::RemoveDataNode(r) => c.remove_data_node(r).await,
                        Statement::CreateTable(r) => c.create_table(r).await,
                        Statement::SetDeviceAttributes(r) => c.set_device_attributes(r).await,
                        // A fence operation, as DELETE TIMESERIES.
                        Statement::DropTable(r) => c.drop_table(r).await,
                    }
                }
            })
            .await;
        Ok(Response::new(outcome.unwrap_or_else(|s| s)))
    }

    async fn show_databases(
        &self,
        _r: Request<proto::SessionShowReq>,
    ) -> RpcResult<proto::ShowDatabasesResp> {
        let outcome = self
            .shared
            .confignode
            .call(None, |mut c| async move {
                c.show_databases(proto::ShowDatabasesReq {}).await
            })
            .await;
        Ok(Response::new(outcome.unwrap_or_else(|s| {
            proto::ShowDatabasesResp {
                status: Some(s),
                ..Default::default()
            }
        })))
    }

    async fn show_timeseries(
        &self,
        request: Request<proto::SessionShowTimeseriesReq>,
    ) -> RpcResult<proto::ShowTimeseriesResp> {
        let prefix = request.into_inner().prefix;
        let outcome = self
            .shared
            .confignode
            .call(None, |mut c| {
                let prefix = prefix.clone();
                async move {
                    c.show_timeseries(proto::ShowTimeseriesReq {
                        prefix,
                        declared_codecs_only: false,
                    })
                    .await
                }
            })
            .await;
        Ok(Response::new(outcome.unwrap_or_else(|s| {
            proto::ShowTimeseriesResp {
                status: Some(s),
                ..Default::default()
            }
        })))
    }

    async fn series_types(
        &self,
        request: Request<proto::SeriesTypesReq>,
    ) -> RpcResult<proto::SeriesTypesResp> {
        Ok(Response::new(
            answer_series_types(&self.shared, request.into_inner(), Relay::WhenFenced).await,
        ))
    }

    async fn show_cluster(
        &self,
        _r: Request<proto::SessionShowReq>,
    ) -> RpcResult<proto::ShowClusterResp> {
        let outcome = self
            .shared
            .confignode
            .call(None, |mut c| async move {
                c.show_cluster(proto::ShowClusterReq {}).await
            })
            .await;
        Ok(Response::new(outcome.unwrap_or_else(|s| {
            proto::ShowClusterResp {
                status: Some(s),
                ..Default::default()
            }
        })))
    }

    async fn show_regions(
        &self,
        _r: Request<proto::SessionShowReq>,
    ) -> RpcResult<proto::ShowRegionsResp> {
        let outcome = self
            .shared
            .confignode
            .call(None, |mut c| async move {
                c.show_regions(proto::ShowRegionsReq::default()).await
            })
            .await;
        Ok(Response::new(outcome.unwrap_or_else(|s| {
            proto::ShowRegionsResp {
                status: Some(s),
                ..Default::default()
            }
        })))
    }

    async fn show_leases(
        &self,
        _r: Request<proto::SessionShowReq>,
    ) -> RpcResult<proto::ShowLeasesResp> {
        let outcome = self
            .shared
            .confignode
            .call(None, |mut c| async move {
                c.show_leases(proto::ShowLeasesReq {}).await
            })
            .await;
        Ok(Response::new(outcome.unwrap_or_else(|s| {
            proto::ShowLeasesResp {
                status: Some(s),
                ..Default::default()
            }
        })))
    }

    async fn show_local_lease(
        &self,
        _r: Request<proto::SessionShowReq>,
    ) -> RpcResult<proto::ShowLocalLeaseResp> {
        let lease = self.shared.metadata.lease();
        // `is_live` first: it moves a lapsed lease out of NORMAL, so the state read after it agrees.
        let fenced = !lease.is_live();
        Ok(Response::new(proto::ShowLocalLeaseResp {
            status: Some(ok()),
            data_node_id: self.shared.identity.node_id,
            endpoint: self.shared.identity.rpc_address.clone(),
            state: lease.state().name().to_string(),
            incarnation: lease.incarnation(),
            heartbeat_age_ms: lease.heartbeat_age_ms(),
            fence_ms: lease.fence_ms(),
            fenced,
        }))
    }

    async fn user_statement(
        &self,
        request: Request<proto::UserStatementReq>,
    ) -> RpcResult<proto::Status> {
        let issuer = match logged_in(&request) {
            Ok(user) => user,
            Err(s) => return Ok(Response::new(s)),
        };
        let mut req = request.into_inner();
        req.issuer = issuer;
        use proto::user_statement_req::Statement;
        let target = match &req.statement {
            Some(Statement::CreateUser(r)) => r.username.clone(),
            Some(Statement::DropUser(r)) => r.username.clone(),
            Some(Statement::AlterPassword(r)) => r.username.clone(),
            None => String::new(),
        };
        let outcome = self
            .shared
            .confignode
            .call(None, |mut c| {
                let req = req.clone();
                async move { c.user_statement(req).await }
            })
            .await;
        // Whatever the answer, this DataNode asks the ConfigNode about the user next time.
        crate::auth::forget(&self.shared, &target);
        Ok(Response::new(outcome.unwrap_or_else(|s| s)))
    }

    async fn insert_table_tablet(
        &self,
        request: Request<proto::InsertTableTabletReq>,
    ) -> RpcResult<proto::Status> {
        let user = match logged_in(&request) {
            Ok(user) => user,
            Err(s) => return Ok(Response::new(s)),
        };
        let req = request.into_inner();
        let Some(wire) = req.tablet else {
            return Ok(Response::new(status(
                StatusCode::IllegalParameter,
                "no tablet",
            )));
        };
        let categories: Option<Vec<_>> = req
            .categories
            .iter()
            .map(|c| {
                u8::try_from(*c)
                    .ok()
                    .and_then(common::table::Category::from_wire)
            })
            .collect();
        let Some(categories) = categories else {
            return Ok(Response::new(status(
                StatusCode::IllegalParameter,
                format!(
                    "unknown column categories {:?}: TAG 0, FIELD 1 or ATTRIBUTE 2",
                    req.categories
                ),
            )));
        };
        let backend = crate::client_rpc::DataNodeBackend::new(self.shared.clone(), user);
        let decode = || tablet_from_wire(wire.clone());
        let written = write_table(&self.shared, &backend, &req.database, &categories, decode).await;
        Ok(Response::new(written.unwrap_or_else(|e| {
            status(StatusCode::IllegalParameter, e.to_string())
        })))
    }

    async fn execute_statement(
        &self,
        request: Request<proto::ExecuteStatementReq>,
    ) -> RpcResult<proto::ExecuteStatementResp> {
        let user = match logged_in(&request) {
            Ok(user) => user,
            Err(s) => {
                return Ok(Response::new(proto::ExecuteStatementResp {
                    status: Some(s),
                    ..Default::default()
                }))
            }
        };
        let req = request.into_inner();
        let backend = crate::client_rpc::DataNodeBackend::new(self.shared.clone(), user);
        // Charged while it is built, so a result too large for memory is refused before it is
        // whole; the charge holds until the answer is encoded.
        let mut charge = self.shared.clients.results.charge();
        let outcome = if req.table_model {
            let database = (!req.database.is_empty()).then_some(req.database.as_str());
            match sql::parse_table_statement(&req.statement) {
                Ok(statement) => {
                    sql::execute_table_charged(&backend, database, &statement, &mut charge)
                        .await
                        .map(|o| o.outcome)
                }
                Err(e) => Err(e.into()),
            }
        } else {
            crate::client_rpc::run_statement(&backend, &req.statement, &mut charge).await
        };
        let answer = match outcome {
            Ok(o) => proto::ExecuteStatementResp {
                status: Some(ok()),
                query: o.kind == sql::OutcomeKind::Query,
                columns: o.columns,
                types: o
                    .types
                    .into_iter()
                    .map(|t| proto::data_type_to_wire(t) as i32)
                    .collect(),
                rows: o
                    .rows
                    .into_iter()
                    .map(|row| proto::ResultRow {
                        cells: row
                            .iter()
                            .map(|cell| match cell {
                                Some(v) => value_to_wire(v),
                                None => proto::Value { value: None },
                            })
                            .collect(),
                    })
                    .collect(),
            },
            Err(e) => proto::ExecuteStatementResp {
                status: Some(crate::client_rpc::exec_status(&e)),
                ..Default::default()
            },
        };
        // The whole result goes in one message: one over the limit would fail in the transport
        // with a message that names no cause, so it is refused here, saying what to do.
        let limit = self.shared.config.dn_rpc_max_message_bytes as usize;
        let bytes = prost::Message::encoded_len(&answer);
        if bytes > limit {
            return Ok(Response::new(proto::ExecuteStatementResp {
                status: Some(status(
                    StatusCode::IllegalParameter,
                    format!(
                        "the result of {} rows is {bytes} bytes, over dn_rpc_max_message_bytes \
                         ({limit}); narrow the time range, or read it through IoTDB's client \
                         protocol, which pages results",
                        answer.rows.len()
                    ),
                )),
                ..Default::default()
            }));
        }
        Ok(Response::new(answer))
    }

    async fn list_users(
        &self,
        _r: Request<proto::ListUsersReq>,
    ) -> RpcResult<proto::ListUsersResp> {
        let outcome = self
            .shared
            .confignode
            .call(None, |mut c| async move {
                c.list_users(proto::ListUsersReq {}).await
            })
            .await;
        Ok(Response::new(outcome.unwrap_or_else(|s| {
            proto::ListUsersResp {
                status: Some(s),
                ..Default::default()
            }
        })))
    }

    async fn flush(&self, _r: Request<proto::SessionShowReq>) -> RpcResult<proto::Status> {
        Ok(Response::new(
            match crate::maintenance::flush_all(&self.shared).await {
                Ok(()) => ok(),
                Err(message) => status(StatusCode::InternalServerError, message),
            },
        ))
    }

    async fn delete_data(
        &self,
        request: Request<proto::DeleteDataReq>,
    ) -> RpcResult<proto::Status> {
        let user = match logged_in(&request) {
            Ok(user) => user,
            Err(s) => return Ok(Response::new(s)),
        };
        let request = request.into_inner();
        let backend = crate::client_rpc::DataNodeBackend::new(self.shared.clone(), user);
        let outcome = crate::client_rpc::delete_data(
            &backend,
            &request.paths,
            request.start_time,
            request.end_time,
        )
        .await;
        Ok(Response::new(match outcome {
            Ok(()) => ok(),
            Err(e) => crate::client_rpc::exec_status(&e),
        }))
    }

    async fn region_digest(
        &self,
        request: Request<proto::RegionDigestReq>,
    ) -> RpcResult<proto::RegionDigestResp> {
        let request = request.into_inner();
        let wanted = request.region_id;
        let regions: Vec<(u64, String, Arc<engine::DataRegion>)> = self
            .shared
            .host
            .regions_with_databases()
            .into_iter()
            .filter(|(id, _, _)| wanted == 0 || *id == wanted)
            .collect();
        let node = self.shared.identity.node_id;
        let mut digests = Vec::new();
        for (id, database, region) in regions {
            let is_leader = self.shared.host.leads(id);
            if request.leaders_only {
                digests.push(proto::RegionDigest {
                    region_id: id,
                    data_node_id: node,
                    applied_index: region.applied_index(),
                    digest: 0,
                    is_leader,
                });
                continue;
            }
            // A digest reads every point of the region: off the runtime's workers (the lease
            // monitor and heartbeats run there), one at a time per node.
            let _one = self
                .shared
                .internal
                .digests
                .acquire()
                .await
                .map_err(|_| tonic::Status::unavailable("shutting down"))?;
            let from = request
                .visible_from_ms
                .get(&database)
                .copied()
                .unwrap_or(i64::MIN);
            // A caller that gives up (its timeout, a dropped connection) drops this future: the
            // guard then stops the digest between two series, so abandoned digests do not queue
            // up behind the semaphore nor hold the region's state.
            let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let _stop = CancelOnDrop(cancelled.clone());
            let digest = tokio::task::spawn_blocking(move || {
                region.digest_until_cancelled(from, &|| cancelled.load(Ordering::Relaxed))
            })
            .await
            .map_err(|e| tonic::Status::internal(format!("digest task: {e}")))?;
            let digest = match digest {
                Ok(Some(d)) => Ok(d),
                Ok(None) => return Err(tonic::Status::cancelled("the digest was given up")),
                Err(e) => Err(e),
            };
            match digest {
                Ok(d) => digests.push(proto::RegionDigest {
                    region_id: id,
                    data_node_id: node,
                    applied_index: d.applied_index,
                    digest: d.hash,
                    is_leader,
                }),
                Err(e) => {
                    let s = e.status();
                    return Ok(Response::new(proto::RegionDigestResp {
                        status: Some(status(s.code, s.message)),
                        digests: Vec::new(),
                    }));
                }
            }
        }
        Ok(Response::new(proto::RegionDigestResp {
            status: Some(ok()),
            digests,
        }))
    }
}

/// The user the layer in front (`auth::Authenticated`) logged in for this call, or 802 for a
/// call that bypassed it (the handlers that act as a user need one).
fn logged_in<T>(request: &Request<T>) -> Result<String, proto::Status> {
    request
        .extensions()
        .get::<crate::auth::User>()
        .map(|user| user.0.clone())
        .ok_or_else(|| status(StatusCode::NotLogin, "no logged-in user"))
}
