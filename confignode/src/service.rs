//! The gRPC `ConfigNodeService`: converts wire messages by hand, redirects on followers,
//! proposes commands on the leader.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use codec::SeriesCodec;
use common::StatusCode;
use proto::config_node_service_server::ConfigNodeService;
use tonic::{Request, Response};

use crate::command::{Command, CommandResult, SeriesSpec, TableOrigin};
use crate::error::{Error, MetadataError};
use crate::shared::Shared;
use crate::state::{MetadataState, OperationKind, PATH_BYTES_MAX};
use crate::users::{self, LoginError, AUTHENTICATION_FAILED, ROOT_USER};
use crate::wire::{location, replica_set, status_ok};
use common::path::DevicePath;
use common::views::SeriesMeta;
use proto::user_statement_req::Statement;

type RpcResult<T> = std::result::Result<Response<T>, tonic::Status>;

/// Most devices or series in one request.
const REQUEST_ITEMS_MAX: usize = 100_000;
// A DataNode sizes its write requests to what one FetchPartitions may ask.
const _: () = assert!(REQUEST_ITEMS_MAX == common::FETCH_PARTITIONS_SLOTS_MAX);

pub(crate) struct ConfigNodeServiceImpl {
    shared: Arc<Shared>,
    /// Becomes true when the server shuts down: raft streams end then, so the graceful
    /// shutdown does not wait for the peers to hang up.
    stop: tokio::sync::watch::Receiver<bool>,
}

/// 507 for a request from an incarnation older than the registered one.
fn stale_caller(
    state: &crate::state::MetadataState,
    caller: Option<&proto::Caller>,
) -> Option<proto::Status> {
    let caller = caller?;
    let registered = state
        .data_node(caller.data_node_id)
        .map_or(0, |n| n.incarnation_epoch);
    (caller.incarnation_epoch < registered).then(|| {
        proto::status(
            StatusCode::MetadataError,
            format!(
                "DataNode {} incarnation {} was replaced by incarnation {registered}",
                caller.data_node_id, caller.incarnation_epoch
            ),
        )
    })
}

impl ConfigNodeServiceImpl {
    pub(crate) fn new(shared: Arc<Shared>, stop: tokio::sync::watch::Receiver<bool>) -> Self {
        ConfigNodeServiceImpl { shared, stop }
    }

    /// `Ok(term)` on the leader; a redirecting status otherwise.
    fn leader(&self) -> std::result::Result<u64, proto::Status> {
        self.shared.group.check_leader().map_err(redirect)
    }
}

fn redirect(leader: Option<String>) -> proto::Status {
    let endpoint = leader
        .as_deref()
        .and_then(|a| proto::parse_endpoint(a).ok());
    let code = if endpoint.is_some() {
        StatusCode::RedirectionRecommend
    } else {
        StatusCode::InternalServerError
    };
    proto::status_with_redirect(code, "not the ConfigNode leader", endpoint)
}

fn error_status(e: &Error) -> proto::Status {
    match e {
        Error::Metadata(m) => proto::status(m.status_code(), m.to_string()),
        Error::Runtime(runtime::Error::Proposal(consensus::ProposalError::Apply {
            code,
            message,
            ..
        })) => proto::Status {
            code: i32::from(*code),
            ..proto::status(StatusCode::MetadataError, message.clone())
        },
        Error::Runtime(runtime::Error::Consensus(consensus::Error::NotLeader { .. }))
        | Error::Runtime(runtime::Error::Proposal(consensus::ProposalError::LeaderChanged {
            ..
        })) => redirect(None),
        Error::NotLeader { leader } => redirect(leader.clone()),
        Error::Runtime(runtime::Error::Timeout(_)) | Error::Timeout(_) => {
            let mut s = proto::status(StatusCode::InternalRequestTimeOut, e.to_string());
            s.need_retry = true;
            s
        }
        other => {
            let mut s = proto::status(StatusCode::InternalServerError, other.to_string());
            s.need_retry = true;
            s
        }
    }
}

fn too_many(n: usize) -> Option<proto::Status> {
    (n > REQUEST_ITEMS_MAX).then(|| {
        proto::status(
            StatusCode::IllegalParameter,
            format!("{n} items in one request; the limit is {REQUEST_ITEMS_MAX}"),
        )
    })
}

macro_rules! leader_or_return {
    ($self:ident, $resp:expr) => {
        match $self.leader() {
            Ok(term) => term,
            Err(status) => {
                let mut resp = $resp;
                resp.status = Some(status);
                return Ok(Response::new(resp));
            }
        }
    };
}

macro_rules! try_status {
    ($e:expr, $resp:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => {
                let mut resp = $resp;
                resp.status = Some(error_status(&Error::from(e)));
                return Ok(Response::new(resp));
            }
        }
    };
}

impl ConfigNodeServiceImpl {
    /// Proposes `command` on the leader and answers its outcome as a status.
    async fn propose_for_status(&self, command: Command) -> proto::Status {
        if let Err(s) = self.leader() {
            return s;
        }
        match self.shared.group.propose(command).await {
            Ok(_) => status_ok(),
            Err(e) => error_status(&e),
        }
    }

