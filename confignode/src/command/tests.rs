use super::*;
use proptest::prelude::*;

fn golden(command: Command, bytes: &[u8]) {
    assert_eq!(command.encode(), bytes, "{command:?}");
    assert_eq!(Command::decode(bytes).unwrap(), command);
}

/// Every kind as version 1 wrote it (the bytes of logs written before the partition cap).
fn version_1_vectors() -> Vec<(Command, Vec<u8>)> {
    vec![
        (
            Command::RegisterDataNode {
                data_node_id: 7,
                internal_address: "h:1".into(),
                rpc_address: "h:2".into(),
            },
            vec![
                1, 1, 7, 0, 0, 0, 0, 0, 0, 0, 3, 0, b'h', b':', b'1', 3, 0, b'h', b':', b'2',
            ],
        ),
        (
            Command::SetDataNodeStatus {
                data_node_id: 2,
                status: NodeStatus::Unknown,
            },
            vec![1, 2, 2, 0, 0, 0, 0, 0, 0, 0, 1],
        ),
        (
            Command::CreateDatabase {
                database: "root.a".into(),
                table_model: false,
            },
            vec![1, 3, 6, 0, b'r', b'o', b'o', b't', b'.', b'a'],
        ),
        (
            Command::CreateDatabase {
                database: "root.a".into(),
                table_model: true,
            },
            vec![1, 26, 6, 0, b'r', b'o', b'o', b't', b'.', b'a'],
        ),
        (
            Command::CreateTimeseries {
                series: vec![SeriesSpec {
                    device: "d".into(),
                    measurement: "s".into(),
                    data_type: DataType::Double,
                    codec: SeriesCodec::default(),
                    meta: SeriesMeta::default(),
                }],
                auto_create: true,
            },
            vec![1, 4, 1, 1, 0, 0, 0, 1, 0, b'd', 1, 0, b's', 4],
        ),
        (
            Command::AllocatePartitions {
                database: "x".into(),
                slots: vec![(3, -1)],
                replication_factor: 3,
                region_groups_max: 2,
                database_partitions_max: u64::MAX,
            },
            vec![
                1, 5, 1, 0, b'x', 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0xff, 0xff, 0xff,
                0xff, 0xff, 0xff, 0xff, 0xff,
            ],
        ),
        (
            Command::BeginDeleteTimeseries {
                series: vec![("d".into(), "s".into())],
            },
            vec![1, 6, 1, 0, 0, 0, 1, 0, b'd', 1, 0, b's'],
        ),
        (
            Command::BeginDropDatabase {
                database: "x".into(),
            },
            vec![1, 7, 1, 0, b'x'],
        ),
        (
            Command::FinishOperation { operation_id: 258 },
            vec![1, 8, 2, 1, 0, 0, 0, 0, 0, 0],
        ),
    ]
}

