//! A replica that fell behind a compacted log is brought back with a state-machine snapshot.

use consensus::{Config, Metrics};

use crate::harness::Cluster;

#[test]
fn a_lagging_replica_installs_a_snapshot() {
    let mut c = Cluster::new(31, 3, 1, Config::default());
    let leader = c.elect(1);
    let lagging = *c.peers.iter().find(|&&p| p != leader).unwrap();
    assert!(c.write(1, b"early").is_ok());
    c.crash(lagging);
    for i in 0..30 {
        assert!(c.write(1, format!("w{i}").as_bytes()).is_ok());
    }
    assert!(matches!(
        c.write(1, b"bad-w"),
        Err(consensus::ProposalError::Apply { code: 614, .. })
    ));
    for p in c.peers.clone() {
        if c.is_up(p) {
            let index = c.model(p, 1).applied_index;
            c.node(p).compact(1, index).unwrap();
            assert_eq!(c.node(p).status(1).unwrap().first_index, index + 1);
        }
    }
    c.start(lagging);
    assert!(c.write(1, b"after").is_ok());
    c.heal_and_check();
    assert_eq!(c.model(lagging, 1).restores, 1);
    // Restored durably, the snapshot is released from the log (it would pin the shared log of a
    // replica that flushes nothing), and a restart neither keeps nor restores it again.
    assert!(!c.node(lagging).status(1).unwrap().holds_received_snapshot);
    c.crash(lagging);
    c.start(lagging);
    assert!(!c.node(lagging).status(1).unwrap().holds_received_snapshot);
    c.heal_and_check();
    assert_eq!(c.model(lagging, 1).restores, 1);
    assert!(Metrics::get(&c.node(leader).metrics().snapshots.generated) >= 1);
    // The deterministic error arrived inside the snapshot, recorded like everywhere else.
    assert!(c
        .model(lagging, 1)
        .applied
        .iter()
        .any(|(_, d, ok)| d == b"bad-w" && !ok));
}

#[test]
fn compaction_is_bounded_by_the_applied_index() {
    let mut c = Cluster::new(32, 3, 1, Config::default());
    let leader = c.elect(1);
    assert!(c.write(1, b"a").is_ok());
    let applied = c.model(leader, 1).applied_index;
    assert!(matches!(
        c.node(leader).compact(1, applied + 1),
        Err(consensus::Error::Storage(
            consensus::StorageError::CompactBeyondApplied { .. }
        ))
    ));
}

/// Crashes a follower, writes 30 entries and compacts every live replica to its applied index,
/// with `compact_keeping_followers` when `keep_followers`, else with `compact`; answers the
/// leader and the follower.
fn compact_around_a_crashed_follower(c: &mut Cluster, keep_followers: bool) -> (u64, u64) {
    let leader = c.elect(1);
    let lagging = *c.peers.iter().find(|&&p| p != leader).unwrap();
    assert!(c.write(1, b"early").is_ok());
    c.crash(lagging);
    for i in 0..30 {
        assert!(c.write(1, format!("w{i:0>20}").as_bytes()).is_ok());
    }
    for p in c.peers.clone() {
        if c.is_up(p) {
            let index = c.model(p, 1).applied_index;
            if keep_followers {
                c.node(p).compact_keeping_followers(1, index).unwrap();
            } else {
                c.node(p).compact(1, index).unwrap();
            }
        }
    }
    (leader, lagging)
}

#[test]
fn a_leader_keeps_its_log_for_a_follower_within_the_lag_allowance() {
    let mut c = Cluster::new(33, 3, 1, Config::default());
    let (leader, lagging) = compact_around_a_crashed_follower(&mut c, true);
    // The leader kept everything after the crashed follower's matched index.
    let first = c.node(leader).status(1).unwrap().first_index;
    assert!(first <= 3, "leader compacted to {first} past the follower");
    c.start(lagging);
    assert!(c.write(1, b"after").is_ok());
    c.heal_and_check();
    // It caught up from the log: no snapshot.
    assert_eq!(c.model(lagging, 1).restores, 0);
    assert_eq!(
        Metrics::get(&c.node(leader).metrics().snapshots.generated),
        0
    );
}

