//! A Fencepost region as a DataFusion `TableProvider`: prunes by host and time range in
//! `scan` (filter pushdown), honours `limit`, and returns only the page batches in range.
//! `LastTable` is the region's last-row view (one row per series, from page statistics).

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, StringArray, TimestampMillisecondArray};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{Result, ScalarValue};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use crate::data::{cpu_schema, HostSeries, Page};

/// How the region reports time-bound pushdown: `Exact` slices rows precisely (DataFusion drops
/// its own filter); `Inexact` prunes whole pages only and DataFusion re-filters the rows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TimePushdown {
    Exact,
    Inexact,
}

#[derive(Debug, PartialEq)]
enum Pred {
    Host(String),
    /// Inclusive lower bound, ms.
    TimeFrom(i64),
    /// Exclusive upper bound, ms.
    TimeUntil(i64),
}

fn lit_ms(v: &ScalarValue) -> Option<i64> {
    match v {
        ScalarValue::TimestampMillisecond(Some(x), None) => Some(*x),
        ScalarValue::TimestampSecond(Some(x), None) => Some(x * 1000),
        ScalarValue::TimestampMicrosecond(Some(x), None) if x % 1000 == 0 => Some(x / 1000),
        ScalarValue::TimestampNanosecond(Some(x), None) if x % 1_000_000 == 0 => {
            Some(x / 1_000_000)
        }
        _ => None,
    }
}

fn lit_str(v: &ScalarValue) -> Option<String> {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::Utf8View(Some(s))
        | ScalarValue::LargeUtf8(Some(s)) => Some(s.clone()),
        ScalarValue::Dictionary(_, inner) => lit_str(inner),
        _ => None,
    }
}

/// `column op literal` (either way round) on `host` or `time`, else None.
fn classify(e: &Expr) -> Option<Pred> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
        return None;
    };
    let (col, op, lit) = match (left.as_ref(), right.as_ref()) {
        (Expr::Column(c), Expr::Literal(v, ..)) => (c, *op, v),
        (Expr::Literal(v, ..), Expr::Column(c)) => (c, op.swap()?, v),
        _ => return None,
    };
    match (col.name.as_str(), op) {
        ("host", Operator::Eq) => lit_str(lit).map(Pred::Host),
        ("time", Operator::GtEq) => lit_ms(lit).map(Pred::TimeFrom),
        ("time", Operator::Gt) => lit_ms(lit).map(|t| Pred::TimeFrom(t + 1)),
        ("time", Operator::Lt) => lit_ms(lit).map(Pred::TimeUntil),
        ("time", Operator::LtEq) => lit_ms(lit).map(|t| Pred::TimeUntil(t + 1)),
        _ => None,
    }
}

pub struct RegionTable {
    data: Arc<Vec<HostSeries>>,
    schema: SchemaRef,
    time_pushdown: TimePushdown,
}

impl std::fmt::Debug for RegionTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RegionTable({} series)", self.data.len())
    }
}

impl RegionTable {
    pub fn new(data: Arc<Vec<HostSeries>>, time_pushdown: TimePushdown) -> Self {
        RegionTable {
            data,
            schema: cpu_schema(),
            time_pushdown,
        }
    }

    fn series(&self, host: Option<&str>) -> &[HostSeries] {
        match host {
            None => &self.data,
            Some(h) => match self.data.binary_search_by(|s| s.name.as_str().cmp(h)) {
                Ok(i) => &self.data[i..=i],
                Err(_) => &[],
            },
        }
    }

    /// The rows of `page` in [lo, hi): the whole page, a zero-copy slice, or nothing.
    fn page_rows(&self, page: &Page, lo: i64, hi: i64) -> Option<RecordBatch> {
        let s = &page.stats;
        if s.max_time < lo || s.min_time >= hi {
            return None;
        }
        if self.time_pushdown == TimePushdown::Inexact || (s.min_time >= lo && s.max_time < hi) {
            return Some(page.batch.clone());
        }
        let a = page.times.partition_point(|&t| t < lo);
        let b = page.times.partition_point(|&t| t < hi);
        (b > a).then(|| page.batch.slice(a, b - a))
    }

