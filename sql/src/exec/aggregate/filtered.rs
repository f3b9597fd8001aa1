//! Aggregates under a value filter: the series aggregated and the filter's are joined on time
//! and read raw ([`join::scan`]), and each kept row's values are folded into its window's
//! partials here. Aligned by time, one scan covers every device and the filter is bound as for
//! a raw query; aligned by device, each device is scanned with its own columns.

use common::aggregate::Partial;
use common::Value;

use super::super::analyze::Series;
use super::super::budget::ResultCharge;
use super::super::filter::Filter;
use super::super::{join, query, Backend, ExecResult};
use super::{partial_heap_bytes, partials_bytes, AggregateQuery, Cut, Plan};
use crate::expr::Expr;
use crate::TimeRange;

/// Each device's measurements' partial in each row (`[device][measurement][row]`), of the rows
/// `expr` keeps; what they hold is charged to `charge` and added to `held`.
pub(super) async fn fetch<B: Backend>(
    backend: &B,
    plan: &Plan,
    query: &AggregateQuery<'_>,
    expr: &Expr,
    cut: &Cut,
    charge: &mut ResultCharge,
    held: &mut usize,
) -> ExecResult<Vec<Vec<Vec<Partial>>>> {
    let rows = cut.call_rows();
    let series: usize = plan.reads.iter().map(|(_, m)| m.len()).sum();
    let fixed = partials_bytes(rows, series);
    charge.add(fixed)?;
    *held += fixed;
    let mut partials: Vec<Vec<Vec<Partial>>> = plan
        .reads
        .iter()
        .map(|(_, m)| vec![vec![Partial::default(); rows]; m.len()])
        .collect();
    let Some(windows) = cut.call() else {
        return Ok(partials);
    };
    let referenced = query::referenced_series(backend, query.from, expr).await?;
    let scopes: Vec<Vec<usize>> = if query.align_by_device {
        (0..plan.reads.len()).map(|d| vec![d]).collect()
    } else {
        vec![(0..plan.reads.len()).collect()]
    };
    let span = windows.range();
    let range = TimeRange {
        from: span.start,
        to: span.end,
    };
    for scope in scopes {
        // Cell i + 1 of a row is read[i]; the first `places.len()` are the aggregated series.
        let mut read: Vec<Series> = Vec::new();
        let mut places: Vec<(usize, usize)> = Vec::new();
        for &d in &scope {
            for (m, s) in plan.series_of(d).into_iter().enumerate() {
                places.push((d, m));
                read.push(s);
            }
        }
        let refs: Vec<Series> = referenced
            .iter()
            .filter(|r| {
                !query.align_by_device || scope.iter().any(|&d| plan.reads[d].0 == r.device)
            })
            .cloned()
            .collect();
        let read = join::with_referenced(read, &refs);
        let filter = Filter::over(expr, &read, &refs)?;
        let fold = |row: Vec<_>, _: &mut ResultCharge| {
            let Some(Some(Value::Int64(time))) = row.first() else {
                unreachable!("a joined row starts with its time");
            };
            if let Some(w) = windows.index(*time) {
                for (cell, &(d, m)) in row[1..].iter().zip(&places) {
                    if let Some(value) = cell {
                        partials[d][m][w].push(*time, value);
                    }
                }
            }
            Ok(true)
        };
        join::scan(
            backend,
            &read,
            range,
            usize::MAX,
            Some(filter),
            charge,
            fold,
        )
        .await?;
    }
    let heap: usize = partials
        .iter()
        .flatten()
        .flatten()
        .map(partial_heap_bytes)
        .sum();
    charge.add(heap)?;
    *held += heap;
    Ok(partials)
}
