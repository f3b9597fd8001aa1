//! Select lists with expressions (`SELECT s1 + s2, -s1 * 2 AS x FROM root.sg.*`).
//!
//! Aligned by time, an item is a column per combination of the series its names read under
//! FROM — IoTDB's expansion, so `a + b` over devices d1 and d2 is four columns, `d1.a + d1.b`,
//! `d1.a + d2.b`, `d2.a + d1.b`, `d2.a + d2.b`, the left operand's series varying slowest —
//! named as IoTDB names them (`root.sg.d1.s1 + 2`; an operand in parentheses only where its
//! operator binds less tightly than the one above it). Aligned by device, an item is one
//! column, named by its measurements (`s1 + 2`), over each device's own series.
//!
//! An expression is NULL in a row where an operand is NULL, and a row whose items are all NULL
//! is not shown ([`Cut::Compute`]), as IoTDB shows none. Arithmetic answers DOUBLE, `-x` and a
//! bare name their operand's type, a condition BOOLEAN ([`Scalar`]).
//!
//! Expressions over aggregations (`count(s1) + 1`, `sum(s1) / count(s1)`) are computed from
//! the finished result of their calls ([`aggregates`]): a call names the result's columns of
//! its function and measurement, expanded and named as above, and every row (window) is kept.

use common::{DataType, StatusCode, Value};

use super::analyze::{self, by_device, Series};
use super::cursor::ResultCursor;
use super::filter::{Lookup, Scalar};
use super::join::with_referenced;
use super::query::{referenced_series, RawSelect};
use super::rows::{Cut, Part, RawRows, Shape};
use super::{Backend, ExecError, ExecResult, Outcome, DEVICE_COLUMN, TIME_COLUMN};
use crate::expr::{BinaryOp, Expr};
use crate::{SelectItem, QUERY_SERIES_MAX};

/// `Time` and the items' columns (ALIGN BY DEVICE: `Time`, `Device`, a column per item), the
/// rows `filter` keeps, read as the cursor is asked for them.
pub(super) async fn open<B: Backend>(
    backend: &B,
    query: &RawSelect<'_>,
    names: &[String],
    items: &[SelectItem],
) -> ExecResult<ResultCursor> {
    let referenced = match query.filter {
        Some(expr) => referenced_series(backend, query.from, expr).await?,
        None => Vec::new(),
    };
    let by_name = analyze::expand(backend, query.from, names).await?;
    let series_of = |name: &str| -> &[Series] {
        let at = names.iter().position(|n| n == name);
        at.map_or(&[], |i| &by_name[i])
    };
    if query.align_by_device {
        let items = query.rows.series(items.to_vec());
        let devices = by_device(by_name.iter().flatten().cloned().collect());
        return by_device_rows(devices, &items, &referenced, query);
    }
    let mut outputs = Vec::new();
    for item in items {
        expand_item(item, &series_of, &mut outputs)?;
    }
    let outputs = query.rows.series(outputs);
    let mut read: Vec<Series> = Vec::new();
    for output in &outputs {
        read = with_referenced(read, &output.series);
    }
    let read = with_referenced(read, &referenced);
    let mut header = vec![(TIME_COLUMN.to_string(), DataType::Int64)];
    let mut scalars = Vec::with_capacity(outputs.len());
    for output in &outputs {
        let lookup = |name: &str| {
            let s = output.series.iter().find(|s| s.label == name)?;
            cell_of(&read, s)
        };
        let scalar = Scalar::bind(output.expr, &lookup)?;
        header.push((output.column.clone(), scalar.data_type()));
        scalars.push(scalar);
    }
    let mut parts = Vec::new();
    if !scalars.is_empty() {
        parts.push(computed_part(
            read,
            scalars,
            query,
            &referenced,
            Shape::Time,
        )?);
    }
    let rows = RawRows::new(parts, query.range, query.rows, query.fill.cloned());
    Ok(ResultCursor::raw(header, rows))
}

