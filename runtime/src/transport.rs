//! The networked raft transport over tonic.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use consensus::{NodeId, RaftMessage, Transport};
use parking_lot::{Mutex, RwLock};
use tokio::sync::mpsc;

use crate::budget::ByteBudget;
use crate::channel::ChannelConfig;

/// Which gRPC service carries raft messages to the peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerService {
    /// `ConfigNodeService.StreamRaftMessages` (the ConfigNode group).
    ConfigNode,
    /// `DataNodeInternalService.StreamRaftMessages` (data region groups).
    DataNode,
}

/// Node id → `host:port`, shared with whoever learns addresses (the ConfigNode's member list,
/// or the DataNode's view of the registry).
pub type AddressBook = Arc<RwLock<BTreeMap<NodeId, String>>>;

/// Limits of the transport.
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// Encoded messages queued per peer and lane; past it new ones are dropped. Default 4096.
    pub queue_messages_max: usize,
    /// Encoded bytes of appends and snapshots (the bulk lane) queued per peer; past it new ones
    /// are dropped, as raft expects of a lossy network, and a lagging follower's catch-up
    /// cannot queue gigabytes (REVIEW M5). Default 64 MiB.
    pub queue_bytes_max: usize,
    /// Messages per RPC. Default 256.
    pub batch_messages_max: usize,
    /// Encoded bytes per RPC; a batch closes before a message that would pass it (a single larger
    /// message still goes alone). Default 8 MiB.
    pub batch_bytes_max: usize,
    /// Largest RPC the client encodes or decodes; must not exceed the peers' server limit
    /// (`dn_rpc_max_message_bytes`, `cn_rpc_max_message_bytes`). Default 64 MiB.
    pub message_bytes_max: usize,
    /// Milliseconds a batch may wait for a stalled stream before the stream is dropped and the
    /// messages with it. Default 2000.
    pub rpc_timeout_ms: u64,
    /// How a stream's connection is made and watched: connect timeout, HTTP/2 keepalive (a
    /// stream whose peer stops answering PINGs ends), socket options. Default
    /// [`ChannelConfig::default`] (connect 1000 ms, PING every 1000 ms, answered within 2000 ms).
    pub channel: ChannelConfig,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            queue_messages_max: 4096,
            queue_bytes_max: 64 << 20,
            batch_messages_max: 256,
            batch_bytes_max: 8 << 20,
            message_bytes_max: 64 << 20,
            rpc_timeout_ms: 2000,
            channel: ChannelConfig::default(),
        }
    }
}

/// What a node's raft transport sent and dropped, over every peer and lane.
#[derive(Debug, Default)]
pub struct TransportMetrics {
    /// Encoded raft messages handed to a peer's stream.
    pub sent_messages: AtomicU64,
    /// Their bytes: what catching a follower up costs on the wire.
    pub sent_bytes: AtomicU64,
    /// Messages dropped: a full lane, no address, or a stream that failed or stalled.
    pub dropped_messages: AtomicU64,
}

/// Sends raft messages as `RaftMessageBatch` RPCs. Best effort, never blocking the raft thread:
/// a full queue or a failed RPC drops messages, which raft retransmits.
///
/// Each peer has two lanes, each its own queue, task, stream and connection: appends and
/// snapshots (bulk, bounded in bytes) and everything else (control: heartbeats, votes, append
/// responses, bounded in messages). A heartbeat never waits behind megabytes of a lagging
/// follower's catch-up, so the catch-up cannot starve the group's leadership (check-quorum).
#[derive(Clone)]
pub struct GrpcTransport {
    from: NodeId,
    service: PeerService,
    addresses: AddressBook,
    config: TransportConfig,
    runtime: tokio::runtime::Handle,
    peers: Arc<Mutex<BTreeMap<NodeId, PeerLanes>>>,
    metrics: Arc<TransportMetrics>,
}

/// The two lanes to one peer.
#[derive(Clone)]
struct PeerLanes {
    control: Lane,
    bulk: Lane,
}

/// One lane's queue and the bytes waiting in it (`usize::MAX` bytes: bounded in messages only).
#[derive(Clone)]
struct Lane {
    queue: mpsc::Sender<Bytes>,
    budget: Arc<ByteBudget>,
}

impl Lane {
    /// Queues `message`, or drops it when the lane is full.
    fn offer(&self, message: Bytes) -> bool {
        let len = message.len();
        if !self.budget.try_reserve(len) {
            return false;
        }
        if self.queue.try_send(message).is_err() {
            self.budget.release(len);
            return false;
        }
        true
    }
}

impl std::fmt::Debug for GrpcTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcTransport")
            .field("from", &self.from)
            .field("service", &self.service)
            .finish_non_exhaustive()
    }
}

impl GrpcTransport {
    /// A transport for node `from`; peer tasks run on `runtime`.
    pub fn new(
        from: NodeId,
        service: PeerService,
        addresses: AddressBook,
        config: TransportConfig,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        GrpcTransport {
            from,
            service,
            addresses,
            config,
            runtime,
            peers: Arc::new(Mutex::new(BTreeMap::new())),
            metrics: Arc::default(),
        }
    }

