//! The load that `fencepost bench` and the peer loader (`benches/src/bin/peerload.rs`) both write:
//! a deterministic point generator, the client → device schedule, latency recording with
//! percentiles, and the driver that runs the clients and builds the report.
//!
//! The points are a pure function of the [`LoadSpec`]: device `d` (`<database>.d<d>`), round `k`
//! (the device's `k`-th tablet), row `r` has timestamp `start_time_ms + (k × rows + r) × step_ms`,
//! and measurement `s<m>` holds the value of its [`ValueShape`] at that row: by default a value
//! hashed from `(seed, d, m, t)`; the other shapes (DOUBLE only) are functions of the series and
//! the row index `k × rows + r`, shaped like sensor data for the storage benchmark. Client `c` of
//! `C` owns the devices `c, c + C, c + 2C, …` and writes them round robin, so no two clients write
//! the same device and every `(device, timestamp)` of a run is unique. Two loaders given the same
//! spec (same `--start-time`) write the same points, whatever system is behind them.
//!
//! What lives where: the generator and the schedule are pure; only [`drive`] spawns tasks, reads
//! the clock and writes progress lines to stderr. A system under test is a [`Sink`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Bitmap, Column, DataType, Tablet, Value};
use serde::Serialize;

/// Most devices one run may use.
pub const DEVICES_MAX: u32 = 1_000_000;
/// Most measurements per device (the tablet limit).
pub const MEASUREMENTS_MAX: u32 = 10_000;
/// Most rows per tablet (the DataNode's default `tablet_rows_max`).
pub const ROWS_PER_TABLET_MAX: u32 = 100_000;
/// Most points in one tablet: bounds the memory of a tablet and of its encoded request.
pub const POINTS_PER_TABLET_MAX: u64 = 10_000_000;
/// Most concurrent clients.
pub const CLIENTS_MAX: u32 = 1024;
/// Longest run in duration mode, in seconds.
pub const DURATION_S_MAX: u64 = 86_400;
/// Latency samples kept per run (4 bytes each, so at most 40 MB). Tablets past the limit still
/// count in throughput, errors and the maximum, but not in the percentiles; the report says how
/// many were left out (`latency_samples_dropped`).
pub const LATENCY_SAMPLES_MAX: usize = 10_000_000;
/// How far before "now" the default start time lies, in milliseconds: one hour, so a run at
/// millions of points/s with the default 1 ms step stays in the past and inside every peer's
/// retention window.
pub const START_BEFORE_NOW_MS: i64 = 3_600_000;
/// Distinct failure messages echoed to stderr per run (the rest are only counted).
pub const ERROR_MESSAGES_SHOWN_MAX: usize = 10;

/// The load flags shared by `fencepost bench` and `peerload`, in the spirit of iot-benchmark.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Devices written (`<database>.d0` …); each client owns every `clients`-th one.
    #[arg(long, default_value_t = 100)]
    pub devices: u32,
    /// Measurements per device (`s0` …).
    #[arg(long, default_value_t = 10)]
    pub measurements: u32,
    /// Rows per tablet; one tablet is one request of rows × measurements points.
    #[arg(long, default_value_t = 1000)]
    pub rows_per_tablet: u32,
    /// Stop after this many tablets in all (spread evenly over the clients).
    #[arg(long, conflicts_with = "duration_s")]
    pub tablets: Option<u64>,
    /// Stop after this many seconds (default 10 when `--tablets` is not given).
    #[arg(long)]
    pub duration_s: Option<u64>,
    /// Concurrent clients, each with its own connection(s) and its own devices.
    #[arg(long, default_value_t = 4)]
    pub clients: u32,
    /// Points per second over all clients at most (each client paces itself to its share);
    /// default unlimited. For soak runs at a fixed load.
    #[arg(long)]
    pub rate_pts_per_s: Option<u64>,
    /// Value type of every measurement: DOUBLE, INT64, FLOAT, INT32, BOOLEAN or TEXT.
    #[arg(long = "type", default_value = "DOUBLE", value_parser = parse_data_type)]
    pub data_type: DataType,
    /// Database the devices live under.
    #[arg(long, default_value = "root.bench")]
    pub database: String,
    /// First timestamp in milliseconds (default: now minus one hour). Give the same value to
    /// two loaders to have them write the same points.
    #[arg(long, allow_hyphen_values = true)]
    pub start_time: Option<i64>,
    /// Milliseconds between a device's consecutive rows (the row interval).
    #[arg(long, visible_alias = "interval-ms", default_value_t = 1)]
    pub step_ms: i64,
    /// Seed of the value hash.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How values evolve along a series: `uniform2dp` (independent hashes, every type) or, for
    /// DOUBLE only, `walk2dp`, `noise`, `steps` (see `ValueShape`).
    #[arg(long = "values", value_enum, default_value_t = ValueShape::Uniform2dp)]
    pub values: ValueShape,
}

