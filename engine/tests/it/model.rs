//! The engine against a model: random multi-partition tablets, fenced attempts, type clashes,
//! flushes, compactions, restarts and deletes.

use std::collections::HashMap;

use common::{DataType, Tablet, Value};
use engine::{ManualGate, OpenGate, RegionCommand, StorageError};
use proptest::prelude::*;

use crate::support::{apply_to_model, content, LoggedRegion, Model};

#[derive(Clone, Debug)]
enum Op {
    Insert {
        device: u8,
        rows: Vec<(i64, Option<f64>, Option<i64>)>,
        /// Fence the lease after this many fragment checks.
        fence_after: Option<u64>,
        /// Write s1 as INT64 instead of DOUBLE.
        clash: bool,
    },
    Delete {
        device: u8,
        measurement: u8,
    },
    Flush,
    Restart,
    /// Export the content and install it back as a snapshot at the applied index.
    Snapshot,
    /// Take a checkpoint (flush, hard links), merge the region's files, and install the
    /// checkpoint into a replica that holds what an earlier checkpoint gave it.
    Checkpoint,
    /// Merge sealed files until no partition needs it, with this TTL cutoff (points older
    /// may be removed).
    Compact {
        ttl_cutoff: Option<i64>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (
            0u8..3,
            prop::collection::vec((0i64..60, prop::option::of(-1e3f64..1e3), prop::option::of(any::<i64>())), 1..10),
            prop::option::of(0u64..4),
            prop::bool::weighted(0.1),
        )
            .prop_map(|(device, rows, fence_after, clash)| Op::Insert { device, rows, fence_after, clash }),
        1 => (0u8..3, 1u8..3).prop_map(|(device, measurement)| Op::Delete { device, measurement }),
        1 => Just(Op::Flush),
        1 => Just(Op::Restart),
        1 => Just(Op::Snapshot),
        1 => Just(Op::Checkpoint),
        2 => prop::option::weighted(0.4, 0i64..70).prop_map(|ttl_cutoff| Op::Compact { ttl_cutoff }),
    ]
}

fn build(device: u8, rows: &[(i64, Option<f64>, Option<i64>)], clash: bool) -> Tablet {
    let s1_type = if clash {
        DataType::Int64
    } else {
        DataType::Double
    };
    let mut t = Tablet::new(
        format!("root.sg.d{device}"),
        &[("s1", s1_type), ("s2", DataType::Int64)],
    );
    for &(ts, a, b) in rows {
        let a = a.map(|v| {
            if clash {
                Value::Int64(v as i64)
            } else {
                Value::Double(v)
            }
        });
        t.push_row(ts, vec![a, b.map(Value::Int64)]);
    }
    t
}

/// Types of the series the model holds: a column with at least one value defines its series.
type Types = HashMap<(String, String), DataType>;

fn clashes(types: &Types, t: &Tablet) -> bool {
    (0..t.measurements.len()).any(|c| {
        let has_value = (0..t.row_count()).any(|r| !t.is_null(r, c));
        has_value
            && types
                .get(&(t.device.clone(), t.measurements[c].clone()))
                .is_some_and(|existing| *existing != t.data_types[c])
    })
}

fn record_types(types: &mut Types, t: &Tablet) {
    for c in 0..t.measurements.len() {
        if (0..t.row_count()).any(|r| !t.is_null(r, c)) {
            types.insert(
                (t.device.clone(), t.measurements[c].clone()),
                t.data_types[c],
            );
        }
    }
}

/// Checks the region against the model. `floor` is the greatest TTL cutoff a compaction has
/// applied: points at or after it are exactly the model's; below it the region holds a subset
/// of the model's points (what compaction removed stays removed, nothing else changes), and
/// every series and its newest point survive (the type registry and LAST rest on them).
fn check(
    region: &LoggedRegion,
    model: &Model,
    floor: i64,
    step: usize,
) -> Result<(), TestCaseError> {
    let held = content(&region.region);
    let above = |m: &Model| -> Model {
        m.iter()
            .map(|(k, points)| {
                (
                    k.clone(),
                    points
                        .range(floor..)
                        .map(|(t, v)| (*t, v.clone()))
                        .collect(),
                )
            })
            .collect()
    };
    prop_assert_eq!(
        held.keys().collect::<Vec<_>>(),
        model.keys().collect::<Vec<_>>(),
        "series after step {}",
        step
    );
    prop_assert_eq!(
        above(&held),
        above(model),
        "content at or after {} after step {}",
        floor,
        step
    );
    for (key, points) in &held {
        for (t, v) in points.range(..floor) {
            prop_assert_eq!(
                model[key].get(t),
                Some(v),
                "{:?} at {} after step {}",
                key,
                t,
                step
            );
        }
    }
    for ((device, measurement), points) in model {
        let last = region.region.last(device, measurement).unwrap();
        let expected = points.iter().next_back().map(|(t, v)| (*t, v.clone()));
        prop_assert_eq!(
            last,
            expected,
            "last of {}.{} after step {}",
            device,
            measurement,
            step
        );
    }
    Ok(())
}

