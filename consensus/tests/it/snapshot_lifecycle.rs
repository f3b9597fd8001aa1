//! What a leader does with the snapshots it generates (REVIEW-2026-12-05 N2, N10): it rebuilds
//! one only once the state machine moved past it, labels a job's snapshot from its membership
//! history also after a restart, and releases one no follower used for a while.

use std::sync::Arc;

use consensus::{Config, MembershipChange, Metrics};

use crate::harness::Cluster;

fn metric(c: &mut Cluster, node: u64, read: impl Fn(&Metrics) -> u64) -> u64 {
    read(c.node(node).metrics())
}

fn generated(m: &Metrics) -> u64 {
    Metrics::get(&m.snapshots.generated)
}

/// Snapshots are built by jobs (the DataNode's way) on every replica's model.
fn with_jobs(c: &mut Cluster) {
    let gate = Arc::new(parking_lot::RwLock::new(()));
    for (_, model) in c.models.iter() {
        model.lock().snapshot_gate = Some(gate.clone());
    }
}

/// Runs until `done` (checked every 50 simulated ms, up to `ms`), giving snapshot jobs a
/// moment of real time between steps: they run on threads of their own.
fn run_until(c: &mut Cluster, ms: u64, mut done: impl FnMut(&mut Cluster) -> bool) -> bool {
    for _ in 0..ms / 50 {
        if done(c) {
            return true;
        }
        c.run_ms(50);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    done(c)
}

/// Writes, then compacts every live replica's log to its state machine's applied index.
fn write_and_compact(c: &mut Cluster, prefix: &str, n: usize) {
    for i in 0..n {
        assert!(c.write(1, format!("{prefix}{i}").as_bytes()).is_ok());
    }
    for p in c.peers.clone() {
        if c.is_up(p) {
            let index = c.model(p, 1).applied_index;
            c.node(p).compact(1, index).unwrap();
        }
    }
}

/// A learner added after the last write of a group whose state machine does not follow raft's
/// applied index (the default `note_applied`) is never named by a snapshot at the state
/// machine's index. The leader asks at every heartbeat response; before the bound it flushed
/// and read the whole state each time. Now it builds once, refuses the rebuilds, and builds
/// again once a write moved the state machine on — which catches the learner up.
#[test]
fn a_snapshot_is_rebuilt_only_once_the_state_machine_moved_past_it() {
    let mut c = Cluster::new(51, 3, 1, Config::default());
    with_jobs(&mut c);
    let leader = c.elect(1);
    write_and_compact(&mut c, "w", 10);
    c.add_node(4);
    with_jobs(&mut c);
    c.start(4);
    let leader_now = c.elect(1);
    assert_eq!(leader_now, leader);
    c.node(leader)
        .change_membership(1, MembershipChange::AddLearner(4))
        .unwrap();
    run_until(&mut c, 10_000, |_| false);
    let built = metric(&mut c, leader, generated);
    let refused = metric(&mut c, leader, |m| {
        Metrics::get(&m.snapshots.rebuilds_refused)
    });
    assert_eq!(c.model(4, 1).restores, 0, "no snapshot names the learner");
    assert!(
        built <= 1,
        "the leader built {built} snapshots at one index in 10 s"
    );
    assert!(refused >= 5, "raft kept asking: {refused} refusals");

    assert!(c.write(1, b"moves-on").is_ok());
    assert!(
        run_until(&mut c, 10_000, |c| c.model(4, 1).restores == 1),
        "a write moved the state machine past the held snapshot: one rebuild names the learner"
    );
    assert_eq!(
        metric(&mut c, leader, |m| Metrics::get(&m.snapshots.rebuilt)),
        1
    );
}

/// A job's snapshot reflects the state machine's index, below the group's last membership
/// changes. After a restart the leader still knows the membership as of that index: the
/// history is persisted with the raft log. Before, it restarted from the latest membership
/// alone, could not label the snapshot, and built none until a write came.
#[test]
fn a_restarted_leader_labels_a_snapshot_below_its_last_membership_change() {
    let mut c = Cluster::new(52, 3, 1, Config::default());
    with_jobs(&mut c);
    let leader = c.elect(1);
    let lagging = *c.peers.iter().find(|&&p| p != leader).unwrap();
    c.crash(lagging);
    assert!(c.write(1, b"early").is_ok());
    for change in [
        MembershipChange::AddLearner(9),
        MembershipChange::RemoveLearner(9),
    ] {
        let leader = c.elect(1);
        c.node(leader).change_membership(1, change).unwrap();
        assert!(run_until(&mut c, 10_000, |c| {
            c.leader(1)
                .is_some_and(|l| !c.live(l).membership(1).unwrap().change_pending)
        }));
    }
    write_and_compact(&mut c, "w", 0);
    let applied = c.model(leader, 1).applied_index;
    let conf_index = c.node(leader).status(1).unwrap().applied;
    assert!(
        applied + 2 <= conf_index,
        "the changes come after the state"
    );
    // Every live replica restarts from its log.
    let live: Vec<u64> = c.peers.iter().copied().filter(|&p| c.is_up(p)).collect();
    for &p in &live {
        c.crash(p);
    }
    for &p in &live {
        c.start(p);
    }
    c.start(lagging);
    assert!(
        run_until(&mut c, 20_000, |c| c.model(lagging, 1).restores == 1),
        "the lagging replica got a snapshot at {applied}, labelled with the membership as of it"
    );
    c.heal_and_check();
}

/// A generated snapshot no follower was sent for `idle_ms` is dropped (what it pins — a
/// streamed snapshot's files — may then go), not sooner; a follower that needs one later gets
/// a new one.
#[test]
fn an_idle_snapshot_is_released_and_built_again_when_needed() {
    let mut c = Cluster::new(53, 3, 1, Config::default());
    with_jobs(&mut c);
    let leader = c.elect(1);
    let lagging = *c.peers.iter().find(|&&p| p != leader).unwrap();
    assert!(
        c.node(leader).release_idle_snapshot(1, 5_000).unwrap(),
        "none held"
    );
    c.crash(lagging);
    write_and_compact(&mut c, "a", 10);
    c.start(lagging);
    assert!(run_until(&mut c, 10_000, |c| c.model(lagging, 1).restores == 1));
    let released = |m: &Metrics| Metrics::get(&m.snapshots.released);
    assert!(
        !c.node(leader).release_idle_snapshot(1, 5_000).unwrap(),
        "just sent"
    );
    run_until(&mut c, 5_500, |_| false);
    assert!(c.node(leader).release_idle_snapshot(1, 5_000).unwrap());
    assert_eq!(metric(&mut c, leader, released), 1);
    assert!(c.node(leader).release_idle_snapshot(1, 5_000).unwrap());
    assert_eq!(metric(&mut c, leader, released), 1, "released once");

    let built = metric(&mut c, leader, generated);
    c.crash(lagging);
    write_and_compact(&mut c, "b", 10);
    c.start(lagging);
    assert!(run_until(&mut c, 10_000, |c| c.model(lagging, 1).restores == 2));
    assert_eq!(metric(&mut c, leader, generated), built + 1);
    c.heal_and_check();
}
