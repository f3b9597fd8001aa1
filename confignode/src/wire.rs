//! The replicated state's records as the wire carries them, for the service and the leader's
//! heartbeats alike.

use common::StatusCode;

use crate::state::{DataNodeRecord, MetadataState, RegionGroup};

/// DataNode `n`'s location on the wire.
pub(crate) fn location(n: &DataNodeRecord) -> proto::DataNodeLocation {
    proto::DataNodeLocation {
        data_node_id: n.id,
        internal_endpoint: proto::parse_endpoint(&n.internal_address).ok(),
        rpc_endpoint: proto::parse_endpoint(&n.rpc_address).ok(),
    }
}

/// Region `r`'s replica set as `state` has it, with its migration in progress.
pub(crate) fn replica_set(state: &MetadataState, r: &RegionGroup) -> proto::RegionReplicaSet {
    let (migrating_from, migrating_to) = state.region_migration(r.id).unwrap_or((0, 0));
    proto::RegionReplicaSet {
        region_id: r.id,
        database: r.database.clone(),
        data_node_ids: r.replicas.clone(),
        preferred_leader_id: r.preferred_leader,
        migrating_from,
        migrating_to,
    }
}

/// 200 with no message.
pub(crate) fn status_ok() -> proto::Status {
    proto::status(StatusCode::Success, "")
}
