//! `DataNodeConfig`: every key with its default and unit, loaded from TOML (`--config file`) and
//! overridden by `--kebab-case-name value` on the command line, validated once at start-up.
//!
//! The keys are grouped by what they bound into sections of at most 12 (`config.raft`,
//! `config.storage`, ...); the TOML file and the flags stay flat. Each section checks its own
//! keys, [`DataNodeConfig::validate`] what ties two sections.
//!
//! Cluster-wide values (fence, partitioning, heartbeat interval) are not configured here: the
//! DataNode adopts the ConfigNode's at registration, so every node agrees.

use std::path::{Path, PathBuf};

use runtime::config::{
    check_keepalive, check_nonzero, check_socket_address, config_error, parse_toml, read_toml,
};

use crate::error::ConfigError;

/// Descriptors a DataNode holds beyond its connection limits and sealed-file cache: raft log
/// segments and the spare, directories, listeners, its own connections to ConfigNodes and
/// peers, snapshot transfers, metrics scrapes.
pub const DESCRIPTORS_RESERVED: u64 = 256;

/// Largest `M_MMAP_THRESHOLD` glibc accepts on 64-bit targets (`HEAP_MAX_SIZE / 2`).
pub const MALLOC_MMAP_THRESHOLD_MAX: u64 = 32 << 20;

