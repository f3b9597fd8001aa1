//! Tests of placement: allocation of partitions to region groups, the partition index, the
//! database cap, and migrations of replicas (replacements, REMOVE DATANODE).

use super::*;

/// DataNodes 1, 2, 3 on `a:1`, `b:1`, `c:1`, and regions 1 and 2 of `root.sg` with a replica
/// on each.
fn three_nodes_two_regions() -> Harness {
    let mut h = Harness::new();
    for a in ["a:1", "b:1", "c:1"] {
        h.register(0, a);
    }
    h.apply(Command::CreateDatabase {
        database: "root.sg".into(),
        table_model: false,
    })
    .unwrap();
    h.apply(Command::AllocatePartitions {
        database: "root.sg".into(),
        slots: vec![(1, 0), (2, 0)],
        replication_factor: 3,
        region_groups_max: 2,
        database_partitions_max: u64::MAX,
    })
    .unwrap();
    h
}

/// A DataNode that came back as a new node (same internal address, new id) takes over the
/// old one's replicas by migrations: begun once per region, finished into the replica set,
/// kept across snapshots, refused when they do not fit.
#[test]
fn a_new_node_on_an_old_address_replaces_it_by_region_migrations() {
    let mut h = three_nodes_two_regions();
    assert!(h.state.replacements_due().is_empty());
    h.apply(Command::RegisterNewDataNode {
        internal_address: "c:1".into(),
        rpc_address: "c:1-rpc".into(),
    })
    .unwrap();
    let due = h.state.replacements_due();
    assert_eq!(due, vec![(1, 3, 4), (2, 3, 4)]);
    let refused = |h: &mut Harness, region_id, from, to| {
        matches!(
            h.apply(Command::BeginRegionMigration {
                region_id,
                from,
                to
            }),
            Err(MetadataError::MigrationRefused { .. } | MetadataError::DataNodeNotFound(_))
        )
    };
    assert!(refused(&mut h, 9, 3, 4), "no such region");
    assert!(refused(&mut h, 1, 4, 3), "4 holds no replica");
    assert!(refused(&mut h, 1, 3, 2), "2 holds one already");
    assert!(refused(&mut h, 1, 3, 7), "7 is not registered");
    for (region_id, from, to) in due {
        h.apply(Command::BeginRegionMigration {
            region_id,
            from,
            to,
        })
        .unwrap();
    }
    assert!(h.state.replacements_due().is_empty(), "begun once");
    assert!(refused(&mut h, 1, 1, 4), "one migration per region");
    // Region 2's target is wiped too before it finished: the migration is retargeted.
    h.apply(Command::RegisterNewDataNode {
        internal_address: "c:1".into(),
        rpc_address: "c:1-rpc".into(),
    })
    .unwrap();
    assert_eq!(h.state.replacements_due(), vec![(1, 3, 5), (2, 3, 5)]);
    assert!(refused(&mut h, 2, 1, 5), "a retarget keeps its from");
    h.apply(Command::BeginRegionMigration {
        region_id: 2,
        from: 3,
        to: 5,
    })
    .unwrap();
    assert_eq!(h.state.region_migration(2), Some((3, 5)));
    assert_eq!(h.state.replacements_due(), vec![(1, 3, 5)]);
    assert_eq!(h.state.region_migration(1), Some((3, 4)));
    let restored = MetadataState::decode_snapshot(&h.state.encode_snapshot()).unwrap();
    assert_eq!(restored, h.state);
    assert!(h
        .apply(Command::FinishRegionMigration {
            region_id: 1,
            from: 3,
            to: 5
        })
        .is_err());
    let v = h.state.metadata_version();
    h.apply(Command::FinishRegionMigration {
        region_id: 1,
        from: 3,
        to: 4,
    })
    .unwrap();
    assert!(h.state.metadata_version() > v);
    let r = h.state.region(1).unwrap();
    assert!(r.replicas.contains(&4) && !r.replicas.contains(&3));
    assert!(r.replicas.contains(&r.preferred_leader));
    assert_eq!(h.state.region_migration(1), None);
    assert_eq!(h.state.migrations().collect::<Vec<_>>(), vec![(2, 3, 5)]);
    // Region 1 finished onto 4, which 5 superseded: 4 is replaced in turn.
    assert_eq!(h.state.replacements_due(), vec![(1, 4, 5)]);
}

