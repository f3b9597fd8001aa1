//! Admission on a port that serves two protocols (the DataNode's session port: gRPC sessions and
//! IoTDB's Thrift clients), with a budget of connections per protocol and per stage, so that a
//! flood of one kind cannot lock out the others (REVIEW N4):
//!
//! - **Handshakes** ([`PortLimits::handshakes_max`]): a connection accepted and not yet known
//!   — its protocol not sniffed yet, or a Thrift client before a successful `openSession`. Past
//!   the budget the *oldest* handshake is closed to make room (evicted), so connections that
//!   stall cannot keep new clients out; and each has [`PortLimits::handshake_timeout`] from
//!   accept to a gRPC preface or a Thrift login, after which it is closed.
//! - **gRPC connections** ([`PortLimits::grpc_connections_max`]): taken once the whole HTTP/2
//!   preface has arrived; one past the budget is closed.
//! - **Thrift sessions** ([`PortLimits::thrift_sessions_max`]): taken by the Thrift server when
//!   a login succeeds ([`PortGate::admit_thrift_session`]); a login past it is refused.
//!
//! A connection holds one place at a time, so descriptors for client sockets are bounded by the
//! sum of the three (plus evicted connections on their way out).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_stream::Stream;

use crate::channel::{tune_socket, ChannelConfig};
use crate::limits::GatedStream;

/// The HTTP/2 connection preface every gRPC client sends first (RFC 9113 §3.4).
const HTTP2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Connections sniffed and waiting for their server, per protocol; a sniffing task waits for
/// room (within its handshake's time).
const SNIFFED_QUEUE: usize = 64;

/// The acceptor's pause after a failed accept (out of descriptors, say): the next accept would
/// fail the same way at once, and retrying in a loop would take a core.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Longest pause between two looks at a partial HTTP/2 preface.
const PREFACE_POLL_MAX: Duration = Duration::from_millis(100);

/// The budgets of a two-protocol port. Each is at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortLimits {
    /// Connections in their handshake at once; one more evicts the oldest.
    pub handshakes_max: usize,
    /// Time from accept to a complete HTTP/2 preface or a Thrift login.
    pub handshake_timeout: Duration,
    /// gRPC connections open at once; one more is closed after its preface.
    pub grpc_connections_max: usize,
    /// Thrift connections logged in at once; a login past it is refused.
    pub thrift_sessions_max: usize,
    /// A gRPC connection that runs no call for this long is closed ([`crate::idle`]); `None`
    /// keeps it open.
    pub grpc_idle_timeout: Option<Duration>,
}

/// What a port holds and what it turned away, shared by its acceptor and its servers.
#[derive(Debug)]
pub struct PortGate {
    limits: PortLimits,
    /// Handshakes by admission order, each with the signal that evicts it.
    handshakes: Mutex<BTreeMap<u64, Arc<Notify>>>,
    next_handshake: AtomicU64,
    grpc: Arc<Semaphore>,
    thrift_sessions: Arc<Semaphore>,
    /// Handshakes closed to make room for a newer connection.
    pub handshakes_evicted: AtomicU64,
    /// Handshakes closed because they did not finish within the timeout.
    pub handshakes_timed_out: AtomicU64,
    /// gRPC connections closed past their budget.
    pub grpc_refused: AtomicU64,
    /// Thrift logins refused past their budget.
    pub thrift_sessions_refused: AtomicU64,
}

/// How a connection leaves its handshake early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeEnd {
    /// A newer connection needed its place.
    Evicted,
    /// [`PortLimits::handshake_timeout`] passed.
    TimedOut,
}

/// A connection's place among the handshakes, held until it is dropped (the client logged in,
/// or the connection closed).
#[derive(Debug)]
pub struct Handshake {
    gate: Arc<PortGate>,
    id: u64,
    evicted: Arc<Notify>,
    deadline: Instant,
}

