//! Storage engine integration tests: fencing between fragments (`fence`), crash recovery at every
//! log sync point (`crash`) and the engine against a model (`model`), over `support`'s
//! single-replica region with its own command log. The fencing-token and snapshot tests, which
//! need the region's raft state machine, live with the DataNode (`datanode/tests/it/token.rs`)
//! and share `support` by path.

mod aggregate;
mod compaction;
mod crash;
mod fence;
mod floor;
mod model;
mod support;
mod tombstones;
mod types;
