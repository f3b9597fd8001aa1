//! Storage engine `insert_tablet` throughput: 1000 rows × 10 DOUBLE columns spanning 1 and 4 time
//! partitions, with the lease gate on (an atomic load and a monotonic clock compare per fragment, the
//! lease manager's hot-path cost) versus off. Target: ≤ 1 % difference.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use common::{DataType, LeaseFencedRetryPolicy, PartitionConfig, Tablet, Value};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use engine::{DataRegion, LeaseFenced, LeaseGate, OpenGate, RegionCommand, StorageConfig};

const ROWS: usize = 1000;
const COLUMNS: usize = 10;
const INTERVAL_MS: i64 = 1_000_000;

/// What the lease manager's check costs: state load, clock read, deadline compare.
struct LeaseLikeGate {
    origin: Instant,
    state: AtomicU8,
    deadline_nanos: AtomicU64,
}

impl LeaseGate for LeaseLikeGate {
    fn check(&self, policy: LeaseFencedRetryPolicy) -> Result<(), LeaseFenced> {
        let live = self.state.load(Ordering::Acquire) == 0
            && (self.origin.elapsed().as_nanos() as u64)
                < self.deadline_nanos.load(Ordering::Acquire);
        if live {
            Ok(())
        } else {
            Err(LeaseFenced { policy })
        }
    }
}

fn tablet(device: usize, start: i64, step: i64) -> Tablet {
    let schema: Vec<(String, DataType)> = (0..COLUMNS)
        .map(|c| (format!("s{c}"), DataType::Double))
        .collect();
    let schema_ref: Vec<(&str, DataType)> = schema.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    let mut t = Tablet::new(format!("root.bench.d{device}"), &schema_ref);
    for r in 0..ROWS {
        t.push_row(
            start + r as i64 * step,
            (0..COLUMNS)
                .map(|c| Some(Value::Double((r * COLUMNS + c) as f64)))
                .collect(),
        );
    }
    t
}

fn bench(c: &mut Criterion) {
    let config = StorageConfig {
        partition: PartitionConfig {
            time_partition_interval_ms: INTERVAL_MS,
            ..PartitionConfig::default()
        },
        memtable_flush_bytes: usize::MAX,
        ..StorageConfig::default()
    };
    let lease = LeaseLikeGate {
        origin: Instant::now(),
        state: AtomicU8::new(0),
        deadline_nanos: AtomicU64::new(u64::MAX),
    };
    let mut group = c.benchmark_group("engine_insert_tablet");
    group.sample_size(20);
    group.throughput(Throughput::Elements((ROWS * COLUMNS) as u64));
    for partitions in [1i64, 4] {
        // Rows spread evenly over `partitions` time slots.
        let step = INTERVAL_MS * partitions / ROWS as i64;
        for (name, gate) in [
            ("gate_off", &OpenGate as &dyn LeaseGate),
            ("gate_on", &lease),
        ] {
            let id = format!("{partitions}_partitions/{name}");
            group.bench_function(id, |b| {
                b.iter_custom(|iterations| {
                    let mut total = Duration::ZERO;
                    let mut dir = tempfile::tempdir().unwrap();
                    let mut region = DataRegion::open(dir.path(), config.clone()).unwrap();
                    let mut index = 0u64;
                    for i in 0..iterations as i64 {
                        // A new region every 1000 tablets bounds memory (10M points) without
                        // timing a flush.
                        if index == 1000 {
                            dir = tempfile::tempdir().unwrap();
                            region = DataRegion::open(dir.path(), config.clone()).unwrap();
                            index = 0;
                        }
                        // Ten devices; each round a fresh time range, as ingest does.
                        let start = (i / 10) * INTERVAL_MS * partitions;
                        let command = RegionCommand::insert(tablet((i % 10) as usize, start, step));
                        index += 1;
                        let begin = Instant::now();
                        region.apply(index, &command, gate).unwrap();
                        total += begin.elapsed();
                    }
                    total
                });
            });
        }
    }
    group.finish();

    // The gate's own cost, to read the on/off difference against: per check, once per fragment.
    let mut group = c.benchmark_group("lease_gate_check");
    group.throughput(Throughput::Elements(1));
    group.bench_function("lease_like", |b| {
        b.iter(|| black_box(&lease).check(black_box(LeaseFencedRetryPolicy::RetryUntilSuccess)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
