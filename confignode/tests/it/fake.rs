//! Test doubles of a DataNode: an in-memory [`DataNodeClient`] and a small tonic server.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use confignode::client::{DataNodeClient, RpcFuture};
use parking_lot::Mutex;
use proto::data_node_internal_service_server::{
    DataNodeInternalService, DataNodeInternalServiceServer,
};

/// How a fake DataNode answers an invalidation.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// 200 with the epoch it was sent.
    Ack,
    /// The connection fails.
    Unreachable,
    /// 200, but from an older incarnation.
    AckFromEpoch(u64),
    /// 200 with the epoch it was sent, after this many milliseconds.
    SlowAck(u64),
}

#[derive(Default)]
pub struct FakeClient {
    pub behaviour: Mutex<BTreeMap<String, Behaviour>>,
    pub invalidations: Mutex<Vec<(String, proto::InvalidateCacheReq)>>,
    pub region_writes: Mutex<Vec<(String, proto::RegionWriteReq)>>,
    /// Address → the leader address a non-leader redirects to.
    pub region_redirects: Mutex<BTreeMap<String, String>>,
}

fn ok() -> Option<proto::Status> {
    Some(proto::status(common::StatusCode::Success, ""))
}

impl DataNodeClient for FakeClient {
    fn heartbeat(&self, _: &str, request: proto::HeartbeatReq) -> RpcFuture<proto::HeartbeatResp> {
        Box::pin(async move {
            Ok(proto::HeartbeatResp {
                status: ok(),
                data_node_id: request.data_node_id,
                incarnation_epoch: request.incarnation_epoch,
                region_leaders: Vec::new(),
                memberships: Vec::new(),
            })
        })
    }

    fn invalidate(
        &self,
        address: &str,
        request: proto::InvalidateCacheReq,
    ) -> RpcFuture<proto::InvalidateCacheResp> {
        self.invalidations
            .lock()
            .push((address.to_string(), request.clone()));
        let behaviour = self
            .behaviour
            .lock()
            .get(address)
            .copied()
            .unwrap_or(Behaviour::Ack);
        Box::pin(async move {
            if let Behaviour::SlowAck(ms) = behaviour {
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            }
            match behaviour {
                Behaviour::Unreachable => Err("connection refused".to_string()),
                Behaviour::Ack | Behaviour::AckFromEpoch(_) | Behaviour::SlowAck(_) => {
                    Ok(proto::InvalidateCacheResp {
                        status: ok(),
                        data_node_id: request.data_node_id,
                        incarnation_epoch: match behaviour {
                            Behaviour::AckFromEpoch(e) => e,
                            _ => request.incarnation_epoch,
                        },
                        operation_id: request.operation_id,
                    })
                }
            }
        })
    }

    fn region_write(
        &self,
        address: &str,
        request: proto::RegionWriteReq,
    ) -> RpcFuture<proto::RegionWriteResp> {
        self.region_writes
            .lock()
            .push((address.to_string(), request));
        let redirect = self.region_redirects.lock().get(address).cloned();
        Box::pin(async move {
            Ok(proto::RegionWriteResp {
                status: Some(match redirect {
                    Some(leader) => proto::status_with_redirect(
                        common::StatusCode::RegionLeaderChangeError,
                        "not the leader",
                        proto::parse_endpoint(&leader).ok(),
                    ),
                    None => proto::status(common::StatusCode::Success, ""),
                }),
                log_index: 1,
            })
        })
    }

    fn create_region(&self, _: &str, _: proto::CreateRegionReq) -> RpcFuture<proto::Status> {
        Box::pin(async { Ok(proto::status(common::StatusCode::Success, "")) })
    }
}

/// One heartbeat as the fake DataNode server saw it.
#[derive(Clone, Debug)]
pub struct SeenHeartbeat {
    pub at: Instant,
    pub config_node_id: u64,
    pub term: u64,
    pub epoch: u64,
    pub metadata_version: u64,
    pub lease_holders: Vec<u64>,
}

