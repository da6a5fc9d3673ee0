//! The command line as a person meets it: help text, lists, the log file.

use std::time::Duration;

use crate::helpers::{throng_bin, ProcessServer};

async fn output(args: &[&str]) -> std::process::Output {
    tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(throng_bin())
            .args(args)
            .env("RUST_LOG", "warn")
            .output(),
    )
    .await
    .expect("the command finishes in time")
    .expect("the command runs")
}

/// Help is prose: no rustdoc links (`[crate::...]`, ``[`Name`]``) leak from
/// the doc comments clap turns into help.
#[tokio::test]
async fn load_help_has_no_code_links() {
    for args in [
        &["load", "url", "--help"][..],
        &["load", "run", "--help"],
        &["load", "--help"],
    ] {
        let out = output(args).await;
        assert!(out.status.success(), "throng {args:?} exits 0");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("Usage"), "throng {args:?}:\n{help}");
        for link in ["[crate::", "[`", "`]"] {
            assert!(
                !help.contains(link),
                "throng {args:?} prints a code link {link:?}:\n{help}"
            );
        }
    }
}

/// `bench --no-seed` reuses a seeded directory, so it needs `--data-dir`:
/// without one it stops at once and says so, instead of measuring an empty
/// temporary directory or a store sealed with other secrets.
#[tokio::test]
async fn bench_without_seeding_needs_the_seeded_directory() {
    let out = output(&["bench", "booking", "--no-seed", "--runs", "1"]).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--data-dir"), "{err}");
}

/// `bench --list`: every description starts in the same column.
#[tokio::test]
async fn bench_list_is_aligned() {
    let out = output(&["bench", "--list"]).await;
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let columns: Vec<usize> = text
        .lines()
        .skip(1)
        .map(|line| {
            let name_end = 2 + line[2..].find(' ').expect("name then description");
            name_end + line[name_end..].find(|c: char| c != ' ').unwrap()
        })
        .collect();
    assert!(columns.len() > 1, "{text}");
    assert!(
        columns.windows(2).all(|w| w[0] == w[1]),
        "descriptions start at columns {columns:?}:\n{text}"
    );
}

/// A log written to a file has no ANSI escape sequences.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_file_is_plain_text() {
    let data = tempfile::TempDir::new().unwrap();
    let server = ProcessServer::start(data.path(), None, &[]).await;
    let log = server.log_text();
    assert!(log.contains("INFO"), "the log has lines:\n{log}");
    assert!(
        !log.contains('\u{1b}'),
        "escape sequences in the log:\n{log:?}"
    );
}

/// `throng load run --config FILE` takes Artillery's configuration file (YAML), not the
/// server's TOML; THRONG_CONFIG, the server's, does not reach it.
#[tokio::test]
async fn load_run_config_is_artillerys() {
    let dir = tempfile::tempdir().unwrap();
    let common = dir.path().join("common.yml");
    std::fs::write(
        &common,
        "config:\n  target: \"http://127.0.0.1:1\"\n  phases:\n    - duration: 1\n      arrivalCount: 2\n",
    )
    .unwrap();
    let script = dir.path().join("s.yml");
    std::fs::write(
        &script,
        "scenarios:\n  - flow:\n      - get:\n          url: /\n",
    )
    .unwrap();
    let server_toml = dir.path().join("throng.toml");
    std::fs::write(&server_toml, "listen = \"127.0.0.1:0\"\n").unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(throng_bin())
            .args(["load", "run", script.to_str().unwrap(), "--config"])
            .arg(&common)
            .env("THRONG_CONFIG", &server_toml)
            .env("RUST_LOG", "warn")
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Nothing listens on port 1: both virtual users were refused there.
    assert!(stdout.contains("errors.ECONNREFUSED: "), "{stdout}");
    assert!(stdout.contains("vusers.created: "), "{stdout}");
}