runtime::node_config! {
    /// The DataNode's settings.
    pub struct DataNodeConfig {
        /// The session port: its address, its message and frame bounds, and the budgets of its
        /// connections, logins and requests.
        rpc: RpcSection {
            /// `host:port` of the session API (`SessionService`). Port 0 picks a free port (tests).
            /// Default `127.0.0.1:6667`.
            dn_rpc_address: String = "127.0.0.1:6667".into(),
            /// Largest gRPC message the session and internal services take or send, the raft
            /// transport's limit, and the largest Thrift frame of a logged-in IoTDB client (IoTDB's
            /// `dn_thrift_max_frame_size`). Default 64 MiB; at least 1 MiB.
            dn_rpc_max_message_bytes: u64 = 64 << 20,
            /// IoTDB clients logged in at once on the session port (IoTDB's
            /// `dn_rpc_max_concurrent_client_num`): a Thrift connection takes its place when its
            /// `openSession` succeeds, and a login past the limit is refused with 606 (the client
            /// moves to another DataNode). Connections still in their handshake and gRPC
            /// connections have budgets of their own (`dn_rpc_handshake_connections_max`,
            /// `dn_rpc_grpc_connections_max`). Default 1000; at least 1.
            dn_rpc_max_concurrent_client_num: u32 = 1000,
            /// Connections on the session port in their handshake at once: accepted and not yet a
            /// gRPC connection (the whole HTTP/2 preface received) or a logged-in Thrift session.
            /// One more closes the oldest of them, so connections that stall cannot keep new
            /// clients out. Default 256; at least 1.
            dn_rpc_handshake_connections_max: u32 = 256,
            /// Milliseconds from accept to a complete HTTP/2 preface, or to a successful
            /// `openSession` on a Thrift connection; a connection that takes longer (one byte sent,
            /// then silence) is closed. Default 10000; at least 100.
            dn_rpc_handshake_timeout_ms: u64 = 10_000,
            /// gRPC connections the session port holds open at once; one more is closed after its
            /// preface. Default 1000; at least 1.
            dn_rpc_grpc_connections_max: u32 = 1000,
            /// Largest Thrift frame taken before `openSession` has succeeded on its connection
            /// (IoTDB's clients send an `openSession` of a few hundred bytes); a larger one is
            /// answered with an exception and the connection is closed. Default 65536;
            /// 1024..=`dn_rpc_max_message_bytes`.
            dn_rpc_unauthenticated_frame_bytes_max: u64 = 64 << 10,
            /// Milliseconds a logged-in Thrift connection may take to send the rest of a frame once
            /// its first byte has arrived; a connection that stalls mid-frame is closed.
            /// Default 60000; at least 100.
            dn_rpc_frame_timeout_ms: u64 = 60_000,
            /// Milliseconds a logged-in Thrift connection may stay silent between two requests
            /// before it is closed with its session and open queries (IoTDB closes idle
            /// connections too), and a gRPC connection may run no call (its keepalive PINGs do
            /// not count) before it is closed; 0 never closes one. Default 3600000 (1 h).
            dn_rpc_idle_timeout_ms: u64 = 3_600_000,
            /// Session requests this DataNode runs at once; one more is answered gRPC
            /// `RESOURCE_EXHAUSTED` at once, which sessions take as 606 WRITE_PROCESS_REJECT and
            /// retry (the request was not run). Default 256; at least 1.
            dn_rpc_max_concurrent_requests: u32 = 256,
            /// Milliseconds a DataNode answers logins of a user with the password the ConfigNode
            /// last accepted for it without asking again (so a DataNode cut off from the ConfigNode
            /// keeps serving them); a changed password still works here that long. Default 600000.
            dn_login_cache_ms: u64 = 600_000,
        },
        /// The internal links: ConfigNodes and peer DataNodes, how their connections are built
        /// and watched, and the internal server's bounds.
        internal: InternalSection {
            /// `host:port` of `DataNodeInternalService` (ConfigNode → DataNode and DataNode ↔
            /// DataNode). Default `127.0.0.1:10730`.
            dn_internal_address: String = "127.0.0.1:10730".into(),
            /// Comma-separated `host:port` of ConfigNodes to register with; the leader is found by
            /// following redirects. Default `127.0.0.1:10710`.
            dn_seed_config_nodes: String = "127.0.0.1:10710".into(),
            /// Milliseconds a request this DataNode must forward to the ConfigNode (a schema or
            /// cluster statement, a schema or partition fetch) may take before it answers 712 with
            /// `need_retry` — bounded, so a DataNode cut off from the ConfigNode answers in time
            /// and the client moves on. A DROP DATABASE / DELETE TIMESERIES on a DataNode holding
            /// its lease may take longer (it waits out fenced DataNodes). Default 5000.
            dn_confignode_deadline_ms: u64 = 5000,
            /// Milliseconds of one DataNode → DataNode or DataNode → ConfigNode RPC, and of
            /// connecting for one. Default 5000.
            dn_rpc_timeout_ms: u64 = 5000,
            /// Milliseconds between two HTTP/2 keepalive PINGs on every internal connection of this
            /// node (to ConfigNodes, to other DataNodes, raft streams) and from its servers to
            /// their clients, idle connections included. Default 1000; 100..=60000.
            dn_rpc_keepalive_interval_ms: u64 = 1000,
            /// Milliseconds a PING may go unanswered before its connection is closed and the next
            /// call connects afresh; also sets `TCP_USER_TIMEOUT` (interval + timeout). A
            /// connection to a peer behind a partition is given up within interval + timeout.
            /// Default 2000; 100..=60000.
            dn_rpc_keepalive_timeout_ms: u64 = 2000,
            /// Internal connections (ConfigNodes and other DataNodes, raft streams included) this
            /// DataNode holds open at once; one more is closed at accept. Default 256; at least 1.
            dn_internal_max_connections: u32 = 256,
            /// Internal requests (forwarded writes, relays, reads, heartbeats) this DataNode runs
            /// at once, raft message streams aside; one more is refused like a session request's.
            /// Default 1024; at least 1.
            dn_internal_max_concurrent_requests: u32 = 1024,
        },
        /// The process: where it keeps its files, where it is scraped, its allocator.
        node: NodeSection {
            /// Directory of the node's identity, raft log and regions. Default `data/datanode`.
            dn_data_dir: PathBuf = PathBuf::from("data/datanode"),
            /// `host:port` of the Prometheus text `/metrics` endpoint. Default `127.0.0.1:9091`.
            dn_metrics_address: String = "127.0.0.1:9091".into(),
            /// glibc `M_MMAP_THRESHOLD` of the `datanode` process: allocations from this size on
            /// get a mapping of their own, returned (and faulted in afresh) at every free. Raft
            /// messages and tablets of 100 KiB–MiBs sit above glibc's 128 KiB start value; on a VM
            /// every fresh page costs a host fault. 0 keeps glibc's dynamic default. Default 32 MiB
            /// (glibc's maximum).
            malloc_mmap_threshold_bytes: u64 = MALLOC_MMAP_THRESHOLD_MAX,
            /// glibc `M_TRIM_THRESHOLD`: free memory at the top of the heap kept for reuse instead
            /// of being returned to the kernel. 0 keeps glibc's default. Default 256 MiB.
            malloc_trim_threshold_bytes: u64 = 256 << 20,
        },
        /// The write path: what one tablet may hold, the caches that route and check it, retries
        /// and timeouts.
        writes: WritesSection {
            /// Rows in one tablet a session may send; larger ones are refused with 700. Default
            /// 100000.
            tablet_rows_max: u32 = 100_000,
            /// Distinct time partitions (time slots of `time_partition_interval_ms`) one tablet may
            /// span; a tablet spanning more is refused with 700 before anything is asked of the
            /// ConfigNode, and so is a forwarded region write. Each new time partition costs a
            /// partition-table entry on the ConfigNode and, on every replica of the region, a
            /// memtable and then a sealed file with its fd: one tablet of `tablet_rows_max` rows a
            /// partition apart would otherwise create 100000 of each at once. 1000 is about 19
            /// years of IoTDB's default 7-day partitions in one tablet, more than any backfill
            /// needs. Keep it equal on every DataNode (a region leader holds forwarded parts to its
            /// own). Default 1000; 1..=100000 (what one FetchPartitions request may ask).
            dn_tablet_time_partitions_max: u32 = 1000,
            /// Entries kept in the schema cache (devices) and the partition cache (device, time
            /// slot) each; a full cache is cleared rather than grown. Default 100000.
            cache_entries_max: u32 = 100_000,
            /// Retries of a fenced write inside the region state machine before 536 goes to the
            /// apply proxy (IoTDB's `MAX_WRITE_RETRY_TIMES`). Default 5.
            data_region_write_retry_max: u32 = 5,
            /// Milliseconds between those retries. Default 1000.
            data_region_write_retry_wait_ms: u64 = 1000,
            /// Milliseconds the coordinator keeps retrying a region write that failed with 536, a
            /// leader change or a lost connection, on another replica or the new leader. Default
            /// 60000.
            remote_write_max_retry_ms: u64 = 60_000,
            /// Milliseconds a proposal may wait for commit and local apply on the region leader
            /// before the write answers 712 (the coordinator then retries; writes are idempotent).
            /// Default 10000.
            dn_write_timeout_ms: u64 = 10_000,
        },
        /// The region groups' raft: timing, the shared raft log, and what raft holds in memory and
        /// in queues.
        raft: RaftSection {
            /// Milliseconds between two raft ticks of the node's region groups. Default 100.
            dn_raft_tick_ms: u64 = 100,
            /// Raft ticks without a leader before a replica campaigns (effective timeout is drawn
            /// from `(n, 2n]`). Default 10.
            dn_raft_election_ticks: u64 = 10,
            /// Size in bytes of one segment of the node's raft log (shared by all regions).
            /// Default 64 MiB; at least 4096.
            wal_segment_bytes: u64 = 64 << 20,
            /// Bytes of raft entries all regions keep in memory (the newest of each; older ones are
            /// read back from the raft log when a follower or the apply needs them). Default 256
            /// MiB.
            dn_raft_entry_cache_bytes: u64 = 256 << 20,
            /// Bytes of replicated but unapplied entries past which a replica refuses new ones (its
            /// apply is held at a fence, or behind), so a long fence keeps memory and raft log
            /// bounded. Default 256 MiB.
            dn_raft_unapplied_bytes_max: u64 = 256 << 20,
            /// A region leader truncates its raft log no further than the slowest follower's
            /// matched index while that follower is at most this many entries behind; one further
            /// behind catches up by snapshot. Default 1000000.
            dn_raft_log_lag_entries_max: u64 = 1_000_000,
            /// Likewise in bytes of entries after the follower's matched index. Default 1 GiB.
            dn_raft_log_lag_bytes_max: u64 = 1 << 30,
            /// Bytes of raft appends and snapshots queued for one peer before more are dropped
            /// (raft resends them; heartbeats and votes have a queue of their own). Default 64 MiB;
            /// at least `dn_rpc_max_message_bytes`.
            dn_raft_transport_queue_bytes_max: u64 = 64 << 20,
            /// Bytes of received raft messages waiting for the raft thread before more are refused
            /// (the sender retries them). Default 256 MiB; at least `dn_rpc_max_message_bytes`.
            dn_raft_step_queue_bytes_max: u64 = 256 << 20,
        },
        /// Region snapshots: built, streamed, downloaded and kept.
        snapshot: SnapshotSection {
            /// Region snapshots built at once on this DataNode, each on a thread of its own (a
            /// lagging follower's region read back from disk, off the raft thread). Default 2.
            dn_raft_snapshot_builds_max: u64 = 2,
            /// Bytes of one chunk of a region snapshot streamed to a replica (`FetchSnapshot`).
            /// Default 1 MiB; at least 4096 and at most half of `dn_rpc_max_message_bytes`.
            dn_snapshot_chunk_bytes: u64 = 1 << 20,
            /// Bytes per second this DataNode streams region snapshots at, over all replicas
            /// fetching (0: unthrottled). Default 128 MiB.
            dn_snapshot_send_bytes_per_sec: u64 = 128 << 20,
            /// Region snapshots this DataNode downloads at once; a replica needing another waits
            /// for the leader's next offer. Default 2.
            dn_snapshot_receives_max: u64 = 2,
            /// Milliseconds a region snapshot this DataNode built stays on disk after a replica
            /// last used it (was sent it, or fetched a chunk of it). Its files are hard links of
            /// the region's: while kept, the space of data the region compacted, expired or deleted
            /// since stays allocated. A replica that needs one later gets a new one. Default 30000.
            dn_snapshot_keep_ms: u64 = 30_000,
        },
        /// Memtables, their flushes and the sealed files' descriptors.
        storage: StorageSection {
            /// A region flushes its memtables once they hold this many bytes. Default 64 MiB.
            memtable_flush_bytes: u64 = 64 << 20,
            /// Bytes the memtables of all regions on this DataNode (working and being flushed) may
            /// hold: past half of it, flushes start on the largest regions, and at it inserts are
            /// refused with 606 WRITE_PROCESS_REJECT (sessions retry it) until a flush frees
            /// memory. Default 1 GiB; at least `memtable_flush_bytes`.
            memtable_budget_bytes: u64 = 1 << 30,
            /// A region flushes once its oldest unflushed write is this many milliseconds old.
            /// Default 600000.
            memtable_flush_age_ms: u64 = 600_000,
            /// The nice value (0..=19) flush threads run at: encoding a frozen memtable takes the
            /// CPU that requests leave, and while flushes fall behind the memtable budget
            /// (`memtable_budget_bytes`) pushes back on writes. 0 is the process's own priority.
            /// Default 5.
            flush_thread_nice: u32 = 5,
            /// Sealed files this DataNode keeps open at once, over all its regions: a bounded cache
            /// of descriptors, the least recently read closed first. A running compaction also
            /// reads each of its inputs through a descriptor of its own, at most 16 per compaction.
            /// Default 256; at least 1.
            sealed_open_files_max: u64 = engine::OPEN_FILES_MAX_DEFAULT as u64,
            /// Bytes each region's last-value cache may hold: every series' newest point, kept
            /// exact across writes, deletions, TTL merges, snapshots and restarts (it starts empty),
            /// which `SELECT LAST` reads instead of memtables and pages. A series that does not fit
            /// is read as if uncached. Default 16 MiB (about 100,000 series); 0 turns it off.
            last_cache_bytes_per_region: u64 = 16 << 20,
        },
        /// Compactions: when they merge, how many run, how fast and at what priority.
        compaction: CompactionSection {
            /// A compaction merges a run of at least this many neighbouring sealed files of one
            /// size tier in a time partition. Default 4; at least 2.
            compaction_files_min: u64 = 4,
            /// Bytes per second a compaction writes at most (it sleeps to keep to it); 0 is
            /// unlimited. Default 64 MiB.
            compaction_write_bytes_per_sec: u64 = 64 << 20,
            /// Compactions running at once, each on a thread of its own; a region's compactions
            /// take turns with other regions' one compaction at a time. Default 2; at least 1.
            compaction_concurrency: u64 = 2,
            /// Compactions that may run at once in one region, on disjoint runs of files: a long
            /// merge (a TTL rewrite of a partition's largest file) does not hold back the merging
            /// of the flushes after it. Default 2; at least 1.
            compaction_workers_per_region: u64 = 2,
            /// The nice value (0..=19) compaction threads run at, so merges take the CPU that
            /// ingest and queries leave (RocksDB's low-priority pool does the same); 0 is the
            /// process's own priority. Default 10.
            compaction_thread_nice: u32 = 10,
            /// A time partition that no flush has added a file to for this many milliseconds, with
            /// nothing buffered, is merged into one file (InfluxDB's
            /// `compact-full-write-cold-duration`). Default 3600000 (1 h); 0 never.
            compaction_cold_after_ms: u64 = 3_600_000,
        },
        /// Queries: points, memory and pages of their results, and how many a connection keeps
        /// open.
        query: QuerySection {
            /// Points of one series one query answers at most; a session pages through larger
            /// results. Default 1000000.
            query_points_max: u32 = 1_000_000,
            /// Bytes of memory one query result may hold at once: a result built whole until its
            /// client has read it, or a streamed raw query's chunks (one per series) and page
            /// (rows estimated per cell: 32 bytes and a text's or blob's bytes); a query past it is
            /// refused with 700 naming this key. Default 256 MiB; at least 1 MiB.
            query_result_bytes_max: u64 = 256 << 20,
            /// Bytes of memory all open query results of this DataNode may take together; a query
            /// that would pass it is refused with 606 naming this key. Default 1 GiB; at least
            /// `query_result_bytes_max`.
            query_results_bytes_max_per_node: u64 = 1 << 30,
            /// Bytes of one page of a result sent to an IoTDB client (as results are counted): a
            /// fetch answers fewer rows than its `fetchSize` when rows are wide, and at least one.
            /// At most `dn_rpc_max_message_bytes` is used. Default 16 MiB; at least 64 KiB.
            query_page_bytes_max: u64 = 16 << 20,
            /// Queries one IoTDB client connection keeps open (results not yet read to the end);
            /// opening one more drops the oldest. Default 64; at least 1.
            dn_client_queries_per_connection_max: u32 = 64,
            /// Milliseconds a query may live, from its statement to its last page (IoTDB's
            /// `query_timeout_threshold`): past it the query is stopped, answered 720
            /// QUERY_TIMEOUT and closed, its memory given back. A smaller timeout a client sends
            /// with its statement wins. Default 60000; 0 never.
            query_timeout_ms: u64 = 60_000,
        },
    }

    /// Command-line form: `--config file` plus every key as `--kebab-case-name value`, which
    /// overrides the file.
    #[command(name = "datanode", about = "Fencepost DataNode")]
    pub struct DataNodeArgs;
}

