//! The Fencepost DataNode. So far: the storage engine ([`storage`]), where a region's committed
//! log entries become queryable data. See ARCHITECTURE.md for the code map.
#![deny(missing_docs)]

pub mod storage;
