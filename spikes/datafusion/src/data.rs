//! TSBS-devops-like `cpu` data, laid out as a Fencepost region would hold it: per host a
//! time-sorted series, chunked into pages of `PAGE_POINTS` points, each page with statistics.
//!
//! Every page is also an Arrow `RecordBatch` (host, time, 10 metrics). The lean path reads the
//! same buffers as plain slices, so both paths query the very same bytes.

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, StringArray, TimestampMillisecondArray};
use arrow::buffer::ScalarBuffer;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;

pub const PAGE_POINTS: usize = 1024;
pub const INTERVAL_MS: i64 = 10_000;
/// TSBS's default start, 2016-01-01T00:00:00Z.
pub const START_MS: i64 = 1_451_606_400_000;
pub const METRICS: [&str; 10] = [
    "usage_user",
    "usage_system",
    "usage_idle",
    "usage_nice",
    "usage_iowait",
    "usage_irq",
    "usage_softirq",
    "usage_steal",
    "usage_guest",
    "usage_guest_nice",
];

/// Small deterministic PRNG (splitmix64): no dependency, same data on every run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The statistics a page carries per column; these queries read `max`, `last` (and `count`).
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ColStats {
    pub min: f64,
    pub max: f64,
    pub sum: f64,
    pub first: f64,
    pub last: f64,
}

#[derive(Clone, Debug)]
pub struct PageStats {
    pub count: u32,
    pub min_time: i64,
    pub max_time: i64,
    pub cols: [ColStats; 10],
}

/// One page: the Arrow batch and typed views of its buffers (zero-copy clones).
pub struct Page {
    pub batch: RecordBatch,
    pub times: ScalarBuffer<i64>,
    pub values: Vec<ScalarBuffer<f64>>,
    pub stats: PageStats,
}

pub struct HostSeries {
    pub name: String,
    pub pages: Vec<Page>,
}

impl HostSeries {
    pub fn points(&self) -> usize {
        self.pages.iter().map(|p| p.stats.count as usize).sum()
    }
}

pub fn cpu_schema() -> SchemaRef {
    let mut fields = vec![
        Field::new("host", DataType::Utf8, false),
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
    ];
    fields.extend(
        METRICS
            .iter()
            .map(|m| Field::new(*m, DataType::Float64, false)),
    );
    Arc::new(Schema::new(fields))
}

fn col_stats(v: &[f64]) -> ColStats {
    let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
    for &x in v {
        min = min.min(x);
        max = max.max(x);
        sum += x;
    }
    ColStats {
        min,
        max,
        sum,
        first: v[0],
        last: v[v.len() - 1],
    }
}

/// Statistics of one page, computed from its raw columns.
pub fn page_stats(times: &[i64], values: &[Vec<f64>]) -> PageStats {
    let mut cols = [ColStats::default(); 10];
    for (c, v) in cols.iter_mut().zip(values) {
        *c = col_stats(v);
    }
    PageStats {
        count: times.len() as u32,
        min_time: times[0],
        max_time: times[times.len() - 1],
        cols,
    }
}

fn make_page(schema: &SchemaRef, host: &str, times: Vec<i64>, values: Vec<Vec<f64>>) -> Page {
    let stats = page_stats(&times, &values);
    let n = times.len();
    let times = ScalarBuffer::from(times);
    let values: Vec<ScalarBuffer<f64>> = values.into_iter().map(ScalarBuffer::from).collect();
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![host; n])),
        Arc::new(TimestampMillisecondArray::new(times.clone(), None)),
    ];
    cols.extend(
        values
            .iter()
            .map(|v| Arc::new(Float64Array::new(v.clone(), None)) as ArrayRef),
    );
    let batch = RecordBatch::try_new(schema.clone(), cols).expect("page batch");
    Page {
        batch,
        times,
        values,
        stats,
    }
}

/// Random walk in [0, 100], rounded to 2 decimals, like TSBS's cpu fields.
fn step(rng: &mut Rng, x: f64) -> f64 {
    let next = (x + (rng.next_f64() - 0.5) * 2.0).clamp(0.0, 100.0);
    (next * 100.0).round() / 100.0
}

fn gen_host(schema: &SchemaRef, name: String, points: usize, rng: &mut Rng) -> HostSeries {
    let mut state: Vec<f64> = (0..10)
        .map(|_| (rng.next_f64() * 10000.0).round() / 100.0)
        .collect();
    let mut pages = Vec::with_capacity(points.div_ceil(PAGE_POINTS));
    let mut t = 0usize;
    while t < points {
        let n = PAGE_POINTS.min(points - t);
        let times: Vec<i64> = (t..t + n)
            .map(|i| START_MS + i as i64 * INTERVAL_MS)
            .collect();
        let mut values = vec![Vec::with_capacity(n); 10];
        for _ in 0..n {
            for (m, col) in values.iter_mut().enumerate() {
                state[m] = step(rng, state[m]);
                col.push(state[m]);
            }
        }
        pages.push(make_page(schema, &name, times, values));
        t += n;
    }
    HostSeries { name, pages }
}

/// `hosts` hosts × `hours` hours at one row per 10 s; hosts sorted by name (the order a
/// region's series index and TSBS's `ORDER BY hostname` both use).
pub fn generate(hosts: usize, hours: usize, seed: u64) -> Vec<HostSeries> {
    let schema = cpu_schema();
    let points = hours * 3600 / (INTERVAL_MS as usize / 1000);
    let mut rng = Rng::new(seed);
    let mut out: Vec<HostSeries> = (0..hosts)
        .map(|h| gen_host(&schema, format!("host_{h}"), points, &mut rng))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Page statistics only, for one long series (e.g. 100 M points): each page's raw values are
/// generated, summarised and dropped, as a region's metadata would keep them.
pub fn generate_long_series_stats(points: usize, seed: u64) -> Vec<PageStats> {
    let mut rng = Rng::new(seed);
    let mut x = 50.0;
    let mut out = Vec::with_capacity(points.div_ceil(PAGE_POINTS));
    let mut t = 0usize;
    while t < points {
        let n = PAGE_POINTS.min(points - t);
        let times: Vec<i64> = (t..t + n)
            .map(|i| START_MS + i as i64 * INTERVAL_MS)
            .collect();
        let col: Vec<f64> = (0..n)
            .map(|_| {
                x = step(&mut rng, x);
                x
            })
            .collect();
        // Only the one metric is summarised; the other nine column stats stay zero.
        out.push(page_stats(&times, &[col]));
        t += n;
    }
    out
}

/// Bytes of raw column data (time + 10 metrics; the host column not counted).
pub fn raw_bytes(data: &[HostSeries]) -> usize {
    data.iter().map(|h| h.points() * 8 * 11).sum()
}
