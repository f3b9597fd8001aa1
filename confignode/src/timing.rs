//! Every fixed timing of the ConfigNode, named in one place. What an operator may need to
//! change is a configuration key (`config.rs`); these are internal cadences and bounds. None of
//! them shortens a lease wait: those come from `metadata_lease_fence_ms` and
//! `lease_proceed_margin_ms`.

use std::time::Duration;

/// How long a proposal may take before the caller gets 712.
pub(crate) const PROPOSAL_TIMEOUT: Duration = Duration::from_secs(10);
/// Deadline of one CreateRegion call to a DataNode (a lost one is healed by the DataNode's own
/// reconciliation).
pub(crate) const CREATE_REGION_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadline of a call to a DataNode that sets none itself (invalidations set theirs).
pub(crate) const DATANODE_RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the snapshot loop looks whether enough entries were applied for a new snapshot.
pub(crate) const SNAPSHOT_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// How often the serving loop checks that the raft driver still runs.
pub(crate) const DRIVER_WATCHDOG_POLL: Duration = Duration::from_millis(100);
/// Beyond fence + margin, how long a DROP / DELETE waits for its operation before answering
/// "still in progress" (it completes in the background).
pub(crate) const FENCE_OPERATION_SLACK: Duration = Duration::from_secs(60);
/// How often a waiting DROP / DELETE looks whether its operation completed.
pub(crate) const FENCE_OPERATION_POLL: Duration = Duration::from_millis(50);