    async fn run_fence_operation(&self, begin: Command) -> proto::Status {
        if let Err(s) = self.leader() {
            return s;
        }
        // A retry of a DROP / DELETE still in progress (the client's deadline is often shorter
        // than fence + margin) joins that operation instead of being refused as "being deleted".
        let kind = operation_kind(&begin);
        // A SET TTL always runs its own operation: joining a pending one for the same database
        // would drop this request's value.
        let joinable = !matches!(kind, OperationKind::SetTtl(_));
        let operation_id = match self.pending_operation(&kind).filter(|_| joinable) {
            Some(id) => id,
            None => match self.shared.group.propose(begin).await {
                Ok(CommandResult::OperationBegun(id)) => id,
                Ok(other) => panic!("Begin* returned {other:?}"),
                // Another request for the same target may have begun it meanwhile.
                Err(e) => match self.pending_operation(&kind) {
                    Some(id) => id,
                    None => return error_status(&e),
                },
            },
        };
        self.shared.leader.spawn_operation(operation_id);
        let config = &self.shared.config;
        // Long enough for one unreachable DataNode to count as fenced, plus the deletions.
        let deadline = tokio::time::Instant::now()
            + Duration::from_millis(
                config.lease.metadata_lease_fence_ms + config.lease.lease_proceed_margin_ms,
            )
            + crate::timing::FENCE_OPERATION_SLACK;
        loop {
            if self.shared.group.is_stopping() {
                let mut s = proto::status(
                    StatusCode::InternalServerError,
                    format!("ConfigNode shutting down; operation {operation_id} is resumed by the next leader"),
                );
                s.need_retry = true;
                return s;
            }
            if !self
                .shared
                .group
                .state()
                .operations()
                .any(|(id, _)| id == operation_id)
            {
                return status_ok();
            }
            if tokio::time::Instant::now() >= deadline {
                let mut s = proto::status(
                    StatusCode::InternalRequestTimeOut,
                    format!("operation {operation_id} is still in progress; it completes in the background"),
                );
                s.need_retry = false;
                return s;
            }
            tokio::time::sleep(crate::timing::FENCE_OPERATION_POLL).await;
        }
    }

    /// The pending fence operation of exactly this kind and target, if one is in progress. A
    /// DROP TABLE joins one of its table only while no table of that name exists again.
    fn pending_operation(&self, kind: &OperationKind) -> Option<u64> {
        let state = self.shared.group.state();
        let same = |k: &OperationKind| match (k, kind) {
            (
                OperationKind::DropTable {
                    database, table, ..
                },
                OperationKind::DropTable {
                    database: d,
                    table: t,
                    ..
                },
            ) => database == d && table == t && state.table(d, t).is_none(),
            _ => k == kind,
        };
        let found = state.operations().find(|(_, k)| same(k)).map(|(id, _)| id);
        found
    }

    fn registration_response(&self, data_node_id: u64, epoch: u64) -> proto::RegisterDataNodeResp {
        let config = &self.shared.config;
        let state = self.shared.group.state();
        proto::RegisterDataNodeResp {
            status: Some(status_ok()),
            data_node_id,
            incarnation_epoch: epoch,
            parameters: Some(proto::ClusterParameters {
                series_slot_num: config.partitioning.series_slot_num,
                time_partition_interval_ms: config.partitioning.time_partition_interval_ms,
                time_partition_origin_ms: 0,
                metadata_lease_fence_ms: config.lease.metadata_lease_fence_ms,
                heartbeat_interval_ms: config.lease.heartbeat_interval_ms,
                data_replication_factor: config.partitioning.data_replication_factor,
                lease_proceed_margin_ms: config.lease.lease_proceed_margin_ms,
            }),
            config_nodes: self
                .shared
                .group
                .members()
                .iter()
                .map(|(id, a)| proto::ConfigNodeLocation {
                    config_node_id: *id,
                    endpoint: proto::parse_endpoint(a).ok(),
                })
                .collect(),
            // Its replicas, and the joining replicas of migrations to it.
            regions: state
                .regions()
                .filter(|r| {
                    r.replicas.contains(&data_node_id)
                        || state
                            .region_migration(r.id)
                            .is_some_and(|(_, to)| to == data_node_id)
                })
                .map(|r| replica_set(&state, r))
                .collect(),
            metadata_version: state.metadata_version(),
        }
    }
}

#[tonic::async_trait]
impl ConfigNodeService for ConfigNodeServiceImpl {
    async fn register_data_node(
        &self,
        request: Request<proto::RegisterDataNodeReq>,
    ) -> RpcResult<proto::RegisterDataNodeResp> {
        let req = request.into_inner();
        let empty = proto::RegisterDataNodeResp::default();
        leader_or_return!(self, empty);
        let (Some(internal), Some(rpc)) = (req.internal_endpoint, req.rpc_endpoint) else {
            let mut resp = empty;
            resp.status = Some(proto::status(
                StatusCode::IllegalParameter,
                "internal and rpc endpoints are required",
            ));
            return Ok(Response::new(resp));
        };
        // A node without a stored id is a new node, even on a known address; one with a stored
        // id is checked against the incarnation it ran last (REVIEW H3). A DataNode that
        // predates the stored epoch sends none (0: every stored epoch is at least 1).
        let (internal_address, rpc_address) = (proto::endpoint(&internal), proto::endpoint(&rpc));
        let command = match (req.data_node_id, req.stored_incarnation_epoch) {
            (0, _) => Command::RegisterNewDataNode {
                internal_address,
                rpc_address,
            },
            (data_node_id, 0) => Command::RegisterDataNode {
                data_node_id,
                internal_address,
                rpc_address,
            },
            (data_node_id, stored_epoch) => Command::ReregisterDataNode {
                data_node_id,
                stored_epoch,
                internal_address,
                rpc_address,
            },
        };
        let (id, epoch) = match try_status!(self.shared.group.propose(command).await, empty) {
            CommandResult::Registered {
                data_node_id,
                incarnation_epoch,
            } => (data_node_id, incarnation_epoch),
            other => panic!("RegisterDataNode returned {other:?}"),
        };
        // The registration is a contact: a new incarnation starts with a fresh lease.
        let now = self.shared.leader.clock.now_ms();
        {
            let state = self.shared.group.state();
            let registry: Vec<(u64, u64)> = state
                .data_nodes()
                .map(|n| (n.id, n.incarnation_epoch))
                .collect();
            let mut tracker = self.shared.leader.tracker.lock();
            tracker.sync_registry(&registry, now);
            // The reply to the registration is a contact with the new incarnation.
            if let Err(refused) = tracker.record_contact(id, epoch, now) {
                // Only a follower (no tracked nodes) gets here; the next leader round syncs.
                tracing::debug!(
                    data_node_id = id,
                    "registration not counted as contact: {refused:?}"
                );
            }
        }
        tracing::info!(
            data_node_id = id,
            incarnation_epoch = epoch,
            "DataNode registered"
        );
        Ok(Response::new(self.registration_response(id, epoch)))
    }

