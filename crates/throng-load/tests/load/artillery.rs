//! Artillery scripts of our own (`tests/load/scripts/`), run by the binary against the
//! recording test server: the traffic Artillery would send for each feature, and its exit
//! code.

use std::{path::Path, process::Output, time::Duration};

use super::{server, stderr, write};

/// Runs `throng-load run SCRIPT -t URL ARGS...` with `env`, from a temp folder holding
/// the script and the files given.
pub async fn run_script(
    dir: &Path,
    script: &str,
    target: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    run_edited(dir, script, |t| t, target, args, env).await
}

/// As [`run_script`], with the script's text changed by `edit` first.
pub async fn run_edited(
    dir: &Path,
    script: &str,
    edit: impl Fn(String) -> String,
    target: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/load/scripts")
            .join(script),
    )
    .unwrap();
    write(dir, script, &edit(text));
    let path = dir.join(script);
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_throng-load"));
    cmd.arg("run").arg(&path).arg("-t").arg(target).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().await.expect("run throng-load")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_loops_payload_options_and_flow_keys() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "users.csv", "ann;Oslo\nbob;Rome\n");
    write(dir.path(), "rows-ci.csv", "k,v\nfirst,1\nsecond,2\n");
    let out = run_script(
        dir.path(),
        "semantics.yml",
        &srv.url(),
        &["-e", "ci"],
        &[("SEMANTICS_USERS", "2")],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = srv.seen();
    let paths = |prefix: &str| srv.seen_paths(prefix);
    // Templated arrivalCount: two users; triple braces; delimiter ';' splits the fields;
    // order: sequence hands the rows out in turn.
    let mut firsts = paths("/t/");
    firsts.sort();
    assert_eq!(firsts, ["/t/7/ann/Oslo", "/t/7/bob/Rome"]);
    // $loopCount from 0; loopValue and loopElement rename the index and the element.
    let mut loops = paths("/loop/");
    loops.sort();
    assert_eq!(loops, ["/loop/0/a", "/loop/0/a", "/loop/1/b", "/loop/1/b"]);
    assert_eq!(paths("/named/"), ["/named/0/c", "/named/0/c"]);
    // count: "9-12" runs from index 9 to 11, as Artillery's.
    for name in ["ann", "bob"] {
        let range = paths(&format!("/range/{name}/"));
        assert_eq!(
            range,
            [9, 10, 11].map(|i| format!("/range/{name}/{i}")),
            "{name}"
        );
    }
    // think: "0.3s" waits 300 ms.
    for name in ["ann", "bob"] {
        let first = seen.iter().find(|s| s.uri.contains(name)).unwrap().at;
        let next = seen
            .iter()
            .filter(|s| s.uri.starts_with("/loop/0"))
            .map(|s| s.at)
            .filter(|at| *at > first)
            .min()
            .unwrap();
        assert!(next - first >= Duration::from_millis(290), "{name}");
    }
    // Basic auth, templated.
    let mut auths: Vec<String> = seen
        .iter()
        .filter(|s| s.uri == "/auth")
        .map(|s| s.headers["authorization"].to_str().unwrap().to_string())
        .collect();
    auths.sort();
    assert_eq!(auths, ["Basic YW5uOk9zbG8=", "Basic YW5uOlJvbWU="]);
    // probability 0 never sends, 100 always; ifTrue on the user's variables.
    assert!(paths("/never").is_empty());
    let half = paths("/half").len();
    assert!((120..=280).contains(&half), "{half} of 400");
    assert_eq!(paths("/iftrue").len(), 2);
    assert!(paths("/iffalse").is_empty());
    // parallel: the two delayed requests of a user overlap; the capture of a parallel
    // step is seen after it; loadAll with skipHeader and $environment in the path.
    let spans = srv.spans();
    assert_eq!(spans.len(), 4);
    let overlapping = spans
        .iter()
        .filter(|a| {
            spans
                .iter()
                .any(|b| !std::ptr::eq(*a, b) && a.start < b.end && b.start < a.end)
        })
        .count();
    assert_eq!(overlapping, 4, "{spans:?}");
    assert_eq!(paths("/rows/"), ["/rows/second/42", "/rows/second/42"]);
    // Artillery's User-Agent on every request.
    assert!(seen
        .iter()
        .all(|s| s.headers["user-agent"] == "Artillery (https://artillery.io)"));
    assert!(!stdout(&out).contains("errors."), "{}", stdout(&out));
}

