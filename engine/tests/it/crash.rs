//! Crash at every log sync point: the file image of log + region taken after each durable step
//! recovers to exactly the entries logged by then, applied whole, none partial.

use std::fs;
use std::path::Path;

use engine::{ManualGate, OpenGate, RegionCommand};

use crate::support::{apply_to_model, content, tablet, LoggedRegion, Model};

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

enum Step {
    Write(RegionCommand),
    /// A write whose lease is fenced after `k` fragments; the entry is logged but not applied.
    FencedWrite(RegionCommand, u64),
    Flush,
}

#[test]
fn every_sync_point_recovers_exactly_the_logged_entries() {
    let t = |device: &str, ts: &[i64], seed: f64| RegionCommand::insert(tablet(device, ts, seed));
    let steps = vec![
        Step::Write(t("root.sg.d1", &[1, 11, 21], 0.0)),
        Step::Write(t("root.sg.d2", &[2, 3, 44], 10.0)),
        Step::Flush,
        Step::FencedWrite(t("root.sg.d1", &[1, 15, 33, 47], 20.0), 2),
        Step::Write(t("root.sg.d1", &[5, 15], 30.0)),
        Step::Write(RegionCommand::delete_series(vec![(
            "root.sg.d2".into(),
            "s1".into(),
        )])),
        Step::Write(RegionCommand::DeleteData {
            series: vec![("root.sg.d1".into(), "s1".into())],
            start: 10,
            end: 20,
            deletion: engine::Deletion {
                metadata_version: 1,
                operation_id: 77,
            },
        }),
        Step::Flush,
        Step::Write(t("root.sg.d2", &[3, 90], 40.0)),
        Step::Write(RegionCommand::DeleteData {
            series: vec![("root.sg.d1".into(), "s2".into())],
            start: 0,
            end: 5,
            deletion: engine::Deletion::default(),
        }),
        Step::FencedWrite(t("root.sg.d3", &[0, 10, 20, 30], 50.0), 1),
    ];

    let work = tempfile::tempdir().unwrap();
    let live = work.path().join("live");
    let region = LoggedRegion::open(&live);
    // log_states[n]: the content once log entries 1..=n are applied (log order is apply order).
    let mut log_states = vec![Model::new()];
    // (image dir, entries logged when it was taken)
    let mut images = Vec::new();
    for (i, step) in steps.into_iter().enumerate() {
        match step {
            Step::Write(command) => {
                region.write(&command, &OpenGate).unwrap();
                push_state(&mut log_states, &command);
            }
            Step::FencedWrite(command, k) => {
                let gate = ManualGate::new();
                gate.fence_after(k);
                assert!(region.write(&command, &gate).unwrap_err().is_recoverable());
                assert_eq!(
                    &content(&region.region),
                    log_states.last().unwrap(),
                    "step {i}: rolled back"
                );
                push_state(&mut log_states, &command);
            }
            Step::Flush => region.flush(),
        }
        let image = work.path().join(format!("image-{i}"));
        copy_dir(&live, &image);
        images.push((image, log_states.len() - 1));
        // The live replica retries a held entry, as the apply loop would.
        region.replay(&OpenGate).unwrap();
        assert_eq!(&content(&region.region), log_states.last().unwrap());
    }

    for (i, (image, logged)) in images.iter().enumerate() {
        // With the lease fenced, recovery holds at the first insert after the checkpoint: the
        // content is the state after a whole prefix of the log, never a partial entry.
        let fenced = ManualGate::new();
        fenced.set_fenced(true);
        let copy = work.path().join(format!("recover-fenced-{i}"));
        copy_dir(image, &copy);
        let recovered = LoggedRegion::open(&copy);
        let held = recovered.replay(&fenced);
        let got = content(&recovered.region);
        let applied = recovered.region.applied_index() as usize;
        assert!(applied <= *logged, "image {i}");
        assert_eq!(
            got, log_states[applied],
            "image {i}: fenced recovery at entry {applied}"
        );
        assert_eq!(
            held.is_err(),
            applied < *logged,
            "image {i}: held exactly when entries remain"
        );

        let copy = work.path().join(format!("recover-{i}"));
        copy_dir(image, &copy);
        let recovered = LoggedRegion::open(&copy);
        recovered.replay(&OpenGate).unwrap();
        assert_eq!(
            recovered.region.applied_index() as usize,
            *logged,
            "image {i}"
        );
        assert_eq!(content(&recovered.region), log_states[*logged], "image {i}");
    }
}

fn push_state(states: &mut Vec<Model>, command: &RegionCommand) {
    let mut next = states.last().unwrap().clone();
    apply_command(&mut next, command);
    states.push(next);
}

fn apply_command(model: &mut Model, command: &RegionCommand) {
    match command {
        RegionCommand::InsertTablet { tablet: t, .. } => apply_to_model(model, t),
        RegionCommand::DeleteSeries { series, .. } => {
            for (d, m) in series {
                model.remove(&(d.clone(), m.clone()));
            }
        }
        RegionCommand::DeleteDatabase { database: db, .. } => {
            model.retain(|(d, _), _| !d.starts_with(&format!("{db}.")))
        }
        RegionCommand::DeleteData {
            series, start, end, ..
        } => {
            for (d, m) in series {
                if let Some(points) = model.get_mut(&(d.clone(), m.clone())) {
                    points.retain(|t, _| !(start..=end).contains(&t));
                }
            }
            model.retain(|_, points| !points.is_empty());
        }
        // Changes no point (the generated commands carry no stale token).
        RegionCommand::RaiseFenceFloor { .. } => {}
    }
}

/// Raft's own entries (no-ops, membership changes) move the applied index without a command
/// (REVIEW-2026-12-05 N2: a snapshot of an idle region must reach the index of a learner's
/// addition). A flush stores it; before that a crash forgets it, and replay passes the entries
/// again. A command at or below it is already applied.
#[test]
fn a_noted_index_is_durable_with_the_next_flush() {
    let dir = tempfile::tempdir().unwrap();
    let open = || engine::DataRegion::open(dir.path().join("region"), crate::support::config());
    let region = open().unwrap();
    let insert = RegionCommand::insert(tablet("root.sg.d1", &[1], 1.0));
    region.apply(1, &insert, &OpenGate).unwrap();
    region.flush().unwrap();
    region.note_applied(4);
    region.note_applied(3);
    assert_eq!(region.applied_index(), 4, "never backwards");
    drop(region);
    let region = open().unwrap();
    assert_eq!(region.applied_index(), 1, "not stored without a flush");
    region.note_applied(4);
    assert_eq!(
        region.flush().unwrap(),
        4,
        "the checkpoint is the noted index"
    );
    drop(region);
    let region = open().unwrap();
    assert_eq!(region.applied_index(), 4);
    assert_eq!(
        region.apply(4, &insert, &OpenGate).unwrap(),
        engine::ApplyOutcome::AlreadyApplied
    );
}
