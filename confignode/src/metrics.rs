//! Prometheus text metrics over plain HTTP on `cn_metrics_address` (every path is /metrics):
//! leadership, raft progress, the registry and, on the leader, each DataNode's lease as the
//! ConfigNode sees it. Written with and served by `runtime::metrics`.

use std::sync::Arc;

use consensus::StateRole;
use runtime::metrics::{HttpRequest, HttpResponse, Page};
use tokio::net::TcpListener;

use crate::shared::Shared;

/// The metrics text.
pub(crate) fn render(shared: &Shared) -> String {
    let mut page = Page::new();
    let status = shared.group.leader_status();
    let leader = status.as_ref().is_some_and(|s| s.role == StateRole::Leader);
    let mut gauge = |name: &str, help: &str, samples: Vec<(String, u64)>| {
        page.samples(name, "gauge", help, samples);
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
    let state = shared.group.state();
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
        let now = shared.leader.clock.now_ms();
        let tracker = shared.leader.tracker.lock();
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
        let floor = shared.leader.floor_rounds();
        gauge(
            "confignode_fence_floor",
            "The fence floor of the last round every region confirmed under this leader \
             (0: none yet).",
            vec![(String::new(), floor.raised())],
        );
        page.samples(
            "confignode_fence_floor_rounds_total",
            "counter",
            "Fence-floor rounds every region confirmed.",
            vec![(String::new(), floor.completed())],
        );
    }
    drop(state);
    page.into_string()
}

/// Serves the page until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    runtime::metrics::serve(listener, move |_: &HttpRequest<'_>| {
        HttpResponse::metrics(render(&shared))
    })
    .await
}
