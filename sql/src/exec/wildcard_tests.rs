//! FROM with patterns and lists, and ALIGN BY DEVICE, over the in-memory backend: which series a
//! query reads and in which order, the shapes of raw, aggregate and LAST queries across
//! devices, LIMIT and OFFSET across devices, and the refusals.

use common::Value;

use super::memory_backend::{one, run, Memory};
use super::*;

/// root.sg.d1 (s1 at 1, 2; s2 at 2), root.sg.d2 (s1 at 3), root.sg.x.d3 (s1 at 4),
/// root.sg2.d1 (s1 at 5): every value is its time × 10, DOUBLE.
fn tree() -> Memory {
    let m = Memory::default();
    for insert in [
        "INSERT INTO root.sg.d1(time, s1, s2) VALUES (1, 10.0, NULL), (2, 20.0, 20.0)",
        "INSERT INTO root.sg.d2(time, s1) VALUES (3, 30.0)",
        "INSERT INTO root.sg.x.d3(time, s1) VALUES (4, 40.0)",
        "INSERT INTO root.sg2.d1(time, s1) VALUES (5, 50.0)",
    ] {
        one(&m, insert);
    }
    m
}

fn int(v: i64) -> Cell {
    Some(Value::Int64(v))
}

fn double(v: f64) -> Cell {
    Some(Value::Double(v))
}

fn text(v: &str) -> Cell {
    Some(Value::Text(v.to_string()))
}

#[test]
fn a_pattern_reads_the_series_it_matches_in_iotdb_order() {
    let m = tree();
    let o = one(&m, "SELECT s1 FROM root.sg.*");
    assert_eq!(o.columns, ["Time", "root.sg.d1.s1", "root.sg.d2.s1"]);
    assert_eq!(
        o.rows,
        vec![
            vec![int(1), double(10.0), None],
            vec![int(2), double(20.0), None],
            vec![int(3), None, double(30.0)],
        ]
    );
    let o = one(&m, "SELECT s1 FROM root.sg.**");
    assert_eq!(
        o.columns,
        ["Time", "root.sg.d1.s1", "root.sg.d2.s1", "root.sg.x.d3.s1"]
    );
    // `*` under `**`: every series below, never a neighbour database's.
    let o = one(&m, "SELECT * FROM root.sg.**");
    assert_eq!(o.columns.len(), 5, "{:?}", o.columns);
    assert!(!o.columns.iter().any(|c| c.starts_with("root.sg2")));
    // Names outside, FROM paths inside: d1.s1, d2.s1, then d1.s2 (d2 has no s2).
    let o = one(&m, "SELECT s1, s2 FROM root.sg.d1, root.sg.d2");
    assert_eq!(
        o.columns,
        ["Time", "root.sg.d1.s1", "root.sg.d2.s1", "root.sg.d1.s2"]
    );
    // Nothing matches: no column at all, not an error.
    let o = one(&m, "SELECT s9 FROM root.sg.*");
    assert_eq!(o.columns, ["Time"]);
    assert!(o.rows.is_empty());
}

#[test]
fn raw_queries_align_by_device_with_limits_across_devices() {
    let m = tree();
    let o = one(&m, "SELECT * FROM root.sg.* ALIGN BY DEVICE");
    assert_eq!(o.columns, ["Time", "Device", "s1", "s2"]);
    assert_eq!(
        o.rows,
        vec![
            vec![int(1), text("root.sg.d1"), double(10.0), None],
            vec![int(2), text("root.sg.d1"), double(20.0), double(20.0)],
            vec![int(3), text("root.sg.d2"), double(30.0), None],
        ]
    );
    // OFFSET and LIMIT count the whole result's rows, whatever device they are of.
    let o = one(
        &m,
        "SELECT s1 FROM root.sg.** LIMIT 2 OFFSET 1 ALIGN BY DEVICE",
    );
    let times: Vec<(Cell, Cell)> = o
        .rows
        .iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    assert_eq!(
        times,
        [(int(2), text("root.sg.d1")), (int(3), text("root.sg.d2"))]
    );
    // Newest first within each device; devices stay in ascending order.
    let o = one(
        &m,
        "SELECT s1 FROM root.sg.d1, root.sg.d2 ORDER BY TIME DESC ALIGN BY DEVICE",
    );
    let times: Vec<Cell> = o.rows.iter().map(|r| r[0].clone()).collect();
    assert_eq!(times, [int(2), int(1), int(3)]);
    // ALIGN BY TIME is the default shape.
    assert_eq!(
        one(&m, "SELECT s1 FROM root.sg.* ALIGN BY TIME"),
        one(&m, "SELECT s1 FROM root.sg.*")
    );
}