impl Handshake {
    /// When the handshake must have finished.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Resolves when the handshake must end: evicted, or out of time (counted). Never resolves
    /// before one of them.
    pub async fn ended(&self) -> HandshakeEnd {
        tokio::select! {
            () = self.evicted.notified() => HandshakeEnd::Evicted,
            () = tokio::time::sleep_until(self.deadline) => {
                self.gate.handshakes_timed_out.fetch_add(1, Ordering::Relaxed);
                HandshakeEnd::TimedOut
            }
        }
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.gate.handshakes.lock().remove(&self.id);
    }
}

/// A Thrift connection as the acceptor hands it over: still in its handshake.
#[derive(Debug)]
pub struct ThriftConnection {
    /// The socket, its first byte not yet read.
    pub stream: TcpStream,
    /// Its place among the handshakes; drop it once the client has logged in.
    pub handshake: Handshake,
}

impl PortGate {
    /// A gate for `limits` (each budget clamped to at least 1).
    pub fn new(limits: PortLimits) -> Arc<PortGate> {
        let limits = PortLimits {
            handshakes_max: limits.handshakes_max.max(1),
            grpc_connections_max: limits.grpc_connections_max.max(1),
            thrift_sessions_max: limits.thrift_sessions_max.max(1),
            ..limits
        };
        Arc::new(PortGate {
            limits,
            handshakes: Mutex::new(BTreeMap::new()),
            next_handshake: AtomicU64::new(0),
            grpc: Arc::new(Semaphore::new(limits.grpc_connections_max)),
            thrift_sessions: Arc::new(Semaphore::new(limits.thrift_sessions_max)),
            handshakes_evicted: AtomicU64::new(0),
            handshakes_timed_out: AtomicU64::new(0),
            grpc_refused: AtomicU64::new(0),
            thrift_sessions_refused: AtomicU64::new(0),
        })
    }

    /// The budgets in force.
    pub fn limits(&self) -> PortLimits {
        self.limits
    }

    /// Connections in their handshake now.
    pub fn handshakes_open(&self) -> usize {
        self.handshakes.lock().len()
    }

    /// gRPC connections open now.
    pub fn grpc_connections_open(&self) -> usize {
        self.limits.grpc_connections_max - self.grpc.available_permits()
    }

    /// Thrift connections logged in now.
    pub fn thrift_sessions_open(&self) -> usize {
        self.limits.thrift_sessions_max - self.thrift_sessions.available_permits()
    }

    /// A place among the handshakes for a connection accepted now, evicting the oldest when
    /// all are taken.
    pub fn admit_handshake(self: &Arc<Self>) -> Handshake {
        let id = self.next_handshake.fetch_add(1, Ordering::Relaxed);
        let evicted = Arc::new(Notify::new());
        let mut handshakes = self.handshakes.lock();
        while handshakes.len() >= self.limits.handshakes_max {
            let (_, oldest) = handshakes
                .pop_first()
                .expect("a full map has a first entry");
            // Stored if nobody waits yet: the connection sees it at its next wait.
            oldest.notify_one();
            let evictions = self.handshakes_evicted.fetch_add(1, Ordering::Relaxed) + 1;
            if evictions.is_power_of_two() {
                tracing::warn!(
                    evictions,
                    limit = self.limits.handshakes_max,
                    "closing the oldest connection in its handshake to make room"
                );
            }
        }
        handshakes.insert(id, evicted.clone());
        Handshake {
            gate: self.clone(),
            id,
            evicted,
            deadline: Instant::now() + self.limits.handshake_timeout,
        }
    }

    /// A place among the gRPC connections for `stream`, or `None` (counted; the caller closes
    /// it) when all are taken.
    fn admit_grpc(&self, stream: TcpStream) -> Option<GatedStream> {
        match self.grpc.clone().try_acquire_owned() {
            Ok(permit) => {
                let stream = GatedStream::new(stream, permit);
                Some(match self.limits.grpc_idle_timeout {
                    Some(timeout) => stream.closing_when_idle(timeout),
                    None => stream,
                })
            }
            Err(_) => {
                let refused = self.grpc_refused.fetch_add(1, Ordering::Relaxed) + 1;
                if refused.is_power_of_two() {
                    tracing::warn!(
                        refused,
                        limit = self.limits.grpc_connections_max,
                        "gRPC connection closed: the port holds its maximum of gRPC connections"
                    );
                }
                None
            }
        }
    }

