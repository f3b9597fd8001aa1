//! Fencing between fragments k and k+1 leaves nothing of the attempt, in memory or after a crash.

use common::LeaseFencedRetryPolicy;
use engine::{ApplyOutcome, ManualGate, OpenGate, RegionCommand, StorageError};

use crate::support::{apply_to_model, content, tablet, LoggedRegion, Model};

/// Prior content spanning partitions 0..=3, some of it flushed.
fn seed(region: &LoggedRegion, model: &mut Model) {
    let gate = OpenGate;
    let first = tablet("root.sg.d1", &[1, 5, 12, 25, 38], 0.0);
    region
        .write(&RegionCommand::insert(first.clone()), &gate)
        .unwrap();
    apply_to_model(model, &first);
    region.flush();
    let second = tablet("root.sg.d1", &[5, 6, 31], 100.0);
    region
        .write(&RegionCommand::insert(second.clone()), &gate)
        .unwrap();
    apply_to_model(model, &second);
}

#[test]
fn fenced_between_every_pair_of_fragments_rolls_back_everything() {
    // Six fragments: slots 0, 1, 2, 3, 4, 9 (interval 10 ms); rows overwrite earlier points too.
    let attempt = tablet("root.sg.d1", &[3, 5, 14, 27, 31, 45, 99, 2], 1000.0);
    let fragments = 6;
    for k in 0..fragments {
        let dir = tempfile::tempdir().unwrap();
        let region = LoggedRegion::open(dir.path());
        let mut model = Model::new();
        seed(&region, &mut model);
        let before_digest = region.region.digest().unwrap();
        let before_series = region.region.series();
        assert_eq!(content(&region.region), model);

        let gate = ManualGate::new();
        gate.fence_after(k);
        let err = region
            .write(&RegionCommand::insert(attempt.clone()), &gate)
            .unwrap_err();
        assert!(
            matches!(
                err,
                StorageError::MetadataLeaseFenced {
                    policy: LeaseFencedRetryPolicy::RetryUntilSuccess
                }
            ),
            "k={k}: {err:?}"
        );
        assert!(err.is_recoverable());
        assert_eq!(err.status().code.code(), 536);
        assert_eq!(
            gate.checks(),
            k + 1,
            "one lease check per fragment up to the fenced one"
        );
        assert_eq!(region.region.digest().unwrap(), before_digest, "k={k}");
        assert_eq!(region.region.series(), before_series, "k={k}");
        assert_eq!(content(&region.region), model, "k={k}");

        // A flush now seals the prior content; the held entry stays above the checkpoint.
        region.flush();
        assert_eq!(content(&region.region), model, "k={k}: after flush");

        // Crash at this point: the entry is in the log, the attempt was rolled back. After a
        // restart with the lease still fenced, replay is held at the entry: content unchanged.
        let applied = region.region.applied_index();
        drop(region);
        let region = LoggedRegion::open(dir.path());
        let fenced = ManualGate::new();
        fenced.set_fenced(true);
        assert!(region.replay(&fenced).unwrap_err().is_recoverable());
        assert_eq!(region.region.applied_index(), applied, "k={k}");
        assert_eq!(region.region.digest().unwrap(), before_digest, "k={k}");
        assert_eq!(content(&region.region), model, "k={k}");

        // Once the lease is back the committed entry is applied whole: retry, never skip.
        region.replay(&OpenGate).unwrap();
        apply_to_model(&mut model, &attempt);
        assert_eq!(content(&region.region), model, "k={k}");
        assert_eq!(region.region.applied_index(), applied + 1);
    }
}

#[test]
fn type_mismatch_is_deterministic_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    let mut model = Model::new();
    seed(&region, &mut model);
    let applied = region.region.applied_index();

    let mut bad = tablet("root.sg.d1", &[7, 17, 27], 0.0);
    bad.data_types[1] = common::DataType::Double;
    bad.columns[1] = common::Column::Double(vec![1.0, 2.0, 3.0]);
    let err = region
        .write(&RegionCommand::insert(bad), &OpenGate)
        .unwrap_err();
    assert!(
        matches!(err, StorageError::DataTypeMismatch { .. }),
        "{err:?}"
    );
    assert!(!err.is_recoverable());
    assert_eq!(err.status().code.code(), 614);
    assert_eq!(
        region.region.applied_index(),
        applied + 1,
        "the entry is consumed"
    );
    assert_eq!(content(&region.region), model);

    // A replay after restart reaches the same verdict.
    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    assert_eq!(region.region.applied_index(), applied + 1);
    assert_eq!(content(&region.region), model);
}

#[test]
fn deletes_mask_flushed_data_and_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut region = LoggedRegion::open(dir.path());
    let mut model = Model::new();
    seed(&region, &mut model);
    let other = tablet("root.sg.d2", &[1, 2], 0.0);
    region
        .write(&RegionCommand::insert(other.clone()), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &other);

    let outcome = region
        .write(
            &RegionCommand::delete_series(vec![("root.sg.d1".into(), "s1".into())]),
            &OpenGate,
        )
        .unwrap();
    assert!(matches!(outcome, ApplyOutcome::Deleted { .. }));
    model.remove(&("root.sg.d1".to_string(), "s1".to_string()));
    assert_eq!(content(&region.region), model);

    // Rewriting the series after the delete is visible; older sealed data stays masked.
    let again = tablet("root.sg.d1", &[50], 7.0);
    region
        .write(&RegionCommand::insert(again.clone()), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &again);
    assert_eq!(content(&region.region), model);

    for flush in [false, true] {
        if flush {
            region.flush();
        }
        let digest = region.region.digest().unwrap();
        drop(region);
        region = LoggedRegion::open(dir.path());
        region.replay(&OpenGate).unwrap();
        assert_eq!(content(&region.region), model, "flush={flush}");
        assert_eq!(region.region.digest().unwrap(), digest, "flush={flush}");
    }

    region
        .write(&RegionCommand::delete_database("root.sg"), &OpenGate)
        .unwrap();
    assert!(content(&region.region).is_empty());
    assert!(region.region.series().is_empty());
}

#[test]
fn flush_triggers_by_size_and_by_age() {
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let small = engine::StorageConfig {
        memtable_flush_bytes: 4096,
        memtable_flush_age_ms: 60_000,
        ..crate::support::config()
    };
    let region = engine::DataRegion::open(dir.path(), small).unwrap();
    let now = Instant::now();
    assert!(!region.should_flush(now), "an empty region never flushes");
    region
        .apply(
            1,
            &RegionCommand::insert(tablet("root.sg.d1", &[1], 0.0)),
            &OpenGate,
        )
        .unwrap();
    assert!(!region.should_flush(now), "small and young");
    assert!(
        region.should_flush(now + Duration::from_secs(61)),
        "old enough"
    );
    let many: Vec<i64> = (0..200).collect();
    region
        .apply(
            2,
            &RegionCommand::insert(tablet("root.sg.d1", &many, 0.0)),
            &OpenGate,
        )
        .unwrap();
    assert!(region.memtable_bytes() >= 4096);
    assert!(region.should_flush(now), "big enough");
    assert_eq!(region.flush_if_needed(now).unwrap(), Some(2));
    assert_eq!(region.memtable_bytes(), 0);
    assert_eq!(region.checkpoint_index(), 2);
    assert!(
        !region.should_flush(now + Duration::from_secs(3600)),
        "nothing left to flush"
    );
    assert_eq!(region.flush_if_needed(now).unwrap(), None);
}
