//! The plain views of `common::views`, filled from the ConfigNode's and the session service's
//! answers, and the answers a DataNode's session service builds from them: wire -> view -> wire
//! gives back the answer (a 200 one; a failed answer carries no view), so the DataNode works on
//! views and converts only at its service's edge.

pub use common::views::{
    ClusterView, ConfigNodeView, DataNodeView, DatabaseView, DatabasesView, LeaseView, LeasesView,
    LocalLeaseView, QueryView, RegionDigestView, RegionView, SeriesMeta, TimeseriesView,
};

fn endpoint(e: &Option<crate::Endpoint>) -> String {
    e.as_ref().map(crate::endpoint).unwrap_or_default()
}

impl TryFrom<crate::ShowDatabasesResp> for DatabasesView {
    type Error = crate::Error;

    /// TTLs not parallel to the databases are a malformed answer; a TTL of 0 (or below) is none.
    fn try_from(r: crate::ShowDatabasesResp) -> crate::Result<Self> {
        if r.ttl_ms.len() != r.databases.len() {
            return Err(crate::Error::NotParallel {
                list: "ttl_ms",
                to: "databases",
            });
        }
        if !r.table_model.is_empty() && r.table_model.len() != r.databases.len() {
            return Err(crate::Error::NotParallel {
                list: "table_model",
                to: "databases",
            });
        }
        let table_databases = r
            .databases
            .iter()
            .zip(&r.table_model)
            .filter(|(_, table)| **table)
            .map(|(name, _)| name.clone())
            .collect();
        Ok(DatabasesView {
            table_databases,
            databases: r
                .databases
                .into_iter()
                .zip(r.ttl_ms)
                .map(|(name, ttl)| (name, (ttl > 0).then_some(ttl)))
                .collect(),
            schema_replication_factor: r.schema_replication_factor,
            data_replication_factor: r.data_replication_factor,
            time_partition_origin_ms: r.time_partition_origin_ms,
            time_partition_interval_ms: r.time_partition_interval_ms,
            now_ms: r.now_ms,
        })
    }
}

impl TryFrom<crate::TimeseriesInfo> for TimeseriesView {
    type Error = crate::Error;

    /// A type code outside IoTDB's table is a malformed answer.
    fn try_from(s: crate::TimeseriesInfo) -> crate::Result<Self> {
        let data_type = crate::data_type(s.data_type)?;
        Ok(TimeseriesView {
            database: s.database,
            device: s.device,
            measurement: s.measurement,
            data_type,
            pending_delete: s.pending_delete,
            encoding: s.encoding,
            compressor: s.compressor,
            meta: SeriesMeta {
                alias: (!s.alias.is_empty()).then_some(s.alias),
                tags: s.tags,
                attributes: s.attributes,
            },
            table_model: s.table_model,
        })
    }
}

impl From<crate::ShowClusterResp> for ClusterView {
    fn from(r: crate::ShowClusterResp) -> Self {
        ClusterView {
            config_node_term: r.config_node_term,
            metadata_version: r.metadata_version,
            config_nodes: r
                .config_nodes
                .into_iter()
                .map(|c| {
                    let l = c.location.unwrap_or_default();
                    ConfigNodeView {
                        config_node_id: l.config_node_id,
                        endpoint: endpoint(&l.endpoint),
                        role: c.role,
                    }
                })
                .collect(),
            data_nodes: r
                .data_nodes
                .into_iter()
                .map(|d| {
                    let l = d.location.unwrap_or_default();
                    DataNodeView {
                        data_node_id: l.data_node_id,
                        rpc_endpoint: endpoint(&l.rpc_endpoint),
                        internal_endpoint: endpoint(&l.internal_endpoint),
                        status: d.status,
                        incarnation_epoch: d.incarnation_epoch,
                        confirmed_incarnation_epoch: d.confirmed_incarnation_epoch,
                    }
                })
                .collect(),
        }
    }
}

impl From<crate::RegionInfo> for RegionView {
    fn from(r: crate::RegionInfo) -> Self {
        let set = r.replica_set.unwrap_or_default();
        RegionView {
            region_id: set.region_id,
            database: set.database,
            data_node_ids: set.data_node_ids,
            preferred_leader_id: set.preferred_leader_id,
            leader_id: r.leader_id,
            migration: (set.migrating_to != 0).then_some((set.migrating_from, set.migrating_to)),
        }
    }
}

