//! `ConfigNodeConfig`: every key with its default and unit, loaded from TOML (`--config file`)
//! and overridden by `--kebab-case-name value` on the command line, validated once at start-up.
//!
//! The keys are grouped by what they bound into sections of at most 12 (`config.lease`,
//! `config.rpc`, ...); the TOML file and the flags stay flat. Each section checks its own keys,
//! [`ConfigNodeConfig::validate`] what ties two sections.

use std::path::{Path, PathBuf};

use runtime::config::{
    check_host_address, check_keepalive, check_nonzero, config_error, parse_toml, read_toml,
};

use crate::error::ConfigError;

/// Milliseconds a ConfigNode waits to establish a connection (to a DataNode or a raft peer).
pub const CONNECT_TIMEOUT_MS: u64 = 1000;

/// Largest `login_failures_max`: the leader keeps a time per failure for up to
/// `users::LOGIN_TRACKED_USERS_MAX` names, so this bounds that memory (80 MB at most).
pub const LOGIN_FAILURES_MAX: u32 = 1000;

runtime::node_config! {
    /// The ConfigNode's settings. Cluster-wide values (fence, partitioning, replication) are handed
    /// to DataNodes at registration so that every node agrees.
    pub struct ConfigNodeConfig {
        /// The node: its id, its address and the group it starts in, its files, where it is
        /// scraped.
        node: NodeSection {
            /// This ConfigNode's id, also its raft peer id; must appear in `cn_initial_members`.
            /// Default 1.
            cn_node_id: u64 = 1,
            /// `host:port` of the one gRPC service for DataNodes, clients and ConfigNode peers.
            /// Default `127.0.0.1:10710`.
            cn_internal_address: String = "127.0.0.1:10710".into(),
            /// The ConfigNode raft group at first start: comma-separated `id@host:port` (1 or 3
            /// members). Default: this node alone (`<cn_node_id>@<cn_internal_address>`),
            /// written as "".
            cn_initial_members: String = String::new(),
            /// Directory of the raft log. Default `data/confignode`.
            cn_data_dir: PathBuf = PathBuf::from("data/confignode"),
            /// `host:port` of the Prometheus text metrics endpoint. Default `127.0.0.1:9092`.
            cn_metrics_address: String = "127.0.0.1:9092".into(),
        },
        /// The ConfigNode group's raft: timing and snapshots.
        raft: RaftSection {
            /// Milliseconds between two ConfigNode raft ticks. Default 100.
            cn_raft_tick_ms: u64 = 100,
            /// Raft ticks without a leader before a ConfigNode campaigns (effective timeout is
            /// drawn from `(n, 2n]`). Default 10 (1 to 2 s with the default tick).
            cn_raft_election_ticks: u64 = 10,
            /// Applied entries between two snapshots of the metadata (written to
            /// `cn_data_dir/snapshot`, after which the raft log is compacted up to it). Default
            /// 10000.
            cn_snapshot_interval_entries: u64 = 10_000,
        },
        /// DataNodes' leases and the fence protocol: heartbeats, fences, failure detection,
        /// invalidations and fence-floor rounds.
        lease: LeaseSection {
            /// Milliseconds between two heartbeats from the leader to every DataNode. Default 1000.
            heartbeat_interval_ms: u64 = 1000,
            /// A DataNode trusts its caches while its last processed heartbeat is younger than this
            /// many milliseconds (design §4). Default 20000.
            metadata_lease_fence_ms: u64 = 20_000,
            /// Extra milliseconds the ConfigNode waits past `metadata_lease_fence_ms` before it
            /// counts an unreachable DataNode as fenced (covers clock-rate differences and
            /// heartbeat processing). Every ConfigNode of a cluster must use the same fence and
            /// margin, or DataNodes refuse the leader's heartbeats. Default 5000; more than 2 ×
            /// `cn_raft_election_ticks` × `cn_raft_tick_ms`.
            lease_proceed_margin_ms: u64 = 5000,
            /// Milliseconds without contact after which a DataNode's status becomes Unknown.
            /// Default 20000.
            failure_detector_threshold_ms: u64 = 20_000,
            /// Milliseconds between two invalidation broadcasts of a pending fence operation.
            /// Default 1000.
            invalidation_retry_interval_ms: u64 = 1000,
            /// Milliseconds a DataNode may wait for operations that read the old metadata before it
            /// answers an invalidation (sent in the request); the ConfigNode waits that long plus 2
            /// s for the answer. Default 10000.
            invalidation_drain_timeout_ms: u64 = 10_000,
            /// Milliseconds between two fence-floor rounds (REVIEW N9): after a fence operation
            /// deleted something, and while none is pending, the leader has every DataNode re-stamp
            /// its cached schemas with the current metadata version and then raises every region's
            /// floor to it, so regions drop the series deletions below it once no older file holds
            /// the series. A round costs one invalidation per DataNode and one log entry per
            /// region. 0 turns rounds off (deletions are then kept for good). Default 60000.
            fence_floor_interval_ms: u64 = 60_000,
        },
        /// Replication and partitioning, handed to every DataNode at registration.
        partitioning: PartitioningSection {
            /// Replicas per data region group. Default 1.
            data_replication_factor: u32 = 1,
            /// Data region groups per database. Default 2.
            data_region_group_num_per_database: u32 = 2,
            /// Number of series slots (IoTDB `series_slot_num`). Default 1000.
            series_slot_num: u32 = 1000,
            /// Width of a time partition in milliseconds. Default 604800000 (7 days).
            #[arg(allow_hyphen_values = true)]
            time_partition_interval_ms: i64 = 604_800_000,
            /// Partitions — partition-table entries, one per (series slot, time slot) pair written
            /// — one database may hold. An allocation that would pass it is refused whole with 700
            /// ILLEGAL_PARAMETER (the write is final: retrying cannot make room). Partitions are
            /// only freed by DROP DATABASE, so the cap must cover a database's whole life: the
            /// default is 1000 series slots × 1000 time slots, about 19 years of 7-day partitions
            /// with every series slot in use, while a full database is about 30 MB of snapshot
            /// (below the 64 MiB a snapshot message may take) and an allocation into it stays a few
            /// log-n lookups per slot. The leader puts it into every allocation command, so every
            /// ConfigNode replica decides alike, whatever its own file says. Default 1000000; at
            /// least 1.
            cn_database_partitions_max: u64 = 1_000_000,
        },
        /// The gRPC server and every connection: message size, connection and request budgets,
        /// keepalive.
        rpc: RpcSection {
            /// Largest gRPC message the ConfigNode takes or sends, raft messages between
            /// ConfigNodes included (a metadata snapshot or a DataNode's metadata pull must fit).
            /// Default 64 MiB; 1 MiB..=2 GiB.
            cn_rpc_max_message_bytes: u64 = 64 << 20,
            /// Connections (DataNodes, clients, peer ConfigNodes' raft streams) this ConfigNode
            /// holds open at once; one more is closed as soon as it is accepted. Default 1000; at
            /// least 1.
            cn_rpc_max_connections: u32 = 1000,
            /// Requests this ConfigNode runs at once, raft message streams aside; one more is
            /// answered gRPC `RESOURCE_EXHAUSTED` at once (retryable: it was not run).
            /// Default 1024; at least 1.
            cn_rpc_max_concurrent_requests: u32 = 1024,
            /// Milliseconds between two HTTP/2 keepalive PINGs on every connection of this
            /// ConfigNode (heartbeats, invalidations and region writes to DataNodes, raft streams
            /// to its peers) and from its server to its clients, idle connections included. Default
            /// 1000; 100..=60000.
            cn_rpc_keepalive_interval_ms: u64 = 1000,
            /// Milliseconds a PING may go unanswered before its connection is closed and the next
            /// call connects afresh; also sets `TCP_USER_TIMEOUT` (interval + timeout). Keep
            /// interval + timeout well below `metadata_lease_fence_ms`: a heartbeat connection to a
            /// DataNode behind a partition must be given up before the first heartbeat after the
            /// heal is due. Default 2000; 100..=60000.
            cn_rpc_keepalive_timeout_ms: u64 = 2000,
        },
        /// The lockout after failed logins.
        login: LoginSection {
            /// Failed logins of one user name within `login_failure_window_ms` after which the
            /// name is locked for `login_lock_ms` (every login of it answers 822
            /// USER_LOGIN_LOCKED, right password or not). Counted by the ConfigNode leader in
            /// memory, for at most 10000 names: a new leader starts from zero; a success resets the
            /// count. Default 5; 1..=1000.
            login_failures_max: u32 = 5,
            /// The sliding window of `login_failures_max`, in milliseconds. Default 60000; > 0.
            login_failure_window_ms: u64 = 60_000,
            /// How long a locked user name stays locked, in milliseconds. Default 600000; > 0.
            login_lock_ms: u64 = 600_000,
        },
    }

    /// Command-line form: `--config file` plus every key as `--kebab-case-name value`, which
    /// overrides the file.
    #[command(name = "confignode", about = "Fencepost ConfigNode")]
    pub struct ConfigNodeArgs;
}

