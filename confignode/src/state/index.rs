//! Placement's tables — the partition table, the region groups, the migrations in progress —
//! and the partition index: which group holds each series slot of a database and how loaded
//! each group is, derived from the partition table and never encoded.

use std::collections::{BTreeMap, BTreeSet};

/// A data region group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionGroup {
    /// The region id (also its raft group id on the DataNodes).
    pub id: u64,
    /// The database it belongs to.
    pub database: String,
    /// DataNodes holding a replica, in allocation order.
    pub replicas: Vec<u64>,
    /// The replica that should lead (spreads leaders over DataNodes).
    pub preferred_leader: u64,
}

/// Where the data lives: the tables placement (`state/placement.rs`) owns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Placement {
    /// (database, series slot, time slot) → region id.
    pub(super) partitions: BTreeMap<(String, u32, i64), u64>,
    /// Region id → region group.
    pub(super) regions: BTreeMap<u64, RegionGroup>,
    /// Region → its migration in progress, `(from, to)`: `to` hosts a joining replica that
    /// takes `from`'s place once the region's raft group swapped them.
    pub(super) migrations: BTreeMap<u64, (u64, u64)>,
    /// Derived from `partitions` and `regions`; never encoded.
    pub(super) index: PartitionIndex,
}

/// What an allocation looks up, kept beside the partition table so that it costs a lookup, not
/// a scan. Derived from the partition table and the region groups alone and never encoded:
/// every change to either updates it (allocation, region creation, DROP DATABASE), and decoding
/// a snapshot rebuilds it ([`PartitionIndex::build`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct PartitionIndex {
    pub(super) databases: BTreeMap<String, DatabaseIndex>,
}

/// One database's part of the [`PartitionIndex`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct DatabaseIndex {
    /// Entries of the partition table in the database.
    pub(super) partitions: u64,
    /// Series slot → the region group holding it, in every time slot.
    pub(super) series_slots: BTreeMap<u32, u64>,
    /// Every region group of the database → the series slots it holds.
    pub(super) groups: BTreeMap<u64, u32>,
    /// `(series slots held, group)` of every group: the first is where a new series slot goes
    /// when no group may be created (the least loaded, ties to the lowest id).
    pub(super) by_load: BTreeSet<(u32, u64)>,
}

impl PartitionIndex {
    /// The index of `partitions` over `regions`, or the first entry that breaks the table's
    /// rules: a series slot in two groups, a partition in a group not of its database.
    pub(super) fn build(
        partitions: &BTreeMap<(String, u32, i64), u64>,
        regions: &BTreeMap<u64, RegionGroup>,
    ) -> Result<PartitionIndex, String> {
        let mut index = PartitionIndex::default();
        for r in regions.values() {
            index.add_group(&r.database, r.id);
        }
        for ((db, series_slot, time_slot), region) in partitions {
            let entry = format!("partition ({db}, {series_slot}, {time_slot}) → region {region}");
            let Some(d) = index.databases.get(db.as_str()) else {
                return Err(format!("{entry}: {db} has no region group"));
            };
            match d.series_slots.get(series_slot) {
                Some(held) if held != region => {
                    return Err(format!("{entry}: the series slot is in region {held}"))
                }
                Some(_) => {}
                None if !d.groups.contains_key(region) => {
                    return Err(format!("{entry}: not a region group of {db}"))
                }
                None => {}
            }
            index.add_partition(db, *series_slot, *region);
        }
        Ok(index)
    }

    pub(super) fn database(&self, database: &str) -> Option<&DatabaseIndex> {
        self.databases.get(database)
    }

    /// The region group holding `series_slot` of `database`.
    pub(super) fn series_slot_region(&self, database: &str, series_slot: u32) -> Option<u64> {
        self.database(database)?
            .series_slots
            .get(&series_slot)
            .copied()
    }

    /// The group of `database` holding the fewest series slots, ties to the lowest id.
    pub(super) fn least_loaded(&self, database: &str) -> Option<u64> {
        let (_, region) = self.database(database)?.by_load.first()?;
        Some(*region)
    }

    /// A new region group of `database`, holding nothing yet.
    pub(super) fn add_group(&mut self, database: &str, region: u64) {
        let d = self.databases.entry(database.to_string()).or_default();
        let fresh = d.groups.insert(region, 0).is_none();
        assert!(fresh, "region group {region} of {database} indexed twice");
        d.by_load.insert((0, region));
    }

    /// A new partition (`database`, `series_slot`, any time slot) → `region`, a group of the
    /// database already holding the series slot, or a group of it when the slot is new.
    pub(super) fn add_partition(&mut self, database: &str, series_slot: u32, region: u64) {
        let d = self
            .databases
            .get_mut(database)
            .unwrap_or_else(|| panic!("partition of {database}, which has no region group"));
        d.partitions += 1;
        match d.series_slots.entry(series_slot) {
            std::collections::btree_map::Entry::Occupied(held) => assert_eq!(
                *held.get(),
                region,
                "series slot {series_slot} of {database} is in region {}, not {region}",
                held.get()
            ),
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(region);
                let load = d.groups.get_mut(&region).unwrap_or_else(|| {
                    panic!("region {region} is not a region group of {database}")
                });
                let moved = d.by_load.remove(&(*load, region));
                assert!(moved, "region {region} missing from the load order");
                *load += 1;
                d.by_load.insert((*load, region));
            }
        }
    }

    /// DROP DATABASE took its partitions and groups.
    pub(super) fn drop_database(&mut self, database: &str) {
        self.databases.remove(database);
    }
}
