//! The workload and its history: concurrent sessions writing tablets of unique (device,
//! timestamp) across time partitions, and schema changes (DELETE TIMESERIES, DROP DATABASE).
//! Every operation is recorded with the instants it was invoked and completed and its outcome.

use std::collections::BTreeMap;
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
    /// Its timestamps: unique per device across the whole history ([`History::next_tablet`]),
    /// so a point present at the end is attributable to exactly this operation.
    pub timestamps: Vec<i64>,
    /// When the call started.
    pub invoked: Instant,
    /// When it returned.
    pub completed: Instant,
    /// Its outcome.
    pub outcome: Outcome,
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
    /// `DROP TABLE` of a table of [`crate::tables::TABLE_DATABASE`], written by table writers
    /// ([`crate::tables`]); `devices` are the writers' fixed devices (others are new in every
    /// tablet).
    Table {
        /// The table.
        table: String,
        /// The fixed devices its writers write, one per writer.
        devices: Vec<String>,
    },
    /// `deleteData` of every point of `device.measurement`: the series stays. No fence
    /// operation, so it is judged as linearizable only: it may remove a cell unless it was
    /// acknowledged before the cell's write was invoked, and an acknowledged one removes every
    /// acknowledged cell whose write completed before it was invoked.
    Points {
        /// The device.
        device: String,
        /// The measurement.
        measurement: String,
    },
}

impl DropTarget {
    /// Whether the change removes `device.measurement` (or its points).
    pub fn covers(&self, device: &str, measurement: &str) -> bool {
        match self {
            DropTarget::Series {
                device: d,
                measurement: m,
            }
            | DropTarget::Points {
                device: d,
                measurement: m,
            } => d == device && m == measurement,
            DropTarget::Database { database, .. } => device
                .strip_prefix(database.as_str())
                .is_some_and(|rest| rest.starts_with('.')),
            DropTarget::Table { table, .. } => {
                // The table's devices: its own path (no tags) and every path under it.
                let prefix = format!("{}.{table}", crate::tables::table_tree_database());
                device
                    .strip_prefix(prefix.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
            }
        }
    }

    /// A `deleteData`, not a fence operation.
    pub fn is_points(&self) -> bool {
        matches!(self, DropTarget::Points { .. })
    }

    /// The SHOW TIMESERIES prefix of what it removes.
    pub fn prefix(&self) -> String {
        match self {
            DropTarget::Series {
                device,
                measurement,
            }
            | DropTarget::Points {
                device,
                measurement,
            } => format!("{device}.{measurement}"),
            DropTarget::Database { database, .. } => format!("{database}."),
            DropTarget::Table { table, .. } => {
                format!("{}.{table}.", crate::tables::table_tree_database())
            }
        }
    }

    /// The devices written in the target.
    pub fn devices(&self) -> Vec<String> {
        match self {
            DropTarget::Series { device, .. } | DropTarget::Points { device, .. } => {
                vec![device.clone()]
            }
            DropTarget::Database { devices, .. } | DropTarget::Table { devices, .. } => {
                devices.clone()
            }
        }
    }
}

/// One schema change (one call; a re-sent drop is a second one).
#[derive(Clone, Debug)]
pub struct DropOp {
    /// What it removes.
    pub target: DropTarget,
    /// Who sent it, and to whom.
    pub via: String,
    /// When the call started.
    pub invoked: Instant,
    /// The last instant at which the test saw the target still pending delete on the
    /// ConfigNode leader (a linearizable read begun then): the drop's final state was committed
    /// after it. `None` when no probe saw it pending.
    pub pending_seen: Option<Instant>,
    /// When it returned.
    pub completed: Instant,
    /// Its outcome.
    pub outcome: Outcome,
}

impl DropOp {
    /// An instant before which the drop had certainly not committed its final state: a write
    /// that completed before it was validated against the old metadata.
    pub fn not_final_before(&self) -> Instant {
        self.pending_seen
            .map_or(self.invoked, |seen| seen.max(self.invoked))
    }
}

/// Everything that happened, shared by the workload tasks.
#[derive(Debug, Default)]
pub struct History {
    /// Tablet writes.
    pub tablets: Mutex<Vec<TabletOp>>,
    /// Schema changes.
    pub drops: Mutex<Vec<DropOp>>,
    next_id: AtomicU64,
    /// The next tablet number of each device (see [`timestamps`]).
    next_tablet: Mutex<BTreeMap<String, u64>>,
}

impl History {
    /// A new, empty history.
    pub fn new() -> Arc<History> {
        Arc::new(History::default())
    }

