//! Replacing a lost replica: a new node joins as a learner with no members known, catches up
//! (by snapshot when the leader's log was compacted), is promoted while the lost voter is
//! removed in one joint-consensus step, and the group then commits without the lost node.

use consensus::{Config, Error, Membership, MembershipChange, Metrics, ReplacementStep};

use crate::harness::Cluster;

fn membership(c: &mut Cluster, node: u64) -> Membership {
    c.node(node).membership(1).unwrap()
}

/// Proposes `change` on the leader and runs until `done` holds on it.
fn change(c: &mut Cluster, change: MembershipChange, done: impl Fn(&Membership) -> bool) {
    let leader = c.elect(1);
    c.node(leader).change_membership(1, change).unwrap();
    assert!(
        c.run_until(30_000, |c| c
            .leader(1)
            .is_some_and(|l| done(&c.node(l).membership(1).unwrap()))),
        "seed {}: {change:?} never took effect: {:?}",
        c.sim.seed(),
        c.leader(1).map(|l| membership(c, l))
    );
}

#[test]
fn a_new_node_replaces_a_lost_one_by_learner_then_joint_change() {
    let mut c = Cluster::new(41, 3, 1, Config::default());
    let leader = c.elect(1);
    for i in 0..20 {
        assert!(c.write(1, format!("before-{i}").as_bytes()).is_ok());
    }
    // Node 3 is lost for good (its disk wiped); the others compact their logs, so the new node
    // can only catch up by snapshot.
    let lost = if leader == 3 { 2 } else { 3 };
    c.crash(lost);
    let survivors: Vec<u64> = [1, 2, 3].into_iter().filter(|&p| p != lost).collect();
    for &p in &survivors {
        let applied = c.model(p, 1).applied_index;
        c.node(p).compact(1, applied).unwrap();
    }
    c.add_node(4);
    c.start(4);
    assert!(
        c.node(4).membership(1).unwrap().voters.is_empty(),
        "a joining replica knows no members"
    );

    // The lost voter cannot be swapped for a replica that is not a caught-up learner yet.
    let leader = c.elect(1);
    assert!(matches!(
        c.node(leader).change_membership(
            1,
            MembershipChange::Replace {
                add: 4,
                remove: lost
            }
        ),
        Err(Error::MembershipChange { .. })
    ));
    change(&mut c, MembershipChange::AddLearner(4), |m| {
        m.learners.contains(&4) && m.matched.get(&4).copied() == Some(m.last_index)
    });
    assert!(
        c.model(4, 1).restores >= 1,
        "the learner caught up by snapshot"
    );
    assert!(c.write(1, b"while-learner").is_ok());

    // The leader may not remove itself.
    let leader = c.elect(1);
    assert!(matches!(
        c.node(leader).change_membership(
            1,
            MembershipChange::Replace {
                add: 4,
                remove: leader
            }
        ),
        Err(Error::MembershipChange { .. })
    ));
    change(
        &mut c,
        MembershipChange::Replace {
            add: 4,
            remove: lost,
        },
        |m| {
            !m.is_joint() && !m.change_pending && m.voters.contains(&4) && !m.voters.contains(&lost)
        },
    );
    let mut expected: Vec<u64> = survivors.clone();
    expected.push(4);
    let leader = c.elect(1);
    assert_eq!(
        membership(&mut c, leader)
            .voters
            .into_iter()
            .collect::<Vec<_>>(),
        expected
    );
    assert!(membership(&mut c, leader).learners.is_empty());
    c.peers = expected.clone();
    c.heal_and_check();

    // Without the lost node and with one survivor down, {other survivor, 4} is a quorum.
    let down = survivors[0];
    c.crash(down);
    assert!(c.write(1, b"quorum-with-the-new-node").is_ok());
    c.start(down);

    c.heal_and_check();
    for &p in &expected {
        let m = membership(&mut c, p);
        assert_eq!(
            m.voters.iter().copied().collect::<Vec<_>>(),
            expected,
            "node {p}"
        );
        assert!(!m.is_joint() && m.learners.is_empty(), "node {p}: {m:?}");
    }
    // The new member restarts as itself, from its stored membership.
    c.crash(4);
    c.start(4);
    assert!(c.write(1, b"after-restart").is_ok());
    c.heal_and_check();
    assert_eq!(
        membership(&mut c, 4)
            .voters
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        expected
    );
}