    async fn fetch_schema(
        &self,
        request: Request<proto::FetchSchemaReq>,
    ) -> RpcResult<proto::FetchSchemaResp> {
        let req = request.into_inner();
        let empty = proto::FetchSchemaResp::default();
        leader_or_return!(self, empty);
        if let Some(s) = too_many(req.devices.len()) {
            return Ok(Response::new(proto::FetchSchemaResp {
                status: Some(s),
                ..empty
            }));
        }
        try_status!(self.shared.group.read_barrier().await, empty);
        if let Some(s) = stale_caller(&self.shared.group.state(), req.caller.as_ref()) {
            return Ok(Response::new(proto::FetchSchemaResp {
                status: Some(s),
                ..empty
            }));
        }
        // A table write's devices: only under the incarnation of the table it read (REVIEW N1).
        let origin = req.table.as_ref().map(|t| TableOrigin {
            database: t.database.clone(),
            table: t.table.clone(),
            created_version: t.created_version,
        });
        if let Some(origin) = &origin {
            let state = self.shared.group.state();
            try_status!(
                state.check_table_incarnation(
                    &origin.database,
                    &origin.table,
                    origin.created_version
                ),
                empty
            );
        }
        if req.auto_create {
            let missing = try_status!(
                missing_series(&self.shared.group.state(), &req.devices),
                empty
            );
            if !missing.is_empty() {
                let command = match origin {
                    Some(origin) => Command::CreateTableSeries {
                        origin,
                        series: missing,
                    },
                    None => Command::CreateTimeseries {
                        series: missing,
                        auto_create: true,
                    },
                };
                let created = self.shared.group.propose(command).await;
                match created {
                    Ok(_) => {}
                    // Created concurrently with another type: the caller sees the existing
                    // type below and reports 614 itself.
                    Err(Error::Runtime(runtime::Error::Proposal(
                        consensus::ProposalError::Apply { code, .. },
                    ))) if code == StatusCode::DataTypeMismatch.code() => {}
                    Err(e) => {
                        return Ok(Response::new(proto::FetchSchemaResp {
                            status: Some(error_status(&e)),
                            ..empty
                        }))
                    }
                }
            }
        }
        let state = self.shared.group.state();
        let devices = req
            .devices
            .iter()
            .map(|d| device_schema(&state, d))
            .collect();
        Ok(Response::new(proto::FetchSchemaResp {
            status: Some(status_ok()),
            devices,
            metadata_version: state.metadata_version(),
        }))
    }

    async fn fetch_partitions(
        &self,
        request: Request<proto::FetchPartitionsReq>,
    ) -> RpcResult<proto::FetchPartitionsResp> {
        let req = request.into_inner();
        let empty = proto::FetchPartitionsResp::default();
        leader_or_return!(self, empty);
        let items: usize = req.requests.iter().map(|r| r.time_slots.len().max(1)).sum();
        if let Some(s) = too_many(items) {
            return Ok(Response::new(proto::FetchPartitionsResp {
                status: Some(s),
                ..empty
            }));
        }
        try_status!(self.shared.group.read_barrier().await, empty);
        if let Some(s) = stale_caller(&self.shared.group.state(), req.caller.as_ref()) {
            return Ok(Response::new(proto::FetchPartitionsResp {
                status: Some(s),
                ..empty
            }));
        }
        if req.auto_create {
            if let Err(s) = self.auto_create_partitions(&req.requests).await {
                return Ok(Response::new(proto::FetchPartitionsResp {
                    status: Some(s),
                    ..empty
                }));
            }
        }
        Ok(Response::new(self.partitions_answer(&req)))
    }

    async fn create_database(
        &self,
        request: Request<proto::CreateDatabaseReq>,
    ) -> RpcResult<proto::Status> {
        let proto::CreateDatabaseReq {
            database,
            table_model,
        } = request.into_inner();
        Ok(Response::new(
            self.propose_for_status(Command::CreateDatabase {
                database,
                table_model,
            })
            .await,
        ))
    }

    async fn remove_data_node(
        &self,
        request: Request<proto::RemoveDataNodeReq>,
    ) -> RpcResult<proto::Status> {
        let data_node_id = request.into_inner().data_node_id;
        Ok(Response::new(
            self.propose_for_status(Command::RemoveDataNode { data_node_id })
                .await,
        ))
    }

    async fn drop_database(
        &self,
        request: Request<proto::DropDatabaseReq>,
    ) -> RpcResult<proto::Status> {
        let database = request.into_inner().database;
        Ok(Response::new(
            self.run_fence_operation(Command::BeginDropDatabase { database })
                .await,
        ))
    }

