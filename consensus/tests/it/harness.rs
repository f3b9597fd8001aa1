//! A single-threaded cluster of `RaftNode`s over the in-memory network, with a model state
//! machine, crash/restart from what was persisted, and per-replica lease fencing.

use std::collections::BTreeMap;
use std::sync::Arc;

use consensus::{
    ApplyError, Config, MemLog, NodeId, ProposalError, RaftNode, StateMachine, Ticket,
};
use parking_lot::Mutex;
use sim::{MemTransport, SimCluster};

pub const TICK_MS: u64 = 10;

/// What every replica agrees an index holds: the command and whether it applied cleanly.
pub type History = Arc<Mutex<BTreeMap<(u64, u64), (Vec<u8>, bool)>>>;

/// The model state machine's state; it survives a node restart (a durable state machine).
#[derive(Debug, Default, Clone)]
pub struct ModelState {
    pub applied_index: u64,
    /// Every entry applied, in order: (index, command, applied cleanly).
    pub applied: Vec<(u64, Vec<u8>, bool)>,
    pub digest: u64,
    /// While set, apply returns Recoverable(536), like a fenced DataNode's engine.
    pub fenced: bool,
    pub recoverable_returns: u64,
    pub restores: u64,
    /// While above 0, `snapshot` fails (an unreadable file) and counts it down.
    pub snapshot_failures: u64,
    /// When set, snapshots are built by a job on a thread of its own, which waits for a read
    /// hold on this lock first: a test holding it for writing keeps the build going.
    pub snapshot_gate: Option<Arc<parking_lot::RwLock<()>>>,
}

pub struct ModelSm {
    pub group: u64,
    pub state: Arc<Mutex<ModelState>>,
    pub history: History,
}

/// The model's snapshot bytes: applied index, digest, then every applied entry.
fn encode(s: &ModelState) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&s.applied_index.to_le_bytes());
    out.extend_from_slice(&s.digest.to_le_bytes());
    out.extend_from_slice(&(s.applied.len() as u64).to_le_bytes());
    for (index, data, ok) in &s.applied {
        out.extend_from_slice(&index.to_le_bytes());
        out.push(*ok as u8);
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(data);
    }
    out
}

