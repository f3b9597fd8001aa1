//! `hostile`: what hostile clients do to one real DataNode (issue 38), in figures. Not a test: it
//! asserts nothing about timing, it prints what it measured (`scripts/bench.sh --hostile` starts
//! the cluster and records the table).
//!
//! Two victims write all along: a logged-in Thrift client (binary protocol) and a gRPC session,
//! each a tablet of 10 rows × 10 DOUBLE measurements to its own device every
//! `--victim-interval-ms`, recording every call's latency. A background task samples the
//! DataNode's RSS (`VmRSS` of `/proc/<pid>/status`) and open descriptors (entries of
//! `/proc/<pid>/fd`) every 200 ms. Then, one phase after another, each printing one row:
//!
//! - baseline: the victims alone.
//! - big frames: `--big-frames` connections each announce a 64 MiB frame and stream bytes until
//!   the server closes them.
//! - truncated frames: a few connections send 4 bytes of a 100-byte frame and go quiet; the
//!   server closes them at its handshake timeout.
//! - flood: `--connections` connections each send one byte and hold for `--hold-s`; meanwhile a
//!   new Thrift client and a new gRPC client connect, log in and write once each.
//! - wide write / wide select: `--wide-measurements` DOUBLE series × `--wide-rows` rows to
//!   `root.hostile.wide`, then `select * from root.hostile.wide` over Thrift
//!   (`executeQueryStatementV2`, then `fetchResultsV2` while more), as an official client does.
//! - after: the victims alone again.
//!
//! Finally every row any client was acknowledged is read back over gRPC (raw points of one
//! measurement per device); the exit code is 1 when one is missing, 2 on an error.

mod procfs;
mod raw;

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use common::{Column, DataType, Tablet};
use fencepost_benches::thrift::ThriftConnection;
use serde::Serialize;
use session::{Session, SessionConfig};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use procfs::{lock, Sampler, Span, Window};
use raw::{
    all_endings, big_frame, flood_connection, median_max_s, shorten, truncated_frame, Endings,
    BIG_FRAME_BYTES,
};

/// Rows and DOUBLE measurements of a victim's tablet.
const VICTIM_ROWS: usize = 10;
const VICTIM_MEASUREMENTS: usize = 10;
/// Longest a victim's Thrift call may take before it counts as failed and reconnects (the gRPC
/// session has its own `request_timeout_ms` and retries).
const VICTIM_CALL_TIMEOUT_S: u64 = 60;
/// Latencies one victim records; past it the victim stops writing (a run is finite: this only
/// bounds a misconfigured one, 2.7 hours at 100 writes/s).
const VICTIM_SAMPLES_MAX: usize = 1_000_000;
/// Connections of the truncated-frame phase.
const TRUNCATED_CONNECTIONS: usize = 4;
/// Flood connections being opened at once.
const FLOOD_CONNECTS_IN_FLIGHT: usize = 256;
/// Descriptors kept free beyond the hostile connections (victims, newcomers, runtime).
const SPARE_DESCRIPTORS: u64 = 256;
/// Rows per tablet of the wide write, and the Thrift connections writing it.
const WIDE_TABLET_ROWS: usize = 100;
const WIDE_WRITERS: usize = 2;
/// Rows a page asks for: the official Python client's default `fetch_size`.
const FETCH_SIZE: i32 = 5_000;
/// Longest the wide select (one call or fetch) may take.
const QUERY_TIMEOUT_S: u64 = 600;
/// Pages of the wide select read at most.
const PAGES_MAX: u64 = 1_000_000;

const DATABASE: &str = "root.hostile";

#[derive(Parser, Debug)]
#[command(
    name = "hostile",
    about = "Hostile clients against one DataNode: RSS, descriptors and other clients' latency"
)]
struct Cli {
    /// The DataNode's session port, host:port (Thrift and gRPC).
    #[arg(long, default_value = "127.0.0.1:6667")]
    address: String,
    /// The DataNode's pid, for /proc/<pid>/status and /proc/<pid>/fd.
    #[arg(long)]
    pid: u32,
    /// Connections of the flood (each sends one byte and holds).
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// Connections announcing a 64 MiB frame.
    #[arg(long, default_value_t = 32)]
    big_frames: usize,
    /// Seconds each flood connection holds.
    #[arg(long, default_value_t = 36)]
    hold_s: u64,
    /// DOUBLE measurements of the wide device.
    #[arg(long, default_value_t = 2_000)]
    wide_measurements: usize,
    /// Rows of the wide device.
    #[arg(long, default_value_t = 100_000)]
    wide_rows: usize,
    /// Seconds of the baseline and after phases.
    #[arg(long, default_value_t = 5)]
    baseline_s: u64,
    /// Milliseconds between a victim's writes (a write that takes longer is followed at once).
    #[arg(long, default_value_t = 10)]
    victim_interval_ms: u64,
    /// One JSON object on stdout at the end; the table goes to stderr.
    #[arg(long)]
    json: bool,
}