/// REMOVE DATANODE: refused while a region of the node would have nowhere to go; then the
/// node is Removing for good (a restart keeps it so), each of its replicas migrates to the
/// least-loaded Running node without one, and once a migration finished the node has left
/// that region for good.
#[test]
fn a_removed_node_migrates_its_replicas_and_then_has_left_them() {
    let mut h = three_nodes_two_regions();
    assert!(matches!(
        h.apply(Command::RemoveDataNode { data_node_id: 2 }),
        Err(MetadataError::MigrationRefused { region_id: 1, .. })
    ));
    assert!(matches!(
        h.apply(Command::RemoveDataNode { data_node_id: 9 }),
        Err(MetadataError::DataNodeNotFound(9))
    ));
    h.register(0, "d:1");
    h.register(0, "e:1");
    h.apply(Command::RemoveDataNode { data_node_id: 2 })
        .unwrap();
    h.apply(Command::RemoveDataNode { data_node_id: 2 })
        .unwrap();
    assert_eq!(h.register(2, "b:1").0, 2);
    assert_eq!(h.state.data_node(2).unwrap().status, NodeStatus::Removing);
    // Spread over the two new nodes, each holding nothing yet.
    assert_eq!(h.state.replacements_due(), vec![(1, 2, 4), (2, 2, 5)]);
    assert_eq!(h.state.left_regions(2, &[1, 2]), Vec::<u64>::new());
    for (region_id, from, to) in h.state.replacements_due() {
        h.apply(Command::BeginRegionMigration {
            region_id,
            from,
            to,
        })
        .unwrap();
    }
    assert!(h.state.replacements_due().is_empty());
    h.apply(Command::FinishRegionMigration {
        region_id: 1,
        from: 2,
        to: 4,
    })
    .unwrap();
    assert_eq!(h.state.left_regions(2, &[1, 2, 77]), vec![1]);
    assert_eq!(h.state.left_regions(4, &[1, 2]), Vec::<u64>::new());
    // A Removing node is never a migration's target.
    h.apply(Command::SetDataNodeStatus {
        data_node_id: 4,
        status: NodeStatus::Unknown,
    })
    .unwrap();
    let restored = MetadataState::decode_snapshot(&h.state.encode_snapshot()).unwrap();
    assert_eq!(restored, h.state);
}