/// The result of an aggregate query's `outputs` (expressions over its calls), computed from
/// `outcome`, the result of the calls: its `Time` and `Device` columns, then the outputs'.
pub(super) fn aggregates(outcome: Outcome, outputs: &[SelectItem]) -> ExecResult<Outcome> {
    let lead = outcome
        .columns
        .iter()
        .take_while(|c| *c == TIME_COLUMN || *c == DEVICE_COLUMN)
        .count();
    let mut header: Vec<(String, DataType)> = outcome.columns[..lead]
        .iter()
        .cloned()
        .zip(outcome.types.iter().copied())
        .collect();
    let mut scalars = Vec::new();
    for item in outputs {
        let calls: Vec<String> = item
            .expr
            .calls()
            .into_iter()
            .map(|(function, arg)| format!("{function}({arg})"))
            .collect();
        let lists: Vec<Vec<usize>> = item
            .expr
            .calls()
            .iter()
            .map(|(function, arg)| {
                let (exact, prefix, suffix) = (
                    format!("{function}({arg})"),
                    format!("{function}("),
                    format!(".{arg})"),
                );
                (lead..outcome.columns.len())
                    .filter(|&i| {
                        let c = &outcome.columns[i];
                        *c == exact
                            || c.starts_with(&prefix) && (arg == "*" || c.ends_with(&suffix))
                    })
                    .collect()
            })
            .collect();
        let combinations = checked_combinations(&lists, scalars.len())?;
        if let Some(alias) = item.alias.as_ref().filter(|_| combinations > 1) {
            return Err(analyze::alias_of_many(alias, combinations));
        }
        for k in 0..combinations {
            let picked = combination(&lists, k);
            let lookup = |name: &str| {
                let i = calls.iter().position(|c| c == name)?;
                Some((picked[i], outcome.types[picked[i]]))
            };
            let scalar = Scalar::bind(&item.expr, &lookup)?;
            let column = match &item.alias {
                Some(alias) => alias.clone(),
                None => column_text(&item.expr, &|name| {
                    let i = calls.iter().position(|c| c == name);
                    i.map_or_else(|| name.to_string(), |i| outcome.columns[picked[i]].clone())
                }),
            };
            header.push((column, scalar.data_type()));
            scalars.push(scalar);
        }
    }
    let rows = outcome
        .rows
        .iter()
        .map(|row| {
            let mut cells = row[..lead].to_vec();
            cells.extend(scalars.iter().map(|s| s.eval(row)));
            cells
        })
        .collect();
    Ok(Outcome::query(header, rows))
}

/// How many combinations of one element of each list there are; 700 when `so_far` columns
/// and they are more than [`QUERY_SERIES_MAX`].
fn checked_combinations<T>(lists: &[Vec<T>], so_far: usize) -> ExecResult<usize> {
    let combinations = lists
        .iter()
        .fold(1usize, |n, list| n.saturating_mul(list.len()));
    if combinations > QUERY_SERIES_MAX.saturating_sub(so_far) {
        return Err(ExecError::refused(
            StatusCode::IllegalParameter,
            format!(
                "the select list expands to more than {QUERY_SERIES_MAX} columns; narrow its \
                 FROM patterns or its expressions"
            ),
        ));
    }
    Ok(combinations)
}

/// The `k`-th combination of one element of each list, the first list's varying slowest.
fn combination<T: Clone>(lists: &[Vec<T>], k: usize) -> Vec<T> {
    let mut rest = k;
    let mut picked = Vec::with_capacity(lists.len());
    for list in lists.iter().rev() {
        picked.push(list[rest % list.len()].clone());
        rest /= list.len();
    }
    picked.reverse();
    picked
}

/// One column of a result aligned by time: an item over one combination of series.
struct Output<'q> {
    expr: &'q Expr,
    /// One series per name of `expr`, labelled by the name.
    series: Vec<Series>,
    column: String,
}

