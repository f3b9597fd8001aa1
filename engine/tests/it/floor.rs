//! The fence floor (REVIEW N9): DELETE TIMESERIES of ever new series leaves nothing behind once
//! the ConfigNode raises the floor past it and no older file holds the series, and the region
//! still refuses every late command the deletions refused, takes a repeat for a no-op, and
//! judges alike after a restart and in a replica built from its snapshot.

use engine::{ApplyOutcome, DataRegion, Deletion, OpenGate, RegionCommand, StorageError};
use tempfile::TempDir;

use crate::support::{config, content, tablet, LoggedRegion};

fn device(i: u64) -> String {
    format!("root.sg.d{i}")
}

fn insert(device: &str, ts: &[i64], version: u64) -> RegionCommand {
    RegionCommand::InsertTablet {
        tablet: tablet(device, ts, version as f64),
        metadata_version: version,
        table_version: 0,
    }
}

/// Round `i`'s DELETE TIMESERIES of `device(i).s1`: version `10 * i`, its own operation.
fn delete_series(i: u64) -> RegionCommand {
    RegionCommand::DeleteSeries {
        series: vec![(device(i), "s1".into())],
        deletion: Deletion {
            metadata_version: 10 * i,
            operation_id: 1_000 + i,
        },
    }
}

fn floor(version: u64) -> RegionCommand {
    RegionCommand::RaiseFenceFloor { version }
}

/// 100 rounds of (write a new series, delete it); rounds ending in 5 flush between the two, so
/// a sealed file older than the deletion holds the series.
fn churn(region: &LoggedRegion) {
    let gate = OpenGate;
    for i in 1..=100u64 {
        region
            .write(&insert(&device(i), &[i as i64], 10 * i - 5), &gate)
            .expect("a write of a live series");
        if i % 10 == 5 {
            region.flush();
        }
        region.write(&delete_series(i), &gate).expect("a deletion");
    }
}

fn verdict(region: &LoggedRegion, command: &RegionCommand) -> String {
    match region.write(command, &OpenGate) {
        Ok(ApplyOutcome::Deleted { series }) => format!("deleted {series}"),
        Ok(ApplyOutcome::Inserted { points }) => format!("inserted {points}"),
        Ok(other) => format!("{other:?}"),
        Err(StorageError::StaleMetadata { .. }) => "stale".into(),
        Err(e) => format!("error {e}"),
    }
}

/// What the region answers, after the floor at 1,005, to late and fresh commands.
fn verdicts(region: &LoggedRegion) -> Vec<String> {
    let delete_data = |series: &str, version: u64| RegionCommand::DeleteData {
        series: vec![(series.into(), "s1".into())],
        start: 0,
        end: 2_000,
        deletion: Deletion {
            metadata_version: version,
            operation_id: 5_000 + version,
        },
    };
    [
        // Validated before its series' deletion: stale, as the deletion made it.
        insert(&device(3), &[30], 25),
        // Validated after it but below the floor: only a late delivery carries such a token.
        insert(&device(3), &[31], 1_000),
        insert("root.sg.never_deleted", &[32], 999),
        // Fresh writes, one of them re-creating a deleted series.
        insert(&device(37), &[33], 1_010),
        insert("root.sg.never_deleted", &[34], 1_005),
        // A repeat of a deletion below the floor is a no-op: the new d37 stays.
        delete_series(37),
        // A deleteData resolved before the floor is refused; a fresh one deletes.
        delete_data(&device(50), 600),
        delete_data("root.sg.never_deleted", 1_006),
        // A new deletion above the floor applies.
        RegionCommand::DeleteSeries {
            series: vec![(device(37), "s1".into())],
            deletion: Deletion {
                metadata_version: 1_020,
                operation_id: 9_999,
            },
        },
        insert(&device(37), &[35], 1_015),
        // The floor never falls.
        floor(7),
        insert(&device(38), &[36], 1_004),
    ]
    .iter()
    .map(|c| verdict(region, c))
    .collect()
}

