//! The other DataNodes: their internal addresses (the address book raft's transport also reads)
//! and the calls a coordinator makes of them, over a bounded channel cache
//! (`runtime::ChannelPool`, at most `POOL_ADDRESSES_MAX` addresses).

use common::{Status, StatusCode};
use proto::data_node_internal_service_client::DataNodeInternalServiceClient;
use runtime::PooledChannel;

use crate::convert::{region_read_to_wire, region_series_from_wire};
use crate::region_read::{RegionRead, RegionSeries};

/// The calls a coordinator makes of another DataNode's internal service, by internal address.
/// A trait so the coordinator can be tested against fake peers.
#[tonic::async_trait]
pub(crate) trait PeerRpc: Send + Sync {
    /// `ForwardRegionWrite`: the answer's status.
    async fn forward_region_write(
        &self,
        address: &str,
        request: proto::RegionWriteReq,
    ) -> Result<proto::Status, tonic::Status>;
    /// `ReadRegion`: the series, or the region's refusal (a connection failure is 1007).
    async fn read_region(
        &self,
        address: &str,
        read: &RegionRead,
    ) -> Result<Vec<RegionSeries>, Status>;
    /// `RelayInsert`.
    async fn relay_insert(
        &self,
        address: &str,
        request: proto::RelayInsertReq,
    ) -> Result<proto::Status, tonic::Status>;
    /// `RelaySeriesTypes`.
    async fn relay_series_types(
        &self,
        address: &str,
        request: proto::SeriesTypesReq,
    ) -> Result<proto::SeriesTypesResp, tonic::Status>;
    /// `RelayDeleteData`.
    async fn relay_delete_data(
        &self,
        address: &str,
        request: proto::RelayDeleteDataReq,
    ) -> Result<proto::Status, tonic::Status>;
    /// `RelayTableInsert`.
    async fn relay_table_insert(
        &self,
        _address: &str,
        _request: proto::RelayTableInsertReq,
    ) -> Result<proto::Status, tonic::Status> {
        Err(tonic::Status::unimplemented("RelayTableInsert"))
    }
    /// `FetchSnapshot`: the stream of chunks.
    async fn fetch_snapshot(
        &self,
        _address: &str,
        _request: proto::FetchSnapshotReq,
    ) -> Result<tonic::Streaming<proto::SnapshotChunk>, tonic::Status> {
        Err(tonic::Status::unimplemented("FetchSnapshot"))
    }
}

/// The address book and the channels to the peers.
pub(crate) struct Peers {
    node_id: u64,
    addresses: runtime::AddressBook,
    rpc: Box<dyn PeerRpc>,
}

impl Peers {
    pub(crate) fn new(
        node_id: u64,
        addresses: runtime::AddressBook,
        rpc: Box<dyn PeerRpc>,
    ) -> Self {
        Peers {
            node_id,
            addresses,
            rpc,
        }
    }

    /// The calls to the peers.
    pub(crate) fn rpc(&self) -> &dyn PeerRpc {
        self.rpc.as_ref()
    }

    /// The internal address of a DataNode (not lease-gated: it is the transport's, and an
    /// address is not metadata a write is validated against).
    pub(crate) fn address(&self, node: u64) -> Option<String> {
        self.addresses.read().get(&node).cloned()
    }

    /// Learns DataNode addresses (for raft and forwarding).
    pub(crate) fn learn(&self, nodes: impl IntoIterator<Item = (u64, String)>) {
        let mut book = self.addresses.write();
        for (id, address) in nodes {
            book.insert(id, address);
        }
    }

    /// Every other DataNode known.
    pub(crate) fn others(&self) -> Vec<u64> {
        self.addresses
            .read()
            .keys()
            .copied()
            .filter(|n| *n != self.node_id)
            .collect()
    }
}

/// [`PeerRpc`] over gRPC: a channel per address from the pool, replaced after a transport
/// failure or a timeout.
pub(crate) struct GrpcPeers {
    pool: runtime::ChannelPool,
    message_bytes_max: usize,
}

impl GrpcPeers {
    pub(crate) fn new(pool: runtime::ChannelPool, message_bytes_max: usize) -> GrpcPeers {
        GrpcPeers {
            pool,
            message_bytes_max,
        }
    }

    fn client(
        &self,
        address: &str,
    ) -> Result<DataNodeInternalServiceClient<PooledChannel>, tonic::Status> {
        let channel = self
            .pool
            .channel(address)
            .map_err(|e| tonic::Status::unavailable(format!("{address}: {e}")))?;
        Ok(DataNodeInternalServiceClient::new(channel)
            .max_decoding_message_size(self.message_bytes_max)
            .max_encoding_message_size(self.message_bytes_max))
    }
}

#[tonic::async_trait]
impl PeerRpc for GrpcPeers {
    async fn forward_region_write(
        &self,
        address: &str,
        request: proto::RegionWriteReq,
    ) -> Result<proto::Status, tonic::Status> {
        let resp = self.client(address)?.forward_region_write(request).await?;
        Ok(resp
            .into_inner()
            .status
            .unwrap_or_else(crate::convert::no_status))
    }

    async fn read_region(
        &self,
        address: &str,
        read: &RegionRead,
    ) -> Result<Vec<RegionSeries>, Status> {
        let unreachable = |e: tonic::Status| {
            Status::new(
                StatusCode::CanNotConnectDatanode,
                format!("{address}: {}", e.message()),
            )
        };
        let mut client = self.client(address).map_err(unreachable)?;
        let resp = client
            .read_region(region_read_to_wire(read))
            .await
            .map_err(unreachable)?
            .into_inner();
        let status: Status = resp.status.unwrap_or_else(crate::convert::no_status).into();
        if !status.is_ok() {
            return Err(status);
        }
        resp.series
            .into_iter()
            .map(region_series_from_wire)
            .collect::<Result<_, String>>()
            .map_err(|e| {
                Status::new(
                    StatusCode::InternalServerError,
                    format!("{address} answered region {} malformed: {e}", read.region),
                )
            })
    }

    async fn relay_insert(
        &self,
        address: &str,
        request: proto::RelayInsertReq,
    ) -> Result<proto::Status, tonic::Status> {
        Ok(self
            .client(address)?
            .relay_insert(request)
            .await?
            .into_inner())
    }

    async fn relay_series_types(
        &self,
        address: &str,
        request: proto::SeriesTypesReq,
    ) -> Result<proto::SeriesTypesResp, tonic::Status> {
        Ok(self
            .client(address)?
            .relay_series_types(request)
            .await?
            .into_inner())
    }

    async fn relay_delete_data(
        &self,
        address: &str,
        request: proto::RelayDeleteDataReq,
    ) -> Result<proto::Status, tonic::Status> {
        Ok(self
            .client(address)?
            .relay_delete_data(request)
            .await?
            .into_inner())
    }

    async fn relay_table_insert(
        &self,
        address: &str,
        request: proto::RelayTableInsertReq,
    ) -> Result<proto::Status, tonic::Status> {
        Ok(self
            .client(address)?
            .relay_table_insert(request)
            .await?
            .into_inner())
    }

    async fn fetch_snapshot(
        &self,
        address: &str,
        request: proto::FetchSnapshotReq,
    ) -> Result<tonic::Streaming<proto::SnapshotChunk>, tonic::Status> {
        Ok(self
            .client(address)?
            .fetch_snapshot(request)
            .await?
            .into_inner())
    }
}