#[test]
fn allocation_spreads_replicas_and_leaders_and_keeps_a_series_slot_in_one_group() {
    let mut h = Harness::new();
    for a in ["a:1", "b:1", "c:1"] {
        h.register(0, a);
    }
    h.apply(Command::CreateDatabase {
        database: "root.sg".into(),
        table_model: false,
    })
    .unwrap();
    let created = h
        .apply(Command::AllocatePartitions {
            database: "root.sg".into(),
            slots: vec![(1, 0), (2, 0), (3, 0), (1, 1)],
            replication_factor: 2,
            region_groups_max: 3,
            database_partitions_max: u64::MAX,
        })
        .unwrap();
    assert_eq!(created, CommandResult::RegionsCreated(vec![1, 2, 3]));
    let regions: Vec<&RegionGroup> = h.state.regions().collect();
    let mut replicas_per_node = BTreeMap::new();
    let mut leaders = BTreeSet::new();
    for r in &regions {
        assert_eq!(r.replicas.len(), 2);
        assert!(r.replicas.contains(&r.preferred_leader));
        leaders.insert(r.preferred_leader);
        for n in &r.replicas {
            *replicas_per_node.entry(*n).or_insert(0) += 1;
        }
    }
    assert_eq!(
        replicas_per_node.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2]
    );
    assert_eq!(
        leaders.len(),
        3,
        "every DataNode leads one group: {regions:?}"
    );
    assert_eq!(
        h.state.partition("root.sg", 1, 0),
        h.state.partition("root.sg", 1, 1)
    );
    // A fourth series slot reuses the least-loaded group.
    assert_eq!(
        h.apply(Command::AllocatePartitions {
            database: "root.sg".into(),
            slots: vec![(4, 0)],
            replication_factor: 2,
            region_groups_max: 3,
            database_partitions_max: u64::MAX,
        })
        .unwrap(),
        CommandResult::RegionsCreated(vec![])
    );
    // Too few Running DataNodes for a first group: refused, nothing changes.
    h.apply(Command::CreateDatabase {
        database: "root.x".into(),
        table_model: false,
    })
    .unwrap();
    let before = h.state.clone();
    let refused = h.apply(Command::AllocatePartitions {
        database: "root.x".into(),
        slots: vec![(1, 0)],
        replication_factor: 4,
        region_groups_max: 1,
        database_partitions_max: u64::MAX,
    });
    assert!(matches!(
        refused,
        Err(MetadataError::NotEnoughDataNodes { .. })
    ));
    assert_eq!(
        h.state.partitions_of("root.x"),
        before.partitions_of("root.x")
    );
}

#[test]
fn a_region_group_counts_as_dropped_only_once_drop_database_finished() {
    let mut h = Harness::new();
    h.register(0, "a");
    for db in ["root.a", "root.b"] {
        h.apply(Command::CreateDatabase {
            database: db.into(),
            table_model: false,
        })
        .unwrap();
    }
    let created = |r| match r {
        CommandResult::RegionsCreated(ids) => ids,
        other => panic!("{other:?}"),
    };
    let a = created(
        h.apply(allocate("root.a", vec![(1, 0)], 1, u64::MAX))
            .unwrap(),
    );
    let b = created(
        h.apply(allocate("root.b", vec![(1, 0)], 1, u64::MAX))
            .unwrap(),
    );
    let (a, b) = (a[0], b[0]);
    // Never allocated (0, and ids at or past the next one) and live groups: not dropped.
    for id in [0, a, b, b + 1, u64::MAX] {
        assert!(!h.state.region_dropped(id), "region {id}");
    }
    let op = match h
        .apply(Command::BeginDropDatabase {
            database: "root.a".into(),
        })
        .unwrap()
    {
        CommandResult::OperationBegun(id) => id,
        other => panic!("{other:?}"),
    };
    assert!(!h.state.region_dropped(a), "a pending drop is not final");
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    assert!(h.state.region_dropped(a));
    assert!(!h.state.region_dropped(b));
    // Survives a snapshot, and re-creating the database allocates a new id.
    let restored = MetadataState::decode_snapshot(&h.state.encode_snapshot()).unwrap();
    assert!(restored.region_dropped(a));
    h.apply(Command::CreateDatabase {
        database: "root.a".into(),
        table_model: false,
    })
    .unwrap();
    let again = created(
        h.apply(allocate("root.a", vec![(1, 0)], 1, u64::MAX))
            .unwrap(),
    );
    assert!(again[0] > b && h.state.region_dropped(a));
}

