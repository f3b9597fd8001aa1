//! The SHOW statements as result tables, with IoTDB's column names where IoTDB has the
//! statement (`SHOW DATABASES`, `SHOW TIMESERIES`, `SHOW CLUSTER`, `SHOW REGIONS`) and
//! Fencepost's own for the lease views.

use common::Value;
use session::Session;

use super::{Cell, ExecError, Outcome};

pub(super) fn names(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn text(s: impl Into<String>) -> Cell {
    Some(Value::Text(s.into()))
}

fn int(i: u64) -> Cell {
    Some(Value::Int64(i64::try_from(i).unwrap_or(i64::MAX)))
}

fn boolean(b: bool) -> Cell {
    Some(Value::Boolean(b))
}

pub(super) async fn databases(session: &Session) -> Result<Outcome, ExecError> {
    let rows = session
        .show_databases_with_ttl()
        .await?
        .into_iter()
        .map(|(d, ttl_ms)| {
            // IoTDB shows the TTL in ms, or INF when none is set.
            let ttl = match ttl_ms {
                Some(ms) => Some(Value::Int64(ms)),
                None => text("INF".to_string()),
            };
            vec![text(d), ttl]
        })
        .collect();
    Ok(Outcome::query(names(&["Database", "TTL"]), rows))
}

/// `prefix` matches whole path nodes: `root.sg` lists `root.sg.d1.s1`, not `root.sg2.d1.s1`.
pub(super) async fn timeseries(
    session: &Session,
    prefix: Option<&str>,
) -> Result<Outcome, ExecError> {
    let rows = session
        .show_timeseries(prefix.unwrap_or(""))
        .await?
        .into_iter()
        .map(|s| (format!("{}.{}", s.device, s.measurement), s))
        .filter(|(path, _)| prefix.is_none_or(|p| path == p || common::path::is_under(path, p)))
        .map(|(path, s)| {
            vec![
                text(path),
                text(s.database),
                text(s.data_type.name()),
                text(s.encoding),
                text(s.compressor),
                boolean(s.pending_delete),
            ]
        })
        .collect();
    // Encoding and Compression as declared (empty: the storage engine chooses per page).
    Ok(Outcome::query(
        names(&[
            "Timeseries",
            "Database",
            "DataType",
            "Encoding",
            "Compression",
            "PendingDelete",
        ]),
        rows,
    ))
}

pub(super) async fn cluster(session: &Session) -> Result<Outcome, ExecError> {
    let cluster = session.show_cluster().await?;
    let mut rows = Vec::new();
    for c in cluster.config_nodes {
        rows.push(vec![
            int(c.config_node_id),
            text("ConfigNode"),
            text(c.role),
            None,
            text(c.endpoint),
            None,
        ]);
    }
    for d in cluster.data_nodes {
        rows.push(vec![
            int(d.data_node_id),
            text("DataNode"),
            text(d.status),
            text(d.rpc_endpoint),
            text(d.internal_endpoint),
            int(d.incarnation_epoch),
        ]);
    }
    Ok(Outcome::query(
        names(&[
            "NodeID",
            "NodeType",
            "Status",
            "RpcEndpoint",
            "InternalEndpoint",
            "Incarnation",
        ]),
        rows,
    ))
}

/// One row per replica, like IoTDB's `SHOW REGIONS`; a migration's joining replica is `Adding`.
pub(super) async fn regions(session: &Session) -> Result<Outcome, ExecError> {
    let mut rows = Vec::new();
    for region in session.show_regions().await? {
        for &data_node_id in &region.data_node_ids {
            let role = match region.leader_id {
                0 => "Unknown",
                leader if leader == data_node_id => "Leader",
                _ => "Follower",
            };
            rows.push(vec![
                int(region.region_id),
                text("DataRegion"),
                text(region.database.clone()),
                int(data_node_id),
                text(role),
            ]);
        }
        // The joining replica of a migration (IoTDB shows it as Adding).
        if let Some((_, to)) = region.migration {
            rows.push(vec![
                int(region.region_id),
                text("DataRegion"),
                text(region.database.clone()),
                int(to),
                text("Adding"),
            ]);
        }
    }
    Ok(Outcome::query(
        names(&["RegionId", "Type", "Database", "DataNodeId", "Role"]),
        rows,
    ))
}

pub(super) async fn leases(session: &Session) -> Result<Outcome, ExecError> {
    let leases = session.show_leases().await?;
    let rows = leases
        .leases
        .into_iter()
        .map(|l| {
            vec![
                int(l.data_node_id),
                int(l.incarnation_epoch),
                text(l.status),
                boolean(l.holds_lease),
                boolean(l.fenced),
                int(l.last_contact_age_ms),
                int(leases.metadata_lease_fence_ms),
            ]
        })
        .collect();
    Ok(Outcome::query(
        names(&[
            "DataNodeId",
            "Incarnation",
            "Status",
            "HoldsLease",
            "Fenced",
            "LastContactAgeMs",
            "FenceMs",
        ]),
        rows,
    ))
}

pub(super) async fn local_lease(session: &Session) -> Result<Outcome, ExecError> {
    let lease = session.local_lease().await?;
    Ok(Outcome::query(
        names(&[
            "DataNodeId",
            "Endpoint",
            "State",
            "Fenced",
            "Incarnation",
            "HeartbeatAgeMs",
            "FenceMs",
        ]),
        vec![vec![
            int(lease.data_node_id),
            text(lease.endpoint),
            text(lease.state),
            boolean(lease.fenced),
            int(lease.incarnation),
            lease.heartbeat_age_ms.and_then(int),
            int(lease.fence_ms),
        ]],
    ))
}
