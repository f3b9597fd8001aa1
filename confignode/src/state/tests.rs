use super::*;
use crate::command::tests::arb_command;
use common::StatusCode;
use proptest::prelude::*;

struct Harness {
    state: MetadataState,
    index: u64,
}

impl Harness {
    fn new() -> Self {
        Harness {
            state: MetadataState::new(),
            index: 0,
        }
    }
    fn apply(&mut self, command: Command) -> Result<CommandResult, MetadataError> {
        self.index += 1;
        self.state.apply(self.index, &command)
    }
    fn register(&mut self, id: u64, address: &str) -> (u64, u64) {
        match self
            .apply(Command::RegisterDataNode {
                data_node_id: id,
                internal_address: address.into(),
                rpc_address: format!("{address}-rpc"),
            })
            .unwrap()
        {
            CommandResult::Registered {
                data_node_id,
                incarnation_epoch,
            } => (data_node_id, incarnation_epoch),
            other => panic!("{other:?}"),
        }
    }
}

/// A version-8 snapshot with no confirmed incarnation as version 7 wrote it: without the
/// (empty) table, under its magic, with its CRC.
fn as_version_7(v8: &[u8]) -> Vec<u8> {
    assert_eq!(&v8[..8], b"FPCNSNP8");
    assert_eq!(
        &v8[v8.len() - 8..v8.len() - 4],
        &[0, 0, 0, 0],
        "confirmed incarnations"
    );
    let mut v7 = v8[..v8.len() - 8].to_vec();
    v7[..8].copy_from_slice(b"FPCNSNP7");
    let crc = crc32fast::hash(&v7);
    v7.extend_from_slice(&crc.to_le_bytes());
    v7
}

fn spec(device: &str, measurement: &str, data_type: DataType) -> SeriesSpec {
    SeriesSpec {
        device: device.into(),
        measurement: measurement.into(),
        data_type,
        codec: SeriesCodec::default(),
        meta: SeriesMeta::default(),
    }
}

#[test]
fn registering_twice_raises_the_epoch_and_keeps_the_id() {
    let mut h = Harness::new();
    let (id, e1) = h.register(0, "a:1");
    assert_eq!((id, e1), (1, 1));
    assert_eq!(h.register(id, "a:1"), (1, 2));
    // Lost its id file, same address: same node, next epoch.
    assert_eq!(h.register(0, "a:1"), (1, 3));
    assert_eq!(h.register(0, "b:1"), (2, 1));
    assert_eq!(h.state.data_node(1).unwrap().status, NodeStatus::Running);
}

/// REVIEW H3: a DataNode that lost its identity (its data directory wiped) and comes back on
/// a known address is a new node with a new id; the old id keeps its record (and regions)
/// and is never handed out again. Entries of the old command replay as they applied.
#[test]
fn a_node_without_an_identity_is_new_even_on_a_known_address() {
    let mut h = Harness::new();
    assert_eq!(h.register(0, "a:1"), (1, 1));
    let registered = h
        .apply(Command::RegisterNewDataNode {
            internal_address: "a:1".into(),
            rpc_address: "a:1-rpc".into(),
        })
        .unwrap();
    assert_eq!(
        registered,
        CommandResult::Registered {
            data_node_id: 2,
            incarnation_epoch: 1
        }
    );
    let old = h.state.data_node(1).unwrap();
    assert_eq!(
        (old.incarnation_epoch, old.internal_address.as_str()),
        (1, "a:1")
    );
    // The new node keeps its id from then on; the old one's id is still its own.
    assert_eq!(h.register(2, "a:1"), (2, 2));
    assert_eq!(h.register(1, "a:1"), (1, 2));
    assert_eq!(h.register(0, "c:1"), (3, 1));
}

