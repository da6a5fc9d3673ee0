//! Long-lived answers (Server-Sent Events), bounded like every request:
//!
//! - a stream lives at most the request timeout (`--request-timeout-ms`),
//!   then the server ends it and the client opens a new one;
//! - it sends a keep-alive comment at least every third of the idle timeout
//!   (and every 15 s at most), so neither the server's idle watchdog nor a
//!   proxy closes a quiet stream;
//! - it ends as soon as the node starts to stop (SIGTERM's drain, or
//!   `Running::stop`), and no new stream is opened from then on: a stop
//!   never waits on an open stream.
//!
//! A stream that ends sends a last event (or comment) naming why, so a page
//! can tell "reconnect now" (`lifetime`) from "this node is stopping"
//! (`stopping`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use tokio::sync::watch;

use super::client_addr::{ClientKey, TrustedProxies};
use super::error::ApiError;

/// Keep-alive comments are sent at least this often.
const KEEP_ALIVE_MAX: Duration = Duration::from_secs(15);
/// Retry-After of a stream refused while the node stops.
const STOPPING_RETRY_AFTER_S: u64 = 5;

/// What every stream of a node shares: its bounds and the stop signal.
pub struct LiveStreams {
    stop: watch::Sender<bool>,
    lifetime: Duration,
    keep_alive: Duration,
    proxies: Arc<TrustedProxies>,
}

/// Why a stream ended (the `reason` of its last event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// It lived `lifetime`: the client reconnects at once.
    Lifetime,
    /// The node is stopping: the client goes elsewhere.
    Stopping,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Lifetime => "lifetime",
            EndReason::Stopping => "stopping",
        }
    }
}

impl LiveStreams {
    /// `lifetime`: the request timeout; `idle_timeout`: the connection's.
    pub fn new(
        lifetime: Duration,
        idle_timeout: Duration,
        proxies: Arc<TrustedProxies>,
    ) -> Arc<LiveStreams> {
        Arc::new(LiveStreams {
            stop: watch::channel(false).0,
            lifetime: lifetime.max(Duration::from_millis(1)),
            keep_alive: (idle_timeout / 3)
                .min(KEEP_ALIVE_MAX)
                .max(Duration::from_millis(100)),
            proxies,
        })
    }

    /// Ends every open stream now and refuses new ones.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    pub fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves once the node is stopping (a long poll answers then).
    pub async fn stopped(&self) {
        let _ = self.stop.subscribe().wait_for(|s| *s).await;
    }

    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    pub fn keep_alive(&self) -> Duration {
        self.keep_alive
    }

    /// 503 `draining` once the node is stopping.
    pub fn admit(&self) -> Result<(), ApiError> {
        if self.stopping() {
            return Err(ApiError {
                retry_after_s: Some(STOPPING_RETRY_AFTER_S),
                ..ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "draining",
                    "this node is stopping and opens no new stream; poll the results or retry on another node",
                )
            });
        }
        Ok(())
    }

    /// The client a stream is counted against: its address behind trusted
    /// proxies, as for the rate limit.
    pub fn client(&self, peer: SocketAddr, headers: &HeaderMap) -> ClientKey {
        ClientKey::of(self.proxies.client_ip(peer, headers))
    }

    /// The SSE answer for `events`: keep-alives, `Cache-Control: no-cache`,
    /// ended at the lifetime or the stop. `end_event`: the name of the last
    /// event, whose data is `{"reason": "lifetime" | "stopping"}`; without
    /// it the stream ends with a comment (`: end lifetime`), which
    /// EventSource ignores.
    pub fn respond<S>(&self, events: S, end_event: Option<&'static str>) -> Response
    where
        S: Stream<Item = Event> + Send + 'static,
    {
        let mut stop = self.stop.subscribe();
        let lifetime = self.lifetime;
        // Why it ended, set by `end` when it resolves (not when `events`
        // ends by itself: then no last event is sent).
        let reason = Arc::new(std::sync::Mutex::new(None::<EndReason>));
        let set = reason.clone();
        let end = async move {
            let why = tokio::select! {
                _ = tokio::time::sleep(lifetime) => EndReason::Lifetime,
                _ = stop.wait_for(|s| *s) => EndReason::Stopping,
            };
            *set.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
        };
        let last = futures::stream::once(async move {
            let why = reason.lock().unwrap_or_else(|e| e.into_inner()).take()?;
            Some(match end_event {
                Some(name) => Event::default()
                    .event(name)
                    .data(format!(r#"{{"reason":"{}"}}"#, why.as_str())),
                None => Event::default().comment(format!("end {}", why.as_str())),
            })
        })
        .filter_map(futures::future::ready);
        let stream = events
            .take_until(end)
            .chain(last)
            .map(Ok::<Event, Infallible>);
        let keep_alive = KeepAlive::new()
            .interval(self.keep_alive)
            .text("keep-alive");
        let mut res = Sse::new(stream).keep_alive(keep_alive).into_response();
        res.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_text(res: Response) -> String {
        let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn streams(lifetime_ms: u64) -> Arc<LiveStreams> {
        LiveStreams::new(
            Duration::from_millis(lifetime_ms),
            Duration::from_secs(60),
            Arc::new(TrustedProxies::default()),
        )
    }

    #[tokio::test]
    async fn a_stream_ends_at_its_lifetime_with_the_reason() {
        let s = streams(200);
        let events = futures::stream::once(async { Event::default().event("x").data("1") })
            .chain(futures::stream::pending());
        let body = tokio::time::timeout(
            Duration::from_secs(5),
            body_text(s.respond(events, Some("end"))),
        )
        .await
        .expect("the stream ended");
        assert!(body.contains("event: x\ndata: 1\n"), "{body}");
        assert!(
            body.ends_with("event: end\ndata: {\"reason\":\"lifetime\"}\n\n"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn stop_ends_open_streams_and_refuses_new_ones() {
        let s = streams(600_000);
        let res = s.respond(futures::stream::pending(), None);
        let reading = tokio::spawn(body_text(res));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(s.admit().is_ok());
        s.stop();
        let body = tokio::time::timeout(Duration::from_secs(5), reading)
            .await
            .expect("the stream ended at the stop")
            .unwrap();
        assert!(body.ends_with(": end stopping\n\n"), "{body}");
        assert_eq!(s.admit().unwrap_err().code, "draining");
    }

    #[test]
    fn keep_alives_come_well_within_the_idle_timeout() {
        let s = |idle_ms| {
            LiveStreams::new(
                Duration::from_secs(30),
                Duration::from_millis(idle_ms),
                Arc::new(TrustedProxies::default()),
            )
            .keep_alive()
        };
        assert_eq!(s(60_000), Duration::from_secs(15));
        assert_eq!(s(9_000), Duration::from_secs(3));
    }
}
