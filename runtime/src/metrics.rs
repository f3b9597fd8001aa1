//! The one metrics page writer and HTTP responder both nodes serve on their metrics address.
//!
//! [`Page`] writes the Prometheus text format (`# HELP`, `# TYPE`, samples with optional labels).
//! A node declares each metric once as a [`MetricDoc`] (name, kind, help) in an [`Area`] that
//! also reads its value: the page ([`render`]) is written from the node's list of areas, and so
//! is the docs' table of metrics ([`metric_table`]).
//! [`serve`] is a minimal HTTP/1.0 responder: one request per connection, at most
//! [`REQUEST_BYTES_MAX`] bytes read (headers and an announced body), at most
//! [`CONNECTIONS_MAX`] connections at once (more are closed at once rather than queued), and
//! [`READ_TIMEOUT`] per read. A node passes a handler that turns the parsed [`HttpRequest`] into
//! a [`HttpResponse`]; the DataNode's also arms failpoints (`PUT /fail/<name>`).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Most concurrent connections.
pub const CONNECTIONS_MAX: usize = 16;
/// Most bytes of one request.
pub const REQUEST_BYTES_MAX: usize = 8192;
/// Longest wait for the next bytes of a request.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause after a failed accept (e.g. out of file descriptors).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Increments a counter.
pub fn inc(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Adds to a counter.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// A counter's value.
pub fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// What a metric counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// Only goes up (until the process restarts).
    Counter,
    /// Goes up and down.
    Gauge,
}

impl MetricKind {
    /// The Prometheus `# TYPE`.
    pub const fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
        }
    }
}

/// One metric as a node declares it: what the page prints and the docs' table lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricDoc {
    /// The metric's name.
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: MetricKind,
    /// The `# HELP` text.
    pub help: &'static str,
    /// The label that tells its samples apart (one sample per value), if any.
    pub label: Option<&'static str>,
}

impl MetricDoc {
    /// A counter without labels.
    pub const fn counter(name: &'static str, help: &'static str) -> MetricDoc {
        MetricDoc {
            name,
            kind: MetricKind::Counter,
            help,
            label: None,
        }
    }

    /// A gauge without labels.
    pub const fn gauge(name: &'static str, help: &'static str) -> MetricDoc {
        MetricDoc {
            name,
            kind: MetricKind::Gauge,
            help,
            label: None,
        }
    }

    /// This metric with one sample per value of `label`.
    pub const fn labelled(self, label: &'static str) -> MetricDoc {
        MetricDoc {
            label: Some(label),
            ..self
        }
    }
}

/// One area of a node's metrics page: its metrics, each declared once, and how the node's
/// state `S` gives their values. A node lists its areas once; the page ([`render`]) and the
/// docs' table ([`metric_table`]) are both written from that list, so neither can leave out a
/// metric the other has.
pub trait Area<S: ?Sized> {
    /// The metrics, in page order.
    fn docs(&self) -> &[MetricDoc];
    /// Writes the metrics with their values now (or nothing, when the state has none).
    fn write(&self, page: &mut Page, state: &S);
}

/// Unlabelled metrics whose values are read together.
pub struct Values<S: ?Sized, const N: usize> {
    /// The metrics.
    pub docs: [MetricDoc; N],
    /// Their values, in the order of `docs`; `None` leaves them off the page.
    pub read: fn(&S) -> Option<[u64; N]>,
}

impl<S: ?Sized, const N: usize> Area<S> for Values<S, N> {
    fn docs(&self) -> &[MetricDoc] {
        &self.docs
    }

    fn write(&self, page: &mut Page, state: &S) {
        if let Some(values) = (self.read)(state) {
            page.metrics(&self.docs, values);
        }
    }
}

/// A value of the label of [`Labelled`] metrics, and each metric's value for it.
pub type LabelledRow<const N: usize> = (u64, [u64; N]);

/// Metrics with one sample per value of their label (each doc [`MetricDoc::labelled`]).
pub struct Labelled<S: ?Sized, const N: usize> {
    /// The metrics.
    pub docs: [MetricDoc; N],
    /// Per value of the label, the values in the order of `docs`; `None` leaves them off the
    /// page.
    pub read: fn(&S) -> Option<Vec<LabelledRow<N>>>,
}

impl<S: ?Sized, const N: usize> Area<S> for Labelled<S, N> {
    fn docs(&self) -> &[MetricDoc] {
        &self.docs
    }

    fn write(&self, page: &mut Page, state: &S) {
        if let Some(rows) = (self.read)(state) {
            for (i, doc) in self.docs.iter().enumerate() {
                page.labelled(doc, rows.iter().map(|(label, values)| (label, values[i])));
            }
        }
    }
}

/// The page of `areas`, in order, with `state`'s values.
pub fn render<S: ?Sized>(areas: &[&dyn Area<S>], state: &S) -> String {
    let mut page = Page::new();
    for area in areas {
        area.write(&mut page, state);
    }
    page.into_string()
}