    /// A place among the logged-in Thrift sessions, held until dropped; `None` (counted) when
    /// all are taken.
    pub fn admit_thrift_session(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.thrift_sessions.clone().try_acquire_owned().ok();
        if permit.is_none() {
            self.thrift_sessions_refused.fetch_add(1, Ordering::Relaxed);
        }
        permit
    }
}

/// What a connection's first bytes say it speaks.
enum Sniffed {
    /// The whole HTTP/2 preface.
    Grpc,
    /// Anything else that starts with a byte other than the preface's: IoTDB's Thrift clients
    /// open with a frame length, `0x00` for any frame under 16 MiB.
    Thrift,
}

/// Peeks at `stream` until its protocol is known; `None` when it closed first or opened like
/// HTTP/2 and then said something else.
async fn sniff(stream: &TcpStream) -> Option<Sniffed> {
    let mut seen = [0u8; HTTP2_PREFACE.len()];
    let mut pause = Duration::from_millis(1);
    loop {
        let n = stream.peek(&mut seen).await.ok()?;
        if n == 0 {
            return None;
        }
        if seen[0] != HTTP2_PREFACE[0] {
            return Some(Sniffed::Thrift);
        }
        if seen[..n] != HTTP2_PREFACE[..n] {
            return None;
        }
        if n == HTTP2_PREFACE.len() {
            return Some(Sniffed::Grpc);
        }
        // A peek answers at once while any byte is there: wait for the rest of the preface
        // (real clients send it in one segment, so this is rare and bounded by the deadline).
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(PREFACE_POLL_MAX);
    }
}

