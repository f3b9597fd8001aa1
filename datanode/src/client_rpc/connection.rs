//! One Thrift connection's life on the session port: its frames and their limits, its
//! timeouts, its login.
//!
//! Until an `openSession` succeeds the connection is in its handshake (REVIEW N4): a frame is
//! at most `dn_rpc_unauthenticated_frame_bytes_max`, and the connection has
//! `dn_rpc_handshake_timeout_ms` from accept to log in (a client that sent one byte and went
//! quiet is closed then), or less if newer connections evict it from the port's handshake
//! budget. A successful login moves it to the logged-in sessions' budget
//! (`dn_rpc_max_concurrent_client_num`); from then on a frame may be up to
//! `dn_rpc_max_message_bytes`, the rest of a started frame must arrive within
//! `dn_rpc_frame_timeout_ms`, and a connection silent for `dn_rpc_idle_timeout_ms` between two
//! requests is closed with its session and its queries.
//!
//! A request permit (`dn_rpc_max_concurrent_requests`) is taken once the frame's length is
//! known and before its buffer is allocated, so at most that many frame buffers exist at once;
//! without a permit the frame is read through a small buffer and dropped, and the call is
//! answered 606.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use common::StatusCode;
use iotdb_rpc::messages::{
    ExecuteStatementResp, FetchResultsResp, GetTimeZoneResp, OpenSessionReq, OpenSessionResp,
    Status,
};
use thrift_codec::{ApplicationError, Protocol, Reader};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::{
    thrift_status, Answer, Connection, DataNodeBackend, Refusal, Session, PROTOCOL_VERSION,
};

/// Replies up to this size are copied behind their length prefix and sent in one write; larger
/// ones go as two writes, without a copy of the reply.
const REPLY_COPIED_BYTES_MAX: usize = 64 << 10;

/// Bytes of a frame refused for want of a request permit that are kept, to name the call in the
/// refusal; the rest is read through a buffer of the same size and dropped.
const REFUSED_FRAME_KEPT_BYTES: usize = 512;

/// Where a connection stands on the port.
pub(super) enum Place {
    /// Not logged in yet: counted among the handshakes, with their deadline.
    Handshake(runtime::Handshake),
    /// Logged in (once): counted among the sessions until it closes.
    // Never read: the permit is held for its drop, which gives the place back.
    #[allow(dead_code)]
    Session(OwnedSemaphorePermit),
}

/// Why a connection stops.
#[derive(Debug)]
enum Stop {
    /// The client closed it, or the socket failed.
    Closed,
    /// Its handshake ended (evicted or out of time) before a login.
    Handshake(runtime::port::HandshakeEnd),
    /// A frame did not finish in time, or the connection idled too long.
    TimedOut(&'static str),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use runtime::port::HandshakeEnd;
        match self {
            Stop::Closed => write!(f, "closed by the client"),
            Stop::Handshake(HandshakeEnd::Evicted) => write!(
                f,
                "closed before a login to make room for newer connections \
                 (dn_rpc_handshake_connections_max)"
            ),
            Stop::Handshake(HandshakeEnd::TimedOut) => {
                write!(f, "no login within dn_rpc_handshake_timeout_ms")
            }
            Stop::TimedOut(key) => write!(f, "{key} passed"),
        }
    }
}

