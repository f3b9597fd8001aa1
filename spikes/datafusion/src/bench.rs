//! Latency samples and their summary (p50 / p99 / mean), printed as Markdown table rows.

use std::time::{Duration, Instant};

#[derive(Clone, Debug, Default)]
pub struct Samples(pub Vec<Duration>);

impl Samples {
    pub fn push(&mut self, d: Duration) {
        self.0.push(d);
    }
    fn sorted(&self) -> Vec<Duration> {
        let mut v = self.0.clone();
        v.sort();
        v
    }
    /// Nearest-rank percentile, `q` in (0, 1].
    pub fn pct(&self, q: f64) -> Duration {
        let v = self.sorted();
        if v.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }
    pub fn p50(&self) -> Duration {
        self.pct(0.50)
    }
    pub fn p99(&self) -> Duration {
        self.pct(0.99)
    }
    pub fn mean(&self) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        self.0.iter().sum::<Duration>() / self.0.len() as u32
    }
}

/// Microseconds, with enough digits for sub-microsecond lean timings.
pub fn us(d: Duration) -> String {
    let x = d.as_secs_f64() * 1e6;
    if x < 10.0 {
        format!("{x:.2}")
    } else if x < 1000.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// How many iterations to run: `iters`, fewer if one warm-up run shows they would take longer
/// than `budget` (slow full-scan paths), but at least 5.
pub fn iterations(iters: usize, one_run: Duration, budget: Duration) -> usize {
    if one_run.is_zero() {
        return iters;
    }
    let fit = (budget.as_secs_f64() / one_run.as_secs_f64()) as usize;
    iters.min(fit.max(5))
}

pub struct Row {
    pub query: &'static str,
    pub path: String,
    pub samples: Samples,
}

pub fn header() {
    println!("| query | path | n | p50 µs | p99 µs | mean µs | p50 ratio vs lean |");
    println!("|---|---|---:|---:|---:|---:|---:|");
}

pub fn print_row(r: &Row, lean_p50: Option<Duration>) {
    let ratio = match lean_p50 {
        Some(l) if !l.is_zero() => {
            format!("{:.0}×", r.samples.p50().as_secs_f64() / l.as_secs_f64())
        }
        _ => "—".to_string(),
    };
    println!(
        "| {} | {} | {} | {} | {} | {} | {} |",
        r.query,
        r.path,
        r.samples.0.len(),
        us(r.samples.p50()),
        us(r.samples.p99()),
        us(r.samples.mean()),
        ratio
    );
}

/// Times a synchronous closure.
pub fn time<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let t = Instant::now();
    let out = f();
    (t.elapsed(), out)
}
