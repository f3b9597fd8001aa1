//! The DataNode registry's commands: registration, and the detection of a data directory
//! restored from an older backup (REVIEW H3).
//!
//! Every registration mints a new incarnation epoch, and a DataNode writes it to its
//! `identity` file before anything runs under it. A directory restored from a backup (or a VM
//! rolled back) still holds its identity, with the epoch of when the backup was taken, and a
//! raft log and hard state older than what the node acknowledged and voted since: rejoining as
//! itself, it could vote twice in a term or forget acknowledged entries. The registry keeps, per
//! DataNode, the highest incarnation it proved it ran (`confirmed_epoch`): the stored epoch a
//! registration carries (the directory held it, so it ran), and the epoch of a heartbeat reply
//! (the leader proposes `ConfirmIncarnation` at the first reply of a new incarnation). A
//! registration whose stored epoch is below it is refused, deterministically, changing nothing;
//! the DataNode stops and says to empty its directory, which brings it back as a new node whose
//! regions migrate to it.
//!
//! Not a false alarm: a registration whose reply was lost is sent again with the same stored
//! epoch; the epoch it minted never ran (the node never stored it), so it was never confirmed.
//! Not detected: a directory restored from a backup of the incarnation that ran last (no later
//! incarnation ran to confirm a higher epoch). Epochs cannot tell it; that would take a
//! generation in every raft hard state write.

use std::collections::BTreeMap;

use common::codec::{Reader, Writer};

use super::{DataNodeRecord, MetadataState, NodeStatus, DATA_NODES_MAX, PATH_BYTES_MAX};
use crate::command::CommandResult;
use crate::error::{DecodeError, MetadataError};

impl MetadataState {
    /// Applies `Command::SetDataNodeStatus`.
    pub(super) fn set_data_node_status(
        &mut self,
        data_node_id: &u64,
        status: &NodeStatus,
    ) -> Result<CommandResult, MetadataError> {
        let node = self
            .data_nodes
            .get_mut(data_node_id)
            .ok_or(MetadataError::DataNodeNotFound(*data_node_id))?;
        if node.status != *status {
            node.status = *status;
            self.bump();
        }
        Ok(CommandResult::Done)
    }

    /// Applies `Command::RemoveDataNode`.
    pub(super) fn remove_data_node(
        &mut self,
        data_node_id: &u64,
    ) -> Result<CommandResult, MetadataError> {
        let node = self
            .data_nodes
            .get(data_node_id)
            .ok_or(MetadataError::DataNodeNotFound(*data_node_id))?;
        if node.status == NodeStatus::Removing {
            return Ok(CommandResult::Done);
        }
        let running: Vec<u64> = self
            .data_nodes
            .values()
            .filter(|n| n.status == NodeStatus::Running && n.id != *data_node_id)
            .map(|n| n.id)
            .collect();
        for r in self.placement.regions.values() {
            if r.replicas.contains(data_node_id) && running.iter().all(|n| r.replicas.contains(n)) {
                return Err(MetadataError::MigrationRefused {
                    region_id: r.id,
                    reason: format!(
                        "DataNode {data_node_id} cannot be removed: each of the {} other \
                         Running DataNodes holds a replica of the region already; add a \
                         DataNode first",
                        running.len()
                    ),
                });
            }
        }
        self.data_nodes
            .get_mut(data_node_id)
            .expect("looked up above")
            .status = NodeStatus::Removing;
        self.bump();
        Ok(CommandResult::Done)
    }

    /// Registers a DataNode under `data_node_id` (0: a new one; with `reuse_by_address`, the
    /// id of a known internal address, as entries written before `RegisterNewDataNode` did) and
    /// mints its next incarnation, above `epoch_floor` too.
    pub(super) fn register(
        &mut self,
        data_node_id: u64,
        internal_address: &str,
        rpc_address: &str,
        reuse_by_address: bool,
    ) -> Result<CommandResult, MetadataError> {
        self.register_above(
            data_node_id,
            internal_address,
            rpc_address,
            reuse_by_address,
            0,
        )
    }

