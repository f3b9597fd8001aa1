//! Before timing anything: every path must give the same answer, and the plans are shown.

use arrow::array::{Array, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use arrow::record_batch::RecordBatch;
use datafusion::common::{DataFusionError, Result};

use crate::df;
use crate::lean::{self, BucketRow};
use crate::Ctx;

fn fail(msg: String) -> DataFusionError {
    DataFusionError::Execution(format!("check failed: {msg}"))
}

/// Column `i` of every batch as i64 (timestamps, counts) or f64.
fn ints(batches: &[RecordBatch], i: usize) -> Result<Vec<i64>> {
    let mut out = Vec::new();
    for b in batches {
        let a = cast(b.column(i), &DataType::Int64)?;
        out.extend(a.as_primitive::<Int64Type>().values().iter().copied());
    }
    Ok(out)
}

fn floats(batches: &[RecordBatch], i: usize) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for b in batches {
        out.extend(
            b.column(i)
                .as_primitive::<Float64Type>()
                .values()
                .iter()
                .copied(),
        );
    }
    Ok(out)
}

fn buckets(batches: &[RecordBatch]) -> Result<Vec<BucketRow>> {
    Ok(ints(batches, 0)?
        .into_iter()
        .zip(floats(batches, 1)?)
        .collect())
}

async fn check_groupby(c: &Ctx) -> Result<()> {
    let m = lean::metric_index("usage_user");
    for q in c.params.iter().take(5) {
        let host = &c.data[q.host].name;
        let want = lean::single_groupby(&c.data[q.host], m, q.lo, q.hi, 60_000);
        if want.len() != 60 {
            return Err(fail(format!(
                "lean single-groupby gave {} rows, not 60",
                want.len()
            )));
        }
        let sql = df::sql_groupby(host, q.lo, q.hi);
        let template = c
            .region
            .create_logical_plan(df::SQL_GROUPBY_PREPARED)
            .await?;
        let runs = [
            ("MemTable", df::run_sql(&c.mem, &sql).await?.1),
            ("region", df::run_sql(&c.region, &sql).await?.1),
            (
                "region cached",
                df::run_prepared(&c.region, &template, df::groupby_params(host, q.lo, q.hi))
                    .await?
                    .1,
            ),
        ];
        for (path, out) in runs {
            if buckets(&out)? != want {
                return Err(fail(format!(
                    "single-groupby on {path} differs from lean ({host})"
                )));
            }
        }
    }
    Ok(())
}

async fn check_lastpoint(c: &Ctx) -> Result<()> {
    let want = lean::lastpoint(&c.data);
    for (path, state, table) in [
        ("MemTable", &c.mem, "cpu"),
        ("region", &c.region, "cpu"),
        ("last view", &c.region, "cpu_last"),
    ] {
        let out = df::run_sql(state, &df::sql_lastpoint(table)).await?.1;
        let times = ints(&out, 1)?;
        let mut ok = times.len() == want.len();
        for m in 0..10 {
            let vals = floats(&out, 2 + m)?;
            ok &= want
                .iter()
                .zip(times.iter().zip(&vals))
                .all(|(w, (t, v))| w.time == *t && w.values[m] == *v);
        }
        let hosts = out.iter().map(|b| b.column(0).len()).sum::<usize>();
        if !ok || hosts != c.data.len() {
            return Err(fail(format!("lastpoint on {path} differs from lean")));
        }
    }
    Ok(())
}

async fn check_count(c: &Ctx) -> Result<()> {
    let s = &c.data[c.params[0].host];
    let want = lean::count_from_stats(s.pages.iter().map(|p| &p.stats)) as i64;
    for (path, state) in [("MemTable", &c.mem), ("region", &c.region)] {
        let got = ints(&df::run_sql(state, &df::sql_count(&s.name)).await?.1, 0)?;
        if got != [want] {
            return Err(fail(format!("count on {path}: {got:?}, want {want}")));
        }
    }
    Ok(())
}

pub async fn run(c: &Ctx) -> Result<()> {
    check_groupby(c).await?;
    check_lastpoint(c).await?;
    check_count(c).await?;
    println!("checks: lean, MemTable and region provider agree on all three queries\n");
    Ok(())
}

/// Prints DataFusion's physical plans (which show what was pushed into the scan).
pub async fn explain(c: &Ctx) -> Result<()> {
    let q = c.params[0];
    let host = &c.data[q.host].name;
    let queries = [
        (
            "single-groupby, MemTable",
            &c.mem,
            df::sql_groupby(host, q.lo, q.hi),
        ),
        (
            "single-groupby, region",
            &c.region,
            df::sql_groupby(host, q.lo, q.hi),
        ),
        (
            "lastpoint, region full scan",
            &c.region,
            df::sql_lastpoint("cpu"),
        ),
        (
            "lastpoint, region last view",
            &c.region,
            df::sql_lastpoint("cpu_last"),
        ),
        ("count, region", &c.region, df::sql_count(host)),
    ];
    for (name, state, sql) in queries {
        println!("-- {name}\n{sql}\n{}", df::explain(state, &sql).await?);
    }
    Ok(())
}
