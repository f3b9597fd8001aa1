//! A fenced leader steps aside: it rejects proposals with 536 and hands leadership to a replica
//! that holds its lease; the group takes writes again through the new leader.

use consensus::{Config, Error, Metrics, StateRole};

use crate::harness::Cluster;

#[test]
fn a_fenced_leader_rejects_with_536_and_transfers_leadership() {
    let mut c = Cluster::new(21, 3, 2, Config::default());
    for g in [1, 2] {
        assert!(c.write(g, format!("before-{g}").as_bytes()).is_ok());
    }
    // Make node 1 lead both groups, then fence it.
    for g in [1, 2] {
        let leader = c.elect(g);
        if leader != 1 {
            c.node(leader).transfer_leader(g, 1).unwrap();
            assert!(c.run_until(5_000, |c| c.leader(g) == Some(1)));
        }
    }
    c.set_fenced(1, true);
    match c.node(1).propose(1, b"while fenced".to_vec()) {
        Err(e @ Error::Fenced { .. }) => assert_eq!(e.status_code().code(), 536),
        other => panic!("expected Fenced, got {other:?}"),
    }
    for g in [1, 2] {
        assert!(
            c.run_until(5_000, |c| c.leader(g).is_some_and(|l| l != 1)),
            "group {g} kept its fenced leader"
        );
        assert_eq!(c.node(1).status(g).unwrap().role, StateRole::Follower);
        assert!(c.write(g, format!("after-{g}").as_bytes()).is_ok());
    }
    assert!(Metrics::get(&c.node(1).metrics().fenced_transfers) >= 2);
    // Node 1's own apply is stuck on 536 while fenced, and catches up once its lease is back.
    assert!(c.node(1).status(1).unwrap().apply_stuck);
    c.heal_and_check();
}

#[test]
fn leadership_goes_only_to_replicas_holding_a_lease() {
    let mut c = Cluster::new(22, 5, 1, Config::default());
    let leader = c.elect(1);
    assert!(c.write(1, b"x").is_ok());
    let others: Vec<_> = c.peers.iter().copied().filter(|&p| p != leader).collect();
    // Two peers fenced as well: the leader must pick one of the remaining two.
    c.set_fenced(others[0], true);
    c.set_fenced(others[1], true);
    c.set_fenced(leader, true);
    assert!(c.run_until(5_000, |c| c.leader(1).is_some_and(|l| l != leader)));
    let new_leader = c.leader(1).unwrap();
    assert!(
        new_leader == others[2] || new_leader == others[3],
        "leadership went to fenced node {new_leader}"
    );
    assert!(c.write(1, b"y").is_ok());
    c.heal_and_check();
}

/// A node whose data was wiped comes back under a new id at its old address, and its old peers
/// keep sending there: a message addressed to another id is dropped, never answered. Before, a
/// heartbeat of a newer term for the old id moved the node to that term under that leader.
#[test]
fn a_message_for_another_node_id_is_dropped() {
    let mut c = Cluster::new(41, 3, 1, Config::default());
    let leader = c.elect(1);
    let other = *c.peers.iter().find(|&&p| p != leader).unwrap();
    let term = c.node(other).status(1).unwrap().term;
    let mut heartbeat = raft::eraftpb::Message::default();
    heartbeat.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeat);
    heartbeat.from = leader;
    heartbeat.to = 99;
    heartbeat.term = term + 5;
    c.node(other)
        .step(consensus::RaftMessage {
            group: 1,
            message: heartbeat,
        })
        .unwrap();
    assert_eq!(c.node(other).status(1).unwrap().term, term);
    assert_eq!(
        Metrics::get(&c.node(other).metrics().misaddressed_messages),
        1
    );
}
