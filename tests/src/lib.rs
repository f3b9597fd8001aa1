//! Real-process cluster harness for the fault-injection suite (design §8, layer 3).
//!
//! Every node — ConfigNode or DataNode — is a real binary running in its own network namespace,
//! attached by a veth pair to a Linux bridge in the root namespace that holds `.1` of the
//! cluster's /24, so the test process (sessions, checker, metrics scrapes) reaches every node.
//! Faults are injected for real:
//! - [`netns`]: silent packet drops between chosen pairs, one way or both, as nftables rules in
//!   the namespaces (Jepsen's iptables DROP);
//! - [`process`]: SIGSTOP / SIGCONT, kill -9 and restart on the same data directory;
//! - failpoints in a running DataNode over its metrics server (`PUT /fail/<name>`).
//!
//! [`workload`] runs concurrent sessions and records every operation with its outcome;
//! [`checker`] proves, after healing, that the history is consistent with what the cluster holds.
//!
//! The harness needs root, `ip` (iproute2) and `nft` (nftables). Without them the tests say so
//! loudly and fail under `CI=true` ([`require_namespaces`]).

pub mod admin;
pub mod checker;
pub mod cluster;
pub mod nemesis;
pub mod netns;
pub mod process;
pub mod tables;
pub mod workload;

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Serialises the scenarios: a 2-core machine runs one cluster at a time. A scenario that
/// panicked poisons nothing the next one relies on (each builds its own cluster).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether this machine can run the suite; `Err` says why not.
pub fn namespaces_available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(netns::probe).clone()
}

/// Returns `true` when the scenario can run. Otherwise prints a loud banner; under `CI=true` it
/// panics (the suite must never silently pass), elsewhere the caller skips the scenario.
pub fn require_namespaces(scenario: &str) -> bool {
    match namespaces_available() {
        Ok(()) => true,
        Err(why) => {
            use std::io::Write as _;
            let banner = "!".repeat(78);
            let message = format!(
                "{banner}\n!! fault scenario `{scenario}` CANNOT RUN: {why}\n!! It needs root, \
                 iproute2 (`ip netns`) and nftables (`apt-get install -y nftables`).\n{banner}\n"
            );
            if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
                panic!("{message}CI=true: fault scenario `{scenario}` cannot run here: {why}");
            }
            // Straight to the process's stderr, past the test harness's output capture, so the
            // skip is visible without --nocapture.
            let skipped = format!(
                "{message}!! SKIPPED `{scenario}` (not under CI=true) — this is NOT a pass.\n"
            );
            if let Err(e) = std::io::stderr().lock().write_all(skipped.as_bytes()) {
                panic!("cannot report the skipped scenario `{scenario}`: {e}");
            }
            false
        }
    }
}

/// Seconds from the environment variable `name` (a run's length, a cut's), else `default`;
/// a value that is not a number stops the run rather than being ignored.
pub fn secs_from_env(name: &str, default: u64) -> Duration {
    let secs = std::env::var(name)
        .ok()
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}={s:?} is not a number"))
        })
        .unwrap_or(default);
    Duration::from_secs(secs)
}

/// Polls `check` every `every` until it returns `Some`, or fails naming `what` after `deadline`.
/// Deadlines bound hangs; they are never the property under test.
pub fn wait_for<T>(
    what: &str,
    deadline: Duration,
    every: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> anyhow::Result<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return Ok(v);
        }
        if start.elapsed() > deadline {
            anyhow::bail!("gave up after {deadline:?} waiting for: {what}");
        }
        std::thread::sleep(every);
    }
}
