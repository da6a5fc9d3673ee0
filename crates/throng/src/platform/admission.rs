//! Admission control and request metrics, in one middleware around every
//! route. Past `in_flight_max` requests in flight, a request is answered 429
//! with `Retry-After` at once instead of queueing without bound; the optional
//! per-client rate limit (GCRA via governor, off by default) answers the same.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::{clock::Clock, DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::error::ApiError;
use crate::base::metrics::METRICS;

/// Distinct client keys the rate limiter remembers before it forgets idle ones.
const RATE_LIMIT_KEYS_MAX: usize = 100_000;

pub struct Admission {
    in_flight: AtomicUsize,
    in_flight_max: usize,
    retry_after_s: u64,
    rate_limit: Option<DefaultKeyedRateLimiter<IpAddr>>,
    trust_forwarded_for: bool,
}

impl Admission {
    pub fn new(
        in_flight_max: usize,
        retry_after_s: u64,
        rate_limit_per_s: Option<u32>,
        rate_limit_burst: u32,
        trust_forwarded_for: bool,
    ) -> Arc<Admission> {
        let rate_limit = rate_limit_per_s.and_then(NonZeroU32::new).map(|per_s| {
            let burst = NonZeroU32::new(rate_limit_burst.max(1)).unwrap();
            RateLimiter::keyed(Quota::per_second(per_s).allow_burst(burst))
        });
        Arc::new(Admission {
            in_flight: AtomicUsize::new(0),
            in_flight_max: in_flight_max.max(1),
            retry_after_s: retry_after_s.max(1),
            rate_limit,
            trust_forwarded_for,
        })
    }

    fn client_ip(&self, req: &Request) -> Option<IpAddr> {
        if self.trust_forwarded_for {
            let forwarded = req
                .headers()
                .get("x-forwarded-for")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(',').next())
                .and_then(|v| v.trim().parse().ok());
            if forwarded.is_some() {
                return forwarded;
            }
        }
        req.extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip())
    }

    /// `Some(wait_s)` when this client is over its rate.
    fn rate_limited(&self, req: &Request) -> Option<u64> {
        let limiter = self.rate_limit.as_ref()?;
        let ip = self.client_ip(req)?;
        if limiter.len() > RATE_LIMIT_KEYS_MAX {
            limiter.retain_recent();
        }
        match limiter.check_key(&ip) {
            Ok(()) => None,
            Err(not_until) => {
                let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
                Some(wait.as_secs_f64().ceil() as u64)
            }
        }
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

pub async fn middleware(State(adm): State<Arc<Admission>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req.extensions().get::<MatchedPath>().cloned();
    let method = req.method().clone();
    let response = if let Some(wait_s) = adm.rate_limited(&req) {
        METRICS.http_rejected_429.inc();
        ApiError::too_many_requests(
            wait_s,
            "too many requests from this client; retry after the given seconds",
        )
        .into_response()
    } else if adm.in_flight.fetch_add(1, Ordering::AcqRel) >= adm.in_flight_max {
        adm.in_flight.fetch_sub(1, Ordering::AcqRel);
        METRICS.http_rejected_429.inc();
        ApiError::too_many_requests(
            adm.retry_after_s,
            "the server is at capacity; retry after the given seconds",
        )
        .into_response()
    } else {
        METRICS.http_in_flight.inc();
        let _guard = InFlight(&adm);
        next.run(req).await
    };
    let route = route.as_ref().map(|m| m.as_str()).unwrap_or("unmatched");
    METRICS
        .http_requests
        .with_label_values(&[route, method.as_str(), response.status().as_str()])
        .inc();
    METRICS
        .http_latency_seconds
        .with_label_values(&[route])
        .observe(started.elapsed().as_secs_f64());
    response
}
