//! The threaded half of raft, shared by the ConfigNode and the DataNode.
//!
//! - [`open_raft_host`]: the one way both nodes open raft — transport, raft log options,
//!   consensus settings, driver — from a [`RaftHostConfig`].
//! - [`RaftDriver`]: one OS thread owns a [`consensus::RaftNode`]; it ticks on a timer, steps
//!   incoming messages, runs `handle_ready` until nothing is ready, and takes proposals, reads and
//!   arbitrary node calls over a bounded channel, completing them through oneshot replies. The
//!   raft core stays synchronous and steppable; only this crate owns threads.
//! - [`GrpcTransport`]: the networked [`consensus::Transport`]. Messages go into a bounded queue
//!   per destination node (full = dropped: raft retries) and a tokio task per peer sends them as
//!   `RaftMessageBatch` over the ConfigNode's or the DataNode's internal gRPC service.
//!
//! - [`ConfigNodeClient`]: calls whichever ConfigNode leads, following redirects.
//! - [`channel`]: every internal connection, client and server side, built from one
//!   [`ChannelConfig`] (connect timeout, HTTP/2 keepalive, TCP keepalive, `TCP_NODELAY`,
//!   `TCP_USER_TIMEOUT`); [`ChannelPool`] replaces a channel whose call failed.
//! - [`port`]: a port serving gRPC and IoTDB's Thrift clients at once, with a connection budget
//!   per protocol and per stage (handshakes, gRPC connections, Thrift sessions); [`idle`]
//!   closes its gRPC connections that run no call for the idle timeout.
//! - [`metrics`]: the Prometheus page writer and the HTTP responder both servers' metrics
//!   addresses serve; a node declares each metric once, in an [`metrics::Area`] with its value.
//! - [`config`]: what both servers' configurations share: [`node_config!`], which declares each
//!   key once (doc, type, default), in sections, and generates the structs, their defaults, flat
//!   TOML loading, the flags and their overlay, the keys' docs; the key-naming error, address
//!   checks.
//! - [`docs`]: the tables of keys and metrics generated into `docs/operating.md`, and the check
//!   (or, with `FENCEPOST_BLESS=1`, the rewrite) that keeps them in sync.
//!
//! Architecture invariant: nothing here interprets raft entries or metadata; it moves bytes.
#![deny(missing_docs)]

mod budget;
pub mod channel;
pub mod config;
mod confignode_client;
pub mod docs;
mod driver;
mod error;
pub mod idle;
pub mod limits;
pub mod metrics;
pub mod port;
mod raft_host;
mod transport;

pub use channel::{incoming, server, BadAddress, ChannelConfig, ChannelPool, PooledChannel};
pub use config::ConfigError;
pub use confignode_client::{ConfigNodeClient, HasStatus, NoLeader};
pub use driver::{entropy_seed, DriverConfig, DriverStatus, RaftDriver};
pub use error::{Error, Result};
pub use idle::ConnectionInfo;
pub use limits::{Gated, ServerGate, ServerLimits};
pub use port::{incoming_split, Handshake, PortGate, PortLimits, ThriftConnection};
pub use raft_host::{open_raft_host, RaftHostConfig, RaftLogLimits};
pub use transport::{
    decode_batch, serve_raft_stream, AddressBook, GrpcTransport, PeerService, TransportConfig,
    TransportMetrics,
};
