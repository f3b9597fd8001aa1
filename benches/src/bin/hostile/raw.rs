//! The hostile connections: raw TCP to the session port, each watched until the server closes
//! it (or the bench stops watching), and how they ended.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use thrift_codec::{MessageType, Protocol, Reader, TType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// The frame length a big-frame connection announces, and what it streams at most.
pub(crate) const BIG_FRAME_BYTES: usize = 64 << 20;
/// Bytes per write of a big-frame connection.
const BIG_FRAME_CHUNK_BYTES: usize = 64 << 10;
/// Longest a hostile connection of the big-frame and truncated phases is watched.
pub(crate) const HOSTILE_WAIT_S: u64 = 60;
/// Longest one TCP connect (and its first byte) may take.
const CONNECT_TIMEOUT_S: u64 = 10;
/// Characters of a server message kept in a row.
const MESSAGE_CHARS_MAX: usize = 160;
/// Bytes of a hostile connection's reply kept, to show the server's exception.
const REPLY_BYTES_MAX: usize = 64 << 10;

/// The first [`MESSAGE_CHARS_MAX`] characters of `message`, on one line.
pub(crate) fn shorten(message: &str) -> String {
    let one_line = message.replace(['\n', '|'], " ");
    if one_line.chars().count() <= MESSAGE_CHARS_MAX {
        return one_line;
    }
    let cut: String = one_line.chars().take(MESSAGE_CHARS_MAX).collect();
    format!("{cut}…")
}

/// Median and largest of `d`, in seconds.
pub(crate) fn median_max_s(d: &mut [Duration]) -> (f64, f64) {
    if d.is_empty() {
        return (0.0, 0.0);
    }
    d.sort_unstable();
    (d[d.len() / 2].as_secs_f64(), d[d.len() - 1].as_secs_f64())
}

/// Opens a TCP connection within [`CONNECT_TIMEOUT_S`].
pub(crate) async fn connect(address: &str) -> Result<TcpStream, String> {
    match tokio::time::timeout(
        Duration::from_secs(CONNECT_TIMEOUT_S),
        TcpStream::connect(address),
    )
    .await
    {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("connect took over {CONNECT_TIMEOUT_S} s")),
    }
}

