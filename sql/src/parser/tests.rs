use common::DataType;

use super::*;
use crate::{AggregateFunction, AggregateItem, Projection, RowWindow};

fn one(text: &str) -> Statement {
    let parsed = parse_script(text, Position::START);
    assert_eq!(parsed.len(), 1, "{text}: {parsed:?}");
    match &parsed[0].result {
        Ok(s) => s.clone(),
        Err(e) => panic!("{text}: {e}"),
    }
}

/// The error of the only statement in `text`, as displayed.
fn error(text: &str) -> String {
    let parsed = parse_script(text, Position::START);
    assert_eq!(parsed.len(), 1, "{text}: {parsed:?}");
    match &parsed[0].result {
        Ok(s) => panic!("{text} parsed as {s:?}"),
        Err(e) => e.to_string(),
    }
}

fn names(names: &[&str]) -> Projection {
    Projection::Measurements(names.iter().map(|n| n.to_string()).collect())
}

fn range(from: i64, to: i64) -> TimeRange {
    TimeRange { from, to }
}

#[test]
fn schema_statements() {
    assert_eq!(
        one("CREATE DATABASE root.sg"),
        Statement::CreateDatabase {
            database: "root.sg".into()
        }
    );
    assert_eq!(
        one("drop database ROOT.sg"),
        Statement::DropDatabase {
            database: "root.sg".into()
        }
    );
    assert_eq!(
        one("DELETE TIMESERIES root.sg.d1.s1"),
        Statement::DeleteTimeseries {
            path: "root.sg.d1.s1".into()
        }
    );
    let pattern = |text: &str| PathPattern::parse(text).unwrap();
    assert_eq!(
        one("DELETE FROM root.sg.d1.s1, root.sg.*.s2 WHERE time >= 5 AND time <= 9"),
        Statement::DeleteData {
            paths: vec![pattern("root.sg.d1.s1"), pattern("root.sg.*.s2")],
            range: TimeRange { from: 5, to: 10 },
        }
    );
    assert_eq!(
        one("delete from root.sg.**"),
        Statement::DeleteData {
            paths: vec![pattern("root.sg.**")],
            range: TimeRange::ALL,
        }
    );
}

#[test]
fn ttl_statements() {
    assert_eq!(
        one("SET TTL TO root.sg 86400000"),
        Statement::SetTtl {
            database: "root.sg".into(),
            ttl_ms: 86_400_000
        }
    );
    // The sign reaches the server, which refuses a TTL that is not positive (700).
    assert_eq!(
        one("set ttl to ROOT.sg -5;"),
        Statement::SetTtl {
            database: "root.sg".into(),
            ttl_ms: -5
        }
    );
    for text in ["UNSET TTL TO root.sg", "unset ttl from root.sg"] {
        assert_eq!(
            one(text),
            Statement::UnsetTtl {
                database: "root.sg".into()
            },
            "{text}"
        );
    }
    assert!(error("SET TTL TO root.sg").contains("TTL in milliseconds"));
    assert!(error("SET TTL TO root.sg 1.5").contains("integer TTL"));
    assert!(error("SET TTL root.sg 10").contains("TO"));
    assert!(error("UNSET TTL root.sg").contains("TO or FROM"));
    assert!(error("SET TTL TO root 10").contains("database path"));
    assert!(error("SET TTL TO root.sg 10 20").contains("20"));
}

#[test]
fn remove_datanode() {
    assert_eq!(
        one("REMOVE DATANODE 3"),
        Statement::RemoveDataNode { data_node_id: 3 }
    );
    assert_eq!(
        one("remove datanode 12;"),
        Statement::RemoveDataNode { data_node_id: 12 }
    );
    assert!(error("REMOVE DATANODE").contains("DataNode id"));
    assert!(error("REMOVE DATANODE 0").contains("DataNode id"));
    assert!(error("REMOVE DATANODE -1").contains("DataNode id"));
    assert!(error("REMOVE DATANODE 1.5").contains("DataNode id"));
    assert!(error("REMOVE NODE 1").contains("DATANODE"));
    assert!(error("REMOVE DATANODE 1 2").contains("2"));
}

