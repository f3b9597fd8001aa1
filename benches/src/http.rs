//! A minimal HTTP/1.1 client for the peers' HTTP APIs (InfluxDB 1.x, VictoriaMetrics): no HTTP
//! dependency, one keep-alive connection over tokio's `TcpStream`.

use std::fmt::Write as _;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Largest response header block accepted, in bytes.
const RESPONSE_HEAD_BYTES_MAX: usize = 64 * 1024;

/// A minimal HTTP/1.1 client: one keep-alive connection, `POST` only, `Content-Length` bodies
/// out, `Content-Length`, chunked or close-delimited bodies in.
pub struct HttpConnection {
    address: String,
    stream: Option<BufReader<TcpStream>>,
    request: Vec<u8>,
    body_bytes_max: usize,
}

pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl HttpConnection {
    /// Connects to `address` (`host:port`); a response body over `body_bytes_max` is an error.
    pub async fn connect(address: &str, body_bytes_max: usize) -> std::io::Result<HttpConnection> {
        let mut c = HttpConnection {
            address: address.to_string(),
            stream: None,
            request: Vec::new(),
            body_bytes_max,
        };
        c.reconnect().await?;
        Ok(c)
    }

    async fn reconnect(&mut self) -> std::io::Result<()> {
        let stream = TcpStream::connect(&self.address).await?;
        stream.set_nodelay(true)?;
        self.stream = Some(BufReader::with_capacity(16 * 1024, stream));
        Ok(())
    }

    /// Sends one `POST`; reconnects once when a kept-alive connection turns out closed.
    /// Returns the response and whether a reconnect was needed.
    pub async fn post(&mut self, path: &str, body: &[u8]) -> std::io::Result<(Response, bool)> {
        self.request.clear();
        write!(
            Adapter(&mut self.request),
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: {}\r\n\r\n",
            self.address,
            body.len()
        )
        .expect("writing to a Vec cannot fail");
        let reused = self.stream.is_some();
        match self.exchange(body).await {
            Ok(r) => Ok((r, false)),
            Err(_) if reused => {
                self.reconnect().await?;
                Ok((self.exchange(body).await?, true))
            }
            Err(e) => Err(e),
        }
    }

    async fn exchange(&mut self, body: &[u8]) -> std::io::Result<Response> {
        if self.stream.is_none() {
            self.reconnect().await?;
        }
        let stream = self.stream.as_mut().expect("connected above");
        let result = async {
            stream.get_mut().write_all(&self.request).await?;
            stream.get_mut().write_all(body).await?;
            read_response(stream, self.body_bytes_max).await
        }
        .await;
        match result {
            Ok((response, keep_alive)) => {
                if !keep_alive {
                    self.stream = None;
                }
                Ok(response)
            }
            Err(e) => {
                self.stream = None;
                Err(e)
            }
        }
    }
}

/// `fmt::Write` into a byte buffer.
struct Adapter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Adapter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

fn invalid(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// Reads one line (CRLF kept) into `line`; end of stream is an error.
async fn read_line(stream: &mut BufReader<TcpStream>, line: &mut String) -> std::io::Result<usize> {
    line.clear();
    let n = stream.read_line(line).await?;
    if n == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed before the response ended",
        ));
    }
    Ok(n)
}

/// Reads one response; the flag says whether the connection may be reused.
async fn read_response(
    stream: &mut BufReader<TcpStream>,
    body_bytes_max: usize,
) -> std::io::Result<(Response, bool)> {
    let mut line = String::new();
    let mut head_bytes = 0;
    head_bytes += read_line(stream, &mut line).await?;
    let mut parts = line.split_whitespace();
    let version = parts.next().unwrap_or_default().to_string();
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid(format!("bad status line {line:?}")))?;
    let mut content_length = None;
    let mut chunked = false;
    let mut keep_alive = version == "HTTP/1.1";
    loop {
        head_bytes += read_line(stream, &mut line).await?;
        if head_bytes > RESPONSE_HEAD_BYTES_MAX {
            return Err(invalid(format!(
                "response head over {RESPONSE_HEAD_BYTES_MAX} bytes"
            )));
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(invalid(format!("bad header {header:?}")));
        };
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => {
                let n: usize = value
                    .parse()
                    .map_err(|_| invalid(format!("bad Content-Length {value:?}")))?;
                content_length = Some(n);
            }
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            "connection" => {
                if value.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if value.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
            _ => {}
        }
    }
    let too_big = |n: usize| {
        if n > body_bytes_max {
            Err(invalid(format!(
                "response body over {body_bytes_max} bytes"
            )))
        } else {
            Ok(())
        }
    };
    let mut body = Vec::new();
    if status == 204 || status == 304 || (100..200).contains(&status) {
        // No body by definition.
    } else if chunked {
        loop {
            read_line(stream, &mut line).await?;
            let size_text = line.trim_end().split(';').next().unwrap_or_default();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
            too_big(body.len() + size)?;
            let start = body.len();
            body.resize(start + size, 0);
            stream.read_exact(&mut body[start..]).await?;
            read_line(stream, &mut line).await?; // the CRLF after the chunk (or the trailer end)
            if size == 0 {
                break;
            }
        }
    } else if let Some(n) = content_length {
        too_big(n)?;
        body.resize(n, 0);
        stream.read_exact(&mut body).await?;
    } else {
        // Delimited by the connection closing.
        (&mut *stream)
            .take(body_bytes_max as u64 + 1)
            .read_to_end(&mut body)
            .await?;
        too_big(body.len())?;
        keep_alive = false;
    }
    Ok((Response { status, body }, keep_alive))
}

/// Percent-encodes a query value (unreserved characters kept).
pub fn query_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            write!(out, "%{b:02X}").expect("writing to a String cannot fail");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(
            query_escape("CREATE DATABASE \"b\""),
            "CREATE%20DATABASE%20%22b%22"
        );
        assert_eq!(query_escape("bench_1"), "bench_1");
    }
}
