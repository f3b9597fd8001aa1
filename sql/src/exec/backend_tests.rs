//! The executor over an in-memory backend: result shapes and the statements' effects.

use common::table::Category;
use common::{DataType, StatusCode, Value};

use super::memory_backend::{ready, Memory};
use super::*;
use crate::{parse_script, Position, TimeRange};

fn run(backend: &Memory, text: &str) -> Vec<ExecResult<Outcome>> {
    parse_script(text, Position::START)
        .into_iter()
        .map(|p| ready(execute(backend, &p.result.expect("parses"))))
        .collect()
}

fn one(backend: &Memory, text: &str) -> Outcome {
    let mut outcomes = run(backend, text);
    assert_eq!(outcomes.len(), 1, "{text}");
    outcomes.pop().unwrap().expect(text)
}

#[test]
fn raw_select_joins_series_on_time_with_nulls() {
    let m = Memory::default();
    one(
        &m,
        "INSERT INTO root.sg.d1(time, a, b) VALUES (1, 1, 'x'), (2, NULL, 'y'), (3, 3, NULL)",
    );
    let o = one(&m, "SELECT a, b, missing FROM root.sg.d1 WHERE time >= 2");
    assert_eq!(o.columns, ["Time", "root.sg.d1.a", "root.sg.d1.b"]);
    assert_eq!(o.types, [DataType::Int64, DataType::Double, DataType::Text]);
    assert_eq!(
        o.rows,
        vec![
            vec![Some(Value::Int64(2)), None, Some(Value::Text("y".into()))],
            vec![Some(Value::Int64(3)), Some(Value::Double(3.0)), None],
        ]
    );
    assert!(o.has_time());
}

