//! [`run`]: one ConfigNode process — the raft group on the `runtime` driver, the gRPC service,
//! and on the leader the heartbeat pusher, the failure detector and the fence operations.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use consensus::Clock;
use parking_lot::RwLock;
use runtime::{GrpcTransport, PeerService, RaftDriver, RaftHostConfig, TransportConfig};
use tokio::net::TcpListener;

use crate::client::{DataNodeClient, GrpcDataNodeClient};
use crate::config::ConfigNodeConfig;
use crate::error::{Error, Result};
use crate::group::ConfigGroup;
pub use crate::group::CONFIG_GROUP;
use crate::leader::Leadership;
use crate::shared::Shared;
use crate::sm::MetadataStateMachine;
use crate::state::MetadataState;

/// Monotonic milliseconds from tokio's clock, so tests with paused time control it.
#[derive(Debug, Clone)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
}

/// Raft messages from peer ConfigNodes are always taken, never refused at the request limit (the
/// connection limit bounds them).
const RAFT_STREAM_PATHS: &[&str] = &["/fencepost.ConfigNodeService/StreamRaftMessages"];

/// The metadata as of the last snapshot file, or an empty state.
fn load_snapshot(path: &std::path::Path) -> Result<MetadataState> {
    match std::fs::read(path) {
        Ok(bytes) => MetadataState::decode_snapshot(&bytes).map_err(|e| Error::Io {
            context: format!("ConfigNode snapshot {}", path.display()),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(MetadataState::new()),
        Err(source) => Err(Error::Io {
            context: format!("reading {}", path.display()),
            source,
        }),
    }
}

/// Every second: once `cn_snapshot_interval_entries` entries were applied since the last
/// snapshot, write a new one durably, then let raft drop the log up to it. The file is written
/// first, so after a crash at any point the snapshot plus the remaining log hold everything.
async fn snapshot_loop(shared: Arc<Shared>, path: std::path::PathBuf, mut last_index: u64) {
    let interval = shared.config.raft.cn_snapshot_interval_entries;
    loop {
        tokio::time::sleep(crate::timing::SNAPSHOT_CHECK_INTERVAL).await;
        let (index, bytes) = {
            let state = shared.group.state();
            if state.applied_index() < last_index + interval {
                continue;
            }
            (state.applied_index(), state.encode_snapshot())
        };
        let written = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || common::durable::replace_durably(&path, &bytes))
                .await
        };
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!("writing the ConfigNode snapshot at {index}: {e}");
                continue;
            }
            Err(e) => {
                tracing::error!("snapshot writer task: {e}");
                continue;
            }
        }
        match shared
            .group
            .driver()
            .call(move |node| node.compact(CONFIG_GROUP, index))
            .await
        {
            Ok(Ok(())) => {
                tracing::info!(index, "ConfigNode snapshot written, raft log compacted");
                last_index = index;
            }
            Ok(Err(e)) => tracing::warn!(index, "compacting the ConfigNode raft log: {e}"),
            Err(e) => tracing::warn!(index, "compacting the ConfigNode raft log: {e}"),
        }
    }
}

/// Binds `cn_internal_address` and runs until `shutdown` resolves.
pub async fn run(
    config: ConfigNodeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    config.validate()?;
    // Client connections, the raft log, the metrics port and its own connections to DataNodes.
    runtime::config::check_open_files(
        u64::from(config.rpc.cn_rpc_max_connections) + 256,
        "cn_rpc_max_connections + 256 reserved",
    );
    let listener = TcpListener::bind(&config.node.cn_internal_address)
        .await
        .map_err(|source| Error::Io {
            context: format!("binding {}", config.node.cn_internal_address),
            source,
        })?;
    let client = GrpcDataNodeClient::with_channel_config(
        crate::timing::DATANODE_RPC_TIMEOUT,
        config.rpc.channel_config(),
    );
    run_with_listener(config, listener, Arc::new(client), shutdown).await
}

/// The ConfigNode's raft host: one group, [`CONFIG_GROUP`], over every member, applying to
/// `state`.
fn open_raft(
    config: &ConfigNodeConfig,
    members: &[(u64, String)],
    state: Arc<RwLock<MetadataState>>,
) -> Result<RaftDriver<GrpcTransport>> {
    let node_id = config.node.cn_node_id;
    let addresses: runtime::AddressBook = Arc::new(RwLock::new(members.iter().cloned().collect()));
    let peers: Vec<u64> = members.iter().map(|(id, _)| *id).collect();
    let raft_host = RaftHostConfig {
        node_id,
        service: PeerService::ConfigNode,
        thread_name: format!("cn-raft-{node_id}"),
        log_dir: config.node.cn_data_dir.join("raft"),
        segment_bytes: CN_RAFT_SEGMENT_BYTES,
        tick_ms: config.raft.cn_raft_tick_ms,
        election_ticks: config.raft.cn_raft_election_ticks as usize,
        log_limits: runtime::RaftLogLimits::default(),
        transport: TransportConfig {
            message_bytes_max: config.rpc.cn_rpc_max_message_bytes as usize,
            channel: config.rpc.channel_config(),
            ..TransportConfig::default()
        },
        step_queue_bytes_max: runtime::DriverConfig::default().step_queue_bytes_max,
    };
    let (driver, _sent) = runtime::open_raft_host(
        &raft_host,
        addresses,
        Arc::new(consensus::MonotonicClock::default()),
        move |node| {
            node.create_group(
                CONFIG_GROUP,
                &peers,
                Box::new(MetadataStateMachine::new(state)),
            )
        },
    )?;
    Ok(driver)
}

