//! Durable appends to the `wal` crate, side by side with raft-engine (TiKV's log engine) in the
//! same run: payloads of 256 B, 4 KiB, 64 KiB and 1 MiB, from 1 and 4 writer threads, for each of
//! our durability modes.
//!
//! raft-engine is configured for a fair durable comparison: compression off
//! (`batch_compression_threshold = 0`), `sync = true` on every write, one raft group (region) per
//! writer thread. Each write is one `LogBatch` holding one `put` of the payload under a fixed key
//! per region: the same log write and fdatasync path as raft entries, without a protobuf entry
//! type, and with bounded memory (the key is overwritten, so its memtable holds one value).
//!
//! Run: `cargo bench -p fencepost-benches --bench wal` (about four minutes), or filter, e.g.
//! `cargo bench -p fencepost-benches --bench wal -- 4KiB`. On this machine fsync latency is several
//! times worse for a while after large writes, so each benchmark first flushes the page cache
//! (`sync`) and pauses.

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use raft_engine::{Config, Engine, LogBatch, ReadableSize};
use wal::{Durability, Wal, WalOptions};

const SIZES: [(usize, &str); 4] = [
    (256, "256B"),
    (4 << 10, "4KiB"),
    (64 << 10, "64KiB"),
    (1 << 20, "1MiB"),
];
const WRITERS: [usize; 2] = [1, 4];

/// Something that appends one payload durably (or as its mode says) from several threads.
trait Appender: Send + Sync {
    fn append(&self, writer: usize, payload: &[u8]);
    /// Drops what was appended so far, so long runs of large payloads do not fill the disk.
    fn reclaim(&self);
}

impl Appender for Wal {
    fn append(&self, _writer: usize, payload: &[u8]) {
        Wal::append(self, payload).expect("wal append");
    }
    fn reclaim(&self) {
        self.truncate_prefix(self.next_index())
            .expect("truncate_prefix");
    }
}

struct RaftEngine(Engine);

impl Appender for RaftEngine {
    fn append(&self, writer: usize, payload: &[u8]) {
        let mut batch = LogBatch::with_capacity(1);
        batch
            .put(writer as u64 + 1, b"k".to_vec(), payload.to_vec())
            .expect("log batch put");
        self.0.write(&mut batch, true).expect("raft-engine write");
    }
    fn reclaim(&self) {
        self.0.purge_expired_files().expect("purge");
    }
}

fn open_wal(dir: &Path, durability: Durability, direct_io: bool) -> Wal {
    let mut options = WalOptions::new(dir);
    options.durability = durability;
    options.direct_io = direct_io;
    Wal::open(options).expect("open wal")
}

fn open_raft_engine(dir: &Path) -> RaftEngine {
    let config = Config {
        dir: dir.to_string_lossy().into_owned(),
        batch_compression_threshold: ReadableSize(0),
        ..Config::default()
    };
    RaftEngine(Engine::open(config).expect("open raft-engine"))
}

/// `iters` appends spread over `writers` threads; returns the wall time.
fn run(
    appender: &Arc<dyn Appender>,
    writers: usize,
    payload: &Arc<Vec<u8>>,
    iters: u64,
) -> Duration {
    let per_writer = iters.div_ceil(writers as u64);
    let barrier = Arc::new(Barrier::new(writers + 1));
    let handles: Vec<_> = (0..writers)
        .map(|writer| {
            let appender = Arc::clone(appender);
            let payload = Arc::clone(payload);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..per_writer {
                    appender.append(writer, &payload);
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for handle in handles {
        handle.join().expect("writer thread");
    }
    let elapsed = start.elapsed();
    appender.reclaim();
    // Report time per append actually made (per_writer * writers may exceed iters).
    elapsed.mul_f64(iters as f64 / (per_writer * writers as u64) as f64)
}

/// Flushes dirty pages left by the previous benchmark and lets the disk settle.
fn settle() {
    match std::process::Command::new("sync").status() {
        Ok(status) if status.success() => {}
        other => eprintln!("sync failed: {other:?}"),
    }
    std::thread::sleep(Duration::from_millis(500));
}

fn durable_appends(c: &mut Criterion) {
    let window = Duration::from_millis(1);
    // (name, durability (None: raft-engine), O_DIRECT). The log's default goes through the page
    // cache; the `_direct` rows set `WalOptions::direct_io`, as the DataNode's raft log does.
    let modes: [(&str, Option<Durability>, bool); 8] = [
        ("wal_sync", Some(Durability::Sync), false),
        (
            "wal_group_commit",
            Some(Durability::GroupCommit { window }),
            false,
        ),
        ("wal_sync_direct", Some(Durability::Sync), true),
        (
            "wal_group_commit_direct",
            Some(Durability::GroupCommit { window }),
            true,
        ),
        (
            "wal_async_10ms",
            Some(Durability::Async {
                interval: Duration::from_millis(10),
            }),
            false,
        ),
        ("wal_none", Some(Durability::None), false),
        ("wal_none_direct", Some(Durability::None), true),
        ("raft_engine_sync", None, false),
    ];
    for (size, size_name) in SIZES {
        for writers in WRITERS {
            let mut group = c.benchmark_group(format!("append_{size_name}_{writers}w"));
            group
                .sample_size(10)
                .warm_up_time(Duration::from_secs(1))
                .measurement_time(Duration::from_secs(3));
            let payload = Arc::new(vec![0x5Au8; size]);
            // Criterion reports one throughput per benchmark: appends per second. The line
            // printed after each benchmark adds bytes per second.
            group.throughput(Throughput::Elements(1));
            for (name, durability, direct_io) in modes {
                // Opened on first use, so benchmarks left out by a filter cost nothing.
                let mut opened: Option<(tempfile::TempDir, Arc<dyn Appender>)> = None;
                let mut total = (0u64, Duration::ZERO);
                group.bench_function(BenchmarkId::from_parameter(name), |b| {
                    b.iter_custom(|iters| {
                        let (_, appender) = opened.get_or_insert_with(|| {
                            let dir = tempfile::Builder::new()
                                .prefix("fencepost-bench-wal")
                                .tempdir()
                                .expect("temp dir");
                            let appender: Arc<dyn Appender> = match durability {
                                Some(durability) => {
                                    Arc::new(open_wal(dir.path(), durability, direct_io))
                                }
                                None => Arc::new(open_raft_engine(dir.path())),
                            };
                            settle();
                            (dir, appender)
                        });
                        let elapsed = run(appender, writers, &payload, iters);
                        total.0 += iters;
                        total.1 += elapsed;
                        elapsed
                    })
                });
                if total.0 > 0 {
                    let appends_per_s = total.0 as f64 / total.1.as_secs_f64().max(1e-9);
                    println!(
                        "append_{size_name}_{writers}w/{name}: {appends_per_s:.0} appends/s, \
                         {:.1} MiB/s (mean over warm-up and samples)",
                        appends_per_s * size as f64 / (1 << 20) as f64
                    );
                }
                // Close the log before its directory goes.
                if let Some((dir, appender)) = opened.take() {
                    drop(appender);
                    drop(dir);
                }
            }
            group.finish();
        }
    }
}

criterion_group!(benches, durable_appends);
criterion_main!(benches);
