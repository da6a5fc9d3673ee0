//! One keep-alive HTTP/1.1 connection over hyper's low-level client, and the error codes
//! Artillery reports (`ECONNREFUSED`, `ETIMEDOUT`, ...).
//!
//! Why the low-level client: no pool, no per-request host lookup, no extra task hops. The
//! measurement loops with `--engine hyper` own one connection per task; the default engine
//! and scripts use [`crate::wire`] (scripts one connection per virtual user and host, as
//! Artillery does by default), with this module's requests, responses and error codes.

use std::{io, net::SocketAddr, time::Duration};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The sending half of a connection.
pub type Sender = http1::SendRequest<Full<Bytes>>;
/// The connection's I/O driver; it must be polled (spawned or selected) while requests run.
pub type Driver = http1::Connection<TokioIo<crate::tls::Stream>, Full<Bytes>>;

/// A failed request or connection, named with Node's error codes so reports read like
/// Artillery's (`errors.ECONNREFUSED`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {detail}")]
pub struct HttpError {
    pub code: &'static str,
    pub detail: String,
}

impl HttpError {
    pub fn new(code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: detail.into(),
        }
    }

    pub fn timeout(after: Duration) -> Self {
        Self::new(
            "ETIMEDOUT",
            format!("no response within {:.3} s", after.as_secs_f64()),
        )
    }

    pub fn from_io(err: &io::Error) -> Self {
        Self::new(io_code(err), err.to_string())
    }

    pub fn from_hyper(err: &hyper::Error) -> Self {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(e) = source {
            if let Some(io) = e.downcast_ref::<io::Error>() {
                return Self::new(io_code(io), err.to_string());
            }
            source = e.source();
        }
        let code = if err.is_parse() || err.is_parse_status() {
            "EPROTO"
        } else {
            // Closed or canceled mid-message: Node calls this "socket hang up", ECONNRESET.
            "ECONNRESET"
        };
        Self::new(code, err.to_string())
    }
}

fn io_code(err: &io::Error) -> &'static str {
    use io::ErrorKind as K;
    match err.kind() {
        K::ConnectionRefused => "ECONNREFUSED",
        K::ConnectionReset => "ECONNRESET",
        K::ConnectionAborted => "ECONNABORTED",
        K::TimedOut => "ETIMEDOUT",
        K::BrokenPipe => "EPIPE",
        K::AddrNotAvailable => "EADDRNOTAVAIL",
        K::AddrInUse => "EADDRINUSE",
        K::HostUnreachable => "EHOSTUNREACH",
        K::NetworkUnreachable => "ENETUNREACH",
        K::UnexpectedEof => "ECONNRESET",
        _ => match err.raw_os_error() {
            Some(24) => "EMFILE",
            _ => "EIO",
        },
    }
}

/// Resolves `host:port` to one socket address, IPv4 first: `localhost` often resolves to
/// `::1` first while local servers listen on `127.0.0.1` only.
pub async fn resolve(host: &str, port: u16) -> Result<SocketAddr, HttpError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| HttpError::new("ENOTFOUND", format!("cannot resolve {host}: {e}")))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| HttpError::new("ENOTFOUND", format!("{host} has no address")))
}

/// Opens a TCP connection with `TCP_NODELAY` (both clients use it).
pub async fn tcp_connect(addr: SocketAddr) -> Result<TcpStream, HttpError> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| HttpError::from_io(&e))?;
    stream
        .set_nodelay(true)
        .map_err(|e| HttpError::from_io(&e))?;
    Ok(stream)
}

/// Opens a connection (TLS to `host` when `tls` is given) and performs the (no-op) HTTP/1
/// handshake.
pub async fn connect(
    addr: SocketAddr,
    tls: Option<(&crate::tls::Tls, &str)>,
) -> Result<(Sender, Driver), HttpError> {
    let stream = crate::tls::connect(addr, tls).await?;
    http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| HttpError::from_hyper(&e))
}

/// A request ready to send; cheap to clone (the URI and body are reference-counted).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The request as bytes on the wire, for [`crate::wire`].
    pub wire: Bytes,
}

impl Prepared {
    /// `path_and_query` must be origin-form (`/a?b=c`); `host` becomes the Host header.
    pub fn new(
        method: Method,
        path_and_query: &str,
        host: &str,
        headers: &[(String, String)],
        body: Bytes,
    ) -> Result<Self, String> {
        Self::with_defaults(method, path_and_query, host, headers, body, &[])
    }

    /// As [`Prepared::new`], plus `defaults` for the headers `headers` does not set (a
    /// script's `User-Agent`), without allocating them.
    pub fn with_defaults(
        method: Method,
        path_and_query: &str,
        host: &str,
        headers: &[(String, String)],
        body: Bytes,
        defaults: &[(header::HeaderName, &'static str)],
    ) -> Result<Self, String> {
        let uri: Uri = path_and_query
            .parse()
            .map_err(|e| format!("invalid request path {path_and_query:?}: {e}"))?;
        let mut map = HeaderMap::with_capacity(headers.len() + 1);
        let host =
            HeaderValue::from_str(host).map_err(|e| format!("invalid host {host:?}: {e}"))?;
        map.insert(header::HOST, host);
        for (name, value) in headers {
            let name = header::HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|e| format!("invalid header name {name:?}: {e}"))?;
            let value = HeaderValue::from_str(value.trim())
                .map_err(|e| format!("invalid value for header {name}: {e}"))?;
            map.append(name, value);
        }
        for (name, value) in defaults {
            if !map.contains_key(name) {
                map.insert(name.clone(), HeaderValue::from_static(value));
            }
        }
        let mut prepared = Self {
            method,
            uri,
            headers: map,
            body,
            wire: Bytes::new(),
        };
        prepared.wire = Bytes::from(crate::wire::serialize(&prepared));
        Ok(prepared)
    }

    pub fn to_request(&self) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(self.body.clone()));
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }
}

/// A response with its body collected up to a limit.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: HeaderMap,
    /// The first `body_bytes_max` bytes of the body.
    pub body: Bytes,
    /// All body bytes received, including any beyond the limit.
    pub body_bytes: u64,
    /// From sending the request to the response head (Artillery's "firstByte" phase).
    pub first_byte: Duration,
    /// From sending the request to the body's end (Artillery's "total" phase).
    pub total: Duration,
}

/// Sends one request and discards the body; returns the status and body size.
/// The fast path for the measurement loops; the caller awaits `sender.ready()` first.
pub async fn send_discard(
    sender: &mut Sender,
    req: Request<Full<Bytes>>,
) -> Result<(u16, u64), HttpError> {
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| HttpError::from_hyper(&e))?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut body_bytes = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| HttpError::from_hyper(&e))?;
        if let Some(data) = frame.data_ref() {
            body_bytes += data.len() as u64;
        }
    }
    Ok((status, body_bytes))
}
