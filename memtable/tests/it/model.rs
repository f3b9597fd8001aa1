//! The memtable against a `BTreeMap` model, through random inserts, marks, rollbacks, deletes,
//! freezes and reads. proptest prints the failing operation sequence (shrunk) and records its seed
//! under `proptest-regressions/`.

use std::collections::BTreeMap;

use common::{DataType, Tablet, Value};
use memtable::{
    estimated_point_bytes, FrozenMemTable, Mark, MemTable, MemTableConfig, MemTableError,
    SERIES_OVERHEAD_BYTES,
};
use proptest::prelude::*;

const DEVICES: [&str; 3] = ["root.sg.d0", "root.sg.d1", "root.sg.long_device_name"];
const MEASUREMENTS: [&str; 3] = ["s0", "s1", "temperature"];
/// Small, so that memory_bytes crosses it in some runs.
const FLUSH_THRESHOLD_BYTES: usize = 2000;

/// One cell of a generated row: null, or a seed that becomes a value of the column's type.
type Cell = Option<u16>;

#[derive(Clone, Debug)]
enum Op {
    Insert {
        device: usize,
        /// (measurement, type); measurements distinct.
        columns: Vec<(usize, DataType)>,
        /// (timestamp, one cell per column slot; only the first `columns.len()` are used).
        rows: Vec<(i64, [Cell; 3])>,
        /// Row selection, each taken modulo the row count.
        selection: Vec<u32>,
        /// Select a run of consecutive rows instead (from the first selected row, or row 0, to
        /// the end): the memtable copies such runs as slices.
        run: bool,
    },
    Mark,
    /// Roll back to the live mark at this index, modulo their number.
    Rollback(usize),
    ReleaseMarks,
    DeleteSeries(usize, usize),
    DeleteWhereDevice(usize),
    DeleteWhereMeasurement(usize),
    Query {
        from: i64,
        to: i64,
    },
    Freeze,
}

/// The type a series has most of the time; other types are drawn rarely, to provoke mismatches.
fn usual_type(device: usize, measurement: usize) -> DataType {
    DataType::ALL[(device * 3 + measurement) % DataType::ALL.len()]
}

fn value(data_type: DataType, seed: u16) -> Value {
    match data_type {
        DataType::Boolean => Value::Boolean(seed & 1 == 0),
        DataType::Int32 => Value::Int32(i32::from(seed) - 100),
        DataType::Int64 => Value::Int64(i64::from(seed) * 1_000_000_007),
        DataType::Float => Value::Float(f32::from(seed) * 0.25),
        DataType::Double => Value::Double(f64::from(seed) * -0.5),
        DataType::Text => Value::Text("t".repeat(usize::from(seed % 7)) + &seed.to_string()),
        DataType::Timestamp => Value::Timestamp(-i64::from(seed)),
        DataType::Date => Value::Date(20240101 + i32::from(seed % 28)),
        DataType::Blob => Value::Blob(seed.to_be_bytes().to_vec()),
        DataType::String => Value::String(seed.to_string()),
    }
}

fn insert_strategy() -> impl Strategy<Value = Op> {
    let column = (
        0..3usize,
        0..DataType::ALL.len(),
        proptest::bool::weighted(0.1),
    );
    (
        0..3usize,
        proptest::collection::vec(column, 1..=3),
        proptest::collection::vec(
            (
                -4i64..12,
                proptest::array::uniform3(proptest::option::weighted(0.8, any::<u16>())),
            ),
            1..8,
        ),
        proptest::collection::vec(any::<u32>(), 0..10),
        proptest::bool::weighted(0.4),
    )
        .prop_map(|(device, columns, rows, selection, run)| {
            let mut seen = [false; 3];
            let columns = columns
                .into_iter()
                .filter(|&(m, _, _)| !std::mem::replace(&mut seen[m], true))
                .map(|(m, t, odd)| {
                    let data_type = if odd {
                        DataType::ALL[t]
                    } else {
                        usual_type(device, m)
                    };
                    (m, data_type)
                })
                .collect();
            Op::Insert {
                device,
                columns,
                rows,
                selection,
                run,
            }
        })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => insert_strategy(),
        4 => Just(Op::Mark),
        3 => any::<usize>().prop_map(Op::Rollback),
        1 => Just(Op::ReleaseMarks),
        1 => (0..3usize, 0..3usize).prop_map(|(d, m)| Op::DeleteSeries(d, m)),
        1 => (0..3usize).prop_map(Op::DeleteWhereDevice),
        1 => (0..3usize).prop_map(Op::DeleteWhereMeasurement),
        3 => (-6i64..14, -6i64..14).prop_map(|(from, to)| Op::Query { from, to }),
        1 => Just(Op::Freeze),
    ]
}

