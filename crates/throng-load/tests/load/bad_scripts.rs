//! Bad scripts fail fast with exit code 2 and a message naming the key or line.

use super::{stderr, throng_load, write};

async fn run_bad(yaml: &str, extra: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "bad.yml", yaml);
    let path = dir.path().join("bad.yml");
    let mut args = vec!["run", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = throng_load(&args).await;
    (out.status.code(), stderr(&out))
}

const OK_TAIL: &str = "scenarios:\n  - flow:\n      - get:\n          url: /\n";

#[tokio::test]
async fn invalid_yaml_names_the_line() {
    let (code, err) = run_bad("config:\n  target: \"http://x\n  phases: [\n", &[]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("line"), "{err}");
}

#[tokio::test]
async fn unknown_keys_are_warned_by_name_not_refused() {
    // Artillery ignores keys it does not know; throng-load says which ones, once each.
    let yaml = "config:\n  target: \"http://127.0.0.1:1\"\n  phasez:\n    - duration: 1\n  statsInterval: 5\n  mode: uniform\n  phases:\n    - duration: 1\n      arrivalCount: 1\n      jitter: 3\nbefore:\n  flow:\n    - get:\n        url: /b4\n        zz: 1\nscenarios:\n  - flow:\n      - get:\n          url: /\n          qz: 1\n      - get:\n          url: /b\n          qz: 2\n";
    let (code, err) = run_bad(yaml, &[]).await;
    assert_eq!(code, Some(0), "{err}");
    for key in [
        "config.phasez",
        "config.statsInterval",
        "config.mode",
        "config.phases[0].jitter",
        "before.flow[0].get.zz",
        "scenarios[0].flow[0].get.qz: not a key throng-load acts on; ignored (and 1 more like it)",
    ] {
        assert!(err.contains(key), "{key} in {err}");
    }
    assert_eq!(err.matches("qz").count(), 1, "{err}");
}

#[tokio::test]
async fn no_target() {
    let yaml = format!(
        "config:\n  environments:\n    local:\n      target: \"http://127.0.0.1:1\"\n{OK_TAIL}"
    );
    let (code, err) = run_bad(&yaml, &[]).await;
    assert_eq!(code, Some(2));
    assert!(
        err.contains("config.target") && err.contains("-e (local)"),
        "{err}"
    );
    let (code, err) = run_bad(&yaml, &["-e", "staging"]).await;
    assert_eq!(code, Some(2));
    assert!(err.contains("staging") && err.contains("local"), "{err}");
}

#[tokio::test]
async fn missing_csv() {
    let yaml = format!("config:\n  target: \"http://127.0.0.1:1\"\n  payload:\n    path: ./testData.csv\n    fields: [a]\n{OK_TAIL}");
    let (code, err) = run_bad(&yaml, &[]).await;
    assert_eq!(code, Some(2));
    assert!(
        err.contains("config.payload.path") && err.contains("testData.csv"),
        "{err}"
    );
}

#[tokio::test]
async fn bad_phases() {
    let cases = [
        ("- duration: -5\n      arrivalRate: 1", "line"),
        ("- duration: 5", "config.phases[0]"),
        (
            "- duration: \"5 fortnights\"\n      arrivalRate: 1",
            "fortnights",
        ),
        (
            "- duration: 5\n      arrivalRate: 1\n      arrivalCount: 2",
            "arrivalCount",
        ),
        ("- arrivalRate: 1", "duration"),
        ("- duration: 5\n      arrivalRate: -1", "arrivalRate"),
    ];
    for (phase, needle) in cases {
        let yaml =
            format!("config:\n  target: \"http://127.0.0.1:1\"\n  phases:\n    {phase}\n{OK_TAIL}");
        let (code, err) = run_bad(&yaml, &[]).await;
        assert_eq!(code, Some(2), "{phase}: {err}");
        assert!(
            err.contains(needle),
            "{phase}: expected {needle:?} in {err}"
        );
    }
}

