//! Prometheus text format on `dn_metrics_address` (`GET /metrics`; any path answers the same),
//! written with and served by `runtime::metrics` (bounded request size and connections).
//!
//! Every metric is declared once below, in an [`Area`] with how the node's [`Shared`] state
//! gives its value; [`PAGE`] lists the areas in page order. The page is rendered from that list
//! and so is the table of metrics in `docs/operating.md` (a test keeps it in sync).
//!
//! With the feature `failpoints` the same server also controls the `fail` crate's failpoints at
//! run time, like TiKV's status server, so a test harness can arm them in a running binary:
//! `PUT /fail/<name>` with the action as the body (e.g. `return(60000)`, `off`, `1*return`) calls
//! `fail::cfg(name, action)`; `DELETE /fail/<name>` calls `fail::remove(name)`; `GET /fail` lists
//! the armed ones. Answers: 200 with a one-line body, 400 when the action does not parse.
//! Avoid the `pause` action on handlers that run on the async runtime: it blocks a worker thread.

use std::sync::Arc;

use consensus::Metrics as RaftMetrics;
use runtime::metrics::{get, Area, HttpRequest, HttpResponse, MetricDoc, Values};
use tokio::net::TcpListener;

use crate::parts::Shared;

/// Every area of the page, in page order.
pub(crate) const PAGE: &[&dyn Area<Shared>] = &[
    &LEASE,
    &SERVICE,
    &SERVER,
    &TRANSPORT,
    &STATE_MACHINES,
    &RAFT,
    &REGIONS,
    &SNAPSHOT_TRANSFERS,
    &STORAGE,
    &STORAGE_COUNTERS,
    &MEMORY_AND_FILES,
];

/// The metrics page.
pub(crate) fn render(shared: &Shared) -> String {
    runtime::metrics::render(PAGE, shared)
}

/// The metadata lease: state, age, incarnation, transitions and recoveries.
const LEASE: Values<Shared, 7> = Values {
    docs: [
        MetricDoc::gauge(
            "metadata_lease_state",
            "Lease state: 0 NORMAL, 1 NEED_CLEAR, 2 CACHE_CLEARING, 3 CACHE_CLEARED, 4 PULLING, 5 PULL_FAILED.",
        ),
        MetricDoc::gauge("metadata_lease_live", "1 while the metadata lease is live."),
        MetricDoc::gauge(
            "metadata_lease_heartbeat_age_ms",
            "Milliseconds since the last processed heartbeat (-1 never is reported as max).",
        ),
        MetricDoc::gauge(
            "metadata_lease_incarnation_epoch",
            "This DataNode's incarnation epoch.",
        ),
        MetricDoc::counter(
            "metadata_lease_fence_transitions_total",
            "NORMAL -> NEED_CLEAR transitions.",
        ),
        MetricDoc::counter(
            "metadata_lease_recoveries_total",
            "Completed lease recoveries (clear + pull).",
        ),
        MetricDoc::counter(
            "metadata_lease_pull_failures_total",
            "Failed metadata pulls during recovery.",
        ),
    ],
    read: |shared| {
        let lease = shared.metadata.lease();
        let lm = lease.metrics();
        Some([
            lease.state() as u64,
            u64::from(lease.is_live()),
            lease.heartbeat_age_ms().unwrap_or(u64::MAX),
            lease.incarnation(),
            get(&lm.fence_transitions),
            get(&lm.recoveries),
            get(&lm.pull_failures),
        ])
    },
};