    fn register_above(
        &mut self,
        data_node_id: u64,
        internal_address: &str,
        rpc_address: &str,
        reuse_by_address: bool,
        epoch_floor: u64,
    ) -> Result<CommandResult, MetadataError> {
        for address in [internal_address, rpc_address] {
            if address.is_empty() || address.len() > PATH_BYTES_MAX {
                return Err(MetadataError::IllegalPath {
                    path: address.to_string(),
                    reason: "an address is 1 to 1024 bytes of host:port",
                });
            }
        }
        // Without an id the node is new (`RegisterNewDataNode`). Only entries written before
        // that command (`RegisterDataNode` with id 0) gave a known internal address its old id,
        // and they replay as they applied.
        let id = if data_node_id != 0 {
            data_node_id
        } else if reuse_by_address {
            self.data_nodes
                .values()
                .find(|n| n.internal_address == internal_address)
                .map_or(self.ids.next_data_node_id, |n| n.id)
        } else {
            self.ids.next_data_node_id
        };
        if !self.data_nodes.contains_key(&id) && self.data_nodes.len() >= DATA_NODES_MAX {
            return Err(MetadataError::Limit(format!(
                "{DATA_NODES_MAX} DataNodes registered"
            )));
        }
        let node = self.data_nodes.entry(id).or_insert(DataNodeRecord {
            id,
            internal_address: String::new(),
            rpc_address: String::new(),
            incarnation_epoch: 0,
            confirmed_epoch: 0,
            status: NodeStatus::Running,
        });
        node.internal_address = internal_address.to_string();
        node.rpc_address = rpc_address.to_string();
        node.incarnation_epoch = node.incarnation_epoch.max(epoch_floor) + 1;
        // A node being removed stays so when it restarts (REMOVE DATANODE is final).
        if node.status != NodeStatus::Removing {
            node.status = NodeStatus::Running;
        }
        let epoch = node.incarnation_epoch;
        self.ids.next_data_node_id = self.ids.next_data_node_id.max(id + 1);
        self.bump();
        Ok(CommandResult::Registered {
            data_node_id: id,
            incarnation_epoch: epoch,
        })
    }

    /// A DataNode with a stored identity registers again ([`crate::command::Command::ReregisterDataNode`]):
    /// refused when its directory holds an incarnation below the confirmed one, else registered
    /// under its id with the stored epoch confirmed and the next epoch above both.
    pub(super) fn reregister(
        &mut self,
        data_node_id: u64,
        stored_epoch: u64,
        internal_address: &str,
        rpc_address: &str,
    ) -> Result<CommandResult, MetadataError> {
        if let Some(node) = self.data_nodes.get(&data_node_id) {
            if stored_epoch < node.confirmed_epoch {
                return Err(MetadataError::StaleIncarnation {
                    data_node_id,
                    stored_epoch,
                    confirmed_epoch: node.confirmed_epoch,
                });
            }
        }
        // Above the stored epoch too: a registry restored from an older backup of its own
        // must not mint an epoch the DataNode already used.
        let registered = self.register_above(
            data_node_id,
            internal_address,
            rpc_address,
            false,
            stored_epoch,
        )?;
        let node = self
            .data_nodes
            .get_mut(&data_node_id)
            .expect("registered just now");
        node.confirmed_epoch = node.confirmed_epoch.max(stored_epoch);
        Ok(registered)
    }

    /// Incarnation `epoch` of `data_node_id` answered the leader: it ran. An epoch the registry
    /// never minted changes nothing.
    pub(super) fn confirm_incarnation(
        &mut self,
        data_node_id: u64,
        epoch: u64,
    ) -> Result<CommandResult, MetadataError> {
        let node = self
            .data_nodes
            .get_mut(&data_node_id)
            .ok_or(MetadataError::DataNodeNotFound(data_node_id))?;
        if epoch <= node.incarnation_epoch {
            node.confirmed_epoch = node.confirmed_epoch.max(epoch);
        }
        Ok(CommandResult::Done)
    }
}

/// The snapshot's confirmed incarnations (version 8): `u32 n, n × { u64 id, u64 epoch }`, by
/// id, only those above 0.
pub(super) fn encode_confirmed(w: &mut Writer, data_nodes: &BTreeMap<u64, DataNodeRecord>) {
    let confirmed: Vec<&DataNodeRecord> = data_nodes
        .values()
        .filter(|n| n.confirmed_epoch > 0)
        .collect();
    w.len32(confirmed.len());
    for n in confirmed {
        w.u64(n.id);
        w.u64(n.confirmed_epoch);
    }
}

