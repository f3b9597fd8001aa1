//! Sticky I/O failure, injected with failpoints (`--features failpoints`).
//!
//! The `fail` registry is global to the test binary, so every failpoint here is configured as
//! `return(TOKEN)` with a token in the test's directory name: only that log fails, while other
//! tests keep writing. The tests in this module also take one lock, because they configure the
//! same failpoint names.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use std::sync::{Mutex, MutexGuard};

use wal::{Durability, Error, Wal};

use crate::util::{self, disk_dir, mem_dir, options, read_all};

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the tests of this module; survives a test that panicked while holding it.
fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Configures `name` to fail for logs whose path contains `token`, until dropped.
struct Failpoint(&'static str);

impl Failpoint {
    fn set(name: &'static str, actions: &str) -> Failpoint {
        fail::cfg(name, actions).expect("configure failpoint");
        Failpoint(name)
    }
}

impl Drop for Failpoint {
    fn drop(&mut self) {
        fail::remove(self.0);
    }
}

fn assert_poisoned(wal: &Wal) {
    assert!(wal.is_poisoned());
    assert!(matches!(wal.append(b"x"), Err(Error::Poisoned)));
    assert!(matches!(
        wal.append_batch(&[b"x", b"y"]),
        Err(Error::Poisoned)
    ));
    assert!(matches!(wal.sync(), Err(Error::Poisoned)));
}

#[test]
fn failed_write_poisons_until_reopen() {
    let _serial = serial();
    let dir = mem_dir("wal-fp-write-");
    let opts = options(dir.path(), 4096, Durability::Sync);
    let wal = Wal::open(opts.clone()).expect("open");
    wal.append(b"one").expect("append");
    {
        let _fp = Failpoint::set("wal::write", "return(wal-fp-write-)");
        assert!(matches!(wal.append(b"two"), Err(Error::Io { .. })));
    }
    // The failpoint is gone, the log stays poisoned.
    assert_poisoned(&wal);
    drop(wal);
    let wal = Wal::open(opts).expect("reopen");
    assert!(!wal.is_poisoned());
    assert_eq!(read_all(&wal).expect("read"), vec![(1, b"one".to_vec())]);
    assert_eq!(wal.append(b"two").expect("append after reopen"), 2);
}

#[test]
fn torn_write_is_recovered_on_reopen() {
    let _serial = serial();
    let dir = mem_dir("wal-fp-partial-");
    let opts = options(dir.path(), 4096, Durability::None);
    let wal = Wal::open(opts.clone()).expect("open");
    wal.append(b"one").expect("append");
    {
        let _fp = Failpoint::set("wal::write_partial", "return(wal-fp-partial-)");
        // Large enough that the half written holds whole 4 KiB blocks (the O_DIRECT path
        // writes only whole blocks).
        let big = vec![7u8; 5000];
        assert!(matches!(
            wal.append_batch(&[&big, &big]),
            Err(Error::Io { .. })
        ));
    }
    assert_poisoned(&wal);
    drop(wal);
    let wal = Wal::open(opts).expect("reopen drops the torn batch");
    assert_eq!(wal.next_index(), 2);
    assert_eq!(read_all(&wal).expect("read"), vec![(1, b"one".to_vec())]);
}

#[test]
fn failed_fsync_is_never_retried() {
    let _serial = serial();
    for durability in [
        Durability::Sync,
        Durability::GroupCommit {
            window: Duration::from_millis(1),
        },
        Durability::None,
    ] {
        let dir = mem_dir("wal-fp-fsync-");
        let mut opts = options(dir.path(), 1 << 20, durability);
        // The spare-segment thread syncs files in the same directory whenever it likes; with it
        // on, it could take the one injected failure and the append's fsync would succeed (a
        // flake seen in CI). This test is about the append path alone.
        opts.prefill_segments = false;
        let wal = Wal::open(opts.clone()).expect("open");
        wal.append(b"one").expect("append");
        wal.sync().expect("sync");
        let fsyncs = {
            // Fails once; a retry would succeed, so a retry would show.
            let _fp = Failpoint::set("wal::fsync", "1*return(wal-fp-fsync-)");
            let result = match durability {
                Durability::None => {
                    wal.append(b"two").expect("append without fsync");
                    wal.sync()
                }
                _ => wal.append(b"two").map(|_| ()),
            };
            assert!(
                matches!(result, Err(Error::Io { .. })),
                "{durability:?}: {result:?}"
            );
            wal.stats().fsyncs
        };
        assert_poisoned(&wal);
        assert_eq!(wal.stats().fsyncs, fsyncs, "{durability:?}: fsync retried");
        drop(wal);
        let wal = Wal::open(opts).expect("reopen");
        assert!(wal.append(b"three").is_ok(), "{durability:?}");
    }
}

#[test]
fn fsync_failure_reaches_every_group_commit_waiter() {
    let _serial = serial();
    let dir = mem_dir("wal-fp-group-");
    let wal = Arc::new(
        Wal::open(options(
            dir.path(),
            1 << 20,
            Durability::GroupCommit {
                window: Duration::from_millis(5),
            },
        ))
        .expect("open"),
    );
    let _fp = Failpoint::set("wal::fsync", "return(wal-fp-group-)");
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let wal = Arc::clone(&wal);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                (0..5).map(|_| wal.append(&[1u8; 100])).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut io_errors = 0;
    for handle in handles {
        for result in handle.join().expect("writer") {
            match result {
                Err(Error::Io { .. }) => io_errors += 1,
                Err(Error::Poisoned) => {}
                other => panic!("an append succeeded although no fsync did: {other:?}"),
            }
        }
    }
    assert_eq!(io_errors, 1, "exactly one fsync was attempted and failed");
    assert_poisoned(&wal);
}

#[test]
fn failed_roll_poisons() {
    let _serial = serial();
    let dir = mem_dir("wal-fp-roll-");
    let opts = options(dir.path(), 4096, Durability::None);
    let wal = Wal::open(opts.clone()).expect("open");
    let payload = [3u8; 1000 + 16 - wal::format::RECORD_HEADER_BYTES];
    // Four records of 1016 bytes with their headers fill the 4096-byte segment exactly (32-byte
    // header).
    for _ in 0..4 {
        wal.append(&payload).expect("append");
    }
    {
        let _fp = Failpoint::set("wal::fsync", "return(wal-fp-roll-)");
        // The fifth record does not fit: the roll fsyncs the old segment, which fails.
        assert!(matches!(wal.append(&payload), Err(Error::Io { .. })));
    }
    assert_poisoned(&wal);
    drop(wal);
    let wal = Wal::open(opts).expect("reopen");
    assert_eq!(wal.next_index(), 5);
    assert_eq!(wal.append(&payload).expect("append"), 5);
}

/// A roll that cannot open its next segment for want of descriptors (REVIEW N4: a client flood
/// used them up) writes nothing and leaves the log unpoisoned: that append fails with a
/// retryable error, a record that still fits goes to the active segment, and once descriptors
/// are back the next roll goes through. Nothing is lost, before or after a reopen.
#[test]
fn a_roll_out_of_descriptors_is_retried_and_poisons_nothing() {
    let _serial = serial();
    for (direct_io, prefix) in [(false, "wal-fp-emfile-"), (true, "wal-fp-emfile-direct-")] {
        // On the real disk with `direct_io`, where the file system takes O_DIRECT.
        let dir = if direct_io {
            disk_dir(prefix)
        } else {
            mem_dir(prefix)
        };
        let mut opts = options(dir.path(), 4096, Durability::Sync);
        opts.direct_io = direct_io;
        // A spare made in the background is an open descriptor already; this test is about the
        // roll that must open its segment itself.
        opts.prefill_segments = false;
        let wal = Wal::open(opts.clone()).expect("open");
        let payload = [3u8; 1000 + 16 - wal::format::RECORD_HEADER_BYTES];
        for _ in 0..4 {
            wal.append(&payload).expect("append");
        }
        let mut expected: Vec<(u64, Vec<u8>)> = (1..=4).map(|i| (i, payload.to_vec())).collect();
        {
            let _fp = Failpoint::set("wal::open", &format!("return({prefix})"));
            // The fifth record needs a roll, whose segment cannot be opened.
            let refused = wal.append(&payload).unwrap_err();
            assert!(
                matches!(refused, Error::OutOfDescriptors { .. }),
                "{refused:?}"
            );
            assert!(refused.is_retryable());
            assert!(
                !wal.is_poisoned(),
                "an open failure at a roll poisons nothing"
            );
            assert_eq!(util::segment_files(dir.path()).len(), 1, "no new segment");
            // Still refused while descriptors are short; the log is unchanged.
            assert!(wal.append(&payload).unwrap_err().is_retryable());
            assert_eq!(wal.next_index(), 5);
            wal.sync().expect("sync of an intact log");
        }
        // Descriptors are back: the roll goes through.
        assert_eq!(wal.append(&payload).expect("append after the roll"), 5);
        expected.push((5, payload.to_vec()));
        assert_eq!(util::segment_files(dir.path()).len(), 2);
        if direct_io {
            // The direct descriptor of the new segment alone fails (the second open of the
            // roll): the segment exists already, so the roll goes through and the segment is
            // written through the page cache.
            for _ in 0..3 {
                wal.append(&payload).expect("fill the second segment");
            }
            let _fp = Failpoint::set("wal::open", &format!("1*off->return({prefix})"));
            let index = wal.append(&payload).expect("a roll without O_DIRECT");
            assert!(!wal.is_poisoned());
            expected.extend((6..=index).map(|i| (i, payload.to_vec())));
        }
        assert_eq!(read_all(&wal).expect("read"), expected);
        drop(wal);
        let wal = Wal::open(opts).expect("reopen");
        assert_eq!(read_all(&wal).expect("read after reopen"), expected);
        assert!(wal.append(&payload).is_ok());
    }
}