#[test]
fn create_timeseries_forms() {
    let double = |encoding: Option<&str>, compressor: Option<&str>| Statement::CreateTimeseries {
        path: "root.sg.d1.s1".into(),
        data_type: DataType::Double,
        encoding: encoding.map(str::to_string),
        compressor: compressor.map(str::to_string),
        meta: Default::default(),
    };
    assert_eq!(
        one("CREATE TIMESERIES root.sg.d1.s1 WITH DATATYPE=DOUBLE"),
        double(None, None)
    );
    assert_eq!(
        one("create timeseries root.sg.d1.s1 with datatype = double, encoding=gorilla, compressor=SNAPPY"),
        double(Some("GORILLA"), Some("SNAPPY"))
    );
    assert_eq!(
        one("CREATE TIMESERIES root.sg.d1.s1 DOUBLE ENCODING=PLAIN"),
        double(Some("PLAIN"), None)
    );
    assert_eq!(
        one("CREATE TIMESERIES root.sg.d1.s1 DOUBLE COMPRESSION=LZ4"),
        double(None, Some("LZ4"))
    );
    assert!(
        error("CREATE TIMESERIES root.sg.d1.s1 DOUBLE ENCODING=PLAIN, ENCODING=RLE")
            .contains("at most once")
    );
    for t in DataType::ALL {
        assert_eq!(
            one(&format!("CREATE TIMESERIES root.a.b.c WITH DATATYPE={t}")),
            Statement::CreateTimeseries {
                path: "root.a.b.c".into(),
                data_type: t,
                encoding: None,
                compressor: None,
                meta: Default::default(),
            }
        );
    }
    let Statement::CreateTimeseries { meta, .. } = one(
        "CREATE TIMESERIES root.sg.d1.s1(temp) DOUBLE ENCODING=PLAIN TAGS(a=1, 'b c'=\"d\") ATTRIBUTES(x=y)",
    ) else {
        panic!("not a CREATE TIMESERIES");
    };
    assert_eq!(meta.alias.as_deref(), Some("temp"));
    assert_eq!(
        meta.tags.into_iter().collect::<Vec<_>>(),
        [("a".into(), "1".into()), ("b c".into(), "d".into())]
    );
    assert_eq!(meta.attributes.len(), 1);
    assert!(
        error("CREATE TIMESERIES root.sg.d1.s1 DOUBLE TAGS(a=1) TAGS(b=2)")
            .contains("at most once")
    );
    assert!(error("CREATE TIMESERIES root.sg.d1.s1 DOUBLE TAGS(a)").contains("'='"));
}

#[test]
fn blob_literals_are_an_x_right_before_hex_digits() {
    let Statement::Insert(insert) =
        one("INSERT INTO root.sg.d1(time, b, c) VALUES (1, X'0aFF', x'')")
    else {
        panic!("not an insert")
    };
    assert_eq!(
        insert.rows[0].values,
        vec![Literal::Blob(vec![0x0a, 0xff]), Literal::Blob(vec![])]
    );
    assert!(error("INSERT INTO root.sg.d1(time, b) VALUES (1, X'abc')").contains("hex digits"));
    assert!(error("INSERT INTO root.sg.d1(time, b) VALUES (1, X'zz')").contains("hex digits"));
    // Apart, X is a word, which is no value.
    assert!(error("INSERT INTO root.sg.d1(time, b) VALUES (1, X '00')").contains("a value"));
}

#[test]
fn insert_with_every_literal_kind() {
    let statement = one(
        "INSERT INTO root.sg.d1(time, s1, s2, s3, s4) VALUES \
         (1, 1.5, 2, 'a''b', true), (-2, -3e2, NULL, \"q\", FALSE), (3, +4, -9223372036854775808, '', null)",
    );
    let Statement::Insert(insert) = statement else {
        panic!("{statement:?}")
    };
    assert_eq!(insert.device, "root.sg.d1");
    assert_eq!(insert.measurements, ["s1", "s2", "s3", "s4"]);
    assert_eq!(
        insert.rows,
        vec![
            InsertRow {
                timestamp: 1,
                values: vec![
                    Literal::Float(1.5),
                    Literal::Integer(2),
                    Literal::Text("a'b".into()),
                    Literal::Boolean(true)
                ]
            },
            InsertRow {
                timestamp: -2,
                values: vec![
                    Literal::Float(-300.0),
                    Literal::Null,
                    Literal::Text("q".into()),
                    Literal::Boolean(false)
                ]
            },
            InsertRow {
                timestamp: 3,
                values: vec![
                    Literal::Integer(4),
                    Literal::Integer(i64::MIN),
                    Literal::Text(String::new()),
                    Literal::Null
                ]
            },
        ]
    );
}

