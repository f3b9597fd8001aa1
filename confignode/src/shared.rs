//! What the service handlers and the background tasks share.

use std::sync::Arc;

use crate::config::ConfigNodeConfig;
use crate::group::ConfigGroup;
use crate::leader::Leadership;

/// What the service handlers and the background tasks work with, by role.
pub(crate) struct Shared {
    pub(crate) config: ConfigNodeConfig,
    /// The ConfigNode raft group and the replicated metadata.
    pub(crate) group: Arc<ConfigGroup>,
    /// The leader's duties (heartbeats, failure detector, fence operations) and their state.
    pub(crate) leader: Arc<Leadership>,
    /// Password hashing and verification, and the leader's lockout after failed logins.
    pub(crate) users: crate::users::Authenticator,
}
