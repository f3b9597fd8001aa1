//! Aggregate queries over the in-memory backend: values and types of every function, GROUP BY's
//! windows (empty ones included, cut by a WHERE range), the refusals, and that the executor asks
//! for partials once and never for raw points.

use common::{DataType, Value};

use super::memory_backend::{one, ready, run, Calls, Memory};
use super::*;
use crate::{parse_script, AggregateFunction, GroupByTime, Position, TimeRange};

/// root.sg.d1: `d` DOUBLE at 1, 2, 12; `i` INT32 and `t` TEXT at 1, 2, 12, 35.
fn device() -> Memory {
    let m = Memory::default();
    one(&m, "CREATE TIMESERIES root.sg.d1.i INT32");
    one(
        &m,
        "INSERT INTO root.sg.d1(time, d, i, t) VALUES (1, 1.5, 4, 'a'), (2, -6.0, -2, 'b'), \
         (12, 2.0, 7, 'c'), (35, NULL, 1, 'd')",
    );
    *m.calls.lock().unwrap() = Calls::default();
    m
}

fn int(v: i64) -> Cell {
    Some(Value::Int64(v))
}

fn double(v: f64) -> Cell {
    Some(Value::Double(v))
}

#[test]
fn every_function_over_the_whole_range_is_one_row_without_time() {
    let m = device();
    let o = one(
        &m,
        "SELECT count(d), sum(d), avg(d), min_value(d), max_value(d), extreme(d), \
         first_value(d), last_value(d), min_time(d), max_time(d) FROM root.sg.d1",
    );
    let names = [
        "count",
        "sum",
        "avg",
        "min_value",
        "max_value",
        "extreme",
        "first_value",
        "last_value",
        "min_time",
        "max_time",
    ];
    let columns: Vec<String> = names.iter().map(|f| format!("{f}(root.sg.d1.d)")).collect();
    assert_eq!(o.columns, columns);
    assert!(!o.has_time());
    use DataType::{Double, Int64};
    assert_eq!(
        o.types,
        [Int64, Double, Double, Double, Double, Double, Double, Double, Int64, Int64]
    );
    assert_eq!(
        o.rows,
        vec![vec![
            int(3),
            double(-2.5),
            double(-2.5 / 3.0),
            double(-6.0),
            double(2.0),
            double(-6.0),
            double(1.5),
            double(2.0),
            int(1),
            int(12),
        ]]
    );
    assert_eq!(
        *m.calls.lock().unwrap(),
        Calls {
            raw: 0,
            aggregate: 1
        },
        "one call for every series, and no raw point"
    );
}

#[test]
fn group_by_gives_a_row_per_window_with_empty_ones() {
    let m = device();
    let o = one(
        &m,
        "SELECT count(i), sum(i), max_value(i), first_value(t), min_time(i) FROM root.sg.d1 \
         GROUP BY ([0, 40), 10ms)",
    );
    assert_eq!(
        o.columns,
        [
            "Time",
            "count(root.sg.d1.i)",
            "sum(root.sg.d1.i)",
            "max_value(root.sg.d1.i)",
            "first_value(root.sg.d1.t)",
            "min_time(root.sg.d1.i)"
        ]
    );
    use DataType::{Double, Int32, Int64, Text};
    assert_eq!(o.types, [Int64, Int64, Double, Int32, Text, Int64]);
    let text = |s: &str| Some(Value::Text(s.into()));
    let i32 = |v: i32| Some(Value::Int32(v));
    assert_eq!(
        o.rows,
        vec![
            vec![int(0), int(2), double(2.0), i32(4), text("a"), int(1)],
            vec![int(10), int(1), double(7.0), i32(7), text("c"), int(12)],
            vec![int(20), int(0), None, None, None, None],
            vec![int(30), int(1), double(1.0), i32(1), text("d"), int(35)],
        ]
    );
    assert_eq!(m.calls.lock().unwrap().aggregate, 1);
    // The last window may be shorter; windows past the points are empty rows.
    let o = one(
        &m,
        "SELECT count(i) FROM root.sg.d1 GROUP BY ([-10, 15), 10ms)",
    );
    assert_eq!(
        o.rows,
        vec![
            vec![int(-10), int(0)],
            vec![int(0), int(2)],
            vec![int(10), int(1)]
        ]
    );
}