#[test]
fn insert_time_column_may_be_timestamp_and_anywhere() {
    let Statement::Insert(insert) = one("insert into root.sg.d1(s1, TIMESTAMP) values(1.5, 7)")
    else {
        panic!()
    };
    assert_eq!(insert.measurements, ["s1"]);
    assert_eq!(
        insert.rows,
        vec![InsertRow {
            timestamp: 7,
            values: vec![Literal::Float(1.5)]
        }]
    );
}

#[test]
fn select_forms() {
    assert_eq!(
        one("SELECT s1, s2 FROM root.sg.d1 WHERE time >= 0 AND time < 100"),
        Statement::Select {
            from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
            measurements: names(&["s1", "s2"]),
            range: range(0, 100),
            filter: None,
            rows: RowWindow::default(),
            fill: None,
            align_by_device: false,
        }
    );
    assert_eq!(
        one("select * from root.sg.d1"),
        Statement::Select {
            from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
            measurements: Projection::All,
            range: TimeRange::ALL,
            filter: None,
            rows: RowWindow::default(),
            fill: None,
            align_by_device: false,
        }
    );
    assert_eq!(
        one("SELECT s1 FROM root.sg.d1 WHERE TIME > 5 and time <= 10 AND timestamp >= 7"),
        Statement::Select {
            from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
            measurements: names(&["s1"]),
            range: range(7, 11),
            filter: None,
            rows: RowWindow::default(),
            fill: None,
            align_by_device: false,
        }
    );
    assert_eq!(
        one("SELECT s1 FROM root.sg.d1 WHERE time = -3"),
        Statement::Select {
            from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
            measurements: names(&["s1"]),
            range: range(-3, -2),
            filter: None,
            rows: RowWindow::default(),
            fill: None,
            align_by_device: false,
        }
    );
    // A contradiction is an empty range, not an error.
    assert_eq!(
        one("SELECT s1 FROM root.sg.d1 WHERE time > 9223372036854775807"),
        Statement::Select {
            from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
            measurements: names(&["s1"]),
            range: range(i64::MAX, i64::MAX),
            filter: None,
            rows: RowWindow::default(),
            fill: None,
            align_by_device: false,
        }
    );
}

#[test]
fn order_by_time_limit_and_offset() {
    let rows = |text: &str| match one(text) {
        Statement::Select { rows, .. } => rows,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        rows("SELECT s1 FROM root.sg.d1 ORDER BY TIME DESC LIMIT 10 OFFSET 5"),
        RowWindow {
            descending: true,
            offset: 5,
            limit: Some(10),
            ..RowWindow::default()
        }
    );
    assert_eq!(
        rows("SELECT s1 FROM root.sg.* SLIMIT 2 LIMIT 1 SOFFSET 3"),
        RowWindow {
            limit: Some(1),
            series_limit: Some(2),
            series_offset: 3,
            ..RowWindow::default()
        }
    );
    assert_eq!(
        rows("select * from root.sg.d1 where time < 9 order by timestamp asc offset 2 limit 0"),
        RowWindow {
            descending: false,
            offset: 2,
            limit: Some(0),
            ..RowWindow::default()
        }
    );
    assert_eq!(rows("select s1 from root.sg.d1 limit 1").limit, Some(1));
    assert!(error("SELECT s1 FROM root.sg.d1 LIMIT -1").contains("row count"));
    assert!(error("SELECT s1 FROM root.sg.d1 LIMIT 1 LIMIT 2").contains("LIMIT"));
    for unsupported in [
        "SELECT s1 FROM root.sg.d1 ORDER BY s1",
        "SELECT LAST s1 FROM root.sg.d1 LIMIT 1",
    ] {
        let parsed = parse_script(unsupported, Position::START);
        let e = parsed[0].result.as_ref().unwrap_err();
        assert!(e.unsupported, "{unsupported}: {e:?}");
    }
}

