//! Spike for issue 40: DataFusion against a lean hand-written path on TSBS single-groupby-1-1-1
//! and lastpoint, over TSBS-devops-like `cpu` data laid out as a Fencepost region would hold it.
//! See README.md for how to run it and RESULTS.md for what it measured.

mod bench;
mod cases;
mod checks;
mod data;
mod df;
mod lean;
mod region;

use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::common::Result;
use datafusion::execution::context::SessionState;

use bench::{Row, Samples};
use data::{HostSeries, PageStats, Rng, START_MS};
use df::Split;
use region::TimePushdown;

struct Args {
    hosts: usize,
    hours: usize,
    iters: usize,
    warmup: usize,
    seed: u64,
    long_points: usize,
    time_pushdown: TimePushdown,
    partitions: usize,
    budget: Duration,
    multi_thread: bool,
    explain: bool,
    /// Run only the cases whose "query: path" contains this text (e.g. for a profile).
    only: Option<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: spike [--hosts N=1000] [--hours H=24] [--iters N=200] [--warmup N=20] [--seed S=1]\n\
         \x20            [--long-points N=100000000] [--time-pushdown exact|inexact] [--partitions N=1]\n\
         \x20            [--budget-secs S=20] [--multi-thread] [--explain] [--only TEXT]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        hosts: 1000,
        hours: 24,
        iters: 200,
        warmup: 20,
        seed: 1,
        long_points: 100_000_000,
        time_pushdown: TimePushdown::Exact,
        partitions: 1,
        budget: Duration::from_secs(20),
        multi_thread: false,
        explain: false,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage());
        let num = |s: String| s.parse::<u64>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--hosts" => a.hosts = num(val()) as usize,
            "--hours" => a.hours = num(val()) as usize,
            "--iters" => a.iters = num(val()) as usize,
            "--warmup" => a.warmup = num(val()) as usize,
            "--seed" => a.seed = num(val()),
            "--long-points" => a.long_points = num(val()) as usize,
            "--partitions" => a.partitions = num(val()) as usize,
            "--budget-secs" => a.budget = Duration::from_secs(num(val())),
            "--time-pushdown" => {
                a.time_pushdown = match val().as_str() {
                    "exact" => TimePushdown::Exact,
                    "inexact" => TimePushdown::Inexact,
                    _ => usage(),
                }
            }
            "--multi-thread" => a.multi_thread = true,
            "--explain" => a.explain = true,
            "--only" => a.only = Some(val()),
            _ => usage(),
        }
    }
    a
}

/// One query's random parameters: a host and a minute-aligned 1-hour window.
#[derive(Clone, Copy)]
struct Params {
    host: usize,
    lo: i64,
    hi: i64,
}

fn gen_params(n: usize, hosts: usize, hours: usize, seed: u64) -> Vec<Params> {
    let mut rng = Rng::new(seed ^ 0x5EED);
    let minutes = (hours * 60 - 60) as u64;
    (0..n.max(1))
        .map(|_| {
            let lo = START_MS + rng.below(minutes + 1) as i64 * 60_000;
            Params {
                host: rng.below(hosts as u64) as usize,
                lo,
                hi: lo + 3_600_000,
            }
        })
        .collect()
}

/// Runs `f` for warm-up and then for the measured iterations (fewer if slow; see `iterations`).
async fn measure(a: &Args, mut f: impl AsyncFnMut(usize) -> Result<Split>) -> Result<Vec<Split>> {
    let first = f(0).await?.total();
    let n = bench::iterations(a.iters, first, a.budget);
    for i in 1..a.warmup.min(n) {
        f(i).await?;
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(f(i).await?);
    }
    Ok(out)
}

fn measure_lean(a: &Args, mut f: impl FnMut(usize)) -> Samples {
    for i in 0..a.warmup {
        f(i);
    }
    let mut s = Samples::default();
    for i in 0..a.iters {
        let t = Instant::now();
        f(i);
        s.push(t.elapsed());
    }
    s
}

fn totals(splits: &[Split]) -> Samples {
    Samples(splits.iter().map(|s| s.total()).collect())
}

struct Ctx {
    a: Args,
    data: Arc<Vec<HostSeries>>,
    long: Vec<PageStats>,
    params: Vec<Params>,
    mem: SessionState,
    mem_ctx: datafusion::prelude::SessionContext,
    region: SessionState,
    region_ctx: datafusion::prelude::SessionContext,
}

