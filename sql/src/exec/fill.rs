//! `FILL(PREVIOUS | LINEAR | constant)`: the NULL cells of a result's value columns (every
//! column but `Time` and `Device`) filled in the result's order, each run of rows on its own (a
//! device's rows, aligned by device). PREVIOUS takes the column's last value above; LINEAR
//! interpolates numbers on the rows' times between the values above and below (integers
//! truncated, as Java's cast; nothing at either end, nothing without a time column); a constant
//! fills the columns whose type takes it without loss (`exec::convert`), as IoTDB's fill does.

use common::{DataType, Value};

use super::{convert, Cell, Outcome, DEVICE_COLUMN, TIME_COLUMN};
use crate::Fill;

/// Fills `outcome`'s NULL value cells, each device's rows on their own when it has a `Device`
/// column (all rows as one otherwise).
pub(super) fn fill(outcome: &mut Outcome, how: &Fill) {
    let values: Vec<usize> = outcome
        .columns
        .iter()
        .enumerate()
        .filter(|(_, name)| *name != TIME_COLUMN && *name != DEVICE_COLUMN)
        .map(|(i, _)| i)
        .collect();
    let time = outcome.columns.iter().position(|c| c == TIME_COLUMN);
    let Some(device) = outcome.columns.iter().position(|c| c == DEVICE_COLUMN) else {
        fill_rows(&mut outcome.rows, &outcome.types, &values, time, how);
        return;
    };
    let mut rest: &mut [Vec<Cell>] = &mut outcome.rows;
    while !rest.is_empty() {
        let run = rest
            .iter()
            .position(|r| r[device] != rest[0][device])
            .unwrap_or(rest.len());
        let (this, next) = rest.split_at_mut(run);
        fill_rows(this, &outcome.types, &values, time, how);
        rest = next;
    }
}

/// Fills the NULL cells of `rows` in the `values` columns (of `types`), `time` being the time
/// column if any.
pub(super) fn fill_rows(
    rows: &mut [Vec<Cell>],
    types: &[DataType],
    values: &[usize],
    time: Option<usize>,
    how: &Fill,
) {
    for &column in values {
        let data_type = types[column];
        match how {
            Fill::Previous => previous(rows, column),
            Fill::Linear => {
                if let Some(time) = time {
                    linear(rows, column, time, data_type);
                }
            }
            Fill::Constant(literal) => {
                if let Some(value) = convert(literal, data_type) {
                    for row in rows.iter_mut() {
                        row[column].get_or_insert_with(|| value.clone());
                    }
                }
            }
        }
    }
}

fn previous(rows: &mut [Vec<Cell>], column: usize) {
    let mut last: Cell = None;
    for row in rows {
        match &row[column] {
            Some(v) => last = Some(v.clone()),
            None => row[column] = last.clone(),
        }
    }
}

