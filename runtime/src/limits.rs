//! Bounds on what clients can hold on a server: open connections and requests in progress.
//!
//! A server without them takes every connection and runs every request it is sent, so a client
//! flood (or thousands of sessions) grows its memory and its queues until it stops answering
//! anything, heartbeats included. Both bounds refuse rather than queue:
//!
//! - [`ServerLimits::connections_max`]: a connection accepted past it is closed at once (before
//!   HTTP/2 starts, so it costs one accept); the client sees a connection error and tries
//!   another node, as it would for a node that is down.
//! - [`ServerLimits::requests_max`]: a request past it is answered at once with gRPC
//!   `RESOURCE_EXHAUSTED`, which clients treat as 606 `WRITE_PROCESS_REJECT` (retryable: the
//!   request was not run). Long-lived streams a server must always take (the raft message
//!   streams) are exempt by method path, and are bounded by the connection limit instead.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::codegen::http::{Request, Response};
use tonic::codegen::Service;
use tonic::server::NamedService;
use tonic::transport::server::Connected;

use crate::idle::{Activity, ConnectionInfo, IdleClock};

/// How much one server takes at once. Both are at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections open at once; one more is closed as soon as it is accepted.
    pub connections_max: usize,
    /// Requests in progress at once (exempt streams aside); one more is answered
    /// `RESOURCE_EXHAUSTED` without being run.
    pub requests_max: usize,
}

/// A server's gates and what they refused, shared by its acceptor and its services.
#[derive(Debug)]
pub struct ServerGate {
    limits: ServerLimits,
    connections: Arc<Semaphore>,
    requests: Arc<Semaphore>,
    /// Connections closed at accept because `connections_max` were open.
    pub connections_refused: AtomicU64,
    /// Requests answered `RESOURCE_EXHAUSTED` because `requests_max` were running.
    pub requests_refused: AtomicU64,
}

impl ServerGate {
    /// A gate for `limits` (each clamped to at least 1).
    pub fn new(limits: ServerLimits) -> Arc<ServerGate> {
        let limits = ServerLimits {
            connections_max: limits.connections_max.max(1),
            requests_max: limits.requests_max.max(1),
        };
        Arc::new(ServerGate {
            limits,
            connections: Arc::new(Semaphore::new(limits.connections_max)),
            requests: Arc::new(Semaphore::new(limits.requests_max)),
            connections_refused: AtomicU64::new(0),
            requests_refused: AtomicU64::new(0),
        })
    }

    /// The limits in force.
    pub fn limits(&self) -> ServerLimits {
        self.limits
    }

    /// Connections open now.
    pub fn connections_open(&self) -> usize {
        self.limits.connections_max - self.connections.available_permits()
    }

    /// Requests in progress now (exempt streams aside).
    pub fn requests_running(&self) -> usize {
        self.limits.requests_max - self.requests.available_permits()
    }

    /// Admits an accepted connection, or `None` (the caller closes it) when the server holds
    /// `connections_max` already.
    pub(crate) fn admit(&self, stream: TcpStream) -> Option<GatedStream> {
        match self.connections.clone().try_acquire_owned() {
            Ok(permit) => Some(GatedStream::new(stream, permit)),
            Err(_) => {
                let refused = self.connections_refused.fetch_add(1, Ordering::Relaxed);
                // One line per power of two refused: a flood does not flood the log.
                if refused.is_power_of_two() || refused == 0 {
                    tracing::warn!(
                        refused = refused + 1,
                        limit = self.limits.connections_max,
                        "connection refused: the server holds its maximum of open connections"
                    );
                }
                None
            }
        }
    }

    /// A permit to run one request, held until the request is answered; `None` (counted in
    /// [`ServerGate::requests_refused`]) when `requests_max` are running. For servers that are
    /// not tonic services (the Thrift client service); those use [`ServerGate::service`].
    pub fn try_request(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.requests.clone().try_acquire_owned().ok();
        if permit.is_none() {
            self.requests_refused.fetch_add(1, Ordering::Relaxed);
        }
        permit
    }

    /// `service` behind this gate's request limit; calls to a method path in `exempt` (e.g.
    /// `/fencepost.DataNodeInternalService/StreamRaftMessages`) always run.
    pub fn service<S>(self: &Arc<Self>, service: S, exempt: &'static [&'static str]) -> Gated<S> {
        Gated {
            inner: service,
            gate: self.clone(),
            exempt,
        }
    }
}

/// An accepted connection holding one of its server's connection permits until it closes;
/// with an idle timeout ([`GatedStream::closing_when_idle`]), closed once it has run no call
/// for that long ([`crate::idle`]).
#[derive(Debug)]
pub struct GatedStream {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    activity: Option<Arc<Activity>>,
    idle: Option<IdleClock>,
}

impl GatedStream {
    pub(crate) fn new(stream: TcpStream, permit: OwnedSemaphorePermit) -> GatedStream {
        GatedStream {
            stream,
            _permit: permit,
            activity: None,
            idle: None,
        }
    }

    /// This connection, closed once no call has run on it for `timeout` (a read then fails
    /// with `TimedOut`, and the server drops the connection).
    pub(crate) fn closing_when_idle(mut self, timeout: Duration) -> GatedStream {
        let activity = Activity::new();
        self.idle = Some(IdleClock::new(activity.clone(), timeout));
        self.activity = Some(activity);
        self
    }

    /// The TCP stream.
    pub fn get_ref(&self) -> &TcpStream {
        &self.stream
    }
}

impl Connected for GatedStream {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        ConnectionInfo {
            tcp: self.stream.connect_info(),
            activity: self.activity.clone(),
        }
    }
}

impl AsyncRead for GatedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        // Looked at only while the server waits for bytes: a connection that is being read
        // from is not closed under its reader.
        if read.is_pending() {
            if let Some(idle) = this.idle.as_mut() {
                if idle.poll_expired(cx).is_ready() {
                    return Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "no call on this connection for its idle timeout",
                    )));
                }
            }
        }
        read
    }
}

impl AsyncWrite for GatedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A gRPC service behind its server's request limit ([`ServerGate::service`]).
#[derive(Clone, Debug)]
pub struct Gated<S> {
    inner: S,
    gate: Arc<ServerGate>,
    exempt: &'static [&'static str],
}

impl<S: NamedService> NamedService for Gated<S> {
    const NAME: &'static str = S::NAME;
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> Service<Request<B>> for Gated<S>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The connection counts the call as running until it is answered (its idle clock).
        let call = request
            .extensions()
            .get::<ConnectionInfo>()
            .and_then(|info| info.activity.as_ref())
            .map(|activity| activity.call());
        if self.exempt.contains(&request.uri().path()) {
            let running = self.inner.call(request);
            return Box::pin(async move {
                let response = running.await;
                drop(call);
                response
            });
        }
        match self.gate.try_request() {
            Some(permit) => {
                let running = self.inner.call(request);
                Box::pin(async move {
                    let response = running.await;
                    drop((permit, call));
                    response
                })
            }
            None => {
                let status = tonic::Status::resource_exhausted(format!(
                    "606 WRITE_PROCESS_REJECT: the server is running its maximum of {} requests; \
                     retry later or elsewhere",
                    self.gate.limits.requests_max
                ));
                Box::pin(std::future::ready(Ok(status.into_http())))
            }
        }
    }
}