impl ConfigNodeConfig {
    /// Reads a TOML file; unknown keys are an error.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        read_toml(path)
    }

    /// Parses TOML text; unknown keys are an error.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        parse_toml(text)
    }

    /// Defaults, then the `--config` file, then the command-line values; validated.
    pub fn from_args(args: ConfigNodeArgs) -> Result<Self, ConfigError> {
        let mut c = match &args.config {
            Some(path) => Self::from_file(path)?,
            None => Self::default(),
        };
        c.overlay_args(args);
        c.validate()?;
        Ok(c)
    }

    /// Checks every key once at start-up, with an error that names the key: each section its
    /// own keys, then what ties keys of two sections.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.node.validate()?;
        self.raft.validate()?;
        self.lease.validate()?;
        self.partitioning.validate()?;
        self.rpc.validate()?;
        self.login.validate()?;
        // A deposed ConfigNode leader keeps heartbeating until check-quorum makes it step down
        // (up to two election timeouts); the margin must cover that, or a new leader could
        // proceed while a DataNode still holds a lease renewed by the old one.
        let step_down_ms = 2 * self.raft.cn_raft_election_ticks * self.raft.cn_raft_tick_ms;
        if self.lease.lease_proceed_margin_ms <= step_down_ms {
            return Err(config_error(
                "lease_proceed_margin_ms",
                format!(
                    "{} must exceed 2 × cn_raft_election_ticks × cn_raft_tick_ms = {step_down_ms}, the time a deposed leader may still send heartbeats",
                    self.lease.lease_proceed_margin_ms
                ),
            ));
        }
        Ok(())
    }
}