#[derive(Clone, Debug)]
struct ModelSeries {
    data_type: DataType,
    points: BTreeMap<i64, Value>,
    /// Points appended, duplicates counted.
    appended: usize,
    /// Estimated bytes of the appended points.
    appended_bytes: usize,
}

/// What the memtable should hold: per series the latest value per timestamp, plus what the
/// memory estimate charges.
#[derive(Clone, Debug, Default)]
struct Model {
    series: BTreeMap<(String, String), ModelSeries>,
}

impl Model {
    fn point_count(&self) -> usize {
        self.series.values().map(|s| s.appended).sum()
    }

    /// The memtable's memory_bytes less its undo log.
    fn data_bytes(&self) -> usize {
        self.series
            .iter()
            .map(|((d, m), s)| SERIES_OVERHEAD_BYTES + d.len() + m.len() + s.appended_bytes)
            .sum()
    }

    /// A frozen memtable's memory_bytes: duplicates resolved.
    fn frozen_bytes(&self) -> usize {
        self.series
            .iter()
            .map(|((d, m), s)| {
                SERIES_OVERHEAD_BYTES
                    + d.len()
                    + m.len()
                    + s.points.values().map(estimated_point_bytes).sum::<usize>()
            })
            .sum()
    }

    fn keys(&self) -> Vec<(String, String, DataType)> {
        self.series
            .iter()
            .map(|((d, m), s)| (d.clone(), m.clone(), s.data_type))
            .collect()
    }

    fn query(&self, device: &str, measurement: &str, from: i64, to: i64) -> Vec<(i64, Value)> {
        let Some(s) = self
            .series
            .get(&(device.to_string(), measurement.to_string()))
        else {
            return Vec::new();
        };
        if from >= to {
            return Vec::new();
        }
        s.points
            .range(from..to)
            .map(|(t, v)| (*t, v.clone()))
            .collect()
    }

    fn last(&self, device: &str, measurement: &str) -> Option<(i64, Value)> {
        let s = self
            .series
            .get(&(device.to_string(), measurement.to_string()))?;
        s.points.last_key_value().map(|(t, v)| (*t, v.clone()))
    }

    /// The model's answer to insert_tablet.
    fn insert(&mut self, tablet: &Tablet, rows: &[u32]) -> Result<usize, MemTableError> {
        for (c, (m, &requested)) in tablet
            .measurements
            .iter()
            .zip(&tablet.data_types)
            .enumerate()
        {
            // A column with no non-null selected cell writes nothing and is not checked.
            if rows.iter().all(|&row| tablet.is_null(row as usize, c)) {
                continue;
            }
            if let Some(s) = self.series.get(&(tablet.device.clone(), m.clone())) {
                if s.data_type != requested {
                    return Err(MemTableError::TypeMismatch {
                        device: tablet.device.clone(),
                        measurement: m.clone(),
                        existing: s.data_type,
                        requested,
                    });
                }
            }
        }
        let mut written = 0;
        for &row in rows {
            let row = row as usize;
            for (c, m) in tablet.measurements.iter().enumerate() {
                if tablet.is_null(row, c) {
                    continue;
                }
                let v = tablet.columns[c].value(row);
                let s = self
                    .series
                    .entry((tablet.device.clone(), m.clone()))
                    .or_insert_with(|| ModelSeries {
                        data_type: tablet.data_types[c],
                        points: BTreeMap::new(),
                        appended: 0,
                        appended_bytes: 0,
                    });
                s.appended += 1;
                s.appended_bytes += estimated_point_bytes(&v);
                s.points.insert(tablet.timestamps[row], v);
                written += 1;
            }
        }
        Ok(written)
    }
}

