//! Tests of the table model's tables: creation, extension, device attributes, DROP TABLE and
//! incarnations.

use super::*;

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
        table_model: true,
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
        table_model: true,
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
    let table_series = |h: &mut Harness, table: &str, series: Vec<SeriesSpec>| {
        let created_version = h.state.table("root.db", table).unwrap().created_version;
        h.apply(Command::CreateTableSeries {
            origin: TableOrigin {
                database: "root.db".into(),
                table: table.into(),
                created_version,
            },
            series,
        })
        .unwrap();
    };
    table_series(
        &mut h,
        "t",
        vec![
            spec("root.db.t.-a", "v", DataType::Double),
            spec("root.db.t.-b", "v", DataType::Double),
            spec("root.db.t.-b", "w", DataType::Int32),
            // The table's device of no tags.
            spec("root.db.t", "s", DataType::Double),
        ],
    );
    // Another table whose name starts alike.
    table_series(
        &mut h,
        "t2",
        vec![spec("root.db.t2.-a", "v", DataType::Double)],
    );
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
    table_series(
        &mut h,
        "t2",
        vec![spec("root.db.t2.-new", "v", DataType::Double)],
    );
    // A tree write may not create series in the table-model database at all.
    let e = h
        .apply(Command::CreateTimeseries {
            series: vec![spec("root.db.t2.-tree", "v", DataType::Double)],
            auto_create: true,
        })
        .unwrap_err();
    assert!(matches!(e, MetadataError::WrongModel(_)), "{e}");
    assert_eq!(e.status_code(), StatusCode::IllegalParameter);
    // Snapshots keep the operation (kind 4).
    let bytes = h.state.encode_snapshot();
    assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), h.state);
    // The Finish removes exactly the listed series; the name makes a new table after it.
    h.apply(Command::FinishOperation { operation_id: op })
        .unwrap();
    let left: Vec<(String, String)> = h.state.series.records.keys().cloned().collect();
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
        table_model: true,
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

/// Issue 40: the models keep their namespaces apart. Tables live only in databases the table
/// model created, tree series never in those, and a dropped table database leaves its name to
/// either model.
#[test]
fn the_models_keep_their_databases_apart() {
    let mut h = Harness::new();
    h.register(0, "a");
    let database = |h: &mut Harness, name: &str, table_model: bool| {
        h.apply(Command::CreateDatabase {
            database: name.into(),
            table_model,
        })
    };
    let table = |h: &mut Harness, database: &str| {
        h.apply(Command::CreateTable {
            database: database.into(),
            table: TableSchema {
                name: "t".into(),
                columns: Vec::new(),
                ttl_ms: None,
            },
            if_not_exists: false,
            extend: false,
        })
    };
    let tree_series = |h: &mut Harness, device: &str, auto_create: bool| {
        h.apply(Command::CreateTimeseries {
            series: vec![spec(device, "v", DataType::Double)],
            auto_create,
        })
    };
    database(&mut h, "root.tree", false).unwrap();
    database(&mut h, "root.tab", true).unwrap();
    assert!(h.state.is_table_database("root.tab"));
    assert!(!h.state.is_table_database("root.tree"));
    let e = table(&mut h, "root.tree").unwrap_err();
    assert!(matches!(e, MetadataError::WrongModel(_)), "{e}");
    table(&mut h, "root.tab").unwrap();
    for auto_create in [false, true] {
        let e = tree_series(&mut h, "root.tab.t.-x", auto_create).unwrap_err();
        assert!(matches!(e, MetadataError::WrongModel(_)), "{e}");
    }
    tree_series(&mut h, "root.tree.d", false).unwrap();
    let bytes = h.state.encode_snapshot();
    assert!(MetadataState::decode_snapshot(&bytes)
        .unwrap()
        .is_table_database("root.tab"));

    let drop = begun(h.apply(Command::BeginDropDatabase {
        database: "root.tab".into(),
    }));
    h.apply(Command::FinishOperation { operation_id: drop })
        .unwrap();
    assert!(!h.state.is_table_database("root.tab"));
    database(&mut h, "root.tab", false).unwrap();
    tree_series(&mut h, "root.tab.d", false).unwrap();
}