/// The allocation as it was before the index (a scan of the table per slot), kept as the
/// model the indexed one must match slot for slot: replaying a log written before the index
/// must place every slot where the first apply did.
fn allocate_by_scan(
    state: &mut MetadataState,
    database: &str,
    slots: &[(u32, i64)],
    replication_factor: u32,
    region_groups_max: u32,
) -> Result<CommandResult, MetadataError> {
    match state.databases.get(database) {
        None => return Err(MetadataError::DatabaseNotFound(database.to_string())),
        Some(true) => return Err(MetadataError::PendingDelete(database.to_string())),
        Some(false) => {}
    }
    if replication_factor == 0 || replication_factor > REPLICATION_FACTOR_MAX {
        return Err(MetadataError::Limit(format!(
            "replication factor {replication_factor} outside 1..={REPLICATION_FACTOR_MAX}"
        )));
    }
    let running = state
        .data_nodes
        .values()
        .filter(|n| n.status == NodeStatus::Running)
        .count();
    // Checked once, before anything changes, so a refused allocation changes nothing.
    let can_create = running >= replication_factor as usize
        && state.placement.regions.len() + slots.len() <= REGION_GROUPS_MAX;
    let mut created = Vec::new();
    for &(series_slot, time_slot) in slots {
        let key = (database.to_string(), series_slot, time_slot);
        if state.placement.partitions.contains_key(&key) {
            continue;
        }
        // A series slot stays in one region group across time slots: a device's data and
        // its deletions then live in one raft log.
        let same_slot = state
            .placement
            .partitions
            .iter()
            .find(|((db, s, _), _)| db == database && *s == series_slot)
            .map(|(_, r)| *r);
        let region = match same_slot {
            Some(region) => region,
            None => {
                let groups: Vec<u64> = state
                    .placement
                    .regions
                    .values()
                    .filter(|r| r.database == database)
                    .map(|r| r.id)
                    .collect();
                if groups.is_empty() && !can_create {
                    // Nothing was inserted yet: with no group, every slot needs one.
                    return Err(MetadataError::NotEnoughDataNodes {
                        running,
                        replication_factor,
                    });
                }
                if can_create && groups.len() < region_groups_max.max(1) as usize {
                    let id = state.create_region_group(database, replication_factor);
                    created.push(id);
                    id
                } else {
                    // The group holding the fewest series slots; ties to the lowest id.
                    let mut slots_per_group: BTreeMap<u64, BTreeSet<u32>> =
                        groups.iter().map(|g| (*g, BTreeSet::new())).collect();
                    for ((db, s, _), r) in &state.placement.partitions {
                        if db == database {
                            slots_per_group.entry(*r).or_default().insert(*s);
                        }
                    }
                    slots_per_group
                        .iter()
                        .min_by_key(|(id, s)| (s.len(), **id))
                        .map(|(id, _)| *id)
                        .expect("a database with at least one group")
                }
            }
        };
        state.placement.partitions.insert(key, region);
    }
    if !slots.is_empty() {
        state.bump();
    }
    Ok(CommandResult::RegionsCreated(created))
}

fn allocate(
    database: &str,
    slots: Vec<(u32, i64)>,
    region_groups_max: u32,
    database_partitions_max: u64,
) -> Command {
    Command::AllocatePartitions {
        database: database.into(),
        slots,
        replication_factor: 1,
        region_groups_max,
        database_partitions_max,
    }
}

/// A state with one DataNode and `database`.
fn with_database(database: &str) -> Harness {
    let mut h = Harness::new();
    h.register(0, "a:1");
    h.apply(Command::CreateDatabase {
        database: database.into(),
        table_model: false,
    })
    .unwrap();
    h
}

#[test]
fn allocating_100000_slots_into_a_table_of_200000_costs_lookups_not_scans() {
    // Before the index this took minutes: every new slot of series slot 999 scanned the
    // 200000 entries of series slots 0..200 that sort before it (REVIEW H5).
    let mut h = with_database("root.sg");
    for half in 0..2u32 {
        let slots = (half * 100..(half + 1) * 100)
            .flat_map(|s| (0..1000i64).map(move |t| (s, t)))
            .collect();
        h.apply(allocate("root.sg", slots, 2, u64::MAX)).unwrap();
    }
    assert_eq!(h.state.partition_count("root.sg"), 200_000);
    let slots: Vec<(u32, i64)> = (0..100_000i64).map(|t| (999, t)).collect();
    h.apply(allocate("root.sg", slots, 2, 1_000_000)).unwrap();
    assert_eq!(h.state.partition_count("root.sg"), 300_000);
    let region = h.state.series_slot_region("root.sg", 999).unwrap();
    assert_eq!(h.state.partition("root.sg", 999, 0), Some(region));
    assert_eq!(h.state.partition("root.sg", 999, 99_999), Some(region));
    h.state.assert_index_consistent();
}

