//! One test per behaviour of the public API, on hand-written tablets.

use std::panic::{catch_unwind, AssertUnwindSafe};

use common::{DataType, TabletLimits, Value};
use memtable::{
    estimated_point_bytes, ConfigError, FrozenMemTable, MemTable, MemTableConfig, MemTableError,
    SERIES_OVERHEAD_BYTES, TEXT_VALUE_OVERHEAD_BYTES,
};

use crate::{all_rows, tablet};

const D1: &str = "root.sg.d1";
const D2: &str = "root.sg.d2";

fn memtable() -> MemTable {
    MemTable::new(MemTableConfig::default())
}

fn d(v: f64) -> Option<Value> {
    Some(Value::Double(v))
}

fn text(v: &str) -> Option<Value> {
    Some(Value::Text(v.to_string()))
}

/// Heap estimate of one series holding `points`.
fn series_bytes(device: &str, measurement: &str, points: &[Value]) -> usize {
    SERIES_OVERHEAD_BYTES
        + device.len()
        + measurement.len()
        + points.iter().map(estimated_point_bytes).sum::<usize>()
}

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn config_defaults_and_validation() {
    let config = MemTableConfig::default();
    assert_eq!(config.flush_threshold_bytes, 64 * 1024 * 1024);
    assert_eq!(config.validate(), Ok(()));
    let zero = MemTableConfig {
        flush_threshold_bytes: 0,
    };
    assert_eq!(zero.validate(), Err(ConfigError::FlushThresholdZero));
    assert_eq!(*MemTable::new(zero).config(), zero);
}

#[test]
fn memtable_types_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<MemTable>();
    assert_send_sync::<FrozenMemTable>();
}

#[test]
fn an_empty_memtable_holds_nothing() {
    let mt = memtable();
    assert!(mt.is_empty());
    assert_eq!(mt.point_count(), 0);
    assert_eq!(mt.memory_bytes(), 0);
    assert_eq!(mt.series_count(), 0);
    assert!(mt.series_keys().is_empty());
    assert!(!mt.should_flush());
    assert_eq!(mt.query(D1, "s1", i64::MIN, i64::MAX), vec![]);
    assert_eq!(mt.last(D1, "s1"), None);
    assert_eq!(mt.series_type(D1, "s1"), None);
}

#[test]
fn insert_in_order_then_read() {
    let mut mt = memtable();
    let t = tablet(
        D1,
        &[("s1", DataType::Double), ("s2", DataType::Int64)],
        &[
            (10, vec![d(1.0), Some(Value::Int64(-1))]),
            (20, vec![d(2.0), Some(Value::Int64(-2))]),
            (30, vec![d(3.0), Some(Value::Int64(-3))]),
        ],
    );
    t.validate(&TabletLimits::default()).unwrap();
    assert_eq!(mt.insert_tablet(&t, &all_rows(&t)), Ok(6));
    assert!(!mt.is_empty());
    assert_eq!(mt.point_count(), 6);
    assert_eq!(mt.series_count(), 2);
    assert_eq!(
        mt.query(D1, "s1", 10, 30),
        vec![(10, Value::Double(1.0)), (20, Value::Double(2.0))]
    );
    assert_eq!(mt.query(D1, "s1", 11, 20), vec![]);
    assert_eq!(mt.query(D1, "s1", 30, 10), vec![]);
    assert_eq!(mt.query(D1, "s2", 30, 31), vec![(30, Value::Int64(-3))]);
    assert_eq!(mt.query(D1, "nope", 0, 100), vec![]);
    assert_eq!(mt.query(D2, "s1", 0, 100), vec![]);
    assert_eq!(mt.last(D1, "s2"), Some((30, Value::Int64(-3))));
    assert_eq!(mt.series_type(D1, "s1"), Some(DataType::Double));
    assert_eq!(mt.series_type(D1, "s2"), Some(DataType::Int64));
    assert_eq!(mt.series_type(D2, "s2"), None);
    assert_eq!(
        mt.memory_bytes(),
        series_bytes(D1, "s1", &vec![Value::Double(0.0); 3])
            + series_bytes(D1, "s2", &vec![Value::Int64(0); 3])
    );
}

