//! Prometheus metrics: requests by route and status, latency, in-flight,
//! 429s, writer batch size and commit time. Rendered at `GET /metrics`.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    pub http_requests: IntCounterVec,
    pub http_latency_seconds: HistogramVec,
    pub http_in_flight: IntGauge,
    pub http_rejected_429: IntCounter,
    pub store_write_batch_commands: Histogram,
    pub store_commit_seconds: Histogram,
    pub http_connections_refused: IntCounterVec,
    pub http_connections_timed_out: IntCounterVec,
    pub http_requests_timed_out: IntCounter,
    pub http_bodies_timed_out: IntCounter,
    pub http_rate_limit_overflow: IntCounter,
    /// Cache reads by cache and outcome (closed sets: see [`CacheRead`]).
    pub cache_reads: IntCounterVec,
}

/// How a cache read went.
#[derive(Clone, Copy)]
pub enum CacheRead {
    Hit,
    Miss,
    /// The cache was not asked: off, the client said no-cache, or (on
    /// PostgreSQL) the invalidation channel was not known fresh.
    Bypass,
}

/// Counts a read of cache `cache` (a name fixed in code).
pub fn observe_cache_read(cache: &'static str, outcome: CacheRead) {
    let outcome = match outcome {
        CacheRead::Hit => "hit",
        CacheRead::Miss => "miss",
        CacheRead::Bypass => "bypass",
    };
    METRICS
        .cache_reads
        .with_label_values(&[cache, outcome])
        .inc();
}

pub static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let registry = Registry::new();
    let http_requests = IntCounterVec::new(
        Opts::new(
            "throng_http_requests_total",
            "HTTP requests by route, method and status",
        ),
        &["route", "method", "status"],
    )
    .unwrap();
    let http_latency_seconds = HistogramVec::new(
        HistogramOpts::new(
            "throng_http_request_duration_seconds",
            "HTTP request latency",
        )
        .buckets(vec![
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0,
        ]),
        &["route"],
    )
    .unwrap();
    let http_in_flight = IntGauge::new("throng_http_in_flight", "HTTP requests in flight").unwrap();
    let http_rejected_429 = IntCounter::new(
        "throng_http_rejected_429_total",
        "Requests answered 429 by admission control or the rate limit",
    )
    .unwrap();
    let store_write_batch_commands = Histogram::with_opts(
        HistogramOpts::new(
            "throng_store_write_batch_commands",
            "Write commands per committed batch",
        )
        .buckets(vec![
            1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
        ]),
    )
    .unwrap();
    let store_commit_seconds = Histogram::with_opts(
        HistogramOpts::new(
            "throng_store_commit_seconds",
            "Time to apply and commit one batch",
        )
        .buckets(vec![
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
        ]),
    )
    .unwrap();
    let http_connections_refused = IntCounterVec::new(
        Opts::new(
            "throng_http_connections_refused_total",
            "Connections closed at accept: over the server's or a client's connection cap",
        ),
        &["cap"],
    )
    .unwrap();
    let http_connections_timed_out = IntCounterVec::new(
        Opts::new(
            "throng_http_connections_timed_out_total",
            "Connections closed by the header-read or idle timeout",
        ),
        &["timeout"],
    )
    .unwrap();
    let http_requests_timed_out = IntCounter::new(
        "throng_http_requests_timed_out_total",
        "Requests answered 503 request_timeout (over --request-timeout-ms)",
    )
    .unwrap();
    let http_bodies_timed_out = IntCounter::new(
        "throng_http_bodies_timed_out_total",
        "Requests answered 408 body_timeout (body not received within --body-timeout-ms)",
    )
    .unwrap();
    let http_rate_limit_overflow = IntCounter::new(
        "throng_http_rate_limit_overflow_total",
        "Rate-limit checks of new clients that found the key table full (they share one budget)",
    )
    .unwrap();
    for c in [&http_connections_refused, &http_connections_timed_out] {
        registry.register(Box::new(c.clone())).unwrap();
    }
    let cache_reads = IntCounterVec::new(
        Opts::new(
            "throng_cache_reads_total",
            "Reads of in-memory caches by cache and outcome (hit, miss, bypass)",
        ),
        &["cache", "outcome"],
    )
    .unwrap();
    for c in [
        &http_requests_timed_out,
        &http_bodies_timed_out,
        &http_rate_limit_overflow,
    ] {
        registry.register(Box::new(c.clone())).unwrap();
    }
    registry.register(Box::new(http_requests.clone())).unwrap();
    registry.register(Box::new(cache_reads.clone())).unwrap();
    registry
        .register(Box::new(http_latency_seconds.clone()))
        .unwrap();
    registry.register(Box::new(http_in_flight.clone())).unwrap();
    registry
        .register(Box::new(http_rejected_429.clone()))
        .unwrap();
    registry
        .register(Box::new(store_write_batch_commands.clone()))
        .unwrap();
    registry
        .register(Box::new(store_commit_seconds.clone()))
        .unwrap();
    Metrics {
        registry,
        http_requests,
        http_latency_seconds,
        http_in_flight,
        http_rejected_429,
        store_write_batch_commands,
        store_commit_seconds,
        http_connections_refused,
        http_connections_timed_out,
        http_requests_timed_out,
        http_bodies_timed_out,
        http_rate_limit_overflow,
        cache_reads,
    }
});

/// Adds a service's own metric to what `/metrics` renders. Once per
/// process: a second registration of the same name (another server in the
/// same process) is ignored.
pub fn register<C: prometheus::core::Collector + Clone + 'static>(metric: &C) {
    match METRICS.registry.register(Box::new(metric.clone())) {
        Ok(()) | Err(prometheus::Error::AlreadyReg) => {}
        Err(e) => tracing::error!(error = %e, "a service's metric was not registered"),
    }
}

pub fn observe_write_batch(commands: usize, elapsed: Duration) {
    METRICS.store_write_batch_commands.observe(commands as f64);
    METRICS.store_commit_seconds.observe(elapsed.as_secs_f64());
}

/// The Prometheus text exposition of every metric.
pub fn render() -> String {
    let mut buf = Vec::new();
    TextEncoder::new()
        .encode(&METRICS.registry.gather(), &mut buf)
        .expect("text encoding never fails");
    String::from_utf8(buf).unwrap_or_default()
}
