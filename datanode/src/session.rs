//! `SessionService` on `dn_rpc_address`: the client API. Writes and reads go through the
//! coordinator under the in-flight guard (so an invalidation waits for them); schema statements
//! and cluster views are forwarded to the ConfigNode leader.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{DataType, SeriesPath, StatusCode, Tablet};
use proto::session_service_server::SessionService;
use tonic::{Request, Response};

use crate::convert::{
    ok, reply, status, tablet_from_wire, tablets_from_wire, value_from_wire, value_to_wire,
};
use crate::coordinator::Relay;
use crate::host::LocalReplicas;
use crate::ops;
use crate::ops::write::{insert_tablets, series_types, too_many, BATCH_ITEMS_MAX};
use crate::parts::Shared;

type RpcResult<T> = Result<Response<T>, tonic::Status>;

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
        insert_tablets(&self.shared, tablets, Relay::WhenFenced)
            .await
            .into()
    }
}

/// Sets its flag when dropped: a blocking task's way to learn its caller went away.
struct CancelOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
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
            return Ok(Response::new(s.into()));
        }
        match tablets_from_wire(req.tablets) {
            Ok(tablets) => Ok(Response::new(self.insert_all(tablets).await)),
            Err(refused) => Ok(Response::new(refused.into())),
        }
    }

    async fn insert_records(
        &self,
        request: Request<proto::InsertRecordsReq>,
    ) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        if let Some(s) = too_many("records", req.records.len(), BATCH_ITEMS_MAX) {
            return Ok(Response::new(s.into()));
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
                status: Some(s.into()),
                series: Vec::new(),
            }));
        }
        let pinned = self.shared.metadata.pin();
        let paths: Vec<SeriesPath> = req.paths.into_iter().map(Into::into).collect();
        let outcome = self
            .shared
            .coordinator
            .read_range(
                &pinned,
                &paths,
                req.start_time..req.end_time,
                req.points_limit,
            )
            .await;
        Ok(Response::new(match outcome {
            Ok(series) => proto::QueryRawResp {
                status: Some(ok()),
                series: series
                    .into_iter()
                    .map(|s| proto::SeriesData {
                        truncated: s.truncated,
                        path: Some(s.path.into()),
                        data_type: proto::data_type_to_wire(s.batch.data_type()) as i32,
                        values: Some(crate::convert::column_to_wire(s.batch.values(), None)),
                        timestamps: s.batch.into_columns().0,
                    })
                    .collect(),
            },
            Err(e) => proto::QueryRawResp {
                status: Some(e.status().into()),
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
                status: Some(s.into()),
                points: Vec::new(),
            }));
        }
        let pinned = self.shared.metadata.pin();
        let paths: Vec<SeriesPath> = req.paths.into_iter().map(Into::into).collect();
        let outcome = self.shared.coordinator.read_last(&pinned, &paths).await;
        Ok(Response::new(match outcome {
            Ok(series) => proto::QueryLastResp {
                status: Some(ok()),
                points: series
                    .into_iter()
                    .map(|s| proto::LastPoint {
                        path: Some(s.path.into()),
                        data_type: proto::data_type_to_wire(s.data_type) as i32,
                        timestamp: s.time,
                        value: Some(value_to_wire(&s.value)),
                    })
                    .collect(),
            },
            Err(e) => proto::QueryLastResp {
                status: Some(e.status().into()),
                points: Vec::new(),
            },
        }))
    }

    async fn execute_schema_statement(
        &self,
        request: Request<proto::SchemaStatementReq>,
    ) -> RpcResult<proto::Status> {
        let statement = request.into_inner().statement;
        Ok(Response::new(
            ops::cluster::schema_statement(&self.shared, statement)
                .await
                .into(),
        ))
    }

    async fn show_databases(
        &self,
        _r: Request<proto::SessionShowReq>,
    ) -> RpcResult<proto::ShowDatabasesResp> {
        Ok(Response::new(reply(
            ops::cluster::show_databases(&self.shared).await,
        )))
    }

    async fn show_timeseries(
        &self,
        request: Request<proto::SessionShowTimeseriesReq>,
    ) -> RpcResult<proto::ShowTimeseriesResp> {
        let prefix = request.into_inner().prefix;
        Ok(Response::new(reply(
            ops::cluster::show_timeseries(&self.shared, prefix).await,
        )))
    }

    async fn series_types(
        &self,
        request: Request<proto::SeriesTypesReq>,
    ) -> RpcResult<proto::SeriesTypesResp> {
        let req = request.into_inner();
        let answer = series_types(
            &self.shared,
            &req.device,
            &req.measurements,
            Relay::WhenFenced,
        )
        .await;
        Ok(Response::new(reply(answer)))
    }

    async fn show_cluster(
        &self,
        _r: Request<proto::SessionShowReq>,
    ) -> RpcResult<proto::ShowClusterResp> {
        Ok(Response::new(reply(
            ops::cluster::show_cluster(&self.shared).await,
        )))
    }

    async fn show_regions(
        &self,
        _r: Request<proto::SessionShowReq>,
    ) -> RpcResult<proto::ShowRegionsResp> {
        Ok(Response::new(reply(
            ops::cluster::show_regions(&self.shared).await,
        )))
    }

    async fn show_leases(
        &self,
        _r: Request<proto::SessionShowReq>,
    ) -> RpcResult<proto::ShowLeasesResp> {
        Ok(Response::new(reply(
            ops::cluster::show_leases(&self.shared).await,
        )))
    }

    async fn show_local_lease(
        &self,
        _r: Request<proto::SessionShowReq>,
    ) -> RpcResult<proto::ShowLocalLeaseResp> {
        Ok(Response::new(
            ops::cluster::local_lease(&self.shared).into(),
        ))
    }

    async fn user_statement(
        &self,
        request: Request<proto::UserStatementReq>,
    ) -> RpcResult<proto::Status> {
        let issuer = match logged_in(&request) {
            Ok(user) => user,
            Err(s) => return Ok(Response::new(s)),
        };
        let statement = request.into_inner().statement;
        Ok(Response::new(
            ops::cluster::user_statement(&self.shared, issuer, statement)
                .await
                .into(),
        ))
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
        let backend = ops::sql::DataNodeBackend::new(self.shared.clone(), user);
        let decode = || tablet_from_wire(wire.clone());
        let written =
            ops::table::write_table(&self.shared, &backend, &req.database, &categories, decode)
                .await;
        Ok(Response::new(match written {
            Ok(s) => s.into(),
            Err(e) => status(StatusCode::IllegalParameter, e.to_string()),
        }))
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
        let backend = ops::sql::DataNodeBackend::new(self.shared.clone(), user);
        // Charged while it is built, so a result too large for memory is refused before it is
        // whole; the charge holds until the answer is encoded.
        let mut charge = self.shared.clients.results.charge();
        let ticket = self.shared.queries.register(&req.statement, backend.user());
        let deadline =
            ops::deadline::QueryDeadline::new(self.shared.config.query.query_timeout_ms, 0)
                .registered(ticket);
        let outcome = if req.table_model {
            let database = (!req.database.is_empty()).then_some(req.database.as_str());
            match sql::parse_table_statement(&req.statement) {
                Ok(statement) => {
                    let run =
                        sql::execute_table_charged(&backend, database, &statement, &mut charge);
                    let query = ops::sql::is_table_query(&statement);
                    deadline.run_if(query, run).await.map(|o| o.outcome)
                }
                Err(e) => Err(e.into()),
            }
        } else {
            ops::sql::run_statement(&backend, &req.statement, &mut charge, &deadline).await
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
                rows: ops::paged::rows_to_wire(&o.rows),
            },
            Err(e) => proto::ExecuteStatementResp {
                status: Some(ops::sql::exec_status(&e).into()),
                ..Default::default()
            },
        };
        // The whole result goes in one message: one over the limit would fail in the transport
        // with a message that names no cause, so it is refused here, saying what to do.
        let limit = self.shared.config.rpc.dn_rpc_max_message_bytes as usize;
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

    async fn execute_statement_paged(
        &self,
        request: Request<proto::ExecuteStatementReq>,
    ) -> RpcResult<ops::paged::PageStream> {
        let pages = match logged_in(&request) {
            Ok(user) => ops::paged::execute(self.shared.clone(), user, request.into_inner()),
            Err(s) => ops::paged::refused(s),
        };
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(pages),
        )))
    }

    async fn list_users(
        &self,
        _r: Request<proto::ListUsersReq>,
    ) -> RpcResult<proto::ListUsersResp> {
        Ok(Response::new(reply(
            ops::cluster::list_users(&self.shared).await,
        )))
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
        let backend = ops::sql::DataNodeBackend::new(self.shared.clone(), user);
        let outcome = ops::sql::delete_data(
            &backend,
            &request.paths,
            request.start_time,
            request.end_time,
        )
        .await;
        Ok(Response::new(match outcome {
            Ok(()) => ok(),
            Err(e) => ops::sql::exec_status(&e).into(),
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
