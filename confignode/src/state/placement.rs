//! Placement: the partition table (database, series slot, time slot) → region group, the
//! region groups and their replica sets, allocation, and migrations of replicas.

use super::*;

impl MetadataState {
    /// Applies `Command::BeginRegionMigration`.
    pub(super) fn begin_region_migration(
        &mut self,
        region_id: &u64,
        from: &u64,
        to: &u64,
    ) -> Result<CommandResult, MetadataError> {
        let refuse = |reason: String| {
            Err(MetadataError::MigrationRefused {
                region_id: *region_id,
                reason,
            })
        };
        let Some(region) = self.placement.regions.get(region_id) else {
            return refuse("no such region".into());
        };
        if let Some(&(f, t)) = self.placement.migrations.get(region_id) {
            // Only a retarget: same `from`, and the target lost its data since.
            if f != *from || self.superseding(t) != Some(*to) {
                return refuse(format!("moving from {f} to {t} already"));
            }
        }
        if !region.replicas.contains(from) {
            return refuse(format!("DataNode {from} holds no replica"));
        }
        if region.replicas.contains(to) {
            return refuse(format!("DataNode {to} holds a replica already"));
        }
        match self.data_nodes.get(to) {
            Some(n) if n.status == NodeStatus::Running => {}
            Some(n) => {
                return refuse(format!("DataNode {to} is {}", n.status.name()));
            }
            None => return Err(MetadataError::DataNodeNotFound(*to)),
        }
        self.placement.migrations.insert(*region_id, (*from, *to));
        self.bump();
        Ok(CommandResult::Done)
    }

    /// Applies `Command::FinishRegionMigration`.
    pub(super) fn finish_region_migration(
        &mut self,
        region_id: &u64,
        from: &u64,
        to: &u64,
    ) -> Result<CommandResult, MetadataError> {
        if self.placement.migrations.get(region_id) != Some(&(*from, *to)) {
            return Err(MetadataError::MigrationRefused {
                region_id: *region_id,
                reason: format!("no migration from {from} to {to} in progress"),
            });
        }
        self.placement.migrations.remove(region_id);
        let region = self
            .placement
            .regions
            .get_mut(region_id)
            .expect("a migrating region exists (a drop removes its migration)");
        for replica in region.replicas.iter_mut() {
            if replica == from {
                *replica = *to;
            }
        }
        if region.preferred_leader == *from {
            region.preferred_leader = *to;
        }
        self.bump();
        Ok(CommandResult::Done)
    }

    /// The region a partition slot maps to.
    pub fn partition(&self, database: &str, series_slot: u32, time_slot: i64) -> Option<u64> {
        self.placement
            .partitions
            .get(&(database.to_string(), series_slot, time_slot))
            .copied()
    }

    /// Every partition entry of a database: (series slot, time slot, region).
    pub fn partitions_of(&self, database: &str) -> Vec<(u32, i64, u64)> {
        let db = database.to_string();
        self.placement
            .partitions
            .range((db.clone(), 0, i64::MIN)..=(db, u32::MAX, i64::MAX))
            .map(|((_, s, t), r)| (*s, *t, *r))
            .collect()
    }

    /// How many partition entries a database holds (what `cn_database_partitions_max` caps).
    pub fn partition_count(&self, database: &str) -> u64 {
        self.placement
            .index
            .database(database)
            .map_or(0, |d| d.partitions)
    }

    /// The region group holding a series slot of a database in every time slot, if any.
    pub fn series_slot_region(&self, database: &str, series_slot: u32) -> Option<u64> {
        self.placement
            .index
            .series_slot_region(database, series_slot)
    }

    /// Whether the allocation index is exactly what the partition table and the region groups
    /// give, or why not. A pass over both: for tests and debug assertions, never on apply.
    pub fn check_index(&self) -> Result<(), String> {
        let rebuilt = PartitionIndex::build(&self.placement.partitions, &self.placement.regions)?;
        if rebuilt != self.placement.index {
            return Err(format!(
                "the allocation index drifted from the partition table: kept {:?}, rebuilt {:?}",
                self.placement.index, rebuilt
            ));
        }
        Ok(())
    }

    /// Panics unless [`MetadataState::check_index`] holds (tests).
    pub fn assert_index_consistent(&self) {
        if let Err(e) = self.check_index() {
            panic!("{e}");
        }
    }

    /// A region group.
    pub fn region(&self, id: u64) -> Option<&RegionGroup> {
        self.placement.regions.get(&id)
    }