#[test]
fn where_narrows_the_points_and_windows_keep_group_by_boundaries() {
    let m = device();
    // WHERE starts inside the first window: only its points from 2 on count there.
    let o = one(
        &m,
        "SELECT count(i), min_time(i) FROM root.sg.d1 WHERE time >= 2 AND time < 30 \
         GROUP BY ([0, 40), 10ms)",
    );
    assert_eq!(
        o.rows,
        vec![
            vec![int(0), int(1), int(2)],
            vec![int(10), int(1), int(12)],
            vec![int(20), int(0), None],
            vec![int(30), int(0), None],
        ]
    );
    // One call: the WHERE range is the windows' visible range.
    assert_eq!(m.calls.lock().unwrap().aggregate, 1);
    // Nothing in common: every window empty, nothing asked.
    *m.calls.lock().unwrap() = Calls::default();
    let o = one(
        &m,
        "SELECT count(i), avg(i) FROM root.sg.d1 WHERE time >= 100 GROUP BY ([0, 20), 10ms)",
    );
    assert_eq!(
        o.rows,
        vec![vec![int(0), int(0), None], vec![int(10), int(0), None]]
    );
    // Without GROUP BY, an empty WHERE range is one row of COUNT 0.
    let o = one(
        &m,
        "SELECT count(i), avg(i) FROM root.sg.d1 WHERE time > 5 AND time < 3",
    );
    assert_eq!(o.rows, vec![vec![int(0), None]]);
    assert_eq!(m.calls.lock().unwrap().aggregate, 0);
    let o = one(
        &m,
        "SELECT count(i) FROM root.sg.d1 WHERE time > 1 AND time <= 12",
    );
    assert_eq!(o.rows, vec![vec![int(2)]]);
}

#[test]
fn star_is_every_series_and_missing_series_are_left_out() {
    let m = device();
    let o = one(&m, "SELECT count(*), last_value(*) FROM root.sg.d1");
    assert_eq!(
        o.columns,
        [
            "count(root.sg.d1.d)",
            "count(root.sg.d1.i)",
            "count(root.sg.d1.t)",
            "last_value(root.sg.d1.d)",
            "last_value(root.sg.d1.i)",
            "last_value(root.sg.d1.t)"
        ]
    );
    assert_eq!(
        o.rows,
        vec![vec![
            int(3),
            int(4),
            int(4),
            double(2.0),
            Some(Value::Int32(1)),
            Some(Value::Text("d".into()))
        ]]
    );
    assert_eq!(
        m.calls.lock().unwrap().aggregate,
        1,
        "each series asked once"
    );
    let o = one(&m, "SELECT count(i), count(nope) FROM root.sg.d1");
    assert_eq!(o.columns, ["count(root.sg.d1.i)"]);
    // Nothing that exists: an empty result, as COUNT always answered.
    for text in [
        "SELECT count(nope) FROM root.sg.d1",
        "SELECT count(*) FROM root.sg.nope",
        "SELECT avg(*) FROM root.sg.nope GROUP BY ([0, 10), 1ms)",
    ] {
        let o = one(&m, text);
        assert!(o.columns.is_empty() && o.rows.is_empty(), "{text}: {o:?}");
        assert_eq!(o.kind, OutcomeKind::Query);
    }
}

#[test]
fn an_alias_names_its_series() {
    let m = Memory::default();
    one(&m, "CREATE TIMESERIES root.sg.d1.s1(temperature) DOUBLE");
    one(
        &m,
        "INSERT INTO root.sg.d1(time, s1) VALUES (5, 21.5), (6, 22.5)",
    );
    let o = one(&m, "SELECT avg(temperature), count(s1) FROM root.sg.d1");
    assert_eq!(
        o.columns,
        ["avg(root.sg.d1.temperature)", "count(root.sg.d1.s1)"]
    );
    assert_eq!(o.rows, vec![vec![double(22.0), int(2)]]);
    assert_eq!(
        m.calls.lock().unwrap().aggregate,
        1,
        "one series asked once"
    );
}

