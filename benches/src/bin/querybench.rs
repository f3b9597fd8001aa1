//! `querybench`: the queries of TSBS's devops use case, asked of Fencepost, InfluxDB 1.x or
//! VictoriaMetrics over data `scripts/bench.sh --query` loaded into each (`fencepost bench` /
//! `peerload --tag-devices`: hosts `root.bench.d<h>` × metrics `s0`…, one row every
//! `--interval-ms` from `--start-ms`), one query at a time, each kind `--runs` times with random
//! parameters, and prints p50 and p99 per kind.
//!
//! Before the timed runs, each kind is asked once with parameters that depend only on `--seed`
//! (the same for every target): the numbers of that answer (every value but times, rounded to 6
//! significant digits, sorted) give the `values` count and a `digest` that `bench.sh` compares
//! across targets where the semantics match.
//!
//! The data model per target (what each system's users write): Fencepost's tree model has a
//! device per host (`root.bench.d7.s0`); InfluxDB one measurement `bench` with a tag `host`
//! (`bench,host=d7 s0=…`); VictoriaMetrics the same lines as `bench_s0{host="d7"}`. Every window
//! is `[t, t + interval)`; VictoriaMetrics' rollups look back over `(t - window, t]`, so its
//! ranges are evaluated at each window's last millisecond (`nocache=1`, so nothing is served
//! from its result cache: Fencepost has none).

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use common::Value;
use fencepost_benches::http::{query_escape, HttpConnection};
use session::{Session, SessionConfig};

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;
const DAY_MS: i64 = 24 * HOUR_MS;
/// High-cpu-1's threshold on `s0`: TSBS asks for usage over 90 %; the walk starts at 10–30 and
/// drifts (σ ≈ 46 after a day), so 30 selects a share of most hosts' rows.
const HIGH_THRESHOLD: f64 = 30.0;
/// Largest answer accepted from a peer, in bytes.
const RESPONSE_BODY_BYTES_MAX: usize = 256 * 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Target {
    /// A Fencepost DataNode's session port (the gRPC session, as the CLI asks).
    Fencepost,
    /// InfluxDB 1.x: `POST /query?db=bench&epoch=ms&q=…` (InfluxQL).
    Influxdb,
    /// VictoriaMetrics single node: `/api/v1/query_range` and `/api/v1/query` (MetricsQL).
    Victoriametrics,
}

#[derive(Parser, Debug)]
#[command(
    name = "querybench",
    about = "TSBS devops queries against Fencepost or a peer"
)]
struct Cli {
    #[arg(long, value_enum)]
    target: Target,
    /// host:port.
    #[arg(long)]
    address: String,
    /// Hosts loaded (`d0` …).
    #[arg(long, default_value_t = 1000)]
    hosts: u32,
    /// Metrics per host (`s0` …); at least 10 (TSBS's cpu has 10).
    #[arg(long, default_value_t = 10)]
    metrics: u32,
    /// The first row's time, ms (a multiple of a day).
    #[arg(long)]
    start_ms: i64,
    /// Rows per host.
    #[arg(long)]
    rows: i64,
    /// Milliseconds between a host's rows.
    #[arg(long, default_value_t = 10_000)]
    interval_ms: i64,
    /// Timed runs of each query kind.
    #[arg(long, default_value_t = 50)]
    runs: u32,
    /// Seed of the parameters.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only these kinds (comma-separated names); default every kind.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// The InfluxDB database.
    #[arg(long, default_value = "bench")]
    db: String,
}

/// The query kinds: TSBS devops' names, plus a day of one series downsampled to minutes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// MAX of 1 metric of 1 host over 1 h by 1 min.
    SingleGroupby111,
    /// MAX of 1 metric of 1 host over 12 h by 1 min.
    SingleGroupby1112,
    /// MAX of 5 metrics of 8 hosts (each host its own) over 1 h by 1 min.
    SingleGroupby581,
    /// MAX of every metric of 8 hosts over 8 h by 1 h.
    CpuMaxAll8,
    /// Mean of 1 metric per host and hour over 12 h, every host.
    DoubleGroupby1,
    /// Every row of 1 host over 12 h whose first metric is over [`HIGH_THRESHOLD`].
    HighCpu1,
    /// The last value of every metric of every host.
    Lastpoint,
    /// MAX of 1 metric over every host per minute: the last 5 minutes before a time, newest first.
    GroupbyOrderbyLimit,
    /// Mean of 1 series over 1 day by 1 min.
    Downsample1d1m,
}

