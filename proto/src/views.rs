//! The plain views of `common::views`, filled from the session service's answers.

pub use common::views::{
    ClusterView, ConfigNodeView, DataNodeView, DatabaseView, LeaseView, LeasesView, LocalLeaseView,
    RegionDigestView, RegionView, SeriesMeta, TimeseriesView,
};

fn endpoint(e: &Option<crate::Endpoint>) -> String {
    e.as_ref().map(crate::endpoint).unwrap_or_default()
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
