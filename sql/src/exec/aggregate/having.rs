//! HAVING: a condition on an aggregate result's rows, naming aggregations (`count(s1) > 3`).
//! A call is the result's column of that function and measurement: `count(root.sg.d1.s1)`
//! aligned by time or by level, `count(s1)` aligned by device; `count(*)` every column of the
//! function. A call that names several columns (a pattern's series) must hold on each, as
//! IoTDB ANDs a pattern's expansions; several such calls together are not run yet (300). A call
//! that names no column is NULL.

use common::StatusCode;

use super::super::filter::{Filter, Lookup};
use super::super::{ExecError, ExecResult, Outcome};
use crate::expr::Expr;

/// Keeps the rows of `outcome` for which `condition` is true.
pub(super) fn keep(outcome: &mut Outcome, condition: &Expr) -> ExecResult<()> {
    let calls = condition.calls();
    let columns_of = |(function, arg): &(String, String)| -> Vec<usize> {
        let exact = format!("{function}({arg})");
        let suffix = format!(".{arg})");
        let prefix = format!("{function}(");
        outcome
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                **c == exact || c.starts_with(&prefix) && (arg == "*" || c.ends_with(&suffix))
            })
            .map(|(i, _)| i)
            .collect()
    };
    let matched: Vec<Vec<usize>> = calls.iter().map(columns_of).collect();
    let spread = matched.iter().filter(|m| m.len() > 1).count();
    if spread > 0 && calls.len() > 1 {
        return Err(ExecError::refused(
            StatusCode::UnsupportedOperation,
            "a HAVING clause naming several aggregations of several series is not supported \
             yet; add ALIGN BY DEVICE or GROUP BY LEVEL, or name one series",
        ));
    }
    let types = &outcome.types;
    // One binding per column of the call that names several, else one.
    let bindings: Vec<Box<Lookup<'_>>> = match matched.iter().position(|m| m.len() > 1) {
        Some(spread) => matched[spread]
            .iter()
            .map(|&column| {
                Box::new(move |_: &str| Some((column, types[column]))) as Box<Lookup<'_>>
            })
            .collect(),
        None => {
            let calls = &calls;
            let matched = &matched;
            vec![Box::new(move |name: &str| {
                let i = calls
                    .iter()
                    .position(|(f, a)| format!("{f}({a})") == name)?;
                let column = *matched[i].first()?;
                Some((column, types[column]))
            })]
        }
    };
    let filter = Filter::bind(condition, bindings.iter().map(|b| &**b))?;
    outcome.rows.retain(|row| filter.keeps(row));
    Ok(())
}
