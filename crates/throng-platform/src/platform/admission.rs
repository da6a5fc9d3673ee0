//! Admission control and request metrics, in one middleware around every
//! route. Past `in_flight_max` requests in flight, a request is answered 429
//! with `Retry-After` at once instead of queueing without bound; the optional
//! per-client rate limit (GCRA, off by default) answers the same. A request
//! that runs past `request_timeout` is answered 503 and its slot freed.
//! Static files below `/assets/` pass (see `is_static`), and a browser
//! asking for a page is refused with a page that says so and tries again
//! by itself (`busy_page`), never a blank one.
//!
//! Metric labels come from closed sets only: the matched route (or
//! `unmatched`), the method (the nine of RFC 9110, or `other`) and the status
//! code, so no client can add series.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::client_addr::{ClientKey, TrustedProxies};
use super::error::ApiError;
use crate::base::metrics::METRICS;

/// What admission control is configured with (see `serve --help`).
#[derive(Clone, Debug)]
pub struct AdmissionLimits {
    pub in_flight_max: usize,
    pub retry_after_s: u64,
    pub request_timeout: Duration,
    pub rate_limit_per_s: Option<NonZeroU32>,
    pub rate_limit_burst: u32,
    /// Client keys the rate limiter remembers at most.
    pub rate_limit_keys_max: usize,
    /// Routes whose large bodies take longer: their `timeout` is their
    /// requests' deadline when longer than `request_timeout`.
    pub large: Arc<Vec<super::body_limit::LargeBody>>,
    /// Routes (method, path template) not counted in the metrics: those
    /// whose counts would date anonymous acts while `/metrics` is public.
    pub uncounted: Arc<Vec<(&'static str, &'static str)>>,
}

impl AdmissionLimits {
    /// The deadline of a request to `path` by `method`.
    fn request_timeout_of(&self, method: &str, path: &str) -> Duration {
        self.large
            .iter()
            .find(|l| l.matches(method, path))
            .map_or(self.request_timeout, |l| {
                l.timeout.max(self.request_timeout)
            })
    }
}

pub struct Admission {
    in_flight: AtomicUsize,
    /// Requests admitted and refused (in-flight bound) since the last tick.
    admitted: AtomicU64,
    refused: AtomicU64,
    /// The Retry-After sent with an in-flight refusal: `--retry-after-s`,
    /// or more while refusals outnumber admissions (`update_retry_after`).
    retry_after_now: AtomicU64,
    limits: AdmissionLimits,
    rate_limit: Option<RateLimit>,
    proxies: Arc<TrustedProxies>,
}

impl Admission {
    pub fn new(limits: AdmissionLimits, proxies: Arc<TrustedProxies>) -> Arc<Admission> {
        let rate_limit = limits.rate_limit_per_s.map(|per_s| {
            RateLimit::new(
                per_s,
                limits.rate_limit_burst.max(1),
                limits.rate_limit_keys_max,
            )
        });
        let mut limits = limits;
        limits.in_flight_max = limits.in_flight_max.max(1);
        limits.retry_after_s = limits.retry_after_s.max(1);
        Arc::new(Admission {
            in_flight: AtomicUsize::new(0),
            admitted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            retry_after_now: AtomicU64::new(limits.retry_after_s),
            limits,
            rate_limit,
            proxies,
        })
    }

