//! Appends, reads, rolls, truncation, limits, options, locking, stats.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wal::{Durability, Error, Wal, WalOptions};

use crate::util::{mem_dir, options, payload_for, read_all, segment_files};

#[test]
fn empty_log() {
    let dir = mem_dir("wal-empty");
    let wal = Wal::open(options(dir.path(), 4096, Durability::None)).expect("open");
    assert_eq!((wal.first_index(), wal.next_index()), (1, 1));
    assert_eq!(wal.iter_from(1).expect("iter").count(), 0);
    assert!(matches!(
        wal.iter_from(2),
        Err(Error::IndexBeyondEnd {
            index: 2,
            next_index: 1
        })
    ));
    assert!(matches!(
        wal.iter_from(0),
        Err(Error::IndexCompacted {
            index: 0,
            first_index: 1
        })
    ));
    drop(wal);
    let wal = Wal::open(options(dir.path(), 4096, Durability::None)).expect("reopen");
    assert_eq!((wal.first_index(), wal.next_index()), (1, 1));
}

#[test]
fn append_read_reopen() {
    let dir = mem_dir("wal-basic");
    let opts = options(dir.path(), 1 << 20, Durability::Sync);
    let wal = Wal::open(opts.clone()).expect("open");
    for i in 1..=10u64 {
        assert_eq!(
            wal.append(&payload_for(i, i as usize * 7)).expect("append"),
            i
        );
    }
    assert_eq!(wal.append_batch(&[b"a", b"bb", b"ccc"]).expect("batch"), 11);
    assert_eq!(wal.next_index(), 14);
    let all = read_all(&wal).expect("read");
    assert_eq!(all.len(), 13);
    for (i, (index, payload)) in all.iter().take(10).enumerate() {
        assert_eq!(*index, i as u64 + 1);
        assert_eq!(*payload, payload_for(*index, *index as usize * 7));
    }
    assert_eq!(all[12], (13, b"ccc".to_vec()));
    let from_five: Vec<u64> = wal
        .iter_from(5)
        .expect("iter")
        .map(|r| r.expect("record").0)
        .collect();
    assert_eq!(from_five, (5..=13).collect::<Vec<_>>());
    drop(wal);

    let wal = Wal::open(opts).expect("reopen");
    assert_eq!(read_all(&wal).expect("read"), all);
    assert_eq!(wal.append(b"more").expect("append"), 14);
}

#[test]
fn rolls_and_reads_across_segments() {
    let dir = mem_dir("wal-roll");
    let opts = options(dir.path(), 4096, Durability::None);
    let wal = Wal::open(opts.clone()).expect("open");
    for i in 1..=100u64 {
        wal.append(&payload_for(i, 300)).expect("append");
    }
    let files = segment_files(dir.path());
    assert!(
        files.len() >= 8,
        "expected rolls, got {} segments",
        files.len()
    );
    for file in &files {
        let len = std::fs::metadata(file).expect("metadata").len();
        assert_eq!(len, 4096, "segments are preallocated to segment_bytes");
    }
    for start in [1, 2, 13, 14, 50, 99, 100, 101] {
        let got: Vec<(u64, Vec<u8>)> = wal
            .iter_from(start)
            .expect("iter")
            .collect::<wal::Result<_>>()
            .expect("read");
        assert_eq!(got.len() as u64, 101 - start);
        for (index, payload) in got {
            assert_eq!(payload, payload_for(index, 300));
        }
    }
    drop(wal);
    let wal = Wal::open(opts).expect("reopen");
    assert_eq!(read_all(&wal).expect("read").len(), 100);
    assert_eq!(wal.next_index(), 101);
}

/// Seek points (noted as records are written, recovered and read) let a read start mid-segment;
/// every start index reads back the same records as a read from the first, whatever the batches,
/// before and after a reopen, in a sealed segment and in the active one.
#[test]
fn reads_from_every_index_through_seek_points() {
    let dir = mem_dir("wal-seek");
    let mut opts = options(dir.path(), 16 << 10, Durability::None);
    opts.seek_stride_bytes = 700;
    let wal = Wal::open(opts.clone()).expect("open");
    let mut next = 1u64;
    for batch in 1..=60u64 {
        let payloads: Vec<Vec<u8>> = (0..batch % 7 + 1)
            .map(|i| payload_for(next + i, 50 + (batch as usize * 37) % 400))
            .collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        assert_eq!(wal.append_batch(&refs).expect("append"), next);
        next += payloads.len() as u64;
    }
    assert!(segment_files(dir.path()).len() >= 2, "the log rolled");
    let all = read_all(&wal).expect("read");
    let check = |wal: &Wal| {
        for start in 1..next {
            let got: Vec<(u64, Vec<u8>)> = wal
                .iter_from(start)
                .expect("iter")
                .collect::<wal::Result<_>>()
                .expect("read");
            assert_eq!(got, all[(start - 1) as usize..], "reading from {start}");
        }
    };
    check(&wal);
    drop(wal);
    // After a reopen the active segment's points come from recovery, the sealed ones' from reads.
    let wal = Wal::open(opts).expect("reopen");
    check(&wal);
    check(&wal);
}

