//! Shared helpers for Fencepost's benchmarks.

/// IoTDB's client RPC from the load generators (`peerload --target iotdb`, `hostile`).
#[path = "src/thrift.rs"]
pub mod thrift;
