//! MemTable write and freeze throughput, in points per second.
//!
//! Each iteration inserts 100 tablets of 1000 rows × 10 DOUBLE columns (one million points) into
//! a fresh memtable: with timestamps in order (the common case, no sort needed), out of order
//! (every tablet a shuffled block, blocks shuffled: reads and freeze must sort), and in order with
//! the storage engine's pattern of a mark per tablet released after it. Freeze sorts and
//! deduplicates the same memtables. Run with `cargo bench -p fencepost-benches --bench memtable`.

use common::{DataType, Tablet, Value};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use memtable::{MemTable, MemTableConfig};
use std::hint::black_box;
use std::time::Duration;

const TABLETS: usize = 100;
const ROWS: usize = 1000;
const COLUMNS: usize = 10;
const POINTS: u64 = (TABLETS * ROWS * COLUMNS) as u64;

/// A small deterministic generator, so every run benchmarks the same shuffle.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// The benchmark's tablets: tablet `k` covers timestamps of block `k` (in order) or of a shuffled
/// block, with its rows shuffled (out of order).
fn tablets(out_of_order: bool) -> Vec<Tablet> {
    let names: Vec<String> = (0..COLUMNS).map(|c| format!("s{c}")).collect();
    let schema: Vec<(&str, DataType)> = names
        .iter()
        .map(|n| (n.as_str(), DataType::Double))
        .collect();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut blocks: Vec<usize> = (0..TABLETS).collect();
    if out_of_order {
        rng.shuffle(&mut blocks);
    }
    blocks
        .into_iter()
        .map(|block| {
            let mut timestamps: Vec<i64> = (0..ROWS).map(|r| (block * ROWS + r) as i64).collect();
            if out_of_order {
                rng.shuffle(&mut timestamps);
            }
            let mut tablet = Tablet::new("root.sg.d1", &schema);
            for t in timestamps {
                let values = (0..COLUMNS)
                    .map(|c| Some(Value::Double(t as f64 + c as f64 * 0.5)))
                    .collect();
                tablet.push_row(t, values);
            }
            tablet
        })
        .collect()
}

fn fill(tablets: &[Tablet], rows: &[u32], marked: bool) -> MemTable {
    let mut memtable = MemTable::new(MemTableConfig::default());
    for tablet in tablets {
        let mark = marked.then(|| memtable.mark());
        let written = memtable.insert_tablet(tablet, rows).expect("types agree");
        debug_assert_eq!(written, ROWS * COLUMNS);
        if mark.is_some() {
            memtable.release_marks();
        }
    }
    memtable
}

fn bench_memtable(c: &mut Criterion) {
    let rows: Vec<u32> = (0..ROWS as u32).collect();
    let in_order = tablets(false);
    let out_of_order = tablets(true);

    let mut group = c.benchmark_group("memtable_insert_1000x10_double");
    group.throughput(Throughput::Elements(POINTS));
    for (name, tablets, marked) in [
        ("in_order", &in_order, false),
        ("out_of_order", &out_of_order, false),
        ("in_order_mark_per_tablet", &in_order, true),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || (),
                |()| fill(black_box(tablets), &rows, marked),
                BatchSize::PerIteration,
            )
        });
    }
    // One tablet into a warm memtable, then rolled back: the append loop without allocation,
    // plus the cost of a rollback (truncation).
    group.throughput(Throughput::Elements((ROWS * COLUMNS) as u64));
    for (name, tablets) in [
        ("warm_in_order_then_rollback", &in_order),
        ("warm_out_of_order_then_rollback", &out_of_order),
    ] {
        let mut memtable = fill(tablets, &rows, false);
        let tablet = &tablets[TABLETS / 2];
        group.bench_function(name, |b| {
            b.iter(|| {
                let mark = memtable.mark();
                let written = memtable.insert_tablet(black_box(tablet), &rows);
                memtable.rollback(mark);
                written
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("memtable_freeze_1000x10_double");
    group.throughput(Throughput::Elements(POINTS));
    for (name, tablets) in [("in_order", &in_order), ("out_of_order", &out_of_order)] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || fill(tablets, &rows, false),
                |memtable| memtable.freeze(),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench_memtable
}
criterion_main!(benches);