/// Reads until the server closes the connection, keeping the first [`REPLY_BYTES_MAX`] bytes.
pub(crate) async fn read_until_closed(read: &mut (impl AsyncReadExt + Unpin), kept: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    loop {
        match read.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let room = REPLY_BYTES_MAX.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// The message of a Thrift exception at the start of `reply` (a framed binary message).
pub(crate) fn exception_message(reply: &[u8]) -> Option<String> {
    let payload = reply.get(4..)?;
    let mut r = Reader::new(payload, Protocol::Binary);
    let header = r.message_begin().ok()?;
    if header.kind != MessageType::Exception {
        return None;
    }
    let mut message = None;
    iotdb_rpc::messages::read_struct(&mut r, |r, h| {
        if h.id == 1 && h.ttype == TType::String {
            message = Some(r.string()?);
            return Ok(true);
        }
        Ok(false)
    })
    .ok()?;
    message
}

/// How a hostile connection ended.
pub(crate) enum Ending {
    /// Closed by the server this long after it connected, having taken `sent` bytes.
    Closed {
        after: Duration,
        sent: u64,
        reply: Vec<u8>,
    },
    /// Still open when the bench stopped watching.
    Open,
    /// The connection could not be made.
    NotConnected(String),
}

/// Announces a frame of [`BIG_FRAME_BYTES`] and streams it until the server closes.
pub(crate) async fn big_frame(address: Arc<str>) -> Ending {
    let stream = match connect(&address).await {
        Ok(s) => s,
        Err(e) => return Ending::NotConnected(e),
    };
    let since = Instant::now();
    let (mut read, mut write) = stream.into_split();
    let sent = AtomicUsize::new(0);
    // Returns when a write fails (the server closed or reset); after the whole frame it waits
    // for the close.
    let send = async {
        let prefix = (BIG_FRAME_BYTES as i32).to_be_bytes();
        if write.write_all(&prefix).await.is_err() {
            return;
        }
        let chunk = vec![0u8; BIG_FRAME_CHUNK_BYTES];
        while sent.load(Ordering::Relaxed) < BIG_FRAME_BYTES {
            if write.write_all(&chunk).await.is_err() {
                return;
            }
            sent.fetch_add(chunk.len(), Ordering::Relaxed);
        }
        std::future::pending::<()>().await
    };
    let mut reply = Vec::new();
    let watched = async {
        tokio::select! {
            () = read_until_closed(&mut read, &mut reply) => {}
            () = send => {}
        }
    };
    if tokio::time::timeout(Duration::from_secs(HOSTILE_WAIT_S), watched)
        .await
        .is_err()
    {
        return Ending::Open;
    }
    let after = since.elapsed();
    // What the server said before it closed, if the failed write came first.
    let rest = read_until_closed(&mut read, &mut reply);
    if tokio::time::timeout(Duration::from_secs(1), rest)
        .await
        .is_err()
    {
        return Ending::Open;
    }
    Ending::Closed {
        after,
        sent: sent.load(Ordering::Relaxed) as u64,
        reply,
    }
}

/// Counts the endings: closed (with the close times, the most bytes the server took and its
/// first exception message), still open, not connected (by error).
pub(crate) struct Endings {
    pub(crate) closed_after: Vec<Duration>,
    pub(crate) sent_max: u64,
    pub(crate) message: Option<String>,
    pub(crate) open: usize,
    pub(crate) not_connected: BTreeMap<String, usize>,
}

impl Endings {
    pub(crate) fn of(endings: Vec<Ending>) -> Endings {
        let mut e = Endings {
            closed_after: Vec::new(),
            sent_max: 0,
            message: None,
            open: 0,
            not_connected: BTreeMap::new(),
        };
        for ending in endings {
            match ending {
                Ending::Closed { after, sent, reply } => {
                    e.closed_after.push(after);
                    e.sent_max = e.sent_max.max(sent);
                    if e.message.is_none() {
                        e.message = exception_message(&reply);
                    }
                }
                Ending::Open => e.open += 1,
                Ending::NotConnected(why) => *e.not_connected.entry(why).or_default() += 1,
            }
        }
        e
    }

    /// "N closed after median / max s, M still open at W s[, K not connected: why]".
    pub(crate) fn summary(&mut self) -> String {
        let (median, max) = median_max_s(&mut self.closed_after);
        let mut s = format!(
            "{} closed by the server (median {median:.3} s, max {max:.3} s after connecting), \
             {} still open after {HOSTILE_WAIT_S} s",
            self.closed_after.len(),
            self.open
        );
        for (why, n) in &self.not_connected {
            s.push_str(&format!(", {n} not connected ({})", shorten(why)));
        }
        s
    }
}

/// Runs `n` copies of `connection` at once and collects their endings.
pub(crate) async fn all_endings<F>(n: usize, connection: impl Fn() -> F) -> anyhow::Result<Endings>
where
    F: std::future::Future<Output = Ending> + Send + 'static,
{
    let mut set = JoinSet::new();
    for _ in 0..n {
        set.spawn(connection());
    }
    let mut endings = Vec::with_capacity(n);
    while let Some(ending) = set.join_next().await {
        endings.push(ending.context("a hostile connection's task failed")?);
    }
    Ok(Endings::of(endings))
}

/// Sends 4 bytes of a 100-byte frame and waits for the close.
pub(crate) async fn truncated_frame(address: Arc<str>) -> Ending {
    let mut stream = match connect(&address).await {
        Ok(s) => s,
        Err(e) => return Ending::NotConnected(e),
    };
    let since = Instant::now();
    let mut part = 100i32.to_be_bytes().to_vec();
    part.extend_from_slice(&[0x80, 1, 0, 1]);
    if stream.write_all(&part).await.is_err() {
        return Ending::Closed {
            after: since.elapsed(),
            sent: 0,
            reply: Vec::new(),
        };
    }
    let mut reply = Vec::new();
    let closed = read_until_closed(&mut stream, &mut reply);
    match tokio::time::timeout(Duration::from_secs(HOSTILE_WAIT_S), closed).await {
        Ok(()) => Ending::Closed {
            after: since.elapsed(),
            sent: part.len() as u64,
            reply,
        },
        Err(_) => Ending::Open,
    }
}

/// One flood connection: one byte, then held for `hold` unless the server closes it first.
pub(crate) async fn flood_connection(
    address: Arc<str>,
    permits: Arc<Semaphore>,
    opened: Arc<AtomicUsize>,
    hold: Duration,
) -> Ending {
    let permit = permits
        .acquire_owned()
        .await
        .expect("the semaphore is never closed");
    let connected = match connect(&address).await {
        Ok(mut s) => match s.write_all(&[0]).await {
            Ok(()) => Ok(s),
            Err(e) => Err(format!("the first byte: {e}")),
        },
        Err(e) => Err(e),
    };
    drop(permit);
    opened.fetch_add(1, Ordering::SeqCst);
    let mut stream = match connected {
        Ok(s) => s,
        Err(e) => return Ending::NotConnected(e),
    };
    let since = Instant::now();
    let mut reply = Vec::new();
    match tokio::time::timeout(hold, read_until_closed(&mut stream, &mut reply)).await {
        Ok(()) => Ending::Closed {
            after: since.elapsed(),
            sent: 1,
            reply,
        },
        Err(_) => Ending::Open,
    }
}
