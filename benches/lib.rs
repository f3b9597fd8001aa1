//! Shared helpers for Fencepost's benchmarks.