#[test]
fn select_last_and_count() {
    assert_eq!(
        one("SELECT LAST s1, s2 FROM root.sg.d1"),
        Statement::SelectLast {
            from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
            measurements: names(&["s1", "s2"]),
            since: i64::MIN,
        }
    );
    assert_eq!(
        one("select last * from root.sg.d1"),
        Statement::SelectLast {
            from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
            measurements: Projection::All,
            since: i64::MIN,
        }
    );
    // `last` and `count` are also measurement names where no keyword fits.
    assert_eq!(
        one("SELECT last, count FROM root.sg.d1"),
        Statement::Select {
            from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
            measurements: names(&["last", "count"]),
            range: TimeRange::ALL,
            filter: None,
            rows: RowWindow::default(),
            fill: None,
            align_by_device: false,
        }
    );
    let count = |measurement: &str| AggregateItem {
        function: AggregateFunction::Count,
        measurement: measurement.into(),
        by: None,
        count_if: None,
        alias: None,
    };
    assert_eq!(
        one("SELECT COUNT(s1), count(s2) FROM root.sg.d1 WHERE time < 10"),
        Statement::SelectAggregate {
            from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
            items: vec![count("s1"), count("s2")],
            range: range(i64::MIN, 10),
            filter: None,
            group_by: None,
            levels: None,
            tags: None,
            having: None,
            rows: RowWindow::default(),
            fill: None,
            align_by_device: false,
            outputs: None,
        }
    );
    assert_eq!(
        one("SELECT COUNT(*) FROM root.sg.d1"),
        Statement::SelectAggregate {
            from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
            items: vec![count("*")],
            range: TimeRange::ALL,
            filter: None,
            group_by: None,
            levels: None,
            tags: None,
            having: None,
            rows: RowWindow::default(),
            fill: None,
            align_by_device: false,
            outputs: None,
        }
    );
}

#[test]
fn show_statements_any_case() {
    assert_eq!(
        one("SHOW DATABASES"),
        Statement::ShowDatabases { pattern: None }
    );
    assert_eq!(
        one("show databases"),
        Statement::ShowDatabases { pattern: None }
    );
    assert_eq!(one("Show Cluster"), Statement::ShowCluster);
    assert_eq!(one("SHOW REGIONS"), Statement::ShowRegions);
    assert_eq!(one("SHOW LEASES"), Statement::ShowLeases);
    assert_eq!(one("show local lease"), Statement::ShowLocalLease);
    assert_eq!(one("show queries"), Statement::ShowQueries);
    assert_eq!(
        one("kill query '20240102_030405_00007_1'"),
        Statement::KillQuery {
            id: Some("20240102_030405_00007_1".into())
        }
    );
    assert_eq!(one("KILL ALL QUERIES"), Statement::KillQuery { id: None });
    assert_eq!(
        one("SHOW TIMESERIES"),
        Statement::ShowTimeseries { pattern: None }
    );
    for pattern in ["root.sg.**", "root.sg.d1", "root.sg.d1.*", "root.*.d1.s1"] {
        assert_eq!(
            one(&format!("SHOW TIMESERIES {pattern}")),
            Statement::ShowTimeseries {
                pattern: PathPattern::parse(pattern)
            }
        );
    }
    assert_eq!(one("quit"), Statement::Quit);
    assert_eq!(one("EXIT"), Statement::Quit);
}

#[test]
fn several_statements_and_empty_ones() {
    let parsed = parse_script(
        "CREATE DATABASE root.sg;;\nSHOW DATABASES ; select * from root.sg.d1;",
        Position::START,
    );
    let statements: Vec<_> = parsed
        .iter()
        .map(|p| (p.position, p.result.clone().expect("parses")))
        .collect();
    assert_eq!(
        statements,
        vec![
            (
                Position { line: 1, column: 1 },
                Statement::CreateDatabase {
                    database: "root.sg".into()
                }
            ),
            (
                Position { line: 2, column: 1 },
                Statement::ShowDatabases { pattern: None }
            ),
            (
                Position {
                    line: 2,
                    column: 18
                },
                Statement::Select {
                    from: vec![crate::PathPattern::parse("root.sg.d1").unwrap()],
                    measurements: Projection::All,
                    range: TimeRange::ALL,
                    filter: None,
                    rows: RowWindow::default(),
                    fill: None,
                    align_by_device: false,
                }
            ),
        ]
    );
}

