//! Raft storage on a real `wal` directory: one fsync per ready batch across groups, compaction
//! that frees segments, and restart from disk.

use std::path::PathBuf;

use consensus::{Config, Metrics};
use wal::{Durability, WalOptions};

use crate::harness::Cluster;

fn options(dir: PathBuf) -> WalOptions {
    let mut options = WalOptions::new(dir);
    options.durability = Durability::None;
    options.preallocate = false;
    options
}

fn small_segments(dir: PathBuf) -> WalOptions {
    let mut options = options(dir);
    options.segment_bytes = 16 << 10;
    options
}

#[test]
fn one_fsync_per_ready_batch_across_groups() {
    let mut c = Cluster::with_wal(41, 3, 4, Config::default(), options);
    for g in 1..=4 {
        assert!(c.write(g, b"warm-up").is_ok());
    }
    // Put every group's leadership on node 1 so that its batches span groups.
    for g in 1..=4 {
        let leader = c.elect(g);
        if leader != 1 {
            c.node(leader).transfer_leader(g, 1).unwrap();
            assert!(c.run_until(5_000, |c| c.leader(g) == Some(1)));
        }
    }
    c.run_ms(100);
    let fsyncs_before = c.node(1).fsyncs();
    let batches_before = Metrics::get(&c.node(1).metrics().synced_batches);
    let mut tickets = Vec::new();
    for g in 1..=4 {
        for i in 0..10 {
            tickets.push(
                c.node(1)
                    .propose(g, format!("w{g}-{i}").into_bytes())
                    .unwrap(),
            );
        }
    }
    assert!(c.run_until(5_000, |_| tickets.iter().all(|t| t.is_done())));
    assert!(tickets.iter().all(|t| t.try_take().unwrap().is_ok()));
    let fsyncs = c.node(1).fsyncs() - fsyncs_before;
    let batches = Metrics::get(&c.node(1).metrics().synced_batches) - batches_before;
    assert_eq!(fsyncs, batches, "exactly one fsync per synced batch");
    // 40 proposals in 4 groups: appended in one batch, then a few rounds of commit traffic.
    assert!(fsyncs <= 6, "{fsyncs} fsyncs for 40 proposals");
    c.heal_and_check();
}

#[test]
fn compaction_frees_segments_and_restart_replays_the_rest() {
    let mut c = Cluster::with_wal(42, 3, 2, Config::default(), small_segments);
    let payload = "p".repeat(400);
    for i in 0..120 {
        assert!(c
            .write(1 + i % 2, format!("{i}-{payload}").as_bytes())
            .is_ok());
    }
    c.run_ms(200);
    for p in c.peers.clone() {
        for g in [1, 2] {
            let index = c.model(p, g).applied_index;
            c.node(p).compact(g, index).unwrap();
        }
        assert!(c.node(p).log_first_index() > 1, "node {p} freed no segment");
    }
    for i in 0..10 {
        assert!(c.write(1 + i % 2, format!("late-{i}").as_bytes()).is_ok());
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
fn a_removed_group_stays_removed_after_restart() {
    let mut c = Cluster::with_wal(43, 3, 2, Config::default(), options);
    for g in [1, 2] {
        assert!(c.write(g, b"x").is_ok());
    }
    let pending = c.node(1).read_index(2);
    c.node(1).remove_group(2).unwrap();
    if let Ok(ticket) = pending {
        assert!(matches!(
            ticket.try_take(),
            Some(Err(consensus::ProposalError::Stopped { group: 2 }))
        ));
    }
    assert_eq!(c.node(1).groups(), vec![1]);
    assert_eq!(c.node(1).stored_groups(), vec![1]);
    c.sim.crash(1);
    let backend =
        Box::new(wal::Wal::open(options(c.wal_root.as_ref().unwrap().path().join("1"))).unwrap());
    let node = c.sim.open(1, c.config.clone(), backend).unwrap();
    assert_eq!(node.stored_groups(), vec![1]);
}

/// A follower that was down takes the entries it missed in one ready: far more than one `wal`
/// record (16 MiB) or batch (64 MiB) holds. They are written as several records and batches, and
/// it catches up (before, its raft driver stopped on "record payload exceeds record_bytes_max").
#[test]
fn a_follower_catches_up_on_more_than_one_record_or_batch_holds() {
    let mut c = Cluster::with_wal(42, 3, 1, Config::default(), options);
    let leader = c.elect(1);
    let behind = *c.peers.iter().find(|&&p| p != leader).unwrap();
    c.crash(behind);
    // 90 MiB of entries of 1 MiB each.
    for i in 0..90u8 {
        assert!(c.write(1, &vec![i; 1 << 20]).is_ok(), "write {i}");
    }
    c.start(behind);
    c.heal_and_check();
}