/// How the values of one series evolve from row to row. Every shape is deterministic per
/// `(seed, device, measurement, row)`, so every system under test gets the same points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ValueShape {
    /// Independent values hashed from `(seed, device, measurement, timestamp)`: DOUBLE/FLOAT
    /// 0.00–999.99 in steps of 0.01, INT32/INT64 0–999,999, TEXT `v0`–`v9999`. The workload of
    /// every figure published before issue 17, and the default.
    Uniform2dp,
    /// A random walk printed with 2 decimals, like a thermometer: it starts at 10.00–30.00 (per
    /// series) and each row adds a step of σ = 0.5 (the sum of three uniforms); the stored value
    /// is the walk rounded to 0.01.
    Walk2dp,
    /// Full-precision uniform noise in [0, 100): 53 random mantissa bits per row.
    Noise,
    /// A level of 0.00–99.99 (2 decimals) that changes every [`STEPS_ROWS`] rows.
    Steps,
}

impl ValueShape {
    /// The name the `--values` flag takes.
    pub fn name(self) -> &'static str {
        match self {
            ValueShape::Uniform2dp => "uniform2dp",
            ValueShape::Walk2dp => "walk2dp",
            ValueShape::Noise => "noise",
            ValueShape::Steps => "steps",
        }
    }
}

fn parse_data_type(name: &str) -> Result<DataType, String> {
    DataType::parse(name).ok_or_else(|| {
        format!("unknown type {name:?}; give DOUBLE, INT64, FLOAT, INT32, BOOLEAN or TEXT")
    })
}

/// When a run stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopAfter {
    /// After this many tablets in all.
    Tablets(u64),
    /// After this long; tablets in flight then are finished and counted.
    Duration(Duration),
}

/// A validated load: everything that decides which points are written.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadSpec {
    /// Devices, 1..=[`DEVICES_MAX`].
    pub devices: u32,
    /// Measurements per device, 1..=[`MEASUREMENTS_MAX`].
    pub measurements: u32,
    /// Rows per tablet, 1..=[`ROWS_PER_TABLET_MAX`].
    pub rows_per_tablet: u32,
    /// Clients, 1..=min([`CLIENTS_MAX`], devices).
    pub clients: u32,
    /// Value type of every measurement.
    pub data_type: DataType,
    /// Database path, e.g. `root.bench`.
    pub database: String,
    /// First timestamp, in milliseconds.
    pub start_time_ms: i64,
    /// Milliseconds between a device's rows, ≥ 1.
    pub step_ms: i64,
    /// Seed of the value hash.
    pub seed: u64,
    /// How values evolve along a series; anything but [`ValueShape::Uniform2dp`] is DOUBLE only.
    pub values: ValueShape,
    /// When the run stops.
    pub stop: StopAfter,
    /// Points per second over all clients at most; `None` is unlimited.
    pub rate_pts_per_s: Option<u64>,
}

impl LoadArgs {
    /// Checks every flag against its limit and fixes the start time (`now_ms` is the wall clock,
    /// passed in so the conversion stays pure).
    pub fn to_spec(&self, now_ms: i64) -> anyhow::Result<LoadSpec> {
        let in_range = |name: &str, value: u64, max: u64| -> anyhow::Result<()> {
            anyhow::ensure!(
                (1..=max).contains(&value),
                "--{name} is {value}, not in 1..={max}"
            );
            Ok(())
        };
        in_range("devices", self.devices.into(), DEVICES_MAX.into())?;
        in_range(
            "measurements",
            self.measurements.into(),
            MEASUREMENTS_MAX.into(),
        )?;
        in_range(
            "rows-per-tablet",
            self.rows_per_tablet.into(),
            ROWS_PER_TABLET_MAX.into(),
        )?;
        in_range(
            "clients",
            self.clients.into(),
            CLIENTS_MAX.min(self.devices).into(),
        )?;
        let points = u64::from(self.rows_per_tablet) * u64::from(self.measurements);
        anyhow::ensure!(
            points <= POINTS_PER_TABLET_MAX,
            "{points} points per tablet (rows × measurements); at most {POINTS_PER_TABLET_MAX}"
        );
        anyhow::ensure!(self.step_ms >= 1, "--step-ms is {}, give ≥ 1", self.step_ms);
        anyhow::ensure!(
            self.values == ValueShape::Uniform2dp || self.data_type == DataType::Double,
            "--values {} takes --type DOUBLE, not {}",
            self.values.name(),
            self.data_type
        );
        anyhow::ensure!(
            self.database.starts_with("root.") && !self.database.ends_with('.'),
            "--database {:?} is not a path `root.<name>`",
            self.database
        );
        let stop = match (self.tablets, self.duration_s) {
            (Some(n), None) => {
                in_range("tablets", n, u64::MAX)?;
                StopAfter::Tablets(n)
            }
            (None, Some(s)) => {
                in_range("duration-s", s, DURATION_S_MAX)?;
                StopAfter::Duration(Duration::from_secs(s))
            }
            (None, None) => StopAfter::Duration(Duration::from_secs(10)),
            (Some(_), Some(_)) => anyhow::bail!("give --tablets or --duration-s, not both"),
        };
        Ok(LoadSpec {
            devices: self.devices,
            measurements: self.measurements,
            rows_per_tablet: self.rows_per_tablet,
            clients: self.clients,
            data_type: self.data_type,
            database: self.database.clone(),
            start_time_ms: self
                .start_time
                .unwrap_or(now_ms.saturating_sub(START_BEFORE_NOW_MS)),
            step_ms: self.step_ms,
            seed: self.seed,
            values: self.values,
            stop,
            rate_pts_per_s: self.rate_pts_per_s.filter(|r| *r > 0),
        })
    }
}