    /// What this transport sent and dropped.
    pub fn metrics(&self) -> &Arc<TransportMetrics> {
        &self.metrics
    }

    fn lane(&self, to: NodeId, bytes_max: usize) -> Lane {
        let (queue, rx) = mpsc::channel(self.config.queue_messages_max);
        let budget = Arc::new(ByteBudget::new(bytes_max));
        self.runtime
            .spawn(peer_task(self.clone(), to, rx, budget.clone()));
        Lane { queue, budget }
    }

    fn peer_lanes(&self, to: NodeId) -> PeerLanes {
        let mut peers = self.peers.lock();
        if let Some(lanes) = peers.get(&to) {
            if !lanes.control.queue.is_closed() && !lanes.bulk.queue.is_closed() {
                return lanes.clone();
            }
        }
        let lanes = PeerLanes {
            control: self.lane(to, usize::MAX),
            bulk: self.lane(to, self.config.queue_bytes_max),
        };
        peers.insert(to, lanes.clone());
        lanes
    }
}

impl Transport for GrpcTransport {
    fn send(&self, to_node: NodeId, messages: Vec<RaftMessage>) {
        let lanes = self.peer_lanes(to_node);
        for message in messages {
            let lane = if message.is_bulk() {
                &lanes.bulk
            } else {
                &lanes.control
            };
            if !lane.offer(Bytes::from(message.encode())) {
                self.metrics
                    .dropped_messages
                    .fetch_add(1, Ordering::Relaxed);
                tracing::trace!(to_node, "raft message dropped: peer queue full");
            }
        }
    }
}

/// One open `StreamRaftMessages` call to a peer; batches go in through `batches`. Dropping it
/// ends the call.
struct PeerStream {
    address: String,
    batches: mpsc::Sender<proto::RaftMessageBatch>,
    call: tokio::task::JoinHandle<()>,
}

impl Drop for PeerStream {
    fn drop(&mut self) {
        self.call.abort();
    }
}

/// Batches queued on one stream before the sender waits for the connection.
const STREAM_BATCHES_QUEUED: usize = 16;

/// Opens a stream to `address` on a connection of its own: after a failure the next stream
/// starts on a fresh connection instead of a half-dead one. HTTP/2 keepalive PINGs
/// (`config.channel`) end the call when the peer stops answering, for instance behind a
/// partition.
fn open_stream(
    to: NodeId,
    address: &str,
    service: PeerService,
    config: &TransportConfig,
) -> Result<PeerStream, String> {
    let channel = config
        .channel
        .connect_lazy(address)
        .map_err(|e| e.to_string())?;
    let (batches, queued) = mpsc::channel(STREAM_BATCHES_QUEUED);
    let requests = tokio_stream::wrappers::ReceiverStream::new(queued);
    let limit = config.message_bytes_max;
    let address_owned = address.to_string();
    let call = tokio::spawn(async move {
        let outcome = match service {
            PeerService::ConfigNode => {
                proto::config_node_service_client::ConfigNodeServiceClient::new(channel)
                    .max_encoding_message_size(limit)
                    .max_decoding_message_size(limit)
                    .stream_raft_messages(requests)
                    .await
            }
            PeerService::DataNode => {
                proto::data_node_internal_service_client::DataNodeInternalServiceClient::new(
                    channel,
                )
                .max_encoding_message_size(limit)
                .max_decoding_message_size(limit)
                .stream_raft_messages(requests)
                .await
            }
        };
        if let Err(e) = outcome {
            tracing::debug!(to, address = address_owned, "raft stream ended: {e}");
        }
    });
    Ok(PeerStream {
        address: address.to_string(),
        batches,
        call,
    })
}

