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
    let (index, tablets, tombstones) = source.region.export().unwrap();
    assert_eq!(tombstones.len(), 1);
    let bytes = encode_snapshot(index, &tablets, &tombstones);
    let (at, tablets, tombstones) = decode_snapshot(&bytes, &config().tablet_limits).unwrap();
    assert_eq!(at, index);

    let target_dir = tempfile::tempdir().unwrap();
    let target = LoggedRegion::open(target_dir.path());
    target
        .region
        .reset_to(index, &tablets, &tombstones)
        .unwrap();
    assert_eq!(content(&target.region), content(&source.region));
    let late = insert("root.sg.d1", &[3], 4);
    assert!(stale(target.region.apply(index + 1, &late, &OpenGate)));
    assert!(stale(source.region.apply(index + 1, &late, &OpenGate)));
    // And after the restored replica restarts.
    drop(target);
    let target = LoggedRegion::open(target_dir.path());
    assert!(stale(target.region.apply(index + 1, &late, &OpenGate)));
}

/// The inline region snapshot's bytes (`FPRSNAP4`): the envelope, the applied index, each tablet and
/// each deletion as a length-prefixed region command (whose own bytes `command.rs` pins; a
/// `deleteData` followed by its series' type), the CRC. Older `FPRSNAP2` (no `deleteData`) and
/// `FPRSNAP1` (no deletions) snapshots still decode.
#[test]
fn golden_region_snapshot() {
    use engine::Tombstone;
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
    let bytes = encode_snapshot(9, std::slice::from_ref(&t), &both);
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
    }
    .encode();
    let len = |b: &[u8]| (b.len() as u32).to_le_bytes();
    #[rustfmt::skip]
    let golden: Vec<u8> = [
        &b"FPRSNAP4"[..], &9u64.to_le_bytes(),
        &1u32.to_le_bytes(), &len(&insert), &insert,
        &2u32.to_le_bytes(), &3u64.to_le_bytes(), &len(&delete), &delete,
        &8u64.to_le_bytes(), &len(&delete_data), &delete_data, &[common::DataType::Double.code()],
    ].concat();
    assert_eq!(&bytes[..golden.len()], &golden[..]);
    assert_eq!(
        &bytes[golden.len()..],
        &crc32fast::hash(&golden).to_le_bytes()
    );
    let (index, tablets, tombstones) = decode_snapshot(&bytes, &config().tablet_limits).unwrap();
    assert_eq!(
        (index, tablets, tombstones),
        (9, vec![t.clone()], both.to_vec())
    );

    #[rustfmt::skip]
    let v2: Vec<u8> = [
        &b"FPRSNAP2"[..], &9u64.to_le_bytes(), &1u32.to_le_bytes(), &len(&insert), &insert,
        &1u32.to_le_bytes(), &3u64.to_le_bytes(), &len(&delete), &delete,
    ].concat();
    let mut v2_bytes = v2.clone();
    v2_bytes.extend_from_slice(&crc32fast::hash(&v2).to_le_bytes());
    let (_, _, tombstones) = decode_snapshot(&v2_bytes, &config().tablet_limits).unwrap();
    assert_eq!(tombstones, vec![tombstone]);

    #[rustfmt::skip]
    let v1: Vec<u8> = [
        &b"FPRSNAP1"[..], &9u64.to_le_bytes(), &1u32.to_le_bytes(), &len(&insert), &insert,
    ].concat();
    let mut v1_bytes = v1.clone();
    v1_bytes.extend_from_slice(&crc32fast::hash(&v1).to_le_bytes());
    let (index, tablets, tombstones) = decode_snapshot(&v1_bytes, &config().tablet_limits).unwrap();
    assert_eq!((index, tablets, tombstones.len()), (9, vec![t], 0));

    for i in 0..bytes.len() {
        let mut flipped = bytes.clone();
        flipped[i] ^= 0x10;
        assert!(
            decode_snapshot(&flipped, &config().tablet_limits).is_err(),
            "flip at {i}"
        );
    }
}