#[tokio::test]
async fn think_units_are_read_as_artillery_reads_them_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "config:\n  target: \"http://127.0.0.1:1\"\n  phases:\n    - pause: 0.1\nscenarios:\n  - flow:\n      - think: \"500ms\"\n";
    write(dir.path(), "t.yml", yaml);
    let out = super::throng_load(&["run", dir.path().join("t.yml").to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("flow[0].think \"500ms\"") && stderr(&out).contains("waits 500 s"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn think_with_a_bad_unit_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "config:\n  target: \"http://127.0.0.1:1\"\nscenarios:\n  - flow:\n      - think: \"2 fortnights\"\n";
    write(dir.path(), "t.yml", yaml);
    let out = super::throng_load(&["run", dir.path().join("t.yml").to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("flow[0].think"), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_without_count_runs_until_the_last_phase_ends() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = "config:\n  target: \"http://127.0.0.1:1\"\n  phases:\n    - duration: 1\n      arrivalCount: 1\nscenarios:\n  - flow:\n      - loop:\n          - get: {url: /forever}\n          - think: 0.2\n";
    write(dir.path(), "f.yml", yaml);
    let started = std::time::Instant::now();
    let out = super::throng_load(&[
        "run",
        dir.path().join("f.yml").to_str().unwrap(),
        "-t",
        &srv.url(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no count or over"),
        "{}",
        stderr(&out)
    );
    let n = srv.seen_paths("/forever").len();
    assert!((3..=7).contains(&n), "{n}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// `name=value` pairs of a Cookie header, sorted.
fn pairs(header: &str) -> Vec<String> {
    let mut v: Vec<String> = header
        .split("; ")
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookie_jar_per_virtual_user() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let port = srv.addr.port().to_string();
    let out = run_script(
        dir.path(),
        "cookies.yml",
        &srv.url(),
        &[],
        &[("COOKIE_PORT", &port)],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for (_, c) in srv.cookies("/before") {
        assert_eq!(pairs(&c), ["lang=nb"]);
    }
    let pages = srv.cookies("/app/page");
    assert_eq!(pages.len(), 3);
    for (uri, c) in &pages {
        // Each user sends its own session back; the cookie for /app too; the expired one
        // is not kept. The default cookie, set for each request's URL as Artillery sets it,
        // is kept once per default path (here `/` and `/app`), as its jar keeps it.
        let sid = uri.split("sid=").nth(1).unwrap();
        assert_eq!(
            pairs(c),
            [
                "lang=nb".to_string(),
                "lang=nb".into(),
                format!("sid={sid}"),
                "theme=dark".into()
            ]
        );
    }
    for (uri, c) in srv.cookies("/other") {
        let sid = uri.split("sid=").nth(1).unwrap();
        assert_eq!(
            pairs(&c),
            [
                format!("extra=x{sid}"),
                "lang=nb".into(),
                format!("sid={sid}")
            ]
        );
    }
    // Another host gets none of 127.0.0.1's cookies, only the defaults set for it.
    for (_, c) in srv.cookies("/foreign") {
        assert_eq!(pairs(&c), ["lang=nb"]);
    }
    // After the server deletes the session, it is no longer sent.
    for (uri, c) in srv.cookies("/after") {
        let sid = uri.split("sid=").nth(1).unwrap();
        assert_eq!(pairs(&c), [format!("extra=x{sid}"), "lang=nb".into()]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_set_cookie_is_counted_and_skipped() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    for kind in ["bad", "foreign"] {
        // Default headers: Artillery then sends no User-Agent of its own.
        let yaml = format!(
            "config:\n  target: \"{}\"\n  defaults:\n    headers:\n      x-a: b\nscenarios:\n  - flow:\n      - get: {{url: /cookie/{kind}}}\n      - get: {{url: /next/{kind}}}\n",
            srv.url()
        );
        let r = super::run_yaml(
            dir.path(),
            &yaml,
            throng_load::script::LoadOptions::default(),
        )
        .await
        .report;
        assert_eq!(
            super::counter(&r, "errors.cookie_parse_error_invalid_cookie"),
            1,
            "{kind}"
        );
        assert_eq!(super::counter(&r, "vusers.completed"), 1);
        assert_eq!(super::counter(&r, "http.codes.200"), 2);
        let next = srv.cookies(&format!("/next/{kind}"));
        assert_eq!(next, [(format!("/next/{kind}"), String::new())]);
    }
    assert!(srv
        .seen()
        .iter()
        .all(|s| s.headers.get("user-agent").is_none()));
}

/// The JSON report a run wrote with `-o`.
fn report(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn count(report: &serde_json::Value, name: &str) -> u64 {
    report["aggregate"]["counters"][name].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_plugin_counts_goes_on_and_exits_21() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = run_script(
        dir.path(),
        "expect.yml",
        &srv.url(),
        &["-o", json.to_str().unwrap()],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(21), "{}", stderr(&out));
    let r = report(&json);
    // Nine passing expectations on /items and the default 200 on /after, per user.
    assert_eq!(count(&r, "plugins.expect.ok"), 20, "{r}");
    assert_eq!(count(&r, "plugins.expect.ok.statusCode"), 4);
    for kind in [
        "contentType",
        "hasProperty",
        "notHasProperty",
        "hasHeader",
        "header x-token values equals",
        "equals",
        "matchesRegexp",
        "notStatusCode",
    ] {
        assert_eq!(count(&r, &format!("plugins.expect.ok.{kind}")), 2, "{kind}");
    }
    // /status/500 fails its list; /status/404 fails the default 200.
    assert_eq!(count(&r, "plugins.expect.failed"), 4);
    assert_eq!(count(&r, "plugins.expect.failed.statusCode"), 4);
    // The users went on to the end.
    assert_eq!(srv.seen_paths("/after").len(), 2);
    assert_eq!(count(&r, "vusers.completed"), 2);

    // reportFailuresAsErrors: the first failure ends the user, named by its URL.
    let out = run_edited(
        dir.path(),
        "expect.yml",
        |t| {
            t.replace(
                "reportFailuresAsErrors: false",
                "reportFailuresAsErrors: true",
            )
        },
        &srv.url(),
        &["-o", json.to_str().unwrap()],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(21), "{}", stderr(&out));
    let r = report(&json);
    let error = format!(
        "errors.Failed expectations for request {}/status/500",
        srv.url()
    );
    assert_eq!(count(&r, &error), 2, "{r}");
    assert_eq!(count(&r, "vusers.failed"), 2);
    assert_eq!(srv.seen_paths("/after").len(), 2, "no more /after");

    // Without the plugin the expectations are not checked (as in Artillery), and it says so.
    let out = run_edited(
        dir.path(),
        "expect.yml",
        |t| t.replace("  plugins:\n    expect:", "  x-plugins:\n    expect:"),
        &srv.url(),
        &["-o", json.to_str().unwrap()],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("only with config.plugins.expect"),
        "{}",
        stderr(&out)
    );
    assert_eq!(count(&report(&json), "plugins.expect.ok"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_under_plugins_fails_the_run() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let out = run_script(dir.path(), "ensure.yml", &srv.url(), &[], &[]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("fail: maxErrorRate < 0"), "{text}");
    assert!(text.contains("ok: p99 < 100000"), "{text}");
    // config.ensure, when present, replaces config.plugins.ensure (as Artillery reads it).
    let out = run_edited(
        dir.path(),
        "ensure.yml",
        |t| t.replace("  plugins:\n", "  ensure:\n    p95: 100000\n  plugins:\n"),
        &srv.url(),
        &[],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("ok: p95 < 100000"));
    assert!(!stdout(&out).contains("maxErrorRate"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apdex_and_metrics_by_endpoint() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = run_script(
        dir.path(),
        "apdex.yml",
        &srv.url(),
        &["-o", json.to_str().unwrap()],
        &[],
    )
    .await;
    // 1 satisfied, 1 tolerated, 1 frustrated: (1 + 0.5) / 3 = 0.5, so apdex > 0.9 fails.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let r = report(&json);
    for name in ["apdex.satisfied", "apdex.tolerated", "apdex.frustrated"] {
        assert_eq!(count(&r, name), 1, "{name}: {r}");
    }
    assert!(
        stdout(&out).contains("Apdex score: 0.5 (poor)"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("fail: apdex > 0.9"));
    // Named as written (the template, not 200), without the query; by name; another
    // port's errors under its name.
    let p = "plugins.metrics-by-endpoint";
    assert_eq!(count(&r, &format!("{p}./health.codes.200")), 1);
    assert_eq!(
        count(&r, &format!("{p}./delay/{{{{ wait }}}}.codes.200")),
        1,
        "{r}"
    );
    assert_eq!(count(&r, &format!("{p}./delay/600 (slow).codes.200")), 1);
    assert_eq!(
        count(&r, &format!("{p}.:1/refused.errors.ECONNREFUSED")),
        1,
        "{r}"
    );
    assert!(r["aggregate"]["summaries"][format!("{p}.response_time./health")].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_line_flags_as_artillery_takes_them() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "common.yml",
        &format!(
            "config:\n  target: \"{}\"\n  phases:\n    - duration: 1\n      arrivalCount: 3\n  variables:\n    shared: common\n",
            srv.url()
        ),
    );
    write(dir.path(), "users.csv", "ann\n");
    write(
        dir.path(),
        ".env",
        "# for the test\nexport FLAGS_TOKEN=\"t0k\"\nOTHER=1\n",
    );
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/load/scripts/flags.yml"),
    )
    .unwrap();
    write(dir.path(), "flags.yml", &text);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_throng-load"))
        .current_dir(dir.path())
        .args([
            "run",
            "flags.yml",
            "--config",
            "common.yml",
            "-p",
            "users.csv",
            "-v",
            r#"{"color": "red"}"#,
            "--dotenv",
            ".env",
            "--scenario-name",
            "chosen",
            "-q",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        srv.seen_paths("/"),
        vec!["/flags/ann/red/small/t0k/common".to_string(); 3]
    );
    assert!(!stdout(&out).contains("Metrics for period"), "-q");
    assert!(stdout(&out).contains("Summary report"));

    // A scenario name that is not there is refused with the names that are.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_throng-load"))
        .current_dir(dir.path())
        .args([
            "run",
            "flags.yml",
            "--config",
            "common.yml",
            "--scenario-name",
            "nope",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("chosen, other"), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_has_verdict_endpoints_command_and_short_periods() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let page = dir.path().join("r.html");
    let out = run_script(
        dir.path(),
        "ensure.yml",
        &srv.url(),
        &[
            "-o",
            json.to_str().unwrap(),
            "--report",
            page.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let r = report(&json);
    let verdict = &r["verdict"];
    assert_eq!(verdict["passed"], false);
    assert_eq!(verdict["exitCode"], 1);
    assert_eq!(
        verdict["reasons"],
        serde_json::json!(["check failed: maxErrorRate < 0"])
    );
    let notes = verdict["notes"].to_string();
    assert!(
        notes.contains("4 of 4 virtual users failed")
            && notes.contains("Failed capture or match: 4"),
        "{notes}"
    );
    // One row per endpoint as written, busiest first, with codes and percentiles.
    let rows = r["endpoints"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["/items/{{ $randomNumber(1, 2) }}", "/status/200"]);
    for e in rows {
        assert_eq!(e["count"], 4, "{e}");
        assert_eq!(e["codes"]["200"], 4, "{e}");
        assert!(e["p99"].as_f64().unwrap() >= e["p50"].as_f64().unwrap());
    }
    // The command with its arguments; a 1 s run is reported per second.
    let command = r["setup"]["commandLine"].as_str().unwrap();
    assert!(
        command.starts_with("throng-load run ")
            && command.contains(" -o ")
            && command.contains("--report"),
        "{command}"
    );
    assert!(
        r["intermediate"][0]["widthMs"].as_u64().unwrap() <= 1_500,
        "{r}"
    );
    let text = stdout(&out);
    assert!(
        text.contains("Endpoints:") && text.contains("/status/200"),
        "{text}"
    );
    assert!(
        text.contains("FAILED (exit code 1): check failed: maxErrorRate < 0"),
        "{text}"
    );
    assert!(
        !text.contains("Metrics for period"),
        "short periods print a line each: {text}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    for needle in [
        "id=\"verdict\"",
        "id=\"endpoints\"",
        "@media (max-width: 640px)",
        "class=\"scroll\"",
    ] {
        assert!(html.contains(needle), "{needle}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processor_functions_hooks_before_flow_metrics_and_exit_code() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let js = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/load/scripts/processor.js"),
    )
    .unwrap();
    write(dir.path(), "processor.js", &js);
    let json = dir.path().join("r.json");
    let out = run_script(
        dir.path(),
        "processor.yml",
        &srv.url(),
        &["-o", json.to_str().unwrap()],
        &[],
    )
    .await;
    // process.exitCode = 17 in an afterResponse hook.
    assert_eq!(out.status.code(), Some(17), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"undefinedFn\" is not exported"),
        "{}",
        stderr(&out)
    );
    let seen = srv.seen();
    // beforeRequest rewrote the URL and added a header from the variable a function set.
    let signed: Vec<_> = seen
        .iter()
        .filter(|s| s.uri.starts_with("/signed/"))
        .collect();
    assert_eq!(signed.len(), 2);
    for s in &signed {
        assert_eq!(s.uri, "/signed/tok-ann");
        assert_eq!(s.headers["x-sig"], "sig-tok-ann");
    }
    assert!(srv.seen_paths("/plain/").is_empty());
    // The before flow ran once; what it captured, what afterResponse read and what the
    // async function set reach the later requests.
    assert_eq!(seen.iter().filter(|s| s.uri == "/items").count(), 3);
    assert_eq!(srv.seen_paths("/after/"), vec!["/after/tok-ann/yes/42"; 2]);
    // whileTrue is asked after each turn.
    let mut turns = srv.seen_paths("/while/");
    turns.sort();
    assert_eq!(
        turns,
        ["/while/0", "/while/0", "/while/1", "/while/1", "/while/2", "/while/2"]
    );
    let r = report(&json);
    assert_eq!(count(&r, "custom.tokens"), 2);
    assert_eq!(
        r["aggregate"]["summaries"]["custom.latency"]["count"], 2,
        "{r}"
    );
    // An undefined function counts and goes on; an error passed to next fails the user.
    assert_eq!(count(&r, "errors.Undefined function \"undefinedFn\""), 2);
    assert_eq!(count(&r, "errors.boom"), 2);
    assert_eq!(count(&r, "vusers.failed"), 2);
    assert!(srv.seen_paths("/never").is_empty());
}

#[tokio::test]
async fn a_processor_that_cannot_load_is_said_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "p.js",
        "const faker = require('@faker-js/faker');\nmodule.exports = { f: function (c, e, next) { next(); } };\n",
    );
    let yaml = "config:\n  target: \"http://127.0.0.1:1\"\n  processor: ./p.js\n  phases:\n    - pause: 0.1\nscenarios:\n  - flow:\n      - function: f\n";
    write(dir.path(), "s.yml", yaml);
    let out = super::throng_load(&["run", dir.path().join("s.yml").to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("config.processor ./p.js: cannot load")
            && err.contains("require('@faker-js/faker')"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_followed_as_artillery_follows_them() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = run_script(
        dir.path(),
        "redirects.yml",
        &srv.url(),
        &["-o", json.to_str().unwrap()],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = report(&json);
    // 3 hops, 1 not followed, then 11 redirect answers, the last one too many.
    assert_eq!(count(&r, "http.codes.302"), 3 + 1 + 11, "{r}");
    assert_eq!(count(&r, "http.codes.303"), 1);
    assert_eq!(count(&r, "errors.ERR_TOO_MANY_REDIRECTS"), 1);
    assert_eq!(count(&r, "vusers.failed"), 1);
    let seen = srv.seen();
    // The first chain landed with the cookies set on the way; the capture read the landing.
    let landed = seen.iter().find(|s| s.uri == "/redirect/0").unwrap();
    let mut cookies: Vec<&str> = landed.headers["cookie"]
        .to_str()
        .unwrap()
        .split("; ")
        .collect();
    cookies.sort();
    assert_eq!(cookies, ["hop1=1", "hop2=1", "hop3=1"]);
    assert_eq!(srv.seen_paths("/landing/"), ["/landing/landed"]);
    // The POST's 303 became a GET without a body.
    let after_post = seen.iter().find(|s| s.uri == "/landing").unwrap();
    assert_eq!(after_post.method, "GET");
    assert!(after_post.body.is_empty());
    // followRedirect: false stopped at the 302.
    assert_eq!(seen.iter().filter(|s| s.uri == "/redirect/0").count(), 1);
    assert!(srv.seen_paths("/never").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_run_one_script_and_merge_one_report() {
    let srv = server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut agents = Vec::new();
    for _ in 0..2 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        agents.push(listener.local_addr().unwrap().to_string());
        tokio::spawn(throng_load::distributed::serve_agent(listener));
    }
    write(dir.path(), "ids.csv", "a\nb\nc\n");
    let yaml = "config:\n  target: \"http://127.0.0.1:1\"\n  payload:\n    path: ids.csv\n    fields: [id]\n  phases:\n    - duration: 2\n      arrivalCount: 11\n    - duration: 1\n      vusers: 3\n  ensure:\n    thresholds:\n      - http.response_time.p99: 100000\nscenarios:\n  - flow:\n      - get:\n          url: \"/w/{{ id }}\"\n";
    write(dir.path(), "w.yml", yaml);
    let json = dir.path().join("r.json");
    let out = super::throng_load(&[
        "run",
        dir.path().join("w.yml").to_str().unwrap(),
        "-t",
        &srv.url(),
        "--workers",
        &agents.join(","),
        "-o",
        json.to_str().unwrap(),
    ])
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stderr(&out),
        stdout(&out)
    );
    let r = report(&json);
    let sent = srv.seen_paths("/w/").len() as u64;
    // Every request the agents sent is in the one report, timings included.
    assert!(
        sent > 11,
        "11 arrivals and the closed phase's iterations: {sent}"
    );
    assert_eq!(count(&r, "http.requests"), sent, "{r}");
    assert_eq!(count(&r, "http.codes.200"), sent);
    assert_eq!(
        r["aggregate"]["summaries"]["http.response_time"]["count"].as_u64(),
        Some(sent)
    );
    let arrivals = r["phases"][0]["vusers_created"].as_u64().unwrap();
    assert_eq!(arrivals, 11, "6 + 5 arrivals: {}", r["phases"]);
    assert_eq!(
        r["phases"][1]["vusers_target"].as_u64(),
        Some(3),
        "2 + 1 users held"
    );
    let per_period: u64 = r["intermediate"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["counters"]["http.requests"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(per_period, sent, "the periods add up to the aggregate");
    assert!(
        r["aggregate"].get("raw").is_none(),
        "histograms stay between agent and controller"
    );
    assert!(stdout(&out).contains("ok: http.response_time.p99 < 100000"));
}
