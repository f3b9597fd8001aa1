//! How every internal gRPC connection is built and kept honest, at both ends.
//!
//! A partition drops packets silently: no RST, no FIN. A connection that was open when it began
//! looks alive to both ends and TCP retransmits into it with an exponential backoff, so after a
//! long partition heals the first retransmission that gets through can be a minute or more away.
//! tonic's lazily connected channel keeps queueing calls on such a connection, each of which
//! times out, until TCP gives up. Three mechanisms, all built here from one [`ChannelConfig`],
//! abandon a dead connection within `keepalive_interval_ms + keepalive_timeout_ms`:
//!
//! - HTTP/2 keepalive: both ends PING every `keepalive_interval_ms`, idle or not; a PING not
//!   answered within `keepalive_timeout_ms` closes the connection and fails every call on it.
//!   tonic then connects afresh for the next call.
//! - `TCP_USER_TIMEOUT` (and TCP keepalive probes): the kernel aborts a connection whose sent data
//!   stays unacknowledged that long, so neither a live socket nor a closed one left retransmitting
//!   in the background can deliver a stale backlog when the network heals.
//! - [`ChannelPool`]: a call that failed in the transport (connect error, connection lost, reset)
//!   or ran out of time drops the address's channel, and the next call gets a fresh one.
//!
//! Servers send keepalive PINGs too ([`server`]), so they drop the connections of clients that
//! went away behind a partition, and their accepted sockets get the same options
//! ([`incoming`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::Stream;
use tonic::body::Body;
use tonic::codegen::http::{Request, Response, Uri};
use tonic::codegen::{Service, StdError};
use tonic::transport::{Channel, Endpoint};

use crate::limits::{GatedStream, ServerGate};

/// Streams a server lets a client reset before the server has accepted them, per connection;
/// one more and h2 ends the connection with GOAWAY `ENHANCE_YOUR_CALM`
/// (`remotely-reset pending-accept streams reached limit`).
///
/// h2 bounds these because they leave its concurrent-stream count (hyper#2877, "rapid reset").
/// Streams pile up pending accept only when a backlog of frames arrives in one read: a
/// connection that stalled and then resumed delivers every call its client started and gave up
/// on meanwhile, HEADERS and RST_STREAM back to back. That is the error in issue 15: a
/// ConfigNode's heartbeats, one a second, queued on a connection to a partitioned DataNode and
/// each timed out; TCP delivered them about a minute after the partition healed and the server
/// refused the pile. The GOAWAY ended the stall, it did not cause it. With keepalive a stalled
/// connection is abandoned after `keepalive_interval_ms + keepalive_timeout_ms`, so a backlog
/// holds at most the calls given up on in that window; 256 (h2's implicit default is 20) lets a
/// briefly stalled connection deliver a few seconds of cancelled calls without tearing down the
/// calls still running on it, and still bounds what a client can park on a server (a few hundred
/// bytes a stream). Pinned here so an h2 upgrade does not change it silently.
pub const PENDING_ACCEPT_RESET_STREAMS_MAX: usize = 256;

/// Most addresses one [`ChannelPool`] keeps a channel for; past it the pool starts over (it
/// also holds addresses of nodes long removed).
const POOL_ADDRESSES_MAX: usize = 4096;