/// The wall clock in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970");
    i64::try_from(since.as_millis()).expect("milliseconds since 1970 fit an i64")
}

/// SplitMix64's finaliser: a cheap, well-mixed hash of one word.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Rows a [`ValueShape::Steps`] level lasts.
pub const STEPS_ROWS: u64 = 100;
/// One unit of a walk's accumulated steps: 2^-17. A step is an odd integer in ±196,605 units
/// with a standard deviation of 65,536 units, so σ = 0.5.
const WALK_UNIT: f64 = 1.0 / 131_072.0;
// Salts that give each shape's draws their own hash stream (arbitrary, fixed: they are part of
// the workload, pinned by the golden tests).
const WALK_START_SALT: u64 = 0x7761_6c6b_7374_6172;
const WALK_STEP_SALT: u64 = 0x7761_6c6b_7374_6570;
const NOISE_SALT: u64 = 0x6e6f_6973_6530_3030;
const STEPS_SALT: u64 = 0x7374_6570_7330_3030;

/// The hash stream of one shape's draws for one series, indexed by row (or level).
fn stream(series: u64, salt: u64) -> u64 {
    mix(series ^ salt)
}

/// Value of a walk whose steps up to the row sum to `acc` units, rounded to 2 decimals.
fn walk_value(start: f64, acc: i64) -> f64 {
    let v = start + acc as f64 * WALK_UNIT;
    (v * 100.0).round() / 100.0
}

/// The walk's start: 10.00–30.00, per series.
fn walk_start(series: u64) -> f64 {
    (1000 + stream(series, WALK_START_SALT) % 2001) as f64 / 100.0
}

/// The walk's step into row `row` (≥ 1), in [`WALK_UNIT`]s: twice the sum of three 16-bit
/// uniforms, centred. Integers, so a walk's position is exact whatever order it is summed in.
fn walk_step(steps: u64, row: u64) -> i64 {
    let h = mix(steps ^ row);
    let sum = (h & 0xffff) + (h >> 16 & 0xffff) + (h >> 32 & 0xffff);
    2 * sum as i64 - 3 * 0xffff
}

/// Where one series' walk stands: the sum of its steps into rows `1..=row`.
#[derive(Clone, Copy, Debug, Default)]
struct WalkCursor {
    row: u64,
    acc: i64,
}

impl WalkCursor {
    /// Moves to `row` (forward step by step; backward by starting over) and returns the sum.
    fn seek(&mut self, steps: u64, row: u64) -> i64 {
        if row < self.row {
            *self = WalkCursor::default();
        }
        while self.row < row {
            self.row += 1;
            self.acc += walk_step(steps, self.row);
        }
        self.acc
    }
}

/// Builds the tablets of a [`LoadSpec`]. Pure: the same spec gives the same points.
#[derive(Debug)]
pub struct Generator {
    spec: LoadSpec,
    device_names: Vec<String>,
    measurement_names: Vec<String>,
    /// For [`ValueShape::Walk2dp`], one cursor per series (by device, then measurement), so a
    /// device's consecutive tablets cost O(rows) each rather than O(row index). Only a cache: a
    /// tablet is the same whatever the cursor stood at. One lock per device: the clients own
    /// disjoint devices, so the locks are never contended.
    walks: Vec<Mutex<Vec<WalkCursor>>>,
}