fn linear(rows: &mut [Vec<Cell>], column: usize, time: usize, data_type: DataType) {
    let point = |row: &[Cell]| -> Option<(f64, f64)> {
        let t = match row[time] {
            Some(Value::Int64(t)) => t as f64,
            _ => return None,
        };
        let v = match row[column].as_ref()? {
            Value::Int32(i) => f64::from(*i),
            Value::Int64(i) => *i as f64,
            Value::Float(f) => f64::from(*f),
            Value::Double(d) => *d,
            _ => return None,
        };
        Some((t, v))
    };
    let known: Vec<(usize, (f64, f64))> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, point(r)?)))
        .collect();
    for pair in known.windows(2) {
        let ((a, (ta, va)), (b, (tb, vb))) = (pair[0], pair[1]);
        for row in &mut rows[a + 1..b] {
            let Some(Value::Int64(t)) = row[time] else {
                continue;
            };
            let v = va + (vb - va) * (t as f64 - ta) / (tb - ta);
            row[column] = match data_type {
                DataType::Int32 => Some(Value::Int32(v as i32)),
                DataType::Int64 => Some(Value::Int64(v as i64)),
                DataType::Float => Some(Value::Float(v as f32)),
                DataType::Double => Some(Value::Double(v)),
                _ => None,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::memory_backend::{one, Memory};
    use super::super::*;

    fn column(o: &Outcome, i: usize) -> Vec<Cell> {
        o.rows.iter().map(|r| r[i].clone()).collect()
    }

    fn d(v: f64) -> Cell {
        Some(Value::Double(v))
    }

    /// root.sg.d1: x DOUBLE at 0 (0.0) and 30 (3.0), n INT64 at 0 (0) and 30 (30), t TEXT at 10
    /// ('a'); root.sg.d2: x at 20 (9.0).
    fn tree() -> Memory {
        let m = Memory::default();
        one(&m, "CREATE TIMESERIES root.sg.d1.n INT64");
        one(
            &m,
            "INSERT INTO root.sg.d1(time, x, n, t) VALUES (0, 0.0, 0, NULL), (10, NULL, NULL, 'a'), \
             (30, 3.0, 30, NULL)",
        );
        one(&m, "INSERT INTO root.sg.d2(time, x) VALUES (20, 9.0)");
        m
    }

    #[test]
    fn raw_rows_fill_previous_linear_and_constants() {
        let m = tree();
        let o = one(&m, "SELECT x, n, t FROM root.sg.d1 FILL(PREVIOUS)");
        assert_eq!(column(&o, 1), [d(0.0), d(0.0), d(3.0)]);
        assert_eq!(column(&o, 3)[2], Some(Value::Text("a".into())));
        let o = one(&m, "SELECT x, n, t FROM root.sg.d1 FILL(LINEAR)");
        assert_eq!(column(&o, 1), [d(0.0), d(1.0), d(3.0)]);
        assert_eq!(column(&o, 2)[1], Some(Value::Int64(10)));
        // A constant fills the columns that take it: 7 the numbers, not the text.
        let o = one(&m, "SELECT x, t FROM root.sg.d1 FILL(7)");
        assert_eq!(column(&o, 1), [d(0.0), d(7.0), d(3.0)]);
        assert_eq!(column(&o, 2)[0], None);
        let o = one(&m, "SELECT x, t FROM root.sg.d1 FILL('z')");
        let z = Some(Value::Text("z".into()));
        assert_eq!(column(&o, 2), [z.clone(), Some(Value::Text("a".into())), z]);
        assert_eq!(column(&o, 1)[1], None, "text fills no number");
        // FILL before LIMIT and OFFSET: the value above the window still fills it.
        let o = one(
            &m,
            "SELECT x, t FROM root.sg.d1 FILL(PREVIOUS) LIMIT 1 OFFSET 1",
        );
        assert_eq!(column(&o, 1), [d(0.0)]);
        // Aligned by device, each device on its own: d2's first row has nothing above.
        let o = one(
            &m,
            "SELECT x, t FROM root.sg.d1, root.sg.d2 ORDER BY TIME DESC FILL(PREVIOUS) \
             ALIGN BY DEVICE",
        );
        assert_eq!(column(&o, 2), [d(3.0), d(3.0), d(0.0), d(9.0)]);
        let a = Some(Value::Text("a".into()));
        assert_eq!(column(&o, 3), [None, a.clone(), a, None]);
    }

    #[test]
    fn empty_windows_fill() {
        let m = tree();
        let o = one(
            &m,
            "SELECT avg(x), count(x) FROM root.sg.d1 GROUP BY ([0, 40), 10ms) FILL(PREVIOUS)",
        );
        assert_eq!(column(&o, 1), [d(0.0), d(0.0), d(0.0), d(3.0)]);
        assert_eq!(
            column(&o, 2)[1],
            Some(Value::Int64(0)),
            "a count is never NULL"
        );
        let o = one(
            &m,
            "SELECT avg(x) FROM root.sg.d1 GROUP BY ([0, 40), 10ms) FILL(LINEAR)",
        );
        assert_eq!(column(&o, 1), [d(0.0), d(1.0), d(2.0), d(3.0)]);
        let o = one(
            &m,
            "SELECT max_value(x) FROM root.sg.* GROUP BY ([0, 40), 10ms) FILL(-1) LIMIT 5 \
             ALIGN BY DEVICE",
        );
        assert_eq!(column(&o, 2), [d(0.0), d(-1.0), d(-1.0), d(3.0), d(-1.0)]);
    }
}