/// The accepted connections of `listener`, each with `config`'s socket options, split by the
/// protocol each speaks and admitted by `gate`: gRPC connections (after their whole preface,
/// within their gRPC budget) in the first stream, for tonic; every other one in the second,
/// still in its handshake, for the Thrift server. Sniffing runs on a task of each connection's
/// own, so a silent client holds up nobody; one that does not finish its preface in time, or
/// is evicted by newer connections, is closed.
pub fn incoming_split(
    listener: TcpListener,
    config: &ChannelConfig,
    gate: &Arc<PortGate>,
) -> (
    impl Stream<Item = std::io::Result<GatedStream>> + Send + Unpin + 'static,
    tokio::sync::mpsc::Receiver<ThriftConnection>,
) {
    let (grpc_tx, grpc_rx) = tokio::sync::mpsc::channel(SNIFFED_QUEUE);
    let (thrift_tx, thrift_rx) = tokio::sync::mpsc::channel(SNIFFED_QUEUE);
    let config = *config;
    let gate = gate.clone();
    tokio::spawn(async move {
        let mut failures: u64 = 0;
        while !(grpc_tx.is_closed() && thrift_tx.is_closed()) {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    failures += 1;
                    if failures.is_power_of_two() {
                        tracing::warn!(failures, "accepting a connection: {e}");
                    }
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            };
            // A socket without its options still serves; only dead-peer detection and latency
            // suffer, so it is not refused.
            if let Err(e) = tune_socket(&stream, &config) {
                tracing::warn!("setting socket options on an accepted connection: {e}");
            }
            let handshake = gate.admit_handshake();
            let (to_grpc, to_thrift, gate) = (grpc_tx.clone(), thrift_tx.clone(), gate.clone());
            tokio::spawn(async move {
                let sniffed = tokio::select! {
                    sniffed = sniff(&stream) => sniffed,
                    _ = handshake.ended() => None,
                };
                match sniffed {
                    Some(Sniffed::Grpc) => {
                        // Out of its handshake: a gRPC client authenticates each call.
                        drop(handshake);
                        if let Some(stream) = gate.admit_grpc(stream) {
                            drop(to_grpc.send(Ok(stream)).await);
                        }
                    }
                    Some(Sniffed::Thrift) => {
                        let deadline = handshake.deadline();
                        let connection = ThriftConnection { stream, handshake };
                        let sent = tokio::time::timeout_at(deadline, to_thrift.send(connection));
                        drop(sent.await);
                    }
                    None => {}
                }
            });
        }
    });
    (
        tokio_stream::wrappers::ReceiverStream::new(grpc_rx),
        thrift_rx,
    )
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    fn limits(handshakes_max: usize, handshake_timeout: Duration) -> PortLimits {
        PortLimits {
            handshakes_max,
            handshake_timeout,
            grpc_connections_max: 2,
            thrift_sessions_max: 1,
            grpc_idle_timeout: None,
        }
    }

    #[tokio::test]
    async fn the_oldest_handshake_is_evicted_and_budgets_are_separate() {
        let gate = PortGate::new(limits(2, Duration::from_secs(60)));
        let first = gate.admit_handshake();
        let second = gate.admit_handshake();
        assert_eq!(gate.handshakes_open(), 2);
        let third = gate.admit_handshake();
        assert_eq!(gate.handshakes_open(), 2, "the budget holds");
        assert_eq!(first.ended().await, HandshakeEnd::Evicted);
        assert_eq!(gate.handshakes_evicted.load(Ordering::Relaxed), 1);
        drop(first);
        drop(second);
        assert_eq!(gate.handshakes_open(), 1);
        drop(third);
        assert_eq!(gate.handshakes_open(), 0);
        // Sessions have a budget of their own, untouched by the handshakes.
        let session = gate.admit_thrift_session().expect("a session place");
        assert!(gate.admit_thrift_session().is_none());
        assert_eq!(gate.thrift_sessions_refused.load(Ordering::Relaxed), 1);
        assert_eq!(gate.thrift_sessions_open(), 1);
        drop(session);
        assert_eq!(gate.thrift_sessions_open(), 0);
    }

    #[tokio::test]
    async fn a_handshake_ends_at_its_deadline() {
        let gate = PortGate::new(limits(4, Duration::from_millis(50)));
        let handshake = gate.admit_handshake();
        assert_eq!(handshake.ended().await, HandshakeEnd::TimedOut);
        assert!(Instant::now() >= handshake.deadline());
        assert_eq!(gate.handshakes_timed_out.load(Ordering::Relaxed), 1);
    }

    /// One-byte Thrift connections beyond the handshake budget neither reach the gRPC clients'
    /// budget nor keep a gRPC client out; a partial preface is closed at the deadline.
    #[tokio::test]
    async fn a_flood_of_thrift_handshakes_leaves_grpc_alone() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let gate = PortGate::new(limits(4, Duration::from_millis(500)));
        let (mut grpc, mut thrift) = incoming_split(listener, &ChannelConfig::default(), &gate);
        let mut flood = Vec::new();
        for _ in 0..16 {
            let mut s = TcpStream::connect(address).await.unwrap();
            s.write_all(&[0]).await.unwrap();
            flood.push(s);
        }
        // Thrift connections are handed over still in their handshake (an evicted one may be
        // closed before); the oldest are evicted.
        let mut handed = Vec::new();
        while gate.handshakes_evicted.load(Ordering::Relaxed) < 12 {
            if let Ok(Some(c)) =
                tokio::time::timeout(Duration::from_millis(10), thrift.recv()).await
            {
                handed.push(c);
            }
        }
        assert!(gate.handshakes_open() <= 4);
        assert_eq!(gate.handshakes_evicted.load(Ordering::Relaxed), 12);
        // A gRPC client gets in past the flood.
        let mut client = TcpStream::connect(address).await.unwrap();
        client.write_all(HTTP2_PREFACE).await.unwrap();
        let admitted = tokio_stream::StreamExt::next(&mut grpc)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(gate.grpc_connections_open(), 1);
        drop(admitted);
        assert_eq!(gate.grpc_connections_open(), 0);
        // Half a preface: closed at the handshake's deadline, never handed to tonic.
        let mut partial = TcpStream::connect(address).await.unwrap();
        partial.write_all(&HTTP2_PREFACE[..5]).await.unwrap();
        let mut byte = [0u8; 1];
        let read = tokio::io::AsyncReadExt::read(&mut partial, &mut byte).await;
        assert!(matches!(read, Ok(0) | Err(_)), "closed: {read:?}");
        assert_eq!(gate.grpc_connections_open(), 0);
    }
}