    /// Forgets, once a second, clients whose budget is full again (they are
    /// indistinguishable from new ones), so the key table holds only the
    /// clients of the last seconds. Runs until the admission is dropped.
    pub fn pruner(self: &Arc<Self>) -> impl std::future::Future<Output = ()> + Send + 'static {
        let weak = Arc::downgrade(self);
        async move {
            let mut tick = tokio::time::interval(RATE_LIMIT_PRUNE_EVERY);
            loop {
                tick.tick().await;
                let Some(adm) = weak.upgrade() else { return };
                adm.update_retry_after();
                if let Some(rl) = &adm.rate_limit {
                    rl.prune();
                }
            }
        }
    }

    /// Once a second: the Retry-After for the next second's refusals. When
    /// R requests were refused and A admitted in the last second, the
    /// refused need about R / A seconds of this node's current throughput,
    /// so they are asked to come back after that long (at least
    /// `--retry-after-s`, at most `RETRY_AFTER_MAX_S`) instead of all
    /// returning after one second: under a crowd at several times capacity
    /// every retry that comes back too early is refused again, and
    /// refusing costs the node what it needs to serve.
    fn update_retry_after(&self) {
        let admitted = self.admitted.swap(0, Ordering::Relaxed);
        let refused = self.refused.swap(0, Ordering::Relaxed);
        self.retry_after_now.store(
            retry_after_for(self.limits.retry_after_s, admitted, refused),
            Ordering::Relaxed,
        );
    }

    /// The Retry-After in-flight refusals carry now.
    pub fn retry_after_s(&self) -> u64 {
        self.retry_after_now.load(Ordering::Relaxed)
    }

    /// Keys in the rate limiter's table (for tests and metrics).
    pub fn rate_limit_keys(&self) -> usize {
        self.rate_limit.as_ref().map_or(0, RateLimit::len)
    }

    /// `Some(wait_s)` when this client is over its rate.
    fn rate_limited(&self, req: &Request) -> Option<u64> {
        let limiter = self.rate_limit.as_ref()?;
        let peer = req.extensions().get::<ConnectInfo<SocketAddr>>()?.0;
        let ip = self.proxies.client_ip(peer, req.headers());
        limiter
            .check(ClientKey::of(ip))
            .err()
            .map(|wait| wait.as_secs_f64().ceil().max(1.0) as u64)
    }
}

/// The longest Retry-After an in-flight refusal asks for.
pub const RETRY_AFTER_MAX_S: u64 = 30;

/// `ceil(refused / admitted)` seconds, within [base, RETRY_AFTER_MAX_S].
fn retry_after_for(base: u64, admitted: u64, refused: u64) -> u64 {
    if refused == 0 {
        return base;
    }
    refused
        .div_ceil(admitted.max(1))
        .clamp(base, RETRY_AFTER_MAX_S.max(base))
}

/// How often idle keys leave the rate limiter's table.
const RATE_LIMIT_PRUNE_EVERY: Duration = Duration::from_secs(1);
/// The table is split so one lock is not every request's.
const RATE_LIMIT_SHARDS: usize = 16;

/// GCRA per client key in a bounded table. Each key keeps its theoretical
/// arrival time (TAT); a key whose TAT has passed has its full burst again
/// and is pruned. When a shard is full, new keys share one overflow budget
/// until the pruner frees room (known keys keep theirs): bounded memory,
/// and no request ever scans the table.
struct RateLimit {
    origin: Instant,
    interval_ns: u64,
    tolerance_ns: u64,
    shard_keys_max: usize,
    hasher: RandomState,
    shards: Box<[Mutex<HashMap<ClientKey, u64>>]>,
    overflow: Mutex<u64>,
}

impl RateLimit {
    fn new(per_s: NonZeroU32, burst: u32, keys_max: usize) -> RateLimit {
        let interval_ns = 1_000_000_000 / u64::from(per_s.get());
        RateLimit {
            origin: Instant::now(),
            interval_ns,
            tolerance_ns: interval_ns * u64::from(burst - 1),
            shard_keys_max: (keys_max / RATE_LIMIT_SHARDS).max(1),
            hasher: RandomState::new(),
            shards: (0..RATE_LIMIT_SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            overflow: Mutex::new(0),
        }
    }

    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    fn gcra(&self, tat: &mut u64, now: u64) -> Result<(), Duration> {
        let t = (*tat).max(now);
        if t - now > self.tolerance_ns {
            return Err(Duration::from_nanos(t - self.tolerance_ns - now));
        }
        *tat = t + self.interval_ns;
        Ok(())
    }

    fn check(&self, key: ClientKey) -> Result<(), Duration> {
        let now = self.now_ns();
        let shard = &self.shards[self.hasher.hash_one(key) as usize % RATE_LIMIT_SHARDS];
        let mut map = shard.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tat) = map.get_mut(&key) {
            return self.gcra(tat, now);
        }
        if map.len() < self.shard_keys_max {
            let mut tat = now;
            let verdict = self.gcra(&mut tat, now);
            map.insert(key, tat);
            return verdict;
        }
        drop(map);
        METRICS.http_rate_limit_overflow.inc();
        let mut tat = self.overflow.lock().unwrap_or_else(|e| e.into_inner());
        self.gcra(&mut tat, now)
    }

