//! Closed-model phases (`vusers`, a throng extension): the pool holds its size, each
//! iteration takes the next CSV row, steps down never cut a request, and `ensure` applies.

use std::time::{Duration, Instant};

use serde_json::Value;
use throng_load::script::LoadOptions;

use super::{
    counter, reports::assert_self_contained, run_yaml, server, stderr, throng_load, write,
};

/// Requests in flight at the server, sampled every millisecond over `[from, to)`: (max, mean).
fn server_concurrency(spans: &[server::Span], from: Instant, to: Instant) -> (usize, f64) {
    let (mut max, mut sum, mut samples) = (0, 0usize, 0usize);
    let mut t = from;
    while t < to {
        let n = spans.iter().filter(|s| s.start <= t && t < s.end).count();
        max = max.max(n);
        sum += n;
        samples += 1;
        t += Duration::from_millis(1);
    }
    (max, sum as f64 / samples.max(1) as f64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_phases_hold_vusers_with_sequential_csv_rows() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let rows = 2_000;
    let csv: String = (0..rows).map(|i| format!("{i}\n")).collect();
    write(dir.path(), "voters.csv", &csv);
    let yaml = format!(
        r#"
config:
  target: "{}"
  payload:
    path: voters.csv
    fields: [voter]
    order: sequence
  phases:
    - duration: 1
      vusers: 5
      name: five
    - duration: 1
      vusers: 12
      name: twelve
  ensure:
    thresholds:
      - http.response_time.p99: 2000
scenarios:
  - flow:
      - get:
          url: "/delay/20?voter={{{{ voter }}}}"
"#,
        srv.url()
    );
    write(dir.path(), "closed.yml", &yaml);
    let (json_path, html_path) = (dir.path().join("out.json"), dir.path().join("out.html"));
    let out = throng_load(&[
        "run",
        dir.path().join("closed.yml").to_str().unwrap(),
        "--output",
        json_path.to_str().unwrap(),
        "--report",
        html_path.to_str().unwrap(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("virtual users held: max 12"), "{stdout}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();

    // The runner's own view, per phase.
    let phases = report["phases"]
        .as_array()
        .expect("phases in the JSON report");
    assert_eq!(phases.len(), 2, "{phases:?}");
    for (p, (name, target)) in phases.iter().zip([("five", 5u64), ("twelve", 12)]) {
        assert_eq!(p["name"], name);
        assert_eq!(p["kind"], "closed");
        assert_eq!(p["vusers_target"], target);
        assert_eq!(p["vusers_concurrent_max"], target, "{p}");
        let mean = p["vusers_concurrent_mean"].as_f64().unwrap();
        assert!(mean >= 0.8 * target as f64 && mean <= target as f64, "{p}");
        // Each iteration is one ~20 ms request, so a user runs at most 50 per second.
        let created = p["vusers_created"].as_u64().unwrap();
        let most = target * 50 + target;
        assert!(created >= most / 2 && created <= most, "{p}");
    }

    // The server's view: requests in flight, away from the phase boundaries.
    let spans = srv.spans();
    let t0 = spans
        .iter()
        .map(|s| s.start)
        .min()
        .expect("requests arrived");
    let ms = Duration::from_millis;
    for (from, target) in [(t0, 5usize), (t0 + ms(1000), 12)] {
        let (max, mean) = server_concurrency(&spans, from + ms(100), from + ms(900));
        assert_eq!(max, target, "requests in flight at the server");
        // Below the runner's mean by each iteration's client-side time (~10% in a debug
        // build); users that did not loop back at once would leave it far lower.
        assert!(
            mean >= 0.6 * target as f64,
            "mean in flight {mean} for {target}"
        );
    }

    // Every iteration made one request, with the next CSV row: rows 0..n, none repeated.
    let c = &report["aggregate"]["counters"];
    let iterations = c["vusers.created"].as_u64().unwrap();
    assert_eq!(c["vusers.completed"], iterations);
    assert_eq!(c["http.requests"], iterations);
    assert_eq!(c["http.codes.200"], iterations);
    assert_eq!(spans.len() as u64, iterations);
    let mut voters: Vec<usize> = spans
        .iter()
        .map(|s| s.uri.rsplit('=').next().unwrap().parse().unwrap())
        .collect();
    voters.sort_unstable();
    assert_eq!(voters, (0..iterations as usize).collect::<Vec<_>>());
    assert!(iterations < rows as u64, "the CSV did not wrap around");

    let page = std::fs::read_to_string(&html_path).unwrap();
    assert_self_contained(&page);
    assert!(page.contains("id=\"phases\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_ramp_up_step_down_and_back_to_open_model() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
config:
  target: "{}"
  phases:
    - duration: 1
      vusers: 10
      rampUp: 1
    - duration: 0.6
      vusers: 3
    - duration: 0.3
      arrivalCount: 3
scenarios:
  - flow:
      - get:
          url: "/delay/20"
"#,
        srv.url()
    );
    let started = Instant::now();
    let outcome = run_yaml(dir.path(), &yaml, LoadOptions::default()).await;
    let elapsed = started.elapsed();
    let phases = &outcome.report.phases;
    assert_eq!(phases.len(), 3, "{phases:?}");

    // Ramp-up: one new user every 0.1 s, so about 5.5 on average and 10 at the end.
    let ramp = &phases[0];
    assert_eq!(ramp.vusers_target, Some(10));
    assert_eq!(ramp.vusers_concurrent_max, 10, "{ramp:?}");
    let mean = ramp.vusers_concurrent_mean;
    assert!((4.5..=6.5).contains(&mean), "{ramp:?}");

    // Step down: the 7 surplus users finish their ~20 ms request, then stop (10 would
    // remain if they did not; the slack is for a busy machine).
    let down = &phases[1];
    assert_eq!(down.vusers_target, Some(3));
    assert!(down.vusers_concurrent_max <= 10, "{down:?}");
    let mean = down.vusers_concurrent_mean;
    assert!((3.0..=5.0).contains(&mean), "{down:?}");

    // Open model again: the pool stopped, the 3 arrivals ran once each.
    let open = &phases[2];
    assert_eq!((open.kind.as_str(), open.vusers_target), ("arrivals", None));
    assert!((3..=6).contains(&open.vusers_created), "{open:?}");

    // No request was cut: every iteration completed, no errors.
    let created = counter(&outcome.report, "vusers.created");
    assert_eq!(counter(&outcome.report, "vusers.completed"), created);
    assert_eq!(counter(&outcome.report, "http.codes.200"), created);
    assert_eq!(srv.spans().len() as u64, created);
    assert!(
        !outcome
            .report
            .aggregate
            .counters
            .keys()
            .any(|k| k.starts_with("errors.")),
        "{:?}",
        outcome.report.aggregate.counters
    );
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_phase_ensure_failure_exits_1() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "config:\n  target: \"{}\"\n  phases:\n    - duration: 0.5\n      vusers: 2\n  ensure:\n    thresholds:\n      - http.response_time.p50: 1\nscenarios:\n  - flow:\n      - get:\n          url: /delay/20\n",
        srv.url()
    );
    write(dir.path(), "ensure.yml", &yaml);
    let out = throng_load(&["run", dir.path().join("ensure.yml").to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(1), "stderr: {}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("fail: http.response_time.p50 < 1"),
        "{stdout}"
    );
}
