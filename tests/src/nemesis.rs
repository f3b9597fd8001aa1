//! A seeded random nemesis: one fault at a time, each held for a random while and then healed,
//! for a bounded time. The seed comes from `FENCEPOST_NEMESIS_SEED` or is drawn and printed;
//! the same seed gives the same sequence of faults (their effects still depend on timing).

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::cluster::{Cluster, HEARTBEAT_STALL};

/// splitmix64: small, seedable, good enough to pick faults.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[low, high)`.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        assert!(low < high, "empty range {low}..{high}");
        low + self.next_u64() % (high - low)
    }
}

/// The seed: `FENCEPOST_NEMESIS_SEED`, else drawn from the clock and the pid.
pub fn seed_from_env() -> u64 {
    match std::env::var("FENCEPOST_NEMESIS_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("FENCEPOST_NEMESIS_SEED={s:?} is not a u64")),
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            Rng::new(nanos ^ u64::from(std::process::id())).next_u64() % 1_000_000_000
        }
    }
}

/// How long the nemesis runs: `FENCEPOST_NEMESIS_SECS`, default 30 s (the CI budget).
pub fn duration_from_env() -> Duration {
    let secs = std::env::var("FENCEPOST_NEMESIS_SECS")
        .ok()
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("FENCEPOST_NEMESIS_SECS={s:?} is not a number"))
        })
        .unwrap_or(30);
    Duration::from_secs(secs)
}

/// One fault, with what it targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// DataNode cut from every ConfigNode, both ways; peers still reach it.
    CutFromConfigNodes(usize),
    /// Packets from the DataNode to the ConfigNodes dropped (heartbeat replies lost).
    DataNodeToConfigNodes(usize),
    /// Packets from the ConfigNodes to the DataNode dropped (heartbeats lost).
    ConfigNodesToDataNode(usize),
    /// Two DataNodes cannot talk, both ways.
    SplitDataNodes(usize, usize),
    /// SIGSTOP, then SIGCONT.
    Pause(usize),
    /// kill -9, then restart on the same data directory.
    Kill(usize),
    /// The heartbeat handler stalled by failpoint (a GC pause of the lease thread).
    StallHeartbeats(usize),
    /// kill -9 of the ConfigNode leader, then restart.
    KillConfigNodeLeader(Option<usize>),
}

fn pick(rng: &mut Rng, cluster: &Cluster) -> Fault {
    let n = cluster.data_nodes.len() as u64;
    let dn = rng.range(0, n) as usize;
    match rng.range(0, 8) {
        0 => Fault::CutFromConfigNodes(dn),
        1 => Fault::DataNodeToConfigNodes(dn),
        2 => Fault::ConfigNodesToDataNode(dn),
        3 => {
            let other = (dn + 1 + rng.range(0, n - 1) as usize) % n as usize;
            Fault::SplitDataNodes(dn, other)
        }
        4 => Fault::Pause(dn),
        5 => Fault::Kill(dn),
        6 => Fault::StallHeartbeats(dn),
        _ => Fault::KillConfigNodeLeader(None),
    }
}

fn inject(cluster: &mut Cluster, fault: &mut Fault) -> Result<()> {
    let c = cluster.config.config_nodes;
    match fault {
        Fault::CutFromConfigNodes(j) => cluster.cut_from_config_nodes(*j)?,
        Fault::DataNodeToConfigNodes(j) => {
            for i in 0..c {
                cluster.net.drop_one_way(cluster.dn_net(*j), i)?;
            }
        }
        Fault::ConfigNodesToDataNode(j) => {
            for i in 0..c {
                cluster.net.drop_one_way(i, cluster.dn_net(*j))?;
            }
        }
        Fault::SplitDataNodes(a, b) => {
            let (a, b) = (cluster.dn_net(*a), cluster.dn_net(*b));
            cluster.net.drop_both_ways(a, b)?;
        }
        Fault::Pause(j) => cluster.data_nodes[*j].pause()?,
        Fault::Kill(j) => cluster.data_nodes[*j].kill9()?,
        Fault::StallHeartbeats(j) => {
            cluster.arm_failpoint(*j, HEARTBEAT_STALL, "return(600000)")?
        }
        Fault::KillConfigNodeLeader(target) => {
            let leader = cluster.cn_leader().unwrap_or(0);
            *target = Some(leader);
            cluster.config_nodes[leader].kill9()?;
        }
    }
    Ok(())
}

fn heal(cluster: &mut Cluster, fault: &Fault) -> Result<()> {
    match fault {
        Fault::CutFromConfigNodes(_)
        | Fault::DataNodeToConfigNodes(_)
        | Fault::ConfigNodesToDataNode(_)
        | Fault::SplitDataNodes(..) => cluster.heal_network(),
        Fault::Pause(j) => cluster.data_nodes[*j].resume(),
        Fault::Kill(j) => cluster.data_nodes[*j].start(),
        Fault::StallHeartbeats(j) => cluster.disarm_failpoint(*j, HEARTBEAT_STALL),
        Fault::KillConfigNodeLeader(target) => {
            cluster.config_nodes[target.expect("set at injection")].start()
        }
    }
}

/// Runs the nemesis for `duration`; returns the number of faults injected. Every fault is
/// healed before it returns, also on error.
pub fn run(cluster: &mut Cluster, seed: u64, duration: Duration) -> Result<u64> {
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let mut injected = 0;
    while start.elapsed() < duration {
        let mut fault = pick(&mut rng, cluster);
        let hold = Duration::from_millis(rng.range(1000, 5000));
        let settle = Duration::from_millis(rng.range(500, 2500));
        cluster.note(format!(
            "nemesis seed {seed} t={:.1}s: {fault:?} for {hold:?}",
            cluster.elapsed().as_secs_f64()
        ));
        let injected_ok = inject(cluster, &mut fault);
        if injected_ok.is_ok() {
            injected += 1;
            std::thread::sleep(hold);
        }
        let healed = heal(cluster, &fault);
        injected_ok?;
        healed?;
        std::thread::sleep(settle);
    }
    Ok(injected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rng_is_deterministic_and_in_range() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..1000 {
            let x = a.range(3, 9);
            assert_eq!(x, b.range(3, 9));
            assert!((3..9).contains(&x));
        }
    }
}
