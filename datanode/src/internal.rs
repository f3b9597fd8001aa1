//! `DataNodeInternalService`: what the ConfigNode leader and other DataNodes call.
//!
//! - Heartbeat: renews the lease only for the current incarnation and a `(term, sequence)` newer
//!   than any processed, tells consensus which peers hold leases (leadership transfer targets),
//!   and starts lease recovery when the lease had lapsed.
//! - InvalidateCache: acknowledged once the entries are gone and every operation that read
//!   cached metadata before has finished.
//! - StreamRaftMessages, ForwardRegionWrite (the region admission gate: 536 when fenced, 905 with a
//!   redirect when not the leader), CreateRegion, ReadRegion.

use std::sync::Arc;
use std::time::Duration;

use common::StatusCode;
use proto::data_node_internal_service_server::DataNodeInternalService;
use tonic::{Request, Response};

use crate::convert::{
    ok, partials_to_wire, region_aggregate_from_wire, region_command_from_wire,
    region_read_from_wire, region_series_to_wire, status, tablet_from_wire, tablets_from_wire,
};
use crate::coordinator::Relay;
use crate::metrics::inc;
use crate::ops::write::{insert_tablets, too_many, BATCH_ITEMS_MAX};
use crate::parts::Shared;
use crate::snapshot;
use engine::RegionCommand;

type RpcResult<T> = Result<Response<T>, tonic::Status>;
/// The response stream of `FetchSnapshot`.
type SnapshotChunks = std::pin::Pin<
    Box<dyn tokio_stream::Stream<Item = Result<proto::SnapshotChunk, tonic::Status>> + Send>,
>;

/// The internal service of one DataNode.
pub(crate) struct InternalService {
    shared: Arc<Shared>,
    /// Becomes true when the node stops: raft streams end then, so the server's graceful
    /// shutdown does not wait for the peers to hang up.
    stop: tokio::sync::watch::Receiver<bool>,
}

impl InternalService {
    pub(crate) fn new(shared: Arc<Shared>, stop: tokio::sync::watch::Receiver<bool>) -> Self {
        InternalService { shared, stop }
    }

    /// Takes the streamed snapshots out of a batch of received raft messages: each is stepped
    /// into raft once its download completes (`snapshot::SnapshotTransfers::offer`).
    fn hold_streamed_snapshots(
        &self,
        messages: Vec<consensus::RaftMessage>,
    ) -> Vec<consensus::RaftMessage> {
        let transfers = self.shared.host.snapshots();
        let mut to_step = Vec::with_capacity(messages.len());
        for message in messages {
            if message.snapshot_data().is_none() {
                to_step.push(message);
                continue;
            }
            let host = self.shared.host.clone();
            let step = move |message| {
                if let Err(e) = host.driver().step(vec![message]) {
                    tracing::debug!("a downloaded snapshot's message dropped: {e}");
                }
            };
            if let snapshot::Offer::Step(message) = transfers.offer(message, step) {
                to_step.push(message);
            }
        }
        to_step
    }

    fn refuse_heartbeat(&self, req: &proto::HeartbeatReq, message: String) -> proto::HeartbeatResp {
        inc(&self.shared.metrics.confignode.heartbeats_refused);
        tracing::debug!(
            node = self.shared.identity.node_id,
            "heartbeat refused: {message}"
        );
        proto::HeartbeatResp {
            status: Some(status(StatusCode::MetadataError, message)),
            data_node_id: req.data_node_id,
            incarnation_epoch: self.shared.metadata.lease().incarnation(),
            region_leaders: Vec::new(),
            memberships: Vec::new(),
        }
    }

