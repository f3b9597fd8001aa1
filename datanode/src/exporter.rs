//! Prometheus text format on `dn_metrics_address` (`GET /metrics`; any path answers the same),
//! written with and served by `runtime::metrics` (bounded request size and connections).
//!
//! With the feature `failpoints` the same server also controls the `fail` crate's failpoints at
//! run time, like TiKV's status server, so a test harness can arm them in a running binary:
//! `PUT /fail/<name>` with the action as the body (e.g. `return(60000)`, `off`, `1*return`) calls
//! `fail::cfg(name, action)`; `DELETE /fail/<name>` calls `fail::remove(name)`; `GET /fail` lists
//! the armed ones. Answers: 200 with a one-line body, 400 when the action does not parse.
//! Avoid the `pause` action on handlers that run on the async runtime: it blocks a worker thread.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use consensus::Metrics as RaftMetrics;
use runtime::metrics::{get, HttpRequest, HttpResponse, Page};
use tokio::net::TcpListener;

use crate::metrics::Metrics;
use crate::parts::Shared;

/// The metrics page.
pub(crate) fn render(shared: &Shared) -> String {
    let mut page = Page::new();
    lease_metrics(&mut page, shared);
    service_metrics(&mut page, &shared.metrics);
    server_metrics(&mut page, shared);
    transport_metrics(&mut page, shared);
    region_metrics(&mut page, shared);
    page.into_string()
}

/// The metadata lease: state, age, incarnation, transitions and recoveries.
fn lease_metrics(page: &mut Page, shared: &Shared) {
    let mut line = |name: &str, kind: &str, help: &str, value: u64| {
        page.samples(name, kind, help, [(String::new(), value)]);
    };
    let lease = shared.metadata.lease();
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
}

/// The session and internal servers' bounds: what is open and running, what was refused.
fn server_metrics(page: &mut Page, shared: &Shared) {
    let port = &shared.clients.port_gate;
    let (internal, session) = (&shared.internal.gate, &shared.clients.session_gate);
    for (name, kind, help, value) in [
        (
            "session_connections_open",
            "gauge",
            "session port: client connections open (handshakes, gRPC and Thrift sessions).",
            (port.handshakes_open() + port.grpc_connections_open() + port.thrift_sessions_open())
                as u64,
        ),
        (
            "session_handshakes_open",
            "gauge",
            "session port: connections in their handshake (not yet gRPC or logged in).",
            port.handshakes_open() as u64,
        ),
        (
            "session_handshakes_evicted_total",
            "counter",
            "session port: handshakes closed to make room for newer connections.",
            get(&port.handshakes_evicted),
        ),
        (
            "session_handshakes_timed_out_total",
            "counter",
            "session port: handshakes closed past dn_rpc_handshake_timeout_ms.",
            get(&port.handshakes_timed_out),
        ),
        (
            "session_grpc_connections_open",
            "gauge",
            "session port: gRPC connections open.",
            port.grpc_connections_open() as u64,
        ),
        (
            "session_grpc_connections_refused_total",
            "counter",
            "session port: gRPC connections closed past dn_rpc_grpc_connections_max.",
            get(&port.grpc_refused),
        ),
        (
            "session_thrift_sessions_open",
            "gauge",
            "session port: Thrift connections logged in.",
            port.thrift_sessions_open() as u64,
        ),
        (
            "session_thrift_logins_refused_total",
            "counter",
            "session port: Thrift logins refused past dn_rpc_max_concurrent_client_num.",
            get(&port.thrift_sessions_refused),
        ),
        (
            "query_results_bytes",
            "gauge",
            "bytes of memory the open query results hold (as results are charged).",
            shared.clients.results.used() as u64,
        ),
        (
            "query_results_refused_total",
            "counter",
            "queries refused past query_result_bytes_max or query_results_bytes_max_per_node.",
            get(&shared.clients.results.refused_result) + get(&shared.clients.results.refused_node),
        ),
        (
            "internal_connections_open",
            "gauge",
            "internal server: connections open.",
            internal.connections_open() as u64,
        ),
        (
            "internal_connections_refused_total",
            "counter",
            "internal server: connections closed at accept past the connection limit.",
            get(&internal.connections_refused),
        ),
    ] {
        page.samples(name, kind, help, [(String::new(), value)]);
    }
    for (server, gate) in [("session", session), ("internal", internal)] {
        let mut line = |name: &str, kind: &str, help: &str, value: u64| {
            page.samples(
                &format!("{server}_{name}"),
                kind,
                &format!("{server} server: {help}"),
                [(String::new(), value)],
            );
        };
        line(
            "requests_running",
            "gauge",
            "requests in progress (raft streams aside).",
            gate.requests_running() as u64,
        );
        line(
            "requests_refused_total",
            "counter",
            "requests answered RESOURCE_EXHAUSTED past the request limit.",
            get(&gate.requests_refused),
        );
    }
}