    /// True when region group `id` was allocated here and has since been deleted (a finished
    /// DROP DATABASE): the positive signal on which a DataNode removes its replica for good.
    ///
    /// Region ids are allocated in increasing order (`next_region_id`, never reused) and a group
    /// leaves `regions` only when DROP DATABASE finishes, so "below `next_region_id` and absent"
    /// can only become true and never false again as entries apply: any applied state, however
    /// far behind the leader's, tells only the truth. A state that predates the allocation of
    /// `id` answers false. Id 0 is never allocated.
    pub fn region_dropped(&self, id: u64) -> bool {
        id != 0 && id < self.ids.next_region_id && !self.placement.regions.contains_key(&id)
    }

    /// Every region group, by id.
    pub fn regions(&self) -> impl Iterator<Item = &RegionGroup> {
        self.placement.regions.values()
    }

    /// Region `id`'s migration in progress: `(from, to)`.
    pub fn region_migration(&self, id: u64) -> Option<(u64, u64)> {
        self.placement.migrations.get(&id).copied()
    }

    /// Every migration in progress: `(region, from, to)`.
    pub fn migrations(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.placement
            .migrations
            .iter()
            .map(|(r, (f, t))| (*r, *f, *t))
    }

    /// The migrations that replace DataNodes which came back as new nodes: for every region
    /// replica on a DataNode `old` whose internal address a newer DataNode registered from
    /// (a node that lost its data directory registers anew, REVIEW H3), `(region, old, new)`,
    /// when `new` is Running and not already a replica. A region migrating already is due only
    /// when its target was itself superseded so (wiped again before the migration finished):
    /// the migration is then retargeted from the same `from`. The ConfigNode leader begins these.
    ///
    /// And for every region replica on a DataNode being removed (REMOVE DATANODE), a migration
    /// to the Running DataNode holding the fewest replicas (and migration targets) that holds
    /// none of the region's.
    pub fn replacements_due(&self) -> Vec<(u64, u64, u64)> {
        let mut load: BTreeMap<u64, usize> = self
            .data_nodes
            .values()
            .filter(|n| n.status == NodeStatus::Running)
            .map(|n| (n.id, 0))
            .collect();
        let holders = self
            .placement
            .regions
            .values()
            .flat_map(|r| r.replicas.iter())
            .chain(self.placement.migrations.values().map(|(_, to)| to));
        for n in holders {
            if let Some(l) = load.get_mut(n) {
                *l += 1;
            }
        }
        // One pass over the registry rather than one per replica.
        let superseded: BTreeMap<u64, u64> = self
            .data_nodes
            .keys()
            .filter_map(|&id| Some((id, self.superseding(id)?)))
            .collect();
        let mut due = Vec::new();
        for r in self.placement.regions.values() {
            if let Some(&(from, to)) = self.placement.migrations.get(&r.id) {
                if let Some(&new) = superseded.get(&to) {
                    if !r.replicas.contains(&new) {
                        due.push((r.id, from, new));
                    }
                }
                continue;
            }
            for &old in &r.replicas {
                let new = superseded.get(&old).copied().or_else(|| {
                    let removing = self
                        .data_nodes
                        .get(&old)
                        .is_some_and(|n| n.status == NodeStatus::Removing);
                    removing.then_some(())?;
                    load.iter()
                        .filter(|(n, _)| !r.replicas.contains(n))
                        .min_by_key(|(n, l)| (**l, **n))
                        .map(|(n, _)| *n)
                });
                if let Some(new) = new.filter(|new| !r.replicas.contains(new)) {
                    if let Some(l) = load.get_mut(&new) {
                        *l += 1;
                    }
                    due.push((r.id, old, new));
                    break;
                }
            }
        }
        due
    }

    /// Of `hosted`, the regions DataNode `node` has left for good: it is being removed (REMOVE
    /// DATANODE, never a replica target again) and is neither a replica nor a migration's target
    /// of the region, which still exists. (A dropped region is [`MetadataState::region_dropped`].)
    pub fn left_regions(&self, node: u64, hosted: &[u64]) -> Vec<u64> {
        let removing = self
            .data_nodes
            .get(&node)
            .is_some_and(|n| n.status == NodeStatus::Removing);
        if !removing {
            return Vec::new();
        }
        hosted
            .iter()
            .copied()
            .filter(|id| {
                self.placement.regions.get(id).is_some_and(|r| {
                    !r.replicas.contains(&node)
                        && self
                            .placement
                            .migrations
                            .get(id)
                            .is_none_or(|(_, to)| *to != node)
                })
            })
            .collect()
    }

    /// The newest Running DataNode registered from `node`'s internal address after it, if one
    /// is: `node` lost its data and came back as that one.
    pub(super) fn superseding(&self, node: u64) -> Option<u64> {
        let address = &self.data_nodes.get(&node)?.internal_address;
        self.data_nodes
            .values()
            .filter(|n| n.id > node && n.internal_address == *address)
            .max_by_key(|n| n.id)
            .filter(|n| n.status == NodeStatus::Running)
            .map(|n| n.id)
    }

