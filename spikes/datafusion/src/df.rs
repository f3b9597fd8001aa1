//! The DataFusion path: sessions tuned for low latency, the tables, the SQL, and a runner that
//! times parse / optimize / physical planning / execution separately.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use datafusion::common::{ParamValues, Result, ScalarValue};
use datafusion::datasource::MemTable;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::{collect, displayable, ExecutionPlan};
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::data::{cpu_schema, HostSeries, METRICS};
use crate::region::{LastTable, RegionTable, TimePushdown};

/// A session configured for small, latency-bound queries: few partitions, no repartitioning.
pub fn session(target_partitions: usize) -> SessionContext {
    let cfg = SessionConfig::new()
        .with_target_partitions(target_partitions)
        .with_repartition_aggregations(false)
        .with_repartition_joins(false)
        .with_repartition_sorts(false)
        .with_repartition_windows(false)
        .with_repartition_file_scans(false)
        .with_information_schema(false);
    SessionContext::new_with_config(cfg)
}

/// (a) every page batch in one `MemTable` partition: no pruning, DataFusion filters all rows.
pub fn mem_context(data: &[HostSeries], partitions: usize) -> Result<SessionContext> {
    let ctx = session(partitions);
    let batches: Vec<RecordBatch> = data
        .iter()
        .flat_map(|s| s.pages.iter().map(|p| p.batch.clone()))
        .collect();
    ctx.register_table(
        "cpu",
        Arc::new(MemTable::try_new(cpu_schema(), vec![batches])?),
    )?;
    Ok(ctx)
}

/// (b) the region as a `TableProvider` (`cpu`) plus its last-row view (`cpu_last`).
pub fn region_context(
    data: Arc<Vec<HostSeries>>,
    partitions: usize,
    tp: TimePushdown,
) -> Result<SessionContext> {
    let ctx = session(partitions);
    ctx.register_table("cpu", Arc::new(RegionTable::new(data.clone(), tp)))?;
    ctx.register_table("cpu_last", Arc::new(LastTable::new(data)))?;
    Ok(ctx)
}

pub fn ts_literal(ms: i64) -> String {
    let t = chrono::DateTime::from_timestamp_millis(ms).expect("timestamp");
    t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.3f").to_string()
}

pub fn sql_groupby(host: &str, lo: i64, hi: i64) -> String {
    format!(
        "SELECT date_bin(INTERVAL '1 minute', time) AS minute, max(usage_user) AS max_usage_user \
         FROM cpu WHERE host = '{host}' AND time >= '{}' AND time < '{}' \
         GROUP BY minute ORDER BY minute",
        ts_literal(lo),
        ts_literal(hi)
    )
}

/// The same query with placeholders, for a cached logical plan.
pub const SQL_GROUPBY_PREPARED: &str =
    "SELECT date_bin(INTERVAL '1 minute', time) AS minute, max(usage_user) AS max_usage_user \
     FROM cpu WHERE host = $1 AND time >= $2 AND time < $3 GROUP BY minute ORDER BY minute";

pub fn groupby_params(host: &str, lo: i64, hi: i64) -> ParamValues {
    ParamValues::from(vec![
        ScalarValue::Utf8(Some(host.to_string())),
        ScalarValue::TimestampMillisecond(Some(lo), None),
        ScalarValue::TimestampMillisecond(Some(hi), None),
    ])
}

/// TSBS lastpoint as DataFusion runs it: `DISTINCT ON (host) … ORDER BY host, time DESC`.
pub fn sql_lastpoint(table: &str) -> String {
    let order = if table == "cpu" {
        "host, time DESC"
    } else {
        "host"
    };
    let distinct = if table == "cpu" {
        "DISTINCT ON (host) "
    } else {
        ""
    };
    format!(
        "SELECT {distinct}host, time, {} FROM {table} ORDER BY {order}",
        METRICS.join(", ")
    )
}

pub fn sql_count(host: &str) -> String {
    format!("SELECT count(*) FROM cpu WHERE host = '{host}'")
}

/// Time spent in each stage of one query.
#[derive(Clone, Copy, Debug, Default)]
pub struct Split {
    /// SQL parse + logical planning (zero for a cached plan; parameter binding there).
    pub parse: Duration,
    /// Analyzer + logical optimizer (filter / limit pushdown happen here).
    pub optimize: Duration,
    /// Physical planning, including `scan` and the physical optimizer.
    pub physical: Duration,
    pub execute: Duration,
}

impl Split {
    pub fn total(&self) -> Duration {
        self.parse + self.optimize + self.physical + self.execute
    }
}

/// Optimize, plan and execute an already-built logical plan, timing each stage.
pub async fn run_plan(
    state: &SessionState,
    plan: &LogicalPlan,
    mut split: Split,
) -> Result<(Split, Vec<RecordBatch>)> {
    let t = Instant::now();
    let optimized = state.optimize(plan)?;
    split.optimize = t.elapsed();
    let t = Instant::now();
    let physical = DefaultPhysicalPlanner::default()
        .create_physical_plan(&optimized, state)
        .await?;
    split.physical = t.elapsed();
    let t = Instant::now();
    let out = collect(physical, state.task_ctx()).await?;
    split.execute = t.elapsed();
    Ok((split, out))
}

/// SQL text to result, timing each stage.
pub async fn run_sql(state: &SessionState, sql: &str) -> Result<(Split, Vec<RecordBatch>)> {
    let t = Instant::now();
    let plan = state.create_logical_plan(sql).await?;
    let split = Split {
        parse: t.elapsed(),
        ..Split::default()
    };
    run_plan(state, &plan, split).await
}

/// A cached logical plan with placeholders: bind, then optimize / plan / execute.
pub async fn run_prepared(
    state: &SessionState,
    template: &LogicalPlan,
    params: ParamValues,
) -> Result<(Split, Vec<RecordBatch>)> {
    let t = Instant::now();
    let plan = template.clone().with_param_values(params)?;
    let split = Split {
        parse: t.elapsed(),
        ..Split::default()
    };
    run_plan(state, &plan, split).await
}

/// The end-to-end path an application would write: `ctx.sql(..).collect()`.
pub async fn run_naive(ctx: &SessionContext, sql: &str) -> Result<(Duration, Vec<RecordBatch>)> {
    let t = Instant::now();
    let out = ctx.sql(sql).await?.collect().await?;
    Ok((t.elapsed(), out))
}

/// The physical plan DataFusion chose, for the report.
pub async fn explain(state: &SessionState, sql: &str) -> Result<String> {
    let plan = state.create_logical_plan(sql).await?;
    let optimized = state.optimize(&plan)?;
    let physical: Arc<dyn ExecutionPlan> = DefaultPhysicalPlanner::default()
        .create_physical_plan(&optimized, state)
        .await?;
    Ok(format!("{}", displayable(physical.as_ref()).indent(true)))
}