impl Cli {
    fn validate(&self) -> anyhow::Result<()> {
        let check = |name: &str, value: u64, range: std::ops::RangeInclusive<u64>| {
            anyhow::ensure!(
                range.contains(&value),
                "--{name} is {value}, not in {}..={}",
                range.start(),
                range.end()
            );
            Ok(())
        };
        check("connections", self.connections as u64, 1..=100_000)?;
        check("big-frames", self.big_frames as u64, 1..=1_024)?;
        check("hold-s", self.hold_s, 1..=3_600)?;
        check(
            "wide-measurements",
            self.wide_measurements as u64,
            1..=10_000,
        )?;
        check("wide-rows", self.wide_rows as u64, 1..=10_000_000)?;
        check("baseline-s", self.baseline_s, 1..=3_600)?;
        check("victim-interval-ms", self.victim_interval_ms, 1..=10_000)
    }
}

// ---------------------------------------------------------------------------------------------
// The victims.

/// What one writer did: every call's latency, its failures, and the rows acknowledged.
#[derive(Default)]
struct Ledger {
    /// (start, latency) of every call.
    latencies: Vec<(Instant, Duration)>,
    /// (start, message) of every failed call.
    errors: Vec<(Instant, String)>,
    /// The start of the call in flight, if any.
    in_flight_since: Option<Instant>,
    /// Acknowledged rows: (first timestamp, rows), timestamps 1 ms apart.
    acknowledged: Vec<(i64, usize)>,
}

/// A writer's calls that started within a phase (one still in flight at its end counts with
/// the time it has taken so far).
#[derive(Clone, Debug, Default, Serialize)]
struct Latency {
    writes: usize,
    errors: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    first_error: Option<String>,
}

impl Ledger {
    fn latency(&self, from: Instant, to: Instant) -> Latency {
        let within = |t: &Instant| *t >= from && *t < to;
        let mut all: Vec<Duration> = self
            .latencies
            .iter()
            .filter(|(t, _)| within(t))
            .map(|(_, d)| *d)
            .collect();
        if let Some(since) = self.in_flight_since.filter(|t| *t < to) {
            all.push(to.saturating_duration_since(since));
        }
        all.sort_unstable();
        let errors: Vec<&String> = self
            .errors
            .iter()
            .filter(|(t, _)| within(t))
            .map(|(_, m)| m)
            .collect();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let at = |q: f64| {
            let i = ((all.len() as f64 * q).ceil() as usize).clamp(1, all.len()) - 1;
            ms(all[i])
        };
        Latency {
            writes: all.len(),
            errors: errors.len(),
            p50_ms: if all.is_empty() { 0.0 } else { at(0.50) },
            p99_ms: if all.is_empty() { 0.0 } else { at(0.99) },
            max_ms: all.last().copied().map(ms).unwrap_or(0.0),
            first_error: errors.first().map(|m| shorten(m)),
        }
    }

    fn acknowledged_rows(&self) -> u64 {
        self.acknowledged.iter().map(|(_, n)| *n as u64).sum()
    }
}

/// A tablet of `measurements` DOUBLE series (named `{prefix}0000`…) and `rows` rows from
/// `first_ms`, 1 ms apart.
fn double_tablet(
    device: &str,
    prefix: &str,
    measurements: usize,
    first_ms: i64,
    rows: usize,
) -> Tablet {
    Tablet {
        device: device.to_string(),
        measurements: (0..measurements)
            .map(|m| format!("{prefix}{m:04}"))
            .collect(),
        data_types: vec![DataType::Double; measurements],
        timestamps: (0..rows as i64).map(|r| first_ms + r).collect(),
        columns: (0..measurements)
            .map(|m| Column::Double((0..rows).map(|r| (r * 7 + m) as f64 * 0.25).collect()))
            .collect(),
        bitmaps: vec![None; measurements],
    }
}