#[test]
fn selected_rows_in_any_order_with_repeats_and_last_write_wins() {
    let mut mt = memtable();
    let t = tablet(
        D1,
        &[("s1", DataType::Double)],
        &[
            (5, vec![d(0.0)]),
            (3, vec![d(1.0)]),
            (5, vec![d(2.0)]),
            (9, vec![d(3.0)]),
            (1, vec![d(4.0)]),
        ],
    );
    // Row 1 is not selected; row 2 comes before row 0 (same timestamp), so row 0 wins at t=5.
    // Row 3 is written twice.
    assert_eq!(mt.insert_tablet(&t, &[3, 2, 0, 4, 3]), Ok(5));
    assert_eq!(mt.point_count(), 5);
    assert_eq!(
        mt.query(D1, "s1", i64::MIN, i64::MAX),
        vec![
            (1, Value::Double(4.0)),
            (5, Value::Double(0.0)),
            (9, Value::Double(3.0)),
        ]
    );
    assert_eq!(mt.query(D1, "s1", 2, 9), vec![(5, Value::Double(0.0))]);
    assert_eq!(mt.last(D1, "s1"), Some((9, Value::Double(3.0))));

    // A later tablet overwrites, including at the greatest timestamp.
    let t2 = tablet(
        D1,
        &[("s1", DataType::Double)],
        &[(9, vec![d(7.0)]), (1, vec![d(8.0)])],
    );
    assert_eq!(mt.insert_tablet(&t2, &all_rows(&t2)), Ok(2));
    assert_eq!(mt.last(D1, "s1"), Some((9, Value::Double(7.0))));
    assert_eq!(
        mt.query(D1, "s1", 0, 10),
        vec![
            (1, Value::Double(8.0)),
            (5, Value::Double(0.0)),
            (9, Value::Double(7.0)),
        ]
    );
    // Duplicates count until freeze.
    assert_eq!(mt.point_count(), 7);
    assert_eq!(
        mt.memory_bytes(),
        series_bytes(D1, "s1", &vec![Value::Double(0.0); 7])
    );
    assert_eq!(mt.insert_tablet(&t2, &[]), Ok(0));
    assert_eq!(mt.point_count(), 7);
}

#[test]
fn null_cells_are_skipped_and_all_null_columns_create_no_series() {
    let mut mt = memtable();
    let t = tablet(
        D1,
        &[
            ("s1", DataType::Int32),
            ("s2", DataType::Boolean),
            ("s3", DataType::Float),
        ],
        &[
            (1, vec![Some(Value::Int32(1)), None, None]),
            (2, vec![None, None, Some(Value::Float(0.5))]),
            (3, vec![Some(Value::Int32(3)), None, None]),
        ],
    );
    assert!(t.is_null(1, 0) && t.is_null(0, 1));
    assert_eq!(mt.insert_tablet(&t, &all_rows(&t)), Ok(3));
    assert_eq!(
        mt.query(D1, "s1", 0, 10),
        vec![(1, Value::Int32(1)), (3, Value::Int32(3))]
    );
    assert_eq!(mt.series_type(D1, "s2"), None);
    // Selecting only rows where s1 is null leaves s1 untouched and still creates nothing for s2.
    assert_eq!(mt.insert_tablet(&t, &[1]), Ok(1));
    assert_eq!(mt.query(D1, "s3", 0, 10), vec![(2, Value::Float(0.5))]);
    assert_eq!(
        mt.series_keys(),
        vec![
            (D1.to_string(), "s1".to_string(), DataType::Int32),
            (D1.to_string(), "s3".to_string(), DataType::Float),
        ]
    );
    assert_eq!(mt.point_count(), 4);
}

