//! The library side of the `fencepost` CLI: what the `fencepost` binary shares with the peer
//! benchmarks (`benches/src/bin/peerload.rs`), so both write the same points.
#![deny(missing_docs)]

pub mod loadgen;