#[test]
fn numeric_functions_refuse_text_and_the_others_take_every_type() {
    let m = device();
    one(&m, "CREATE TIMESERIES root.sg.d1.b BOOLEAN");
    one(&m, "CREATE TIMESERIES root.sg.d1.day DATE");
    one(
        &m,
        "INSERT INTO root.sg.d1(time, b, day) VALUES (1, true, '2024-01-05'), \
         (2, false, '2023-12-31')",
    );
    for (text, message) in [
        (
            "SELECT avg(t) FROM root.sg.d1",
            "avg(root.sg.d1.t): AVG takes a series of INT32, INT64, FLOAT or DOUBLE, and \
             root.sg.d1.t is TEXT",
        ),
        (
            "SELECT count(i), sum(*) FROM root.sg.d1",
            "sum(root.sg.d1.b): SUM takes a series of INT32, INT64, FLOAT or DOUBLE, and \
             root.sg.d1.b is BOOLEAN",
        ),
        (
            "SELECT min_value(t) FROM root.sg.d1 GROUP BY ([0, 10), 1ms)",
            "min_value(root.sg.d1.t): MIN_VALUE takes a series of INT32, INT64, FLOAT, DOUBLE, \
             TIMESTAMP or DATE, and root.sg.d1.t is TEXT",
        ),
        (
            "SELECT max_value(t) FROM root.sg.d1",
            "max_value(root.sg.d1.t): MAX_VALUE",
        ),
        (
            "SELECT extreme(day) FROM root.sg.d1",
            "extreme(root.sg.d1.day): EXTREME",
        ),
    ] {
        let e = run(&m, text).expect_err(text);
        assert_eq!(e.code(), 700, "{text}: {e}");
        assert!(e.to_string().starts_with(message), "{text}: {e}");
    }
    assert_eq!(
        m.calls.lock().unwrap().aggregate,
        0,
        "refused before asking"
    );
    let o = one(
        &m,
        "SELECT count(t), first_value(t), last_value(b), min_time(t), max_time(t), \
         min_value(day), max_value(day) FROM root.sg.d1",
    );
    use DataType::{Boolean, Date, Int64, Text};
    assert_eq!(o.types, [Int64, Text, Boolean, Int64, Int64, Date, Date]);
    assert_eq!(
        o.rows,
        vec![vec![
            int(4),
            Some(Value::Text("a".into())),
            Some(Value::Boolean(false)),
            int(1),
            int(35),
            Some(Value::Date(20231231)),
            Some(Value::Date(20240105)),
        ]]
    );
}

#[test]
fn windows_are_bounded_by_the_result_rows_and_partials_by_the_budget() {
    let m = device();
    let e = run(
        &m,
        "SELECT count(i) FROM root.sg.d1 GROUP BY ([0, 2000001), 2ms)",
    )
    .unwrap_err();
    assert_eq!(e.code(), 700);
    assert!(
        e.to_string()
            .contains("makes 1000001 windows, more than the 1000000 rows a query may return"),
        "{e}"
    );
    // Within the row bound but not the result's memory: refused before anything is asked.
    let budget = ResultBudget::new(1 << 20, 1 << 30);
    let mut charge = budget.charge();
    let statement = parse_script(
        "SELECT count(*) FROM root.sg.d1 GROUP BY ([0, 1000000), 1ms)",
        Position::START,
    )
    .pop()
    .unwrap()
    .result
    .unwrap();
    let e = ready(execute_charged(&m, &statement, &mut charge)).unwrap_err();
    assert!(e.to_string().contains("query_result_bytes_max"), "{e}");
    assert_eq!(m.calls.lock().unwrap().aggregate, 0);
    drop(charge);
    assert_eq!(budget.used(), 0);
    // A result that fits is charged exactly its rows once built.
    let mut charge = budget.charge();
    let statement = parse_script(
        "SELECT count(*) FROM root.sg.d1 GROUP BY ([0, 100), 1ms)",
        Position::START,
    )
    .pop()
    .unwrap()
    .result
    .unwrap();
    let o = ready(execute_charged(&m, &statement, &mut charge)).unwrap();
    assert_eq!(o.rows.len(), 100);
    assert_eq!(charge.bytes(), outcome_bytes(&o));
}

