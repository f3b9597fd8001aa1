//! The workload and its history: concurrent sessions writing tablets of unique (device,
//! timestamp) across time partitions, and schema changes (DELETE TIMESERIES, DROP DATABASE).
//! Every operation is recorded with the instants it was invoked and completed and its outcome.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{DataType, Tablet, Value};
use session::{Session, SessionError};

/// The database of the main workload.
pub const DATABASE: &str = "root.fp";
/// Time partitions a device's tablets are spread over.
pub const PARTITIONS: i64 = 8;
/// Rows per tablet, each in a different time partition.
pub const ROWS: i64 = 3;
/// The measurements of every tablet.
pub const MEASUREMENTS: [(&str, DataType); 2] = [("s1", DataType::Double), ("s2", DataType::Int64)];
/// A whole operation (with the session's own retries) is abandoned as unknown after this long.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(40);

/// How an operation ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Acknowledged.
    Ok,
    /// Refused with a final status. An earlier attempt of the session's retry loop may still
    /// have applied, so for the checker this is as uncertain as [`Outcome::Unknown`].
    Failed(String),
    /// No answer (timeout, retries exhausted, connection lost): it may or may not have applied.
    Unknown(String),
}

impl Outcome {
    /// Classifies a session result.
    pub fn of(result: &Result<(), SessionError>) -> Outcome {
        match result {
            Ok(()) => Outcome::Ok,
            Err(e @ (SessionError::Status { .. } | SessionError::InvalidTablet(_))) => {
                Outcome::Failed(e.to_string())
            }
            Err(e) => Outcome::Unknown(e.to_string()),
        }
    }

    /// Acknowledged.
    pub fn is_ok(&self) -> bool {
        *self == Outcome::Ok
    }
}

/// One tablet write.
#[derive(Clone, Debug)]
pub struct TabletOp {
    /// Unique in the history.
    pub id: u64,
    /// Who wrote it (a writer name).
    pub writer: String,
    /// The device.
    pub device: String,
    /// Its timestamps (unique per device across the whole history).
    pub timestamps: Vec<i64>,
    /// When the call started.
    pub invoked: Instant,
    /// When it returned.
    pub completed: Instant,
    /// Its outcome.
    pub outcome: Outcome,
    /// Index in [`History::drops`] of the schema change that targets this data, if any.
    pub dropped_by: Option<usize>,
}

/// What a schema change removes.
#[derive(Clone, Debug, PartialEq)]
pub enum DropTarget {
    /// `DELETE TIMESERIES device.measurement`.
    Series {
        /// The device.
        device: String,
        /// The measurement.
        measurement: String,
    },
    /// `DROP DATABASE`; the devices written in it.
    Database {
        /// The database.
        database: String,
        /// Its devices.
        devices: Vec<String>,
    },
}

/// One schema change.
#[derive(Clone, Debug)]
pub struct DropOp {
    /// What it removes.
    pub target: DropTarget,
    /// When the call started.
    pub invoked: Instant,
    /// When it returned.
    pub completed: Instant,
    /// Its outcome.
    pub outcome: Outcome,
}

/// Everything that happened, shared by the workload tasks.
#[derive(Debug, Default)]
pub struct History {
    /// Tablet writes.
    pub tablets: Mutex<Vec<TabletOp>>,
    /// Schema changes.
    pub drops: Mutex<Vec<DropOp>>,
    next_id: AtomicU64,
}

impl History {
    /// A new, empty history.
    pub fn new() -> Arc<History> {
        Arc::new(History::default())
    }

    /// Records a tablet write.
    pub fn record_tablet(&self, mut op: TabletOp) -> u64 {
        op.id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = op.id;
        self.tablets.lock().expect("history").push(op);
        id
    }

    /// Records a schema change and returns its index.
    pub fn record_drop(&self, op: DropOp) -> usize {
        let mut drops = self.drops.lock().expect("history");
        drops.push(op);
        drops.len() - 1
    }

    /// Acknowledged tablet writes so far.
    pub fn acked(&self) -> usize {
        self.tablets
            .lock()
            .expect("history")
            .iter()
            .filter(|o| o.outcome.is_ok())
            .count()
    }

    /// Acknowledged tablet writes completed after `t`.
    pub fn acked_since(&self, t: Instant) -> usize {
        self.tablets
            .lock()
            .expect("history")
            .iter()
            .filter(|o| o.outcome.is_ok() && o.completed > t)
            .count()
    }