/// Reads [`encode_confirmed`]'s table into the registry read before it: each of a known
/// DataNode, once, at most its incarnation.
pub(super) fn decode_confirmed(
    r: &mut Reader<'_>,
    data_nodes: &mut BTreeMap<u64, DataNodeRecord>,
) -> Result<(), DecodeError> {
    for _ in 0..r.count(16)? {
        let (id, epoch) = (r.u64()?, r.u64()?);
        match data_nodes.get_mut(&id) {
            Some(n) if n.confirmed_epoch == 0 && epoch > 0 && epoch <= n.incarnation_epoch => {
                n.confirmed_epoch = epoch;
            }
            _ => return r.error(format!("confirmed incarnation {epoch} of DataNode {id}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;

    struct Registry {
        state: MetadataState,
        index: u64,
    }

    impl Registry {
        fn new() -> Registry {
            Registry {
                state: MetadataState::new(),
                index: 0,
            }
        }

        fn apply(&mut self, command: Command) -> Result<CommandResult, MetadataError> {
            self.index += 1;
            self.state.apply(self.index, &command)
        }

        fn new_node(&mut self) -> (u64, u64) {
            registered(self.apply(Command::RegisterNewDataNode {
                internal_address: "a:1".into(),
                rpc_address: "a:2".into(),
            }))
        }

        fn reregister(&mut self, id: u64, stored_epoch: u64) -> Result<(u64, u64), MetadataError> {
            self.apply(Command::ReregisterDataNode {
                data_node_id: id,
                stored_epoch,
                internal_address: "a:1".into(),
                rpc_address: "a:2".into(),
            })
            .map(|r| registered(Ok(r)))
        }

        fn confirm(&mut self, id: u64, epoch: u64) {
            assert_eq!(
                self.apply(Command::ConfirmIncarnation {
                    data_node_id: id,
                    incarnation_epoch: epoch,
                }),
                Ok(CommandResult::Done)
            );
        }

        fn confirmed(&self, id: u64) -> u64 {
            self.state.data_node(id).unwrap().confirmed_epoch
        }
    }

    fn registered(result: Result<CommandResult, MetadataError>) -> (u64, u64) {
        match result {
            Ok(CommandResult::Registered {
                data_node_id,
                incarnation_epoch,
            }) => (data_node_id, incarnation_epoch),
            other => panic!("{other:?}"),
        }
    }

    /// REVIEW H3: a data directory restored from a backup taken before an incarnation that
    /// ran (here: one that answered a heartbeat) is refused, and the refusal changes nothing:
    /// the node never counts as its old self. Its normal restart still registers.
    #[test]
    fn a_directory_older_than_a_confirmed_incarnation_is_refused_and_changes_nothing() {
        let mut r = Registry::new();
        let (id, first) = r.new_node();
        assert_eq!((id, first), (1, 1));
        // A restart: the directory held incarnation 1.
        assert_eq!(r.reregister(id, 1), Ok((1, 2)));
        assert_eq!(r.confirmed(id), 1);
        // Incarnation 2 answered the leader's heartbeat.
        r.confirm(id, 2);
        assert_eq!(r.confirmed(id), 2);

        // The directory restored from the backup taken under incarnation 1.
        let before = r.state.encode_snapshot();
        let version = r.state.metadata_version();
        assert_eq!(
            r.reregister(id, 1),
            Err(MetadataError::StaleIncarnation {
                data_node_id: id,
                stored_epoch: 1,
                confirmed_epoch: 2,
            })
        );
        assert_eq!(r.state.data_node(id).unwrap().incarnation_epoch, 2);
        assert_eq!(r.state.metadata_version(), version);
        // Only the applied index moved.
        let after = MetadataState::decode_snapshot(&r.state.encode_snapshot()).unwrap();
        let mut expected = MetadataState::decode_snapshot(&before).unwrap();
        expected.applied_index = after.applied_index;
        assert_eq!(after, expected);

        // The node's own directory (incarnation 2) restarts as before.
        assert_eq!(r.reregister(id, 2), Ok((1, 3)));
        assert_eq!(r.confirmed(id), 2);
    }

    /// A registration whose reply was lost is sent again with the same stored epoch: the epoch
    /// it minted never ran, so it is not refused. A heartbeat can confirm only a minted epoch;
    /// confirmations never go backwards.
    #[test]
    fn a_registration_sent_again_is_not_a_restored_directory() {
        let mut r = Registry::new();
        let (id, _) = r.new_node();
        assert_eq!(r.reregister(id, 1), Ok((1, 2)));
        assert_eq!(r.reregister(id, 1), Ok((1, 3)), "the reply of 2 was lost");
        r.confirm(id, 9);
        assert_eq!(r.confirmed(id), 1, "9 was never minted");
        r.confirm(id, 3);
        r.confirm(id, 2);
        assert_eq!(r.confirmed(id), 3);
        assert!(matches!(
            r.reregister(id, 2),
            Err(MetadataError::StaleIncarnation { .. })
        ));
        assert_eq!(
            r.apply(Command::ConfirmIncarnation {
                data_node_id: 7,
                incarnation_epoch: 1,
            }),
            Err(MetadataError::DataNodeNotFound(7))
        );
    }

    /// A DataNode whose directory holds an epoch the registry never minted (the registry was
    /// restored from an older backup of its own) gets one above it, which it accepts. The old
    /// command, sent by a DataNode that predates the stored epoch, is never refused.
    #[test]
    fn a_stored_epoch_above_the_registry_gets_a_newer_one_and_the_old_command_is_not_checked() {
        let mut r = Registry::new();
        let (id, _) = r.new_node();
        assert_eq!(r.reregister(id, 5), Ok((1, 6)));
        assert_eq!(r.confirmed(id), 5);
        let legacy = r.apply(Command::RegisterDataNode {
            data_node_id: id,
            internal_address: "a:1".into(),
            rpc_address: "a:2".into(),
        });
        assert_eq!(registered(legacy), (1, 7));
    }

    /// Snapshot version 8 keeps the confirmed incarnations (golden tail), and refuses one of an
    /// unknown DataNode or above its incarnation; version 7 decodes to none confirmed.
    #[test]
    fn the_snapshot_keeps_confirmed_incarnations() {
        let mut r = Registry::new();
        let (id, _) = r.new_node();
        r.new_node();
        r.confirm(id, 1);
        let bytes = r.state.encode_snapshot();
        // Before the CRC: the confirmed incarnations, then the (empty) table-model databases.
        let tail = &bytes[bytes.len() - 8 - 20..bytes.len() - 8];
        let mut expected = vec![1, 0, 0, 0];
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(&1u64.to_le_bytes());
        assert_eq!(tail, expected, "one DataNode, id 1, confirmed 1");
        assert_eq!(MetadataState::decode_snapshot(&bytes).unwrap(), r.state);

        let with_tail = |id: u64, epoch: u64| {
            let mut damaged = bytes[..bytes.len() - 24].to_vec();
            damaged.extend_from_slice(&id.to_le_bytes());
            damaged.extend_from_slice(&epoch.to_le_bytes());
            damaged.extend_from_slice(&0u32.to_le_bytes());
            let crc = crc32fast::hash(&damaged);
            damaged.extend_from_slice(&crc.to_le_bytes());
            MetadataState::decode_snapshot(&damaged)
        };
        assert!(with_tail(1, 1).is_ok());
        assert!(with_tail(9, 1).is_err(), "an unknown DataNode");
        assert!(with_tail(1, 2).is_err(), "above its incarnation");

        // Less the table (4 + 16 bytes), the table-model databases (4) and the CRC.
        let mut v7 = bytes[..bytes.len() - 28].to_vec();
        v7[..8].copy_from_slice(MetadataState::SNAPSHOT_MAGIC_V7);
        let crc = crc32fast::hash(&v7);
        v7.extend_from_slice(&crc.to_le_bytes());
        let old = MetadataState::decode_snapshot(&v7).unwrap();
        assert_eq!(old.data_node(id).unwrap().confirmed_epoch, 0);
        assert_eq!(old.data_node(id).unwrap().incarnation_epoch, 1);
    }
}
