//! The write-up's load test as shipped (`services/voting/artillery/scalection.yml`), run by the
//! real binaries: `throng seed voting --voters-csv` writes the voters, `throng serve
//! --voting-identity headers` serves them, and `throng load run` runs the script's `test`
//! environment (the same workflow in three short closed-model phases). Checks: zero errors,
//! every GET 200 and every POST 201, each phase held its virtual users, and the public
//! board holds exactly the ballots the load tool was answered 201 for.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::both_stores;
use crate::helpers::{store_flags, throng_bin, PgDb, ProcessServer, StoreKind};

both_stores!(shipped_workflow_runs_clean);

const VOTERS: u64 = 100_000;
const DISTRICTS: u64 = 3;
/// The script's `test` environment: (vusers, seconds) per phase.
const TEST_PHASES: [(u64, f64); 3] = [(4, 2.0), (8, 2.0), (8, 3.0)];

fn script_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../throng-services/src/services/voting/artillery")
}

async fn run(args: &[String], limit: Duration) -> std::process::Output {
    tokio::time::timeout(
        limit,
        tokio::process::Command::new(throng_bin())
            .args(args)
            .env("RUST_LOG", "warn")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("throng {args:?} did not finish in {limit:?}"))
    .expect("throng runs")
}

fn text(out: &std::process::Output) -> String {
    format!(
        "--- stdout ---\n{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

async fn shipped_workflow_runs_clean(kind: StoreKind) {
    let db = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let pg_url = db.as_ref().map(|d| d.url.as_str());
    let dir = tempfile::TempDir::new().unwrap();
    let work = tempfile::TempDir::new().unwrap();

    // The shipped script beside a CSV written by the seed, as its README runs it.
    let script = work.path().join("scalection.yml");
    std::fs::copy(script_dir().join("scalection.yml"), &script).expect("copy the shipped script");
    let csv = work.path().join("voters.csv");
    let mut seed: Vec<String> = vec!["seed".into()];
    seed.extend(store_flags(dir.path(), pg_url));
    seed.extend(
        [
            "voting",
            "--voters",
            &VOTERS.to_string(),
            "--districts",
            &DISTRICTS.to_string(),
            "--parties",
            "4",
            "--candidates-per-party",
            "6",
            "--voters-csv",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    seed.push(csv.display().to_string());
    let out = run(&seed, Duration::from_secs(120)).await;
    assert!(
        out.status.success(),
        "throng seed voting failed\n{}",
        text(&out)
    );
    let rows = std::fs::read_to_string(&csv).expect("the seed wrote the CSV");
    let mut lines = rows.lines();
    assert_eq!(lines.next(), Some("voter-id,election-district-id,sealed"));
    assert_eq!(lines.count() as u64, VOTERS, "one row per voter");

    let server = ProcessServer::start(
        dir.path(),
        pg_url,
        &[
            "--voting-identity",
            "headers",
            "--voting-board-period-ms",
            "100",
        ],
    )
    .await;

    let report = work.path().join("report.json");
    let load: Vec<String> = vec![
        "load".into(),
        "run".into(),
        script.display().to_string(),
        "-e".into(),
        "test".into(),
        "-t".into(),
        format!("http://{}", server.addr),
        "--output".into(),
        report.display().to_string(),
    ];
    let out = run(&load, Duration::from_secs(90)).await;
    assert!(
        out.status.success(),
        "throng load run exited {:?} (1: an ensure check failed)\n{}\n--- server log ---\n{}",
        out.status.code(),
        text(&out),
        server.log_text()
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report written"))
            .expect("report is JSON");

    // Zero errors; every iteration completed; every GET 200 and every POST 201.
    let counters = &report["aggregate"]["counters"];
    let counter = |name: &str| counters[name].as_u64().unwrap_or(0);
    let map = counters.as_object().expect("counters");
    let errors: Vec<_> = map
        .iter()
        .filter(|(k, v)| k.starts_with("errors.") && v.as_u64() != Some(0))
        .collect();
    assert!(errors.is_empty(), "errors: {errors:?}\n{}", text(&out));
    assert_eq!(counter("vusers.failed"), 0, "{counters}");
    let iterations = counter("vusers.created");
    assert!(
        iterations > 50,
        "only {iterations} iterations ran: {counters}"
    );
    assert_eq!(
        counter("vusers.completed"),
        iterations,
        "every iteration ended: {counters}"
    );
    let codes: Vec<_> = map
        .iter()
        .filter(|(k, _)| k.starts_with("http.codes."))
        .map(|(k, v)| (k.as_str(), v.as_u64().unwrap_or(0)))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("http.codes.200", iterations),
            ("http.codes.201", iterations)
        ],
        "one GET 200 and one POST 201 per iteration"
    );
    let by_name = "plugins.metrics-by-endpoint";
    assert_eq!(
        counter(&format!("{by_name}.GET ballot.codes.200")),
        iterations
    );
    assert_eq!(
        counter(&format!("{by_name}.POST vote.codes.201")),
        iterations
    );
    assert!(
        iterations <= VOTERS,
        "the CSV ran out: voters would vote twice"
    );

    // Each closed phase held its pool.
    let phases = report["phases"].as_array().expect("phases in the report");
    eprintln!("{iterations} iterations (GET + POST); phases: {phases:?}");
    assert_eq!(phases.len(), TEST_PHASES.len(), "{phases:?}");
    for (p, (vusers, seconds)) in phases.iter().zip(TEST_PHASES) {
        assert_eq!(p["kind"], "closed", "{p}");
        assert_eq!(p["vusers_target"].as_u64(), Some(vusers), "{p}");
        assert_eq!(
            p["vusers_concurrent_max"].as_u64(),
            Some(vusers),
            "the pool reached its size and no more: {p}"
        );
        let mean = p["vusers_concurrent_mean"].as_f64().unwrap();
        assert!(
            mean >= vusers as f64 * 0.9 && mean <= vusers as f64,
            "the pool was held through the phase (mean {mean} of {vusers}): {p}"
        );
        let measured = p["duration_s"].as_f64().unwrap();
        assert!(
            (measured - seconds).abs() < 1.0,
            "phase lasted {measured} s, planned {seconds} s: {p}"
        );
        assert!(p["vusers_created"].as_u64().unwrap() > 0, "{p}");
    }

    // The board holds exactly those votes (a period after the last).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let results = loop {
        let r = server.api.get("/api/voting/elections/1/results").await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        if v["ballots"].as_u64() == Some(iterations) {
            break v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the board never reached {iterations} ballots: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        results["parties"],
        serde_json::json!([]),
        "sealed until the opening"
    );
}