/// The raft transport: what went to peers (catch-up traffic included) and what was dropped.
fn transport_metrics(page: &mut Page, shared: &Shared) {
    let t = &shared.internal.raft_transport;
    for (name, help, counter) in [
        (
            "raft_sent_messages_total",
            "Raft messages sent to peers.",
            &t.sent_messages,
        ),
        (
            "raft_sent_bytes_total",
            "Bytes of raft messages sent to peers (appends, snapshots, heartbeats).",
            &t.sent_bytes,
        ),
        (
            "raft_dropped_messages_total",
            "Raft messages dropped before sending (a full lane, no address, a failed stream).",
            &t.dropped_messages,
        ),
    ] {
        page.samples(name, "counter", help, [(String::new(), get(counter))]);
    }
}

/// The service's own counters ([`Metrics`]).
fn service_metrics(page: &mut Page, m: &Metrics) {
    let mut line = |name: &str, kind: &str, help: &str, value: u64| {
        page.samples(name, kind, help, [(String::new(), value)]);
    };
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
            "relayed_writes_total",
            "Session writes a fenced coordinator relayed to a peer DataNode holding its lease.",
            &m.relayed_writes,
        ),
        (
            "relayed_writes_received_total",
            "Session writes relayed here by a fenced peer DataNode.",
            &m.relayed_writes_received,
        ),
        (
            "relayed_lookups_total",
            "Series-type lookups a fenced coordinator relayed to a peer DataNode holding its lease.",
            &m.relayed_lookups,
        ),
        (
            "relayed_deletes_total",
            "Deletions of points a fenced coordinator relayed to a peer DataNode holding its lease.",
            &m.relayed_deletes,
        ),
        (
            "relay_timeouts_total",
            "Relayed writes or deletions whose peer did not answer in time (answered 712).",
            &m.relay_timeouts,
        ),
        (
            "confignode_requests_total",
            "Requests forwarded or made to the ConfigNode for sessions and writes.",
            &m.confignode_requests,
        ),
        (
            "confignode_deadlines_total",
            "Requests to the ConfigNode that ran out of dn_confignode_deadline_ms.",
            &m.confignode_deadlines,
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
}