#[test]
fn text_values_and_their_memory() {
    let mut mt = memtable();
    let t = tablet(
        D1,
        &[("s1", DataType::Text)],
        &[
            (2, vec![text("hello")]),
            (1, vec![text("")]),
            (2, vec![text("world!")]),
        ],
    );
    assert_eq!(mt.insert_tablet(&t, &all_rows(&t)), Ok(3));
    assert_eq!(
        mt.query(D1, "s1", 0, 3),
        vec![
            (1, Value::Text(String::new())),
            (2, Value::Text("world!".into()))
        ]
    );
    assert_eq!(mt.last(D1, "s1"), Some((2, Value::Text("world!".into()))));
    assert_eq!(
        mt.memory_bytes(),
        SERIES_OVERHEAD_BYTES + D1.len() + 2 + 3 * (8 + TEXT_VALUE_OVERHEAD_BYTES) + 5 + 6
    );
    let frozen = mt.freeze();
    assert_eq!(
        frozen.memory_bytes(),
        SERIES_OVERHEAD_BYTES + D1.len() + 2 + 2 * (8 + TEXT_VALUE_OVERHEAD_BYTES) + 6
    );
}

#[test]
fn type_mismatch_is_refused_before_anything_is_written() {
    let mut mt = memtable();
    let first = tablet(
        D1,
        &[("s1", DataType::Double), ("s2", DataType::Text)],
        &[(1, vec![d(1.0), text("a")])],
    );
    mt.insert_tablet(&first, &[0]).unwrap();
    let before = (mt.memory_bytes(), mt.point_count(), mt.series_keys());

    // s0 is new and s1 matches, but s2 differs: nothing at all is written.
    let bad = tablet(
        D1,
        &[
            ("s0", DataType::Int64),
            ("s1", DataType::Double),
            ("s2", DataType::Int32),
        ],
        &[(
            2,
            vec![Some(Value::Int64(1)), d(2.0), Some(Value::Int32(2))],
        )],
    );
    assert_eq!(
        mt.insert_tablet(&bad, &[0]),
        Err(MemTableError::TypeMismatch {
            device: D1.to_string(),
            measurement: "s2".to_string(),
            existing: DataType::Text,
            requested: DataType::Int32,
        })
    );
    // A column that writes nothing (no rows selected, or only nulls) is not checked: its
    // verdict must not depend on which series this memtable happens to hold.
    assert_eq!(mt.insert_tablet(&bad, &[]), Ok(0));
    assert_eq!(
        (mt.memory_bytes(), mt.point_count(), mt.series_keys()),
        before
    );
    assert_eq!(mt.query(D1, "s1", 0, 10), vec![(1, Value::Double(1.0))]);
    assert_eq!(mt.series_type(D1, "s0"), None);

    // The same measurement on another device is another series.
    let other = tablet(
        D2,
        &[("s2", DataType::Int32)],
        &[(1, vec![Some(Value::Int32(5))])],
    );
    assert_eq!(mt.insert_tablet(&other, &[0]), Ok(1));
    let err = mt.insert_tablet(&bad, &[0]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "series root.sg.d1.s2 holds TEXT values; cannot write INT32"
    );
}