/// The columns of `item`: one per combination of its names' series (none when a name reads
/// none). 700 when an alias would name several, or the columns grow past
/// [`QUERY_SERIES_MAX`].
fn expand_item<'q>(
    item: &'q SelectItem,
    series_of: &dyn Fn(&str) -> &'q [Series],
    outputs: &mut Vec<Output<'q>>,
) -> ExecResult<()> {
    let names = item.expr.columns();
    let lists: Vec<Vec<Series>> = names.iter().map(|n| series_of(n).to_vec()).collect();
    let combinations = checked_combinations(&lists, outputs.len())?;
    if let Some(alias) = item.alias.as_ref().filter(|_| combinations > 1) {
        return Err(analyze::alias_of_many(alias, combinations));
    }
    for k in 0..combinations {
        let series = combination(&lists, k);
        let column = match (&item.alias, &item.expr) {
            (Some(alias), _) => alias.clone(),
            (None, Expr::Column(_)) => series[0].column_name(),
            (None, expr) => column_text(expr, &|name| {
                let s = series.iter().find(|s| s.label == name);
                s.map_or_else(|| name.to_string(), Series::path)
            }),
        };
        outputs.push(Output {
            expr: &item.expr,
            series,
            column,
        });
    }
    Ok(())
}

/// A part that reads `read`, computes `scalars` over its rows and keeps those the query's
/// filter (over `referenced`) keeps.
fn computed_part(
    read: Vec<Series>,
    scalars: Vec<Scalar>,
    query: &RawSelect<'_>,
    referenced: &[Series],
    shape: Shape,
) -> ExecResult<Part> {
    let filter = match query.filter {
        Some(expr) => Some(super::filter::Filter::over(expr, &read, referenced)?),
        None => None,
    };
    Ok(Part {
        read,
        cut: Cut::Compute(scalars),
        filter,
        shape,
    })
}

/// The cell index and type of `s` in rows that read `read`.
fn cell_of(read: &[Series], s: &Series) -> Option<(usize, DataType)> {
    let at = read
        .iter()
        .position(|r| r.device == s.device && r.measurement == s.measurement)?;
    Some((at + 1, s.data_type))
}

/// ALIGN BY DEVICE: a part per device that has a series an item names, its items bound to
/// that device's series (a name it lacks is NULL). 700 when an item's type differs between
/// devices.
fn by_device_rows(
    devices: std::collections::BTreeMap<String, Vec<Series>>,
    items: &[SelectItem],
    referenced: &[Series],
    query: &RawSelect<'_>,
) -> ExecResult<ResultCursor> {
    let mut types: Vec<Option<(DataType, String)>> = vec![None; items.len()];
    let mut parts = Vec::new();
    for (device, series) in devices {
        let named: Vec<Series> = series
            .into_iter()
            .filter(|s| items.iter().any(|i| i.expr.columns().contains(&s.label)))
            .collect();
        if named.is_empty() {
            continue;
        }
        let referenced: Vec<Series> = referenced
            .iter()
            .filter(|s| s.device == device)
            .cloned()
            .collect();
        let read = with_referenced(named.clone(), &referenced);
        let lookup = |name: &str| {
            let s = named.iter().find(|s| s.label == name)?;
            cell_of(&read, s)
        };
        let scalars = bind_items(items, &lookup, &device, &mut types)?;
        let shape = Shape::Device {
            device: Value::Text(device),
            slots: (0..items.len()).collect(),
            width: items.len(),
        };
        parts.push(computed_part(read, scalars, query, &referenced, shape)?);
    }
    let mut header = vec![
        (TIME_COLUMN.to_string(), DataType::Int64),
        (DEVICE_COLUMN.to_string(), DataType::Text),
    ];
    for (item, seen) in items.iter().zip(types) {
        let name = match &item.alias {
            Some(alias) => alias.clone(),
            None => column_text(&item.expr, &|name| name.to_string()),
        };
        header.push((name, seen.map_or(DataType::Double, |(t, _)| t)));
    }
    let rows = RawRows::new(parts, query.range, query.rows, query.fill.cloned());
    Ok(ResultCursor::raw(header, rows))
}

