//! The other DataNodes: their internal addresses (the address book raft's transport also reads)
//! and the calls a coordinator makes of them, over a bounded channel cache
//! (`runtime::ChannelPool`, at most `POOL_ADDRESSES_MAX` addresses).

use common::table::Category;
use common::views::QueryView;
use common::{DataType, SeriesPath, Status, StatusCode, Tablet};
use engine::RegionCommand;
use proto::data_node_internal_service_client::DataNodeInternalServiceClient;
use runtime::PooledChannel;

use crate::convert::{
    partials_from_wire, region_aggregate_to_wire, region_read_to_wire, region_series_from_wire,
    region_write_to_wire, tablet_to_wire,
};
use crate::region_read::{RegionAggregate, RegionPartials, RegionRead, RegionSeries};

/// The calls a coordinator makes of another DataNode's internal service, by internal address,
/// in the node's own types (the wire form is [`GrpcPeers`]' business). A peer that cannot be
/// reached answers 1007 CAN_NOT_CONNECT_DATANODE. A trait so the coordinator can be tested
/// against fake peers.
#[tonic::async_trait]
pub(crate) trait PeerRpc: Send + Sync {
    /// `ForwardRegionWrite`: `command` proposed by `region`'s replica at `address`.
    async fn forward_region_write(
        &self,
        address: &str,
        region: u64,
        command: &RegionCommand,
    ) -> Status;
    /// `ReadRegion`: the series, or the region's refusal.
    async fn read_region(
        &self,
        address: &str,
        read: &RegionRead,
    ) -> Result<Vec<RegionSeries>, Status>;
    /// `AggregateRegion`: the series' partials, or the region's refusal.
    async fn aggregate_region(
        &self,
        address: &str,
        read: &RegionAggregate,
    ) -> Result<Vec<RegionPartials>, Status>;
    /// `RelayInsert`: a tree tablet validated and written by the peer.
    async fn relay_insert(&self, address: &str, tablet: &Tablet) -> Status;
    /// `RelaySeriesTypes`: the types of those of `measurements` of `device` that exist.
    async fn relay_series_types(
        &self,
        address: &str,
        device: &str,
        measurements: &[String],
    ) -> Result<Vec<(String, DataType)>, Status>;
    /// `RelayDeleteData`: the deletion of `paths`' points in `[start, end]` resolved and
    /// written by the peer.
    async fn relay_delete_data(
        &self,
        address: &str,
        paths: &[SeriesPath],
        start: i64,
        end: i64,
    ) -> Status;
    /// `RelayTableInsert`: a table tablet (`tablet.device` names the table of `database`)
    /// written by the peer.
    async fn relay_table_insert(
        &self,
        address: &str,
        database: &str,
        tablet: &Tablet,
        categories: &[Category],
    ) -> Status;
    /// `ListQueries`: the statements the peer runs that `user` may see.
    async fn list_queries(&self, _address: &str, _user: &str) -> Result<Vec<QueryView>, Status> {
        Err(Status::new(StatusCode::UnsupportedOperation, "ListQueries"))
    }
    /// `KillQuery`: kills the peer's statement `id` (every one `user` may manage when `None`);
    /// how many were.
    async fn kill_query(
        &self,
        _address: &str,
        _id: Option<&str>,
        _user: &str,
    ) -> Result<usize, Status> {
        Err(Status::new(StatusCode::UnsupportedOperation, "KillQuery"))
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
    /// This node, named in every relay as its sender.
    node_id: u64,
    pool: runtime::ChannelPool,
    message_bytes_max: usize,
}

impl GrpcPeers {
    pub(crate) fn new(
        node_id: u64,
        pool: runtime::ChannelPool,
        message_bytes_max: usize,
    ) -> GrpcPeers {
        GrpcPeers {
            node_id,
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

/// A call that got no answer: 1007, so the coordinator tries another replica or peer.
/// A peer's answer status as a result: `Err` when it is not a success.
fn refused(status: Option<proto::Status>) -> Result<(), Status> {
    match status.filter(|s| !s.is_success()) {
        Some(s) => Err(s.into()),
        None => Ok(()),
    }
}

fn unreachable(address: &str, e: tonic::Status) -> Status {
    Status::new(
        StatusCode::CanNotConnectDatanode,
        format!("{address}: {}", e.message()),
    )
}

/// A region read's answer from `address`: its refusal, or each series converted (one that does
/// not convert makes the answer malformed, 305).
fn region_answer<W, T>(
    address: &str,
    region: u64,
    status: Option<proto::Status>,
    series: Vec<W>,
    convert: fn(W) -> Result<T, String>,
) -> Result<Vec<T>, Status> {
    let status: Status = status.unwrap_or_else(crate::convert::no_status).into();
    if !status.is_ok() {
        return Err(status);
    }
    series
        .into_iter()
        .map(convert)
        .collect::<Result<_, String>>()
        .map_err(|e| {
            Status::new(
                StatusCode::InternalServerError,
                format!("{address} answered region {region} malformed: {e}"),
            )
        })
}

/// The status a peer answered, or 1007 when the call got no answer.
fn answered(resp: Result<tonic::Response<proto::Status>, tonic::Status>, address: &str) -> Status {
    match resp {
        Ok(resp) => resp.into_inner().into(),
        Err(e) => unreachable(address, e),
    }
}

#[tonic::async_trait]
impl PeerRpc for GrpcPeers {
    async fn list_queries(&self, address: &str, user: &str) -> Result<Vec<QueryView>, Status> {
        let mut client = self.client(address).map_err(|e| unreachable(address, e))?;
        let resp = client
            .list_queries(proto::ListQueriesReq {
                user: user.to_string(),
            })
            .await
            .map_err(|e| unreachable(address, e))?
            .into_inner();
        refused(resp.status)?;
        Ok(resp.queries.into_iter().map(QueryView::from).collect())
    }

    async fn kill_query(
        &self,
        address: &str,
        id: Option<&str>,
        user: &str,
    ) -> Result<usize, Status> {
        let mut client = self.client(address).map_err(|e| unreachable(address, e))?;
        let resp = client
            .kill_query(proto::KillQueryReq {
                id: id.unwrap_or_default().to_string(),
                user: user.to_string(),
            })
            .await
            .map_err(|e| unreachable(address, e))?
            .into_inner();
        refused(resp.status)?;
        Ok(usize::try_from(resp.killed).unwrap_or(usize::MAX))
    }

    async fn forward_region_write(
        &self,
        address: &str,
        region: u64,
        command: &RegionCommand,
    ) -> Status {
        let mut client = match self.client(address) {
            Ok(client) => client,
            Err(e) => return unreachable(address, e),
        };
        match client
            .forward_region_write(region_write_to_wire(region, command))
            .await
        {
            Ok(resp) => resp
                .into_inner()
                .status
                .unwrap_or_else(crate::convert::no_status)
                .into(),
            Err(e) => unreachable(address, e),
        }
    }

    async fn read_region(
        &self,
        address: &str,
        read: &RegionRead,
    ) -> Result<Vec<RegionSeries>, Status> {
        let mut client = self.client(address).map_err(|e| unreachable(address, e))?;
        let resp = client
            .read_region(region_read_to_wire(read))
            .await
            .map_err(|e| unreachable(address, e))?
            .into_inner();
        region_answer(
            address,
            read.region,
            resp.status,
            resp.series,
            region_series_from_wire,
        )
    }

    async fn aggregate_region(
        &self,
        address: &str,
        read: &RegionAggregate,
    ) -> Result<Vec<RegionPartials>, Status> {
        let mut client = self.client(address).map_err(|e| unreachable(address, e))?;
        let resp = client
            .aggregate_region(region_aggregate_to_wire(read))
            .await
            .map_err(|e| unreachable(address, e))?
            .into_inner();
        region_answer(
            address,
            read.region,
            resp.status,
            resp.series,
            partials_from_wire,
        )
    }

    async fn relay_insert(&self, address: &str, tablet: &Tablet) -> Status {
        let request = proto::RelayInsertReq {
            tablets: vec![tablet_to_wire(tablet)],
            from_data_node_id: self.node_id,
        };
        match self.client(address) {
            Ok(mut client) => answered(client.relay_insert(request).await, address),
            Err(e) => unreachable(address, e),
        }
    }

    async fn relay_series_types(
        &self,
        address: &str,
        device: &str,
        measurements: &[String],
    ) -> Result<Vec<(String, DataType)>, Status> {
        let request = proto::SeriesTypesReq {
            session_id: 0,
            device: device.to_string(),
            measurements: measurements.to_vec(),
        };
        let mut client = self.client(address).map_err(|e| unreachable(address, e))?;
        let resp = client
            .relay_series_types(request)
            .await
            .map_err(|e| unreachable(address, e))?
            .into_inner();
        match resp.status {
            Some(s) if !s.is_success() => return Err(s.into()),
            _ => {}
        }
        resp.series
            .into_iter()
            .map(|m| Ok((m.name, proto::data_type(m.data_type)?)))
            .collect::<proto::Result<_>>()
            .map_err(|e| {
                Status::new(
                    StatusCode::InternalServerError,
                    format!("{address} answered a series type malformed: {e}"),
                )
            })
    }

    async fn relay_delete_data(
        &self,
        address: &str,
        paths: &[SeriesPath],
        start: i64,
        end: i64,
    ) -> Status {
        let request = proto::RelayDeleteDataReq {
            paths: paths.iter().cloned().map(Into::into).collect(),
            start_time: start,
            end_time: end,
            from_data_node_id: self.node_id,
        };
        match self.client(address) {
            Ok(mut client) => answered(client.relay_delete_data(request).await, address),
            Err(e) => unreachable(address, e),
        }
    }

    async fn relay_table_insert(
        &self,
        address: &str,
        database: &str,
        tablet: &Tablet,
        categories: &[Category],
    ) -> Status {
        let request = proto::RelayTableInsertReq {
            database: database.to_string(),
            tablet: Some(tablet_to_wire(tablet)),
            categories: categories.iter().map(|c| u32::from(c.wire())).collect(),
            from_data_node_id: self.node_id,
        };
        match self.client(address) {
            Ok(mut client) => answered(client.relay_table_insert(request).await, address),
            Err(e) => unreachable(address, e),
        }
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
