//! Integration tests of the consensus crate: one binary, modules per topic.

mod driver;
mod fencing;
mod harness;
mod proxy;
mod simulation;
mod snapshot;
mod wal_storage;
