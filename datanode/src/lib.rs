//! The Fencepost DataNode around the storage engine (the `engine` crate): the region's raft state
//! machine ([`region_state_machine`]), the metadata lease ([`lease`]) and the service around them —
//! registration, the internal and session gRPC services, the coordinator, the fail-closed
//! metadata caches and `/metrics`. [`run`] is the entry point of the `datanode` binary; tests call
//! [`start`] on `127.0.0.1:0`. See ARCHITECTURE.md for the code map.
#![deny(missing_docs)]

pub mod auth;
pub mod cache;
mod client_rpc;
pub mod config;
pub mod convert;
mod coordinator;
pub mod error;
pub(crate) mod exporter;
mod host;
mod in_flight;
mod internal;
mod layout;
pub mod lease;
mod logins;
mod maintenance;
mod metadata;
pub mod metrics;
mod node;
mod ops;
mod parts;
mod peers;
mod recovery;
mod region_read;
pub mod region_state_machine;
mod session;
mod snapshot;
mod timing;

pub use config::{DataNodeArgs, DataNodeConfig};
pub use error::{ConfigError, Error, Result};
pub use node::{run, start, DataNodeHandle};
