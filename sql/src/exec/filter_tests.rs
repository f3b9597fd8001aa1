//! Value filters run over the in-memory backend: which rows a raw query keeps and what an
//! aggregate folds under a filter, across devices and aligned by device, and a model test that
//! compares random filters over random series with a plain evaluator over a `BTreeMap`.

use std::collections::BTreeMap;

use common::Value;

use super::memory_backend::{one, run, Calls, Memory, Rng};
use super::*;

fn int(v: i64) -> Cell {
    Some(Value::Int64(v))
}

fn double(v: f64) -> Cell {
    Some(Value::Double(v))
}

fn times(o: &Outcome) -> Vec<i64> {
    o.rows
        .iter()
        .map(|r| match r[0] {
            Some(Value::Int64(t)) => t,
            ref other => panic!("a time, not {other:?}"),
        })
        .collect()
}

/// root.sg.d1: a = 1.0, 2.0, NULL, 4.0 and t = 'x1', 'y2', 'x3', NULL at times 1..=4;
/// root.sg.d2: a = 10.0 at 2 and 0.5 at 5.
fn tree() -> Memory {
    let m = Memory::default();
    one(
        &m,
        "INSERT INTO root.sg.d1(time, a, t) VALUES (1, 1.0, 'x1'), (2, 2.0, 'y2'), \
         (3, NULL, 'x3'), (4, 4.0, NULL)",
    );
    one(
        &m,
        "INSERT INTO root.sg.d2(time, a) VALUES (2, 10.0), (5, 0.5)",
    );
    *m.calls.lock().unwrap() = Calls::default();
    m
}

#[test]
fn a_raw_query_keeps_the_rows_its_filter_keeps() {
    let m = tree();
    let o = one(&m, "SELECT a FROM root.sg.d1 WHERE a >= 2");
    assert_eq!(o.columns, ["Time", "root.sg.d1.a"]);
    assert_eq!(
        o.rows,
        vec![vec![int(2), double(2.0)], vec![int(4), double(4.0)]]
    );
    // A filter on a column not selected still reads it; a NULL there drops the row.
    let o = one(&m, "SELECT a FROM root.sg.d1 WHERE t LIKE 'x%'");
    assert_eq!(o.rows, vec![vec![int(1), double(1.0)], vec![int(3), None]]);
    // The rows are the times of the series the query reads: selected or filtered on.
    let o = one(&m, "SELECT a FROM root.sg.d1 WHERE a IS NULL");
    assert!(o.rows.is_empty(), "{:?}", o.rows);
    assert_eq!(
        times(&one(&m, "SELECT t FROM root.sg.d1 WHERE a IS NULL")),
        [3]
    );
    // Time bounds and the filter together, with LIMIT counted after the filter.
    let o = one(
        &m,
        "SELECT * FROM root.sg.d1 WHERE time > 1 AND (a < 3 OR t = 'x3') LIMIT 1 OFFSET 1",
    );
    assert_eq!(times(&o), [3]);
    let o = one(
        &m,
        "SELECT a FROM root.sg.d1 WHERE a > 0 ORDER BY TIME DESC LIMIT 2",
    );
    assert_eq!(times(&o), [4, 2]);
}

#[test]
fn one_name_over_several_devices_must_hold_on_each_and_aligned_by_device_on_its_own() {
    let m = tree();
    // Aligned by time, `a > 1` is d1.a > 1 AND d2.a > 1: only time 2 has both.
    let o = one(&m, "SELECT a FROM root.sg.* WHERE a > 1");
    assert_eq!(o.columns, ["Time", "root.sg.d1.a", "root.sg.d2.a"]);
    assert_eq!(o.rows, vec![vec![int(2), double(2.0), double(10.0)]]);
    // Aligned by device, each device by its own a.
    let o = one(&m, "SELECT a FROM root.sg.* WHERE a > 1 ALIGN BY DEVICE");
    let rows: Vec<(i64, Cell)> = times(&o)
        .into_iter()
        .zip(o.rows.iter().map(|r| r[1].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            (2, Some(Value::Text("root.sg.d1".into()))),
            (4, Some(Value::Text("root.sg.d1".into()))),
            (2, Some(Value::Text("root.sg.d2".into()))),
        ]
    );
    // Two names over two devices aligned by time is not run yet (300), by device it is.
    let e = run(&m, "SELECT a FROM root.sg.* WHERE a > 1 OR t = 'x'").unwrap_err();
    assert_eq!(e.code(), 300, "{e}");
    assert!(e.to_string().contains("ALIGN BY DEVICE"), "{e}");
    let o = one(
        &m,
        "SELECT a FROM root.sg.* WHERE a > 1 OR t = 'x1' ALIGN BY DEVICE",
    );
    assert_eq!(o.rows.len(), 4, "{:?}", o.rows);
}

#[test]
fn aggregates_fold_only_the_rows_the_filter_keeps() {
    let m = tree();
    let o = one(
        &m,
        "SELECT count(a), sum(a), max_value(a), count(t) FROM root.sg.d1 WHERE a < 3 OR t = 'x3'",
    );
    assert_eq!(o.rows, vec![vec![int(2), double(3.0), double(2.0), int(3)]]);
    let o = one(
        &m,
        "SELECT count(a) FROM root.sg.d1 WHERE a > 0 GROUP BY ([0, 6), 2ms)",
    );
    assert_eq!(
        o.rows,
        vec![
            vec![int(0), int(1)],
            vec![int(2), int(1)],
            vec![int(4), int(1)],
        ]
    );
    let o = one(
        &m,
        "SELECT count(a), avg(a) FROM root.sg.* WHERE a < 5 ALIGN BY DEVICE",
    );
    assert_eq!(o.columns, ["Device", "count(a)", "avg(a)"]);
    assert_eq!(
        o.rows,
        vec![
            vec![
                Some(Value::Text("root.sg.d1".into())),
                int(3),
                double(7.0 / 3.0)
            ],
            vec![Some(Value::Text("root.sg.d2".into())), int(1), double(0.5)],
        ]
    );
    // Without a filter the statistics answer; with one the points are read.
    let calls = *m.calls.lock().unwrap();
    assert!(calls.raw > 0);
}

