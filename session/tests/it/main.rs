//! Session integration tests: a real in-process cluster over loopback (`harness.rs`) and, for
//! redirects (which Fencepost's DataNodes do not send to clients), scripted test doubles.

mod cluster;
mod doubles;
mod harness;