    /// Counts by outcome: (ok, failed, unknown).
    pub fn counts(&self) -> (usize, usize, usize) {
        let ops = self.tablets.lock().expect("history");
        let mut c = (0, 0, 0);
        for o in ops.iter() {
            match o.outcome {
                Outcome::Ok => c.0 += 1,
                Outcome::Failed(_) => c.1 += 1,
                Outcome::Unknown(_) => c.2 += 1,
            }
        }
        c
    }
}

/// The value of `s1` at `ts` on `device`: a function of both, so the checker can tell a point
/// from any other.
pub fn value_s1(device: &str, ts: i64) -> f64 {
    (ts as f64) * 0.5 + device.len() as f64
}

/// The value of `s2` at `ts` on `device`.
pub fn value_s2(device: &str, ts: i64) -> i64 {
    ts.wrapping_mul(7) ^ device.bytes().map(i64::from).sum::<i64>()
}

/// The timestamps of the `k`-th tablet of a device: one row in each of [`ROWS`] different time
/// partitions among [`PARTITIONS`], offset by `k` inside the partition (so unique per device
/// while `k < interval_ms`).
pub fn timestamps(k: u64, interval_ms: i64) -> Vec<i64> {
    let k = k as i64;
    assert!(
        k < interval_ms,
        "tablet {k} would reuse a timestamp (interval {interval_ms})"
    );
    let mut ts: Vec<i64> = (0..ROWS)
        .map(|r| ((k + 2 * r) % PARTITIONS) * interval_ms + k)
        .collect();
    ts.sort_unstable();
    ts
}

/// A tablet of `device` at `timestamps` with the workload's values.
pub fn tablet(device: &str, timestamps: &[i64]) -> Tablet {
    let mut t = Tablet::new(device, &MEASUREMENTS);
    for &ts in timestamps {
        t.push_row(
            ts,
            vec![
                Some(Value::Double(value_s1(device, ts))),
                Some(Value::Int64(value_s2(device, ts))),
            ],
        );
    }
    t
}

/// Writes one tablet and records it.
pub async fn write_recorded(
    session: &Session,
    history: &History,
    writer: &str,
    device: &str,
    timestamps: Vec<i64>,
    dropped_by: Option<usize>,
) -> Outcome {
    let t = tablet(device, &timestamps);
    let invoked = Instant::now();
    let result = match tokio::time::timeout(OPERATION_TIMEOUT, session.insert_tablet(&t)).await {
        Ok(r) => r,
        Err(_) => Err(SessionError::Timeout {
            endpoint: "(whole operation)".into(),
            timeout_ms: OPERATION_TIMEOUT.as_millis() as u64,
        }),
    };
    let outcome = Outcome::of(&result);
    history.record_tablet(TabletOp {
        id: 0,
        writer: writer.into(),
        device: device.into(),
        timestamps,
        invoked,
        completed: Instant::now(),
        outcome: outcome.clone(),
        dropped_by,
    });
    outcome
}

/// Concurrent writers of the main workload; stopped (and joined) by [`Writers::stop`].
pub struct Writers {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Writers {
    /// Starts `writers` tasks on `runtime`, each with `devices` devices of its own
    /// (`root.fp.w<w>d<d>`), writing in turn with a short pause.
    pub fn start(
        runtime: &tokio::runtime::Runtime,
        session: Arc<Session>,
        history: Arc<History>,
        writers: usize,
        devices: usize,
        interval_ms: i64,
    ) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..writers)
            .map(|w| {
                let (session, history, stop) = (session.clone(), history.clone(), stop.clone());
                runtime.spawn(async move {
                    let name = format!("writer-{w}");
                    let mut n: u64 = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let d = n % devices as u64;
                        let device = format!("{DATABASE}.w{w}d{d}");
                        let ts = timestamps(n / devices as u64, interval_ms);
                        write_recorded(&session, &history, &name, &device, ts, None).await;
                        n += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                })
            })
            .collect();
        Writers { stop, tasks }
    }

    /// Asks every writer to stop and waits for their last operation to finish.
    pub fn stop(self, runtime: &tokio::runtime::Runtime) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            runtime
                .block_on(t)
                .expect("a writer task panicked (see its message above)");
        }
    }
}

