//! Deterministic simulation: three replicas of the metadata state machine on the shared raft
//! simulation (`sim::SimCluster`, its in-memory network) with seeded drops, delays and partitions, log compaction that forces
//! snapshot transfers; every replica must end with the same state, and every acknowledged
//! registration must have minted a strictly higher epoch. The seed is in every failure message.

use std::collections::BTreeMap;
use std::sync::Arc;

use common::DataType;
use confignode::command::{Command, CommandResult, SeriesSpec};
use confignode::sm::MetadataStateMachine;
use confignode::state::MetadataState;
use consensus::{Config, MemLog, ProposalError, SplitMix64, Ticket};
use parking_lot::RwLock;
use sim::{NetFaults, SimCluster};

const GROUP: u64 = 1;
const TICK_MS: u64 = 10;

struct Sim {
    seed: u64,
    rng: SplitMix64,
    cluster: SimCluster,
    states: BTreeMap<u64, Arc<RwLock<MetadataState>>>,
    pending: Vec<Ticket<Vec<u8>>>,
    /// Highest epoch acknowledged per DataNode id.
    epochs: BTreeMap<u64, u64>,
    acked: u64,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut cluster = SimCluster::new(seed, TICK_MS, 4096);
        cluster.net.set_faults(NetFaults {
            drop_per_mille: 30,
            delay_min_ms: 0,
            delay_max_ms: 20,
        });
        let mut states = BTreeMap::new();
        for id in 1..=3u64 {
            let state = Arc::new(RwLock::new(MetadataState::new()));
            let config = Config {
                seed,
                ..Config::default()
            };
            let node = cluster
                .open(id, config, Box::new(MemLog::default()))
                .unwrap();
            node.create_group(
                GROUP,
                &[1, 2, 3],
                Box::new(MetadataStateMachine::new(state.clone())),
            )
            .unwrap();
            states.insert(id, state);
        }
        Sim {
            seed,
            rng: SplitMix64::new(seed),
            cluster,
            states,
            pending: Vec::new(),
            epochs: BTreeMap::new(),
            acked: 0,
        }
    }

    fn step_ms(&mut self) {
        self.cluster.step_ms();
        let seed = self.seed;
        let mut still = Vec::new();
        for ticket in self.pending.drain(..) {
            match ticket.try_take() {
                None => still.push(ticket),
                Some(Ok(bytes)) => {
                    self.acked += 1;
                    if let Ok(CommandResult::Registered {
                        data_node_id,
                        incarnation_epoch,
                    }) = CommandResult::decode(&bytes)
                    {
                        let previous = self
                            .epochs
                            .insert(data_node_id, incarnation_epoch)
                            .unwrap_or(0);
                        assert!(
                            incarnation_epoch > previous,
                            "seed {seed}: node {data_node_id} epoch {incarnation_epoch} after {previous}"
                        );
                    }
                }
                Some(Err(ProposalError::Apply { .. })) => self.acked += 1,
                Some(Err(_)) => {}
            }
        }
        self.pending = still;
    }

    fn leader(&self) -> Option<u64> {
        self.cluster.leader(GROUP)
    }

    fn random_command(&mut self) -> Command {
        let r = &mut self.rng;
        let name = |r: &mut SplitMix64| ["a", "b", "c"][r.range(0, 3) as usize].to_string();
        match r.range(0, 7) {
            0 | 1 => Command::RegisterDataNode {
                data_node_id: r.range(0, 4),
                internal_address: format!("dn{}:1", r.range(0, 4)),
                rpc_address: "x:2".into(),
            },
            2 => Command::CreateTimeseries {
                series: vec![SeriesSpec {
                    device: format!("root.{}.{}", name(r), name(r)),
                    measurement: name(r),
                    data_type: DataType::from_code(r.range(0, 6) as u8).unwrap(),
                    codec: Default::default(),
                    meta: Default::default(),
                }],
                auto_create: true,
            },
            3 => {
                let database = format!("root.{}", name(r));
                let slots = vec![(r.range(0, 10) as u32, r.range(0, 3) as i64)];
                let replication_factor = r.range(1, 3) as u32;
                Command::AllocatePartitions {
                    // Tight enough to refuse now and then, so replicas must agree on refusals
                    // too; taken from what was drawn, so every seed draws what it drew before.
                    database_partitions_max: if slots[0].0 % 2 == 0 { 4 } else { u64::MAX },
                    database,
                    slots,
                    replication_factor,
                    region_groups_max: 2,
                }
            }
            4 => Command::BeginDeleteTimeseries {
                series: vec![(format!("root.{}.{}", name(r), name(r)), name(r))],
            },
            5 => Command::BeginDropDatabase {
                database: format!("root.{}", name(r)),
            },
            _ => Command::FinishOperation {
                operation_id: r.range(1, 6),
            },
        }
    }
}

