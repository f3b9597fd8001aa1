//! Fencepost's ConfigNode: the metadata authority, replicated over raft (1 or 3 nodes).
//!
//! - [`state`]: the deterministic metadata state machine (registry, schema, partitions,
//!   regions, pending fence operations) and its snapshot; [`command`]: its log entries.
//! - [`tracker`]: the leader's contact times per DataNode and the lease verdicts.
//! - [`users`]: user name and password rules, Argon2id hashing, and the leader's lockout after
//!   failed logins.
//! - [`propagator`]: the fence protocol's waiting steps (invalidate until ack-or-fenced, then
//!   delete through each region's raft log).
//! - [`server`]: [`run`] — the raft group on the `runtime` driver, the gRPC service, the
//!   heartbeat pusher and the failure detector.
#![deny(missing_docs)]

pub mod client;
pub mod command;
pub mod config;
mod error;
mod group;
mod leader;
mod metrics;
pub mod propagator;
pub mod server;
mod service;
mod shared;
pub mod sm;
pub mod state;
mod timing;
pub mod tracker;
pub mod users;
mod wire;

pub use config::{ConfigNodeArgs, ConfigNodeConfig};
pub use error::{ConfigError, DecodeError, Error, MetadataError, Result};
pub use server::{run, run_with_listener, TokioClock};