    async fn stall_if_asked(&self) {
        while self.shared.hooks.heartbeats_stalled() {
            tokio::time::sleep(crate::timing::HEARTBEAT_STALL_POLL).await;
        }
        #[cfg(feature = "failpoints")]
        {
            // `return(ms)` stalls the handler for ms milliseconds (default 1000) without blocking
            // a runtime thread.
            let stall_ms = fail::eval("datanode::heartbeat::stall", |arg| {
                arg.and_then(|a| a.parse::<u64>().ok()).unwrap_or(1000)
            });
            if let Some(ms) = stall_ms {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
        }
    }
}

#[tonic::async_trait]
impl DataNodeInternalService for InternalService {
    async fn heartbeat(
        &self,
        request: Request<proto::HeartbeatReq>,
    ) -> RpcResult<proto::HeartbeatResp> {
        self.stall_if_asked().await;
        let req = request.into_inner();
        let shared = &self.shared;
        let (node_id, lease) = (shared.identity.node_id, shared.metadata.lease());
        let epoch = lease.incarnation();
        if req.data_node_id != node_id || req.incarnation_epoch != epoch {
            let message = format!(
                "heartbeat for node {} incarnation {}; this is node {node_id} incarnation {epoch}",
                req.data_node_id, req.incarnation_epoch
            );
            return Ok(Response::new(self.refuse_heartbeat(&req, message)));
        }
        let registered = shared.metadata.registered_lease_settings();
        if let Some(message) = lease_settings_disagree(registered, &req) {
            tracing::error!(node = node_id, "{message}");
            return Ok(Response::new(self.refuse_heartbeat(&req, message)));
        }
        // A delayed heartbeat from an older leader (or an older one of this leader) must not
        // renew the lease after a fresher one was processed.
        let order = (req.config_node_term, req.sequence);
        if let Err(message) = shared.metadata.accept_heartbeat_order(order) {
            return Ok(Response::new(self.refuse_heartbeat(&req, message)));
        }
        let needs_recovery = match lease.on_heartbeat(req.incarnation_epoch) {
            Ok(needs) => needs,
            Err(e) => return Ok(Response::new(self.refuse_heartbeat(&req, e.to_string()))),
        };
        inc(&shared.metrics.confignode.heartbeats);
        shared
            .clients
            .logins
            .users_changed_to(req.users_fingerprint);
        learn_lease_holders(shared, &req.lease_holder_ids);
        for l in &req.region_leaders {
            shared.metadata.set_leader(l.region_id, l.leader_id);
        }
        if needs_recovery {
            let shared = shared.clone();
            tokio::spawn(async move { shared.recover_lease().await });
        }
        let (region_leaders, memberships) = region_report(shared);
        Ok(Response::new(proto::HeartbeatResp {
            status: Some(ok()),
            data_node_id: node_id,
            incarnation_epoch: epoch,
            region_leaders,
            memberships,
        }))
    }

