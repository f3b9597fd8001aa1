//! Select lists with expressions run over the in-memory backend: values and NULLs, the types
//! IoTDB gives them, the columns a wildcard expands to and their names, aliases, ALIGN BY
//! DEVICE, the row clauses, and the refusals.

use common::{DataType, Value};

use super::memory_backend::{one, run, Memory};
use super::*;

fn int(v: i64) -> Cell {
    Some(Value::Int64(v))
}

fn double(v: f64) -> Cell {
    Some(Value::Double(v))
}

/// root.sg.d1: a (INT32) = 1, 2, NULL, 4 and b (DOUBLE) = 0.5, NULL, 3.0, 4.0 at times 1..=4;
/// root.sg.d2: a = 10 at 2 and b = 2.0 at 5.
fn tree() -> Memory {
    let m = Memory::default();
    for statement in [
        "CREATE TIMESERIES root.sg.d1.a WITH DATATYPE=INT32",
        "CREATE TIMESERIES root.sg.d2.a WITH DATATYPE=INT32",
        "INSERT INTO root.sg.d1(time, a, b) VALUES (1, 1, 0.5), (2, 2, NULL), (3, NULL, 3.0), \
         (4, 4, 4.0)",
        "INSERT INTO root.sg.d2(time, a, b) VALUES (2, 10, NULL), (5, NULL, 2.0)",
    ] {
        one(&m, statement);
    }
    m
}

#[test]
fn arithmetic_is_double_null_where_an_operand_is_and_rows_of_nulls_are_not_shown() {
    let m = tree();
    let o = one(&m, "SELECT a, a + b, -a, a * 2 AS twice FROM root.sg.d1");
    assert_eq!(
        o.columns,
        [
            "Time",
            "root.sg.d1.a",
            "root.sg.d1.a + root.sg.d1.b",
            "-root.sg.d1.a",
            "twice"
        ]
    );
    assert_eq!(
        o.types,
        [
            DataType::Int64,
            DataType::Int32,
            DataType::Double,
            DataType::Int32,
            DataType::Double
        ]
    );
    let i32 = |v: i32| Some(Value::Int32(v));
    assert_eq!(
        o.rows,
        vec![
            vec![int(1), i32(1), double(1.5), i32(-1), double(2.0)],
            vec![int(2), i32(2), None, i32(-2), double(4.0)],
            vec![int(4), i32(4), double(8.0), i32(-4), double(8.0)],
        ],
        "time 3 has b alone, and every item there is NULL"
    );
    // Precedence, parentheses, `%`, `/` and a condition.
    let o = one(
        &m,
        "SELECT (a + 1) * b, a % 3, b / 0, a > 1 FROM root.sg.d1 WHERE time >= 4",
    );
    assert_eq!(
        o.columns,
        [
            "Time",
            "(root.sg.d1.a + 1) * root.sg.d1.b",
            "root.sg.d1.a % 3",
            "root.sg.d1.b / 0",
            "root.sg.d1.a > 1"
        ]
    );
    assert_eq!(o.types[4], DataType::Boolean);
    assert_eq!(
        o.rows,
        vec![vec![
            int(4),
            double(20.0),
            double(1.0),
            double(f64::INFINITY),
            Some(Value::Boolean(true))
        ]]
    );
}

#[test]
fn a_wildcard_expands_an_expression_to_every_combination_of_its_series() {
    let m = tree();
    let o = one(&m, "SELECT a + b FROM root.sg.* WHERE time < 3");
    assert_eq!(
        o.columns,
        [
            "Time",
            "root.sg.d1.a + root.sg.d1.b",
            "root.sg.d1.a + root.sg.d2.b",
            "root.sg.d2.a + root.sg.d1.b",
            "root.sg.d2.a + root.sg.d2.b",
        ]
    );
    assert_eq!(o.rows, vec![vec![int(1), double(1.5), None, None, None]]);
    // SLIMIT and SOFFSET page the expanded columns.
    let o = one(&m, "SELECT a + b FROM root.sg.* SLIMIT 1 SOFFSET 2");
    assert_eq!(o.columns, ["Time", "root.sg.d2.a + root.sg.d1.b"]);
    // An alias names one column, never several (IoTDB refuses it too).
    let e = run(&m, "SELECT a + 1 AS x FROM root.sg.*").unwrap_err();
    assert!(e.to_string().contains("alias x names 2 series"), "{e:?}");
    // A name that reads nothing makes no column.
    let o = one(&m, "SELECT nope + 1, a FROM root.sg.d1 LIMIT 1");
    assert_eq!(o.columns, ["Time", "root.sg.d1.a"]);
}