/// Sends one lane's messages to `to` (the transport gives its node id, service, addresses,
/// limits and counters).
async fn peer_task(
    transport: GrpcTransport,
    to: NodeId,
    mut rx: mpsc::Receiver<Bytes>,
    budget: Arc<ByteBudget>,
) {
    let GrpcTransport {
        from,
        service,
        addresses,
        config,
        metrics,
        runtime,
        peers,
    } = transport;
    // The peer map holds this lane's sender: kept here, the lane would never close.
    drop((runtime, peers));
    let mut stream: Option<PeerStream> = None;
    // A message that did not fit the previous batch opens the next one.
    let mut carried: Option<Bytes> = None;
    loop {
        let first = match carried.take() {
            Some(m) => m,
            None => match rx.recv().await {
                Some(m) => m,
                None => break,
            },
        };
        let messages = fill_batch(first, &mut rx, &config, &mut carried);
        let (count, bytes) = (
            messages.len() as u64,
            messages.iter().map(Bytes::len).sum::<usize>(),
        );
        budget.release(bytes);
        let lost = |metrics: &TransportMetrics| {
            metrics.dropped_messages.fetch_add(count, Ordering::Relaxed);
        };
        let Some(address) = addresses.read().get(&to).cloned() else {
            lost(&metrics);
            tracing::debug!(
                to,
                "no address for raft peer; dropping {} messages",
                messages.len()
            );
            continue;
        };
        // A stream whose call ended (connection lost, peer restarted) is replaced.
        if stream
            .as_ref()
            .is_none_or(|s| s.address != address || s.batches.is_closed())
        {
            stream = match open_stream(to, &address, service, &config) {
                Ok(s) => Some(s),
                Err(e) => {
                    lost(&metrics);
                    tracing::warn!(to, "{e}");
                    continue;
                }
            };
        }
        let open = stream.as_ref().expect("set above");
        let batch = proto::RaftMessageBatch {
            from_node_id: from,
            to_node_id: to,
            messages,
        };
        let sent = tokio::time::timeout(
            Duration::from_millis(config.rpc_timeout_ms),
            open.batches.send(batch),
        )
        .await;
        match sent {
            Ok(Ok(())) => {
                metrics.sent_messages.fetch_add(count, Ordering::Relaxed);
                metrics
                    .sent_bytes
                    .fetch_add(bytes as u64, Ordering::Relaxed);
            }
            Ok(Err(_)) => {
                lost(&metrics);
                tracing::debug!(to, address, "raft stream closed; messages lost");
                stream = None;
            }
            Err(_) => {
                lost(&metrics);
                tracing::debug!(
                    to,
                    address,
                    "raft stream stalled; messages lost, reconnecting"
                );
                stream = None;
            }
        }
    }
}

/// `first` and whatever else is queued, up to `batch_messages_max` messages and
/// `batch_bytes_max` bytes; the message that would pass the byte limit goes to `carried`.
fn fill_batch(
    first: Bytes,
    rx: &mut mpsc::Receiver<Bytes>,
    config: &TransportConfig,
    carried: &mut Option<Bytes>,
) -> Vec<Bytes> {
    let mut bytes = first.len();
    let mut messages = vec![first];
    while messages.len() < config.batch_messages_max {
        match rx.try_recv() {
            Ok(m) if bytes + m.len() > config.batch_bytes_max => {
                *carried = Some(m);
                break;
            }
            Ok(m) => {
                bytes += m.len();
                messages.push(m);
            }
            Err(_) => break,
        }
    }
    messages
}

/// Decodes a received batch into raft messages, skipping (and logging) undecodable ones.
pub fn decode_batch(batch: &proto::RaftMessageBatch) -> Vec<RaftMessage> {
    batch
        .messages
        .iter()
        .filter_map(|bytes| match RaftMessage::decode_shared(bytes) {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::warn!(from = batch.from_node_id, "undecodable raft message: {e}");
                None
            }
        })
        .collect()
}

/// Serves one `StreamRaftMessages` call: hands every batch's messages to `step` until the peer
/// ends the stream, its connection fails or `stop` completes (a server shutting down must not
/// wait for its peers to hang up).
pub async fn serve_raft_stream(
    mut stream: tonic::Streaming<proto::RaftMessageBatch>,
    stop: impl std::future::Future<Output = ()>,
    mut step: impl FnMut(Vec<RaftMessage>),
) -> Result<proto::RaftMessageResp, tonic::Status> {
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            batch = stream.message() => match batch? {
                Some(batch) => step(decode_batch(&batch)),
                None => break,
            },
        }
    }
    Ok(proto::RaftMessageResp {
        status: Some(proto::status(common::StatusCode::Success, String::new())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn batches_stop_at_the_message_and_byte_limits_and_carry_the_rest() {
        let config = TransportConfig {
            batch_messages_max: 3,
            batch_bytes_max: 10,
            ..TransportConfig::default()
        };
        let (tx, mut rx) = mpsc::channel(16);
        for len in [4, 4, 4, 20, 1, 1, 1, 1] {
            tx.send(Bytes::from(vec![0u8; len])).await.unwrap();
        }
        let mut carried = None;
        let lens = |b: Vec<Bytes>| b.iter().map(Bytes::len).collect::<Vec<_>>();
        let first = rx.recv().await.unwrap();
        // 4 + 4 fit, the third 4 would make 12 > 10: carried.
        assert_eq!(
            lens(fill_batch(first, &mut rx, &config, &mut carried)),
            [4, 4]
        );
        let first = carried.take().unwrap();
        // A message over the byte limit goes alone.
        assert_eq!(lens(fill_batch(first, &mut rx, &config, &mut carried)), [4]);
        let first = carried.take().unwrap();
        assert_eq!(
            lens(fill_batch(first, &mut rx, &config, &mut carried)),
            [20]
        );
        let first = carried.take().unwrap();
        // The message limit.
        assert_eq!(
            lens(fill_batch(first, &mut rx, &config, &mut carried)),
            [1, 1, 1]
        );
        assert!(carried.is_none());
        let first = rx.recv().await.unwrap();
        assert_eq!(lens(fill_batch(first, &mut rx, &config, &mut carried)), [1]);
    }
}
