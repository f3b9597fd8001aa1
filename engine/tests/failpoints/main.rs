//! Failpoint tests of the storage engine: a failure injected before fragment k
//! (`storage::before_fragment`) rolls the attempt back whole, and a crash between writing sealed
//! files and installing the manifest (`storage::flush::before_manifest`) loses nothing. Each test
//! holds `fail::FailScenario`, which serialises them.

#[path = "../it/support.rs"]
mod support;

use engine::{OpenGate, RegionCommand, StorageError};

use support::{apply_to_model, content, tablet, LoggedRegion, Model};

#[test]
fn failure_before_any_fragment_rolls_back_the_attempt() {
    let scenario = fail::FailScenario::setup();
    // Five fragments: slots 0..=4.
    let attempt = tablet("root.sg.d1", &[1, 11, 21, 31, 41], 5.0);
    for k in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let region = LoggedRegion::open(dir.path());
        let mut model = Model::new();
        let prior = tablet("root.sg.d1", &[1, 2, 22], 0.0);
        region
            .write(&RegionCommand::insert(prior.clone()), &OpenGate)
            .unwrap();
        apply_to_model(&mut model, &prior);
        let digest = region.region.digest().unwrap();

        fail::cfg("storage::before_fragment", &format!("{k}*off->1*return")).unwrap();
        let err = region
            .write(&RegionCommand::insert(attempt.clone()), &OpenGate)
            .unwrap_err();
        fail::remove("storage::before_fragment");
        assert!(matches!(err, StorageError::Injected(_)), "k={k}: {err:?}");
        assert!(err.is_recoverable());
        assert_eq!(region.region.digest().unwrap(), digest, "k={k}");
        assert_eq!(content(&region.region), model, "k={k}");

        region.replay(&OpenGate).unwrap();
        apply_to_model(&mut model, &attempt);
        assert_eq!(content(&region.region), model, "k={k}");
    }
    scenario.teardown();
}

#[test]
fn crash_between_sealed_files_and_manifest_loses_nothing() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    let mut model = Model::new();
    let first = tablet("root.sg.d1", &[1, 12, 23], 0.0);
    region
        .write(&RegionCommand::insert(first.clone()), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &first);

    fail::cfg("storage::flush::before_manifest", "return").unwrap();
    let err = region.region.flush().unwrap_err();
    fail::remove("storage::flush::before_manifest");
    assert!(matches!(err, StorageError::Injected(_)), "{err:?}");
    assert_eq!(region.region.checkpoint_index(), 0);
    assert_eq!(content(&region.region), model, "frozen data still served");
    let sealed = dir.path().join("region/sealed");
    assert_eq!(
        std::fs::read_dir(&sealed).unwrap().count(),
        3,
        "orphans on disk"
    );

    // The live region carries on: a later flush writes the left-over frozen memtables too.
    let second = tablet("root.sg.d2", &[5], 1.0);
    region
        .write(&RegionCommand::insert(second.clone()), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &second);

    // Crash now: the orphans are removed on open and the log replays everything.
    drop(region);
    let region = LoggedRegion::open(dir.path());
    assert_eq!(
        std::fs::read_dir(&sealed).unwrap().count(),
        0,
        "orphans removed"
    );
    region.replay(&OpenGate).unwrap();
    assert_eq!(content(&region.region), model);

    // A failed flush followed by a good one leaves nothing memory-only.
    fail::cfg("storage::flush::before_manifest", "return").unwrap();
    assert!(region.region.flush().is_err());
    fail::remove("storage::flush::before_manifest");
    region.flush();
    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    assert_eq!(
        content(&region.region),
        model,
        "after flush, truncation and restart"
    );
    scenario.teardown();
}

/// REVIEW M1: a flush that failed after its manifest was installed must not leave the in-memory
/// manifest stale, or the next flush reuses the live files' names and overwrites them.
#[test]
fn failure_after_the_manifest_install_does_not_reuse_live_file_names() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    let mut model = Model::new();
    let first = tablet("root.sg.d1", &[1, 2, 3], 0.0);
    region
        .write(&RegionCommand::insert(first.clone()), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &first);

    fail::cfg("storage::flush::after_manifest", "return").unwrap();
    let err = region.region.flush().unwrap_err();
    fail::remove("storage::flush::after_manifest");
    assert!(matches!(err, StorageError::Injected(_)), "{err:?}");

    // A snapshot install replaces the content; its flush dies before its manifest. Its files
    // must not overwrite the ones the installed manifest names.
    let mut snapshot = region.region.export().unwrap();
    snapshot.tablets[0].columns[0] = common::Column::Double(vec![7.0, 8.0, 9.0]);
    fail::cfg("storage::flush::before_manifest", "return").unwrap();
    assert!(region.region.reset_to(&snapshot).is_err());
    fail::remove("storage::flush::before_manifest");

    // A crash now leaves the last installed manifest, with the files it names intact.
    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    assert_eq!(content(&region.region), model, "after a restart");
    scenario.teardown();
}