const KINDS: [Kind; 9] = [
    Kind::SingleGroupby111,
    Kind::SingleGroupby1112,
    Kind::SingleGroupby581,
    Kind::CpuMaxAll8,
    Kind::DoubleGroupby1,
    Kind::HighCpu1,
    Kind::Lastpoint,
    Kind::GroupbyOrderbyLimit,
    Kind::Downsample1d1m,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::SingleGroupby111 => "single-groupby-1-1-1",
            Kind::SingleGroupby1112 => "single-groupby-1-1-12",
            Kind::SingleGroupby581 => "single-groupby-5-8-1",
            Kind::CpuMaxAll8 => "cpu-max-all-8",
            Kind::DoubleGroupby1 => "double-groupby-1",
            Kind::HighCpu1 => "high-cpu-1",
            Kind::Lastpoint => "lastpoint",
            Kind::GroupbyOrderbyLimit => "groupby-orderby-limit",
            Kind::Downsample1d1m => "downsample-1d-1m",
        }
    }

    /// (metrics, hosts — 0 for every host, span, window) of the kind.
    fn shape(self, all_metrics: u32) -> (u32, u32, i64, i64) {
        match self {
            Kind::SingleGroupby111 => (1, 1, HOUR_MS, MINUTE_MS),
            Kind::SingleGroupby1112 => (1, 1, 12 * HOUR_MS, MINUTE_MS),
            Kind::SingleGroupby581 => (5, 8, HOUR_MS, MINUTE_MS),
            Kind::CpuMaxAll8 => (all_metrics, 8, 8 * HOUR_MS, HOUR_MS),
            Kind::DoubleGroupby1 => (1, 0, 12 * HOUR_MS, HOUR_MS),
            Kind::HighCpu1 => (all_metrics, 1, 12 * HOUR_MS, 0),
            Kind::Lastpoint => (all_metrics, 0, 0, 0),
            Kind::GroupbyOrderbyLimit => (1, 0, 5 * MINUTE_MS, MINUTE_MS),
            Kind::Downsample1d1m => (1, 1, DAY_MS, MINUTE_MS),
        }
    }
}

/// One query's parameters.
#[derive(Clone, Debug)]
struct Params {
    kind: Kind,
    /// Metric indexes (`s<i>`).
    metrics: Vec<u32>,
    /// Host indexes (`d<i>`); empty: every host.
    hosts: Vec<u32>,
    /// `[from, to)`.
    from: i64,
    to: i64,
    /// Window length; 0: none.
    window: i64,
}

/// SplitMix64: the parameters' random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// `k` distinct numbers below `n`, ascending.
    fn distinct(&mut self, k: u32, n: u32) -> Vec<u32> {
        let mut picked = std::collections::BTreeSet::new();
        while picked.len() < k.min(n) as usize {
            picked.insert(self.below(u64::from(n)) as u32);
        }
        picked.into_iter().collect()
    }
}

impl Cli {
    /// Random parameters of `kind` within the loaded data: whole hours (whole minutes for
    /// GroupbyOrderbyLimit), hosts and metrics drawn without repeats.
    fn params(&self, kind: Kind, rng: &mut Rng) -> Params {
        let (metrics, hosts, span, window) = kind.shape(self.metrics);
        let end = self.start_ms + self.rows * self.interval_ms;
        let step = if kind == Kind::GroupbyOrderbyLimit {
            MINUTE_MS
        } else {
            HOUR_MS
        };
        let slots = ((end - self.start_ms - span) / step).max(0) as u64 + 1;
        let from = self.start_ms + rng.below(slots) as i64 * step;
        let (from, to) = if span == 0 {
            (self.start_ms, end)
        } else {
            (from, from + span)
        };
        Params {
            kind,
            metrics: rng.distinct(metrics, self.metrics),
            hosts: if hosts == 0 {
                Vec::new()
            } else {
                rng.distinct(hosts, self.hosts)
            },
            from,
            to,
            window,
        }
    }
}