#[test]
fn aggregations_by_path_pair_each_path_with_its_function() {
    let m = device();
    let request = PathAggregation {
        paths: vec![
            "root.sg.d1.d".into(),
            "root.sg.d1.i".into(),
            "root.sg.d1.nope".into(),
        ],
        functions: vec![
            AggregateFunction::Sum,
            AggregateFunction::MaxTime,
            AggregateFunction::Count,
        ],
        range: TimeRange { from: 0, to: 20 },
        group_by: None,
    };
    let o = ready(aggregate_paths(
        &m,
        &request,
        &mut ResultCharge::unbounded(),
    ))
    .unwrap();
    assert_eq!(o.columns, ["sum(root.sg.d1.d)", "max_time(root.sg.d1.i)"]);
    assert_eq!(o.rows, vec![vec![double(-2.5), int(12)]]);
    let windows = PathAggregation {
        group_by: Some(GroupByTime {
            start: 0,
            end: 20,
            interval_ms: 10,
            step_ms: 10,
            interval_months: 0,
            step_months: 0,
            left_open: false,
        }),
        ..request.clone()
    };
    let o = ready(aggregate_paths(
        &m,
        &windows,
        &mut ResultCharge::unbounded(),
    ))
    .unwrap();
    assert_eq!(o.rows.len(), 2);
    assert_eq!(o.rows[1], vec![int(10), double(2.0), int(12)]);
    let uneven = PathAggregation {
        functions: vec![AggregateFunction::Count],
        ..request
    };
    let e = ready(aggregate_paths(&m, &uneven, &mut ResultCharge::unbounded())).unwrap_err();
    assert_eq!(e.code(), 700);
}

#[test]
fn left_open_windows_hold_their_right_end_and_are_labelled_by_it() {
    let m = device();
    // i at 1, 2, 12, 35; a point at a window's right end belongs to it.
    one(&m, "INSERT INTO root.sg.d1(time, i) VALUES (20, 9)");
    let o = one(
        &m,
        "SELECT count(i) FROM root.sg.d1 GROUP BY ((0, 35], 10ms)",
    );
    assert_eq!(o.columns, ["Time", "count(root.sg.d1.i)"]);
    assert_eq!(
        o.rows,
        vec![
            vec![int(10), int(2)],
            vec![int(20), int(2)],
            vec![int(30), int(0)],
            vec![int(35), int(1)],
        ]
    );
}

#[test]
fn deviations_and_variances_ask_for_the_second_moment() {
    let m = device();
    let o = one(
        &m,
        "SELECT stddev(d), stddev_pop(d), stddev_samp(d), variance(d), var_pop(d), \
         var_samp(d) FROM root.sg.d1",
    );
    let names = [
        "stddev",
        "stddev_pop",
        "stddev_samp",
        "variance",
        "var_pop",
        "var_samp",
    ];
    let columns: Vec<String> = names.iter().map(|f| format!("{f}(root.sg.d1.d)")).collect();
    assert_eq!(o.columns, columns);
    assert_eq!(o.types, [DataType::Double; 6]);
    // 1.5, -6.0, 2.0, two-pass.
    let xs = [1.5, -6.0, 2.0];
    let mean = xs.iter().sum::<f64>() / 3.0;
    let m2: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
    let want = [
        (m2 / 2.0).sqrt(),
        (m2 / 3.0).sqrt(),
        (m2 / 2.0).sqrt(),
        m2 / 2.0,
        m2 / 3.0,
        m2 / 2.0,
    ];
    for (cell, want) in o.rows[0].iter().zip(want) {
        let Some(Value::Double(got)) = cell else {
            panic!("{cell:?}");
        };
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }
    // One point in a window: no sample deviation, a population one of 0.
    let o = one(
        &m,
        "SELECT stddev(i), var_pop(i) FROM root.sg.d1 GROUP BY ([30, 40), 10ms)",
    );
    assert_eq!(
        o.rows,
        vec![vec![Some(Value::Int64(30)), None, double(0.0)]]
    );
    // Numbers only, as IoTDB.
    let e = run(&m, "SELECT stddev(t) FROM root.sg.d1").unwrap_err();
    assert!(
        e.to_string().contains("STDDEV takes a series of INT32"),
        "{e}"
    );
}

