//! One raft host, opened the same way by the ConfigNode and the DataNode: the gRPC transport over
//! the node's address book, the shared raft log on `wal`, the consensus settings derived from the
//! node's tick and election settings, and the driver thread that owns the node.

use std::path::PathBuf;
use std::sync::Arc;

use consensus::{Clock, NodeId, RaftNode};

use crate::driver::{entropy_seed, DriverConfig, RaftDriver};
use crate::error::Result;
use crate::transport::{
    AddressBook, GrpcTransport, PeerService, TransportConfig, TransportMetrics,
};

/// Everything that differs between the nodes' raft hosts.
#[derive(Clone, Debug)]
pub struct RaftHostConfig {
    /// This node's id, its raft peer id in every group.
    pub node_id: NodeId,
    /// The gRPC service peers receive raft messages on.
    pub service: PeerService,
    /// Name of the driver thread (`top`, logs).
    pub thread_name: String,
    /// Directory of the raft log (one `wal` for every group of the node).
    pub log_dir: PathBuf,
    /// Bytes per raft log segment.
    pub segment_bytes: u64,
    /// Milliseconds between two raft ticks.
    pub tick_ms: u64,
    /// Ticks without a leader before a follower campaigns; heartbeats go every fifth of it.
    pub election_ticks: usize,
    /// Limits of the raft log's memory and retention.
    pub log_limits: RaftLogLimits,
    /// Limits of the raft transport.
    pub transport: TransportConfig,
    /// `DriverConfig::step_queue_bytes_max`: received raft messages waiting for the raft thread.
    pub step_queue_bytes_max: usize,
}

/// How much of its raft log a node keeps in memory, and for whom it keeps it (see
/// `consensus::Config`, whose defaults these are).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftLogLimits {
    /// `consensus::Config::entry_cache_bytes_max`.
    pub entry_cache_bytes_max: usize,
    /// `consensus::Config::unapplied_bytes_max`.
    pub unapplied_bytes_max: u64,
    /// `consensus::Config::log_lag_entries_max`.
    pub lag_entries_max: u64,
    /// `consensus::Config::log_lag_bytes_max`.
    pub lag_bytes_max: u64,
    /// `consensus::Config::snapshot_builds_max`.
    pub snapshot_builds_max: usize,
}

impl Default for RaftLogLimits {
    fn default() -> Self {
        let c = consensus::Config::default();
        RaftLogLimits {
            entry_cache_bytes_max: c.entry_cache_bytes_max,
            unapplied_bytes_max: c.unapplied_bytes_max,
            lag_entries_max: c.log_lag_entries_max,
            lag_bytes_max: c.log_lag_bytes_max,
            snapshot_builds_max: c.snapshot_builds_max,
        }
    }
}

impl RaftHostConfig {
    /// The raft log's options: consensus issues one sync per ready round for every group (group
    /// commit), so the log adds none of its own; one writer with large batches and its own syncs
    /// is what O_DIRECT is for (see `wal::WalOptions::direct_io`).
    pub fn log_options(&self) -> wal::WalOptions {
        let mut options = wal::WalOptions::new(&self.log_dir);
        options.durability = wal::Durability::None;
        options.direct_io = true;
        options.segment_bytes = self.segment_bytes;
        options
    }

    /// The consensus settings: election after `election_ticks`, heartbeats five times as often,
    /// an election-jitter seed that differs from process to process ([`entropy_seed`]).
    pub fn consensus_config(&self) -> consensus::Config {
        consensus::Config {
            election_tick: self.election_ticks,
            heartbeat_tick: (self.election_ticks / 5).max(1),
            seed: entropy_seed(self.node_id),
            entry_cache_bytes_max: self.log_limits.entry_cache_bytes_max,
            unapplied_bytes_max: self.log_limits.unapplied_bytes_max,
            log_lag_entries_max: self.log_limits.lag_entries_max,
            log_lag_bytes_max: self.log_limits.lag_bytes_max,
            snapshot_builds_max: self.log_limits.snapshot_builds_max,
            ..consensus::Config::default()
        }
    }
}

/// Opens the node's raft log and starts the driver thread with a [`RaftNode`] on it, sending
/// through a [`GrpcTransport`] to the peers in `addresses` (which the caller keeps current).
/// `setup` runs on the driver thread before anything else (create the groups the node hosts from
/// the start). Must run inside a tokio runtime: the transport's tasks run on it. Returns the
/// driver and the transport's counters (what was sent and dropped).
///
/// Shutdown order, for the caller: stop serving (no more calls into the driver), then
/// [`RaftDriver::shutdown`] (the thread ends and the log closes with it).
pub fn open_raft_host<F>(
    config: &RaftHostConfig,
    addresses: AddressBook,
    clock: Arc<dyn Clock>,
    setup: F,
) -> Result<(RaftDriver<GrpcTransport>, Arc<TransportMetrics>)>
where
    F: FnOnce(&mut RaftNode<GrpcTransport>) -> consensus::Result<()> + Send + 'static,
{
    assert!(config.election_ticks > 0, "election_ticks must be > 0");
    let transport = GrpcTransport::new(
        config.node_id,
        config.service,
        addresses,
        config.transport.clone(),
        tokio::runtime::Handle::current(),
    );
    let transport_metrics = transport.metrics().clone();
    let log = wal::Wal::open(config.log_options())?;
    let (node_id, raft_config) = (config.node_id, config.consensus_config());
    let driver = RaftDriver::spawn(
        DriverConfig {
            name: config.thread_name.clone(),
            tick_ms: config.tick_ms,
            step_queue_bytes_max: config.step_queue_bytes_max,
            ..DriverConfig::default()
        },
        move || {
            let mut node = RaftNode::new(node_id, raft_config, clock, transport, Box::new(log))?;
            setup(&mut node)?;
            Ok(node)
        },
    )?;
    Ok((driver, transport_metrics))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RaftHostConfig {
        RaftHostConfig {
            node_id: 3,
            service: PeerService::DataNode,
            thread_name: "raft".into(),
            log_dir: PathBuf::from("/data/raft"),
            segment_bytes: 8 << 20,
            tick_ms: 100,
            election_ticks: 10,
            log_limits: RaftLogLimits::default(),
            transport: TransportConfig::default(),
            step_queue_bytes_max: DriverConfig::default().step_queue_bytes_max,
        }
    }

    #[test]
    fn the_log_syncs_only_through_consensus_and_heartbeats_are_a_fifth_of_the_election() {
        let c = config();
        let log = c.log_options();
        assert!(matches!(log.durability, wal::Durability::None));
        assert!(log.direct_io);
        assert_eq!(log.segment_bytes, 8 << 20);
        let raft = c.consensus_config();
        assert_eq!((raft.election_tick, raft.heartbeat_tick), (10, 2));
        let short = RaftHostConfig {
            election_ticks: 3,
            ..config()
        };
        assert_eq!(short.consensus_config().heartbeat_tick, 1);
        raft.validate().unwrap();
    }
}