impl DataNodeConfig {
    /// Reads a TOML file; unknown keys are an error.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        read_toml(path)
    }

    /// Parses TOML text; unknown keys are an error.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        parse_toml(text)
    }

    /// Defaults, then the `--config` file, then the command-line values; validated.
    pub fn from_args(args: DataNodeArgs) -> Result<Self, ConfigError> {
        let mut c = match &args.config {
            Some(path) => Self::from_file(path)?,
            None => Self::default(),
        };
        c.overlay_args(args);
        c.validate()?;
        Ok(c)
    }

    /// Bytes of one page of a result sent to an IoTDB client: `query_page_bytes_max`, at most
    /// `dn_rpc_max_message_bytes`.
    pub fn page_bytes_max(&self) -> usize {
        self.query
            .query_page_bytes_max
            .min(self.rpc.dn_rpc_max_message_bytes) as usize
    }

    /// Descriptors this DataNode may hold with its limits all reached: the session port's
    /// connections, the internal ones, the sealed-file cache and [`DESCRIPTORS_RESERVED`].
    /// Checked against `RLIMIT_NOFILE` at start.
    pub fn descriptors_needed(&self) -> u64 {
        self.rpc.session_connections_max() as u64
            + u64::from(self.internal.dn_internal_max_connections)
            + self.storage.sealed_open_files_max
            + DESCRIPTORS_RESERVED
    }

    /// Checks every key once at start-up, with an error that names the key: each section its
    /// own keys, then what ties keys of two sections.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.rpc.validate()?;
        self.internal.validate()?;
        self.node.validate()?;
        self.writes.validate()?;
        self.raft.validate()?;
        self.snapshot.validate()?;
        self.storage.validate()?;
        self.compaction.validate()?;
        self.query.validate()?;
        // One message of `dn_rpc_max_message_bytes` must fit where messages wait, and two
        // snapshot chunks in one.
        let message_bytes = self.rpc.dn_rpc_max_message_bytes;
        let chunk_bytes = self.snapshot.dn_snapshot_chunk_bytes;
        if chunk_bytes < 4096 || chunk_bytes > message_bytes / 2 {
            return Err(config_error(
                "dn_snapshot_chunk_bytes",
                "must be at least 4096 and at most half of dn_rpc_max_message_bytes",
            ));
        }
        for (key, value) in [
            (
                "dn_raft_transport_queue_bytes_max",
                self.raft.dn_raft_transport_queue_bytes_max,
            ),
            (
                "dn_raft_step_queue_bytes_max",
                self.raft.dn_raft_step_queue_bytes_max,
            ),
        ] {
            if value < message_bytes {
                return Err(config_error(
                    key,
                    "must be at least dn_rpc_max_message_bytes (one message must fit)",
                ));
            }
        }
        Ok(())
    }
}