    async fn set_ttl(&self, request: Request<proto::SetTtlReq>) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        if req.ttl_ms < 0 {
            return Ok(Response::new(error_status(&Error::from(
                MetadataError::IllegalTtl(req.ttl_ms),
            ))));
        }
        Ok(Response::new(
            self.run_fence_operation(Command::BeginSetTtl {
                database: req.database,
                ttl_ms: (req.ttl_ms != 0).then_some(req.ttl_ms),
            })
            .await,
        ))
    }

    async fn create_timeseries(
        &self,
        request: Request<proto::CreateTimeseriesReq>,
    ) -> RpcResult<proto::Status> {
        if let Err(s) = self.leader() {
            return Ok(Response::new(s));
        }
        let req = request.into_inner();
        if let Some(s) = too_many(req.series.len()) {
            return Ok(Response::new(s));
        }
        let mut series = Vec::with_capacity(req.series.len());
        for s in req.series {
            let Ok(data_type) = proto::data_type(s.data_type) else {
                return Ok(Response::new(proto::status(
                    StatusCode::IllegalParameter,
                    format!("unknown data type {}", s.data_type),
                )));
            };
            let codec = match SeriesCodec::parse(data_type, Some(&s.encoding), Some(&s.compressor))
            {
                Ok(codec) => codec,
                Err(e) => {
                    return Ok(Response::new(proto::status(
                        StatusCode::IllegalParameter,
                        format!("{}.{}: {e}", s.device, s.measurement),
                    )))
                }
            };
            series.push(SeriesSpec {
                device: s.device,
                measurement: s.measurement,
                data_type,
                codec,
                meta: SeriesMeta {
                    alias: (!s.alias.is_empty()).then_some(s.alias),
                    tags: s.tags,
                    attributes: s.attributes,
                },
            });
        }
        let command = Command::CreateTimeseries {
            series,
            auto_create: false,
        };
        Ok(Response::new(
            match self.shared.group.propose(command).await {
                Ok(_) => status_ok(),
                Err(e) => error_status(&e),
            },
        ))
    }

    async fn delete_timeseries(
        &self,
        request: Request<proto::DeleteTimeseriesReq>,
    ) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        if let Some(s) = too_many(req.series.len()) {
            return Ok(Response::new(s));
        }
        let series = req
            .series
            .into_iter()
            .map(|p| (p.device, p.measurement))
            .collect();
        Ok(Response::new(
            self.run_fence_operation(Command::BeginDeleteTimeseries { series })
                .await,
        ))
    }

    async fn drop_table(&self, request: Request<proto::DropTableReq>) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        Ok(Response::new(
            self.run_fence_operation(Command::BeginDropTable {
                database: req.database,
                table: req.table,
            })
            .await,
        ))
    }

    async fn show_databases(
        &self,
        _: Request<proto::ShowDatabasesReq>,
    ) -> RpcResult<proto::ShowDatabasesResp> {
        let empty = proto::ShowDatabasesResp::default();
        leader_or_return!(self, empty);
        try_status!(self.shared.group.read_barrier().await, empty);
        let state = self.shared.group.state();
        let shown: Vec<&str> = state
            .databases()
            .filter(|(_, p)| !p)
            .map(|(d, _)| d)
            .collect();
        let config = &self.shared.config;
        Ok(Response::new(proto::ShowDatabasesResp {
            status: Some(status_ok()),
            ttl_ms: shown.iter().map(|d| state.ttl_ms(d).unwrap_or(0)).collect(),
            table_model: proto::views::table_model_list(
                shown.iter().map(|d| state.is_table_database(d)),
            ),
            databases: shown.into_iter().map(str::to_string).collect(),
            schema_replication_factor: self.shared.group.members().len() as u32,
            data_replication_factor: config.partitioning.data_replication_factor,
            time_partition_origin_ms: 0,
            time_partition_interval_ms: config.partitioning.time_partition_interval_ms,
            now_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
        }))
    }

    async fn show_timeseries(
        &self,
        request: Request<proto::ShowTimeseriesReq>,
    ) -> RpcResult<proto::ShowTimeseriesResp> {
        let proto::ShowTimeseriesReq {
            prefix,
            declared_codecs_only,
        } = request.into_inner();
        let empty = proto::ShowTimeseriesResp::default();
        leader_or_return!(self, empty);
        try_status!(self.shared.group.read_barrier().await, empty);
        let state = self.shared.group.state();
        let candidates: Box<dyn Iterator<Item = _>> = if declared_codecs_only {
            Box::new(
                state
                    .declared_codec_series()
                    .filter(|(d, m, _)| {
                        prefix.is_empty() || format!("{d}.{m}").starts_with(&prefix)
                    })
                    .map(|(d, m, r)| (d, m, r, state.series_meta(d, m))),
            )
        } else {
            Box::new(state.series_under(&prefix))
        };
        // The database of the device before, found once per device.
        let mut database: Option<(&str, Option<(&str, bool)>)> = None;
        let series = candidates
            .take(REQUEST_ITEMS_MAX)
            .map(|(d, m, r, meta)| {
                let of_device = match database {
                    Some((device, db)) if device == d => db,
                    _ => {
                        let db = state.database_of(d);
                        database = Some((d, db));
                        db
                    }
                };
                let meta = meta.cloned().unwrap_or_default();
                proto::TimeseriesInfo {
                    database: of_device.map(|(db, _)| db.to_string()).unwrap_or_default(),
                    device: d.to_string(),
                    measurement: m.to_string(),
                    data_type: proto::data_type_to_wire(r.data_type) as i32,
                    pending_delete: r.pending_delete || of_device.is_some_and(|(_, p)| p),
                    encoding: r.codec.encoding_name().to_string(),
                    compressor: r.codec.compressor_name().to_string(),
                    alias: meta.alias.unwrap_or_default(),
                    tags: meta.tags,
                    attributes: meta.attributes,
                    table_model: of_device.is_some_and(|(db, _)| state.is_table_database(db)),
                }
            })
            .collect();
        Ok(Response::new(proto::ShowTimeseriesResp {
            status: Some(status_ok()),
            series,
        }))
    }

    async fn show_cluster(
        &self,
        _: Request<proto::ShowClusterReq>,
    ) -> RpcResult<proto::ShowClusterResp> {
        // Answered by any ConfigNode from its own view, so an operator can see every member.
        let status = self.shared.group.leader_status();
        let state = self.shared.group.state();
        Ok(Response::new(proto::ShowClusterResp {
            status: Some(status_ok()),
            config_nodes: self
                .shared
                .group
                .members()
                .iter()
                .map(|(id, a)| proto::ConfigNodeInfo {
                    location: Some(proto::ConfigNodeLocation {
                        config_node_id: *id,
                        endpoint: proto::parse_endpoint(a).ok(),
                    }),
                    role: match &status {
                        Some(s) if s.leader == Some(*id) => "Leader",
                        Some(_) => "Follower",
                        None => "Unknown",
                    }
                    .to_string(),
                })
                .collect(),
            data_nodes: state
                .data_nodes()
                .map(|n| proto::DataNodeInfo {
                    location: Some(location(n)),
                    status: n.status.name().to_string(),
                    incarnation_epoch: n.incarnation_epoch,
                    confirmed_incarnation_epoch: n.confirmed_epoch,
                })
                .collect(),
            config_node_term: status.map_or(0, |s| s.term),
            metadata_version: state.metadata_version(),
        }))
    }

    async fn show_regions(
        &self,
        request: Request<proto::ShowRegionsReq>,
    ) -> RpcResult<proto::ShowRegionsResp> {
        let request = request.into_inner();
        let empty = proto::ShowRegionsResp::default();
        if let Some(s) = too_many(request.region_ids.len()) {
            return Ok(Response::new(proto::ShowRegionsResp {
                status: Some(s),
                ..empty
            }));
        }
        leader_or_return!(self, empty);
        let leaders = self.shared.leader.region_leaders.lock().clone();
        let state = self.shared.group.state();
        Ok(Response::new(proto::ShowRegionsResp {
            status: Some(status_ok()),
            regions: state
                .regions()
                .map(|r| proto::RegionInfo {
                    replica_set: Some(replica_set(&state, r)),
                    leader_id: leaders.get(&r.id).copied().unwrap_or(0),
                })
                .collect(),
            // Only what the state positively records as deleted; an id it does not know yet
            // (allocated after this state) is not listed (`MetadataState::region_dropped`).
            dropped_region_ids: request
                .region_ids
                .iter()
                .copied()
                .filter(|id| state.region_dropped(*id))
                .collect(),
            left_region_ids: state.left_regions(request.data_node_id, &request.region_ids),
        }))
    }

    async fn show_leases(
        &self,
        _: Request<proto::ShowLeasesReq>,
    ) -> RpcResult<proto::ShowLeasesResp> {
        let empty = proto::ShowLeasesResp::default();
        leader_or_return!(self, empty);
        let now = self.shared.leader.clock.now_ms();
        let state = self.shared.group.state();
        let tracker = self.shared.leader.tracker.lock();
        Ok(Response::new(proto::ShowLeasesResp {
            status: Some(status_ok()),
            leases: state
                .data_nodes()
                .map(|n| proto::LeaseInfo {
                    data_node_id: n.id,
                    incarnation_epoch: n.incarnation_epoch,
                    last_contact_age_ms: tracker.age_ms(n.id, now),
                    holds_lease: tracker.holds_lease(n.id, now),
                    fenced: tracker.is_fenced(n.id, now),
                    status: n.status.name().to_string(),
                })
                .collect(),
            metadata_lease_fence_ms: self.shared.config.lease.metadata_lease_fence_ms,
            lease_proceed_margin_ms: self.shared.config.lease.lease_proceed_margin_ms,
        }))
    }

    async fn authenticate(
        &self,
        request: Request<proto::AuthenticateReq>,
    ) -> RpcResult<proto::Status> {
        let proto::AuthenticateReq { username, password } = request.into_inner();
        // The leader alone counts failed logins.
        let term = match self.leader() {
            Ok(term) => term,
            Err(s) => return Ok(Response::new(s)),
        };
        if let Err(e) = self.shared.group.read_barrier().await {
            return Ok(Response::new(error_status(&e)));
        }
        let group = &self.shared.group;
        let outcome = self
            .shared
            .users
            .authenticate(term, &username, password, |u| {
                group.state().user_password(u)
            })
            .await;
        Ok(Response::new(match outcome {
            Ok(()) => status_ok(),
            Err(LoginError::Failed) => {
                proto::status(StatusCode::WrongLoginPassword, AUTHENTICATION_FAILED)
            }
            // Only a legal user name is ever locked, so it is short enough to repeat.
            Err(LoginError::Locked { remaining_ms }) => proto::status(
                StatusCode::UserLoginLocked,
                format!(
                    "User {username} is locked after too many failed logins; try again in {} s.",
                    remaining_ms.div_ceil(1000)
                ),
            ),
            Err(LoginError::Internal(e)) => proto::status(StatusCode::InternalServerError, e),
        }))
    }

    async fn user_statement(
        &self,
        request: Request<proto::UserStatementReq>,
    ) -> RpcResult<proto::Status> {
        Ok(Response::new(
            self.run_user_statement(request.into_inner()).await,
        ))
    }

    async fn create_table(
        &self,
        request: Request<proto::CreateTableReq>,
    ) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        if req.columns.len() > common::table::COLUMNS_MAX {
            return Ok(Response::new(proto::status(
                StatusCode::IllegalParameter,
                format!(
                    "{} columns; at most {}",
                    req.columns.len(),
                    common::table::COLUMNS_MAX
                ),
            )));
        }
        let columns = match req.columns.iter().map(proto::table_column).collect() {
            Ok(columns) => columns,
            Err(e) => {
                return Ok(Response::new(proto::status(
                    StatusCode::IllegalParameter,
                    e.to_string(),
                )))
            }
        };
        if req.ttl_ms < 0 {
            return Ok(Response::new(error_status(&Error::from(
                MetadataError::IllegalTtl(req.ttl_ms),
            ))));
        }
        Ok(Response::new(
            self.propose_for_status(Command::CreateTable {
                database: req.database,
                table: common::table::TableSchema {
                    name: req.table,
                    columns,
                    ttl_ms: (req.ttl_ms != 0).then_some(req.ttl_ms),
                },
                if_not_exists: req.if_not_exists,
                extend: req.extend,
            })
            .await,
        ))
    }

    async fn set_device_attributes(
        &self,
        request: Request<proto::SetDeviceAttributesReq>,
    ) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        if let Some(s) = too_many(req.devices.len()) {
            return Ok(Response::new(s));
        }
        let devices = req
            .devices
            .iter()
            .map(|d| (proto::tag_values(d), d.attributes.clone()))
            .collect();
        Ok(Response::new(
            self.propose_for_status(Command::SetDeviceAttributes {
                database: req.database,
                table: req.table,
                table_version: req.table_version,
                devices,
            })
            .await,
        ))
    }

    async fn show_tables(
        &self,
        request: Request<proto::ShowTablesReq>,
    ) -> RpcResult<proto::ShowTablesResp> {
        let req = request.into_inner();
        let empty = proto::ShowTablesResp::default();
        leader_or_return!(self, empty);
        try_status!(self.shared.group.read_barrier().await, empty);
        let state = self.shared.group.state();
        if !state
            .databases()
            .any(|(d, pending)| d == req.database && !pending)
        {
            return Ok(Response::new(proto::ShowTablesResp {
                status: Some(error_status(&Error::from(MetadataError::DatabaseNotFound(
                    req.database,
                )))),
                tables: Vec::new(),
            }));
        }
        let info = |t: &crate::state::TableRecord| proto::TableInfo {
            name: t.schema.name.clone(),
            created_version: t.created_version,
            columns: t
                .schema
                .columns
                .iter()
                .map(proto::table_column_to_wire)
                .collect(),
            ttl_ms: t.schema.ttl_ms.unwrap_or(0),
            devices: if req.with_devices {
                t.devices
                    .iter()
                    .map(|(tags, attributes)| proto::table_device_to_wire(tags, attributes))
                    .collect()
            } else {
                Vec::new()
            },
        };
        let tables: Vec<proto::TableInfo> = if req.table.is_empty() {
            state.tables_of(&req.database).map(info).collect()
        } else {
            match state.table(&req.database, &req.table) {
                Some(t) => vec![info(t)],
                None => {
                    return Ok(Response::new(proto::ShowTablesResp {
                        status: Some(error_status(&Error::from(MetadataError::TableNotFound(
                            format!("{}.{}", req.database, req.table),
                        )))),
                        tables: Vec::new(),
                    }))
                }
            }
        };
        Ok(Response::new(proto::ShowTablesResp {
            status: Some(status_ok()),
            tables,
        }))
    }

    async fn list_users(&self, _: Request<proto::ListUsersReq>) -> RpcResult<proto::ListUsersResp> {
        let empty = proto::ListUsersResp::default();
        leader_or_return!(self, empty);
        try_status!(self.shared.group.read_barrier().await, empty);
        let users = self
            .shared
            .group
            .state()
            .user_names()
            .into_iter()
            .map(str::to_string)
            .collect();
        Ok(Response::new(proto::ListUsersResp {
            status: Some(status_ok()),
            users,
        }))
    }

    async fn stream_raft_messages(
        &self,
        request: Request<tonic::Streaming<proto::RaftMessageBatch>>,
    ) -> RpcResult<proto::RaftMessageResp> {
        let mut stop = self.stop.clone();
        let stopped = async move {
            drop(stop.wait_for(|stopped| *stopped).await);
        };
        let answer = runtime::serve_raft_stream(request.into_inner(), stopped, |messages| {
            // Dropped like a lost packet; raft retransmits.
            if let Err(e) = self.shared.group.driver().step(messages) {
                tracing::trace!("raft messages dropped: {e}");
            }
        })
        .await?;
        Ok(Response::new(answer))
    }
}