/// DataNodes 1, 2, 3 on `a:1`, `b:1`, `c:1`, and regions 1 and 2 of `root.sg` with a replica
/// on each.
fn three_nodes_two_regions() -> Harness {
    let mut h = Harness::new();
    for a in ["a:1", "b:1", "c:1"] {
        h.register(0, a);
    }
    h.apply(Command::CreateDatabase {
        database: "root.sg".into(),
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
fn auto_create_makes_the_level1_database_and_keeps_existing_types() {
    let mut h = Harness::new();
    h.apply(Command::CreateTimeseries {
        series: vec![spec("root.sg.d1", "s1", DataType::Int64)],
        auto_create: true,
    })
    .unwrap();
    assert_eq!(h.state.database_of("root.sg.d1"), Some(("root.sg", false)));
    let v = h.state.metadata_version();
    let again = h.apply(Command::CreateTimeseries {
        series: vec![spec("root.sg.d1", "s1", DataType::Double)],
        auto_create: true,
    });
    assert!(matches!(again, Err(MetadataError::TypeMismatch { .. })));
    assert_eq!(
        again.unwrap_err().status_code(),
        common::StatusCode::DataTypeMismatch
    );
    assert_eq!(
        h.state.metadata_version(),
        v,
        "a refused command changes nothing"
    );
    assert!(h
        .apply(Command::CreateTimeseries {
            series: vec![spec("root.other.d1", "s1", DataType::Int64)],
            auto_create: false,
        })
        .is_err());
    assert!(matches!(
        h.apply(Command::CreateDatabase {
            database: "root.sg.inner".into()
        }),
        Err(MetadataError::DatabaseOverlap(..))
    ));
}

#[test]
fn allocation_spreads_replicas_and_leaders_and_keeps_a_series_slot_in_one_group() {
    let mut h = Harness::new();
    for a in ["a:1", "b:1", "c:1"] {
        h.register(0, a);
    }
    h.apply(Command::CreateDatabase {
        database: "root.sg".into(),
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

/// The index of series with declared codecs follows creations, deletions, database drops
/// and snapshots, so the DataNodes' poll never needs a pass over every series.
#[test]
fn declared_codec_series_follow_every_change() {
    let mut h = Harness::new();
    let declared =
        SeriesCodec::parse(DataType::Double, Some("CHIMP"), Some("UNCOMPRESSED")).unwrap();
    let with_codec = |device: &str, measurement: &str| SeriesSpec {
        codec: declared,
        ..spec(device, measurement, DataType::Double)
    };
    h.apply(Command::CreateTimeseries {
        series: vec![
            with_codec("root.sg.d1", "s1"),
            with_codec("root.sg.d1", "s2"),
            spec("root.sg.d1", "s3", DataType::Double),
            with_codec("root.other.d1", "s1"),
        ],
        auto_create: true,
    })
    .unwrap();
    let listed = |state: &MetadataState| -> Vec<String> {
        state
            .declared_codec_series()
            .map(|(d, m, r)| {
                assert!(r.codec.is_declared());
                format!("{d}.{m}")
            })
            .collect()
    };
    let want = ["root.other.d1.s1", "root.sg.d1.s1", "root.sg.d1.s2"];
    assert_eq!(listed(&h.state), want);
    let all: Vec<String> = h
        .state
        .all_series()
        .filter(|(_, _, r)| r.codec.is_declared())
        .map(|(d, m, _)| format!("{d}.{m}"))
        .collect();
    assert_eq!(all, want, "the index agrees with a pass over every series");
    let restored = MetadataState::decode_snapshot(&h.state.encode_snapshot()).unwrap();
    assert_eq!(listed(&restored), want);

    let delete = h
        .apply(Command::BeginDeleteTimeseries {
            series: vec![("root.sg.d1".into(), "s1".into())],
        })
        .unwrap();
    let CommandResult::OperationBegun(op) = delete else {
        panic!("{delete:?}");
    };
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    assert_eq!(listed(&h.state), ["root.other.d1.s1", "root.sg.d1.s2"]);
    let drop = h
        .apply(Command::BeginDropDatabase {
            database: "root.sg".into(),
        })
        .unwrap();
    let CommandResult::OperationBegun(op) = drop else {
        panic!("{drop:?}");
    };
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    assert_eq!(listed(&h.state), ["root.other.d1.s1"]);
}

#[test]
fn delete_goes_through_pending_then_final() {
    let mut h = Harness::new();
    h.apply(Command::CreateTimeseries {
        series: vec![
            spec("root.sg.d1", "s1", DataType::Int64),
            spec("root.sg.d1", "s2", DataType::Int64),
        ],
        auto_create: true,
    })
    .unwrap();
    let op = match h
        .apply(Command::BeginDeleteTimeseries {
            series: vec![("root.sg.d1".into(), "s1".into())],
        })
        .unwrap()
    {
        CommandResult::OperationBegun(id) => id,
        other => panic!("{other:?}"),
    };
    assert!(h.state.series("root.sg.d1", "s1").unwrap().pending_delete);
    assert_eq!(
        h.state.usable_series_of("root.sg.d1"),
        vec![("s2".to_string(), DataType::Int64)]
    );
    // While pending, neither a re-create nor a second delete is accepted.
    assert!(matches!(
        h.apply(Command::CreateTimeseries {
            series: vec![spec("root.sg.d1", "s1", DataType::Int64)],
            auto_create: true,
        }),
        Err(MetadataError::PendingDelete(_))
    ));
    assert!(h
        .apply(Command::BeginDeleteTimeseries {
            series: vec![("root.sg.d1".into(), "s1".into())],
        })
        .is_err());
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    assert!(h.state.series("root.sg.d1", "s1").is_none());
    assert_eq!(h.state.operations().count(), 0);
    // After the final commit the series may be created again, with another type.
    h.apply(Command::CreateTimeseries {
        series: vec![spec("root.sg.d1", "s1", DataType::Text)],
        auto_create: true,
    })
    .unwrap();

    let op = match h
        .apply(Command::BeginDropDatabase {
            database: "root.sg".into(),
        })
        .unwrap()
    {
        CommandResult::OperationBegun(id) => id,
        other => panic!("{other:?}"),
    };
    assert!(h.state.usable_series_of("root.sg.d1").is_empty());
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    assert_eq!(h.state.databases().count(), 0);
    assert_eq!(h.state.all_series().count(), 0);
}

fn begun(result: Result<CommandResult, MetadataError>) -> u64 {
    match result {
        Ok(CommandResult::OperationBegun(id)) => id,
        other => panic!("{other:?}"),
    }
}

/// A state with `root.sg` holding `root.sg.d1.s1` and `root.sg.d1.s2` in a region group.
fn with_two_series() -> Harness {
    let mut h = Harness::new();
    h.register(0, "a:1");
    h.apply(Command::CreateTimeseries {
        series: vec![
            spec("root.sg.d1", "s1", DataType::Int64),
            spec("root.sg.d1", "s2", DataType::Int64),
        ],
        auto_create: true,
    })
    .unwrap();
    h.apply(Command::AllocatePartitions {
        database: "root.sg".into(),
        slots: vec![(1, 0)],
        replication_factor: 1,
        region_groups_max: 1,
        database_partitions_max: u64::MAX,
    })
    .unwrap();
    h
}

#[test]
fn a_delete_finished_after_a_drop_took_its_series_is_a_no_op() {
    let mut h = with_two_series();
    let delete = begun(h.apply(Command::BeginDeleteTimeseries {
        series: vec![("root.sg.d1".into(), "s1".into())],
    }));
    let drop = begun(h.apply(Command::BeginDropDatabase {
        database: "root.sg".into(),
    }));
    h.apply(Command::FinishOperation { operation_id: drop })
        .unwrap();
    assert_eq!(h.state.databases().count(), 0);
    assert_eq!(h.state.all_series().count(), 0);
    // Before the fix this apply panicked ("was not pending delete") on every replica.
    let version = h.state.metadata_version();
    assert_eq!(
        h.apply(Command::FinishOperation {
            operation_id: delete
        }),
        Ok(CommandResult::Done)
    );
    assert_eq!(
        h.state.operations().count(),
        0,
        "the delete is no longer pending"
    );
    assert_eq!(h.state.databases().count(), 0);
    assert_eq!(h.state.all_series().count(), 0);
    assert_eq!(h.state.regions().count(), 0);
    assert!(h.state.metadata_version() > version);
    h.state.assert_index_consistent();
    assert_eq!(h.state.check_operations(), Ok(()));
    let restored = MetadataState::decode_snapshot(&h.state.encode_snapshot()).unwrap();
    assert_eq!(restored, h.state);
}

#[test]
fn a_pending_drop_refuses_what_would_touch_its_database() {
    let mut h = with_two_series();
    let drop = begun(h.apply(Command::BeginDropDatabase {
        database: "root.sg".into(),
    }));
    let pending = MetadataError::PendingDelete("root.sg".into());
    let refused = [
        Command::BeginDeleteTimeseries {
            series: vec![("root.sg.d1".into(), "s1".into())],
        },
        Command::BeginDropDatabase {
            database: "root.sg".into(),
        },
        Command::CreateTimeseries {
            series: vec![spec("root.sg.d2", "s1", DataType::Int64)],
            auto_create: true,
        },
        Command::CreateTimeseries {
            series: vec![spec("root.sg.d2", "s1", DataType::Int64)],
            auto_create: false,
        },
        Command::CreateDatabase {
            database: "root.sg".into(),
        },
        Command::AllocatePartitions {
            database: "root.sg".into(),
            slots: vec![(2, 0)],
            replication_factor: 1,
            region_groups_max: 1,
            database_partitions_max: u64::MAX,
        },
    ];
    for command in refused {
        let before = h.state.clone();
        let result = h.apply(command.clone());
        assert_eq!(result, Err(pending.clone()), "{command:?}");
        assert_eq!(
            result.unwrap_err().to_string(),
            "root.sg is being deleted",
            "the client is told why"
        );
        let mut expected = before;
        expected.applied_index = h.index;
        assert_eq!(h.state, expected, "{command:?} changed nothing");
    }
    h.apply(Command::FinishOperation { operation_id: drop })
        .unwrap();
    // Finished, the drop is not pending any more: a second Finish is refused, not applied.
    let before = h.state.clone();
    assert_eq!(
        h.apply(Command::FinishOperation { operation_id: drop }),
        Err(MetadataError::OperationNotFound(drop))
    );
    assert_eq!(h.state.metadata_version(), before.metadata_version());
    assert_eq!(h.state.check_operations(), Ok(()));
}

#[test]
fn a_delete_finished_before_the_drop_of_its_database_removes_its_series_first() {
    let mut h = with_two_series();
    let delete = begun(h.apply(Command::BeginDeleteTimeseries {
        series: vec![("root.sg.d1".into(), "s1".into())],
    }));
    let drop = begun(h.apply(Command::BeginDropDatabase {
        database: "root.sg".into(),
    }));
    h.apply(Command::FinishOperation {
        operation_id: delete,
    })
    .unwrap();
    assert!(h.state.series("root.sg.d1", "s1").is_none());
    assert!(h.state.series("root.sg.d1", "s2").is_some());
    assert_eq!(h.state.check_operations(), Ok(()));
    h.apply(Command::FinishOperation { operation_id: drop })
        .unwrap();
    assert_eq!(h.state.databases().count(), 0);
    assert_eq!(h.state.all_series().count(), 0);
    assert_eq!(h.state.operations().count(), 0);
    h.state.assert_index_consistent();
}

#[test]
fn a_delete_overtaken_by_a_drop_leaves_the_series_created_again_alone() {
    let mut h = with_two_series();
    h.apply(Command::CreateTimeseries {
        series: vec![spec("root.other.d1", "s1", DataType::Int64)],
        auto_create: true,
    })
    .unwrap();
    let old = begun(h.apply(Command::BeginDeleteTimeseries {
        series: vec![
            ("root.sg.d1".into(), "s1".into()),
            ("root.other.d1".into(), "s1".into()),
        ],
    }));
    let drop = begun(h.apply(Command::BeginDropDatabase {
        database: "root.sg".into(),
    }));
    h.apply(Command::FinishOperation { operation_id: drop })
        .unwrap();
    // What the drop removed is no longer the delete's: it still deletes the other series.
    let kinds: Vec<_> = h.state.operations().collect();
    assert_eq!(
        kinds,
        vec![(
            old,
            &OperationKind::DeleteTimeseries(vec![("root.other.d1".into(), "s1".into())])
        )]
    );
    assert_eq!(h.state.check_operations(), Ok(()));
    // The database and the series are created again, and the new series deleted again.
    h.apply(Command::CreateTimeseries {
        series: vec![
            spec("root.sg.d1", "s1", DataType::Text),
            spec("root.sg.d1", "s2", DataType::Text),
        ],
        auto_create: true,
    })
    .unwrap();
    let new = begun(h.apply(Command::BeginDeleteTimeseries {
        series: vec![("root.sg.d1".into(), "s1".into())],
    }));
    h.apply(Command::FinishOperation { operation_id: old })
        .unwrap();
    assert!(h.state.series("root.other.d1", "s1").is_none());
    assert_eq!(
        h.state.series("root.sg.d1", "s1"),
        Some(SeriesRecord {
            data_type: DataType::Text,
            pending_delete: true,
            codec: SeriesCodec::default(),
        }),
        "the new series is the new delete's to remove"
    );
    assert!(!h.state.series("root.sg.d1", "s2").unwrap().pending_delete);
    assert_eq!(h.state.check_operations(), Ok(()));
    h.apply(Command::FinishOperation { operation_id: new })
        .unwrap();
    assert!(h.state.series("root.sg.d1", "s1").is_none());
    assert!(h.state.series("root.sg.d1", "s2").is_some());
    assert_eq!(h.state.operations().count(), 0);
    assert_eq!(h.state.check_operations(), Ok(()));
    h.state.assert_index_consistent();
}

#[test]
fn a_snapshot_taken_between_the_drop_and_an_overtaken_delete_decodes_as_replay_reaches() {
    let mut h = with_two_series();
    let old = begun(h.apply(Command::BeginDeleteTimeseries {
        series: vec![
            ("root.sg.d1".into(), "s1".into()),
            ("root.sg.d1".into(), "s2".into()),
        ],
    }));
    let drop = begun(h.apply(Command::BeginDropDatabase {
        database: "root.sg".into(),
    }));
    h.apply(Command::FinishOperation { operation_id: drop })
        .unwrap();
    h.apply(Command::CreateTimeseries {
        series: vec![spec("root.sg.d1", "s1", DataType::Text)],
        auto_create: true,
    })
    .unwrap();
    let new = begun(h.apply(Command::BeginDeleteTimeseries {
        series: vec![("root.sg.d1".into(), "s1".into())],
    }));
    // Before the fix the drop's Finish left both series in the old delete's list: a
    // snapshot taken then holds that list (written past the encoder's own assertion).
    let mut written_before_the_fix = h.state.clone();
    written_before_the_fix.operations.insert(
        old,
        OperationKind::DeleteTimeseries(vec![
            ("root.sg.d1".into(), "s1".into()),
            ("root.sg.d1".into(), "s2".into()),
        ]),
    );
    assert!(written_before_the_fix.check_operations().is_err());
    let bytes = envelope::seal(MetadataState::SNAPSHOT_MAGIC, |w| {
        written_before_the_fix.encode_snapshot_body(w)
    });
    let mut restored = Harness {
        state: MetadataState::decode_snapshot(&bytes).unwrap(),
        index: h.index,
    };
    assert_eq!(restored.state, h.state, "the replica replaying the log");
    for op in [old, new] {
        let finish = Command::FinishOperation { operation_id: op };
        assert_eq!(restored.apply(finish.clone()), h.apply(finish));
        assert_eq!(restored.state, h.state);
    }
    assert_eq!(h.state.all_series().count(), 0);

    // A pending flag no operation explains is damage, not an old version's state.
    let mut bad = with_two_series().state;
    bad.series
        .get_mut(&("root.sg.d1".to_string(), "s1".to_string()))
        .unwrap()
        .pending_delete = true;
    let bytes = envelope::seal(MetadataState::SNAPSHOT_MAGIC, |w| {
        bad.encode_snapshot_body(w)
    });
    let e = MetadataState::decode_snapshot(&bytes).unwrap_err();
    assert!(e.reason.contains("pending operations"), "{e}");
}

#[test]
fn a_region_group_counts_as_dropped_only_once_drop_database_finished() {
    let mut h = Harness::new();
    h.register(0, "a");
    for db in ["root.a", "root.b"] {
        h.apply(Command::CreateDatabase {
            database: db.into(),
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
    })
    .unwrap();
    let again = created(
        h.apply(allocate("root.a", vec![(1, 0)], 1, u64::MAX))
            .unwrap(),
    );
    assert!(again[0] > b && h.state.region_dropped(a));
}

#[test]
fn snapshot_golden_vector() {
    let mut h = Harness::new();
    h.register(0, "a");
    let bytes = h.state.encode_snapshot();
    let mut expected: Vec<u8> = b"FPCNSNP8".to_vec();
    for v in [1u64, 1, 2, 1, 1] {
        // applied index, metadata version, next DataNode / region / operation ids
        expected.extend_from_slice(&v.to_le_bytes());
    }
    expected.extend_from_slice(&[1, 0, 0, 0]); // one DataNode
    expected.extend_from_slice(&1u64.to_le_bytes());
    expected.extend_from_slice(&[1, 0, b'a', 5, 0, b'a', b'-', b'r', b'p', b'c']);
    expected.extend_from_slice(&1u64.to_le_bytes()); // epoch
    expected.push(0); // Running
    for _ in 0..11 {
        // databases, series, partitions, regions, operations, TTLs, migrations, users,
        // series meta, tables, confirmed incarnations (none: registered with the old command)
        expected.extend_from_slice(&[0, 0, 0, 0]);
    }
    let crc = crc32fast::hash(&expected);
    expected.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(bytes, expected);

    // With a user: its name and hash after the migrations.
    h.apply(Command::CreateUser {
        username: "al".into(),
        password_hash: "$argon2id$h".into(),
    })
    .unwrap();
    let bytes = h.state.encode_snapshot();
    let mut expected = expected[..expected.len() - 20].to_vec();
    expected[8..16].copy_from_slice(&2u64.to_le_bytes()); // applied index
    expected.extend_from_slice(&[1, 0, 0, 0, 2, 0, b'a', b'l', 11, 0]);
    expected.extend_from_slice(b"$argon2id$h");
    expected.extend_from_slice(&[0, 0, 0, 0]); // series meta
    expected.extend_from_slice(&[0, 0, 0, 0]); // tables
    expected.extend_from_slice(&[0, 0, 0, 0]); // confirmed incarnations
    let crc = crc32fast::hash(&expected);
    expected.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(bytes, expected);
    assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), h.state);

    // With a database and a table: the table's incarnation after its name (version 8).
    h.apply(Command::CreateDatabase {
        database: "root.b".into(),
    })
    .unwrap();
    h.apply(Command::CreateTable {
        database: "root.b".into(),
        table: TableSchema {
            name: "t".into(),
            columns: Vec::new(),
            ttl_ms: None,
        },
        if_not_exists: false,
        extend: false,
    })
    .unwrap();
    let bytes = h.state.encode_snapshot();
    let table: Vec<u8> = [
        &[1, 0, 0, 0][..],
        &[6, 0],
        b"root.b",
        &[1, 0, b't'],
        &3u64.to_le_bytes(), // created at metadata version 3
        &0i64.to_le_bytes(), // no TTL
        &[0, 0, 0, 0],       // columns
        &[0, 0, 0, 0],       // devices
    ]
    .concat();
    // Then no confirmed incarnation (the registry's, version 8 too) and the CRC.
    let body = &bytes[..bytes.len() - 8];
    assert!(body.ends_with(&table), "{body:?}");
    assert_eq!(&bytes[bytes.len() - 8..bytes.len() - 4], &[0, 0, 0, 0]);
    assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), h.state);
    // The same in version 7: no incarnation, read as 0, and no confirmed incarnations.
    let mut v7 = body[..body.len() - table.len()].to_vec();
    v7[..8].copy_from_slice(b"FPCNSNP7");
    v7.extend_from_slice(&[1, 0, 0, 0, 6, 0]);
    v7.extend_from_slice(b"root.b");
    v7.extend_from_slice(&[1, 0, b't']);
    v7.extend_from_slice(&table[table.len() - 16..]);
    let crc = crc32fast::hash(&v7);
    v7.extend_from_slice(&crc.to_le_bytes());
    let old = MetadataState::decode_snapshot(&v7).unwrap();
    assert_eq!(old.table("root.b", "t").unwrap().created_version, 0);
}

/// Aliases name one series of their device; tags and attributes follow the series through
/// snapshots, deletions and database drops, and a version-5 snapshot (before them) decodes.
#[test]
fn aliases_are_unique_per_device_and_meta_follows_the_series() {
    let mut h = Harness::new();
    h.register(0, "a");
    h.apply(Command::CreateDatabase {
        database: "root.sg".into(),
    })
    .unwrap();
    let with = |m: &str, alias: Option<&str>| SeriesSpec {
        meta: SeriesMeta {
            alias: alias.map(str::to_string),
            tags: [("unit".to_string(), "c".to_string())].into(),
            attributes: [("owner".to_string(), m.to_string())].into(),
        },
        ..spec("root.sg.d1", m, DataType::Double)
    };
    let create = |h: &mut Harness, series: Vec<SeriesSpec>| {
        h.apply(Command::CreateTimeseries {
            series,
            auto_create: false,
        })
    };
    create(&mut h, vec![with("s1", Some("temperature"))]).unwrap();
    // Another series may not take the alias or the name, nor an alias a measurement's name.
    for (series, what) in [
        (vec![with("s2", Some("temperature"))], "the alias again"),
        (
            vec![with("temperature", None)],
            "a measurement named as the alias",
        ),
        (
            vec![with("s2", Some("s1"))],
            "an alias that is a measurement",
        ),
        (
            vec![with("s2", Some("x")), with("s3", Some("x"))],
            "one alias twice in a batch",
        ),
        (vec![with("s2", Some("a.b"))], "an alias that is no name"),
    ] {
        let before = h.state.clone();
        assert!(create(&mut h, series).is_err(), "{what}");
        assert_eq!(h.state.series_meta("root.sg.d1", "s2"), None, "{what}");
        assert_eq!(h.state.series, before.series, "{what}");
    }
    // Same alias on another device: fine.
    create(
        &mut h,
        vec![SeriesSpec {
            device: "root.sg.d2".into(),
            ..with("s1", Some("temperature"))
        }],
    )
    .unwrap();
    let meta = h.state.series_meta("root.sg.d1", "s1").unwrap().clone();
    assert_eq!(meta.alias.as_deref(), Some("temperature"));
    let restored = MetadataState::decode_snapshot(&h.state.encode_snapshot()).unwrap();
    assert_eq!(restored, h.state);

    // A version-5 snapshot (no meta table) of a state without meta decodes.
    let mut plain = Harness::new();
    plain.register(0, "a");
    let v7 = as_version_7(&plain.state.encode_snapshot());
    // Version 7 less its (empty) tables and series meta and CRC.
    let mut v5 = v7[..v7.len() - 12].to_vec();
    v5[..8].copy_from_slice(b"FPCNSNP5");
    let crc = crc32fast::hash(&v5);
    v5.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(MetadataState::decode_snapshot(&v5).unwrap(), plain.state);

    // Deleting the series forgets its meta; so does dropping the database.
    let op = match h
        .apply(Command::BeginDeleteTimeseries {
            series: vec![("root.sg.d1".into(), "s1".into())],
        })
        .unwrap()
    {
        CommandResult::OperationBegun(operation_id) => operation_id,
        other => panic!("{other:?}"),
    };
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    assert_eq!(h.state.series_meta("root.sg.d1", "s1"), None);
    // Its alias is free again.
    create(&mut h, vec![with("s9", Some("temperature"))]).unwrap();
    let op = match h
        .apply(Command::BeginDropDatabase {
            database: "root.sg".into(),
        })
        .unwrap()
    {
        CommandResult::OperationBegun(operation_id) => operation_id,
        other => panic!("{other:?}"),
    };
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    assert!(h.state.series_meta.is_empty());
}

/// Tables of the table model: CREATE TABLE, an insert's extension, the refusals, device
/// attributes (last write wins), snapshots, and DROP DATABASE taking them.
#[test]
fn tables_are_created_extended_snapshotted_and_dropped() {
    let mut h = Harness::new();
    h.register(0, "a");
    let column = |name: &str, category, data_type| TableColumn {
        name: name.into(),
        category,
        data_type,
    };
    let table = |columns: Vec<TableColumn>| TableSchema {
        name: "t".into(),
        columns,
        ttl_ms: None,
    };
    let create = |h: &mut Harness, columns, if_not_exists, extend| {
        h.apply(Command::CreateTable {
            database: "root.db".into(),
            table: table(columns),
            if_not_exists,
            extend,
        })
    };
    let tag = column("region", Category::Tag, DataType::String);
    let attr = column("model", Category::Attribute, DataType::String);
    let field = column("temperature", Category::Field, DataType::Float);
    // No database yet.
    let e = create(&mut h, vec![tag.clone()], false, false).unwrap_err();
    assert!(matches!(e, MetadataError::DatabaseNotFound(_)), "{e}");
    h.apply(Command::CreateDatabase {
        database: "root.db".into(),
    })
    .unwrap();
    let version = h.state.metadata_version();
    create(
        &mut h,
        vec![tag.clone(), attr.clone(), field.clone()],
        false,
        false,
    )
    .unwrap();
    assert!(h.state.metadata_version() > version);
    let e = create(&mut h, vec![tag.clone()], false, false).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::TableAlreadyExists);
    create(&mut h, vec![tag.clone()], true, false).unwrap();
    // An insert's extension adds what is missing and keeps the order.
    let humidity = column("humidity", Category::Field, DataType::Double);
    create(&mut h, vec![humidity.clone(), field.clone()], false, true).unwrap();
    let names: Vec<&str> = h
        .state
        .table("root.db", "t")
        .unwrap()
        .schema
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["region", "model", "temperature", "humidity"]);
    // A column of another type or category is refused, nothing added.
    let e = create(
        &mut h,
        vec![
            column("extra", Category::Field, DataType::Int32),
            column("temperature", Category::Field, DataType::Double),
        ],
        false,
        true,
    )
    .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::DataTypeMismatch);
    assert!(h
        .state
        .table("root.db", "t")
        .unwrap()
        .schema
        .column("extra")
        .is_none());
    // TAG and ATTRIBUTE columns are STRING; names are checked.
    for bad in [
        vec![column("x", Category::Tag, DataType::Int32)],
        vec![column("time", Category::Field, DataType::Int32)],
        vec![column("-x", Category::Field, DataType::Int32)],
        vec![field.clone(), field.clone()],
    ] {
        let e = h
            .apply(Command::CreateTable {
                database: "root.db".into(),
                table: TableSchema {
                    name: "u".into(),
                    columns: bad,
                    ttl_ms: None,
                },
                if_not_exists: false,
                extend: false,
            })
            .unwrap_err();
        assert_eq!(e.status_code(), StatusCode::IllegalParameter, "{e}");
    }
    // Attributes: the last value wins; trailing null tags name the same device.
    let set = |h: &mut Harness, tags: Vec<Option<&str>>, value: &str| {
        h.apply(Command::SetDeviceAttributes {
            database: "root.db".into(),
            table: "t".into(),
            table_version: 0,
            devices: vec![(
                tags.into_iter().map(|t| t.map(str::to_string)).collect(),
                [("model".to_string(), value.to_string())].into(),
            )],
        })
    };
    set(&mut h, vec![Some("north")], "a").unwrap();
    set(&mut h, vec![Some("north")], "b").unwrap();
    let devices = &h.state.table("root.db", "t").unwrap().devices;
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[&vec![Some("north".to_string())]]["model"], "b");
    let e = h
        .apply(Command::SetDeviceAttributes {
            database: "root.db".into(),
            table: "t".into(),
            table_version: 0,
            devices: vec![(
                vec![],
                [("temperature".to_string(), "1".to_string())].into(),
            )],
        })
        .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::IllegalParameter);
    let e = h
        .apply(Command::SetDeviceAttributes {
            database: "root.db".into(),
            table: "nope".into(),
            table_version: 0,
            devices: vec![],
        })
        .unwrap_err();
    assert_eq!(e.status_code(), StatusCode::TableNotExists);
    // Snapshots keep them; a version-6 snapshot (before tables) decodes without them.
    let bytes = h.state.encode_snapshot();
    assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), h.state);
    let mut plain = Harness::new();
    plain.register(0, "a");
    let v7 = as_version_7(&plain.state.encode_snapshot());
    let mut v6 = v7[..v7.len() - 8].to_vec();
    v6[..8].copy_from_slice(b"FPCNSNP6");
    let crc = crc32fast::hash(&v6);
    v6.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(MetadataState::decode_snapshot(&v6).unwrap(), plain.state);
    // DROP DATABASE takes its tables.
    let op = match h
        .apply(Command::BeginDropDatabase {
            database: "root.db".into(),
        })
        .unwrap()
    {
        CommandResult::OperationBegun(operation_id) => operation_id,
        other => panic!("{other:?}"),
    };
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    assert!(h.state.table("root.db", "t").is_none());
}

