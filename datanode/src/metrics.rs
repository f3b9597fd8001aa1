//! Prometheus text format on `dn_metrics_address` (`GET /metrics`; any path answers the same).
//! A minimal HTTP/1.0 responder: one request per connection, bounded request size, bounded
//! concurrent connections.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use consensus::Metrics as RaftMetrics;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::node::Shared;

/// Counters of the DataNode service.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Points acknowledged to sessions.
    pub write_points: AtomicU64,
    /// Region writes (sub-tablets) acknowledged to sessions.
    pub write_requests: AtomicU64,
    /// Sum of session write latencies in microseconds (with `write_requests` gives the mean).
    pub write_latency_us_sum: AtomicU64,
    /// Region-write attempts the coordinator retried (536, leader change, connection loss).
    pub coordinator_retries: AtomicU64,
    /// Forwarded region writes this node answered 536 or 905 to (the proxy layer).
    pub proxy_rejections: AtomicU64,
    /// Region writes forwarded to another DataNode.
    pub forwarded_writes: AtomicU64,
    /// Session writes answered 400 REDIRECTION_RECOMMEND (the device's leader is elsewhere).
    pub write_redirects: AtomicU64,
    /// Writes refused at the coordinator with 536 because the lease was fenced.
    pub fenced_writes: AtomicU64,
    /// Reads refused with 535.
    pub fenced_reads: AtomicU64,
    /// Schema-cache misses that went to the ConfigNode.
    pub schema_fetches: AtomicU64,
    /// Partition-cache misses that went to the ConfigNode.
    pub partition_fetches: AtomicU64,
    /// Heartbeats processed (renewals).
    pub heartbeats: AtomicU64,
    /// Heartbeats refused (other incarnation, older term or sequence).
    pub heartbeats_refused: AtomicU64,
    /// Invalidations acknowledged.
    pub invalidations: AtomicU64,
    /// Times the raft node was switched to fenced (its leaders step aside).
    pub raft_fenced_switches: AtomicU64,
}

