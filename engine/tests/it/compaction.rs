//! Compaction: files per partition shrink, deleted data leaves the disk, content and digest stay.

use common::Value;
use engine::{OpenGate, RegionCommand};

use crate::support::{apply_to_model, content, tablet, LoggedRegion, Model};

/// Eight flushes into one partition (slot 0), one series deleted, then compaction.
fn eight_flushes(dir: &std::path::Path) -> (LoggedRegion, Model) {
    let region = LoggedRegion::open(dir);
    let mut model = Model::new();
    for round in 0..8i64 {
        for device in ["root.sg.d1", "root.sg.d2"] {
            // Overlapping timestamps across rounds: the newest write must win the merge.
            let t = tablet(device, &[round, round + 1, round + 2], round as f64 * 10.0);
            region
                .write(&RegionCommand::insert(t.clone()), &OpenGate)
                .unwrap();
            apply_to_model(&mut model, &t);
        }
        region.flush();
    }
    (region, model)
}

fn sealed_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("region/sealed"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn compaction_merges_a_partition_and_reclaims_deleted_data() {
    let dir = tempfile::tempdir().unwrap();
    let (region, mut model) = eight_flushes(dir.path());
    assert_eq!(region.region.storage_stats().sealed_files, 8);
    assert_eq!(region.region.storage_stats().pending_compactions, 1);
    let digest = region.region.digest().unwrap();

    let reports = region.region.compact_all().unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].inputs, 8);
    let stats = region.region.storage_stats();
    assert_eq!((stats.sealed_files, stats.pending_compactions), (1, 0));
    assert_eq!(sealed_names(dir.path()).len(), 1, "inputs deleted");
    assert_eq!(region.region.digest().unwrap(), digest);
    assert_eq!(content(&region.region), model);
    assert_eq!(
        region.region.query("root.sg.d1", "s1", 7, 8).unwrap(),
        vec![(7, Value::Double(70.0))],
        "the newest write of t=7 won"
    );

    // A deletion masks d2 in the merged file; the next compaction rewrites it without d2.
    let key = ("root.sg.d2".to_string(), "s1".to_string());
    region
        .write(&RegionCommand::delete_series(vec![key.clone()]), &OpenGate)
        .unwrap();
    model.remove(&key);
    assert_eq!(
        region.region.storage_stats().pending_compactions,
        0,
        "a deletion is applied to files only once a flush made it durable"
    );
    region.flush();
    let before = region.region.storage_stats().sealed_bytes;
    assert_eq!(region.region.storage_stats().pending_compactions, 1);
    let reports = region.region.compact_all().unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].dropped_series, 1);
    assert!(region.region.storage_stats().sealed_bytes < before);
    assert_eq!(content(&region.region), model);

    // Everything holds across a restart.
    let digest = region.region.digest().unwrap();
    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    assert_eq!(region.region.digest().unwrap(), digest);
    assert_eq!(content(&region.region), model);
    assert_eq!(region.region.storage_stats().pending_compactions, 0);
}

#[test]
fn a_file_whose_every_series_is_deleted_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    let t = tablet("root.sg.d1", &[1, 2], 0.0);
    region.write(&RegionCommand::insert(t), &OpenGate).unwrap();
    region.flush();
    let all = vec![
        ("root.sg.d1".to_string(), "s1".to_string()),
        ("root.sg.d1".to_string(), "s2".to_string()),
    ];
    region
        .write(&RegionCommand::delete_series(all), &OpenGate)
        .unwrap();
    region.flush();
    region.region.compact_all().unwrap();
    assert_eq!(region.region.storage_stats().sealed_files, 0);
    assert!(sealed_names(dir.path()).is_empty());
    assert!(content(&region.region).is_empty());
}

#[test]
fn ttl_expired_points_leave_the_disk_but_each_series_keeps_its_newest() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    // Slots 0 (t 0..10) and 1 (t 10..20) of the tests' 10 ms partitions: one file each.
    let timestamps: Vec<i64> = (0..20).collect();
    for device in ["root.sg.d1", "root.sg.d2"] {
        let t = tablet(device, &timestamps, 0.0);
        region.write(&RegionCommand::insert(t), &OpenGate).unwrap();
    }
    region.flush();
    assert_eq!(region.region.storage_stats().sealed_files, 2);
    assert_eq!(region.region.storage_stats().pending_compactions, 0);
    let before = region.region.storage_stats().sealed_bytes;

    // Slot 0 expired whole; slot 1 only in part, inside a page that straddles the cutoff, so
    // rewriting it would remove less than half its points: it stays as it is.
    region.region.set_ttl_cutoff(Some(15));
    assert_eq!(region.region.ttl_cutoff(), Some(15));
    assert_eq!(region.region.storage_stats().pending_compactions, 1);
    let reports = region.region.compact_all().unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].time_slot, 0);
    assert!(reports[0].expired_points > 0);
    assert!(region.region.storage_stats().sealed_bytes < before);
    assert!(
        region.region.compact_all().unwrap().is_empty(),
        "what a rewrite keeps never makes the file due again"
    );
    for device in ["root.sg.d1", "root.sg.d2"] {
        assert_eq!(
            region.region.query(device, "s1", 0, 10).unwrap(),
            vec![(9, Value::Double(9.0))],
            "{device}: only the newest expired point of the partition stays"
        );
        assert_eq!(region.region.query(device, "s1", 10, 20).unwrap().len(), 10);
    }

    // After a restart the series and their types are still known: a clashing insert into an
    // expired partition is still refused, as it was before the compaction.
    drop(region);
    let region = LoggedRegion::open(dir.path());
    region.replay(&OpenGate).unwrap();
    let mut clash = common::Tablet::new("root.sg.d1", &[("s1", common::DataType::Int64)]);
    clash.push_row(3, vec![Some(Value::Int64(1))]);
    let refused = region.write(&RegionCommand::insert(clash), &OpenGate);
    assert!(
        matches!(refused, Err(engine::StorageError::DataTypeMismatch { .. })),
        "{refused:?}"
    );
    // Unsetting the TTL brings nothing back.
    region.region.set_ttl_cutoff(None);
    assert!(region.region.compact_all().unwrap().is_empty());
    assert_eq!(
        region
            .region
            .query("root.sg.d1", "s1", 0, 10)
            .unwrap()
            .len(),
        1
    );
}
