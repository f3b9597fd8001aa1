//! The two lookups a coordinator makes of the ConfigNode — a device's schema and the regions
//! of its partitions — in the node's own types, and their conversion to and from the wire at
//! the link ([`super::ConfigNodeLink`]). The caller's identity (node id and incarnation) is the
//! link's to add: a coordinator never builds a wire request.

use std::collections::BTreeMap;

use common::DataType;

use super::LinkError;
use crate::cache::{DeviceSchema, NodeAddresses, RegionRoute};

/// A schema lookup: per device, the measurements wanted (every one when empty). With
/// `auto_create`, the ConfigNode creates the missing ones with the types given.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct SchemaFetch {
    pub(crate) devices: Vec<DeviceFetch>,
    pub(crate) auto_create: bool,
    /// The devices are a table's, derived from this incarnation of it: refused with 550
    /// TABLE_NOT_EXISTS unless that incarnation exists now.
    pub(crate) table: Option<TableIncarnation>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DeviceFetch {
    pub(crate) device: String,
    /// Name and, when it may be created, type.
    pub(crate) measurements: Vec<(String, Option<DataType>)>,
}

/// A table as a write derived it: `created_version` names the incarnation.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TableIncarnation {
    pub(crate) database: String,
    pub(crate) table: String,
    pub(crate) created_version: u64,
}

