//! A client flood against a DataNode's session server (REVIEW M5, issue 18): requests past
//! `dn_rpc_max_concurrent_requests` are refused at once with `RESOURCE_EXHAUSTED` (sessions
//! take it as a retryable 606), every write the server took is acknowledged whole, and the raft
//! groups keep their leaders and terms throughout: heartbeats are delivered while the session
//! server refuses work.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::{insert, metric, tablet, wait_for, Cluster, LONG_FENCE_MS};

/// Concurrent writers per DataNode, far past the request limit.
const WRITERS_PER_NODE: usize = 48;
const REQUESTS_MAX: u32 = 4;
const FLOOD: Duration = Duration::from_secs(4);
const ROWS: i64 = 200;

/// (term, leader) of every region as each DataNode sees it.
fn terms(cluster: &Cluster) -> Vec<BTreeMap<u64, (u64, Option<u64>)>> {
    cluster
        .nodes
        .iter()
        .map(|n| {
            n.region_status()
                .into_iter()
                .map(|(region, s)| (region, (s.term, s.leader)))
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_flood_is_refused_past_the_limit_and_no_election_happens() {
    let cluster = Cluster::start_with(3, 3, LONG_FENCE_MS, |c| {
        c.rpc.dn_rpc_max_concurrent_requests = REQUESTS_MAX;
        // Election timeouts of 1–2 s: a scheduling hiccup on a loaded 2-core machine is no
        // election, a starved raft thread is.
        c.raft.dn_raft_tick_ms = 100;
    })
    .await;
    // Regions, replicas and leaders settle before the flood.
    let mut first = cluster.client(0).await;
    for d in 0..4 {
        let s = insert(&mut first, &tablet(&format!("root.fl.d{d}"), 0, 1, 10)).await;
        assert_eq!(s.code, 200, "{s:?}");
    }
    wait_for("every replica knows its region's leader", || async {
        terms(&cluster)
            .iter()
            .all(|regions| !regions.is_empty() && regions.values().all(|(_, l)| l.is_some()))
    })
    .await;
    let before = terms(&cluster);

    let next_time = Arc::new(AtomicI64::new(1_000));
    let (acked, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let stop_at = Instant::now() + FLOOD;
    let mut writers = Vec::new();
    for node in 0..cluster.nodes.len() {
        let client = cluster.client(node).await;
        for w in 0..WRITERS_PER_NODE {
            let mut client = client.clone();
            let (next_time, acked, refused) = (next_time.clone(), acked.clone(), refused.clone());
            writers.push(tokio::spawn(async move {
                let device = format!("root.fl.d{}", w % 4);
                while Instant::now() < stop_at {
                    let from = next_time.fetch_add(ROWS, Ordering::Relaxed);
                    let request = proto::InsertTabletReq {
                        session_id: 1,
                        tablet: Some(datanode::convert::tablet_to_wire(&tablet(
                            &device, from, 1, ROWS,
                        ))),
                    };
                    match client.insert_tablet(request).await {
                        Ok(answer) => {
                            let s = answer.into_inner();
                            assert!(s.code == 200 || s.code == 400, "{s:?}");
                            acked.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if e.code() == tonic::Code::ResourceExhausted => {
                            assert!(e.message().contains("606"), "{e}");
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("writer {w} on node {node}: {e}"),
                    }
                }
            }));
        }
    }
    for writer in writers {
        writer.await.expect("writer");
    }
    let (acked, refused) = (
        acked.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
    );
    assert!(acked > 0, "nothing was taken");
    assert!(
        refused > 0,
        "the flood never reached the request limit ({acked} taken)"
    );
    let counted: u64 = cluster
        .nodes
        .iter()
        .map(|n| metric(&n.metrics_text(), "session_requests_refused_total"))
        .sum();
    assert_eq!(counted, refused, "every refusal is counted");

    let after = terms(&cluster);
    assert_eq!(
        before, after,
        "a region changed term or leader during the flood ({acked} writes taken, {refused} refused)"
    );
    eprintln!("flood: {acked} writes taken, {refused} refused, no election");
    cluster.stop().await;
}
