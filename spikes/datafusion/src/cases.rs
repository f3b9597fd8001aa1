//! The measured cases: each query on the lean path and on the DataFusion paths.

use std::hint::black_box;

use datafusion::common::{ParamValues, Result};

use crate::bench::Row;
use crate::df::{self, Split};
use crate::{lean, measure, measure_lean, totals, Ctx, SplitRow};

const GROUPBY: &str = "single-groupby-1-1-1";
const LASTPOINT: &str = "lastpoint";
const COUNT: &str = "count(one series)";

fn push(
    rows: &mut Vec<Row>,
    splits: &mut Vec<SplitRow>,
    query: &'static str,
    path: &str,
    s: Vec<Split>,
    staged: bool,
) {
    rows.push(Row {
        query,
        path: path.to_string(),
        samples: totals(&s),
    });
    if staged {
        splits.push(SplitRow {
            query,
            path: path.to_string(),
            splits: s,
        });
    }
}

/// The end-to-end `ctx.sql().collect()` time, as a `Split` with everything in `execute`.
fn naive(d: std::time::Duration) -> Split {
    Split {
        execute: d,
        ..Split::default()
    }
}

pub async fn groupby(c: &Ctx, rows: &mut Vec<Row>, splits: &mut Vec<SplitRow>) -> Result<()> {
    let p = |i: usize| c.params[i % c.params.len()];
    let name = |i: usize| c.data[p(i).host].name.as_str();
    let m = lean::metric_index("usage_user");
    if c.wants(GROUPBY, "lean") {
        let s = measure_lean(&c.a, |i| {
            let q = p(i);
            black_box(lean::single_groupby(&c.data[q.host], m, q.lo, q.hi, 60_000));
        });
        rows.push(Row {
            query: GROUPBY,
            path: "lean".into(),
            samples: s,
        });
    }

    if c.wants(GROUPBY, "DF (a) MemTable, ctx.sql") {
        let s = measure(&c.a, async |i| {
            let sql = df::sql_groupby(name(i), p(i).lo, p(i).hi);
            Ok(naive(df::run_naive(&c.mem_ctx, &sql).await?.0))
        })
        .await?;
        push(rows, splits, GROUPBY, "DF (a) MemTable, ctx.sql", s, false);
    }

    if c.wants(GROUPBY, "DF (b) region provider, ctx.sql") {
        let s = measure(&c.a, async |i| {
            let sql = df::sql_groupby(name(i), p(i).lo, p(i).hi);
            Ok(naive(df::run_naive(&c.region_ctx, &sql).await?.0))
        })
        .await?;
        push(
            rows,
            splits,
            GROUPBY,
            "DF (b) region provider, ctx.sql",
            s,
            false,
        );
    }

    if c.wants(GROUPBY, "DF (b) region provider, staged") {
        let s = measure(&c.a, async |i| {
            let sql = df::sql_groupby(name(i), p(i).lo, p(i).hi);
            Ok(df::run_sql(&c.region, &sql).await?.0)
        })
        .await?;
        push(
            rows,
            splits,
            GROUPBY,
            "DF (b) region provider, staged",
            s,
            true,
        );
    }

    let template = c
        .region
        .create_logical_plan(df::SQL_GROUPBY_PREPARED)
        .await?;
    if c.wants(GROUPBY, "DF (b) region provider, cached plan") {
        let s = measure(&c.a, async |i| {
            let params = df::groupby_params(name(i), p(i).lo, p(i).hi);
            Ok(df::run_prepared(&c.region, &template, params).await?.0)
        })
        .await?;
        push(
            rows,
            splits,
            GROUPBY,
            "DF (b) region provider, cached plan",
            s,
            true,
        );
    }
    Ok(())
}

