//! Results read a page at a time ([`ResultCursor`]), over the in-memory backend: a raw SELECT's
//! pages read only as far as they go, a result larger than its memory bound is paged whole
//! within it, and pages put together are what the whole result is for every shape of raw query.

use std::collections::BTreeMap;

use common::{DataType, Value};

use super::memory_backend::{one, ready, Memory};
use super::*;
use crate::{parse_script, Position};

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

fn statement(text: &str) -> Statement {
    parse_script(text, Position::START)
        .pop()
        .unwrap()
        .result
        .expect(text)
}

/// Every page of `text`'s cursor, `rows_max` rows and `bytes_max` bytes at most each, each
/// page's bytes given back once read; and the most `charge` held at any time.
fn pages(
    m: &Memory,
    text: &str,
    rows_max: usize,
    bytes_max: usize,
    charge: &mut ResultCharge,
) -> ExecResult<(Vec<Vec<Vec<Cell>>>, usize)> {
    let mut cursor = ready(open(m, &statement(text), charge))?;
    let (mut pages, mut peak) = (Vec::new(), charge.bytes());
    while !cursor.is_done() {
        let page = ready(cursor.next_page(m, rows_max, bytes_max, charge))?;
        peak = peak.max(charge.bytes());
        assert!(page.rows.len() <= rows_max.max(1));
        charge.release(page.bytes);
        if page.rows.is_empty() {
            assert!(cursor.is_done(), "only the last page is empty");
        } else {
            pages.push(page.rows);
        }
    }
    Ok((pages, peak))
}

#[test]
fn a_raw_select_reads_only_as_far_as_its_pages() {
    // One series of three and a bit chunks.
    let m = wide(1, 200_000);
    let mut charge = ResultCharge::unbounded();
    let mut cursor = ready(open(&m, &statement("SELECT * FROM root.sg.w"), &mut charge)).unwrap();
    assert_eq!(m.calls.lock().unwrap().raw, 0, "opening reads nothing");
    let page = ready(cursor.next_page(&m, 10, usize::MAX, &mut charge)).unwrap();
    assert_eq!(page.rows.len(), 10);
    assert_eq!(page.rows[9][0], Some(Value::Int64(9)));
    assert_eq!(m.calls.lock().unwrap().raw, 1, "one chunk for ten rows");
    assert!(!cursor.is_done());
    let mut rows = 10;
    while !cursor.is_done() {
        let page = ready(cursor.next_page(&m, 7_000, usize::MAX, &mut charge)).unwrap();
        assert_eq!(
            page.rows.first().map(|r| r[0].clone()),
            (!page.rows.is_empty()).then_some(Some(Value::Int64(rows as i64)))
        );
        rows += page.rows.len();
        charge.release(page.bytes);
    }
    assert_eq!(rows, 200_000);
    assert_eq!(m.calls.lock().unwrap().raw, 4);
    assert_eq!(
        charge.bytes(),
        page.bytes,
        "only the first page is still charged"
    );
}

/// REVIEW N5 and issue 40: a `SELECT *` too large to build is answered a page at a time, the
/// node holding one chunk per series and one page, never the result.
#[test]
fn a_result_larger_than_its_bound_is_paged_within_it() {
    // 200 series × 2,000 rows is about 13 MB as rows; the bound is 4 MiB.
    let m = wide(200, 2_000);
    let budget = ResultBudget::new(4 << 20, 8 << 20);
    let mut charge = budget.charge();
    let e = ready(execute_charged(
        &m,
        &statement("SELECT * FROM root.sg.w"),
        &mut charge,
    ))
    .unwrap_err();
    assert!(e.to_string().contains("query_result_bytes_max"), "{e}");
    drop(charge);
    assert_eq!(budget.used(), 0);

    let mut charge = budget.charge();
    let (pages, peak) = pages(&m, "SELECT * FROM root.sg.w", 100, 256 << 10, &mut charge).unwrap();
    assert!(peak <= 4 << 20, "held {peak} bytes at most");
    let rows: Vec<Vec<Cell>> = pages.into_iter().flatten().collect();
    assert_eq!(rows.len(), 2_000);
    assert!(rows
        .iter()
        .enumerate()
        .all(|(t, row)| row.len() == 201 && row[0] == Some(Value::Int64(t as i64))));
    assert_eq!(charge.bytes(), 0, "a finished cursor holds nothing");
    assert_eq!(budget.used(), 0);
}

