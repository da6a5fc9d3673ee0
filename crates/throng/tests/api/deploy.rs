//! What `deploy/` ships, run as an operator would: the configuration file
//! as `throng serve --config` reads it (its keys are the flags; a flag or
//! its variable wins over the file; an unknown key is refused by name),
//! and the systemd unit's own `ExecStart` line serving with the shipped
//! file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::helpers::{throng_bin, Api};

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(file)
}

/// A `throng` process started with `args` and `env`, until stopped or
/// dropped.
struct Node {
    api: Api,
    child: tokio::process::Child,
    /// Its stdout, kept open: a server whose stdout closed could not print.
    _stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Node {
    /// Kills the process and waits for it: its store is free again.
    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

async fn start(args: &[String], env: &[(&str, String)]) -> Node {
    let mut child = tokio::process::Command::new(throng_bin())
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("throng starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(addr) = line.strip_prefix("throng listening on http://") {
                return addr.trim().parse().unwrap();
            }
        }
        panic!("throng exited before listening");
    })
    .await
    .expect("listening within 60 s");
    Node {
        api: Api::new(addr),
        child,
        _stdout: lines,
    }
}

/// The variables a test sets so a shipped file serves on loopback port 0
/// in a folder of its own (they win over the file).
fn local(dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("THRONG_LISTEN", "127.0.0.1:0".into()),
        ("THRONG_DATA_DIR", dir.join("data").display().to_string()),
        ("THRONG_METRICS_LISTEN", "127.0.0.1:0".into()),
    ]
}

/// 413 for a body over `--body-limit-bytes`: an effect a test can see.
async fn post_of(api: &Api, bytes: usize) -> u16 {
    let body = serde_json::json!({ "padding": "x".repeat(bytes) });
    api.post_json("/api/booking/registrations", &body)
        .await
        .status
}

#[tokio::test]
async fn the_file_sets_flags_and_a_flag_wins_over_it() {
    let dir = tempfile::TempDir::new().unwrap();
    let file = dir.path().join("throng.toml");
    std::fs::write(
        &file,
        "listen = \"127.0.0.1:0\"\nbody-limit-bytes = 1000\nno-notifier = true\n\
         trusted-proxies = [\"10.0.0.0/8\", \"192.168.0.0/16\"]\n",
    )
    .unwrap();
    let data = dir.path().join("data").display().to_string();
    let config = file.display().to_string();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["serve", "--config", &config, "--data-dir", &data]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let node = start(&args(&[]), &[]).await;
    assert_eq!(node.api.get("/health").await.status, 200);
    assert_eq!(
        post_of(&node.api, 2000).await,
        413,
        "the file's limit holds"
    );
    node.stop().await;
    let node = start(&args(&["--body-limit-bytes", "100000"]), &[]).await;
    assert_ne!(post_of(&node.api, 2000).await, 413, "the flag wins");
    node.stop().await;
    let node = start(&args(&[]), &[("THRONG_BODY_LIMIT_BYTES", "100000".into())]).await;
    assert_ne!(post_of(&node.api, 2000).await, 413, "the variable wins");
}

#[tokio::test]
async fn a_key_that_is_no_flag_is_refused_by_name() {
    let dir = tempfile::TempDir::new().unwrap();
    for (text, named) in [
        (
            "listen = \"127.0.0.1:0\"\nlisten-port = 8080\n",
            "`listen-port` is not a flag",
        ),
        ("demo = true\n", "`demo` cannot be set in the file"),
        ("[booking]\nutc = 1\n", "the file is flat"),
        ("listen = \n", "throng.toml"),
    ] {
        let file = dir.path().join("throng.toml");
        std::fs::write(&file, text).unwrap();
        let out = tokio::process::Command::new(throng_bin())
            .args(["serve", "--config", file.to_str().unwrap()])
            .output()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text}");
        assert!(err.contains(named), "{text}: {err}");
    }
}

#[tokio::test]
async fn the_unit_serves_with_the_shipped_file() {
    let unit = std::fs::read_to_string(deploy("throng.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("the unit has an ExecStart");
    let shipped = deploy("throng.toml");
    let words: Vec<String> = exec
        .split_whitespace()
        .map(|w| match w {
            "/usr/local/bin/throng" => throng_bin(),
            "/etc/throng/throng.toml" => shipped.display().to_string(),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(words[0], throng_bin(), "{exec}");
    for needed in ["User=throng", "StateDirectory=throng", "KillSignal=SIGTERM"] {
        assert!(unit.lines().any(|l| l == needed), "{needed}");
    }
    let dir = tempfile::TempDir::new().unwrap();
    let node = start(&words[1..], &local(dir.path())).await;
    assert_eq!(node.api.get("/health").await.status, 200);
    assert_eq!(node.api.get("/booking/").await.status, 200);
    // The Dockerfile starts the same way, with the same file.
    let docker = std::fs::read_to_string(deploy("Dockerfile")).unwrap();
    assert!(docker.contains("COPY deploy/throng.toml /etc/throng/throng.toml"));
    assert!(docker.contains("THRONG_CONFIG=/etc/throng/throng.toml"));
}
