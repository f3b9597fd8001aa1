//! The raft driver thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use consensus::{GroupId, GroupStatus, RaftMessage, RaftNode, Ticket, Transport};
use crossbeam::channel::{self, RecvTimeoutError, TrySendError};
use parking_lot::RwLock;
use tokio::sync::oneshot;

use crate::error::{Error, Result};

/// Settings of a driver.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// Thread name, for logs and `top`.
    pub name: String,
    /// Milliseconds between two raft ticks. Default 100.
    pub tick_ms: u64,
    /// Requests (proposals, reads, messages, calls) waiting for the thread; past it callers get
    /// [`Error::Backpressure`] and incoming raft messages are dropped. Default 4096.
    pub queue_requests_max: usize,
    /// Requests taken per loop before the node handles its ready state again, so a flood of
    /// messages cannot delay persistence and ticks. Default 256.
    pub requests_per_round_max: usize,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            name: "raft".into(),
            tick_ms: 100,
            queue_requests_max: 4096,
            requests_per_round_max: 256,
        }
    }
}

type NodeCall<T> = Box<dyn FnOnce(&mut RaftNode<T>) + Send>;

enum Request<T: Transport> {
    Propose {
        group: GroupId,
        data: Vec<u8>,
        reply: oneshot::Sender<Result<Vec<u8>>>,
    },
    ReadIndex {
        group: GroupId,
        reply: oneshot::Sender<Result<u64>>,
    },
    Step(Vec<RaftMessage>),
    Call(NodeCall<T>),
}

/// What the driver last saw of each group, published after every round so readers never wait
/// for the thread.
#[derive(Clone, Debug, Default)]
pub struct DriverStatus {
    /// Status of every hosted group.
    pub groups: BTreeMap<GroupId, GroupStatus>,
    /// The driver stopped (shutdown or a fatal error).
    pub stopped: bool,
}

/// Owns a [`RaftNode`] on a dedicated thread. Cheap to share behind an `Arc`; dropping the last
/// handle stops the thread.
pub struct RaftDriver<T: Transport + 'static> {
    sender: channel::Sender<Request<T>>,
    status: Arc<RwLock<DriverStatus>>,
    stop: Arc<AtomicBool>,
    thread: parking_lot::Mutex<Option<JoinHandle<()>>>,
    queue_requests_max: usize,
}

impl<T: Transport + 'static> std::fmt::Debug for RaftDriver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftDriver").finish_non_exhaustive()
    }
}

struct Pending<V> {
    ticket: Ticket<V>,
    reply: oneshot::Sender<Result<V>>,
}

fn poll_pending<V>(pending: &mut Vec<Pending<V>>) {
    let mut still = Vec::with_capacity(pending.len());
    for p in pending.drain(..) {
        match p.ticket.try_take() {
            // The caller may have given up; nobody to tell then.
            Some(outcome) => drop(p.reply.send(outcome.map_err(Error::from))),
            None => still.push(p),
        }
    }
    *pending = still;
}

impl<T: Transport + 'static> RaftDriver<T> {
    /// Starts the thread. `make_node` runs on it, so the node never crosses threads; when it
    /// fails, the error is returned here.
    pub fn spawn<F>(config: DriverConfig, make_node: F) -> Result<Self>
    where
        F: FnOnce() -> consensus::Result<RaftNode<T>> + Send + 'static,
    {
        assert!(config.tick_ms > 0, "tick_ms must be > 0");
        let (sender, receiver) = channel::bounded(config.queue_requests_max);
        let status = Arc::new(RwLock::new(DriverStatus::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let thread = {
            let status = status.clone();
            let stop = stop.clone();
            let config = config.clone();
            std::thread::Builder::new()
                .name(config.name.clone())
                .spawn(move || {
                    let node = match make_node() {
                        Ok(node) => {
                            // The spawner waits for this message; it cannot be gone.
                            ready_tx.send(Ok(())).expect("spawner waits");
                            node
                        }
                        Err(e) => {
                            ready_tx.send(Err(e)).expect("spawner waits");
                            status.write().stopped = true;
                            return;
                        }
                    };
                    run_loop(node, &config, &receiver, &status, &stop);
                    status.write().stopped = true;
                })
                .map_err(Error::Spawn)?
        };
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                thread
                    .join()
                    .expect("driver thread panicked while starting");
                return Err(e.into());
            }
            Err(_) => return Err(Error::Stopped),
        }
        Ok(RaftDriver {
            sender,
            status,
            stop,
            thread: parking_lot::Mutex::new(Some(thread)),
            queue_requests_max: config.queue_requests_max,
        })
    }

    fn send(&self, request: Request<T>) -> Result<()> {
        match self.sender.try_send(request) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(Error::Backpressure(self.queue_requests_max)),
            Err(TrySendError::Disconnected(_)) => Err(Error::Stopped),
        }
    }

    /// Proposes `data` to `group` and waits up to `timeout` for the state machine's result on
    /// this (leader) node.
    pub async fn propose(
        &self,
        group: GroupId,
        data: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>> {
        let (reply, rx) = oneshot::channel();
        self.send(Request::Propose { group, data, reply })?;
        wait(rx, timeout).await
    }

    /// A linearizable read barrier: resolves once this node is confirmed leader and has applied
    /// everything acknowledged before the call.
    pub async fn read_index(&self, group: GroupId, timeout: Duration) -> Result<u64> {
        let (reply, rx) = oneshot::channel();
        self.send(Request::ReadIndex { group, reply })?;
        wait(rx, timeout).await
    }

    /// Hands received raft messages to the node; dropped when the queue is full (raft retries).
    pub fn step(&self, messages: Vec<RaftMessage>) -> Result<()> {
        self.send(Request::Step(messages))
    }

    /// Runs `f` on the driver thread with the node (create a group, transfer leadership, set
    /// fencing...) and returns its value.
    pub async fn call<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut RaftNode<T>) -> R + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        self.send(Request::Call(Box::new(move |node| {
            // The caller may have given up waiting.
            drop(reply.send(f(node)));
        })))?;
        rx.await.map_err(|_| Error::Stopped)
    }

    /// Like [`RaftDriver::call`], for callers outside an async context.
    pub fn call_blocking<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut RaftNode<T>) -> R + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        self.send(Request::Call(Box::new(move |node| {
            drop(reply.send(f(node)));
        })))?;
        rx.blocking_recv().map_err(|_| Error::Stopped)
    }

    /// What the driver last published about `group`.
    pub fn group_status(&self, group: GroupId) -> Option<GroupStatus> {
        self.status.read().groups.get(&group).cloned()
    }

    /// Whether the thread has stopped.
    pub fn is_stopped(&self) -> bool {
        self.status.read().stopped
    }

    /// Stops the thread and waits for it. Pending requests resolve with [`Error::Stopped`].
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.lock().take() {
            if thread.join().is_err() {
                tracing::error!("raft driver thread panicked");
            }
        }
    }
}

