//! Prometheus text metrics over plain HTTP on `cn_metrics_address` (every path is /metrics):
//! leadership, raft progress, the registry and, on the leader, each DataNode's lease as the
//! ConfigNode sees it. Written with and served by `runtime::metrics`.
//!
//! Every metric is declared once below, in an [`Area`] with how the node's [`Shared`] state
//! gives its value; [`PAGE`] lists the areas in page order. The page is rendered from that list
//! and so is the table of metrics in `docs/operating.md` (a test keeps it in sync).

use std::sync::Arc;

use consensus::StateRole;
use runtime::metrics::{Area, HttpRequest, HttpResponse, Labelled, MetricDoc, Values};
use tokio::net::TcpListener;

use crate::shared::Shared;

/// Every area of the page, in page order.
pub(crate) const PAGE: &[&dyn Area<Shared>] = &[&GROUP, &DATANODES, &FENCE_FLOOR];

/// The metrics text.
pub(crate) fn render(shared: &Shared) -> String {
    runtime::metrics::render(PAGE, shared)
}

/// Whether this ConfigNode leads the ConfigNode group.
fn leads(shared: &Shared) -> bool {
    let status = shared.group.leader_status();
    status.is_some_and(|s| s.role == StateRole::Leader)
}

/// Leadership, raft progress and the metadata, on every ConfigNode.
const GROUP: Values<Shared, 6> = Values {
    docs: [
        MetricDoc::gauge(
            "confignode_is_leader",
            "1 if this ConfigNode leads the ConfigNode raft group.",
        ),
        MetricDoc::gauge("confignode_raft_term", "Raft term of the ConfigNode group."),
        MetricDoc::gauge(
            "confignode_raft_applied_index",
            "Applied index of the ConfigNode group.",
        ),
        MetricDoc::gauge("confignode_metadata_version", "Metadata version."),
        MetricDoc::gauge(
            "confignode_pending_fence_operations",
            "DROP DATABASE / DELETE TIMESERIES operations between pending and final.",
        ),
        MetricDoc::gauge("confignode_region_groups", "Data region groups."),
    ],
    read: |shared| {
        let status = shared.group.leader_status();
        let leader = status.as_ref().is_some_and(|s| s.role == StateRole::Leader);
        let state = shared.group.state();
        Some([
            u64::from(leader),
            status.as_ref().map_or(0, |s| s.term),
            status.as_ref().map_or(0, |s| s.applied),
            state.metadata_version(),
            state.operations().count() as u64,
            state.regions().count() as u64,
        ])
    },
};

/// Each DataNode's lease as the leader sees it (on the leader only).
const DATANODES: Labelled<Shared, 3> = Labelled {
    docs: [
        MetricDoc::gauge(
            "confignode_datanode_last_contact_age_ms",
            "Milliseconds since the leader last reached the DataNode.",
        )
        .labelled("data_node_id"),
        MetricDoc::gauge(
            "confignode_datanode_holds_lease",
            "1 if the DataNode's metadata lease is live as the leader sees it.",
        )
        .labelled("data_node_id"),
        MetricDoc::gauge(
            "confignode_datanode_fenced",
            "1 once the DataNode counts as fenced (fence + margin without contact).",
        )
        .labelled("data_node_id"),
    ],
    read: |shared| {
        if !leads(shared) {
            return None;
        }
        let now = shared.leader.clock.now_ms();
        let state = shared.group.state();
        let tracker = shared.leader.tracker.lock();
        let rows = state.data_nodes().map(|n| {
            let values = [
                tracker.age_ms(n.id, now),
                u64::from(tracker.holds_lease(n.id, now)),
                u64::from(tracker.is_fenced(n.id, now)),
            ];
            (n.id, values)
        });
        Some(rows.collect())
    },
};

/// The fence-floor rounds of this leader (on the leader only).
const FENCE_FLOOR: Values<Shared, 2> = Values {
    docs: [
        MetricDoc::gauge(
            "confignode_fence_floor",
            "The fence floor of the last round every region confirmed under this leader \
             (0: none yet).",
        ),
        MetricDoc::counter(
            "confignode_fence_floor_rounds_total",
            "Fence-floor rounds every region confirmed.",
        ),
    ],
    read: |shared| {
        leads(shared).then(|| {
            let floor = shared.leader.floor_rounds();
            [floor.raised(), floor.completed()]
        })
    },
};

/// Serves the page until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    runtime::metrics::serve(listener, move |_: &HttpRequest<'_>| {
        HttpResponse::metrics(render(&shared))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operating_md_lists_every_metric() {
        let doc =
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operating.md"));
        let table = runtime::metrics::metric_table(PAGE);
        runtime::docs::check_generated_section(doc, "confignode-metrics", &table)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
