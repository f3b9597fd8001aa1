//! Every fixed timing of the DataNode, named in one place. What an operator may need to change
//! is a configuration key (`config.rs`); these are internal cadences and bounds, chosen so that
//! none of them decides correctness (the lease decides that, from configured values).

use std::time::Duration;

/// First backoff between two attempts of a region write.
pub(crate) const WRITE_BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest single backoff between two attempts of a region write.
pub(crate) const WRITE_BACKOFF_MAX: Duration = Duration::from_secs(20);
/// How often a backing-off write checks whether an invalidation cancelled it.
pub(crate) const INVALIDATION_POLL: Duration = Duration::from_millis(50);
/// Budget of a region read's retries (leader changes, connection loss).
pub(crate) const READ_RETRY: Duration = Duration::from_secs(10);

/// How long an invalidation waits for in-flight operations before answering non-200 (the
/// ConfigNode retries it), when the request does not say.
pub(crate) const INVALIDATION_DRAIN_MS: u64 = 10_000;
/// The longest drain a request may ask for.
pub(crate) const INVALIDATION_DRAIN_MAX_MS: u64 = 120_000;

/// Beyond twice the fence, how long a schema statement may take at the ConfigNode (its own
/// deadline is fence + margin + 60 s; the margin is below the fence).
pub(crate) const SCHEMA_STATEMENT_SLACK: Duration = Duration::from_secs(90);

/// How often the lease monitor looks at the lease. Short: between the lease lapsing and the
/// region leaders stepping aside, proposals would fail at apply instead of at admission.
pub(crate) const LEASE_MONITOR_POLL: Duration = Duration::from_millis(20);
/// How often a DataNode asks the ConfigNode which region replicas it should host.
pub(crate) const REGION_RECONCILE_INTERVAL: Duration = Duration::from_secs(5);
/// How often a region leader moves its region's migration a step on.
pub(crate) const MIGRATION_STEP_INTERVAL: Duration = Duration::from_secs(1);
/// A learner whose log is within this many entries of its leader's is caught up enough to
/// replace the voter it migrates to: commits never wait for it (the voters staying form a
/// quorum of both configurations), and it closes the rest from the log.
pub(crate) const MIGRATION_CATCH_UP_ENTRIES: u64 = 1024;
/// How often the flush loop looks for large or old memtables.
pub(crate) const FLUSH_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How often the compaction loop looks for work when it found none.
pub(crate) const COMPACTION_CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// How much older than `now - ttl` a point must be before compaction removes it: room for this
/// node's wall clock to run ahead of the coordinators' (whose reads already hide the point), so
/// no replica removes a point a read may still show.
pub(crate) const TTL_REMOVAL_MARGIN_MS: i64 = 60_000;
/// Pause between two registration attempts at start-up.
pub(crate) const REGISTRATION_RETRY: Duration = Duration::from_secs(1);
/// How often the serving loop checks that the raft driver still runs.
pub(crate) const DRIVER_WATCHDOG_POLL: Duration = Duration::from_millis(100);
/// How often a heartbeat stalled by the test hook looks whether it may go on.
pub(crate) const HEARTBEAT_STALL_POLL: Duration = Duration::from_millis(10);
