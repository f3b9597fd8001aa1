//! The session against a real cluster of one ConfigNode and DataNodes, replication 3.

use common::{DataType, StatusCode, Tablet, Value};
use session::{BlockingSession, Record, Session, SessionConfig, SessionError};

use testkit::{s1_points, tablet, wait_for, Cluster, DEADLINE, FENCE_MS, LONG_FENCE_MS};

fn config() -> SessionConfig {
    SessionConfig {
        max_attempts: 60,
        retry_interval_ms: 200,
        request_timeout_ms: 10_000,
        ..SessionConfig::default()
    }
}

async fn connect(endpoints: &[String]) -> Session {
    let endpoints: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    Session::connect(&endpoints, config())
        .await
        .expect("session connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_read_back_views_answer_and_a_type_mismatch_writes_nothing() {
    let cluster = Cluster::start(3, 3, LONG_FENCE_MS).await;
    let s = connect(&cluster.endpoints()).await;

    s.create_database("root.tt").await.unwrap();
    s.create_timeseries("root.tt.d1.s1", DataType::Int64)
        .await
        .unwrap();
    assert!(s
        .show_databases()
        .await
        .unwrap()
        .contains(&"root.tt".to_string()));

    // Two tablets over several 1 s partitions, one through insert_tablets.
    let first = tablet("root.tt.d1", 0, 250, 20);
    let second = tablet("root.tt.d1", 5000, 250, 20);
    s.insert_tablet(&first).await.unwrap();
    s.insert_tablets(&[second.clone(), tablet("root.tt.d2", 0, 100, 5)])
        .await
        .unwrap();
    let points = s.query_raw("root.tt.d1", "s1", 0, 100_000).await.unwrap();
    assert_eq!(points, s1_points(&[&first, &second]));
    let s2 = s.query_raw("root.tt.d1", "s2", 0, 1000).await.unwrap();
    assert_eq!(
        s2,
        (0..4)
            .map(|i| (i * 250, Value::Double((i * 250) as f64 / 2.0)))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        s.query_last("root.tt.d1", "s1").await.unwrap(),
        Some((5000 + 19 * 250, Value::Int64((5000 + 19 * 250) * 10)))
    );
    assert_eq!(s.query_last("root.tt.d1", "nothing").await.unwrap(), None);

    // Records: one row each, a null left out.
    let records: Vec<Record> = (0..4)
        .map(|i| Record {
            device: "root.tt.r1".into(),
            timestamp: i * 700,
            measurements: vec!["s1".into(), "s2".into()],
            values: vec![Some(Value::Int64(i * 7)), None],
        })
        .collect();
    s.insert_records(&records).await.unwrap();
    assert_eq!(
        s.query_raw("root.tt.r1", "s1", 0, 10_000).await.unwrap(),
        (0..4)
            .map(|i| (i * 700, Value::Int64(i * 7)))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        s.query_raw("root.tt.r1", "s2", 0, 10_000).await.unwrap(),
        vec![]
    );
    // IoTDB 2.0's types, with a null in each row, and one through a record.
    let mut new_types = Tablet::new(
        "root.tt.n1",
        &[
            ("ts", DataType::Timestamp),
            ("day", DataType::Date),
            ("blob", DataType::Blob),
            ("str", DataType::String),
        ],
    );
    let row = |i: i64| {
        vec![
            Some(Value::Timestamp(1_700_000_000_000 + i)),
            Some(Value::Date(20240101 + i as i32)),
            Some(Value::Blob(vec![0xff, i as u8])),
            Some(Value::String(format!("s{i}"))),
        ]
    };
    for i in 0..4i64 {
        let mut values = row(i);
        values[i as usize] = None;
        new_types.push_row(i * 700, values);
    }
    s.insert_tablet(&new_types).await.unwrap();
    s.insert_records(&[Record {
        device: "root.tt.n1".into(),
        timestamp: 9000,
        measurements: vec!["day".into()],
        values: vec![Some(Value::Date(20241231))],
    }])
    .await
    .unwrap();
    for (column, name) in ["ts", "day", "blob", "str"].into_iter().enumerate() {
        let mut want: Vec<(i64, Value)> = (0..4i64)
            .filter(|&i| i as usize != column)
            .map(|i| (i * 700, row(i)[column].clone().unwrap()))
            .collect();
        if name == "day" {
            want.push((9000, Value::Date(20241231)));
        }
        assert_eq!(
            s.query_raw("root.tt.n1", name, 0, 10_000).await.unwrap(),
            want,
            "{name}"
        );
    }
    // A TIMESTAMP series takes no INT64 values, though they share their bytes.
    let mut int64 = Tablet::new("root.tt.n1", &[("ts", DataType::Int64)]);
    int64.push_row(9000, vec![Some(Value::Int64(1))]);
    let err = s.insert_tablet(&int64).await.unwrap_err();
    assert_eq!(
        err.code(),
        Some(StatusCode::DataTypeMismatch.wire()),
        "{err:?}"
    );
    // An impossible day is refused before sending.
    let mut bad_day = Tablet::new("root.tt.n1", &[("day", DataType::Date)]);
    bad_day.push_row(9000, vec![Some(Value::Date(20230229))]);
    assert!(matches!(
        s.insert_tablet(&bad_day).await,
        Err(SessionError::InvalidTablet(_))
    ));

    let series = s.show_timeseries("root.tt").await.unwrap();
    assert!(
        series.iter().any(|t| t.device == "root.tt.d1"
            && t.measurement == "s1"
            && t.data_type == DataType::Int64),
        "{series:?}"
    );
    assert!(
        series.iter().any(|t| t.device == "root.tt.n1"
            && t.measurement == "blob"
            && t.data_type == DataType::Blob),
        "{series:?}"
    );

    // A TEXT value for the INT64 series: 614, final, and nothing of the tablet is written.
    let mut wrong = Tablet::new("root.tt.d1", &[("s1", DataType::Text)]);
    wrong.push_row(50_000, vec![Some(Value::Text("x".into()))]);
    let err = s.insert_tablet(&wrong).await.unwrap_err();
    assert_eq!(
        err.code(),
        Some(StatusCode::DataTypeMismatch.wire()),
        "{err:?}"
    );
    assert!(
        matches!(err, SessionError::Status { code: 614, .. }),
        "{err:?}"
    );
    assert_eq!(
        s.query_raw("root.tt.d1", "s1", 0, 100_000).await.unwrap(),
        s1_points(&[&first, &second]),
        "the mismatched write left nothing"
    );
    assert_eq!(s.stats().retries(), 0, "{:?}", s.stats());

    // A malformed tablet is refused before sending.
    let empty = Tablet::new("root.tt.d1", &[("s1", DataType::Int64)]);
    assert!(matches!(
        s.insert_tablet(&empty).await,
        Err(SessionError::InvalidTablet(_))
    ));

    let view = s.show_cluster().await.unwrap();
    assert_eq!(view.data_nodes.len(), 3, "{view:?}");
    assert!(view.data_nodes.iter().all(|d| !d.rpc_endpoint.is_empty()));
    let leases = s.show_leases().await.unwrap();
    assert_eq!(leases.leases.len(), 3, "{leases:?}");
    assert_eq!(leases.metadata_lease_fence_ms, LONG_FENCE_MS);
    let regions = s.show_regions().await.unwrap();
    assert!(!regions.is_empty());
    assert!(
        regions.iter().all(|r| r.data_node_ids.len() == 3),
        "{regions:?}"
    );

    s.delete_timeseries("root.tt.d1.s2").await.unwrap();
    s.drop_database("root.tt").await.unwrap();
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_move_off_a_fenced_node_and_a_query_there_fails_with_535_unretried() {
    let cluster = Cluster::start(3, 3, FENCE_MS).await;
    let endpoints = cluster.endpoints();
    let writer = connect(&endpoints).await;
    let device = "root.sg.d1";
    let before = tablet(device, 0, 300, 10);
    writer.insert_tablet(&before).await.unwrap();
    assert_eq!(writer.stats().retries(), 0);

    // The node the session uses first stops processing heartbeats: its lease lapses.
    let node0 = &cluster.nodes[0];
    node0.stall_heartbeats(true);
    wait_for("node 0 is fenced", || async { !node0.lease_is_live() }).await;

    // A query through the fenced node: 535 at once, no retry elsewhere.
    let reader = connect(&endpoints).await;
    let err = reader
        .query_raw(device, "s1", 0, 100_000)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SessionError::LeaseFenced { endpoint, .. } if *endpoint == endpoints[0]),
        "{err:?}"
    );
    assert_eq!(err.code(), Some(535));
    assert_eq!(reader.stats().retries(), 0, "{:?}", reader.stats());
    let err = reader.query_last(device, "s1").await.unwrap_err();
    assert!(matches!(err, SessionError::LeaseFenced { .. }), "{err:?}");

    // Writes keep succeeding, even from a client that knows only node 0 and never retries
    // (what an official IoTDB client sees): the fenced coordinator relays each write,
    // unvalidated, to a DataNode holding its lease, which validates it itself.
    let only_node0 = Session::connect(
        &[endpoints[0].as_str()],
        SessionConfig {
            max_attempts: 1,
            ..config()
        },
    )
    .await
    .expect("session connects");
    let during: Vec<Tablet> = (1..=5)
        .map(|i| tablet(device, i * 10_000, 300, 10))
        .collect();
    for t in &during {
        only_node0.insert_tablet(t).await.unwrap();
    }
    assert_eq!(only_node0.stats().retries(), 0, "{:?}", only_node0.stats());
    assert!(
        metric(&node0.metrics_text(), "relayed_writes_total") >= during.len() as u64,
        "node 0 relayed its writes"
    );
    let taken: u64 = cluster.nodes[1..]
        .iter()
        .map(|n| metric(&n.metrics_text(), "relayed_writes_received_total"))
        .sum();
    assert!(taken >= during.len() as u64, "{taken} relayed writes taken");
    // The session that knows every node writes on too.
    writer.insert_tablet(&during[0]).await.unwrap();

    // Everything reads back through the rest of the cluster.
    let mut all: Vec<&Tablet> = vec![&before];
    all.extend(during.iter());
    let others = connect(&endpoints[1..]).await;
    let points = others.query_raw(device, "s1", 0, 1_000_000).await.unwrap();
    assert_eq!(points, s1_points(&all));

    node0.stall_heartbeats(false);
    cluster.stop().await;
}