#[test]
fn rollback_restores_contents_series_memory_and_counts() {
    let mut mt = memtable();
    let a = tablet(
        D1,
        &[("s1", DataType::Double)],
        &[(1, vec![d(1.0)]), (2, vec![d(2.0)])],
    );
    mt.insert_tablet(&a, &all_rows(&a)).unwrap();
    assert_eq!(
        mt.undo_entries(),
        0,
        "nothing is logged before the first mark"
    );
    let empty_undo_memory = mt.memory_bytes();

    let m1 = mt.mark();
    assert_eq!(mt.undo_entries(), 0, "a mark registers nothing");
    let at_m1 = (mt.memory_bytes(), mt.point_count(), mt.series_keys());
    // An out-of-order overwrite of s1, and two new series.
    let b = tablet(
        D1,
        &[("s1", DataType::Double), ("s2", DataType::Text)],
        &[(1, vec![d(9.0), text("x")])],
    );
    mt.insert_tablet(&b, &[0]).unwrap();
    let c = tablet(
        D2,
        &[("s1", DataType::Boolean)],
        &[(5, vec![Some(Value::Boolean(true))])],
    );
    mt.insert_tablet(&c, &[0]).unwrap();
    assert_eq!(mt.undo_entries(), 3);
    assert!(mt.undo_bytes() > 0);
    assert_eq!(
        mt.memory_bytes(),
        empty_undo_memory
            + mt.undo_bytes()
            + estimated_point_bytes(&Value::Double(9.0))
            + series_bytes(D1, "s2", &[Value::Text("x".into())])
            + series_bytes(D2, "s1", &[Value::Boolean(true)])
    );

    let m2 = mt.mark();
    let at_m2 = (mt.memory_bytes(), mt.point_count(), mt.series_keys());
    mt.insert_tablet(&a, &all_rows(&a)).unwrap();
    mt.insert_tablet(&c, &[0, 0]).unwrap();
    assert_eq!(mt.last(D2, "s1"), Some((5, Value::Boolean(true))));

    // Nested: back to m2, then again to m2, then to m1.
    mt.rollback(m2);
    assert_eq!(
        (mt.memory_bytes(), mt.point_count(), mt.series_keys()),
        at_m2
    );
    assert_eq!(
        mt.query(D1, "s1", 0, 10),
        vec![(1, Value::Double(9.0)), (2, Value::Double(2.0))]
    );
    mt.insert_tablet(&a, &[1]).unwrap();
    mt.rollback(m2);
    assert_eq!(
        (mt.memory_bytes(), mt.point_count(), mt.series_keys()),
        at_m2
    );
    mt.rollback(m1);
    assert_eq!(
        (mt.memory_bytes(), mt.point_count(), mt.series_keys()),
        at_m1
    );
    assert_eq!(
        mt.query(D1, "s1", 0, 10),
        vec![(1, Value::Double(1.0)), (2, Value::Double(2.0))]
    );
    assert_eq!(mt.last(D1, "s1"), Some((2, Value::Double(2.0))));
    assert_eq!(mt.series_type(D1, "s2"), None);
    assert_eq!(mt.undo_entries(), 0);

    // m1 stays live; a write then rollback again works and the series can be recreated with
    // another type, since it no longer exists.
    let d = tablet(
        D1,
        &[("s2", DataType::Int32)],
        &[(3, vec![Some(Value::Int32(3))])],
    );
    mt.insert_tablet(&d, &[0]).unwrap();
    assert_eq!(mt.series_type(D1, "s2"), Some(DataType::Int32));
    mt.rollback(m1);
    assert_eq!(
        (mt.memory_bytes(), mt.point_count(), mt.series_keys()),
        at_m1
    );

    mt.release_marks();
    assert_eq!(mt.undo_entries(), 0);
    assert_eq!(mt.memory_bytes(), empty_undo_memory);
}

#[test]
fn a_mark_taken_before_any_write_rolls_back_to_empty() {
    let mut mt = memtable();
    let m = mt.mark();
    let t = tablet(
        D1,
        &[("s1", DataType::Int64)],
        &[(1, vec![Some(Value::Int64(1))])],
    );
    mt.insert_tablet(&t, &[0]).unwrap();
    mt.rollback(m);
    assert!(mt.is_empty());
    assert_eq!((mt.memory_bytes(), mt.point_count()), (0, 0));
}

