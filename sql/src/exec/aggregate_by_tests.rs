//! MAX_BY and MIN_BY over the in-memory backend: x in the row where y is greatest (least), the
//! earliest on a tie, NULL where x has no value there; `time` as x; in GROUP BY's windows
//! (sliding ones overlap), under a filter, aligned by device; and the refusals.

use common::DataType;

use super::backend_tests::strings;
use super::memory_backend::{one, run, Memory};

/// root.sg.d1: `d` DOUBLE, `i` INT32 and `t` TEXT; i is greatest (7) at 12 and again at 40.
fn device() -> Memory {
    let m = Memory::default();
    one(&m, "CREATE TIMESERIES root.sg.d1.i INT32");
    one(
        &m,
        "INSERT INTO root.sg.d1(time, d, i, t) VALUES (1, 1.5, 4, 'a'), (2, -6.0, -2, 'b'), \
         (12, 2.0, 7, 'c'), (35, NULL, 1, 'd'), (40, 3.0, 7, 'e')",
    );
    m
}

#[test]
fn x_is_read_in_the_earliest_row_where_y_is_greatest_or_least() {
    let m = device();
    let o = one(
        &m,
        "SELECT max_by(t, i), MAX_BY(time, i), min_by(t, i), max_by(d, i), count(i) \
         FROM root.sg.d1",
    );
    assert_eq!(
        o.columns,
        [
            "max_by(root.sg.d1.t, root.sg.d1.i)",
            "max_by(time, root.sg.d1.i)",
            "min_by(root.sg.d1.t, root.sg.d1.i)",
            "max_by(root.sg.d1.d, root.sg.d1.i)",
            "count(root.sg.d1.i)",
        ]
    );
    use DataType::{Double, Int64, Text};
    assert_eq!(o.types, [Text, Int64, Text, Double, Int64]);
    assert_eq!(strings(&o), [["c", "12", "b", "2.0", "5"]]);
    // The greatest y where x has no value: NULL, not the x of another row.
    one(&m, "INSERT INTO root.sg.d1(time, i) VALUES (50, 9)");
    let o = one(
        &m,
        "SELECT max_by(d, i), max_by(time, i) AS at FROM root.sg.d1",
    );
    assert_eq!(o.columns[1], "at");
    assert_eq!(strings(&o), [["null", "50"]]);
    // A DOUBLE y.
    let o = one(&m, "SELECT max_by(t, d), min_by(time, d) FROM root.sg.d1");
    assert_eq!(strings(&o), [["e", "2"]]);
}

#[test]
fn windows_filters_and_devices() {
    let m = device();
    let o = one(
        &m,
        "SELECT max_by(t, i) FROM root.sg.d1 GROUP BY ([0, 40), 10ms)",
    );
    assert_eq!(
        strings(&o),
        [["0", "a"], ["10", "c"], ["20", "null"], ["30", "d"]]
    );
    // Windows of 20 ms every 10 ms overlap: a row is judged in each window holding it.
    let o = one(
        &m,
        "SELECT max_by(t, i) FROM root.sg.d1 GROUP BY ([0, 40), 20ms, 10ms)",
    );
    assert_eq!(
        strings(&o),
        [["0", "c"], ["10", "c"], ["20", "d"], ["30", "d"]]
    );
    // Only the rows the filter keeps.
    let o = one(
        &m,
        "SELECT max_by(t, i) FROM root.sg.d1 WHERE i < 7 AND d > 0",
    );
    assert_eq!(strings(&o), [["a"]]);
    // Aligned by device: a column per function and the two names.
    one(
        &m,
        "INSERT INTO root.sg.d2(time, i, t) VALUES (5, 10, 'x'), (6, 20, 'y')",
    );
    let o = one(
        &m,
        "SELECT max_by(t, i), min_by(t, i) FROM root.sg.* ALIGN BY DEVICE",
    );
    assert_eq!(o.columns, ["Device", "max_by(t, i)", "min_by(t, i)"]);
    assert_eq!(
        strings(&o),
        [["root.sg.d1", "c", "b"], ["root.sg.d2", "y", "x"]]
    );
    // Aligned by time, a column per device holding both.
    let o = one(&m, "SELECT max_by(t, i) FROM root.sg.*");
    assert_eq!(
        o.columns,
        [
            "max_by(root.sg.d1.t, root.sg.d1.i)",
            "max_by(root.sg.d2.t, root.sg.d2.i)"
        ]
    );
}

#[test]
fn refusals() {
    let m = device();
    let e = run(&m, "SELECT max_by(i, t) FROM root.sg.d1").unwrap_err();
    assert_eq!(e.code(), 700, "{e}");
    assert!(e.to_string().contains("root.sg.d1.t is TEXT"), "{e}");
    let e = run(&m, "SELECT max_by(t, i) FROM root.sg.* GROUP BY LEVEL = 1").unwrap_err();
    assert_eq!(e.code(), 300, "{e}");
    for text in [
        "SELECT max_by(t) FROM root.sg.d1",
        "SELECT max_by(*, i) FROM root.sg.d1",
        "SELECT max_by(t, time) FROM root.sg.d1",
    ] {
        let parsed = crate::parse_script(text, crate::Position::START)
            .pop()
            .unwrap();
        assert!(parsed.result.is_err(), "{text}");
    }
}
