//! Fencepost's consensus layer: multi-raft over tikv raft-rs 0.7.
//!
//! - [`RaftNode`]: one node's share of many raft groups (one per data region), a synchronous,
//!   steppable core: [`RaftNode::tick`], [`RaftNode::step`], [`RaftNode::propose`],
//!   [`RaftNode::handle_ready`]. Time comes from an injected [`Clock`], randomness from a seed.
//! - The apply proxy inside [`RaftNode::handle_ready`]: committed entries reach the
//!   [`StateMachine`] strictly in order; a [`ApplyError::Recoverable`] error (536 among them) is
//!   retried with capped exponential backoff forever, a [`ApplyError::Deterministic`] error (614)
//!   is the entry's result. Apply is decoupled from persistence: a stuck state machine does not
//!   stop the node from appending, fsyncing and acknowledging entries.
//! - [`NodeStorage`]: raft storage for all groups of a node over one [`LogBackend`] (the `wal`
//!   crate, or [`MemLog`] in the simulation).
//!
//! **fsyncs per write**: `handle_ready` gathers the `Ready` of every group on the node and writes
//! them as one backend batch followed by one `sync` — one fdatasync per `handle_ready` round for
//! all groups and all proposals batched into it. A write is acknowledged after it is durable on a
//! quorum: one such fsync on the leader (overlapping the followers', since the leader sends
//! appends before persisting) and one on each follower. A change of the commit index alone is
//! not written by itself: it rides along with the next synced batch.
//!
//! # Hosting a group
//!
//! ```
//! use std::sync::Arc;
//! use consensus::{ApplyError, Config, ManualClock, MemLog, RaftMessage, RaftNode, StateMachine, Transport};
//!
//! /// A one-node group sends nothing; a server passes its gRPC transport.
//! struct Alone;
//! impl Transport for Alone {
//!     fn send(&self, _to: u64, _messages: Vec<RaftMessage>) {}
//! }
//!
//! #[derive(Default)]
//! struct Counter { applied_index: u64, sum: u64 }
//!
//! impl StateMachine for Counter {
//!     fn apply(&mut self, index: u64, data: &[u8]) -> Result<Vec<u8>, ApplyError> {
//!         self.applied_index = index;
//!         self.sum += data.len() as u64;
//!         Ok(self.sum.to_le_bytes().to_vec())
//!     }
//!     fn applied_index(&self) -> u64 { self.applied_index }
//!     fn snapshot(&self) -> Result<Vec<u8>, ApplyError> { Ok(self.sum.to_le_bytes().to_vec()) }
//!     fn restore(&mut self, index: u64, snapshot: &[u8]) -> Result<(), ApplyError> {
//!         self.applied_index = index;
//!         self.sum = u64::from_le_bytes(snapshot.try_into().unwrap());
//!         Ok(())
//!     }
//! }
//!
//! let clock = ManualClock::default();
//! // A real node passes `Box::new(wal::Wal::open(options)?)` as the log backend.
//! let mut node = RaftNode::new(
//!     1, Config::default(), Arc::new(clock.clone()), Alone, Box::new(MemLog::default()),
//! )?;
//! node.create_group(42, &[1], Box::new(Counter::default()))?;
//! node.campaign(42)?;
//! while node.has_ready() {
//!     node.handle_ready()?;
//! }
//! let ticket = node.propose(42, b"abc".to_vec())?;
//! while node.has_ready() {
//!     node.handle_ready()?;
//! }
//! assert_eq!(ticket.try_take().unwrap().unwrap(), 3u64.to_le_bytes());
//! # Ok::<(), consensus::Error>(())
//! ```
//!
//! A server runs this loop on a thread of its own (`runtime::RaftDriver`: ticks, a bounded request
//! queue, received messages stepped in), and awaits the returned [`Ticket`]s; the simulations run
//! it single-threaded on a manual clock. Both drive the same code.
//!
//! Architecture invariants: no threads, sockets or clocks in this crate; `consensus` knows neither
//! the storage engine nor the services; the state machine is a trait.
#![deny(missing_docs)]

mod conf_history;
mod config;
mod error;
mod logger;
mod mem_log;
mod node;
mod state_machine;
mod storage;
mod ticket;
mod transport;
mod wal_backend;

pub use config::Config;
pub use error::{ApplyError, Error, ProposalError, Result, StorageError};
pub use mem_log::MemLog;
pub use node::{GroupStatus, Membership, MembershipChange, Metrics, RaftNode, ReplacementStep};
pub use raft::StateRole;
pub use state_machine::{Clock, ManualClock, MonotonicClock, SnapshotJob, StateMachine};
pub use storage::{GroupStorage, LogBackend, NodeStorage, RecordVisitor};
pub use ticket::Ticket;
pub use transport::{RaftMessage, SplitMix64, Transport};

/// Id of a raft group; Fencepost uses the data region id.
pub type GroupId = u64;
/// Id of a node; also its raft peer id in every group it hosts.
pub type NodeId = u64;