#[test]
fn record_larger_than_a_segment_gets_its_own() {
    let dir = mem_dir("wal-big");
    let opts = options(dir.path(), 4096, Durability::None);
    let wal = Wal::open(opts.clone()).expect("open");
    wal.append(b"small").expect("append");
    let big = payload_for(2, 10_000);
    assert_eq!(wal.append(&big).expect("append big"), 2);
    wal.append(b"after").expect("append");
    let batch: Vec<Vec<u8>> = (0..5).map(|i| payload_for(10 + i, 2000)).collect();
    let refs: Vec<&[u8]> = batch.iter().map(|b| b.as_slice()).collect();
    assert_eq!(wal.append_batch(&refs).expect("batch"), 4);
    drop(wal);
    let wal = Wal::open(opts).expect("reopen");
    let all = read_all(&wal).expect("read");
    assert_eq!(all.len(), 8);
    assert_eq!(all[1].1, big);
    assert_eq!(all[2].1, b"after");
    assert_eq!(all[7].1, batch[4]);
}

#[test]
fn limits_are_typed_errors() {
    let dir = mem_dir("wal-limits");
    let mut opts = options(dir.path(), 4096, Durability::None);
    opts.record_bytes_max = 100;
    opts.batch_bytes_max = 300;
    let wal = Wal::open(opts).expect("open");
    assert!(matches!(
        wal.append(&[0u8; 101]),
        Err(Error::RecordTooLarge)
    ));
    assert!(matches!(
        wal.append_batch(&[&[0u8; 10], &[0u8; 101]]),
        Err(Error::RecordTooLarge)
    ));
    // 3 × (100 + 24) = 372 encoded bytes > 300.
    assert!(matches!(
        wal.append_batch(&[&[0u8; 100], &[0u8; 100], &[0u8; 100]]),
        Err(Error::BatchTooLarge)
    ));
    assert!(matches!(wal.append_batch(&[]), Err(Error::EmptyBatch)));
    assert_eq!(wal.next_index(), 1, "refused appends take no index");
    assert_eq!(wal.append(&[0u8; 100]).expect("append at the limit"), 1);
    assert!(!wal.is_poisoned());
}

