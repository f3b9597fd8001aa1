//! The parts of one DataNode that its services and background tasks share, and lease recovery.

use super::*;

/// The parts of one DataNode, by role; services and background tasks take the parts they use.
pub(crate) struct Shared {
    pub config: DataNodeConfig,
    pub identity: Identity,
    /// The lease, the caches it gates, the in-flight guard.
    pub metadata: Arc<MetadataView>,
    pub confignode: Arc<ConfigNodeLink>,
    /// The raft driver and the region replicas.
    pub host: Arc<RegionHost>,
    /// The address book and the channels to other DataNodes.
    pub peers: Arc<Peers>,
    pub coordinator: Arc<Coordinator>,
    pub metrics: Arc<Metrics>,
    pub hooks: TestHooks,
    /// What clients hold of this node and what bounds it.
    pub clients: ClientLimits,
    /// What other nodes hold of this node and what bounds it.
    pub internal: InternalLimits,
}

/// What clients hold of a DataNode, and the bounds on it: the session port's connections, the
/// session server's requests, the memory of query results, the logins it remembers.
pub(crate) struct ClientLimits {
    /// The session server's request bound, and what it refused.
    pub session_gate: Arc<runtime::ServerGate>,
    /// The session port's connection budgets (handshakes, gRPC, Thrift sessions).
    pub port_gate: Arc<runtime::PortGate>,
    /// The memory every query result is charged to, per result and over all of them.
    pub results: Arc<sql::ResultBudget>,
    /// Passwords the ConfigNode accepted lately (`auth`).
    pub logins: crate::auth::Logins,
    pub(super) next_session: AtomicU64,
}

impl ClientLimits {
    /// The bounds `config` sets, nothing held yet.
    pub(crate) fn new(config: &DataNodeConfig) -> ClientLimits {
        ClientLimits {
            session_gate: runtime::ServerGate::new(config.session_limits()),
            port_gate: runtime::PortGate::new(config.port_limits()),
            results: sql::ResultBudget::new(
                config.query_result_bytes_max as usize,
                config.query_results_bytes_max_per_node as usize,
            ),
            logins: crate::auth::Logins::new(Duration::from_millis(config.dn_login_cache_ms)),
            next_session: AtomicU64::new(1),
        }
    }
}

/// What other nodes hold of a DataNode, and the bounds on it.
pub(crate) struct InternalLimits {
    /// The internal server's connection and request bounds, and what they refused.
    pub gate: Arc<runtime::ServerGate>,
    /// What the raft transport sent to peers and dropped.
    pub raft_transport: Arc<runtime::TransportMetrics>,
    /// Region digests computed at once (one: each reads every point of a region).
    pub digests: tokio::sync::Semaphore,
}

impl Shared {
    pub(crate) fn next_session_id(&self) -> u64 {
        self.clients.next_session.fetch_add(1, Ordering::Relaxed)
    }

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
    pub(super) async fn reconcile_regions(&self) -> Option<BTreeMap<u64, RegionRoute>> {
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
                Ok(()) => inc(&self.metrics.regions_removed),
                Err(e) => tracing::warn!(node, region_id, "removing a dropped region: {e}"),
            }
        }
        // This node is being removed and its replica of these migrated away: the raft group no
        // longer counts it.
        for region_id in &survey.left {
            match self.host.remove_region(*region_id).await {
                Ok(()) => {
                    inc(&self.metrics.regions_removed);
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
    pub(super) async fn step_migrations(&self, routes: &BTreeMap<u64, RegionRoute>) {
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
                    inc(&self.metrics.migration_steps);
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
