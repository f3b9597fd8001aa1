//! Tests of the snapshot encoding: golden vectors, every older version, damage, and the
//! round trip at every step of a random log.

use super::*;

#[test]
fn snapshot_golden_vector() {
    let mut h = Harness::new();
    h.register(0, "a");
    let bytes = h.state.encode_snapshot();
    let mut expected: Vec<u8> = b"FPCNSNP9".to_vec();
    for v in [1u64, 1, 2, 1, 1] {
        // applied index, metadata version, next DataNode / region / operation ids
        expected.extend_from_slice(&v.to_le_bytes());
    }
    expected.extend_from_slice(&[1, 0, 0, 0]); // one DataNode
    expected.extend_from_slice(&1u64.to_le_bytes());
    expected.extend_from_slice(&[1, 0, b'a', 5, 0, b'a', b'-', b'r', b'p', b'c']);
    expected.extend_from_slice(&1u64.to_le_bytes()); // epoch
    expected.push(0); // Running
    for _ in 0..12 {
        // databases, series, partitions, regions, operations, TTLs, migrations, users,
        // series meta, tables, confirmed incarnations (none: registered with the old command),
        // table-model databases
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
    let mut expected = expected[..expected.len() - 24].to_vec();
    expected[8..16].copy_from_slice(&2u64.to_le_bytes()); // applied index
    expected.extend_from_slice(&[1, 0, 0, 0, 2, 0, b'a', b'l', 11, 0]);
    expected.extend_from_slice(b"$argon2id$h");
    expected.extend_from_slice(&[0, 0, 0, 0]); // series meta
    expected.extend_from_slice(&[0, 0, 0, 0]); // tables
    expected.extend_from_slice(&[0, 0, 0, 0]); // confirmed incarnations
    expected.extend_from_slice(&[0, 0, 0, 0]); // table-model databases
    let crc = crc32fast::hash(&expected);
    expected.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(bytes, expected);
    assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), h.state);

    // With a table-model database and a table: the table's incarnation after its name
    // (version 8), the database among the table model's (version 9).
    h.apply(Command::CreateDatabase {
        database: "root.b".into(),
        table_model: true,
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
    // Then no confirmed incarnation (the registry's, version 8 too), the table-model
    // databases and the CRC.
    let table_databases: Vec<u8> = [&[1, 0, 0, 0][..], &[6, 0], b"root.b"].concat();
    let end = bytes.len() - 4 - table_databases.len();
    assert_eq!(&bytes[end..bytes.len() - 4], &table_databases[..]);
    let body = &bytes[..end - 4];
    assert!(body.ends_with(&table), "{body:?}");
    assert_eq!(&bytes[end - 4..end], &[0, 0, 0, 0]);
    let decoded = MetadataState::decode_snapshot(&bytes).unwrap();
    assert_eq!(decoded, h.state);
    assert!(decoded.is_table_database("root.b"));
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
        table_model: false,
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