/// The service's own counters ([`crate::metrics::Metrics`]): writes, fencing and relays, the
/// ConfigNode link.
const SERVICE: Values<Shared, 22> = Values {
    docs: [
        MetricDoc::counter("write_points_total", "Points acknowledged to sessions."),
        MetricDoc::counter(
            "write_region_requests_total",
            "Region writes acknowledged to sessions.",
        ),
        MetricDoc::counter(
            "write_latency_us_sum",
            "Sum of session write latencies, microseconds.",
        ),
        MetricDoc::counter(
            "coordinator_write_retries_total",
            "Region-write attempts retried by the coordinator.",
        ),
        MetricDoc::counter(
            "proxy_write_rejections_total",
            "Forwarded region writes answered 536 or 905.",
        ),
        MetricDoc::counter(
            "forwarded_writes_total",
            "Region writes forwarded to another DataNode.",
        ),
        MetricDoc::counter(
            "write_redirects_total",
            "Session writes answered 400 with the region leader's address.",
        ),
        MetricDoc::counter(
            "fenced_writes_total",
            "Session writes refused with 536 at the coordinator.",
        ),
        MetricDoc::counter(
            "relayed_writes_total",
            "Session writes a fenced coordinator relayed to a peer DataNode holding its lease.",
        ),
        MetricDoc::counter(
            "relayed_writes_received_total",
            "Session writes relayed here by a fenced peer DataNode.",
        ),
        MetricDoc::counter(
            "relayed_lookups_total",
            "Series-type lookups a fenced coordinator relayed to a peer DataNode holding its lease.",
        ),
        MetricDoc::counter(
            "relayed_deletes_total",
            "Deletions of points a fenced coordinator relayed to a peer DataNode holding its lease.",
        ),
        MetricDoc::counter(
            "relay_timeouts_total",
            "Relayed writes or deletions whose peer did not answer in time (answered 712).",
        ),
        MetricDoc::counter(
            "confignode_requests_total",
            "Requests forwarded or made to the ConfigNode for sessions and writes.",
        ),
        MetricDoc::counter(
            "confignode_deadlines_total",
            "Requests to the ConfigNode that ran out of dn_confignode_deadline_ms.",
        ),
        MetricDoc::counter("fenced_reads_total", "Reads refused with 535."),
        MetricDoc::counter(
            "schema_fetches_total",
            "Schema-cache misses sent to the ConfigNode.",
        ),
        MetricDoc::counter(
            "partition_fetches_total",
            "Partition-cache misses sent to the ConfigNode.",
        ),
        MetricDoc::counter("heartbeats_total", "Heartbeats processed."),
        MetricDoc::counter("heartbeats_refused_total", "Heartbeats refused."),
        MetricDoc::counter("invalidations_total", "Cache invalidations acknowledged."),
        MetricDoc::counter(
            "raft_fenced_switches_total",
            "Times the raft node was fenced (leaders step aside).",
        ),
    ],
    read: |shared| {
        let (w, f, c) = (
            &shared.metrics.writes,
            &shared.metrics.fencing,
            &shared.metrics.confignode,
        );
        Some([
            get(&w.write_points),
            get(&w.write_requests),
            get(&w.write_latency_us_sum),
            get(&w.coordinator_retries),
            get(&w.proxy_rejections),
            get(&w.forwarded_writes),
            get(&w.write_redirects),
            get(&f.fenced_writes),
            get(&f.relayed_writes),
            get(&f.relayed_writes_received),
            get(&f.relayed_lookups),
            get(&f.relayed_deletes),
            get(&f.relay_timeouts),
            get(&c.confignode_requests),
            get(&c.confignode_deadlines),
            get(&f.fenced_reads),
            get(&c.schema_fetches),
            get(&c.partition_fetches),
            get(&c.heartbeats),
            get(&c.heartbeats_refused),
            get(&c.invalidations),
            get(&f.raft_fenced_switches),
        ])
    },
};

