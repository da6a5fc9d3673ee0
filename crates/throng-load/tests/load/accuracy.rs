//! Measurement accuracy: coordinated omission corrected (wrk2 README's stalled server),
//! exact request counts at a fixed rate, exact arrival counts.

use std::{sync::Arc, time::Duration};

use throng_load::{
    closed_loop,
    measure::{self, Engine, Model, Plan},
    open_loop,
    script::LoadOptions,
    RequestFactory, RequestSpec,
};

use super::{counter, run_yaml, server};

fn factory(path: &'static str) -> RequestFactory {
    Arc::new(move |_| RequestSpec::get(path))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_shows_in_corrected_latency_only() {
    let srv = server::start().await;
    // One connection, 200 req/s for 5 s; the server freezes for 1 s about 2 s in.
    let s = open_loop(
        srv.addr,
        "localhost",
        200.0,
        1,
        Duration::from_secs(5),
        factory("/stall"),
    )
    .await
    .unwrap();
    assert_eq!(s.requests, 1000, "{s:?}");
    assert!(
        s.latency_us_p99 > 500_000,
        "corrected p99 shows the stall: {} us",
        s.latency_us_p99
    );
    assert!(s.latency_us_max >= 900_000, "max {}", s.latency_us_max);
    assert!(
        s.uncorrected_latency_us_p99 < 200_000,
        "uncorrected p99 hides it: {} us",
        s.uncorrected_latency_us_p99
    );
    assert!(s
        .report
        .aggregate
        .summaries
        .contains_key("http.service_time"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_rate_1000_for_10s_sends_10000() {
    let srv = server::start().await;
    let s = open_loop(
        srv.addr,
        "localhost",
        1000.0,
        16,
        Duration::from_secs(10),
        factory("/health"),
    )
    .await
    .unwrap();
    let total = s.requests + s.errors.values().sum::<u64>();
    assert!((9_900..=10_100).contains(&total), "sent {total}: {s:?}");
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.status_counts.get(&200).copied(), Some(s.requests));
    assert!(
        (s.requests_per_s - 1000.0).abs() < 30.0,
        "{} req/s",
        s.requests_per_s
    );
    assert!(s.report.intermediate.len() >= 9, "per-second periods");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_counts_and_errors() {
    let srv = server::start().await;
    let s = closed_loop(
        srv.addr,
        "localhost",
        4,
        Duration::from_secs(1),
        factory("/health"),
    )
    .await
    .unwrap();
    assert!(s.requests > 100, "{s:?}");
    assert_eq!(s.status_counts.get(&200).copied(), Some(s.requests));
    assert!(s.latency_us_p50 <= s.latency_us_p99 && s.latency_us_p99 <= s.latency_us_max);
    // The hyper engine gives the same kind of result.
    let mut plan = Plan::new(
        srv.addr,
        "localhost",
        Model::Closed { connections: 2 },
        Duration::from_millis(500),
    );
    plan.engine = Engine::Hyper;
    let h = measure::run(plan, measure::from_factory(factory("/health"), "localhost"))
        .await
        .unwrap();
    assert!(h.requests > 50 && h.errors.is_empty(), "{h:?}");
    let refused = closed_loop(
        "127.0.0.1:1".parse().unwrap(),
        "x",
        2,
        Duration::from_millis(300),
        factory("/"),
    )
    .await
    .unwrap();
    assert_eq!(refused.requests, 0);
    assert!(
        refused.errors.get("ECONNREFUSED").copied().unwrap_or(0) > 0,
        "{:?}",
        refused.errors
    );
}

async fn arrivals(duration_s: u64) {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "config:\n  target: \"{}\"\n  phases:\n    - duration: {duration_s}\n      arrivalCount: 10\nscenarios:\n  - flow:\n      - get:\n          url: /arrive\n",
        srv.url()
    );
    let outcome = run_yaml(dir.path(), &yaml, LoadOptions::default()).await;
    assert_eq!(counter(&outcome.report, "vusers.created"), 10);
    assert_eq!(counter(&outcome.report, "vusers.completed"), 10);
    let seen = srv.seen();
    assert_eq!(seen.len(), 10);
    let gap = duration_s as f64 / 10.0;
    for w in seen.windows(2) {
        let d = w[1].at.duration_since(w[0].at).as_secs_f64();
        assert!(
            (d - gap).abs() < gap * 0.5,
            "arrivals evenly spaced: gap {d} vs {gap}"
        );
    }
    assert!(outcome.elapsed.as_secs_f64() >= duration_s as f64 - 0.01);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrival_count_10_over_2s() {
    arrivals(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_arrival_count_10_over_30s() {
    arrivals(30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ramp_pause_and_duration_strings() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "config:\n  target: \"{}\"\n  phases:\n    - duration: \"1s\"\n      arrivalRate: 2\n      rampTo: 6\n    - pause: \"500ms\"\n    - duration: 1\n      arrivalRate: 4\n      name: steady\nscenarios:\n  - flow:\n      - get:\n          url: /ramp\n",
        srv.url()
    );
    let started = std::time::Instant::now();
    let outcome = run_yaml(dir.path(), &yaml, LoadOptions::default()).await;
    assert_eq!(
        counter(&outcome.report, "vusers.created"),
        4 + 4,
        "(2+6)/2 x 1 s, then 4/s x 1 s"
    );
    assert_eq!(srv.seen_paths("/ramp").len(), 8);
    assert!(started.elapsed().as_secs_f64() >= 2.5, "the pause counts");
}
