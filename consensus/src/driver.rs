//! A thin threaded driver: one std thread owns a [`RaftNode`] and runs the same synchronous core
//! the simulation steps by hand. Callers talk to it over a bounded command queue.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::node::{GroupStatus, RaftNode};
use crate::state_machine::{Clock, StateMachine};
use crate::ticket::Ticket;
use crate::transport::{RaftMessage, Transport};
use crate::{GroupId, NodeId};

/// Settings of the threaded driver.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// Time between raft ticks, in milliseconds: the election timeout is
    /// `election_tick * tick_interval_ms` (and up to twice that). Default 100.
    pub tick_interval_ms: u64,
    /// Commands (proposals, received messages, admin calls) queued for the driver thread. A full
    /// queue rejects proposals with `Error::Backpressure` and drops raft messages (raft resends).
    /// Default 4096.
    pub command_queue_max: usize,
}

impl DriverConfig {
    /// Checks the settings once at start-up.
    pub fn validate(&self) -> Result<()> {
        if self.tick_interval_ms == 0 || self.command_queue_max == 0 {
            return Err(Error::Config(
                "tick_interval_ms and command_queue_max must be > 0".into(),
            ));
        }
        Ok(())
    }
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            tick_interval_ms: 100,
            command_queue_max: 4096,
        }
    }
}

type Reply<T> = SyncSender<Result<T>>;

enum Command {
    Step(RaftMessage),
    CreateGroup {
        group: GroupId,
        peers: Vec<NodeId>,
        state_machine: Box<dyn StateMachine>,
        reply: Reply<()>,
    },
    Propose {
        group: GroupId,
        data: Vec<u8>,
        reply: Reply<Ticket<Vec<u8>>>,
    },
    ProposeBatch {
        group: GroupId,
        batch: Vec<Vec<u8>>,
        reply: Reply<Vec<Result<Ticket<Vec<u8>>>>>,
    },
    ReadIndex {
        group: GroupId,
        reply: Reply<Ticket<u64>>,
    },
    TransferLeader {
        group: GroupId,
        to: NodeId,
        reply: Reply<()>,
    },
    Compact {
        group: GroupId,
        index: u64,
        reply: Reply<()>,
    },
    Status {
        group: GroupId,
        reply: Reply<GroupStatus>,
    },
    SetFenced(bool),
    SetPeerFenced(NodeId, bool),
    Stop,
}