const EXPECTED: [&str; 12] = [
    "stale",
    "stale",
    "stale",
    "inserted 2",
    "inserted 2",
    "deleted 0",
    "stale",
    "deleted 1",
    "deleted 1",
    "stale",
    "FloorRaised",
    "stale",
];

#[test]
fn series_deleted_below_the_floor_go_once_no_older_file_holds_them() {
    let dir = TempDir::new().unwrap();
    let region = LoggedRegion::open(dir.path());
    churn(&region);
    region.flush();
    assert_eq!(region.region.deletions_kept(), 100, "no floor yet");

    assert_eq!(verdict(&region, &floor(1_005)), "FloorRaised");
    assert_eq!(region.region.fence_floor(), 1_005);
    region.flush();
    // The ten series a sealed file older than their deletion still holds keep theirs.
    assert_eq!(region.region.deletions_kept(), 10);
    region.region.compact_all().expect("compaction");
    assert_eq!(
        region.region.deletions_kept(),
        0,
        "compaction rewrote the older files without the deleted series"
    );

    assert_eq!(verdicts(&region), EXPECTED);
}

#[test]
fn the_floor_survives_a_restart_and_travels_in_snapshots() {
    let dir = TempDir::new().unwrap();
    let expected_content = {
        let region = LoggedRegion::open(dir.path());
        churn(&region);
        region.write(&floor(1_005), &OpenGate).unwrap();
        region.flush();
        region.region.compact_all().expect("compaction");
        content(&region.region)
    };
    // Reopened: the manifest holds the floor and no deletion.
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).expect("replay");
    assert_eq!(region.region.fence_floor(), 1_005);
    assert_eq!(region.region.deletions_kept(), 0);
    assert_eq!(content(&region.region), expected_content);

    // A replica built from its snapshot judges alike.
    let snapshot = region.region.export().unwrap();
    assert_eq!(snapshot.fence_floor, 1_005);
    assert!(snapshot.tombstones.is_empty(), "{:?}", snapshot.tombstones);
    let copy_dir = TempDir::new().unwrap();
    let copy = LoggedRegion::open(copy_dir.path());
    copy.region.reset_to(&snapshot).unwrap();
    // The copy's log continues where the snapshot ends.
    copy.log
        .truncate_prefix(snapshot.applied_index + 1)
        .unwrap();
    assert_eq!(copy.region.fence_floor(), 1_005);

    let reference_dir = TempDir::new().unwrap();
    let reference = LoggedRegion::open(reference_dir.path());
    churn(&reference);
    reference.write(&floor(1_005), &OpenGate).unwrap();
    assert_eq!(
        verdicts(&reference),
        EXPECTED,
        "a replica that kept them all"
    );
    assert_eq!(verdicts(&region), EXPECTED, "after a restart");
    assert_eq!(content(&region.region), content(&reference.region));
}

#[test]
fn a_floor_raised_after_the_checkpoint_prunes_nothing_replay_still_needs() {
    // A deletion in the manifest, then a floor applied but not flushed: a compaction's install
    // prunes with the manifest's floor (none), so a crash and replay meet the deletion again.
    let dir = TempDir::new().unwrap();
    {
        let region = LoggedRegion::open(dir.path());
        region
            .write(&insert(&device(1), &[1], 5), &OpenGate)
            .unwrap();
        region.write(&delete_series(1), &OpenGate).unwrap();
        region.flush();
        region.write(&floor(50), &OpenGate).unwrap();
        region.region.compact_all().expect("compaction");
        assert_eq!(region.region.deletions_kept(), 1);
    }
    let reopened = DataRegion::open(dir.path().join("region"), config()).unwrap();
    assert_eq!(
        reopened.fence_floor(),
        0,
        "the floor is in the log, not the manifest"
    );
    assert_eq!(reopened.deletions_kept(), 1);
    drop(reopened);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).expect("replay");
    assert_eq!(region.region.fence_floor(), 50);
    assert_eq!(verdict(&region, &insert(&device(1), &[2], 7)), "stale");
}
