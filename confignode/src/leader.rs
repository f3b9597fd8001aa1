//! The ConfigNode leader's duties and their volatile state: the heartbeat pusher and the
//! failure detector (one round every `heartbeat_interval_ms`), the contact tracker that judges
//! each DataNode's lease, the region-leader hints, and the fence operations (DROP DATABASE /
//! DELETE TIMESERIES) run through the [`Propagator`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use consensus::{Clock, StateRole};
use parking_lot::Mutex;

use crate::client::DataNodeClient;
use crate::command::Command;
use crate::config::ConfigNodeConfig;
use crate::error::{Error, Result};
use crate::group::ConfigGroup;
use crate::propagator::{Propagator, RegionTarget, Target};
use crate::state::{MetadataState, NodeStatus, OperationKind};
use crate::tracker::{ContactTracker, LeaseTimings};
use crate::wire::{location, replica_set};

mod floor;

use floor::FloorRounds;

/// The fence work running under this leader.
#[derive(Debug, Default)]
struct FenceWork {
    /// Fence operations running here.
    operations: Mutex<BTreeSet<u64>>,
    /// The fence-floor rounds (`floor.rs`).
    floor: FloorRounds,
}

/// The leader's duties over the group; idle (each round returns at once) while not leading.
pub(crate) struct Leadership {
    config: ConfigNodeConfig,
    group: Arc<ConfigGroup>,
    pub(crate) clock: Arc<dyn Clock>,
    client: Arc<dyn DataNodeClient>,
    /// Contact times and lease verdicts per DataNode (lock order: the group's state first).
    pub(crate) tracker: Arc<Mutex<ContactTracker>>,
    propagator: Propagator,
    /// Region → leader DataNode, from heartbeat replies (a routing hint, not replicated).
    pub(crate) region_leaders: Mutex<BTreeMap<u64, u64>>,
    /// Region → its leader's raft membership `(sorted voters, settled)`, from heartbeat replies
    /// (what finishes a region migration; not replicated).
    region_memberships: Mutex<BTreeMap<u64, (Vec<u64>, bool)>>,
    /// The term this node leads in, as the leader loop last saw it.
    leader_term: Mutex<Option<u64>>,
    fence_work: FenceWork,
    heartbeat_sequence: AtomicU64,
    /// Per DataNode, the incarnation whose confirmation this node proposed (REVIEW H3): one
    /// proposal per new incarnation, not one per heartbeat reply until it commits.
    confirming: Mutex<BTreeMap<u64, u64>>,
}

impl Leadership {
    pub(crate) fn new(
        config: ConfigNodeConfig,
        group: Arc<ConfigGroup>,
        clock: Arc<dyn Clock>,
        client: Arc<dyn DataNodeClient>,
    ) -> Leadership {
        let tracker = Arc::new(Mutex::new(ContactTracker::new(Leadership::lease_timings(
            &config,
        ))));
        let propagator = Propagator::new(
            client.clone(),
            tracker.clone(),
            clock.clone(),
            config.lease.invalidation_retry_interval_ms,
            config.lease.invalidation_drain_timeout_ms,
        );
        Leadership {
            config,
            group,
            clock,
            client,
            tracker,
            propagator,
            region_leaders: Mutex::new(BTreeMap::new()),
            region_memberships: Mutex::new(BTreeMap::new()),
            leader_term: Mutex::new(None),
            fence_work: FenceWork::default(),
            heartbeat_sequence: AtomicU64::new(0),
            confirming: Mutex::new(BTreeMap::new()),
        }
    }

    pub(crate) fn lease_timings(config: &ConfigNodeConfig) -> LeaseTimings {
        LeaseTimings {
            fence_ms: config.lease.metadata_lease_fence_ms,
            proceed_margin_ms: config.lease.lease_proceed_margin_ms,
            failure_detector_ms: config.lease.failure_detector_threshold_ms,
        }
    }