    pub(super) fn allocate(
        &mut self,
        database: &str,
        slots: &[(u32, i64)],
        replication_factor: u32,
        region_groups_max: u32,
        database_partitions_max: u64,
    ) -> Result<CommandResult, MetadataError> {
        self.check_live_database(database)?;
        if replication_factor == 0 || replication_factor > REPLICATION_FACTOR_MAX {
            return Err(MetadataError::Limit(format!(
                "replication factor {replication_factor} outside 1..={REPLICATION_FACTOR_MAX}"
            )));
        }
        let running = self
            .data_nodes
            .values()
            .filter(|n| n.status == NodeStatus::Running)
            .count();
        // Checked once, before anything changes, so a refused allocation changes nothing.
        let can_create = running >= replication_factor as usize
            && self.placement.regions.len() + slots.len() <= REGION_GROUPS_MAX;
        let mut new: BTreeSet<(u32, i64)> = BTreeSet::new();
        for &(series_slot, time_slot) in slots {
            let key = (database.to_string(), series_slot, time_slot);
            if !self.placement.partitions.contains_key(&key) {
                new.insert((series_slot, time_slot));
            }
        }
        let held = self.partition_count(database);
        let wanted = new.len() as u64;
        if held.saturating_add(wanted) > database_partitions_max {
            return Err(MetadataError::PartitionsLimit {
                database: database.to_string(),
                held,
                wanted,
                max: database_partitions_max,
            });
        }
        let mut created = Vec::new();
        // In the command's order, which decides the groups: a replay must place every slot
        // where the first apply did.
        for &(series_slot, time_slot) in slots {
            // Mapped before this command, or earlier in it.
            if !new.remove(&(series_slot, time_slot)) {
                continue;
            }
            // A series slot stays in one region group across time slots: a device's data and
            // its deletions then live in one raft log.
            let region = match self
                .placement
                .index
                .series_slot_region(database, series_slot)
            {
                Some(region) => region,
                None => {
                    let groups = self
                        .placement
                        .index
                        .database(database)
                        .map_or(0, |d| d.groups.len());
                    if groups == 0 && !can_create {
                        // Nothing was inserted yet: with no group, every slot needs one.
                        return Err(MetadataError::NotEnoughDataNodes {
                            running,
                            replication_factor,
                        });
                    }
                    if can_create && groups < region_groups_max.max(1) as usize {
                        let id = self.create_region_group(database, replication_factor);
                        created.push(id);
                        id
                    } else {
                        self.placement
                            .index
                            .least_loaded(database)
                            .expect("a database with at least one group")
                    }
                }
            };
            self.placement
                .partitions
                .insert((database.to_string(), series_slot, time_slot), region);
            self.placement
                .index
                .add_partition(database, series_slot, region);
        }
        debug_assert!(new.is_empty(), "every new slot was placed");
        if !slots.is_empty() {
            self.bump();
        }
        Ok(CommandResult::RegionsCreated(created))
    }

    /// Places `replication_factor` replicas on the Running DataNodes holding the fewest replicas
    /// (ties to the lowest id), and the preferred leader on the replica leading the fewest groups.
    pub(super) fn create_region_group(&mut self, database: &str, replication_factor: u32) -> u64 {
        let mut replicas_on: BTreeMap<u64, (usize, usize)> = self
            .data_nodes
            .values()
            .filter(|n| n.status == NodeStatus::Running)
            .map(|n| (n.id, (0, 0)))
            .collect();
        assert!(
            replicas_on.len() >= replication_factor as usize,
            "{} Running DataNodes for replication factor {replication_factor}",
            replicas_on.len()
        );
        for r in self.placement.regions.values() {
            for n in &r.replicas {
                if let Some(load) = replicas_on.get_mut(n) {
                    load.0 += 1;
                }
            }
            if let Some(load) = replicas_on.get_mut(&r.preferred_leader) {
                load.1 += 1;
            }
        }
        let mut by_load: Vec<(usize, u64)> = replicas_on.iter().map(|(id, l)| (l.0, *id)).collect();
        by_load.sort();
        let replicas: Vec<u64> = by_load
            .iter()
            .take(replication_factor as usize)
            .map(|(_, id)| *id)
            .collect();
        let preferred_leader = *replicas
            .iter()
            .min_by_key(|id| (replicas_on[id].1, **id))
            .expect("at least one replica");
        let id = self.ids.next_region_id;
        self.ids.next_region_id += 1;
        self.placement.regions.insert(
            id,
            RegionGroup {
                id,
                database: database.to_string(),
                replicas,
                preferred_leader,
            },
        );
        self.placement.index.add_group(database, id);
        id
    }
}