/// A query as each target takes it.
fn fencepost_sql(p: &Params) -> String {
    let from = if p.hosts.is_empty() {
        "root.bench.*".to_string()
    } else {
        let hosts: Vec<String> = p.hosts.iter().map(|h| format!("root.bench.d{h}")).collect();
        hosts.join(", ")
    };
    let agg = |f: &str| -> String {
        let cols: Vec<String> = p.metrics.iter().map(|m| format!("{f}(s{m})")).collect();
        cols.join(", ")
    };
    let windows = format!("group by ([{}, {}), {}ms)", p.from, p.to, p.window);
    match p.kind {
        Kind::SingleGroupby111
        | Kind::SingleGroupby1112
        | Kind::SingleGroupby581
        | Kind::CpuMaxAll8 => format!("select {} from {from} {windows}", agg("max_value")),
        Kind::DoubleGroupby1 | Kind::Downsample1d1m => {
            format!("select {} from {from} {windows}", agg("avg"))
        }
        Kind::HighCpu1 => format!(
            "select * from {from} where s0 > {} and time >= {} and time < {}",
            HIGH_THRESHOLD, p.from, p.to
        ),
        Kind::Lastpoint => format!("select last * from {from}"),
        Kind::GroupbyOrderbyLimit => format!(
            "select {} from {from} {windows}, level = 1 order by time desc limit 5",
            agg("max_value")
        ),
    }
}

fn influxql(p: &Params) -> String {
    let hosts: Vec<String> = p.hosts.iter().map(|h| format!("host = 'd{h}'")).collect();
    let mut conditions = vec![format!("time >= {}ms AND time < {}ms", p.from, p.to)];
    if !hosts.is_empty() {
        conditions.push(format!("({})", hosts.join(" OR ")));
    }
    let agg = |f: &str| -> String {
        let cols: Vec<String> = p.metrics.iter().map(|m| format!("{f}(s{m})")).collect();
        cols.join(", ")
    };
    let by = |window: i64| format!("GROUP BY time({window}ms), host");
    let filter = conditions.join(" AND ");
    match p.kind {
        Kind::SingleGroupby111
        | Kind::SingleGroupby1112
        | Kind::SingleGroupby581
        | Kind::CpuMaxAll8 => format!(
            "SELECT {} FROM bench WHERE {filter} {}",
            agg("max"),
            by(p.window)
        ),
        Kind::DoubleGroupby1 | Kind::Downsample1d1m => format!(
            "SELECT {} FROM bench WHERE {filter} {}",
            agg("mean"),
            by(p.window)
        ),
        Kind::HighCpu1 => format!("SELECT * FROM bench WHERE {filter} AND s0 > {HIGH_THRESHOLD}"),
        Kind::Lastpoint => "SELECT last(*) FROM bench GROUP BY host".to_string(),
        Kind::GroupbyOrderbyLimit => format!(
            "SELECT {} FROM bench WHERE {filter} GROUP BY time({}ms) ORDER BY time DESC LIMIT 5",
            agg("max"),
            p.window
        ),
    }
}

/// The MetricsQL query and, for a range query, `(start, end, step)` in ms; `None` for an
/// instant query at the end of the data.
fn metricsql(p: &Params) -> (String, Option<(i64, i64, i64)>) {
    let metrics: Vec<String> = p.metrics.iter().map(|m| format!("s{m}")).collect();
    let mut labels = vec![format!("__name__=~\"bench_({})\"", metrics.join("|"))];
    if !p.hosts.is_empty() {
        let hosts: Vec<String> = p.hosts.iter().map(|h| format!("d{h}")).collect();
        labels.push(format!("host=~\"{}\"", hosts.join("|")));
    }
    let selector = format!("{{{}}}", labels.join(","));
    // Each window's last millisecond: (t - window, t] is [t + 1 - window, t + 1).
    let range = |window: i64| Some((p.from + window - 1, p.to - 1, window));
    let w = p.window;
    match p.kind {
        Kind::SingleGroupby111
        | Kind::SingleGroupby1112
        | Kind::SingleGroupby581
        | Kind::CpuMaxAll8 => (format!("max_over_time({selector}[{w}ms])"), range(w)),
        Kind::DoubleGroupby1 | Kind::Downsample1d1m => {
            (format!("avg_over_time({selector}[{w}ms])"), range(w))
        }
        Kind::HighCpu1 => {
            let host = p.hosts.first().copied().unwrap_or(0);
            let all = format!("{{__name__=~\"bench_s[0-9]+\",host=\"d{host}\"}}");
            let over = format!("bench_s0{{host=\"d{host}\"}} > {HIGH_THRESHOLD}");
            // Every 10 s sample: a bare selector at a sample's own time is that sample.
            let q = format!("{all} and on(host) ({over})");
            (q, Some((p.from, p.to - 1, 10_000)))
        }
        Kind::Lastpoint => (format!("last_over_time({selector}[1d])"), None),
        Kind::GroupbyOrderbyLimit => (format!("max(max_over_time({selector}[{w}ms]))"), range(w)),
    }
}