    /// Starts fence operation `operation_id` unless it already runs here; returns at once.
    pub(crate) fn spawn_operation(self: &Arc<Self>, operation_id: u64) {
        if !self.fence_work.operations.lock().insert(operation_id) {
            return;
        }
        let shared = self.clone();
        tokio::spawn(async move {
            if let Err(e) = shared.run_operation(operation_id).await {
                tracing::warn!(operation_id, "fence operation not finished yet: {e}");
            }
            shared.fence_work.operations.lock().remove(&operation_id);
        });
    }

    /// The fence protocol after its pending state is committed: invalidate until every DataNode
    /// acknowledged or is fenced, delete through every affected region's raft log, commit.
    async fn run_operation(&self, operation_id: u64) -> Result<()> {
        let term = self
            .group
            .check_leader()
            .map_err(|leader| Error::NotLeader { leader })?;
        // The term's clock starts no later than here: if raft made this node leader after the
        // leader loop's last round, every DataNode counts as contacted now.
        self.track_leadership(Some(term), self.clock.now_ms());
        let Some((kind, targets, version, regions)) = self.operation_view(operation_id) else {
            return Ok(());
        };
        // Lock order everywhere: state before tracker (the state lock is released here).
        {
            let registry: Vec<(u64, u64)> = targets
                .iter()
                .map(|t| (t.id, t.incarnation_epoch))
                .collect();
            let now = self.clock.now_ms();
            let mut tracker = self.tracker.lock();
            if tracker.leading_term() == Some(term) {
                tracker.sync_registry(&registry, now);
            }
        }
        let (request, series) = invalidation_request(&kind, term, version, operation_id);
        // A deposed leader stops at once; the new leader resumes the operation.
        let outcome = tokio::select! {
            outcome = self.propagator.invalidate(term, &targets, request) => outcome,
            () = self.lost_term(term) => return Err(Error::NotLeader { leader: None }),
        };
        tracing::info!(
            operation_id,
            acknowledged = ?outcome.acknowledged,
            fenced = ?outcome.fenced,
            "invalidation complete"
        );
        // A leader that lost its term in between must not order deletions: the new leader
        // resumes the operation with its own (stricter) view.
        if self.group.check_leader().ok() != Some(term) {
            return Err(Error::NotLeader { leader: None });
        }
        let command = match &kind {
            // A TTL change deletes nothing: the invalidation was all it needed.
            OperationKind::SetTtl(_) => {
                self.group
                    .propose(Command::FinishOperation { operation_id })
                    .await?;
                return Ok(());
            }
            OperationKind::DropDatabase(db) => {
                proto::region_write_req::Command::DeleteDatabase(proto::DeleteDatabaseCommand {
                    database: db.clone(),
                })
            }
            OperationKind::DeleteTimeseries(_) => {
                proto::region_write_req::Command::DeleteSeries(proto::DeleteSeriesCommand {
                    series,
                })
            }
            // The table's whole prefix, in every region of its database (a device created after
            // the Begin may lie in any series slot): a deletion and a fence of every device of
            // the table, whichever were listed at the Begin (REVIEW N1).
            OperationKind::DropTable {
                database, table, ..
            } => proto::region_write_req::Command::DeleteDatabase(proto::DeleteDatabaseCommand {
                database: format!("{database}.{table}"),
            }),
        };
        let deletion =
            self.propagator
                .delete_in_regions(&regions, |region_id| proto::RegionWriteReq {
                    region_id,
                    command: Some(command.clone()),
                    operation_id,
                    // The fencing token: at or after the pending state, which hides the target
                    // from every later fetch, so every insert validated against metadata that
                    // still showed it carries an older version.
                    metadata_version: version,
                    table_version: 0,
                });
        let failed = tokio::select! {
            failed = deletion => failed,
            () = self.lost_term(term) => return Err(Error::NotLeader { leader: None }),
        };
        if !failed.is_empty() {
            return Err(Error::Timeout(format!(
                "regions {failed:?} did not confirm the deletion of operation {operation_id}"
            )));
        }
        self.group
            .propose(Command::FinishOperation { operation_id })
            .await?;
        // Its deletions can go once a floor passes them.
        self.fence_work.floor.note_deletions();
        Ok(())
    }

