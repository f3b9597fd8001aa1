//! A fenced DataNode through the CLI: its own lease view says so, a query sent only to it
//! answers 535 (never retried), an INSERT sent only to it is relayed (type lookup and write) with
//! no ConfigNode round trip there, and writes given every endpoint still succeed.

use serde_json::json;

use crate::harness::{rows, sql, status};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fenced_datanode_answers_535() {
    let cluster = testkit::Cluster::start(3, 3, testkit::FENCE_MS).await;
    let all = cluster.endpoints().join(",");
    let first = cluster.endpoints()[0].clone();
    sql(
        &all,
        true,
        "CREATE DATABASE root.f; CREATE TIMESERIES root.f.d.i WITH DATATYPE=INT32; \
         INSERT INTO root.f.d(time, v) VALUES (1, 1)",
    )
    .await
    .assert_exit(0);

    cluster.nodes[0].stall_heartbeats(true);
    testkit::wait_for("DataNode 0 fences itself", || async {
        !cluster.nodes[0].lease_is_live()
    })
    .await;

    let lease = sql(&first, true, "SHOW LOCAL LEASE")
        .await
        .assert_exit(0)
        .one();
    let lease = rows(&lease);
    assert_eq!(lease[0][1], json!(first), "{lease:?}");
    assert_eq!(
        lease[0][3],
        json!(true),
        "SHOW LOCAL LEASE reports the fence: {lease:?}"
    );
    assert_ne!(lease[0][2], json!("NORMAL"), "{lease:?}");

    let answer = sql(&first, true, "SELECT v FROM root.f.d")
        .await
        .assert_exit(1)
        .one();
    assert_eq!(status(&answer), 535, "{answer}");
    let run = sql(&first, false, "SELECT LAST v FROM root.f.d").await;
    run.assert_exit(1);
    assert!(run.stderr.starts_with("Msg: 535: "), "{run:?}");

    // Given only the fenced DataNode, an INSERT succeeds and that node makes no ConfigNode
    // round trip for it: it relays both the type lookup and the write to a lease holder.
    let page = cluster.nodes[0].metrics_text();
    let requests = testkit::raw::metric(&page, "confignode_requests_total");
    let lookups = testkit::raw::metric(&page, "relayed_lookups_total");
    let answer = sql(&first, true, "INSERT INTO root.f.d(time, v) VALUES (2, 2)")
        .await
        .assert_exit(0)
        .one();
    assert_eq!(status(&answer), 200, "{answer}");
    let page = cluster.nodes[0].metrics_text();
    assert_eq!(
        testkit::raw::metric(&page, "confignode_requests_total"),
        requests,
        "the fenced DataNode asked the ConfigNode during the INSERT"
    );
    assert_eq!(
        testkit::raw::metric(&page, "relayed_lookups_total"),
        lookups + 1,
        "the type lookup was relayed"
    );
    // The relayed lookup finds an existing series' type: an integer literal for the INT32
    // series goes as INT32 (a new series would be DOUBLE, answered 614).
    let answer = sql(
        &first,
        true,
        "INSERT INTO root.f.d(time, v, i) VALUES (3, 3.5, 7)",
    )
    .await
    .assert_exit(0)
    .one();
    assert_eq!(status(&answer), 200, "{answer}");

    // With every endpoint, the session moves a 536 on to a DataNode that holds its lease.
    let answer = sql(&all, true, "INSERT INTO root.f.d(time, v) VALUES (4, 4)")
        .await
        .assert_exit(0)
        .one();
    assert_eq!(status(&answer), 200, "{answer}");

    cluster.nodes[0].stall_heartbeats(false);
    testkit::wait_for("DataNode 0 holds its lease again", || async {
        cluster.nodes[0].lease_is_live()
    })
    .await;
    let counted = sql(&first, true, "SELECT COUNT(v) FROM root.f.d")
        .await
        .assert_exit(0)
        .one();
    assert_eq!(rows(&counted), vec![json!([4])]);
    cluster.stop().await;
}