impl From<crate::ShowLeasesResp> for LeasesView {
    fn from(r: crate::ShowLeasesResp) -> Self {
        LeasesView {
            metadata_lease_fence_ms: r.metadata_lease_fence_ms,
            lease_proceed_margin_ms: r.lease_proceed_margin_ms,
            leases: r
                .leases
                .into_iter()
                .map(|l| LeaseView {
                    data_node_id: l.data_node_id,
                    incarnation_epoch: l.incarnation_epoch,
                    last_contact_age_ms: l.last_contact_age_ms,
                    holds_lease: l.holds_lease,
                    fenced: l.fenced,
                    status: l.status,
                })
                .collect(),
        }
    }
}

impl From<crate::ShowLocalLeaseResp> for LocalLeaseView {
    fn from(r: crate::ShowLocalLeaseResp) -> Self {
        LocalLeaseView {
            data_node_id: r.data_node_id,
            endpoint: r.endpoint,
            state: r.state,
            fenced: r.fenced,
            incarnation: r.incarnation,
            heartbeat_age_ms: r.heartbeat_age_ms,
            fence_ms: r.fence_ms,
        }
    }
}

impl From<crate::RegionDigest> for RegionDigestView {
    fn from(d: crate::RegionDigest) -> Self {
        RegionDigestView {
            region_id: d.region_id,
            data_node_id: d.data_node_id,
            applied_index: d.applied_index,
            digest: d.digest,
            is_leader: d.is_leader,
        }
    }
}

impl From<crate::RunningQuery> for QueryView {
    fn from(q: crate::RunningQuery) -> Self {
        QueryView {
            started_ms: q.started_ms,
            id: q.id,
            data_node: q.data_node,
            elapsed_secs: q.elapsed_secs,
            statement: q.statement,
            user: q.user,
        }
    }
}

impl From<QueryView> for crate::RunningQuery {
    fn from(q: QueryView) -> Self {
        crate::RunningQuery {
            started_ms: q.started_ms,
            id: q.id,
            data_node: q.data_node,
            elapsed_secs: q.elapsed_secs,
            statement: q.statement,
            user: q.user,
        }
    }
}

// View -> wire: the session service's answers, each with a 200 status.

fn ok() -> Option<crate::Status> {
    Some(crate::status(common::StatusCode::Success, ""))
}

/// The endpoint of a view's address (`""`: none). Reads back whatever [`crate::endpoint`]
/// printed, where [`crate::parse_endpoint`] refuses what a client may not give.
fn endpoint_of(address: &str) -> Option<crate::Endpoint> {
    if address.is_empty() {
        return None;
    }
    let (host, port) = address.rsplit_once(':').unwrap_or((address, ""));
    Some(crate::Endpoint {
        host: host.to_string(),
        port: port.parse().unwrap_or(0),
    })
}

/// `ShowDatabasesResp.table_model` of databases whose flags are `flags`: empty when none is a
/// table-model database (as an answer from before the flag reads).
pub fn table_model_list(flags: impl Iterator<Item = bool>) -> Vec<bool> {
    let flags: Vec<bool> = flags.collect();
    if flags.iter().any(|f| *f) {
        flags
    } else {
        Vec::new()
    }
}

impl From<DatabasesView> for crate::ShowDatabasesResp {
    fn from(v: DatabasesView) -> Self {
        let table_model = table_model_list(
            v.databases
                .iter()
                .map(|(name, _)| v.table_databases.contains(name)),
        );
        let (databases, ttl_ms) = v
            .databases
            .into_iter()
            .map(|(name, ttl)| (name, ttl.unwrap_or(0)))
            .unzip();
        crate::ShowDatabasesResp {
            status: ok(),
            databases,
            ttl_ms,
            table_model,
            schema_replication_factor: v.schema_replication_factor,
            data_replication_factor: v.data_replication_factor,
            time_partition_origin_ms: v.time_partition_origin_ms,
            time_partition_interval_ms: v.time_partition_interval_ms,
            now_ms: v.now_ms,
        }
    }
}

