//! ConfigNode integration tests: the fence propagator under an injected (paused) clock, and a
//! 3-ConfigNode cluster over loopback with a fake DataNode.
//!
//! Run with `cargo test -p proto -p runtime -p confignode` (the wire and the raft driver the
//! ConfigNode stands on come along).
//!
//! - `propagator`, under tokio's paused clock: all acknowledge → no wait; one unreachable →
//!   proceeds just after fence + margin; after a leader change the new leader waits from its
//!   election; an ack from an older incarnation does not count; a reply from a newer incarnation
//!   waits out the older one's lease; a tracker that never led fences nobody until its term's
//!   clock ran; a slow drain is waited for, not abandoned; region deletion follows a 905 redirect.
//! - `simulation`: 3 replicas with seeded drops, delays, partitions and log compaction forcing
//!   snapshot transfers (4 seeds); identical states, strictly rising epochs.
//! - `fence`: one ConfigNode with a live fake DataNode and a dead one: DROP DATABASE waits
//!   fence + margin, the dead node turns Unknown and fenced, the deletion is ordered to the region;
//!   a DELETE TIMESERIES whose FinishOperation commits after a later DROP DATABASE's is answered
//!   200 (its Finish used to panic the raft thread).
//! - `cluster`: 3 ConfigNodes over loopback — register twice → higher epoch, follower redirect,
//!   heartbeats with lease holders, auto-created schema and partitions create a region on the fake
//!   DataNode, DELETE TIMESERIES end to end, kill the leader → a new one heartbeats before the
//!   fence, the old one restarts from its log and follows, `ConfigNodeClient` finds the leader; and
//!   a leader dying in the middle of a DROP DATABASE that waits for a dead DataNode: the new leader
//!   re-broadcasts in its term and finishes only after fence + margin from the old leader's death.
//! - `process`: the real binary serves, exports metrics, snapshots and compacts, survives kill -9
//!   and restarts with the registry intact.
//! - `users`: one ConfigNode over gRPC — root/root, CREATE USER by root and login as the new
//!   user, 801 for a wrong password or an unknown user, 803 for a non-root issuer, a user
//!   changing its own password, 700 / 804 / 805, LIST USER, the lock after failed logins (822,
//!   then a login once the lock ends), and the users surviving a restart from the snapshot.
//!   (`cluster` also checks that a follower redirects the user RPCs and that a new leader knows
//!   the users.)
//!
//! The crate's unit tests (in `src/`): command golden vectors and a prefix-refusal proptest; result
//! vectors; snapshot golden vector and damage detection; the user commands' vectors, apply of
//! CREATE / ALTER / DROP USER with every refusal, the users in the snapshot and a version-4
//! snapshot without them; name and password rules, Argon2id hashes, Authenticate (root/root, a
//! changed root password, 801, the lock and its end under a manual clock, a success resetting the
//! count) and the bounded lockout map; who may run which user statement; state behaviour (epochs,
//! auto-create, allocation spread, pending → final; each interleaving of overlapping DELETE
//! TIMESERIES and DROP DATABASE, and a snapshot an earlier version wrote between them); a proptest
//! of two replicas applying random logs (identical results and states, refused commands change
//! nothing, epochs only rise, snapshot round trip); a proptest interleaving Begin and Finish of
//! deletes and drops on overlapping targets (never a panic, identical snapshots, a pending
//! operation's Finish always succeeds, the pending flags agree with the pending operations); config
//! defaults, flags over file, errors naming the key, the example TOML equal to the defaults; the
//! contact tracker.

mod cluster;
mod fake;
mod fence;
mod process;
mod propagator;
mod simulation;
mod users;