    /// The next tablet number of `device`: every write op on a device gets its own, so its
    /// timestamps ([`timestamps`]) belong to no other op of the history.
    pub fn next_tablet(&self, device: &str) -> u64 {
        let mut next = self.next_tablet.lock().expect("history");
        let k = next.entry(device.to_string()).or_default();
        *k += 1;
        *k - 1
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
/// partitions among [`PARTITIONS`], offset by `k` inside the partition. Once `k` reaches
/// `interval_ms` the tablets move on to the next [`PARTITIONS`] partitions, so the timestamps
/// of different `k` never meet.
pub fn timestamps(k: u64, interval_ms: i64) -> Vec<i64> {
    let k = i64::try_from(k).expect("a tablet number fits in i64");
    let (cycle, offset) = (k / interval_ms, k % interval_ms);
    let mut ts: Vec<i64> = (0..ROWS)
        .map(|r| ((k + 2 * r) % PARTITIONS + cycle * PARTITIONS) * interval_ms + offset)
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

/// Writes the next tablet of `device` (timestamps of its own, see [`History::next_tablet`]) and
/// records it.
pub async fn write_recorded(
    session: &Session,
    history: &History,
    writer: &str,
    device: &str,
    interval_ms: i64,
) -> Outcome {
    let timestamps = timestamps(history.next_tablet(device), interval_ms);
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
    });
    outcome
}

/// Writers that keep writing to some devices until stopped; each device's tablets get fresh
/// timestamps. The main workload's writers, and the writers that keep writing to a drop's
/// target while it is dropped and after (REVIEW T1).
pub struct Writers {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    interval_ms: i64,
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
        let mut all = Writers::none(interval_ms);
        for w in 0..writers {
            let mine: Vec<String> = (0..devices)
                .map(|d| format!("{DATABASE}.w{w}d{d}"))
                .collect();
            all.add(
                runtime.handle(),
                session.clone(),
                history.clone(),
                &format!("writer-{w}"),
                mine,
                Duration::from_millis(20),
            );
        }
        all
    }

    /// No writer yet; the writers added will write tablets for `time_partition_interval_ms`
    /// `interval_ms`.
    pub fn none(interval_ms: i64) -> Writers {
        Writers {
            stop: Arc::new(AtomicBool::new(false)),
            tasks: Vec::new(),
            interval_ms,
        }
    }

    /// Adds a writer `name` that writes to `devices` in turn through `session`, `pause` apart.
    pub fn add(
        &mut self,
        runtime: &tokio::runtime::Handle,
        session: Arc<Session>,
        history: Arc<History>,
        name: &str,
        devices: Vec<String>,
        pause: Duration,
    ) {
        let (stop, interval_ms) = (self.stop.clone(), self.interval_ms);
        let name = name.to_string();
        self.tasks.push(runtime.spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let device = &devices[n % devices.len()];
                write_recorded(&session, &history, &name, device, interval_ms).await;
                n += 1;
                tokio::time::sleep(pause).await;
            }
        }));
    }

    /// Adds a table writer `name` that writes table tablets of `table` through `session`,
    /// `pause` apart: each with its fixed device and two new ones
    /// ([`crate::tables::writer_tags`]).
    pub fn add_table(
        &mut self,
        runtime: &tokio::runtime::Handle,
        session: Arc<Session>,
        history: Arc<History>,
        name: &str,
        table: &str,
        pause: Duration,
    ) {
        let (stop, interval_ms) = (self.stop.clone(), self.interval_ms);
        let (name, table) = (name.to_string(), table.to_string());
        self.tasks.push(runtime.spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let tags = crate::tables::writer_tags(&name, n);
                crate::tables::table_write_recorded(
                    &session,
                    &history,
                    &name,
                    &table,
                    &tags,
                    interval_ms,
                )
                .await;
                n += 1;
                tokio::time::sleep(pause).await;
            }
        }));
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

    /// [`Writers::stop`] from async code.
    pub async fn stop_async(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await
                .expect("a writer task panicked (see its message above)");
        }
    }
}