pub async fn lastpoint(c: &Ctx, rows: &mut Vec<Row>, splits: &mut Vec<SplitRow>) -> Result<()> {
    if c.wants(LASTPOINT, "lean") {
        let s = measure_lean(&c.a, |_| {
            black_box(lean::lastpoint(&c.data));
        });
        rows.push(Row {
            query: LASTPOINT,
            path: "lean".into(),
            samples: s,
        });
    }

    let full = df::sql_lastpoint("cpu");
    if c.wants(LASTPOINT, "DF (a) MemTable, DISTINCT ON, full scan") {
        let s = measure(&c.a, async |_| {
            Ok(naive(df::run_naive(&c.mem_ctx, &full).await?.0))
        })
        .await?;
        push(
            rows,
            splits,
            LASTPOINT,
            "DF (a) MemTable, DISTINCT ON, full scan",
            s,
            false,
        );
    }

    if c.wants(LASTPOINT, "DF (b) region provider, DISTINCT ON, full scan") {
        let s = measure(&c.a, async |_| Ok(df::run_sql(&c.region, &full).await?.0)).await?;
        push(
            rows,
            splits,
            LASTPOINT,
            "DF (b) region provider, DISTINCT ON, full scan",
            s,
            true,
        );
    }

    let last = df::sql_lastpoint("cpu_last");
    if c.wants(LASTPOINT, "DF (b) region last-row view") {
        let s = measure(&c.a, async |_| Ok(df::run_sql(&c.region, &last).await?.0)).await?;
        push(
            rows,
            splits,
            LASTPOINT,
            "DF (b) region last-row view",
            s,
            true,
        );
    }

    let template = c.region.create_logical_plan(&last).await?;
    if c.wants(LASTPOINT, "DF (b) region last-row view, cached plan") {
        let s = measure(&c.a, async |_| {
            Ok(
                df::run_prepared(&c.region, &template, ParamValues::List(vec![]))
                    .await?
                    .0,
            )
        })
        .await?;
        push(
            rows,
            splits,
            LASTPOINT,
            "DF (b) region last-row view, cached plan",
            s,
            true,
        );
    }
    Ok(())
}

pub async fn count(c: &Ctx, rows: &mut Vec<Row>, splits: &mut Vec<SplitRow>) -> Result<()> {
    let p = |i: usize| c.params[i % c.params.len()];
    if c.wants(COUNT, "lean, 1 host series") {
        let s = measure_lean(&c.a, |i| {
            black_box(lean::count_from_stats(
                c.data[p(i).host].pages.iter().map(|pg| &pg.stats),
            ));
        });
        let pages = c.data[0].pages.len();
        rows.push(Row {
            query: COUNT,
            path: format!("lean, 1 host series ({pages} pages)"),
            samples: s,
        });
    }

    if c.wants(COUNT, "lean, long series") {
        let s = measure_lean(&c.a, |_| {
            black_box(lean::count_from_stats(&c.long));
        });
        let label = format!(
            "lean, long series ({} pts, {} pages)",
            lean::count_from_stats(&c.long),
            c.long.len()
        );
        rows.push(Row {
            query: COUNT,
            path: label,
            samples: s,
        });
    }

    if c.wants(COUNT, "DF (a) MemTable, ctx.sql") {
        let s = measure(&c.a, async |i| {
            Ok(naive(
                df::run_naive(&c.mem_ctx, &df::sql_count(&c.data[p(i).host].name))
                    .await?
                    .0,
            ))
        })
        .await?;
        push(rows, splits, COUNT, "DF (a) MemTable, ctx.sql", s, false);
    }

    if c.wants(COUNT, "DF (b) region provider (count from statistics)") {
        let s = measure(&c.a, async |i| {
            Ok(
                df::run_sql(&c.region, &df::sql_count(&c.data[p(i).host].name))
                    .await?
                    .0,
            )
        })
        .await?;
        push(
            rows,
            splits,
            COUNT,
            "DF (b) region provider (count from statistics)",
            s,
            true,
        );
    }
    Ok(())
}
