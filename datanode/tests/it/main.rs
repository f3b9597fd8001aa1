//! Storage-engine integration tests: fencing between fragments, crash recovery at every log sync
//! point, and the engine against a model.

mod crash;
mod fence;
mod model;
mod raft_region;
mod state_machine;
mod support;