#[test]
fn options_are_validated() {
    let base = WalOptions::new("/nonexistent/wal");
    assert!(base.validate().is_ok());
    let cases: Vec<(&str, WalOptions)> = vec![
        (
            "segment_bytes",
            WalOptions {
                segment_bytes: 100,
                ..base.clone()
            },
        ),
        (
            "record_bytes_max",
            WalOptions {
                record_bytes_max: 0,
                ..base.clone()
            },
        ),
        (
            "record_bytes_max",
            WalOptions {
                record_bytes_max: u32::MAX,
                ..base.clone()
            },
        ),
        (
            "batch_bytes_max",
            WalOptions {
                batch_bytes_max: 10,
                ..base.clone()
            },
        ),
        (
            "durability",
            WalOptions {
                durability: Durability::Async {
                    interval: Duration::ZERO,
                },
                ..base.clone()
            },
        ),
        (
            "durability",
            WalOptions {
                durability: Durability::GroupCommit {
                    window: Duration::from_secs(5),
                },
                ..base.clone()
            },
        ),
        ("dir", WalOptions::new("")),
    ];
    for (field, opts) in cases {
        match opts.validate() {
            Err(Error::InvalidOptions { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected InvalidOptions, got {other:?}"),
        }
        assert!(matches!(Wal::open(opts), Err(Error::InvalidOptions { .. })));
    }
}

#[test]
fn truncate_prefix_drops_whole_segments_and_survives_reopen() {
    let dir = mem_dir("wal-truncate");
    let opts = options(dir.path(), 4096, Durability::None);
    let wal = Wal::open(opts.clone()).expect("open");
    for i in 1..=60u64 {
        wal.append(&payload_for(i, 400)).expect("append");
    }
    let segments_before = segment_files(dir.path()).len();
    wal.truncate_prefix(1).expect("no-op truncate");
    assert_eq!(wal.first_index(), 1);

    wal.truncate_prefix(30).expect("truncate");
    let first = wal.first_index();
    assert!(first > 1 && first <= 30, "first_index {first}");
    assert!(segment_files(dir.path()).len() < segments_before);
    assert!(matches!(
        wal.iter_from(first - 1),
        Err(Error::IndexCompacted { .. })
    ));
    let rest = read_all(&wal).expect("read");
    assert_eq!(rest.first().map(|r| r.0), Some(first));
    assert_eq!(rest.len() as u64, 61 - first);
    drop(wal);

    let wal = Wal::open(opts.clone()).expect("reopen");
    assert_eq!(wal.first_index(), first);
    assert_eq!(read_all(&wal).expect("read"), rest);

    // Past the end: everything sealed goes, the active segment stays.
    wal.truncate_prefix(1000).expect("truncate all");
    assert_eq!(segment_files(dir.path()).len(), 1);
    let first = wal.first_index();
    assert!(first <= wal.next_index());
    assert_eq!(wal.append(b"x").expect("append"), 61);
    drop(wal);
    let wal = Wal::open(opts).expect("reopen");
    assert_eq!(wal.first_index(), first);
    assert_eq!(wal.next_index(), 62);
}

#[test]
fn iterator_outlives_truncation() {
    let dir = mem_dir("wal-iter-trunc");
    let wal = Wal::open(options(dir.path(), 4096, Durability::None)).expect("open");
    for i in 1..=40u64 {
        wal.append(&payload_for(i, 400)).expect("append");
    }
    let iter = wal.iter_from(1).expect("iter");
    wal.truncate_prefix(41).expect("truncate");
    assert!(wal.first_index() > 1);
    let got: Vec<(u64, Vec<u8>)> = iter.collect::<wal::Result<_>>().expect("read");
    assert_eq!(got.len(), 40);
    for (index, payload) in got {
        assert_eq!(payload, payload_for(index, 400));
    }
}

#[test]
fn second_open_is_locked_out() {
    let dir = mem_dir("wal-lock");
    let opts = options(dir.path(), 4096, Durability::None);
    let wal = Wal::open(opts.clone()).expect("open");
    assert!(matches!(Wal::open(opts.clone()), Err(Error::Locked { .. })));
    drop(wal);
    Wal::open(opts).expect("open after close");
}

#[test]
fn reading_while_appending() {
    let dir = mem_dir("wal-concurrent-read");
    let wal = Arc::new(Wal::open(options(dir.path(), 8192, Durability::None)).expect("open"));
    let done = Arc::new(AtomicBool::new(false));
    // Records each reader checked so far: the writer does not call it done before every reader
    // has checked some (on a loaded machine the writer may finish before a reader first runs).
    let progress: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::default()).collect();
    let readers: Vec<_> = progress
        .iter()
        .map(|progress| {
            let wal = Arc::clone(&wal);
            let done = Arc::clone(&done);
            let progress = Arc::clone(progress);
            std::thread::spawn(move || {
                let mut checked = 0u64;
                while !done.load(Ordering::Acquire) {
                    let first = wal.first_index();
                    let iter = match wal.iter_from(first) {
                        Ok(iter) => iter,
                        // A concurrent truncate_prefix moved first_index past `first`.
                        Err(Error::IndexCompacted { .. }) => continue,
                        Err(e) => panic!("iter_from: {e}"),
                    };
                    for (expected, item) in (first..).zip(iter) {
                        let (index, payload) = item.expect("record");
                        assert_eq!(index, expected);
                        assert_eq!(payload, payload_for(index, (index % 500) as usize));
                        checked += 1;
                        progress.store(checked, Ordering::Release);
                    }
                }
                checked
            })
        })
        .collect();
    let mut appended = 0u64;
    while wal.next_index() <= 3000 {
        let i = wal.next_index();
        if i.is_multiple_of(3) {
            let a = payload_for(i, (i % 500) as usize);
            let b = payload_for(i + 1, ((i + 1) % 500) as usize);
            assert_eq!(wal.append_batch(&[&a, &b]).expect("batch"), i);
        } else {
            assert_eq!(
                wal.append(&payload_for(i, (i % 500) as usize))
                    .expect("append"),
                i
            );
        }
        appended += 1;
        if appended.is_multiple_of(500) {
            wal.truncate_prefix(i.saturating_sub(300))
                .expect("truncate");
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while progress.iter().any(|p| p.load(Ordering::Acquire) == 0) {
        assert!(std::time::Instant::now() < deadline, "a reader never read");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    done.store(true, Ordering::Release);
    for reader in readers {
        assert!(reader.join().expect("reader") > 0);
    }
}

#[test]
fn stats_count_appends_records_bytes() {
    let dir = mem_dir("wal-stats");
    let wal = Wal::open(options(dir.path(), 1 << 20, Durability::None)).expect("open");
    let before = wal.stats();
    wal.append(&[1u8; 10]).expect("append");
    wal.append_batch(&[&[2u8; 20], &[3u8; 30]]).expect("batch");
    let after = wal.stats();
    assert_eq!(after.appends - before.appends, 2);
    assert_eq!(after.records - before.records, 3);
    assert_eq!(
        after.bytes_written - before.bytes_written,
        60 + 3 * wal::format::RECORD_HEADER_BYTES as u64
    );
    assert_eq!(
        after.fsyncs, before.fsyncs,
        "Durability::None never fsyncs an append"
    );
    wal.sync().expect("sync");
    assert_eq!(wal.stats().fsyncs, before.fsyncs + 1);
    wal.sync().expect("sync with nothing new");
    assert_eq!(wal.stats().fsyncs, before.fsyncs + 1, "nothing new to sync");
}

#[test]
fn async_mode_syncs_in_the_background() {
    let dir = mem_dir("wal-async");
    let wal = Wal::open(options(
        dir.path(),
        1 << 20,
        Durability::Async {
            interval: Duration::from_millis(5),
        },
    ))
    .expect("open");
    let before = wal.stats().fsyncs;
    wal.append(b"x").expect("append");
    // Wait for the background thread; bounded so a broken syncer fails instead of hanging.
    let mut waited_ms = 0;
    while wal.stats().fsyncs == before {
        assert!(waited_ms < 10_000, "background syncer never synced");
        std::thread::sleep(Duration::from_millis(5));
        waited_ms += 5;
    }
    drop(wal); // stops and joins the thread
}

/// `*.wal.tmp` files of a log directory: spares (and interrupted segment creations).
fn temp_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".wal.tmp"))
        .collect()
}

#[test]
fn rolls_take_zero_filled_spares_prepared_in_the_background() {
    let dir = mem_dir("wal-spare");
    let opts = options(dir.path(), 64 * 1024, Durability::None);
    assert!(opts.prefill_segments, "on by default");
    let wal = Wal::open(opts.clone()).expect("open");
    // The first spare is prepared right after open. (Its file exists, still short, while it
    // is being filled: wait for the log to call it ready, not for the file to appear.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !wal.stats().spare_ready {
        assert!(
            std::time::Instant::now() < deadline,
            "no spare became ready"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let files = temp_files(dir.path());
    assert_eq!(files.len(), 1, "one spare at a time: {files:?}");
    let spare = files[0].clone();
    assert_eq!(std::fs::metadata(&spare).unwrap().len(), 64 * 1024);
    assert!(std::fs::read(&spare).unwrap().iter().all(|&b| b == 0));

    let mut expected = Vec::new();
    for i in 1..=400u64 {
        let payload = payload_for(i, 1000);
        assert_eq!(wal.append(&payload).expect("append"), i);
        expected.push((i, payload));
    }
    // The spare became a segment (renamed away), and the rolls went on with or without one.
    assert!(!spare.exists(), "the first roll takes the ready spare");
    assert!(wal.stats().rolls_into_spares >= 1);
    let files = segment_files(dir.path());
    assert!(
        files.len() >= 5,
        "expected rolls, got {} segments",
        files.len()
    );
    assert_eq!(read_all(&wal).expect("read"), expected);
    wal.sync().expect("sync");
    drop(wal);
    // A spare still being written deletes itself once the log is gone; open removes any left.
    let wal = Wal::open(opts).expect("reopen");
    assert_eq!(read_all(&wal).expect("read"), expected);
    drop(wal);

    let mut off = options(dir.path(), 64 * 1024, Durability::None);
    off.prefill_segments = false;
    let wal = Wal::open(off).expect("reopen without spares");
    // Open removed what was there; a spare the closed log was still writing deletes itself.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !temp_files(dir.path()).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "a spare outlived its log"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(wal.append(b"more").expect("append"), 401);
}
