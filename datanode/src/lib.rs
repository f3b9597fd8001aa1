//! The Fencepost DataNode. So far: the storage engine ([`storage`]), where a region's committed
//! log entries become queryable data, and the region's raft state machine
//! ([`region_state_machine`]). See ARCHITECTURE.md for the code map.
#![deny(missing_docs)]

pub mod lease;
pub mod region_state_machine;
pub mod storage;