/// Every `heartbeat_interval_ms`, the leader's round (heartbeats, fencing, operations) until
/// `stop` changes. A round that overruns delays the next rather than bunching them.
async fn leader_loop(shared: Arc<Shared>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut ticker = tokio::time::interval(Duration::from_millis(
        shared.config.lease.heartbeat_interval_ms,
    ));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => shared.leader.leader_round().await,
            _ = stop.changed() => break,
        }
    }
}

/// Bytes per segment of the ConfigNode's raft log: its entries are small metadata commands.
const CN_RAFT_SEGMENT_BYTES: u64 = 8 << 20;

/// Runs on an already bound listener (tests bind `127.0.0.1:0`), calling DataNodes through
/// `client`, until `shutdown` resolves.
pub async fn run_with_listener(
    config: ConfigNodeConfig,
    listener: TcpListener,
    client: Arc<dyn DataNodeClient>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    config.validate()?;
    let members = config.node.members()?;
    let node_id = config.node.cn_node_id;
    let snapshot_path = config.node.cn_data_dir.join("snapshot");
    let state = Arc::new(RwLock::new(load_snapshot(&snapshot_path)?));
    let snapshot_index = state.read().applied_index();
    let driver = open_raft(&config, &members, state.clone())?;
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::default());
    let group = Arc::new(ConfigGroup::new(members, state, driver));
    let shared = Arc::new(Shared {
        users: crate::users::Authenticator::new(config.login.login_limits(), clock.clone()),
        leader: Arc::new(Leadership::new(
            config.clone(),
            group.clone(),
            clock,
            client,
        )),
        config: config.clone(),
        group,
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let leader_task = tokio::spawn(leader_loop(shared.clone(), stop_rx.clone()));
    let metrics_listener = TcpListener::bind(&config.node.cn_metrics_address)
        .await
        .map_err(|source| Error::Io {
            context: format!(
                "binding cn_metrics_address {}",
                config.node.cn_metrics_address
            ),
            source,
        })?;
    let metrics_task = tokio::spawn(crate::metrics::serve(metrics_listener, shared.clone()));
    let snapshot_task = tokio::spawn(snapshot_loop(shared.clone(), snapshot_path, snapshot_index));
    tracing::info!(node_id, address = ?listener.local_addr().ok(), "ConfigNode serving");
    let message_bytes_max = shared.config.rpc.cn_rpc_max_message_bytes as usize;
    let (streams_stop_tx, streams_stop_rx) = tokio::sync::watch::channel(false);
    let service = crate::service::ConfigNodeServiceImpl::new(shared.clone(), streams_stop_rx);
    let mut stop = stop_rx;
    let stopping = shared.clone();
    let net = shared.config.rpc.channel_config();
    let gate = runtime::ServerGate::new(runtime::ServerLimits {
        connections_max: shared.config.rpc.cn_rpc_max_connections as usize,
        requests_max: shared.config.rpc.cn_rpc_max_concurrent_requests as usize,
    });
    let serve = runtime::server(&net)
        .add_service(
            gate.service(
                proto::config_node_service_server::ConfigNodeServiceServer::new(service)
                    .max_decoding_message_size(message_bytes_max)
                    .max_encoding_message_size(message_bytes_max),
                RAFT_STREAM_PATHS,
            ),
        )
        .serve_with_incoming_shutdown(runtime::incoming(listener, &net, &gate), async move {
            // Stop on the caller's shutdown, or when the raft driver died.
            tokio::select! {
                _ = shutdown => {}
                _ = stop.changed() => {}
            }
            stopping.group.stop();
            streams_stop_tx.send_replace(true);
        });
    let watchdog = {
        let shared = shared.clone();
        let stop_tx = stop_tx.clone();
        tokio::spawn(async move {
            while !shared.group.driver().is_stopped() {
                tokio::time::sleep(crate::timing::DRIVER_WATCHDOG_POLL).await;
            }
            tracing::error!("the ConfigNode raft driver stopped");
            stop_tx.send_replace(true);
        })
    };
    let served = serve.await;
    stop_tx.send_replace(true);
    watchdog.abort();
    metrics_task.abort();
    snapshot_task.abort();
    if let Err(e) = leader_task.await {
        tracing::warn!("leader task: {e}");
    }
    let driver_failed = shared.group.driver().is_stopped();
    shared.group.driver().shutdown();
    served.map_err(|e| Error::Transport(e.to_string()))?;
    if driver_failed {
        return Err(Error::Runtime(runtime::Error::Stopped));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_exempt_raft_stream_is_the_generated_method_path() {
        let service = proto::config_node_service_server::SERVICE_NAME;
        assert_eq!(
            super::RAFT_STREAM_PATHS,
            [format!("/{service}/StreamRaftMessages").as_str()]
        );
    }
}