#[test]
fn a_column_with_two_types_across_devices_is_refused() {
    let m = tree();
    one(&m, "INSERT INTO root.sg.d4(time, s1) VALUES (1, 'text')");
    let e = run(&m, "SELECT s1 FROM root.sg.* ALIGN BY DEVICE").unwrap_err();
    assert_eq!(e.code(), 700, "{e}");
    assert!(e.to_string().contains("s1 is TEXT on root.sg.d4"), "{e}");
    let e = run(&m, "SELECT last_value(s1) FROM root.sg.* ALIGN BY DEVICE").unwrap_err();
    assert_eq!(e.code(), 700, "{e}");
    // Aligned by time, every series keeps its own column and type.
    let o = one(&m, "SELECT count(s1) FROM root.sg.* ALIGN BY DEVICE");
    assert_eq!(o.rows.len(), 3, "count is INT64 whatever the series' type");
}

#[test]
fn aggregates_over_patterns_by_time_and_by_device() {
    let m = tree();
    let o = one(&m, "SELECT count(s1), max_value(s1) FROM root.sg.*");
    assert_eq!(
        o.columns,
        [
            "count(root.sg.d1.s1)",
            "count(root.sg.d2.s1)",
            "max_value(root.sg.d1.s1)",
            "max_value(root.sg.d2.s1)"
        ]
    );
    assert_eq!(
        o.rows,
        vec![vec![int(2), int(1), double(20.0), double(30.0)]]
    );
    let o = one(
        &m,
        "SELECT count(s1), count(s2) FROM root.sg.** GROUP BY ([0, 4), 2ms) ALIGN BY DEVICE",
    );
    assert_eq!(o.columns, ["Time", "Device", "count(s1)", "count(s2)"]);
    assert_eq!(
        o.rows,
        vec![
            vec![int(0), text("root.sg.d1"), int(1), int(0)],
            vec![int(2), text("root.sg.d1"), int(1), int(1)],
            vec![int(0), text("root.sg.d2"), int(0), None],
            vec![int(2), text("root.sg.d2"), int(1), None],
            vec![int(0), text("root.sg.x.d3"), int(0), None],
            vec![int(2), text("root.sg.x.d3"), int(0), None],
        ]
    );
    assert_eq!(m.calls.lock().unwrap().raw, 0, "no raw point read");
    // Each query asked its devices' partials in one call, not one a device.
    assert_eq!(m.calls.lock().unwrap().aggregate, 2);
}

#[test]
fn last_over_patterns_with_a_lower_time_bound() {
    let m = tree();
    let o = one(&m, "SELECT LAST s1 FROM root.sg.**");
    let series: Vec<Cell> = o.rows.iter().map(|r| r[1].clone()).collect();
    assert_eq!(
        series,
        [
            text("root.sg.d1.s1"),
            text("root.sg.d2.s1"),
            text("root.sg.x.d3.s1")
        ]
    );
    let o = one(&m, "SELECT LAST * FROM root.sg.** WHERE time >= 3");
    let rows: Vec<(Cell, Cell)> = o
        .rows
        .iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            (int(3), text("root.sg.d2.s1")),
            (int(4), text("root.sg.x.d3.s1"))
        ]
    );
}

#[test]
fn an_alias_matches_under_a_pattern() {
    let m = Memory::default();
    one(&m, "CREATE TIMESERIES root.sg.d1.s1(temperature) DOUBLE");
    one(&m, "INSERT INTO root.sg.d1(time, s1) VALUES (5, 21.5)");
    let o = one(&m, "SELECT temperature FROM root.sg.*");
    assert_eq!(o.columns, ["Time", "root.sg.d1.temperature"]);
    assert_eq!(o.rows, vec![vec![int(5), double(21.5)]]);
}

#[test]
fn group_by_level_merges_the_series_that_agree_at_the_levels() {
    let m = tree();
    let o = one(
        &m,
        "SELECT count(s1), max_value(s1) FROM root.** GROUP BY LEVEL = 1",
    );
    assert_eq!(
        o.columns,
        [
            "count(root.sg.*.s1)",
            "count(root.sg.*.*.s1)",
            "count(root.sg2.*.s1)",
            "max_value(root.sg.*.s1)",
            "max_value(root.sg.*.*.s1)",
            "max_value(root.sg2.*.s1)"
        ]
    );
    assert_eq!(
        o.rows,
        vec![vec![
            int(3),
            int(1),
            int(1),
            double(30.0),
            double(40.0),
            double(50.0)
        ]]
    );
    let o = one(
        &m,
        "SELECT count(s1), avg(s1) FROM root.sg.* GROUP BY ([0, 4), 2ms), LEVEL = 0",
    );
    assert_eq!(
        o.columns,
        ["Time", "count(root.*.*.s1)", "avg(root.*.*.s1)"]
    );
    assert_eq!(
        o.rows,
        vec![
            vec![int(0), int(1), double(10.0)],
            vec![int(2), int(2), double(25.0)],
        ]
    );
    // Levels that name every node keep the whole path; a value filter still applies (one name
    // over two devices aligned by time must hold on both: no row here has both).
    let o = one(
        &m,
        "SELECT sum(s1) FROM root.sg.d1 WHERE s1 > 10 GROUP BY LEVEL = 1, 2",
    );
    assert_eq!(o.columns, ["sum(root.sg.d1.s1)"]);
    assert_eq!(o.rows, vec![vec![double(20.0)]]);
    let o = one(
        &m,
        "SELECT sum(s1) FROM root.sg.* WHERE s1 > 10 GROUP BY LEVEL = 1",
    );
    assert_eq!(o.rows, vec![vec![None]]);
    // Merged series of two types, where the function answers the series' values: 700.
    one(&m, "INSERT INTO root.sg.d4(time, s1) VALUES (1, 'text')");
    let e = run(
        &m,
        "SELECT first_value(s1) FROM root.sg.* GROUP BY LEVEL = 1",
    )
    .unwrap_err();
    assert_eq!(e.code(), 700, "{e}");
    let o = one(&m, "SELECT count(s1) FROM root.sg.* GROUP BY LEVEL = 1");
    assert_eq!(o.rows, vec![vec![int(4)]]);
}