#[test]
fn drop_table_takes_the_table_at_once_and_its_series_at_the_finish() {
    let mut h = Harness::new();
    h.register(0, "a");
    h.apply(Command::CreateDatabase {
        database: "root.db".into(),
    })
    .unwrap();
    let create = |h: &mut Harness, name: &str| {
        h.apply(Command::CreateTable {
            database: "root.db".into(),
            table: TableSchema {
                name: name.into(),
                columns: vec![TableColumn {
                    name: "k".into(),
                    category: Category::Tag,
                    data_type: DataType::String,
                }],
                ttl_ms: None,
            },
            if_not_exists: false,
            extend: false,
        })
    };
    create(&mut h, "t").unwrap();
    create(&mut h, "t2").unwrap();
    h.apply(Command::CreateTimeseries {
        series: vec![
            spec("root.db.t.-a", "v", DataType::Double),
            spec("root.db.t.-b", "v", DataType::Double),
            spec("root.db.t.-b", "w", DataType::Int32),
            // Another table whose name starts alike, and the table's device of no tags.
            spec("root.db.t2.-a", "v", DataType::Double),
            spec("root.db.t", "s", DataType::Double),
        ],
        auto_create: false,
    })
    .unwrap();
    // One series of the table is already being deleted: it stays that operation's.
    let delete = begun(h.apply(Command::BeginDeleteTimeseries {
        series: vec![("root.db.t.-b".into(), "w".into())],
    }));
    let drop = |h: &mut Harness| {
        h.apply(Command::BeginDropTable {
            database: "root.db".into(),
            table: "t".into(),
        })
    };
    let op = begun(drop(&mut h));
    assert!(h.state.table("root.db", "t").is_none(), "gone at the Begin");
    assert!(h.state.table("root.db", "t2").is_some());
    let listed: Vec<(u64, OperationKind)> = h
        .state
        .operations()
        .map(|(id, k)| (id, k.clone()))
        .collect();
    assert_eq!(
        listed[1],
        (
            op,
            OperationKind::DropTable {
                database: "root.db".into(),
                table: "t".into(),
                series: vec![
                    ("root.db.t".into(), "s".into()),
                    ("root.db.t.-a".into(), "v".into()),
                    ("root.db.t.-b".into(), "v".into()),
                ],
            }
        )
    );
    h.state.check_operations().unwrap();
    // A second drop finds no table. While the drop is pending the name makes no new table
    // and no series is created under its prefix (the drop's deletion fences the prefix):
    // neither by a table write nor by a tree write.
    let e = drop(&mut h).unwrap_err();
    assert_eq!(e.status_code(), StatusCode::TableNotExists);
    let e = create(&mut h, "t").unwrap_err();
    assert!(matches!(e, MetadataError::PendingDelete(_)), "{e}");
    for device in ["root.db.t", "root.db.t.-new"] {
        let e = h
            .apply(Command::CreateTimeseries {
                series: vec![spec(device, "v", DataType::Double)],
                auto_create: true,
            })
            .unwrap_err();
        assert!(
            matches!(e, MetadataError::PendingDelete(_)),
            "{device}: {e}"
        );
    }
    h.apply(Command::CreateTimeseries {
        series: vec![spec("root.db.t2.-new", "v", DataType::Double)],
        auto_create: true,
    })
    .unwrap();
    // Snapshots keep the operation (kind 4).
    let bytes = h.state.encode_snapshot();
    assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), h.state);
    // The Finish removes exactly the listed series; the name makes a new table after it.
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    let left: Vec<(String, String)> = h.state.series.keys().cloned().collect();
    assert_eq!(
        left,
        [
            ("root.db.t.-b".to_string(), "w".to_string()),
            ("root.db.t2.-a".to_string(), "v".to_string()),
            ("root.db.t2.-new".to_string(), "v".to_string()),
        ]
    );
    create(&mut h, "t").unwrap();
    h.apply(Command::FinishOperation {
        operation_id: delete,
    })
    .unwrap();
    h.state.check_operations().unwrap();
    assert!(h.state.table("root.db", "t").is_some(), "the new table");
    // No database, or one being dropped: refused.
    let e = h
        .apply(Command::BeginDropTable {
            database: "root.nope".into(),
            table: "t".into(),
        })
        .unwrap_err();
    assert!(matches!(e, MetadataError::DatabaseNotFound(_)), "{e}");
}