    /// The fence-floor rounds under this leader (for the metrics).
    pub(crate) fn floor_rounds(&self) -> &FloorRounds {
        &self.fence_work.floor
    }

    /// What operation `operation_id` is, as the replicated state holds it now: its kind, every
    /// registered DataNode (the invalidation's targets), the metadata version (its fencing
    /// token) and the regions its deletion goes through; `None` once it finished.
    #[allow(clippy::type_complexity)]
    fn operation_view(
        &self,
        operation_id: u64,
    ) -> Option<(OperationKind, Vec<Target>, u64, Vec<RegionTarget>)> {
        let state = self.group.state();
        let (_, kind) = state.operations().find(|(id, _)| *id == operation_id)?;
        let kind = kind.clone();
        let regions = self.affected_regions(&state, &kind);
        Some((
            kind,
            invalidation_targets(&state),
            state.metadata_version(),
            regions,
        ))
    }

    /// Resolves once this node no longer leads in `term` (or its raft driver stopped).
    async fn lost_term(&self, term: u64) {
        let interval = Duration::from_millis(self.config.lease.heartbeat_interval_ms);
        loop {
            if self.group.is_stopping() || self.group.check_leader().ok() != Some(term) {
                return;
            }
            tokio::time::sleep(interval).await;
        }
    }

    fn affected_regions(&self, state: &MetadataState, kind: &OperationKind) -> Vec<RegionTarget> {
        let mut ids = BTreeSet::new();
        match kind {
            OperationKind::SetTtl(_) => {}
            OperationKind::DropDatabase(db) | OperationKind::DropTable { database: db, .. } => {
                ids.extend(state.regions().filter(|r| r.database == *db).map(|r| r.id));
            }
            OperationKind::DeleteTimeseries(series) => {
                let partition = self.config.partitioning.partition_config();
                for (device, _) in series {
                    if let Some((db, _)) = state.database_of(device) {
                        // A series slot lives in one region group in every time slot.
                        let slot = partition.series_slot(device);
                        ids.extend(state.series_slot_region(db, slot));
                    }
                }
            }
        }
        self.region_targets(state, ids)
    }

    /// Regions `ids` and where their replicas are, known leader first.
    fn region_targets(
        &self,
        state: &MetadataState,
        ids: impl IntoIterator<Item = u64>,
    ) -> Vec<RegionTarget> {
        let leaders = self.region_leaders.lock().clone();
        ids.into_iter()
            .filter_map(|id| state.region(id))
            .map(|r| {
                let mut replicas: Vec<u64> = r.replicas.clone();
                // Known leader first, then the preferred leader, then the rest.
                let first = leaders.get(&r.id).copied().unwrap_or(r.preferred_leader);
                replicas.sort_by_key(|n| (*n != first, *n != r.preferred_leader, *n));
                RegionTarget {
                    region_id: r.id,
                    replicas: replicas
                        .into_iter()
                        .filter_map(|n| state.data_node(n).map(|d| (n, d.internal_address.clone())))
                        .collect(),
                }
            })
            .collect()
    }

    /// Records that this node leads in `term` (or no longer leads) as of `now_ms`: the tracker
    /// starts the term's clock (every DataNode counts as contacted now) and the region-leader
    /// hints of an earlier term are forgotten. Idempotent within a term; called by the leader
    /// loop and, before anything else, by every fence operation, so that no operation judges
    /// a DataNode with a clock that this term has not started (C1 in REVIEW-2026-12).
    pub(crate) fn track_leadership(&self, leading_term: Option<u64>, now_ms: u64) {
        let mut current = self.leader_term.lock();
        if *current == leading_term {
            return;
        }
        let mut tracker = self.tracker.lock();
        match leading_term {
            Some(term) => {
                tracing::info!(
                    node = self.config.node.cn_node_id,
                    term,
                    "ConfigNode leader"
                );
                tracker.become_leader(term, now_ms);
                self.region_leaders.lock().clear();
                // A new leader does not know what was deleted since the last floor.
                self.fence_work.floor.on_leadership(now_ms);
            }
            None => tracker.step_down(),
        }
        *current = leading_term;
    }

