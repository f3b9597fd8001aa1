//! How the ConfigNode leader talks to DataNodes: a trait, so the heartbeat pusher and the fence
//! propagator run against a fake in tests, and the gRPC implementation.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use proto::data_node_internal_service_client::DataNodeInternalServiceClient;

/// A boxed future of an RPC outcome; the error is a description (the caller only logs it and
/// treats the DataNode as not reached).
pub type RpcFuture<T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send>>;

/// The calls the ConfigNode makes on a DataNode's internal service, by address.
pub trait DataNodeClient: Send + Sync + 'static {
    /// `Heartbeat`.
    fn heartbeat(
        &self,
        address: &str,
        request: proto::HeartbeatReq,
    ) -> RpcFuture<proto::HeartbeatResp>;
    /// `InvalidateCache`.
    fn invalidate(
        &self,
        address: &str,
        request: proto::InvalidateCacheReq,
    ) -> RpcFuture<proto::InvalidateCacheResp>;
    /// `ForwardRegionWrite`.
    fn region_write(
        &self,
        address: &str,
        request: proto::RegionWriteReq,
    ) -> RpcFuture<proto::RegionWriteResp>;
    /// `CreateRegion`.
    fn create_region(
        &self,
        address: &str,
        request: proto::CreateRegionReq,
    ) -> RpcFuture<proto::Status>;
}

/// The tonic client, one lazily connected channel per address.
#[derive(Clone)]
pub struct GrpcDataNodeClient {
    channels: Arc<Mutex<BTreeMap<String, tonic::transport::Channel>>>,
    rpc_timeout: Duration,
    connect_timeout: Duration,
}

impl GrpcDataNodeClient {
    /// Most cached channels; beyond it the cache is cleared (addresses of removed DataNodes).
    const CHANNELS_MAX: usize = 4096;

    /// A client whose RPCs time out after `rpc_timeout`.
    pub fn new(rpc_timeout: Duration, connect_timeout: Duration) -> Self {
        GrpcDataNodeClient {
            channels: Arc::new(Mutex::new(BTreeMap::new())),
            rpc_timeout,
            connect_timeout,
        }
    }

    fn client(
        &self,
        address: &str,
    ) -> Result<DataNodeInternalServiceClient<tonic::transport::Channel>, String> {
        let mut channels = self.channels.lock();
        if let Some(ch) = channels.get(address) {
            return Ok(DataNodeInternalServiceClient::new(ch.clone()));
        }
        if channels.len() >= Self::CHANNELS_MAX {
            channels.clear();
        }
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .map_err(|e| format!("bad address {address}: {e}"))?
            .connect_timeout(self.connect_timeout)
            .timeout(self.rpc_timeout)
            .connect_lazy();
        channels.insert(address.to_string(), channel.clone());
        Ok(DataNodeInternalServiceClient::new(channel))
    }
}

macro_rules! rpc {
    ($self:ident, $address:ident, $request:ident, $method:ident) => {{
        let client = $self.client($address);
        Box::pin(async move {
            let mut client = client?;
            client
                .$method($request)
                .await
                .map(|r| r.into_inner())
                .map_err(|s| format!("{}: {}", s.code(), s.message()))
        })
    }};
}

impl DataNodeClient for GrpcDataNodeClient {
    fn heartbeat(
        &self,
        address: &str,
        request: proto::HeartbeatReq,
    ) -> RpcFuture<proto::HeartbeatResp> {
        rpc!(self, address, request, heartbeat)
    }
    fn invalidate(
        &self,
        address: &str,
        request: proto::InvalidateCacheReq,
    ) -> RpcFuture<proto::InvalidateCacheResp> {
        rpc!(self, address, request, invalidate_cache)
    }
    fn region_write(
        &self,
        address: &str,
        request: proto::RegionWriteReq,
    ) -> RpcFuture<proto::RegionWriteResp> {
        rpc!(self, address, request, forward_region_write)
    }
    fn create_region(
        &self,
        address: &str,
        request: proto::CreateRegionReq,
    ) -> RpcFuture<proto::Status> {
        rpc!(self, address, request, create_region)
    }
}