#[test]
fn a_follower_past_the_lag_allowance_catches_up_by_snapshot() {
    let config = Config {
        log_lag_entries_max: 10,
        ..Config::default()
    };
    let mut c = Cluster::new(34, 3, 1, config);
    let (leader, lagging) = compact_around_a_crashed_follower(&mut c, true);
    let status = c.node(leader).status(1).unwrap();
    assert_eq!(status.first_index, status.applied + 1, "{status:?}");
    c.start(lagging);
    assert!(c.write(1, b"after").is_ok());
    c.heal_and_check();
    assert_eq!(c.model(lagging, 1).restores, 1);
}

/// A state machine that cannot produce its snapshot (an unreadable file) generates none: the
/// node keeps running, raft asks again, and the replica is brought back once it can.
#[test]
fn a_snapshot_that_fails_to_generate_is_asked_again() {
    let mut c = Cluster::new(37, 3, 1, Config::default());
    let leader = c.elect(1);
    let lagging = *c.peers.iter().find(|&&p| p != leader).unwrap();
    c.crash(lagging);
    for i in 0..20 {
        assert!(c.write(1, format!("w{i}").as_bytes()).is_ok());
    }
    for p in c.peers.clone() {
        if c.is_up(p) {
            let index = c.model(p, 1).applied_index;
            c.node(p).compact(1, index).unwrap();
        }
    }
    c.model_mut(leader, 1).snapshot_failures = 3;
    c.start(lagging);
    assert!(c.write(1, b"after").is_ok());
    c.heal_and_check();
    assert_eq!(
        c.model(leader, 1).snapshot_failures,
        0,
        "every failure was met"
    );
    assert_eq!(c.model(lagging, 1).restores, 1);
    assert!(Metrics::get(&c.node(leader).metrics().snapshots.generated) >= 1);
}

/// A snapshot built by a job runs on a thread of its own: while it is held, the leader goes on
/// writing and applying, and compaction leaves the log from the job's start in place so the
/// snapshot still joins it; once released, the lagging replica restores it.
#[test]
fn a_snapshot_built_off_the_raft_thread_stalls_nothing_and_pins_the_log() {
    let mut c = Cluster::new(37, 3, 1, Config::default());
    let gate = std::sync::Arc::new(parking_lot::RwLock::new(()));
    for p in c.peers.clone() {
        c.model_mut(p, 1).snapshot_gate = Some(gate.clone());
    }
    let (leader, lagging) = compact_around_a_crashed_follower(&mut c, false);
    let held = gate.write();
    c.start(lagging);
    // The leader asks for a snapshot and starts the job, which waits at the gate.
    c.run_ms(2_000);
    let pinned_at = c.model(leader, 1).applied_index;
    for i in 0..10 {
        assert!(
            c.write(1, format!("during{i}").as_bytes()).is_ok(),
            "the leader writes while a snapshot is built"
        );
    }
    let applied = c.model(leader, 1).applied_index;
    assert!(applied >= pinned_at + 10);
    c.node(leader).compact(1, applied).unwrap();
    let first = c.node(leader).status(1).unwrap().first_index;
    assert!(
        first <= pinned_at + 1,
        "compacted to {first} past the snapshot's start {pinned_at}"
    );
    assert_eq!(c.model(lagging, 1).restores, 0, "nothing built yet");
    assert_eq!(
        Metrics::get(&c.node(leader).metrics().snapshots.generated),
        0
    );
    assert_eq!(
        Metrics::get(&c.node(leader).metrics().snapshots.builds),
        1,
        "one job, held at the gate"
    );

    drop(held);
    let restored = (0..500).any(|_| {
        c.run_ms(50);
        std::thread::sleep(std::time::Duration::from_millis(2));
        c.model(lagging, 1).restores > 0
    });
    assert!(restored, "the lagging replica restored the built snapshot");
    assert!(c.write(1, b"after").is_ok());
    c.heal_and_check();
    assert!(Metrics::get(&c.node(leader).metrics().snapshots.generated) >= 1);
    assert_eq!(Metrics::get(&c.node(leader).metrics().snapshots.builds), 0);
}