/// A DataNode internal service that records heartbeats and acknowledges everything, refusing
/// messages for another incarnation like a real DataNode must.
#[derive(Clone, Default)]
pub struct FakeDataNode {
    pub epoch: Arc<Mutex<u64>>,
    pub heartbeats: Arc<Mutex<Vec<SeenHeartbeat>>>,
    pub invalidations: Arc<Mutex<Vec<proto::InvalidateCacheReq>>>,
    pub region_writes: Arc<Mutex<Vec<proto::RegionWriteReq>>>,
    pub created_regions: Arc<Mutex<Vec<u64>>>,
    /// While set, a series deletion is refused (500) until a database deletion has arrived:
    /// a DELETE TIMESERIES then finishes only after a DROP DATABASE begun later.
    pub series_deletions_after_database: Arc<AtomicBool>,
}

impl FakeDataNode {
    pub fn server(&self) -> DataNodeInternalServiceServer<FakeDataNode> {
        DataNodeInternalServiceServer::new(self.clone())
    }
}

#[tonic::async_trait]
impl DataNodeInternalService for FakeDataNode {
    async fn heartbeat(
        &self,
        request: tonic::Request<proto::HeartbeatReq>,
    ) -> Result<tonic::Response<proto::HeartbeatResp>, tonic::Status> {
        let req = request.into_inner();
        let epoch = *self.epoch.lock();
        let status = if req.incarnation_epoch == epoch {
            self.heartbeats.lock().push(SeenHeartbeat {
                at: Instant::now(),
                config_node_id: req.config_node_id,
                term: req.config_node_term,
                epoch: req.incarnation_epoch,
                metadata_version: req.metadata_version,
                lease_holders: req.lease_holder_ids.clone(),
            });
            proto::status(common::StatusCode::Success, "")
        } else {
            proto::status(common::StatusCode::MetadataError, "another incarnation")
        };
        Ok(tonic::Response::new(proto::HeartbeatResp {
            status: Some(status),
            data_node_id: req.data_node_id,
            incarnation_epoch: epoch,
            region_leaders: Vec::new(),
            memberships: Vec::new(),
        }))
    }

    async fn invalidate_cache(
        &self,
        request: tonic::Request<proto::InvalidateCacheReq>,
    ) -> Result<tonic::Response<proto::InvalidateCacheResp>, tonic::Status> {
        let req = request.into_inner();
        self.invalidations.lock().push(req.clone());
        Ok(tonic::Response::new(proto::InvalidateCacheResp {
            status: ok(),
            data_node_id: req.data_node_id,
            incarnation_epoch: *self.epoch.lock(),
            operation_id: req.operation_id,
        }))
    }

    async fn forward_region_write(
        &self,
        request: tonic::Request<proto::RegionWriteReq>,
    ) -> Result<tonic::Response<proto::RegionWriteResp>, tonic::Status> {
        let request = request.into_inner();
        let mut writes = self.region_writes.lock();
        let held = self.series_deletions_after_database.load(Ordering::SeqCst)
            && matches!(
                request.command,
                Some(proto::region_write_req::Command::DeleteSeries(_))
            )
            && !writes.iter().any(|w| {
                matches!(
                    w.command,
                    Some(proto::region_write_req::Command::DeleteDatabase(_))
                )
            });
        writes.push(request);
        Ok(tonic::Response::new(proto::RegionWriteResp {
            status: Some(if held {
                proto::status(
                    common::StatusCode::InternalServerError,
                    "series deletions wait for a database deletion",
                )
            } else {
                proto::status(common::StatusCode::Success, "")
            }),
            log_index: 1,
        }))
    }

    async fn create_region(
        &self,
        request: tonic::Request<proto::CreateRegionReq>,
    ) -> Result<tonic::Response<proto::Status>, tonic::Status> {
        if let Some(r) = request.into_inner().replica_set {
            self.created_regions.lock().push(r.region_id);
        }
        Ok(tonic::Response::new(proto::status(
            common::StatusCode::Success,
            "",
        )))
    }
}