/// Runs a schema change with a bounded wait and records it.
pub async fn drop_recorded(session: &Session, history: &History, target: DropTarget) -> usize {
    let invoked = Instant::now();
    let call = async {
        match &target {
            DropTarget::Series {
                device,
                measurement,
            } => {
                session
                    .delete_timeseries(&format!("{device}.{measurement}"))
                    .await
            }
            DropTarget::Database { database, .. } => session.drop_database(database).await,
        }
    };
    // A drop waits fence + margin for an unreachable DataNode; the server answers 712 after
    // fence + margin + 60 s. Wait a little longer than the session would on its own.
    let result = match tokio::time::timeout(Duration::from_secs(90), call).await {
        Ok(r) => r,
        Err(_) => Err(SessionError::Timeout {
            endpoint: "(whole operation)".into(),
            timeout_ms: 90_000,
        }),
    };
    history.record_drop(DropOp {
        target,
        invoked,
        completed: Instant::now(),
        outcome: Outcome::of(&result),
    })
}

/// Schema churn for the nemesis: rounds that write a few tablets to a fresh series (or a fresh
/// database), stop writing to it, then DELETE TIMESERIES (or DROP DATABASE) — while faults run.
/// Nothing is written to a target once its drop was invoked, so after an acknowledged drop no
/// point of it may survive.
pub struct SchemaChurn {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl SchemaChurn {
    /// Starts the churn task: tablets through `session`, schema statements through `ddl` (see
    /// [`crate::cluster::Cluster::ddl_session_config`]). The databases of the first
    /// `precreated` rounds are created (with their regions) before this returns, so the faults
    /// hit their drops but not their creation; later rounds create theirs during the faults.
    pub fn start(
        runtime: &tokio::runtime::Runtime,
        session: Arc<Session>,
        ddl: Arc<Session>,
        history: Arc<History>,
        interval_ms: i64,
        precreated: u64,
    ) -> SchemaChurn {
        for round in (1..precreated).step_by(2) {
            let database = format!("root.fpx{round}");
            if let Err(e) = runtime.block_on(ddl.create_database(&database)) {
                panic!("pre-creating {database}: {e}");
            }
            // The round's tablets, written now: the first writes allocate the regions. Round
            // `r` records drop `r` (one drop per round).
            for k in 0..4 {
                let outcome = runtime.block_on(write_recorded(
                    &session,
                    &history,
                    "churn",
                    &format!("{database}.d0"),
                    timestamps(k, interval_ms),
                    Some(round as usize),
                ));
                assert!(outcome.is_ok(), "pre-creating {database}: {outcome:?}");
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = runtime.spawn(async move {
            let mut round: u64 = 0;
            while !flag.load(Ordering::Relaxed) {
                // Pre-created databases first; fresh ones (created during faults) after them.
                let by_database = round % 2 == 1;
                let (target, devices) = if by_database {
                    let database = format!("root.fpx{round}");
                    let device = format!("{database}.d0");
                    if round >= precreated {
                        if let Err(e) = ddl.create_database(&database).await {
                            eprintln!("churn: create {database}: {e} (auto-create will try)");
                        }
                    }
                    (
                        DropTarget::Database {
                            database,
                            devices: vec![device.clone()],
                        },
                        vec![device],
                    )
                } else {
                    let device = format!("{DATABASE}.vic{round}");
                    (
                        DropTarget::Series {
                            device: device.clone(),
                            measurement: "s1".into(),
                        },
                        vec![device],
                    )
                };
                // The drop's index is known before it runs: drops are recorded only here, one
                // per round.
                let index = history.drops.lock().expect("history").len();
                assert_eq!(index as u64, round, "one drop per churn round");
                let written_already = by_database && round < precreated;
                for k in (0..4).filter(|_| !written_already) {
                    for d in &devices {
                        write_recorded(
                            &session,
                            &history,
                            "churn",
                            d,
                            timestamps(k, interval_ms),
                            Some(index),
                        )
                        .await;
                    }
                }
                let recorded = drop_recorded(&ddl, &history, target).await;
                assert_eq!(recorded, index, "drops are recorded by the churn task only");
                round += 1;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        SchemaChurn { stop, task }
    }

    /// Stops after the current round.
    pub fn stop(self, runtime: &tokio::runtime::Runtime) {
        self.stop.store(true, Ordering::Relaxed);
        runtime
            .block_on(self.task)
            .expect("the churn task panicked (see its message above)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_unique_per_device_and_span_partitions() {
        let interval = 10_000;
        let mut seen = std::collections::BTreeSet::new();
        for k in 0..2000 {
            let ts = timestamps(k, interval);
            let slots: std::collections::BTreeSet<i64> = ts.iter().map(|t| t / interval).collect();
            assert_eq!(slots.len(), ROWS as usize, "k={k}: {ts:?}");
            for t in ts {
                assert!(seen.insert(t), "k={k}: {t} repeated");
            }
        }
    }
}