impl NodeSection {
    /// The initial raft members as (id, `host:port`), sorted by id.
    pub fn members(&self) -> Result<Vec<(u64, String)>, ConfigError> {
        const KEY: &str = "cn_initial_members";
        if self.cn_initial_members.trim().is_empty() {
            return Ok(vec![(self.cn_node_id, self.cn_internal_address.clone())]);
        }
        let mut members = Vec::new();
        for item in self.cn_initial_members.split(',') {
            let item = item.trim();
            let (id, address) = item
                .split_once('@')
                .ok_or_else(|| config_error(KEY, format!("{item:?} is not id@host:port")))?;
            let id: u64 = id.parse().ok().filter(|id| *id > 0).ok_or_else(|| {
                config_error(KEY, format!("{item:?}: the id must be a positive integer"))
            })?;
            check_host_address(KEY, address)?;
            if members.iter().any(|(other, _)| *other == id) {
                return Err(config_error(KEY, format!("id {id} appears twice")));
            }
            members.push((id, address.to_string()));
        }
        members.sort();
        Ok(members)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.cn_node_id == 0 {
            return Err(config_error(
                "cn_node_id",
                "must be > 0 (0 is raft's 'nobody')",
            ));
        }
        check_host_address("cn_internal_address", &self.cn_internal_address)?;
        check_host_address("cn_metrics_address", &self.cn_metrics_address)?;
        let members = self.members()?;
        if members.len() != 1 && members.len() != 3 {
            return Err(config_error(
                "cn_initial_members",
                format!("{} members; use 1 or 3", members.len()),
            ));
        }
        if !members.iter().any(|(id, _)| *id == self.cn_node_id) {
            return Err(config_error(
                "cn_initial_members",
                format!("does not contain cn_node_id {}", self.cn_node_id),
            ));
        }
        if self.cn_data_dir.as_os_str().is_empty() {
            return Err(config_error("cn_data_dir", "must not be empty"));
        }
        Ok(())
    }
}

impl RaftSection {
    fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=60_000).contains(&self.cn_raft_tick_ms) {
            return Err(config_error("cn_raft_tick_ms", "must be in 1..=60000"));
        }
        if !(3..=1000).contains(&self.cn_raft_election_ticks) {
            return Err(config_error(
                "cn_raft_election_ticks",
                "must be in 3..=1000",
            ));
        }
        check_nonzero(&[(
            "cn_snapshot_interval_entries",
            self.cn_snapshot_interval_entries,
        )])
    }
}

impl LeaseSection {
    /// `lease_proceed_margin_ms` is checked with the raft timing, by
    /// [`ConfigNodeConfig::validate`].
    fn validate(&self) -> Result<(), ConfigError> {
        check_nonzero(&[("heartbeat_interval_ms", self.heartbeat_interval_ms)])?;
        if self.metadata_lease_fence_ms <= self.heartbeat_interval_ms {
            return Err(config_error(
                "metadata_lease_fence_ms",
                format!(
                    "{} must exceed heartbeat_interval_ms ({}), or every DataNode fences between two heartbeats",
                    self.metadata_lease_fence_ms, self.heartbeat_interval_ms
                ),
            ));
        }
        check_nonzero(&[
            (
                "failure_detector_threshold_ms",
                self.failure_detector_threshold_ms,
            ),
            (
                "invalidation_drain_timeout_ms",
                self.invalidation_drain_timeout_ms,
            ),
            (
                "invalidation_retry_interval_ms",
                self.invalidation_retry_interval_ms,
            ),
        ])
    }
}