fn mix(digest: u64, index: u64, data: &[u8], ok: bool) -> u64 {
    let mut h = digest ^ 0xcbf2_9ce4_8422_2325;
    for b in index
        .to_le_bytes()
        .iter()
        .chain(data.iter())
        .chain(std::iter::once(&(ok as u8)))
    {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

impl StateMachine for ModelSm {
    fn apply(&mut self, index: u64, data: &[u8]) -> Result<Vec<u8>, ApplyError> {
        let mut s = self.state.lock();
        assert!(
            index > s.applied_index,
            "apply of {index} after {} (out of order)",
            s.applied_index
        );
        if s.fenced {
            s.recoverable_returns += 1;
            return Err(ApplyError::Recoverable {
                code: 536,
                message: "metadata lease fenced".into(),
            });
        }
        let ok = !data.starts_with(b"bad");
        {
            let mut history = self.history.lock();
            let entry = history
                .entry((self.group, index))
                .or_insert_with(|| (data.to_vec(), ok));
            assert_eq!(
                (entry.0.as_slice(), entry.1),
                (data, ok),
                "replicas disagree on entry {index} of group {}",
                self.group
            );
        }
        s.applied_index = index;
        s.applied.push((index, data.to_vec(), ok));
        s.digest = mix(s.digest, index, data, ok);
        if ok {
            Ok(index.to_le_bytes().to_vec())
        } else {
            Err(ApplyError::Deterministic {
                code: 614,
                message: "data type mismatch".into(),
            })
        }
    }

    fn applied_index(&self) -> u64 {
        self.state.lock().applied_index
    }

    fn snapshot(&self) -> Result<Vec<u8>, ApplyError> {
        let mut s = self.state.lock();
        if s.snapshot_failures > 0 {
            s.snapshot_failures -= 1;
            return Err(ApplyError::Recoverable {
                code: 305,
                message: "the state cannot be read".into(),
            });
        }
        Ok(encode(&s))
    }

    fn snapshot_job(&self) -> Option<consensus::SnapshotJob> {
        let gate = self.state.lock().snapshot_gate.clone()?;
        let state = self.state.clone();
        Some(Box::new(move || {
            let _open = gate.read();
            let s = state.lock();
            Ok((s.applied_index, encode(&s)))
        }))
    }

    fn restore(&mut self, index: u64, snapshot: &[u8]) -> Result<(), ApplyError> {
        let mut s = self.state.lock();
        if s.fenced {
            s.recoverable_returns += 1;
            return Err(ApplyError::Recoverable {
                code: 536,
                message: "metadata lease fenced".into(),
            });
        }
        let mut pos = 0;
        let u64_at = |pos: &mut usize| {
            let v = u64::from_le_bytes(snapshot[*pos..*pos + 8].try_into().unwrap());
            *pos += 8;
            v
        };
        let snapshot_applied = u64_at(&mut pos);
        // The proxy labels the snapshot with the group's applied index, at or past ours.
        assert!(
            snapshot_applied <= index,
            "snapshot of {snapshot_applied} labelled {index}"
        );
        let digest = u64_at(&mut pos);
        let count = u64_at(&mut pos);
        let mut applied = Vec::new();
        for _ in 0..count {
            let i = u64_at(&mut pos);
            let ok = snapshot[pos] == 1;
            pos += 1;
            let len = u64_at(&mut pos) as usize;
            applied.push((i, snapshot[pos..pos + len].to_vec(), ok));
            pos += len;
        }
        s.applied_index = index;
        s.digest = digest;
        s.applied = applied;
        s.restores += 1;
        Ok(())
    }
}

/// The shared simulation (`sim::SimCluster`: nodes, clock, network, stepping) with this crate's
/// model state machine, proposals, reads and checks on top.
pub struct Cluster {
    pub sim: SimCluster,
    pub config: Config,
    /// The replicas every check covers (a membership change updates it).
    pub peers: Vec<NodeId>,
    /// The group's members at creation; a node started later joins with no members known.
    pub founders: Vec<NodeId>,
    pub groups: Vec<u64>,
    pub logs: BTreeMap<NodeId, MemLog>,
    /// Model state per (node, group).
    pub models: BTreeMap<(NodeId, u64), Arc<Mutex<ModelState>>>,
    pub history: History,
    /// Proposals waiting for their outcome: (group, command, ticket).
    pub pending: Vec<(u64, Vec<u8>, Ticket<Vec<u8>>)>,
    /// Commands whose proposer got a final outcome: (group, command, applied cleanly).
    pub acked: Vec<(u64, Vec<u8>, bool)>,
    pub leader_changed: u64,
    /// Highest log index acknowledged to a proposer, per group.
    pub acked_index_max: BTreeMap<u64, u64>,
    /// Linearizable reads waiting: (group, index every completed read must reach, ticket).
    pub pending_reads: Vec<(u64, u64, Ticket<u64>)>,
    pub reads_done: u64,
    /// When set, nodes keep their raft log in a `wal::Wal` under `<dir>/<node id>` instead of a
    /// `MemLog` (a crash is then a process crash: the page cache survives).
    pub wal_root: Option<tempfile::TempDir>,
    pub wal_options: Option<fn(std::path::PathBuf) -> wal::WalOptions>,
}

impl Cluster {
    pub fn new(seed: u64, replicas: u64, groups: u64, config: Config) -> Cluster {
        Cluster::build(seed, replicas, groups, config, None)
    }

    /// A cluster whose nodes store their raft log in real `wal` directories.
    pub fn with_wal(
        seed: u64,
        replicas: u64,
        groups: u64,
        config: Config,
        options: fn(std::path::PathBuf) -> wal::WalOptions,
    ) -> Cluster {
        Cluster::build(seed, replicas, groups, config, Some(options))
    }

    fn build(
        seed: u64,
        replicas: u64,
        groups: u64,
        config: Config,
        wal_options: Option<fn(std::path::PathBuf) -> wal::WalOptions>,
    ) -> Cluster {
        let peers: Vec<NodeId> = (1..=replicas).collect();
        let mut cluster = Cluster {
            sim: SimCluster::new(seed, TICK_MS, 100_000),
            config: Config { seed, ..config },
            peers: peers.clone(),
            founders: peers.clone(),
            groups: (1..=groups).collect(),
            logs: peers.iter().map(|&p| (p, MemLog::default())).collect(),
            models: BTreeMap::new(),
            history: Arc::default(),
            pending: Vec::new(),
            acked: Vec::new(),
            leader_changed: 0,
            acked_index_max: BTreeMap::new(),
            pending_reads: Vec::new(),
            reads_done: 0,
            wal_root: None,
            wal_options: None,
        };
        for &p in &peers {
            for g in 1..=groups {
                cluster.models.insert((p, g), Arc::default());
            }
        }
        if wal_options.is_some() {
            cluster.wal_root = Some(tempfile::tempdir().unwrap());
            cluster.wal_options = wal_options;
        }
        for &p in &peers {
            cluster.start(p);
        }
        cluster
    }

    fn backend(&self, id: NodeId) -> Box<dyn consensus::LogBackend> {
        match (&self.wal_root, self.wal_options) {
            (Some(root), Some(options)) => {
                let wal = wal::Wal::open(options(root.path().join(id.to_string())))
                    .unwrap_or_else(|e| panic!("node {id}: wal open: {e}"));
                Box::new(wal)
            }
            _ => Box::new(self.logs[&id].clone()),
        }
    }

    /// A new node `id` (not yet started) with an empty log and state machine.
    pub fn add_node(&mut self, id: NodeId) {
        assert!(!self.logs.contains_key(&id), "node {id} exists");
        self.logs.insert(id, MemLog::default());
        for &g in &self.groups.clone() {
            self.models.insert((id, g), Arc::default());
        }
    }

    pub fn start(&mut self, id: NodeId) {
        let backend = self.backend(id);
        let founders = if self.founders.contains(&id) {
            self.founders.clone()
        } else {
            Vec::new()
        };
        let seed = self.sim.seed();
        let node = self
            .sim
            .open(id, self.config.clone(), backend)
            .unwrap_or_else(|e| panic!("seed {seed}: node {id} failed to open: {e}"));
        for &g in &self.groups {
            let sm = ModelSm {
                group: g,
                state: self.models[&(id, g)].clone(),
                history: self.history.clone(),
            };
            node.create_group(g, &founders, Box::new(sm))
                .unwrap_or_else(|e| panic!("seed {seed}: node {id} group {g}: {e}"));
        }
        let fenced = self.models[&(id, self.groups[0])].lock().fenced;
        node.set_fenced(fenced);
        for (&(other, g), model) in &self.models {
            if g == self.groups[0] && other != id {
                node.set_peer_fenced(other, model.lock().fenced);
            }
        }
    }

    /// Kills node `id`: whatever its log did not sync is lost.
    pub fn crash(&mut self, id: NodeId) {
        self.sim.crash(id);
        self.logs[&id].crash();
    }

    pub fn is_up(&self, id: NodeId) -> bool {
        self.sim.is_up(id)
    }

    pub fn node(&mut self, id: NodeId) -> &mut RaftNode<MemTransport> {
        self.sim
            .node_mut(id)
            .unwrap_or_else(|| panic!("node {id} is down"))
    }

    /// Node `id`, which must be running.
    pub fn live(&self, id: NodeId) -> &RaftNode<MemTransport> {
        self.sim
            .node(id)
            .unwrap_or_else(|| panic!("node {id} is down"))
    }

    /// Fences or unfences node `id`'s lease: its state machine returns 536, its node rejects
    /// proposals and steps aside, and the other nodes learn it.
    pub fn set_fenced(&mut self, id: NodeId, fenced: bool) {
        for &g in &self.groups {
            self.models[&(id, g)].lock().fenced = fenced;
        }
        self.sim.set_fenced(id, fenced);
    }

    pub fn leader(&self, group: u64) -> Option<NodeId> {
        self.sim.leader(group)
    }

    /// Advances simulated time by `ms`, one millisecond at a time, collecting outcomes after
    /// each.
    pub fn run_ms(&mut self, ms: u64) {
        for _ in 0..ms {
            self.sim.step_ms();
            self.collect();
        }
    }

    fn collect(&mut self) {
        let mut still = Vec::new();
        for (g, data, ticket) in self.pending.drain(..) {
            match ticket.try_take() {
                None => still.push((g, data, ticket)),
                Some(Ok(result)) => {
                    let index = u64::from_le_bytes(result.as_slice().try_into().unwrap());
                    let max = self.acked_index_max.entry(g).or_default();
                    *max = (*max).max(index);
                    self.acked.push((g, data, true));
                }
                Some(Err(ProposalError::Apply { code, index, .. })) => {
                    assert_eq!(code, 614);
                    let max = self.acked_index_max.entry(g).or_default();
                    *max = (*max).max(index);
                    self.acked.push((g, data, false));
                }
                Some(Err(ProposalError::LeaderChanged { .. } | ProposalError::Stopped { .. })) => {
                    self.leader_changed += 1
                }
            }
        }
        self.pending = still;
        let mut still = Vec::new();
        for (g, must_reach, ticket) in self.pending_reads.drain(..) {
            match ticket.try_take() {
                None => still.push((g, must_reach, ticket)),
                Some(Ok(index)) => {
                    assert!(
                        index >= must_reach,
                        "seed {}: read at index {index} misses a write acknowledged at {must_reach}",
                        self.sim.seed()
                    );
                    self.reads_done += 1;
                }
                Some(Err(_)) => {}
            }
        }
        self.pending_reads = still;
    }

    /// Starts a linearizable read on the current leader of `group`.
    pub fn read(&mut self, group: u64) {
        let Some(leader) = self.leader(group) else {
            return;
        };
        let must_reach = self.acked_index_max.get(&group).copied().unwrap_or(0);
        if let Ok(ticket) = self.node(leader).read_index(group) {
            self.pending_reads.push((group, must_reach, ticket));
        }
    }

    /// Asks the leader of `group` to hand leadership to `to`.
    pub fn transfer(&mut self, group: u64, to: NodeId) {
        if let Some(leader) = self.leader(group) {
            if leader != to {
                // NotLeader races are fine here: the schedule is random.
                let _ignored = self.node(leader).transfer_leader(group, to);
            }
        }
    }

    /// Proposes `data` on the current leader of `group`, if there is one that takes it.
    pub fn propose(&mut self, group: u64, data: Vec<u8>) -> bool {
        let Some(leader) = self.leader(group) else {
            return false;
        };
        match self.node(leader).propose(group, data.clone()) {
            Ok(ticket) => {
                self.pending.push((group, data, ticket));
                true
            }
            Err(_) => false,
        }
    }

    /// Runs until `done` holds, up to `ms_max` of simulated time.
    pub fn run_until(&mut self, ms_max: u64, mut done: impl FnMut(&mut Cluster) -> bool) -> bool {
        for _ in 0..ms_max / TICK_MS {
            if done(self) {
                return true;
            }
            self.run_ms(TICK_MS);
        }
        done(self)
    }

    pub fn elect(&mut self, group: u64) -> NodeId {
        assert!(
            self.run_until(20_000, |c| c.leader(group).is_some()),
            "seed {}: no leader elected",
            self.sim.seed()
        );
        self.leader(group).unwrap()
    }

    /// Proposes and waits for the outcome.
    pub fn write(&mut self, group: u64, data: &[u8]) -> Result<Vec<u8>, ProposalError> {
        let leader = self.elect(group);
        let ticket = self
            .node(leader)
            .propose(group, data.to_vec())
            .unwrap_or_else(|e| panic!("propose on {leader}: {e}"));
        assert!(
            self.run_until(20_000, |_| ticket.is_done()),
            "seed {}: proposal never resolved",
            self.sim.seed()
        );
        ticket.try_take().unwrap()
    }

    /// The shared state of node `node`'s state machine of `group`, to change it.
    pub fn model_mut(&self, node: NodeId, group: u64) -> parking_lot::MutexGuard<'_, ModelState> {
        self.models[&(node, group)].lock()
    }

    pub fn model(&self, node: NodeId, group: u64) -> ModelState {
        self.models[&(node, group)].lock().clone()
    }

    /// Heals everything and checks the invariants once every replica caught up.
    pub fn heal_and_check(&mut self) {
        self.sim.net.heal();
        self.sim.net.set_faults(Default::default());
        let peers = self.peers.clone();
        for &p in &peers {
            if self.models[&(p, self.groups[0])].lock().fenced {
                self.set_fenced(p, false);
            }
            if !self.is_up(p) {
                self.start(p);
            }
        }
        let groups = self.groups.clone();
        for &g in &groups {
            // A fresh entry in the current term makes every earlier one commit everywhere.
            let mut marker_done = false;
            // Unique per call: the check counts a command applied twice.
            let marker = format!("marker-{g}-at-{}", self.sim.now_ms()).into_bytes();
            let converged = self.run_until(120_000, |c| {
                if !marker_done {
                    if let Some(l) = c.leader(g) {
                        if let Ok(t) = c.node(l).propose(g, marker.clone()) {
                            c.pending.push((g, marker.clone(), t));
                            marker_done = true;
                        }
                    }
                    return false;
                }
                if !c.pending.iter().all(|(pg, _, _)| *pg != g) {
                    return false;
                }
                let statuses: Vec<_> = c
                    .peers
                    .iter()
                    .map(|&p| c.live(p).status(g).unwrap())
                    .collect();
                let commit = statuses.iter().map(|s| s.commit).max().unwrap();
                statuses
                    .iter()
                    .all(|s| s.applied == commit && s.commit == commit)
            });
            if !converged {
                if let Some(l) = self.leader(g) {
                    println!("progress at leader {l}: {}", self.live(l).debug_progress(g));
                }
            }
            assert!(
                converged,
                "seed {}: group {g} did not converge: {:?}",
                self.sim.seed(),
                self.peers
                    .iter()
                    .map(|&p| self.live(p).status(g).unwrap())
                    .collect::<Vec<_>>()
            );
            self.check_group(g);
            // A read after healing sees every acknowledged write.
            let reads_before = self.reads_done;
            assert!(
                self.run_until(20_000, |c| {
                    if !c.pending_reads.iter().any(|(rg, _, _)| *rg == g) {
                        c.read(g);
                    }
                    c.reads_done > reads_before
                }),
                "seed {}: group {g}: the final read never completed",
                self.sim.seed()
            );
        }
        if std::env::var("FENCEPOST_SIM_VERBOSE").is_ok() {
            let restores: u64 = self.models.values().map(|m| m.lock().restores).sum();
            let retries: u64 = self
                .models
                .values()
                .map(|m| m.lock().recoverable_returns)
                .sum();
            let (sent, dropped) = self.sim.net.counts();
            println!(
                "seed {}: acked {} reads {} unknown {} applied {} restores {restores} retries {retries} sent {sent} dropped {dropped} t {}ms",
                self.sim.seed(),
                self.acked.len(),
                self.reads_done,
                self.leader_changed,
                self.model(self.peers[0], 1).applied.len(),
                self.sim.now_ms()
            );
        }
    }

    fn check_group(&self, g: u64) {
        let reference = self.model(self.peers[0], g);
        for &p in &self.peers[1..] {
            let m = self.model(p, g);
            assert_eq!(
                (m.applied_index, m.digest),
                (reference.applied_index, reference.digest),
                "seed {}: group {g}: replica {p} differs from replica {}",
                self.sim.seed(),
                self.peers[0]
            );
            assert_eq!(
                m.applied,
                reference.applied,
                "seed {}: group {g}",
                self.sim.seed()
            );
        }
        let applied: BTreeMap<&[u8], bool> = reference
            .applied
            .iter()
            .map(|(_, d, ok)| (d.as_slice(), *ok))
            .collect();
        assert_eq!(
            applied.len(),
            reference.applied.len(),
            "seed {}: a command applied twice",
            self.sim.seed()
        );
        for (ag, data, ok) in &self.acked {
            if *ag != g {
                continue;
            }
            assert_eq!(
                applied.get(data.as_slice()),
                Some(ok),
                "seed {}: acknowledged {:?} lost or changed",
                self.sim.seed(),
                String::from_utf8_lossy(data)
            );
        }
    }
}