/// A table write creates series and sets attributes only under the incarnation of the
/// table it read (REVIEW N1): a write that read a table dropped since (and perhaps created
/// again) creates nothing under its name.
#[test]
fn a_table_write_creates_only_under_the_incarnation_it_read() {
    let mut h = Harness::new();
    h.register(0, "a");
    h.apply(Command::CreateDatabase {
        database: "root.db".into(),
    })
    .unwrap();
    let create = |h: &mut Harness| {
        h.apply(Command::CreateTable {
            database: "root.db".into(),
            table: TableSchema {
                name: "t".into(),
                columns: vec![
                    TableColumn {
                        name: "k".into(),
                        category: Category::Tag,
                        data_type: DataType::String,
                    },
                    TableColumn {
                        name: "a".into(),
                        category: Category::Attribute,
                        data_type: DataType::String,
                    },
                ],
                ttl_ms: None,
            },
            if_not_exists: false,
            extend: false,
        })
        .unwrap();
        h.state.table("root.db", "t").unwrap().created_version
    };
    let first = create(&mut h);
    assert_eq!(first, h.state.metadata_version());
    let series = |h: &mut Harness, version: u64, device: &str| {
        h.apply(Command::CreateTableSeries {
            origin: TableOrigin {
                database: "root.db".into(),
                table: "t".into(),
                created_version: version,
            },
            series: vec![spec(device, "v", DataType::Double)],
        })
    };
    let attributes = |h: &mut Harness, version: u64| {
        h.apply(Command::SetDeviceAttributes {
            database: "root.db".into(),
            table: "t".into(),
            table_version: version,
            devices: vec![(vec![Some("x".into())], [("a".into(), "1".into())].into())],
        })
    };
    series(&mut h, first, "root.db.t.-x").unwrap();
    series(&mut h, first, "root.db.t").unwrap();
    attributes(&mut h, first).unwrap();
    let e = series(&mut h, first, "root.db.u.-x").unwrap_err();
    assert_eq!(e.status_code(), StatusCode::IllegalParameter, "{e}");

    let op = begun(h.apply(Command::BeginDropTable {
        database: "root.db".into(),
        table: "t".into(),
    }));
    for e in [
        series(&mut h, first, "root.db.t.-y").unwrap_err(),
        attributes(&mut h, first).unwrap_err(),
    ] {
        assert_eq!(e.status_code(), StatusCode::TableNotExists, "{e}");
    }
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    let second = create(&mut h);
    assert!(second > first);
    for e in [
        series(&mut h, first, "root.db.t.-y").unwrap_err(),
        attributes(&mut h, first).unwrap_err(),
    ] {
        assert_eq!(e.status_code(), StatusCode::TableNotExists, "{e}");
    }
    assert!(h.state.series("root.db.t.-y", "v").is_none());
    series(&mut h, second, "root.db.t.-y").unwrap();
    attributes(&mut h, second).unwrap();
    attributes(&mut h, 0).unwrap();

    // Snapshots keep the incarnation; a version-7 one decodes with 0.
    let bytes = h.state.encode_snapshot();
    let decoded = MetadataState::decode_snapshot(&bytes).unwrap();
    assert_eq!(decoded, h.state);
    assert_eq!(
        decoded.table("root.db", "t").unwrap().created_version,
        second
    );
}