impl<T: Transport + 'static> Drop for RaftDriver<T> {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn wait<V>(rx: oneshot::Receiver<Result<V>>, timeout: Duration) -> Result<V> {
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_)) => Err(Error::Stopped),
        Err(_) => Err(Error::Timeout(timeout.as_millis() as u64)),
    }
}

/// A seed for a node's raft RNG (election jitter) that differs from process to process.
///
/// Simulations pass fixed seeds to replay a run; a real node must not: with a seed derived from
/// the node id, every cluster draws the same jitter sequence, and two nodes whose sequences agree
/// for a few draws time out in the same tick election after election (seen: three split votes in
/// a row after a ConfigNode leader was killed, 3.5 s without a leader).
pub fn entropy_seed(node_id: u64) -> u64 {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // RandomState is keyed from the OS's randomness once per process.
    std::collections::hash_map::RandomState::new().hash_one((node_id, std::process::id(), nanos))
}

fn run_loop<T: Transport>(
    mut node: RaftNode<T>,
    config: &DriverConfig,
    receiver: &channel::Receiver<Request<T>>,
    status: &RwLock<DriverStatus>,
    stop: &AtomicBool,
) {
    let tick = Duration::from_millis(config.tick_ms);
    let mut next_tick = Instant::now() + tick;
    let mut proposals: Vec<Pending<Vec<u8>>> = Vec::new();
    let mut reads: Vec<Pending<u64>> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        // Work left over from the last round (readies beyond its bound) is picked up at once.
        let wait_for = if node.has_ready() {
            Duration::ZERO
        } else {
            next_tick.saturating_duration_since(Instant::now())
        };
        let mut taken = 0;
        let first = match receiver.recv_timeout(wait_for) {
            Ok(request) => Some(request),
            Err(RecvTimeoutError::Timeout) => None,
            // Every handle is gone: nobody can ask for anything any more.
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut next = first;
        while let Some(request) = next.take() {
            taken += 1;
            match request {
                Request::Propose { group, data, reply } => match node.propose(group, data) {
                    Ok(ticket) => proposals.push(Pending { ticket, reply }),
                    Err(e) => drop(reply.send(Err(e.into()))),
                },
                Request::ReadIndex { group, reply } => match node.read_index(group) {
                    Ok(ticket) => reads.push(Pending { ticket, reply }),
                    Err(e) => drop(reply.send(Err(e.into()))),
                },
                Request::Step(messages) => {
                    for message in messages {
                        let group = message.group;
                        // A message for a group not (yet) hosted here, or one raft refuses, is
                        // dropped like a lost packet.
                        if let Err(e) = node.step(message) {
                            tracing::debug!(group, "dropping raft message: {e}");
                        }
                    }
                }
                Request::Call(f) => f(&mut node),
            }
            if taken < config.requests_per_round_max {
                next = receiver.try_recv().ok();
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            node.tick();
            next_tick += tick;
            if next_tick < now {
                // The thread was stalled for more than a tick: raft counts ticks, so catching up
                // in a burst would fire elections at once; resume the cadence instead.
                next_tick = now + tick;
            }
        }
        // Bounded: raft produces a new ready only from new input; a handful of rounds drains it.
        for _ in 0..64 {
            if !node.has_ready() {
                break;
            }
            if let Err(e) = node.handle_ready() {
                tracing::error!("raft driver {} stops: {e}", config.name);
                stop.store(true, Ordering::SeqCst);
                break;
            }
        }
        poll_pending(&mut proposals);
        poll_pending(&mut reads);
        let groups: BTreeMap<GroupId, GroupStatus> = node
            .groups()
            .into_iter()
            .filter_map(|g| node.status(g).ok().map(|s| (g, s)))
            .collect();
        status.write().groups = groups;
    }
    // Dropping the node drops the tickets' completers: every pending caller gets Stopped.
    drop(node);
    poll_pending(&mut proposals);
    poll_pending(&mut reads);
}