/// The operation a Begin* command starts.
fn operation_kind(begin: &Command) -> OperationKind {
    match begin {
        Command::BeginDropDatabase { database } => OperationKind::DropDatabase(database.clone()),
        Command::BeginSetTtl { database, .. } => OperationKind::SetTtl(database.clone()),
        Command::BeginDeleteTimeseries { series } => {
            OperationKind::DeleteTimeseries(series.clone())
        }
        // The series are the state's to list; a join compares the table alone.
        Command::BeginDropTable { database, table } => OperationKind::DropTable {
            database: database.clone(),
            table: table.clone(),
            series: Vec::new(),
        },
        other => panic!("{other:?} begins no fence operation"),
    }
}

/// Why `issuer` may not run `statement` on `state`, if it may not: the issuer must be a user;
/// only root creates and drops users or changes another user's password; root is never dropped.
/// Only then is the target's existence told (804 / 805), so that a user who may not manage
/// users cannot learn who exists. Apply checks existence again, against the state it commits to.
fn user_statement_refusal(
    state: &MetadataState,
    issuer: &str,
    statement: &Statement,
) -> Option<MetadataError> {
    let refuse = |why: String| Some(MetadataError::NoPermission(why));
    if !state.user_exists(issuer) {
        return refuse(match users::check_username(issuer) {
            Ok(()) => format!("the issuer {issuer} is not a user"),
            Err(_) => "the statement names no valid issuer".into(),
        });
    }
    let root = issuer == ROOT_USER;
    let target = match statement {
        Statement::CreateUser(c) => {
            if !root {
                return refuse(format!("only root may create users, not {issuer}"));
            }
            if state.user_exists(&c.username) {
                return Some(MetadataError::UserExists(c.username.clone()));
            }
            return None;
        }
        Statement::DropUser(d) => {
            if !root {
                return refuse(format!("only root may drop users, not {issuer}"));
            }
            if d.username == ROOT_USER {
                return refuse("the root user cannot be dropped".into());
            }
            &d.username
        }
        Statement::AlterPassword(a) => {
            if !root && a.username != issuer {
                return refuse(format!(
                    "only root may change another user's password, not {issuer}"
                ));
            }
            &a.username
        }
    };
    (!state.user_exists(target)).then(|| MetadataError::UserNotFound(target.clone()))
}