/// A version-4 snapshot (before users) decodes to root alone with its initial password.
#[test]
fn snapshot_version_4_decodes_with_root_alone() {
    let mut h = Harness::new();
    h.register(0, "a");
    let v7 = as_version_7(&h.state.encode_snapshot());
    // Version 7 less its (empty) tables, series meta and users and CRC.
    let mut v4 = v7[..v7.len() - 16].to_vec();
    v4[..8].copy_from_slice(b"FPCNSNP4");
    let crc = crc32fast::hash(&v4);
    v4.extend_from_slice(&crc.to_le_bytes());
    let restored = MetadataState::decode_snapshot(&v4).unwrap();
    assert_eq!(restored, h.state);
    assert_eq!(restored.user_names(), ["root"]);
    assert_eq!(
        restored.user_password("root"),
        Some(StoredPassword::RootInitial)
    );
    assert_eq!(restored.user_password("alice"), None);
}

/// A version-2 snapshot (no declared encodings) still decodes; a version-4 one keeps every
/// series' declaration.
#[test]
fn snapshot_version_2_decodes_and_version_3_keeps_declarations() {
    let mut h = Harness::new();
    h.register(0, "a");
    let v7 = as_version_7(&h.state.encode_snapshot());
    // Version 7 less its (empty) migrations, users, series meta and tables and CRC.
    let mut v2 = v7[..v7.len() - 20].to_vec();
    v2[..8].copy_from_slice(b"FPCNSNP2");
    let crc = crc32fast::hash(&v2);
    v2.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(MetadataState::decode_snapshot(&v2).unwrap(), h.state);

    h.apply(Command::CreateDatabase {
        database: "root.sg".into(),
    })
    .unwrap();
    let declared =
        SeriesCodec::parse(DataType::Double, Some("CHIMP"), Some("UNCOMPRESSED")).unwrap();
    h.apply(Command::CreateTimeseries {
        series: vec![
            SeriesSpec {
                codec: declared,
                ..spec("root.sg.d1", "s1", DataType::Double)
            },
            spec("root.sg.d1", "s2", DataType::Int64),
        ],
        auto_create: false,
    })
    .unwrap();
    let restored = MetadataState::decode_snapshot(&h.state.encode_snapshot()).unwrap();
    assert_eq!(restored, h.state);
    assert_eq!(restored.series("root.sg.d1", "s1").unwrap().codec, declared);
    assert!(!restored
        .series("root.sg.d1", "s2")
        .unwrap()
        .codec
        .is_declared());
}

