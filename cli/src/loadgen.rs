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
    let mut outcome = ClientOutcome {
        tablets: 0,
        latencies: Latencies::default(),
        errors_by_code: BTreeMap::new(),
        retries_by_code: BTreeMap::new(),
    };
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
    let reporter = {
        let progress = progress.clone();
        let stop = stop.clone();
        let deadline = match spec.stop {
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
    };
    let mut outcomes = Vec::with_capacity(tasks.len());
    for task in tasks {
        outcomes.push(task.await?);
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    reporter.abort();
    let mut latencies = Latencies::default();
    let mut tablets = 0;
    let mut errors_by_code = BTreeMap::new();
    let mut retries_by_code: BTreeMap<String, u64> = BTreeMap::new();
    for outcome in outcomes {
        tablets += outcome.tablets;
        latencies.merge(outcome.latencies);
        for (code, n) in outcome.errors_by_code {
            *errors_by_code.entry(code).or_default() += n;
        }
        for (code, n) in outcome.retries_by_code {
            *retries_by_code.entry(code).or_default() += n;
        }
    }
    let summary = latencies.summary();
    let points = tablets * generator.points_per_tablet();
    Ok(Report {
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
        errors: errors_by_code.values().sum(),
        errors_by_code,
        retries: retries_by_code.values().sum(),
        retries_by_code,
        clients: spec.clients,
        devices: spec.devices,
        measurements: spec.measurements,
        rows_per_tablet: spec.rows_per_tablet,
        data_type: spec.data_type.name().to_string(),
        start_time_ms: spec.start_time_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn spec(devices: u32, measurements: u32, rows: u32, clients: u32, t: DataType) -> LoadSpec {
        LoadSpec {
            devices,
            measurements,
            rows_per_tablet: rows,
            clients,
            data_type: t,
            database: "root.bench".into(),
            start_time_ms: 1_700_000_000_000,
            step_ms: 1,
            seed: 7,
            values: ValueShape::Uniform2dp,
            stop: StopAfter::Tablets(100),
            rate_pts_per_s: None,
        }
    }

    #[test]
    fn tablets_have_the_requested_shape_and_type() {
        for t in DataType::ALL {
            let g = Generator::new(spec(5, 3, 17, 2, t));
            let tablet = g.tablet(4, 2);
            assert_eq!(tablet.device, "root.bench.d4");
            assert_eq!(tablet.measurements, ["s0", "s1", "s2"]);
            assert_eq!(tablet.data_types, [t; 3]);
            assert_eq!(tablet.row_count(), 17);
            assert_eq!(tablet.point_count(), 51);
            assert!(tablet
                .columns
                .iter()
                .all(|c| c.data_type() == t && c.len() == 17));
            tablet
                .validate(&common::TabletLimits::default())
                .unwrap_or_else(|e| panic!("{t}: {e}"));
            // The columnar fast path and the point-wise `value` agree.
            for row in [0, 9, 16] {
                for m in 0..3u32 {
                    assert_eq!(
                        tablet.columns[m as usize].value(row),
                        g.value(4, m, tablet.timestamps[row])
                    );
                }
            }
        }
    }

    #[test]
    fn the_same_spec_gives_the_same_points_and_the_seed_changes_them() {
        let a = Generator::new(spec(10, 4, 100, 3, DataType::Double));
        let b = Generator::new(spec(10, 4, 100, 3, DataType::Double));
        assert_eq!(a.tablet(3, 5), b.tablet(3, 5));
        let mut other = spec(10, 4, 100, 3, DataType::Double);
        other.seed = 8;
        let c = Generator::new(other);
        let (ta, tc) = (a.tablet(3, 5), c.tablet(3, 5));
        assert_eq!(ta.timestamps, tc.timestamps);
        assert_ne!(ta.columns, tc.columns);
        // Values vary across devices, measurements and rows.
        let Column::Double(v) = &ta.columns[0] else {
            panic!("a DOUBLE column: {:?}", ta.columns[0])
        };
        assert!(
            v.iter().map(|x| x.to_bits()).collect::<HashSet<_>>().len() > 50,
            "{v:?}"
        );
        assert_ne!(a.tablet(3, 5).columns, a.tablet(4, 5).columns);
    }

    #[test]
    fn golden_values_pin_the_generator() {
        // Peers and Fencepost are compared on these exact points; a change here changes every
        // published figure's workload, so it must be deliberate.
        let g = Generator::new(spec(10, 4, 100, 3, DataType::Double));
        assert_eq!(g.timestamp(0, 0), 1_700_000_000_000);
        assert_eq!(g.timestamp(2, 5), 1_700_000_000_205);
        let golden: Vec<Value> = (0..3).map(|m| g.value(1, m, 1_700_000_000_000)).collect();
        assert_eq!(golden, GOLDEN_D1_T0.map(Value::Double));
    }
    const GOLDEN_D1_T0: [f64; 3] = [130.28, 873.02, 310.03];

    fn shaped(values: ValueShape, rows: u32, step_ms: i64) -> Generator {
        let mut s = spec(10, 4, rows, 3, DataType::Double);
        s.values = values;
        s.step_ms = step_ms;
        Generator::new(s)
    }

    /// Device 1's `s0` and `s1` at rows 0, 1, 2 and 150, point-wise.
    fn first_values(g: &Generator) -> Vec<f64> {
        let mut out = Vec::new();
        for m in 0..2 {
            for row in [0, 1, 2, 150] {
                let t = g.timestamp(0, 0) + row * g.spec().step_ms;
                let Value::Double(v) = g.value(1, m, t) else {
                    panic!("a DOUBLE value")
                };
                out.push(v);
            }
        }
        out
    }

    #[test]
    fn golden_values_pin_every_shape() {
        // As GOLDEN_D1_T0: the storage figures of every system are measured on these points.
        // The shaped values are functions of the row, so the interval does not change them.
        for (shape, golden) in [
            (ValueShape::Walk2dp, GOLDEN_WALK2DP),
            (ValueShape::Noise, GOLDEN_NOISE),
            (ValueShape::Steps, GOLDEN_STEPS),
        ] {
            for step_ms in [1, 1000] {
                let got = first_values(&shaped(shape, 100, step_ms));
                assert_eq!(got, golden, "{shape:?} every {step_ms} ms");
            }
        }
    }
    const GOLDEN_WALK2DP: [f64; 8] = [16.86, 17.1, 17.02, 12.23, 29.13, 29.55, 29.15, 34.79];
    const GOLDEN_NOISE: [f64; 8] = [
        58.36383169873227,
        89.09225998133985,
        25.510263858972102,
        24.179604121715748,
        23.21993174068213,
        5.587790870513887,
        11.426154175379322,
        37.21092077042233,
    ];
    const GOLDEN_STEPS: [f64; 8] = [23.97, 23.97, 23.97, 44.96, 59.88, 59.88, 59.88, 53.71];

    #[test]
    fn tablets_and_points_agree_for_every_shape_in_any_order() {
        for shape in [
            ValueShape::Uniform2dp,
            ValueShape::Walk2dp,
            ValueShape::Noise,
            ValueShape::Steps,
        ] {
            let g = shaped(shape, 30, 1000);
            // Out of order: the walk's cursor must start over when asked for an earlier row.
            for round in [3, 1, 2, 2, 0, 7] {
                let tablet = g.tablet(2, round);
                for row in [0, 1, 29] {
                    for m in 0..4u32 {
                        assert_eq!(
                            tablet.columns[m as usize].value(row),
                            g.value(2, m, tablet.timestamps[row]),
                            "{shape:?} round {round} row {row} s{m}"
                        );
                    }
                }
            }
        }
    }

    /// Series `s0` of device 0 over 10,000 rows, as the tablets give it.
    fn series_values(shape: ValueShape) -> Vec<f64> {
        let g = shaped(shape, 1000, 1000);
        (0..10)
            .flat_map(|round| {
                let Column::Double(v) = g.tablet(0, round).columns.swap_remove(0) else {
                    panic!("a DOUBLE column")
                };
                v
            })
            .collect()
    }

    fn is_2dp(v: f64) -> bool {
        (v * 100.0).round() / 100.0 == v
    }

    #[test]
    fn walk2dp_is_a_two_decimal_walk_with_half_unit_steps() {
        let v = series_values(ValueShape::Walk2dp);
        assert!((10.0..=30.0).contains(&v[0]), "{}", v[0]);
        assert!(
            v.iter().all(|&x| is_2dp(x)),
            "a value with more than 2 decimals"
        );
        let diffs: Vec<f64> = v.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = diffs.iter().sum::<f64>() / diffs.len() as f64;
        let sd =
            (diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / diffs.len() as f64).sqrt();
        assert!((0.47..0.53).contains(&sd), "step σ {sd}");
        assert!(mean.abs() < 0.02, "step mean {mean}");
        // A step is at most 196,605 / 131,072 ≈ 1.5, plus the rounding on both sides.
        assert!(diffs.iter().all(|d| d.abs() <= 1.51), "a step over 1.51");
        assert!(
            v.windows(2).any(|w| w[0] == w[1]),
            "a walk never standing still"
        );
    }

    #[test]
    fn noise_has_full_precision_and_steps_hold_each_level_for_its_rows() {
        let noise = series_values(ValueShape::Noise);
        assert!(noise.iter().all(|x| (0.0..100.0).contains(x)));
        assert!(noise.iter().filter(|&&x| is_2dp(x)).count() < 10);
        let distinct: HashSet<u64> = noise.iter().map(|x| x.to_bits()).collect();
        assert_eq!(distinct.len(), noise.len());

        let steps = series_values(ValueShape::Steps);
        assert!(steps
            .iter()
            .all(|&x| is_2dp(x) && (0.0..100.0).contains(&x)));
        for (row, w) in steps.windows(2).enumerate() {
            let boundary = (row as u64 + 1).is_multiple_of(STEPS_ROWS);
            if !boundary {
                assert_eq!(
                    w[0],
                    w[1],
                    "level changed inside a block at row {}",
                    row + 1
                );
            }
        }
        let levels: HashSet<u64> = steps.iter().map(|x| x.to_bits()).collect();
        assert!(levels.len() > 90, "{} levels in 100 blocks", levels.len());
    }

    #[test]
    fn every_device_and_timestamp_is_written_once() {
        for (devices, clients) in [(10, 3), (7, 7), (100, 4), (5, 1)] {
            let mut s = spec(devices, 2, 4, clients, DataType::Int64);
            let total = 3 * u64::from(devices) + 2; // not a multiple of anything
            s.stop = StopAfter::Tablets(total);
            let g = Generator::new(s.clone());
            let mut seen = HashSet::new();
            let mut owner = vec![None; devices as usize];
            let mut tablets = 0;
            for client in 0..clients {
                let n = s.tablets_of_client(client).expect("tablet mode");
                for i in 0..n {
                    let (device, round) = s.slot(client, i);
                    // A device belongs to one client only.
                    assert_eq!(*owner[device as usize].get_or_insert(client), client);
                    for &t in &g.tablet(device, round).timestamps {
                        assert!(seen.insert((device, t)), "({device}, {t}) written twice");
                    }
                    tablets += 1;
                }
            }
            assert_eq!(tablets, total, "{devices} devices, {clients} clients");
            assert!(
                owner.iter().all(Option::is_some),
                "an idle device: {owner:?}"
            );
        }
    }

    #[test]
    fn a_device_continues_its_timestamps_round_after_round() {
        let s = spec(4, 1, 10, 2, DataType::Boolean);
        let g = Generator::new(s.clone());
        // Client 1 owns devices 1 and 3: d1 r0, d3 r0, d1 r1, …
        assert_eq!(s.devices_of_client(1), 2);
        assert_eq!(
            (0..4).map(|i| s.slot(1, i)).collect::<Vec<_>>(),
            [(1, 0), (3, 0), (1, 1), (3, 1)]
        );
        let r0 = g.tablet(1, 0).timestamps;
        let r1 = g.tablet(1, 1).timestamps;
        assert_eq!(r0.last().map(|t| t + 1), r1.first().copied());
        assert!(r0.windows(2).all(|w| w[1] == w[0] + 1));
    }

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7], 0.0), Some(7));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        let hundred: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&hundred, 50.0), Some(50));
        assert_eq!(percentile(&hundred, 99.0), Some(99));
        assert_eq!(percentile(&hundred, 100.0), Some(100));
        assert_eq!(percentile(&hundred, 0.0), Some(1));
        assert_eq!(percentile(&[1, 2, 3, 4], 50.0), Some(2));
        assert_eq!(percentile(&[1, 2, 3, 4], 51.0), Some(3));
        let ten: Vec<u32> = (1..=10).collect();
        assert_eq!(percentile(&ten, 99.0), Some(10));
    }

    #[test]
    fn latency_summary_sorts_merges_and_respects_the_limit() {
        let mut a = Latencies::default();
        for us in [3000, 1000, 2000] {
            a.record(Duration::from_micros(us));
        }
        let mut b = Latencies::default();
        b.record(Duration::from_micros(4000));
        a.merge(b);
        let s = a.summary();
        assert_eq!(s.samples, 4);
        assert_eq!(s.p50_ms, 2.0);
        assert_eq!(s.p99_ms, 4.0);
        assert_eq!(s.max_ms, 4.0);
        assert_eq!(s.mean_ms, 2.5);
        assert_eq!(Latencies::default().summary(), LatencySummary::default());

        let mut full = Latencies {
            samples_us: vec![1; LATENCY_SAMPLES_MAX],
            ..Latencies::default()
        };
        full.record(Duration::from_secs(1));
        let mut extra = Latencies::default();
        extra.record(Duration::from_micros(5));
        full.merge(extra);
        let s = full.summary();
        assert_eq!((s.samples, s.dropped), (LATENCY_SAMPLES_MAX as u64, 2));
        assert_eq!(s.max_ms, 1000.0);
    }

    fn args() -> LoadArgs {
        LoadArgs {
            devices: 100,
            measurements: 10,
            rows_per_tablet: 1000,
            tablets: None,
            duration_s: None,
            clients: 4,
            data_type: DataType::Double,
            database: "root.bench".into(),
            start_time: None,
            step_ms: 1,
            seed: 1,
            values: ValueShape::Uniform2dp,
            rate_pts_per_s: None,
        }
    }

    #[test]
    fn flags_are_checked_against_their_limits() {
        let s = args().to_spec(10_000_000).expect("defaults are valid");
        assert_eq!(s.start_time_ms, 10_000_000 - START_BEFORE_NOW_MS);
        assert_eq!(s.stop, StopAfter::Duration(Duration::from_secs(10)));
        let bad = [
            LoadArgs {
                devices: 0,
                ..args()
            },
            LoadArgs {
                clients: 101,
                ..args()
            },
            LoadArgs {
                clients: 0,
                ..args()
            },
            LoadArgs {
                rows_per_tablet: ROWS_PER_TABLET_MAX + 1,
                ..args()
            },
            LoadArgs {
                measurements: 0,
                ..args()
            },
            LoadArgs {
                step_ms: 0,
                ..args()
            },
            LoadArgs {
                tablets: Some(0),
                ..args()
            },
            LoadArgs {
                duration_s: Some(0),
                ..args()
            },
            LoadArgs {
                database: "bench".into(),
                ..args()
            },
            LoadArgs {
                values: ValueShape::Walk2dp,
                data_type: DataType::Int64,
                ..args()
            },
        ];
        for a in bad {
            assert!(a.to_spec(0).is_err(), "{a:?}");
        }
        let s = LoadArgs {
            tablets: Some(9),
            start_time: Some(5),
            ..args()
        }
        .to_spec(0)
        .expect("valid");
        assert_eq!((s.stop, s.start_time_ms), (StopAfter::Tablets(9), 5));
        assert_eq!(
            (0..4).map(|c| s.tablets_of_client(c)).collect::<Vec<_>>(),
            [Some(3), Some(2), Some(2), Some(2)]
        );
    }
}