/// The session and internal servers' bounds: what is open and running, what was refused.
const SERVER: Values<Shared, 16> = Values {
    docs: [
        MetricDoc::gauge(
            "session_connections_open",
            "session port: client connections open (handshakes, gRPC and Thrift sessions).",
        ),
        MetricDoc::gauge(
            "session_handshakes_open",
            "session port: connections in their handshake (not yet gRPC or logged in).",
        ),
        MetricDoc::counter(
            "session_handshakes_evicted_total",
            "session port: handshakes closed to make room for newer connections.",
        ),
        MetricDoc::counter(
            "session_handshakes_timed_out_total",
            "session port: handshakes closed past dn_rpc_handshake_timeout_ms.",
        ),
        MetricDoc::gauge(
            "session_grpc_connections_open",
            "session port: gRPC connections open.",
        ),
        MetricDoc::counter(
            "session_grpc_connections_refused_total",
            "session port: gRPC connections closed past dn_rpc_grpc_connections_max.",
        ),
        MetricDoc::gauge(
            "session_thrift_sessions_open",
            "session port: Thrift connections logged in.",
        ),
        MetricDoc::counter(
            "session_thrift_logins_refused_total",
            "session port: Thrift logins refused past dn_rpc_max_concurrent_client_num.",
        ),
        MetricDoc::gauge(
            "query_results_bytes",
            "bytes of memory the open query results hold (as results are charged).",
        ),
        MetricDoc::counter(
            "query_results_refused_total",
            "queries refused past query_result_bytes_max or query_results_bytes_max_per_node.",
        ),
        MetricDoc::gauge(
            "internal_connections_open",
            "internal server: connections open.",
        ),
        MetricDoc::counter(
            "internal_connections_refused_total",
            "internal server: connections closed at accept past the connection limit.",
        ),
        MetricDoc::gauge(
            "session_requests_running",
            "session server: requests in progress (raft streams aside).",
        ),
        MetricDoc::counter(
            "session_requests_refused_total",
            "session server: requests answered RESOURCE_EXHAUSTED past the request limit.",
        ),
        MetricDoc::gauge(
            "internal_requests_running",
            "internal server: requests in progress (raft streams aside).",
        ),
        MetricDoc::counter(
            "internal_requests_refused_total",
            "internal server: requests answered RESOURCE_EXHAUSTED past the request limit.",
        ),
    ],
    read: |shared| {
        let port = &shared.clients.port_gate;
        let (internal, session) = (&shared.internal.gate, &shared.clients.session_gate);
        let results = &shared.clients.results;
        Some([
            (port.handshakes_open() + port.grpc_connections_open() + port.thrift_sessions_open())
                as u64,
            port.handshakes_open() as u64,
            get(&port.handshakes_evicted),
            get(&port.handshakes_timed_out),
            port.grpc_connections_open() as u64,
            get(&port.grpc_refused),
            port.thrift_sessions_open() as u64,
            get(&port.thrift_sessions_refused),
            results.used() as u64,
            get(&results.refused_result) + get(&results.refused_node),
            internal.connections_open() as u64,
            get(&internal.connections_refused),
            session.requests_running() as u64,
            get(&session.requests_refused),
            internal.requests_running() as u64,
            get(&internal.requests_refused),
        ])
    },
};

/// The raft transport: what went to peers (catch-up traffic included) and what was dropped.
const TRANSPORT: Values<Shared, 3> = Values {
    docs: [
        MetricDoc::counter("raft_sent_messages_total", "Raft messages sent to peers."),
        MetricDoc::counter(
            "raft_sent_bytes_total",
            "Bytes of raft messages sent to peers (appends, snapshots, heartbeats).",
        ),
        MetricDoc::counter(
            "raft_dropped_messages_total",
            "Raft messages dropped before sending (a full lane, no address, a failed stream).",
        ),
    ],
    read: |shared| {
        let t = &shared.internal.raft_transport;
        Some([
            get(&t.sent_messages),
            get(&t.sent_bytes),
            get(&t.dropped_messages),
        ])
    },
};

/// The region state machines' fenced applies, over every region hosted.
const STATE_MACHINES: Values<Shared, 2> = Values {
    docs: [
        MetricDoc::counter(
            "state_machine_write_retries_total",
            "Fenced applies retried by region state machines.",
        ),
        MetricDoc::counter(
            "state_machine_retries_exhausted_total",
            "Times a state machine's retry budget ran out (536 to the apply proxy).",
        ),
    ],
    read: |shared| {
        let machines = shared.host.state_machine_metrics();
        Some(machines.iter().fold([0, 0], |[retries, exhausted], m| {
            [
                retries + get(&m.write_retries),
                exhausted + get(&m.retries_exhausted),
            ]
        }))
    },
};