#[test]
fn filters_that_do_not_type_check_are_refused() {
    let m = tree();
    for text in [
        "SELECT a FROM root.sg.d1 WHERE a > 'x'",
        "SELECT a FROM root.sg.d1 WHERE t + 1 > 0",
        "SELECT a FROM root.sg.d1 WHERE a",
        "SELECT count(a) FROM root.sg.d1 WHERE t > 2",
    ] {
        let e = run(&m, text).unwrap_err();
        assert_eq!(e.code(), 700, "{text}: {e}");
    }
}

/// A plain evaluator of a filter over one row's x and y (`None` is NULL).
type Eval = Box<dyn Fn(Option<f64>, Option<f64>) -> Option<bool>>;

/// A random filter over columns x and y, as SQL text and as a plain evaluator of one row
/// (`None` is NULL).
fn random_filter(rng: &mut Rng, depth: u32) -> (String, Eval) {
    let leaf = depth == 0 || rng.below(3) == 0;
    if leaf {
        let column = if rng.below(2) == 0 { "x" } else { "y" };
        let pick = move |x: Option<f64>, y: Option<f64>| if column == "x" { x } else { y };
        let k = rng.below(10) as f64;
        let k2 = k + rng.below(5) as f64;
        return match rng.below(5) {
            0 => (
                format!("{column} > {k}"),
                Box::new(move |x, y| pick(x, y).map(|v| v > k)),
            ),
            1 => (
                format!("{column} <= {k}"),
                Box::new(move |x, y| pick(x, y).map(|v| v <= k)),
            ),
            2 => (
                format!("{column} IS NULL"),
                Box::new(move |x, y| Some(pick(x, y).is_none())),
            ),
            3 => (
                format!("{column} BETWEEN {k} AND {k2}"),
                Box::new(move |x, y| pick(x, y).map(|v| v >= k && v <= k2)),
            ),
            _ => (
                format!("{column} IN ({k}, {k2})"),
                Box::new(move |x, y| pick(x, y).map(|v| v == k || v == k2)),
            ),
        };
    }
    let (a_text, a) = random_filter(rng, depth - 1);
    match rng.below(3) {
        0 => (
            format!("NOT ({a_text})"),
            Box::new(move |x, y| a(x, y).map(|b| !b)),
        ),
        which => {
            let (b_text, b) = random_filter(rng, depth - 1);
            if which == 1 {
                let f = move |x, y| match (a(x, y), b(x, y)) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                };
                (format!("({a_text}) AND ({b_text})"), Box::new(f))
            } else {
                let f = move |x, y| match (a(x, y), b(x, y)) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                };
                (format!("({a_text}) OR ({b_text})"), Box::new(f))
            }
        }
    }
}

#[test]
fn random_filters_agree_with_a_plain_evaluator() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..20 {
        let m = Memory::default();
        // x and y at times 0..60, each point present with probability 3/4, values 0..12.
        let mut model: BTreeMap<i64, (Option<f64>, Option<f64>)> = BTreeMap::new();
        let mut values = Vec::new();
        for t in 0..60 {
            let x = (rng.below(4) != 0).then(|| rng.below(12) as f64);
            let y = (rng.below(4) != 0).then(|| rng.below(12) as f64);
            if x.is_none() && y.is_none() {
                continue;
            }
            model.insert(t, (x, y));
            let text = |v: Option<f64>| v.map_or("NULL".to_string(), |v| format!("{v:.1}"));
            values.push(format!("({t}, {}, {})", text(x), text(y)));
        }
        // Both series exist whatever the draw: typed DOUBLE.
        one(&m, "CREATE TIMESERIES root.sg.d.x DOUBLE");
        one(&m, "CREATE TIMESERIES root.sg.d.y DOUBLE");
        one(
            &m,
            &format!(
                "INSERT INTO root.sg.d(time, x, y) VALUES {}",
                values.join(", ")
            ),
        );
        for _ in 0..10 {
            let (text, eval) = random_filter(&mut rng, 3);
            // A row is a time at which a series the query reads has a point: x, and y when the
            // filter names it.
            let reads_y = text.contains('y');
            let kept: Vec<(i64, Option<f64>)> = model
                .iter()
                .filter(|(_, (x, y))| x.is_some() || reads_y && y.is_some())
                .filter(|(_, (x, y))| eval(*x, *y) == Some(true))
                .map(|(t, (x, _))| (*t, *x))
                .collect();
            let o = one(&m, &format!("SELECT x FROM root.sg.d WHERE {text}"));
            let got: Vec<(i64, Option<f64>)> = o
                .rows
                .iter()
                .map(|r| match (&r[0], &r[1]) {
                    (Some(Value::Int64(t)), Some(Value::Double(x))) => (*t, Some(*x)),
                    (Some(Value::Int64(t)), None) => (*t, None),
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(got, kept, "round {round}: WHERE {text}");
            let o = one(
                &m,
                &format!("SELECT count(x), sum(x) FROM root.sg.d WHERE {text}"),
            );
            let xs: Vec<f64> = kept.iter().filter_map(|(_, x)| *x).collect();
            let sum = (!xs.is_empty()).then(|| Value::Double(xs.iter().sum()));
            assert_eq!(
                o.rows,
                vec![vec![int(xs.len() as i64), sum]],
                "round {round}: WHERE {text}"
            );
        }
    }
}