impl Generator {
    /// A generator for `spec` (its names are built once here).
    pub fn new(spec: LoadSpec) -> Generator {
        let device_names = (0..spec.devices)
            .map(|d| format!("{}.d{d}", spec.database))
            .collect();
        let measurement_names = (0..spec.measurements).map(|m| format!("s{m}")).collect();
        let walks = match spec.values {
            ValueShape::Walk2dp => (0..spec.devices)
                .map(|_| Mutex::new(vec![WalkCursor::default(); spec.measurements as usize]))
                .collect(),
            ValueShape::Uniform2dp | ValueShape::Noise | ValueShape::Steps => Vec::new(),
        };
        Generator {
            spec,
            device_names,
            measurement_names,
            walks,
        }
    }

    /// The spec.
    pub fn spec(&self) -> &LoadSpec {
        &self.spec
    }

    /// The path of device `device`, e.g. `root.bench.d7`.
    pub fn device_name(&self, device: u32) -> &str {
        &self.device_names[device as usize]
    }

    /// The measurement names, `s0` ….
    pub fn measurement_names(&self) -> &[String] {
        &self.measurement_names
    }

    /// Points in one tablet.
    pub fn points_per_tablet(&self) -> u64 {
        u64::from(self.spec.rows_per_tablet) * u64::from(self.spec.measurements)
    }

    /// The timestamp of `row` of a device's tablet `round`. Panics past `i64`, which would take
    /// ~10^15 tablets at the default step: far beyond any run.
    pub fn timestamp(&self, round: u64, row: u32) -> i64 {
        let index = self.row_index(round, row);
        let timestamp = i64::try_from(index)
            .ok()
            .and_then(|i| i.checked_mul(self.spec.step_ms))
            .and_then(|o| o.checked_add(self.spec.start_time_ms));
        timestamp.unwrap_or_else(|| {
            panic!(
                "timestamp of round {round} row {row} overflows (start {}, step {} ms)",
                self.spec.start_time_ms, self.spec.step_ms
            )
        })
    }

    /// The index of `row` of a device's tablet `round` in the device's rows, from 0.
    fn row_index(&self, round: u64, row: u32) -> u64 {
        round
            .checked_mul(u64::from(self.spec.rows_per_tablet))
            .and_then(|i| i.checked_add(u64::from(row)))
            .unwrap_or_else(|| panic!("row index of round {round} row {row} overflows"))
    }

    /// The row index of a timestamp this spec writes; panics on any other timestamp.
    fn row_of(&self, timestamp: i64) -> u64 {
        let offset = timestamp
            .checked_sub(self.spec.start_time_ms)
            .filter(|&o| o >= 0 && o % self.spec.step_ms == 0);
        let offset = offset.unwrap_or_else(|| {
            panic!(
                "{timestamp} is not a row of a load starting at {} every {} ms",
                self.spec.start_time_ms, self.spec.step_ms
            )
        });
        (offset / self.spec.step_ms) as u64
    }

    /// The hash key of one series.
    fn series(&self, device: u32, measurement: u32) -> u64 {
        mix(self.spec.seed ^ (u64::from(device) << 32 | u64::from(measurement)))
    }

    fn hash(&self, device: u32, measurement: u32, timestamp: i64) -> u64 {
        mix(self.series(device, measurement) ^ timestamp as u64)
    }

    /// The value of `(device, measurement)` at `timestamp` (one of the spec's timestamps), shaped
    /// by the spec's [`ValueShape`]. For `walk2dp` this sums the walk from row 0: O(row index),
    /// where [`Generator::tablet`] is O(rows) per tablet.
    pub fn value(&self, device: u32, measurement: u32, timestamp: i64) -> Value {
        let series = self.series(device, measurement);
        match self.spec.values {
            ValueShape::Uniform2dp => {
                let h = self.hash(device, measurement, timestamp);
                match self.spec.data_type {
                    DataType::Double => Value::Double((h % 100_000) as f64 / 100.0),
                    DataType::Float => Value::Float((h % 100_000) as f32 / 100.0),
                    DataType::Int64 => Value::Int64((h % 1_000_000) as i64),
                    DataType::Int32 => Value::Int32((h % 1_000_000) as i32),
                    DataType::Boolean => Value::Boolean(h & 1 == 1),
                    DataType::Text => Value::Text(format!("v{}", h % 10_000)),
                    DataType::Timestamp => Value::Timestamp((h % 1_000_000) as i64),
                    DataType::Date => Value::Date(19700101 + (h % 28) as i32),
                    DataType::Blob => Value::Blob(format!("v{}", h % 10_000).into_bytes()),
                    DataType::String => Value::String(format!("v{}", h % 10_000)),
                }
            }
            ValueShape::Walk2dp => {
                let acc = WalkCursor::default()
                    .seek(stream(series, WALK_STEP_SALT), self.row_of(timestamp));
                Value::Double(walk_value(walk_start(series), acc))
            }
            ValueShape::Noise => {
                Value::Double(noise(stream(series, NOISE_SALT), self.row_of(timestamp)))
            }
            ValueShape::Steps => {
                Value::Double(steps(stream(series, STEPS_SALT), self.row_of(timestamp)))
            }
        }
    }

