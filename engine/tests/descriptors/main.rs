//! Open descriptors stay bounded however many sealed files a region accumulates (REVIEW H4): 2,000
//! apply + flush rounds, each adding a sealed file, with queries reading all of them. A test
//! binary of its own, because it counts the process's descriptors in `/proc/self/fd`.

#[path = "../it/support.rs"]
#[allow(dead_code)]
mod support;

use std::sync::Arc;

use engine::{DataRegion, FileCache, OpenGate, RegionCommand};

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn descriptors_stay_bounded_over_2000_flushes() {
    const ROUNDS: i64 = 2_000;
    const OPEN_FILES_MAX: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    let files = FileCache::new(OPEN_FILES_MAX);
    let region = DataRegion::open_with(dir.path(), support::config(), files.clone()).unwrap();
    let before = open_descriptors();
    for round in 0..ROUNDS {
        // Every round writes one partition (interval 10 ms) and flushes it: one file per round.
        let tablet = support::tablet("root.sg.d1", &[round * 10, round * 10 + 1], 0.5);
        region
            .apply(round as u64 + 1, &RegionCommand::insert(tablet), &OpenGate)
            .unwrap();
        region.flush().unwrap();
        if round % 100 == 99 {
            let points = region.query("root.sg.d1", "s1", 0, i64::MAX).unwrap();
            assert_eq!(points.len() as i64, 2 * (round + 1));
        }
    }
    let grown = open_descriptors().saturating_sub(before);
    assert!(files.open_count() <= OPEN_FILES_MAX);
    assert!(
        grown <= OPEN_FILES_MAX + 2,
        "{grown} descriptors more after {ROUNDS} flushes (bound {OPEN_FILES_MAX})"
    );

    // Reopening reads every file's index once and keeps no more than the bound open.
    drop(region);
    let reopened = DataRegion::open_with(dir.path(), support::config(), files.clone()).unwrap();
    let points = reopened.query("root.sg.d1", "s1", 0, i64::MAX).unwrap();
    assert_eq!(points.len() as i64, 2 * ROUNDS);
    assert!(open_descriptors().saturating_sub(before) <= OPEN_FILES_MAX + 2);
    drop(reopened);
    assert_eq!(Arc::strong_count(&files), 1, "no region holds the cache");
    assert_eq!(
        files.open_count(),
        0,
        "dropped files closed their descriptors"
    );
}