fn metadata_status(e: &MetadataError) -> proto::Status {
    proto::status(e.status_code(), e.to_string())
}

/// The user statements, on the leader.
impl ConfigNodeServiceImpl {
    async fn run_user_statement(&self, req: proto::UserStatementReq) -> proto::Status {
        if let Err(s) = self.leader() {
            return s;
        }
        let Some(statement) = req.statement else {
            return proto::status(
                StatusCode::IllegalParameter,
                "the request carries no user statement",
            );
        };
        // The rules first: they need no state (and the leader hashes nothing that breaks them).
        let checked =
            match &statement {
                Statement::CreateUser(c) => users::check_username(&c.username)
                    .and_then(|()| users::check_password(&c.password)),
                Statement::DropUser(d) => users::check_username(&d.username),
                Statement::AlterPassword(a) => users::check_username(&a.username)
                    .and_then(|()| users::check_password(&a.password)),
            };
        if let Err(reason) = checked {
            return proto::status(StatusCode::IllegalParameter, reason);
        }
        if let Err(e) = self.shared.group.read_barrier().await {
            return error_status(&e);
        }
        let refusal = user_statement_refusal(&self.shared.group.state(), &req.issuer, &statement);
        if let Some(e) = refusal {
            return metadata_status(&e);
        }
        let command = match statement {
            Statement::DropUser(d) => Command::DropUser {
                username: d.username,
            },
            Statement::CreateUser(c) => match self.shared.users.hash(c.password).await {
                Ok(password_hash) => Command::CreateUser {
                    username: c.username,
                    password_hash,
                },
                Err(e) => return proto::status(StatusCode::InternalServerError, e),
            },
            Statement::AlterPassword(a) => match self.shared.users.hash(a.password).await {
                Ok(password_hash) => Command::SetUserPassword {
                    username: a.username,
                    password_hash,
                },
                Err(e) => return proto::status(StatusCode::InternalServerError, e),
            },
        };
        self.propose_for_status(command).await
    }
}