fn build_tablet(device: usize, columns: &[(usize, DataType)], rows: &[(i64, [Cell; 3])]) -> Tablet {
    let schema: Vec<(&str, DataType)> =
        columns.iter().map(|&(m, t)| (MEASUREMENTS[m], t)).collect();
    let mut tablet = Tablet::new(DEVICES[device], &schema);
    for (timestamp, cells) in rows {
        let values = columns
            .iter()
            .zip(cells)
            .map(|(&(_, t), cell)| cell.map(|seed| value(t, seed)))
            .collect();
        tablet.push_row(*timestamp, values);
    }
    tablet
}

/// Every read of the live memtable agrees with the model.
fn check(mt: &MemTable, model: &Model, from: i64, to: i64) -> Result<(), TestCaseError> {
    prop_assert_eq!(mt.series_keys(), model.keys());
    prop_assert_eq!(mt.series_count(), model.series.len());
    prop_assert_eq!(mt.is_empty(), model.series.is_empty());
    prop_assert_eq!(mt.point_count(), model.point_count());
    prop_assert_eq!(mt.memory_bytes() - mt.undo_bytes(), model.data_bytes());
    prop_assert_eq!(
        mt.should_flush(),
        mt.memory_bytes() >= FLUSH_THRESHOLD_BYTES
    );
    for device in DEVICES {
        for measurement in MEASUREMENTS {
            let key = (device.to_string(), measurement.to_string());
            prop_assert_eq!(
                mt.series_type(device, measurement),
                model.series.get(&key).map(|s| s.data_type)
            );
            prop_assert_eq!(
                mt.query(device, measurement, i64::MIN, i64::MAX),
                model.query(device, measurement, i64::MIN, i64::MAX)
            );
            prop_assert_eq!(
                mt.query(device, measurement, from, to),
                model.query(device, measurement, from, to)
            );
            prop_assert_eq!(
                mt.last(device, measurement),
                model.last(device, measurement)
            );
        }
    }
    Ok(())
}

/// The frozen memtable holds exactly the model's points, sorted and deduplicated.
fn check_frozen(
    frozen: &FrozenMemTable,
    model: &Model,
    from: i64,
    to: i64,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(frozen.series_keys(), model.keys());
    prop_assert_eq!(frozen.point_count(), model.point_count());
    prop_assert_eq!(
        frozen.distinct_point_count(),
        model.series.values().map(|s| s.points.len()).sum::<usize>()
    );
    prop_assert_eq!(frozen.memory_bytes(), model.frozen_bytes());
    let mut expected = model.series.iter();
    for data in frozen.series() {
        let ((device, measurement), s) = expected.next().expect("frozen holds more series");
        prop_assert_eq!(
            (data.device, data.measurement),
            (device.as_str(), measurement.as_str())
        );
        prop_assert_eq!(data.data_type, s.data_type);
        prop_assert_eq!(data.values.data_type(), s.data_type);
        prop_assert_eq!(data.values.len(), data.timestamps.len());
        let points: Vec<(i64, Value)> = data
            .timestamps
            .iter()
            .enumerate()
            .map(|(i, &t)| (t, data.values.value(i)))
            .collect();
        let model_points: Vec<(i64, Value)> =
            s.points.iter().map(|(t, v)| (*t, v.clone())).collect();
        prop_assert_eq!(points, model_points);
    }
    prop_assert!(expected.next().is_none(), "frozen lacks series");
    for device in DEVICES {
        for measurement in MEASUREMENTS {
            prop_assert_eq!(
                frozen.query(device, measurement, from, to),
                model.query(device, measurement, from, to)
            );
            prop_assert_eq!(
                frozen.last(device, measurement),
                model.last(device, measurement)
            );
            prop_assert_eq!(
                frozen.series_type(device, measurement),
                model
                    .series
                    .get(&(device.to_string(), measurement.to_string()))
                    .map(|s| s.data_type)
            );
        }
    }
    Ok(())
}

