//! A minimal HTTP/1.1 keep-alive client for the measurement loops: write the request bytes,
//! read until one whole response is in the buffer, parse the head with `httparse`, skip the
//! body. No pipelining, no redirects; TLS through [`crate::tls::Stream`].
//!
//! Why next to hyper: the closed model must keep up with `wrk`. Profiles of hyper's client
//! showed ~3.3 us of user CPU per request (dispatcher channels, header maps, body channel)
//! against ~0.5 us for wrk; on a 2-core box that CPU is taken from the server under test.
//! This path does what wrk does. Scripts (`throng load run`) use it too, through
//! [`Conn::send`], which keeps what a script reads (status, headers, the body up to a limit,
//! the times to the head and to the end); `Engine::Hyper` selects hyper's client for
//! measurements (see RESULTS.md for both figures).

use std::net::SocketAddr;

use bytes::{Buf, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::tls::{Stream, Tls};

use crate::http::HttpError;

/// Largest response head accepted; beyond it the response is rejected as `EPROTO`.
pub const HEAD_BYTES_MAX: usize = 64 * 1024;
const HEADERS_MAX: usize = 64;
const READ_CHUNK: usize = 16 * 1024;

/// One keep-alive connection.
pub struct Conn {
    stream: Stream,
    buf: BytesMut,
    /// False after `Connection: close` or a body delimited by the end of the stream.
    reusable: bool,
}

/// How the response body ends.
enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

impl Conn {
    /// Connects to `addr`, with TLS to `host` when `tls` is given.
    pub async fn connect(addr: SocketAddr, tls: Option<(&Tls, &str)>) -> Result<Self, HttpError> {
        let stream = crate::tls::connect(addr, tls).await?;
        Ok(Self {
            stream,
            buf: BytesMut::with_capacity(READ_CHUNK),
            reusable: true,
        })
    }

    pub fn is_reusable(&self) -> bool {
        self.reusable
    }

    /// Whether another request may be sent on the connection: neither side closed it. An
    /// idle connection the server closed (its keep-alive timeout) reads as ended at once,
    /// without waiting; bytes no request asked for make it unusable too. Nothing arrived
    /// since the last response (the socket's readiness, known to the runtime without a
    /// system call): open. Something did (the end, or TLS records such as a session
    /// ticket): one read that does not wait tells which.
    pub fn is_open(&mut self) -> bool {
        if !self.reusable || !self.buf.is_empty() {
            return false;
        }
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match self.stream.tcp().poll_read_ready(&mut cx) {
            std::task::Poll::Pending => return true,
            std::task::Poll::Ready(Err(_)) => {
                self.reusable = false;
                return false;
            }
            std::task::Poll::Ready(Ok(())) => {}
        }
        self.buf.reserve(READ_CHUNK);
        let read = std::pin::pin!(self.stream.read_buf(&mut self.buf));
        match std::future::Future::poll(read, &mut cx) {
            std::task::Poll::Pending => true,
            std::task::Poll::Ready(_) => {
                self.reusable = false;
                false
            }
        }
    }

    /// Sends one serialized request and reads its response; returns status and body bytes.
    pub async fn exchange(
        &mut self,
        request: &[u8],
        head_only: bool,
    ) -> Result<(u16, u64), HttpError> {
        self.stream
            .write_all(request)
            .await
            .map_err(|e| HttpError::from_io(&e))?;
        let (status, head_len, framing) = self.read_head(head_only, None).await?;
        self.buf.advance(head_len);
        let body = self.body(framing, &mut Sink::count_only()).await?;
        Ok((status, body))
    }

    /// Sends one serialized request and reads its whole response: its status, headers and at
    /// most `body_bytes_max` bytes of its body (every byte counted), with the times from
    /// sending to the final response's head and to its body's end. Informational answers
    /// (1xx) before the final one are read past.
    pub async fn send(
        &mut self,
        request: &[u8],
        head_only: bool,
        body_bytes_max: usize,
    ) -> Result<crate::http::Response, HttpError> {
        let started = std::time::Instant::now();
        self.stream
            .write_all(request)
            .await
            .map_err(|e| HttpError::from_io(&e))?;
        let (status, headers, framing) = loop {
            let mut headers = HeaderMap::new();
            let (status, head_len, framing) = self.read_head(head_only, Some(&mut headers)).await?;
            self.buf.advance(head_len);
            if !(100..200).contains(&status) || status == 101 {
                break (status, headers, framing);
            }
        };
        let first_byte = started.elapsed();
        let mut kept = BytesMut::new();
        let body_bytes = self
            .body(
                framing,
                &mut Sink {
                    kept: Some(&mut kept),
                    max: body_bytes_max,
                },
            )
            .await?;
        Ok(crate::http::Response {
            status,
            headers,
            body: kept.freeze(),
            body_bytes,
            first_byte,
            total: started.elapsed(),
        })
    }

    async fn body(&mut self, framing: Framing, sink: &mut Sink<'_>) -> Result<u64, HttpError> {
        match framing {
            Framing::Length(n) => self.skip_exact(n, sink).await,
            Framing::Chunked => self.skip_chunked(sink).await,
            Framing::UntilClose => self.skip_to_close(sink).await,
        }
    }

    async fn fill(&mut self) -> Result<(), HttpError> {
        self.buf.reserve(READ_CHUNK);
        let n = self
            .stream
            .read_buf(&mut self.buf)
            .await
            .map_err(|e| HttpError::from_io(&e))?;
        if n == 0 {
            self.reusable = false;
            return Err(HttpError::new(
                "ECONNRESET",
                "connection closed before the response was complete",
            ));
        }
        Ok(())
    }

    async fn read_head(
        &mut self,
        head_only: bool,
        mut keep: Option<&mut HeaderMap>,
    ) -> Result<(u16, usize, Framing), HttpError> {
        loop {
            if let Some(parsed) = self.parse_head(head_only, keep.as_deref_mut())? {
                return Ok(parsed);
            }
            if self.buf.len() > HEAD_BYTES_MAX {
                return Err(HttpError::new(
                    "EPROTO",
                    format!("response head larger than {HEAD_BYTES_MAX} bytes"),
                ));
            }
            self.fill().await?;
        }
    }

    /// The head in the buffer, if whole: status, length and how the body ends; its
    /// headers go into `keep` when given.
    fn parse_head(
        &mut self,
        head_only: bool,
        keep: Option<&mut HeaderMap>,
    ) -> Result<Option<(u16, usize, Framing)>, HttpError> {
        let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
        let mut resp = httparse::Response::new(&mut headers);
        let head_len = match resp.parse(&self.buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(HttpError::new("EPROTO", format!("invalid response: {e}"))),
        };
        let status = resp.code.unwrap_or(0);
        if let Some(map) = keep {
            for h in resp.headers.iter() {
                let name = HeaderName::from_bytes(h.name.as_bytes());
                let value = HeaderValue::from_bytes(h.value);
                let (Ok(name), Ok(value)) = (name, value) else {
                    return Err(HttpError::new(
                        "EPROTO",
                        format!("invalid response header {:?}", h.name),
                    ));
                };
                map.append(name, value);
            }
        }
        let mut framing = Framing::UntilClose;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let n = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok());
                let n = n.ok_or_else(|| HttpError::new("EPROTO", "invalid content-length"))?;
                framing = Framing::Length(n);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding")
                && contains_token(h.value, b"chunked")
            {
                framing = Framing::Chunked;
            } else if h.name.eq_ignore_ascii_case("connection") && contains_token(h.value, b"close")
            {
                self.reusable = false;
            }
        }
        // Responses that never carry a body, whatever their headers say.
        if head_only || status == 204 || status == 304 || (100..200).contains(&status) {
            framing = Framing::Length(0);
        }
        if resp.version == Some(0) {
            self.reusable = false;
        }
        Ok(Some((status, head_len, framing)))
    }

    async fn skip_exact(&mut self, n: u64, sink: &mut Sink<'_>) -> Result<u64, HttpError> {
        let mut left = n;
        loop {
            let take = left.min(self.buf.len() as u64);
            sink.take(&self.buf[..take as usize]);
            self.buf.advance(take as usize);
            left -= take;
            if left == 0 {
                return Ok(n);
            }
            self.fill().await?;
        }
    }

    async fn skip_to_close(&mut self, sink: &mut Sink<'_>) -> Result<u64, HttpError> {
        self.reusable = false;
        let mut total = self.buf.len() as u64;
        sink.take(&self.buf);
        self.buf.clear();
        loop {
            self.buf.reserve(READ_CHUNK);
            let n = self
                .stream
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| HttpError::from_io(&e))?;
            if n == 0 {
                return Ok(total);
            }
            total += n as u64;
            sink.take(&self.buf);
            self.buf.clear();
        }
    }

    async fn skip_chunked(&mut self, sink: &mut Sink<'_>) -> Result<u64, HttpError> {
        let mut total = 0u64;
        loop {
            let line = self.read_line().await?;
            let size_text = line.split(';').next().unwrap_or("").trim();
            let size = u64::from_str_radix(size_text, 16).map_err(|_| {
                HttpError::new("EPROTO", format!("invalid chunk size {size_text:?}"))
            })?;
            if size == 0 {
                // Trailers, then the empty line.
                while !self.read_line().await?.is_empty() {}
                return Ok(total);
            }
            self.skip_exact(size, sink).await?;
            total += size;
            if !self.read_line().await?.is_empty() {
                return Err(HttpError::new("EPROTO", "missing CRLF after chunk"));
            }
        }
    }

    async fn read_line(&mut self) -> Result<String, HttpError> {
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..pos]).into_owned();
                self.buf.advance(pos + 2);
                return Ok(line);
            }
            if self.buf.len() > HEAD_BYTES_MAX {
                return Err(HttpError::new("EPROTO", "chunk header line too long"));
            }
            self.fill().await?;
        }
    }
}