/// FetchPartitions' two steps, on the leader after its read barrier.
impl ConfigNodeServiceImpl {
    /// Creates what a write needs and does not find: the level-1 database of each device no
    /// database covers (as schema auto-creation does), then the missing slots' partitions (and
    /// their region groups, pushed to their DataNodes).
    async fn auto_create_partitions(
        &self,
        requests: &[proto::DeviceTimeSlots],
    ) -> std::result::Result<(), proto::Status> {
        let partition = self.shared.config.partitioning.partition_config();
        // Databases first (level 1, as schema auto-creation does), then missing slots.
        let missing_databases: BTreeSet<String> = {
            let state = self.shared.group.state();
            requests
                .iter()
                .filter(|r| state.database_of(&r.device).is_none())
                // A device the rules refuse creates nothing; its fetch answers why.
                .filter_map(|r| DevicePath::parse(&r.device, PATH_BYTES_MAX).ok())
                .map(|d| d.level1_database().into_string())
                .collect()
        };
        for database in missing_databases {
            match self
                .shared
                .group
                .propose(Command::CreateDatabase {
                    database,
                    table_model: false,
                })
                .await
            {
                Ok(_) => {}
                Err(Error::Runtime(runtime::Error::Proposal(
                    consensus::ProposalError::Apply { .. },
                ))) => {}
                Err(e) => return Err(error_status(&e)),
            }
        }
        let wanted: BTreeMap<String, BTreeSet<(u32, i64)>> = {
            let state = self.shared.group.state();
            let mut wanted: BTreeMap<String, BTreeSet<(u32, i64)>> = BTreeMap::new();
            for r in requests {
                let Some((db, false)) = state.database_of(&r.device) else {
                    continue;
                };
                let slot = partition.series_slot(&r.device);
                for t in &r.time_slots {
                    if state.partition(db, slot, *t).is_none() {
                        wanted.entry(db.to_string()).or_default().insert((slot, *t));
                    }
                }
            }
            wanted
        };
        for (database, slots) in wanted {
            let command = Command::AllocatePartitions {
                database,
                slots: slots.into_iter().collect(),
                replication_factor: self.shared.config.partitioning.data_replication_factor,
                region_groups_max: self
                    .shared
                    .config
                    .partitioning
                    .data_region_group_num_per_database,
                database_partitions_max: self.shared.config.partitioning.cn_database_partitions_max,
            };
            let created = self
                .shared
                .group
                .propose(command)
                .await
                .map_err(|e| error_status(&e))?;
            match created {
                CommandResult::RegionsCreated(ids) if !ids.is_empty() => {
                    self.shared.leader.create_regions(&ids).await
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The partitions of `req`'s slots that exist, with their regions, leaders and every
    /// DataNode; a partial table under `auto_create` says why.
    fn partitions_answer(&self, req: &proto::FetchPartitionsReq) -> proto::FetchPartitionsResp {
        let partition = self.shared.config.partitioning.partition_config();
        let state = self.shared.group.state();
        let mut partitions = Vec::new();
        let mut device_regions = Vec::new();
        let mut regions = BTreeSet::new();
        for r in &req.requests {
            let Some((db, false)) = state.database_of(&r.device) else {
                continue;
            };
            let slot = partition.series_slot(&r.device);
            if r.every_time_slot {
                let held: Vec<u64> = state.series_slot_region(db, slot).into_iter().collect();
                regions.extend(held.iter().copied());
                device_regions.push(proto::DeviceRegions {
                    device: r.device.clone(),
                    database: db.to_string(),
                    series_slot: slot,
                    region_ids: held,
                });
            }
            for t in &r.time_slots {
                if let Some(region) = state.partition(db, slot, *t) {
                    regions.insert(region);
                    partitions.push(proto::PartitionEntry {
                        database: db.to_string(),
                        series_slot: slot,
                        time_slot: *t,
                        region_id: region,
                    });
                }
            }
        }
        let leaders = self.shared.leader.region_leaders.lock().clone();
        let requested: usize = req.requests.iter().map(|r| r.time_slots.len()).sum();
        // With auto-creation every slot resolves unless its database is missing or being
        // dropped; say so rather than hand back a silently partial table.
        let status = if req.auto_create && partitions.len() < requested {
            proto::status(
                StatusCode::MetadataError,
                format!(
                    "{} of {requested} partition slots are unavailable (database missing or being dropped)",
                    requested - partitions.len()
                ),
            )
        } else {
            status_ok()
        };
        proto::FetchPartitionsResp {
            status: Some(status),
            partitions,
            regions: regions
                .iter()
                .filter_map(|r| state.region(*r))
                .map(|r| replica_set(&state, r))
                .collect(),
            data_nodes: state.data_nodes().map(location).collect(),
            leaders: regions
                .iter()
                .filter_map(|r| {
                    leaders.get(r).map(|l| proto::RegionLeader {
                        region_id: *r,
                        leader_id: *l,
                    })
                })
                .collect(),
            metadata_version: state.metadata_version(),
            device_regions,
        }
    }
}

/// The series of `devices` a FetchSchema with auto-create must create: neither a series nor a
/// series' alias yet (a write by an alias writes to its series). Auto-created series declare
/// nothing (the write path has no names).
fn missing_series(
    state: &MetadataState,
    devices: &[proto::DeviceSchemaRequest],
) -> Result<Vec<SeriesSpec>, MetadataError> {
    let mut missing = Vec::new();
    for d in devices {
        for m in &d.measurements {
            if state.series(&d.device, &m.name).is_some()
                || state.aliased(&d.device, &m.name).is_some()
            {
                continue;
            }
            let data_type =
                proto::data_type(m.data_type).map_err(|e| MetadataError::IllegalPath {
                    path: format!("{}.{}: {e}", d.device, m.name),
                    reason: "unknown data type",
                })?;
            missing.push(SeriesSpec {
                device: d.device.clone(),
                measurement: m.name.clone(),
                data_type,
                codec: SeriesCodec::default(),
                meta: SeriesMeta::default(),
            });
        }
    }
    Ok(missing)
}

/// What FetchSchema answers for device `d`: its usable series among those asked (all when none
/// was), the aliases asked for, its database and TTL.
fn device_schema(state: &MetadataState, d: &proto::DeviceSchemaRequest) -> proto::DeviceSchema {
    let requested =
        |name: &str| d.measurements.is_empty() || d.measurements.iter().any(|w| w.name == name);
    let usable = state.usable_series_of(&d.device);
    let aliases: Vec<proto::SeriesAlias> = state
        .series_meta_of(&d.device)
        .filter_map(|(measurement, meta)| {
            let alias = meta.alias.as_ref()?;
            (requested(alias) && usable.iter().any(|(m, _)| m == measurement)).then(|| {
                proto::SeriesAlias {
                    alias: alias.clone(),
                    measurement: measurement.to_string(),
                }
            })
        })
        .collect();
    let database = state.database_of(&d.device).map(|(db, _)| db);
    proto::DeviceSchema {
        device: d.device.clone(),
        database: database.unwrap_or_default().to_string(),
        ttl_ms: database.and_then(|db| state.ttl_ms(db)).unwrap_or(0),
        table_model: database.is_some_and(|db| state.is_table_database(db)),
        measurements: usable
            .into_iter()
            .filter(|(m, _)| requested(m) || aliases.iter().any(|a| a.measurement == *m))
            .map(|(name, t)| proto::MeasurementSchema {
                name,
                data_type: proto::data_type_to_wire(t) as i32,
            })
            .collect(),
        aliases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_with_alice() -> MetadataState {
        let mut state = MetadataState::new();
        state
            .apply(
                1,
                &Command::CreateUser {
                    username: "alice".into(),
                    password_hash: format!("{}x", users::PASSWORD_HASH_PREFIX),
                },
            )
            .unwrap();
        state
    }

    fn create(username: &str) -> Statement {
        Statement::CreateUser(proto::CreateUserReq {
            username: username.into(),
            password: "pw_1234".into(),
        })
    }

    fn drop_user(username: &str) -> Statement {
        Statement::DropUser(proto::DropUserReq {
            username: username.into(),
        })
    }

    fn alter(username: &str) -> Statement {
        Statement::AlterPassword(proto::AlterUserPasswordReq {
            username: username.into(),
            password: "pw_1234".into(),
        })
    }

    /// The status a user statement gets before anything is proposed: `None` when it may run.
    fn refusal(issuer: &str, statement: Statement) -> Option<(StatusCode, String)> {
        user_statement_refusal(&state_with_alice(), issuer, &statement)
            .map(|e| (e.status_code(), e.to_string()))
    }

    #[test]
    fn only_root_manages_other_users_and_everyone_their_own_password() {
        // root may do everything to others.
        assert_eq!(refusal("root", create("bob")), None);
        assert_eq!(refusal("root", drop_user("alice")), None);
        assert_eq!(refusal("root", alter("alice")), None);
        assert_eq!(refusal("root", alter("root")), None);
        // Every user may change its own password, and only its own.
        assert_eq!(refusal("alice", alter("alice")), None);
        for (statement, why) in [
            (
                create("bob"),
                "No permission: only root may create users, not alice",
            ),
            (
                drop_user("root"),
                "No permission: only root may drop users, not alice",
            ),
            (
                alter("root"),
                "No permission: only root may change another user's password, not alice",
            ),
        ] {
            assert_eq!(
                refusal("alice", statement),
                Some((StatusCode::NoPermission, why.to_string()))
            );
        }
        // A non-root issuer learns nothing of who exists: 803 before 804 / 805.
        for statement in [create("alice"), drop_user("ghost"), alter("ghost")] {
            assert_eq!(
                refusal("alice", statement).map(|(c, _)| c),
                Some(StatusCode::NoPermission)
            );
        }
        // An issuer that is no user, or no name at all.
        for issuer in ["ghost", "", "not a name"] {
            let (code, message) = refusal(issuer, alter(issuer)).unwrap();
            assert_eq!(code, StatusCode::NoPermission, "{issuer:?}");
            assert!(message.starts_with("No permission: "), "{message}");
        }
        // root itself is never dropped.
        assert_eq!(
            refusal("root", drop_user("root")),
            Some((
                StatusCode::NoPermission,
                "No permission: the root user cannot be dropped".to_string()
            ))
        );
        // Then existence, for root.
        assert_eq!(
            refusal("root", create("alice")),
            Some((
                StatusCode::UserAlreadyExist,
                "user alice already exists".to_string()
            ))
        );
        assert_eq!(
            refusal("root", create("root")).map(|(c, _)| c),
            Some(StatusCode::UserAlreadyExist)
        );
        for statement in [drop_user("ghost"), alter("ghost")] {
            assert_eq!(
                refusal("root", statement),
                Some((
                    StatusCode::UserNotExist,
                    "user ghost does not exist".to_string()
                ))
            );
        }
    }
}