impl RpcSection {
    /// The session server's request bound (its connections are the port's, [`Self::port_limits`]).
    pub fn session_limits(&self) -> runtime::ServerLimits {
        runtime::ServerLimits {
            connections_max: self.session_connections_max(),
            requests_max: self.dn_rpc_max_concurrent_requests as usize,
        }
    }

    /// The session port's connection budgets, per protocol and stage.
    pub fn port_limits(&self) -> runtime::PortLimits {
        runtime::PortLimits {
            handshakes_max: self.dn_rpc_handshake_connections_max as usize,
            handshake_timeout: std::time::Duration::from_millis(self.dn_rpc_handshake_timeout_ms),
            grpc_connections_max: self.dn_rpc_grpc_connections_max as usize,
            thrift_sessions_max: self.dn_rpc_max_concurrent_client_num as usize,
            grpc_idle_timeout: (self.dn_rpc_idle_timeout_ms > 0)
                .then(|| std::time::Duration::from_millis(self.dn_rpc_idle_timeout_ms)),
        }
    }

    /// Client connections the session port may hold at once, over its three budgets.
    pub fn session_connections_max(&self) -> usize {
        [
            self.dn_rpc_max_concurrent_client_num,
            self.dn_rpc_handshake_connections_max,
            self.dn_rpc_grpc_connections_max,
        ]
        .iter()
        .map(|&n| n as usize)
        .sum()
    }