impl From<TimeseriesView> for crate::TimeseriesInfo {
    fn from(s: TimeseriesView) -> Self {
        crate::TimeseriesInfo {
            database: s.database,
            device: s.device,
            measurement: s.measurement,
            data_type: crate::data_type_to_wire(s.data_type) as i32,
            pending_delete: s.pending_delete,
            encoding: s.encoding,
            compressor: s.compressor,
            alias: s.meta.alias.unwrap_or_default(),
            tags: s.meta.tags,
            attributes: s.meta.attributes,
            table_model: s.table_model,
        }
    }
}

impl From<Vec<TimeseriesView>> for crate::ShowTimeseriesResp {
    fn from(series: Vec<TimeseriesView>) -> Self {
        crate::ShowTimeseriesResp {
            status: ok(),
            series: series.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<ClusterView> for crate::ShowClusterResp {
    fn from(v: ClusterView) -> Self {
        crate::ShowClusterResp {
            status: ok(),
            config_nodes: v
                .config_nodes
                .into_iter()
                .map(|c| crate::ConfigNodeInfo {
                    location: Some(crate::ConfigNodeLocation {
                        config_node_id: c.config_node_id,
                        endpoint: endpoint_of(&c.endpoint),
                    }),
                    role: c.role,
                })
                .collect(),
            data_nodes: v
                .data_nodes
                .into_iter()
                .map(|d| crate::DataNodeInfo {
                    location: Some(crate::DataNodeLocation {
                        data_node_id: d.data_node_id,
                        internal_endpoint: endpoint_of(&d.internal_endpoint),
                        rpc_endpoint: endpoint_of(&d.rpc_endpoint),
                    }),
                    status: d.status,
                    incarnation_epoch: d.incarnation_epoch,
                    confirmed_incarnation_epoch: d.confirmed_incarnation_epoch,
                })
                .collect(),
            config_node_term: v.config_node_term,
            metadata_version: v.metadata_version,
        }
    }
}

impl From<RegionView> for crate::RegionInfo {
    fn from(r: RegionView) -> Self {
        let (migrating_from, migrating_to) = r.migration.unwrap_or((0, 0));
        crate::RegionInfo {
            replica_set: Some(crate::RegionReplicaSet {
                region_id: r.region_id,
                database: r.database,
                data_node_ids: r.data_node_ids,
                preferred_leader_id: r.preferred_leader_id,
                migrating_from,
                migrating_to,
            }),
            leader_id: r.leader_id,
        }
    }
}

/// A client's SHOW REGIONS: no region asked about, so none dropped or left.
impl From<Vec<RegionView>> for crate::ShowRegionsResp {
    fn from(regions: Vec<RegionView>) -> Self {
        crate::ShowRegionsResp {
            status: ok(),
            regions: regions.into_iter().map(Into::into).collect(),
            dropped_region_ids: Vec::new(),
            left_region_ids: Vec::new(),
        }
    }
}

impl From<LeasesView> for crate::ShowLeasesResp {
    fn from(v: LeasesView) -> Self {
        crate::ShowLeasesResp {
            status: ok(),
            leases: v
                .leases
                .into_iter()
                .map(|l| crate::LeaseInfo {
                    data_node_id: l.data_node_id,
                    incarnation_epoch: l.incarnation_epoch,
                    last_contact_age_ms: l.last_contact_age_ms,
                    holds_lease: l.holds_lease,
                    fenced: l.fenced,
                    status: l.status,
                })
                .collect(),
            metadata_lease_fence_ms: v.metadata_lease_fence_ms,
            lease_proceed_margin_ms: v.lease_proceed_margin_ms,
        }
    }
}

impl From<LocalLeaseView> for crate::ShowLocalLeaseResp {
    fn from(v: LocalLeaseView) -> Self {
        crate::ShowLocalLeaseResp {
            status: ok(),
            data_node_id: v.data_node_id,
            endpoint: v.endpoint,
            state: v.state,
            incarnation: v.incarnation,
            heartbeat_age_ms: v.heartbeat_age_ms,
            fence_ms: v.fence_ms,
            fenced: v.fenced,
        }
    }
}

/// The user names, sorted by name.
impl From<Vec<String>> for crate::ListUsersResp {
    fn from(users: Vec<String>) -> Self {
        crate::ListUsersResp {
            status: ok(),
            users,
        }
    }
}

/// The named series that exist, with their types, in the request's order.
impl From<Vec<(String, common::DataType)>> for crate::SeriesTypesResp {
    fn from(series: Vec<(String, common::DataType)>) -> Self {
        crate::SeriesTypesResp {
            status: ok(),
            series: series
                .into_iter()
                .map(|(name, t)| crate::MeasurementSchema {
                    name,
                    data_type: crate::data_type_to_wire(t) as i32,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        ConfigNodeInfo, ConfigNodeLocation, DataNodeInfo, DataNodeLocation, Endpoint, LeaseInfo,
        ListUsersResp, RegionInfo, RegionReplicaSet, SeriesTypesResp, ShowClusterResp,
        ShowDatabasesResp, ShowLeasesResp, ShowLocalLeaseResp, ShowRegionsResp, ShowTimeseriesResp,
        TimeseriesInfo,
    };

    fn ep(host: &str, port: u32) -> Option<Endpoint> {
        Some(Endpoint {
            host: host.into(),
            port,
        })
    }

    fn databases(names: &[(&str, i64)]) -> ShowDatabasesResp {
        ShowDatabasesResp {
            status: ok(),
            databases: names.iter().map(|(n, _)| n.to_string()).collect(),
            ttl_ms: names.iter().map(|(_, t)| *t).collect(),
            table_model: Vec::new(),
            schema_replication_factor: 3,
            data_replication_factor: 2,
            time_partition_origin_ms: -5,
            time_partition_interval_ms: 604_800_000,
            now_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn databases_round_trip_even_empty() {
        for wire in [
            databases(&[("root.a", 0), ("root.b", 86_400_000)]),
            databases(&[]),
        ] {
            let view = DatabasesView::try_from(wire.clone()).unwrap();
            assert_eq!(ShowDatabasesResp::from(view), wire);
        }
        let mut tables = databases(&[("root.a", 0), ("root.t", 0)]);
        tables.table_model = vec![false, true];
        let view = DatabasesView::try_from(tables.clone()).unwrap();
        assert_eq!(ShowDatabasesResp::from(view.clone()), tables);
        let rows = view.into_rows();
        assert_eq!((rows[0].table_model, rows[1].table_model), (false, true));
        tables.table_model = vec![true];
        assert!(DatabasesView::try_from(tables).is_err(), "not parallel");
        let view = DatabasesView::try_from(databases(&[("root.a", 0), ("root.b", 7)])).unwrap();
        let rows = view.into_rows();
        assert_eq!(rows[0].ttl_ms, None);
        assert_eq!(rows[1].ttl_ms, Some(7));
        assert_eq!(rows[1].data_replication_factor, 2);
        let mut short = databases(&[("root.a", 0)]);
        short.ttl_ms.clear();
        assert_eq!(
            DatabasesView::try_from(short),
            Err(crate::Error::NotParallel {
                list: "ttl_ms",
                to: "databases"
            })
        );
    }

    #[test]
    fn timeseries_round_trip() {
        let wire = ShowTimeseriesResp {
            status: ok(),
            series: vec![
                TimeseriesInfo {
                    database: "root.sg".into(),
                    device: "root.sg.d1".into(),
                    measurement: "s1".into(),
                    data_type: crate::DataType::Double as i32,
                    pending_delete: true,
                    encoding: "GORILLA".into(),
                    compressor: "LZ4".into(),
                    alias: "temp".into(),
                    tags: [("unit".to_string(), "C".to_string())].into(),
                    attributes: [("room".to_string(), "3".to_string())].into(),
                    table_model: true,
                },
                TimeseriesInfo {
                    database: "root.sg".into(),
                    device: "root.sg.d2".into(),
                    measurement: "s2".into(),
                    data_type: crate::DataType::Text as i32,
                    ..Default::default()
                },
            ],
        };
        let views: Vec<TimeseriesView> = wire
            .series
            .iter()
            .cloned()
            .map(|s| TimeseriesView::try_from(s).unwrap())
            .collect();
        assert_eq!(views[1].meta.alias, None);
        assert_eq!(ShowTimeseriesResp::from(views), wire);
    }

    #[test]
    fn cluster_round_trip() {
        let wire = ShowClusterResp {
            status: ok(),
            config_nodes: vec![
                ConfigNodeInfo {
                    location: Some(ConfigNodeLocation {
                        config_node_id: 1,
                        endpoint: ep("10.0.0.1", 10710),
                    }),
                    role: "Leader".into(),
                },
                ConfigNodeInfo {
                    location: Some(ConfigNodeLocation {
                        config_node_id: 2,
                        endpoint: None,
                    }),
                    role: "Unknown".into(),
                },
            ],
            data_nodes: vec![DataNodeInfo {
                location: Some(DataNodeLocation {
                    data_node_id: 4,
                    internal_endpoint: ep("::1", 10730),
                    rpc_endpoint: ep("dn4", 6667),
                }),
                status: "Removing".into(),
                incarnation_epoch: 7,
                confirmed_incarnation_epoch: 6,
            }],
            config_node_term: 9,
            metadata_version: 42,
        };
        let view = ClusterView::from(wire.clone());
        assert_eq!(view.data_nodes[0].internal_endpoint, "::1:10730");
        assert_eq!(ShowClusterResp::from(view), wire);
    }

    #[test]
    fn regions_round_trip() {
        let wire = ShowRegionsResp {
            status: ok(),
            regions: vec![
                RegionInfo {
                    replica_set: Some(RegionReplicaSet {
                        region_id: 3,
                        database: "root.sg".into(),
                        data_node_ids: vec![1, 2, 4],
                        preferred_leader_id: 2,
                        migrating_from: 1,
                        migrating_to: 4,
                    }),
                    leader_id: 2,
                },
                RegionInfo {
                    replica_set: Some(RegionReplicaSet {
                        region_id: 5,
                        database: "root.b".into(),
                        data_node_ids: vec![2],
                        preferred_leader_id: 2,
                        ..Default::default()
                    }),
                    leader_id: 0,
                },
            ],
            dropped_region_ids: Vec::new(),
            left_region_ids: Vec::new(),
        };
        let views: Vec<RegionView> = wire.regions.iter().cloned().map(Into::into).collect();
        assert_eq!(views[0].migration, Some((1, 4)));
        assert_eq!(ShowRegionsResp::from(views), wire);
    }

    #[test]
    fn leases_round_trip() {
        let wire = ShowLeasesResp {
            status: ok(),
            leases: vec![LeaseInfo {
                data_node_id: 2,
                incarnation_epoch: 3,
                last_contact_age_ms: 1_500,
                holds_lease: true,
                fenced: true,
                status: "Running".into(),
            }],
            metadata_lease_fence_ms: 6_000,
            lease_proceed_margin_ms: 2_000,
        };
        assert_eq!(ShowLeasesResp::from(LeasesView::from(wire.clone())), wire);
        for heartbeat_age_ms in [Some(120), None] {
            let wire = ShowLocalLeaseResp {
                status: ok(),
                data_node_id: 4,
                endpoint: "dn4:6667".into(),
                state: "NEED_CLEAR".into(),
                incarnation: 8,
                heartbeat_age_ms,
                fence_ms: 6_000,
                fenced: true,
            };
            let view = LocalLeaseView::from(wire.clone());
            assert_eq!(ShowLocalLeaseResp::from(view), wire);
        }
    }

    #[test]
    fn users_and_series_types_round_trip() {
        let wire = ListUsersResp {
            status: ok(),
            users: vec!["ann".into(), "root".into()],
        };
        assert_eq!(ListUsersResp::from(wire.users.clone()), wire);
        let wire = SeriesTypesResp {
            status: ok(),
            series: vec![crate::MeasurementSchema {
                name: "s1".into(),
                data_type: crate::DataType::Int64 as i32,
            }],
        };
        let series: Vec<(String, common::DataType)> = wire
            .series
            .iter()
            .map(|m| (m.name.clone(), crate::data_type(m.data_type).unwrap()))
            .collect();
        assert_eq!(SeriesTypesResp::from(series), wire);
    }
}