impl Ctx {
    /// Whether the case `query: path` is selected by `--only`.
    fn wants(&self, query: &str, path: &str) -> bool {
        self.a
            .only
            .as_ref()
            .is_none_or(|o| format!("{query}: {path}").contains(o.as_str()))
    }
}

/// Per-stage p50s of the DataFusion runs that were split into stages.
struct SplitRow {
    query: &'static str,
    path: String,
    splits: Vec<Split>,
}

fn main() -> Result<()> {
    let a = parse_args();
    let (gen_time, data) = bench::time(|| data::generate(a.hosts, a.hours, a.seed));
    let (long_time, long) =
        bench::time(|| data::generate_long_series_stats(a.long_points, a.seed + 1));
    let points: usize = data.iter().map(|s| s.points()).sum();
    let pages: usize = data.iter().map(|s| s.pages.len()).sum();
    println!(
        "data: {} hosts x {} h = {} rows ({} pages of {} points), {:.0} MiB raw columns; generated in {:.1} s",
        a.hosts,
        a.hours,
        points,
        pages,
        data::PAGE_POINTS,
        data::raw_bytes(&data) as f64 / (1 << 20) as f64,
        gen_time.as_secs_f64()
    );
    println!(
        "long series: {} points, {} pages of statistics only; generated in {:.1} s",
        lean::count_from_stats(&long),
        long.len(),
        long_time.as_secs_f64()
    );
    let rt = if a.multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    };
    rt.block_on(run(a, Arc::new(data), long))
}

async fn run(a: Args, data: Arc<Vec<HostSeries>>, long: Vec<PageStats>) -> Result<()> {
    let params = gen_params(a.iters.max(a.warmup), a.hosts, a.hours, a.seed);
    let mem_ctx = df::mem_context(&data, a.partitions)?;
    let region_ctx = df::region_context(data.clone(), a.partitions, a.time_pushdown)?;
    let (mem, region) = (mem_ctx.state(), region_ctx.state());
    let c = Ctx {
        a,
        data,
        long,
        params,
        mem,
        mem_ctx,
        region,
        region_ctx,
    };
    println!(
        "runtime: {}, target_partitions {}, time pushdown {:?}\n",
        if c.a.multi_thread {
            "tokio multi-thread (2 workers)"
        } else {
            "tokio current-thread"
        },
        c.a.partitions,
        c.a.time_pushdown
    );
    if c.a.only.is_none() {
        checks::run(&c).await?; // skipped under --only, so that a profile shows only the case
    }
    if c.a.explain {
        checks::explain(&c).await?;
    }
    let mut rows = Vec::new();
    let mut splits = Vec::new();
    cases::groupby(&c, &mut rows, &mut splits).await?;
    cases::lastpoint(&c, &mut rows, &mut splits).await?;
    cases::count(&c, &mut rows, &mut splits).await?;
    report(&rows, &splits, &c);
    Ok(())
}

fn report(rows: &[Row], splits: &[SplitRow], c: &Ctx) {
    println!("\n## Latency (each DataFusion total includes planning)\n");
    bench::header();
    for r in rows {
        let lean = rows
            .iter()
            .find(|x| x.query == r.query && x.path.starts_with("lean"));
        let lean_p50 = lean
            .filter(|_| !r.path.starts_with("lean"))
            .map(|l| l.samples.p50());
        bench::print_row(r, lean_p50);
    }
    println!("\n## DataFusion stages, p50 µs (parse = SQL parse + logical plan, or binding a cached plan)\n");
    println!("| query | path | parse | optimize | physical plan | execute | total |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for s in splits {
        let p =
            |f: fn(&Split) -> Duration| bench::us(Samples(s.splits.iter().map(f).collect()).p50());
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            s.query,
            s.path,
            p(|x| x.parse),
            p(|x| x.optimize),
            p(|x| x.physical),
            p(|x| x.execute),
            p(|x| x.total())
        );
    }
    let long = rows
        .iter()
        .find(|r| r.path.starts_with("lean, long series"));
    if let (Some(r), false) = (long, c.long.is_empty()) {
        let per_page = r.samples.p50().as_secs_f64() / c.long.len() as f64;
        let pages_100m = 100_000_000f64 / data::PAGE_POINTS as f64;
        println!(
            "\ncount from page statistics: {:.2} ns per page; 100 M points ({pages_100m:.0} pages) -> {:.1} µs",
            per_page * 1e9,
            per_page * pages_100m * 1e6
        );
    }
}