    fn prune(&self) {
        let now = self.now_ns();
        for shard in self.shards.iter() {
            let mut map = shard.lock().unwrap_or_else(|e| e.into_inner());
            map.retain(|_, tat| *tat > now);
            if map.capacity() > 4 * map.len().max(64) {
                map.shrink_to_fit();
            }
        }
    }

    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}

/// Decrements the in-flight count however the request ends.
struct InFlight<'a>(&'a Admission);
impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        METRICS.http_in_flight.dec();
    }
}

/// The method as a metric label: a closed set.
pub fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

pub async fn middleware(State(adm): State<Arc<Admission>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req.extensions().get::<MatchedPath>().cloned();
    let method = method_label(req.method());
    // A balancer's probes are answered whatever the load: refusing them
    // would take a busy node out of the balancer (HAProxy then answers
    // 503 for every node at once), not make it less busy.
    let probe = matches!(req.uri().path(), "/health" | "/ready");
    let page = wants_page(&req);
    let response = if probe || is_static(req.uri().path()) {
        match tokio::time::timeout(adm.limits.request_timeout, next.run(req)).await {
            Ok(response) => response,
            Err(_) => request_timed_out(&adm.limits),
        }
    } else if let Some(wait_s) = adm.rate_limited(&req) {
        METRICS.http_rejected_429.inc();
        if page {
            busy_page(wait_s)
        } else {
            ApiError::too_many_requests(
                wait_s,
                "too many requests from this client; retry after the given seconds",
            )
            .into_response()
        }
    } else if adm.in_flight.fetch_add(1, Ordering::AcqRel) >= adm.limits.in_flight_max {
        adm.in_flight.fetch_sub(1, Ordering::AcqRel);
        adm.refused.fetch_add(1, Ordering::Relaxed);
        METRICS.http_rejected_429.inc();
        if page {
            busy_page(adm.retry_after_s())
        } else {
            ApiError::too_many_requests(
                adm.retry_after_s(),
                "the server is at capacity; retry after the given seconds",
            )
            .into_response()
        }
    } else {
        adm.admitted.fetch_add(1, Ordering::Relaxed);
        METRICS.http_in_flight.inc();
        let _guard = InFlight(&adm);
        let deadline = adm
            .limits
            .request_timeout_of(req.method().as_str(), req.uri().path());
        match tokio::time::timeout(deadline, next.run(req)).await {
            Ok(response) => response,
            Err(_) => request_timed_out(&adm.limits),
        }
    };
    let route = route.as_ref().map(|m| m.as_str()).unwrap_or("unmatched");
    if adm
        .limits
        .uncounted
        .iter()
        .any(|(m, r)| *m == method && *r == route)
    {
        return response;
    }
    METRICS
        .http_requests
        .with_label_values(&[route, method, response.status().as_str()])
        .inc();
    METRICS
        .http_latency_seconds
        .with_label_values(&[route])
        .observe(started.elapsed().as_secs_f64());
    response
}

/// A file served from memory under its content-hashed name
/// (`assets::STATIC_PREFIX`): admitted whatever the load or the client's
/// rate, as `/health` is. Answering it costs what refusing it would, and a
/// refused script leaves its page blank.
pub fn is_static(path: &str) -> bool {
    path.starts_with(super::assets::STATIC_PREFIX)
}

