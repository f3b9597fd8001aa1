//! Prometheus text metrics over plain HTTP on `cn_metrics_address`: leadership, raft progress,
//! the registry and, on the leader, each DataNode's lease as the ConfigNode sees it.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use consensus::StateRole;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::server::Shared;

/// Bytes of a request read before answering (the path is ignored: every path is /metrics).
const REQUEST_BYTES_MAX: usize = 8192;

/// The metrics text.
pub(crate) fn render(shared: &Shared) -> String {
    let mut out = String::new();
    let status = shared.leader_status();
    let leader = status.as_ref().is_some_and(|s| s.role == StateRole::Leader);
    let mut gauge = |name: &str, help: &str, samples: Vec<(String, u64)>| {
        // Writing into a String cannot fail.
        writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge").expect("String write");
        for (labels, value) in samples {
            writeln!(out, "{name}{labels} {value}").expect("String write");
        }
    };
    gauge(
        "confignode_is_leader",
        "1 if this ConfigNode leads the ConfigNode raft group.",
        vec![(String::new(), u64::from(leader))],
    );
    gauge(
        "confignode_raft_term",
        "Raft term of the ConfigNode group.",
        vec![(String::new(), status.as_ref().map_or(0, |s| s.term))],
    );
    gauge(
        "confignode_raft_applied_index",
        "Applied index of the ConfigNode group.",
        vec![(String::new(), status.as_ref().map_or(0, |s| s.applied))],
    );
    let state = shared.state.read();
    gauge(
        "confignode_metadata_version",
        "Metadata version.",
        vec![(String::new(), state.metadata_version())],
    );
    gauge(
        "confignode_pending_fence_operations",
        "DROP DATABASE / DELETE TIMESERIES operations between pending and final.",
        vec![(String::new(), state.operations().count() as u64)],
    );
    gauge(
        "confignode_region_groups",
        "Data region groups.",
        vec![(String::new(), state.regions().count() as u64)],
    );
    if leader {
        let now = shared.clock.now_ms();
        let tracker = shared.tracker.lock();
        let nodes: Vec<u64> = state.data_nodes().map(|n| n.id).collect();
        let label = |id: u64| format!("{{data_node_id=\"{id}\"}}");
        gauge(
            "confignode_datanode_last_contact_age_ms",
            "Milliseconds since the leader last reached the DataNode.",
            nodes
                .iter()
                .map(|id| (label(*id), tracker.age_ms(*id, now)))
                .collect(),
        );
        gauge(
            "confignode_datanode_holds_lease",
            "1 if the DataNode's metadata lease is live as the leader sees it.",
            nodes
                .iter()
                .map(|id| (label(*id), u64::from(tracker.holds_lease(*id, now))))
                .collect(),
        );
        gauge(
            "confignode_datanode_fenced",
            "1 once the DataNode counts as fenced (fence + margin without contact).",
            nodes
                .iter()
                .map(|id| (label(*id), u64::from(tracker.is_fenced(*id, now))))
                .collect(),
        );
    }
    out
}

/// Serves one connection at a time (the bound on concurrent scrapes), until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let mut buf = vec![0u8; REQUEST_BYTES_MAX];
        let mut read = 0;
        // Read the request head (or give up after a second): HTTP/1.1 clients wait for it.
        let head = tokio::time::timeout(Duration::from_secs(1), async {
            while read < buf.len() {
                match socket.read(&mut buf[read..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
                if buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
        })
        .await;
        if head.is_err() {
            tracing::debug!("metrics request head incomplete after 1 s; answering anyway");
        }
        let body = render(&shared);
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        if let Err(e) = socket.write_all(response.as_bytes()).await {
            tracing::debug!("metrics scrape: {e}");
        }
    }
}