    /// The column of measurement `m` of device `device` over rows `first..first + rows`.
    fn column(&self, device: u32, m: u32, first: u64, timestamps: &[i64]) -> Column {
        let series = self.series(device, m);
        let rows = first..first + timestamps.len() as u64;
        match self.spec.values {
            ValueShape::Uniform2dp => {
                let hashes = timestamps.iter().map(|&t| self.hash(device, m, t));
                match self.spec.data_type {
                    DataType::Double => {
                        Column::Double(hashes.map(|h| (h % 100_000) as f64 / 100.0).collect())
                    }
                    DataType::Float => {
                        Column::Float(hashes.map(|h| (h % 100_000) as f32 / 100.0).collect())
                    }
                    DataType::Int64 => {
                        Column::Int64(hashes.map(|h| (h % 1_000_000) as i64).collect())
                    }
                    DataType::Int32 => {
                        Column::Int32(hashes.map(|h| (h % 1_000_000) as i32).collect())
                    }
                    DataType::Boolean => Column::Boolean(hashes.map(|h| h & 1 == 1).collect()),
                    DataType::Text => {
                        Column::Text(hashes.map(|h| format!("v{}", h % 10_000)).collect())
                    }
                    DataType::Timestamp => {
                        Column::Timestamp(hashes.map(|h| (h % 1_000_000) as i64).collect())
                    }
                    DataType::Date => {
                        Column::Date(hashes.map(|h| 19700101 + (h % 28) as i32).collect())
                    }
                    DataType::Blob => Column::Blob(
                        hashes
                            .map(|h| format!("v{}", h % 10_000).into_bytes())
                            .collect(),
                    ),
                    DataType::String => {
                        Column::String(hashes.map(|h| format!("v{}", h % 10_000)).collect())
                    }
                }
            }
            ValueShape::Walk2dp => {
                let (start, steps) = (walk_start(series), stream(series, WALK_STEP_SALT));
                let mut cursors = self.walks[device as usize]
                    .lock()
                    .expect("a walk lock is poisoned only by a panic while holding it");
                let cursor = &mut cursors[m as usize];
                Column::Double(
                    rows.map(|row| walk_value(start, cursor.seek(steps, row)))
                        .collect(),
                )
            }
            ValueShape::Noise => {
                let stream = stream(series, NOISE_SALT);
                Column::Double(rows.map(|row| noise(stream, row)).collect())
            }
            ValueShape::Steps => {
                let stream = stream(series, STEPS_SALT);
                Column::Double(rows.map(|row| steps(stream, row)).collect())
            }
        }
    }

    /// Tablet `round` of device `device`: rows × measurements points, no nulls, timestamps
    /// ascending and continuing the device's previous round.
    pub fn tablet(&self, device: u32, round: u64) -> Tablet {
        assert!(
            device < self.spec.devices,
            "device {device} of {}",
            self.spec.devices
        );
        let rows = self.spec.rows_per_tablet as usize;
        let timestamps: Vec<i64> = (0..self.spec.rows_per_tablet)
            .map(|r| self.timestamp(round, r))
            .collect();
        let first = self.row_index(round, 0);
        let columns = (0..self.spec.measurements)
            .map(|m| self.column(device, m, first, &timestamps))
            .collect();
        let tablet = Tablet {
            device: self.device_names[device as usize].clone(),
            measurements: self.measurement_names.clone(),
            data_types: vec![self.spec.data_type; self.spec.measurements as usize],
            timestamps,
            columns,
            bitmaps: vec![None::<Bitmap>; self.spec.measurements as usize],
        };
        debug_assert_eq!(tablet.point_count(), rows * self.spec.measurements as usize);
        tablet
    }
}

/// [`ValueShape::Noise`] at `row`: the top 53 bits of a hash as a fraction, times 100.
fn noise(stream: u64, row: u64) -> f64 {
    (mix(stream ^ row) >> 11) as f64 / (1u64 << 53) as f64 * 100.0
}

/// [`ValueShape::Steps`] at `row`: the level of its block of [`STEPS_ROWS`] rows.
fn steps(stream: u64, row: u64) -> f64 {
    (mix(stream ^ (row / STEPS_ROWS)) % 10_000) as f64 / 100.0
}

/// Which tablets each client writes.
impl LoadSpec {
    /// Devices client `client` owns: `client, client + clients, …`.
    pub fn devices_of_client(&self, client: u32) -> u32 {
        assert!(client < self.clients, "client {client} of {}", self.clients);
        (self.devices - client).div_ceil(self.clients)
    }