#[test]
fn windows_slide_by_their_step_overlapping_or_apart() {
    let m = device();
    // i: 4 at 1, -2 at 2, 7 at 12, 1 at 35. Windows of 20 every 10, the last ones cut at 40.
    let o = one(
        &m,
        "SELECT count(i), sum(i) FROM root.sg.d1 GROUP BY ([0, 40), 20ms, 10ms)",
    );
    let rows: Vec<(Cell, Cell, Cell)> = o
        .rows
        .iter()
        .map(|r| (r[0].clone(), r[1].clone(), r[2].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            (int(0), int(3), double(9.0)),
            (int(10), int(1), double(7.0)),
            (int(20), int(1), double(1.0)),
            (int(30), int(1), double(1.0)),
        ]
    );
    // Windows of 5 every 20: the points between are in none.
    let o = one(
        &m,
        "SELECT count(i) FROM root.sg.d1 GROUP BY ([0, 40), 5ms, 20ms)",
    );
    assert_eq!(o.rows, vec![vec![int(0), int(2)], vec![int(20), int(0)]]);
    // Left-open: (0, 20], (10, 30], … labelled with their right ends, the last cut at 40.
    let o = one(
        &m,
        "SELECT count(i) FROM root.sg.d1 GROUP BY ((0, 40], 20ms, 10ms)",
    );
    assert_eq!(
        o.rows,
        vec![
            vec![int(20), int(3)],
            vec![int(30), int(1)],
            vec![int(40), int(1)],
            vec![int(40), int(1)],
        ]
    );
    // One backend call whatever the step.
    assert_eq!(m.calls.lock().unwrap().aggregate, 3);
    // An interval and a step whose common divisor cuts too many units: refused, named.
    let e = run(
        &m,
        "SELECT count(i) FROM root.sg.d1 GROUP BY ([0, 10000000), 1000001ms, 1000000ms)",
    )
    .unwrap_err();
    assert!(e.to_string().contains("units of 1ms"), "{e}");
}

#[test]
fn time_duration_is_the_span_of_any_series_timestamps() {
    let m = device();
    let o = one(
        &m,
        "SELECT time_duration(i), time_duration(t), time_duration(d) FROM root.sg.d1 \
         GROUP BY ([0, 40), 20ms)",
    );
    assert_eq!(o.columns[1], "time_duration(root.sg.d1.i)");
    assert_eq!(o.types[1..], [DataType::Int64; 3]);
    // i and t at 1, 2, 12 | 35; d at 1, 2, 12 | none.
    assert_eq!(
        o.rows,
        vec![
            vec![int(0), int(11), int(11), int(11)],
            vec![int(20), int(0), int(0), None],
        ]
    );
}

#[test]
fn as_names_the_column_of_one_series() {
    let m = device();
    let o = one(&m, "SELECT d AS temperature, i FROM root.sg.d1");
    assert_eq!(o.columns, ["Time", "temperature", "root.sg.d1.i"]);
    assert_eq!(o.rows[0][1], double(1.5));
    let o = one(
        &m,
        "SELECT d AS temperature FROM root.sg.d1 ALIGN BY DEVICE",
    );
    assert_eq!(o.columns, ["Time", "Device", "temperature"]);
    let o = one(&m, "SELECT count(d) AS n, max_value(i) FROM root.sg.d1");
    assert_eq!(o.columns, ["n", "max_value(root.sg.d1.i)"]);
    assert_eq!(o.rows, vec![vec![int(3), Some(Value::Int32(7))]]);
    // An alias names one series: not two devices' d.
    one(&m, "INSERT INTO root.sg.d2(time, d) VALUES (1, 1.0)");
    for text in [
        "SELECT d AS x FROM root.sg.*",
        "SELECT count(d) AS x FROM root.sg.*",
    ] {
        let e = run(&m, text).unwrap_err();
        assert!(e.to_string().contains("alias x names 2"), "{text}: {e}");
    }
    let parsed = parse_script("SELECT last d AS x FROM root.sg.d1", Position::START);
    let e = parsed[0].result.clone().unwrap_err();
    assert!(
        e.unsupported && e.message.contains("AS in a LAST query"),
        "{e:?}"
    );
    // Aligned by device an alias names the one column of its measurement on every device.
    let o = one(
        &m,
        "SELECT count(d) AS x, max_value(d) FROM root.sg.* ALIGN BY DEVICE",
    );
    assert_eq!(o.columns, ["Device", "x", "max_value(d)"]);
    let device = |d: &str| Some(Value::Text(format!("root.sg.{d}")));
    assert_eq!(
        o.rows,
        vec![
            vec![device("d1"), int(3), double(2.0)],
            vec![device("d2"), int(1), double(1.0)],
        ]
    );
    // ... but not the columns of several measurements, nor a level's or tags' merge.
    for text in [
        "SELECT count(*) AS x FROM root.sg.* ALIGN BY DEVICE",
        "SELECT count(d) AS x FROM root.sg.* GROUP BY LEVEL = 1",
    ] {
        let e = run(&m, text).unwrap_err();
        assert!(
            e.to_string().contains("alias x names") || e.to_string().contains("not supported yet"),
            "{text}: {e}"
        );
    }
}