/// A live mark with the model and the memory figure it must restore.
struct LiveMark {
    mark: Mark,
    model: Model,
    memory_bytes: usize,
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let config = MemTableConfig {
        flush_threshold_bytes: FLUSH_THRESHOLD_BYTES,
    };
    let mut mt = MemTable::new(config);
    let mut model = Model::default();
    let mut marks: Vec<LiveMark> = Vec::new();
    let (mut from, mut to) = (0, 8);
    for op in ops {
        match op {
            Op::Insert {
                device,
                columns,
                rows,
                selection,
                run,
            } => {
                let tablet = build_tablet(device, &columns, &rows);
                let n = rows.len() as u32;
                let selection: Vec<u32> = if run {
                    (selection.first().map_or(0, |r| r % n)..n).collect()
                } else {
                    selection.iter().map(|r| r % n).collect()
                };
                let before = (mt.memory_bytes(), mt.undo_entries());
                let expected = model.insert(&tablet, &selection);
                let actual = mt.insert_tablet(&tablet, &selection);
                prop_assert_eq!(&actual, &expected);
                if actual.is_err() {
                    prop_assert_eq!((mt.memory_bytes(), mt.undo_entries()), before);
                }
            }
            Op::Mark => marks.push(LiveMark {
                mark: mt.mark(),
                model: model.clone(),
                memory_bytes: mt.memory_bytes(),
            }),
            Op::Rollback(i) => {
                if marks.is_empty() {
                    continue;
                }
                let i = i % marks.len();
                mt.rollback(marks[i].mark);
                model = marks[i].model.clone();
                prop_assert_eq!(mt.memory_bytes(), marks[i].memory_bytes);
                // Later marks may be dead now; the model forgets them.
                marks.truncate(i + 1);
            }
            Op::ReleaseMarks => {
                mt.release_marks();
                marks.clear();
                prop_assert_eq!(mt.undo_bytes(), 0);
            }
            Op::DeleteSeries(d, m) => {
                let existed = model
                    .series
                    .remove(&(DEVICES[d].to_string(), MEASUREMENTS[m].to_string()))
                    .is_some();
                prop_assert_eq!(mt.delete_series(DEVICES[d], MEASUREMENTS[m]), existed);
                marks.clear();
            }
            Op::DeleteWhereDevice(d) => {
                let before = model.series.len();
                model.series.retain(|(device, _), _| device != DEVICES[d]);
                let dropped = mt.delete_where(|device, _| device == DEVICES[d]);
                prop_assert_eq!(dropped, before - model.series.len());
                marks.clear();
            }
            Op::DeleteWhereMeasurement(m) => {
                let before = model.series.len();
                model
                    .series
                    .retain(|(_, measurement), _| measurement != MEASUREMENTS[m]);
                let dropped = mt.delete_where(|_, measurement| measurement == MEASUREMENTS[m]);
                prop_assert_eq!(dropped, before - model.series.len());
                marks.clear();
            }
            Op::Query { from: f, to: t } => (from, to) = (f, t),
            Op::Freeze => {
                // The successor reserves room by the frozen series' sizes; it must behave
                // exactly like a new memtable.
                let next = mt.successor();
                let frozen = std::mem::replace(&mut mt, next).freeze();
                check_frozen(&frozen, &model, from, to)?;
                model = Model::default();
                marks.clear();
            }
        }
        check(&mt, &model, from, to)?;
    }
    // Rolling back to the oldest live mark still works at the end.
    if let Some(first) = marks.first() {
        mt.rollback(first.mark);
        prop_assert_eq!(mt.memory_bytes(), first.memory_bytes);
        check(&mt, &first.model, from, to)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn memtable_matches_the_model(ops in proptest::collection::vec(op_strategy(), 1..80)) {
        run(ops)?;
    }
}