    /// The `(device, round)` of client `client`'s `index`-th tablet: its devices in turn, one
    /// round after another.
    pub fn slot(&self, client: u32, index: u64) -> (u32, u64) {
        let owned = u64::from(self.devices_of_client(client));
        let device = u64::from(client) + (index % owned) * u64::from(self.clients);
        (
            u32::try_from(device).expect("device below devices"),
            index / owned,
        )
    }

    /// Tablets client `client` writes in [`StopAfter::Tablets`] mode (the total split evenly,
    /// the first clients taking one more); `None` in duration mode.
    pub fn tablets_of_client(&self, client: u32) -> Option<u64> {
        match self.stop {
            StopAfter::Tablets(total) => {
                let clients = u64::from(self.clients);
                Some(total / clients + u64::from(u64::from(client) < total % clients))
            }
            StopAfter::Duration(_) => None,
        }
    }
}

/// Per-tablet latencies of a run, in microseconds.
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    samples_us: Vec<u32>,
    max_us: u32,
    dropped: u64,
}

/// Percentiles of a run's tablet latencies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Samples behind the percentiles.
    pub samples: u64,
    /// Samples left out past [`LATENCY_SAMPLES_MAX`] (still counted in `max_ms`).
    pub dropped: u64,
    /// Median, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile, in milliseconds.
    pub p99_ms: f64,
    /// Largest, in milliseconds.
    pub max_ms: f64,
    /// Mean of the samples, in milliseconds.
    pub mean_ms: f64,
}

/// The nearest-rank percentile of ascending `sorted` samples: the smallest sample with at least
/// `p` % of the samples at or below it. `None` when there are no samples.
pub fn percentile(sorted: &[u32], p: f64) -> Option<u32> {
    assert!((0.0..=100.0).contains(&p), "percentile {p} outside 0..=100");
    debug_assert!(
        sorted.windows(2).all(|w| w[0] <= w[1]),
        "samples not sorted"
    );
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

impl Latencies {
    /// Records one tablet's latency (saturating at ~71 minutes).
    pub fn record(&mut self, latency: Duration) {
        let us = u32::try_from(latency.as_micros()).unwrap_or(u32::MAX);
        self.max_us = self.max_us.max(us);
        if self.samples_us.len() < LATENCY_SAMPLES_MAX {
            self.samples_us.push(us);
        } else {
            self.dropped += 1;
        }
    }

    /// Adds another recorder's samples, within the same limit.
    pub fn merge(&mut self, other: Latencies) {
        self.max_us = self.max_us.max(other.max_us);
        self.dropped += other.dropped;
        let room = LATENCY_SAMPLES_MAX - self.samples_us.len();
        let take = other.samples_us.len().min(room);
        self.dropped += (other.samples_us.len() - take) as u64;
        self.samples_us.extend_from_slice(&other.samples_us[..take]);
    }

    /// Sorts the samples and computes the summary (all zero without samples).
    pub fn summary(&mut self) -> LatencySummary {
        self.samples_us.sort_unstable();
        let ms = |us: Option<u32>| us.map_or(0.0, |us| f64::from(us) / 1000.0);
        let sum_us: u64 = self.samples_us.iter().map(|&us| u64::from(us)).sum();
        LatencySummary {
            samples: self.samples_us.len() as u64,
            dropped: self.dropped,
            p50_ms: ms(percentile(&self.samples_us, 50.0)),
            p99_ms: ms(percentile(&self.samples_us, 99.0)),
            max_ms: f64::from(self.max_us) / 1000.0,
            mean_ms: if self.samples_us.is_empty() {
                0.0
            } else {
                sum_us as f64 / self.samples_us.len() as f64 / 1000.0
            },
        }
    }
}

/// Why one tablet was not written (after the sink's own retries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteFailure {
    /// A status code or a short class, the key of `errors_by_code` (e.g. `536`, `http 500`,
    /// `io`).
    pub code: String,
    /// What went wrong, for the first few failures echoed to stderr.
    pub message: String,
}

/// A system under test, as one client sees it.
pub trait Sink: Send + 'static {
    /// Writes one tablet; resolves when the system acknowledged it (or gave up).
    fn write(&mut self, tablet: &Tablet) -> impl Future<Output = Result<(), WriteFailure>> + Send;

    /// Retries the client made so far, by status code or class.
    fn retries_by_code(&self) -> BTreeMap<String, u64>;
}

