//! Rendering: IoTDB-cli-like boxed tables and `Msg:` lines, or one JSON object per statement.
//!
//! JSON: `{"status": <IoTDB code>, "message": "...", "columns": [...], "rows": [[...], ...]}` on
//! its own line of stdout, for successes and failures alike; `columns` and `rows` are empty
//! arrays for a statement that is no query. Values are JSON numbers, strings, booleans or null;
//! `Time` is an integer of milliseconds.

use std::io::{self, Write};

use common::{StatusCode, Value};
use serde_json::json;

use crate::exec::{Cell, Outcome, OutcomeKind};

/// IoTDB's message for a statement that succeeded.
pub const SUCCESS_MESSAGE: &str = "The statement is executed successfully.";

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Boxed tables on stdout, `Msg: <code>: <message>` on stderr for failures.
    Table,
    /// One JSON object per statement on stdout.
    Json,
}

/// Prints a statement's success.
pub fn success(format: Format, outcome: &Outcome) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match format {
        Format::Json => writeln!(out, "{}", json_success(outcome)),
        Format::Table => match outcome.kind {
            OutcomeKind::Done => writeln!(out, "Msg: {SUCCESS_MESSAGE}"),
            OutcomeKind::Query => out.write_all(table(&outcome.columns, &outcome.rows).as_bytes()),
        },
    }?;
    out.flush()
}

/// Prints a statement's failure: JSON on stdout, or `Msg: <code>: <message>` on stderr.
pub fn failure(format: Format, code: i32, message: &str) -> io::Result<()> {
    match format {
        Format::Json => {
            let mut out = io::stdout().lock();
            writeln!(out, "{}", json_failure(code, message))?;
            out.flush()
        }
        Format::Table => writeln!(io::stderr().lock(), "Msg: {code}: {message}"),
    }
}

/// The JSON object of a success.
pub fn json_success(outcome: &Outcome) -> serde_json::Value {
    let rows: Vec<Vec<serde_json::Value>> = outcome
        .rows
        .iter()
        .map(|row| row.iter().map(json_cell).collect())
        .collect();
    json!({
        "status": StatusCode::Success.code(),
        "message": SUCCESS_MESSAGE,
        "columns": outcome.columns,
        "rows": rows,
    })
}

/// The JSON object of a failure.
pub fn json_failure(code: i32, message: &str) -> serde_json::Value {
    json!({
        "status": code,
        "message": message,
        "columns": [],
        "rows": [],
    })
}

/// A cell as JSON; a FLOAT goes through its shortest decimal form so `1.1` stays `1.1`, and a
/// non-finite number (which JSON lacks) becomes a string, a DATE `"2024-01-05"` and a BLOB
/// `"0x0a1b"`.
pub fn json_cell(cell: &Cell) -> serde_json::Value {
    let number = |v: f64, text: String| {
        serde_json::Number::from_f64(v).map_or(serde_json::Value::String(text), Into::into)
    };
    match cell {
        None => serde_json::Value::Null,
        Some(Value::Boolean(b)) => (*b).into(),
        Some(Value::Int32(i)) => (*i).into(),
        Some(Value::Int64(i) | Value::Timestamp(i)) => (*i).into(),
        Some(Value::Float(f)) => {
            let text = f.to_string();
            number(text.parse().unwrap_or(f64::from(*f)), text)
        }
        Some(Value::Double(d)) => number(*d, d.to_string()),
        Some(Value::Text(s) | Value::String(s)) => s.clone().into(),
        Some(v @ (Value::Date(_) | Value::Blob(_))) => v.to_string().into(),
    }
}

/// A cell as the table shows it: `null`, and floats always with a fraction or exponent (`2.0`).
pub fn cell_text(cell: &Cell) -> String {
    match cell {
        None => "null".into(),
        Some(Value::Float(f)) => format!("{f:?}"),
        Some(Value::Double(d)) => format!("{d:?}"),
        Some(v) => v.to_string(),
    }
}

/// IoTDB's boxed table, values right-aligned, then `Total line number = N` (after `Empty set.`
/// when there are no rows).
pub fn table(columns: &[String], rows: &[Vec<Cell>]) -> String {
    let mut out = boxed(columns, rows);
    out.push_str(&footer(rows.len()));
    out
}

/// What follows a table's rows: `Total line number = N`, after `Empty set.` when none.
pub fn footer(rows: usize) -> String {
    match rows {
        0 => "Empty set.\nTotal line number = 0\n".to_string(),
        n => format!("Total line number = {n}\n"),
    }
}

/// The boxed table of `rows` under `columns` (the header alone when there are none).
pub fn boxed(columns: &[String], rows: &[Vec<Cell>]) -> String {
    let texts: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(cell_text).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            texts
                .iter()
                .map(|r| r[i].chars().count())
                .chain([c.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    if !columns.is_empty() {
        let border = border(&widths);
        out.push_str(&border);
        out.push_str(&line(columns, &widths));
        out.push_str(&border);
        for row in &texts {
            out.push_str(&line(row, &widths));
        }
        if !texts.is_empty() {
            out.push_str(&border);
        }
    }
    out
}

fn border(widths: &[usize]) -> String {
    let mut s = String::from("+");
    for w in widths {
        s.push_str(&"-".repeat(*w));
        s.push('+');
    }
    s.push('\n');
    s
}

fn line(cells: &[String], widths: &[usize]) -> String {
    let mut s = String::from("|");
    for (cell, w) in cells.iter().zip(widths) {
        s.push_str(&format!("{cell:>w$}|"));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::DataType;

    #[test]
    fn boxed_table_right_aligned_with_nulls() {
        let columns = vec!["Time".to_string(), "root.sg.d1.s1".to_string()];
        let rows = vec![
            vec![Some(Value::Int64(1)), Some(Value::Double(2.0))],
            vec![Some(Value::Int64(20)), None],
        ];
        assert_eq!(
            table(&columns, &rows),
            "+----+-------------+\n\
             |Time|root.sg.d1.s1|\n\
             +----+-------------+\n\
             |   1|          2.0|\n\
             |  20|         null|\n\
             +----+-------------+\n\
             Total line number = 2\n"
        );
    }

    #[test]
    fn empty_result_prints_the_header_and_empty_set() {
        assert_eq!(
            table(&["Database".to_string()], &[]),
            "+--------+\n|Database|\n+--------+\nEmpty set.\nTotal line number = 0\n"
        );
        assert_eq!(table(&[], &[]), "Empty set.\nTotal line number = 0\n");
    }

    #[test]
    fn json_values_keep_their_types() {
        let outcome = Outcome {
            kind: OutcomeKind::Query,
            columns: vec!["a".into()],
            // A table of mixed cells, to see each kind's JSON (the executor never makes one).
            types: vec![DataType::Text],
            rows: vec![vec![
                Some(Value::Int64(-3)),
                Some(Value::Float(1.1)),
                Some(Value::Double(f64::NAN)),
                Some(Value::Boolean(true)),
                Some(Value::Text("t".into())),
                None,
            ]],
        };
        assert_eq!(
            json_success(&outcome),
            json!({
                "status": 200,
                "message": SUCCESS_MESSAGE,
                "columns": ["a"],
                "rows": [[-3, 1.1, "NaN", true, "t", null]],
            })
        );
        assert_eq!(
            json_failure(614, "bad"),
            json!({"status": 614, "message": "bad", "columns": [], "rows": []})
        );
    }
}