/// The callers' side of a node run by a driver thread. Dropping it stops the thread.
pub struct NodeHandle {
    id: NodeId,
    command_queue_max: usize,
    commands: Option<SyncSender<Command>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for NodeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHandle")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl NodeHandle {
    /// Starts a thread that owns `node`, ticks it every `config.tick_interval_ms` by `clock`,
    /// and handles ready after every batch of commands.
    pub fn spawn<T: Transport + Send + 'static>(
        node: RaftNode<T>,
        clock: Arc<dyn Clock>,
        config: DriverConfig,
    ) -> Result<NodeHandle> {
        config.validate()?;
        let id = node.id();
        let (commands, queue) = mpsc::sync_channel(config.command_queue_max);
        let command_queue_max = config.command_queue_max;
        let thread = std::thread::Builder::new()
            .name(format!("raft-node-{id}"))
            .spawn(move || run(node, clock, config, queue))
            .map_err(Error::Thread)?;
        Ok(NodeHandle {
            id,
            command_queue_max,
            commands: Some(commands),
            thread: Some(thread),
        })
    }

    /// The node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// A sender for raft messages received from the network (give it to the transport server).
    pub fn inbox(&self) -> Inbox {
        Inbox {
            commands: self.commands.clone(),
        }
    }

    fn call<R>(&self, group: GroupId, make: impl FnOnce(Reply<R>) -> Command) -> Result<R> {
        let (reply, answer) = mpsc::sync_channel(1);
        let commands = self.commands.as_ref().ok_or(Error::Stopped)?;
        match commands.try_send(make(reply)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                return Err(Error::Backpressure {
                    group,
                    in_flight: self.command_queue_max,
                    max: self.command_queue_max,
                })
            }
            Err(TrySendError::Disconnected(_)) => return Err(Error::Stopped),
        }
        answer.recv().map_err(|_| Error::Stopped)?
    }

    /// See [`RaftNode::create_group`].
    pub fn create_group(
        &self,
        group: GroupId,
        peers: &[NodeId],
        state_machine: Box<dyn StateMachine>,
    ) -> Result<()> {
        let peers = peers.to_vec();
        self.call(group, |reply| Command::CreateGroup {
            group,
            peers,
            state_machine,
            reply,
        })
    }

    /// See [`RaftNode::propose`]; wait on the ticket with [`Ticket::wait_timeout`].
    pub fn propose(&self, group: GroupId, data: Vec<u8>) -> Result<Ticket<Vec<u8>>> {
        self.call(group, |reply| Command::Propose { group, data, reply })
    }

    /// Proposes every item of `batch` in one go: they share one ready round and one fsync. Each
    /// item gets its own outcome; see [`RaftNode::propose`].
    pub fn propose_batch(
        &self,
        group: GroupId,
        batch: Vec<Vec<u8>>,
    ) -> Result<Vec<Result<Ticket<Vec<u8>>>>> {
        self.call(group, |reply| Command::ProposeBatch {
            group,
            batch,
            reply,
        })
    }

    /// See [`RaftNode::read_index`].
    pub fn read_index(&self, group: GroupId) -> Result<Ticket<u64>> {
        self.call(group, |reply| Command::ReadIndex { group, reply })
    }

    /// See [`RaftNode::transfer_leader`].
    pub fn transfer_leader(&self, group: GroupId, to: NodeId) -> Result<()> {
        self.call(group, |reply| Command::TransferLeader { group, to, reply })
    }

    /// See [`RaftNode::compact`].
    pub fn compact(&self, group: GroupId, index: u64) -> Result<()> {
        self.call(group, |reply| Command::Compact {
            group,
            index,
            reply,
        })
    }

    /// See [`RaftNode::status`].
    pub fn status(&self, group: GroupId) -> Result<GroupStatus> {
        self.call(group, |reply| Command::Status { group, reply })
    }

    /// See [`RaftNode::set_fenced`]. Blocks while the queue is full: lease changes are not dropped.
    pub fn set_fenced(&self, fenced: bool) -> Result<()> {
        let commands = self.commands.as_ref().ok_or(Error::Stopped)?;
        commands
            .send(Command::SetFenced(fenced))
            .map_err(|_| Error::Stopped)
    }

    /// See [`RaftNode::set_peer_fenced`]. Blocks while the queue is full.
    pub fn set_peer_fenced(&self, peer: NodeId, fenced: bool) -> Result<()> {
        let commands = self.commands.as_ref().ok_or(Error::Stopped)?;
        commands
            .send(Command::SetPeerFenced(peer, fenced))
            .map_err(|_| Error::Stopped)
    }
}

impl Drop for NodeHandle {
    fn drop(&mut self) {
        // Inbox clones (in transports, the node's own among them) keep the queue open, so the
        // thread is told to stop rather than waiting for the queue to close.
        if let Some(commands) = self.commands.take() {
            let _already_stopped = commands.send(Command::Stop);
        }
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!(node = self.id, "raft driver thread panicked");
            }
        }
    }
}

/// Where a transport server delivers received raft messages. Never blocks: when the driver is
/// behind, messages are dropped and raft resends them.
#[derive(Clone)]
pub struct Inbox {
    commands: Option<SyncSender<Command>>,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox").finish_non_exhaustive()
    }
}

impl Inbox {
    /// Queues `message` for the node; false if it was dropped.
    pub fn deliver(&self, message: RaftMessage) -> bool {
        self.commands
            .as_ref()
            .is_some_and(|c| c.try_send(Command::Step(message)).is_ok())
    }
}

