//! `DataRegionStateMachine` on its own: the bounded, non-blocking retry of fenced writes, the
//! deterministic verdicts, and snapshots.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use consensus::{ApplyError, ManualClock, StateMachine};
use datanode::region_state_machine::{decode_outcome, DataRegionStateMachine, RegionRetryConfig};
use engine::{ApplyOutcome, DataRegion, ManualGate, RegionCommand};

use crate::support::{config, content, tablet};

fn machine(dir: &std::path::Path) -> (DataRegionStateMachine, Arc<ManualGate>, ManualClock) {
    let region = Arc::new(DataRegion::open(dir, config()).unwrap());
    let gate = Arc::new(ManualGate::new());
    let clock = ManualClock::default();
    let sm = DataRegionStateMachine::new(
        region,
        gate.clone(),
        Arc::new(clock.clone()),
        RegionRetryConfig {
            write_retry_max: 3,
            write_retry_wait_ms: 1000,
        },
    );
    (sm, gate, clock)
}

fn code(e: &ApplyError) -> (bool, u16) {
    match e {
        ApplyError::Recoverable { code, .. } => (true, *code),
        ApplyError::Deterministic { code, .. } => (false, *code),
    }
}

#[test]
fn fenced_write_retries_a_bounded_number_of_times_then_hands_536_to_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let (mut sm, gate, clock) = machine(dir.path());
    let entry = RegionCommand::insert(tablet("root.sg.d1", &[1, 11, 21], 0.0)).encode();
    gate.set_fenced(true);

    // First attempt and three retries, each 1000 ms apart; calls in between do not attempt.
    for attempt in 1..=3u64 {
        let checks = gate.checks();
        let err = sm.apply(5, &entry).unwrap_err();
        assert_eq!(code(&err), (true, 536), "attempt {attempt}");
        assert_eq!(gate.checks(), checks + 1, "one engine attempt per retry");
        clock.advance_ms(999);
        let err = sm.apply(5, &entry).unwrap_err();
        assert_eq!(code(&err), (true, 536));
        assert_eq!(
            gate.checks(),
            checks + 1,
            "no attempt before the wait is over"
        );
        clock.advance_ms(1);
    }
    assert_eq!(sm.metrics().write_retries.load(Ordering::Relaxed), 3);
    let err = sm.apply(5, &entry).unwrap_err();
    assert_eq!(code(&err), (true, 536));
    assert_eq!(
        sm.metrics().retries_exhausted.load(Ordering::Relaxed),
        1,
        "budget spent: 536 to the proxy"
    );
    assert_eq!(sm.applied_index(), 0, "the index is held");
    assert!(
        content(sm.region()).is_empty(),
        "nothing of the attempts remains"
    );

    // The proxy calls again later; once the lease is back the entry applies whole.
    gate.set_fenced(false);
    let outcome = sm.apply(5, &entry).unwrap();
    assert_eq!(
        decode_outcome(&outcome),
        Some(ApplyOutcome::Inserted { points: 5 })
    );
    assert_eq!(sm.applied_index(), 5);
}

#[test]
fn type_mismatch_and_undecodable_entries_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let (mut sm, _gate, _clock) = machine(dir.path());
    let good = RegionCommand::insert(tablet("root.sg.d1", &[1], 0.0)).encode();
    sm.apply(1, &good).unwrap();

    let mut clash = tablet("root.sg.d1", &[2], 0.0);
    clash.data_types[0] = common::DataType::Int64;
    clash.columns[0] = common::Column::Int64(vec![7]);
    let err = sm
        .apply(2, &RegionCommand::insert(clash).encode())
        .unwrap_err();
    assert_eq!(code(&err), (false, 614));
    assert_eq!(
        sm.applied_index(),
        2,
        "the entry's result is recorded, the index moves on"
    );

    let err = sm.apply(3, &[1, 9, 9]).unwrap_err();
    assert_eq!(code(&err), (false, 700));
}