/// Where a body's bytes go: all counted by the caller, the first `max` kept.
struct Sink<'a> {
    kept: Option<&'a mut BytesMut>,
    max: usize,
}

impl Sink<'_> {
    fn count_only() -> Self {
        Sink { kept: None, max: 0 }
    }

    fn take(&mut self, bytes: &[u8]) {
        if let Some(kept) = self.kept.as_deref_mut() {
            let room = self.max.saturating_sub(kept.len());
            kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    }
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Serializes a request: request line, headers, `content-length` when there is a body.
pub fn serialize(p: &crate::http::Prepared) -> Vec<u8> {
    let path = p.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let mut out = Vec::with_capacity(128 + p.body.len());
    out.extend_from_slice(p.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in &p.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let needs_length = !p.body.is_empty() || matches!(p.method.as_str(), "POST" | "PUT" | "PATCH");
    if needs_length && !p.headers.contains_key(http::header::CONTENT_LENGTH) {
        out.extend_from_slice(format!("content-length: {}\r\n", p.body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&p.body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    async fn serve_once(responses: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            s.write_all(responses).await.unwrap();
            // Closing ends a body delimited by the end of the stream.
        });
        addr
    }

    #[tokio::test]
    async fn parses_length_chunked_and_close() {
        let addr = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello").await;
        let mut c = Conn::connect(addr, None).await.unwrap();
        assert_eq!(
            c.exchange(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n", false)
                .await
                .unwrap(),
            (200, 5)
        );
        assert!(c.is_reusable());

        let addr = serve_once(b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nx-t: 1\r\n\r\n").await;
        let mut c = Conn::connect(addr, None).await.unwrap();
        assert_eq!(
            c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap(),
            (201, 5)
        );

        let addr = serve_once(b"HTTP/1.1 500 Oops\r\nconnection: close\r\n\r\nbody!").await;
        let mut c = Conn::connect(addr, None).await.unwrap();
        assert_eq!(
            c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap(),
            (500, 5)
        );
        assert!(!c.is_reusable());
    }

    /// `send` keeps the headers and the body up to its limit, counting all of it, and reads
    /// past an informational answer; the connection then reads as closed once the server
    /// closed it, and as open while the server keeps it.
    #[tokio::test]
    async fn send_keeps_head_and_body_and_sees_a_closed_connection() {
        let addr = serve_once(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nx-a: 1\r\nx-a: 2\r\ncontent-length: 10\r\n\r\n0123456789",
        )
        .await;
        let mut c = Conn::connect(addr, None).await.unwrap();
        let r = c
            .send(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n", false, 4)
            .await
            .unwrap();
        assert_eq!((r.status, r.body_bytes), (200, 10));
        assert_eq!(&r.body[..], b"0123");
        assert_eq!(r.headers.get_all("x-a").iter().count(), 2);
        assert!(r.first_byte <= r.total);
        // The server's task ended and closed the socket.
        let mut open = true;
        for _ in 0..100 {
            open = c.is_open();
            if !open {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(!open, "a connection the server closed reads as closed");

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (hold, held) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
                .await
                .unwrap();
            let _ = held.await;
        });
        let mut c = Conn::connect(addr, None).await.unwrap();
        let r = c.send(b"GET / HTTP/1.1\r\n\r\n", false, 4).await.unwrap();
        assert_eq!((r.status, r.body_bytes), (204, 0));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(c.is_open(), "a kept connection reads as open");
        drop(hold);
    }
}