impl PartitioningSection {
    /// The partitioning every node must use.
    pub fn partition_config(&self) -> common::PartitionConfig {
        common::PartitionConfig {
            series_slot_num: self.series_slot_num,
            time_partition_interval_ms: self.time_partition_interval_ms,
            time_partition_origin_ms: 0,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=crate::state::REPLICATION_FACTOR_MAX).contains(&self.data_replication_factor) {
            return Err(config_error(
                "data_replication_factor",
                format!("must be in 1..={}", crate::state::REPLICATION_FACTOR_MAX),
            ));
        }
        if !(1..=10_000).contains(&self.data_region_group_num_per_database) {
            return Err(config_error(
                "data_region_group_num_per_database",
                "must be in 1..=10000",
            ));
        }
        if !(1..=1_000_000).contains(&self.series_slot_num) {
            return Err(config_error("series_slot_num", "must be in 1..=1000000"));
        }
        if self.time_partition_interval_ms <= 0 {
            return Err(config_error("time_partition_interval_ms", "must be > 0"));
        }
        check_nonzero(&[(
            "cn_database_partitions_max",
            self.cn_database_partitions_max,
        )])
    }
}

impl RpcSection {
    /// How this node's connections are built and watched: connect within
    /// [`CONNECT_TIMEOUT_MS`], keepalive from `cn_rpc_keepalive_interval_ms` and
    /// `cn_rpc_keepalive_timeout_ms`.
    pub fn channel_config(&self) -> runtime::ChannelConfig {
        runtime::ChannelConfig::with_keepalive(
            CONNECT_TIMEOUT_MS,
            self.cn_rpc_keepalive_interval_ms,
            self.cn_rpc_keepalive_timeout_ms,
        )
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.cn_rpc_max_connections == 0 {
            return Err(config_error("cn_rpc_max_connections", "must be at least 1"));
        }
        if self.cn_rpc_max_concurrent_requests == 0 {
            return Err(config_error(
                "cn_rpc_max_concurrent_requests",
                "must be at least 1",
            ));
        }
        if self.cn_rpc_max_message_bytes < 1 << 20 || self.cn_rpc_max_message_bytes > 1 << 31 {
            return Err(config_error(
                "cn_rpc_max_message_bytes",
                "must be between 1 MiB and 2 GiB",
            ));
        }
        check_keepalive(
            "cn_rpc_keepalive_interval_ms",
            self.cn_rpc_keepalive_interval_ms,
            "cn_rpc_keepalive_timeout_ms",
            self.cn_rpc_keepalive_timeout_ms,
        )
    }
}