/// The markdown table (`| metric | type | meaning |`) of the metrics of `areas`, in page order;
/// a labelled metric is written `name{label}`.
pub fn metric_table<S: ?Sized>(areas: &[&dyn Area<S>]) -> String {
    crate::docs::markdown_table(
        ["metric", "type", "meaning"],
        areas.iter().flat_map(|area| area.docs()).map(|m| {
            let name = match m.label {
                Some(label) => format!("`{}{{{label}}}`", m.name),
                None => format!("`{}`", m.name),
            };
            [name, m.kind.as_str().to_string(), m.help.to_string()]
        }),
    )
}

/// A Prometheus text page being written.
#[derive(Default)]
pub struct Page {
    out: String,
}

impl Page {
    /// An empty page.
    pub fn new() -> Page {
        Page::default()
    }

    /// A counter without labels.
    pub fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.samples(name, "counter", help, [(String::new(), value)]);
    }

    /// A gauge without labels.
    pub fn gauge(&mut self, name: &str, help: &str, value: u64) {
        self.samples(name, "gauge", help, [(String::new(), value)]);
    }

    /// The unlabelled metric `doc` with `value`.
    pub fn metric(&mut self, doc: &MetricDoc, value: u64) {
        debug_assert_eq!(doc.label, None, "{} is labelled", doc.name);
        self.samples(
            doc.name,
            doc.kind.as_str(),
            doc.help,
            [(String::new(), value)],
        );
    }

    /// The unlabelled metrics `docs`, each with the value at its index in `values`.
    pub fn metrics<const N: usize>(&mut self, docs: &[MetricDoc; N], values: [u64; N]) {
        for (doc, value) in docs.iter().zip(values) {
            self.metric(doc, value);
        }
    }

    /// The labelled metric `doc` with one sample per `(label value, value)`.
    pub fn labelled<L: std::fmt::Display>(
        &mut self,
        doc: &MetricDoc,
        samples: impl IntoIterator<Item = (L, u64)>,
    ) {
        let label = doc
            .label
            .unwrap_or_else(|| panic!("{} has no label", doc.name));
        let samples = samples
            .into_iter()
            .map(|(value_of_label, value)| (format!("{{{label}=\"{value_of_label}\"}}"), value));
        self.samples(doc.name, doc.kind.as_str(), doc.help, samples);
    }

    /// A metric of `kind` (`counter` or `gauge`) with one sample per `(labels, value)`; labels
    /// are written as given, e.g. `{data_node_id="1"}`, or empty.
    pub fn samples(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: impl IntoIterator<Item = (String, u64)>,
    ) {
        debug_assert!(
            name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "metric name {name:?}"
        );
        debug_assert!(kind == "counter" || kind == "gauge", "metric kind {kind:?}");
        // Writing into a String cannot fail.
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(self.out, "{name}{labels} {value}");
        }
    }

    /// The page's text.
    pub fn into_string(self) -> String {
        self.out
    }
}

/// A request as the handler sees it.
#[derive(Debug, PartialEq, Eq)]
pub struct HttpRequest<'a> {
    /// `GET`, `PUT`, …; empty when the request line did not arrive.
    pub method: &'a str,
    /// The request path; empty when the request line did not arrive.
    pub path: &'a str,
    /// The body announced by `Content-Length`, as much of it as arrived.
    pub body: &'a [u8],
}

/// The handler's answer.
#[derive(Debug, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status line's code and reason, e.g. `200 OK`.
    pub status: &'static str,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl HttpResponse {
    /// 200 with a Prometheus page.
    pub fn metrics(body: String) -> HttpResponse {
        HttpResponse {
            status: "200 OK",
            content_type: "text/plain; version=0.0.4",
            body,
        }
    }

    /// A plain-text answer.
    pub fn text(status: &'static str, body: String) -> HttpResponse {
        HttpResponse {
            status,
            content_type: "text/plain",
            body,
        }
    }

    fn encode(&self) -> String {
        format!(
            "HTTP/1.0 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
            self.status,
            self.content_type,
            self.body.len(),
            self.body
        )
    }
}