/// The raft node of the region groups (absent until it runs).
const RAFT: Values<Shared, 14> = Values {
    docs: [
        MetricDoc::counter(
            "raft_apply_retries_total",
            "Recoverable apply errors retried by the apply proxy.",
        ),
        MetricDoc::counter("raft_entries_applied_total", "Entries applied."),
        MetricDoc::counter("raft_proposals_total", "Proposals accepted."),
        MetricDoc::counter(
            "raft_fsyncs_total",
            "Synced raft log batches (one fdatasync each).",
        ),
        MetricDoc::counter(
            "raft_fenced_transfers_total",
            "Leadership transfers started because this node is fenced.",
        ),
        MetricDoc::counter(
            "raft_appends_refused_unapplied_total",
            "Append messages refused while a region held dn_raft_unapplied_bytes_max unapplied.",
        ),
        MetricDoc::counter(
            "raft_misaddressed_messages_total",
            "Raft messages dropped as addressed to another node id (e.g. this address's wiped predecessor).",
        ),
        MetricDoc::counter(
            "raft_snapshots_generated_total",
            "Region snapshots built for followers behind the leader's compacted log.",
        ),
        MetricDoc::counter(
            "raft_snapshots_rebuilt_total",
            "Region snapshots built again because the one held did not serve a follower (below the log's start, or not naming it).",
        ),
        MetricDoc::counter(
            "raft_snapshot_rebuilds_refused_total",
            "Snapshot requests not rebuilt: the region has not moved past the snapshot held (a rebuild would be the same).",
        ),
        MetricDoc::counter(
            "raft_snapshots_released_total",
            "Built region snapshots dropped after no replica used them for dn_snapshot_keep_ms.",
        ),
        MetricDoc::counter(
            "raft_snapshots_restored_total",
            "Region snapshots restored into this node's replicas.",
        ),
        MetricDoc::gauge(
            "raft_entry_cache_bytes",
            "Bytes of raft entries held in memory over all regions (dn_raft_entry_cache_bytes at most).",
        ),
        MetricDoc::gauge(
            "raft_snapshot_builds",
            "Region snapshots being built off the raft thread (dn_raft_snapshot_builds_max at most).",
        ),
    ],
    read: |shared| {
        let raft = shared.host.raft_metrics()?;
        Some(
            [
                &raft.apply_retries,
                &raft.entries_applied,
                &raft.proposals,
                &raft.synced_batches,
                &raft.fenced_transfers,
                &raft.appends_refused_unapplied,
                &raft.misaddressed_messages,
                &raft.snapshots.generated,
                &raft.snapshots.rebuilt,
                &raft.snapshots.rebuilds_refused,
                &raft.snapshots.released,
                &raft.snapshots.restored,
                &raft.entry_cache_bytes,
                &raft.snapshots.builds,
            ]
            .map(RaftMetrics::get),
        )
    },
};

/// The region replicas hosted, and how far their applies trail their commits: catching up
/// after a partition (issue 38 item 5).
const REGIONS: Values<Shared, 3> = Values {
    docs: [
        MetricDoc::gauge("regions_hosted", "Region replicas on this DataNode."),
        MetricDoc::gauge(
            "raft_unapplied_entries",
            "Committed raft entries not applied yet, summed over this node's region replicas.",
        ),
        MetricDoc::gauge(
            "raft_regions_applying",
            "Region replicas here whose apply trails their commit index.",
        ),
    ],
    read: |shared| {
        let (mut unapplied, mut applying) = (0u64, 0u64);
        for id in shared.host.region_ids() {
            if let Some(status) = shared.host.group_status(id) {
                let behind = status.commit.saturating_sub(status.applied);
                unapplied += behind;
                applying += u64::from(behind > 0);
            }
        }
        Some([shared.host.region_count() as u64, unapplied, applying])
    },
};

/// Region snapshots streamed to and downloaded from other replicas, and those kept built.
const SNAPSHOT_TRANSFERS: Values<Shared, 9> = Values {
    docs: [
        MetricDoc::counter(
            "snapshot_sent_bytes_total",
            "Bytes of region snapshots streamed to other replicas.",
        ),
        MetricDoc::counter(
            "snapshot_received_bytes_total",
            "Bytes of region snapshots downloaded from other replicas.",
        ),
        MetricDoc::counter(
            "snapshot_downloads_total",
            "Region snapshots downloaded whole and checked.",
        ),
        MetricDoc::counter(
            "snapshot_download_failures_total",
            "Snapshot downloads that stopped (resumed at a later offer).",
        ),
        MetricDoc::counter(
            "snapshot_download_resumed_files_total",
            "Snapshot files whose download continued from what an earlier attempt staged.",
        ),
        MetricDoc::gauge(
            "snapshot_downloads",
            "Snapshot downloads running (dn_snapshot_receives_max at most).",
        ),
        MetricDoc::counter(
            "snapshot_released_total",
            "Region snapshots built here and removed after no replica used them for dn_snapshot_keep_ms.",
        ),
        MetricDoc::gauge(
            "snapshot_built_bytes",
            "Bytes of the files of the region snapshots this node keeps built (hard links).",
        ),
        MetricDoc::gauge(
            "snapshot_pinned_bytes",
            "Of snapshot_built_bytes, files only a snapshot still links: compacted, expired or deleted data kept on disk.",
        ),
    ],
    read: |shared| {
        let transfers = shared.host.snapshots().metrics();
        Some(
            [
                &transfers.sent_bytes,
                &transfers.received_bytes,
                &transfers.downloads,
                &transfers.download_failures,
                &transfers.resumed_files,
                &transfers.downloading,
                &transfers.released,
                &transfers.built_bytes,
                &transfers.pinned_bytes,
            ]
            .map(get),
        )
    },
};