/// How a drop reaches the cluster.
#[derive(Clone)]
pub enum DropVia {
    /// Through a session (a DataNode forwards it to the ConfigNode leader).
    Session(Arc<Session>),
    /// Straight to the ConfigNode at this endpoint, one attempt.
    ConfigNode(String),
}

/// Runs a schema change (or a `deleteData`) with a bounded wait and records it. While a schema
/// change runs, the ConfigNode leaders at `config_nodes` are asked every 100 ms whether the
/// target is still pending delete ([`DropOp::pending_seen`]).
pub async fn drop_recorded(
    via: &DropVia,
    config_nodes: &[String],
    history: &History,
    target: DropTarget,
) -> usize {
    let invoked = Instant::now();
    let asked = target.clone();
    let call = async move {
        match via {
            DropVia::Session(session) => {
                let r = match &asked {
                    DropTarget::Series {
                        device,
                        measurement,
                    } => {
                        session
                            .delete_timeseries(&format!("{device}.{measurement}"))
                            .await
                    }
                    DropTarget::Database { database, .. } => session.drop_database(database).await,
                    DropTarget::Table { table, .. } => session
                        .execute_table_statement(
                            Some(crate::tables::TABLE_DATABASE),
                            &format!("DROP TABLE {table}"),
                        )
                        .await
                        .map(drop),
                    DropTarget::Points {
                        device,
                        measurement,
                    } => {
                        let path = format!("{device}.{measurement}");
                        session
                            .delete_data(&[&path], i64::MIN / 2, i64::MAX / 2)
                            .await
                    }
                };
                Outcome::of(&r)
            }
            DropVia::ConfigNode(address) => crate::admin::drop_on(address, &asked).await,
        }
    };
    // A drop waits fence + margin for an unreachable DataNode; the server answers 712 after
    // fence + margin + 60 s. Wait a little longer than the session would on its own.
    let call = async {
        match tokio::time::timeout(Duration::from_secs(90), call).await {
            Ok(outcome) => outcome,
            Err(_) => Outcome::Unknown("no answer within 90 s (whole operation)".into()),
        }
    };
    let prefix = target.prefix();
    // A deletion of points leaves nothing pending; the probe would see a DELETE TIMESERIES of
    // the same series.
    let probe = !target.is_points();
    let mut call = std::pin::pin!(call);
    let mut pending_seen = None;
    let outcome = loop {
        let asked = Instant::now();
        tokio::select! {
            outcome = &mut call => break outcome,
            pending = crate::admin::pending_delete(config_nodes, &prefix), if probe => {
                if matches!(pending, Ok(true)) {
                    pending_seen = Some(asked);
                }
            }
        }
        tokio::select! {
            outcome = &mut call => break outcome,
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    };
    let via = match via {
        DropVia::Session(s) => format!("session on {:?}", s.endpoints()),
        DropVia::ConfigNode(a) => format!("ConfigNode {a}"),
    };
    history.record_drop(DropOp {
        target,
        via,
        invoked,
        pending_seen,
        completed: Instant::now(),
        outcome,
    })
}

/// What drop rounds need: sessions, the ConfigNodes to probe, the history.
#[derive(Clone)]
pub struct DropContext {
    /// Writes to the targets (retried across DataNodes).
    pub session: Arc<Session>,
    /// Sends the drops ([`crate::cluster::Cluster::ddl_session_config`]).
    pub ddl: Arc<Session>,
    /// ConfigNode endpoints, probed while a drop runs.
    pub config_nodes: Vec<String>,
    /// Where everything is recorded.
    pub history: Arc<History>,
    /// `time_partition_interval_ms`.
    pub interval_ms: i64,
}

impl DropContext {
    /// Starts `n` writers on the target's devices (named `<name>-<i>`), `pause` apart.
    pub fn target_writers(
        &self,
        runtime: &tokio::runtime::Handle,
        name: &str,
        target: &DropTarget,
        n: usize,
        pause: Duration,
    ) -> Writers {
        let mut writers = Writers::none(self.interval_ms);
        for i in 0..n {
            if let DropTarget::Table { table, .. } = target {
                writers.add_table(
                    runtime,
                    self.session.clone(),
                    self.history.clone(),
                    &table_writer_name(name, i),
                    table,
                    pause,
                );
                continue;
            }
            writers.add(
                runtime,
                self.session.clone(),
                self.history.clone(),
                &format!("{name}-{i}"),
                target.devices(),
                pause,
            );
        }
        writers
    }

    /// Waits (at most `deadline`) until some write to `device` was acknowledged, so the
    /// target exists and DataNodes cache it; returns whether one was.
    pub async fn wait_written(&self, device: &str, deadline: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < deadline {
            let acked = self
                .history
                .tablets
                .lock()
                .expect("history")
                .iter()
                .any(|o| o.device == device && o.outcome.is_ok());
            if acked {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// One drop round (REVIEW T1): writers keep writing to the target before, while and after it
    /// is dropped; the drop runs once the target holds data and `before` has passed; the
    /// writers stop `after` its answer. Returns the drop's index in the history.
    pub async fn drop_round(
        &self,
        runtime: &tokio::runtime::Handle,
        name: &str,
        target: DropTarget,
        before: Duration,
        after: Duration,
    ) -> usize {
        let writers = self.target_writers(runtime, name, &target, 2, Duration::from_millis(30));
        let device = target.devices()[0].clone();
        if !self.wait_written(&device, Duration::from_secs(20)).await {
            eprintln!("{name}: no write to {device} acknowledged within 20 s; dropping anyway");
        }
        tokio::time::sleep(before).await;
        let index = drop_recorded(
            &DropVia::Session(self.ddl.clone()),
            &self.config_nodes,
            &self.history,
            target,
        )
        .await;
        tokio::time::sleep(after).await;
        writers.stop_async().await;
        index
    }
}

/// A task that deletes every point of one series through `deleteData`, again and again, until
/// stopped ([`DropContext::deleter`]).
pub struct Deleter {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Deleter {
    /// Stops after the current deletion.
    pub async fn stop_async(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.task
            .await
            .expect("a deleter task panicked (see its message above)");
    }
}

impl DropContext {
    /// Starts a [`Deleter`] of `device.measurement` through the writers' session, its pauses
    /// varied by `seed` (150–700 ms), each deletion recorded as a [`DropTarget::Points`].
    pub fn deleter(
        &self,
        runtime: &tokio::runtime::Handle,
        device: &str,
        measurement: &str,
        seed: u64,
    ) -> Deleter {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, ctx) = (stop.clone(), self.clone());
        let target = DropTarget::Points {
            device: device.to_string(),
            measurement: measurement.to_string(),
        };
        let task = runtime.spawn(async move {
            let mut n = seed;
            while !flag.load(Ordering::Relaxed) {
                n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                tokio::time::sleep(Duration::from_millis(150 + (n >> 33) % 550)).await;
                let via = DropVia::Session(ctx.session.clone());
                drop_recorded(&via, &[], &ctx.history, target.clone()).await;
            }
        });
        Deleter { stop, task }
    }
}

/// The name of table writer `i` of a drop round `name`: its fixed device's tag is derived from
/// it ([`crate::tables::writer_tags`]), so [`DropTarget::Table::devices`] can name it.
pub fn table_writer_name(name: &str, i: usize) -> String {
    format!("{name}-{i}")
}

/// A DROP TABLE target whose table a round `name` writes with `writers` table writers.
pub fn table_target(name: &str, table: &str, writers: usize) -> DropTarget {
    DropTarget::Table {
        table: table.to_string(),
        devices: (0..writers)
            .map(|i| {
                let tags = crate::tables::writer_tags(&table_writer_name(name, i), 0);
                crate::tables::table_device(table, &tags[0])
            })
            .collect(),
    }
}

/// Schema churn for the nemesis: rounds that DELETE TIMESERIES a fresh series (racing
/// `deleteData`s of it), DROP TABLE a table, or DROP DATABASE one of the databases created
/// beforehand, while writers keep writing to it — before, during and after the drop (writes
/// after it re-create the target) — and faults run.
pub struct SchemaChurn {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

/// The database of the churn's `i`-th DROP DATABASE round.
pub fn churn_database(i: u64) -> String {
    format!("root.fpx{i}")
}

impl SchemaChurn {
    /// Starts the churn task. The `databases` databases it drops are created, with their regions,
    /// before this returns, so the faults hit their drops, not their creation. Every third round
    /// drops one of them while any is left (a bounded number: each database keeps its regions on
    /// the DataNodes, REVIEW L1); the other rounds delete a fresh series of [`DATABASE`].
    pub fn start(
        runtime: &tokio::runtime::Runtime,
        ctx: DropContext,
        databases: u64,
    ) -> SchemaChurn {
        // A table-model database: the table model's CREATE DATABASE (the models keep their
        // databases apart).
        let tables = crate::tables::TABLE_DATABASE;
        let create = format!("CREATE DATABASE IF NOT EXISTS {tables}");
        if let Err(e) = runtime.block_on(ctx.ddl.execute_table_statement(None, &create)) {
            panic!("creating the table database {tables}: {e}");
        }
        for i in 0..databases {
            let database = churn_database(i);
            if let Err(e) = runtime.block_on(ctx.ddl.create_database(&database)) {
                panic!("pre-creating {database}: {e}");
            }
            // The first writes allocate the regions.
            for _ in 0..4 {
                let outcome = runtime.block_on(write_recorded(
                    &ctx.session,
                    &ctx.history,
                    "churn-precreate",
                    &format!("{database}.d0"),
                    ctx.interval_ms,
                ));
                assert!(outcome.is_ok(), "pre-creating {database}: {outcome:?}");
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = runtime.handle().clone();
        let task = runtime.spawn(async move {
            let mut round: u64 = 0;
            let mut next_database = 0;
            while !flag.load(Ordering::Relaxed) {
                let name = format!("churn{round}");
                let target = if round % 3 == 1 && next_database < databases {
                    let database = churn_database(next_database);
                    next_database += 1;
                    DropTarget::Database {
                        devices: vec![format!("{database}.d0")],
                        database,
                    }
                } else if round % 3 == 2 {
                    // A table written by multi-device table tablets, dropped under the writes.
                    table_target(&name, &format!("ct{round}"), 2)
                } else {
                    DropTarget::Series {
                        device: format!("{DATABASE}.vic{round}"),
                        measurement: "s1".into(),
                    }
                };
                // Varied, so drops land at different points of the writers' cycle.
                let before = Duration::from_millis(200 + (round * 337) % 900);
                // A DELETE TIMESERIES round races `deleteData`s of the same series: before,
                // during and after the drop and the series' re-creation.
                let deleter = match &target {
                    DropTarget::Series {
                        device,
                        measurement,
                    } => Some(ctx.deleter(&handle, device, measurement, round)),
                    _ => None,
                };
                ctx.drop_round(&handle, &name, target, before, Duration::from_millis(800))
                    .await;
                if let Some(deleter) = deleter {
                    deleter.stop_async().await;
                }
                round += 1;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            round
        });
        SchemaChurn { stop, task }
    }

    /// Stops after the current round; returns the number of rounds.
    pub fn stop(self, runtime: &tokio::runtime::Runtime) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        runtime
            .block_on(self.task)
            .expect("the churn task panicked (see its message above)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_unique_per_device_and_span_partitions() {
        let interval = 1_000;
        let mut seen = std::collections::BTreeSet::new();
        for k in 0..5000 {
            let ts = timestamps(k, interval);
            let slots: std::collections::BTreeSet<i64> = ts.iter().map(|t| t / interval).collect();
            assert_eq!(slots.len(), ROWS as usize, "k={k}: {ts:?}");
            for t in ts {
                assert!(seen.insert(t), "k={k}: {t} repeated");
            }
        }
    }
}
