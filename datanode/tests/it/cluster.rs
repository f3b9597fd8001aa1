//! In-process clusters over loopback (see `harness.rs`): writes across partitions and regions,
//! fencing (536 / 535), leadership hand-off, recovery, restart.

use common::{DataType, StatusCode, Tablet, Value};
use datanode::DataNodeHandle;

use crate::harness::{
    assert_s1_matches, code, datanode_config, insert, insert_retrying, metric, path, query,
    query_ok, tablet, wait_for, Cluster, FENCE_MS, LONG_FENCE_MS,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tablet_over_several_partitions_and_regions_is_written_through_one_node_and_read_through_another(
) {
    let cluster = Cluster::start(3, 1, LONG_FENCE_MS).await;
    // Each tablet spans 8 time partitions of 1 s. The ConfigNode maps (series slot, time slot)
    // to the database's region groups, which sit on different DataNodes (replication 1); several
    // devices make sure more than one region (and DataNode) is involved, so parts are forwarded.
    let devices: Vec<String> = (1..=6).map(|i| format!("root.sg.d{i}")).collect();
    let t = tablet(&devices[0], 0, 250, 32);
    let device = devices[0].as_str();
    let mut writer = cluster.client(0).await;
    for d in &devices {
        let s = insert(&mut writer, &tablet(d, 0, 250, 32)).await;
        assert_eq!(s.code, 200, "{s:?}");
    }
    // Idempotent: the same tablet again changes nothing.
    let s = insert(&mut writer, &t).await;
    assert_eq!(s.code, 200, "{s:?}");

    let mut reader = cluster.client(2).await;
    for d in &devices {
        let resp = query(&mut reader, d, 0, 10_000).await;
        assert_s1_matches(&resp, &tablet(d, 0, 250, 32));
    }
    let last = reader
        .query_last(proto::QueryLastReq {
            session_id: 1,
            paths: vec![path(device, "s1")],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&last.status), 200);
    assert_eq!(last.points.len(), 1);
    assert_eq!(last.points[0].timestamp, 31 * 250);

    // Records: one row per record, nulls left out; read back through another DataNode.
    let records = proto::InsertRecordsReq {
        session_id: 1,
        records: (0..4)
            .map(|i| proto::Record {
                device: "root.sg.r1".into(),
                timestamp: i * 700,
                measurements: vec!["s1".into(), "s2".into()],
                values: vec![
                    datanode::convert::value_to_wire(&Value::Int64(i * 7000)),
                    proto::Value { value: None },
                ],
            })
            .collect(),
    };
    let s = writer.insert_records(records).await.unwrap().into_inner();
    assert_eq!(s.code, 200, "{s:?}");
    let r = query(&mut reader, "root.sg.r1", 0, 10_000).await;
    let mut expected = Tablet::new("root.sg.r1", &[("s1", DataType::Int64)]);
    for i in 0..4 {
        expected.push_row(i * 700, vec![Some(Value::Int64(i * 7000))]);
    }
    assert_s1_matches(&r, &expected);
    assert_eq!(r.series.len(), 1, "s2 was only ever null");

    // A type mismatch is reported as 614 and nothing is written.
    let mut wrong = Tablet::new(device, &[("s1", DataType::Text)]);
    wrong.push_row(20_000, vec![Some(Value::Text("x".into()))]);
    assert_eq!(insert(&mut writer, &wrong).await.code, 614);

    // The points are spread over more than one region, on more than one DataNode.
    let mut regions_with_data = std::collections::BTreeSet::new();
    for i in 0..3 {
        let mut c = cluster.client(i).await;
        let digests = c
            .region_digest(proto::RegionDigestReq {
                session_id: 1,
                region_id: 0,
                leaders_only: false,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&digests.status), 200);
        // Above a cutoff past every point (as a TTL's), a region's digest is that of no point.
        let cut = c
            .region_digest(proto::RegionDigestReq {
                session_id: 1,
                visible_from_ms: [("root.sg".to_string(), i64::MAX)].into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&cut.status), 200);
        let empty: std::collections::BTreeSet<u64> = cut.digests.iter().map(|d| d.digest).collect();
        assert!(empty.len() <= 1, "{:?}", cut.digests);
        assert_eq!(cut.digests.len(), digests.digests.len());
        for d in digests.digests {
            // Only applied commands move a region's applied index (raft's own entries do not).
            if d.applied_index > 0 {
                regions_with_data.insert((d.region_id, d.data_node_id));
                assert!(
                    !empty.contains(&d.digest),
                    "region {} has points",
                    d.region_id
                );
            }
        }
    }
    assert!(
        regions_with_data.len() >= 2,
        "data landed in {regions_with_data:?}"
    );
    let metrics = cluster.nodes[0].metrics_text();
    // 6 devices × 32 rows × 2 measurements, the repeated first tablet, 4 record points.
    assert_eq!(metric(&metrics, "write_points_total"), 6 * 64 + 64 + 4);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_heartbeat_fences_the_node_its_leaders_step_aside_and_it_recovers() {
    let cluster = Cluster::start(3, 3, FENCE_MS).await;
    let device = "root.sg.d2";
    let first = tablet(device, 0, 300, 10);
    let mut c0 = cluster.client(0).await;
    assert_eq!(insert_retrying(&mut c0, &first).await.code, 200);
    // Node 0 leads a region, so that fencing it must hand leadership over.
    let leads = |node: &DataNodeHandle| {
        node.region_status()
            .values()
            .filter(|s| s.role == consensus::StateRole::Leader)
            .count()
    };
    let node0 = &cluster.nodes[0];
    let region = *node0
        .region_status()
        .keys()
        .next()
        .expect("node 0 hosts a region");
    wait_for("node 0 leads a region", || async {
        if leads(node0) > 0 {
            return true;
        }
        // Whoever leads `region` hands it to node 0 (a campaign alone loses while the leader is
        // healthy: check-quorum followers ignore it). Refused during an election; the next poll
        // tries again.
        for node in &cluster.nodes[1..] {
            if node
                .region_status()
                .get(&region)
                .is_some_and(|s| s.role == consensus::StateRole::Leader)
            {
                if let Err(e) = node.transfer_leader(region, node0.node_id()).await {
                    eprintln!("transfer: {e}");
                }
            }
        }
        false
    })
    .await;

    // Heartbeats reach node 0 but are not processed: its lease lapses.
    node0.stall_heartbeats(true);
    wait_for("node 0 is fenced", || async { !node0.lease_is_live() }).await;

    // Writes through the fenced coordinator are relayed, unvalidated, to a DataNode holding
    // its lease, which validates and writes them: the client sees success. Reads: 535.
    let s = insert(&mut c0, &tablet(device, 5000, 300, 3)).await;
    assert!(
        s.is(StatusCode::Success) || s.is(StatusCode::RedirectionRecommend),
        "{s:?}"
    );
    assert!(node0.metrics_text().contains("relayed_writes_total 1"));
    let r = query(&mut c0, device, 0, 100_000).await;
    assert_eq!(code(&r.status), StatusCode::MetadataLeaseFenced.wire());
    let last = c0
        .query_last(proto::QueryLastReq {
            session_id: 1,
            paths: vec![path(device, "s1")],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&last.status), StatusCode::MetadataLeaseFenced.wire());

    // Node 0 leads nothing any more: it handed its regions to replicas holding leases.
    wait_for("node 0 leads no region", || async { leads(node0) == 0 }).await;
    // Writes through the rest of the cluster keep succeeding.
    let during = tablet(device, 10_000, 300, 10);
    let mut c1 = cluster.client(1).await;
    let s = insert_retrying(&mut c1, &during).await;
    assert_eq!(s.code, 200, "{s:?}");
    let mut c2 = cluster.client(2).await;
    let resp = query_ok(&mut c2, device, 10_000, 20_000).await;
    assert_s1_matches(&resp, &during);
    let metrics = node0.metrics_text();
    assert!(
        metrics.contains("metadata_lease_fence_transitions_total 1"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("raft_fenced_transfers_total 0"),
        "{metrics}"
    );

    // The stall ends: the next heartbeat finds the lease lapsed, recovery clears and pulls, and
    // node 0 serves again.
    let recoveries = node0.lease_recoveries();
    node0.stall_heartbeats(false);
    wait_for("node 0 recovered", || async {
        node0.lease_is_live() && node0.lease_recoveries() > recoveries
    })
    .await;
    let after = tablet(device, 20_000, 300, 5);
    assert_eq!(insert_retrying(&mut c0, &after).await.code, 200);
    let resp = query_ok(&mut c0, device, 20_000, 30_000).await;
    assert_s1_matches(&resp, &after);
    let resp = query_ok(&mut c0, device, 0, 3000).await;
    assert_s1_matches(&resp, &first);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_datanode_re_registers_with_a_higher_incarnation_and_keeps_its_data() {
    let mut cluster = Cluster::start(1, 1, LONG_FENCE_MS).await;
    let device = "root.sg.d3";
    let t = tablet(device, 0, 400, 10);
    let mut c = cluster.client(0).await;
    assert_eq!(insert(&mut c, &t).await.code, 200);
    let node = cluster.nodes.pop().unwrap();
    let (id, epoch) = (node.node_id(), node.incarnation());
    node.stop().await.unwrap();

    let config = datanode_config(cluster.dir.path(), 0, &cluster.cn_address);
    let node = datanode::start(config).await.unwrap();
    assert_eq!(node.node_id(), id);
    assert!(node.incarnation() > epoch);
    wait_for("the restarted node holds its lease", || async {
        node.lease_is_live()
    })
    .await;
    cluster.nodes.push(node);
    let mut c = cluster.client(0).await;
    let resp = query(&mut c, device, 0, 10_000).await;
    assert_s1_matches(&resp, &t);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_timeseries_invalidates_every_cache_and_deletes_the_data_on_every_replica() {
    let cluster = Cluster::start(3, 3, LONG_FENCE_MS).await;
    let device = "root.sg.d4";
    let t = tablet(device, 0, 300, 10);
    // Every DataNode caches the INT64 schema of s1: node 0 writes, nodes 1 and 2 read.
    let mut c0 = cluster.client(0).await;
    assert_eq!(insert_retrying(&mut c0, &t).await.code, 200);
    for i in 1..3 {
        let mut c = cluster.client(i).await;
        assert_s1_matches(&query_ok(&mut c, device, 0, 10_000).await, &t);
    }
    let s = c0
        .execute_schema_statement(proto::SchemaStatementReq {
            session_id: 1,
            statement: Some(proto::schema_statement_req::Statement::DeleteTimeseries(
                proto::DeleteTimeseriesReq {
                    series: vec![path(device, "s1")],
                },
            )),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.code, 200, "{s:?}");
    // Gone everywhere; s2 is untouched.
    for i in 0..3 {
        let mut c = cluster.client(i).await;
        let r = query_ok(&mut c, device, 0, 10_000).await;
        let measurements: Vec<&str> = r
            .series
            .iter()
            .filter_map(|s| s.path.as_ref().map(|p| p.measurement.as_str()))
            .collect();
        assert_eq!(measurements, ["s2"], "node {i}");
        assert!(metric(&cluster.nodes[i].metrics_text(), "invalidations_total") >= 1);
    }
    // The invalidated schema is not used: s1 comes back as TEXT through another node.
    let mut text = Tablet::new(device, &[("s1", DataType::Text)]);
    text.push_row(50_000, vec![Some(Value::Text("again".into()))]);
    let mut c2 = cluster.client(2).await;
    assert_eq!(insert_retrying(&mut c2, &text).await.code, 200);
    let last = c0
        .query_last(proto::QueryLastReq {
            session_id: 1,
            paths: vec![path(device, "s1")],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&last.status), 200);
    assert_eq!(last.points.len(), 1);
    assert_eq!(last.points[0].timestamp, 50_000);
    assert_eq!(last.points[0].data_type, proto::DataType::Text as i32);
    replica_digests_agree(&cluster).await;
    cluster.stop().await;
}

/// Waits until every region's replicas report the same applied index and digest.
async fn replica_digests_agree(cluster: &Cluster) {
    wait_for("replica digests agree", || async move {
        let mut digests = std::collections::BTreeMap::new();
        for i in 0..cluster.nodes.len() {
            let mut c = cluster.client(i).await;
            let resp = c
                .region_digest(proto::RegionDigestReq {
                    session_id: 1,
                    region_id: 0,
                    leaders_only: false,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            for d in resp.digests {
                digests
                    .entry(d.region_id)
                    .or_insert_with(std::collections::BTreeSet::new)
                    .insert((d.applied_index, d.digest));
            }
        }
        digests
            .values()
            .all(|set: &std::collections::BTreeSet<(u64, u64)>| set.len() == 1)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_from_removes_points_of_every_region_and_replica_flushed_or_not() {
    let cluster = Cluster::start(3, 3, LONG_FENCE_MS).await;
    let device = "root.sg.d5";
    // 8 partitions of 1 s, flushed; then more rows, still in memtables.
    let flushed = tablet(device, 0, 250, 32);
    let buffered = tablet(device, 8_000, 250, 8);
    let mut c0 = cluster.client(0).await;
    assert_eq!(insert_retrying(&mut c0, &flushed).await.code, 200);
    let s = c0
        .flush(proto::SessionShowReq { session_id: 1 })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.code, 200, "{s:?}");
    assert_eq!(insert_retrying(&mut c0, &buffered).await.code, 200);

    // Through another DataNode, as SQL (the CLI's path).
    let mut c1 = cluster.client(1).await;
    let resp = c1
        .execute_statement(proto::ExecuteStatementReq {
            session_id: 1,
            statement: format!("DELETE FROM {device}.s1 WHERE time >= 1000 AND time <= 8500"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&resp.status), 200, "{:?}", resp.status);
    let kept: Vec<i64> = flushed
        .timestamps
        .iter()
        .chain(&buffered.timestamps)
        .copied()
        .filter(|t| !(1000..=8500).contains(t))
        .collect();
    let mut expected = Tablet::new(device, &[("s1", DataType::Int64)]);
    for t in &kept {
        expected.push_row(*t, vec![Some(Value::Int64(t * 10))]);
    }
    for i in 0..3 {
        let mut c = cluster.client(i).await;
        let r = query_ok(&mut c, device, 0, 100_000).await;
        assert_s1_matches(&r, &expected);
        let s2 = r
            .series
            .iter()
            .find(|s| s.path.as_ref().is_some_and(|p| p.measurement == "s2"))
            .expect("s2 is untouched");
        assert_eq!(s2.timestamps.len(), 40, "node {i}");
    }
    // Written again where points were deleted: visible.
    let again = tablet(device, 2_000, 1, 1);
    assert_eq!(insert_retrying(&mut c0, &again).await.code, 200);
    let r = query_ok(&mut c1, device, 2_000, 2_001).await;
    assert_s1_matches(&r, &again);
    replica_digests_agree(&cluster).await;
    cluster.stop().await;
}

/// Issue 40's EXPLAIN ANALYZE: a query through one DataNode lists the reads it made of each
/// region (its fragments) on the replica that answered, with their series and rows; EXPLAIN
/// alone reads nothing and answers the plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn explain_analyze_lists_the_region_reads_a_query_made() {
    let cluster = Cluster::start(3, 1, LONG_FENCE_MS).await;
    let devices: Vec<String> = (1..=6).map(|i| format!("root.ea.d{i}")).collect();
    let mut writer = cluster.client(0).await;
    for d in &devices {
        let s = insert_retrying(&mut writer, &tablet(d, 0, 250, 32)).await;
        assert_eq!(s.code, 200, "{s:?}");
    }
    let mut reader = cluster.client(2).await;
    let mut run = async |statement: &str| {
        let answer = reader
            .execute_statement(proto::ExecuteStatementReq {
                session_id: 1,
                statement: statement.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&answer.status), 200, "{:?}", answer.status);
        let lines: Vec<String> = answer
            .rows
            .iter()
            .map(|row| match &row.cells[0].value {
                Some(proto::value::Value::TextValue(line)) => line.clone(),
                other => panic!("a line of text, not {other:?}"),
            })
            .collect();
        (answer.columns, lines)
    };
    let (columns, plan) = run("EXPLAIN SELECT count(s1) FROM root.ea.**").await;
    assert_eq!(columns, ["distribution plan"]);
    assert_eq!(plan[0], "Aggregate query  ALIGN BY TIME");
    assert!(plan.iter().all(|l| !l.contains("FRAGMENT")), "{plan:?}");

    let (columns, text) = run("EXPLAIN ANALYZE SELECT count(s1) FROM root.ea.**").await;
    assert_eq!(columns, ["Explain Analyze"]);
    assert!(text.iter().any(|l| l.contains(", 1 rows, ")), "{text:?}");
    let fragments: Vec<&String> = text.iter().filter(|l| l.contains("FRAGMENT")).collect();
    assert!(!fragments.is_empty(), "{text:?}");
    // Every asked series is read once, on one replica of its region (RF 1), one window each.
    let number_before = |line: &str, what: &str| -> u64 {
        let head = &line[..line.find(what).expect(what)];
        head.rsplit(' ').next().unwrap().parse().expect(what)
    };
    let series: u64 = fragments.iter().map(|l| number_before(l, " series")).sum();
    let rows: u64 = fragments.iter().map(|l| number_before(l, " rows")).sum();
    assert_eq!((series, rows), (6, 6), "{text:?}");
    for line in &fragments {
        assert!(line.contains("[aggregate] region "), "{line}");
        let on_a_member = cluster
            .nodes
            .iter()
            .any(|n| line.contains(&n.internal_address.to_string()));
        assert!(on_a_member, "{line}");
    }
    cluster.stop().await;
}
