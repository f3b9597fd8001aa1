//! The in-process cluster (`testkit`), shared by the `it` and `failpoints` test binaries (each
//! uses a subset, hence `unused_imports` is allowed): one real ConfigNode and real DataNodes on
//! `127.0.0.1:0` talking gRPC over loopback, plus raw `SessionService` calls.
#![allow(unused_imports)]

pub use testkit::raw::*;
pub use testkit::*;
