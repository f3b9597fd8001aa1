//! A model test of GROUP BY's windows: random points, random windows (side by side, sliding,
//! natural months with or without days, left-open) under random WHERE ranges, each answer
//! compared with a plain evaluator that filters the points of each window out of a `BTreeMap`.
//! The executor asks the backend for partials per window or per unit and merges units into
//! sliding and calendar windows; the model knows none of that.

use std::collections::BTreeMap;

use common::Value;

use super::memory_backend::{one, Memory, Rng};
use super::*;
use crate::time::{add_months, days_from_civil};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// GROUP BY as the model reads it: `[t1, t2)` (or `(t1, t2]`), interval and step as months
/// and ms.
#[derive(Debug)]
struct Group {
    t1: i64,
    t2: i64,
    left_open: bool,
    interval: (u32, i64),
    step: (u32, i64),
}

impl Group {
    fn random(rng: &mut Rng, base: i64) -> Group {
        let t1 = base - 5 * DAY_MS + rng.below(60 * 24) as i64 * HOUR_MS;
        let t2 = t1 + HOUR_MS + rng.below(150 * 24) as i64 * HOUR_MS;
        let hours = |rng: &mut Rng, most: u64| (1 + rng.below(most)) as i64 * HOUR_MS;
        let (interval, step) = match rng.below(4) {
            0 => {
                let i = hours(rng, 20 * 24);
                ((0, i), (0, i))
            }
            1 => ((0, hours(rng, 20 * 24)), (0, hours(rng, 20 * 24))),
            2 => {
                let months = 1 + rng.below(3) as u32;
                ((months, 0), (months, 0))
            }
            _ => {
                let days = |rng: &mut Rng| rng.below(3) as i64 * DAY_MS;
                let interval = (rng.below(3) as u32, days(rng));
                let interval = if interval == (0, 0) { (1, 0) } else { interval };
                (interval, (1 + rng.below(2) as u32, days(rng)))
            }
        };
        Group {
            t1,
            t2,
            left_open: rng.below(4) == 0,
            interval,
            step,
        }
    }

    fn text(&self) -> String {
        let duration = |(months, ms): (u32, i64)| match (months, ms) {
            (0, ms) => format!("{ms}ms"),
            (months, 0) => format!("{months}mo"),
            (months, ms) => format!("{months}mo{ms}ms"),
        };
        let (open, close) = if self.left_open {
            ("(", "]")
        } else {
            ("[", ")")
        };
        format!(
            "GROUP BY ({open}{}, {}{close}, {}, {})",
            self.t1,
            self.t2,
            duration(self.interval),
            duration(self.step)
        )
    }

    /// The windows as `(label, [from, to))`, by IoTDB's definition: window k starts k steps
    /// after the start (months added on the calendar from the start), lasts one interval, is
    /// cut at the end; left-open windows hold `(a, b]` and are labelled by their right end.
    fn windows(&self) -> Vec<(i64, i64, i64)> {
        let shift = if self.left_open { 1 } else { 0 };
        let (start, end) = (self.t1 + shift, self.t2 + shift);
        let at = |k: i64, extra: (u32, i64)| {
            let months = k * i64::from(self.step.0) + i64::from(extra.0);
            add_months(start, months).unwrap() + k * self.step.1 + extra.1
        };
        let mut windows = Vec::new();
        for k in 0.. {
            let from = at(k, (0, 0));
            if from >= end {
                return windows;
            }
            let to = at(k, self.interval).min(end);
            let label = if self.left_open { to - 1 } else { from };
            windows.push((label, from, to));
        }
        unreachable!()
    }
}

/// The model's row of one window: the points of `points` in `[from, to)` and in `range`.
fn model_row(
    points: &BTreeMap<i64, i64>,
    (label, from, to): (i64, i64, i64),
    range: (i64, i64),
) -> Vec<Cell> {
    let inside: Vec<(i64, i64)> = points
        .range(from.max(range.0)..to.min(range.1).max(from.max(range.0)))
        .map(|(t, v)| (*t, *v))
        .collect();
    let int = |v: i64| Some(Value::Int64(v));
    let max = inside.iter().map(|(_, v)| *v).max();
    vec![
        int(label),
        int(inside.len() as i64),
        (!inside.is_empty()).then(|| Value::Double(inside.iter().map(|(_, v)| *v as f64).sum())),
        inside.iter().map(|(_, v)| *v).min().and_then(int),
        max.and_then(int),
        inside.first().and_then(|(_, v)| int(*v)),
        inside.last().and_then(|(_, v)| int(*v)),
        inside
            .iter()
            .find(|(_, v)| Some(*v) == max)
            .and_then(|(t, _)| int(*t)),
    ]
}

#[test]
fn random_windows_agree_with_a_plain_evaluator() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let base = days_from_civil(2024, 1, 15) * DAY_MS;
    for round in 0..10 {
        let m = Memory::default();
        one(&m, "CREATE TIMESERIES root.sg.d.x INT64");
        // About one point in 6 hours for 160 days (some left out), values -50..50.
        let mut points = BTreeMap::new();
        for k in 0..640i64 {
            if rng.below(3) == 0 {
                continue;
            }
            let t = base + k * 6 * HOUR_MS + rng.below(6 * 3600) as i64 * 1000;
            points.insert(t, rng.below(100) as i64 - 50);
        }
        let values: Vec<String> = points.iter().map(|(t, v)| format!("({t}, {v})")).collect();
        one(
            &m,
            &format!(
                "INSERT INTO root.sg.d(time, x) VALUES {}",
                values.join(", ")
            ),
        );
        for _ in 0..12 {
            let group = Group::random(&mut rng, base);
            let (range, clause) = match rng.below(3) {
                0 => ((i64::MIN, i64::MAX), String::new()),
                _ => {
                    let from = base + rng.below(100 * 24) as i64 * HOUR_MS;
                    let to = from + rng.below(60 * 24) as i64 * HOUR_MS;
                    ((from, to), format!("WHERE time >= {from} AND time < {to} "))
                }
            };
            let text = format!(
                "SELECT count(x), sum(x), min_value(x), max_value(x), first_value(x), \
                 last_value(x), max_by(time, x) FROM root.sg.d {clause}{}",
                group.text()
            );
            let expected: Vec<Vec<Cell>> = group
                .windows()
                .into_iter()
                .map(|w| model_row(&points, w, range))
                .collect();
            let o = one(&m, &text);
            assert_eq!(o.rows.len(), expected.len(), "round {round}: {text}");
            for (got, want) in o.rows.iter().zip(&expected) {
                assert_eq!(got, want, "round {round}: {text}");
            }
            // An expression over the same windows' calls.
            let text = format!(
                "SELECT count(x) * 2 + 1 FROM root.sg.d {clause}{}",
                group.text()
            );
            let o = one(&m, &text);
            let doubled: Vec<Vec<Cell>> = expected
                .iter()
                .map(|row| {
                    let Some(Value::Int64(n)) = row[1] else {
                        unreachable!("a count")
                    };
                    vec![row[0].clone(), Some(Value::Double((2 * n + 1) as f64))]
                })
                .collect();
            assert_eq!(o.rows, doubled, "round {round}: {text}");
        }
    }
}
