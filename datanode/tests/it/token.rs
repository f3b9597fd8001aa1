//! The fencing token (design §4, H1 in REVIEW-2026-12): an insert validated against metadata older
//! than a deletion of its target is refused whenever it reaches the log after that deletion —
//! the same verdict live, after a replay, after a flush and restart, and on a replica restored
//! from a snapshot. A second delivery of one fence operation deletes nothing written since.

use datanode::region_state_machine::{decode_snapshot, encode_snapshot};
use engine::{Deletion, OpenGate, RegionCommand, StorageError};

use crate::support::{apply_to_model, config, content, tablet, LoggedRegion, Model};

fn insert(device: &str, timestamps: &[i64], metadata_version: u64) -> RegionCommand {
    RegionCommand::InsertTablet {
        tablet: tablet(device, timestamps, 0.0),
        metadata_version,
        table_version: 0,
    }
}

fn delete_s1(metadata_version: u64, operation_id: u64) -> RegionCommand {
    RegionCommand::DeleteSeries {
        series: vec![("root.sg.d1".into(), "s1".into())],
        deletion: Deletion {
            metadata_version,
            operation_id,
        },
    }
}

fn stale(result: Result<engine::ApplyOutcome, StorageError>) -> bool {
    matches!(result, Err(StorageError::StaleMetadata { .. }))
}

#[test]
fn an_insert_validated_before_a_deletion_is_refused_after_it_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let mut region = LoggedRegion::open(dir.path());
    let mut model = Model::new();
    // Validated at version 4, applied before the deletion: written, then s1 is deleted.
    region
        .write(&insert("root.sg.d1", &[1, 2], 4), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &tablet("root.sg.d1", &[1, 2], 0.0));
    region.write(&delete_s1(5, 1), &OpenGate).unwrap();
    model.remove(&("root.sg.d1".to_string(), "s1".to_string()));
    // The same kind of write arriving late (a forward stuck on the wire): refused whole, with a
    // status that tells the client to retry.
    let late = region.write(&insert("root.sg.d1", &[3], 4), &OpenGate);
    let Err(error) = &late else {
        panic!("a stale insert was applied: {late:?}")
    };
    assert!(!error.is_recoverable(), "the verdict is deterministic");
    assert_eq!(error.status().code.code(), 536);
    // Another device, and the series re-created under fresh metadata: written.
    let other = tablet("root.sg.d2", &[1], 0.0);
    region
        .write(
            &RegionCommand::InsertTablet {
                tablet: other.clone(),
                metadata_version: 4,
                table_version: 0,
            },
            &OpenGate,
        )
        .unwrap();
    apply_to_model(&mut model, &other);
    let fresh = tablet("root.sg.d1", &[7], 0.0);
    region
        .write(
            &RegionCommand::InsertTablet {
                tablet: fresh.clone(),
                metadata_version: 6,
                table_version: 0,
            },
            &OpenGate,
        )
        .unwrap();
    apply_to_model(&mut model, &fresh);
    // s2 of d1 was never deleted; the stale tablet carries s1 and s2, so it lost whole.
    assert_eq!(content(&region.region), model);
    let digest = region.region.digest().unwrap();

    // Replay from the log, then flush, restart and replay again: the same verdicts.
    for flush in [false, true] {
        if flush {
            region.flush();
        }
        drop(region);
        region = LoggedRegion::open(dir.path());
        region.replay(&OpenGate).unwrap();
        assert_eq!(content(&region.region), model, "flush={flush}");
        let after = region.region.digest().unwrap();
        assert_eq!(
            (after.points, after.hash),
            (digest.points, digest.hash),
            "flush={flush}"
        );
        assert!(
            stale(region.write(&insert("root.sg.d1", &[9], 5 - 1), &OpenGate)),
            "flush={flush}: the deletion's token survives a restart"
        );
    }
}

#[test]
fn a_database_deletion_fences_every_device_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    region
        .write(
            &RegionCommand::DeleteDatabase {
                database: "root.sg".into(),
                deletion: Deletion {
                    metadata_version: 10,
                    operation_id: 2,
                },
            },
            &OpenGate,
        )
        .unwrap();
    assert!(stale(
        region.write(&insert("root.sg.d1", &[1], 9), &OpenGate)
    ));
    assert!(stale(
        region.write(&insert("root.sg.a.b", &[1], 0), &OpenGate)
    ));
    region
        .write(&insert("root.sgx.d1", &[1], 0), &OpenGate)
        .unwrap();
    region
        .write(&insert("root.sg.d1", &[1], 10), &OpenGate)
        .unwrap();
}

