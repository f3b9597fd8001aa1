//! Tests of the DataNode registry: registration, identities and incarnation epochs.

use super::*;

#[test]
fn registering_twice_raises_the_epoch_and_keeps_the_id() {
    let mut h = Harness::new();
    let (id, e1) = h.register(0, "a:1");
    assert_eq!((id, e1), (1, 1));
    assert_eq!(h.register(id, "a:1"), (1, 2));
    // Lost its id file, same address: same node, next epoch.
    assert_eq!(h.register(0, "a:1"), (1, 3));
    assert_eq!(h.register(0, "b:1"), (2, 1));
    assert_eq!(h.state.data_node(1).unwrap().status, NodeStatus::Running);
}

/// REVIEW H3: a DataNode that lost its identity (its data directory wiped) and comes back on
/// a known address is a new node with a new id; the old id keeps its record (and regions)
/// and is never handed out again. Entries of the old command replay as they applied.
#[test]
fn a_node_without_an_identity_is_new_even_on_a_known_address() {
    let mut h = Harness::new();
    assert_eq!(h.register(0, "a:1"), (1, 1));
    let registered = h
        .apply(Command::RegisterNewDataNode {
            internal_address: "a:1".into(),
            rpc_address: "a:1-rpc".into(),
        })
        .unwrap();
    assert_eq!(
        registered,
        CommandResult::Registered {
            data_node_id: 2,
            incarnation_epoch: 1
        }
    );
    let old = h.state.data_node(1).unwrap();
    assert_eq!(
        (old.incarnation_epoch, old.internal_address.as_str()),
        (1, "a:1")
    );
    // The new node keeps its id from then on; the old one's id is still its own.
    assert_eq!(h.register(2, "a:1"), (2, 2));
    assert_eq!(h.register(1, "a:1"), (1, 2));
    assert_eq!(h.register(0, "c:1"), (3, 1));
}