    /// Batches of the given host (or all) within [lo, hi), at most `limit` rows.
    fn batches(
        &self,
        host: Option<&str>,
        lo: i64,
        hi: i64,
        limit: Option<usize>,
    ) -> Vec<RecordBatch> {
        let mut out = Vec::new();
        let mut rows = 0usize;
        for series in self.series(host) {
            let first = series.pages.partition_point(|p| p.stats.max_time < lo);
            for page in &series.pages[first..] {
                if page.stats.min_time >= hi {
                    break;
                }
                let Some(mut b) = self.page_rows(page, lo, hi) else {
                    continue;
                };
                if let Some(n) = limit {
                    if rows + b.num_rows() >= n {
                        b = b.slice(0, n - rows);
                        out.push(b);
                        return out;
                    }
                }
                rows += b.num_rows();
                out.push(b);
            }
        }
        out
    }
}

#[async_trait]
impl TableProvider for RegionTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match classify(f) {
                Some(Pred::Host(_)) => TableProviderFilterPushDown::Exact,
                Some(_) if self.time_pushdown == TimePushdown::Exact => {
                    TableProviderFilterPushDown::Exact
                }
                Some(_) => TableProviderFilterPushDown::Inexact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let (mut host, mut lo, mut hi) = (None, i64::MIN, i64::MAX);
        for p in filters.iter().filter_map(classify) {
            match p {
                // Two different host equalities select nothing; an empty name matches no series.
                Pred::Host(h) if host.as_ref().is_some_and(|x: &String| *x != h) => {
                    host = Some(String::new())
                }
                Pred::Host(h) => host = Some(h),
                Pred::TimeFrom(t) => lo = lo.max(t),
                Pred::TimeUntil(t) => hi = hi.min(t),
            }
        }
        let batches = self.batches(host.as_deref(), lo, hi, limit);
        let src =
            MemorySourceConfig::try_new(&[batches], self.schema.clone(), projection.cloned())?
                .with_limit(limit);
        Ok(DataSourceExec::from_data_source(src))
    }
}

/// The region's last-row view: one row per series, built at scan time from each series' last
/// page statistics (what IoTDB's `SELECT LAST` / a last-value cache answers from).
pub struct LastTable {
    data: Arc<Vec<HostSeries>>,
    schema: SchemaRef,
}

impl std::fmt::Debug for LastTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LastTable({} series)", self.data.len())
    }
}

impl LastTable {
    pub fn new(data: Arc<Vec<HostSeries>>) -> Self {
        LastTable {
            data,
            schema: cpu_schema(),
        }
    }

    fn batch(&self) -> Result<RecordBatch> {
        let last: Vec<_> = self
            .data
            .iter()
            .filter_map(|s| Some((&s.name, &s.pages.last()?.stats)))
            .collect();
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(
                last.iter().map(|(n, _)| n.as_str()),
            )),
            Arc::new(TimestampMillisecondArray::from_iter_values(
                last.iter().map(|(_, s)| s.max_time),
            )),
        ];
        for m in 0..10 {
            cols.push(Arc::new(Float64Array::from_iter_values(
                last.iter().map(|(_, s)| s.cols[m].last),
            )));
        }
        Ok(RecordBatch::try_new(self.schema.clone(), cols)?)
    }
}

#[async_trait]
impl TableProvider for LastTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
    fn table_type(&self) -> TableType {
        TableType::Base
    }
    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let src = MemorySourceConfig::try_new(
            &[vec![self.batch()?]],
            self.schema.clone(),
            projection.cloned(),
        )?
        .with_limit(limit);
        Ok(DataSourceExec::from_data_source(src))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, lit};

    #[test]
    fn classifies_host_and_time_bounds() {
        let t = |v| Expr::Literal(ScalarValue::TimestampMillisecond(Some(v), None), None);
        assert_eq!(
            classify(&col("host").eq(lit("host_1"))),
            Some(Pred::Host("host_1".into()))
        );
        assert_eq!(classify(&col("time").gt_eq(t(5))), Some(Pred::TimeFrom(5)));
        assert_eq!(classify(&t(5).gt(col("time"))), Some(Pred::TimeUntil(5)));
        assert_eq!(classify(&col("usage_user").gt(lit(1.0))), None);
    }
}
