//! A replica behind its leader's truncated log catches up by a snapshot streamed in chunks
//! (`FetchSnapshot`, issue 18 item 1), then from the log; the replicas agree.

use std::collections::{BTreeMap, BTreeSet};

use datanode::DataNodeConfig;

use crate::harness::{
    datanode_config, insert_retrying, metric, tablet, wait_for, Cluster, LONG_FENCE_MS,
};

/// Flushes at every round of the flush loop, truncates past a replica more than two entries
/// behind, and streams snapshots in 4 KiB chunks: a stopped replica needs a snapshot of many
/// chunks and files.
fn truncating(config: &mut DataNodeConfig) {
    config.memtable_flush_age_ms = 100;
    config.dn_raft_log_lag_entries_max = 2;
    config.dn_snapshot_chunk_bytes = 4096;
}

/// Every replica's (applied index, digest) per region, by node.
async fn digests(cluster: &Cluster) -> BTreeMap<u64, BTreeMap<usize, (u64, u64)>> {
    let mut regions: BTreeMap<u64, BTreeMap<usize, (u64, u64)>> = BTreeMap::new();
    for node in 0..cluster.nodes.len() {
        let mut c = cluster.client(node).await;
        let Ok(resp) = c
            .region_digest(proto::RegionDigestReq {
                session_id: 1,
                region_id: 0,
                leaders_only: false,
            })
            .await
        else {
            continue;
        };
        for d in resp.into_inner().digests {
            regions
                .entry(d.region_id)
                .or_default()
                .insert(node, (d.applied_index, d.digest));
        }
    }
    regions
}

/// Waits until every node holds every region with one and the same digest.
async fn wait_until_replicas_agree(cluster: &Cluster, what: &str) {
    wait_for(what, || async {
        let regions = digests(cluster).await;
        !regions.is_empty()
            && regions.values().all(|replicas| {
                replicas.len() == cluster.nodes.len()
                    && replicas.values().collect::<BTreeSet<_>>().len() == 1
            })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_behind_a_truncated_log_downloads_a_streamed_snapshot_and_converges() {
    let mut cluster = Cluster::start_with(3, 3, LONG_FENCE_MS, truncating).await;
    let mut c0 = cluster.client(0).await;
    for d in 0..4 {
        let t = tablet(&format!("root.sg.d{d}"), 0, 10, 100);
        assert_eq!(insert_retrying(&mut c0, &t).await.code, 200);
    }
    wait_until_replicas_agree(&cluster, "replicas agree before the stop").await;

    let stopped = cluster.nodes.pop().expect("three nodes");
    // It comes back on the same internal address, the one its peers' raft transports know.
    let internal_address = stopped.internal_address.to_string();
    stopped.stop().await.expect("DataNode 2 stops");
    // Written while DataNode 2 is down, over several flushes: the leaders truncate their logs
    // past it.
    for round in 0..6 {
        for d in 0..4 {
            let from = 10_000 + round * 5_000;
            let t = tablet(&format!("root.sg.d{d}"), from, 1, 2_000);
            assert_eq!(insert_retrying(&mut c0, &t).await.code, 200);
        }
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    }

    let mut config = datanode_config(cluster.dir.path(), 2, &cluster.cn_address);
    truncating(&mut config);
    config.dn_internal_address = internal_address;
    cluster
        .nodes
        .push(datanode::start(config).await.expect("DataNode 2 restarts"));
    wait_until_replicas_agree(&cluster, "the restarted replica catches up").await;
    let restarted = cluster.nodes[2].metrics_text();
    assert!(
        metric(&restarted, "snapshot_downloads_total") >= 1,
        "the restarted replica caught up by snapshot"
    );
    assert!(metric(&restarted, "snapshot_received_bytes_total") > 4096);
    assert_eq!(metric(&restarted, "snapshot_download_failures_total"), 0);
    assert!(metric(&restarted, "raft_snapshots_restored_total") >= 1);
    let sent: u64 = cluster.nodes[..2]
        .iter()
        .map(|n| metric(&n.metrics_text(), "snapshot_sent_bytes_total"))
        .sum();
    assert_eq!(sent, metric(&restarted, "snapshot_received_bytes_total"));

    // It goes on from the log.
    for d in 0..4 {
        let t = tablet(&format!("root.sg.d{d}"), 100_000, 1, 500);
        assert_eq!(insert_retrying(&mut c0, &t).await.code, 200);
    }
    wait_until_replicas_agree(&cluster, "the replicas agree after more writes").await;
    cluster.stop().await;
}
