//! The Fencepost client (design §6): an async [`Session`] over the DataNodes' `SessionService`
//! and a [`BlockingSession`] wrapper.
//!
//! Retry policy: 536, 905, 712, 606, 1007, a 302 whose failed parts are all of those, connection
//! failures and timeouts are retried on a **different** DataNode, up to
//! [`SessionConfig::max_attempts`] attempts; 535 is never retried and surfaces as
//! [`SessionError::LeaseFenced`]; 614, 700 and every other status are final. A redirect hint
//! naming one of the session's endpoints fills a device → endpoint cache consulted first by the
//! next write to that device. [`Session::stats`] counts every retry and cache hit.
//!
//! Architecture invariant: this crate links no server (`datanode`, `confignode` are test-only
//! dependencies); it speaks the wire of `proto` and the vocabulary of `common`.
#![deny(missing_docs)]

mod blocking;
mod config;
mod convert;
mod error;
mod session;
mod table;

pub use blocking::BlockingSession;
pub use config::{SessionConfig, MAX_ATTEMPTS_LIMIT};
pub use error::{Result, SessionError};
pub use proto::views::{
    ClusterView, ConfigNodeView, DataNodeView, LeaseView, LeasesView, LocalLeaseView,
    RegionDigestView, RegionView, TimeseriesView,
};
pub use session::{
    Credentials, Record, Session, SessionStats, StatementPages, StatementResult, BATCH_TABLETS_MAX,
    ENDPOINTS_MAX, REDIRECT_CACHE_DEVICES_MAX,
};
