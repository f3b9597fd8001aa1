//! The ConfigNode raft group ([`CONFIG_GROUP`]) and the replicated metadata it applies to:
//! leadership checks, proposals and read barriers, for the service and the leader's duties.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use consensus::{GroupId, StateRole};
use parking_lot::{RwLock, RwLockReadGuard};
use runtime::{GrpcTransport, RaftDriver};

use crate::command::{Command, CommandResult};
use crate::error::Result;
use crate::state::MetadataState;
use crate::timing::PROPOSAL_TIMEOUT;

/// The raft group id of the ConfigNode group (ConfigNodes host no other group).
pub const CONFIG_GROUP: GroupId = 1;

/// The raft group of the ConfigNodes and this member's view of it.
pub(crate) struct ConfigGroup {
    /// Every member: id and internal address (the leader's redirect).
    members: Vec<(u64, String)>,
    state: Arc<RwLock<MetadataState>>,
    driver: RaftDriver<GrpcTransport>,
    /// Set when shutdown begins: long-running handlers and operations end promptly instead of
    /// holding the graceful shutdown open.
    stopping: AtomicBool,
}

impl ConfigGroup {
    pub(crate) fn new(
        members: Vec<(u64, String)>,
        state: Arc<RwLock<MetadataState>>,
        driver: RaftDriver<GrpcTransport>,
    ) -> ConfigGroup {
        ConfigGroup {
            members,
            state,
            driver,
            stopping: AtomicBool::new(false),
        }
    }

    /// The replicated metadata as applied here (a read lock: hold it briefly, and take it
    /// before the leader's tracker, never after).
    pub(crate) fn state(&self) -> RwLockReadGuard<'_, MetadataState> {
        self.state.read()
    }

    /// Every member: id and internal address.
    pub(crate) fn members(&self) -> &[(u64, String)] {
        &self.members
    }

    pub(crate) fn driver(&self) -> &RaftDriver<GrpcTransport> {
        &self.driver
    }

    pub(crate) fn leader_status(&self) -> Option<consensus::GroupStatus> {
        self.driver.group_status(CONFIG_GROUP)
    }

    /// `Ok(term)` when this node leads; else the leader's address when known.
    pub(crate) fn check_leader(&self) -> std::result::Result<u64, Option<String>> {
        match self.leader_status() {
            Some(s) if s.role == StateRole::Leader => Ok(s.term),
            Some(s) => Err(s
                .leader
                .and_then(|l| self.members.iter().find(|(id, _)| *id == l))
                .map(|(_, a)| a.clone())),
            None => Err(None),
        }
    }

    pub(crate) async fn propose(&self, command: Command) -> Result<CommandResult> {
        let bytes = self
            .driver
            .propose(CONFIG_GROUP, command.encode(), PROPOSAL_TIMEOUT)
            .await?;
        Ok(CommandResult::decode(&bytes).map_err(crate::error::MetadataError::Decode)?)
    }

    /// Waits until this leader's state holds everything committed before the call.
    pub(crate) async fn read_barrier(&self) -> Result<()> {
        self.driver
            .read_index(CONFIG_GROUP, PROPOSAL_TIMEOUT)
            .await?;
        Ok(())
    }

    /// Shutdown begins: handlers and operations end promptly.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Shutdown has begun (or the raft driver died).
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst) || self.driver.is_stopped()
    }
}
