//! A seeded random nemesis: one fault at a time, each held for a random while and then healed,
//! for a bounded time. The seed comes from `FENCEPOST_NEMESIS_SEED` or is drawn and printed;
//! the same seed gives the same sequence of faults (their effects still depend on timing).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::cluster::{Cluster, HEARTBEAT_STALL};
use crate::workload::{drop_recorded, DropContext, DropTarget, DropVia};

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

/// How long the nemesis runs: `FENCEPOST_NEMESIS_SECS`, default [`DEFAULT_SECS`].
pub fn duration_from_env() -> Duration {
    crate::secs_from_env("FENCEPOST_NEMESIS_SECS", DEFAULT_SECS)
}

/// The default duration (CI): long enough for [`fault_floor`] faults.
pub const DEFAULT_SECS: u64 = 150;

/// The fewest faults a run of `duration` must inject: 50 for the CI default, one per 3 s of a
/// longer run (200 for `FENCEPOST_NEMESIS_SECS=600`). The nemesis runs on past `duration` (up to
/// twice it) until it gets there.
pub fn fault_floor(duration: Duration) -> u64 {
    (duration.as_secs() / 3).max(50)
}

/// One fault, with what it targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// DataNode cut from every ConfigNode, both ways; peers still reach it.
    CutFromConfigNodes(usize),
    /// The same, held for 10–25 s: long enough for the lease to lapse many times over.
    LongCutFromConfigNodes(usize),
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
    /// kill -9 of the ConfigNode leader while writers write to a fresh series; the moment a new
    /// leader is seen, DELETE TIMESERIES of it (REVIEW C1/T4); the killed one restarts after.
    DropAfterElection(Option<usize>),
}

impl Fault {
    /// The kind, for the counts.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::CutFromConfigNodes(_) => "cut-from-confignodes",
            Fault::LongCutFromConfigNodes(_) => "long-cut-from-confignodes",
            Fault::DataNodeToConfigNodes(_) => "datanode-to-confignodes-dropped",
            Fault::ConfigNodesToDataNode(_) => "confignodes-to-datanode-dropped",
            Fault::SplitDataNodes(..) => "split-datanodes",
            Fault::Pause(_) => "pause-datanode",
            Fault::Kill(_) => "kill-9-datanode",
            Fault::StallHeartbeats(_) => "stall-heartbeats",
            Fault::KillConfigNodeLeader(_) => "kill-9-confignode-leader",
            Fault::DropAfterElection(_) => "drop-right-after-confignode-election",
        }
    }
}

