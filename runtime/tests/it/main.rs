//! The raft driver on one node with an in-memory log: proposals complete with the state
//! machine's result, reads wait for leadership, calls run on the thread, shutdown resolves
//! everything. `net`: connections through a partition (keepalive, the reconnect policy).
//! `limits`: a server's connection and request bounds.
//!
//! In detail: proposals, a deterministic refusal, read-index, `call`, an unknown group, shutdown
//! resolving callers; a failing node factory reported by `spawn`.

mod limits;
mod net;

use std::sync::Arc;
use std::time::Duration;

use consensus::{ApplyError, MemLog, MonotonicClock, RaftNode, StateMachine, StateRole};
use runtime::{DriverConfig, RaftDriver};
use sim::{MemNetwork, MemTransport};

/// Appends every entry; the result is the count so far.
#[derive(Default)]
struct Counter {
    applied: u64,
    entries: Vec<Vec<u8>>,
}

impl StateMachine for Counter {
    fn apply(&mut self, index: u64, data: &[u8]) -> Result<Vec<u8>, ApplyError> {
        self.applied = index;
        if data == b"bad" {
            return Err(ApplyError::Deterministic {
                code: 614,
                message: "refused".into(),
            });
        }
        self.entries.push(data.to_vec());
        Ok((self.entries.len() as u64).to_le_bytes().to_vec())
    }
    fn applied_index(&self) -> u64 {
        self.applied
    }
    fn snapshot(&self) -> Result<Vec<u8>, ApplyError> {
        Ok(Vec::new())
    }
    fn restore(&mut self, index: u64, _: &[u8]) -> Result<(), ApplyError> {
        self.applied = index;
        Ok(())
    }
}

fn driver() -> RaftDriver<MemTransport> {
    driver_with(DriverConfig {
        name: "test-raft".into(),
        tick_ms: 5,
        ..DriverConfig::default()
    })
}

/// A one-node driver hosting group 7 (a `Counter`).
fn driver_with(config: DriverConfig) -> RaftDriver<MemTransport> {
    let clock = Arc::new(MonotonicClock::default());
    let network = MemNetwork::new(1, clock.clone(), 1024);
    RaftDriver::spawn(config, move || {
        let mut node = RaftNode::new(
            1,
            consensus::Config::default(),
            clock,
            network.endpoint(1),
            Box::new(MemLog::default()),
        )?;
        node.create_group(7, &[1], Box::new(Counter::default()))?;
        Ok(node)
    })
    .expect("driver starts")
}

async fn wait_leader(d: &RaftDriver<MemTransport>) {
    for _ in 0..400 {
        if d.group_status(7)
            .is_some_and(|s| s.role == StateRole::Leader)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no leader: {:?}", d.group_status(7));
}

#[tokio::test]
async fn proposals_reads_and_calls_complete_on_the_driver_thread() {
    let d = driver();
    wait_leader(&d).await;
    let timeout = Duration::from_secs(5);
    let first = d.propose(7, b"a".to_vec(), timeout).await.unwrap();
    assert_eq!(first, 1u64.to_le_bytes());
    let second = d.propose(7, b"b".to_vec(), timeout).await.unwrap();
    assert_eq!(second, 2u64.to_le_bytes());
    // A deterministic refusal is the entry's result.
    let refused = d.propose(7, b"bad".to_vec(), timeout).await.unwrap_err();
    assert!(
        matches!(
            refused,
            runtime::Error::Proposal(consensus::ProposalError::Apply { code: 614, .. })
        ),
        "{refused:?}"
    );
    let read = d.read_index(7, timeout).await.unwrap();
    assert!(read >= 3);
    let applied = d
        .call(|node| node.status(7).unwrap().applied)
        .await
        .unwrap();
    assert!(applied >= read);
    // An unknown group is refused at once.
    assert!(matches!(
        d.propose(99, b"x".to_vec(), timeout).await,
        Err(runtime::Error::Consensus(consensus::Error::GroupNotFound(
            99
        )))
    ));
    d.shutdown();
    assert!(d.is_stopped());
    assert!(matches!(
        d.propose(7, b"c".to_vec(), timeout).await,
        Err(runtime::Error::Stopped)
    ));
}

#[test]
fn a_failing_factory_is_reported_by_spawn() {
    let outcome = RaftDriver::<MemTransport>::spawn(DriverConfig::default(), || {
        Err(consensus::Error::Config("no".into()))
    });
    assert!(matches!(
        outcome,
        Err(runtime::Error::Consensus(consensus::Error::Config(_)))
    ));
}

/// A raft message of `group` carrying one entry of `bytes` bytes.
fn message_with(group: u64, bytes: usize) -> consensus::RaftMessage {
    let mut message = raft::eraftpb::Message::default();
    message.mut_entries().push(raft::eraftpb::Entry {
        data: vec![0u8; bytes].into(),
        ..Default::default()
    });
    consensus::RaftMessage { group, message }
}

/// REVIEW M5 / issue 18 item 5: received raft messages have a queue of their own, so a flood of
/// client requests that fills the request queue (proposals refused with backpressure) never
/// drops a heartbeat; that queue is bounded in bytes of entries as well as in batches.
#[tokio::test]
async fn raft_messages_are_taken_while_requests_are_refused() {
    let d = Arc::new(driver_with(DriverConfig {
        name: "test-raft".into(),
        tick_ms: 5,
        queue_requests_max: 4,
        step_queue_batches_max: 16,
        step_queue_bytes_max: 1 << 20,
        ..DriverConfig::default()
    }));
    wait_leader(&d).await;
    // Hold the thread, then flood the request queue with proposals until it refuses.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let holder = {
        let d = d.clone();
        tokio::spawn(async move { d.call(move |_| held.recv().is_ok()).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut flood = Vec::new();
    let refused = loop {
        let d2 = d.clone();
        let proposal =
            tokio::spawn(
                async move { d2.propose(7, b"x".to_vec(), Duration::from_secs(10)).await },
            );
        tokio::time::sleep(Duration::from_millis(5)).await;
        if proposal.is_finished() {
            break proposal.await.unwrap();
        }
        flood.push(proposal);
        assert!(flood.len() <= 8, "the request queue never filled");
    };
    assert!(
        matches!(refused, Err(runtime::Error::Backpressure(_))),
        "{refused:?}"
    );
    // Raft messages still go in, up to the step queue's byte bound (one batch always fits).
    d.step(vec![message_with(99, 0)])
        .expect("a heartbeat-sized batch is taken");
    d.step(vec![message_with(99, 600 << 10)])
        .expect("600 KiB fit in 1 MiB");
    assert!(matches!(
        d.step(vec![message_with(99, 600 << 10)]),
        Err(runtime::Error::Backpressure(_))
    ));
    release.send(()).unwrap();
    holder.await.unwrap().unwrap();
    for proposal in flood {
        proposal.await.unwrap().expect("queued proposals complete");
    }
    // Once taken, the queue has room again.
    tokio::time::sleep(Duration::from_millis(50)).await;
    d.step(vec![message_with(99, 600 << 10)])
        .expect("the queue drained");
}