    async fn invalidate_cache(
        &self,
        request: Request<proto::InvalidateCacheReq>,
    ) -> RpcResult<proto::InvalidateCacheResp> {
        let req = request.into_inner();
        let shared = &self.shared;
        let epoch = shared.metadata.lease().incarnation();
        let reply = |s: proto::Status| proto::InvalidateCacheResp {
            status: Some(s),
            data_node_id: shared.identity.node_id,
            incarnation_epoch: epoch,
            operation_id: req.operation_id,
        };
        if req.incarnation_epoch != epoch {
            return Ok(Response::new(reply(status(
                StatusCode::MetadataError,
                format!(
                    "invalidation for incarnation {}, this is {epoch}",
                    req.incarnation_epoch
                ),
            ))));
        }
        let series: Vec<(String, String)> = req
            .series
            .iter()
            .map(|s| (s.device.clone(), s.measurement.clone()))
            .collect();
        let tables: Vec<(String, String)> = req
            .tables
            .iter()
            .map(|t| (t.database.clone(), t.table.clone()))
            .collect();
        // A fence-floor round removes nothing: it re-stamps, and running writes go on.
        let floor_only = req.fence_floor > 0
            && req.databases.is_empty()
            && series.is_empty()
            && tables.is_empty();
        let mut epoch = 0;
        if !floor_only {
            epoch = shared.metadata.invalidate(&req.databases, &series, &tables);
        }
        if req.fence_floor > 0 {
            epoch = shared.metadata.restamp(req.fence_floor);
        }
        // Operations started before the bump may have read the old entries (or stamps): wait
        // for them. Operations started after it cannot see them, and the coordinator re-checks
        // the generation before each dispatch (and wakes from its backoff when it moves), so
        // the wait is short. New requests are not held up meanwhile.
        let drain_ms = match req.drain_timeout_ms {
            0 => crate::timing::INVALIDATION_DRAIN_MS,
            ms => ms.min(crate::timing::INVALIDATION_DRAIN_MAX_MS),
        };
        if !shared
            .metadata
            .drain(epoch, Duration::from_millis(drain_ms))
            .await
        {
            return Ok(Response::new(reply(status(
                StatusCode::InternalRequestTimeOut,
                format!(
                    "{} operations that read the old metadata are still running after {drain_ms} ms",
                    shared.metadata.pinned_before(epoch)
                ),
            ))));
        }
        shared.metadata.announce_floor(req.fence_floor);
        inc(&shared.metrics.confignode.invalidations);
        Ok(Response::new(reply(ok())))
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
            // A streamed snapshot reaches raft only once its files are downloaded.
            let messages = self.hold_streamed_snapshots(messages);
            // A full driver queue drops the batch like a lost packet; raft retransmits.
            if let Err(e) = self.shared.host.driver().step(messages) {
                tracing::trace!(
                    node = self.shared.identity.node_id,
                    "raft messages dropped: {e}"
                );
            }
        })
        .await?;
        Ok(Response::new(answer))
    }

    async fn fetch_snapshot(
        &self,
        request: Request<proto::FetchSnapshotReq>,
    ) -> RpcResult<SnapshotChunks> {
        let req = request.into_inner();
        let region = self.shared.host.region(req.region_id).ok_or_else(|| {
            tonic::Status::not_found(format!("region {} is not hosted here", req.region_id))
        })?;
        let first = snapshot::first_file(region.dir(), &req)?;
        tracing::debug!(
            region = req.region_id,
            index = req.snapshot_index,
            files = req.files.len(),
            offset = req.offset,
            to = req.from_data_node_id,
            "serving a snapshot"
        );
        // Two chunks in flight: the next is read while one is on the wire.
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let transfers = self.shared.host.snapshots().clone();
        let dir = region.dir().to_path_buf();
        tokio::spawn(async move { transfers.serve(dir, req, first, tx).await });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn forward_region_write(
        &self,
        request: Request<proto::RegionWriteReq>,
    ) -> RpcResult<proto::RegionWriteResp> {
        let req = request.into_inner();
        let shared = &self.shared;
        let reply = |s: proto::Status, log_index: u64| {
            if !s.is_success() {
                inc(&shared.metrics.writes.proxy_rejections);
            }
            Ok(Response::new(proto::RegionWriteResp {
                status: Some(s),
                log_index,
            }))
        };
        let region = req.region_id;
        let command = match region_command_from_wire(req) {
            Ok(command) => command,
            Err(refused) => return reply(refused.into(), 0),
        };
        match &command {
            // Held to this node's partition cap before it is proposed, as a session's tablet
            // is; never at apply, whose verdict must not depend on a node's configuration
            // (REVIEW L6).
            RegionCommand::InsertTablet { tablet, .. } => {
                if let Err(e) = shared.coordinator.limits.time_slots(tablet) {
                    return reply(e.status().into(), 0);
                }
            }
            // Only a floor whose round this node acknowledged: a round that went ahead without
            // it is retried by the ConfigNode, and a forged one changes nothing.
            RegionCommand::RaiseFenceFloor { version } => {
                let announced = shared.metadata.announced_floor();
                if *version > announced {
                    return reply(
                        status(
                            StatusCode::IllegalParameter,
                            format!(
                                "fence floor {version} is above {announced}, the highest this \
                                 node acknowledged a round of"
                            ),
                        ),
                        0,
                    );
                }
            }
            _ => {}
        }
        match shared.host.admit_forwarded(region, &command).await {
            Ok(index) => reply(ok(), index),
            Err(refused) => reply(refused.into(), 0),
        }
    }

    async fn create_region(
        &self,
        request: Request<proto::CreateRegionReq>,
    ) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        let Some(set) = req.replica_set else {
            return Ok(Response::new(status(
                StatusCode::IllegalParameter,
                "no replica set",
            )));
        };
        let shared = &self.shared;
        shared.peers.learn(req.replicas.iter().filter_map(|l| {
            Some((
                l.data_node_id,
                proto::endpoint(l.internal_endpoint.as_ref()?),
            ))
        }));
        let node_id = shared.identity.node_id;
        if !set.data_node_ids.contains(&node_id) {
            return Ok(Response::new(status(
                StatusCode::IllegalParameter,
                format!(
                    "node {node_id} is not a replica of region {}",
                    set.region_id
                ),
            )));
        }
        match shared
            .host
            .create_region(
                set.region_id,
                &set.database,
                &set.data_node_ids,
                set.preferred_leader_id,
            )
            .await
        {
            Ok(()) => Ok(Response::new(ok())),
            Err(e) => Ok(Response::new(status(
                StatusCode::InternalServerError,
                e.to_string(),
            ))),
        }
    }

    async fn relay_insert(
        &self,
        request: Request<proto::RelayInsertReq>,
    ) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        inc(&self.shared.metrics.fencing.relayed_writes_received);
        tracing::debug!(
            from = req.from_data_node_id,
            tablets = req.tablets.len(),
            "relayed write"
        );
        if let Some(s) = too_many("tablets", req.tablets.len(), BATCH_ITEMS_MAX) {
            return Ok(Response::new(s.into()));
        }
        let answer = match tablets_from_wire(req.tablets) {
            Ok(tablets) => insert_tablets(&self.shared, tablets, Relay::Never).await,
            Err(refused) => refused,
        };
        Ok(Response::new(answer.into()))
    }

    async fn relay_delete_data(
        &self,
        request: Request<proto::RelayDeleteDataReq>,
    ) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        tracing::debug!(
            from = req.from_data_node_id,
            paths = req.paths.len(),
            "relayed deletion"
        );
        let outcome = self
            .shared
            .coordinator
            .delete_data(
                req.paths.into_iter().map(Into::into).collect(),
                req.start_time,
                req.end_time,
                Relay::Never,
            )
            .await;
        Ok(Response::new(match outcome {
            Ok(()) => ok(),
            Err(e) => e.status().into(),
        }))
    }

    async fn relay_table_insert(
        &self,
        request: Request<proto::RelayTableInsertReq>,
    ) -> RpcResult<proto::Status> {
        let req = request.into_inner();
        inc(&self.shared.metrics.fencing.relayed_writes_received);
        tracing::debug!(from = req.from_data_node_id, "relayed table write");
        let Some(wire) = req.tablet else {
            return Ok(Response::new(status(
                StatusCode::IllegalParameter,
                "a relayed table write without a tablet",
            )));
        };
        let tablet = match tablet_from_wire(wire) {
            Ok(t) => t,
            Err(e) => {
                return Ok(Response::new(status(
                    StatusCode::IllegalParameter,
                    e.to_string(),
                )))
            }
        };
        let categories: Option<Vec<_>> = req
            .categories
            .iter()
            .map(|c| common::table::Category::from_wire(*c))
            .collect();
        let Some(categories) = categories else {
            return Ok(Response::new(status(
                StatusCode::IllegalParameter,
                format!("unknown column categories {:?}", req.categories),
            )));
        };
        let backend = crate::ops::sql::DataNodeBackend::relayed(self.shared.clone());
        let outcome = sql::insert_table(&backend, &req.database, tablet, &categories).await;
        Ok(Response::new(match outcome {
            Ok(()) => ok(),
            Err(e) => crate::ops::sql::exec_status(&e).into(),
        }))
    }

    async fn relay_series_types(
        &self,
        request: Request<proto::SeriesTypesReq>,
    ) -> RpcResult<proto::SeriesTypesResp> {
        let req = request.into_inner();
        let answer = crate::ops::write::series_types(
            &self.shared,
            &req.device,
            &req.measurements,
            Relay::Never,
        )
        .await;
        Ok(Response::new(crate::convert::reply(answer)))
    }

    async fn list_queries(
        &self,
        request: Request<proto::ListQueriesReq>,
    ) -> RpcResult<proto::ListQueriesResp> {
        let req = request.into_inner();
        let queries = self
            .shared
            .queries
            .list(&req.user)
            .into_iter()
            .map(proto::RunningQuery::from)
            .collect();
        Ok(Response::new(proto::ListQueriesResp {
            status: Some(ok()),
            queries,
        }))
    }

    async fn kill_query(
        &self,
        request: Request<proto::KillQueryReq>,
    ) -> RpcResult<proto::KillQueryResp> {
        let req = request.into_inner();
        let id = (!req.id.is_empty()).then_some(req.id.as_str());
        let killed = self.shared.queries.kill(id, &req.user);
        Ok(Response::new(proto::KillQueryResp {
            status: Some(ok()),
            killed: killed as u64,
        }))
    }

    async fn read_region(
        &self,
        request: Request<proto::RegionReadReq>,
    ) -> RpcResult<proto::RegionReadResp> {
        let read = region_read_from_wire(request.into_inner());
        Ok(Response::new(
            match self.shared.host.read_local(&read).await {
                Ok(series) => proto::RegionReadResp {
                    status: Some(ok()),
                    series: series.into_iter().map(region_series_to_wire).collect(),
                },
                Err(refused) => proto::RegionReadResp {
                    status: Some(refused.into()),
                    series: Vec::new(),
                },
            },
        ))
    }

    async fn aggregate_region(
        &self,
        request: Request<proto::RegionAggregateReq>,
    ) -> RpcResult<proto::RegionAggregateResp> {
        let refused = |s: common::Status| proto::RegionAggregateResp {
            status: Some(s.into()),
            series: Vec::new(),
        };
        let read = match region_aggregate_from_wire(request.into_inner()) {
            Ok(read) => read,
            Err(e) => {
                let s = common::Status::new(StatusCode::IllegalParameter, e);
                return Ok(Response::new(refused(s)));
            }
        };
        Ok(Response::new(
            match self.shared.host.aggregate_local(&read).await {
                Ok(series) => proto::RegionAggregateResp {
                    status: Some(ok()),
                    series: series.into_iter().map(partials_to_wire).collect(),
                },
                Err(s) => refused(s),
            },
        ))
    }
}