#[test]
fn the_blocking_session_writes_and_reads() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cluster = runtime.block_on(Cluster::start(1, 1, LONG_FENCE_MS));
    let endpoints = cluster.endpoints();
    let s = BlockingSession::connect(&[endpoints[0].as_str()], config()).unwrap();
    let t = tablet("root.bs.d1", 0, 100, 30);
    s.insert_tablet(&t).unwrap();
    assert_eq!(
        s.query_raw("root.bs.d1", "s1", 0, 10_000).unwrap(),
        s1_points(&[&t])
    );
    assert_eq!(s.show_cluster().unwrap().data_nodes.len(), 1);
    drop(s);
    runtime.block_on(cluster.stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_real_datanode_redirects_to_the_region_leader_and_the_cache_hits_after_the_first_write() {
    let cluster = Cluster::start(3, 3, LONG_FENCE_MS).await;
    let endpoints = cluster.endpoints();
    let s = connect(&endpoints).await;
    let device = "root.rd.d1";
    s.insert_tablet(&tablet(device, 0, 100, 5)).await.unwrap();

    // Node 0, the session's first endpoint, hands every region it leads to node 1, so it leads
    // none of the device's regions and a write through it is forwarded.
    let node0 = &cluster.nodes[0];
    let to = cluster.nodes[1].node_id();
    wait_for("node 0 leads no region", || async {
        let led: Vec<u64> = node0
            .region_status()
            .into_iter()
            .filter(|(_, g)| g.leader == Some(node0.node_id()))
            .map(|(id, _)| id)
            .collect();
        for region in &led {
            // A refused or lost transfer is retried on the next poll.
            drop(node0.transfer_leader(*region, to).await);
        }
        led.is_empty()
    })
    .await;

    let fresh = connect(&endpoints).await;
    // The redirect needs node 0 to know the new leader (its raft replica or a heartbeat's hint):
    // write until a hint arrives, within the harness deadline.
    let mut written = Vec::new();
    let started = std::time::Instant::now();
    while fresh.stats().redirects_recorded == 0 {
        assert!(
            started.elapsed() < DEADLINE,
            "no redirect within {DEADLINE:?}"
        );
        let t = tablet(device, 1000 * (written.len() as i64 + 1), 100, 5);
        fresh.insert_tablet(&t).await.unwrap();
        written.push(t);
    }
    let target = fresh.cached_endpoint(device).expect("a cached endpoint");
    assert_ne!(
        target, endpoints[0],
        "the hint names the leader, not node 0"
    );

    // The next writes to the device go straight to the cached leader.
    let hits = fresh.stats().redirect_hits;
    let next = tablet(device, 100_000, 100, 5);
    fresh.insert_tablet(&next).await.unwrap();
    assert_eq!(fresh.stats().redirect_hits, hits + 1, "{:?}", fresh.stats());
    assert_eq!(fresh.stats().retries(), 0, "{:?}", fresh.stats());
    let total: u64 = cluster
        .nodes
        .iter()
        .map(|n| metric(&n.metrics_text(), "write_redirects_total"))
        .sum();
    assert!(total >= 1, "the DataNodes counted their redirects");

    let points = fresh
        .query_raw(device, "s1", 1000, 1_000_000)
        .await
        .unwrap();
    let mut all: Vec<&Tablet> = written.iter().collect();
    all.push(&next);
    assert_eq!(points, s1_points(&all));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_continue_while_the_first_datanode_is_stopped_mid_stream() {
    let mut cluster = Cluster::start(3, 3, LONG_FENCE_MS).await;
    let endpoints = cluster.endpoints();
    let writer = std::sync::Arc::new(connect(&endpoints).await);
    let device = "root.kd.d1";
    let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // DataNode 0 leads every region of the device (both region groups created by a tablet
    // spanning many time partitions), so the redirect cache keeps the writer on it until it
    // stops; otherwise a writer redirected elsewhere never had to move (a flaky assertion).
    let first = tablet(device, -1_000_000, 20_000, 50);
    writer.insert_tablet(&first).await.unwrap();
    let node0_id = cluster.nodes[0].node_id();
    wait_for("DataNode 0 leads every region", || async {
        let mut all_led = true;
        for node in &cluster.nodes {
            for (region, group) in node.region_status() {
                if group.leader != Some(node0_id) {
                    all_led = false;
                }
                if group.leader == Some(node.node_id()) && node.node_id() != node0_id {
                    // A refused or lost transfer is retried on the next poll.
                    drop(node.transfer_leader(region, node0_id).await);
                }
            }
        }
        all_led
    })
    .await;

    // The writer streams tablets until it has written ten after DataNode 0 was gone.
    let (quarter_tx, quarter_rx) = tokio::sync::oneshot::channel::<()>();
    let stream = {
        let writer = writer.clone();
        let stopped = stopped.clone();
        tokio::spawn(async move {
            let mut quarter = Some(quarter_tx);
            let mut written = Vec::new();
            let mut after_stop = 0;
            while after_stop < 10 {
                assert!(written.len() < 100_000, "DataNode 0 never stopped");
                let t = tablet(device, written.len() as i64 * 1000, 100, 10);
                writer.insert_tablet(&t).await.expect("no error surfaces");
                written.push(t);
                if written.len() == 10 {
                    if let Some(q) = quarter.take() {
                        q.send(()).expect("the test waits for the signal");
                    }
                }
                if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    after_stop += 1;
                }
            }
            written
        })
    };
    quarter_rx.await.expect("the writer got going");
    // The session's first DataNode goes away while the writer streams.
    let node0 = cluster.nodes.remove(0);
    node0.stop().await.expect("DataNode 0 stops");
    stopped.store(true, std::sync::atomic::Ordering::SeqCst);
    let tablets = stream.await.expect("the writer finished without an error");

    let stats = writer.stats();
    assert!(
        stats.connection_retries > 0,
        "the writer had to move: {stats:?}"
    );
    let points = writer
        .query_raw(device, "s1", i64::MIN / 2, i64::MAX)
        .await
        .unwrap();
    let mut all = vec![&first];
    all.extend(tablets.iter());
    assert_eq!(points, s1_points(&all));
    cluster.stop().await;
}

/// The value of an unlabelled metric on a Prometheus text page (0 when absent).
fn metric(page: &str, name: &str) -> u64 {
    page.lines()
        .filter_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
        .next()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_large_range_is_read_in_pages_whole_and_in_order() {
    let cluster = Cluster::start(1, 1, LONG_FENCE_MS).await;
    let endpoints = cluster.endpoints();
    let writer = connect(&endpoints).await;
    // 1,000 points over several 1 s partitions, so pages cross regions and partitions.
    let tablets: Vec<Tablet> = (0..10)
        .map(|i| tablet("root.pg.d1", i * 1000, 10, 100))
        .collect();
    writer.insert_tablets(&tablets).await.unwrap();
    let endpoints: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    let reader = Session::connect(
        &endpoints,
        SessionConfig {
            query_page_points: 64,
            ..config()
        },
    )
    .await
    .unwrap();
    let points = reader
        .query_raw("root.pg.d1", "s1", 0, i64::MAX)
        .await
        .unwrap();
    assert_eq!(points.len(), 1000);
    assert_eq!(points, s1_points(&tablets.iter().collect::<Vec<_>>()));
    // A range that ends inside a page.
    let some = reader.query_raw("root.pg.d1", "s1", 5, 2005).await.unwrap();
    assert_eq!(some.len(), 200);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tablet_above_grpcs_default_4_mib_is_replicated_and_read_back() {
    let cluster = Cluster::start(3, 3, LONG_FENCE_MS).await;
    let s = connect(&cluster.endpoints()).await;
    // 100,000 rows × 6 DOUBLE columns ≈ 5.6 MB on the wire and in one raft entry.
    let columns: Vec<(String, DataType)> = (0..6)
        .map(|c| (format!("s{c}"), DataType::Double))
        .collect();
    let schema: Vec<(&str, DataType)> = columns.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    let mut t = Tablet::new("root.big.d1", &schema);
    for row in 0..100_000i64 {
        t.push_row(
            row,
            (0..6)
                .map(|c| Some(Value::Double((row * 6 + c) as f64)))
                .collect(),
        );
    }
    s.insert_tablet(&t).await.unwrap();
    let s5 = s.query_raw("root.big.d1", "s5", 0, i64::MAX).await.unwrap();
    assert_eq!(s5.len(), 100_000);
    assert_eq!(s5[99_999], (99_999, Value::Double((99_999 * 6 + 5) as f64)));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_data_removes_the_points_in_range_of_the_series_named_and_keeps_the_series() {
    let cluster = Cluster::start(1, 1, LONG_FENCE_MS).await;
    let s = connect(&cluster.endpoints()).await;
    let d1 = tablet("root.dd.d1", 0, 250, 20);
    let d2 = tablet("root.dd.d2", 0, 250, 20);
    s.insert_tablets(&[d1.clone(), d2.clone()]).await.unwrap();
    // Both bounds inclusive; a pattern names every series of the device.
    s.delete_data(&["root.dd.d1.*"], 1000, 2000).await.unwrap();
    s.delete_data(&["root.dd.d2.s1"], i64::MIN, 250)
        .await
        .unwrap();
    let outside = |tablet: &Tablet, keep: &dyn Fn(i64) -> bool| -> Vec<(i64, Value)> {
        s1_points(&[tablet])
            .into_iter()
            .filter(|(t, _)| keep(*t))
            .collect()
    };
    assert_eq!(
        s.query_raw("root.dd.d1", "s1", 0, i64::MAX).await.unwrap(),
        outside(&d1, &|t| !(1000..=2000).contains(&t))
    );
    assert_eq!(
        s.query_raw("root.dd.d1", "s2", 0, i64::MAX)
            .await
            .unwrap()
            .len(),
        20 - 5
    );
    assert_eq!(
        s.query_raw("root.dd.d2", "s1", 0, i64::MAX).await.unwrap(),
        outside(&d2, &|t| t > 250)
    );
    assert_eq!(
        s.query_raw("root.dd.d2", "s2", 0, i64::MAX)
            .await
            .unwrap()
            .len(),
        20
    );
    let shown = s.show_timeseries("root.dd").await.unwrap();
    assert_eq!(shown.len(), 4, "{shown:?}");
    // A path that is not one is refused; a series that does not exist deletes nothing.
    let refused = s.delete_data(&["sg.d1.s1"], 0, 1).await.unwrap_err();
    assert!(
        matches!(&refused, SessionError::Status { code, .. } if *code == StatusCode::IllegalParameter.wire()),
        "{refused:?}"
    );
    s.delete_data(&["root.dd.d9.s1"], 0, 1).await.unwrap();
    cluster.stop().await;
}