    fn validate(&self) -> Result<(), ConfigError> {
        check_socket_address("dn_rpc_address", &self.dn_rpc_address)?;
        check_nonzero(&[
            (
                "dn_rpc_max_concurrent_client_num",
                self.dn_rpc_max_concurrent_client_num.into(),
            ),
            (
                "dn_rpc_handshake_connections_max",
                self.dn_rpc_handshake_connections_max.into(),
            ),
            (
                "dn_rpc_grpc_connections_max",
                self.dn_rpc_grpc_connections_max.into(),
            ),
            (
                "dn_rpc_max_concurrent_requests",
                self.dn_rpc_max_concurrent_requests.into(),
            ),
        ])?;
        if self.dn_rpc_max_message_bytes < 1 << 20 || self.dn_rpc_max_message_bytes > 1 << 31 {
            return Err(config_error(
                "dn_rpc_max_message_bytes",
                "must be between 1 MiB and 2 GiB",
            ));
        }
        for (key, value) in [
            (
                "dn_rpc_handshake_timeout_ms",
                self.dn_rpc_handshake_timeout_ms,
            ),
            ("dn_rpc_frame_timeout_ms", self.dn_rpc_frame_timeout_ms),
        ] {
            if value < 100 {
                return Err(config_error(key, "must be at least 100"));
            }
        }
        if self.dn_rpc_unauthenticated_frame_bytes_max < 1024
            || self.dn_rpc_unauthenticated_frame_bytes_max > self.dn_rpc_max_message_bytes
        {
            return Err(config_error(
                "dn_rpc_unauthenticated_frame_bytes_max",
                "must be at least 1024 (an openSession must fit) and at most \
                 dn_rpc_max_message_bytes",
            ));
        }
        Ok(())
    }
}