/// Increments a counter.
pub fn inc(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Adds to a counter.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// The metrics page.
pub(crate) fn render(shared: &Shared) -> String {
    let mut out = String::new();
    let mut line = |name: &str, kind: &str, help: &str, value: u64| {
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    };
    let lease = &shared.lease;
    line(
        "metadata_lease_state",
        "gauge",
        "Lease state: 0 NORMAL, 1 NEED_CLEAR, 2 CACHE_CLEARING, 3 CACHE_CLEARED, 4 PULLING, 5 PULL_FAILED.",
        lease.state() as u64,
    );
    line(
        "metadata_lease_live",
        "gauge",
        "1 while the metadata lease is live.",
        u64::from(lease.is_live()),
    );
    line(
        "metadata_lease_heartbeat_age_ms",
        "gauge",
        "Milliseconds since the last processed heartbeat (-1 never is reported as max).",
        lease.heartbeat_age_ms().unwrap_or(u64::MAX),
    );
    line(
        "metadata_lease_incarnation_epoch",
        "gauge",
        "This DataNode's incarnation epoch.",
        lease.incarnation(),
    );
    let lm = lease.metrics();
    line(
        "metadata_lease_fence_transitions_total",
        "counter",
        "NORMAL -> NEED_CLEAR transitions.",
        get(&lm.fence_transitions),
    );
    line(
        "metadata_lease_recoveries_total",
        "counter",
        "Completed lease recoveries (clear + pull).",
        get(&lm.recoveries),
    );
    line(
        "metadata_lease_pull_failures_total",
        "counter",
        "Failed metadata pulls during recovery.",
        get(&lm.pull_failures),
    );
    let m = &shared.metrics;
    for (name, help, counter) in [
        (
            "write_points_total",
            "Points acknowledged to sessions.",
            &m.write_points,
        ),
        (
            "write_region_requests_total",
            "Region writes acknowledged to sessions.",
            &m.write_requests,
        ),
        (
            "write_latency_us_sum",
            "Sum of session write latencies, microseconds.",
            &m.write_latency_us_sum,
        ),
        (
            "coordinator_write_retries_total",
            "Region-write attempts retried by the coordinator.",
            &m.coordinator_retries,
        ),
        (
            "proxy_write_rejections_total",
            "Forwarded region writes answered 536 or 905.",
            &m.proxy_rejections,
        ),
        (
            "forwarded_writes_total",
            "Region writes forwarded to another DataNode.",
            &m.forwarded_writes,
        ),
        (
            "write_redirects_total",
            "Session writes answered 400 with the region leader's address.",
            &m.write_redirects,
        ),
        (
            "fenced_writes_total",
            "Session writes refused with 536 at the coordinator.",
            &m.fenced_writes,
        ),
        (
            "fenced_reads_total",
            "Reads refused with 535.",
            &m.fenced_reads,
        ),
        (
            "schema_fetches_total",
            "Schema-cache misses sent to the ConfigNode.",
            &m.schema_fetches,
        ),
        (
            "partition_fetches_total",
            "Partition-cache misses sent to the ConfigNode.",
            &m.partition_fetches,
        ),
        ("heartbeats_total", "Heartbeats processed.", &m.heartbeats),
        (
            "heartbeats_refused_total",
            "Heartbeats refused.",
            &m.heartbeats_refused,
        ),
        (
            "invalidations_total",
            "Cache invalidations acknowledged.",
            &m.invalidations,
        ),
        (
            "raft_fenced_switches_total",
            "Times the raft node was fenced (leaders step aside).",
            &m.raft_fenced_switches,
        ),
    ] {
        line(name, "counter", help, get(counter));
    }
    let (retries, exhausted) = shared
        .regions
        .read()
        .values()
        .fold((0, 0), |(r, e), region| {
            (
                r + get(&region.metrics.write_retries),
                e + get(&region.metrics.retries_exhausted),
            )
        });
    line(
        "state_machine_write_retries_total",
        "counter",
        "Fenced applies retried by region state machines.",
        retries,
    );
    line(
        "state_machine_retries_exhausted_total",
        "counter",
        "Times a state machine's retry budget ran out (536 to the apply proxy).",
        exhausted,
    );
    if let Some(raft) = shared.raft_metrics.get() {
        for (name, help, counter) in [
            (
                "raft_apply_retries_total",
                "Recoverable apply errors retried by the apply proxy.",
                &raft.apply_retries,
            ),
            (
                "raft_entries_applied_total",
                "Entries applied.",
                &raft.entries_applied,
            ),
            (
                "raft_proposals_total",
                "Proposals accepted.",
                &raft.proposals,
            ),
            (
                "raft_fsyncs_total",
                "Synced raft log batches (one fdatasync each).",
                &raft.synced_batches,
            ),
            (
                "raft_fenced_transfers_total",
                "Leadership transfers started because this node is fenced.",
                &raft.fenced_transfers,
            ),
        ] {
            line(name, "counter", help, RaftMetrics::get(counter));
        }
    }
    line(
        "regions_hosted",
        "gauge",
        "Region replicas on this DataNode.",
        shared.regions.read().len() as u64,
    );
    out
}

const CONNECTIONS_MAX: usize = 16;
const REQUEST_BYTES_MAX: usize = 8192;

/// Serves the page until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let permits = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            continue;
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // Over the limit: close at once rather than queue.
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut request = vec![0u8; REQUEST_BYTES_MAX];
            let mut read = 0;
            // Read until the end of the headers (or the limit); the request itself is ignored.
            while read < request.len() {
                match tokio::time::timeout(
                    std::time::Duration::from_secs(2),
                    socket.read(&mut request[read..]),
                )
                .await
                {
                    Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                    Ok(Ok(n)) => {
                        read += n;
                        if request[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                }
            }
            let body = render(&shared);
            let response = format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            if let Err(e) = socket.write_all(response.as_bytes()).await {
                tracing::debug!("metrics response: {e}");
            }
        });
    }
}
