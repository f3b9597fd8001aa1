//! GROUP BY windows of natural months over the in-memory backend: windows laid on the UTC
//! calendar from the start (the day of the month clamped only where a month lacks it), cut at
//! the end, sliding by months, left-open, and the functions read raw judged per window.

use common::Value;

use super::memory_backend::{one, Memory};
use super::*;
use crate::time::days_from_civil;

const DAY_MS: i64 = 86_400_000;

fn day(year: i64, month: u32, day: u32) -> i64 {
    days_from_civil(year, month, day) * DAY_MS
}

/// root.sg.d1: `n` (INT64) = k at midnight UTC of day k, one a day from 2024-01-31 to 2024-05-31.
fn daily() -> Memory {
    let m = Memory::default();
    one(&m, "CREATE TIMESERIES root.sg.d1.n INT64");
    let first = day(2024, 1, 31);
    let rows: Vec<String> = (0..=121)
        .map(|k| format!("({}, {k})", first + k * DAY_MS))
        .collect();
    one(
        &m,
        &format!("INSERT INTO root.sg.d1(time, n) VALUES {}", rows.join(", ")),
    );
    m
}

fn column(o: &Outcome, at: usize) -> Vec<Cell> {
    o.rows.iter().map(|r| r[at].clone()).collect()
}

fn ints(values: &[i64]) -> Vec<Cell> {
    values.iter().map(|v| Some(Value::Int64(*v))).collect()
}

#[test]
fn monthly_windows_start_on_the_calendar_from_the_start() {
    let m = daily();
    let o = one(
        &m,
        "SELECT count(n), min_value(n) FROM root.sg.d1 GROUP BY ([2024-01-31, 2024-06-01), 1mo)",
    );
    // From January 31st: February 29th (2024 is a leap year), then March 31st again, April
    // 30th, May 31st; the last window is cut at June 1st.
    assert_eq!(
        column(&o, 0),
        ints(&[
            day(2024, 1, 31),
            day(2024, 2, 29),
            day(2024, 3, 31),
            day(2024, 4, 30),
            day(2024, 5, 31)
        ])
    );
    assert_eq!(column(&o, 1), ints(&[29, 31, 30, 31, 1]));
    assert_eq!(column(&o, 2), ints(&[0, 29, 60, 90, 121]));
    // A year is twelve months; one window over the whole range.
    let o = one(
        &m,
        "SELECT count(n) FROM root.sg.d1 GROUP BY ([2024-01-01, 2025-01-01), 1y)",
    );
    assert_eq!(o.rows, vec![ints(&[day(2024, 1, 1), 122])]);
}

#[test]
fn monthly_windows_slide_and_open_on_the_left() {
    let m = daily();
    let o = one(
        &m,
        "SELECT count(n), max_by(time, n) FROM root.sg.d1 \
         GROUP BY ([2024-01-01, 2024-04-01), 2mo, 1mo)",
    );
    assert_eq!(
        column(&o, 0),
        ints(&[day(2024, 1, 1), day(2024, 2, 1), day(2024, 3, 1)])
    );
    // [Jan 1, Mar 1): Jan 31 and February's 29 days; [Feb 1, Apr 1); [Mar 1, Apr 1), cut.
    assert_eq!(column(&o, 1), ints(&[30, 60, 31]));
    assert_eq!(
        column(&o, 2),
        ints(&[day(2024, 2, 29), day(2024, 3, 31), day(2024, 3, 31)])
    );
    // Left-open: (Feb 1, Mar 1] holds March 1st and not February 1st, labelled by its end.
    let o = one(
        &m,
        &format!(
            "SELECT count(n) FROM root.sg.d1 GROUP BY (({}, {}], 1mo)",
            day(2024, 2, 1),
            day(2024, 4, 1)
        ),
    );
    assert_eq!(column(&o, 0), ints(&[day(2024, 3, 1), day(2024, 4, 1)]));
    assert_eq!(column(&o, 1), ints(&[29, 31]));
    // Months and days together: [Jan 31, Mar 1) then [Feb 29, Apr 1), ...
    let o = one(
        &m,
        "SELECT count(n) FROM root.sg.d1 GROUP BY ([2024-01-31, 2024-03-31), 1mo1d, 1mo)",
    );
    assert_eq!(column(&o, 1), ints(&[30, 31]));
}