#[tokio::test]
async fn bad_closed_phases() {
    let range = "whole number from 1 to 10000";
    let mixed = "cannot be combined with vusers";
    let accepted = "vusers, duration, optional rampUp and name";
    let cases: [(&str, &[&str]); 11] = [
        (
            "- duration: 5\n      vusers: 0",
            &["config.phases[0].vusers", range],
        ),
        (
            "- duration: 5\n      vusers: 2.5",
            &["config.phases[0].vusers", range, "2.5"],
        ),
        (
            "- duration: 5\n      vusers: 10001",
            &["config.phases[0].vusers", range],
        ),
        (
            "- duration: 5\n      vusers: 3\n      arrivalRate: 1",
            &["config.phases[0].arrivalRate", mixed, accepted],
        ),
        (
            "- duration: 5\n      vusers: 3\n      arrivalCount: 4",
            &["config.phases[0].arrivalCount", mixed],
        ),
        (
            "- duration: 5\n      vusers: 3\n      rampTo: 4",
            &["config.phases[0].rampTo", mixed],
        ),
        (
            "- pause: 5\n      vusers: 3",
            &["config.phases[0].pause", mixed],
        ),
        ("- vusers: 3", &["config.phases[0].duration", accepted]),
        (
            "- duration: 5\n      vusers: 3\n      rampUp: 6",
            &["config.phases[0].rampUp", "at most the duration"],
        ),
        (
            "- duration: 5\n      arrivalRate: 1\n      rampUp: 2",
            &["config.phases[0].rampUp", "closed-model", "vusers"],
        ),
        (
            "- duration: 5\n      vusers: 3\n    - duration: 5\n      vusers: -1\n      name: hold",
            &["config.phases[1] (\"hold\").vusers", range, "-1"],
        ),
    ];
    for (phase, needles) in cases {
        let yaml =
            format!("config:\n  target: \"http://127.0.0.1:1\"\n  phases:\n    {phase}\n{OK_TAIL}");
        let (code, err) = run_bad(&yaml, &[]).await;
        assert_eq!(code, Some(2), "{phase}: {err}");
        for needle in needles {
            assert!(
                err.contains(needle),
                "{phase}: expected {needle:?} in {err}"
            );
        }
    }
}

#[tokio::test]
async fn bad_steps_and_conditions() {
    let cases = [
        (
            "scenarios:\n  - flow:\n      - {}\n",
            "scenarios[0].flow[0]",
        ),
        (
            "scenarios:\n  - flow:\n      - get: {url: /}\n        loopValue: x\n",
            "belong to a loop step",
        ),
        (
            "scenarios:\n  - flow:\n      - parallel:\n          - get: {url: /}\n        limit: 0\n",
            "flow[0].limit",
        ),
        ("scenarios: []\n", "scenarios"),
        (
            "scenarios:\n  - flow:\n      - get: {url: /, capture: {json: \"a.b\", as: x}}\n",
            "capture[0].json",
        ),
    ];
    for (tail, needle) in cases {
        let yaml = format!("config:\n  target: \"http://127.0.0.1:1\"\n{tail}");
        let (code, err) = run_bad(&yaml, &[]).await;
        assert_eq!(code, Some(2), "{tail}: {err}");
        assert!(err.contains(needle), "expected {needle:?} in {err}");
    }
    let yaml = format!("config:\n  target: \"http://127.0.0.1:1\"\n  ensure:\n    conditions:\n      - expression: \"p99 <\"\n{OK_TAIL}");
    let (code, err) = run_bad(&yaml, &[]).await;
    assert_eq!(code, Some(2));
    assert!(err.contains("config.ensure.conditions[0]"), "{err}");
}

#[tokio::test]
async fn tolerated_keys_warn_but_run() {
    let yaml = "config:\n  target: \"http://127.0.0.1:1\"\n  processor: ./p.js\n  plugins:\n    publish-metrics: {}\n  phases:\n    - pause: 0.1\nscenarios:\n  - beforeScenario: setup\n    flow:\n      - get:\n          url: /\n          beforeRequest: sign\n          ifTrue: \"x <\"\n          probability: often\n";
    let (code, err) = run_bad(yaml, &[]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("publish-metrics") && err.contains("processor"),
        "{err}"
    );
    assert!(
        err.contains("flow[0].get.ifTrue") && err.contains("always sent"),
        "{err}"
    );
    assert!(
        err.contains("flow[0].get.probability") && err.contains("never sent"),
        "{err}"
    );
}

#[tokio::test]
async fn bad_http_extensions_name_the_key() {
    let cases = [
        (
            "pool: 0",
            "config.http.pool: a number of connections from 1 to",
        ),
        ("pool: lots", "config.http.pool"),
        (
            "retryAfter: {retries: 0}",
            "config.http.retryAfter.retries: 1 to 100",
        ),
        (
            "retryAfter: {statuses: [200]}",
            "config.http.retryAfter.statuses",
        ),
        (
            "retryAfter: {jitterMs: 70000}",
            "config.http.retryAfter.jitterMs",
        ),
        ("retryAfter: {retriez: 3}", "retriez"),
    ];
    for (http, want) in cases {
        let yaml = format!(
            "config:\n  target: \"http://127.0.0.1:1\"\n  http:\n    {http}\n  phases:\n    - duration: 1\n      arrivalCount: 1\n{OK_TAIL}"
        );
        let (code, err) = run_bad(&yaml, &[]).await;
        assert_eq!(code, Some(2), "{http}: {err}");
        assert!(err.contains(want), "{http}: {err}");
    }
    let (code, err) = run_bad(
        &format!("config:\n  target: \"http://127.0.0.1:1\"\n{OK_TAIL}"),
        &["--period", "0s"],
    )
    .await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("a period from 1s to 1h"), "{err}");
}