/// Runs one seed; returns the number of snapshots restored into a state machine.
fn run(seed: u64) -> u64 {
    let mut sim = Sim::new(seed);
    let mut partitioned: Option<(u64, u64)> = None;
    for ms in 0..30_000u64 {
        sim.step_ms();
        if ms % 7 == 0 {
            if let Some(leader) = sim.leader() {
                let command = sim.random_command();
                if let Ok(ticket) = sim
                    .cluster
                    .node_mut(leader)
                    .unwrap()
                    .propose(GROUP, command.encode())
                {
                    sim.pending.push(ticket);
                }
            }
        }
        // Now and then cut one node off for a while; it falls behind the compacted log and
        // must catch up from a snapshot.
        if ms % 3000 == 0 {
            match partitioned.take() {
                Some(_) => sim.cluster.net.heal(),
                None => {
                    let node = sim.rng.range(1, 4);
                    sim.cluster.net.isolate(node, &[1, 2, 3]);
                    partitioned = Some((node, ms));
                }
            }
        }
        if ms % 500 == 0 {
            for (_, node) in sim.cluster.nodes_mut() {
                let applied = node.status(GROUP).unwrap().applied;
                let sm_applied = node.state_machine(GROUP).unwrap().applied_index();
                let upto = applied.min(sm_applied);
                if upto > 10 {
                    node.compact(GROUP, upto - 5)
                        .unwrap_or_else(|e| panic!("seed {seed}: compact: {e}"));
                }
            }
        }
    }
    sim.cluster.net.heal();
    sim.cluster.net.set_faults(NetFaults::default());
    // Let everything settle: no new proposals, every replica applies the whole log.
    let mut settled = false;
    for _ in 0..20_000 {
        sim.step_ms();
        let commits: Vec<u64> = sim
            .cluster
            .nodes()
            .map(|(_, n)| n.status(GROUP).unwrap().commit)
            .collect();
        let applied: Vec<u64> = sim
            .cluster
            .nodes()
            .map(|(_, n)| n.status(GROUP).unwrap().applied)
            .collect();
        if sim.leader().is_some() && commits.iter().all(|c| *c == commits[0]) && applied == commits
        {
            settled = true;
            break;
        }
    }
    assert!(settled, "seed {seed}: replicas did not converge");
    let states: Vec<MetadataState> = sim.states.values().map(|s| s.read().clone()).collect();
    assert_eq!(states[0], states[1], "seed {seed}: replicas 1 and 2 differ");
    assert_eq!(states[0], states[2], "seed {seed}: replicas 1 and 3 differ");
    // Replicas that caught up from a snapshot rebuilt the allocation index: it is equal above,
    // and it is what the partition table gives.
    for state in &states {
        state.assert_index_consistent();
    }
    assert!(
        sim.acked > 100,
        "seed {seed}: only {} commands acknowledged",
        sim.acked
    );
    let restored = sim
        .cluster
        .nodes()
        .map(|(_, n)| consensus::Metrics::get(&n.metrics().snapshots.restored))
        .sum();
    eprintln!(
        "seed {seed}: {} acknowledged, metadata version {}, applied {}, {restored} snapshots restored",
        sim.acked,
        states[0].metadata_version(),
        states[0].applied_index()
    );
    restored
}

#[test]
fn replicas_converge_under_drops_partitions_and_snapshots() {
    let restored: u64 = (1..=4).map(run).sum();
    assert!(restored > 0, "no run exercised a snapshot transfer");
}