/// Three devices with gaps, NULLs and a text column, for the shapes below.
fn devices() -> Memory {
    let m = Memory::default();
    for insert in [
        "INSERT INTO root.sg.a(time, s1, s2) VALUES (1, 1.0, 'x'), (2, NULL, 'y'), (4, 4.0, NULL), \
         (5, 5.0, 'z'), (9, 9.0, NULL)",
        "INSERT INTO root.sg.b(time, s1) VALUES (2, 20.0), (3, 30.0), (6, 60.0), (7, 70.0)",
        "INSERT INTO root.sg.c(time, s2) VALUES (1, 'p'), (8, 'q')",
    ] {
        one(&m, insert);
    }
    m
}

#[test]
fn pages_put_together_are_the_whole_result() {
    let m = devices();
    for text in [
        "SELECT * FROM root.sg.*",
        "SELECT s1 FROM root.sg.a, root.sg.b",
        "SELECT * FROM root.sg.* WHERE s1 > 4",
        "SELECT * FROM root.sg.* LIMIT 3 OFFSET 2",
        "SELECT * FROM root.sg.* WHERE time >= 2 ORDER BY TIME DESC LIMIT 4 OFFSET 1",
        "SELECT s1 FROM root.sg.* FILL(PREVIOUS) LIMIT 5",
        "SELECT s1 FROM root.sg.a FILL(LINEAR)",
        "SELECT * FROM root.sg.* ALIGN BY DEVICE",
        "SELECT * FROM root.sg.* LIMIT 4 OFFSET 3 ALIGN BY DEVICE",
        "SELECT * FROM root.sg.* WHERE s1 < 60 ORDER BY TIME DESC ALIGN BY DEVICE",
        "SELECT s1, s2 FROM root.sg.* FILL('n') ALIGN BY DEVICE",
        "SELECT * FROM root.sg.* LIMIT 0",
        "SELECT COUNT(s1) FROM root.sg.* GROUP BY ([0, 10), 3ms)",
        "SHOW DEVICES",
    ] {
        let whole = one(&m, text);
        for rows_max in [1, 2, 3, 1_000] {
            let mut charge = ResultCharge::unbounded();
            let (pages, _) = pages(&m, text, rows_max, usize::MAX, &mut charge).expect(text);
            assert!(pages.iter().all(|p| p.len() <= rows_max), "{text}");
            let rows: Vec<Vec<Cell>> = pages.into_iter().flatten().collect();
            assert_eq!(rows, whole.rows, "{text}, pages of {rows_max}");
            assert_eq!(charge.bytes(), 0, "{text}: every byte given back");
        }
    }
}

#[test]
fn a_page_is_bounded_in_bytes_but_holds_a_row_at_least() {
    let m = wide(50, 20);
    let mut charge = ResultCharge::unbounded();
    let (pages, _) = pages(&m, "SELECT * FROM root.sg.w", 1_000, 1, &mut charge).unwrap();
    assert_eq!(pages.len(), 20, "one row a page");
    let row = row_bytes(&pages[0][0]);
    let (pages, _) = pages_of(&m, 1_000, 3 * row + 1);
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>()[..2], [3, 3]);
}

fn pages_of(m: &Memory, rows_max: usize, bytes_max: usize) -> (Vec<Vec<Vec<Cell>>>, usize) {
    pages(
        m,
        "SELECT * FROM root.sg.w",
        rows_max,
        bytes_max,
        &mut ResultCharge::unbounded(),
    )
    .unwrap()
}