/// An in-process transport between driver threads: delivers straight into the peers' inboxes.
#[derive(Clone, Default)]
pub struct LocalTransport {
    inboxes: Arc<RwLock<BTreeMap<NodeId, Inbox>>>,
}

impl std::fmt::Debug for LocalTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalTransport").finish_non_exhaustive()
    }
}

impl LocalTransport {
    /// Registers `node`'s inbox.
    pub fn register(&self, node: NodeId, inbox: Inbox) {
        self.inboxes.write().insert(node, inbox);
    }

    /// Forgets every inbox, so the driver threads can stop.
    pub fn clear(&self) {
        self.inboxes.write().clear();
    }
}

impl Transport for LocalTransport {
    fn send(&self, to_node: NodeId, messages: Vec<RaftMessage>) {
        let inboxes = self.inboxes.read();
        if let Some(inbox) = inboxes.get(&to_node) {
            for message in messages {
                // A dropped message is a lost packet; raft resends.
                let _delivered = inbox.deliver(message);
            }
        }
    }
}

fn run<T: Transport>(
    mut node: RaftNode<T>,
    clock: Arc<dyn Clock>,
    config: DriverConfig,
    queue: Receiver<Command>,
) {
    let tick = Duration::from_millis(config.tick_interval_ms.max(1));
    let mut next_tick = Instant::now() + tick;
    loop {
        let now = Instant::now();
        let mut timeout = next_tick.saturating_duration_since(now);
        if let Some(retry_ms) = node.next_retry_ms() {
            let wait_ms = retry_ms.saturating_sub(clock.now_ms());
            timeout = timeout.min(Duration::from_millis(wait_ms));
        }
        match queue.recv_timeout(timeout) {
            Ok(command) => {
                if !handle(&mut node, command) {
                    return;
                }
                // Drain what queued meanwhile, so that many proposals share one ready batch.
                for _ in 0..config.command_queue_max {
                    match queue.try_recv() {
                        Ok(command) => {
                            if !handle(&mut node, command) {
                                return;
                            }
                        }
                        Err(_) => break,
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if Instant::now() >= next_tick {
            node.tick();
            next_tick += tick;
        }
        while node.has_ready() {
            if let Err(e) = node.handle_ready() {
                // A log write or fsync failed: the log is poisoned and raft cannot go on without
                // it. Stopping drops every pending ticket, which resolves as `Stopped`.
                tracing::error!(node = node.id(), "raft node stops: {e}");
                return;
            }
        }
    }
}

/// Runs one command; false means stop.
fn handle<T: Transport>(node: &mut RaftNode<T>, command: Command) -> bool {
    // A reply whose caller went away is fine to lose.
    match command {
        Command::Step(message) => {
            if let Err(e) = node.step(message) {
                tracing::debug!(node = node.id(), "dropped a raft message: {e}");
            }
        }
        Command::CreateGroup {
            group,
            peers,
            state_machine,
            reply,
        } => {
            let _gone = reply.send(node.create_group(group, &peers, state_machine));
        }
        Command::Propose { group, data, reply } => {
            let _gone = reply.send(node.propose(group, data));
        }
        Command::ProposeBatch {
            group,
            batch,
            reply,
        } => {
            let tickets = batch
                .into_iter()
                .map(|data| node.propose(group, data))
                .collect();
            let _gone = reply.send(Ok(tickets));
        }
        Command::ReadIndex { group, reply } => {
            let _gone = reply.send(node.read_index(group));
        }
        Command::TransferLeader { group, to, reply } => {
            let _gone = reply.send(node.transfer_leader(group, to));
        }
        Command::Compact {
            group,
            index,
            reply,
        } => {
            let _gone = reply.send(node.compact(group, index));
        }
        Command::Status { group, reply } => {
            let _gone = reply.send(node.status(group));
        }
        Command::SetFenced(fenced) => node.set_fenced(fenced),
        Command::SetPeerFenced(peer, fenced) => node.set_peer_fenced(peer, fenced),
        Command::Stop => return false,
    }
    true
}
