//! The apply proxy: retry without moving the index, deterministic errors recorded everywhere,
//! apply decoupled from persistence, and the leader answering with its own apply result.

use consensus::{Config, Error, Metrics, ProposalError, StorageError};

use crate::harness::Cluster;

fn config() -> Config {
    Config {
        apply_retry_backoff_min_ms: 10,
        apply_retry_backoff_max_ms: 80,
        ..Config::default()
    }
}

#[test]
fn recoverable_error_is_retried_with_the_index_held() {
    let mut c = Cluster::new(11, 3, 1, config());
    let leader = c.elect(1);
    assert!(c.write(1, b"a").is_ok());
    let follower = *c.peers.iter().find(|&&p| p != leader).unwrap();
    c.models[&(follower, 1)].lock().fenced = true;
    let held = c.model(follower, 1).applied_index;
    assert!(c.write(1, b"b").is_ok());
    c.run_ms(1_000);
    let status = c.node(follower).status(1).unwrap();
    assert!(status.apply_stuck, "{status:?}");
    assert!(status.commit > status.applied, "{status:?}");
    assert_eq!(c.model(follower, 1).applied_index, held);
    let retries = Metrics::get(&c.node(follower).metrics().apply_retries);
    // Backoff 10, 20, 40, then capped at 80 ms: about 15 retries in a simulated second.
    assert!((8..=20).contains(&retries), "retries {retries}");
    assert_eq!(c.model(follower, 1).recoverable_returns, retries);

    c.models[&(follower, 1)].lock().fenced = false;
    c.run_ms(200);
    let status = c.node(follower).status(1).unwrap();
    assert!(!status.apply_stuck);
    assert_eq!(c.model(follower, 1).applied.last().unwrap().1, b"b");
    c.heal_and_check();
}

#[test]
fn deterministic_error_is_recorded_and_skipped_on_every_replica() {
    let mut c = Cluster::new(12, 3, 1, config());
    assert!(c.write(1, b"ok-1").is_ok());
    match c.write(1, b"bad-2") {
        Err(ProposalError::Apply { code, .. }) => assert_eq!(code, 614),
        other => panic!("expected 614, got {other:?}"),
    }
    assert!(c.write(1, b"ok-3").is_ok());
    c.heal_and_check();
    for &p in &c.peers.clone() {
        let m = c.model(p, 1);
        let bad: Vec<_> = m.applied.iter().filter(|(_, _, ok)| !ok).collect();
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].1, b"bad-2");
        assert!(m.applied.last().unwrap().1.starts_with(b"marker-1-"));
        assert_eq!(
            Metrics::get(&c.node(p).metrics().apply_deterministic_errors),
            1
        );
    }
}

#[test]
fn a_stuck_follower_still_persists_and_acknowledges() {
    let mut c = Cluster::new(13, 3, 1, config());
    let leader = c.elect(1);
    let others: Vec<_> = c.peers.iter().copied().filter(|&p| p != leader).collect();
    let (stuck, down) = (others[0], others[1]);
    c.models[&(stuck, 1)].lock().fenced = true;
    c.crash(down);
    // The quorum is the leader plus the stuck replica: commits need the stuck one's acks.
    for i in 0..20 {
        assert!(c.write(1, format!("w{i}").as_bytes()).is_ok());
    }
    let status = c.node(stuck).status(1).unwrap();
    let leader_commit = c.node(leader).status(1).unwrap().commit;
    assert!(status.last_index >= leader_commit, "{status:?}");
    assert!(status.applied < leader_commit, "{status:?}");
    assert_eq!(c.model(stuck, 1).applied.len(), 0);
    c.heal_and_check();
}

#[test]
fn the_leader_answers_once_its_own_apply_succeeds() {
    let mut c = Cluster::new(14, 3, 1, config());
    let leader = c.elect(1);
    c.models[&(leader, 1)].lock().fenced = true;
    let ticket = c.node(leader).propose(1, b"x".to_vec()).unwrap();
    c.run_ms(500);
    assert!(!ticket.is_done(), "answered before the leader applied");
    let commit = c.node(leader).status(1).unwrap().commit;
    for &p in &c.peers.clone() {
        if p != leader {
            assert_eq!(c.node(p).status(1).unwrap().applied, commit);
        }
    }
    c.models[&(leader, 1)].lock().fenced = false;
    c.run_ms(200);
    let result = ticket.try_take().expect("answered").expect("applied");
    assert_eq!(result, commit.to_le_bytes().to_vec());
}

