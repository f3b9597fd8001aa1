//! Durability modes under concurrency: fsync counts of group commit and of per-append sync.
//! These run on the real disk, where an fsync takes long enough for appenders to pile up.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use wal::{Durability, Wal};

use crate::util::{disk_dir, options, payload_for, read_all};

const WRITERS: u64 = 16;
const APPENDS_PER_WRITER: u64 = 25;

fn run_writers(wal: &Arc<Wal>, writers: u64, appends: u64, bytes: usize) {
    let barrier = Arc::new(Barrier::new(writers as usize));
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let wal = Arc::clone(wal);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                for k in 0..appends {
                    wal.append(&payload_for(w * 1000 + k, bytes))
                        .expect("append");
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("writer");
    }
}

#[test]
fn group_commit_shares_fsyncs() {
    let dir = disk_dir("wal-group");
    let wal = Arc::new(
        Wal::open(options(
            dir.path(),
            64 << 20,
            Durability::GroupCommit {
                window: Duration::from_millis(20),
            },
        ))
        .expect("open"),
    );
    let before = wal.stats();
    run_writers(&wal, WRITERS, APPENDS_PER_WRITER, 4096);
    let after = wal.stats();
    let appends = WRITERS * APPENDS_PER_WRITER;
    let fsyncs = after.fsyncs - before.fsyncs;
    assert_eq!(after.appends - before.appends, appends);
    eprintln!("group commit: {appends} appends, {fsyncs} fsyncs");
    assert!(
        fsyncs * 4 <= appends,
        "{fsyncs} fsyncs for {appends} concurrent appends: group commit is not sharing"
    );
    assert_eq!(read_all(&wal).expect("read").len() as u64, appends);
}

#[test]
fn sync_mode_costs_one_fsync_per_append() {
    let dir = disk_dir("wal-sync");
    let wal = Arc::new(Wal::open(options(dir.path(), 64 << 20, Durability::Sync)).expect("open"));
    let before = wal.stats().fsyncs;
    for i in 0..20 {
        wal.append(&payload_for(i, 4096)).expect("append");
    }
    assert_eq!(wal.stats().fsyncs - before, 20);
    let before = wal.stats().fsyncs;
    run_writers(&wal, 4, 10, 4096);
    assert_eq!(
        wal.stats().fsyncs - before,
        40,
        "every append fsyncs, even concurrently"
    );
    wal.sync().expect("sync");
    assert_eq!(
        wal.stats().fsyncs - before,
        40,
        "sync after synced appends has nothing to do"
    );
}

#[test]
fn group_commit_lone_writer_does_not_wait_the_window() {
    // A lone appender finds nobody in flight and syncs at once; with a 1 s window, 20 appends
    // would otherwise take 20 s. The bound is loose on purpose: this is not a timing benchmark.
    let dir = disk_dir("wal-group-lone");
    let wal = Wal::open(options(
        dir.path(),
        64 << 20,
        Durability::GroupCommit {
            window: Duration::from_secs(1),
        },
    ))
    .expect("open");
    let before = wal.stats().fsyncs;
    let start = std::time::Instant::now();
    for i in 0..20 {
        wal.append(&payload_for(i, 100)).expect("append");
    }
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(wal.stats().fsyncs - before, 20);
}
