//! The table model through the session (`insert_table_tablet`, `execute_table_statement`)
//! against a real in-process cluster, and the fence of DROP TABLE for table writes in flight
//! (issue 38, REVIEW N1).

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::table::Category;
use common::{DataType, Tablet, Value};
use session::{Session, SessionConfig};

use testkit::{Cluster, LONG_FENCE_MS};

async fn connect(endpoints: &[String]) -> Session {
    let endpoints: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    let config = SessionConfig {
        max_attempts: 3,
        retry_interval_ms: 100,
        request_timeout_ms: 20_000,
        ..SessionConfig::default()
    };
    Session::connect(&endpoints, config)
        .await
        .expect("session connects")
}

const CATEGORIES: [Category; 2] = [Category::Tag, Category::Field];

/// A table tablet of `t` with one row for each of `ids` (tag values), at time `at`.
fn rows(table: &str, ids: impl Iterator<Item = String>, at: i64) -> Tablet {
    let mut t = Tablet::new(table, &[("id", DataType::String), ("v", DataType::Double)]);
    for id in ids {
        t.push_row(at, vec![Some(Value::String(id)), Some(Value::Double(1.0))]);
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn table_tablets_and_statements_go_through_the_session() {
    let cluster = Cluster::start(3, 1, LONG_FENCE_MS).await;
    let s = connect(&cluster.endpoints()).await;
    s.execute_table_statement(None, "CREATE DATABASE db")
        .await
        .unwrap();
    s.insert_table_tablet(
        "db",
        &rows("t", ["a", "b"].map(String::from).into_iter(), 5),
        &CATEGORIES,
    )
    .await
    .unwrap();
    let all = s
        .execute_table_statement(Some("db"), "SELECT id, v FROM t ORDER BY time")
        .await
        .unwrap();
    assert_eq!(all.rows.len(), 2, "{all:?}");
    // The categories must match the columns.
    assert!(s
        .insert_table_tablet("db", &rows("t", std::iter::empty(), 5), &CATEGORIES[..1])
        .await
        .is_err());
    s.execute_table_statement(Some("db"), "DROP TABLE t")
        .await
        .unwrap();
    assert!(s
        .execute_table_statement(Some("db"), "SELECT * FROM t")
        .await
        .is_err());
    cluster.stop().await;
}

/// One table write of thousands of new devices through one DataNode, and DROP TABLE through
/// another while it runs: once the drop is acknowledged, no device of the dropped table is
/// created and the write is not acknowledged unless it created the table again itself. Before
/// the fix the write went on creating devices of the dropped table and was acknowledged, and
/// its devices outlived the drop under the table's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_table_write_in_flight_creates_nothing_after_drop_table() {
    let cluster = Cluster::start(3, 1, LONG_FENCE_MS).await;
    let endpoints = cluster.endpoints();
    let writer = Arc::new(connect(&endpoints[..1]).await);
    let dropper = connect(&endpoints[1..2]).await;
    dropper
        .execute_table_statement(None, "CREATE DATABASE db")
        .await
        .unwrap();
    writer
        .insert_table_tablet(
            "db",
            &rows("t", std::iter::once("seed".into()), 1),
            &CATEGORIES,
        )
        .await
        .unwrap();
    let big = rows("t", (0..4000).map(|i| format!("n{i}")), 2);
    let write = {
        let writer = writer.clone();
        tokio::spawn(async move {
            let outcome = writer.insert_table_tablet("db", &big, &CATEGORIES).await;
            (outcome, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    dropper
        .execute_table_statement(Some("db"), "DROP TABLE t")
        .await
        .unwrap();
    let dropped = Instant::now();
    let (outcome, answered) = write.await.unwrap();
    let exists = !dropper
        .execute_table_statement(Some("db"), "SHOW TABLES")
        .await
        .unwrap()
        .rows
        .is_empty();
    let series = dropper.show_timeseries("root.db.t").await.unwrap();
    eprintln!(
        "the write: {outcome:?}, answered {:?} after the drop; table exists: {exists}; {} series",
        answered.saturating_duration_since(dropped),
        series.len()
    );
    if !exists {
        assert!(
            series.is_empty(),
            "{} series under the dropped table, which no one created again; the write: \
             {outcome:?}",
            series.len()
        );
    }
    if outcome.is_ok() && answered > dropped {
        // Acknowledged after the drop: only as a write that created the table again, whole.
        assert!(exists, "acknowledged after DROP TABLE, but no table t");
        assert_eq!(series.len(), 4000, "the whole write, in the new table");
    }
    cluster.stop().await;
}