/// The region state machines, the raft node and the regions hosted.
fn region_metrics(page: &mut Page, shared: &Shared) {
    let mut line = |name: &str, kind: &str, help: &str, value: u64| {
        page.samples(name, kind, help, [(String::new(), value)]);
    };
    let (retries, exhausted) =
        shared
            .host
            .state_machine_metrics()
            .iter()
            .fold((0, 0), |(r, e), metrics| {
                (
                    r + get(&metrics.write_retries),
                    e + get(&metrics.retries_exhausted),
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
    if let Some(raft) = shared.host.raft_metrics() {
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
            (
                "raft_appends_refused_unapplied_total",
                "Append messages refused while a region held dn_raft_unapplied_bytes_max unapplied.",
                &raft.appends_refused_unapplied,
            ),
            (
                "raft_misaddressed_messages_total",
                "Raft messages dropped as addressed to another node id (e.g. this address's wiped predecessor).",
                &raft.misaddressed_messages,
            ),
            (
                "raft_snapshots_generated_total",
                "Region snapshots built for followers behind the leader's compacted log.",
                &raft.snapshots.generated,
            ),
            (
                "raft_snapshots_rebuilt_total",
                "Region snapshots built again because the one held did not serve a follower (below the log's start, or not naming it).",
                &raft.snapshots.rebuilt,
            ),
            (
                "raft_snapshot_rebuilds_refused_total",
                "Snapshot requests not rebuilt: the region has not moved past the snapshot held (a rebuild would be the same).",
                &raft.snapshots.rebuilds_refused,
            ),
            (
                "raft_snapshots_released_total",
                "Built region snapshots dropped after no replica used them for dn_snapshot_keep_ms.",
                &raft.snapshots.released,
            ),
            (
                "raft_snapshots_restored_total",
                "Region snapshots restored into this node's replicas.",
                &raft.snapshots.restored,
            ),
        ] {
            line(name, "counter", help, RaftMetrics::get(counter));
        }
        line(
            "raft_entry_cache_bytes",
            "gauge",
            "Bytes of raft entries held in memory over all regions (dn_raft_entry_cache_bytes at most).",
            RaftMetrics::get(&raft.entry_cache_bytes),
        );
        line(
            "raft_snapshot_builds",
            "gauge",
            "Region snapshots being built off the raft thread (dn_raft_snapshot_builds_max at most).",
            RaftMetrics::get(&raft.snapshots.builds),
        );
    }
    line(
        "regions_hosted",
        "gauge",
        "Region replicas on this DataNode.",
        shared.host.region_count() as u64,
    );
    // Catching up after a partition: how far the apply trails what is committed, summed over
    // the replicas here, and how many trail at all (issue 38 item 5).
    let (mut unapplied, mut applying) = (0u64, 0u64);
    for id in shared.host.region_ids() {
        if let Some(status) = shared.host.group_status(id) {
            let behind = status.commit.saturating_sub(status.applied);
            unapplied += behind;
            applying += u64::from(behind > 0);
        }
    }
    line(
        "raft_unapplied_entries",
        "gauge",
        "Committed raft entries not applied yet, summed over this node's region replicas.",
        unapplied,
    );
    line(
        "raft_regions_applying",
        "gauge",
        "Region replicas here whose apply trails their commit index.",
        applying,
    );
    let transfers = shared.host.snapshots().metrics();
    for (name, kind, help, value) in [
        (
            "snapshot_sent_bytes_total",
            "counter",
            "Bytes of region snapshots streamed to other replicas.",
            &transfers.sent_bytes,
        ),
        (
            "snapshot_received_bytes_total",
            "counter",
            "Bytes of region snapshots downloaded from other replicas.",
            &transfers.received_bytes,
        ),
        (
            "snapshot_downloads_total",
            "counter",
            "Region snapshots downloaded whole and checked.",
            &transfers.downloads,
        ),
        (
            "snapshot_download_failures_total",
            "counter",
            "Snapshot downloads that stopped (resumed at a later offer).",
            &transfers.download_failures,
        ),
        (
            "snapshot_download_resumed_files_total",
            "counter",
            "Snapshot files whose download continued from what an earlier attempt staged.",
            &transfers.resumed_files,
        ),
        (
            "snapshot_downloads",
            "gauge",
            "Snapshot downloads running (dn_snapshot_receives_max at most).",
            &transfers.downloading,
        ),
        (
            "snapshot_released_total",
            "counter",
            "Region snapshots built here and removed after no replica used them for dn_snapshot_keep_ms.",
            &transfers.released,
        ),
        (
            "snapshot_built_bytes",
            "gauge",
            "Bytes of the files of the region snapshots this node keeps built (hard links).",
            &transfers.built_bytes,
        ),
        (
            "snapshot_pinned_bytes",
            "gauge",
            "Of snapshot_built_bytes, files only a snapshot still links: compacted, expired or deleted data kept on disk.",
            &transfers.pinned_bytes,
        ),
    ] {
        line(name, kind, help, get(value));
    }
    storage_metrics(page, shared);
}

/// The storage engine's resources over every region of the node.
fn storage_metrics(page: &mut Page, shared: &Shared) {
    let mut line = |name: &str, kind: &str, help: &str, value: u64| {
        page.samples(name, kind, help, [(String::new(), value)]);
    };
    let mut totals = engine::StorageStats::default();
    let (mut deletions, mut floor_min) = (0, None::<u64>);
    for (_, region) in shared.host.regions() {
        deletions += region.deletions_kept() as u64;
        let floor = region.fence_floor();
        floor_min = Some(floor_min.map_or(floor, |f| f.min(floor)));
        let stats = region.storage_summary();
        totals.partitions += stats.partitions;
        totals.sealed_files += stats.sealed_files;
        totals.sealed_bytes += stats.sealed_bytes;
        totals.pending_compactions += stats.pending_compactions;
        totals.max_files_per_partition = totals
            .max_files_per_partition
            .max(stats.max_files_per_partition);
    }
    for (name, help, value) in [
        (
            "sealed_files",
            "Sealed files over all regions.",
            totals.sealed_files,
        ),
        (
            "sealed_files_per_partition_max",
            "The most sealed files in one time partition.",
            totals.max_files_per_partition,
        ),
        (
            "storage_partitions",
            "Time partitions holding sealed files.",
            totals.partitions,
        ),
        (
            "compaction_pending_partitions",
            "Partitions with compaction work, as counted at the last compaction round (every 5 s).",
            totals.pending_compactions,
        ),
    ] {
        line(name, "gauge", help, value as u64);
    }
    line(
        "sealed_bytes",
        "gauge",
        "Bytes of sealed files over all regions.",
        totals.sealed_bytes,
    );
    line(
        "region_deletions_kept",
        "gauge",
        "Series, path-prefix and time-range deletions the regions keep (REVIEW N9).",
        deletions,
    );
    line(
        "region_fence_floor_min",
        "gauge",
        "The lowest fence floor among the regions (0: some region has none).",
        floor_min.unwrap_or(0),
    );
    let m = &shared.metrics;
    for (name, help, counter) in [
        (
            "compactions_total",
            "Compactions installed.",
            &m.compactions,
        ),
        (
            "regions_removed_total",
            "Region replicas removed because the ConfigNode reported their region dropped.",
            &m.regions_removed,
        ),
        (
            "region_migration_steps_total",
            "Region migration steps taken as a region leader (learner added, replica replaced, leadership handed away).",
            &m.migration_steps,
        ),
        (
            "memtable_budget_rejections_total",
            "Inserts refused with 606 while the memtables were at memtable_budget_bytes.",
            &m.budget_rejections,
        ),
        (
            "compaction_input_bytes_total",
            "Bytes of sealed files merged away by compactions.",
            &m.compaction_input_bytes,
        ),
        (
            "compaction_output_bytes_total",
            "Bytes of sealed files written by compactions.",
            &m.compaction_output_bytes,
        ),
        (
            "compaction_copied_bytes_total",
            "Bytes of compaction output that are input pages copied as stored, neither decoded nor encoded.",
            &m.compaction_copied_bytes,
        ),
        (
            "ttl_expired_points_removed_total",
            "Points compactions removed because their database's TTL expired them.",
            &m.ttl_expired_points,
        ),
    ] {
        line(name, "counter", help, counter.load(Ordering::Relaxed));
    }
    line(
        "memtable_bytes",
        "gauge",
        "Bytes held by working and flushing memtables over all regions.",
        shared.host.memtable_bytes() as u64,
    );
    line(
        "series_codecs_declared",
        "gauge",
        "Series with a declared encoding or compressor that flushes and compactions honour.",
        m.series_codecs_declared.load(Ordering::Relaxed),
    );
    line(
        "memtable_budget_bytes",
        "gauge",
        "The memtable budget (memtable_budget_bytes).",
        shared.config.memtable_budget_bytes,
    );
    let files = shared.host.files();
    line(
        "sealed_files_open",
        "gauge",
        "Sealed-file descriptors open now (bounded by sealed_open_files_max).",
        files.open_count() as u64,
    );
    line(
        "sealed_file_opens_total",
        "counter",
        "Sealed files opened by the descriptor cache (its misses).",
        files.opens_total(),
    );
}

/// Serves the page (and, with the feature `failpoints`, the failpoint requests) until the task
/// is aborted.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    runtime::metrics::serve(listener, move |request: &HttpRequest<'_>| {
        failpoint_request(request).unwrap_or_else(|| HttpResponse::metrics(render(&shared)))
    })
    .await
}