#[test]
fn a_semicolon_in_a_string_or_comment_does_not_end_a_statement() {
    let parsed = parse_script(
        "INSERT INTO root.sg.d1(time, s) VALUES (1, 'a;b') -- c;d\n; SHOW CLUSTER",
        Position::START,
    );
    assert_eq!(parsed.len(), 2, "{parsed:?}");
    assert_eq!(parsed[1].result, Ok(Statement::ShowCluster));
    assert_eq!(complete_prefix_bytes("SHOW CLUSTER; SELECT 'x;"), 13);
    assert_eq!(complete_prefix_bytes("SHOW CLUSTER"), 0);
}

#[test]
fn error_positions_name_line_and_column() {
    assert_eq!(
        error("CREATE TIMESERIES root.sg.d1.s1 WITH DATATYP=DOUBLE"),
        "line 1, column 38: expected DATATYPE, found 'DATATYP'"
    );
    assert_eq!(
        error("CREATE TIMESERIES root.sg.d1.s1 WITH DATATYPE=REAL"),
        "line 1, column 47: expected a data type (BOOLEAN, INT32, INT64, FLOAT, DOUBLE, TEXT), found 'REAL'"
    );
    assert_eq!(
        error("SELECT s1 FROM root.sg.d1 WHERE s1 > "),
        "line 1, column 38: expected a measurement, time, a constant or '(', found end of statement"
    );
    assert_eq!(
        error("SELECT s1 FROM root.sg.d1 WHERE root.sg.d1.s1 > 3"),
        "line 1, column 33: expected a measurement of the FROM devices, found 'root.sg.d1.s1': a WHERE clause names measurements, not paths"
    );
    assert_eq!(
        error("SELECT s1\nFROM root.sg.d1\n  WHERE time >"),
        "line 3, column 15: expected a time (an integer in ms, a date-time like 2024-01-01T00:00:00, or now()), found end of statement"
    );
    assert_eq!(
        error("INSERT INTO root.sg.d1(time, s1) VALUES (1, 2, 3)"),
        "line 1, column 48: expected ')': the row has more values than the 2 columns, found '3'"
    );
    assert_eq!(
        error("INSERT INTO root.sg.d1(time, s1, s2) VALUES (1, 2)"),
        "line 1, column 50: expected ',': the row has 2 values for 3 columns, found ')'"
    );
    assert_eq!(
        error("INSERT INTO root.sg.d1(s1, s2) VALUES (1, 2)"),
        "line 1, column 30: expected ',' and a time column (time or timestamp), found ')'"
    );
    assert_eq!(
        error("INSERT INTO root.sg.d1(time, s1, s1) VALUES (1, 2, 3)"),
        "line 1, column 34: measurement 's1' appears twice"
    );
    assert_eq!(
        error("INSERT INTO root.sg.d1(time, s1) VALUES (1.5, 2)"),
        "line 1, column 42: expected a time (an integer in ms, a date-time like 2024-01-01T00:00:00, or now()), found '1.5'"
    );
    assert_eq!(
        error("INSERT INTO root.sg.d1(time, s1) VALUES (1, 99999999999999999999)"),
        "line 1, column 45: number '99999999999999999999' is out of range"
    );
    assert_eq!(
        error("SELEC * FROM root.sg.d1"),
        "line 1, column 1: expected a statement (CREATE, DROP, DELETE, INSERT, SELECT, SET, UNSET, SHOW, COUNT, REMOVE, FLUSH, ALTER, LIST, KILL, EXPLAIN, QUIT), found 'SELEC'"
    );
    assert_eq!(
        error("CREATE DATABASE sg"),
        "line 1, column 17: expected a database path like root.sg, found 'sg'"
    );
    assert_eq!(
        error("DELETE TIMESERIES root.sg.*"),
        "line 1, column 19: expected a series path like root.sg.d1.s1, found 'root.sg.*'"
    );
    assert_eq!(
        error("DELETE FROM root.sg WHERE time < 3"),
        "line 1, column 13: expected a series path or pattern like root.sg.d1.s1 or root.sg.d1.*, found 'root.sg'"
    );
    assert_eq!(
        error("DELETE FROM root.sg.d1.s1 WHERE s1 > 3"),
        "line 1, column 33: expected time (only time bounds are supported), found 's1'"
    );
    assert_eq!(
        error("SHOW DATABASES extra"),
        "line 1, column 16: expected end of statement or a path pattern like root.sg.** or root.sg.d1.*, found 'extra'"
    );
    assert_eq!(
        error("INSERT INTO root.sg.d1(time, s1) VALUES (1, 'open)"),
        "line 1, column 45: unterminated string"
    );
}