#[test]
fn a_second_delivery_of_one_operation_deletes_nothing_written_since() {
    let dir = tempfile::tempdir().unwrap();
    let region = LoggedRegion::open(dir.path());
    let mut model = Model::new();
    region
        .write(&insert("root.sg.d1", &[1], 1), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &tablet("root.sg.d1", &[1], 0.0));
    region.write(&delete_s1(5, 3), &OpenGate).unwrap();
    model.remove(&("root.sg.d1".to_string(), "s1".to_string()));
    let fresh = tablet("root.sg.d1", &[2], 0.0);
    region
        .write(
            &RegionCommand::InsertTablet {
                tablet: fresh.clone(),
                metadata_version: 7,
                table_version: 0,
            },
            &OpenGate,
        )
        .unwrap();
    apply_to_model(&mut model, &fresh);
    // A retry of operation 3 that reached the log late.
    region.write(&delete_s1(5, 3), &OpenGate).unwrap();
    assert_eq!(content(&region.region), model);
}

#[test]
fn a_snapshot_carries_the_deletions_and_their_tokens() {
    let source_dir = tempfile::tempdir().unwrap();
    let source = LoggedRegion::open(source_dir.path());
    source
        .write(&insert("root.sg.d2", &[1], 1), &OpenGate)
        .unwrap();
    source.write(&delete_s1(5, 1), &OpenGate).unwrap();
    let exported = source.region.export().unwrap();
    let index = exported.applied_index;
    assert_eq!(exported.tombstones.len(), 1);
    let bytes = encode_snapshot(&exported);
    let decoded = decode_snapshot(&bytes, &config().tablet_limits).unwrap();
    assert_eq!(decoded, exported);

    let target_dir = tempfile::tempdir().unwrap();
    let target = LoggedRegion::open(target_dir.path());
    target.region.reset_to(&decoded).unwrap();
    assert_eq!(content(&target.region), content(&source.region));
    let late = insert("root.sg.d1", &[3], 4);
    assert!(stale(target.region.apply(index + 1, &late, &OpenGate)));
    assert!(stale(source.region.apply(index + 1, &late, &OpenGate)));
    // And after the restored replica restarts.
    drop(target);
    let target = LoggedRegion::open(target_dir.path());
    assert!(stale(target.region.apply(index + 1, &late, &OpenGate)));
}