/// A victim's or newcomer's tablet.
fn small_tablet(device: &str, first_ms: i64) -> Tablet {
    double_tablet(device, "s", VICTIM_MEASUREMENTS, first_ms, VICTIM_ROWS)
}

/// A client that writes tablets: over Thrift (reconnecting after a failure) or a gRPC session.
enum Writer {
    Thrift {
        address: String,
        connection: Option<ThriftConnection>,
    },
    Grpc(Session),
}

impl Writer {
    /// Writes `tablet`; `Err` says why it was not acknowledged.
    async fn write(&mut self, tablet: &Tablet) -> Result<(), String> {
        match self {
            Writer::Thrift {
                address,
                connection,
            } => {
                let timeout = Duration::from_secs(VICTIM_CALL_TIMEOUT_S);
                let call = async {
                    if connection.is_none() {
                        *connection = Some(ThriftConnection::connect(address).await?);
                    }
                    let c = connection.as_mut().expect("connected above");
                    c.insert_tablet(tablet).await
                };
                let outcome = match tokio::time::timeout(timeout, call).await {
                    Ok(Ok(status)) if status.code == 200 || status.code == 400 => return Ok(()),
                    Ok(Ok(status)) => {
                        return Err(format!(
                            "{} {}",
                            status.code,
                            status.message.unwrap_or_default()
                        ))
                    }
                    Ok(Err(e)) => format!("{e:#}"),
                    Err(_) => format!("no answer within {VICTIM_CALL_TIMEOUT_S} s"),
                };
                *connection = None;
                Err(outcome)
            }
            Writer::Grpc(session) => session
                .insert_tablet(tablet)
                .await
                .map_err(|e| e.to_string()),
        }
    }
}

/// A writer in the background, one tablet per interval, until `stop`.
struct Victim {
    device: String,
    ledger: Arc<Mutex<Ledger>>,
    task: tokio::task::JoinHandle<()>,
}