#[test]
fn group_by_tags_merges_the_series_with_the_same_tag_values() {
    let m = Memory::default();
    for (device, tags) in [
        ("d1", " TAGS(city=beijing, workshop=w1)"),
        ("d2", " TAGS(city=beijing, workshop=w2)"),
        ("d3", " TAGS(city=shanghai)"),
        ("d4", ""),
    ] {
        one(
            &m,
            &format!("CREATE TIMESERIES root.f.{device}.temperature WITH DATATYPE=DOUBLE{tags}"),
        );
    }
    for (device, rows) in [
        ("d1", "(1, 10), (2, 20)"),
        ("d2", "(1, 30)"),
        ("d3", "(1, 5), (11, 7)"),
        ("d4", "(1, 100)"),
    ] {
        one(
            &m,
            &format!("INSERT INTO root.f.{device}(time, temperature) VALUES {rows}"),
        );
    }
    let o = one(
        &m,
        "SELECT avg(temperature), count(temperature) FROM root.f.** GROUP BY TAGS(city)",
    );
    assert_eq!(
        o.columns,
        ["city", "avg(temperature)", "count(temperature)"]
    );
    let text = |s: &str| Some(Value::Text(s.into()));
    assert_eq!(
        o.rows,
        vec![
            vec![None, double(100.0), int(1)],
            vec![text("beijing"), double(20.0), int(3)],
            vec![text("shanghai"), double(6.0), int(2)],
        ]
    );
    let o = one(
        &m,
        "SELECT count(temperature) FROM root.f.** GROUP BY ([0, 20), 10ms), TAGS(city, workshop)",
    );
    assert_eq!(
        o.columns,
        ["Time", "city", "workshop", "count(temperature)"]
    );
    let counts: Vec<(i64, Cell, Cell, Cell)> = o
        .rows
        .iter()
        .map(|r| {
            let Some(Value::Int64(t)) = r[0] else {
                panic!("{r:?}")
            };
            (t, r[1].clone(), r[2].clone(), r[3].clone())
        })
        .collect();
    assert_eq!(
        counts,
        vec![
            (0, None, None, int(1)),
            (0, text("beijing"), text("w1"), int(2)),
            (0, text("beijing"), text("w2"), int(1)),
            (0, text("shanghai"), None, int(1)),
            (10, None, None, int(0)),
            (10, text("beijing"), text("w1"), int(0)),
            (10, text("beijing"), text("w2"), int(0)),
            (10, text("shanghai"), None, int(1)),
        ]
    );
    let parsed = parse_script(
        "SELECT count(temperature) FROM root.f.** GROUP BY TAGS(city) ALIGN BY DEVICE",
        Position::START,
    );
    assert!(parsed[0].result.is_err(), "TAGS merges devices");
    let e = run(
        &m,
        "SELECT count(temperature) AS n FROM root.f.d1 GROUP BY TAGS(city)",
    )
    .unwrap_err();
    assert_eq!(e.code(), 300, "{e}");
}
