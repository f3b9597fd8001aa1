//! Tests of databases and series: auto-creation, declared codecs, aliases, tags and
//! attributes.

use super::*;

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
            database: "root.sg.inner".into(),
            table_model: false,
        }),
        Err(MetadataError::DatabaseOverlap(..))
    ));
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

/// Aliases name one series of their device; tags and attributes follow the series through
/// snapshots, deletions and database drops, and a version-5 snapshot (before them) decodes.
#[test]
fn aliases_are_unique_per_device_and_meta_follows_the_series() {
    let mut h = Harness::new();
    h.register(0, "a");
    h.apply(Command::CreateDatabase {
        database: "root.sg".into(),
        table_model: false,
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
        assert_eq!(h.state.series.records, before.series.records, "{what}");
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
    assert!(h.state.series.meta.is_empty());
}

proptest! {
    /// `series_under` is the pass over every series it replaces: the paths that start with the
    /// prefix as text, in path order.
    #[test]
    fn series_under_a_prefix_is_the_filter_of_every_series(
        paths in prop::collection::btree_set(
            (prop::sample::select(vec!["root.a.d1", "root.a.d10", "root.a.d1.x", "root.ab.d2", "root.b.d1"]),
             prop::sample::select(vec!["s1", "s10", "t"])),
            1..12,
        ),
        prefix in prop::sample::select(vec![
            "", "root", "root.a", "root.a.", "root.a.d1", "root.a.d1.", "root.a.d1.s", "root.a.d1.s1",
            "root.a.d1.x", "root.a.d1.x.t", "root.ab", "root.b.d1.t", "root.c",
        ]),
    ) {
        let mut h = Harness::new();
        let series: Vec<SeriesSpec> = paths
            .iter()
            .map(|(d, m)| spec(d, m, DataType::Int64))
            .collect();
        h.apply(Command::CreateTimeseries { series, auto_create: true }).unwrap();
        let under: Vec<(String, String)> = h
            .state
            .series_under(prefix)
            .map(|(d, m, _, _)| (d.to_string(), m.to_string()))
            .collect();
        let expected: Vec<(String, String)> = h
            .state
            .all_series()
            .filter(|(d, m, _)| format!("{d}.{m}").starts_with(prefix))
            .map(|(d, m, _)| (d.to_string(), m.to_string()))
            .collect();
        prop_assert_eq!(under, expected);
    }
}