#[test]
fn aligned_by_device_an_item_is_one_column_over_each_devices_series() {
    let m = tree();
    let o = one(
        &m,
        "SELECT a * 10, b AS bee FROM root.sg.* WHERE b IS NULL OR b > 1 ALIGN BY DEVICE",
    );
    assert_eq!(o.columns, ["Time", "Device", "a * 10", "bee"]);
    assert_eq!(o.types[2..], [DataType::Double, DataType::Double]);
    let d = |name: &str| Some(Value::Text(format!("root.sg.{name}")));
    assert_eq!(
        o.rows,
        vec![
            vec![int(2), d("d1"), double(20.0), None],
            vec![int(3), d("d1"), None, double(3.0)],
            vec![int(4), d("d1"), double(40.0), double(4.0)],
            vec![int(2), d("d2"), double(100.0), None],
            vec![int(5), d("d2"), None, double(2.0)],
        ]
    );
    // ORDER BY TIME DESC, LIMIT and OFFSET count the shown rows.
    let o = one(
        &m,
        "SELECT -b FROM root.sg.* ORDER BY TIME DESC LIMIT 2 OFFSET 1 ALIGN BY DEVICE",
    );
    assert_eq!(
        o.rows,
        vec![
            vec![int(3), d("d1"), double(-3.0)],
            vec![int(1), d("d1"), double(-0.5)],
        ]
    );
}

#[test]
fn fill_fills_computed_columns() {
    let m = tree();
    let o = one(&m, "SELECT a + b, a FROM root.sg.d1 FILL(PREVIOUS)");
    assert_eq!(
        o.rows.iter().map(|r| r[1].clone()).collect::<Vec<_>>(),
        [double(1.5), double(1.5), double(8.0)],
        "time 3 reads b alone and is not shown"
    );
}

#[test]
fn what_a_select_list_expression_cannot_be() {
    let m = tree();
    let e = run(&m, "SELECT a + 'x' FROM root.sg.d1").unwrap_err();
    assert_eq!(e.code(), 700, "{e}");
    assert!(e.to_string().contains("cannot take"), "{e}");
    for (statement, says) in [
        ("SELECT -b, count(a) FROM root.sg.d1", "cannot be mixed"),
        ("SELECT 1 + 2 FROM root.sg.d1", "a constant alone"),
        (
            "SELECT LAST a + 1 FROM root.sg.d1",
            "an expression in a LAST query",
        ),
    ] {
        let parsed = crate::parse_script(statement, crate::Position::START);
        let e = parsed[0].result.clone().unwrap_err();
        assert!(e.message.contains(says), "{statement}: {e:?}");
    }
}

#[test]
fn expressions_over_aggregations_are_computed_from_their_calls_columns() {
    let m = tree();
    let o = one(
        &m,
        "SELECT count(a) + 1, sum(b) / count(b) AS mean, -max_value(a) FROM root.sg.d1",
    );
    assert_eq!(
        o.columns,
        [
            "count(root.sg.d1.a) + 1",
            "mean",
            "-max_value(root.sg.d1.a)"
        ]
    );
    assert_eq!(
        o.types,
        [DataType::Double, DataType::Double, DataType::Int32]
    );
    assert_eq!(
        o.rows,
        vec![vec![double(4.0), double(2.5), Some(Value::Int32(-4))]]
    );
    // Over a pattern: a column per combination; windows keep their time, an empty one NULL.
    let o = one(
        &m,
        "SELECT count(a) * 10, avg(b) FROM root.sg.* GROUP BY ([0, 6), 3ms)",
    );
    assert_eq!(
        o.columns,
        [
            "Time",
            "count(root.sg.d1.a) * 10",
            "count(root.sg.d2.a) * 10",
            "avg(root.sg.d1.b)",
            "avg(root.sg.d2.b)"
        ]
    );
    assert_eq!(
        o.rows,
        vec![
            vec![int(0), double(20.0), double(10.0), double(0.5), None],
            vec![int(3), double(10.0), double(0.0), double(3.5), double(2.0)],
        ]
    );
    // Aligned by device the calls are each device's; HAVING and ORDER BY still apply.
    let o = one(
        &m,
        "SELECT max_value(b) - min_value(b) AS spread FROM root.sg.* \
         HAVING count(b) > 0 ALIGN BY DEVICE",
    );
    assert_eq!(o.columns, ["Device", "spread"]);
    let d = |name: &str| Some(Value::Text(format!("root.sg.{name}")));
    assert_eq!(
        o.rows,
        vec![vec![d("d1"), double(3.5)], vec![d("d2"), double(0.0)]]
    );
    // GROUP BY LEVEL's merged columns.
    let o = one(
        &m,
        "SELECT count(a) + count(b) FROM root.sg.* GROUP BY LEVEL = 1",
    );
    assert_eq!(o.columns, ["count(root.sg.*.a) + count(root.sg.*.b)"]);
    assert_eq!(o.rows, vec![vec![double(8.0)]]);
    // Beginning with an operator or a parenthesis is an aggregate query too.
    let o = one(&m, "SELECT (count(a) + 1) / 2 FROM root.sg.d1");
    assert_eq!(o.columns, ["(count(root.sg.d1.a) + 1) / 2"]);
    assert_eq!(o.rows, vec![vec![double(2.0)]]);
    for (statement, says) in [
        ("SELECT count(a) + b FROM root.sg.d1", "cannot be mixed"),
        ("SELECT b, count(a) FROM root.sg.d1", "cannot be mixed"),
        (
            "SELECT max_by(a, b), count(a) + 1 FROM root.sg.d1",
            "MAX_BY beside an expression",
        ),
    ] {
        let parsed = crate::parse_script(statement, crate::Position::START);
        let e = parsed[0].result.clone().unwrap_err();
        assert!(e.message.contains(says), "{statement}: {e:?}");
    }
}