    /// One leader round: notice leadership changes, heartbeat every DataNode, judge failures,
    /// resume pending fence operations.
    pub(crate) async fn leader_round(self: &Arc<Self>) {
        let now = self.clock.now_ms();
        let status = self.group.leader_status();
        let leading_term = status
            .as_ref()
            .filter(|s| s.role == StateRole::Leader)
            .map(|s| s.term);
        self.track_leadership(leading_term, now);
        let Some(term) = leading_term else {
            return;
        };
        let registry: Vec<(u64, u64, String, NodeStatus, u64)> = self
            .group
            .state()
            .data_nodes()
            .map(|n| {
                (
                    n.id,
                    n.incarnation_epoch,
                    n.internal_address.clone(),
                    n.status,
                    n.confirmed_epoch,
                )
            })
            .collect();
        // Lock order everywhere: state before tracker.
        let (version, users_fingerprint) = {
            let state = self.group.state();
            (state.metadata_version(), state.users_fingerprint())
        };
        let lease_holders = {
            let mut tracker = self.tracker.lock();
            let ids: Vec<(u64, u64)> = registry.iter().map(|(id, e, _, _, _)| (*id, *e)).collect();
            tracker.sync_registry(&ids, now);
            tracker.lease_holders(now)
        };
        let region_leaders: Vec<proto::RegionLeader> = self
            .region_leaders
            .lock()
            .iter()
            .map(|(r, l)| proto::RegionLeader {
                region_id: *r,
                leader_id: *l,
            })
            .collect();
        let timeout = Duration::from_millis(self.config.lease.heartbeat_interval_ms);
        for (id, epoch, address, _, confirmed) in &registry {
            let request = proto::HeartbeatReq {
                data_node_id: *id,
                incarnation_epoch: *epoch,
                metadata_version: version,
                config_node_term: term,
                config_node_id: self.config.node.cn_node_id,
                lease_holder_ids: lease_holders.clone(),
                region_leaders: region_leaders.clone(),
                sequence: self.heartbeat_sequence.fetch_add(1, Ordering::Relaxed) + 1,
                metadata_lease_fence_ms: self.config.lease.metadata_lease_fence_ms,
                lease_proceed_margin_ms: self.config.lease.lease_proceed_margin_ms,
                users_fingerprint,
            };
            let call = self.client.heartbeat(address, request);
            let shared = self.clone();
            let (id, epoch, confirmed) = (*id, *epoch, *confirmed);
            // Each heartbeat is its own task so one slow DataNode never delays the others or
            // the next round.
            tokio::spawn(async move {
                match tokio::time::timeout(timeout, call).await {
                    Ok(Ok(resp)) => {
                        if shared.on_heartbeat_reply(id, epoch, term, resp) && epoch > confirmed {
                            shared.confirm_incarnation(id, epoch).await;
                        }
                    }
                    Ok(Err(e)) => tracing::debug!(node = id, "heartbeat failed: {e}"),
                    Err(_) => tracing::debug!(node = id, "heartbeat timed out"),
                }
            });
        }
        let statuses: Vec<(u64, NodeStatus)> = registry
            .iter()
            .map(|(id, _, _, status, _)| (*id, *status))
            .collect();
        self.detect_failures(&statuses, now);
        let pending: Vec<u64> = self.group.state().operations().map(|(id, _)| id).collect();
        for operation_id in pending {
            self.spawn_operation(operation_id);
        }
        self.spawn_floor_round(term, now);
        self.drive_migrations();
    }