#[test]
fn errors_in_later_statements_count_from_the_whole_input() {
    let parsed = parse_script(
        "SHOW CLUSTER; SHOW CLUSTR;\n  CREATE DATABASE root.sg;\nSELECT s1 FROM root.sg.d1 WHERE time >= x",
        Position::START,
    );
    assert_eq!(parsed.len(), 4);
    assert_eq!(parsed[0].result, Ok(Statement::ShowCluster));
    assert_eq!(
        parsed[1].result.clone().map_err(|e| e.to_string()),
        Err("line 1, column 20: expected DATABASES, TIMESERIES, DEVICES, CHILD PATHS, CHILD NODES, CLUSTER, REGIONS, LEASES, LOCAL LEASE or QUERIES, found 'CLUSTR'".into())
    );
    assert_eq!(parsed[2].position, Position { line: 2, column: 3 });
    assert!(parsed[2].result.is_ok());
    assert_eq!(
        parsed[3].result.clone().map_err(|e| e.to_string()),
        Err("line 3, column 41: expected a time (an integer in ms, a date-time like 2024-01-01T00:00:00, or now()), found 'x'".into())
    );
}

#[test]
fn a_base_position_shifts_every_position() {
    let parsed = parse_script("SHOW BOGUS", Position { line: 7, column: 4 });
    assert_eq!(
        parsed[0].result.clone().map_err(|e| e.position),
        Err(Position { line: 7, column: 9 })
    );
}

#[test]
fn a_missing_token_at_the_end_points_at_the_semicolon() {
    assert_eq!(
        error("CREATE DATABASE ;"),
        "line 1, column 17: expected a database path like root.sg, found end of statement"
    );
}

#[test]
fn iotdb_spellings_of_the_client_examples() {
    let one = |text: &str| {
        let parsed = parse_script(text, Position::START);
        assert_eq!(parsed.len(), 1, "{text}");
        parsed[0].result.clone().expect(text)
    };
    assert_eq!(
        one("DELETE DATABASE root.sg"),
        Statement::DropDatabase {
            database: "root.sg".into()
        }
    );
    assert_eq!(one("flush"), Statement::Flush);
    assert_eq!(
        one("show devices root.test.**"),
        Statement::ShowDevices {
            pattern: PathPattern::parse("root.test.**")
        }
    );
    assert_eq!(
        one("SHOW DEVICES"),
        Statement::ShowDevices { pattern: None }
    );
    let Statement::Insert(insert) =
        one("insert into root.sg.d1(timestamp, s_02) aligned values(16, 188)")
    else {
        panic!("an insert");
    };
    assert_eq!(insert.measurements, vec!["s_02".to_string()]);
    assert_eq!(insert.rows[0].timestamp, 16);
}

#[test]
fn user_statements() {
    let one = |text: &str| {
        let parsed = parse_script(text, Position::START);
        assert_eq!(parsed.len(), 1, "{text}");
        parsed[0].result.clone()
    };
    assert_eq!(
        one("CREATE USER ops_1 'pa''ss'"),
        Ok(Statement::CreateUser {
            name: "ops_1".into(),
            password: "pa'ss".into()
        })
    );
    assert_eq!(
        one("drop user ops_1"),
        Ok(Statement::DropUser {
            name: "ops_1".into()
        })
    );
    assert_eq!(
        one("ALTER USER root SET PASSWORD \"n3w\""),
        Ok(Statement::AlterUserPassword {
            name: "root".into(),
            password: "n3w".into()
        })
    );
    assert_eq!(one("LIST USER"), Ok(Statement::ListUsers));
    assert!(
        one("CREATE USER ops secret").is_err(),
        "an unquoted password"
    );
    assert!(one("CREATE USER root.x 'secret'").is_err(), "a dotted name");
}