#[test]
fn snapshot_restores_identical_content_on_another_replica() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let (mut leader, _, _) = machine(a.path());
    let (mut follower, _, _) = machine(b.path());
    leader
        .apply(
            1,
            &RegionCommand::insert(tablet("root.sg.d1", &[1, 15, 29], 0.0)).encode(),
        )
        .unwrap();
    leader.region().flush().unwrap();
    leader
        .apply(
            2,
            &RegionCommand::insert(tablet("root.sg.d2", &[3, 4], 9.0)).encode(),
        )
        .unwrap();
    follower
        .apply(
            1,
            &RegionCommand::insert(tablet("root.sg.old", &[1], 0.0)).encode(),
        )
        .unwrap();

    let snapshot = leader.snapshot().unwrap();
    follower.restore(2, &snapshot).unwrap();
    assert_eq!(follower.applied_index(), 2);
    assert_eq!(content(follower.region()), content(leader.region()));
    assert_eq!(
        follower.region().digest().unwrap(),
        leader.region().digest().unwrap()
    );

    // Durable: a restart of the follower finds the snapshot's content at its index.
    drop(follower);
    let reopened = DataRegion::open(b.path(), config()).unwrap();
    assert_eq!(reopened.applied_index(), 2);
    assert_eq!(
        reopened.digest().unwrap(),
        leader.region().digest().unwrap()
    );

    let mut corrupt = snapshot.clone();
    corrupt[20] ^= 1;
    let c = tempfile::tempdir().unwrap();
    let (mut other, _, _) = machine(c.path());
    assert!(
        code(&other.restore(2, &corrupt).unwrap_err()).0,
        "a bad snapshot is retried, never half-installed"
    );
}

/// A snapshot holds each series as one tablet of all its points, so the limits on a session's
/// tablet (`rows_max`) must not apply to a restore: a follower refused such a series with a
/// recoverable error and retried it for ever (REVIEW H2).
#[test]
fn a_series_longer_than_a_tablet_may_be_restored() {
    let region_config = || engine::StorageConfig {
        tablet_limits: common::TabletLimits {
            rows_max: 4,
            ..common::TabletLimits::default()
        },
        ..config()
    };
    let open = |dir: &std::path::Path| {
        DataRegionStateMachine::new(
            Arc::new(DataRegion::open(dir, region_config()).unwrap()),
            Arc::new(ManualGate::new()),
            Arc::new(ManualClock::default()),
            RegionRetryConfig {
                write_retry_max: 3,
                write_retry_wait_ms: 1000,
            },
        )
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut leader, mut follower) = (open(a.path()), open(b.path()));
    for (index, from) in [(1, 0), (2, 4), (3, 8)] {
        let timestamps: Vec<i64> = (from..from + 4).collect();
        leader
            .apply(
                index,
                &RegionCommand::insert(tablet("root.sg.d1", &timestamps, 1.0)).encode(),
            )
            .unwrap();
    }
    let snapshot = leader.snapshot().unwrap();
    follower
        .restore(3, &snapshot)
        .expect("a 12-point series restores under a 4-row tablet limit");
    assert_eq!(content(follower.region()), content(leader.region()));
}

/// A snapshot goes as one raft message: a region whose snapshot could not fit one builds none
/// (before, a leader built multi-GB snapshots on its raft thread and ran out of memory).
#[test]
fn a_region_too_large_for_one_snapshot_message_builds_none() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (leader, _, _) = machine(a.path());
    let mut leader = leader.with_snapshot_bytes_max(100);
    let timestamps: Vec<i64> = (0..12).collect();
    leader
        .apply(
            1,
            &RegionCommand::insert(tablet("root.sg.d1", &timestamps, 1.0)).encode(),
        )
        .unwrap();
    // 12 points of s1 and 8 of s2: about 240 bytes, over 100.
    let refused = leader.snapshot().expect_err("too large for one message");
    assert_eq!(code(&refused), (true, 606), "{refused:?}");

    let leader = leader.with_snapshot_bytes_max(64 << 20);
    let snapshot = leader.snapshot().expect("fits");
    let (mut follower, _, _) = machine(b.path());
    follower.restore(1, &snapshot).unwrap();
    assert_eq!(content(follower.region()), content(leader.region()));
}

/// The snapshot job (built off the raft thread) answers the index its content reflects and the
/// same bytes as the inline snapshot, keeps the size guard, and reads the region as it is when
/// the job runs, not when it was handed out.
#[test]
fn the_snapshot_job_builds_what_the_inline_snapshot_does_at_its_own_index() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut leader, _, _) = machine(a.path());
    leader
        .apply(
            1,
            &RegionCommand::insert(tablet("root.sg.d1", &[1, 2], 0.0)).encode(),
        )
        .unwrap();
    let job = leader
        .snapshot_job()
        .expect("a region builds off the raft thread");
    leader
        .apply(
            2,
            &RegionCommand::insert(tablet("root.sg.d2", &[5], 1.0)).encode(),
        )
        .unwrap();
    let (index, bytes) = job().unwrap();
    assert_eq!(index, 2, "the content's index, read when the job ran");
    assert_eq!(bytes, leader.snapshot().unwrap());
    let (mut follower, _, _) = machine(b.path());
    follower.restore(index, &bytes).unwrap();
    assert_eq!(content(follower.region()), content(leader.region()));

    let small = leader.with_snapshot_bytes_max(10);
    let refused = small.snapshot_job().unwrap()().expect_err("over the guard");
    assert_eq!(code(&refused), (true, 606), "{refused:?}");
}
