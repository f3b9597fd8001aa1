//! Lease recovery and region reconciliation (design §4): after a fence, pull fresh routes and
//! clear every cache; every few seconds, make the hosted replicas match the ConfigNode's
//! assignment and move this node's migrations on.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cache::RegionRoute;
use crate::metrics::inc;
use crate::parts::Shared;
use crate::timing;

impl Shared {
    /// Lease recovery (design §4): pull fresh routes from the ConfigNode, then clear every cache
    /// and install them; the lease returns to NORMAL only if it is still fresh by then.
    pub(crate) async fn recover_lease(self: &Arc<Self>) {
        let Some(recovery) = self.metadata.begin_recovery() else {
            return;
        };
        // The pull happens after the heartbeat that triggered recovery was received, so it reads
        // metadata at least as new as every invalidation this node may have missed.
        let pulled = self.confignode.pull_metadata().await;
        if let Ok(pulled) = &pulled {
            self.create_missing_regions(&pulled.regions).await;
        }
        let node = self.identity.node_id;
        let outcome = recovery.finish(pulled, |pulled| {
            self.peers
                .learn(pulled.nodes.iter().map(|(id, a)| (*id, a.internal.clone())));
        });
        match outcome {
            Ok(state) => tracing::info!(node, state = state.name(), "lease recovery"),
            Err(e) => tracing::warn!(
                node,
                "lease recovery failed, retried on the next heartbeat: {e}"
            ),
        }
    }

    /// One round of [`region_reconciler`]; the routes of every region, when the ConfigNode
    /// leader answered.
    pub(crate) async fn reconcile_regions(&self) -> Option<BTreeMap<u64, RegionRoute>> {
        let node = self.identity.node_id;
        let hosted = self.host.region_ids();
        let survey = match self.confignode.survey_regions(&hosted).await {
            Ok(survey) => survey,
            Err(e) => {
                tracing::debug!(node, "region reconciliation: {e}");
                return None;
            }
        };
        for region_id in &survey.dropped {
            match self.host.remove_region(*region_id).await {
                Ok(()) => inc(&self.metrics.storage.regions_removed),
                Err(e) => tracing::warn!(node, region_id, "removing a dropped region: {e}"),
            }
        }
        // This node is being removed and its replica of these migrated away: the raft group no
        // longer counts it.
        for region_id in &survey.left {
            match self.host.remove_region(*region_id).await {
                Ok(()) => {
                    inc(&self.metrics.storage.regions_removed);
                    tracing::info!(node, region_id, "removed a replica that migrated away");
                }
                Err(e) => tracing::warn!(node, region_id, "removing a region left: {e}"),
            }
        }
        if self.metadata.lease().is_live() {
            self.create_missing_regions(&survey.assigned).await;
        }
        Some(survey.assigned)
    }

    /// Moves every migration of a region this node leads one step on
    /// ([`consensus::RaftNode::step_replacement`]: learner, catch-up, joint replace). The
    /// ConfigNode finishes the migration once this node's heartbeat reply shows the new voters.
    /// Not while fenced: a fenced node hands its leaderships away.
    pub(crate) async fn step_migrations(&self, routes: &BTreeMap<u64, RegionRoute>) {
        let node = self.identity.node_id;
        if !self.metadata.lease().is_live() {
            return;
        }
        for (&region, route) in routes {
            let Some((from, to)) = route.migration else {
                continue;
            };
            let leads = self
                .host
                .group_status(region)
                .is_some_and(|s| s.role == consensus::StateRole::Leader);
            if !leads {
                continue;
            }
            if self.peers.address(to).is_none() {
                // A node registered after this one last learned addresses: raft could not
                // reach the learner.
                match self.confignode.data_node_addresses().await {
                    Ok(nodes) => self.peers.learn(
                        nodes
                            .into_iter()
                            .filter(|(_, a)| !a.internal.is_empty())
                            .map(|(id, a)| (id, a.internal)),
                    ),
                    Err(e) => {
                        tracing::debug!(node, region, "learning DataNode {to}'s address: {e}");
                        continue;
                    }
                }
            }
            let stepped = self
                .host
                .driver()
                .call(move |raft| {
                    raft.step_replacement(region, from, to, timing::MIGRATION_CATCH_UP_ENTRIES)
                })
                .await;
            match stepped {
                Ok(Ok(consensus::ReplacementStep::Waiting | consensus::ReplacementStep::Done)) => {}
                Ok(Ok(step)) => {
                    inc(&self.metrics.storage.migration_steps);
                    tracing::info!(node, region, from, to, ?step, "region migration step");
                }
                Ok(Err(e)) => tracing::debug!(node, region, "region migration step: {e}"),
                Err(e) => tracing::warn!(node, region, "region migration step: {e}"),
            }
        }
    }

    /// Creates every replica `regions` assigns to this node that it does not host yet (preferred
    /// leader: none, the group's existing replicas lead). Failures are logged and retried by the
    /// next reconciliation.
    async fn create_missing_regions(&self, regions: &BTreeMap<u64, RegionRoute>) {
        let node = self.identity.node_id;
        for (id, route) in self.host.missing(regions) {
            let peers = founding_peers(node, &route.replicas, route.migration);
            match self.host.create_region(id, &route.database, peers, 0).await {
                Ok(()) => tracing::info!(node, region = id, "created a missing replica"),
                Err(e) => tracing::warn!(node, region = id, "creating a missing replica: {e}"),
            }
        }
    }
}

/// The peers a new replica of a region on `node` starts its raft group with: the replica set,
/// or none for a replica joining by a migration to `node` (its raft group learns its members
/// from the leader's snapshot; [`consensus::RaftNode::create_group`]).
pub(crate) fn founding_peers(node: u64, replicas: &[u64], migration: Option<(u64, u64)>) -> &[u64] {
    match migration {
        Some((_, to)) if to == node && !replicas.contains(&node) => &[],
        _ => replicas,
    }
}