#[test]
fn each_statement_keeps_its_text() {
    let parsed = parse_script(
        "CREATE DATABASE root.sg ;\n  SELECT s1 FROM root.sg.d1 -- note\n;INSERT INTO root.sg.d1(time, s1) VALUES (1, 'a;b')",
        Position::START,
    );
    let texts: Vec<&str> = parsed.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "CREATE DATABASE root.sg",
            "SELECT s1 FROM root.sg.d1 -- note",
            "INSERT INTO root.sg.d1(time, s1) VALUES (1, 'a;b')"
        ]
    );
}

#[test]
fn from_takes_patterns_and_lists_and_queries_align_by_device() {
    let p = |text: &str| PathPattern::parse(text).unwrap();
    assert_eq!(
        one("SELECT s1 FROM root.sg.*, root.other.d1, ROOT.x.** ALIGN BY DEVICE"),
        Statement::Select {
            from: vec![p("root.sg.*"), p("root.other.d1"), p("root.x.**")],
            measurements: names(&["s1"]),
            range: TimeRange::ALL,
            filter: None,
            rows: RowWindow::default(),
            fill: None,
            align_by_device: true,
        }
    );
    assert_eq!(
        one("select * from root.sg.d1 where time >= 5 limit 3 align by time"),
        Statement::Select {
            from: vec![p("root.sg.d1")],
            measurements: Projection::All,
            range: range(5, i64::MAX),
            filter: None,
            rows: RowWindow {
                limit: Some(3),
                ..RowWindow::default()
            },
            fill: None,
            align_by_device: false,
        }
    );
    assert_eq!(
        one("SELECT LAST s1 FROM root.**.d1 WHERE time > 99"),
        Statement::SelectLast {
            from: vec![p("root.**.d1")],
            measurements: names(&["s1"]),
            since: 100,
        }
    );
    assert!(matches!(
        one("select count(s1) from root.sg.* group by ([0, 10), 5ms) align by device"),
        Statement::SelectAggregate {
            align_by_device: true,
            ref from,
            ..
        } if *from == [p("root.sg.*")]
    ));
    // A FROM path needs a database at least; ALIGN BY takes DEVICE or TIME.
    assert!(error("SELECT s1 FROM root").contains("root.sg.*"));
    assert!(error("SELECT s1 FROM root.sg.d1, ").contains("root.sg.*"));
    assert!(error("SELECT s1 FROM root.sg.d1 ALIGN BY s1").contains("DEVICE or TIME"));
    let e = error("SELECT s1 FROM root.sg.d* ");
    assert!(e.contains("found '*'"), "{e}");
}