/// Pins the bytes of every kind and layout variant, one `golden` call each: as long as the list
/// of kinds, and read as a table of them.
#[test]
fn golden_vectors() {
    // Version 2 changed only AllocatePartitions: every other kind is its version-1 bytes
    // under the new version byte.
    for (command, v1) in version_1_vectors() {
        if matches!(command, Command::AllocatePartitions { .. }) {
            continue;
        }
        let mut v2 = v1.clone();
        v2[0] = 2;
        golden(command, &v2);
    }
    golden(
        Command::AllocatePartitions {
            database: "x".into(),
            slots: vec![(3, -1)],
            replication_factor: 3,
            region_groups_max: 2,
            database_partitions_max: 0x0102,
        },
        &[
            2, 5, 1, 0, b'x', 3, 0, 0, 0, 2, 0, 0, 0, // version, kind, db, rf, groups
            2, 1, 0, 0, 0, 0, 0, 0, // database_partitions_max 0x0102
            1, 0, 0, 0, 3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ],
    );
    golden(
        Command::BeginSetTtl {
            database: "x".into(),
            ttl_ms: Some(0x0102),
        },
        &[2, 9, 1, 0, b'x', 2, 1, 0, 0, 0, 0, 0, 0],
    );
    golden(
        Command::BeginSetTtl {
            database: "x".into(),
            ttl_ms: None,
        },
        &[2, 9, 1, 0, b'x', 0, 0, 0, 0, 0, 0, 0, 0],
    );
    // A series with a declared encoding: kind 10, the names after the type.
    golden(
        Command::CreateTimeseries {
            series: vec![SeriesSpec {
                device: "d".into(),
                measurement: "s".into(),
                data_type: DataType::Int64,
                codec: SeriesCodec::parse(DataType::Int64, Some("RLE"), None).unwrap(),
                meta: SeriesMeta::default(),
            }],
            auto_create: false,
        },
        &[
            2, 10, 0, 1, 0, 0, 0, 1, 0, b'd', 1, 0, b's', 2, 3, 0, b'R', b'L', b'E', 0, 0,
        ],
    );
    // A series with an alias, tags and attributes: kind 18, kind 10's names and then them.
    golden(
        Command::CreateTimeseries {
            series: vec![SeriesSpec {
                device: "d".into(),
                measurement: "s".into(),
                data_type: DataType::Int64,
                codec: SeriesCodec::default(),
                meta: SeriesMeta {
                    alias: Some("a".into()),
                    tags: [("k".to_string(), "v".to_string())].into(),
                    attributes: Default::default(),
                },
            }],
            auto_create: false,
        },
        &[
            2, 18, 0, 1, 0, 0, 0, 1, 0, b'd', 1, 0, b's', 2, 0, 0, 0, 0, 1, 0, b'a', 1, 0, 0, 0, 1,
            0, b'k', 1, 0, b'v', 0, 0, 0, 0,
        ],
    );
    // A registration without an id (kind 11): always a new node.
    golden(
        Command::RegisterNewDataNode {
            internal_address: "h:1".into(),
            rpc_address: "h:2".into(),
        },
        &[2, 11, 3, 0, b'h', b':', b'1', 3, 0, b'h', b':', b'2'],
    );
    // A registration with the stored identity (kind 22) and a heartbeat's confirmation (23).
    golden(
        Command::ReregisterDataNode {
            data_node_id: 3,
            stored_epoch: 7,
            internal_address: "h:1".into(),
            rpc_address: "h:2".into(),
        },
        &[
            2, 22, 3, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 3, 0, b'h', b':', b'1', 3, 0,
            b'h', b':', b'2',
        ],
    );
    golden(
        Command::ConfirmIncarnation {
            data_node_id: 3,
            incarnation_epoch: 8,
        },
        &[2, 23, 3, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0],
    );
    // The user commands (kinds 15 to 17).
    golden(
        Command::CreateUser {
            username: "al".into(),
            password_hash: "$h".into(),
        },
        &[2, 15, 2, 0, b'a', b'l', 2, 0, b'$', b'h'],
    );
    golden(
        Command::DropUser {
            username: "al".into(),
        },
        &[2, 16, 2, 0, b'a', b'l'],
    );
    golden(
        Command::SetUserPassword {
            username: "root".into(),
            password_hash: "$h".into(),
        },
        &[2, 17, 4, 0, b'r', b'o', b'o', b't', 2, 0, b'$', b'h'],
    );
    // The table model (kinds 19 and 20).
    golden(
        Command::CreateTable {
            database: "x".into(),
            table: TableSchema {
                name: "t".into(),
                columns: vec![TableColumn {
                    name: "c".into(),
                    category: Category::Attribute,
                    data_type: DataType::String,
                }],
                ttl_ms: Some(0x0102),
            },
            if_not_exists: false,
            extend: true,
        },
        &[
            2, 19, 1, 0, b'x', 1, 0, b't', 2, 1, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 1, 0, b'c', 2, 11,
        ],
    );
    golden(
        Command::SetDeviceAttributes {
            database: "x".into(),
            table: "t".into(),
            table_version: 0,
            devices: vec![(
                vec![None, Some("a".into())],
                [("k".to_string(), "v".to_string())].into(),
            )],
        },
        &[
            2, 20, 1, 0, b'x', 1, 0, b't', 1, 0, 0, 0, 2, 0, 0, 0, 0, 1, 1, 0, b'a', 1, 0, 0, 0, 1,
            0, b'k', 1, 0, b'v',
        ],
    );
    golden(
        Command::BeginDropTable {
            database: "x".into(),
            table: "t".into(),
        },
        &[2, 21, 1, 0, b'x', 1, 0, b't'],
    );
    // The fence of table writes (kinds 24 and 25).
    golden(
        Command::CreateTableSeries {
            origin: TableOrigin {
                database: "x".into(),
                table: "t".into(),
                created_version: 0x0102,
            },
            series: vec![SeriesSpec {
                device: "x.t".into(),
                measurement: "v".into(),
                data_type: DataType::Double,
                codec: SeriesCodec::default(),
                meta: SeriesMeta::default(),
            }],
        },
        &[
            2, 24, 1, 0, b'x', 1, 0, b't', 2, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, b'x', b'.',
            b't', 1, 0, b'v', 4,
        ],
    );
    golden(
        Command::SetDeviceAttributes {
            database: "x".into(),
            table: "t".into(),
            table_version: 7,
            devices: vec![(vec![Some("a".into())], BTreeMap::new())],
        },
        &[
            2, 25, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, b'x', 1, 0, b't', 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0,
            b'a', 0, 0, 0, 0,
        ],
    );
    let zero = [
        2, 25, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, b'x', 1, 0, b't', 0, 0, 0, 0,
    ];
    assert!(
        Command::decode(&zero).is_err(),
        "kind 25 always names a table version"
    );
    // A name the type does not take is refused, not stored.
    let bad = [
        2, 10, 0, 1, 0, 0, 0, 1, 0, b'd', 1, 0, b's', 5, 3, 0, b'R', b'L', b'E', 0, 0,
    ];
    assert!(Command::decode(&bad).is_err());
}

