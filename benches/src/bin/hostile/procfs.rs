//! The DataNode's RSS (`VmRSS` of `/proc/<pid>/status`) and open descriptors (entries of
//! `/proc/<pid>/fd`), sampled in the background: before, the most during, and after a phase.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;

/// How often the DataNode's RSS and descriptors are sampled.
pub(crate) const SAMPLE_INTERVAL_MS: u64 = 200;

/// Before, most during and after a phase.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub(crate) struct Span {
    pub(crate) before: u64,
    pub(crate) max: u64,
    pub(crate) after: u64,
}

/// VmRSS in KiB and open descriptors of `pid`.
fn proc_sample(pid: u32) -> anyhow::Result<(u64, u64)> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {path}: is the DataNode (--pid {pid}) running?"))?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no VmRSS line in {path}"))?;
    let fd_dir = format!("/proc/{pid}/fd");
    let fds = std::fs::read_dir(&fd_dir)
        .with_context(|| format!("listing {fd_dir}"))?
        .count() as u64;
    Ok((rss_kib, fds))
}

/// The largest RSS (KiB) and descriptor count sampled since the window began.
#[derive(Default)]
struct Peaks {
    rss_kib: u64,
    fds: u64,
}

/// Samples the DataNode every [`SAMPLE_INTERVAL_MS`] in the background.
pub(crate) struct Sampler {
    pid: u32,
    peaks: Arc<Mutex<Peaks>>,
}

/// A phase's start: when, and the DataNode's figures then.
pub(crate) struct Window {
    pub(crate) start: Instant,
    rss_kib: u64,
    fds: u64,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().expect("no task panics while holding a bench lock")
}

impl Sampler {
    pub(crate) fn start(pid: u32) -> anyhow::Result<Sampler> {
        proc_sample(pid)?;
        let peaks = Arc::new(Mutex::new(Peaks::default()));
        let shared = peaks.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(SAMPLE_INTERVAL_MS));
            loop {
                tick.tick().await;
                // A failed sample (the process gone) is reported by the phase's closing sample.
                if let Ok((rss_kib, fds)) = proc_sample(pid) {
                    let mut p = lock(&shared);
                    p.rss_kib = p.rss_kib.max(rss_kib);
                    p.fds = p.fds.max(fds);
                }
            }
        });
        Ok(Sampler { pid, peaks })
    }

    pub(crate) fn begin(&self) -> anyhow::Result<Window> {
        let (rss_kib, fds) = proc_sample(self.pid)?;
        *lock(&self.peaks) = Peaks { rss_kib, fds };
        Ok(Window {
            start: Instant::now(),
            rss_kib,
            fds,
        })
    }

    /// RSS in MiB and descriptors over the window.
    pub(crate) fn end(&self, w: &Window) -> anyhow::Result<(Span, Span)> {
        let (rss_kib, fds) = proc_sample(self.pid)?;
        let p = lock(&self.peaks);
        let rss = Span {
            before: w.rss_kib / 1024,
            max: p.rss_kib.max(rss_kib) / 1024,
            after: rss_kib / 1024,
        };
        let fds = Span {
            before: w.fds,
            max: p.fds.max(fds),
            after: fds,
        };
        Ok((rss, fds))
    }
}