/// Answers a failpoint request (`PUT` / `DELETE /fail/<name>`, `GET /fail`) with its status line
/// and body; `None` for anything else (the metrics page). Without the feature `failpoints` no
/// request is one.
#[cfg(feature = "failpoints")]
fn failpoint_request(request: &HttpRequest<'_>) -> Option<HttpResponse> {
    let (method, path) = (request.method, request.path);
    if method == "GET" && path == "/fail" {
        let armed: String = fail::list()
            .into_iter()
            .map(|(name, action)| format!("{name}={action}\n"))
            .collect();
        return Some(HttpResponse::text("200 OK", armed));
    }
    let name = path.strip_prefix("/fail/")?;
    if name.is_empty() {
        return Some(HttpResponse::text(
            "400 Bad Request",
            "no failpoint name\n".into(),
        ));
    }
    match method {
        "PUT" | "POST" => {
            let action = String::from_utf8_lossy(request.body);
            let action = action.trim();
            match fail::cfg(name, action) {
                Ok(()) => {
                    tracing::warn!(failpoint = name, action, "failpoint armed over HTTP");
                    Some(HttpResponse::text("200 OK", format!("{name}={action}\n")))
                }
                Err(e) => Some(HttpResponse::text(
                    "400 Bad Request",
                    format!("{name}: {e}\n"),
                )),
            }
        }
        "DELETE" => {
            fail::remove(name);
            tracing::warn!(failpoint = name, "failpoint removed over HTTP");
            Some(HttpResponse::text("200 OK", format!("{name} removed\n")))
        }
        _ => Some(HttpResponse::text(
            "405 Method Not Allowed",
            "PUT, DELETE or GET\n".into(),
        )),
    }
}

