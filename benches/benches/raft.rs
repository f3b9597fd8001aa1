//! Raft throughput: proposals per second through a 3-replica group (and 8 groups) over the
//! in-memory transport, each node with its raft log in a real `wal` directory (GroupCommit).
//!
//! `raft_3_replicas_wal`: the three nodes run on one thread, driven like the simulation, so every
//! fdatasync of every replica is serialized (a floor). `raft_3_replicas_wal_threaded`: each node on
//! its own driver thread with `LocalTransport`, each round submitted with one
//! `NodeHandle::propose_batch`. Each iteration proposes `batch` entries on the
//! leader(s) without driving, then drives until every proposal is applied on the leader; the
//! entries of one round go into one ready batch, so one fsync per node covers all of them.
//! Throughput is reported in proposals (= committed entries); every entry is persisted on
//! three replicas. Run with `cargo bench -p fencepost-benches --bench raft`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use consensus::{
    ApplyError, Config, DriverConfig, LocalTransport, ManualClock, MemNetwork, MemTransport,
    MonotonicClock, NodeHandle, RaftNode, StateMachine, StateRole,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const PAYLOAD_BYTES: usize = 128;

/// Counts applied bytes; enough state to make apply do something.
#[derive(Default)]
struct CountingSm {
    applied_index: u64,
    bytes: u64,
}

impl StateMachine for CountingSm {
    fn apply(&mut self, index: u64, data: &[u8]) -> Result<Vec<u8>, ApplyError> {
        self.applied_index = index;
        self.bytes += data.len() as u64;
        Ok(Vec::new())
    }

    fn applied_index(&self) -> u64 {
        self.applied_index
    }

    fn snapshot(&self) -> Vec<u8> {
        self.bytes.to_le_bytes().to_vec()
    }

    fn restore(&mut self, index: u64, snapshot: &[u8]) -> Result<(), ApplyError> {
        self.applied_index = index;
        self.bytes = u64::from_le_bytes(snapshot.try_into().expect("8 bytes"));
        Ok(())
    }
}

struct Bench {
    _dir: tempfile::TempDir,
    clock: ManualClock,
    net: MemNetwork,
    nodes: Vec<RaftNode<MemTransport>>,
    groups: u64,
}

impl Bench {
    fn new(groups: u64) -> Bench {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = ManualClock::default();
        let net = MemNetwork::new(1, Arc::new(clock.clone()), 1 << 20);
        let config = Config {
            in_flight_proposals_max: 4096,
            ..Config::default()
        };
        let peers = [1, 2, 3];
        let nodes = peers
            .iter()
            .map(|&id| {
                let log = wal_log(dir.path(), id);
                let mut node = RaftNode::new(
                    id,
                    config.clone(),
                    Arc::new(clock.clone()),
                    net.endpoint(id),
                    Box::new(log),
                )
                .expect("node");
                for g in 1..=groups {
                    node.create_group(g, &peers, Box::new(CountingSm::default()))
                        .expect("group");
                }
                node
            })
            .collect();
        let mut bench = Bench {
            _dir: dir,
            clock,
            net,
            nodes,
            groups,
        };
        for g in 1..=groups {
            bench.nodes[0].campaign(g).expect("campaign");
        }
        while (1..=groups).any(|g| bench.nodes[0].status(g).unwrap().role != StateRole::Leader) {
            bench.step();
        }
        bench
    }

    fn step(&mut self) {
        self.clock.advance_ms(1);
        for (to, message) in self.net.deliver_due() {
            // Errors are stale messages; raft retries.
            let _stale = self.nodes[(to - 1) as usize].step(message);
        }
        for node in &mut self.nodes {
            while node.has_ready() {
                node.handle_ready().expect("handle_ready");
            }
        }
    }

    /// Proposes `per_group` entries in every group and drives until all are applied on the leader.
    fn round(&mut self, per_group: usize) {
        let payload = vec![7u8; PAYLOAD_BYTES];
        let mut tickets = Vec::with_capacity(per_group * self.groups as usize);
        for g in 1..=self.groups {
            for _ in 0..per_group {
                tickets.push(self.nodes[0].propose(g, payload.clone()).expect("propose"));
            }
        }
        while !tickets.iter().all(|t| t.is_done()) {
            self.step();
        }
        for t in tickets {
            t.try_take().expect("done").expect("applied");
        }
    }
}

