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
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/load/scripts")
            .join(script),
    )
    .unwrap();
    write(dir, script, &text);
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
    // $loopCount from 0, loopValue names the element.
    let mut loops = paths("/loop/");
    loops.sort();
    assert_eq!(loops, ["/loop/0/a", "/loop/0/a", "/loop/1/b", "/loop/1/b"]);
    // count: "2-3" runs 2 or 3 times per user.
    for name in ["ann", "bob"] {
        let n = paths(&format!("/range/{name}")).len();
        assert!((2..=3).contains(&n), "{name}: {n}");
    }
    // think: "300ms" waits 300 ms.
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
    assert_eq!(paths("/always").len(), 2);
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