/// Pages of 4 points, so that the few points of a partition span several pages and merges
/// copy whole pages as well as decode them.
fn model_config() -> engine::StorageConfig {
    let mut config = crate::support::config();
    config.sealed.page_points = 4;
    config
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_model(ops in prop::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut region = LoggedRegion::open_with(dir.path(), model_config());
        let mut model = Model::new();
        let mut types = Types::new();
        // The greatest TTL cutoff applied so far (see `check`).
        let mut floor = i64::MIN;
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Insert { device, rows, fence_after, clash } => {
                    let tablet = build(device, &rows, clash);
                    let command = RegionCommand::insert(tablet.clone());
                    let gate = ManualGate::new();
                    if let Some(k) = fence_after {
                        gate.fence_after(k);
                    }
                    let result = region.write(&command, &gate);
                    let mismatch = clashes(&types, &tablet);
                    match result {
                        Ok(_) => {
                            prop_assert!(!mismatch, "step {}: clash accepted", step);
                            apply_to_model(&mut model, &tablet);
                            record_types(&mut types, &tablet);
                        }
                        Err(StorageError::DataTypeMismatch { .. }) => {
                            prop_assert!(mismatch, "step {}: spurious mismatch", step);
                        }
                        Err(e) => {
                            prop_assert!(e.is_recoverable(), "step {}: {:?}", step, e);
                            prop_assert!(fence_after.is_some());
                            check(&region, &model, floor, step)?;
                            // The committed entry is retried once the lease is back.
                            region.replay(&OpenGate).unwrap();
                            if !mismatch {
                                apply_to_model(&mut model, &tablet);
                                record_types(&mut types, &tablet);
                            }
                        }
                    }
                }
                Op::Delete { device, measurement } => {
                    let key = (format!("root.sg.d{device}"), format!("s{measurement}"));
                    region.write(&RegionCommand::delete_series(vec![key.clone()]), &OpenGate).unwrap();
                    model.remove(&key);
                    types.remove(&key);
                }
                Op::Flush => region.flush(),
                Op::Snapshot => {
                    let digest = region.region.digest().unwrap();
                    let (index, tablets, tombstones) = region.region.export().unwrap();
                    prop_assert_eq!(index, region.region.applied_index());
                    region.region.reset_to(index, &tablets, &tombstones).unwrap();
                    prop_assert_eq!(region.region.digest().unwrap(), digest, "digest across snapshot at step {}", step);
                    prop_assert_eq!(region.region.checkpoint_index(), index);
                }
                Op::Checkpoint => {
                    let links = dir.path().join("checkpoint");
                    let manifest = region.region.checkpoint_into(&links).unwrap();
                    prop_assert_eq!(manifest.checkpoint, region.region.applied_index());
                    let digest = region.region.digest().unwrap();
                    // Merging deletes the files the checkpoint links to; the links keep them.
                    region.region.compact_all().unwrap();
                    let replica_dir = dir.path().join("replica");
                    let replica = engine::DataRegion::open(&replica_dir, model_config()).unwrap();
                    replica.install_checkpoint(&manifest, &links).unwrap();
                    prop_assert_eq!(replica.applied_index(), manifest.checkpoint);
                    prop_assert_eq!(replica.digest().unwrap(), digest, "replica at step {}", step);
                    drop(replica);
                    let replica = engine::DataRegion::open(&replica_dir, model_config()).unwrap();
                    prop_assert_eq!(replica.digest().unwrap(), digest, "replica reopened at step {}", step);
                    std::fs::remove_dir_all(&links).unwrap();
                }
                Op::Compact { ttl_cutoff } => {
                    let digest = region.region.digest().unwrap();
                    region.region.set_ttl_cutoff(ttl_cutoff);
                    let reports = region.region.compact_all().unwrap();
                    match ttl_cutoff {
                        None => prop_assert_eq!(region.region.digest().unwrap(), digest, "digest across compaction at step {}", step),
                        Some(c) => floor = floor.max(c),
                    }
                    let stats = region.region.storage_stats();
                    prop_assert_eq!(stats.pending_compactions, 0, "step {}: {:?}", step, reports);
                }
                Op::Restart => {
                    let digest = region.region.digest().unwrap();
                    drop(region);
                    region = LoggedRegion::open_with(dir.path(), model_config());
                    region.replay(&OpenGate).unwrap();
                    prop_assert_eq!(region.region.digest().unwrap(), digest, "digest across restart at step {}", step);
                }
            }
            check(&region, &model, floor, step)?;
        }
    }
}
