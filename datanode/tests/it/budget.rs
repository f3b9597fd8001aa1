//! The memtable budget: writes that outpace flushes are refused with 606 (and succeed once a
//! flush has freed memory) instead of growing memory without bound.

use std::time::Duration;

use crate::harness::{assert_s1_matches, insert, metric, query_ok, tablet, Cluster, LONG_FENCE_MS};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_faster_than_flush_get_606_and_memtables_stay_within_the_budget() {
    const BUDGET: u64 = 2 << 20;
    // One tablet's memtable bytes: the most a write admitted just under the budget adds.
    const ONE_TABLET: u64 = 512 << 10;
    let cluster = Cluster::start_with(1, 1, LONG_FENCE_MS, |c| {
        c.storage.memtable_flush_bytes = BUDGET;
        c.storage.memtable_budget_bytes = BUDGET;
        c.storage.memtable_flush_age_ms = 3_600_000;
    })
    .await;
    let mut client = cluster.client(0).await;
    let (mut rejected, mut peak) = (0, 0);
    const TABLETS: i64 = 40;
    const ROWS: i64 = 5000;
    for i in 0..TABLETS {
        let t = tablet("root.sg.d1", i * ROWS, 1, ROWS);
        loop {
            let s = insert(&mut client, &t).await;
            peak = peak.max(metric(&cluster.nodes[0].metrics_text(), "memtable_bytes"));
            match s.code {
                200 => break,
                606 => {
                    assert!(s.message.contains("memtable_budget_bytes"), "{s:?}");
                    rejected += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                _ => panic!("tablet {i}: {s:?}"),
            }
        }
    }
    // The coordinator retries a 606 itself (with backoff, up to remote_write_max_retry_ms), so
    // the refusals show on the server; a client sees one only when that wait runs out.
    let refusals = metric(
        &cluster.nodes[0].metrics_text(),
        "memtable_budget_rejections_total",
    );
    assert!(refusals > 0, "the writer never outpaced the flushes");
    assert!(refusals >= rejected);
    assert!(
        peak <= BUDGET + ONE_TABLET,
        "memtables held {peak} bytes, budget {BUDGET}"
    );
    let all = tablet("root.sg.d1", 0, 1, TABLETS * ROWS);
    let resp = query_ok(&mut client, "root.sg.d1", 0, TABLETS * ROWS).await;
    assert_s1_matches(&resp, &all);
    cluster.stop().await;
}
