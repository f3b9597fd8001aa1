//! A seeded in-memory network for raft simulations: drop, delay, reorder and directed
//! partitions, with time from the simulation's clock.

use std::collections::BTreeSet;
use std::sync::Arc;

use consensus::{Clock, NodeId, RaftMessage, SplitMix64, Transport};
use parking_lot::Mutex;

/// Faults the in-memory network injects. Defaults: a perfect network.
#[derive(Debug, Clone, Default)]
pub struct NetFaults {
    /// Chance, in per mille, that a message is dropped.
    pub drop_per_mille: u32,
    /// Minimum delivery delay in milliseconds.
    pub delay_min_ms: u64,
    /// Maximum delivery delay in milliseconds; a range of delays reorders messages.
    pub delay_max_ms: u64,
}

#[derive(Debug)]
struct InFlight {
    deliver_at_ms: u64,
    seq: u64,
    from: NodeId,
    to: NodeId,
    message: RaftMessage,
}

#[derive(Debug)]
struct NetState {
    rng: SplitMix64,
    faults: NetFaults,
    /// Directed links `(from, to)` that drop everything, on send and on delivery.
    blocked: BTreeSet<(NodeId, NodeId)>,
    in_flight: Vec<InFlight>,
    in_flight_max: usize,
    seq: u64,
    sent: u64,
    dropped: u64,
}

/// A seeded in-memory network with drop, delay, reorder and directed partitions. Time comes from
/// the injected clock; [`MemNetwork::deliver_due`] hands out what has arrived.
#[derive(Clone)]
pub struct MemNetwork {
    state: Arc<Mutex<NetState>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for MemNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemNetwork").finish_non_exhaustive()
    }
}

impl MemNetwork {
    /// A network whose randomness comes from `seed`. `in_flight_max` bounds the messages queued
    /// (beyond it new messages are dropped, like a full socket buffer).
    pub fn new(seed: u64, clock: Arc<dyn Clock>, in_flight_max: usize) -> Self {
        MemNetwork {
            state: Arc::new(Mutex::new(NetState {
                rng: SplitMix64::new(seed),
                faults: NetFaults::default(),
                blocked: BTreeSet::new(),
                in_flight: Vec::new(),
                in_flight_max,
                seq: 0,
                sent: 0,
                dropped: 0,
            })),
            clock,
        }
    }

    /// The transport endpoint of node `from`.
    pub fn endpoint(&self, from: NodeId) -> MemTransport {
        MemTransport {
            from,
            net: self.clone(),
        }
    }

    /// Replaces the fault settings.
    pub fn set_faults(&self, faults: NetFaults) {
        self.state.lock().faults = faults;
    }

    /// Blocks or unblocks the directed link `from → to`.
    pub fn set_link(&self, from: NodeId, to: NodeId, blocked: bool) {
        let mut state = self.state.lock();
        if blocked {
            state.blocked.insert((from, to));
        } else {
            state.blocked.remove(&(from, to));
        }
    }

    /// Cuts `node` off from `others` in both directions.
    pub fn isolate(&self, node: NodeId, others: &[NodeId]) {
        for &other in others.iter().filter(|&&o| o != node) {
            self.set_link(node, other, true);
            self.set_link(other, node, true);
        }
    }

    /// Removes every partition.
    pub fn heal(&self) {
        self.state.lock().blocked.clear();
    }

    /// Messages sent and dropped so far.
    pub fn counts(&self) -> (u64, u64) {
        let state = self.state.lock();
        (state.sent, state.dropped)
    }

    /// Removes and returns the messages due by now, ordered by arrival time: `(to, message)`.
    /// Messages on a link blocked since they were sent are dropped here, like a firewall on the
    /// receiving side.
    pub fn deliver_due(&self) -> Vec<(NodeId, RaftMessage)> {
        let now_ms = self.clock.now_ms();
        let mut state = self.state.lock();
        let (mut due, rest): (Vec<InFlight>, Vec<InFlight>) = std::mem::take(&mut state.in_flight)
            .into_iter()
            .partition(|m| m.deliver_at_ms <= now_ms);
        state.in_flight = rest;
        due.sort_by_key(|m| (m.deliver_at_ms, m.seq));
        let mut out = Vec::with_capacity(due.len());
        for m in due {
            if state.blocked.contains(&(m.from, m.to)) {
                state.dropped += 1;
            } else {
                out.push((m.to, m.message));
            }
        }
        out
    }

    /// Drops every message in flight to or from `node` (it crashed).
    pub fn drop_node_traffic(&self, node: NodeId) {
        let mut state = self.state.lock();
        let before = state.in_flight.len();
        state.in_flight.retain(|m| m.to != node && m.from != node);
        state.dropped += (before - state.in_flight.len()) as u64;
    }

    fn send_from(&self, from: NodeId, to: NodeId, messages: Vec<RaftMessage>) {
        let now_ms = self.clock.now_ms();
        let mut state = self.state.lock();
        for message in messages {
            state.sent += 1;
            let faults = state.faults.clone();
            if state.blocked.contains(&(from, to))
                || state.in_flight.len() >= state.in_flight_max
                || state.rng.chance(faults.drop_per_mille)
            {
                state.dropped += 1;
                continue;
            }
            let delay_ms = state
                .rng
                .range(faults.delay_min_ms, faults.delay_max_ms.saturating_add(1));
            state.seq += 1;
            let seq = state.seq;
            state.in_flight.push(InFlight {
                deliver_at_ms: now_ms + delay_ms,
                seq,
                from,
                to,
                message,
            });
        }
    }
}

/// Node `from`'s end of a [`MemNetwork`].
#[derive(Debug, Clone)]
pub struct MemTransport {
    from: NodeId,
    net: MemNetwork,
}

impl Transport for MemTransport {
    fn send(&self, to_node: NodeId, messages: Vec<RaftMessage>) {
        self.net.send_from(self.from, to_node, messages);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use consensus::ManualClock;
    use raft::eraftpb::Message;

    #[test]
    fn the_network_partitions_by_direction_and_is_seeded() {
        let clock = ManualClock::default();
        let net = MemNetwork::new(3, Arc::new(clock.clone()), 16);
        let heartbeat = |to| RaftMessage {
            group: 1,
            message: Message {
                to,
                ..Default::default()
            },
        };
        net.set_link(1, 2, true);
        net.endpoint(1).send(2, vec![heartbeat(2)]);
        net.endpoint(2).send(1, vec![heartbeat(1)]);
        let delivered: Vec<NodeId> = net.deliver_due().into_iter().map(|(to, _)| to).collect();
        assert_eq!(delivered, vec![1]);
        assert_eq!(net.counts(), (2, 1));
        // Bounded: past in_flight_max, messages are dropped.
        net.heal();
        net.endpoint(1)
            .send(2, (0..20).map(|_| heartbeat(2)).collect());
        assert_eq!(net.deliver_due().len(), 16);
    }
}