#[cfg(not(feature = "failpoints"))]
fn failpoint_request(_request: &HttpRequest<'_>) -> Option<HttpResponse> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime::metrics::parse_request;

    fn answer(request: &[u8]) -> Option<(&'static str, String)> {
        failpoint_request(&parse_request(request)).map(|r| (r.status, r.body))
    }

    #[cfg(not(feature = "failpoints"))]
    #[test]
    fn without_the_feature_every_request_gets_the_metrics_page() {
        assert_eq!(
            answer(b"PUT /fail/x HTTP/1.0\r\nContent-Length: 3\r\n\r\noff"),
            None
        );
    }

    #[cfg(feature = "failpoints")]
    #[test]
    fn failpoints_are_armed_listed_and_removed_over_http() {
        let scenario = fail::FailScenario::setup();
        let name = "metrics::test::http";
        let hit = || fail::eval(name, |arg| arg.unwrap_or_default());
        assert_eq!(hit(), None);
        let put = format!("PUT /fail/{name} HTTP/1.0\r\nContent-Length: 10\r\n\r\nreturn(7)\n");
        let (code, body) = answer(put.as_bytes()).unwrap();
        assert_eq!(
            (code, body.as_str()),
            ("200 OK", "metrics::test::http=return(7)\n")
        );
        assert_eq!(hit(), Some("7".to_string()));
        let (_, listed) = answer(b"GET /fail HTTP/1.0\r\n\r\n").unwrap();
        assert!(listed.contains("metrics::test::http=return(7)"), "{listed}");
        let bad = format!("PUT /fail/{name} HTTP/1.0\r\nContent-Length: 5\r\n\r\nbogus");
        assert_eq!(answer(bad.as_bytes()).unwrap().0, "400 Bad Request");
        let delete = format!("DELETE /fail/{name} HTTP/1.0\r\n\r\n");
        assert_eq!(answer(delete.as_bytes()).unwrap().0, "200 OK");
        assert_eq!(hit(), None);
        assert_eq!(answer(b"GET /metrics HTTP/1.0\r\n\r\n"), None);
        scenario.teardown();
    }
}