/// The inline region snapshot's bytes (`FPRSNAP6`): the envelope, the applied index, each tablet and
/// each deletion as a length-prefixed region command (whose own bytes `command.rs` pins; a
/// `deleteData` followed by its series' type), the `deleteData` operations remembered, the fence
/// floor, the CRC. Older `FPRSNAP5` (no floor), `FPRSNAP4` (no operations), `FPRSNAP2` (no `deleteData`) and `FPRSNAP1` (no deletions)
/// snapshots still decode.
#[test]
fn golden_region_snapshot() {
    use engine::{RegionContent, Tombstone};
    let t = tablet("root.sg.d1", &[7], 1.5);
    let deletion = Deletion {
        metadata_version: 4,
        operation_id: 2,
    };
    let tombstone = Tombstone::Series {
        device: "root.sg.d1".into(),
        measurement: "s2".into(),
        index: 3,
        deletion,
    };
    let range = Tombstone::Range {
        device: "root.sg.d1".into(),
        measurement: "s1".into(),
        data_type: common::DataType::Double,
        start: -5,
        end: 6,
        index: 8,
    };
    let both = [tombstone.clone(), range.clone()];
    let content = RegionContent {
        applied_index: 9,
        tablets: vec![t.clone()],
        tombstones: both.to_vec(),
        delete_operations: vec![(8, 0x0102)],
        fence_floor: 0x0304,
    };
    let bytes = encode_snapshot(&content);
    assert!(
        !bytes.starts_with(b"FPRSNAP3"),
        "not taken for a streamed snapshot's descriptor"
    );
    let insert = RegionCommand::insert(t.clone()).encode();
    let delete = RegionCommand::DeleteSeries {
        series: vec![("root.sg.d1".into(), "s2".into())],
        deletion,
    }
    .encode();
    let delete_data = RegionCommand::DeleteData {
        series: vec![("root.sg.d1".into(), "s1".into())],
        start: -5,
        end: 6,
        deletion: Deletion::default(),
    }
    .encode();
    let len = |b: &[u8]| (b.len() as u32).to_le_bytes();
    #[rustfmt::skip]
    let v4: Vec<u8> = [
        &b"FPRSNAP4"[..], &9u64.to_le_bytes(),
        &1u32.to_le_bytes(), &len(&insert), &insert,
        &2u32.to_le_bytes(), &3u64.to_le_bytes(), &len(&delete), &delete,
        &8u64.to_le_bytes(), &len(&delete_data), &delete_data, &[common::DataType::Double.code()],
    ].concat();
    let mut v5 = v4.clone();
    v5[..8].copy_from_slice(b"FPRSNAP5");
    v5.extend_from_slice(&1u32.to_le_bytes());
    v5.extend_from_slice(&8u64.to_le_bytes());
    v5.extend_from_slice(&0x0102u64.to_le_bytes());
    let mut golden = v5.clone();
    golden[..8].copy_from_slice(b"FPRSNAP6");
    golden.extend_from_slice(&0x0304u64.to_le_bytes());
    assert_eq!(&bytes[..golden.len()], &golden[..]);
    assert_eq!(
        &bytes[golden.len()..],
        &crc32fast::hash(&golden).to_le_bytes()
    );
    assert_eq!(
        decode_snapshot(&bytes, &config().tablet_limits).unwrap(),
        content
    );

    let mut v5_bytes = v5.clone();
    v5_bytes.extend_from_slice(&crc32fast::hash(&v5).to_le_bytes());
    let old = decode_snapshot(&v5_bytes, &config().tablet_limits).unwrap();
    assert_eq!(
        old,
        RegionContent {
            fence_floor: 0,
            ..content.clone()
        }
    );

    let mut v4_bytes = v4.clone();
    v4_bytes.extend_from_slice(&crc32fast::hash(&v4).to_le_bytes());
    let old = decode_snapshot(&v4_bytes, &config().tablet_limits).unwrap();
    assert_eq!(
        old,
        RegionContent {
            delete_operations: Vec::new(),
            fence_floor: 0,
            ..content.clone()
        }
    );

    #[rustfmt::skip]
    let v2: Vec<u8> = [
        &b"FPRSNAP2"[..], &9u64.to_le_bytes(), &1u32.to_le_bytes(), &len(&insert), &insert,
        &1u32.to_le_bytes(), &3u64.to_le_bytes(), &len(&delete), &delete,
    ].concat();
    let mut v2_bytes = v2.clone();
    v2_bytes.extend_from_slice(&crc32fast::hash(&v2).to_le_bytes());
    let old = decode_snapshot(&v2_bytes, &config().tablet_limits).unwrap();
    assert_eq!(old.tombstones, vec![tombstone]);

    #[rustfmt::skip]
    let v1: Vec<u8> = [
        &b"FPRSNAP1"[..], &9u64.to_le_bytes(), &1u32.to_le_bytes(), &len(&insert), &insert,
    ].concat();
    let mut v1_bytes = v1.clone();
    v1_bytes.extend_from_slice(&crc32fast::hash(&v1).to_le_bytes());
    let old = decode_snapshot(&v1_bytes, &config().tablet_limits).unwrap();
    assert_eq!(
        (old.applied_index, old.tablets, old.tombstones.len()),
        (9, vec![t], 0)
    );

    for i in 0..bytes.len() {
        let mut flipped = bytes.clone();
        flipped[i] ^= 0x10;
        assert!(
            decode_snapshot(&flipped, &config().tablet_limits).is_err(),
            "flip at {i}"
        );
    }
}

fn table_insert(device: &str, timestamps: &[i64], versions: (u64, u64)) -> RegionCommand {
    RegionCommand::InsertTablet {
        tablet: tablet(device, timestamps, 0.0),
        metadata_version: versions.0,
        table_version: versions.1,
    }
}