/// The storage engine's files and deletions over every region of the node.
const STORAGE: Values<Shared, 7> = Values {
    docs: [
        MetricDoc::gauge("sealed_files", "Sealed files over all regions."),
        MetricDoc::gauge(
            "sealed_files_per_partition_max",
            "The most sealed files in one time partition.",
        ),
        MetricDoc::gauge(
            "storage_partitions",
            "Time partitions holding sealed files.",
        ),
        MetricDoc::gauge(
            "compaction_pending_partitions",
            "Partitions with compaction work, as counted at the last compaction round (every 5 s).",
        ),
        MetricDoc::gauge("sealed_bytes", "Bytes of sealed files over all regions."),
        MetricDoc::gauge(
            "region_deletions_kept",
            "Series, path-prefix and time-range deletions the regions keep (REVIEW N9).",
        ),
        MetricDoc::gauge(
            "region_fence_floor_min",
            "The lowest fence floor among the regions (0: some region has none).",
        ),
    ],
    read: |shared| {
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
        Some([
            totals.sealed_files as u64,
            totals.max_files_per_partition as u64,
            totals.partitions as u64,
            totals.pending_compactions as u64,
            totals.sealed_bytes,
            deletions,
            floor_min.unwrap_or(0),
        ])
    },
};

/// Regions removed and moved, the memtable budget's refusals, compactions.
const STORAGE_COUNTERS: Values<Shared, 8> = Values {
    docs: [
        MetricDoc::counter("compactions_total", "Compactions installed."),
        MetricDoc::counter(
            "regions_removed_total",
            "Region replicas removed because the ConfigNode reported their region dropped.",
        ),
        MetricDoc::counter(
            "region_migration_steps_total",
            "Region migration steps taken as a region leader (learner added, replica replaced, leadership handed away).",
        ),
        MetricDoc::counter(
            "memtable_budget_rejections_total",
            "Inserts refused with 606 while the memtables were at memtable_budget_bytes.",
        ),
        MetricDoc::counter(
            "compaction_input_bytes_total",
            "Bytes of sealed files merged away by compactions.",
        ),
        MetricDoc::counter(
            "compaction_output_bytes_total",
            "Bytes of sealed files written by compactions.",
        ),
        MetricDoc::counter(
            "compaction_copied_bytes_total",
            "Bytes of compaction output that are input pages copied as stored, neither decoded nor encoded.",
        ),
        MetricDoc::counter(
            "ttl_expired_points_removed_total",
            "Points compactions removed because their database's TTL expired them.",
        ),
    ],
    read: |shared| {
        let m = &shared.metrics.storage;
        Some(
            [
                &m.compactions,
                &m.regions_removed,
                &m.migration_steps,
                &m.budget_rejections,
                &m.compaction_input_bytes,
                &m.compaction_output_bytes,
                &m.compaction_copied_bytes,
                &m.ttl_expired_points,
            ]
            .map(get),
        )
    },
};

/// Memtables against their budget, declared codecs, and the sealed-file descriptor cache.
const MEMORY_AND_FILES: Values<Shared, 5> = Values {
    docs: [
        MetricDoc::gauge(
            "memtable_bytes",
            "Bytes held by working and flushing memtables over all regions.",
        ),
        MetricDoc::gauge(
            "series_codecs_declared",
            "Series with a declared encoding or compressor that flushes and compactions honour.",
        ),
        MetricDoc::gauge(
            "memtable_budget_bytes",
            "The memtable budget (memtable_budget_bytes).",
        ),
        MetricDoc::gauge(
            "sealed_files_open",
            "Sealed-file descriptors open now (bounded by sealed_open_files_max).",
        ),
        MetricDoc::counter(
            "sealed_file_opens_total",
            "Sealed files opened by the descriptor cache (its misses).",
        ),
    ],
    read: |shared| {
        let files = shared.host.files();
        Some([
            shared.host.memtable_bytes() as u64,
            get(&shared.metrics.confignode.series_codecs_declared),
            shared.config.storage.memtable_budget_bytes,
            files.open_count() as u64,
            files.opens_total(),
        ])
    },
};

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

    #[test]
    fn operating_md_lists_every_metric() {
        let doc =
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operating.md"));
        let table = runtime::metrics::metric_table(PAGE);
        runtime::docs::check_generated_section(doc, "datanode-metrics", &table)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn every_metric_is_declared_once() {
        let mut names: Vec<&str> = PAGE.iter().flat_map(|a| a.docs()).map(|m| m.name).collect();
        let declared = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), declared, "a metric name is declared twice");
    }

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
