//! Integration tests of the `wal` crate: one binary, one module per concern.

mod basic;
mod concurrency;
#[cfg(feature = "failpoints")]
mod failpoints;
mod fuzz_smoke;
mod golden;
mod model;
mod recovery;
mod util;
