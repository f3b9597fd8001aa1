//! The raft driver thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use consensus::{GroupId, GroupStatus, RaftMessage, RaftNode, Ticket, Transport};
use crossbeam::channel::{self, TrySendError};
use parking_lot::RwLock;
use tokio::sync::oneshot;

use crate::budget::ByteBudget;
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
    /// Received raft message batches waiting for the thread, in a queue of their own: client
    /// proposals and calls filling theirs never drop a heartbeat or a vote. Past it (or past
    /// `step_queue_bytes_max`) received messages are dropped like lost packets. Default 4096.
    pub step_queue_batches_max: usize,
    /// Bytes of entries and snapshots in the received raft messages waiting for the thread.
    /// Default 256 MiB.
    pub step_queue_bytes_max: usize,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            name: "raft".into(),
            tick_ms: 100,
            queue_requests_max: 4096,
            requests_per_round_max: 256,
            step_queue_batches_max: 4096,
            step_queue_bytes_max: 256 << 20,
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
    Call(NodeCall<T>),
}

/// Received raft messages and the bytes they count for in the step queue.
struct Steps {
    messages: Vec<RaftMessage>,
    bytes: usize,
}

/// What a raft message counts for in the step queue: its entries' and snapshot's data, plus a
/// little for the rest.
fn step_bytes(message: &RaftMessage) -> usize {
    let m = &message.message;
    64 + m
        .get_entries()
        .iter()
        .map(|e| e.get_data().len())
        .sum::<usize>()
        + m.get_snapshot().get_data().len()
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
    steps: channel::Sender<Steps>,
    /// Bytes of the batches in `steps` ([`step_bytes`]) and their bound.
    step_budget: Arc<ByteBudget>,
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
        let (steps, step_receiver) = channel::bounded(config.step_queue_batches_max);
        let step_budget = Arc::new(ByteBudget::new(config.step_queue_bytes_max));
        let status = Arc::new(RwLock::new(DriverStatus::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let thread = {
            let status = status.clone();
            let stop = stop.clone();
            let config = config.clone();
            let step_budget = step_budget.clone();
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
                    let inputs = Inputs {
                        requests: &receiver,
                        steps: &step_receiver,
                        step_budget: &step_budget,
                    };
                    run_loop(node, &config, &inputs, &status, &stop);
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
            steps,
            step_budget,
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

    /// Hands received raft messages to the node through the step queue; dropped when it is
    /// full (raft retries).
    pub fn step(&self, messages: Vec<RaftMessage>) -> Result<()> {
        let bytes: usize = messages.iter().map(step_bytes).sum();
        if !self.step_budget.try_reserve(bytes) {
            return Err(Error::Backpressure(self.step_budget.max()));
        }
        let refused = match self.steps.try_send(Steps { messages, bytes }) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Full(_)) => Error::Backpressure(self.steps.capacity().unwrap_or(0)),
            Err(TrySendError::Disconnected(_)) => Error::Stopped,
        };
        self.step_budget.release(bytes);
        Err(refused)
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

/// The driver thread's two queues.
struct Inputs<'a, T: Transport> {
    requests: &'a channel::Receiver<Request<T>>,
    steps: &'a channel::Receiver<Steps>,
    step_budget: &'a ByteBudget,
}

/// One thing taken from a queue.
enum Input<T: Transport> {
    Request(Request<T>),
    Steps(Steps),
}

/// The callers of proposals and reads waiting for their tickets.
struct Waiting {
    proposals: Vec<Pending<Vec<u8>>>,
    reads: Vec<Pending<u64>>,
}

impl Waiting {
    /// Answers every caller whose ticket resolved.
    fn poll(&mut self) {
        poll_pending(&mut self.proposals);
        poll_pending(&mut self.reads);
    }
}

fn run_loop<T: Transport>(
    mut node: RaftNode<T>,
    config: &DriverConfig,
    inputs: &Inputs<'_, T>,
    status: &RwLock<DriverStatus>,
    stop: &AtomicBool,
) {
    let tick = Duration::from_millis(config.tick_ms);
    let mut next_tick = Instant::now() + tick;
    let mut waiting = Waiting {
        proposals: Vec::new(),
        reads: Vec::new(),
    };
    while !stop.load(Ordering::SeqCst) {
        // Work left over from the last round (readies beyond its bound) is picked up at once.
        let wait_for = if node.has_ready() {
            Duration::ZERO
        } else {
            next_tick.saturating_duration_since(Instant::now())
        };
        let first = channel::select! {
            recv(inputs.steps) -> steps => steps.ok().map(Input::Steps),
            recv(inputs.requests) -> request => match request {
                Ok(request) => Some(Input::Request(request)),
                // Every handle is gone: nobody can ask for anything any more.
                Err(_) => break,
            },
            default(wait_for) => None,
        };
        take_round(&mut node, first, config, inputs, &mut waiting);
        tick_if_due(&mut node, &mut next_tick, tick);
        handle_readies(&mut node, config, stop);
        waiting.poll();
        let groups: BTreeMap<GroupId, GroupStatus> = node
            .groups()
            .into_iter()
            .filter_map(|g| node.status(g).ok().map(|s| (g, s)))
            .collect();
        status.write().groups = groups;
    }
    // Dropping the node drops the tickets' completers: every pending caller gets Stopped.
    drop(node);
    waiting.poll();
}

/// Takes one round of input, `first` and then what the queues hold: raft messages first, then
/// requests, each up to the round's bound ([`DriverConfig::requests_per_round_max`]).
fn take_round<T: Transport>(
    node: &mut RaftNode<T>,
    first: Option<Input<T>>,
    config: &DriverConfig,
    inputs: &Inputs<'_, T>,
    waiting: &mut Waiting,
) {
    let mut next = first;
    let (mut steps_taken, mut requests_taken) = (0, 0);
    while let Some(input) = next.take() {
        match input {
            Input::Steps(steps) => {
                steps_taken += 1;
                step_batch(node, steps, inputs.step_budget);
            }
            Input::Request(request) => {
                requests_taken += 1;
                handle_request(node, request, waiting);
            }
        }
        let step = (steps_taken < config.requests_per_round_max)
            .then(|| inputs.steps.try_recv().ok())
            .flatten()
            .map(Input::Steps);
        next = step.or_else(|| {
            (requests_taken < config.requests_per_round_max)
                .then(|| inputs.requests.try_recv().ok())
                .flatten()
                .map(Input::Request)
        });
    }
    let bound = config.requests_per_round_max.max(1);
    debug_assert!(
        steps_taken <= bound && requests_taken <= bound,
        "a round took {steps_taken} message batches and {requests_taken} requests, bound {bound}"
    );
}

/// Feeds a batch of received raft messages to the node and frees their share of the step
/// queue's bytes.
fn step_batch<T: Transport>(node: &mut RaftNode<T>, steps: Steps, step_budget: &ByteBudget) {
    let Steps { messages, bytes } = steps;
    step_budget.release(bytes);
    for message in messages {
        let group = message.group;
        // A message for a group not (yet) hosted here, or one raft refuses, is dropped like a
        // lost packet.
        if let Err(e) = node.step(message) {
            tracing::debug!(group, "dropping raft message: {e}");
        }
    }
}

/// Runs one request on the node: a proposal or a read joins `waiting` (or is answered with its
/// refusal at once), a call runs.
fn handle_request<T: Transport>(
    node: &mut RaftNode<T>,
    request: Request<T>,
    waiting: &mut Waiting,
) {
    match request {
        Request::Propose { group, data, reply } => match node.propose(group, data) {
            Ok(ticket) => waiting.proposals.push(Pending { ticket, reply }),
            Err(e) => drop(reply.send(Err(e.into()))),
        },
        Request::ReadIndex { group, reply } => match node.read_index(group) {
            Ok(ticket) => waiting.reads.push(Pending { ticket, reply }),
            Err(e) => drop(reply.send(Err(e.into()))),
        },
        Request::Call(f) => f(node),
    }
}

/// Ticks the node once `next_tick` has come, and sets the next tick.
fn tick_if_due<T: Transport>(node: &mut RaftNode<T>, next_tick: &mut Instant, tick: Duration) {
    let now = Instant::now();
    if now >= *next_tick {
        node.tick();
        *next_tick += tick;
        if *next_tick < now {
            // The thread was stalled for more than a tick: raft counts ticks, so catching up in
            // a burst would fire elections at once; resume the cadence instead.
            *next_tick = now + tick;
        }
    }
}

/// Handles the node's ready state until it has none (a bounded number of rounds); an error
/// stops the driver.
fn handle_readies<T: Transport>(node: &mut RaftNode<T>, config: &DriverConfig, stop: &AtomicBool) {
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
}