#[test]
fn order_by_time_limit_and_offset_pick_rows_of_the_join() {
    let m = Memory::default();
    // a at 1..=6, b at 4..=9: the join has rows 1..=9.
    for t in 1..=6 {
        one(
            &m,
            &format!("INSERT INTO root.sg.d1(time, a) VALUES ({t}, {t})"),
        );
    }
    for t in 4..=9 {
        one(
            &m,
            &format!("INSERT INTO root.sg.d1(time, b) VALUES ({t}, {t})"),
        );
    }
    let times = |text: &str| -> Vec<i64> {
        one(&m, text)
            .rows
            .iter()
            .map(|r| match r[0] {
                Some(Value::Int64(t)) => t,
                ref other => panic!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(times("SELECT a, b FROM root.sg.d1 LIMIT 3"), [1, 2, 3]);
    assert_eq!(
        times("SELECT a, b FROM root.sg.d1 LIMIT 3 OFFSET 4"),
        [5, 6, 7]
    );
    assert_eq!(times("SELECT b, a FROM root.sg.d1 OFFSET 7"), [8, 9]);
    assert_eq!(
        times("SELECT a, b FROM root.sg.d1 ORDER BY TIME DESC LIMIT 4"),
        [9, 8, 7, 6]
    );
    assert_eq!(
        times("SELECT * FROM root.sg.d1 WHERE time < 8 ORDER BY TIME DESC OFFSET 5"),
        [2, 1]
    );
    assert!(times("SELECT a FROM root.sg.d1 LIMIT 0").is_empty());
    assert!(times("SELECT a FROM root.sg.d1 OFFSET 100").is_empty());
    // The cells stay with their rows.
    let o = one(
        &m,
        "SELECT a, b FROM root.sg.d1 ORDER BY TIME DESC LIMIT 1 OFFSET 3",
    );
    assert_eq!(
        o.rows,
        vec![vec![
            Some(Value::Int64(6)),
            Some(Value::Double(6.0)),
            Some(Value::Double(6.0))
        ]]
    );
}

#[test]
fn last_and_count_have_iotdb_shapes() {
    let m = Memory::default();
    one(&m, "CREATE TIMESERIES root.sg.d1.i INT32");
    one(
        &m,
        "INSERT INTO root.sg.d1(time, i, d) VALUES (1, 5, 2), (7, 6, 2.5)",
    );
    let last = one(&m, "SELECT LAST * FROM root.sg.d1");
    assert_eq!(last.columns, ["Time", "Timeseries", "Value", "DataType"]);
    assert_eq!(
        last.rows,
        vec![
            vec![
                Some(Value::Int64(7)),
                Some(Value::Text("root.sg.d1.d".into())),
                Some(Value::Text("2.5".into())),
                Some(Value::Text("DOUBLE".into())),
            ],
            vec![
                Some(Value::Int64(7)),
                Some(Value::Text("root.sg.d1.i".into())),
                Some(Value::Text("6".into())),
                Some(Value::Text("INT32".into())),
            ],
        ]
    );
    let count = one(&m, "SELECT COUNT(i) FROM root.sg.d1 WHERE time < 5");
    assert_eq!(count.columns, ["count(root.sg.d1.i)"]);
    assert!(!count.has_time());
    assert_eq!(count.rows, vec![vec![Some(Value::Int64(1))]]);
    // Paths of several devices, as the raw and last data query calls name them.
    one(&m, "INSERT INTO root.sg.d2(time, i) VALUES (3, 9)");
    let raw = ready(raw_paths(
        &m,
        &[
            "root.sg.d2.i".into(),
            "root.sg.d1.i".into(),
            "root.sg.d9.x".into(),
        ],
        TimeRange::ALL,
        &mut ResultCharge::unbounded(),
    ))
    .unwrap();
    assert_eq!(raw.columns, ["Time", "root.sg.d2.i", "root.sg.d1.i"]);
    assert_eq!(raw.rows.len(), 3);
    let last = ready(last_paths(
        &m,
        &["root.sg.d1.i".into(), "root.sg.d2.i".into()],
        5,
        &mut ResultCharge::unbounded(),
    ))
    .unwrap();
    assert_eq!(last.rows.len(), 1, "only d1.i has a point at or after 5");
}

#[test]
fn show_timeseries_and_devices_take_patterns() {
    let m = Memory::default();
    one(&m, "INSERT INTO root.sg.d1(time, a, b) VALUES (1, 1, 2)");
    one(&m, "INSERT INTO root.sg.d1.x(time, c) VALUES (1, 1)");
    one(&m, "INSERT INTO root.sg.d2(time, a) VALUES (1, 1)");
    let names = |text: &str| -> Vec<String> {
        one(&m, text)
            .rows
            .into_iter()
            .map(|r| match &r[0] {
                Some(Value::Text(s)) => s.clone(),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(
        names("SHOW TIMESERIES root.sg.d1.*"),
        ["root.sg.d1.a", "root.sg.d1.b"]
    );
    assert_eq!(
        names("SHOW TIMESERIES root.sg.d1"),
        ["root.sg.d1.a", "root.sg.d1.b", "root.sg.d1.x.c"]
    );
    assert_eq!(
        names("SHOW TIMESERIES root.*.*.a"),
        ["root.sg.d1.a", "root.sg.d2.a"]
    );
    assert_eq!(names("SHOW TIMESERIES root.sg.d1.a"), ["root.sg.d1.a"]);
    assert!(names("SHOW TIMESERIES root.sg.d1.zz").is_empty());
    assert_eq!(
        names("SHOW DEVICES root.sg.*"),
        ["root.sg.d1", "root.sg.d2"]
    );
    assert_eq!(
        names("SHOW DEVICES root.sg.**"),
        ["root.sg.d1", "root.sg.d1.x", "root.sg.d2"]
    );
    let shown = one(&m, "SHOW TIMESERIES root.sg.d2.a");
    assert_eq!(shown.columns.len(), 11);
    assert_eq!(shown.columns[1], "Alias");
}

#[test]
fn delete_from_removes_the_points_in_range_of_the_series_named() {
    let m = Memory::default();
    one(
        &m,
        "INSERT INTO root.sg.d1(time, a, b) VALUES (1, 1, 1), (2, 2, 2), (3, 3, 3)",
    );
    one(&m, "INSERT INTO root.sg.d2(time, a) VALUES (1, 1), (2, 2)");
    let times = |series: &str| -> Vec<i64> {
        let (device, measurement) = series.rsplit_once('.').unwrap();
        m.series.lock().unwrap()[&(device.to_string(), measurement.to_string())]
            .1
            .keys()
            .copied()
            .collect()
    };
    one(&m, "DELETE FROM root.sg.d1.a WHERE time >= 2 AND time < 3");
    assert_eq!(times("root.sg.d1.a"), [1, 3]);
    assert_eq!(times("root.sg.d1.b"), [1, 2, 3], "another series");
    one(&m, "DELETE FROM root.sg.*.a, root.sg.d9.zz WHERE time <= 1");
    assert_eq!(times("root.sg.d1.a"), [3]);
    assert_eq!(times("root.sg.d2.a"), [2]);
    one(&m, "DELETE FROM root.sg.d1.b WHERE time > 5");
    assert_eq!(times("root.sg.d1.b"), [1, 2, 3], "an empty range");
    one(&m, "DELETE FROM root.sg.**");
    assert!(times("root.sg.d1.b").is_empty());
    assert!(times("root.sg.d2.a").is_empty());
    // The series stay.
    assert_eq!(one(&m, "SHOW TIMESERIES").rows.len(), 3);
    // IoTDB's deleteData: inclusive bounds, patterns.
    one(
        &m,
        "INSERT INTO root.sg.d1(time, a) VALUES (5, 5), (6, 6), (7, 7)",
    );
    let patterns = [PathPattern::parse("root.sg.d1.*").unwrap()];
    ready(delete_paths(&m, &patterns, 5, 6)).unwrap();
    assert_eq!(times("root.sg.d1.a"), [7]);
}

#[test]
fn date_time_bounds_select_the_points_of_their_instants() {
    const JAN_1: i64 = 1_704_067_200_000; // 2024-01-01T00:00:00Z
    const HOUR: i64 = 3_600_000;
    const DAY: i64 = 24 * HOUR;
    let m = Memory::default();
    // Times written both ways: a date-time expression and integer milliseconds.
    one(
        &m,
        "INSERT INTO root.sg.d1(time, a) VALUES (2024-01-01T00:00:00 - 1ms, 0), \
         ('2024-01-01 00:00:00', 1), (2024-01-01T01:00:00.500, 2)",
    );
    one(
        &m,
        &format!(
            "INSERT INTO root.sg.d1(time, a) VALUES ({}, 3), ({}, 4)",
            JAN_1 + DAY,
            JAN_1 + DAY + 1
        ),
    );
    let times_at = |text: &str, now: i64| -> Vec<i64> {
        let statement = crate::parse_script_with_clock(text, Position::START, &|| now)
            .pop()
            .unwrap()
            .result
            .expect(text);
        let outcome = ready(execute(&m, &statement)).expect(text);
        outcome
            .rows
            .iter()
            .map(|r| match r[0] {
                Some(Value::Int64(t)) => t,
                ref other => panic!("{other:?}"),
            })
            .collect()
    };
    let times = |text: &str| times_at(text, 0);
    assert_eq!(
        times(
            "SELECT a FROM root.sg.d1 \
             WHERE time >= 2024-01-01T00:00:00 AND time < '2024-01-02 00:00:00'"
        ),
        [JAN_1, JAN_1 + HOUR + 500]
    );
    assert_eq!(
        times(
            "SELECT a FROM root.sg.d1 \
             WHERE time >= 2024-01-01 08:00:00+08:00 AND time <= 2024/01/01 + 1d"
        ),
        [JAN_1, JAN_1 + HOUR + 500, JAN_1 + DAY]
    );
    assert_eq!(
        times("SELECT a FROM root.sg.d1 WHERE time > 2024-01-01T01:00:00.500"),
        [JAN_1 + DAY, JAN_1 + DAY + 1]
    );
    assert_eq!(
        times("SELECT a FROM root.sg.d1 WHERE time < 2024-01-01"),
        [JAN_1 - 1]
    );
    assert_eq!(
        times_at(
            "SELECT a FROM root.sg.d1 WHERE time >= now() - 1d",
            JAN_1 + DAY + 1
        ),
        [JAN_1 + HOUR + 500, JAN_1 + DAY, JAN_1 + DAY + 1]
    );
    let windows = one(
        &m,
        "SELECT count(a) FROM root.sg.d1 GROUP BY ([2024-01-01, 2024-01-03), 1d)",
    );
    assert_eq!(
        windows.rows,
        vec![
            vec![Some(Value::Int64(JAN_1)), Some(Value::Int64(2))],
            vec![Some(Value::Int64(JAN_1 + DAY)), Some(Value::Int64(2))],
        ]
    );
    one(
        &m,
        "DELETE FROM root.sg.d1.a WHERE time < 2024-01-02T00:00:00",
    );
    assert_eq!(
        times("SELECT a FROM root.sg.d1"),
        [JAN_1 + DAY, JAN_1 + DAY + 1]
    );
}

#[test]
fn aliases_name_series_and_show_lists_tags_and_attributes() {
    let m = Memory::default();
    one(
        &m,
        "CREATE TIMESERIES root.sg.d1.s1(temperature) WITH DATATYPE=DOUBLE, ENCODING=GORILLA \
         TAGS(unit=c, 'floor'='3') ATTRIBUTES(owner=\"o\"\"ps\")",
    );
    one(&m, "INSERT INTO root.sg.d1(time, s1) VALUES (5, 21.5)");
    let o = one(&m, "SELECT temperature FROM root.sg.d1");
    assert_eq!(o.columns, ["Time", "root.sg.d1.temperature"]);
    assert_eq!(
        o.rows,
        vec![vec![Some(Value::Int64(5)), Some(Value::Double(21.5))]]
    );
    let shown = one(&m, "SHOW TIMESERIES root.sg.d1.s1");
    let text = |i: usize| shown.rows[0][i].clone();
    assert_eq!(text(1), Some(Value::Text("temperature".into())));
    assert_eq!(
        text(6),
        Some(Value::Text(r#"{"floor":"3","unit":"c"}"#.into()))
    );
    assert_eq!(text(7), Some(Value::Text(r#"{"owner":"o\"ps"}"#.into())));
    one(&m, "CREATE TIMESERIES root.sg.d1.s2 INT64");
    let plain = one(&m, "SHOW TIMESERIES root.sg.d1.s2");
    assert_eq!(
        (plain.rows[0][1].clone(), plain.rows[0][6].clone()),
        (None, None)
    );
}

#[test]
fn show_databases_has_iotdb_2_columns_then_the_ttl() {
    let m = Memory::default();
    let o = one(&m, "SHOW DATABASES");
    assert_eq!(
        o.columns,
        [
            "Database",
            "SchemaReplicationFactor",
            "DataReplicationFactor",
            "TimePartitionOrigin",
            "TimePartitionInterval",
            "TTL"
        ]
    );
    assert_eq!(
        o.types,
        [
            DataType::Text,
            DataType::Int32,
            DataType::Int32,
            DataType::Int64,
            DataType::Int64,
            DataType::Text
        ]
    );
    assert_eq!(
        o.rows,
        vec![vec![
            Some(Value::Text("root.sg".into())),
            Some(Value::Int32(1)),
            Some(Value::Int32(3)),
            Some(Value::Int64(0)),
            Some(Value::Int64(604_800_000)),
            Some(Value::Text("86400000".into())),
        ]]
    );
}

#[test]
fn list_user_is_a_column_of_names() {
    let m = Memory::default();
    let o = one(&m, "LIST USER");
    assert_eq!(o.columns, ["User"]);
    assert_eq!(
        o.rows,
        vec![
            vec![Some(Value::Text("ops".into()))],
            vec![Some(Value::Text("root".into()))]
        ]
    );
}

/// Runs one table-model statement in a session whose current database is `current`.
pub(super) fn table(
    backend: &Memory,
    current: Option<&str>,
    text: &str,
) -> ExecResult<TableOutcome> {
    let statement = crate::parse_table_statement(text)?;
    ready(execute_table(backend, current, &statement))
}

pub(super) fn strings(o: &Outcome) -> Vec<Vec<String>> {
    o.rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|c| c.as_ref().map_or("null".to_string(), value_text))
                .collect()
        })
        .collect()
}

#[test]
fn the_table_model_creates_uses_writes_and_reads_tables() {
    let m = Memory::default();
    let e = table(&m, None, "USE db1").unwrap_err();
    assert_eq!(e.code(), StatusCode::MetadataError.wire(), "{e}");
    table(&m, None, "CREATE DATABASE IF NOT EXISTS db1").unwrap();
    table(&m, None, "CREATE DATABASE IF NOT EXISTS db1").unwrap();
    assert!(table(&m, None, "CREATE DATABASE db1").is_err());
    let used = table(&m, None, "USE \"DB1\"").unwrap();
    assert_eq!(used.database.as_deref(), Some("db1"));
    let e = table(&m, None, "CREATE TABLE t (a STRING TAG)").unwrap_err();
    assert_eq!(e.code(), StatusCode::IllegalParameter.wire(), "{e}");
    table(
        &m,
        Some("db1"),
        "create table T5 (id1 string id, attr1 string attribute, m1 double measurement) \
         with (TTL=INF)",
    )
    .unwrap();
    let e = table(&m, Some("db1"), "CREATE TABLE t5 (x STRING TAG)").unwrap_err();
    assert_eq!(e.code(), StatusCode::TableAlreadyExists.wire());
    table(
        &m,
        Some("db1"),
        "CREATE TABLE IF NOT EXISTS t5 (x STRING TAG)",
    )
    .unwrap();

    let shown = table(&m, None, "SHOW TABLES FROM db1").unwrap().outcome;
    assert_eq!(shown.columns, ["TableName", "TTL(ms)"]);
    assert_eq!(strings(&shown), [["t5", "INF"]]);
    let described = table(&m, Some("db1"), "DESC t5").unwrap().outcome;
    assert_eq!(
        strings(&described),
        [
            ["time", "TIMESTAMP", "TIME"],
            ["id1", "STRING", "TAG"],
            ["attr1", "STRING", "ATTRIBUTE"],
            ["m1", "DOUBLE", "FIELD"],
        ]
    );

    // Two devices interleaved in one tablet, one row with a null attribute, a new FIELD column
    // created on the way.
    let mut tablet = Tablet::new(
        "T5",
        &[
            ("id1", DataType::String),
            ("attr1", DataType::String),
            ("m1", DataType::Double),
            ("m2", DataType::Int32),
        ],
    );
    let s = |v: &str| Some(Value::String(v.into()));
    tablet.push_row(3, vec![s("b"), s("x"), Some(Value::Double(3.0)), None]);
    tablet.push_row(1, vec![s("a"), s("old"), Some(Value::Double(1.0)), None]);
    tablet.push_row(2, vec![s("a"), s("new"), None, Some(Value::Int32(2))]);
    tablet.push_row(4, vec![s("a"), None, Some(Value::Double(4.0)), None]);
    let categories = [
        Category::Tag,
        Category::Attribute,
        Category::Field,
        Category::Field,
    ];
    ready(insert_table(&m, "db1", tablet, &categories)).unwrap();
    assert!(m
        .series
        .lock()
        .unwrap()
        .contains_key(&("root.db1.t5.-a".to_string(), "m2".to_string())));

    let all = table(&m, Some("db1"), "select * from t5 order by time")
        .unwrap()
        .outcome;
    assert_eq!(all.columns, ["time", "id1", "attr1", "m1", "m2"]);
    assert_eq!(
        all.types,
        [
            DataType::Timestamp,
            DataType::String,
            DataType::String,
            DataType::Double,
            DataType::Int32
        ]
    );
    assert!(!all.has_time());
    assert_eq!(
        strings(&all),
        [
            ["1", "a", "new", "1.0", "null"],
            ["2", "a", "new", "null", "2"],
            ["3", "b", "x", "3.0", "null"],
            ["4", "a", "new", "4.0", "null"],
        ]
    );
    // Without ORDER BY: device by device. A tag term, a time bound, columns named, a window.
    let a = table(
        &m,
        None,
        "SELECT m1, time FROM db1.t5 WHERE id1 = 'a' AND time > 1 ORDER BY time DESC LIMIT 1",
    )
    .unwrap()
    .outcome;
    assert_eq!(strings(&a), [["4.0", "4"]]);
    let by_attribute = table(&m, Some("db1"), "SELECT id1 FROM t5 WHERE attr1 = 'x'")
        .unwrap()
        .outcome;
    assert_eq!(strings(&by_attribute), [["b"]]);
    let unordered = table(&m, Some("db1"), "SELECT time, id1 FROM t5")
        .unwrap()
        .outcome;
    assert_eq!(
        strings(&unordered),
        [["1", "a"], ["2", "a"], ["4", "a"], ["3", "b"]]
    );

    // Refusals: a DOUBLE compared with text and `*` grouped (700); a tree statement in a table
    // session is not run; an unknown column is named.
    for (text, code) in [
        ("SELECT * FROM t5 WHERE m1 = 'x'", 700),
        ("SELECT * FROM t5 WHERE nope > 1", 700),
        ("SELECT * FROM t5 GROUP BY id1", 700),
        ("SELECT * FROM t5 FILL(PREVIOUS)", 300),
        ("SELECT * FROM t5 LIMIT 3 SLIMIT 1", 300),
        ("SELECT * FROM t5 HAVING x > 1", 300),
        ("SELECT * FROM root.sg.d1", 700),
        ("UPDATE t5 SET m1 = 1", 300),
        ("CREATE TIMESERIES root.sg.d1.s1 DOUBLE", 300),
        ("SELECT nope FROM t5", 700),
        ("SELECT * FROM nope", 550),
    ] {
        let e = table(&m, Some("db1"), text).unwrap_err();
        assert_eq!(e.code(), code, "{text}: {e}");
    }
    // Shared statements run.
    table(&m, Some("db1"), "FLUSH").unwrap();
    // The table model's databases only: root.sg is the tree's.
    let dbs = table(&m, None, "SHOW DATABASES").unwrap().outcome;
    assert_eq!(
        dbs.rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>(),
        [s("db1")]
    );

    // Issue 40: the models keep their namespaces apart. The tree sees none of the table's
    // devices, series or database, and may not drop it; the table model may not use the tree's.
    for text in [
        "SHOW DEVICES",
        "SHOW TIMESERIES root.**",
        "SHOW CHILD PATHS root",
        "SELECT * FROM root.**",
    ] {
        let shown = one(&m, text);
        assert!(
            !format!("{:?}", shown.rows).contains("db1"),
            "{text}: {:?}",
            shown.rows
        );
    }
    // IoTDB's raw and last data queries name full paths: a table's series is not among them.
    let table_series: Vec<String> = ready(m.show_timeseries("root.db1"))
        .unwrap()
        .iter()
        .map(|s| format!("{}.{}", s.device, s.measurement))
        .collect();
    assert!(!table_series.is_empty());
    let mut charge = ResultCharge::unbounded();
    let raw = ready(raw_paths(&m, &table_series, TimeRange::ALL, &mut charge)).unwrap();
    assert_eq!(raw.columns.len(), 1, "{:?}", raw.columns);
    assert!(raw.rows.is_empty(), "{:?}", raw.rows);
    let last = ready(last_paths(&m, &table_series, i64::MIN, &mut charge)).unwrap();
    assert!(last.rows.is_empty(), "{:?}", last.rows);
    let databases = one(&m, "SHOW DATABASES");
    assert_eq!(databases.rows.len(), 1, "{:?}", databases.rows);
    assert_eq!(
        one(&m, "COUNT TIMESERIES root.**").rows,
        vec![vec![Some(Value::Int64(0))]]
    );
    let e = super::memory_backend::run(&m, "DROP DATABASE root.db1").unwrap_err();
    assert_eq!(e.code(), 700, "{e}");
    assert!(e.to_string().contains("table-model database"), "{e}");
    let e = table(&m, None, "USE sg").unwrap_err();
    assert_eq!(e.code(), StatusCode::MetadataError.wire(), "{e}");
}

/// A DROP TABLE that lands between a table write's schema lookup and its rows (REVIEW N1): the
/// write carries the incarnation it read, so it creates no device of the dropped table and
/// sets no attribute, whether or not a table of the same name exists again by then.
#[test]
fn a_table_write_derived_from_a_dropped_table_writes_nothing() {
    let m = Memory::default();
    table(&m, None, "CREATE DATABASE db").unwrap();
    let create = "CREATE TABLE t (k STRING TAG, a STRING ATTRIBUTE, v DOUBLE FIELD)";
    table(&m, Some("db"), create).unwrap();
    let tablet = || {
        let mut t = Tablet::new(
            "t",
            &[
                ("k", DataType::String),
                ("a", DataType::String),
                ("v", DataType::Double),
            ],
        );
        for i in 0..3 {
            t.push_row(
                i,
                vec![
                    Some(Value::String(format!("k{i}"))),
                    Some(Value::String("x".into())),
                    Some(Value::Double(i as f64)),
                ],
            );
        }
        t
    };
    let categories = [Category::Tag, Category::Attribute, Category::Field];
    ready(insert_table(&m, "db", tablet(), &categories)).unwrap();
    assert_eq!(m.series.lock().unwrap().len(), 3);

    // Dropped under the write: 550, and nothing of it is left.
    *m.drop_before_next_write.lock().unwrap() = Some(("root.db".into(), "t".into()));
    let e = ready(insert_table(&m, "db", tablet(), &categories)).unwrap_err();
    assert_eq!(e.code(), StatusCode::TableNotExists.wire(), "{e}");
    assert!(m.series.lock().unwrap().is_empty(), "no device survives");

    // Dropped and created again under the write: still refused (another incarnation).
    table(&m, Some("db"), create).unwrap();
    let read = ready(m.table_for_write("root.db", "t")).unwrap().unwrap();
    table(&m, Some("db"), "DROP TABLE t").unwrap();
    table(&m, Some("db"), create).unwrap();
    let e =
        ready(m.insert_table_tablets("root.db", "t", read.created_version, vec![])).unwrap_err();
    assert_eq!(e.code(), StatusCode::TableNotExists.wire(), "{e}");
    let devices: &[common::table::DeviceAttributes] = &[];
    let e =
        ready(m.set_device_attributes("root.db", "t", read.created_version, devices)).unwrap_err();
    assert_eq!(e.code(), StatusCode::TableNotExists.wire(), "{e}");
    // A write that reads the new table writes.
    ready(insert_table(&m, "db", tablet(), &categories)).unwrap();
    assert_eq!(m.series.lock().unwrap().len(), 3);
}

#[test]
fn a_table_tablet_is_refused_whole_when_it_does_not_fit() {
    let m = Memory::default();
    table(&m, None, "CREATE DATABASE db").unwrap();
    table(
        &m,
        Some("db"),
        "CREATE TABLE t (k STRING TAG, v DOUBLE FIELD)",
    )
    .unwrap();
    let mut tablet = Tablet::new("t", &[("k", DataType::Int32), ("v", DataType::Double)]);
    tablet.push_row(1, vec![Some(Value::Int32(1)), Some(Value::Double(1.0))]);
    let e = ready(insert_table(
        &m,
        "db",
        tablet.clone(),
        &[Category::Tag, Category::Field],
    ))
    .unwrap_err();
    assert_eq!(e.code(), StatusCode::DataTypeMismatch.wire());
    let e = ready(insert_table(&m, "db", tablet, &[Category::Tag])).unwrap_err();
    assert_eq!(e.code(), StatusCode::IllegalParameter.wire());
    // A FIELD of another type than the table's.
    let mut tablet = Tablet::new("t", &[("k", DataType::String), ("v", DataType::Int64)]);
    tablet.push_row(
        1,
        vec![Some(Value::String("a".into())), Some(Value::Int64(1))],
    );
    let e = ready(insert_table(
        &m,
        "db",
        tablet,
        &[Category::Tag, Category::Field],
    ))
    .unwrap_err();
    assert_eq!(e.code(), StatusCode::DataTypeMismatch.wire());
    assert!(m.series.lock().unwrap().is_empty());
}

#[test]
fn the_table_models_insert_types_values_by_the_tables_columns() {
    let m = Memory::default();
    table(&m, None, "CREATE DATABASE db").unwrap();
    table(
        &m,
        Some("db"),
        "CREATE TABLE t (site STRING TAG, model STRING ATTRIBUTE, v FLOAT FIELD, n INT64 FIELD)",
    )
    .unwrap();
    table(
        &m,
        Some("db"),
        "INSERT INTO t(time, site, model, v) VALUES (2, 'a', 'x', 1.5), (1, 'b', NULL, 2)",
    )
    .unwrap();
    table(
        &m,
        None,
        "insert into db.T(Time, SITE, n) values (3, 'a', 7)",
    )
    .unwrap();
    let all = table(&m, Some("db"), "SELECT * FROM t ORDER BY time")
        .unwrap()
        .outcome;
    assert_eq!(
        strings(&all),
        [
            ["1", "b", "null", "2.0", "null"],
            ["2", "a", "x", "1.5", "null"],
            ["3", "a", "x", "null", "7"],
        ]
    );
    assert_eq!(all.types[3], DataType::Float);
    for (text, code) in [
        ("INSERT INTO t(time, nope) VALUES (1, 1)", 700),
        ("INSERT INTO u(time, v) VALUES (1, 1)", 550),
        ("INSERT INTO t(time, site, v) VALUES (1, 'a', 'text')", 614),
        ("INSERT INTO t(site, v) VALUES ('a', 1)", 700),
    ] {
        let e = table(&m, Some("db"), text).unwrap_err();
        assert_eq!(e.code(), code, "{text}: {e}");
    }
}

#[test]
fn a_table_delete_removes_the_points_of_the_devices_its_tags_select() {
    let m = Memory::default();
    table(&m, None, "CREATE DATABASE db").unwrap();
    table(
        &m,
        Some("db"),
        "CREATE TABLE t (site STRING TAG, unit STRING TAG, model STRING ATTRIBUTE, v DOUBLE FIELD, n INT64 FIELD)",
    )
    .unwrap();
    table(
        &m,
        Some("db"),
        "INSERT INTO t(time, site, unit, model, v, n) VALUES \
         (1, 'a', 'u1', 'x', 1, 10), (2, 'a', 'u1', 'x', 2, 20), (3, 'a', 'u1', 'x', 3, 30), \
         (1, 'a', 'u2', 'y', 4, 40), (2, 'b', 'u1', 'y', 5, 50)",
    )
    .unwrap();
    let rows = |m: &Memory| {
        strings(
            &table(m, Some("db"), "SELECT time, site, unit, v, n FROM t")
                .unwrap()
                .outcome,
        )
    };
    // Both tags and a time range: one device's points from time 2 on, every FIELD.
    table(
        &m,
        Some("db"),
        "DELETE FROM t WHERE site = 'a' AND unit = 'u1' AND time >= 2",
    )
    .unwrap();
    assert_eq!(
        rows(&m),
        [
            ["1", "a", "u1", "1.0", "10"],
            ["1", "a", "u2", "4.0", "40"],
            ["2", "b", "u1", "5.0", "50"],
        ]
    );
    // One tag: every device with it; no time bound: every time.
    table(&m, None, "delete from db.T where UNIT = 'u1'").unwrap();
    assert_eq!(rows(&m), [["1", "a", "u2", "4.0", "40"]]);
    // A tag value no device has deletes nothing; an empty range deletes nothing.
    table(&m, Some("db"), "DELETE FROM t WHERE site = 'c'").unwrap();
    table(&m, Some("db"), "DELETE FROM t WHERE time > 5 AND time < 3").unwrap();
    assert_eq!(rows(&m), [["1", "a", "u2", "4.0", "40"]]);
    // Refused, deleting nothing: an ATTRIBUTE or FIELD term, OR, an unknown column or table.
    for (text, code) in [
        ("DELETE FROM t WHERE model = 'y'", 300),
        ("DELETE FROM t WHERE v = '4'", 300),
        ("DELETE FROM t WHERE site = 'a' OR site = 'b'", 300),
        ("DELETE FROM t WHERE nope = 'a'", 700),
        ("DELETE FROM u", 550),
        ("DELETE FROM t WHERE time > 1.5", 700),
    ] {
        let e = table(&m, Some("db"), text).unwrap_err();
        assert_eq!(e.code(), code, "{text}: {e}");
    }
    assert_eq!(rows(&m), [["1", "a", "u2", "4.0", "40"]]);
    // The whole table.
    table(&m, Some("db"), "DELETE FROM t").unwrap();
    assert!(rows(&m).is_empty());
}

#[test]
fn drop_table_takes_the_table_and_its_points_and_frees_its_name() {
    let m = Memory::default();
    table(&m, None, "CREATE DATABASE db").unwrap();
    table(
        &m,
        Some("db"),
        "CREATE TABLE t (site STRING TAG, v DOUBLE FIELD)",
    )
    .unwrap();
    table(
        &m,
        Some("db"),
        "INSERT INTO t(time, site, v) VALUES (1, 'a', 1), (2, 'b', 2)",
    )
    .unwrap();
    table(
        &m,
        None,
        "CREATE TABLE db.keep (site STRING TAG, v DOUBLE FIELD)",
    )
    .unwrap();
    table(
        &m,
        None,
        "INSERT INTO db.keep(time, site, v) VALUES (1, 'a', 9)",
    )
    .unwrap();

    table(&m, Some("db"), "DROP TABLE t").unwrap();
    let names = |m: &Memory| strings(&table(m, Some("db"), "SHOW TABLES").unwrap().outcome);
    assert_eq!(names(&m), [["keep", "INF"]]);
    let e = table(&m, Some("db"), "SELECT * FROM t").unwrap_err();
    assert_eq!(e.code(), 550, "{e}");
    let e = table(&m, Some("db"), "DROP TABLE t").unwrap_err();
    assert_eq!(e.code(), 550, "{e}");
    table(&m, Some("db"), "DROP TABLE IF EXISTS t").unwrap();
    // Another table's points stay; the name makes a new table, with other columns.
    assert_eq!(
        strings(&table(&m, Some("db"), "SELECT * FROM keep").unwrap().outcome),
        [["1", "a", "9.0"]]
    );
    table(
        &m,
        Some("db"),
        "CREATE TABLE t (region STRING TAG, site STRING TAG, n INT32 FIELD)",
    )
    .unwrap();
    table(
        &m,
        Some("db"),
        "INSERT INTO t(time, region, site, n) VALUES (3, 'r', 'a', 7)",
    )
    .unwrap();
    assert_eq!(
        strings(&table(&m, Some("db"), "SELECT * FROM t").unwrap().outcome),
        [["3", "r", "a", "7"]]
    );
    // No database: refused before anything is asked of the backend.
    let e = table(&m, None, "DROP TABLE t").unwrap_err();
    assert_eq!(e.code(), StatusCode::IllegalParameter.wire(), "{e}");
}
