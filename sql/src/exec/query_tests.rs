//! Query results bounded by bytes (REVIEW N5), over the in-memory backend: a wide result is
//! refused while it is built with a status naming the bound, the node's bound holds over open
//! results, a result within bounds is charged exactly its rows, and a series longer than one
//! chunk reads whole and in order.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use common::{DataType, StatusCode, Value};

use super::memory_backend::{ready, Memory};
use super::*;
use crate::{parse_script, parse_table_statement, Position, TimeRange};

/// A device `root.sg.w` of `width` DOUBLE series with `rows` points each (times 0..rows).
fn wide(width: usize, rows: i64) -> Memory {
    let m = Memory::default();
    {
        let mut series = m.series.lock().unwrap();
        for s in 0..width {
            let points: BTreeMap<i64, Value> =
                (0..rows).map(|t| (t, Value::Double(t as f64))).collect();
            series.insert(
                ("root.sg.w".to_string(), format!("s{s:04}")),
                (DataType::Double, points),
            );
        }
    }
    m
}

fn charged(m: &Memory, text: &str, charge: &mut ResultCharge) -> ExecResult<Outcome> {
    let statement = parse_script(text, Position::START)
        .pop()
        .unwrap()
        .result
        .unwrap();
    ready(execute_charged(m, &statement, charge))
}

#[test]
fn a_wide_select_is_refused_with_the_key_and_every_byte_is_given_back() {
    // 200 series × 2,000 rows is 400,000 cells, about 13 MB; the bound is 1 MiB.
    let m = wide(200, 2_000);
    let budget = ResultBudget::new(1 << 20, 4 << 20);
    let mut charge = budget.charge();
    let e = charged(&m, "SELECT * FROM root.sg.w", &mut charge).unwrap_err();
    assert_eq!(e.code(), StatusCode::IllegalParameter.wire(), "{e}");
    assert!(e.to_string().contains("query_result_bytes_max"), "{e}");
    assert!(charge.bytes() <= 1 << 20, "never charged past the bound");
    drop(charge);
    assert_eq!(budget.used(), 0);
    assert_eq!(budget.refused_result.load(Ordering::Relaxed), 1);
    // The raw data query by paths is bounded the same way.
    let paths: Vec<String> = (0..200).map(|s| format!("root.sg.w.s{s:04}")).collect();
    let mut charge = budget.charge();
    let e = ready(raw_paths(&m, &paths, TimeRange::ALL, &mut charge)).unwrap_err();
    assert_eq!(e.code(), 700, "{e}");
    drop(charge);
    assert_eq!(budget.used(), 0);
    // A narrower query fits, and is charged exactly its rows.
    let mut charge = budget.charge();
    let outcome = charged(&m, "SELECT * FROM root.sg.w WHERE time < 10", &mut charge).unwrap();
    assert_eq!(outcome.rows.len(), 10);
    assert_eq!(outcome.rows[0].len(), 201);
    assert_eq!(charge.bytes(), outcome_bytes(&outcome));
    assert_eq!(budget.used(), charge.bytes());
    drop(charge);
    assert_eq!(budget.used(), 0);
}

#[test]
fn the_node_bound_holds_over_open_results() {
    let m = wide(4, 100);
    let budget = ResultBudget::new(1 << 20, 1 << 20);
    // Results open elsewhere on the node hold all but a little of the node's bound.
    let mut others = budget.charge();
    others.add((1 << 20) - 1000).unwrap();
    let mut charge = budget.charge();
    let e = charged(&m, "SELECT * FROM root.sg.w", &mut charge).unwrap_err();
    assert_eq!(e.code(), StatusCode::WriteProcessReject.wire(), "{e}");
    assert!(
        e.to_string().contains("query_results_bytes_max_per_node"),
        "{e}"
    );
    drop(others);
    let outcome = charged(&m, "SELECT * FROM root.sg.w", &mut charge).unwrap();
    assert_eq!(outcome.rows.len(), 100);
}

#[test]
fn a_series_longer_than_a_chunk_reads_whole_and_in_order() {
    let m = wide(1, 150_000);
    let outcome = charged(
        &m,
        "SELECT * FROM root.sg.w",
        &mut ResultCharge::unbounded(),
    )
    .unwrap();
    assert_eq!(outcome.rows.len(), 150_000);
    assert!(outcome
        .rows
        .iter()
        .enumerate()
        .all(|(i, row)| row[0] == Some(Value::Int64(i as i64))));
    let count = charged(
        &m,
        "SELECT COUNT(s0000) FROM root.sg.w WHERE time >= 5",
        &mut ResultCharge::unbounded(),
    )
    .unwrap();
    assert_eq!(count.rows, vec![vec![Some(Value::Int64(149_995))]]);
    let limited = charged(
        &m,
        "SELECT * FROM root.sg.w LIMIT 3 OFFSET 70000",
        &mut ResultCharge::unbounded(),
    )
    .unwrap();
    assert_eq!(limited.rows.len(), 3);
    assert_eq!(limited.rows[0][0], Some(Value::Int64(70_000)));
}

#[test]
fn a_table_query_is_bounded_too() {
    let m = Memory::default();
    let table = |text: &str, charge: &mut ResultCharge| {
        let statement = parse_table_statement(text).unwrap();
        ready(execute_table_charged(&m, Some("db"), &statement, charge))
    };
    let free = &mut ResultCharge::unbounded();
    table("CREATE DATABASE db", free).unwrap();
    table("CREATE TABLE t (site STRING TAG, v DOUBLE FIELD)", free).unwrap();
    let values: Vec<String> = (0..2_000).map(|t| format!("({t}, 'a', {t})")).collect();
    let insert = format!("INSERT INTO t(time, site, v) VALUES {}", values.join(", "));
    table(&insert, free).unwrap();
    let budget = ResultBudget::new(64 << 10, 1 << 20);
    let mut charge = budget.charge();
    let e = table("SELECT * FROM t", &mut charge).unwrap_err();
    assert_eq!(e.code(), 700, "{e}");
    drop(charge);
    assert_eq!(budget.used(), 0);
    let mut charge = budget.charge();
    let outcome = table("SELECT * FROM t WHERE time < 10", &mut charge)
        .unwrap()
        .outcome;
    assert_eq!(outcome.rows.len(), 10);
    assert_eq!(charge.bytes(), outcome_bytes(&outcome));
}