/// Waits for `read`, unless the connection's handshake ends first (before a login) or
/// `deadline` passes.
async fn within<T>(
    place: &Place,
    deadline: Option<(Instant, &'static str)>,
    read: impl Future<Output = std::io::Result<T>>,
) -> Result<T, Stop> {
    let handshake = async {
        match place {
            Place::Handshake(h) => h.ended().await,
            Place::Session(_) => std::future::pending().await,
        }
    };
    let expired = async {
        match deadline {
            Some((at, _)) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        read = read => read.map_err(|_| Stop::Closed),
        end = handshake => Err(Stop::Handshake(end)),
        () = expired => Err(Stop::TimedOut(deadline.map_or("", |(_, what)| what))),
    }
}

/// What one frame got: the reply, and whether the connection goes on after it.
struct Served {
    reply: Vec<u8>,
    goes_on: bool,
}

impl Connection {
    pub(super) async fn run(mut self, mut stream: TcpStream) {
        loop {
            let served = match self.serve_frame(&mut stream).await {
                Ok(served) => served,
                Err(stop) => {
                    tracing::debug!("Thrift connection ended: {stop}");
                    return;
                }
            };
            let protocol = self.protocol.unwrap_or(Protocol::Binary);
            if send_frame(&mut stream, &served.reply, protocol)
                .await
                .is_err()
                || !served.goes_on
            {
                return;
            }
        }
    }

    /// Reads one frame within the connection's limits and answers it.
    async fn serve_frame(&mut self, stream: &mut TcpStream) -> Result<Served, Stop> {
        let config = &self.shared.config;
        let idle = match (&self.place, config.rpc.dn_rpc_idle_timeout_ms) {
            (Place::Session(_), ms) if ms > 0 => Some((
                Instant::now() + Duration::from_millis(ms),
                "dn_rpc_idle_timeout_ms",
            )),
            _ => None,
        };
        let mut prefix = [0u8; thrift_codec::FRAME_HEADER_LEN];
        within(&self.place, idle, stream.read_exact(&mut prefix[..1])).await?;
        let frame_deadline = Some((
            Instant::now() + Duration::from_millis(config.rpc.dn_rpc_frame_timeout_ms),
            "dn_rpc_frame_timeout_ms",
        ));
        within(
            &self.place,
            frame_deadline,
            stream.read_exact(&mut prefix[1..]),
        )
        .await?;
        let (max, key) = if self.session.is_some() {
            (
                config.rpc.dn_rpc_max_message_bytes,
                "dn_rpc_max_message_bytes",
            )
        } else {
            (
                config.rpc.dn_rpc_unauthenticated_frame_bytes_max,
                "dn_rpc_unauthenticated_frame_bytes_max",
            )
        };
        let protocol = self.protocol.unwrap_or(Protocol::Binary);
        let length = match thrift_codec::frame_length(prefix, max as usize) {
            Ok(length) => length,
            Err(e) => {
                // The frame's end is unknown (or too far to read): answer and close.
                let login = if self.session.is_some() {
                    ""
                } else {
                    " before a login"
                };
                let reply = thrift_codec::application_exception(
                    protocol,
                    "",
                    0,
                    ApplicationError::ProtocolError,
                    &format!("{e}; the limit{login} is {key} = {max}"),
                );
                return Ok(Served {
                    reply,
                    goes_on: false,
                });
            }
        };
        let Some(_permit) = self.shared.clients.session_gate.try_request() else {
            let kept = self.discard(stream, length, frame_deadline).await?;
            return Ok(Served {
                reply: self.busy(&kept),
                goes_on: true,
            });
        };
        let mut frame = vec![0u8; length];
        within(&self.place, frame_deadline, stream.read_exact(&mut frame)).await?;
        Ok(Served {
            reply: self.answer(&frame).await,
            goes_on: true,
        })
    }

    /// Reads a frame of `length` bytes through a small buffer, keeping its first bytes.
    async fn discard(
        &self,
        stream: &mut TcpStream,
        length: usize,
        deadline: Option<(Instant, &'static str)>,
    ) -> Result<Vec<u8>, Stop> {
        let mut kept = vec![0u8; length.min(REFUSED_FRAME_KEPT_BYTES)];
        within(&self.place, deadline, stream.read_exact(&mut kept)).await?;
        let mut scratch = [0u8; REFUSED_FRAME_KEPT_BYTES];
        let mut left = length - kept.len();
        while left > 0 {
            let n = left.min(scratch.len());
            within(&self.place, deadline, stream.read_exact(&mut scratch[..n])).await?;
            left -= n;
        }
        Ok(kept)
    }

    /// The 606 answer to a call refused for want of a request permit, naming the call when its
    /// first bytes say what it is.
    fn busy(&self, first_bytes: &[u8]) -> Vec<u8> {
        let protocol = self
            .protocol
            .or_else(|| first_bytes.first().and_then(|&b| thrift_codec::sniff(b)))
            .unwrap_or(Protocol::Binary);
        let header = Reader::new(first_bytes, protocol).message_begin().ok();
        let (name, seqid) = header.map_or((String::new(), 0), |h| (h.name, h.seqid));
        thrift_codec::application_exception(
            protocol,
            &name,
            seqid,
            ApplicationError::InternalError,
            &format!(
                "606 WRITE_PROCESS_REJECT: the server is running its maximum of {} requests; \
                 retry later or elsewhere",
                self.shared.clients.session_gate.limits().requests_max
            ),
        )
    }

    pub(super) async fn open_session(&mut self, req: OpenSessionReq) -> OpenSessionResp {
        let refused = |status: Status| OpenSessionResp {
            status,
            server_protocol_version: PROTOCOL_VERSION,
            session_id: -1,
            configuration: BTreeMap::new(),
        };
        if req.client_protocol != PROTOCOL_VERSION {
            return refused(Status::new(
                201,
                format!(
                    "client protocol version {} is not served; this server speaks V3 ({PROTOCOL_VERSION})",
                    req.client_protocol
                ),
            ));
        }
        let table_model = match req.configuration.get("sql_dialect") {
            None => false,
            Some(d) if d.eq_ignore_ascii_case("tree") => false,
            Some(d) if d.eq_ignore_ascii_case("table") => true,
            Some(d) => {
                return refused(Status::new(
                    205,
                    format!("unknown SQL dialect {d}: tree or table"),
                ))
            }
        };
        let database = req.configuration.get("db").map(|d| d.to_lowercase());
        // A place among the logged-in sessions is taken before the password is checked, so a
        // login past the budget costs nothing.
        let place = match &self.place {
            Place::Session(_) => None,
            Place::Handshake(_) => match self.shared.clients.port_gate.admit_thrift_session() {
                Some(permit) => Some(permit),
                None => {
                    return refused(Status::new(
                        StatusCode::WriteProcessReject.wire(),
                        format!(
                            "this DataNode holds its maximum of {} logged-in clients \
                             (dn_rpc_max_concurrent_client_num); retry later or elsewhere",
                            self.shared.config.rpc.dn_rpc_max_concurrent_client_num
                        ),
                    ))
                }
            },
        };
        // A failed login ends the session the connection had, as a new login replaces it.
        self.session = None;
        let password = req.password.unwrap_or_default();
        let login = crate::auth::login(
            &self.shared,
            &req.username,
            &password,
            crate::auth::Check::ConfigNodeFirst,
        )
        .await;
        if !login.is(StatusCode::Success) {
            return refused(thrift_status(login));
        }
        if let Some(permit) = place {
            // Out of its handshake: the frame limit and the deadline end here.
            self.place = Place::Session(permit);
        }
        let id = i64::try_from(self.shared.next_session_id()).unwrap_or(i64::MAX);
        self.session = Some(Session {
            backend: DataNodeBackend::new(self.shared.clone(), req.username),
            time_zone: req.zone_id,
            table_model,
            database,
            statement_id: 0,
            next_query_id: 1,
            queries: BTreeMap::new(),
        });
        OpenSessionResp {
            status: Status::new(200, "Login successfully"),
            server_protocol_version: PROTOCOL_VERSION,
            session_id: id,
            configuration: [("timestamp_precision".to_string(), "ms".to_string())].into(),
        }
    }

    /// The answer of a call made before `openSession` succeeded: 802, in the call's own reply
    /// shape.
    pub(super) fn not_logged_in(&self, method: &str) -> Result<Answer, Refusal> {
        let status = Status::new(802, "Log in first: call openSession on this connection.");
        Ok(match method {
            m if m.starts_with("execute") => Answer::Execute(ExecuteStatementResp {
                status,
                ..ExecuteStatementResp::default()
            }),
            m if m.starts_with("fetchResults") => Answer::Fetch(FetchResultsResp {
                status,
                ..FetchResultsResp::default()
            }),
            "getTimeZone" => Answer::TimeZone(GetTimeZoneResp {
                status,
                time_zone: String::new(),
            }),
            "requestStatementId" => {
                return Err(Refusal {
                    kind: ApplicationError::Unknown,
                    message: "802: log in first: call openSession on this connection".into(),
                })
            }
            _ => Answer::Status(status),
        })
    }
}

/// Sends `reply` as one frame. A reply that cannot be framed (2 GiB or more) is replaced by an
/// exception saying so: the connection goes on and the server does not panic.
pub(super) async fn send_frame(
    stream: &mut (impl AsyncWrite + Unpin),
    reply: &[u8],
    protocol: Protocol,
) -> std::io::Result<()> {
    let header = match thrift_codec::frame_header(reply.len()) {
        Ok(header) => header,
        Err(e) => {
            let refusal = thrift_codec::application_exception(
                protocol,
                "",
                0,
                ApplicationError::InternalError,
                &format!("the reply cannot be sent: {e}"),
            );
            let framed = thrift_codec::frame(&refusal).expect("an exception is small");
            return stream.write_all(&framed).await;
        }
    };
    if reply.len() <= REPLY_COPIED_BYTES_MAX {
        let mut framed = Vec::with_capacity(header.len() + reply.len());
        framed.extend_from_slice(&header);
        framed.extend_from_slice(reply);
        return stream.write_all(&framed).await;
    }
    stream.write_all(&header).await?;
    stream.write_all(reply).await
}
