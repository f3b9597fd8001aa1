//! Integration tests of the `codec` crate: one binary, one module per concern.
//!
//! - `round_trip`: property tests, every choice × every type, arbitrary values and realistic
//!   shapes (regular timestamps with jitter, a random walk at 2 decimals, steps, constants, NaN,
//!   ±inf and -0.0 mixed in); wrong counts are refused.
//! - `golden`: the exact bytes of small inputs under every codec (the format is pinned).
//! - `robustness`: random and mutated bytes into every decoder: an error or a value, never a
//!   panic, and no allocation past what the input justifies.
//! - `sizes`: bytes per point for 100,000-point series, printed, with loose upper bounds.
//! - `throughput`: values per second, printed; ignored unless asked for (run it in release:
//!   `cargo test --release -p codec -- --ignored --nocapture`).

mod golden;
mod names;
mod robustness;
mod round_trip;
mod sizes;
mod throughput;
mod util;