/// How internal connections are made and watched. `Copy`: every builder takes its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelConfig {
    /// Milliseconds to establish a TCP connection. Default 1000.
    pub connect_timeout_ms: u64,
    /// Milliseconds between HTTP/2 keepalive PINGs, from clients and from servers. Default 1000.
    pub keepalive_interval_ms: u64,
    /// Milliseconds a PING may go unanswered before the connection is closed and every call on
    /// it fails. Default 2000.
    pub keepalive_timeout_ms: u64,
    /// Clients PING also while no call is open, so an idle connection is found dead before a
    /// call waits on it. Default true.
    pub keepalive_while_idle: bool,
    /// `TCP_NODELAY`: without it the last small frame of a message waits for the peer's delayed
    /// ACK (40 ms). Default true.
    pub tcp_nodelay: bool,
    /// Milliseconds a connection may be idle before TCP keepalive probes start, and between
    /// probes (whole seconds, at least one); 0 turns TCP keepalive off. Default
    /// `keepalive_interval_ms`.
    pub tcp_keepalive_ms: u64,
    /// Unanswered TCP keepalive probes before the kernel drops the connection. Default 2.
    pub tcp_keepalive_retries: u32,
    /// `TCP_USER_TIMEOUT` in milliseconds: the kernel aborts a connection whose sent data stays
    /// unacknowledged this long (Linux); 0 keeps the kernel's retransmission limit (about 15
    /// minutes). Default `keepalive_interval_ms + keepalive_timeout_ms`.
    pub tcp_user_timeout_ms: u64,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig::with_keepalive(1000, 1000, 2000)
    }
}

/// An address a channel cannot be built for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad peer address {address:?}: {reason}")]
pub struct BadAddress {
    /// The address as given.
    pub address: String,
    /// Why it is not `host:port`.
    pub reason: String,
}

impl ChannelConfig {
    /// The defaults, with this connect timeout and keepalive; the TCP settings follow the
    /// keepalive (probes every `keepalive_interval_ms`, `TCP_USER_TIMEOUT` at interval +
    /// timeout), so one pair of keys sets how soon a dead connection is given up.
    pub fn with_keepalive(
        connect_timeout_ms: u64,
        keepalive_interval_ms: u64,
        keepalive_timeout_ms: u64,
    ) -> Self {
        ChannelConfig {
            connect_timeout_ms,
            keepalive_interval_ms,
            keepalive_timeout_ms,
            keepalive_while_idle: true,
            tcp_nodelay: true,
            tcp_keepalive_ms: keepalive_interval_ms,
            tcp_keepalive_retries: 2,
            tcp_user_timeout_ms: keepalive_interval_ms.saturating_add(keepalive_timeout_ms),
        }
    }

    /// How long a connection that stopped answering may go unnoticed: one PING interval, then
    /// the PING's deadline.
    pub fn dead_connection_bound(&self) -> Duration {
        Duration::from_millis(
            self.keepalive_interval_ms
                .saturating_add(self.keepalive_timeout_ms),
        )
    }

    /// The endpoint for `address` (`host:port`) with the connect timeout and HTTP/2 keepalive;
    /// socket options are set by the connector [`ChannelConfig::connect_lazy`] uses.
    pub fn endpoint(&self, address: &str) -> Result<Endpoint, BadAddress> {
        assert!(
            self.keepalive_interval_ms > 0 && self.keepalive_timeout_ms > 0,
            "keepalive must be on: {self:?}"
        );
        let endpoint =
            Endpoint::from_shared(format!("http://{address}")).map_err(|e| BadAddress {
                address: address.to_string(),
                reason: e.to_string(),
            })?;
        Ok(endpoint
            .connect_timeout(Duration::from_millis(self.connect_timeout_ms))
            .tcp_nodelay(self.tcp_nodelay)
            .http2_keep_alive_interval(Duration::from_millis(self.keepalive_interval_ms))
            .keep_alive_timeout(Duration::from_millis(self.keepalive_timeout_ms))
            .keep_alive_while_idle(self.keepalive_while_idle))
    }

    /// A lazily connected channel to `address`: it connects on first use, and again after its
    /// connection failed (keepalive unanswered, reset), with this configuration's socket
    /// options on every connection.
    pub fn connect_lazy(&self, address: &str) -> Result<Channel, BadAddress> {
        Ok(self
            .endpoint(address)?
            .connect_with_connector_lazy(Connector { config: *self }))
    }
}