#[test]
fn in_flight_proposals_are_bounded() {
    let mut c = Cluster::new(
        15,
        3,
        1,
        Config {
            in_flight_proposals_max: 4,
            ..config()
        },
    );
    let leader = c.elect(1);
    let tickets: Vec<_> = (0..4)
        .map(|i| c.node(leader).propose(1, vec![b'p', i]).unwrap())
        .collect();
    match c.node(leader).propose(1, b"one too many".to_vec()) {
        Err(e @ Error::Backpressure { .. }) => assert_eq!(e.status_code().code(), 606),
        other => panic!("expected backpressure, got {other:?}"),
    }
    // All four went out in one ready batch and resolve together.
    c.run_until(5_000, |_| tickets.iter().all(|t| t.is_done()));
    assert!(tickets.iter().all(|t| t.try_take().unwrap().is_ok()));
    assert!(c.node(leader).propose(1, b"fits again".to_vec()).is_ok());
}

#[test]
fn proposals_on_a_follower_name_the_leader() {
    let mut c = Cluster::new(16, 3, 1, config());
    let leader = c.elect(1);
    c.run_ms(100);
    let follower = *c.peers.iter().find(|&&p| p != leader).unwrap();
    match c.node(follower).propose(1, b"x".to_vec()) {
        Err(Error::NotLeader { leader: hint, .. }) => assert_eq!(hint, Some(leader)),
        other => panic!("expected NotLeader, got {other:?}"),
    }
}

#[test]
fn read_index_is_linearizable_on_the_leader() {
    let mut c = Cluster::new(17, 3, 1, config());
    let leader = c.elect(1);
    assert!(c.write(1, b"before-read").is_ok());
    let write_index = c.node(leader).status(1).unwrap().applied;
    let ticket = c.node(leader).read_index(1).unwrap();
    assert!(c.run_until(5_000, |_| ticket.is_done()));
    let index = ticket.try_take().unwrap().unwrap();
    assert!(index >= write_index);
    assert!(c.node(leader).status(1).unwrap().applied >= index);
    let follower = *c.peers.iter().find(|&&p| p != leader).unwrap();
    assert!(matches!(
        c.node(follower).read_index(1),
        Err(Error::NotLeader { .. })
    ));
}

#[test]
fn acknowledged_writes_survive_a_full_restart() {
    let mut c = Cluster::new(18, 3, 2, config());
    for i in 0..10 {
        assert!(c.write(1 + i % 2, format!("r{i}").as_bytes()).is_ok());
    }
    for p in c.peers.clone() {
        c.crash(p);
    }
    for p in c.peers.clone() {
        c.start(p);
    }
    c.heal_and_check();
}

#[test]
fn a_state_machine_ahead_of_its_log_is_refused() {
    let mut c = Cluster::new(19, 3, 1, config());
    assert!(c.write(1, b"a").is_ok());
    c.crash(1);
    // Node 1 comes back with an empty log but a state machine that applied entries.
    c.logs.insert(1, consensus::MemLog::default());
    let backend = Box::new(c.logs[&1].clone());
    let node = c.sim.open(1, c.config.clone(), backend).unwrap();
    let sm = crate::harness::ModelSm {
        group: 1,
        state: c.models[&(1, 1)].clone(),
        history: c.history.clone(),
    };
    match node.create_group(1, &[1, 2, 3], Box::new(sm)) {
        Err(Error::Storage(StorageError::StateMachineAheadOfLog { applied, .. })) => {
            assert!(applied >= 1)
        }
        other => panic!("expected StateMachineAheadOfLog, got {other:?}"),
    }
    let sm = crate::harness::ModelSm {
        group: 2,
        state: Default::default(),
        history: c.history.clone(),
    };
    assert!(matches!(
        node.create_group(2, &[2, 3], Box::new(sm)),
        Err(Error::NotAPeer { group: 2, node: 1 })
    ));
}

#[test]
fn a_held_follower_takes_no_more_than_its_unapplied_bound_then_catches_up() {
    let bound = 2_000;
    let mut c = Cluster::new(
        17,
        3,
        1,
        Config {
            unapplied_bytes_max: bound,
            ..config()
        },
    );
    let leader = c.elect(1);
    let held = *c.peers.iter().find(|&&p| p != leader).unwrap();
    c.models[&(held, 1)].lock().fenced = true;
    // 100 writes of 100 bytes: five times the bound. The other two replicas are a quorum.
    for i in 0..100 {
        let data = format!("{i:0>100}");
        assert!(c.write(1, data.as_bytes()).is_ok(), "write {i}");
    }
    let status = c.node(held).status(1).unwrap();
    let leader_last = c.node(leader).status(1).unwrap().last_index;
    // What it holds unapplied stays within the bound plus the message that crossed it (one
    // write per message here).
    let unapplied_entries = status.last_index - status.applied;
    assert!(
        unapplied_entries <= bound / 100 + 2,
        "held follower took {unapplied_entries} entries: {status:?}"
    );
    assert!(
        status.last_index < leader_last,
        "{status:?} vs leader at {leader_last}"
    );
    assert!(Metrics::get(&c.node(held).metrics().appends_refused_unapplied) > 0);
    // Its lease returns: it applies what it holds and takes the rest.
    c.models[&(held, 1)].lock().fenced = false;
    c.heal_and_check();
}