/// `items` bound over one device's row layout; each item's type is checked against the one
/// `types` holds from an earlier device (700 when they differ), or recorded there.
fn bind_items(
    items: &[SelectItem],
    lookup: &Lookup<'_>,
    device: &str,
    types: &mut [Option<(DataType, String)>],
) -> ExecResult<Vec<Scalar>> {
    let mut scalars = Vec::with_capacity(items.len());
    for (item, seen) in items.iter().zip(types.iter_mut()) {
        let scalar = Scalar::bind(&item.expr, lookup)?;
        if super::filter::type_of(&item.expr, lookup).is_some() {
            let t = scalar.data_type();
            match seen {
                Some((earlier, other)) if *earlier != t => {
                    return Err(ExecError::refused(
                        StatusCode::IllegalParameter,
                        format!(
                            "ALIGN BY DEVICE: {} is {} on {device} but {} on {other}; a column \
                             takes one type",
                            item.expr,
                            t.name(),
                            earlier.name()
                        ),
                    ));
                }
                Some(_) => {}
                None => *seen = Some((t, device.to_string())),
            }
        }
        scalars.push(scalar);
    }
    Ok(scalars)
}

/// How tightly an expression binds, as IoTDB ranks it for printing: a name or constant most,
/// then `-x`, `* / %`, `+ -`, the predicates, NOT, AND, OR.
fn priority(expr: &Expr) -> u8 {
    match expr {
        Expr::Time | Expr::Column(_) | Expr::Literal(_) | Expr::Call { .. } => 9,
        Expr::Negate(_) => 8,
        Expr::Binary { op, .. } => match op {
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 7,
            BinaryOp::Add | BinaryOp::Sub => 6,
            BinaryOp::And => 2,
            BinaryOp::Or => 1,
            _ => 5,
        },
        Expr::Between { .. } | Expr::InList { .. } | Expr::IsNull { .. } | Expr::Match { .. } => 4,
        Expr::Not(_) => 3,
    }
}

/// The column name IoTDB gives `expr`, its names written by `name` (a series' path, or the
/// measurement aligned by device).
pub(super) fn column_text(expr: &Expr, name: &dyn Fn(&str) -> String) -> String {
    let operand = |e: &Expr, parent: u8| {
        let text = column_text(e, name);
        if priority(e) < parent {
            format!("({text})")
        } else {
            text
        }
    };
    match expr {
        Expr::Column(n) => name(n),
        Expr::Call { function, arg } => name(&format!("{function}({arg})")),
        Expr::Negate(e) => format!("-{}", operand(e, 9)),
        Expr::Not(e) => format!("!{}", operand(e, 9)),
        Expr::Binary { op, left, right } => {
            let p = priority(expr);
            format!("{} {op} {}", operand(left, p), operand(right, p))
        }
        other => other.rename_columns(&|n| name(n)).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Literal;

    #[test]
    fn column_names_put_parentheses_where_iotdb_does() {
        let c = |n: &str| Expr::Column(n.into());
        let two = Expr::Literal(Literal::Integer(2));
        let path = |n: &str| format!("root.sg.d1.{n}");
        let sum = Expr::binary(BinaryOp::Add, c("s1"), c("s2"));
        assert_eq!(column_text(&sum, &path), "root.sg.d1.s1 + root.sg.d1.s2");
        let e = Expr::binary(BinaryOp::Mul, sum.clone(), two.clone());
        assert_eq!(
            column_text(&e, &path),
            "(root.sg.d1.s1 + root.sg.d1.s2) * 2"
        );
        let e = Expr::binary(
            BinaryOp::Add,
            Expr::binary(BinaryOp::Mul, c("s1"), two),
            c("s2"),
        );
        assert_eq!(column_text(&e, &path), "root.sg.d1.s1 * 2 + root.sg.d1.s2");
        let e = Expr::Negate(Box::new(sum));
        assert_eq!(column_text(&e, &|n| n.to_string()), "-(s1 + s2)");
        assert_eq!(
            column_text(&Expr::Negate(Box::new(c("s1"))), &path),
            "-root.sg.d1.s1"
        );
    }
}