/// The golden snapshot of version 1 (before TTLs) still decodes, to the same state.
#[test]
fn snapshot_version_1_still_decodes() {
    let mut h = Harness::new();
    h.register(0, "a");
    let mut v1: Vec<u8> = b"FPCNSNP1".to_vec();
    for v in [1u64, 1, 2, 1, 1] {
        v1.extend_from_slice(&v.to_le_bytes());
    }
    v1.extend_from_slice(&[1, 0, 0, 0]);
    v1.extend_from_slice(&1u64.to_le_bytes());
    v1.extend_from_slice(&[1, 0, b'a', 5, 0, b'a', b'-', b'r', b'p', b'c']);
    v1.extend_from_slice(&1u64.to_le_bytes());
    v1.push(0);
    for _ in 0..5 {
        v1.extend_from_slice(&[0, 0, 0, 0]);
    }
    let crc = crc32fast::hash(&v1);
    assert_eq!(crc, 0xb614_9986, "CRC of the version-1 golden snapshot");
    v1.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(MetadataState::decode_snapshot(&v1).unwrap(), h.state);
}

#[test]
fn set_and_unset_ttl_and_the_snapshot_keeps_it() {
    let mut h = Harness::new();
    let missing = h.apply(Command::BeginSetTtl {
        database: "root.sg".into(),
        ttl_ms: Some(1000),
    });
    assert_eq!(
        missing,
        Err(MetadataError::DatabaseNotFound("root.sg".into()))
    );
    h.apply(Command::CreateDatabase {
        database: "root.sg".into(),
    })
    .unwrap();
    for bad in [0, -5] {
        let refused = h
            .apply(Command::BeginSetTtl {
                database: "root.sg".into(),
                ttl_ms: Some(bad),
            })
            .unwrap_err();
        assert_eq!(refused.status_code(), common::StatusCode::IllegalParameter);
    }
    assert_eq!(h.state.ttl_ms("root.sg"), None);
    let version = h.state.metadata_version();
    let op = match h
        .apply(Command::BeginSetTtl {
            database: "root.sg".into(),
            ttl_ms: Some(86_400_000),
        })
        .unwrap()
    {
        CommandResult::OperationBegun(id) => id,
        other => panic!("{other:?}"),
    };
    // Visible from the Begin on, and it moves the version (DataNodes cache it).
    assert_eq!(h.state.ttl_ms("root.sg"), Some(86_400_000));
    assert!(h.state.metadata_version() > version);
    let bytes = h.state.encode_snapshot();
    assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), h.state);
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    assert_eq!(h.state.ttl_ms("root.sg"), Some(86_400_000));
    assert_eq!(h.state.operations().count(), 0);
    let bytes = h.state.encode_snapshot();
    assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), h.state);
    h.apply(Command::BeginSetTtl {
        database: "root.sg".into(),
        ttl_ms: None,
    })
    .unwrap();
    assert_eq!(h.state.ttl_ms("root.sg"), None);
    // DROP DATABASE forgets the TTL with the database.
    h.apply(Command::BeginSetTtl {
        database: "root.sg".into(),
        ttl_ms: Some(5),
    })
    .unwrap();
    let drop = match h
        .apply(Command::BeginDropDatabase {
            database: "root.sg".into(),
        })
        .unwrap()
    {
        CommandResult::OperationBegun(id) => id,
        other => panic!("{other:?}"),
    };
    h.apply(Command::FinishOperation { operation_id: drop })
        .unwrap();
    assert_eq!(h.state.ttl_ms("root.sg"), None);
    let bytes = h.state.encode_snapshot();
    assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), h.state);
}