/// The outcome of a run, printed as a table or as one JSON object.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The system written to, e.g. `fencepost`, `influxdb`, `victoriametrics`.
    pub system: String,
    /// Points acknowledged.
    pub points: u64,
    /// Tablets (requests) acknowledged.
    pub tablets: u64,
    /// Wall time from the first request to the last answer, in seconds.
    pub elapsed_s: f64,
    /// Acknowledged points per second.
    pub points_per_s: f64,
    /// Acknowledged tablets per second.
    pub tablets_per_s: f64,
    /// Median tablet latency, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile tablet latency, in milliseconds.
    pub p99_ms: f64,
    /// Largest tablet latency, in milliseconds.
    pub max_ms: f64,
    /// Mean tablet latency, in milliseconds.
    pub mean_ms: f64,
    /// Latency samples behind the percentiles (every tablet, failed ones included).
    pub latency_samples: u64,
    /// Samples left out past [`LATENCY_SAMPLES_MAX`].
    pub latency_samples_dropped: u64,
    /// Tablets that failed.
    pub errors: u64,
    /// Failed tablets by status code or class.
    pub errors_by_code: BTreeMap<String, u64>,
    /// Retries made by the clients.
    pub retries: u64,
    /// Retries by status code or class.
    pub retries_by_code: BTreeMap<String, u64>,
    /// Clients.
    pub clients: u32,
    /// Devices.
    pub devices: u32,
    /// Measurements per device.
    pub measurements: u32,
    /// Rows per tablet.
    pub rows_per_tablet: u32,
    /// Value type.
    pub data_type: String,
    /// First timestamp, in milliseconds.
    pub start_time_ms: i64,
}

