//! Random schedules over the deterministic cluster: drop, delay, reorder, partitions, crashes
//! and restarts, lease fencing and log compaction, with the invariants checked after each.
//!
//! `FENCEPOST_SIM_SEED=<seed>` re-runs one schedule; `FENCEPOST_SIM_SCHEDULES=<n>` sets how many
//! schedules each test runs; `FENCEPOST_SIM_BASE=<n>` shifts the seed range.

use consensus::{Config, SplitMix64};
use sim::NetFaults;

use crate::harness::Cluster;

fn wal_options(dir: std::path::PathBuf) -> wal::WalOptions {
    let mut options = wal::WalOptions::new(dir);
    options.durability = wal::Durability::None;
    options.preallocate = false;
    options.segment_bytes = 16 << 10;
    options
}

fn run_schedule(seed: u64, replicas: u64, on_wal: bool) {
    let mut rng = SplitMix64::new(seed);
    let groups = 1 + rng.range(0, 2);
    let config = Config {
        apply_retry_backoff_min_ms: 5,
        apply_retry_backoff_max_ms: 160,
        in_flight_proposals_max: 64,
        ..Config::default()
    };
    let mut c = if on_wal {
        Cluster::with_wal(seed, replicas, groups, config, wal_options)
    } else {
        Cluster::new(seed, replicas, groups, config)
    };
    let max_down = ((replicas - 1) / 2) as usize;
    let mut command = 0u64;
    for _ in 0..rng.range(20, 80) {
        let roll = rng.range(0, 100);
        match roll {
            0..=39 => {
                let group = 1 + rng.range(0, groups);
                for _ in 0..rng.range(1, 8) {
                    command += 1;
                    let bad = rng.chance(100);
                    let data = format!("{}-{seed}-{command}", if bad { "bad" } else { "ok" });
                    c.propose(group, data.into_bytes());
                }
            }
            40..=49 => {
                let delay_max_ms = rng.range(0, 40);
                c.sim.net.set_faults(NetFaults {
                    drop_per_mille: rng.range(0, 250) as u32,
                    delay_min_ms: rng.range(0, delay_max_ms + 1),
                    delay_max_ms,
                });
            }
            50..=57 => {
                let a = 1 + rng.range(0, replicas);
                if rng.chance(500) {
                    c.sim.net.isolate(a, &c.peers.clone());
                } else {
                    let b = 1 + rng.range(0, replicas);
                    if a != b {
                        c.sim.net.set_link(a, b, true);
                    }
                }
            }
            58..=63 => c.sim.net.heal(),
            64..=71 => {
                let down = c.peers.iter().filter(|&&p| !c.is_up(p)).count();
                let victim = 1 + rng.range(0, replicas);
                if down < max_down && c.is_up(victim) {
                    c.crash(victim);
                }
            }
            72..=79 => {
                let node = 1 + rng.range(0, replicas);
                if !c.is_up(node) {
                    c.start(node);
                }
            }
            80..=85 => {
                let node = 1 + rng.range(0, replicas);
                let fenced = c.model(node, 1).fenced;
                c.set_fenced(node, !fenced);
            }
            86..=89 => {
                let group = 1 + rng.range(0, groups);
                if rng.chance(600) {
                    c.read(group);
                } else {
                    c.transfer(group, 1 + rng.range(0, replicas));
                }
            }
            90..=95 => {
                let node = 1 + rng.range(0, replicas);
                let group = 1 + rng.range(0, groups);
                if c.is_up(node) {
                    let index = c.model(node, group).applied_index;
                    c.node(node)
                        .compact(group, index)
                        .unwrap_or_else(|e| panic!("seed {seed}: compact: {e}"));
                }
            }
            _ => {}
        }
        c.run_ms(rng.range(1, 120));
    }
    c.heal_and_check();
}

fn run_many(base: u64, replicas: u64, on_wal: bool, default_schedules: u64) {
    if let Ok(seed) = std::env::var("FENCEPOST_SIM_SEED") {
        let seed: u64 = seed.parse().expect("FENCEPOST_SIM_SEED is a u64");
        // The last digit names the replica count, the one before it the backend.
        if seed % 10 == replicas && (seed / 10 % 10 == 9) == on_wal {
            run_schedule(seed, replicas, on_wal);
        }
        return;
    }
    let schedules = std::env::var("FENCEPOST_SIM_SCHEDULES")
        .ok()
        .map(|s| s.parse().expect("FENCEPOST_SIM_SCHEDULES is a number"))
        .unwrap_or(default_schedules);
    // Shifts the seed range, to explore schedules the suite does not run by default.
    let base = base
        + std::env::var("FENCEPOST_SIM_BASE").ok().map_or(0, |s| {
            s.parse::<u64>().expect("FENCEPOST_SIM_BASE is a number")
        });
    for i in 0..schedules {
        // The last digit of a seed is the replica count and a 9 before it means the wal backend,
        // so one env var re-runs any schedule.
        let seed = ((base + i) * 10 + if on_wal { 9 } else { i % 9 }) * 10 + replicas;
        let outcome = std::panic::catch_unwind(|| run_schedule(seed, replicas, on_wal));
        if outcome.is_err() {
            panic!("simulation failed: re-run with FENCEPOST_SIM_SEED={seed}");
        }
    }
}

#[test]
fn three_replicas() {
    run_many(1_000, 3, false, 3_000);
}

#[test]
fn five_replicas() {
    run_many(2_000, 5, false, 2_000);
}

#[test]
fn three_replicas_on_wal() {
    run_many(3_000, 3, true, 60);
}