/// A gRPC server builder that PINGs its clients like the clients PING it, and refuses reset
/// backlogs past [`PENDING_ACCEPT_RESET_STREAMS_MAX`]. Serve it with [`incoming`]: the builder's
/// own TCP settings apply only to listeners tonic binds itself.
pub fn server(config: &ChannelConfig) -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(Duration::from_millis(config.keepalive_interval_ms)))
        .http2_keepalive_timeout(Some(Duration::from_millis(config.keepalive_timeout_ms)))
        .http2_max_pending_accept_reset_streams(Some(PENDING_ACCEPT_RESET_STREAMS_MAX))
}

/// The accepted connections of a gRPC server's `listener`, each with `config`'s socket options
/// (`TCP_NODELAY`, TCP keepalive, `TCP_USER_TIMEOUT`), admitted by `gate` (one past its
/// connection limit is closed at once; see [`crate::limits`]).
///
/// tonic sets `TCP_NODELAY` only on listeners it binds itself; on a listener handed to
/// `serve_with_incoming` Nagle's algorithm stays on, and the small HTTP/2 frame that ends a
/// response waits for the peer's delayed ACK: a 40 ms stall on a fraction of all calls.
pub fn incoming(
    listener: TcpListener,
    config: &ChannelConfig,
    gate: &Arc<ServerGate>,
) -> impl Stream<Item = std::io::Result<GatedStream>> + Send + Unpin + 'static {
    let config = *config;
    let gate = gate.clone();
    tokio_stream::StreamExt::filter_map(
        tonic::transport::server::TcpIncoming::from(listener),
        move |accepted| match accepted {
            Ok(stream) => {
                // A socket without its options still serves; only dead-peer detection and
                // latency suffer, so it is not refused.
                if let Err(e) = tune_socket(&stream, &config) {
                    tracing::warn!("setting socket options on an accepted connection: {e}");
                }
                gate.admit(stream).map(Ok)
            }
            Err(e) => Some(Err(e)),
        },
    )
}

/// Sets `config`'s socket options on a connected TCP stream.
pub fn tune_socket(stream: &TcpStream, config: &ChannelConfig) -> std::io::Result<()> {
    let socket = socket2::SockRef::from(stream);
    socket.set_tcp_nodelay(config.tcp_nodelay)?;
    if config.tcp_keepalive_ms > 0 {
        // The kernel counts keepalive times in whole seconds; 0 is refused.
        let every = Duration::from_secs(config.tcp_keepalive_ms.div_ceil(1000));
        let keepalive = socket2::TcpKeepalive::new()
            .with_time(every)
            .with_interval(every)
            .with_retries(config.tcp_keepalive_retries.max(1));
        socket.set_tcp_keepalive(&keepalive)?;
    }
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    if config.tcp_user_timeout_ms > 0 {
        socket.set_tcp_user_timeout(Some(Duration::from_millis(config.tcp_user_timeout_ms)))?;
    }
    Ok(())
}

/// Connects TCP to the URI's `host:port` (resolving names) and tunes the socket: tonic's own
/// connector has no `TCP_USER_TIMEOUT`.
#[derive(Clone, Debug)]
struct Connector {
    config: ChannelConfig,
}

impl Service<Uri> for Connector {
    type Response = hyper_util::rt::TokioIo<TcpStream>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let config = self.config;
        Box::pin(async move {
            let authority = uri.authority().map(|a| a.as_str().to_string());
            let authority = authority.ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{uri} has no host:port"),
                )
            })?;
            let stream = TcpStream::connect(authority.as_str()).await?;
            tune_socket(&stream, &config)?;
            Ok(hyper_util::rt::TokioIo::new(stream))
        })
    }
}