/// Where the headers of `request` end (the index after the blank line), once they have.
fn headers_end(request: &[u8]) -> Option<usize> {
    request
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

/// The `Content-Length` of complete headers (0 when absent or malformed).
fn content_length(headers: &str) -> usize {
    headers
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The headers and the body announced by `Content-Length` have arrived.
fn request_complete(request: &[u8]) -> bool {
    let Some(end) = headers_end(request) else {
        return false;
    };
    let headers = String::from_utf8_lossy(&request[..end]);
    request.len() >= end + content_length(&headers)
}

/// Parses what arrived of a request; a request that did not arrive whole is still answered (a
/// scrape with an unfinished request gets the page).
pub fn parse_request(request: &[u8]) -> HttpRequest<'_> {
    let end = headers_end(request).unwrap_or(request.len());
    let head = std::str::from_utf8(&request[..end]).unwrap_or("");
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let method = words.next().unwrap_or("");
    let path = words.next().unwrap_or("");
    let length = content_length(head).min(request.len() - end);
    HttpRequest {
        method,
        path,
        body: &request[end..end + length],
    }
}

/// Serves `handler`'s answers on `listener` until the task is aborted (see the module comment).
pub async fn serve<F>(listener: TcpListener, handler: F)
where
    F: Fn(&HttpRequest<'_>) -> HttpResponse + Send + Sync + 'static,
{
    let handler = Arc::new(handler);
    let permits = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            tokio::time::sleep(ACCEPT_BACKOFF).await;
            continue;
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            continue;
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut request = vec![0u8; REQUEST_BYTES_MAX];
            let mut read = 0;
            while read < request.len() {
                match tokio::time::timeout(READ_TIMEOUT, socket.read(&mut request[read..])).await {
                    Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                    Ok(Ok(n)) => {
                        read += n;
                        if request_complete(&request[..read]) {
                            break;
                        }
                    }
                }
            }
            let response = handler(&parse_request(&request[..read]));
            if let Err(e) = socket.write_all(response.encode().as_bytes()).await {
                tracing::debug!("metrics response: {e}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_complete_once_its_announced_body_arrived() {
        assert!(!request_complete(b"GET /metrics HTTP/1.0\r\n"));
        assert!(request_complete(b"GET /metrics HTTP/1.0\r\n\r\n"));
        let put = b"PUT /fail/x HTTP/1.0\r\nContent-Length: 6\r\n\r\nreturn";
        assert!(!request_complete(&put[..put.len() - 1]));
        assert!(request_complete(put));
    }

    #[test]
    fn requests_parse_whole_or_in_part() {
        let put = b"PUT /fail/x HTTP/1.0\r\nContent-Length: 3\r\n\r\noffEXTRA";
        assert_eq!(
            parse_request(put),
            HttpRequest {
                method: "PUT",
                path: "/fail/x",
                body: b"off"
            }
        );
        assert_eq!(parse_request(b"GET /met").path, "/met");
        assert_eq!(parse_request(b"").method, "");
        assert_eq!(
            parse_request(b"PUT /x HTTP/1.0\r\nContent-Length: 99\r\n\r\nab").body,
            b"ab"
        );
    }

    #[test]
    fn a_page_is_prometheus_text() {
        let mut page = Page::new();
        page.counter("a_total", "As.", 3);
        page.samples(
            "b",
            "gauge",
            "Bs.",
            [("{n=\"1\"}".to_string(), 1), ("{n=\"2\"}".to_string(), 0)],
        );
        assert_eq!(
            page.into_string(),
            "# HELP a_total As.\n# TYPE a_total counter\na_total 3\n\
             # HELP b Bs.\n# TYPE b gauge\nb{n=\"1\"} 1\nb{n=\"2\"} 0\n"
        );
    }

    #[test]
    fn a_declared_metric_is_printed_and_tabled_alike() {
        struct Node {
            up: bool,
            peers: Vec<u64>,
        }
        const STATE: Values<Node, 2> = Values {
            docs: [
                MetricDoc::counter("a_total", "As."),
                MetricDoc::gauge("b", "Bs | more."),
            ],
            read: |node| Some([3, u64::from(node.up)]),
        };
        const PEERS: Labelled<Node, 1> = Labelled {
            docs: [MetricDoc::gauge("c", "Cs.").labelled("peer")],
            read: |node| {
                node.up
                    .then(|| node.peers.iter().map(|&p| (p, [p * 10])).collect())
            },
        };
        const PAGE: &[&dyn Area<Node>] = &[&STATE, &PEERS];
        let node = Node {
            up: true,
            peers: vec![1, 2],
        };
        assert_eq!(
            render(PAGE, &node),
            "# HELP a_total As.\n# TYPE a_total counter\na_total 3\n\
             # HELP b Bs | more.\n# TYPE b gauge\nb 1\n\
             # HELP c Cs.\n# TYPE c gauge\nc{peer=\"1\"} 10\nc{peer=\"2\"} 20\n"
        );
        let down = Node {
            up: false,
            peers: vec![1],
        };
        assert!(!render(PAGE, &down).contains("# HELP c "));
        assert_eq!(
            metric_table(PAGE),
            "| metric | type | meaning |\n| --- | --- | --- |\n\
             | `a_total` | counter | As. |\n\
             | `b` | gauge | Bs \\| more. |\n\
             | `c{peer}` | gauge | Cs. |\n"
        );
    }

    #[tokio::test]
    async fn serves_the_handlers_answer_over_http() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, |r: &HttpRequest<'_>| {
            HttpResponse::text("200 OK", format!("{} {}", r.method, r.path))
        }));
        let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
        socket
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.0 200 OK\r\n"), "{answer}");
        assert!(answer.ends_with("\r\n\r\nGET /metrics"), "{answer}");
        server.abort();
    }
}
