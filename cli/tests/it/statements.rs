//! Every statement in both output formats, errors, `-f`, the REPL and `verify`, against ONE
//! cluster (3 DataNodes, replication 3): clusters are slow to start on a small machine, so the
//! steps run in order inside one test and each names itself in its assertion messages.

use serde_json::{json, Value};

use crate::harness::{fencepost, rows, sql, status, Run};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_statement_against_one_cluster() {
    let cluster = testkit::Cluster::start(3, 3, testkit::LONG_FENCE_MS).await;
    let endpoints = cluster.endpoints().join(",");
    let e = endpoints.as_str();

    databases(e).await;
    create_and_show_timeseries(e).await;
    insert_and_select(e).await;
    select_last_and_count(e).await;
    ttl(e).await;
    wrong_type_writes_nothing(e).await;
    parse_errors_name_their_position(e).await;
    delete_timeseries(e).await;
    cluster_views(e, &cluster.endpoints()[0]).await;
    script_file(e).await;
    repl_over_piped_stdin(e).await;
    verify_healthy_cluster(e).await;
    results_come_a_page_at_a_time(e).await;
    drop_database(e).await;

    cluster.stop().await;
}

/// Runs `statements` with `--json`, expecting exit status `code`, and returns the objects.
async fn json(e: &str, statements: &str, code: i32) -> Vec<Value> {
    sql(e, true, statements).await.assert_exit(code).json()
}

/// Runs `statements` as boxed tables, expecting exit status `code`.
async fn table(e: &str, statements: &str, code: i32) -> Run {
    let run = sql(e, false, statements).await;
    run.assert_exit(code);
    run
}

fn non_query(object: &Value) {
    assert_eq!(
        object,
        &json!({
            "status": 200,
            "message": "The statement is executed successfully.",
            "columns": [],
            "rows": [],
        })
    );
}

async fn databases(e: &str) {
    let objects = json(e, "CREATE DATABASE root.sg; show databases;", 0).await;
    assert_eq!(objects.len(), 2, "{objects:?}");
    non_query(&objects[0]);
    assert_eq!(
        objects[1]["columns"],
        json!([
            "Database",
            "SchemaReplicationFactor",
            "DataReplicationFactor",
            "TimePartitionOrigin",
            "TimePartitionInterval",
            "TTL"
        ])
    );
    // One ConfigNode, replication 3, partitions of testkit's 1 s from 0.
    assert!(
        rows(&objects[1]).contains(&json!(["root.sg", 1, 3, 0, 1000, "INF"])),
        "{objects:?}"
    );

    let run = table(e, "create database root.other", 0).await;
    assert_eq!(run.stdout, "Msg: The statement is executed successfully.\n");
    let run = table(e, "SHOW DATABASES", 0).await;
    assert_eq!(
        run.stdout,
        "+----------+-----------------------+---------------------+-------------------+---------------------+---+\n\
         |  Database|SchemaReplicationFactor|DataReplicationFactor|TimePartitionOrigin|TimePartitionInterval|TTL|\n\
         +----------+-----------------------+---------------------+-------------------+---------------------+---+\n\
         |root.other|                      1|                    3|                  0|                 1000|INF|\n\
         |   root.sg|                      1|                    3|                  0|                 1000|INF|\n\
         +----------+-----------------------+---------------------+-------------------+---------------------+---+\n\
         Total line number = 2\n"
    );
}

async fn create_and_show_timeseries(e: &str) {
    let objects = json(
        e,
        "CREATE TIMESERIES root.sg.d1.s1 WITH DATATYPE=INT64, ENCODING=RLE, COMPRESSOR=LZ4;
         SHOW TIMESERIES root.sg.**",
        0,
    )
    .await;
    non_query(&objects[0]);
    assert_eq!(
        objects[1]["columns"],
        json!([
            "Timeseries",
            "Alias",
            "Database",
            "DataType",
            "Encoding",
            "Compression",
            "Tags",
            "Attributes",
            "Deadband",
            "DeadbandParameters",
            "ViewType"
        ])
    );
    assert_eq!(
        rows(&objects[1]),
        vec![json!([
            "root.sg.d1.s1",
            null,
            "root.sg",
            "INT64",
            "RLE",
            "LZ4",
            null,
            null,
            null,
            null,
            "BASE"
        ])]
    );
    // Names the type does not take, and unknown compressors, are refused (700).
    for bad in [
        "CREATE TIMESERIES root.sg.d1.s9 TEXT ENCODING=GORILLA",
        "CREATE TIMESERIES root.sg.d1.s9 INT64 COMPRESSOR=BROTLI",
        "CREATE TIMESERIES root.sg.d1.s9 INT64 ENCODING=NOPE",
    ] {
        let objects = json(e, bad, 1).await;
        assert_eq!(status(&objects[0]), 700, "{bad}: {objects:?}");
    }
    let run = table(e, "show timeseries root.sg.d1", 0).await;
    assert!(
        run.stdout
            .contains("|root.sg.d1.s1| null| root.sg|   INT64|"),
        "{run:?}"
    );
}