    /// The failure detector: a Running DataNode that stopped answering becomes Unknown, an
    /// Unknown one that answers again Running. Statuses are replicated, so changes go through
    /// the log.
    fn detect_failures(self: &Arc<Self>, statuses: &[(u64, NodeStatus)], now: u64) {
        for (id, status) in statuses {
            let unresponsive = self.tracker.lock().is_unresponsive(*id, now);
            let new_status = match (status, unresponsive) {
                (NodeStatus::Running, true) => NodeStatus::Unknown,
                (NodeStatus::Unknown, false) => NodeStatus::Running,
                _ => continue,
            };
            let shared = self.clone();
            let data_node_id = *id;
            tokio::spawn(async move {
                let command = Command::SetDataNodeStatus {
                    data_node_id,
                    status: new_status,
                };
                if let Err(e) = shared.group.propose(command).await {
                    tracing::debug!(node = data_node_id, "status change not committed: {e}");
                }
            });
        }
    }

    /// Region migrations: begins replacing every replica on a DataNode that came back as a new
    /// node ([`MetadataState::replacements_due`]), and finishes each migration whose raft group
    /// swapped the replicas (its leader reported a settled membership whose voters are the
    /// replicas with `to` in `from`'s place). The DataNodes do the rest: the new node hosts a
    /// joining replica, the region's leader adds it as a learner, catches it up and swaps it
    /// for `from` ([`consensus::MembershipChange`]).
    fn drive_migrations(self: &Arc<Self>) {
        let commands: Vec<Command> = {
            let state = self.group.state();
            let memberships = self.region_memberships.lock();
            let finished = state.migrations().filter(|(region, from, to)| {
                let (Some(r), Some((voters, settled))) =
                    (state.region(*region), memberships.get(region))
                else {
                    return false;
                };
                let mut target: Vec<u64> = r
                    .replicas
                    .iter()
                    .map(|&n| if n == *from { *to } else { n })
                    .collect();
                target.sort_unstable();
                *settled && *voters == target
            });
            let finish = finished.map(|(region_id, from, to)| Command::FinishRegionMigration {
                region_id,
                from,
                to,
            });
            let begin = state
                .replacements_due()
                .into_iter()
                .map(|(region_id, from, to)| Command::BeginRegionMigration {
                    region_id,
                    from,
                    to,
                });
            finish.chain(begin).collect()
        };
        for command in commands {
            let shared = self.clone();
            tokio::spawn(async move {
                tracing::info!(?command, "region migration step");
                if let Err(e) = shared.group.propose(command).await {
                    tracing::debug!("region migration step not committed: {e}");
                }
            });
        }
    }

    /// Records that incarnation `epoch` of DataNode `id` ran (it answered a heartbeat), once
    /// per incarnation: a data directory restored from before it is then refused (REVIEW H3).
    async fn confirm_incarnation(&self, id: u64, epoch: u64) {
        {
            let mut confirming = self.confirming.lock();
            if confirming.get(&id).is_some_and(|&e| e >= epoch) {
                return;
            }
            confirming.insert(id, epoch);
        }
        let command = Command::ConfirmIncarnation {
            data_node_id: id,
            incarnation_epoch: epoch,
        };
        if let Err(e) = self.group.propose(command).await {
            tracing::debug!(node = id, epoch, "incarnation not confirmed yet: {e}");
            // The next reply proposes it again.
            let mut confirming = self.confirming.lock();
            if confirming.get(&id) == Some(&epoch) {
                confirming.remove(&id);
            }
        }
    }