/// DROP TABLE deletes and fences the table's whole prefix (REVIEW N1): a write derived from the
/// dropped table's schema is refused by its table version even when its device schema is fresh
/// (a device first written after the drop began), the table's device of no tags included; a
/// write derived from the table created again, and tree writes, are not.
#[test]
fn a_table_drop_fences_every_device_derived_from_the_dropped_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut region = LoggedRegion::open(dir.path());
    region
        .write(&table_insert("root.db.t.-a", &[1], (3, 2)), &OpenGate)
        .unwrap();
    region
        .write(&table_insert("root.db.t", &[1], (3, 2)), &OpenGate)
        .unwrap();
    let drop = RegionCommand::DeleteDatabase {
        database: "root.db.t".into(),
        deletion: Deletion {
            metadata_version: 10,
            operation_id: 4,
        },
    };
    region.write(&drop, &OpenGate).unwrap();
    assert!(
        content(&region.region).is_empty(),
        "the drop took every device"
    );
    for _ in 0..2 {
        // A device schema fetched after the drop, rows derived from the old table: refused.
        for device in ["root.db.t.-new", "root.db.t"] {
            assert!(
                stale(region.write(&table_insert(device, &[2], (11, 2)), &OpenGate)),
                "{device}"
            );
        }
        // Another table, a name that only starts alike, the table created again: written.
        for device in ["root.db.u.-a", "root.db.tx.-a"] {
            region
                .write(&table_insert(device, &[2], (11, 2)), &OpenGate)
                .unwrap();
        }
        region
            .write(&table_insert("root.db.t.-new", &[2], (12, 11)), &OpenGate)
            .unwrap();
        // Flush, restart and replay: the same verdicts.
        region.flush();
        region = reopen(region, dir.path());
    }
}

/// The region closed, opened again and its log replayed.
fn reopen(region: LoggedRegion, dir: &std::path::Path) -> LoggedRegion {
    drop(region);
    let region = LoggedRegion::open(dir);
    region.replay(&OpenGate).unwrap();
    region
}

fn delete_data(series: &str, end: i64, deletion: Deletion) -> RegionCommand {
    RegionCommand::DeleteData {
        series: vec![(series.into(), "s1".into())],
        start: i64::MIN,
        end,
        deletion,
    }
}

/// A `deleteData` carries the version its series list was resolved against and an operation id
/// (REVIEW N6): after the series was deleted and created again it deletes nothing of the new
/// series, and a second delivery of one operation deletes nothing written since: the same
/// verdicts after a flush, a restart and a snapshot.
#[test]
fn a_late_or_repeated_delete_data_deletes_no_point_written_since() {
    let dir = tempfile::tempdir().unwrap();
    let mut region = LoggedRegion::open(dir.path());
    let mut model = Model::new();
    let key = ("root.sg.d1".to_string(), "s1".to_string());
    region
        .write(&insert("root.sg.d1", &[1, 2], 4), &OpenGate)
        .unwrap();
    // Operation 9 deletes t <= 1, resolved at version 4.
    let op9 = Deletion {
        metadata_version: 4,
        operation_id: 9,
    };
    region
        .write(&delete_data("root.sg.d1", 1, op9), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &tablet("root.sg.d1", &[1, 2], 0.0));
    model.get_mut(&key).unwrap().remove(&1);
    // A new point at t=1 acknowledged after it; then operation 9 again (a retry that landed
    // late): the new point stays.
    region
        .write(&insert("root.sg.d1", &[1], 6), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &tablet("root.sg.d1", &[1], 0.0));
    region
        .write(&delete_data("root.sg.d1", 1, op9), &OpenGate)
        .unwrap();
    assert_eq!(content(&region.region), model);

    // DELETE TIMESERIES of s1 at version 7, the series created again and written.
    region.write(&delete_s1(7, 1), &OpenGate).unwrap();
    model.remove(&key);
    region
        .write(&insert("root.sg.d1", &[5], 8), &OpenGate)
        .unwrap();
    apply_to_model(&mut model, &tablet("root.sg.d1", &[5], 0.0));
    // A deleteData resolved before the DELETE TIMESERIES arrives: refused, deletes nothing.
    let late = delete_data(
        "root.sg.d1",
        10,
        Deletion {
            metadata_version: 6,
            operation_id: 10,
        },
    );
    let refused = region.write(&late, &OpenGate);
    assert!(
        stale(refused),
        "a deleteData older than the series' deletion"
    );
    assert_eq!(content(&region.region), model);

    // The same verdicts after a flush and a restart, and on a replica restored from a snapshot.
    region.flush();
    region = reopen(region, dir.path());
    assert_eq!(content(&region.region), model);
    let next = region.region.applied_index() + 1;
    let snapshot = decode_snapshot(
        &encode_snapshot(&region.region.export().unwrap()),
        &config().tablet_limits,
    )
    .unwrap();
    assert_eq!(snapshot.delete_operations.len(), 1, "operation 9");
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = LoggedRegion::open(copy_dir.path());
    copy.region.reset_to(&snapshot).unwrap();
    for replica in [&region.region, &copy.region] {
        assert!(stale(replica.apply(next, &late, &OpenGate)));
        replica
            .apply(next + 1, &delete_data("root.sg.d1", 10, op9), &OpenGate)
            .unwrap();
        assert_eq!(content(replica), model);
    }
}