#[test]
fn the_index_is_rebuilt_from_a_snapshot_and_dropped_with_its_database() {
    let mut h = with_database("root.a");
    h.apply(Command::CreateDatabase {
        database: "root.b".into(),
        table_model: false,
    })
    .unwrap();
    for db in ["root.a", "root.b"] {
        h.apply(allocate(db, vec![(1, 0), (2, 0), (3, 0), (1, 1)], 2, 100))
            .unwrap();
    }
    h.state.assert_index_consistent();
    let mut restored = Harness {
        state: MetadataState::decode_snapshot(&h.state.encode_snapshot()).unwrap(),
        index: h.index,
    };
    restored.state.assert_index_consistent();
    assert_eq!(restored.state, h.state, "the index included");
    // The rebuilt index places the next slots as the kept one does: series slot 4 goes to
    // the group with fewer series slots, series slot 1 stays where it is.
    let next = allocate("root.a", vec![(4, 0), (1, 5)], 2, 100);
    assert_eq!(h.apply(next.clone()), restored.apply(next));
    assert_eq!(restored.state, h.state);
    assert_eq!(
        h.state.partition("root.a", 1, 5),
        h.state.partition("root.a", 1, 0)
    );

    let op = match h
        .apply(Command::BeginDropDatabase {
            database: "root.a".into(),
        })
        .unwrap()
    {
        CommandResult::OperationBegun(id) => id,
        other => panic!("{other:?}"),
    };
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    h.state.assert_index_consistent();
    assert_eq!(h.state.partition_count("root.a"), 0);
    assert_eq!(h.state.series_slot_region("root.a", 1), None);
    assert_eq!(h.state.partition_count("root.b"), 4);
    // Created again, the database starts from nothing: new groups, no old series slot.
    h.apply(Command::CreateDatabase {
        database: "root.a".into(),
        table_model: false,
    })
    .unwrap();
    let created = h.apply(allocate("root.a", vec![(1, 0)], 2, 100)).unwrap();
    let CommandResult::RegionsCreated(ids) = created else {
        panic!("{created:?}")
    };
    assert_eq!(ids.len(), 1);
    assert_eq!(h.state.series_slot_region("root.a", 1), Some(ids[0]));
    h.state.assert_index_consistent();
}

#[test]
fn a_snapshot_whose_table_breaks_the_index_rules_does_not_decode() {
    let mut h = with_database("root.a");
    h.apply(allocate("root.a", vec![(1, 0)], 2, 100)).unwrap();
    let region = h.state.partition("root.a", 1, 0).unwrap();
    // Series slot 1 in a second, unknown group: the table no longer says where it lives.
    let mut bad = h.state.clone();
    bad.placement
        .partitions
        .insert(("root.a".into(), 1, 1), region + 7);
    assert!(bad.check_index().is_err());
    // Written past `encode_snapshot`'s own assertion, as a damaged writer would.
    let bytes = envelope::seal(MetadataState::SNAPSHOT_MAGIC, |w| {
        bad.encode_snapshot_body(w)
    });
    let e = MetadataState::decode_snapshot(&bytes).unwrap_err();
    assert!(e.reason.contains("partition table"), "{e}");
}