fn wal_log(dir: &std::path::Path, id: u64) -> wal::Wal {
    let mut options = wal::WalOptions::new(dir.join(id.to_string()));
    options.durability = wal::Durability::GroupCommit {
        window: Duration::from_millis(1),
    };
    wal::Wal::open(options).expect("wal open")
}

/// Three nodes, each on its own driver thread (`NodeHandle`), so the replicas' fsyncs overlap as
/// they would on three machines.
struct Threaded {
    _dir: tempfile::TempDir,
    transport: LocalTransport,
    handles: Vec<NodeHandle>,
    leader: usize,
}

impl Threaded {
    fn new() -> Threaded {
        let dir = tempfile::tempdir().expect("tempdir");
        let transport = LocalTransport::default();
        let clock = Arc::new(MonotonicClock::default());
        let config = Config {
            in_flight_proposals_max: 4096,
            ..Config::default()
        };
        let peers = [1, 2, 3];
        let handles: Vec<NodeHandle> = peers
            .iter()
            .map(|&id| {
                let node = RaftNode::new(
                    id,
                    config.clone(),
                    clock.clone(),
                    transport.clone(),
                    Box::new(wal_log(dir.path(), id)),
                )
                .expect("node");
                let driver = DriverConfig {
                    tick_interval_ms: 10,
                    ..DriverConfig::default()
                };
                let handle = NodeHandle::spawn(node, clock.clone(), driver).expect("spawn");
                transport.register(id, handle.inbox());
                handle
                    .create_group(1, &peers, Box::new(CountingSm::default()))
                    .expect("group");
                handle
            })
            .collect();
        let leader = loop {
            if let Some(i) = handles
                .iter()
                .position(|h| h.status(1).expect("status").role == StateRole::Leader)
            {
                break i;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Threaded {
            _dir: dir,
            transport,
            handles,
            leader,
        }
    }

    fn round(&self, proposals: usize) {
        let payload = vec![7u8; PAYLOAD_BYTES];
        let tickets = self.handles[self.leader]
            .propose_batch(1, vec![payload; proposals])
            .expect("driver running");
        for t in tickets {
            let t = t.expect("propose");
            t.wait_timeout(Duration::from_secs(10))
                .expect("answered")
                .expect("applied");
        }
    }
}

impl Drop for Threaded {
    fn drop(&mut self) {
        self.transport.clear();
    }
}

fn raft_threaded(c: &mut Criterion) {
    let mut group = c.benchmark_group("raft_3_replicas_wal_threaded");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let bench = Threaded::new();
    for per_round in [1usize, 64, 512] {
        group.throughput(Throughput::Elements(per_round as u64));
        group.bench_function(format!("1_group_x_{per_round}_per_round"), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    bench.round(per_round);
                }
                start.elapsed()
            })
        });
    }
    group.finish();
}

fn raft_throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("raft_3_replicas_wal");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (groups, per_group) in [(1u64, 1usize), (1, 64), (1, 512), (8, 64)] {
        let proposals = groups * per_group as u64;
        group.throughput(Throughput::Elements(proposals));
        let mut bench = Bench::new(groups);
        let name = format!("{groups}_groups_x_{per_group}_per_round");
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    bench.round(per_group);
                }
                start.elapsed()
            })
        });
        let fsyncs: u64 = bench.nodes.iter().map(|n| n.fsyncs()).sum();
        let proposals_total = consensus::Metrics::get(&bench.nodes[0].metrics().proposals);
        if proposals_total == 0 {
            continue; // Filtered out on the command line.
        }
        println!(
            "  {groups} groups x {per_group}: {proposals_total} proposals, {fsyncs} fsyncs on 3 nodes ({:.2} fsyncs/proposal)",
            fsyncs as f64 / proposals_total.max(1) as f64
        );
    }
    group.finish();
}

criterion_group!(benches, raft_throughput, raft_threaded);
criterion_main!(benches);
