//! Plain views of the cluster, region and lease answers (the ConfigNode's view, forwarded by the
//! answering DataNode): what `SHOW DATABASES`, `SHOW TIMESERIES`, `SHOW CLUSTER`, `SHOW REGIONS`
//! and the lease views show. Endpoints are `host:port`; an absent one is the empty string. `proto`
//! fills them from its messages and its messages from them.

/// One database (`SHOW DATABASES`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseView {
    /// Its path, e.g. `root.sg`.
    pub name: String,
    /// Its time to live in ms; `None` when none is set (IoTDB's INF).
    pub ttl_ms: Option<i64>,
    /// The metadata's replicas: the ConfigNodes.
    pub schema_replication_factor: u32,
    /// The replicas of each of its data regions.
    pub data_replication_factor: u32,
    /// Where time partitions start, in ms.
    pub time_partition_origin_ms: i64,
    /// The length of a time partition, in ms.
    pub time_partition_interval_ms: i64,
    /// A table-model database: only tables live in it, and tree statements do not see it.
    pub table_model: bool,
}

/// `SHOW DATABASES` as the ConfigNode answers it: every database, and the cluster-wide settings
/// IoTDB's SHOW DATABASES repeats on each row ([`DatabasesView::into_rows`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatabasesView {
    /// Each database's path and time to live in ms (`None` when none is set, IoTDB's INF), in
    /// the ConfigNode's order.
    pub databases: Vec<(String, Option<i64>)>,
    /// Those of `databases` that are table-model databases.
    pub table_databases: std::collections::BTreeSet<String>,
    /// The metadata's replicas: the ConfigNodes.
    pub schema_replication_factor: u32,
    /// The replicas of each data region.
    pub data_replication_factor: u32,
    /// Where time partitions start, in ms.
    pub time_partition_origin_ms: i64,
    /// The length of a time partition, in ms.
    pub time_partition_interval_ms: i64,
    /// The answering ConfigNode's wall clock when it answered, in ms since the epoch.
    pub now_ms: i64,
}

impl DatabasesView {
    /// One row per database, each with the cluster-wide settings.
    pub fn into_rows(self) -> Vec<DatabaseView> {
        self.databases
            .into_iter()
            .map(|(name, ttl_ms)| DatabaseView {
                table_model: self.table_databases.contains(&name),
                name,
                ttl_ms,
                schema_replication_factor: self.schema_replication_factor,
                data_replication_factor: self.data_replication_factor,
                time_partition_origin_ms: self.time_partition_origin_ms,
                time_partition_interval_ms: self.time_partition_interval_ms,
            })
            .collect()
    }
}

/// One series (`SHOW TIMESERIES`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeseriesView {
    /// Its database.
    pub database: String,
    /// Its device.
    pub device: String,
    /// Its measurement.
    pub measurement: String,
    /// Its type.
    pub data_type: crate::DataType,
    /// A DELETE TIMESERIES / DROP DATABASE is in progress.
    pub pending_delete: bool,
    /// The declared encoding (`GORILLA`, ...), `""` when none was declared.
    pub encoding: String,
    /// The declared compressor (`LZ4`, ...), `""` when none was declared.
    pub compressor: String,
    /// Its alias, tags and attributes.
    pub meta: SeriesMeta,
    /// Its database is the table model's: the series is a table's column on one of its
    /// devices, which tree statements do not see.
    pub table_model: bool,
}

/// A series' alias, tags and attributes, as IoTDB's `createTimeseries` declares them: the alias
/// is a second name for the series within its device; tags and attributes are key-value labels
/// that SHOW TIMESERIES lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeriesMeta {
    /// The second name, if any.
    pub alias: Option<String>,
    /// Tags, by key.
    pub tags: std::collections::BTreeMap<String, String>,
    /// Attributes, by key.
    pub attributes: std::collections::BTreeMap<String, String>,
}

impl SeriesMeta {
    /// True when nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.alias.is_none() && self.tags.is_empty() && self.attributes.is_empty()
    }
}

/// `SHOW CLUSTER`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterView {
    /// The ConfigNode raft term.
    pub config_node_term: u64,
    /// The version of the cluster metadata.
    pub metadata_version: u64,
    /// Every ConfigNode.
    pub config_nodes: Vec<ConfigNodeView>,
    /// Every DataNode.
    pub data_nodes: Vec<DataNodeView>,
}

/// One ConfigNode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigNodeView {
    /// Its id.
    pub config_node_id: u64,
    /// Its address.
    pub endpoint: String,
    /// "Leader", "Follower" or "Unknown", as the answering ConfigNode sees it.
    pub role: String,
}

/// One DataNode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataNodeView {
    /// Its id.
    pub data_node_id: u64,
    /// Where clients reach it (SessionService).
    pub rpc_endpoint: String,
    /// Where nodes reach it.
    pub internal_endpoint: String,
    /// "Running", "Unknown" or "Removing".
    pub status: String,
    /// Bumped on every registration (restart).
    pub incarnation_epoch: u64,
    /// The highest incarnation it proved it ran (a registration, or a heartbeat reply): a data
    /// directory holding an older one is refused.
    pub confirmed_incarnation_epoch: u64,
}

