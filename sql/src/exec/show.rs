//! The SHOW statements as result tables, with IoTDB's column names where IoTDB has the
//! statement (`SHOW DATABASES`, `SHOW TIMESERIES`, `SHOW CLUSTER`, `SHOW REGIONS`) and
//! Fencepost's own for the lease views.

use std::collections::BTreeMap;

use common::{DataType, Value};

use common::views::TimeseriesView;

use super::{Backend, Cell, ExecResult, Outcome};
use crate::PathPattern;

/// Column names and types.
pub(super) fn header(columns: &[(&str, DataType)]) -> Vec<(String, DataType)> {
    columns.iter().map(|(n, t)| (n.to_string(), *t)).collect()
}

/// Columns of text.
pub(super) fn texts(names: &[&str]) -> Vec<(String, DataType)> {
    names
        .iter()
        .map(|n| (n.to_string(), DataType::Text))
        .collect()
}

pub(super) fn text(s: impl Into<String>) -> Cell {
    Some(Value::Text(s.into()))
}

fn int(i: u64) -> Cell {
    Some(Value::Int64(i64::try_from(i).unwrap_or(i64::MAX)))
}

fn boolean(b: bool) -> Cell {
    Some(Value::Boolean(b))
}

/// `SHOW DATABASES`: IoTDB 2.0's columns, then the TTL (which IoTDB 1.x listed here: in ms, or
/// `INF` when none is set).
pub(super) async fn databases<B: Backend>(
    backend: &B,
    pattern: Option<&PathPattern>,
) -> ExecResult<Outcome> {
    let rows = super::tree_databases(backend)
        .await?
        .into_iter()
        .filter(|d| pattern.is_none_or(|p| p.matches(&d.name)))
        .map(|d| {
            let ttl = match d.ttl_ms {
                Some(ms) => ms.to_string(),
                None => "INF".to_string(),
            };
            vec![
                text(d.name),
                Some(Value::Int32(d.schema_replication_factor as i32)),
                Some(Value::Int32(d.data_replication_factor as i32)),
                Some(Value::Int64(d.time_partition_origin_ms)),
                Some(Value::Int64(d.time_partition_interval_ms)),
                text(ttl),
            ]
        })
        .collect();
    Ok(Outcome::query(
        header(&[
            ("Database", DataType::Text),
            ("SchemaReplicationFactor", DataType::Int32),
            ("DataReplicationFactor", DataType::Int32),
            ("TimePartitionOrigin", DataType::Int64),
            ("TimePartitionInterval", DataType::Int64),
            ("TTL", DataType::Text),
        ]),
        rows,
    ))
}

/// A JSON object of strings, as IoTDB prints tags and attributes (`{"unit":"c"}`).
pub(super) fn json_object(map: &BTreeMap<String, String>) -> String {
    fn quoted(out: &mut String, s: &str) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    let mut out = String::from("{");
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        quoted(&mut out, key);
        out.push(':');
        quoted(&mut out, value);
    }
    out.push('}');
    out
}

/// `SHOW TIMESERIES`, with IoTDB's columns. Encoding and Compression are as declared (empty when
/// none was: the storage engine chooses per page); Alias, Tags and Attributes as declared (null
/// when none; tags and attributes as JSON objects, as IoTDB prints them); Fencepost has no
/// deadbands or views, so those are null (ViewType `BASE`). Series being deleted are left out.
pub(super) async fn timeseries<B: Backend>(
    backend: &B,
    pattern: Option<&PathPattern>,
) -> ExecResult<Outcome> {
    let rows = series_matching(backend, pattern)
        .await?
        .into_iter()
        .filter(|(_, s)| !s.pending_delete)
        .map(|(path, s)| {
            let json = |map: &BTreeMap<String, String>| {
                if map.is_empty() {
                    None
                } else {
                    text(json_object(map))
                }
            };
            vec![
                text(path),
                s.meta.alias.clone().and_then(text),
                text(s.database),
                text(s.data_type.name()),
                text(s.encoding),
                text(s.compressor),
                json(&s.meta.tags),
                json(&s.meta.attributes),
                None,
                None,
                text("BASE"),
            ]
        })
        .collect();
    Ok(Outcome::query(
        texts(&[
            "Timeseries",
            "Alias",
            "Database",
            "DataType",
            "Encoding",
            "Compression",
            "Tags",
            "Attributes",
            "Deadband",
            "DeadbandParameters",
            "ViewType",
        ]),
        rows,
    ))
}

/// The series `pattern` matches, with their full paths.
pub(super) async fn series_matching<B: Backend>(
    backend: &B,
    pattern: Option<&PathPattern>,
) -> ExecResult<Vec<(String, TimeseriesView)>> {
    let prefix = pattern.map(PathPattern::fixed_prefix).unwrap_or_default();
    Ok(super::tree_series(backend, &prefix)
        .await?
        .into_iter()
        .map(|s| (format!("{}.{}", s.device, s.measurement), s))
        .filter(|(path, _)| pattern.is_none_or(|p| p.matches(path)))
        .collect())
}

