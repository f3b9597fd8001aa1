//! The engine against a model: random multi-partition tablets, fenced attempts, type clashes,
//! flushes, compactions, restarts, deletes and time-range deletes; after every step the
//! region's aggregates against the fold of its points, and its cached newest points against
//! fresh ones.

use std::collections::{HashMap, HashSet};

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
    /// `deleteData` of `start..=end`.
    DeleteRange {
        device: u8,
        measurement: u8,
        start: i64,
        end: i64,
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
        2 => (0u8..3, 1u8..3, -5i64..65, 0i64..40).prop_map(|(device, measurement, start, len)| {
            Op::DeleteRange { device, measurement, start, end: start + len }
        }),
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

/// What the model knows besides the points.
struct Known<'a> {
    /// The greatest TTL cutoff a compaction has applied.
    floor: i64,
    /// The series' types: those written and not deleted since, points left or not.
    types: &'a Types,
    /// Series a `deleteData` touched since they were last created.
    ranged: &'a HashSet<(String, String)>,
}

/// Checks the region against the model. `floor` is the greatest TTL cutoff a compaction has
/// applied: points at or after it are exactly the model's; below it the region holds a subset
/// of the model's points (what compaction removed stays removed, nothing else changes), and
/// every series and its newest point survive (LAST rests on them) — unless a `deleteData`
/// removed the newest ones, when what is left below the cutoff may be gone too. The type
/// registry holds every series written and not deleted, whatever is left of its points.
fn check(
    region: &LoggedRegion,
    model: &Model,
    known: &Known<'_>,
    step: usize,
) -> Result<(), TestCaseError> {
    let floor = known.floor;
    let held = content(&region.region);
    let above = |m: &Model| -> Model {
        m.iter()
            .map(|(k, points)| {
                (
                    k.clone(),
                    points
                        .range(floor..)
                        .map(|(t, v)| (*t, v.clone()))
                        .collect::<std::collections::BTreeMap<_, _>>(),
                )
            })
            .filter(|(_, points)| !points.is_empty())
            .collect()
    };
    for key in held.keys() {
        prop_assert!(model.contains_key(key), "{:?} after step {}", key, step);
    }
    crate::aggregate::check_aggregates(&region.region, &held, step)?;
    for (key, points) in model {
        if !known.ranged.contains(key) || points.range(floor..).next().is_some() {
            prop_assert!(held.contains_key(key), "{:?} lost after step {}", key, step);
        }
    }
    let registered: Vec<(String, String, DataType)> = region.region.series();
    let mut expected: Vec<(String, String, DataType)> = known
        .types
        .iter()
        .map(|((d, m), t)| (d.clone(), m.clone(), *t))
        .collect();
    expected.sort();
    prop_assert_eq!(registered, expected, "registry after step {}", step);
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
    // The last-value cache answers exactly what a fresh computation does, for every series
    // written (points left or not) and one never written; each read fills it for later steps.
    let never = ("root.sg.d9".to_string(), "s1".to_string());
    for (device, measurement) in model.keys().chain(known.types.keys()).chain([&never]) {
        let uncached = region.region.last_uncached(device, measurement).unwrap();
        let cached = region.region.last(device, measurement).unwrap();
        prop_assert_eq!(
            cached,
            uncached,
            "cached last of {}.{} after step {}",
            device,
            measurement,
            step
        );
    }
    for ((device, measurement), points) in model {
        let last = region.region.last(device, measurement).unwrap();
        let expected = points.iter().next_back().map(|(t, v)| (*t, v.clone()));
        let key = (device.clone(), measurement.clone());
        if known.ranged.contains(&key) && expected.as_ref().is_some_and(|(t, _)| *t < floor) {
            if let Some((t, v)) = &last {
                prop_assert_eq!(
                    points.get(t),
                    Some(v),
                    "last of {:?} after step {}",
                    key,
                    step
                );
            }
            continue;
        }
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
        let mut ranged = HashSet::new();
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
                            check(&region, &model, &Known { floor, types: &types, ranged: &ranged }, step)?;
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
                    ranged.remove(&key);
                }
                Op::DeleteRange { device, measurement, start, end } => {
                    let key = (format!("root.sg.d{device}"), format!("s{measurement}"));
                    let command = RegionCommand::DeleteData { series: vec![key.clone()], start, end, deletion: engine::Deletion::default() };
                    region.write(&command, &OpenGate).unwrap();
                    if let Some(points) = model.get_mut(&key) {
                        points.retain(|t, _| !(start..=end).contains(t));
                        if points.is_empty() {
                            // The series keeps its type: `types` still holds it.
                            model.remove(&key);
                        }
                        ranged.insert(key);
                    }
                }
                Op::Flush => region.flush(),
                Op::Snapshot => {
                    let digest = region.region.digest().unwrap();
                    let content = region.region.export().unwrap();
                    let index = content.applied_index;
                    prop_assert_eq!(index, region.region.applied_index());
                    region.region.reset_to(&content).unwrap();
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
            check(&region, &model, &Known { floor, types: &types, ranged: &ranged }, step)?;
        }
    }
}