/// One data region group (`SHOW REGIONS`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionView {
    /// Its id.
    pub region_id: u64,
    /// Its database.
    pub database: String,
    /// DataNodes holding a replica.
    pub data_node_ids: Vec<u64>,
    /// The preferred leader.
    pub preferred_leader_id: u64,
    /// The leader as last reported by heartbeats (0 = unknown).
    pub leader_id: u64,
    /// A migration in progress, `(from, to)`: the DataNode `to` hosts a joining replica that
    /// takes `from`'s place once the region's raft group swapped them.
    pub migration: Option<(u64, u64)>,
}

/// `SHOW LEASES`: the ConfigNode's view of every DataNode's metadata lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeasesView {
    /// A DataNode fences itself after this long without a processed heartbeat, in ms.
    pub metadata_lease_fence_ms: u64,
    /// Extra margin before the ConfigNode proceeds without a fenced node, in ms.
    pub lease_proceed_margin_ms: u64,
    /// One entry per DataNode.
    pub leases: Vec<LeaseView>,
}

/// One DataNode's lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseView {
    /// The DataNode.
    pub data_node_id: u64,
    /// Its incarnation.
    pub incarnation_epoch: u64,
    /// Milliseconds since the ConfigNode leader's last successful contact.
    pub last_contact_age_ms: u64,
    /// The lease is live as far as the ConfigNode can tell.
    pub holds_lease: bool,
    /// The DataNode has certainly fenced itself.
    pub fenced: bool,
    /// The DataNode's status.
    pub status: String,
}

/// `SHOW LOCAL LEASE`: the answering DataNode's own lease, from its local state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalLeaseView {
    /// The DataNode's id.
    pub data_node_id: u64,
    /// Its session address.
    pub endpoint: String,
    /// The lease state machine's state (IoTDB's names: NORMAL, NEED_CLEAR, ...).
    pub state: String,
    /// Whether it is fenced now.
    pub fenced: bool,
    /// The incarnation epoch of this run.
    pub incarnation: u64,
    /// Milliseconds since its last processed heartbeat; `None` before the first.
    pub heartbeat_age_ms: Option<u64>,
    /// The fence threshold in force.
    pub fence_ms: u64,
}

/// `SHOW QUERIES`: one statement a DataNode runs (or whose result it holds open).
#[derive(Clone, Debug, PartialEq)]
pub struct QueryView {
    /// When it started, ms since the epoch.
    pub started_ms: i64,
    /// Its id, `yyyyMMdd_HHmmss_<sequence>_<DataNode id>`.
    pub id: String,
    /// The DataNode running it.
    pub data_node: u64,
    /// Seconds since it started.
    pub elapsed_secs: f32,
    /// Its text (at most 1 KiB of it).
    pub statement: String,
    /// The user who sent it.
    pub user: String,
}

/// `EXPLAIN ANALYZE`: the reads of one kind a statement made of one region on one replica
/// (its fragment there), summed over the calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragmentView {
    /// What was read: `raw`, `last` or `aggregate`.
    pub kind: &'static str,
    /// The region.
    pub region: u64,
    /// The replica that answered: its internal address.
    pub replica: String,
    /// Whether that replica is on the coordinating DataNode (no network hop).
    pub local: bool,
    /// Calls made of it.
    pub calls: u64,
    /// Series asked, summed over the calls.
    pub series: u64,
    /// What came back: points (`raw`, `last`) or window partials (`aggregate`).
    pub rows: u64,
    /// Microseconds from asking to the answer, retries included, summed over the calls.
    pub elapsed_us: u64,
    /// Attempts past the first (a leader moved, a replica was fenced).
    pub retries: u64,
}

impl FragmentView {
    /// Adds `other`'s calls (of the same kind, region and replica) to these.
    pub fn absorb(&mut self, other: &FragmentView) {
        self.calls += other.calls;
        self.series += other.series;
        self.rows += other.rows;
        self.elapsed_us += other.elapsed_us;
        self.retries += other.retries;
    }

    /// Whether `other` is the same fragment: same kind, region and replica.
    pub fn same_place(&self, other: &FragmentView) -> bool {
        self.kind == other.kind && self.region == other.region && self.replica == other.replica
    }

    /// Adds `read` to `fragments`: summed into the fragment of its place, or a new one.
    pub fn record_into(fragments: &mut Vec<FragmentView>, read: FragmentView) {
        match fragments.iter_mut().find(|f| f.same_place(&read)) {
            Some(known) => known.absorb(&read),
            None => fragments.push(read),
        }
    }
}

/// One replica's digest (`fencepost verify`): comparable with another replica's only at the same
/// applied index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionDigestView {
    /// The region.
    pub region_id: u64,
    /// The DataNode holding this replica.
    pub data_node_id: u64,
    /// The raft index the replica has applied.
    pub applied_index: u64,
    /// FNV-1a 64 over every series' type and points.
    pub digest: u64,
    /// Whether this replica leads the region.
    pub is_leader: bool,
}