/// A crash at each compaction sync point: after the output is written (before the manifest
/// names it) and after the manifest switched (before the inputs are deleted). Either way the
/// reopened region holds exactly its content, every orphan is removed, and compaction resumes.
#[test]
fn a_crash_at_every_compaction_sync_point_loses_nothing() {
    let scenario = fail::FailScenario::setup();
    for (point, files_after_reopen) in [
        ("storage::compact::before_manifest", 4),
        ("storage::compact::after_manifest", 1),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let region = LoggedRegion::open(dir.path());
        let mut model = Model::new();
        for round in 0..4i64 {
            let t = tablet("root.sg.d1", &[round, round + 1], round as f64);
            region
                .write(&RegionCommand::insert(t.clone()), &OpenGate)
                .unwrap();
            apply_to_model(&mut model, &t);
            region.flush();
        }
        let digest = region.region.digest().unwrap();
        fail::cfg(point, "return").unwrap();
        let err = region.region.compact_once().unwrap_err();
        fail::remove(point);
        assert!(matches!(err, StorageError::Injected(_)), "{point}: {err:?}");
        let sealed = dir.path().join("region/sealed");
        assert_eq!(
            std::fs::read_dir(&sealed).unwrap().count(),
            5,
            "{point}: inputs and output both on disk"
        );

        drop(region);
        let region = LoggedRegion::open(dir.path());
        region.replay(&OpenGate).unwrap();
        assert_eq!(content(&region.region), model, "{point}");
        assert_eq!(region.region.digest().unwrap(), digest, "{point}");
        assert_eq!(
            std::fs::read_dir(&sealed).unwrap().count(),
            files_after_reopen,
            "{point}: orphans removed"
        );
        region.region.compact_all().unwrap();
        assert_eq!(region.region.storage_stats().sealed_files, 1, "{point}");
        assert_eq!(content(&region.region), model, "{point}");
    }
    scenario.teardown();
}

/// Two compactions of one partition at once: while one is held after writing its output (the
/// point a long TTL rewrite spends its time before), a second merges the flushes that came
/// after its inputs, and both install. Before compactions claimed their inputs the second
/// planned the first one's files too, so one of the two merges would be thrown away at install
/// (here the second never ends: it reaches the held failpoint as well).
#[test]
fn a_second_compaction_merges_newer_files_while_one_runs() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    let mut model = Model::new();
    let flush_round = |round: i64, model: &mut Model| {
        let t = tablet("root.sg.d1", &[round, round + 1], round as f64);
        region
            .write(&RegionCommand::insert(t.clone()), &OpenGate)
            .unwrap();
        apply_to_model(model, &t);
        region.flush();
    };
    for round in 0..4 {
        flush_round(round, &mut model);
    }
    let sealed = dir.path().join("region/sealed");
    let files = || std::fs::read_dir(&sealed).unwrap().count();
    fail::cfg("storage::compact::before_manifest", "1*pause").unwrap();
    std::thread::scope(|s| {
        let first = s.spawn(|| region.region.compact_once());
        // Its output is on disk once it reaches the pause.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while files() < 5 {
            assert!(
                std::time::Instant::now() < deadline,
                "the first compaction never paused"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        for round in 4..8 {
            flush_round(round, &mut model);
        }
        let second = region
            .region
            .compact_once()
            .unwrap()
            .expect("work among the newer files");
        assert_eq!(second.inputs, 4, "only the files the first did not claim");
        assert!(second.output_bytes > 0);
        fail::remove("storage::compact::before_manifest");
        let first = first.join().unwrap().unwrap().expect("the first ran");
        assert_eq!(first.inputs, 4);
        assert!(
            first.output_bytes > 0,
            "the first compaction installed its output"
        );
    });
    assert_eq!(region.region.storage_stats().sealed_files, 2);
    assert_eq!(files(), 2, "inputs deleted");
    assert_eq!(content(&region.region), model);
    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    assert_eq!(content(&region.region), model, "after a restart");
    scenario.teardown();
}
