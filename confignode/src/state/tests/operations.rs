//! Tests of the fence operations: DELETE TIMESERIES, DROP DATABASE and SET TTL, how they
//! interleave, and what a pending one refuses.

use super::*;

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
            table_model: false,
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
        .records
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
        table_model: false,
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
        FenceStep::CreateDatabase(i) => Command::CreateDatabase {
            database: db(*i),
            table_model: false,
        },
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