impl LoginSection {
    /// The lockout after failed logins.
    pub fn login_limits(&self) -> crate::users::LoginLimits {
        crate::users::LoginLimits {
            failures_max: self.login_failures_max,
            failure_window_ms: self.login_failure_window_ms,
            lock_ms: self.login_lock_ms,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=LOGIN_FAILURES_MAX).contains(&self.login_failures_max) {
            return Err(config_error(
                "login_failures_max",
                format!("must be in 1..={LOGIN_FAILURES_MAX}"),
            ));
        }
        check_nonzero(&[
            ("login_failure_window_ms", self.login_failure_window_ms),
            ("login_lock_ms", self.login_lock_ms),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use runtime::config::NodeConfig;

    #[test]
    fn defaults_are_valid_and_documented_values() {
        let c = ConfigNodeConfig::default();
        c.validate().unwrap();
        assert_eq!(
            c.node.members().unwrap(),
            vec![(1, "127.0.0.1:10710".to_string())]
        );
        assert_eq!(c.lease.metadata_lease_fence_ms, 20_000);
        assert_eq!(c.lease.lease_proceed_margin_ms, 5000);
        assert_eq!(c.partitioning.series_slot_num, 1000);
        assert_eq!(c.partitioning.cn_database_partitions_max, 1_000_000);
        assert_eq!(c.rpc.cn_rpc_keepalive_interval_ms, 1000);
        assert_eq!(c.rpc.cn_rpc_keepalive_timeout_ms, 2000);
        assert_eq!(
            c.login.login_limits(),
            crate::users::LoginLimits {
                failures_max: 5,
                failure_window_ms: 60_000,
                lock_ms: 600_000,
            }
        );
        assert_eq!(
            c.rpc.channel_config().dead_connection_bound(),
            std::time::Duration::from_secs(3)
        );
    }

    #[test]
    fn the_example_file_lists_every_key_with_its_default() {
        let text = include_str!("../confignode.example.toml");
        assert_eq!(
            ConfigNodeConfig::from_toml(text).unwrap(),
            ConfigNodeConfig::default()
        );
        let keys = text
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains(" = "))
            .count();
        assert_eq!(keys, 27, "a key is missing from confignode.example.toml");
    }

    #[test]
    fn cli_overrides_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cn.toml");
        std::fs::write(
            &path,
            "cn_node_id = 2\ncn_initial_members = \"1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3\"\nheartbeat_interval_ms = 500\n",
        )
        .unwrap();
        let args = ConfigNodeArgs::try_parse_from([
            "confignode",
            "--config",
            path.to_str().unwrap(),
            "--heartbeat-interval-ms",
            "200",
            "--series-slot-num",
            "10",
            "--login-failures-max",
            "3",
        ])
        .unwrap();
        let c = ConfigNodeConfig::from_args(args).unwrap();
        assert_eq!(c.node.cn_node_id, 2);
        assert_eq!(c.lease.heartbeat_interval_ms, 200);
        assert_eq!(c.partitioning.series_slot_num, 10);
        assert_eq!(c.login.login_failures_max, 3);
        assert_eq!(c.node.members().unwrap().len(), 3);
    }

    #[test]
    fn errors_name_the_key() {
        type Tweak = fn(&mut ConfigNodeConfig);
        let cases: [(&str, Tweak); 14] = [
            ("cn_node_id", |c| c.node.cn_node_id = 0),
            ("metadata_lease_fence_ms", |c| {
                c.lease.metadata_lease_fence_ms = 10
            }),
            ("cn_initial_members", |c| {
                c.node.cn_initial_members = "1@a:1,2@a:2".into()
            }),
            ("cn_initial_members", |c| {
                c.node.cn_initial_members = "2@a:1".into()
            }),
            ("cn_internal_address", |c| {
                c.node.cn_internal_address = "nowhere".into()
            }),
            ("cn_rpc_keepalive_interval_ms", |c| {
                c.rpc.cn_rpc_keepalive_interval_ms = 50
            }),
            ("cn_rpc_keepalive_timeout_ms", |c| {
                c.rpc.cn_rpc_keepalive_timeout_ms = 60_001
            }),
            ("login_failures_max", |c| c.login.login_failures_max = 0),
            ("login_failure_window_ms", |c| {
                c.login.login_failure_window_ms = 0
            }),
            ("login_lock_ms", |c| c.login.login_lock_ms = 0),
            ("cn_raft_election_ticks", |c| {
                c.raft.cn_raft_election_ticks = 2
            }),
            ("lease_proceed_margin_ms", |c| {
                c.lease.lease_proceed_margin_ms = 2000
            }),
            ("time_partition_interval_ms", |c| {
                c.partitioning.time_partition_interval_ms = 0
            }),
            ("invalidation_retry_interval_ms", |c| {
                c.lease.invalidation_retry_interval_ms = 0
            }),
        ];
        for (key, tweak) in cases {
            let mut c = ConfigNodeConfig::default();
            tweak(&mut c);
            assert_eq!(c.validate().unwrap_err().key, key);
        }
        assert_eq!(
            ConfigNodeConfig::from_toml("no_such_key = 1")
                .unwrap_err()
                .key,
            "config"
        );
    }

    #[test]
    fn every_key_is_a_documented_flag_in_a_section_of_at_most_12() {
        let checked = runtime::config::check_every_key_is_a_documented_flag::<
            ConfigNodeConfig,
            ConfigNodeArgs,
        >()
        .unwrap();
        assert_eq!(checked, ConfigNodeConfig::KEYS.len());
        for key in ConfigNodeConfig::KEYS {
            let in_section = ConfigNodeConfig::KEYS
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
        let mut c = ConfigNodeConfig::default();
        assert_eq!(ConfigNodeConfig::from_toml(&c.to_toml()).unwrap(), c);
        c.raft.cn_raft_tick_ms = 7;
        c.partitioning.time_partition_interval_ms = -1;
        assert_eq!(ConfigNodeConfig::from_toml(&c.to_toml()).unwrap(), c);
    }

    #[test]
    fn operating_md_lists_every_key() {
        let doc = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operating.md"));
        let table = ConfigNodeConfig::key_table();
        runtime::docs::check_generated_section(doc, "confignode-config", &table)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