const HASH_A: &str = "$argon2id$a";
const HASH_B: &str = "$argon2id$b";

#[test]
fn users_are_created_altered_and_dropped_and_refusals_change_nothing() {
    let mut h = Harness::new();
    assert_eq!(h.state.user_names(), ["root"]);
    assert!(h.state.user_exists("root"));
    let create = |username: &str, hash: &str| Command::CreateUser {
        username: username.into(),
        password_hash: hash.into(),
    };
    let set = |username: &str, hash: &str| Command::SetUserPassword {
        username: username.into(),
        password_hash: hash.into(),
    };
    let drop = |username: &str| Command::DropUser {
        username: username.into(),
    };
    let version = h.state.metadata_version();
    h.apply(create("bob", HASH_A)).unwrap();
    h.apply(create("alice", HASH_A)).unwrap();
    h.apply(create("zed_9", HASH_B)).unwrap();
    assert_eq!(h.state.user_names(), ["alice", "bob", "root", "zed_9"]);
    assert_eq!(
        h.state.user_password("bob"),
        Some(StoredPassword::Hash(HASH_A.into()))
    );
    assert_eq!(
        h.state.metadata_version(),
        version,
        "DataNodes cache no users"
    );

    let refusals = [
        (create("bob", HASH_B), StatusCode::UserAlreadyExist),
        (create("root", HASH_B), StatusCode::UserAlreadyExist),
        (create("b-b", HASH_B), StatusCode::IllegalParameter),
        (create("", HASH_B), StatusCode::IllegalParameter),
        (create("carol", "plain"), StatusCode::IllegalParameter),
        (create("carol", ""), StatusCode::IllegalParameter),
        (drop("root"), StatusCode::NoPermission),
        (drop("carol"), StatusCode::UserNotExist),
        (drop("x y"), StatusCode::IllegalParameter),
        (set("carol", HASH_B), StatusCode::UserNotExist),
        (set("bob", "$argon2i$x"), StatusCode::IllegalParameter),
    ];
    for (command, code) in refusals {
        let before = h.state.clone();
        let e = h.apply(command.clone()).unwrap_err();
        assert_eq!(e.status_code(), code, "{command:?}: {e}");
        let mut expected = before;
        expected.applied_index = h.index;
        assert_eq!(h.state, expected, "{command:?} changed the state");
    }
    assert_eq!(
        h.apply(drop("root")).unwrap_err().to_string(),
        "No permission: the root user cannot be dropped"
    );
    assert_eq!(
        h.apply(create("bob", HASH_B)).unwrap_err().to_string(),
        "user bob already exists"
    );
    assert_eq!(
        h.apply(drop("carol")).unwrap_err().to_string(),
        "user carol does not exist"
    );

    // root's password: implicit until set, then stored like anyone's.
    assert_eq!(
        h.state.user_password("root"),
        Some(StoredPassword::RootInitial)
    );
    h.apply(set("root", HASH_B)).unwrap();
    assert_eq!(
        h.state.user_password("root"),
        Some(StoredPassword::Hash(HASH_B.into()))
    );
    assert_eq!(h.state.user_names(), ["alice", "bob", "root", "zed_9"]);
    h.apply(set("bob", HASH_B)).unwrap();
    assert_eq!(
        h.state.user_password("bob"),
        Some(StoredPassword::Hash(HASH_B.into()))
    );
    h.apply(drop("bob")).unwrap();
    assert_eq!(h.state.user_password("bob"), None);
    assert!(
        h.apply(drop("root")).is_err(),
        "not even with a stored hash"
    );
    assert_eq!(h.state.user_names(), ["alice", "root", "zed_9"]);

    // The users survive a snapshot, root's stored hash included.
    let restored = MetadataState::decode_snapshot(&h.state.encode_snapshot()).unwrap();
    assert_eq!(restored, h.state);
    assert_eq!(restored.user_names(), ["alice", "root", "zed_9"]);
    assert_eq!(
        restored.user_password("root"),
        Some(StoredPassword::Hash(HASH_B.into()))
    );
}

#[test]
fn users_are_bounded_with_root_counted() {
    let mut h = Harness::new();
    for i in 0..USERS_MAX - 1 {
        h.apply(Command::CreateUser {
            username: format!("u{i}"),
            password_hash: HASH_A.into(),
        })
        .unwrap();
    }
    assert_eq!(h.state.user_names().len(), USERS_MAX);
    let full = h
        .apply(Command::CreateUser {
            username: "one_more".into(),
            password_hash: HASH_A.into(),
        })
        .unwrap_err();
    assert!(matches!(full, MetadataError::Limit(_)), "{full}");
    // Setting root's password stores it but adds no user.
    h.apply(Command::SetUserPassword {
        username: "root".into(),
        password_hash: HASH_A.into(),
    })
    .unwrap();
    assert_eq!(h.state.user_names().len(), USERS_MAX);
}

#[test]
fn a_snapshot_with_a_bad_user_does_not_decode() {
    for (name, hash, why) in [
        ("a b", HASH_A, "illegal user name"),
        ("al", "plain", "illegal password hash"),
    ] {
        // An empty state's snapshot less its empty users table and CRC, then the bad table
        // (as a writer without the encoder's checks would have left it).
        let empty = MetadataState::new().encode_snapshot();
        let mut bytes = empty[..empty.len() - 20].to_vec();
        let mut w = Writer::new();
        w.len32(1);
        w.str16(name);
        w.str16(hash);
        w.len32(0); // series meta
        w.len32(0); // tables
        w.len32(0); // confirmed incarnations
        bytes.extend_from_slice(&w.into_bytes());
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        let e = MetadataState::decode_snapshot(&bytes).unwrap_err();
        assert!(e.reason.contains(why), "{e}");
    }
}

