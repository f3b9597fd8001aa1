//! A ConfigNode client that finds the leader: it follows `Status.redirect` (400), moves on to
//! the next ConfigNode on connection errors and waits out elections (`need_retry`), with a
//! bounded number of attempts. One pooled channel per ConfigNode: a connection that fails or
//! stalls a call is replaced, and HTTP/2 keepalive finds a dead one within
//! `keepalive_interval_ms + keepalive_timeout_ms` (see [`crate::channel`]). Used by DataNodes
//! and tests.

use std::future::Future;
use std::time::Duration;

use parking_lot::Mutex;
use proto::config_node_service_client::ConfigNodeServiceClient;

use crate::channel::{ChannelConfig, ChannelPool, PooledChannel};

/// A ConfigNode response that carries a status.
pub trait HasStatus {
    /// The response's status, if set.
    fn status(&self) -> Option<&proto::Status>;
}

impl HasStatus for proto::Status {
    fn status(&self) -> Option<&proto::Status> {
        Some(self)
    }
}

macro_rules! has_status {
    ($($t:ty),*) => {$(
        impl HasStatus for $t {
            fn status(&self) -> Option<&proto::Status> {
                self.status.as_ref()
            }
        }
    )*};
}

has_status!(
    proto::RegisterDataNodeResp,
    proto::FetchSchemaResp,
    proto::FetchPartitionsResp,
    proto::ShowDatabasesResp,
    proto::ShowTimeseriesResp,
    proto::ShowClusterResp,
    proto::ShowRegionsResp,
    proto::ShowLeasesResp,
    proto::ListUsersResp,
    proto::ShowTablesResp,
    proto::RaftMessageResp
);

/// Why a call found no ConfigNode leader to answer it.
#[derive(Debug, thiserror::Error)]
#[error("no ConfigNode answered after {attempts} attempts; last problem: {last}")]
pub struct NoLeader {
    /// Attempts made.
    pub attempts: u32,
    /// The last error or status seen.
    pub last: String,
}

/// Calls the ConfigNode leader among `endpoints`.
pub struct ConfigNodeClient {
    endpoints: Vec<String>,
    leader: Mutex<Option<String>>,
    channels: ChannelPool,
    rpc_timeout: Duration,
    attempts_max: u32,
    message_bytes_max: usize,
}

impl ConfigNodeClient {
    /// A client over the seed ConfigNodes (`host:port`). Each RPC times out after `rpc_timeout`,
    /// and so does connecting; a call gives up after `attempts_max` attempts (backoff 50 ms
    /// doubling to 1 s). Keepalive and socket options are [`ChannelConfig::default`]'s.
    pub fn new(endpoints: Vec<String>, rpc_timeout: Duration, attempts_max: u32) -> Self {
        assert!(!endpoints.is_empty(), "at least one ConfigNode endpoint");
        let channel = ChannelConfig {
            connect_timeout_ms: rpc_timeout.as_millis() as u64,
            ..ChannelConfig::default()
        };
        ConfigNodeClient {
            endpoints,
            leader: Mutex::new(None),
            channels: ChannelPool::new(channel, rpc_timeout),
            rpc_timeout,
            attempts_max: attempts_max.max(1),
            message_bytes_max: 64 << 20,
        }
    }

    /// Sets the largest message sent or taken (default 64 MiB): a metadata pull of a large
    /// schema must fit.
    pub fn with_message_bytes_max(mut self, bytes: usize) -> Self {
        self.message_bytes_max = bytes;
        self
    }

    /// Builds the connections to the ConfigNodes with `config` (connect timeout, keepalive,
    /// socket options).
    pub fn with_channel_config(mut self, config: ChannelConfig) -> Self {
        self.channels = ChannelPool::new(config, self.rpc_timeout);
        self
    }

    /// Channels to ConfigNodes dropped after a failed call (see [`ChannelPool::replaced`]).
    pub fn channels_replaced(&self) -> u64 {
        self.channels.replaced()
    }

    /// The ConfigNode last seen leading.
    pub fn leader(&self) -> Option<String> {
        self.leader.lock().clone()
    }

    fn client(
        &self,
        address: &str,
        timeout: Duration,
    ) -> Result<ConfigNodeServiceClient<PooledChannel>, String> {
        let channel = self
            .channels
            .channel_with_timeout(address, timeout)
            .map_err(|e| e.to_string())?;
        Ok(ConfigNodeServiceClient::new(channel)
            .max_decoding_message_size(self.message_bytes_max)
            .max_encoding_message_size(self.message_bytes_max))
    }

    /// Runs `call` against the leader and returns the first response that is not a redirect or
    /// a "no leader yet" (its status may still be an error for the caller to judge).
    pub async fn call<T, F, Fut>(&self, call: F) -> Result<T, NoLeader>
    where
        T: HasStatus,
        F: Fn(ConfigNodeServiceClient<PooledChannel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        self.call_with_timeout(self.rpc_timeout, call).await
    }

    /// [`ConfigNodeClient::call`] with a deadline of its own for each attempt, for calls the
    /// ConfigNode legitimately holds long (a DROP waits out an unreachable DataNode's fence).
    pub async fn call_with_timeout<T, F, Fut>(
        &self,
        timeout: Duration,
        call: F,
    ) -> Result<T, NoLeader>
    where
        T: HasStatus,
        F: Fn(ConfigNodeServiceClient<PooledChannel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let mut next_seed = 0usize;
        let mut backoff = Duration::from_millis(50);
        let mut last = String::new();
        for attempt in 1..=self.attempts_max {
            let address = match self.leader() {
                Some(leader) => leader,
                None => {
                    let seed = self.endpoints[next_seed].clone();
                    next_seed = (next_seed + 1) % self.endpoints.len();
                    seed
                }
            };
            let outcome = match self.client(&address, timeout) {
                Ok(client) => call(client).await.map_err(|s| s.to_string()),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(resp) => {
                    let resp = resp.into_inner();
                    match resp.status() {
                        Some(s)
                            if s.is(common::StatusCode::RedirectionRecommend)
                                && s.redirect.is_some() =>
                        {
                            let to = proto::endpoint(s.redirect.as_ref().expect("checked"));
                            last = format!("{address} redirected to {to}");
                            *self.leader.lock() = Some(to);
                            continue;
                        }
                        Some(s) if s.need_retry && !s.is_success() => {
                            last = format!("{address}: {} {}", s.code, s.message);
                            *self.leader.lock() = None;
                        }
                        _ => {
                            *self.leader.lock() = Some(address);
                            return Ok(resp);
                        }
                    }
                }
                Err(e) => {
                    last = format!("{address}: {e}");
                    *self.leader.lock() = None;
                }
            }
            if attempt < self.attempts_max {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
        Err(NoLeader {
            attempts: self.attempts_max,
            last,
        })
    }
}