    /// Takes a heartbeat reply of incarnation `epoch` of DataNode `id`; true if it counted as a
    /// contact.
    fn on_heartbeat_reply(
        &self,
        id: u64,
        epoch: u64,
        term: u64,
        resp: proto::HeartbeatResp,
    ) -> bool {
        if self.leader_term.lock().as_ref() != Some(&term) {
            return false;
        }
        if resp.status.as_ref().is_none_or(|s| !s.is_success()) || resp.incarnation_epoch != epoch {
            tracing::debug!(
                node = id,
                "heartbeat refused: {:?} (epoch {} vs {epoch})",
                resp.status,
                resp.incarnation_epoch
            );
            return false;
        }
        let now = self.clock.now_ms();
        if let Err(refused) = self.tracker.lock().record_contact(id, epoch, now) {
            tracing::debug!(node = id, "heartbeat reply not counted: {refused:?}");
            return false;
        }
        let mut leaders = self.region_leaders.lock();
        for l in resp.region_leaders {
            if l.leader_id != 0 {
                leaders.insert(l.region_id, l.leader_id);
            }
        }
        drop(leaders);
        let mut memberships = self.region_memberships.lock();
        for m in resp.memberships {
            let mut voters = m.voters;
            voters.sort_unstable();
            memberships.insert(m.region_id, (voters, m.settled));
        }
        true
    }

    /// Creates freshly allocated region groups on their DataNodes (best effort: a DataNode also
    /// learns its regions at registration).
    pub(crate) async fn create_regions(&self, region_ids: &[u64]) {
        let requests: Vec<(String, proto::CreateRegionReq)> = {
            let state = self.group.state();
            let mut out = Vec::new();
            for id in region_ids {
                let Some(r) = state.region(*id) else { continue };
                let replicas: Vec<proto::DataNodeLocation> = r
                    .replicas
                    .iter()
                    .filter_map(|n| state.data_node(*n))
                    .map(location)
                    .collect();
                let request = proto::CreateRegionReq {
                    replica_set: Some(replica_set(&state, r)),
                    replicas,
                };
                for n in &r.replicas {
                    if let Some(node) = state.data_node(*n) {
                        out.push((node.internal_address.clone(), request.clone()));
                    }
                }
            }
            out
        };
        let timeout = crate::timing::CREATE_REGION_TIMEOUT;
        let mut calls = tokio::task::JoinSet::new();
        for (address, request) in requests {
            let call = self.client.create_region(&address, request);
            calls.spawn(async move { (address, tokio::time::timeout(timeout, call).await) });
        }
        while let Some(joined) = calls.join_next().await {
            match joined {
                Ok((_, Ok(Ok(status)))) if status.is_success() => {}
                Ok((address, outcome)) => {
                    tracing::warn!(address, "creating a region replica: {outcome:?}")
                }
                Err(e) => tracing::warn!("creating a region replica: {e}"),
            }
        }
    }
}

/// Every registered DataNode: the targets of an invalidation (a fence operation's or a
/// fence-floor round's).
fn invalidation_targets(state: &MetadataState) -> Vec<Target> {
    state
        .data_nodes()
        .map(|n| Target {
            id: n.id,
            incarnation_epoch: n.incarnation_epoch,
            address: n.internal_address.clone(),
        })
        .collect()
}

/// The invalidation of operation `operation_id` (per-target fields filled by the propagator),
/// and the series it names.
fn invalidation_request(
    kind: &OperationKind,
    term: u64,
    version: u64,
    operation_id: u64,
) -> (proto::InvalidateCacheReq, Vec<proto::SeriesPath>) {
    let databases = match kind {
        OperationKind::DropDatabase(db) | OperationKind::SetTtl(db) => vec![db.clone()],
        OperationKind::DeleteTimeseries(_) | OperationKind::DropTable { .. } => Vec::new(),
    };
    let tables = match kind {
        OperationKind::DropTable {
            database, table, ..
        } => vec![proto::TableRef {
            database: database.clone(),
            table: table.clone(),
            created_version: 0,
        }],
        _ => Vec::new(),
    };
    let series: Vec<proto::SeriesPath> = kind
        .series()
        .iter()
        .map(|(d, m)| proto::SeriesPath {
            device: d.clone(),
            measurement: m.clone(),
        })
        .collect();
    let request = proto::InvalidateCacheReq {
        data_node_id: 0,
        incarnation_epoch: 0,
        config_node_term: term,
        metadata_version: version,
        operation_id,
        databases,
        series: series.clone(),
        tables,
        // Filled per target by the propagator.
        drain_timeout_ms: 0,
        fence_floor: 0,
    };
    (request, series)
}