#[test]
fn snapshot_rejects_damage() {
    let mut h = Harness::new();
    h.register(0, "a:1");
    let mut bytes = h.state.encode_snapshot();
    assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), h.state);
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    assert!(MetadataState::decode_snapshot(&bytes).is_err());
    assert!(MetadataState::decode_snapshot(b"FPCNSNP1").is_err());
    assert!(MetadataState::decode_snapshot(b"FPCNSNP2").is_err());
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
        && state.regions.len() + slots.len() <= REGION_GROUPS_MAX;
    let mut created = Vec::new();
    for &(series_slot, time_slot) in slots {
        let key = (database.to_string(), series_slot, time_slot);
        if state.partitions.contains_key(&key) {
            continue;
        }
        // A series slot stays in one region group across time slots: a device's data and
        // its deletions then live in one raft log.
        let same_slot = state
            .partitions
            .iter()
            .find(|((db, s, _), _)| db == database && *s == series_slot)
            .map(|(_, r)| *r);
        let region = match same_slot {
            Some(region) => region,
            None => {
                let groups: Vec<u64> = state
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
                    for ((db, s, _), r) in &state.partitions {
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
        state.partitions.insert(key, region);
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
    bad.partitions.insert(("root.a".into(), 1, 1), region + 7);
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

    /// Two replicas applying the same log agree on every result and state; the snapshot
    /// round-trips at every step; a refused command changes nothing but the applied index;
    /// a DataNode's epoch only rises.
    #[test]
    fn replicas_agree_and_snapshots_round_trip(commands in prop::collection::vec(arb_command(), 0..40)) {
        let mut a = Harness::new();
        let mut b = Harness::new();
        for command in commands {
            let before = a.state.clone();
            let ra = a.apply(command.clone());
            let rb = b.apply(command.clone());
            prop_assert_eq!(&ra, &rb);
            prop_assert_eq!(&a.state, &b.state);
            if ra.is_err() {
                let mut expected = before.clone();
                expected.applied_index = a.index;
                prop_assert_eq!(&a.state, &expected);
            }
            for n in before.data_nodes() {
                prop_assert!(a.state.data_node(n.id).unwrap().incarnation_epoch >= n.incarnation_epoch);
            }
            if let Ok(CommandResult::Registered { data_node_id, incarnation_epoch }) = ra {
                let old = before.data_node(data_node_id).map_or(0, |n| n.incarnation_epoch);
                prop_assert!(incarnation_epoch > old);
            }
            prop_assert!(a.state.metadata_version() >= before.metadata_version());
            prop_assert_eq!(a.state.check_index(), Ok(()));
            let restored = MetadataState::decode_snapshot(&a.state.encode_snapshot()).unwrap();
            prop_assert_eq!(&restored, &a.state);
            // Every partition points at an existing region of the same database.
            for (db, _) in a.state.databases() {
                for (_, _, r) in a.state.partitions_of(db) {
                    prop_assert_eq!(a.state.region(r).map(|g| g.database.as_str()), Some(db));
                }
            }
        }
    }
}

/// One step of [`fence_operations_on_overlapping_targets_apply_in_any_order`], over two
/// databases (`root.a`, `root.b`) of two devices of two measurements each.
#[derive(Clone, Debug)]
enum FenceStep {
    CreateSeries(usize, usize, usize, bool),
    CreateDatabase(usize),
    BeginDelete(Vec<(usize, usize, usize)>),
    BeginDrop(usize),
    /// Finishes the pending operation at this position (mod their count), or, with none
    /// pending, an operation id that is not pending.
    Finish(usize),
    /// A third replica restarts from the first one's snapshot.
    Restore,
}

fn arb_fence_step() -> impl Strategy<Value = FenceStep> {
    let series = (0usize..2, 0usize..2, 0usize..2);
    prop_oneof![
        2 => (0usize..2, 0usize..2, 0usize..2, any::<bool>())
            .prop_map(|(db, d, m, auto)| FenceStep::CreateSeries(db, d, m, auto)),
        1 => (0usize..2).prop_map(FenceStep::CreateDatabase),
        3 => prop::collection::vec(series, 0..4).prop_map(FenceStep::BeginDelete),
        2 => (0usize..2).prop_map(FenceStep::BeginDrop),
        4 => any::<usize>().prop_map(FenceStep::Finish),
        1 => Just(FenceStep::Restore),
    ]
}

fn fence_command(state: &MetadataState, step: &FenceStep) -> Option<Command> {
    let db = |i: usize| format!("root.{}", ["a", "b"][i]);
    let device = |i: usize, d: usize| format!("{}.d{d}", db(i));
    let measurement = |m: usize| format!("s{m}");
    Some(match step {
        FenceStep::CreateSeries(i, d, m, auto_create) => Command::CreateTimeseries {
            series: vec![spec(&device(*i, *d), &measurement(*m), DataType::Int64)],
            auto_create: *auto_create,
        },
        FenceStep::CreateDatabase(i) => Command::CreateDatabase { database: db(*i) },
        FenceStep::BeginDelete(series) => Command::BeginDeleteTimeseries {
            series: series
                .iter()
                .map(|(i, d, m)| (device(*i, *d), measurement(*m)))
                .collect(),
        },
        FenceStep::BeginDrop(i) => Command::BeginDropDatabase { database: db(*i) },
        FenceStep::Finish(pick) => {
            let pending: Vec<u64> = state.operations().map(|(id, _)| id).collect();
            let operation_id = if pending.is_empty() {
                1 + (*pick as u64 % 8)
            } else {
                pending[pick % pending.len()]
            };
            Command::FinishOperation { operation_id }
        }
        FenceStep::Restore => return None,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// DELETE TIMESERIES and DROP DATABASE of overlapping targets, begun and finished in
    /// any order among creations: apply never panics, replicas applying the same log (one
    /// of them now and then restarted from a snapshot) agree on every result and snapshot
    /// byte, the pending operations agree with the pending flags, a pending operation's
    /// Finish always succeeds, and finishing every operation leaves nothing pending.
    #[test]
    fn fence_operations_on_overlapping_targets_apply_in_any_order(
        steps in prop::collection::vec(arb_fence_step(), 0..40),
        finish_order in any::<usize>(),
    ) {
        let mut a = with_two_series();
        a.apply(Command::CreateTimeseries {
            series: vec![
                spec("root.a.d0", "s0", DataType::Int64),
                spec("root.a.d1", "s1", DataType::Int64),
                spec("root.b.d0", "s0", DataType::Int64),
                spec("root.b.d1", "s1", DataType::Int64),
            ],
            auto_create: true,
        })
        .unwrap();
        let mut b = Harness { state: a.state.clone(), index: a.index };
        let mut c = Harness { state: a.state.clone(), index: a.index };
        // The steps, then every operation still pending finishes, in an order of its own.
        let mut finishes = (0..).map(|k: usize| FenceStep::Finish(finish_order.wrapping_add(k * 7)));
        let mut steps = steps.into_iter();
        loop {
            let step = match steps.next() {
                Some(step) => step,
                None if a.state.operations().count() > 0 => finishes.next().unwrap(),
                None => break,
            };
            let Some(command) = fence_command(&a.state, &step) else {
                c.state = MetadataState::decode_snapshot(&a.state.encode_snapshot()).unwrap();
                prop_assert_eq!(&c.state, &a.state);
                continue;
            };
            let was_pending = match &command {
                Command::FinishOperation { operation_id } => {
                    a.state.operations().any(|(id, _)| id == *operation_id)
                }
                _ => false,
            };
            let ra = a.apply(command.clone());
            prop_assert_eq!(&ra, &b.apply(command.clone()), "{:?}", command);
            prop_assert_eq!(&ra, &c.apply(command.clone()), "{:?}", command);
            if was_pending {
                prop_assert_eq!(&ra, &Ok(CommandResult::Done), "{:?}", command);
            }
            let bytes = a.state.encode_snapshot();
            prop_assert_eq!(&bytes, &b.state.encode_snapshot());
            prop_assert_eq!(&bytes, &c.state.encode_snapshot());
            prop_assert_eq!(&a.state, &b.state);
            prop_assert_eq!(&a.state, &c.state);
            prop_assert_eq!(a.state.check_operations(), Ok(()));
            prop_assert_eq!(a.state.check_index(), Ok(()));
        }
        prop_assert_eq!(a.state.operations().count(), 0);
        prop_assert!(a.state.databases().all(|(_, pending)| !pending));
        let settled = a.state.all_series().all(|(device, _, r)| {
            !r.pending_delete && a.state.database_of(device).is_some()
        });
        prop_assert!(settled, "a series is pending or outside every database");
    }
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
            prop_assert_eq!(&indexed.state.partitions, &scanned.state.partitions);
            prop_assert_eq!(&indexed.state.regions, &scanned.state.regions);
            prop_assert_eq!(indexed.state.metadata_version, scanned.state.metadata_version);
            prop_assert_eq!(indexed.state.check_index(), Ok(()));
        }
    }
}