/// The DataNodes holding their lease, as a heartbeat names them: where a fenced coordinator
/// relays, and the only peers consensus may hand a region's leadership to.
fn learn_lease_holders(shared: &Arc<Shared>, holders: &[u64]) {
    shared.metadata.set_lease_holders(holders.to_vec());
    let holding: std::collections::BTreeSet<u64> = holders.iter().copied().collect();
    let fenced_peers: Vec<(u64, bool)> = shared
        .peers
        .others()
        .into_iter()
        .map(|p| (p, !holding.contains(&p)))
        .collect();
    // Told to consensus off the handler: the raft thread may be slow, and a renewal whose
    // reply reaches the ConfigNode after its heartbeat timeout is one the ConfigNode does not
    // count (its clock for this node runs on while this node's lease was renewed; L5 in
    // REVIEW-2026-12). Nothing between the renewal and the reply waits.
    let host = shared.host.clone();
    tokio::spawn(async move {
        let told = host
            .driver()
            .call(move |node| {
                for (peer, fenced) in fenced_peers {
                    node.set_peer_fenced(peer, fenced);
                }
            })
            .await;
        if let Err(e) = told {
            tracing::warn!("telling consensus about lease holders: {e}");
        }
    });
}

/// What a heartbeat reply reports of the regions hosted here: the leader each raft group knows,
/// and the voters of each group led here.
fn region_report(shared: &Shared) -> (Vec<proto::RegionLeader>, Vec<proto::RegionMembership>) {
    let mut region_leaders = Vec::new();
    let mut memberships = Vec::new();
    for id in shared.host.region_ids() {
        let Some(status) = shared.host.group_status(id) else {
            continue;
        };
        if let Some(leader) = status.leader {
            region_leaders.push(proto::RegionLeader {
                region_id: id,
                leader_id: leader,
            });
        }
        if status.role == consensus::StateRole::Leader {
            memberships.push(proto::RegionMembership {
                region_id: id,
                voters: status.voters,
                settled: status.membership_settled,
            });
        }
    }
    (region_leaders, memberships)
}