impl InternalSection {
    /// The seed ConfigNodes as `host:port`.
    pub fn seed_config_nodes(&self) -> Vec<String> {
        self.dn_seed_config_nodes
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// How this node's connections are built and watched: connect within `dn_rpc_timeout_ms`,
    /// keepalive from `dn_rpc_keepalive_interval_ms` and `dn_rpc_keepalive_timeout_ms`.
    pub fn channel_config(&self) -> runtime::ChannelConfig {
        runtime::ChannelConfig::with_keepalive(
            self.dn_rpc_timeout_ms,
            self.dn_rpc_keepalive_interval_ms,
            self.dn_rpc_keepalive_timeout_ms,
        )
    }

    /// The internal server's bounds (raft streams count as connections, not requests).
    pub fn server_limits(&self) -> runtime::ServerLimits {
        runtime::ServerLimits {
            connections_max: self.dn_internal_max_connections as usize,
            requests_max: self.dn_internal_max_concurrent_requests as usize,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        check_socket_address("dn_internal_address", &self.dn_internal_address)?;
        let seeds = self.seed_config_nodes();
        if seeds.is_empty() {
            return Err(config_error(
                "dn_seed_config_nodes",
                "at least one ConfigNode is needed",
            ));
        }
        for seed in &seeds {
            proto::parse_endpoint(seed)
                .map_err(|e| config_error("dn_seed_config_nodes", format!("{seed:?}: {e}")))?;
        }
        check_nonzero(&[
            ("dn_confignode_deadline_ms", self.dn_confignode_deadline_ms),
            ("dn_rpc_timeout_ms", self.dn_rpc_timeout_ms),
            (
                "dn_internal_max_connections",
                self.dn_internal_max_connections.into(),
            ),
            (
                "dn_internal_max_concurrent_requests",
                self.dn_internal_max_concurrent_requests.into(),
            ),
        ])?;
        check_keepalive(
            "dn_rpc_keepalive_interval_ms",
            self.dn_rpc_keepalive_interval_ms,
            "dn_rpc_keepalive_timeout_ms",
            self.dn_rpc_keepalive_timeout_ms,
        )
    }
}

impl NodeSection {
    /// Applies `malloc_mmap_threshold_bytes` and `malloc_trim_threshold_bytes` to this process's
    /// allocator (glibc only; elsewhere nothing happens). Process-wide, so the `datanode` binary
    /// calls it once; in-process test clusters leave the allocator alone.
    pub fn tune_allocator(&self) {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        for (param, name, value) in [
            (
                libc::M_MMAP_THRESHOLD,
                "malloc_mmap_threshold_bytes",
                self.malloc_mmap_threshold_bytes,
            ),
            (
                libc::M_TRIM_THRESHOLD,
                "malloc_trim_threshold_bytes",
                self.malloc_trim_threshold_bytes,
            ),
        ] {
            if value == 0 {
                continue;
            }
            // SAFETY: mallopt only sets an allocator parameter; `validate` keeps the value in
            // an int's range.
            if unsafe { libc::mallopt(param, value as libc::c_int) } != 1 {
                tracing::warn!("mallopt refused {name} = {value}");
            }
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        check_socket_address("dn_metrics_address", &self.dn_metrics_address)?;
        if self.dn_data_dir.as_os_str().is_empty() {
            return Err(config_error("dn_data_dir", "must not be empty"));
        }
        if self.malloc_mmap_threshold_bytes > MALLOC_MMAP_THRESHOLD_MAX {
            return Err(config_error(
                "malloc_mmap_threshold_bytes",
                format!("must be <= {MALLOC_MMAP_THRESHOLD_MAX} (glibc's maximum)"),
            ));
        }
        if self.malloc_trim_threshold_bytes > i32::MAX as u64 {
            return Err(config_error(
                "malloc_trim_threshold_bytes",
                "must be below 2 GiB (mallopt takes an int)",
            ));
        }
        Ok(())
    }
}

impl WritesSection {
    fn validate(&self) -> Result<(), ConfigError> {
        check_nonzero(&[
            (
                "data_region_write_retry_wait_ms",
                self.data_region_write_retry_wait_ms,
            ),
            ("dn_write_timeout_ms", self.dn_write_timeout_ms),
        ])?;
        let partitions_max = common::FETCH_PARTITIONS_SLOTS_MAX;
        if !(1..=partitions_max).contains(&(self.dn_tablet_time_partitions_max as usize)) {
            return Err(config_error(
                "dn_tablet_time_partitions_max",
                format!(
                    "must be in 1..={partitions_max} (the time slots one FetchPartitions request \
                     may ask of the ConfigNode)"
                ),
            ));
        }
        if self.tablet_rows_max == 0 || self.cache_entries_max == 0 {
            return Err(config_error(
                "tablet_rows_max",
                "tablet_rows_max and cache_entries_max must be > 0",
            ));
        }
        Ok(())
    }
}

impl RaftSection {
    fn validate(&self) -> Result<(), ConfigError> {
        check_nonzero(&[
            ("dn_raft_tick_ms", self.dn_raft_tick_ms),
            (
                "dn_raft_unapplied_bytes_max",
                self.dn_raft_unapplied_bytes_max,
            ),
        ])?;
        if self.dn_raft_election_ticks < 3 {
            return Err(config_error(
                "dn_raft_election_ticks",
                "must be >= 3 (the raft heartbeat runs every election_ticks / 5 ticks, at least 1)",
            ));
        }
        if self.wal_segment_bytes < 4096 {
            return Err(config_error("wal_segment_bytes", "must be >= 4096"));
        }
        Ok(())
    }
}

impl SnapshotSection {
    /// `dn_snapshot_chunk_bytes` is checked with `dn_rpc_max_message_bytes`, by
    /// [`DataNodeConfig::validate`].
    fn validate(&self) -> Result<(), ConfigError> {
        check_nonzero(&[
            (
                "dn_raft_snapshot_builds_max",
                self.dn_raft_snapshot_builds_max,
            ),
            ("dn_snapshot_receives_max", self.dn_snapshot_receives_max),
            ("dn_snapshot_keep_ms", self.dn_snapshot_keep_ms),
        ])
    }
}

impl StorageSection {
    fn validate(&self) -> Result<(), ConfigError> {
        check_nonzero(&[
            ("memtable_flush_bytes", self.memtable_flush_bytes),
            ("memtable_flush_age_ms", self.memtable_flush_age_ms),
            ("sealed_open_files_max", self.sealed_open_files_max),
        ])?;
        if self.memtable_budget_bytes < self.memtable_flush_bytes {
            return Err(config_error(
                "memtable_budget_bytes",
                "must be at least memtable_flush_bytes",
            ));
        }
        if self.flush_thread_nice > 19 {
            return Err(config_error("flush_thread_nice", "must be 0..=19"));
        }
        Ok(())
    }
}

impl CompactionSection {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.compaction_thread_nice > 19 {
            return Err(config_error("compaction_thread_nice", "must be 0..=19"));
        }
        if self.compaction_concurrency < 1 {
            return Err(config_error("compaction_concurrency", "must be at least 1"));
        }
        if self.compaction_workers_per_region < 1 {
            return Err(config_error(
                "compaction_workers_per_region",
                "must be at least 1",
            ));
        }
        if self.compaction_files_min < 2 {
            return Err(config_error("compaction_files_min", "must be at least 2"));
        }
        Ok(())
    }
}

impl QuerySection {
    fn validate(&self) -> Result<(), ConfigError> {
        check_nonzero(&[(
            "dn_client_queries_per_connection_max",
            self.dn_client_queries_per_connection_max.into(),
        )])?;
        if self.query_result_bytes_max < 1 << 20 {
            return Err(config_error(
                "query_result_bytes_max",
                "must be at least 1 MiB",
            ));
        }
        if self.query_results_bytes_max_per_node < self.query_result_bytes_max {
            return Err(config_error(
                "query_results_bytes_max_per_node",
                "must be at least query_result_bytes_max",
            ));
        }
        if self.query_page_bytes_max < 64 << 10 {
            return Err(config_error(
                "query_page_bytes_max",
                "must be at least 64 KiB",
            ));
        }
        if self.query_points_max == 0 {
            return Err(config_error("query_points_max", "must be > 0"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use runtime::config::NodeConfig;

    /// The key `validate` names once `tweak` has changed the defaults.
    fn invalid(tweak: impl FnOnce(&mut DataNodeConfig)) -> &'static str {
        let mut c = DataNodeConfig::default();
        tweak(&mut c);
        c.validate().unwrap_err().key
    }

    #[test]
    fn defaults_validate_and_match_the_issue() {
        let c = DataNodeConfig::default();
        c.validate().unwrap();
        assert_eq!(c.rpc.dn_rpc_address, "127.0.0.1:6667");
        assert_eq!(c.internal.dn_internal_address, "127.0.0.1:10730");
        assert_eq!(c.internal.dn_seed_config_nodes, "127.0.0.1:10710");
        assert_eq!(c.node.dn_metrics_address, "127.0.0.1:9091");
        assert_eq!(c.writes.data_region_write_retry_max, 5);
        assert_eq!(c.writes.data_region_write_retry_wait_ms, 1000);
        assert_eq!(c.writes.remote_write_max_retry_ms, 60_000);
        assert_eq!(c.writes.dn_tablet_time_partitions_max, 1000);
        assert_eq!(c.internal.dn_rpc_keepalive_interval_ms, 1000);
        assert_eq!(c.internal.dn_rpc_keepalive_timeout_ms, 2000);
        // A dead connection is given up within 3 s, well inside one fence (20 s by default).
        assert_eq!(
            c.internal.channel_config().dead_connection_bound(),
            std::time::Duration::from_secs(3)
        );
    }

    #[test]
    fn the_example_file_holds_every_default() {
        let text = include_str!("../datanode.example.toml");
        assert_eq!(
            DataNodeConfig::from_toml(text).unwrap(),
            DataNodeConfig::default()
        );
    }

    #[test]
    fn command_line_overrides_the_file_and_errors_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dn.toml");
        std::fs::write(
            &file,
            "dn_rpc_address = \"127.0.0.1:7000\"\nremote_write_max_retry_ms = 5\n",
        )
        .unwrap();
        let args = DataNodeArgs::parse_from([
            "datanode",
            "--config",
            file.to_str().unwrap(),
            "--remote-write-max-retry-ms",
            "9",
        ]);
        let c = DataNodeConfig::from_args(args).unwrap();
        assert_eq!(c.rpc.dn_rpc_address, "127.0.0.1:7000");
        assert_eq!(c.writes.remote_write_max_retry_ms, 9);

        let e = DataNodeConfig::from_toml("dn_metrics_address = \"nowhere\"")
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(e.key, "dn_metrics_address");
        let e = DataNodeConfig::from_toml("no_such_key = 1").unwrap_err();
        assert!(e.reason.contains("no_such_key"), "{e}");
        // The file stays flat: a section's name is no key.
        let e = DataNodeConfig::from_toml("[raft]\ndn_raft_tick_ms = 10").unwrap_err();
        assert!(e.reason.contains("`raft`"), "{e}");
        let e = DataNodeConfig::from_toml("dn_raft_tick_ms = \"10\"").unwrap_err();
        assert_eq!(e.key, "dn_raft_tick_ms", "{e}");
        assert_eq!(invalid(|c| c.raft.dn_raft_tick_ms = 0), "dn_raft_tick_ms");
        for bad in [0, 100_001] {
            assert_eq!(
                invalid(|c| c.writes.dn_tablet_time_partitions_max = bad),
                "dn_tablet_time_partitions_max"
            );
        }
        assert_eq!(
            invalid(|c| c.rpc.dn_rpc_max_concurrent_requests = 0),
            "dn_rpc_max_concurrent_requests"
        );
        assert_eq!(
            invalid(|c| c.raft.dn_raft_step_queue_bytes_max = 1 << 20),
            "dn_raft_step_queue_bytes_max",
            "one message must fit"
        );
        assert_eq!(
            invalid(|c| c.snapshot.dn_snapshot_chunk_bytes = 33 << 20),
            "dn_snapshot_chunk_bytes",
            "two chunks must fit in one message"
        );
        for (interval, timeout, key) in [
            (0, 2000, "dn_rpc_keepalive_interval_ms"),
            (1000, 99, "dn_rpc_keepalive_timeout_ms"),
            (1000, 60_001, "dn_rpc_keepalive_timeout_ms"),
        ] {
            let e = invalid(|c| {
                c.internal.dn_rpc_keepalive_interval_ms = interval;
                c.internal.dn_rpc_keepalive_timeout_ms = timeout;
            });
            assert_eq!(e, key);
        }
    }

    #[test]
    fn every_section_checks_its_keys() {
        type Tweak = fn(&mut DataNodeConfig);
        let cases: [(&str, Tweak); 10] = [
            ("dn_rpc_frame_timeout_ms", |c| {
                c.rpc.dn_rpc_frame_timeout_ms = 99
            }),
            ("dn_seed_config_nodes", |c| {
                c.internal.dn_seed_config_nodes = " , ".into()
            }),
            ("dn_data_dir", |c| c.node.dn_data_dir = PathBuf::new()),
            ("tablet_rows_max", |c| c.writes.cache_entries_max = 0),
            ("dn_raft_election_ticks", |c| {
                c.raft.dn_raft_election_ticks = 2
            }),
            ("dn_snapshot_keep_ms", |c| {
                c.snapshot.dn_snapshot_keep_ms = 0
            }),
            ("memtable_budget_bytes", |c| {
                c.storage.memtable_budget_bytes = c.storage.memtable_flush_bytes - 1
            }),
            ("compaction_files_min", |c| {
                c.compaction.compaction_files_min = 1
            }),
            ("query_page_bytes_max", |c| c.query.query_page_bytes_max = 1),
            ("dn_client_queries_per_connection_max", |c| {
                c.query.dn_client_queries_per_connection_max = 0
            }),
        ];
        for (key, tweak) in cases {
            assert_eq!(invalid(tweak), key);
        }
    }

    #[test]
    fn every_key_is_a_documented_flag_in_a_section_of_at_most_12() {
        let checked =
            runtime::config::check_every_key_is_a_documented_flag::<DataNodeConfig, DataNodeArgs>()
                .unwrap();
        assert_eq!(checked, DataNodeConfig::KEYS.len());
        for key in DataNodeConfig::KEYS {
            let in_section = DataNodeConfig::KEYS
                .iter()
                .filter(|k| k.section == key.section)
                .count();
            assert!(
                in_section <= 12,
                "section {}: {in_section} keys",
                key.section
            );
        }
    }

    #[test]
    fn a_flat_file_of_every_key_reads_back_the_same() {
        let mut c = DataNodeConfig::default();
        assert_eq!(DataNodeConfig::from_toml(&c.to_toml()).unwrap(), c);
        c.raft.dn_raft_tick_ms = 7;
        c.node.dn_data_dir = "/srv/dn".into();
        assert_eq!(DataNodeConfig::from_toml(&c.to_toml()).unwrap(), c);
    }

    #[test]
    fn operating_md_lists_every_key() {
        let doc = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operating.md"));
        runtime::docs::check_generated_section(
            doc,
            "datanode-config",
            &DataNodeConfig::key_table(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
}
