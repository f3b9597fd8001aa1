//! Series and prefix deletions coalesce (REVIEW N9): a table dropped and created again many
//! times leaves one deletion in the manifest, not one per drop, and the region judges every
//! later command exactly as a replica that kept them all does — inserts with old tokens,
//! repeated deliveries of old fence operations, reads.

use engine::{ApplyOutcome, Deletion, OpenGate, RegionCommand, StorageError};
use tempfile::TempDir;

use crate::support::{content, tablet, LoggedRegion};

const TABLE: &str = "root.db.t";

fn drop_table(round: u64) -> RegionCommand {
    RegionCommand::DeleteDatabase {
        database: TABLE.into(),
        deletion: deletion(round),
    }
}

/// Round `round`'s fence operation: version `10 * round`, its own operation id.
fn deletion(round: u64) -> Deletion {
    Deletion {
        metadata_version: 10 * round,
        operation_id: 1_000 + round,
    }
}

fn insert(device: &str, ts: &[i64], version: u64) -> RegionCommand {
    RegionCommand::InsertTablet {
        tablet: tablet(device, ts, version as f64),
        metadata_version: version,
        table_version: version,
    }
}

/// 100 rounds of (write 20 devices of the table, DROP TABLE), flushing every 10 rounds; then
/// the table created again once more. `flush` false keeps every deletion in memory.
fn churn(region: &LoggedRegion, flush: bool) {
    let gate = OpenGate;
    for round in 1..=100u64 {
        for d in 0..20 {
            let device = format!("{TABLE}.dev{d}");
            let version = 10 * round - 5;
            region
                .write(&insert(&device, &[round as i64, 1_000 + d], version), &gate)
                .expect("a write of the live table");
        }
        region.write(&drop_table(round), &gate).expect("DROP TABLE");
        if flush && round % 10 == 0 {
            region.flush();
        }
    }
    region
        .write(&insert(&format!("{TABLE}.dev0"), &[7, 8, 9], 1_005), &gate)
        .expect("the table created again");
}

/// What the region answers to the commands that follow a churn: stale and fresh inserts,
/// repeats of old operations and a late first delivery of an older deletion of one series.
fn verdicts(region: &LoggedRegion) -> Vec<String> {
    let gate = OpenGate;
    let commands = [
        insert(&format!("{TABLE}.dev3"), &[50], 995),
        insert(&format!("{TABLE}.dev3"), &[51], 1_000),
        insert(&format!("{TABLE}.new"), &[52], 1_001),
        drop_table(37),
        drop_table(100),
        RegionCommand::DeleteSeries {
            series: vec![(format!("{TABLE}.dev0"), "s1".into())],
            deletion: Deletion {
                metadata_version: 500,
                operation_id: 77,
            },
        },
        insert("root.db.other", &[53], 3),
    ];
    commands
        .iter()
        .map(|c| match region.write(c, &gate) {
            Ok(ApplyOutcome::Deleted { series }) => format!("deleted {series}"),
            Ok(ApplyOutcome::Inserted { points }) => format!("inserted {points}"),
            Ok(other) => format!("{other:?}"),
            Err(StorageError::StaleMetadata { .. }) => "stale".into(),
            Err(e) => format!("error {e}"),
        })
        .collect()
}

#[test]
fn a_table_dropped_a_hundred_times_leaves_one_deletion_and_the_same_verdicts() {
    let kept = TempDir::new().unwrap();
    let coalesced = TempDir::new().unwrap();
    let all = LoggedRegion::open(kept.path());
    churn(&all, false);
    {
        let region = LoggedRegion::open(coalesced.path());
        churn(&region, true);
        region.flush();
    }
    // Reopened: the manifest's deletions are all it knows of the churn.
    let region = LoggedRegion::open(coalesced.path());
    region.replay(&OpenGate).expect("replay");
    let tombstones = region.region.export().unwrap().tombstones;
    assert_eq!(tombstones.len(), 1, "{tombstones:?}");
    assert_eq!(tombstones[0].deletion(), deletion(100));
    assert_eq!(content(&region.region), content(&all.region));

    let expected = verdicts(&all);
    assert_eq!(
        expected,
        [
            "stale",
            "inserted 2",
            "inserted 2",
            "deleted 0",
            "deleted 0",
            "deleted 0",
            "inserted 2"
        ]
    );
    assert_eq!(verdicts(&region), expected);
    assert_eq!(content(&region.region), content(&all.region));
}

#[test]
fn coalescing_keeps_what_a_later_deletion_does_not_cover() {
    let dir = TempDir::new().unwrap();
    let region = LoggedRegion::open(dir.path());
    let gate = OpenGate;
    let series = |device: &str, version: u64, id: u64| RegionCommand::DeleteSeries {
        series: vec![(device.into(), "s1".into())],
        deletion: Deletion {
            metadata_version: version,
            operation_id: id,
        },
    };
    let prefix = |database: &str, version: u64, id: u64| RegionCommand::DeleteDatabase {
        database: database.into(),
        deletion: Deletion {
            metadata_version: version,
            operation_id: id,
        },
    };
    for command in [
        // Covered by the prefix deletion of root.a below.
        series("root.a.d1", 5, 1),
        prefix("root.a.t", 6, 2),
        // Not under root.a.
        series("root.ab.d1", 7, 3),
        // A deletion without a token is never coalesced.
        series("root.a.d2", 0, 4),
        prefix("root.a", 8, 5),
        // Newer than the prefix deletion: kept.
        series("root.a.d3", 9, 6),
    ] {
        region.write(&command, &gate).expect("a deletion");
    }
    region.flush();
    let mut kept: Vec<(u64, u64)> = region
        .region
        .export()
        .unwrap()
        .tombstones
        .iter()
        .map(|t| {
            let d = t.deletion();
            (d.operation_id, d.metadata_version)
        })
        .collect();
    kept.sort_unstable();
    assert_eq!(kept, [(3, 7), (4, 0), (5, 8), (6, 9)]);
    // A repeat of a coalesced operation is still a no-op, and so is one of a kept operation.
    assert!(matches!(
        region.write(&series("root.a.d1", 5, 1), &gate),
        Ok(ApplyOutcome::Deleted { series: 0 })
    ));
    assert!(matches!(
        region.write(&series("root.ab.d1", 7, 3), &gate),
        Ok(ApplyOutcome::Deleted { series: 0 })
    ));
}