#[test]
fn an_allocation_past_the_database_cap_is_refused_whole_and_alike_on_every_replica() {
    let mut a = with_database("root.sg");
    let mut b = with_database("root.sg");
    for h in [&mut a, &mut b] {
        h.apply(Command::CreateDatabase {
            database: "root.other".into(),
            table_model: false,
        })
        .unwrap();
        h.apply(allocate("root.sg", vec![(1, 0), (1, 1), (2, 0)], 2, 5))
            .unwrap();
    }
    // One slot it holds, three new: 3 + 3 > 5.
    let over = allocate("root.sg", vec![(1, 0), (3, 0), (3, 1), (1, 2)], 2, 5);
    let before = a.state.clone();
    let refused = a.apply(over.clone());
    assert_eq!(refused, b.apply(over));
    let e = refused.unwrap_err();
    assert_eq!(
        e,
        MetadataError::PartitionsLimit {
            database: "root.sg".into(),
            held: 3,
            wanted: 3,
            max: 5
        }
    );
    assert_eq!(e.status_code(), common::StatusCode::IllegalParameter);
    assert!(
        e.to_string().contains("cn_database_partitions_max is 5"),
        "{e}"
    );
    // Nothing partially allocated: only the applied index moved.
    let mut expected = before;
    expected.applied_index = a.index;
    assert_eq!(a.state, expected);
    assert_eq!(a.state, b.state);
    assert_eq!(a.state.partition("root.sg", 3, 0), None);
    // Up to the cap exactly is allowed (slots it holds count once, repeats once) ...
    for h in [&mut a, &mut b] {
        h.apply(allocate(
            "root.sg",
            vec![(1, 0), (3, 0), (3, 0), (3, 1)],
            2,
            5,
        ))
        .unwrap();
        assert_eq!(h.state.partition_count("root.sg"), 5);
        // ... asking again for what it holds changes nothing, and another database has its
        // own count.
        h.apply(allocate("root.sg", vec![(3, 1)], 2, 5)).unwrap();
        h.apply(allocate("root.other", vec![(1, 0)], 2, 5)).unwrap();
    }
    assert!(matches!(
        a.apply(allocate("root.sg", vec![(4, 0)], 2, 5)),
        Err(MetadataError::PartitionsLimit {
            held: 5,
            wanted: 1,
            ..
        })
    ));
    // An entry written before the cap existed (version 1: no cap) is applied as it was.
    a.apply(allocate("root.sg", vec![(4, 0)], 2, u64::MAX))
        .unwrap();
    assert_eq!(a.state.partition_count("root.sg"), 6);
    a.state.assert_index_consistent();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The indexed allocation places every slot, creates every group and refuses every
    /// command exactly as the scan it replaced: old log entries replay to the same state.
    #[test]
    fn the_indexed_allocation_places_slots_where_the_scan_did(
        commands in prop::collection::vec(arb_command(), 0..60)
    ) {
        let mut indexed = Harness::new();
        let mut scanned = Harness::new();
        for command in commands {
            let command = match command {
                // The scan had no cap.
                Command::AllocatePartitions { database, slots, replication_factor, region_groups_max, .. } => {
                    Command::AllocatePartitions {
                        database,
                        slots,
                        replication_factor,
                        region_groups_max,
                        database_partitions_max: u64::MAX,
                    }
                }
                other => other,
            };
            let ri = indexed.apply(command.clone());
            let rs = match &command {
                Command::AllocatePartitions { database, slots, replication_factor, region_groups_max, .. } => {
                    scanned.index += 1;
                    scanned.state.applied_index = scanned.index;
                    allocate_by_scan(&mut scanned.state, database, slots, *replication_factor, *region_groups_max)
                }
                _ => scanned.apply(command.clone()),
            };
            prop_assert_eq!(&ri, &rs, "{:?}", command);
            prop_assert_eq!(&indexed.state.placement.partitions, &scanned.state.placement.partitions);
            prop_assert_eq!(&indexed.state.placement.regions, &scanned.state.placement.regions);
            prop_assert_eq!(indexed.state.metadata_version, scanned.state.metadata_version);
            prop_assert_eq!(indexed.state.check_index(), Ok(()));
        }
    }
}
