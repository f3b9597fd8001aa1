//! The parts of one DataNode that its services and background tasks share, by role: who it is,
//! the metadata view and its ConfigNode link, the region host, the peers, the coordinator, the
//! metrics, and what clients and other nodes hold of it. Services and tasks take the parts they
//! use; nothing here starts or serves anything (`node.rs` assembles and runs them).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::config::DataNodeConfig;
use crate::coordinator::Coordinator;
use crate::host::RegionHost;
use crate::metadata::{ConfigNodeLink, MetadataView};
use crate::metrics::Metrics;
use crate::peers::Peers;

/// Who this DataNode is: its id and its bound addresses.
pub(crate) struct Identity {
    pub node_id: u64,
    /// The bound internal address (raft, forwarding, the ConfigNode's calls).
    pub internal_address: String,
    /// The bound session address (what clients are told to use).
    pub rpc_address: String,
}

/// Hooks for tests that drive a DataNode in-process (feature `test-hooks`); without the
/// feature nothing here can be switched on.
#[derive(Default)]
pub(crate) struct TestHooks {
    /// While set, the heartbeat handler waits (like the failpoint `datanode::heartbeat::stall`),
    /// so heartbeats are received but not processed.
    #[cfg(feature = "test-hooks")]
    pub(crate) stall_heartbeats: std::sync::atomic::AtomicBool,
}

impl TestHooks {
    /// True while heartbeats are to be held unprocessed.
    pub(crate) fn heartbeats_stalled(&self) -> bool {
        #[cfg(feature = "test-hooks")]
        {
            self.stall_heartbeats.load(Ordering::SeqCst)
        }
        #[cfg(not(feature = "test-hooks"))]
        {
            false
        }
    }
}

/// The parts of one DataNode, by role; services and background tasks take the parts they use.
pub(crate) struct Shared {
    pub config: DataNodeConfig,
    pub identity: Identity,
    /// The lease, the caches it gates, the in-flight guard.
    pub metadata: Arc<MetadataView>,
    pub confignode: Arc<ConfigNodeLink>,
    /// The raft driver and the region replicas.
    pub host: Arc<RegionHost>,
    /// The address book and the channels to other DataNodes.
    pub peers: Arc<Peers>,
    pub coordinator: Arc<Coordinator>,
    pub metrics: Arc<Metrics>,
    pub hooks: TestHooks,
    /// What clients hold of this node and what bounds it.
    pub clients: ClientLimits,
    /// What other nodes hold of this node and what bounds it.
    pub internal: InternalLimits,
    /// The statements running on this node (`SHOW QUERIES`, `KILL QUERY`).
    pub queries: Arc<crate::ops::queries::QueryRegistry>,
}

/// What clients hold of a DataNode, and the bounds on it: the session port's connections, the
/// session server's requests, the memory of query results, the logins it remembers.
pub(crate) struct ClientLimits {
    /// The session server's request bound, and what it refused.
    pub session_gate: Arc<runtime::ServerGate>,
    /// The session port's connection budgets (handshakes, gRPC, Thrift sessions).
    pub port_gate: Arc<runtime::PortGate>,
    /// The memory every query result is charged to, per result and over all of them.
    pub results: Arc<sql::ResultBudget>,
    /// Passwords the ConfigNode accepted lately (`auth`).
    pub logins: crate::logins::Logins,
    pub(super) next_session: AtomicU64,
}

impl ClientLimits {
    /// The bounds `config` sets, nothing held yet.
    pub(crate) fn new(config: &DataNodeConfig) -> ClientLimits {
        ClientLimits {
            session_gate: runtime::ServerGate::new(config.rpc.session_limits()),
            port_gate: runtime::PortGate::new(config.rpc.port_limits()),
            results: sql::ResultBudget::new(
                config.query.query_result_bytes_max as usize,
                config.query.query_results_bytes_max_per_node as usize,
            ),
            logins: crate::logins::Logins::new(Duration::from_millis(config.rpc.dn_login_cache_ms)),
            next_session: AtomicU64::new(1),
        }
    }
}

/// What other nodes hold of a DataNode, and the bounds on it.
pub(crate) struct InternalLimits {
    /// The internal server's connection and request bounds, and what they refused.
    pub gate: Arc<runtime::ServerGate>,
    /// What the raft transport sent to peers and dropped.
    pub raft_transport: Arc<runtime::TransportMetrics>,
    /// Region digests computed at once (one: each reads every point of a region).
    pub digests: tokio::sync::Semaphore,
}

impl Shared {
    pub(crate) fn next_session_id(&self) -> u64 {
        self.clients.next_session.fetch_add(1, Ordering::Relaxed)
    }
}