#[test]
fn a_snapshot_carries_the_membership_as_of_its_own_index() {
    // A second new node joins after the first replacement: the snapshot it gets must name it,
    // and the membership it starts from must be the one as of that snapshot's index.
    let mut c = Cluster::new(42, 3, 1, Config::default());
    c.elect(1);
    for i in 0..10 {
        assert!(c.write(1, format!("w{i}").as_bytes()).is_ok());
    }
    c.add_node(4);
    c.start(4);
    change(&mut c, MembershipChange::AddLearner(4), |m| {
        m.matched.get(&4).copied() == Some(m.last_index)
    });
    for p in [1, 2, 3] {
        let applied = c.model(p, 1).applied_index;
        c.node(p).compact(1, applied).unwrap();
    }
    c.add_node(5);
    c.start(5);
    change(&mut c, MembershipChange::AddLearner(5), |m| {
        m.matched.get(&5).copied() == Some(m.last_index)
    });
    assert!(c.model(5, 1).restores >= 1);
    let m5 = membership(&mut c, 5);
    assert_eq!(m5.voters.iter().copied().collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(m5.learners.iter().copied().collect::<Vec<_>>(), [4, 5]);
    c.peers = vec![1, 2, 3, 4, 5];
    c.heal_and_check();
}

#[test]
fn a_replica_replaying_its_log_skips_the_membership_changes_it_holds() {
    // A state machine that persisted nothing re-applies the whole log after a restart, conf
    // changes among it; raft starts from the stored membership, which already holds them
    // (entering a joint configuration twice would fail, or worse, succeed).
    let mut c = Cluster::new(43, 3, 1, Config::default());
    c.elect(1);
    assert!(c.write(1, b"a").is_ok());
    c.add_node(4);
    c.start(4);
    change(&mut c, MembershipChange::AddLearner(4), |m| {
        m.matched.get(&4).copied() == Some(m.last_index)
    });
    let leader = c.elect(1);
    let removed = [1, 2, 3].into_iter().find(|&p| p != leader).unwrap();
    change(
        &mut c,
        MembershipChange::Replace {
            add: 4,
            remove: removed,
        },
        |m| !m.is_joint() && !m.change_pending && !m.voters.contains(&removed),
    );
    assert!(c.write(1, b"b").is_ok());
    c.crash(removed);
    c.peers = [1, 2, 3, 4].into_iter().filter(|&p| p != removed).collect();
    c.heal_and_check();
    let replay = *c
        .peers
        .iter()
        .find(|&&p| p != c.leader(1).unwrap() && p != 4)
        .unwrap();
    assert_eq!(
        c.node(replay).status(1).unwrap().first_index,
        1,
        "nothing compacted"
    );
    c.crash(replay);
    *c.model_mut(replay, 1) = Default::default();
    c.start(replay);
    assert!(c.write(1, b"c").is_ok());
    c.heal_and_check();
    assert!(c.model(replay, 1).applied_index > 3, "the log was replayed");
    assert_eq!(
        Metrics::get(&c.node(replay).metrics().membership_changes_applied),
        0,
        "replayed membership changes are not applied again"
    );
    let m = membership(&mut c, replay);
    assert!(!m.is_joint() && m.learners.is_empty(), "{m:?}");
    assert_eq!(m.voters.iter().copied().collect::<Vec<_>>(), c.peers);
}

#[test]
fn step_replacement_reconciles_until_done_even_from_the_leaving_leader() {
    // The replacement is driven by repeated steps on whichever node leads, as a DataNode's
    // reconciliation loop does; here the node leaving leads at first and hands leadership away.
    let mut c = Cluster::new(44, 3, 1, Config::default());
    let from = c.elect(1);
    for i in 0..10 {
        assert!(c.write(1, format!("w{i}").as_bytes()).is_ok());
    }
    c.add_node(4);
    c.start(4);
    let mut steps = Vec::new();
    let done = c.run_until(60_000, |c| {
        let Some(leader) = c.leader(1) else {
            return false;
        };
        match c.node(leader).step_replacement(1, from, 4, 8) {
            Ok(ReplacementStep::Done) => return true,
            Ok(ReplacementStep::Waiting) => {}
            Ok(step) => steps.push(step),
            Err(_) => {} // e.g. a leadership transfer in progress
        }
        false
    });
    assert!(done, "seed 44: no convergence; steps {steps:?}");
    assert!(matches!(steps[0], ReplacementStep::TransferredLeadership(t) if t != from && t != 4));
    assert!(steps.contains(&ReplacementStep::Proposed(MembershipChange::AddLearner(4))));
    assert!(
        steps.contains(&ReplacementStep::Proposed(MembershipChange::Replace {
            add: 4,
            remove: from
        }))
    );
    c.crash(from);
    c.peers = [1, 2, 3, 4].into_iter().filter(|&p| p != from).collect();
    assert!(c.write(1, b"after").is_ok());
    c.heal_and_check();
}

#[test]
fn a_replacement_retargeted_before_it_finished_removes_the_stale_learner() {
    // The first target is lost while still a learner (its disk wiped again): the replacement
    // goes on to a newer node, and the stale learner leaves the group.
    let mut c = Cluster::new(45, 3, 1, Config::default());
    let leader = c.elect(1);
    let from = [1, 2, 3].into_iter().find(|&p| p != leader).unwrap();
    assert!(c.write(1, b"a").is_ok());
    c.add_node(4);
    c.start(4);
    change(&mut c, MembershipChange::AddLearner(4), |m| {
        m.matched.get(&4).copied() == Some(m.last_index)
    });
    c.crash(4);
    c.add_node(5);
    c.start(5);
    let mut steps = Vec::new();
    let done = c.run_until(60_000, |c| {
        let Some(leader) = c.leader(1) else {
            return false;
        };
        match c.node(leader).step_replacement(1, from, 5, 8) {
            Ok(ReplacementStep::Done) => return true,
            Ok(ReplacementStep::Waiting) | Err(_) => {}
            Ok(step) => steps.push(step),
        }
        false
    });
    assert!(done, "seed 45: no convergence; steps {steps:?}");
    assert_eq!(
        steps[0],
        ReplacementStep::Proposed(MembershipChange::RemoveLearner(4))
    );
    let leader = c.elect(1);
    let m = membership(&mut c, leader);
    assert!(
        m.learners.is_empty() && !m.voters.contains(&4) && m.voters.contains(&5),
        "{m:?}"
    );
    c.crash(from);
    c.peers = [1, 2, 3, 5].into_iter().filter(|&p| p != from).collect();
    assert!(c.write(1, b"b").is_ok());
    c.heal_and_check();
}
