//! The one deterministic simulation harness for raft (issue 16 step 4): [`MemNetwork`], a seeded
//! in-memory network with drop, delay, reorder and directed partitions; and [`SimCluster`], the
//! raft nodes of one simulated cluster stepped millisecond by millisecond on a
//! [`consensus::ManualClock`] — ticks, deliveries and `handle_ready` in a fixed order, so a seed
//! replays a run exactly.
//!
//! The consensus simulation (a model state machine), the ConfigNode's (its metadata state
//! machine) and the DataNode's (the region state machine over a real engine) each keep only what
//! is theirs — their state machines, proposals and checks — over one `SimCluster`.
//!
//! Architecture invariant: a test and bench dependency only; no server links it, and `consensus`
//! exports no simulation tooling of its own beyond the test doubles of its own traits
//! ([`consensus::MemLog`], [`consensus::ManualClock`]).
#![deny(missing_docs)]

mod cluster;
mod network;

pub use cluster::SimCluster;
pub use network::{MemNetwork, MemTransport, NetFaults};
