//! The lean, hand-written path: what Fencepost would write itself over its pages.

use crate::data::{HostSeries, PageStats, METRICS};

/// One output row of single-groupby: bucket start (ms) and MAX of the metric in it.
pub type BucketRow = (i64, f64);

/// MAX(metric) of one series over [start, end), grouped by `bucket_ms` buckets aligned to the
/// epoch (as `date_bin` is). Pages are found by binary search on their time range; a page that
/// lies wholly inside one bucket (and inside the window) is answered from its statistics.
/// Returns only non-empty buckets, in time order (as SQL GROUP BY + ORDER BY would).
pub fn single_groupby(
    series: &HostSeries,
    metric: usize,
    start: i64,
    end: i64,
    bucket_ms: i64,
) -> Vec<BucketRow> {
    let origin = start.div_euclid(bucket_ms) * bucket_ms;
    let nb = ((end - origin) as u64).div_ceil(bucket_ms as u64) as usize;
    let mut acc = vec![f64::NEG_INFINITY; nb];
    let mut seen = vec![false; nb];
    let first = series.pages.partition_point(|p| p.stats.max_time < start);
    for page in &series.pages[first..] {
        let s = &page.stats;
        if s.min_time >= end {
            break;
        }
        let (b0, b1) = (
            (s.min_time - origin) / bucket_ms,
            (s.max_time - origin) / bucket_ms,
        );
        if s.min_time >= start && s.max_time < end && b0 == b1 {
            let b = b0 as usize;
            acc[b] = acc[b].max(s.cols[metric].max);
            seen[b] = true;
            continue;
        }
        let times: &[i64] = &page.times;
        let vals: &[f64] = &page.values[metric];
        let lo = times.partition_point(|&t| t < start);
        let hi = times.partition_point(|&t| t < end);
        for i in lo..hi {
            let b = ((times[i] - origin) / bucket_ms) as usize;
            acc[b] = acc[b].max(vals[i]);
            seen[b] = true;
        }
    }
    (0..nb)
        .filter(|&b| seen[b])
        .map(|b| (origin + b as i64 * bucket_ms, acc[b]))
        .collect()
}

/// One lastpoint row: host index, time, the 10 metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct LastRow {
    pub host: usize,
    pub time: i64,
    pub values: [f64; 10],
}

/// The latest row of every host, from the last page's statistics (`max_time`, `last`), in
/// host-name order (the hosts are kept sorted by name).
pub fn lastpoint(data: &[HostSeries]) -> Vec<LastRow> {
    data.iter()
        .enumerate()
        .filter_map(|(h, s)| {
            let p = &s.pages.last()?.stats;
            let mut values = [0.0; 10];
            for (v, c) in values.iter_mut().zip(&p.cols) {
                *v = c.last;
            }
            Some(LastRow {
                host: h,
                time: p.max_time,
                values,
            })
        })
        .collect()
}

/// COUNT of one series over its whole range, from page statistics only.
pub fn count_from_stats<'a>(pages: impl IntoIterator<Item = &'a PageStats>) -> u64 {
    pages.into_iter().map(|p| p.count as u64).sum()
}

/// Index of a metric by name (for the checks).
pub fn metric_index(name: &str) -> usize {
    METRICS.iter().position(|m| *m == name).expect("metric")
}