#[test]
fn version_1_still_decodes_and_its_allocation_has_no_cap() {
    for (command, v1) in version_1_vectors() {
        assert_eq!(Command::decode(&v1).unwrap(), command, "{v1:?}");
        // Every strict prefix is refused, never misread.
        for len in 0..v1.len() {
            assert!(Command::decode(&v1[..len]).is_err());
        }
    }
}

#[test]
fn result_golden_vectors() {
    let cases = [
        (CommandResult::Done, vec![0u8]),
        (
            CommandResult::Registered {
                data_node_id: 1,
                incarnation_epoch: 2,
            },
            vec![1, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0],
        ),
        (
            CommandResult::RegionsCreated(vec![5]),
            vec![2, 1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0],
        ),
        (
            CommandResult::OperationBegun(9),
            vec![3, 9, 0, 0, 0, 0, 0, 0, 0],
        ),
    ];
    for (result, bytes) in cases {
        assert_eq!(result.encode(), bytes);
        assert_eq!(CommandResult::decode(&bytes).unwrap(), result);
    }
}

#[test]
fn refuses_bad_input() {
    assert!(Command::decode(&[]).is_err());
    assert!(Command::decode(&[3, 8, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    assert!(Command::decode(&[0, 8, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    assert!(Command::decode(&[1, 99]).is_err());
    assert!(Command::decode(&[2, 99]).is_err());
    assert!(Command::decode(&[1, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    assert!(Command::decode(&[2, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    // A count far beyond the bytes present allocates nothing and fails.
    assert!(Command::decode(&[1, 6, 0xff, 0xff, 0xff, 0xff]).is_err());
    assert!(Command::decode(&[1, 2, 2, 0, 0, 0, 0, 0, 0, 0, 9]).is_err());
}

/// Any command: one strategy per kind in one `prop_oneof!`, so as long as the list of kinds.
pub(crate) fn arb_command() -> impl Strategy<Value = Command> {
    let name = "[a-c]{1,2}";
    let dtype = (0u8..6).prop_map(|c| DataType::from_code(c).unwrap());
    prop_oneof![
        (0u64..4, name, name).prop_map(|(id, a, b)| Command::RegisterDataNode {
            data_node_id: id,
            internal_address: a,
            rpc_address: b,
        }),
        (name, name).prop_map(|(a, b)| Command::RegisterNewDataNode {
            internal_address: a,
            rpc_address: b,
        }),
        (1u64..4, 1u64..6, name, name).prop_map(|(id, stored, a, b)| {
            Command::ReregisterDataNode {
                data_node_id: id,
                stored_epoch: stored,
                internal_address: a,
                rpc_address: b,
            }
        }),
        (1u64..5, 1u64..8).prop_map(|(id, epoch)| Command::ConfirmIncarnation {
            data_node_id: id,
            incarnation_epoch: epoch,
        }),
        (1u64..4, 1u64..5, 1u64..5).prop_map(|(region_id, from, to)| {
            Command::BeginRegionMigration {
                region_id,
                from,
                to,
            }
        }),
        (1u64..4, 1u64..5, 1u64..5).prop_map(|(region_id, from, to)| {
            Command::FinishRegionMigration {
                region_id,
                from,
                to,
            }
        }),
        (1u64..5).prop_map(|data_node_id| Command::RemoveDataNode { data_node_id }),
        // Names with root among them, hashes that apply takes (the prefix) and refuses.
        (
            prop_oneof![Just("root".to_string()), name],
            prop_oneof![
                "[a-c]{1,3}".prop_map(|h| format!("{}{h}", crate::users::PASSWORD_HASH_PREFIX)),
                Just("$bad".to_string()),
            ],
            0u8..3
        )
            .prop_map(|(username, password_hash, which)| match which {
                0 => Command::CreateUser {
                    username,
                    password_hash,
                },
                1 => Command::DropUser { username },
                _ => Command::SetUserPassword {
                    username,
                    password_hash,
                },
            }),
        (1u64..4, 0u8..3).prop_map(|(id, s)| Command::SetDataNodeStatus {
            data_node_id: id,
            status: NodeStatus::from_code(s).unwrap(),
        }),
        (name, any::<bool>()).prop_map(|(n, table_model)| Command::CreateDatabase {
            database: format!("root.{n}"),
            table_model,
        }),
        (
            prop::collection::vec((name, name, name, dtype), 0..4),
            any::<bool>()
        )
            .prop_map(|(v, auto_create)| Command::CreateTimeseries {
                series: v
                    .into_iter()
                    .map(|(db, d, m, t)| SeriesSpec {
                        device: format!("root.{db}.{d}"),
                        // Every third series declares PLAIN + LZ4 (both fit every type).
                        codec: if m.len() % 3 == 0 {
                            SeriesCodec {
                                encoding: Some(codec::Encoding::Plain),
                                compressor: Some(codec::Compressor::Lz4),
                            }
                        } else {
                            SeriesCodec::default()
                        },
                        // Every fourth has an alias and a tag.
                        meta: if m.len() % 4 == 0 {
                            SeriesMeta {
                                alias: Some(format!("{m}_alias")),
                                tags: [("unit".to_string(), m.clone())].into(),
                                attributes: Default::default(),
                            }
                        } else {
                            SeriesMeta::default()
                        },
                        measurement: m,
                        data_type: t,
                    })
                    .collect(),
                auto_create,
            }),
        (
            name,
            prop::collection::vec((0u32..8, -2i64..3), 0..5),
            1u32..4,
            1u32..4,
            prop_oneof![Just(u64::MAX), 0u64..12],
        )
            .prop_map(|(n, slots, rf, groups, cap)| Command::AllocatePartitions {
                database: format!("root.{n}"),
                slots,
                replication_factor: rf,
                region_groups_max: groups,
                database_partitions_max: cap,
            }),
        prop::collection::vec((name, name, name), 0..3).prop_map(|v| {
            Command::BeginDeleteTimeseries {
                series: v
                    .into_iter()
                    .map(|(db, d, m)| (format!("root.{db}.{d}"), m))
                    .collect(),
            }
        }),
        name.prop_map(|n| Command::BeginDropDatabase {
            database: format!("root.{n}")
        }),
        (1u64..5).prop_map(|id| Command::FinishOperation { operation_id: id }),
        // The table model: tables of a few columns of every category (some names clash,
        // some types are not STRING), and attributes of their devices.
        (
            name,
            name,
            prop::collection::vec(
                (
                    name,
                    0u8..3,
                    (0u8..12).prop_filter_map("a type", DataType::from_code)
                ),
                0..4
            ),
            prop_oneof![Just(None), (1i64..3).prop_map(Some)],
            0u8..4,
        )
            .prop_map(|(db, t, columns, ttl_ms, flags)| Command::CreateTable {
                database: format!("root.{db}"),
                table: TableSchema {
                    name: t,
                    columns: columns
                        .into_iter()
                        .map(|(name, c, data_type)| TableColumn {
                            name,
                            category: Category::from_wire(c).unwrap(),
                            data_type,
                        })
                        .collect(),
                    ttl_ms,
                },
                if_not_exists: flags & 1 != 0,
                extend: flags & 2 != 0,
            }),
        (
            name,
            name,
            prop::collection::vec(
                (
                    prop::collection::vec(prop::option::of(name), 0..3),
                    prop::collection::btree_map(name, name, 0..3),
                ),
                0..3
            ),
            0u64..3,
        )
            .prop_map(|(db, table, devices, table_version)| {
                Command::SetDeviceAttributes {
                    database: format!("root.{db}"),
                    table,
                    table_version,
                    devices,
                }
            }),
        (
            name,
            name,
            0u64..6,
            prop::collection::vec((name, name, 0u8..12), 0..3)
        )
            .prop_map(|(db, table, created_version, series)| {
                Command::CreateTableSeries {
                    series: series
                        .into_iter()
                        .filter_map(|(tag, measurement, t)| {
                            Some(SeriesSpec {
                                device: format!("root.{db}.{table}.-{tag}"),
                                measurement,
                                data_type: DataType::from_code(t)?,
                                codec: SeriesCodec::default(),
                                meta: SeriesMeta::default(),
                            })
                        })
                        .collect(),
                    origin: TableOrigin {
                        database: format!("root.{db}"),
                        table,
                        created_version,
                    },
                }
            }),
        (name, name).prop_map(|(db, table)| Command::BeginDropTable {
            database: format!("root.{db}"),
            table,
        }),
        (
            name,
            prop_oneof![
                Just(None),
                (-2i64..3)
                    .prop_filter("0 is UNSET", |t| *t != 0)
                    .prop_map(Some)
            ]
        )
            .prop_map(|(n, ttl_ms)| Command::BeginSetTtl {
                database: format!("root.{n}"),
                ttl_ms,
            }),
    ]
}

proptest! {
    #[test]
    fn encode_decode_round_trip(command in arb_command()) {
        let bytes = command.encode();
        prop_assert_eq!(Command::decode(&bytes).unwrap(), command);
        // Every strict prefix is refused, never misread.
        for len in 0..bytes.len() {
            prop_assert!(Command::decode(&bytes[..len]).is_err());
        }
    }
}