/// The devices with a series not being deleted that `pattern` matches as a device path, with
/// their databases, in path order.
pub(super) async fn devices_matching<B: Backend>(
    backend: &B,
    pattern: Option<&PathPattern>,
) -> ExecResult<BTreeMap<String, String>> {
    let prefix = pattern.map(PathPattern::fixed_prefix).unwrap_or_default();
    let mut devices: BTreeMap<String, String> = BTreeMap::new();
    for s in super::tree_series(backend, &prefix).await? {
        if !s.pending_delete && pattern.is_none_or(|p| p.matches(&s.device)) {
            devices.insert(s.device, s.database);
        }
    }
    Ok(devices)
}

/// `SHOW DEVICES`: IoTDB's columns; every device is stored one way (not aligned), without a
/// template, and its TTL is its database's.
pub(super) async fn devices<B: Backend>(
    backend: &B,
    pattern: Option<&PathPattern>,
) -> ExecResult<Outcome> {
    let ttls: BTreeMap<String, Option<i64>> = backend
        .show_databases()
        .await?
        .into_iter()
        .map(|d| (d.name, d.ttl_ms))
        .collect();
    let rows = devices_matching(backend, pattern)
        .await?
        .into_iter()
        .map(|(device, database)| {
            let ttl = match ttls.get(&database).copied().flatten() {
                Some(ms) => ms.to_string(),
                None => "INF".to_string(),
            };
            vec![text(device), text("false"), None, text(ttl)]
        })
        .collect();
    Ok(Outcome::query(
        texts(&["Device", "IsAligned", "Template", "TTL(ms)"]),
        rows,
    ))
}

pub(super) async fn cluster<B: Backend>(backend: &B) -> ExecResult<Outcome> {
    let cluster = backend.show_cluster().await?;
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
        header(&[
            ("NodeID", DataType::Int64),
            ("NodeType", DataType::Text),
            ("Status", DataType::Text),
            ("RpcEndpoint", DataType::Text),
            ("InternalEndpoint", DataType::Text),
            ("Incarnation", DataType::Int64),
        ]),
        rows,
    ))
}

/// One row per replica, like IoTDB's `SHOW REGIONS`; a migration's joining replica is `Adding`.
pub(super) async fn regions<B: Backend>(backend: &B) -> ExecResult<Outcome> {
    let mut rows = Vec::new();
    for region in backend.show_regions().await? {
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
        header(&[
            ("RegionId", DataType::Int64),
            ("Type", DataType::Text),
            ("Database", DataType::Text),
            ("DataNodeId", DataType::Int64),
            ("Role", DataType::Text),
        ]),
        rows,
    ))
}

pub(super) async fn leases<B: Backend>(backend: &B) -> ExecResult<Outcome> {
    let leases = backend.show_leases().await?;
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
        header(&[
            ("DataNodeId", DataType::Int64),
            ("Incarnation", DataType::Int64),
            ("Status", DataType::Text),
            ("HoldsLease", DataType::Boolean),
            ("Fenced", DataType::Boolean),
            ("LastContactAgeMs", DataType::Int64),
            ("FenceMs", DataType::Int64),
        ]),
        rows,
    ))
}

/// `SHOW QUERIES`, as IoTDB: `Time` (the start), `QueryId`, `DataNodeId`, `ElapsedTime` (s),
/// `Statement`, and the `User` who sent it.
pub(super) async fn queries<B: Backend>(backend: &B) -> ExecResult<Outcome> {
    let queries = backend.show_queries().await?;
    Ok(Outcome::query(
        header(&[
            (super::TIME_COLUMN, DataType::Int64),
            ("QueryId", DataType::Text),
            ("DataNodeId", DataType::Int32),
            ("ElapsedTime", DataType::Float),
            ("Statement", DataType::Text),
            ("User", DataType::Text),
        ]),
        queries
            .into_iter()
            .map(|q| {
                vec![
                    Some(Value::Int64(q.started_ms)),
                    text(q.id),
                    Some(Value::Int32(i32::try_from(q.data_node).unwrap_or(i32::MAX))),
                    Some(Value::Float(q.elapsed_secs)),
                    text(q.statement),
                    text(q.user),
                ]
            })
            .collect(),
    ))
}

pub(super) async fn local_lease<B: Backend>(backend: &B) -> ExecResult<Outcome> {
    let lease = backend.local_lease().await?;
    Ok(Outcome::query(
        header(&[
            ("DataNodeId", DataType::Int64),
            ("Endpoint", DataType::Text),
            ("State", DataType::Text),
            ("Fenced", DataType::Boolean),
            ("Incarnation", DataType::Int64),
            ("HeartbeatAgeMs", DataType::Int64),
            ("FenceMs", DataType::Int64),
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