/// One lazily connected channel per address, replaced after a failure: a call that failed in the
/// transport or ran out of time drops its address's channel, and the next call connects afresh.
///
/// tonic's channel alone reconnects only once its connection reports an error; a connection
/// stuck on a dead peer reports none until keepalive or TCP notices, and every call meanwhile
/// waits its full deadline on it. Calls that got an answer, even an error status from the
/// server, keep the channel. Cheap to clone.
#[derive(Clone)]
pub struct ChannelPool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    config: ChannelConfig,
    call_timeout: Duration,
    slots: Mutex<BTreeMap<String, Slot>>,
    next_generation: AtomicU64,
    replaced: AtomicU64,
}

/// The channel an address has now; the generation tells a failure on it from one on a channel
/// that has since been replaced.
#[derive(Clone)]
struct Slot {
    generation: u64,
    channel: Channel,
}

impl std::fmt::Debug for ChannelPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelPool")
            .field("config", &self.inner.config)
            .field("call_timeout", &self.inner.call_timeout)
            .finish_non_exhaustive()
    }
}

impl ChannelPool {
    /// A pool whose channels use `config`; each call gets `call_timeout` unless the channel was
    /// asked for with a deadline of its own.
    pub fn new(config: ChannelConfig, call_timeout: Duration) -> Self {
        ChannelPool {
            inner: Arc::new(PoolInner {
                config,
                call_timeout,
                slots: Mutex::new(BTreeMap::new()),
                next_generation: AtomicU64::new(0),
                replaced: AtomicU64::new(0),
            }),
        }
    }

    /// The configuration the pool's channels are built with.
    pub fn config(&self) -> &ChannelConfig {
        &self.inner.config
    }

    /// A channel to `address` (`host:port`) with the pool's call deadline.
    pub fn channel(&self, address: &str) -> Result<PooledChannel, BadAddress> {
        self.channel_with_timeout(address, self.inner.call_timeout)
    }

    /// A channel to `address` whose calls each get `timeout`.
    pub fn channel_with_timeout(
        &self,
        address: &str,
        timeout: Duration,
    ) -> Result<PooledChannel, BadAddress> {
        self.inner.current(address)?;
        Ok(PooledChannel {
            pool: self.inner.clone(),
            address: address.into(),
            timeout,
            ready: None,
        })
    }

    /// Channels dropped after a failed call since the pool was made.
    pub fn replaced(&self) -> u64 {
        self.inner.replaced.load(Ordering::Relaxed)
    }
}

impl PoolInner {
    fn current(&self, address: &str) -> Result<Slot, BadAddress> {
        let mut slots = self.slots.lock();
        if let Some(slot) = slots.get(address) {
            return Ok(slot.clone());
        }
        if slots.len() >= POOL_ADDRESSES_MAX {
            slots.clear();
        }
        let slot = Slot {
            generation: self.next_generation.fetch_add(1, Ordering::Relaxed),
            channel: self.config.connect_lazy(address)?,
        };
        slots.insert(address.to_string(), slot.clone());
        Ok(slot)
    }

    /// Drops `address`'s channel if it is still the one of `generation` (calls that failed
    /// together replace it once).
    fn discard(&self, address: &str, generation: u64, why: &dyn std::fmt::Display) {
        let mut slots = self.slots.lock();
        if slots
            .get(address)
            .is_some_and(|slot| slot.generation == generation)
        {
            slots.remove(address);
            self.replaced.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                address,
                "dropping the channel after a failed call ({why}); the next call connects afresh"
            );
        }
    }
}

/// A [`ChannelPool`]'s channel to one address, for tonic's generated clients. Each call runs on
/// the address's current channel and reports a transport failure or a timeout back to the pool.
pub struct PooledChannel {
    pool: Arc<PoolInner>,
    address: Arc<str>,
    timeout: Duration,
    /// The channel `poll_ready` readied, which the following `call` must use.
    ready: Option<Slot>,
}

impl Clone for PooledChannel {
    fn clone(&self) -> Self {
        PooledChannel {
            pool: self.pool.clone(),
            address: self.address.clone(),
            timeout: self.timeout,
            ready: None,
        }
    }
}

