//! Shared helpers for Fencepost's benchmarks.

/// IoTDB's client RPC from the load generators (`peerload --target iotdb`, `hostile`).
#[path = "src/thrift.rs"]
pub mod thrift;

/// The peers' HTTP APIs (`peerload`'s writes, `querybench`'s queries).
#[path = "src/http.rs"]
pub mod http;