/// A connection to one target.
enum Client {
    Fencepost(Session),
    Http(HttpConnection),
}

impl Client {
    async fn connect(cli: &Cli) -> anyhow::Result<Client> {
        Ok(match cli.target {
            Target::Fencepost => Client::Fencepost(
                Session::connect(&[cli.address.as_str()], SessionConfig::default())
                    .await
                    .context("connecting a session")?,
            ),
            Target::Influxdb | Target::Victoriametrics => Client::Http(
                HttpConnection::connect(&cli.address, RESPONSE_BODY_BYTES_MAX)
                    .await
                    .with_context(|| format!("connecting to {}", cli.address))?,
            ),
        })
    }

    /// Asks `p` and returns the numbers of the answer (times left out).
    async fn ask(&mut self, cli: &Cli, p: &Params) -> anyhow::Result<Vec<f64>> {
        match self {
            Client::Fencepost(session) => {
                let sql = fencepost_sql(p);
                let result = session
                    .execute_statement(&sql)
                    .await
                    .with_context(|| sql.clone())?;
                Ok(fencepost_numbers(&result.columns, &result.rows))
            }
            Client::Http(http) => {
                let path = match cli.target {
                    Target::Influxdb => format!(
                        "/query?db={}&epoch=ms&q={}",
                        query_escape(&cli.db),
                        query_escape(&influxql(p))
                    ),
                    _ => vm_path(cli, p),
                };
                let (response, _) = http.post(&path, b"").await?;
                let body: serde_json::Value = serde_json::from_slice(&response.body)
                    .with_context(|| format!("HTTP {} answer to {path}", response.status))?;
                anyhow::ensure!(response.status == 200, "HTTP {}: {}", response.status, body);
                match cli.target {
                    Target::Influxdb => influx_numbers(&body),
                    _ => vm_numbers(&body),
                }
            }
        }
    }
}

