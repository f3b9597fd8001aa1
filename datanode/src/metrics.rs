//! The DataNode's counters and gauges ([`Metrics`]), shared by every part and grouped by area;
//! `exporter.rs` declares how each is shown and renders them with the rest of the node's state
//! on `dn_metrics_address`.

use std::sync::atomic::AtomicU64;

pub use runtime::metrics::{add, inc};

/// Counters of the DataNode service, by area.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Session writes: acknowledged, forwarded, redirected, retried.
    pub writes: WriteMetrics,
    /// Requests refused while fenced, and what a fenced coordinator relayed.
    pub fencing: FencingMetrics,
    /// The link with the ConfigNode: requests, cache misses, heartbeats, invalidations.
    pub confignode: ConfigNodeMetrics,
    /// Regions and storage: the memtable budget, replicas removed and moved, compactions.
    pub storage: StorageMetrics,
}

/// Session writes.
#[derive(Debug, Default)]
pub struct WriteMetrics {
    /// Points acknowledged to sessions.
    pub write_points: AtomicU64,
    /// Region writes (sub-tablets) acknowledged to sessions.
    pub write_requests: AtomicU64,
    /// Sum of session write latencies in microseconds (with `write_requests` gives the mean).
    pub write_latency_us_sum: AtomicU64,
    /// Region-write attempts the coordinator retried (536, leader change, connection loss).
    pub coordinator_retries: AtomicU64,
    /// Forwarded region writes this node answered 536 or 905 to (the proxy layer).
    pub proxy_rejections: AtomicU64,
    /// Region writes forwarded to another DataNode.
    pub forwarded_writes: AtomicU64,
    /// Session writes answered 400 REDIRECTION_RECOMMEND (the device's leader is elsewhere).
    pub write_redirects: AtomicU64,
}

/// Fenced requests and relays.
#[derive(Debug, Default)]
pub struct FencingMetrics {
    /// Writes refused at the coordinator with 536 because the lease was fenced.
    pub fenced_writes: AtomicU64,
    /// Reads refused with 535.
    pub fenced_reads: AtomicU64,
    /// Times the raft node was switched to fenced (its leaders step aside).
    pub raft_fenced_switches: AtomicU64,
    /// Writes a fenced coordinator relayed, unvalidated, to a peer holding its lease.
    pub relayed_writes: AtomicU64,
    /// Writes relayed here by a fenced peer.
    pub relayed_writes_received: AtomicU64,
    /// Series-type lookups a fenced coordinator relayed to a peer holding its lease.
    pub relayed_lookups: AtomicU64,
    /// Deletions of points a fenced coordinator relayed to a peer holding its lease.
    pub relayed_deletes: AtomicU64,
    /// Relayed writes or deletions whose peer did not answer within `dn_write_timeout_ms`
    /// (answered 712: the outcome is unknown).
    pub relay_timeouts: AtomicU64,
}

/// The link with the ConfigNode.
#[derive(Debug, Default)]
pub struct ConfigNodeMetrics {
    /// Requests forwarded or made to the ConfigNode for sessions and writes.
    pub confignode_requests: AtomicU64,
    /// Requests to the ConfigNode that ran out of `dn_confignode_deadline_ms`.
    pub confignode_deadlines: AtomicU64,
    /// Schema-cache misses that went to the ConfigNode.
    pub schema_fetches: AtomicU64,
    /// Partition-cache misses that went to the ConfigNode.
    pub partition_fetches: AtomicU64,
    /// Heartbeats processed (renewals).
    pub heartbeats: AtomicU64,
    /// Heartbeats refused (other incarnation, older term or sequence).
    pub heartbeats_refused: AtomicU64,
    /// Invalidations acknowledged.
    pub invalidations: AtomicU64,
    /// Series with a declared encoding or compressor, as last fetched from the ConfigNode.
    pub series_codecs_declared: AtomicU64,
}

/// Regions and storage.
#[derive(Debug, Default)]
pub struct StorageMetrics {
    /// Inserts refused with 606 because the memtables were at their budget.
    pub budget_rejections: AtomicU64,
    /// Region replicas removed because the ConfigNode reported them dropped.
    pub regions_removed: AtomicU64,
    /// Region migration steps taken as a region leader (learner added, replica replaced,
    /// leadership handed away).
    pub migration_steps: AtomicU64,
    /// Compactions installed.
    pub compactions: AtomicU64,
    /// Bytes of sealed files compactions merged away.
    pub compaction_input_bytes: AtomicU64,
    /// Bytes of sealed files compactions wrote.
    pub compaction_output_bytes: AtomicU64,
    /// Bytes of input pages compactions copied as they were stored (no decode, no encode).
    pub compaction_copied_bytes: AtomicU64,
    /// Points compactions removed because their database's TTL expired them.
    pub ttl_expired_points: AtomicU64,
}
