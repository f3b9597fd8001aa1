//! How the ConfigNode leader talks to DataNodes: a trait, so the heartbeat pusher and the fence
//! propagator run against a fake in tests, and the gRPC implementation.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use proto::data_node_internal_service_client::DataNodeInternalServiceClient;
use runtime::{ChannelConfig, ChannelPool, PooledChannel};

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

/// The tonic client: one pooled channel per DataNode address, with HTTP/2 keepalive, replaced
/// after a call fails in the transport or times out (see `runtime::channel`). A heartbeat
/// connection to a DataNode behind a partition is given up within the keepalive bound, so the
/// first heartbeat after the partition heals goes out on a fresh connection.
#[derive(Clone, Debug)]
pub struct GrpcDataNodeClient {
    channels: ChannelPool,
}

impl GrpcDataNodeClient {
    /// A client whose RPCs time out after `rpc_timeout` and whose connections must be
    /// established within `connect_timeout`; keepalive and socket options are
    /// [`ChannelConfig::default`]'s.
    pub fn new(rpc_timeout: Duration, connect_timeout: Duration) -> Self {
        Self::with_channel_config(
            rpc_timeout,
            ChannelConfig {
                connect_timeout_ms: connect_timeout.as_millis() as u64,
                ..ChannelConfig::default()
            },
        )
    }

    /// A client whose RPCs time out after `rpc_timeout`, with connections built by `channel`
    /// (`crate::config::RpcSection::channel_config`).
    pub fn with_channel_config(rpc_timeout: Duration, channel: ChannelConfig) -> Self {
        GrpcDataNodeClient {
            channels: ChannelPool::new(channel, rpc_timeout),
        }
    }

    fn client(
        &self,
        address: &str,
    ) -> Result<DataNodeInternalServiceClient<PooledChannel>, String> {
        let channel = self.channels.channel(address).map_err(|e| e.to_string())?;
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
