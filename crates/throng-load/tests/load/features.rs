//! The course-reviews write-up's Artillery script, and one script that uses every supported key.

use serde_json::{json, Value};
use std::time::Duration;

use throng_load::{runner, script::LoadOptions};

use super::{counter, run_yaml, server, stderr, throng_load, write};

const SEED: &str = "/work/shared/seeds/000_f49fe3b09f9da7b1.txt";

/// The script from the write-up, verbatim (lines "config:" to the log step).
fn seed_script() -> String {
    let text =
        std::fs::read_to_string(SEED).unwrap_or_else(|_| include_str!("seed_000.yml").to_string());
    let start = text.find("config:\n  environments:").expect("script start");
    let log = text[start..].find("- log: ").expect("log step") + start;
    let end = text[log..].find('\n').expect("end of log line") + log;
    text[start..=end].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_000_script_runs_with_shortened_phases() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let script = seed_script()
        .replace(
            "duration: 30\n        arrivalCount: 10",
            "duration: 3\n        arrivalCount: 10",
        )
        .replace(
            "duration: 60\n        arrivalRate: 1",
            "duration: 2\n        arrivalRate: 5",
        );
    assert_ne!(script, seed_script(), "phases were shortened");
    write(dir.path(), "s000.yml", &script);
    let mut csv = String::new();
    for i in 0..25 {
        csv.push_str(&format!(
            "{i},CourseComment,{},{},0,5,0,3\n",
            100 + i,
            7000 + i
        ));
    }
    write(dir.path(), "testData.csv", &csv);
    let path = dir.path().join("s000.yml");
    let out_json = dir.path().join("out.json");
    let out_html = dir.path().join("out.html");
    let target = srv.url();
    let out = throng_load(&[
        "run",
        path.to_str().unwrap(),
        "-e",
        "local",
        "-t",
        &target,
        "--output",
        out_json.to_str().unwrap(),
        "--report",
        out_html.to_str().unwrap(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(
        stderr(&out).contains("logResponse"),
        "warns about the missing afterResponse function: {}",
        stderr(&out)
    );
    assert_eq!(
        stderr(&out).matches("\"logResponse\"").count(),
        1,
        "warned once"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("jsonfromLinq api call : ratingType=CourseComment"),
        "log step prints"
    );
    assert!(stdout.contains("Summary report @"));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out_json).unwrap()).unwrap();
    let c = &report["aggregate"]["counters"];
    assert_eq!(c["vusers.created"], json!(20), "10 + 5/s x 2 s");
    assert_eq!(c["vusers.completed"], json!(20));
    assert_eq!(c["http.requests"], json!(20));
    assert_eq!(c["http.codes.200"], json!(20));
    assert!(report["aggregate"]["summaries"]["http.response_time"]["p99"].is_number());
    assert!(report["aggregate"]["firstCounterAt"].is_number());
    assert!(report["intermediate"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));
    let hits =
        srv.seen_paths("/api/comments/method/jsonfromlinq?ratingType=CourseComment&courseId=1");
    assert_eq!(
        hits.len(),
        20,
        "every request rendered from the CSV: {hits:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_supported_key() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "users.csv", "uid,uname\n1,ann\n\n2,bob\n");
    write(dir.path(), "nums.csv", "007;seven\n");
    let yaml = format!(
        r#"
config:
  target: "http://127.0.0.1:1"
  environments:
    test:
      target: "{target}"
      variables:
        envVar: from-env
      defaults:
        headers:
          x-env: e1
  defaults:
    headers:
      x-default: d1
  http:
    timeout: "5s"
  variables:
    color: ["red"]
    base: b
  phases:
    - duration: 1
      arrivalCount: 4
      name: only
  plugins:
    expect: {{}}
    metrics-by-endpoint:
      useOnlyRequestNames: true
  processor: "./f.js"
  payload:
    - path: users.csv
      fields: [uid, uname]
      order: sequence
      skipHeader: true
    - path: nums.csv
      fields: [n, label]
      delimiter: ";"
      cast: false
  ensure:
    thresholds:
      - "http.response_time.p99": 10000
    conditions:
      - expression: "vusers.failed == 0 and http.codes.201 == 4"
      - expression: "http.request_rate > 1000000"
        strict: false
    maxErrorRate: 0
    p99: 10000
scenarios:
  - name: main
    weight: 3
    flow:
      - post:
          url: "/items"
          name: create
          headers:
            x-req: "{{{{ uname }}}}"
          json:
            uid: "{{{{ uid }}}}"
            name: "{{{{uname}}}}"
            n: "{{{{ n }}}}"
            color: "{{{{ color }}}}"
            env: "{{{{ envVar }}}}"
            base: "{{{{ base }}}}"
            r: "{{{{ $randomNumber(1,5) }}}}"
            s: "{{{{ $randomString(8) }}}}"
            u: "{{{{ $uuid }}}}"
            nested: ["{{{{ uid }}}}-x", {{ deep: "{{{{ label }}}}" }}]
          capture:
            - json: "$.id"
              as: itemId
            - header: "x-token"
              as: token
            - regexp: '"tag":"([a-z]+)"'
              group: 1
              as: tag
            - json: "$.echo.nested[1].deep"
              as: deep
          expect:
            - statusCode: 201
            - contentType: json
            - hasProperty: meta.tag
          afterResponse: "recordIt"
      - loop:
          - get:
              url: "/items/{{{{ itemId }}}}?tok={{{{ token }}}}&tag={{{{ tag }}}}&el={{{{ $loopElement }}}}&c={{{{ $loopCount }}}}&d={{{{ deep }}}}"
              name: item
              expect:
                statusCode: [200, 201]
        over: [x, y]
      - loop:
          - get:
              url: "/ping"
              qs:
                i: "{{{{ $loopCount }}}}"
                u: "{{{{ uid }}}}"
        count: 3
      - think: 0.05
      - function: "setStuff"
      - log: "done {{{{ uid }}}}"
  - name: never
    weight: 0
    flow:
      - get:
          url: "/never"
"#,
        target = srv.url()
    );
    let opts = LoadOptions {
        environment: Some("test".into()),
        ..LoadOptions::default()
    };
    let outcome = run_yaml(dir.path(), &yaml, opts).await;
    let r = &outcome.report;
    assert_eq!(counter(r, "vusers.created"), 4);
    assert_eq!(
        counter(r, "vusers.completed"),
        4,
        "{:?}",
        r.aggregate.counters
    );
    assert_eq!(counter(r, "vusers.created_by_name.main"), 4);
    assert_eq!(counter(r, "http.requests"), 4 * 6);
    assert_eq!(counter(r, "http.codes.201"), 4);
    assert_eq!(counter(r, "plugins.expect.ok.statusCode"), 4 * 3);
    assert_eq!(
        counter(r, "plugins.metrics-by-endpoint.create.codes.201"),
        4
    );
    assert!(r
        .aggregate
        .summaries
        .contains_key("plugins.metrics-by-endpoint.response_time.item"));
    assert_eq!(outcome.exit_code(), 0, "checks: {:?}", outcome.checks);
    assert!(
        outcome.checks.iter().any(|c| !c.ok && !c.strict),
        "non-strict condition reported, not fatal"
    );

    let posts: Vec<_> = srv
        .seen()
        .into_iter()
        .filter(|s| s.method == "POST")
        .collect();
    assert_eq!(posts.len(), 4);
    let mut uids = Vec::new();
    for p in &posts {
        let body: Value = serde_json::from_slice(&p.body).unwrap();
        assert!(
            body["uid"].is_number(),
            "cast keeps numbers numbers: {body}"
        );
        uids.push(body["uid"].as_i64().unwrap());
        assert_eq!(body["n"], json!("007"), "cast: false keeps strings");
        assert_eq!(body["nested"][1]["deep"], json!("seven"));
        assert_eq!(body["nested"][0], json!(format!("{}-x", body["uid"])));
        assert_eq!(body["color"], json!("red"));
        assert_eq!(
            body["env"],
            json!("from-env"),
            "environment variables merged"
        );
        assert_eq!(
            body["base"],
            json!("b"),
            "base variables kept by the deep merge"
        );
        let r = body["r"].as_i64().unwrap();
        assert!((1..=5).contains(&r));
        assert_eq!(body["s"].as_str().unwrap().len(), 8);
        assert_eq!(body["u"].as_str().unwrap().len(), 36);
        assert_eq!(p.headers["x-default"], "d1");
        assert_eq!(p.headers["x-env"], "e1");
        assert_eq!(p.headers["content-type"], "application/json");
        assert_eq!(
            p.headers["x-req"],
            if body["uid"] == json!(1) {
                "ann"
            } else {
                "bob"
            }
        );
    }
    uids.sort();
    assert_eq!(
        uids,
        vec![1, 1, 2, 2],
        "sequence order, header skipped, empty line skipped"
    );
    let items = srv.seen_paths("/items/42");
    assert_eq!(items.len(), 8);
    assert!(
        items.contains(&"/items/42?tok=abc&tag=foo&el=x&c=0&d=seven".to_string()),
        "{items:?}"
    );
    assert!(
        items.contains(&"/items/42?tok=abc&tag=foo&el=y&c=1&d=seven".to_string()),
        "{items:?}"
    );
    let pings = srv.seen_paths("/ping");
    assert_eq!(pings.len(), 12);
    // $loopCount counts from 0, as Artillery's.
    for i in 0..3 {
        assert!(
            pings
                .iter()
                .any(|p| p.starts_with(&format!("/ping?i={i}&u="))),
            "{pings:?}"
        );
    }
    assert!(srv.seen_paths("/never").is_empty(), "weight 0 never runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_and_max_vusers() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
config:
  target: "{}"
  http:
    timeout: 1
  phases:
    - duration: 1
      arrivalCount: 6
      maxVusers: 2
scenarios:
  - flow:
      - get:
          url: "/slow"
"#,
        srv.url()
    );
    let started = std::time::Instant::now();
    let outcome = run_yaml(dir.path(), &yaml, LoadOptions::default()).await;
    let r = &outcome.report;
    assert_eq!(counter(r, "vusers.created"), 2);
    assert_eq!(counter(r, "vusers.skipped"), 4);
    assert_eq!(counter(r, "errors.ETIMEDOUT"), 2);
    assert_eq!(counter(r, "vusers.failed"), 2);
    assert_eq!(counter(r, "http.responses"), 0);
    assert!(
        started.elapsed().as_secs_f64() < 4.0,
        "timeout cut the 5 s responses short"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_capture_expectation_and_refused_connection() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let capture = format!(
        "config:\n  target: \"{}\"\nscenarios:\n  - flow:\n      - post:\n          url: /items\n          json: {{a: 1}}\n          capture:\n            json: \"$.missing\"\n            as: m\n      - get:\n          url: /never\n",
        srv.url()
    );
    let r = run_yaml(dir.path(), &capture, LoadOptions::default())
        .await
        .report;
    assert_eq!(counter(&r, "errors.Failed capture or match"), 1);
    assert_eq!(counter(&r, "vusers.failed"), 1);
    assert!(
        srv.seen_paths("/never").is_empty(),
        "a failed capture ends the session"
    );

    let expect = format!(
        "config:\n  target: \"{}\"\n  plugins:\n    expect:\n      reportFailuresAsErrors: true\nscenarios:\n  - flow:\n      - get:\n          url: /status/500\n          expect:\n            - statusCode: 200\n",
        srv.url()
    );
    let r = run_yaml(dir.path(), &expect, LoadOptions::default())
        .await
        .report;
    assert_eq!(counter(&r, "plugins.expect.failed.statusCode"), 1);
    assert_eq!(
        counter(
            &r,
            &format!(
                "errors.Failed expectations for request {}/status/500",
                srv.url()
            )
        ),
        1
    );
    assert_eq!(counter(&r, "http.codes.500"), 1);

    // Nothing listens on port 1.
    let refused = "config:\n  target: \"http://127.0.0.1:1\"\n  ensure:\n    maxErrorRate: 0\nscenarios:\n  - flow:\n      - get:\n          url: /\n";
    let outcome = run_yaml(dir.path(), refused, LoadOptions::default()).await;
    assert_eq!(counter(&outcome.report, "errors.ECONNREFUSED"), 1);
    assert_eq!(outcome.exit_code(), 1, "maxErrorRate broken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_failure_exits_1() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "config:\n  target: \"{}\"\n  ensure:\n    thresholds:\n      - \"http.response_time.p99\": 0.001\nscenarios:\n  - flow:\n      - get:\n          url: /health\n",
        srv.url()
    );
    write(dir.path(), "e.yml", &yaml);
    let out = throng_load(&["run", dir.path().join("e.yml").to_str().unwrap()]).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("fail: http.response_time.p99 < 0.001"));
}

/// One virtual user's request under `config.http.retryAfter`, with a pause phase that
/// leaves `pause_s` for its retries; returns the run and the server.
async fn retried_once(
    path: &str,
    retry_after: &str,
    pause_s: u64,
) -> (runner::RunOutcome, server::TestServer) {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
config:
  target: "{}"
  plugins:
    expect:
      reportFailuresAsErrors: true
  http:
    retryAfter:
      retries: 3
      jitterMs: 0
{retry_after}
  phases:
    - duration: 1
      arrivalCount: 1
    - pause: {pause_s}
scenarios:
  - flow:
      - get:
          url: "{path}"
          expect:
            - statusCode: 200
"#,
        srv.url()
    );
    (
        run_yaml(dir.path(), &yaml, LoadOptions::default()).await,
        srv,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured_then_given_up() {
    // Two 429s with Retry-After: 1, then 200: three attempts a second apart, one success.
    let (outcome, srv) = retried_once("/crowded/2/1", "", 4).await;
    let r = &outcome.report;
    assert_eq!(counter(r, "http.codes.429"), 2);
    assert_eq!(counter(r, "http.codes.200"), 1);
    assert_eq!(counter(r, "http.retries"), 2);
    assert_eq!(counter(r, "http.retry_after_missing"), 0);
    assert_eq!(counter(r, "vusers.completed"), 1);
    let at: Vec<_> = srv.seen().iter().map(|s| s.at).collect();
    assert_eq!(at.len(), 3);
    for pair in at.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(990) && gap < Duration::from_millis(1_500),
            "{gap:?}"
        );
    }
    let s = &r.aggregate.summaries;
    assert_eq!(s["http.response_time.2xx"].count, 1);
    assert_eq!(s["http.response_time.4xx"].count, 2);

    // Retries run out: four 429s, the last goes to the expectation and fails the user.
    let (outcome, _) = retried_once("/crowded/9/0", "", 2).await;
    let r = &outcome.report;
    assert_eq!(counter(r, "http.codes.429"), 4);
    assert_eq!(counter(r, "http.retries"), 3);
    assert_eq!(counter(r, "vusers.failed"), 1);

    // 503 without Retry-After waits defaultS.
    let (outcome, srv) = retried_once("/crowded/1/none", "      defaultS: 0.3", 2).await;
    let r = &outcome.report;
    assert_eq!(
        (counter(r, "http.codes.503"), counter(r, "http.codes.200")),
        (1, 1)
    );
    assert_eq!(counter(r, "http.retry_after_missing"), 1);
    let at: Vec<_> = srv.seen().iter().map(|s| s.at).collect();
    let gap = at[1] - at[0];
    assert!(
        gap >= Duration::from_millis(290) && gap < Duration::from_millis(900),
        "{gap:?}"
    );

    // A wait past the last phase is not started: the run ends on time.
    let started = std::time::Instant::now();
    let (outcome, _) = retried_once("/crowded/9/30", "", 1).await;
    let r = &outcome.report;
    assert_eq!(counter(r, "http.codes.429"), 1);
    assert_eq!(counter(r, "http.retries_abandoned"), 1);
    assert_eq!(counter(r, "http.retries"), 0);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_pool_reuses_connections_across_virtual_users() {
    let run = |pool: &'static str| async move {
        let srv = server::start().await;
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            r#"
config:
  target: "{}"
{pool}
  phases:
    - duration: 2
      arrivalRate: 20
scenarios:
  - flow:
      - get:
          url: "/peer"
      - get:
          url: "/peer"
"#,
            srv.url()
        );
        let outcome = run_yaml(dir.path(), &yaml, LoadOptions::default()).await;
        assert_eq!(counter(&outcome.report, "http.codes.200"), 80);
        let peers: std::collections::HashSet<_> =
            srv.log.peers.lock().unwrap().iter().copied().collect();
        peers.len()
    };
    // Artillery's default: a connection per virtual user.
    assert_eq!(run("").await, 40);
    // Shared: 40 users one after another (each done in well under 50 ms) need a few.
    let shared = run("  http:\n    pool: 4").await;
    assert!(
        shared <= 4,
        "{shared} connections for 40 users with pool: 4"
    );
}