/// A partition lookup: per device, the time slots asked.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PartitionFetch {
    pub(crate) devices: Vec<DeviceSlots>,
    /// Create the regions of the time slots named (never with [`TimeSlots::Every`]).
    pub(crate) auto_create: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DeviceSlots {
    pub(crate) device: String,
    pub(crate) slots: TimeSlots,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TimeSlots {
    /// These time slots' regions.
    These(Vec<i64>),
    /// The region groups holding the device's series slot in any time slot (where a read of
    /// any time range must look); answered in [`PartitionMap::held`].
    Every,
}

/// The answer to a [`PartitionFetch`].
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PartitionMap {
    /// (series slot, time slot) → region, for the slots named.
    pub(crate) partitions: Vec<((u32, i64), u64)>,
    /// (database, series slot) → the region groups holding it in every time slot, for the
    /// devices asked with [`TimeSlots::Every`] that lie in a database.
    pub(crate) held: Vec<((String, u32), Vec<u64>)>,
    /// The route of every region named, its leader as the ConfigNode last heard it.
    pub(crate) routes: Vec<(u64, RegionRoute)>,
    /// Every registered DataNode's addresses.
    pub(crate) nodes: Vec<(u64, NodeAddresses)>,
}

/// The wire request of `fetch`, asked by `caller`.
pub(super) fn schema_request(fetch: &SchemaFetch, caller: proto::Caller) -> proto::FetchSchemaReq {
    proto::FetchSchemaReq {
        devices: fetch
            .devices
            .iter()
            .map(|d| proto::DeviceSchemaRequest {
                device: d.device.clone(),
                measurements: d
                    .measurements
                    .iter()
                    .map(|(name, t)| proto::MeasurementSchema {
                        name: name.clone(),
                        // 0 (BOOLEAN) where no type is given: the ConfigNode reads the type only
                        // when it creates the series.
                        data_type: t.map_or(0, |t| proto::data_type_to_wire(t) as i32),
                    })
                    .collect(),
            })
            .collect(),
        auto_create: fetch.auto_create,
        caller: Some(caller),
        table: fetch.table.as_ref().map(|t| proto::TableRef {
            database: t.database.clone(),
            table: t.table.clone(),
            created_version: t.created_version,
        }),
    }
}

/// The schemas of a FetchSchema answer by device; a status other than 200 is the refusal.
pub(super) fn schemas(
    resp: proto::FetchSchemaResp,
) -> Result<Vec<(String, DeviceSchema)>, LinkError> {
    super::check_status(resp.status.as_ref())?;
    let version = resp.metadata_version;
    resp.devices
        .into_iter()
        .map(|d| {
            let mut types = BTreeMap::new();
            for m in d.measurements {
                let t = proto::data_type(m.data_type)
                    .map_err(|e| LinkError::Malformed(e.to_string()))?;
                types.insert(m.name, t);
            }
            let aliases = d
                .aliases
                .into_iter()
                .map(|a| (a.alias, a.measurement))
                .collect();
            let schema = DeviceSchema {
                database: d.database,
                types,
                aliases,
                version,
                ttl_ms: (d.ttl_ms > 0).then_some(d.ttl_ms),
                table_model: d.table_model,
            };
            Ok((d.device, schema))
        })
        .collect()
}

/// The wire request of `fetch`, asked by `caller`.
pub(super) fn partition_request(
    fetch: &PartitionFetch,
    caller: proto::Caller,
) -> proto::FetchPartitionsReq {
    proto::FetchPartitionsReq {
        requests: fetch
            .devices
            .iter()
            .map(|d| match &d.slots {
                TimeSlots::These(slots) => proto::DeviceTimeSlots {
                    device: d.device.clone(),
                    time_slots: slots.clone(),
                    every_time_slot: false,
                },
                TimeSlots::Every => proto::DeviceTimeSlots {
                    device: d.device.clone(),
                    time_slots: Vec::new(),
                    every_time_slot: true,
                },
            })
            .collect(),
        auto_create: fetch.auto_create,
        caller: Some(caller),
    }
}

/// The map of a FetchPartitions answer; a status other than 200 is the refusal.
pub(super) fn partition_map(resp: proto::FetchPartitionsResp) -> Result<PartitionMap, LinkError> {
    super::check_status(resp.status.as_ref())?;
    let leaders: BTreeMap<u64, u64> = resp
        .leaders
        .iter()
        .map(|l| (l.region_id, l.leader_id))
        .collect();
    let routes = resp
        .regions
        .into_iter()
        .map(|r| {
            let route = RegionRoute {
                leader: leaders.get(&r.region_id).copied().unwrap_or(0),
                migration: (r.migrating_to != 0).then_some((r.migrating_from, r.migrating_to)),
                database: r.database,
                replicas: r.data_node_ids,
            };
            (r.region_id, route)
        })
        .collect();
    Ok(PartitionMap {
        partitions: resp
            .partitions
            .iter()
            .map(|p| ((p.series_slot, p.time_slot), p.region_id))
            .collect(),
        held: resp
            .device_regions
            .into_iter()
            .map(|d| ((d.database, d.series_slot), d.region_ids))
            .collect(),
        routes,
        nodes: resp
            .data_nodes
            .iter()
            .map(|n| (n.data_node_id, super::node_addresses(n)))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::StatusCode;

    fn caller() -> proto::Caller {
        proto::Caller {
            data_node_id: 4,
            incarnation_epoch: 9,
        }
    }

    #[test]
    fn a_schema_request_carries_types_only_where_given() {
        let fetch = SchemaFetch {
            devices: vec![DeviceFetch {
                device: "root.sg.d1".into(),
                measurements: vec![("s1".into(), Some(DataType::Double)), ("s2".into(), None)],
            }],
            auto_create: true,
            table: Some(TableIncarnation {
                database: "db".into(),
                table: "t".into(),
                created_version: 3,
            }),
        };
        let wire = schema_request(&fetch, caller());
        let m = &wire.devices[0].measurements;
        assert_eq!(
            m[0].data_type,
            proto::data_type_to_wire(DataType::Double) as i32
        );
        assert_eq!(m[1].data_type, 0);
        assert_eq!(wire.caller, Some(caller()));
        assert_eq!(wire.table.map(|t| t.created_version), Some(3));
        assert!(wire.auto_create);
    }

    #[test]
    fn a_schema_answer_with_an_unknown_type_is_malformed_and_a_refusal_is_refused() {
        let bad = proto::FetchSchemaResp {
            status: Some(crate::convert::ok()),
            devices: vec![proto::DeviceSchema {
                device: "root.sg.d1".into(),
                measurements: vec![proto::MeasurementSchema {
                    name: "s1".into(),
                    data_type: 99,
                }],
                ..Default::default()
            }],
            metadata_version: 1,
        };
        assert!(matches!(schemas(bad), Err(LinkError::Malformed(_))));
        let refused = proto::FetchSchemaResp {
            status: Some(proto::status(StatusCode::TableNotExists, "gone")),
            ..Default::default()
        };
        match schemas(refused) {
            Err(LinkError::Refused(s)) => assert!(s.is(StatusCode::TableNotExists)),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_partition_answer_folds_leaders_into_routes() {
        let resp = proto::FetchPartitionsResp {
            status: Some(crate::convert::ok()),
            partitions: vec![proto::PartitionEntry {
                database: "root.sg".into(),
                series_slot: 5,
                time_slot: 7,
                region_id: 10,
            }],
            regions: vec![proto::RegionReplicaSet {
                region_id: 10,
                database: "root.sg".into(),
                data_node_ids: vec![1, 2],
                migrating_from: 1,
                migrating_to: 3,
                ..Default::default()
            }],
            leaders: vec![proto::RegionLeader {
                region_id: 10,
                leader_id: 2,
            }],
            device_regions: vec![proto::DeviceRegions {
                device: "root.sg.d1".into(),
                database: "root.sg".into(),
                series_slot: 5,
                region_ids: vec![10],
            }],
            ..Default::default()
        };
        let map = partition_map(resp).expect("a 200 answer");
        assert_eq!(map.partitions, vec![((5, 7), 10)]);
        assert_eq!(map.held, vec![(("root.sg".to_string(), 5), vec![10])]);
        let (id, route) = &map.routes[0];
        assert_eq!((*id, route.leader, route.migration), (10, 2, Some((1, 3))));
        let every = PartitionFetch {
            devices: vec![DeviceSlots {
                device: "root.sg.d1".into(),
                slots: TimeSlots::Every,
            }],
            auto_create: false,
        };
        let wire = partition_request(&every, caller());
        assert!(wire.requests[0].every_time_slot && wire.requests[0].time_slots.is_empty());
    }
}