fn vm_path(cli: &Cli, p: &Params) -> String {
    let (q, range) = metricsql(p);
    let seconds = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
    match range {
        Some((start, end, step)) => format!(
            "/api/v1/query_range?nocache=1&query={}&start={}&end={}&step={}",
            query_escape(&q),
            seconds(start),
            seconds(end),
            seconds(step)
        ),
        None => format!(
            "/api/v1/query?nocache=1&query={}&time={}",
            query_escape(&q),
            seconds(cli.start_ms + cli.rows * cli.interval_ms)
        ),
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Double(x) => Some(*x),
        Value::Float(x) => Some(f64::from(*x)),
        Value::Int64(x) => Some(*x as f64),
        Value::Int32(x) => Some(f64::from(*x)),
        Value::Text(s) | Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn fencepost_numbers(columns: &[String], rows: &[Vec<Option<Value>>]) -> Vec<f64> {
    let keep: Vec<bool> = columns.iter().map(|c| c != "Time").collect();
    rows.iter()
        .flat_map(|row| row.iter().zip(&keep).filter(|(_, k)| **k))
        .filter_map(|(cell, _)| cell.as_ref().and_then(number))
        .collect()
}

fn influx_numbers(body: &serde_json::Value) -> anyhow::Result<Vec<f64>> {
    let mut out = Vec::new();
    for result in body["results"].as_array().into_iter().flatten() {
        if let Some(e) = result.get("error") {
            anyhow::bail!("InfluxDB: {e}");
        }
        for series in result["series"].as_array().into_iter().flatten() {
            let columns = series["columns"].as_array().cloned().unwrap_or_default();
            for row in series["values"].as_array().into_iter().flatten() {
                let cells = row.as_array().into_iter().flatten().zip(&columns);
                out.extend(
                    cells
                        .filter(|(_, c)| c.as_str() != Some("time"))
                        .filter_map(|(v, _)| v.as_f64()),
                );
            }
        }
    }
    Ok(out)
}

fn vm_numbers(body: &serde_json::Value) -> anyhow::Result<Vec<f64>> {
    anyhow::ensure!(body["status"] == "success", "VictoriaMetrics: {body}");
    let value = |pair: &serde_json::Value| pair[1].as_str().and_then(|s| s.parse::<f64>().ok());
    let mut out = Vec::new();
    for series in body["data"]["result"].as_array().into_iter().flatten() {
        if let Some(pairs) = series["values"].as_array() {
            out.extend(pairs.iter().filter_map(value));
        } else if let Some(v) = value(&series["value"]) {
            out.push(v);
        }
    }
    Ok(out)
}

/// The answer's numbers to 6 significant digits, sorted, and a hash of them.
fn digest(numbers: &[f64]) -> String {
    let mut texts: Vec<String> = numbers.iter().map(|x| format!("{x:.5e}")).collect();
    texts.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in texts.join(",").bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i]
}

/// One kind: its seeded check answer, then `runs` timed runs; one JSON object.
async fn bench_kind(cli: &Cli, client: &mut Client, kind: Kind) -> serde_json::Value {
    let mut rng = Rng(cli.seed ^ (kind as u64 + 1).wrapping_mul(0x51ed_2701));
    let check = cli.params(kind, &mut rng);
    let numbers = match client.ask(cli, &check).await {
        Ok(n) => n,
        Err(e) => {
            return serde_json::json!({"query": kind.name(), "error": format!("{e:#}")});
        }
    };
    let mut times = Vec::with_capacity(cli.runs as usize);
    for _ in 0..cli.runs {
        let p = cli.params(kind, &mut rng);
        let started = Instant::now();
        if let Err(e) = client.ask(cli, &p).await {
            return serde_json::json!({"query": kind.name(), "error": format!("{e:#}")});
        }
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    serde_json::json!({
        "query": kind.name(),
        "runs": times.len(),
        "p50_ms": percentile(&times, 0.5),
        "p99_ms": percentile(&times, 0.99),
        "values": numbers.len(),
        "digest": digest(&numbers),
    })
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    anyhow::ensure!(
        cli.metrics >= 10,
        "--metrics is {}; give at least 10",
        cli.metrics
    );
    anyhow::ensure!(cli.hosts >= 8, "--hosts is {}; give at least 8", cli.hosts);
    anyhow::ensure!(
        cli.rows * cli.interval_ms >= DAY_MS,
        "the data spans less than a day"
    );
    let mut client = Client::connect(&cli).await?;
    let mut out = Vec::new();
    for kind in KINDS {
        if !cli.only.is_empty() && !cli.only.iter().any(|n| n == kind.name()) {
            continue;
        }
        let line = bench_kind(&cli, &mut client, kind).await;
        eprintln!("{line}");
        out.push(line);
    }
    println!("{}", serde_json::Value::Array(out));
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("querybench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("querybench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Cli {
        Cli::parse_from([
            "querybench",
            "--target",
            "fencepost",
            "--address",
            "x:1",
            "--start-ms",
            "1700006400000",
            "--rows",
            "25920",
        ])
    }

    #[test]
    fn parameters_lie_in_the_data_and_repeat_with_the_seed() {
        let cli = cli();
        let end = cli.start_ms + cli.rows * cli.interval_ms;
        for kind in KINDS {
            let mut a = Rng(9);
            let mut b = Rng(9);
            for _ in 0..200 {
                let p = cli.params(kind, &mut a);
                assert_eq!(format!("{p:?}"), format!("{:?}", cli.params(kind, &mut b)));
                assert!(p.from >= cli.start_ms && p.to <= end, "{p:?}");
                assert!(p.hosts.iter().all(|h| *h < cli.hosts), "{p:?}");
                assert!(p.metrics.iter().all(|m| *m < cli.metrics), "{p:?}");
            }
        }
    }

    #[test]
    fn each_target_asks_the_same_windows() {
        let p = Params {
            kind: Kind::SingleGroupby111,
            metrics: vec![3],
            hosts: vec![7],
            from: 3_600_000,
            to: 7_200_000,
            window: MINUTE_MS,
        };
        assert_eq!(
            fencepost_sql(&p),
            "select max_value(s3) from root.bench.d7 group by ([3600000, 7200000), 60000ms)"
        );
        assert_eq!(
            influxql(&p),
            "SELECT max(s3) FROM bench WHERE time >= 3600000ms AND time < 7200000ms AND \
             (host = 'd7') GROUP BY time(60000ms), host"
        );
        let (q, range) = metricsql(&p);
        assert_eq!(
            q,
            "max_over_time({__name__=~\"bench_(s3)\",host=~\"d7\"}[60000ms])"
        );
        // The first evaluation at 3,659,999 ms looks back over [3,600,000, 3,660,000).
        assert_eq!(range, Some((3_659_999, 7_199_999, MINUTE_MS)));
    }

    #[test]
    fn the_digest_ignores_order_and_rounding_noise() {
        assert_eq!(digest(&[1.0, 2.5]), digest(&[2.5, 1.0 + 1e-12]));
        assert_ne!(digest(&[1.0, 2.5]), digest(&[1.0, 2.6]));
    }
}