/// A result of 2,500 rows comes in pages of 1,000 rows from the DataNode and is shown as tables
/// of `--max-display` rows; JSON gathers it into one object.
async fn results_come_a_page_at_a_time(e: &str) {
    let values: Vec<String> = (0..2500).map(|t| format!("({t}, {t})")).collect();
    let insert = format!(
        "INSERT INTO root.sg.paged(time, n) VALUES {}",
        values.join(", ")
    );
    non_query(&json(e, &insert, 0).await[0]);
    let objects = json(e, "SELECT n FROM root.sg.paged", 0).await;
    let rows = rows(&objects[0]);
    assert_eq!(rows.len(), 2500, "paged: every row in one JSON object");
    assert_eq!(
        (&rows[0], &rows[2499]),
        (&json!([0, 0.0]), &json!([2499, 2499.0]))
    );
    let run = fencepost(
        &[
            "--endpoints",
            e,
            "--max-display",
            "1200",
            "-e",
            "SELECT n FROM root.sg.paged",
        ],
        None,
    )
    .await;
    run.assert_exit(0);
    let headers = run.stdout.matches("|Time|root.sg.paged.n|").count();
    assert_eq!(
        headers, 3,
        "paged: tables of 1200, 1200 and 100 rows\n{}",
        run.stdout
    );
    assert!(
        run.stdout.ends_with("Total line number = 2500\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("|2499|         2499.0|"),
        "{}",
        run.stdout
    );
    let run = table(e, "SELECT n FROM root.sg.paged WHERE time < 0", 0).await;
    assert!(
        run.stdout.ends_with("Empty set.\nTotal line number = 0\n"),
        "{}",
        run.stdout
    );
    non_query(&json(e, "DELETE TIMESERIES root.sg.paged.n", 0).await[0]);
}

async fn insert_and_select(e: &str) {
    let objects = json(
        e,
        "INSERT INTO root.sg.d1(time, s1, s2, s3, s4) VALUES \
         (1, 10, 1.5, true, 'a'), (2, 20, NULL, false, \"b\"), (3, 30, 3.5e0, NULL, NULL)",
        0,
    )
    .await;
    non_query(&objects[0]);
    // The existing s1 keeps INT64; the new series are inferred.
    let objects = json(e, "SHOW TIMESERIES root.sg.d1", 0).await;
    let mut types: Vec<(String, String)> = rows(&objects[0])
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap().to_string(),
                r[3].as_str().unwrap().to_string(),
            )
        })
        .collect();
    types.sort();
    let expected: Vec<(String, String)> = [
        ("root.sg.d1.s1", "INT64"),
        ("root.sg.d1.s2", "DOUBLE"),
        ("root.sg.d1.s3", "BOOLEAN"),
        ("root.sg.d1.s4", "TEXT"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(types, expected);

    let objects = json(
        e,
        "SELECT s1, s2, s3, s4 FROM root.sg.d1 WHERE time >= 1 AND time < 3",
        0,
    )
    .await;
    assert_eq!(
        objects[0]["columns"],
        json!([
            "Time",
            "root.sg.d1.s1",
            "root.sg.d1.s2",
            "root.sg.d1.s3",
            "root.sg.d1.s4"
        ])
    );
    assert_eq!(
        rows(&objects[0]),
        vec![
            json!([1, 10, 1.5, true, "a"]),
            json!([2, 20, null, false, "b"])
        ]
    );
    // Outer join: a time appears when any selected series has a point there.
    let objects = json(e, "select s2, s3 from root.sg.d1", 0).await;
    assert_eq!(
        rows(&objects[0]),
        vec![
            json!([1, 1.5, true]),
            json!([2, null, false]),
            json!([3, 3.5, null])
        ]
    );
    let objects = json(e, "SELECT * FROM root.sg.d1 WHERE time > 2", 0).await;
    let columns = objects[0]["columns"].as_array().unwrap().clone();
    assert_eq!(columns.len(), 5, "{objects:?}");
    assert_eq!(rows(&objects[0]).len(), 1);
    let objects = json(e, "SELECT s1 FROM root.sg.d1 WHERE time <= 0", 0).await;
    assert_eq!(rows(&objects[0]), Vec::<Value>::new());

    let run = table(e, "SELECT s1, s2 FROM root.sg.d1 WHERE time = 2", 0).await;
    assert!(
        run.stdout.contains("|Time|root.sg.d1.s1|root.sg.d1.s2|"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("|   2|           20|         null|"),
        "{run:?}"
    );
    assert!(run.stdout.ends_with("Total line number = 1\n"), "{run:?}");
    let run = table(e, "SELECT s1 FROM root.sg.d1 WHERE time >= 100", 0).await;
    assert!(run.stdout.contains("|Time|root.sg.d1.s1|"), "{run:?}");
    assert!(run.stdout.contains("Empty set."), "{run:?}");
}

async fn select_last_and_count(e: &str) {
    let objects = json(e, "SELECT LAST s1, s4 FROM root.sg.d1", 0).await;
    assert_eq!(
        objects[0]["columns"],
        json!(["Time", "Timeseries", "Value", "DataType"])
    );
    assert_eq!(
        rows(&objects[0]),
        vec![
            json!([3, "root.sg.d1.s1", "30", "INT64"]),
            json!([2, "root.sg.d1.s4", "b", "TEXT"])
        ]
    );
    let objects = json(e, "select last * from root.sg.d1", 0).await;
    assert_eq!(rows(&objects[0]).len(), 4, "{objects:?}");
    let run = table(e, "SELECT LAST s2 FROM root.sg.d1", 0).await;
    assert!(
        run.stdout.contains("|root.sg.d1.s2|  3.5|  DOUBLE|"),
        "{run:?}"
    );

    let objects = json(
        e,
        "SELECT COUNT(s1), COUNT(s2) FROM root.sg.d1 WHERE time > 1",
        0,
    )
    .await;
    assert_eq!(
        objects[0]["columns"],
        json!(["count(root.sg.d1.s1)", "count(root.sg.d1.s2)"])
    );
    assert_eq!(rows(&objects[0]), vec![json!([2, 1])]);
    let objects = json(e, "SELECT COUNT(*) FROM root.sg.d1", 0).await;
    assert_eq!(rows(&objects[0])[0].as_array().unwrap().len(), 4);
    let run = table(e, "select count(s3) from root.sg.d1", 0).await;
    assert!(run.stdout.contains("|count(root.sg.d1.s3)|"), "{run:?}");
    assert!(run.stdout.contains(&format!("|{:>20}|", 2)), "{run:?}");

    // Aggregations in GROUP BY windows, computed where the data is (s1: 10, 20, 30 at 1, 2, 3).
    let objects = json(
        e,
        "SELECT avg(s1), max_value(s1), min_time(s1), count(s2) FROM root.sg.d1 \
         GROUP BY ([0, 6), 2ms)",
        0,
    )
    .await;
    assert_eq!(
        objects[0]["columns"],
        json!([
            "Time",
            "avg(root.sg.d1.s1)",
            "max_value(root.sg.d1.s1)",
            "min_time(root.sg.d1.s1)",
            "count(root.sg.d1.s2)"
        ])
    );
    assert_eq!(
        rows(&objects[0]),
        vec![
            json!([0, 10.0, 10, 1, 1]),
            json!([2, 25.0, 30, 2, 1]),
            json!([4, null, null, null, 0])
        ],
        "{objects:?}"
    );
    let objects = json(
        e,
        "SELECT sum(s1), extreme(s2) FROM root.sg.d1 WHERE time >= 2",
        0,
    )
    .await;
    assert_eq!(rows(&objects[0]), vec![json!([50.0, 3.5])], "{objects:?}");
}

/// SET TTL hides points older than now - ttl from SELECT and SELECT LAST at once, SHOW
/// DATABASES shows it, UNSET TTL (either spelling) brings the points back, and a TTL that is
/// not positive or a missing database is refused with the statuses CREATE / DROP use.
async fn ttl(e: &str) {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let objects = json(
        e,
        &format!(
            "CREATE DATABASE root.ttl; \
             INSERT INTO root.ttl.d1(time, s1) VALUES (1000, 1), ({now_ms}, 2); \
             SET TTL TO root.ttl 3600000; \
             SELECT s1 FROM root.ttl.d1; SELECT LAST s1 FROM root.ttl.d1; \
             SELECT COUNT(s1) FROM root.ttl.d1; SHOW DATABASES"
        ),
        0,
    )
    .await;
    assert_eq!(objects.len(), 7, "{objects:?}");
    non_query(&objects[2]);
    assert_eq!(rows(&objects[3]), vec![json!([now_ms, 2.0])], "{objects:?}");
    assert_eq!(
        rows(&objects[4]),
        vec![json!([now_ms, "root.ttl.d1.s1", "2.0", "DOUBLE"])],
        "{objects:?}"
    );
    assert_eq!(rows(&objects[5]), vec![json!([1])], "{objects:?}");
    assert!(
        rows(&objects[6]).contains(&json!(["root.ttl", 1, 3, 0, 1000, "3600000"])),
        "{objects:?}"
    );
    // A TTL shorter than the fresh point's age hides it too: LAST finds nothing.
    let objects = json(
        e,
        "SET TTL TO root.ttl 1; SELECT LAST s1 FROM root.ttl.d1; \
         UNSET TTL FROM root.ttl; SELECT s1 FROM root.ttl.d1; SHOW DATABASES",
        0,
    )
    .await;
    assert!(rows(&objects[1]).is_empty(), "{objects:?}");
    assert_eq!(
        rows(&objects[3]),
        vec![json!([1000, 1.0]), json!([now_ms, 2.0])],
        "{objects:?}"
    );
    assert!(
        rows(&objects[4]).contains(&json!(["root.ttl", 1, 3, 0, 1000, "INF"])),
        "{objects:?}"
    );
    let objects = json(e, "SET TTL TO root.ttl 0", 1).await;
    assert_eq!(status(&objects[0]), 700, "{objects:?}");
    let objects = json(e, "SET TTL TO root.ttl -1", 1).await;
    assert_eq!(status(&objects[0]), 700, "{objects:?}");
    let objects = json(
        e,
        "SET TTL TO root.nowhere 10; UNSET TTL TO root.nowhere",
        1,
    )
    .await;
    assert_eq!(status(&objects[0]), 507, "{objects:?}");
    let objects = json(e, "UNSET TTL TO root.ttl; DROP DATABASE root.ttl", 0).await;
    non_query(&objects[0]);
    non_query(&objects[1]);
}

/// A value of the wrong type for an existing series answers 614, writes nothing (not even the
/// other columns of the same statement), and the next statements still run.
async fn wrong_type_writes_nothing(e: &str) {
    let objects = json(
        e,
        "INSERT INTO root.sg.d1(time, s2, s1) VALUES (10, 1.0, 'text'), (11, 2.0, 'more');
         SELECT COUNT(s1), COUNT(s2) FROM root.sg.d1 WHERE time >= 10",
        1,
    )
    .await;
    assert_eq!(objects.len(), 2, "{objects:?}");
    assert_eq!(status(&objects[0]), 614, "{objects:?}");
    assert_eq!(objects[0]["columns"], json!([]));
    assert_eq!(rows(&objects[1]), vec![json!([0, 0])]);

    let run = table(e, "INSERT INTO root.sg.d1(time, s3) VALUES (12, 7)", 1).await;
    assert!(run.stderr.starts_with("Msg: 614: "), "{run:?}");
    let objects = json(e, "SELECT COUNT(s3) FROM root.sg.d1 WHERE time >= 10", 0).await;
    assert_eq!(rows(&objects[0]), vec![json!([0])]);
}

async fn parse_errors_name_their_position(e: &str) {
    let objects = json(
        e,
        "SHOW DATABASES; CREATE TIMESERIES root.sg.d1.s9 WITH DATATYP=DOUBLE; SHOW DATABASES",
        1,
    )
    .await;
    assert_eq!(objects.len(), 3, "{objects:?}");
    assert_eq!(status(&objects[0]), 200);
    assert_eq!(
        objects[1],
        json!({
            "status": 700,
            "message": "line 1, column 54: expected DATATYPE, found 'DATATYP'",
            "columns": [],
            "rows": [],
        })
    );
    assert_eq!(
        status(&objects[2]),
        200,
        "statements after a failure still run"
    );

    let run = table(
        e,
        "SHOW DATABASES;\nSELECT count_time(*) FROM root.sg.d1",
        1,
    )
    .await;
    assert!(run.stdout.contains("|  Database|"), "{run:?}");
    assert_eq!(
        run.stderr,
        "Msg: 300: line 2, column 8: the aggregation COUNT_TIME is not supported yet; Fencepost runs raw, LAST \
         and aggregate queries (FROM patterns, WHERE filters, GROUP BY time windows, ALIGN BY \
         DEVICE) and the tree model's statements\n"
    );
    let objects = json(e, "INSERT INTO root.sg.d1(time, s1) VALUES (1, 'open)", 1).await;
    assert_eq!(
        objects[0]["message"],
        json!("line 1, column 45: unterminated string")
    );
}

async fn delete_timeseries(e: &str) {
    let objects = json(
        e,
        "DELETE TIMESERIES root.sg.d1.s4; SHOW TIMESERIES root.sg.d1.s4; SELECT LAST s4 FROM root.sg.d1",
        0,
    )
    .await;
    non_query(&objects[0]);
    assert_eq!(rows(&objects[1]), Vec::<Value>::new());
    assert_eq!(rows(&objects[2]), Vec::<Value>::new());
    let run = table(e, "SHOW TIMESERIES root.sg.d1.s4", 0).await;
    assert!(run.stdout.contains("Empty set."), "{run:?}");
}

async fn cluster_views(e: &str, first_endpoint: &str) {
    let objects = json(e, "SHOW CLUSTER", 0).await;
    let cluster = rows(&objects[0]);
    let kinds: Vec<&str> = cluster.iter().map(|r| r[1].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["ConfigNode", "DataNode", "DataNode", "DataNode"],
        "{objects:?}"
    );
    let run = table(e, "show cluster", 0).await;
    assert!(run.stdout.contains("|NodeID|"), "{run:?}");
    assert!(run.stdout.contains("Total line number = 4"), "{run:?}");

    let objects = json(e, "SHOW REGIONS", 0).await;
    assert_eq!(
        objects[0]["columns"],
        json!(["RegionId", "Type", "Database", "DataNodeId", "Role"])
    );
    let replicas = rows(&objects[0]);
    assert!(!replicas.is_empty(), "the inserts created regions");
    assert_eq!(
        replicas.len() % 3,
        0,
        "three replicas per region: {replicas:?}"
    );
    assert!(
        replicas.iter().all(|r| r[2] == json!("root.sg")),
        "{replicas:?}"
    );

    // The ConfigNode's view: every DataNode holds its lease (it may take a heartbeat to say so).
    testkit::wait_for("SHOW LEASES lists three live leases", || async {
        let objects = json(e, "SHOW LEASES", 0).await;
        let leases = rows(&objects[0]);
        leases.len() == 3
            && leases
                .iter()
                .all(|l| l[3] == json!(true) && l[4] == json!(false))
    })
    .await;
    let run = table(e, "SHOW LEASES", 0).await;
    assert!(run.stdout.contains("|HoldsLease|"), "{run:?}");

    let objects = json(e, "SHOW LOCAL LEASE", 0).await;
    assert_eq!(
        objects[0]["columns"],
        json!([
            "DataNodeId",
            "Endpoint",
            "State",
            "Fenced",
            "Incarnation",
            "HeartbeatAgeMs",
            "FenceMs"
        ])
    );
    let lease = rows(&objects[0]);
    assert_eq!(lease.len(), 1);
    assert_eq!(
        lease[0][1],
        json!(first_endpoint),
        "the session talks to the first endpoint"
    );
    assert_eq!(lease[0][3], json!(false));
    assert_eq!(lease[0][6], json!(testkit::LONG_FENCE_MS));
    let run = table(e, "show local lease", 0).await;
    assert!(run.stdout.contains(first_endpoint), "{run:?}");
}

async fn script_file(e: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("script.sql");
    std::fs::write(
        &path,
        "-- a script\nINSERT INTO root.sg.d2(time, v)\n  VALUES (1, 1), (2, 2);\n\
         SELECT COUNT(v) FROM root.sg.d2;\nSELECT v FROM root.sg.d2 WHERE time >= 2;\n",
    )
    .expect("write the script");
    let path = path.to_str().expect("UTF-8 path");
    let run = fencepost(&["--endpoints", e, "--json", "-f", path], None).await;
    let objects = run.assert_exit(0).json();
    assert_eq!(objects.len(), 3, "{run:?}");
    non_query(&objects[0]);
    assert_eq!(rows(&objects[1]), vec![json!([2])]);
    assert_eq!(rows(&objects[2]), vec![json!([2, 2.0])]);

    std::fs::write(
        dir.path().join("bad.sql"),
        "SHOW DATABASES;\n\nSHOW NOTHING;\n",
    )
    .expect("write the script");
    let bad = dir.path().join("bad.sql");
    let run = fencepost(&["--endpoints", e, "-f", bad.to_str().unwrap()], None).await;
    run.assert_exit(1);
    assert!(
        run.stderr
            .starts_with("Msg: 700: line 3, column 6: expected DATABASES"),
        "{run:?}"
    );
}

async fn repl_over_piped_stdin(e: &str) {
    let input = "SHOW DATABASES;\nSELECT v\n  FROM root.sg.d2\n  WHERE time < 2;\n  SHOW BOGUS;\nquit\nSHOW CLUSTER;\n";
    let run = fencepost(&["--endpoints", e, "--json"], Some(input)).await;
    let objects = run.assert_exit(1).json();
    assert_eq!(objects.len(), 3, "nothing runs after quit: {run:?}");
    assert!(rows(&objects[0]).contains(&json!(["root.sg", 1, 3, 0, 1000, "INF"])));
    assert_eq!(rows(&objects[1]), vec![json!([1, 1.0])]);
    assert_eq!(
        objects[2]["message"],
        json!("line 5, column 8: expected DATABASES, TIMESERIES, DEVICES, CHILD PATHS, CHILD NODES, CLUSTER, REGIONS, LEASES, LOCAL LEASE or QUERIES, found 'BOGUS'")
    );

    // No prompt when stdin is not a terminal; a last statement without `;` still runs.
    let run = fencepost(
        &["--endpoints", e],
        Some("select count(v)\nfrom root.sg.d2"),
    )
    .await;
    run.assert_exit(0);
    assert!(!run.stdout.contains("fencepost>"), "{run:?}");
    assert!(run.stdout.contains("|count(root.sg.d2.v)|"), "{run:?}");
    let run = fencepost(&["--endpoints", e], Some("exit;\nSHOW DATABASES;\n")).await;
    run.assert_exit(0);
    assert_eq!(run.stdout, "");
}

async fn verify_healthy_cluster(e: &str) {
    let run = fencepost(
        &["--endpoints", e, "--json", "verify", "--timeout-s", "60"],
        None,
    )
    .await;
    let report = run.assert_exit(0).one();
    assert_eq!(report["status"], json!(200), "{report}");
    assert_eq!(report["mismatches"], json!(0), "{report}");
    let regions = report["regions"].as_array().expect("regions").clone();
    assert!(!regions.is_empty(), "{report}");
    for region in &regions {
        assert_eq!(region["verdict"], json!("OK"), "{report}");
        assert_eq!(region["replicas"].as_array().unwrap().len(), 3, "{report}");
        assert_eq!(region["digests"].as_array().unwrap().len(), 1, "{report}");
        assert!(region["applied_index"].as_u64().is_some(), "{report}");
    }
    let run = fencepost(&["--endpoints", e, "verify"], None).await;
    run.assert_exit(0);
    assert!(run.stdout.contains("|RegionId|"), "{run:?}");
    assert!(run.stdout.contains("|     OK|"), "{run:?}");
    assert!(run.stdout.contains("0 mismatches"), "{run:?}");
}

async fn drop_database(e: &str) {
    let objects = json(e, "DROP DATABASE root.other; SHOW DATABASES", 0).await;
    non_query(&objects[0]);
    let databases: Vec<Value> = rows(&objects[1]).iter().map(|r| r[0].clone()).collect();
    assert!(databases.contains(&json!("root.sg")), "{objects:?}");
    assert!(!databases.contains(&json!("root.other")), "{objects:?}");
}