/// Fault kinds left out: `FENCEPOST_NEMESIS_SKIP`, comma-separated [`Fault::kind`] names (to
/// tell which fault a violation comes from; CI leaves nothing out).
pub fn skipped_from_env() -> Vec<String> {
    std::env::var("FENCEPOST_NEMESIS_SKIP")
        .map(|s| {
            s.split(',')
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn pick(rng: &mut Rng, cluster: &Cluster, skipped: &[String]) -> Fault {
    // Bounded: at most 1000 draws, then whatever came last (a skip list naming every kind).
    let mut fault = draw(rng, cluster);
    for _ in 0..1000 {
        if !skipped.iter().any(|k| k == fault.kind()) {
            break;
        }
        fault = draw(rng, cluster);
    }
    fault
}

fn draw(rng: &mut Rng, cluster: &Cluster) -> Fault {
    let n = cluster.data_nodes.len() as u64;
    let dn = rng.range(0, n) as usize;
    match rng.range(0, 20) {
        0 | 1 => Fault::CutFromConfigNodes(dn),
        2 | 3 => Fault::DataNodeToConfigNodes(dn),
        4 | 5 => Fault::ConfigNodesToDataNode(dn),
        6 | 7 => {
            let other = (dn + 1 + rng.range(0, n - 1) as usize) % n as usize;
            Fault::SplitDataNodes(dn, other)
        }
        8 | 9 => Fault::Pause(dn),
        10 | 11 => Fault::Kill(dn),
        12 | 13 => Fault::StallHeartbeats(dn),
        14 | 15 => Fault::KillConfigNodeLeader(None),
        16..=18 => Fault::DropAfterElection(None),
        _ => Fault::LongCutFromConfigNodes(dn),
    }
}

fn kill_config_node_leader(cluster: &mut Cluster) -> Result<usize> {
    let leader = cluster.cn_leader().unwrap_or(0);
    cluster.config_nodes[leader].kill9()?;
    Ok(leader)
}

fn inject(cluster: &mut Cluster, fault: &mut Fault) -> Result<()> {
    let c = cluster.config.config_nodes;
    match fault {
        Fault::CutFromConfigNodes(j) | Fault::LongCutFromConfigNodes(j) => {
            cluster.cut_from_config_nodes(*j)?
        }
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
        Fault::KillConfigNodeLeader(target) | Fault::DropAfterElection(target) => {
            *target = Some(kill_config_node_leader(cluster)?);
        }
    }
    Ok(())
}

fn heal(cluster: &mut Cluster, fault: &Fault) -> Result<()> {
    match fault {
        Fault::CutFromConfigNodes(_)
        | Fault::LongCutFromConfigNodes(_)
        | Fault::DataNodeToConfigNodes(_)
        | Fault::ConfigNodesToDataNode(_)
        | Fault::SplitDataNodes(..) => cluster.heal_network(),
        Fault::Pause(j) => cluster.data_nodes[*j].resume(),
        Fault::Kill(j) => cluster.data_nodes[*j].start(),
        Fault::StallHeartbeats(j) => cluster.disarm_failpoint(*j, HEARTBEAT_STALL),
        Fault::KillConfigNodeLeader(target) | Fault::DropAfterElection(target) => match target {
            Some(i) => cluster.config_nodes[*i].start(),
            None => Ok(()),
        },
    }
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Summary {
    /// Faults injected.
    pub injected: u64,
    /// By [`Fault::kind`].
    pub by_kind: BTreeMap<&'static str, u64>,
    /// Drops sent right after a ConfigNode election, and how long after the new leader was
    /// first seen.
    pub drops_after_election: Vec<Duration>,
    /// Heal-to-NORMAL of each long cut: (cut, time to NORMAL; `None` when not within 60 s).
    pub long_cuts: Vec<(Duration, Option<Duration>)>,
}

impl Summary {
    /// One line per kind, for the log.
    pub fn describe(&self) -> String {
        let kinds: Vec<String> = self
            .by_kind
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        format!(
            "{} faults injected ({}); drops sent after an election {:?} after the new leader \
             was seen; long cuts (cut, heal-to-NORMAL): {:?}",
            self.injected,
            kinds.join(", "),
            self.drops_after_election,
            self.long_cuts
        )
    }
}

/// Drops the fault `DropAfterElection` runs: a fresh series per fault.
fn drop_after_election(
    cluster: &Cluster,
    ctx: &DropContext,
    n: u64,
    killed: usize,
    summary: &mut Summary,
) {
    let handle = cluster.runtime.handle().clone();
    let target = DropTarget::Series {
        device: format!("{}.nem{n}", crate::workload::DATABASE),
        measurement: "s1".into(),
    };
    // Writers were started before the kill (see `run`); here: the new leader, then the drop.
    let seen = crate::wait_for(
        "a new ConfigNode leader",
        Duration::from_secs(20),
        Duration::from_millis(20),
        || cluster.cn_leader().filter(|&l| l != killed),
    );
    let Ok(leader) = seen else {
        cluster.note("nemesis: no new ConfigNode leader within 20 s; drop skipped");
        return;
    };
    let seen_at = Instant::now();
    // Straight to the new leader on even faults, through a DataNode on odd ones.
    let via = if n.is_multiple_of(2) {
        DropVia::ConfigNode(cluster.cn_endpoint(leader))
    } else {
        DropVia::Session(ctx.ddl.clone())
    };
    let (cns, history) = (ctx.config_nodes.clone(), ctx.history.clone());
    let drop = handle.spawn(async move { drop_recorded(&via, &cns, &history, target).await });
    summary.drops_after_election.push(seen_at.elapsed());
    if let Err(e) = cluster.runtime.block_on(drop) {
        panic!("the drop task panicked: {e}");
    }
}

/// Runs the nemesis for at least `duration` and until it injected [`fault_floor`] faults (but
/// no longer than twice `duration`). Every fault is healed before it returns, also on error.
/// Drops after elections go through `ctx`.
pub fn run(
    cluster: &mut Cluster,
    seed: u64,
    duration: Duration,
    ctx: &DropContext,
) -> Result<Summary> {
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let floor = fault_floor(duration);
    let mut summary = Summary::default();
    let skipped = skipped_from_env();
    if !skipped.is_empty() {
        cluster.note(format!(
            "nemesis: FENCEPOST_NEMESIS_SKIP leaves out {skipped:?}"
        ));
    }
    while (start.elapsed() < duration || summary.injected < floor) && start.elapsed() < 2 * duration
    {
        let mut fault = pick(&mut rng, cluster, &skipped);
        let hold = match fault {
            Fault::LongCutFromConfigNodes(_) => Duration::from_millis(rng.range(10_000, 25_000)),
            _ => Duration::from_millis(rng.range(500, 2500)),
        };
        let settle = Duration::from_millis(rng.range(200, 1000));
        cluster.note(format!(
            "nemesis seed {seed} t={:.1}s: {fault:?} for {hold:?}",
            cluster.elapsed().as_secs_f64()
        ));
        // A drop after an election needs its target written (and cached) before the kill.
        let writers = matches!(fault, Fault::DropAfterElection(_)).then(|| {
            let target = DropTarget::Series {
                device: format!("{}.nem{}", crate::workload::DATABASE, summary.injected),
                measurement: "s1".into(),
            };
            let w = ctx.target_writers(
                cluster.runtime.handle(),
                &format!("nemesis{}", summary.injected),
                &target,
                2,
                Duration::from_millis(30),
            );
            let device = target.devices()[0].clone();
            cluster
                .runtime
                .block_on(ctx.wait_written(&device, Duration::from_secs(20)));
            w
        });
        let injected_ok = inject(cluster, &mut fault);
        if injected_ok.is_ok() {
            summary.injected += 1;
            *summary.by_kind.entry(fault.kind()).or_default() += 1;
            match &fault {
                Fault::DropAfterElection(Some(killed)) => {
                    let n = summary.injected - 1;
                    drop_after_election(cluster, ctx, n, *killed, &mut summary);
                    std::thread::sleep(Duration::from_millis(800));
                }
                _ => std::thread::sleep(hold),
            }
        }
        if let Some(w) = writers {
            w.stop(&cluster.runtime);
        }
        let healed = heal(cluster, &fault);
        injected_ok?;
        healed?;
        if let Fault::LongCutFromConfigNodes(j) = fault {
            let healed_at = Instant::now();
            let normal = crate::wait_for(
                "NORMAL after a long cut",
                Duration::from_secs(60),
                Duration::from_millis(100),
                || cluster.lease_normal(j).then_some(()),
            );
            let took = normal.is_ok().then(|| healed_at.elapsed());
            cluster.note(format!(
                "nemesis: heal-to-NORMAL after a {:.0}s cut: {}",
                hold.as_secs_f64(),
                took.map_or("not within 60 s".into(), |t| format!(
                    "{:.1} s",
                    t.as_secs_f64()
                ))
            ));
            summary.long_cuts.push((hold, took));
        }
        std::thread::sleep(settle);
    }
    Ok(summary)
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