impl Report {
    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let codes = |m: &BTreeMap<String, u64>| {
            if m.is_empty() {
                "none".to_string()
            } else {
                m.iter()
                    .map(|(c, n)| format!("{c}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        format!(
            "{system}: {clients} clients, {devices} devices × {measurements} {data_type} \
             measurements, {rows} rows per tablet\n\
             points      {points} in {elapsed:.2} s\n\
             points/s    {pps:.0}\n\
             tablets/s   {tps:.1}\n\
             latency ms  p50 {p50:.2}  p99 {p99:.2}  max {max:.2}  mean {mean:.2} \
             ({samples} tablets)\n\
             errors      {errors} ({errors_by_code})\n\
             retries     {retries} ({retries_by_code})\n",
            system = self.system,
            clients = self.clients,
            devices = self.devices,
            measurements = self.measurements,
            data_type = self.data_type,
            rows = self.rows_per_tablet,
            points = self.points,
            elapsed = self.elapsed_s,
            pps = self.points_per_s,
            tps = self.tablets_per_s,
            p50 = self.p50_ms,
            p99 = self.p99_ms,
            max = self.max_ms,
            mean = self.mean_ms,
            samples = self.latency_samples,
            errors = self.errors,
            errors_by_code = codes(&self.errors_by_code),
            retries = self.retries,
            retries_by_code = codes(&self.retries_by_code),
        )
    }
}

/// Counters the clients bump and the progress line reads.
#[derive(Debug, Default)]
struct Progress {
    points: AtomicU64,
    errors: AtomicU64,
    messages_shown: AtomicU64,
}

/// What one client achieved, or all of them added up.
#[derive(Default)]
struct ClientOutcome {
    tablets: u64,
    latencies: Latencies,
    errors_by_code: BTreeMap<String, u64>,
    retries_by_code: BTreeMap<String, u64>,
}

async fn run_client<S: Sink>(
    mut sink: S,
    generator: Arc<Generator>,
    client: u32,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> ClientOutcome {
    let spec = generator.spec();
    let limit = spec.tablets_of_client(client);
    let points = generator.points_per_tablet();
    let mut outcome = ClientOutcome::default();
    let mut index = 0u64;
    // This client's share of the rate, as seconds per tablet.
    let pace = spec
        .rate_pts_per_s
        .map(|rate| Duration::from_secs_f64(points as f64 * spec.clients as f64 / rate as f64));
    let paced_from = Instant::now();
    while limit.is_none_or(|n| index < n) && !stop.load(Ordering::Relaxed) {
        if let Some(pace) = pace {
            let due = paced_from + pace.mul_f64(index as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                tokio::time::sleep(wait).await;
            }
        }
        let (device, round) = spec.slot(client, index);
        index += 1;
        let tablet = generator.tablet(device, round);
        let started = Instant::now();
        let result = sink.write(&tablet).await;
        outcome.latencies.record(started.elapsed());
        match result {
            Ok(()) => {
                outcome.tablets += 1;
                progress.points.fetch_add(points, Ordering::Relaxed);
            }
            Err(failure) => {
                progress.errors.fetch_add(1, Ordering::Relaxed);
                let shown = progress.messages_shown.fetch_add(1, Ordering::Relaxed);
                if shown < ERROR_MESSAGES_SHOWN_MAX as u64 {
                    eprintln!(
                        "client {client}: tablet {round} of {} failed ({}): {}",
                        tablet.device, failure.code, failure.message
                    );
                }
                *outcome.errors_by_code.entry(failure.code).or_default() += 1;
            }
        }
    }
    outcome.retries_by_code = sink.retries_by_code();
    outcome
}

/// Runs `spec` against one sink per client (made by `connect(client)` before the clock starts),
/// printing a progress line to stderr once a second, and reports. `system` names the target in
/// the report.
pub async fn drive<S, F, Fut>(system: &str, spec: LoadSpec, connect: F) -> anyhow::Result<Report>
where
    S: Sink,
    F: Fn(u32) -> Fut,
    Fut: Future<Output = anyhow::Result<S>>,
{
    let mut sinks = Vec::with_capacity(spec.clients as usize);
    for client in 0..spec.clients {
        sinks.push(connect(client).await?);
    }
    let generator = Arc::new(Generator::new(spec.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(Progress::default());
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(sinks.len());
    for (client, sink) in (0u32..).zip(sinks) {
        tasks.push(tokio::spawn(run_client(
            sink,
            generator.clone(),
            client,
            stop.clone(),
            progress.clone(),
        )));
    }
    let reporter = spawn_reporter(progress.clone(), stop.clone(), started, spec.stop);
    let mut outcomes = Vec::with_capacity(tasks.len());
    for task in tasks {
        outcomes.push(task.await?);
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    reporter.abort();
    let total = merge_outcomes(outcomes);
    if let StopAfter::Tablets(tablets) = spec.stop {
        // Nothing stops a client short of its share in this mode: every tablet was answered.
        let answered = total.tablets + total.errors_by_code.values().sum::<u64>();
        debug_assert_eq!(answered, tablets, "tablets acknowledged or failed");
    }
    Ok(report(system, &generator, total, elapsed_s))
}

/// Prints the progress line to stderr once a second from `started`, and in duration mode
/// raises `stop` at the deadline (printing on while the clients finish their last tablets).
fn spawn_reporter(
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
    started: Instant,
    stop_after: StopAfter,
) -> tokio::task::JoinHandle<()> {
    let deadline = match stop_after {
        StopAfter::Duration(d) => Some(started + d),
        StopAfter::Tablets(_) => None,
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::from_std(started) + Duration::from_secs(1),
            Duration::from_secs(1),
        );
        let mut last_points = 0u64;
        loop {
            match deadline {
                Some(deadline) => tokio::select! {
                    _ = tick.tick() => {}
                    _ = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {
                        stop.store(true, Ordering::Relaxed);
                        // Keep printing while the clients finish their last tablets.
                        continue;
                    }
                },
                None => {
                    tick.tick().await;
                }
            }
            let elapsed = started.elapsed().as_secs_f64();
            let points = progress.points.load(Ordering::Relaxed);
            eprintln!(
                "[{elapsed:6.1} s] {:>12.0} points/s (last second {:>12}), {} points, {} errors",
                points as f64 / elapsed,
                points - last_points,
                points,
                progress.errors.load(Ordering::Relaxed)
            );
            last_points = points;
        }
    })
}

/// The clients' outcomes added up: tablets, latencies, errors and retries by code.
fn merge_outcomes(outcomes: Vec<ClientOutcome>) -> ClientOutcome {
    let mut total = ClientOutcome::default();
    for outcome in outcomes {
        total.tablets += outcome.tablets;
        total.latencies.merge(outcome.latencies);
        for (code, n) in outcome.errors_by_code {
            *total.errors_by_code.entry(code).or_default() += n;
        }
        for (code, n) in outcome.retries_by_code {
            *total.retries_by_code.entry(code).or_default() += n;
        }
    }
    total
}

/// The report of a run of `generator`'s load against `system` that took `elapsed_s` seconds,
/// from the clients' `total`.
fn report(system: &str, generator: &Generator, mut total: ClientOutcome, elapsed_s: f64) -> Report {
    let spec = generator.spec();
    let summary = total.latencies.summary();
    let tablets = total.tablets;
    let points = tablets * generator.points_per_tablet();
    Report {
        system: system.to_string(),
        points,
        tablets,
        elapsed_s,
        points_per_s: points as f64 / elapsed_s,
        tablets_per_s: tablets as f64 / elapsed_s,
        p50_ms: summary.p50_ms,
        p99_ms: summary.p99_ms,
        max_ms: summary.max_ms,
        mean_ms: summary.mean_ms,
        latency_samples: summary.samples,
        latency_samples_dropped: summary.dropped,
        errors: total.errors_by_code.values().sum(),
        errors_by_code: total.errors_by_code,
        retries: total.retries_by_code.values().sum(),
        retries_by_code: total.retries_by_code,
        clients: spec.clients,
        devices: spec.devices,
        measurements: spec.measurements,
        rows_per_tablet: spec.rows_per_tablet,
        data_type: spec.data_type.name().to_string(),
        start_time_ms: spec.start_time_ms,
    }
}

#[cfg(test)]
mod tests;
