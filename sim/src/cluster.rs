//! The nodes of one simulated cluster, their clock and their network.

use std::collections::BTreeMap;
use std::sync::Arc;

use consensus::{Clock, Config, GroupId, LogBackend, ManualClock, NodeId, RaftNode, StateRole};

use crate::network::{MemNetwork, MemTransport};

/// How many `handle_ready` rounds a node gets per simulated millisecond; a node with work left
/// continues in the next millisecond (as a busy driver thread would).
const READY_ROUNDS_PER_MS: usize = 64;

/// The raft nodes of one simulated cluster on a manual clock and a seeded [`MemNetwork`]. Nodes
/// come and go ([`SimCluster::open`], [`SimCluster::crash`]); their durable state is whatever log
/// backend the caller opened them on (a [`consensus::MemLog`] clone, or a `wal` directory).
pub struct SimCluster {
    seed: u64,
    /// The simulation's clock; every node and the network read it.
    pub clock: ManualClock,
    /// The network between the nodes; set faults and partitions on it directly.
    pub net: MemNetwork,
    tick_ms: u64,
    nodes: BTreeMap<NodeId, RaftNode<MemTransport>>,
}

impl std::fmt::Debug for SimCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimCluster")
            .field("seed", &self.seed)
            .field("nodes", &self.nodes.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl SimCluster {
    /// An empty cluster: the network's randomness comes from `seed`, nodes tick every `tick_ms`
    /// simulated milliseconds, at most `in_flight_max` messages are in flight (past it the
    /// network drops, like a full socket buffer).
    pub fn new(seed: u64, tick_ms: u64, in_flight_max: usize) -> SimCluster {
        assert!(tick_ms > 0, "tick_ms must be > 0");
        let clock = ManualClock::default();
        let net = MemNetwork::new(seed, Arc::new(clock.clone()), in_flight_max);
        SimCluster {
            seed,
            clock,
            net,
            tick_ms,
            nodes: BTreeMap::new(),
        }
    }

    /// The seed, for failure messages that let a run be replayed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Simulated milliseconds since the start.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Starts node `id` on the simulation's clock and network with its raft log in `backend`
    /// (what a previous incarnation synced is what it recovers). The caller creates its groups.
    pub fn open(
        &mut self,
        id: NodeId,
        config: Config,
        backend: Box<dyn LogBackend>,
    ) -> consensus::Result<&mut RaftNode<MemTransport>> {
        assert!(!self.nodes.contains_key(&id), "node {id} is running");
        let node = RaftNode::new(
            id,
            config,
            Arc::new(self.clock.clone()),
            self.net.endpoint(id),
            backend,
        )?;
        Ok(self.nodes.entry(id).or_insert(node))
    }

    /// Kills node `id` (its in-memory state is gone, its traffic in flight dropped) and returns
    /// whether it was running. The caller crashes the node's log backend if it models lost
    /// unsynced writes ([`consensus::MemLog::crash`]).
    pub fn crash(&mut self, id: NodeId) -> bool {
        let was_up = self.nodes.remove(&id).is_some();
        self.net.drop_node_traffic(id);
        was_up
    }

    /// Whether node `id` is running.
    pub fn is_up(&self, id: NodeId) -> bool {
        self.nodes.contains_key(&id)
    }

    /// Node `id`, if running.
    pub fn node(&self, id: NodeId) -> Option<&RaftNode<MemTransport>> {
        self.nodes.get(&id)
    }

    /// Node `id`, if running.
    pub fn node_mut(&mut self, id: NodeId) -> Option<&mut RaftNode<MemTransport>> {
        self.nodes.get_mut(&id)
    }

    /// The running nodes, by id.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &RaftNode<MemTransport>)> {
        self.nodes.iter().map(|(&id, n)| (id, n))
    }

    /// The running nodes, by id.
    pub fn nodes_mut(&mut self) -> impl Iterator<Item = (NodeId, &mut RaftNode<MemTransport>)> {
        self.nodes.iter_mut().map(|(&id, n)| (id, n))
    }

    /// The leader of `group`: among running nodes that believe they lead it, the one with the
    /// highest term (a deposed leader may not know yet).
    pub fn leader(&self, group: GroupId) -> Option<NodeId> {
        self.nodes
            .iter()
            .filter_map(|(&id, n)| n.status(group).ok().map(|s| (id, s)))
            .filter(|(_, s)| s.role == StateRole::Leader)
            .max_by_key(|(_, s)| s.term)
            .map(|(id, _)| id)
    }

    /// Fences or unfences node `id`'s lease: it learns it (a fenced node steps aside and refuses
    /// proposals) and every other running node learns it of its peer (no leadership goes to a
    /// fenced node), as the heartbeat's lease-holder set tells them in the real system.
    pub fn set_fenced(&mut self, id: NodeId, fenced: bool) {
        for (&other, node) in self.nodes.iter_mut() {
            if other == id {
                node.set_fenced(fenced);
            } else {
                node.set_peer_fenced(id, fenced);
            }
        }
    }

    /// Tells every running node the whole lease-holder set (`fenced[id]` for each node), as each
    /// heartbeat does.
    pub fn sync_fenced(&mut self, fenced: &BTreeMap<NodeId, bool>) {
        for (&id, &is_fenced) in fenced {
            self.set_fenced(id, is_fenced);
        }
    }

    /// One simulated millisecond: the clock advances, every node ticks on its tick boundary,
    /// the messages due are delivered in arrival order, then every node handles its ready state
    /// ([`SimCluster::drive`]).
    pub fn step_ms(&mut self) {
        self.clock.advance_ms(1);
        if self.clock.now_ms().is_multiple_of(self.tick_ms) {
            for node in self.nodes.values_mut() {
                node.tick();
            }
        }
        for (to, message) in self.net.deliver_due() {
            if let Some(node) = self.nodes.get_mut(&to) {
                // A message raft refuses (a stale term, an unknown peer) is a lost packet; any
                // other error is a harness or node bug.
                if let Err(e) = node.step(message) {
                    assert!(
                        matches!(e, consensus::Error::Raft(_)),
                        "seed {}: node {to}: step failed: {e}",
                        self.seed
                    );
                }
            }
        }
        self.drive();
    }

    /// Handles ready on every running node, up to a bounded number of rounds each.
    pub fn drive(&mut self) {
        for (id, node) in self.nodes.iter_mut() {
            for _ in 0..READY_ROUNDS_PER_MS {
                if !node.has_ready() {
                    break;
                }
                node.handle_ready()
                    .unwrap_or_else(|e| panic!("seed {}: node {id}: handle_ready: {e}", self.seed));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use consensus::{ApplyError, MemLog, StateMachine};

    use super::*;

    #[derive(Default)]
    struct Noop(u64);

    impl StateMachine for Noop {
        fn apply(&mut self, index: u64, _: &[u8]) -> Result<Vec<u8>, ApplyError> {
            self.0 = index;
            Ok(Vec::new())
        }
        fn applied_index(&self) -> u64 {
            self.0
        }
        fn snapshot(&self) -> Result<Vec<u8>, ApplyError> {
            Ok(self.0.to_le_bytes().to_vec())
        }
        fn restore(&mut self, index: u64, _: &[u8]) -> Result<(), ApplyError> {
            self.0 = index;
            Ok(())
        }
    }

    fn three_nodes(seed: u64) -> SimCluster {
        let mut sim = SimCluster::new(seed, 10, 1024);
        for id in 1..=3 {
            let config = Config {
                seed,
                ..Config::default()
            };
            let node = sim.open(id, config, Box::new(MemLog::default())).unwrap();
            node.create_group(1, &[1, 2, 3], Box::new(Noop::default()))
                .unwrap();
        }
        sim
    }

    #[test]
    fn a_cluster_elects_one_leader_and_a_seed_replays_it() {
        let run = |seed| {
            let mut sim = three_nodes(seed);
            while sim.leader(1).is_none() {
                sim.step_ms();
                assert!(sim.now_ms() < 10_000, "no leader in 10 s");
            }
            (sim.leader(1), sim.now_ms())
        };
        assert_eq!(run(7), run(7), "the same seed, the same run");
    }

    #[test]
    fn a_crashed_leader_is_replaced_and_its_traffic_dropped() {
        let mut sim = three_nodes(3);
        while sim.leader(1).is_none() {
            sim.step_ms();
        }
        let old = sim.leader(1).unwrap();
        assert!(sim.crash(old));
        assert!(!sim.is_up(old) && !sim.crash(old));
        while sim.leader(1).is_none_or(|l| l == old) {
            sim.step_ms();
            assert!(sim.now_ms() < 20_000, "no new leader");
        }
        assert_ne!(sim.leader(1), Some(old));
    }
}