/// Why a heartbeat's lease settings cannot be trusted, if they differ from the registered ones
/// (L4 in REVIEW-2026-12): the sender judges this node fenced after its own `fence + margin`,
/// while this node trusts its caches for the fence it registered under. Zero means "not sent".
fn lease_settings_disagree(registered: (u64, u64), req: &proto::HeartbeatReq) -> Option<String> {
    let (fence_ms, margin_ms) = registered;
    let fence_differs = req.metadata_lease_fence_ms != 0 && req.metadata_lease_fence_ms != fence_ms;
    let margin_differs = req.lease_proceed_margin_ms != 0
        && margin_ms != 0
        && req.lease_proceed_margin_ms != margin_ms;
    (fence_differs || margin_differs).then(|| {
        format!(
            "ConfigNode {} leads with metadata_lease_fence_ms = {} and lease_proceed_margin_ms = {}, \
             but this DataNode registered under {fence_ms} and {margin_ms}: every ConfigNode of a \
             cluster must use the same values; the heartbeat does not renew the lease",
            req.config_node_id, req.metadata_lease_fence_ms, req.lease_proceed_margin_ms
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heartbeat(fence_ms: u64, margin_ms: u64) -> proto::HeartbeatReq {
        proto::HeartbeatReq {
            config_node_id: 2,
            metadata_lease_fence_ms: fence_ms,
            lease_proceed_margin_ms: margin_ms,
            ..Default::default()
        }
    }

    #[test]
    fn a_leader_with_other_lease_settings_is_refused() {
        let registered = (20_000, 5000);
        assert_eq!(
            lease_settings_disagree(registered, &heartbeat(20_000, 5000)),
            None
        );
        assert_eq!(lease_settings_disagree(registered, &heartbeat(0, 0)), None);
        let message = lease_settings_disagree(registered, &heartbeat(10_000, 5000)).unwrap();
        assert!(
            message.contains("metadata_lease_fence_ms = 10000"),
            "{message}"
        );
        assert!(lease_settings_disagree(registered, &heartbeat(20_000, 1000)).is_some());
        assert_eq!(
            lease_settings_disagree((20_000, 0), &heartbeat(20_000, 1000)),
            None
        );
    }
}
