//! The threaded driver runs the same core on real threads and a real clock.

use std::sync::Arc;
use std::time::Duration;

use consensus::{
    Config, DriverConfig, LocalTransport, MemLog, MonotonicClock, NodeHandle, RaftNode, StateRole,
};

use crate::harness::ModelSm;

#[test]
fn three_threaded_nodes_commit_and_answer() {
    let transport = LocalTransport::default();
    let clock = Arc::new(MonotonicClock::default());
    let history = crate::harness::History::default();
    let peers = [1, 2, 3];
    let handles: Vec<NodeHandle> = peers
        .iter()
        .map(|&id| {
            let node = RaftNode::new(
                id,
                Config::default(),
                clock.clone(),
                transport.clone(),
                Box::new(MemLog::default()),
            )
            .unwrap();
            let handle = NodeHandle::spawn(
                node,
                clock.clone(),
                DriverConfig {
                    tick_interval_ms: 5,
                    ..DriverConfig::default()
                },
            )
            .unwrap();
            transport.register(id, handle.inbox());
            let sm = ModelSm {
                group: 1,
                state: Arc::default(),
                history: history.clone(),
            };
            handle.create_group(1, &peers, Box::new(sm)).unwrap();
            handle
        })
        .collect();
    let mut leader = None;
    for _ in 0..400 {
        leader = handles
            .iter()
            .find(|h| h.status(1).unwrap().role == StateRole::Leader);
        if leader.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let leader = leader.expect("a leader within 4 s");
    let tickets: Vec<_> = (0..50u8)
        .map(|i| leader.propose(1, vec![b'c', i]).unwrap())
        .collect();
    for t in &tickets {
        let result = t.wait_timeout(Duration::from_secs(10)).expect("answered");
        assert!(result.is_ok(), "{result:?}");
    }
    let batch = leader
        .propose_batch(1, (0..20u8).map(|i| vec![b'b', i]).collect())
        .unwrap();
    for t in batch {
        let t = t.unwrap();
        assert!(t.wait_timeout(Duration::from_secs(10)).unwrap().is_ok());
    }
    let read = leader.read_index(1).unwrap();
    assert!(read.wait_timeout(Duration::from_secs(10)).unwrap().is_ok());
    transport.clear();
    drop(handles);
}
