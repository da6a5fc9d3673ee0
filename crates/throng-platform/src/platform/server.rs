//! The HTTP server's accept loop: hyper's HTTP/1.1 connections driven one
//! task each, with the limits `axum::serve` does not have (it runs hyper
//! without a timer): a cap on connections per server and per client
//! address, a header-read timeout, an idle keep-alive timeout, and graceful
//! shutdown. The body deadline and the total request time are enforced per
//! request by `body_limit` and `admission`.
//!
//! Each connection has one watchdog inside its own task (no task or timer
//! per request): it sleeps until the earliest moment the connection could be
//! overdue, and on waking closes it only if it is — no handler running, and
//! either no byte moved for `idle_timeout_ms`, or a request's first byte came
//! `header_read_timeout_ms` ago and its head is still not complete. A slow
//! client so costs one connection for a bounded time, never an admission slot
//! (a request holds a slot only once its head is complete, and then at most
//! until the body deadline while its body arrives).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::Instant;
use tower::ServiceExt;

use super::client_addr::{ClientCounts, ClientKey, TrustedProxies};
use crate::base::metrics::METRICS;

/// The connection-level limits (see `serve --help`).
#[derive(Clone, Debug)]
pub struct ConnLimits {
    /// From a request's first byte to the end of its head.
    pub header_read_timeout: Duration,
    /// A connection with no handler running and no byte moved for this long
    /// is closed (also one that never sends a byte).
    pub idle_timeout: Duration,
    pub connections_max: usize,
    /// Per client key (an IPv4 address, an IPv6 /64); trusted proxies are
    /// exempt, since every client behind them shares their address.
    pub connections_per_client_max: usize,
    /// How long a stop waits for open connections at most (the request
    /// timeout: every request ends within it, streams at the stop): a
    /// connection still open then is dropped rather than hold the exit.
    pub shutdown_grace: Duration,
}

/// Serves `app` on `listener` until `shutdown` resolves, then stops
/// accepting, lets every connection finish its requests (within
/// `shutdown_grace`), and returns.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    proxies: Arc<TrustedProxies>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let limits = Arc::new(limits);
    let connections = Arc::new(Semaphore::new(limits.connections_max));
    let per_client = Arc::new(ClientCounts::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and the like: back off instead of spinning.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            METRICS
                .http_connections_refused
                .with_label_values(&["server"])
                .inc();
            drop(stream);
            continue;
        };
        let client = match proxies.contains(peer.ip()) {
            true => None,
            false => {
                let key = ClientKey::of(peer.ip());
                match per_client.enter(key, limits.connections_per_client_max) {
                    Some(slot) => Some(slot),
                    None => {
                        METRICS
                            .http_connections_refused
                            .with_label_values(&["client"])
                            .inc();
                        drop(stream);
                        continue;
                    }
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let (app, limits, stop_rx) = (app.clone(), limits.clone(), stop_rx.clone());
        tokio::spawn(async move {
            serve_connection(stream, peer, app, &limits, stop_rx).await;
            drop(client);
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection holds a permit until it ends.
    let all = connections.acquire_many(limits.connections_max as u32);
    if tokio::time::timeout(limits.shutdown_grace, all)
        .await
        .is_err()
    {
        tracing::warn!(
            grace_ms = limits.shutdown_grace.as_millis() as u64,
            "connections still open after the shutdown grace; stopping without them"
        );
    }
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    limits: &ConnLimits,
    mut stop: watch::Receiver<bool>,
) {
    let clock = Arc::new(ConnClock::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        clock: clock.clone(),
    });
    let svc_clock = clock.clone();
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        let handling = Handling::enter(svc_clock.clone());
        req.extensions_mut().insert(ConnectInfo(peer));
        let app = app.clone();
        async move {
            let res = app.oneshot(req).await;
            drop(handling);
            res
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The watchdog below times header reads; hyper's own timer would also
    // cut idle keep-alive connections at the header timeout.
    builder.keep_alive(true).header_read_timeout(None);
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let wake = clock.next_check(limits);
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = clock.head_started.notified() => {}
            _ = tokio::time::sleep_until(wake) => {
                if let Some(reason) = clock.overdue(limits) {
                    METRICS.http_connections_timed_out.with_label_values(&[reason]).inc();
                    return; // dropping the connection closes the socket
                }
            }
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_err() || *stop.borrow() {
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// What the watchdog knows about one connection. Milliseconds since the
/// connection's start; 0 in `head_started_ms` means no head is being read.
struct ConnClock {
    origin: Instant,
    handling: AtomicU32,
    last_io_ms: AtomicU64,
    head_started_ms: AtomicU64,
    /// Wakes the watchdog when a head starts: its deadline may be earlier
    /// than the idle one it sleeps towards.
    head_started: Notify,
}

impl ConnClock {
    fn new() -> ConnClock {
        ConnClock {
            origin: Instant::now(),
            handling: AtomicU32::new(0),
            last_io_ms: AtomicU64::new(0),
            head_started_ms: AtomicU64::new(0),
            head_started: Notify::new(),
        }
    }

    /// Never 0, so 0 can mean "unset".
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64 + 1
    }

    fn at(&self, ms: u64) -> Instant {
        self.origin + Duration::from_millis(ms.saturating_sub(1))
    }

    fn on_read(&self) {
        let now = self.now_ms();
        self.last_io_ms.store(now, Ordering::Relaxed);
        if self.handling.load(Ordering::Relaxed) == 0
            && self.head_started_ms.load(Ordering::Relaxed) == 0
        {
            self.head_started_ms.store(now, Ordering::Relaxed);
            self.head_started.notify_one();
        }
    }

    fn on_write(&self) {
        self.last_io_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// The earliest moment the connection could be overdue.
    fn next_check(&self, limits: &ConnLimits) -> Instant {
        if self.handling.load(Ordering::Relaxed) > 0 {
            return Instant::now() + limits.header_read_timeout.min(limits.idle_timeout);
        }
        match self.head_started_ms.load(Ordering::Relaxed) {
            0 => self.at(self.last_io_ms.load(Ordering::Relaxed).max(1)) + limits.idle_timeout,
            started => self.at(started) + limits.header_read_timeout,
        }
    }

    /// Why the connection must close now, if it must.
    fn overdue(&self, limits: &ConnLimits) -> Option<&'static str> {
        if self.handling.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let now = Instant::now();
        match self.head_started_ms.load(Ordering::Relaxed) {
            0 => {
                let last = self.at(self.last_io_ms.load(Ordering::Relaxed).max(1));
                (now >= last + limits.idle_timeout).then_some("idle")
            }
            started => {
                (now >= self.at(started) + limits.header_read_timeout).then_some("header_read")
            }
        }
    }
}

/// A handler running on the connection: no header or idle timeout applies
/// meanwhile (the body deadline and the total request time do).
struct Handling(Arc<ConnClock>);

impl Handling {
    fn enter(clock: Arc<ConnClock>) -> Handling {
        clock.handling.fetch_add(1, Ordering::Relaxed);
        clock.head_started_ms.store(0, Ordering::Relaxed);
        Handling(clock)
    }
}

impl Drop for Handling {
    fn drop(&mut self) {
        self.0.on_write();
        self.0.handling.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The socket, noting when bytes move.
struct Watched {
    inner: TcpStream,
    clock: Arc<ConnClock>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.clock.on_read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.clock.on_write();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.clock.on_write();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