#[test]
fn rolling_back_to_a_dead_mark_panics_with_a_reason() {
    let t = tablet(D1, &[("s1", DataType::Double)], &[(1, vec![d(1.0)])]);

    // Killed by a rollback to an earlier mark followed by a write.
    let mut mt = memtable();
    let early = mt.mark();
    mt.insert_tablet(&t, &[0]).unwrap();
    let late = mt.mark();
    mt.insert_tablet(&t, &[0]).unwrap();
    mt.rollback(early);
    mt.insert_tablet(&t, &[0]).unwrap();
    let message = panic_message(|| mt.rollback(late));
    assert!(
        message.contains("rolled back to an earlier mark"),
        "{message}"
    );

    // Killed by a delete, even of nothing, and by release_marks.
    let mut mt = memtable();
    mt.insert_tablet(&t, &[0]).unwrap();
    let mark = mt.mark();
    assert!(!mt.delete_series(D2, "s1"));
    let message = panic_message(|| mt.rollback(mark));
    assert!(message.contains("delete_series"), "{message}");
    let mark = mt.mark();
    mt.release_marks();
    let message = panic_message(|| mt.rollback(mark));
    assert!(message.contains("release_marks"), "{message}");

    // Another memtable's mark.
    let other = memtable();
    let foreign = other.mark();
    let message = panic_message(|| mt.rollback(foreign));
    assert!(message.contains("another memtable"), "{message}");
}

#[test]
fn a_mark_taken_after_another_with_nothing_written_between_survives_rollback_to_it() {
    let t = tablet(D1, &[("s1", DataType::Double)], &[(1, vec![d(1.0)])]);
    let mut mt = memtable();
    let first = mt.mark();
    let same_state = mt.mark();
    mt.insert_tablet(&t, &[0]).unwrap();
    mt.rollback(first);
    mt.rollback(same_state);
    assert!(mt.is_empty());
}

#[test]
fn delete_series_and_delete_where() {
    let mut mt = memtable();
    let t1 = tablet(
        D1,
        &[("s1", DataType::Double), ("s2", DataType::Text)],
        &[(1, vec![d(1.0), text("abc")])],
    );
    let t2 = tablet(
        D2,
        &[("s1", DataType::Double), ("s2", DataType::Int32)],
        &[(1, vec![d(2.0), Some(Value::Int32(2))])],
    );
    mt.insert_tablet(&t1, &[0]).unwrap();
    mt.insert_tablet(&t2, &[0]).unwrap();
    assert_eq!(mt.series_count(), 4);

    assert!(mt.delete_series(D1, "s1"));
    assert!(!mt.delete_series(D1, "s1"));
    assert_eq!(mt.query(D1, "s1", 0, 10), vec![]);
    assert_eq!(mt.point_count(), 3);
    assert_eq!(
        mt.memory_bytes(),
        series_bytes(D1, "s2", &[Value::Text("abc".into())])
            + series_bytes(D2, "s1", &[Value::Double(0.0)])
            + series_bytes(D2, "s2", &[Value::Int32(0)])
    );
    // The other series still answer after ids moved.
    assert_eq!(mt.last(D1, "s2"), Some((1, Value::Text("abc".into()))));
    assert_eq!(mt.last(D2, "s2"), Some((1, Value::Int32(2))));

    assert_eq!(mt.delete_where(|_, m| m == "s2"), 2);
    assert_eq!(mt.delete_where(|_, m| m == "s2"), 0);
    assert_eq!(
        mt.series_keys(),
        vec![(D2.to_string(), "s1".to_string(), DataType::Double)]
    );
    assert_eq!(
        mt.memory_bytes(),
        series_bytes(D2, "s1", &[Value::Double(0.0)])
    );
    assert_eq!(mt.delete_where(|device, _| device == D2), 1);
    assert!(mt.is_empty());
    assert_eq!((mt.memory_bytes(), mt.point_count()), (0, 0));

    // A deleted series may come back with another type.
    let t3 = tablet(
        D2,
        &[("s1", DataType::Boolean)],
        &[(1, vec![Some(Value::Boolean(false))])],
    );
    assert_eq!(mt.insert_tablet(&t3, &[0]), Ok(1));
}

#[test]
fn should_flush_at_the_threshold() {
    let t = tablet(
        D1,
        &[("s1", DataType::Double)],
        &[(1, vec![d(1.0)]), (2, vec![d(2.0)])],
    );
    let one_point = series_bytes(D1, "s1", &[Value::Double(0.0)]);
    let mut mt = MemTable::new(MemTableConfig {
        flush_threshold_bytes: one_point + 16,
    });
    mt.insert_tablet(&t, &[0]).unwrap();
    assert!(!mt.should_flush());
    mt.insert_tablet(&t, &[1]).unwrap();
    assert_eq!(mt.memory_bytes(), one_point + 16);
    assert!(mt.should_flush());
}

