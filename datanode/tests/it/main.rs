//! DataNode integration tests: the region's raft state machine, the fencing token across the engine
//! and snapshots, and in-process clusters over loopback. The engine's own tests (fencing between
//! fragments, crash recovery, the model) are in `engine/tests/it/`.
//!
//! `harness.rs` (over `testkit`) starts one real ConfigNode and real DataNodes in-process over
//! loopback: fence 1.5 s where fencing is tested, 20 s elsewhere, heartbeat 100 ms; every wait
//! polls with a 60 s deadline. The cluster tests (`cluster.rs`):
//! - six devices' tablets over eight time partitions written through DataNode 1 land in several
//!   regions on several DataNodes (replication 1, so parts are forwarded) and read back (raw and
//!   last) through DataNode 3; a repeat is idempotent; a type change is 614;
//! - replication 3, DataNode 1 made leader of a region (`transfer_leader`), its heartbeat handler
//!   stalled (`stall_heartbeats`) → fenced → 536 on write, 535 on raw and last reads; it leads no
//!   region any more and writes through the others keep succeeding; the stall ends → recovery
//!   (clear + pull) → it writes and reads again;
//! - DELETE TIMESERIES through a DataNode runs the ConfigNode's fence protocol (InvalidateCache on
//!   every DataNode, DeleteSeries through the region leaders): the series is gone on every node,
//!   the other series stays, the series can be re-created with another type (the stale cached type
//!   is not used), and replica digests agree;
//! - a restarted DataNode re-registers with its persisted id and a higher incarnation and serves
//!   its regions from disk.
//!
//! `flood.rs`: sessions flooding every DataNode past `dn_rpc_max_concurrent_requests` are
//! refused at once (`RESOURCE_EXHAUSTED`, a retryable 606) and no region changes term or leader.
//! `hostile.rs`: oversized, over-full and truncated frames, a flood of one-byte connections and
//! a wide `SELECT *` on the session port, while other clients keep writing (REVIEW N4, N5).
//!
//! The state-machine and token modules (`token`, `state_machine`, `raft_region`,
//! `idle_migration`) describe themselves in their own `//!` docs. The failpoint binary
//! (`tests/failpoints/main.rs`) repeats the heartbeat stall through `datanode::heartbeat::stall`.

mod budget;
mod catch_up;
mod cluster;
mod drop_region;
mod flood;
mod harness;
mod hostile;
mod identity;
mod idle_migration;
mod raft_region;
mod state_machine;
/// The engine tests' single-replica region, shared rather than copied.
#[path = "../../../engine/tests/it/support.rs"]
mod support;
mod thrift;
mod token;