impl Victim {
    fn start(
        mut writer: Writer,
        device: &str,
        first_ms: i64,
        interval: Duration,
        stop: Arc<AtomicBool>,
    ) -> Victim {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let shared = ledger.clone();
        let name = device.to_string();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut next_ms = first_ms;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                if lock(&shared).latencies.len() >= VICTIM_SAMPLES_MAX {
                    eprintln!("hostile: {name} stops: {VICTIM_SAMPLES_MAX} latencies recorded");
                    return;
                }
                let tablet = small_tablet(&name, next_ms);
                let start = Instant::now();
                lock(&shared).in_flight_since = Some(start);
                let outcome = writer.write(&tablet).await;
                let mut l = lock(&shared);
                l.in_flight_since = None;
                l.latencies.push((start, start.elapsed()));
                match outcome {
                    Ok(()) => l.acknowledged.push((next_ms, VICTIM_ROWS)),
                    Err(e) => l.errors.push((start, e)),
                }
                next_ms += VICTIM_ROWS as i64;
            }
        });
        Victim {
            device: device.to_string(),
            ledger,
            task,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The phases.

/// One printed row.
#[derive(Debug, Serialize)]
struct PhaseRow {
    phase: String,
    seconds: f64,
    rss_mib: Span,
    fds: Span,
    thrift_victim: Latency,
    grpc_victim: Latency,
    notes: String,
}

const TABLE_HEADER: &str = "| phase | s | DataNode RSS MiB before / max / after | DataNode fds \
    before / max / after | Thrift victim p50 / p99 / max ms (writes, errors) | gRPC victim p50 \
    / p99 / max ms (writes, errors) | what happened |\n|---|---|---|---|---|---|---|";

impl PhaseRow {
    fn markdown(&self) -> String {
        let span = |s: &Span| format!("{} / {} / {}", s.before, s.max, s.after);
        let latency = |l: &Latency| {
            format!(
                "{:.2} / {:.2} / {:.2} ({}, {})",
                l.p50_ms, l.p99_ms, l.max_ms, l.writes, l.errors
            )
        };
        format!(
            "| {} | {:.1} | {} | {} | {} | {} | {} |",
            self.phase,
            self.seconds,
            span(&self.rss_mib),
            span(&self.fds),
            latency(&self.thrift_victim),
            latency(&self.grpc_victim),
            self.notes
        )
    }
}

/// The run: the sampler, the victims and the rows printed so far.
struct Bench {
    cli: Cli,
    sampler: Sampler,
    thrift: Victim,
    grpc: Victim,
    stop: Arc<AtomicBool>,
    start_ms: i64,
    rows: Vec<PhaseRow>,
}

impl Bench {
    /// Prints a line of the table: to stdout, or to stderr under `--json`.
    fn print(&self, line: &str) {
        if self.cli.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }

    /// Closes `phase`'s row: the DataNode's figures and the victims' latencies since `w`.
    fn finish(&mut self, phase: &str, w: Window, mut notes: String) -> anyhow::Result<()> {
        let (rss_mib, fds) = self.sampler.end(&w)?;
        let end = Instant::now();
        let thrift_victim = lock(&self.thrift.ledger).latency(w.start, end);
        let grpc_victim = lock(&self.grpc.ledger).latency(w.start, end);
        for (who, l) in [("Thrift", &thrift_victim), ("gRPC", &grpc_victim)] {
            if let Some(e) = &l.first_error {
                notes.push_str(&format!("; {who} victim's first error: {e}"));
            }
        }
        let row = PhaseRow {
            phase: phase.to_string(),
            seconds: end.duration_since(w.start).as_secs_f64(),
            rss_mib,
            fds,
            thrift_victim,
            grpc_victim,
            notes,
        };
        self.print(&row.markdown());
        self.rows.push(row);
        Ok(())
    }

    async fn quiet(&mut self, phase: &str) -> anyhow::Result<()> {
        let w = self.sampler.begin()?;
        tokio::time::sleep(Duration::from_secs(self.cli.baseline_s)).await;
        self.finish(phase, w, "the victims alone".into())
    }
}

async fn big_frames(b: &mut Bench) -> anyhow::Result<()> {
    let w = b.sampler.begin()?;
    let address: Arc<str> = b.cli.address.as_str().into();
    let mut endings = all_endings(b.cli.big_frames, || big_frame(address.clone())).await?;
    let mut notes = format!(
        "{} connections announcing a {} MiB frame: {}; the server took at most {:.1} MiB of \
         each",
        b.cli.big_frames,
        BIG_FRAME_BYTES >> 20,
        endings.summary(),
        endings.sent_max as f64 / (1 << 20) as f64
    );
    if let Some(m) = &endings.message {
        notes.push_str(&format!("; it answered: {}", shorten(m)));
    }
    b.finish("big frames", w, notes)
}

async fn truncated_frames(b: &mut Bench) -> anyhow::Result<()> {
    let w = b.sampler.begin()?;
    let address: Arc<str> = b.cli.address.as_str().into();
    let mut endings =
        all_endings(TRUNCATED_CONNECTIONS, || truncated_frame(address.clone())).await?;
    let notes = format!(
        "{TRUNCATED_CONNECTIONS} connections sent 4 bytes of a 100-byte frame and went quiet: \
         {}",
        endings.summary()
    );
    b.finish("truncated frames", w, notes)
}

/// A new client that connects, logs in and writes one tablet: how long that took, or why it
/// failed.
async fn newcomer(writer: anyhow::Result<Writer>, tablet: &Tablet, since: Instant) -> String {
    let outcome = match writer {
        Ok(mut w) => w.write(tablet).await,
        Err(e) => Err(format!("{e:#}")),
    };
    match outcome {
        Ok(()) => format!("wrote in {:.3} s", since.elapsed().as_secs_f64()),
        Err(e) => format!(
            "FAILED after {:.3} s: {}",
            since.elapsed().as_secs_f64(),
            shorten(&e)
        ),
    }
}

/// A new Thrift client and a new gRPC client each connect, log in and write once; their rows
/// join `acknowledged` (device, ledger).
async fn newcomers(b: &Bench, acknowledged: &mut Vec<(String, Ledger)>) -> String {
    let mut notes = Vec::new();
    for (name, grpc) in [("Thrift", false), ("gRPC", true)] {
        let device = format!("{DATABASE}.new_{}", name.to_lowercase());
        let tablet = small_tablet(&device, b.start_ms);
        let since = Instant::now();
        let writer = if grpc {
            Session::connect(&[b.cli.address.as_str()], SessionConfig::default())
                .await
                .map(Writer::Grpc)
                .context("connecting a gRPC session")
        } else {
            ThriftConnection::connect(&b.cli.address)
                .await
                .map(|c| Writer::Thrift {
                    address: b.cli.address.clone(),
                    connection: Some(c),
                })
        };
        let outcome = newcomer(writer, &tablet, since).await;
        if !outcome.starts_with("FAILED") {
            let mut ledger = Ledger::default();
            ledger.acknowledged.push((b.start_ms, VICTIM_ROWS));
            acknowledged.push((device, ledger));
        }
        notes.push(format!(
            "a new {name} client (connect, login, write) {outcome}"
        ));
    }
    notes.join("; ")
}

async fn flood(b: &mut Bench, acknowledged: &mut Vec<(String, Ledger)>) -> anyhow::Result<()> {
    let w = b.sampler.begin()?;
    let n = b.cli.connections;
    let address: Arc<str> = b.cli.address.as_str().into();
    let permits = Arc::new(Semaphore::new(FLOOD_CONNECTS_IN_FLIGHT));
    let opened = Arc::new(AtomicUsize::new(0));
    let hold = Duration::from_secs(b.cli.hold_s);
    let mut set = JoinSet::new();
    for _ in 0..n {
        set.spawn(flood_connection(
            address.clone(),
            permits.clone(),
            opened.clone(),
            hold,
        ));
    }
    while opened.load(Ordering::SeqCst) < n {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let open_s = w.start.elapsed().as_secs_f64();
    let newcomers = newcomers(b, acknowledged).await;
    let mut endings = Vec::with_capacity(n);
    while let Some(ending) = set.join_next().await {
        endings.push(ending.context("a flood connection's task failed")?);
    }
    let mut e = Endings::of(endings);
    let (median, max) = median_max_s(&mut e.closed_after);
    let mut notes = format!(
        "{n} connections sent one byte each (all attempted within {open_s:.1} s); the server \
         closed {} of them within the {} s hold (median {median:.3} s, max {max:.3} s after \
         connecting), {} held to the end",
        e.closed_after.len(),
        b.cli.hold_s,
        e.open
    );
    for (why, count) in &e.not_connected {
        notes.push_str(&format!(", {count} not connected ({})", shorten(why)));
    }
    notes.push_str(&format!("; {newcomers}"));
    b.finish("flood", w, notes)
}

/// Writes the wide device over [`WIDE_WRITERS`] Thrift connections; its acknowledged rows.
async fn wide_write(b: &mut Bench) -> anyhow::Result<Ledger> {
    let w = b.sampler.begin()?;
    let (width, rows) = (b.cli.wide_measurements, b.cli.wide_rows);
    let tablets = rows.div_ceil(WIDE_TABLET_ROWS);
    let device = format!("{DATABASE}.wide");
    let mut set = JoinSet::new();
    for writer in 0..WIDE_WRITERS {
        let (address, device, start_ms) = (b.cli.address.clone(), device.clone(), b.start_ms);
        set.spawn(async move {
            let mut c = ThriftConnection::connect(&address).await?;
            let mut ledger = Ledger::default();
            for k in (writer..tablets).step_by(WIDE_WRITERS) {
                let first = k * WIDE_TABLET_ROWS;
                let n = WIDE_TABLET_ROWS.min(rows - first);
                let tablet = double_tablet(&device, "m", width, start_ms + first as i64, n);
                let status = c
                    .insert_tablet(&tablet)
                    .await
                    .with_context(|| format!("the wide write, rows {first}.."))?;
                if status.code == 200 {
                    ledger.acknowledged.push((start_ms + first as i64, n));
                } else {
                    let message = status.message.unwrap_or_default();
                    ledger
                        .errors
                        .push((Instant::now(), format!("{} {message}", status.code)));
                }
            }
            anyhow::Ok(ledger)
        });
    }
    let mut all = Ledger::default();
    while let Some(done) = set.join_next().await {
        let ledger = done.context("a wide writer's task failed")??;
        all.acknowledged.extend(ledger.acknowledged);
        all.errors.extend(ledger.errors);
    }
    let seconds = w.start.elapsed().as_secs_f64();
    let points = (width * rows) as f64;
    let mut notes = format!(
        "{width} DOUBLE measurements × {rows} rows ({:.1} M points) to {device} in {tablets} \
         tablets of {WIDE_TABLET_ROWS} rows over {WIDE_WRITERS} Thrift connections: {seconds:.1} \
         s, {:.2} M points/s; {} rows acknowledged, {} tablets refused",
        points / 1e6,
        points / seconds / 1e6,
        all.acknowledged_rows(),
        all.errors.len()
    );
    if let Some((_, e)) = all.errors.first() {
        notes.push_str(&format!(" (first: {})", shorten(e)));
    }
    b.finish("wide write", w, notes)?;
    Ok(all)
}

/// `select * from` the wide device over Thrift, paged as an official client pages it.
async fn wide_select(b: &mut Bench) -> anyhow::Result<()> {
    let statement = format!("select * from {DATABASE}.wide");
    let mut c = ThriftConnection::connect(&b.cli.address).await?;
    let w = b.sampler.begin()?;
    let timeout = Duration::from_secs(QUERY_TIMEOUT_S);
    let first = tokio::time::timeout(timeout, c.execute_query(&statement, FETCH_SIZE))
        .await
        .with_context(|| format!("`{statement}`: no answer within {QUERY_TIMEOUT_S} s"))??;
    let answered_s = w.start.elapsed().as_secs_f64();
    let mut notes = format!(
        "`{statement}` (executeQueryStatementV2, fetch size {FETCH_SIZE}) answered {} in \
         {answered_s:.2} s",
        first.status.code
    );
    if first.status.code != 200 {
        let message = first.status.message.clone().unwrap_or_default();
        notes.push_str(&format!(": {}", shorten(&message)));
        return b.finish("wide select", w, notes);
    }
    let query_id = first
        .query_id
        .context("a query answered 200 without a query id")?;
    let (mut rows, mut bytes, mut pages, mut more) = (first.rows, first.bytes, 1u64, first.more);
    while more {
        anyhow::ensure!(pages < PAGES_MAX, "`{statement}`: over {PAGES_MAX} pages");
        let page = tokio::time::timeout(timeout, c.fetch(query_id, FETCH_SIZE))
            .await
            .with_context(|| format!("a fetch: no answer within {QUERY_TIMEOUT_S} s"))??;
        if page.status.code != 200 {
            let message = page.status.message.unwrap_or_default();
            notes.push_str(&format!(
                "; fetch {pages} answered {}: {}",
                page.status.code,
                shorten(&message)
            ));
            break;
        }
        rows += page.rows;
        bytes += page.bytes;
        pages += 1;
        more = page.more;
    }
    notes.push_str(&format!(
        "; {rows} rows in {pages} pages ({:.1} MiB of TsBlocks) in {:.2} s",
        bytes as f64 / (1 << 20) as f64,
        w.start.elapsed().as_secs_f64()
    ));
    b.finish("wide select", w, notes)
}

/// Reads back every acknowledged row of each (device, ledger) over gRPC: (acknowledged, found)
/// per device.
async fn read_back(
    address: &str,
    ledgers: &[(String, Ledger)],
) -> anyhow::Result<Vec<(String, u64, u64)>> {
    let session = Session::connect(&[address], SessionConfig::default())
        .await
        .context("connecting the gRPC session that reads back")?;
    let mut counts = Vec::with_capacity(ledgers.len());
    for (device, ledger) in ledgers {
        // Every tablet writes every measurement: the first one's timestamps are the rows'.
        let measurement = if device.ends_with(".wide") {
            "m0000"
        } else {
            "s0000"
        };
        let points = session
            .query_raw(device, measurement, 0, i64::MAX)
            .await
            .with_context(|| format!("reading back {device}.{measurement}"))?;
        let present: HashSet<i64> = points.iter().map(|(t, _)| *t).collect();
        let found = ledger
            .acknowledged
            .iter()
            .flat_map(|(first, n)| *first..*first + *n as i64)
            .filter(|t| present.contains(t))
            .count() as u64;
        counts.push((device.clone(), ledger.acknowledged_rows(), found));
    }
    Ok(counts)
}

/// What `--json` prints.
#[derive(Serialize)]
struct Report<'a> {
    phases: &'a [PhaseRow],
    /// (device, rows acknowledged, of them read back).
    read_back: &'a [(String, u64, u64)],
    acknowledged_rows: u64,
    read_back_rows: u64,
}

/// Checks the limits, starts the sampler and both victims.
async fn start(cli: Cli) -> anyhow::Result<Bench> {
    cli.validate()?;
    let limit = common::process::raise_open_files_limit()
        .context("raising this process's open-files limit")?;
    let needed =
        (cli.connections + cli.big_frames + TRUNCATED_CONNECTIONS) as u64 + SPARE_DESCRIPTORS;
    anyhow::ensure!(
        limit.soft >= needed,
        "this process may open {} descriptors (hard limit {}); {} flood and {} big-frame \
         connections need {needed}: raise the hard limit (ulimit -Hn) or pass fewer \
         --connections",
        limit.soft,
        limit.hard,
        cli.connections,
        cli.big_frames
    );
    let sampler = Sampler::start(cli.pid)?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the clock is before 1970")?
        .as_millis() as i64;
    // An hour back, as `fencepost bench` writes: in the past, inside one time partition.
    let start_ms = now_ms - 3_600_000;
    let address = cli.address.clone();
    // One write first, so the two victims do not both create the database.
    let mut setup = ThriftConnection::connect(&address).await?;
    let created = setup
        .insert_tablet(&small_tablet(&format!("{DATABASE}.setup"), start_ms))
        .await?;
    anyhow::ensure!(
        created.code == 200,
        "the first write to {DATABASE}.setup answered {} {}",
        created.code,
        created.message.unwrap_or_default()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let interval = Duration::from_millis(cli.victim_interval_ms);
    let thrift = Writer::Thrift {
        connection: Some(ThriftConnection::connect(&address).await?),
        address: address.clone(),
    };
    let grpc = Session::connect(&[address.as_str()], SessionConfig::default())
        .await
        .with_context(|| format!("connecting the gRPC victim's session to {address}"))?;
    let device = |name: &str| format!("{DATABASE}.victim_{name}");
    Ok(Bench {
        thrift: Victim::start(thrift, &device("thrift"), start_ms, interval, stop.clone()),
        grpc: Victim::start(
            Writer::Grpc(grpc),
            &device("grpc"),
            start_ms,
            interval,
            stop.clone(),
        ),
        cli,
        sampler,
        stop,
        start_ms,
        rows: Vec::new(),
    })
}

/// Stops the victims and reads back what everyone was acknowledged; whether all of it was.
async fn verify(
    mut b: Bench,
    mut ledgers: Vec<(String, Ledger)>,
    wide: Ledger,
) -> anyhow::Result<bool> {
    b.stop.store(true, Ordering::Relaxed);
    for victim in [&mut b.thrift, &mut b.grpc] {
        (&mut victim.task)
            .await
            .with_context(|| format!("the victim writing {} failed", victim.device))?;
        let ledger = std::mem::take(&mut *lock(&victim.ledger));
        ledgers.insert(0, (victim.device.clone(), ledger));
    }
    ledgers.push((format!("{DATABASE}.wide"), wide));
    let counts = read_back(&b.cli.address, &ledgers).await?;
    let acknowledged: u64 = counts.iter().map(|(_, a, _)| a).sum();
    let found: u64 = counts.iter().map(|(_, _, f)| f).sum();
    let by_device: Vec<String> = counts
        .iter()
        .map(|(d, a, f)| format!("{d} {f}/{a}"))
        .collect();
    b.print("");
    b.print(&format!(
        "acknowledged {acknowledged} rows, read back {found} ({})",
        by_device.join(", ")
    ));
    if found < acknowledged {
        b.print(&format!(
            "MISSING: {} acknowledged rows did not read back",
            acknowledged - found
        ));
    }
    if b.cli.json {
        let report = Report {
            phases: &b.rows,
            read_back: &counts,
            acknowledged_rows: acknowledged,
            read_back_rows: found,
        };
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(found == acknowledged)
}

async fn run(cli: Cli) -> anyhow::Result<bool> {
    let mut b = start(cli).await?;
    b.print(TABLE_HEADER);
    b.quiet("baseline").await?;
    big_frames(&mut b).await?;
    truncated_frames(&mut b).await?;
    let mut newcomers = Vec::new();
    flood(&mut b, &mut newcomers).await?;
    let wide = wide_write(&mut b).await?;
    wide_select(&mut b).await?;
    b.quiet("after").await?;
    verify(b, newcomers, wide).await
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hostile: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("hostile: {e:#}");
            ExitCode::from(2)
        }
    }
}
