//! DataNode integration tests: the storage engine (fencing between fragments, crash recovery at
//! every log sync point, the engine against a model) and in-process clusters over loopback.

mod cluster;
mod crash;
mod fence;
mod harness;
mod model;
mod raft_region;
mod state_machine;
mod support;
mod token;