#[test]
fn freeze_sorts_deduplicates_and_answers_reads() {
    let mut mt = memtable();
    let t = tablet(
        D2,
        &[("b", DataType::Int64), ("a", DataType::Double)],
        &[
            (30, vec![Some(Value::Int64(3)), d(3.0)]),
            (10, vec![Some(Value::Int64(1)), None]),
            (30, vec![Some(Value::Int64(33)), d(33.0)]),
            (20, vec![Some(Value::Int64(2)), d(2.0)]),
        ],
    );
    mt.insert_tablet(&t, &all_rows(&t)).unwrap();
    let in_order = tablet(
        D1,
        &[("z", DataType::Text)],
        &[(1, vec![text("p")]), (2, vec![text("q")])],
    );
    mt.insert_tablet(&in_order, &all_rows(&in_order)).unwrap();
    let _mark = mt.mark();
    mt.insert_tablet(&in_order, &[1]).unwrap();
    assert_eq!(mt.point_count(), 10);

    let frozen = mt.freeze();
    assert_eq!(frozen.point_count(), 10);
    assert_eq!(frozen.distinct_point_count(), 7);
    assert_eq!(frozen.series_count(), 3);
    assert!(!frozen.is_empty());
    let series: Vec<_> = frozen.series().collect();
    let names: Vec<_> = series
        .iter()
        .map(|s| (s.device, s.measurement, s.data_type))
        .collect();
    assert_eq!(
        names,
        vec![
            (D1, "z", DataType::Text),
            (D2, "a", DataType::Double),
            (D2, "b", DataType::Int64),
        ]
    );
    assert_eq!(series[0].timestamps, &[1, 2]);
    assert_eq!(series[1].timestamps, &[20, 30]);
    assert_eq!(series[1].values, &common::Column::Double(vec![2.0, 33.0]));
    assert_eq!(series[2].timestamps, &[10, 20, 30]);
    assert_eq!(series[2].values, &common::Column::Int64(vec![1, 2, 33]));
    assert_eq!(
        frozen.memory_bytes(),
        series_bytes(D1, "z", &[Value::Text("p".into()), Value::Text("q".into())])
            + series_bytes(D2, "a", &vec![Value::Double(0.0); 2])
            + series_bytes(D2, "b", &vec![Value::Int64(0); 3])
    );

    assert_eq!(
        frozen.query(D2, "b", 15, 31),
        vec![(20, Value::Int64(2)), (30, Value::Int64(33))]
    );
    assert_eq!(frozen.query(D2, "b", 31, 15), vec![]);
    assert_eq!(frozen.query(D2, "c", 0, 100), vec![]);
    assert_eq!(frozen.last(D2, "a"), Some((30, Value::Double(33.0))));
    assert_eq!(frozen.last(D1, "a"), None);
    assert_eq!(frozen.series_type(D1, "z"), Some(DataType::Text));
    assert_eq!(frozen.series_type(D1, "y"), None);
    assert_eq!(
        frozen.series_keys(),
        names
            .iter()
            .map(|(d, m, t)| (d.to_string(), m.to_string(), *t))
            .collect::<Vec<_>>()
    );
}

#[test]
fn freezing_an_empty_memtable() {
    let frozen = memtable().freeze();
    assert!(frozen.is_empty());
    assert_eq!(frozen.series().count(), 0);
    assert_eq!((frozen.memory_bytes(), frozen.point_count()), (0, 0));
}

#[test]
fn out_of_range_rows_panic_before_writing() {
    let mut mt = memtable();
    let t = tablet(D1, &[("s1", DataType::Double)], &[(1, vec![d(1.0)])]);
    let message = panic_message(|| {
        mt.insert_tablet(&t, &[0, 1]).unwrap();
    });
    assert!(message.contains("row index 1 out of range"), "{message}");
    assert!(mt.is_empty());
}
