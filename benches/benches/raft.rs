//! Raft throughput: proposals per second through a 3-replica group (and 8 groups), each node
//! with its raft log in a real `wal` directory (GroupCommit).
//!
//! `raft_3_replicas_wal`: the three nodes on one thread, driven by the shared simulation
//! (`sim::SimCluster`, ticks included), so every fdatasync of every replica is serialized (a
//! floor). `raft_3_replicas_wal_threaded`: each node on the driver the servers run
//! (`runtime::RaftDriver`), messages handed between the drivers' queues in-process, each round's
//! proposals submitted concurrently. Each iteration proposes `batch` entries on the leader(s),
//! then waits until every proposal is applied on the leader; the entries of one round go into
//! one ready batch, so one fsync per node covers all of them. Throughput is reported in
//! proposals (= committed entries); every entry is persisted on three replicas. Run with
//! `cargo bench -p fencepost-benches --bench raft`.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use consensus::{
    ApplyError, Config, MonotonicClock, NodeId, RaftMessage, RaftNode, StateMachine, StateRole,
    Transport,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use parking_lot::RwLock;
use runtime::{DriverConfig, RaftDriver};
use sim::SimCluster;

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

    fn snapshot(&self) -> Result<Vec<u8>, ApplyError> {
        Ok(self.bytes.to_le_bytes().to_vec())
    }

    fn restore(&mut self, index: u64, snapshot: &[u8]) -> Result<(), ApplyError> {
        self.applied_index = index;
        self.bytes = u64::from_le_bytes(snapshot.try_into().expect("8 bytes"));
        Ok(())
    }
}

/// The three nodes on the shared simulation's single thread (`sim::SimCluster`).
struct Bench {
    _dir: tempfile::TempDir,
    cluster: SimCluster,
    groups: u64,
}

impl Bench {
    fn new(groups: u64) -> Bench {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cluster = SimCluster::new(1, 10, 1 << 20);
        let config = Config {
            in_flight_proposals_max: 4096,
            ..Config::default()
        };
        let peers = [1, 2, 3];
        for &id in &peers {
            let log = wal_log(dir.path(), id);
            let node = cluster
                .open(id, config.clone(), Box::new(log))
                .expect("node");
            for g in 1..=groups {
                node.create_group(g, &peers, Box::new(CountingSm::default()))
                    .expect("group");
            }
        }
        let leader = cluster.node_mut(1).expect("node 1");
        for g in 1..=groups {
            leader.campaign(g).expect("campaign");
        }
        while (1..=groups).any(|g| cluster.leader(g) != Some(1)) {
            cluster.step_ms();
        }
        Bench {
            _dir: dir,
            cluster,
            groups,
        }
    }

    fn leader(&mut self) -> &mut RaftNode<sim::MemTransport> {
        self.cluster.node_mut(1).expect("node 1")
    }

    /// Proposes `per_group` entries in every group and drives until all are applied on the leader.
    fn round(&mut self, per_group: usize) {
        let payload = vec![7u8; PAYLOAD_BYTES];
        let mut tickets = Vec::with_capacity(per_group * self.groups as usize);
        for g in 1..=self.groups {
            for _ in 0..per_group {
                tickets.push(self.leader().propose(g, payload.clone()).expect("propose"));
            }
        }
        while !tickets.iter().all(|t| t.is_done()) {
            self.cluster.step_ms();
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

/// Delivers raft messages between drivers in this process the way `runtime::GrpcTransport`'s
/// receiving side does: straight into the target driver's bounded queue (dropped when full).
#[derive(Clone, Default)]
struct LoopbackTransport {
    drivers: Arc<RwLock<BTreeMap<NodeId, Weak<RaftDriver<LoopbackTransport>>>>>,
}

impl Transport for LoopbackTransport {
    fn send(&self, to_node: NodeId, messages: Vec<RaftMessage>) {
        let target = self.drivers.read().get(&to_node).and_then(Weak::upgrade);
        if let Some(driver) = target {
            // A full queue drops the messages; raft retries, as over the network.
            let _dropped = driver.step(messages);
        }
    }
}

/// Three nodes, each on the driver a server runs (`runtime::RaftDriver`: its own thread, bounded
/// request queue, ticks), so the replicas' fsyncs overlap as they would on three machines.
struct Threaded {
    _dir: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    drivers: Vec<Arc<RaftDriver<LoopbackTransport>>>,
    leader: usize,
}

impl Threaded {
    fn new() -> Threaded {
        let dir = tempfile::tempdir().expect("tempdir");
        let transport = LoopbackTransport::default();
        let clock = Arc::new(MonotonicClock::default());
        let config = Config {
            in_flight_proposals_max: 4096,
            ..Config::default()
        };
        let peers = [1, 2, 3];
        let drivers: Vec<Arc<RaftDriver<LoopbackTransport>>> = peers
            .iter()
            .map(|&id| {
                let (config, clock, transport_for_node) =
                    (config.clone(), clock.clone(), transport.clone());
                let log = wal_log(dir.path(), id);
                let driver = DriverConfig {
                    name: format!("raft-{id}"),
                    tick_ms: 10,
                    ..DriverConfig::default()
                };
                let driver = Arc::new(
                    RaftDriver::spawn(driver, move || {
                        let mut node =
                            RaftNode::new(id, config, clock, transport_for_node, Box::new(log))?;
                        node.create_group(1, &peers, Box::new(CountingSm::default()))?;
                        Ok(node)
                    })
                    .expect("spawn"),
                );
                transport
                    .drivers
                    .write()
                    .insert(id, Arc::downgrade(&driver));
                driver
            })
            .collect();
        let leader = loop {
            if let Some(i) = drivers.iter().position(|d| {
                d.group_status(1)
                    .is_some_and(|s| s.role == StateRole::Leader)
            }) {
                break i;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        Threaded {
            _dir: dir,
            runtime,
            drivers,
            leader,
        }
    }

    /// Proposes `proposals` entries at once, as concurrent sessions would, and waits for all.
    fn round(&self, proposals: usize) {
        let payload = vec![7u8; PAYLOAD_BYTES];
        let leader = self.drivers[self.leader].clone();
        self.runtime.block_on(async move {
            let mut waiting = tokio::task::JoinSet::new();
            for _ in 0..proposals {
                let (leader, payload) = (leader.clone(), payload.clone());
                waiting.spawn(
                    async move { leader.propose(1, payload, Duration::from_secs(10)).await },
                );
            }
            while let Some(outcome) = waiting.join_next().await {
                outcome.expect("task").expect("applied");
            }
        });
    }
}

impl Drop for Threaded {
    fn drop(&mut self) {
        for driver in &self.drivers {
            driver.shutdown();
        }
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
        let fsyncs: u64 = bench.cluster.nodes().map(|(_, n)| n.fsyncs()).sum();
        let proposals_total = consensus::Metrics::get(&bench.leader().metrics().proposals);
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
