//! TTL per database against a real cluster (replication 3): SET TTL hides expired points from
//! every read at once, UNSET TTL shows what is still stored, and compaction on every replica
//! removes the expired points for good while each series keeps its newest point.

use std::time::{SystemTime, UNIX_EPOCH};

use common::{DataType, StatusCode, Tablet, Value};
use session::{Session, SessionConfig, SessionError};

use testkit::raw::metric;
use testkit::{wait_for, Cluster, LONG_FENCE_MS};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn rows(device: &str, from: i64, step: i64, n: i64) -> Tablet {
    let mut t = Tablet::new(device, &[("s1", DataType::Int64)]);
    for i in 0..n {
        t.push_row(from + i * step, vec![Some(Value::Int64(i))]);
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn set_ttl_hides_expired_points_and_compaction_removes_them() {
    let cluster = Cluster::start_with(3, 3, LONG_FENCE_MS, |c| {
        c.storage.memtable_flush_age_ms = 300;
    })
    .await;
    let endpoints = cluster.endpoints();
    let endpoints: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    let config = SessionConfig {
        max_attempts: 60,
        retry_interval_ms: 200,
        request_timeout_ms: 10_000,
        ..SessionConfig::default()
    };
    let s = Session::connect(&endpoints, config).await.unwrap();
    s.create_database("root.ttl").await.unwrap();
    s.create_database("root.keep").await.unwrap();

    // Two hours old: 2000 points 10 ms apart, filling 20 of the testkit's 1 s partitions with
    // 100 points each; and recent ones.
    let now = now_ms();
    let old_from = (now - 2 * 3_600_000) / 1000 * 1000;
    let old = rows("root.ttl.old", old_from, 10, 2000);
    let recent = rows("root.ttl.new", now - 10_000, 1000, 5);
    let kept = rows("root.keep.d", old_from, 1000, 10);
    s.insert_tablets(&[old.clone(), recent.clone(), kept.clone()])
        .await
        .unwrap();

    // Refused: not positive, or no such database.
    match s.set_ttl("root.ttl", 0).await {
        Err(SessionError::Status { code, .. }) => {
            assert_eq!(code, StatusCode::IllegalParameter as i32)
        }
        other => panic!("{other:?}"),
    }
    assert!(s.set_ttl("root.nothing", 1000).await.is_err());

    // One hour: the old points vanish from every read at once, LAST included.
    s.set_ttl("root.ttl", 3_600_000).await.unwrap();
    let shown = s.show_databases_with_ttl().await.unwrap();
    assert!(
        shown.contains(&("root.ttl".to_string(), Some(3_600_000))),
        "{shown:?}"
    );
    assert!(
        shown.contains(&("root.keep".to_string(), None)),
        "{shown:?}"
    );
    let everything = (i64::MIN, i64::MAX);
    assert!(s
        .query_raw("root.ttl.old", "s1", everything.0, everything.1)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(s.query_last("root.ttl.old", "s1").await.unwrap(), None);
    assert_eq!(
        s.query_raw("root.ttl.new", "s1", everything.0, everything.1)
            .await
            .unwrap()
            .len(),
        5
    );
    assert_eq!(
        s.query_raw("root.keep.d", "s1", everything.0, everything.1)
            .await
            .unwrap()
            .len(),
        10,
        "another database's TTL leaves it alone"
    );

    // Every replica flushes, then compacts each expired partition down to its newest point:
    // 20 partitions × 99 points.
    for (i, node) in cluster.nodes.iter().enumerate() {
        wait_for(&format!("DataNode {i} removes expired points"), || async {
            metric(&node.metrics_text(), "ttl_expired_points_removed_total") == 20 * 99
        })
        .await;
    }
    // UNSET TTL shows what is still stored: each partition's newest point, nothing else of
    // the expired ones; the other database untouched.
    s.unset_ttl("root.ttl").await.unwrap();
    let left = s
        .query_raw("root.ttl.old", "s1", everything.0, everything.1)
        .await
        .unwrap();
    let newest_of_each: Vec<(i64, Value)> = (0..20)
        .map(|p| {
            let i = p * 100 + 99;
            (old_from + i * 10, Value::Int64(i))
        })
        .collect();
    assert_eq!(left, newest_of_each);
    assert_eq!(
        s.query_raw("root.keep.d", "s1", everything.0, everything.1)
            .await
            .unwrap()
            .len(),
        10
    );
    cluster.stop().await;
}