/// A browser loading a page (not a script's fetch): a GET whose `Accept`
/// names HTML first, as navigations' do.
fn wants_page(req: &Request) -> bool {
    req.method() == Method::GET
        && req
            .headers()
            .get(axum::http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.trim_start().starts_with("text/html"))
}

/// A refused page load: 429 with `Retry-After`, and a page saying why that
/// loads itself again after that many seconds (a refresh, no script), with
/// a link to try at once.
pub fn busy_page(wait_s: u64) -> Response {
    let wait_s = wait_s.max(1);
    let body = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <link rel=\"icon\" href=\"data:,\">\n\
         <meta http-equiv=\"refresh\" content=\"{wait_s}\">\n<title>Busy, trying again \u{2014} throng</title>\n\
         <style>body{{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}}</style>\n\
         </head>\n<body>\n<h1>Many people are here right now</h1>\n\
         <p id=\"busy\">This page tries again by itself in {wait_s} s. Nothing you entered is lost by waiting.</p>\n\
         <p><a href=\"\">Try again now</a></p>\n</body>\n</html>\n"
    );
    let mut res = (
        StatusCode::TOO_MANY_REQUESTS,
        [(axum::http::header::CONTENT_TYPE, super::assets::HTML)],
        body,
    )
        .into_response();
    res.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from(wait_s),
    );
    super::headers::set_no_store(&mut res);
    res
}

fn request_timed_out(limits: &AdmissionLimits) -> Response {
    METRICS.http_requests_timed_out.inc();
    let mut res = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "request_timeout",
        format!(
            "the request took longer than {} ms (see --request-timeout-ms); it may or may not \
             have taken effect: read it back before retrying a write",
            limits.request_timeout.as_millis()
        ),
    )
    .into_response();
    res.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from(limits.retry_after_s),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcra_allows_the_burst_then_the_rate() {
        let rl = RateLimit::new(NonZeroU32::new(10).unwrap(), 3, 1000);
        let k = ClientKey::V4(1);
        assert!(rl.check(k).is_ok());
        assert!(rl.check(k).is_ok());
        assert!(rl.check(k).is_ok());
        let wait = rl.check(k).unwrap_err();
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        assert!(rl.check(ClientKey::V4(2)).is_ok(), "another client");
    }

    #[test]
    fn the_key_table_is_bounded_and_pruned() {
        let rl = RateLimit::new(NonZeroU32::new(1000).unwrap(), 1, 64);
        for i in 0..10_000u32 {
            let _ = rl.check(ClientKey::V4(i));
        }
        assert!(rl.len() <= 64, "{} keys", rl.len());
        std::thread::sleep(Duration::from_millis(5));
        rl.prune();
        assert_eq!(rl.len(), 0, "every key had its budget back");
    }

    #[test]
    fn retry_after_grows_with_refusals_per_admission() {
        assert_eq!(
            retry_after_for(1, 100, 0),
            1,
            "no refusals: the flag's value"
        );
        assert_eq!(retry_after_for(1, 100, 50), 1);
        assert_eq!(retry_after_for(1, 100, 101), 2);
        assert_eq!(retry_after_for(1, 100, 400), 4, "a crowd at 5x capacity");
        assert_eq!(retry_after_for(3, 100, 100), 3, "never below the flag");
        assert_eq!(retry_after_for(1, 0, 10_000), RETRY_AFTER_MAX_S, "capped");
        assert_eq!(
            retry_after_for(60, 1, 10_000),
            60,
            "a flag above the cap wins"
        );
    }

    #[test]
    fn method_labels_are_a_closed_set() {
        for m in ["FOO", "BREW", "X1"] {
            assert_eq!(
                method_label(&Method::from_bytes(m.as_bytes()).unwrap()),
                "other"
            );
        }
        assert_eq!(method_label(&Method::POST), "POST");
    }
}
