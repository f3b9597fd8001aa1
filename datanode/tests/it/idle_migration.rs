//! Migrating an idle region (REVIEW-2026-12-05 N2): the real `DataRegionStateMachine` on three
//! simulated nodes takes one insert and then no more writes; a fourth node joins as a learner.
//! Its snapshot must name it, so it is built at an index at or past the learner's addition,
//! which only raft entries (the AddLearner, leader no-ops) reach: before the state machine
//! learned of those (`StateMachine::note_applied`), every snapshot was labelled with the
//! region's last insert, never named the learner, and the leader rebuilt it at every heartbeat
//! response forever while the replacement waited.

use std::sync::Arc;

use common::{DataType, Tablet, Value};
use consensus::{Config, MemLog, Metrics, NodeId, ReplacementStep};
use datanode::region_state_machine::{DataRegionStateMachine, RegionRetryConfig};
use engine::{DataRegion, ManualGate, RegionCommand};
use sim::SimCluster;

use crate::support::config;

const GROUP: u64 = 1;
const FOUNDERS: [NodeId; 3] = [1, 2, 3];
const JOINING: NodeId = 4;

struct Idle {
    cluster: SimCluster,
    dir: tempfile::TempDir,
    regions: Vec<(NodeId, Arc<DataRegion>)>,
}

impl Idle {
    fn new(seed: u64) -> Idle {
        let dir = tempfile::tempdir().unwrap();
        let mut idle = Idle {
            cluster: SimCluster::new(seed, 10, 100_000),
            dir,
            regions: Vec::new(),
        };
        for id in FOUNDERS {
            idle.host(id, &FOUNDERS);
        }
        idle
    }

    /// Hosts node `id`'s replica of the region with founding `peers` (none: joining).
    fn host(&mut self, id: NodeId, peers: &[NodeId]) {
        let region =
            Arc::new(DataRegion::open(self.dir.path().join(id.to_string()), config()).unwrap());
        let sm = DataRegionStateMachine::new(
            region.clone(),
            Arc::new(ManualGate::new()),
            Arc::new(self.cluster.clock.clone()),
            RegionRetryConfig::default(),
        );
        let config = Config {
            seed: self.cluster.seed(),
            ..Config::default()
        };
        let node = self
            .cluster
            .open(id, config, Box::new(MemLog::default()))
            .unwrap();
        node.create_group(GROUP, peers, Box::new(sm)).unwrap();
        self.regions.push((id, region));
    }

    fn region(&self, id: NodeId) -> &Arc<DataRegion> {
        &self.regions.iter().find(|(n, _)| *n == id).unwrap().1
    }

    /// Steps up to `ms` simulated milliseconds until `done`, giving snapshot jobs (threads of
    /// their own) a moment of real time every 50.
    fn run_until(&mut self, ms: u64, mut done: impl FnMut(&mut Idle) -> bool) -> bool {
        for step in 0..ms {
            self.cluster.step_ms();
            if done(self) {
                return true;
            }
            if step % 50 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        false
    }

    fn leader(&mut self) -> NodeId {
        assert!(
            self.run_until(10_000, |s| s.cluster.leader(GROUP).is_some()),
            "no leader"
        );
        self.cluster.leader(GROUP).unwrap()
    }
}

#[test]
fn an_idle_region_catches_a_learner_up_by_one_snapshot_and_the_replacement_finishes() {
    let mut s = Idle::new(7);
    let leader = s.leader();
    let mut tablet = Tablet::new("root.sg.d1", &[("s1", DataType::Double)]);
    tablet.push_row(1, vec![Some(Value::Double(1.5))]);
    let ticket = s
        .cluster
        .node_mut(leader)
        .unwrap()
        .propose(GROUP, RegionCommand::insert(tablet).encode())
        .unwrap();
    assert!(s.run_until(5_000, |_| ticket.is_done()), "insert committed");
    // The last write, then no more: the leader compacts its log, so a learner can only catch up
    // by snapshot.
    let inserted_at = s.region(leader).applied_index();
    s.region(leader).flush().unwrap();
    s.cluster
        .node_mut(leader)
        .unwrap()
        .compact(GROUP, inserted_at)
        .unwrap();
    s.host(JOINING, &[]);
    let from = *FOUNDERS.iter().find(|&&n| n != leader).unwrap();
    let generated_before = Metrics::get(
        &s.cluster
            .node(leader)
            .unwrap()
            .metrics()
            .snapshots
            .generated,
    );

    // REMOVE DATANODE's step, as the region leader repeats it: add the learner, wait for it to
    // catch up, swap it for `from`.
    let mut steps = Vec::new();
    let done = s.run_until(20_000, |s| {
        if !s.cluster.now_ms().is_multiple_of(100) {
            return false;
        }
        let Some(leader) = s.cluster.leader(GROUP) else {
            return false;
        };
        let step = s
            .cluster
            .node_mut(leader)
            .unwrap()
            .step_replacement(GROUP, from, JOINING, 1000)
            .unwrap();
        if steps.last() != Some(&step) {
            steps.push(step);
        }
        step == ReplacementStep::Done
    });
    let joined = s.cluster.node(JOINING).unwrap();
    assert!(
        done,
        "the replacement of {from} by {JOINING} did not finish: steps {steps:?}, learner status \
         {:?}, leader {} generated {} snapshots",
        joined.status(GROUP).unwrap(),
        leader,
        Metrics::get(
            &s.cluster
                .node(leader)
                .unwrap()
                .metrics()
                .snapshots
                .generated
        ) - generated_before,
    );
    assert_eq!(
        Metrics::get(&joined.metrics().snapshots.restored),
        1,
        "the learner caught up by one snapshot"
    );
    assert_eq!(
        s.region(JOINING).digest().unwrap(),
        s.region(leader).digest().unwrap(),
        "the learner holds the leader's content"
    );
    let generated = Metrics::get(
        &s.cluster
            .node(leader)
            .unwrap()
            .metrics()
            .snapshots
            .generated,
    ) - generated_before;
    assert!(
        generated <= 2,
        "the leader built {generated} snapshots for one learner of an idle region"
    );
}
