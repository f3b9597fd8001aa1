//! Aggregates of one series answered by the engine (`DataRegion::aggregate`): COUNT of the whole
//! series from page statistics, a 1-hour MAX in 1-minute windows (TSBS single-groupby-1-1-1's
//! shape for one series), the newest point (SELECT LAST), and, to read them against, the raw read
//! of that hour.
//!
//! The series is `AGG_POINTS` points (default 100,000,000) at 1 s, a 2-decimal random walk,
//! flushed into sealed files of 7-day time partitions. Target (issue 40): COUNT over 100 M
//! points ≤ 50 ms. Run alone: `cargo bench -p fencepost-benches --bench aggregate`.

use std::time::Instant;

use common::aggregate::Windows;
use common::{DataType, PartitionConfig, Tablet, Value};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use engine::{DataRegion, OpenGate, RegionCommand, StorageConfig};

const DEVICE: &str = "root.bench.d1";
const HOUR_MS: i64 = 3_600_000;
const ROWS_PER_TABLET: usize = 100_000;

fn points() -> usize {
    std::env::var("AGG_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000_000)
}

/// A region holding `n` points of one DOUBLE series at 1 s, all flushed.
fn region(dir: &std::path::Path, n: usize) -> DataRegion {
    let config = StorageConfig {
        partition: PartitionConfig {
            time_partition_interval_ms: 7 * 24 * HOUR_MS,
            ..PartitionConfig::default()
        },
        memtable_flush_bytes: usize::MAX,
        ..StorageConfig::default()
    };
    let region = DataRegion::open(dir, config).unwrap();
    let started = Instant::now();
    let mut walk = 50.0f64;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut index = 0;
    for first in (0..n).step_by(ROWS_PER_TABLET) {
        let mut t = Tablet::new(DEVICE, &[("s1", DataType::Double)]);
        for i in first..(first + ROWS_PER_TABLET).min(n) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            walk += (seed % 201) as f64 / 100.0 - 1.0;
            t.push_row(
                i as i64 * 1000,
                vec![Some(Value::Double((walk * 100.0).round() / 100.0))],
            );
        }
        index += 1;
        region
            .apply(index, &RegionCommand::insert(t), &OpenGate)
            .unwrap();
        // Flushed every 10 M points: memory stays bounded and the files are many, as in life.
        if index % 100 == 0 {
            region.flush().unwrap();
        }
    }
    region.flush().unwrap();
    eprintln!(
        "{n} points written and flushed in {:.1?}",
        started.elapsed()
    );
    region
}

fn bench(c: &mut Criterion) {
    let n = points();
    let dir = tempfile::tempdir().unwrap();
    let region = region(dir.path(), n);
    let end = n as i64 * 1000;
    let all = Windows::whole(0..end).unwrap();
    let (partials, work) = region.aggregate(DEVICE, "s1", &all).unwrap();
    assert_eq!(partials[0].count, n as u64);
    eprintln!("COUNT of the whole series: {work:?}");

    let mut group = c.benchmark_group("aggregate");
    group.sample_size(20);
    group.bench_function(format!("count_{n}_points_from_stats"), |b| {
        b.iter(|| region.aggregate(DEVICE, "s1", black_box(&all)).unwrap())
    });
    // A different hour each iteration, minute windows.
    let hours = (end / HOUR_MS).max(1);
    let mut hour = 0i64;
    group.bench_function("max_1h_by_1min", |b| {
        b.iter(|| {
            hour = (hour * 7919 + 13) % hours;
            let start = hour * HOUR_MS;
            let windows = Windows::new(start..start + HOUR_MS, 60_000, 60).unwrap();
            region.aggregate(DEVICE, "s1", &windows).unwrap()
        })
    });
    group.bench_function("last_point", |b| {
        b.iter(|| region.last(DEVICE, "s1").unwrap())
    });
    group.bench_function("raw_read_1h", |b| {
        b.iter(|| {
            hour = (hour * 7919 + 13) % hours;
            let start = hour * HOUR_MS;
            region.query(DEVICE, "s1", start, start + HOUR_MS).unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
