//! A single-replica region with its own command log: the stand-in for the raft log in engine
//! tests. Entries are appended durably, then applied in order; a restart replays the log after the
//! region's applied index, as the raft apply loop does.

use std::collections::BTreeMap;
use std::path::Path;

use common::{DataType, PartitionConfig, Tablet, Value};
use engine::{
    ApplyOutcome, CompactionConfig, DataRegion, LeaseGate, RegionCommand, StorageConfig,
    StorageError,
};
use wal::{Durability, Wal, WalOptions};

pub fn config() -> StorageConfig {
    StorageConfig {
        partition: PartitionConfig {
            series_slot_num: 1000,
            time_partition_interval_ms: 10,
            time_partition_origin_ms: 0,
        },
        // Merge as soon as two neighbouring files exist, so tests exercise compaction often.
        compaction: CompactionConfig {
            files_min: 2,
            write_bytes_per_sec: 0,
            ..CompactionConfig::default()
        },
        ..StorageConfig::default()
    }
}

pub fn wal_options(dir: &Path) -> WalOptions {
    let mut options = WalOptions::new(dir.join("log"));
    options.durability = Durability::Sync;
    options.segment_bytes = 64 << 10;
    options
}

pub struct LoggedRegion {
    pub log: Wal,
    pub region: DataRegion,
}

impl LoggedRegion {
    /// Opens log and region; does not replay (call `replay`).
    pub fn open(dir: &Path) -> LoggedRegion {
        LoggedRegion::open_with(dir, config())
    }

    /// [`LoggedRegion::open`] with another configuration (same tablet limits for replay).
    pub fn open_with(dir: &Path, config: StorageConfig) -> LoggedRegion {
        let log = Wal::open(wal_options(dir)).expect("open log");
        let region = DataRegion::open(dir.join("region"), config).expect("open region");
        LoggedRegion { log, region }
    }

    /// Applies every logged entry after the applied index; stops at the first recoverable error.
    /// A deterministic error is that entry's result and replay moves on, as the apply loop does.
    pub fn replay(&self, gate: &dyn LeaseGate) -> Result<(), StorageError> {
        let from = self.region.applied_index() + 1;
        for entry in self.log.iter_from(from).expect("iterate log") {
            let (index, bytes) = entry.expect("read log entry");
            let command = RegionCommand::decode(&bytes, &config().tablet_limits)
                .expect("logged command decodes");
            match self.region.apply(index, &command, gate) {
                Err(e) if e.is_recoverable() => return Err(e),
                Ok(_) | Err(_) => {}
            }
        }
        Ok(())
    }

    /// Logs a command durably and applies everything pending, returning this command's result.
    pub fn write(
        &self,
        command: &RegionCommand,
        gate: &dyn LeaseGate,
    ) -> Result<ApplyOutcome, StorageError> {
        let index = self.log.append(&command.encode()).expect("append");
        for entry in self
            .log
            .iter_from(self.region.applied_index() + 1)
            .expect("iterate")
        {
            let (i, bytes) = entry.expect("read log entry");
            let logged = RegionCommand::decode(&bytes, &config().tablet_limits).unwrap();
            let result = self.region.apply(i, &logged, gate);
            if i == index {
                return result;
            }
            if let Err(e) = result {
                if e.is_recoverable() {
                    return Err(e);
                }
            }
        }
        panic!("entry {index} not found in the log");
    }

    /// Flushes and truncates the log below the checkpoint.
    pub fn flush(&self) {
        let checkpoint = self.region.flush().expect("flush");
        self.log
            .truncate_prefix(checkpoint + 1)
            .expect("truncate log");
    }
}

/// The model: every series' points, last write wins.
pub type Model = BTreeMap<(String, String), BTreeMap<i64, Value>>;

pub fn apply_to_model(model: &mut Model, tablet: &Tablet) {
    for (row, &t) in tablet.timestamps.iter().enumerate() {
        for (col, measurement) in tablet.measurements.iter().enumerate() {
            if tablet.is_null(row, col) {
                continue;
            }
            model
                .entry((tablet.device.clone(), measurement.clone()))
                .or_default()
                .insert(t, tablet.columns[col].value(row));
        }
    }
}

/// The region's whole content, read through the query path.
pub fn content(region: &DataRegion) -> Model {
    let mut out = Model::new();
    for (device, measurement, _) in region.series() {
        let points = region
            .query(&device, &measurement, i64::MIN, i64::MAX)
            .expect("query");
        if !points.is_empty() {
            out.insert((device, measurement), points.into_iter().collect());
        }
    }
    out
}

/// A DOUBLE tablet for `device` over `timestamps`, values derived from `seed`.
pub fn tablet(device: &str, timestamps: &[i64], seed: f64) -> Tablet {
    let mut t = Tablet::new(device, &[("s1", DataType::Double), ("s2", DataType::Int64)]);
    for (i, &ts) in timestamps.iter().enumerate() {
        t.push_row(
            ts,
            vec![
                Some(Value::Double(seed + i as f64)),
                if i % 3 == 2 {
                    None
                } else {
                    Some(Value::Int64(ts * 10))
                },
            ],
        );
    }
    t
}