#[test]
fn slimit_soffset_pick_columns_and_aggregates_take_order_limit_offset() {
    let m = tree();
    let o = one(&m, "SELECT s1 FROM root.sg.** SLIMIT 2 SOFFSET 1");
    assert_eq!(o.columns, ["Time", "root.sg.d2.s1", "root.sg.x.d3.s1"]);
    assert_eq!(
        one(&m, "SELECT * FROM root.sg.* SLIMIT 1 ALIGN BY DEVICE").columns,
        ["Time", "Device", "s1"]
    );
    let o = one(&m, "SELECT count(s1) FROM root.sg.** SOFFSET 2");
    assert_eq!(o.columns, ["count(root.sg.x.d3.s1)"]);
    let o = one(
        &m,
        "SELECT count(s1) FROM root.sg.d1 GROUP BY ([0, 8), 2ms) ORDER BY TIME DESC LIMIT 3 OFFSET 1",
    );
    let times: Vec<Cell> = o.rows.iter().map(|r| r[0].clone()).collect();
    assert_eq!(times, [int(4), int(2), int(0)]);
    // Aligned by device, newest first within each device; LIMIT over the whole result.
    let o = one(
        &m,
        "SELECT count(s1) FROM root.sg.* GROUP BY ([0, 4), 2ms) ORDER BY TIME DESC LIMIT 3 \
         ALIGN BY DEVICE",
    );
    let rows: Vec<(Cell, Cell)> = o
        .rows
        .iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            (int(2), text("root.sg.d1")),
            (int(0), text("root.sg.d1")),
            (int(2), text("root.sg.d2"))
        ]
    );
}

#[test]
fn having_keeps_the_windows_its_aggregations_pass() {
    let m = tree();
    let times = |o: &Outcome| -> Vec<Cell> { o.rows.iter().map(|r| r[0].clone()).collect() };
    let o = one(
        &m,
        "SELECT count(s1) FROM root.sg.d1 GROUP BY ([0, 6), 2ms) HAVING count(s1) >= 1",
    );
    assert_eq!(times(&o), [int(0), int(2)]);
    // A call that is not selected is NULL, so nothing passes.
    let o = one(
        &m,
        "SELECT count(s1) FROM root.sg.d1 GROUP BY ([0, 6), 2ms) HAVING sum(s1) > 0",
    );
    assert!(o.rows.is_empty());
    // Aligned by time over a pattern, on every device; aligned by device, on its own.
    let o = one(
        &m,
        "SELECT count(s1) FROM root.sg.* GROUP BY ([0, 4), 2ms) HAVING count(s1) > 0",
    );
    assert_eq!(times(&o), [int(2)]);
    let o = one(
        &m,
        "SELECT count(s1) FROM root.sg.** GROUP BY ([0, 4), 2ms) HAVING count(s1) > 0 \
         ORDER BY TIME DESC ALIGN BY DEVICE",
    );
    let rows: Vec<(Cell, Cell)> = o
        .rows
        .iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            (int(2), text("root.sg.d1")),
            (int(0), text("root.sg.d1")),
            (int(2), text("root.sg.d2"))
        ]
    );
    let o = one(
        &m,
        "SELECT count(s1), max_value(s1) FROM root.sg.d1 HAVING count(s1) > 1 AND max_value(s1) < 25",
    );
    assert_eq!(o.rows, vec![vec![int(2), double(20.0)]]);
    let e = run(
        &m,
        "SELECT count(s1), max_value(s1) FROM root.sg.* HAVING count(s1) > 1 AND max_value(s1) < 5",
    )
    .unwrap_err();
    assert_eq!(e.code(), 300, "{e}");
}