#[test]
fn where_splits_time_bounds_from_the_value_filter() {
    use crate::expr::{BinaryOp, Expr};
    let parts = |text: &str| match one(text) {
        Statement::Select { range, filter, .. } => (range, filter),
        Statement::SelectAggregate { range, filter, .. } => (range, filter),
        other => panic!("{text}: {other:?}"),
    };
    let c = |n: &str| Expr::Column(n.into());
    let int = |i: i64| Expr::Literal(Literal::Integer(i));
    // Time conjuncts, either way round and as BETWEEN, become the range; the rest stays.
    assert_eq!(
        parts("SELECT s1 FROM root.sg.d1 WHERE time >= 10 AND s1 > 5 AND 20 > time"),
        (
            range(10, 20),
            Some(Expr::binary(BinaryOp::Gt, c("s1"), int(5)))
        )
    );
    assert_eq!(
        parts("SELECT count(s1) FROM root.sg.d1 WHERE time BETWEEN 1 AND 3"),
        (range(1, 4), None)
    );
    // Under OR or NOT a time comparison is a filter like any other.
    let (r, f) = parts("SELECT s1 FROM root.sg.d1 WHERE time > 0 OR time < -5");
    assert_eq!(r, TimeRange::ALL);
    assert!(
        matches!(
            f,
            Some(Expr::Binary {
                op: BinaryOp::Or,
                ..
            })
        ),
        "{f:?}"
    );
    // Precedence: NOT over AND over OR; * over +; a negative number is a constant.
    let (_, f) = parts("SELECT s1 FROM root.sg.d1 WHERE NOT a = 1 AND b > -2 OR c + 2 * 3 < 9");
    let expected = Expr::binary(
        BinaryOp::Or,
        Expr::binary(
            BinaryOp::And,
            Expr::Not(Box::new(Expr::binary(BinaryOp::Eq, c("a"), int(1)))),
            Expr::binary(BinaryOp::Gt, c("b"), int(-2)),
        ),
        Expr::binary(
            BinaryOp::Lt,
            Expr::binary(
                BinaryOp::Add,
                c("c"),
                Expr::binary(BinaryOp::Mul, int(2), int(3)),
            ),
            int(9),
        ),
    );
    assert_eq!(f, Some(expected));
    // The predicates, and a time compared with a date-time.
    for text in [
        "s1 IN (1, 2.5, 3)",
        "s1 NOT IN (1)",
        "s1 IS NULL AND s2 IS NOT NULL",
        "s1 NOT BETWEEN 1 AND 2",
        "t LIKE 'a%' OR t NOT REGEXP '^b'",
        "s1 != 3 AND s1 <> 4 AND s1 / 2 % 3 = 1",
        "(s1 > 1 OR s2 > 1) AND time > 2024-01-01",
    ] {
        let (_, f) = parts(&format!("SELECT s1 FROM root.sg.d1 WHERE {text}"));
        assert!(f.is_some(), "{text}");
    }
    assert!(error("SELECT s1 FROM root.sg.d1 WHERE t REGEXP '('").contains("regular expression"));
    assert!(error("SELECT s1 FROM root.sg.d1 WHERE count(s1) > 1").contains("belongs in HAVING"));
    assert!(error("SELECT count(s1) FROM root.sg.d1 HAVING s1 > 1").contains("count(s1)"));
    assert!(error("SELECT count(s1) FROM root.sg.d1 HAVING cos(s1) > 1").contains("COS"));
    assert!(error("SELECT s1 FROM root.sg.d1 WHERE s1 NOT 3").contains("BETWEEN, IN, LIKE"));
}

#[test]
fn iotdb_syntax_not_run_yet_is_unsupported_not_malformed() {
    let error = |text: &str| {
        let parsed = parse_script(text, Position::START);
        parsed[0].result.clone().expect_err(text)
    };
    for (text, names) in [
        (
            "SELECT count_time(*) FROM root.sg.d1",
            "the aggregation COUNT_TIME",
        ),
        (
            "SELECT * FROM root.sg.d1 ORDER BY s1 DESC",
            "ORDER BY anything but TIME",
        ),
        (
            "SELECT LAST * FROM root.sg.d1 LIMIT 10",
            "LIMIT on a LAST query",
        ),
        (
            "SELECT LAST s1 FROM root.sg.d1 WHERE time < 10",
            "an upper time bound in a LAST query",
        ),
        ("USE db1", "USE is a table-model statement"),
        (
            "CREATE TABLE t (a STRING TAG)",
            "CREATE TABLE is a table-model statement",
        ),
        ("SHOW TABLES", "SHOW TABLES is a table-model statement"),
        ("DESC t", "DESC is a table-model statement"),
    ] {
        let e = error(text);
        assert!(e.unsupported, "{text}: {e}");
        assert!(e.message.starts_with(names), "{text}: {e}");
    }
    // Still syntax errors, and still fine.
    assert!(!error("SELEC s1 FROM root.sg.d1").unsupported);
    let fine = parse_script(
        "SELECT s1 FROM root.sg.d1 WHERE time >= 1 AND time < 5",
        Position::START,
    );
    assert!(fine[0].result.is_ok());
    let last = parse_script("SELECT last FROM root.sg.d1", Position::START);
    assert!(last[0].result.is_ok(), "a measurement named last");
}
