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

/// IoTDB's COUNT_IF example: s1 = 0 and s2 = 0 hold at 1, 3, 4 and 8–10 (s1 is NULL at 2),
/// s1 = 1 and s2 = 0 at 5–7.
fn runs() -> Memory {
    let m = Memory::default();
    one(
        &m,
        "INSERT INTO root.db.d1(time, s1, s2) VALUES (1, 0, 0), (2, NULL, 0), (3, 0, 0), \
         (4, 0, 0), (5, 1, 0), (6, 1, 0), (7, 1, 0), (8, 0, 0), (9, 0, 0), (10, 0, 0)",
    );
    // Points of another series never break a run: COUNT_IF reads its predicate's series.
    one(
        &m,
        "INSERT INTO root.db.d1(time, s3) VALUES (3, 1), (9, 1), (20, 1)",
    );
    m
}

#[test]
fn count_if_counts_the_runs_whose_length_keep_accepts() {
    let m = runs();
    let o = one(
        &m,
        "SELECT count_if(s1 = 0 & s2 = 0, 3), count_if(s1 = 1 AND s2 = 0, 3), \
         count_if(s1 = 0 && s2 = 0, 3, 'ignoreNull'='false'), count_if(s1 = 0, keep < 3) \
         FROM root.db.d1",
    );
    assert_eq!(
        o.columns,
        [
            "count_if((root.db.d1.s1 = 0) AND (root.db.d1.s2 = 0), 3)",
            "count_if((root.db.d1.s1 = 1) AND (root.db.d1.s2 = 0), 3)",
            "count_if((root.db.d1.s1 = 0) AND (root.db.d1.s2 = 0), 3)",
            "count_if(root.db.d1.s1 = 0, keep < 3)",
        ]
    );
    assert_eq!(o.types, [DataType::Int64; 4]);
    // A NULL is passed over (one run of 3 at 1–4), or ends the run with ignoreNull false
    // (runs of 1 and 2 then); s1 = 0 alone runs 1–4 (3 rows: s1 has no point at 2) and 8–10.
    assert_eq!(strings(&o), [["2", "1", "1", "0"]]);
    let o = one(
        &m,
        "SELECT count_if(s1 = 0 | s1 = 1, keep = 9), count_if(s2 = 0, keep >= 10) FROM root.db.d1",
    );
    assert_eq!(strings(&o), [["1", "1"]]);
    // In windows, each on its own; a window without rows counts 0.
    let o = one(
        &m,
        "SELECT count_if(s1 = 0 & s2 = 0, 3) FROM root.db.d1 GROUP BY ([1, 16), 5ms)",
    );
    assert_eq!(strings(&o), [["1", "1"], ["6", "1"], ["11", "0"]]);
    // Under a filter, only the rows it keeps (time 4 dropped: 1–3 is one run of 2).
    let o = one(
        &m,
        "SELECT count_if(s1 = 0, 2) FROM root.db.d1 WHERE time != 4",
    );
    assert_eq!(strings(&o), [["2"]]);
    // Aligned by device.
    let o = one(
        &m,
        "SELECT count_if(s1 = 1, 3) FROM root.db.* ALIGN BY DEVICE",
    );
    assert_eq!(o.columns, ["Device", "count_if(s1 = 1, 3)"]);
    assert_eq!(strings(&o), [["root.db.d1", "1"]]);
}

#[test]
fn count_if_refusals() {
    for text in [
        "SELECT count_if(s1 = 0) FROM root.db.d1",
        "SELECT count_if(3, 3) FROM root.db.d1",
        "SELECT count_if(s1 = 0, keep) FROM root.db.d1",
        "SELECT count_if(s1 = 0, 3, 'other'='true') FROM root.db.d1",
        "SELECT count_if(s1 = 0, 3, 'ignoreNull'='maybe') FROM root.db.d1",
    ] {
        let parsed = crate::parse_script(text, crate::Position::START)
            .pop()
            .unwrap();
        assert!(parsed.result.is_err(), "{text}");
    }
    let m = runs();
    let e = run(
        &m,
        "SELECT count_if(s1 = 0, 3) FROM root.db.* GROUP BY LEVEL = 1",
    )
    .unwrap_err();
    assert_eq!(e.code(), 300, "{e}");
}

#[test]
fn mode_is_the_most_frequent_value_the_earliest_on_a_tie() {
    let m = Memory::default();
    one(
        &m,
        "INSERT INTO root.m.d(time, v, t) VALUES (1, 2.5, 'a'), (2, 1.0, 'b'), (3, 2.5, 'b'), \
         (4, 1.0, 'a'), (5, 7.0, 'b'), (11, 3.0, NULL), (12, 4.0, NULL)",
    );
    let o = one(&m, "SELECT mode(v), MODE(t), count(v) FROM root.m.d");
    assert_eq!(
        o.columns,
        ["mode(root.m.d.v)", "mode(root.m.d.t)", "count(root.m.d.v)"]
    );
    assert_eq!(o.types, [DataType::Double, DataType::Text, DataType::Int64]);
    // v: 2.5 and 1.0 twice each, 2.5 first; t: 'b' three times.
    assert_eq!(strings(&o), [["2.5", "b", "7"]]);
    let o = one(
        &m,
        "SELECT mode(v), mode(t) FROM root.m.d GROUP BY ([0, 20), 10ms)",
    );
    assert_eq!(strings(&o), [["0", "2.5", "b"], ["10", "3.0", "null"]]);
    let o = one(
        &m,
        "SELECT mode(*) FROM root.m.d WHERE v < 2 ALIGN BY DEVICE",
    );
    assert_eq!(o.columns, ["Device", "mode(t)", "mode(v)"]);
    assert_eq!(strings(&o), [["root.m.d", "b", "1.0"]]);
}
