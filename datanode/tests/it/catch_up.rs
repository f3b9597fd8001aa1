//! A replica behind its leader's truncated log catches up by a snapshot streamed in chunks
//! (`FetchSnapshot`, issue 18 item 1), then from the log; the replicas agree. The snapshots the
//! leaders built are then removed once unused for `dn_snapshot_keep_ms` (REVIEW-2026-12-05
//! N10: their hard links kept compacted and deleted data on disk until the next build or
//! restart).

use std::path::Path;

use datanode::DataNodeConfig;

use crate::harness::{
    insert_retrying, metric, noise_tablet, restart_on, tablet, truncating_logs, wait_for,
    wait_until_replicas_agree, Cluster, LONG_FENCE_MS,
};

/// [`truncating_logs`], with built snapshots kept one second after their last use.
fn truncating_and_releasing(config: &mut DataNodeConfig) {
    truncating_logs(config);
    config.snapshot.dn_snapshot_keep_ms = 1000;
}

/// Entries of `<data dir>/regions/*/snapshots/` (built, being built or released ones).
fn built_snapshot_entries(data_dir: &Path) -> Vec<String> {
    let Ok(regions) = std::fs::read_dir(data_dir.join("regions")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for region in regions.flatten() {
        if let Ok(entries) = std::fs::read_dir(region.path().join("snapshots")) {
            for entry in entries.flatten() {
                found.push(entry.path().display().to_string());
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_behind_a_truncated_log_downloads_a_streamed_snapshot_and_converges() {
    let mut cluster = Cluster::start_with(3, 3, LONG_FENCE_MS, truncating_and_releasing).await;
    let mut c0 = cluster.client(0).await;
    for d in 0..4 {
        let t = tablet(&format!("root.sg.d{d}"), 0, 10, 100);
        assert_eq!(insert_retrying(&mut c0, &t).await.code, 200);
    }
    wait_until_replicas_agree(&cluster, "replicas agree before the stop").await;

    let stopped = cluster.nodes.pop().expect("three nodes");
    let internal_address = stopped.internal_address.to_string();
    stopped.stop().await.expect("DataNode 2 stops");
    // Written while DataNode 2 is down, over several flushes: the leaders truncate their logs
    // past it, and its snapshot is files of several chunks each.
    for round in 0..6 {
        for d in 0..4 {
            let t = noise_tablet(&format!("root.sg.d{d}"), 10_000 + round * 5_000, 2_000);
            assert_eq!(insert_retrying(&mut c0, &t).await.code, 200);
        }
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    }

    restart_on(&mut cluster, 2, internal_address, truncating_and_releasing).await;
    wait_until_replicas_agree(&cluster, "the restarted replica catches up").await;
    let restarted = cluster.nodes[2].metrics_text();
    assert!(
        metric(&restarted, "snapshot_downloads_total") >= 1,
        "the restarted replica caught up by snapshot"
    );
    assert!(metric(&restarted, "snapshot_received_bytes_total") > 4 * 4096);
    assert_eq!(metric(&restarted, "snapshot_download_failures_total"), 0);
    assert!(metric(&restarted, "raft_snapshots_restored_total") >= 1);
    // Every byte sent was received once: no download repeated.
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

    // Unused for a second, every built snapshot goes, and with it the space it pinned.
    let generated: u64 = cluster
        .nodes
        .iter()
        .map(|n| metric(&n.metrics_text(), "raft_snapshots_generated_total"))
        .sum();
    assert!(generated >= 1, "a leader built a snapshot");
    let dirs: Vec<std::path::PathBuf> = (0..3)
        .map(|i| cluster.dir.path().join(format!("dn{i}")))
        .collect();
    wait_for("every built snapshot removed once unused", || async {
        let left: Vec<String> = dirs
            .iter()
            .flat_map(|d| built_snapshot_entries(d))
            .collect();
        let bytes: u64 = cluster
            .nodes
            .iter()
            .map(|n| metric(&n.metrics_text(), "snapshot_built_bytes"))
            .sum();
        left.is_empty() && bytes == 0
    })
    .await;
    let released: u64 = cluster
        .nodes
        .iter()
        .map(|n| metric(&n.metrics_text(), "snapshot_released_total"))
        .sum();
    assert!(released >= 1, "{released} snapshots released");
    cluster.stop().await;
}