impl std::fmt::Debug for PooledChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledChannel")
            .field("address", &self.address)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Service<Request<Body>> for PooledChannel {
    type Response = Response<Body>;
    type Error = StdError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, StdError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StdError>> {
        if self.ready.is_none() {
            self.ready = Some(self.pool.current(&self.address)?);
        }
        let slot = self.ready.as_mut().expect("set above");
        match slot.channel.poll_ready(cx) {
            Poll::Ready(Err(e)) => {
                self.pool.discard(&self.address, slot.generation, &e);
                self.ready = None;
                Poll::Ready(Err(e.into()))
            }
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let mut slot = self
            .ready
            .take()
            .expect("PooledChannel::call without poll_ready");
        let call = slot.channel.call(request);
        let pool = self.pool.clone();
        let address = self.address.clone();
        let timeout = self.timeout;
        Box::pin(async move {
            let outcome: Result<Response<Body>, StdError> =
                match tokio::time::timeout(timeout, call).await {
                    Ok(Ok(response)) => Ok(response),
                    Ok(Err(e)) => {
                        pool.discard(&address, slot.generation, &e);
                        Err(e.into())
                    }
                    Err(_) => {
                        pool.discard(&address, slot.generation, &"no answer in time");
                        // What tonic's own timeout returns: the client reports it as CANCELLED.
                        Err(Box::new(tonic::TimeoutExpired(())))
                    }
                };
            outcome
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_and_connected_sockets_get_the_options() {
        use tokio_stream::StreamExt;
        let config = ChannelConfig::with_keepalive(1000, 1500, 2500);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let gate = ServerGate::new(crate::ServerLimits {
            connections_max: 1,
            requests_max: 1,
        });
        let mut accepted = incoming(listener, &config, &gate);
        let mut connector = Connector { config };
        let uri: Uri = format!("http://{address}").parse().unwrap();
        let client = connector.call(uri).await.unwrap();
        let server = accepted.next().await.unwrap().unwrap();
        for stream in [client.inner(), server.get_ref()] {
            let socket = socket2::SockRef::from(stream);
            assert!(socket.tcp_nodelay().unwrap());
            assert!(socket.keepalive().unwrap());
            // 1500 ms rounds up to whole seconds.
            assert_eq!(socket.tcp_keepalive_time().unwrap(), Duration::from_secs(2));
            #[cfg(target_os = "linux")]
            assert_eq!(
                socket.tcp_user_timeout().unwrap(),
                Some(Duration::from_millis(4000))
            );
        }
    }

    #[test]
    fn the_tcp_settings_follow_the_keepalive() {
        let c = ChannelConfig::default();
        assert_eq!(
            (c.keepalive_interval_ms, c.keepalive_timeout_ms),
            (1000, 2000)
        );
        assert_eq!(c.tcp_user_timeout_ms, 3000);
        assert_eq!(c.dead_connection_bound(), Duration::from_secs(3));
        assert!(c.keepalive_while_idle && c.tcp_nodelay);
        assert!(c.endpoint("no spaces allowed:1").is_err());
        assert!(c.endpoint("localhost:1").is_ok());
    }

    #[tokio::test]
    async fn a_failure_replaces_the_channel_once_and_spares_its_successor() {
        let pool = ChannelPool::new(ChannelConfig::default(), Duration::from_secs(1));
        let first = pool.inner.current("127.0.0.1:1").unwrap().generation;
        assert_eq!(pool.inner.current("127.0.0.1:1").unwrap().generation, first);
        pool.inner.discard("127.0.0.1:1", first, &"test");
        let second = pool.inner.current("127.0.0.1:1").unwrap().generation;
        assert_ne!(first, second);
        // A late failure of the first channel leaves the second alone.
        pool.inner.discard("127.0.0.1:1", first, &"late");
        assert_eq!(
            pool.inner.current("127.0.0.1:1").unwrap().generation,
            second
        );
        assert_eq!(pool.replaced(), 1);
    }
}
