//! Integration tests for throng-load: real servers on 127.0.0.1:0, scripts in temp folders,
//! the `throng-load` binary for exit codes. Long tests (tens of seconds) are named `long_*`
//! and still run with `cargo test`.

mod accuracy;
mod artillery;
mod bad_scripts;
mod closed;
mod features;
mod https;
mod reports;
mod server;

use std::{path::Path, process::Output, sync::Arc};

use throng_load::{
    report::Report,
    runner::{self, RunOptions},
    script::{self, LoadOptions},
};

pub fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// Runs the standalone binary with `args` (without blocking the test's runtime).
pub async fn throng_load(args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_throng-load"))
        .args(args)
        .output()
        .await
        .expect("run throng-load")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Loads `yaml` (payloads relative to `dir`) and runs it quietly.
pub async fn run_yaml(dir: &Path, yaml: &str, opts: LoadOptions) -> runner::RunOutcome {
    let script =
        script::parse(yaml, dir, &opts).unwrap_or_else(|e| panic!("script should load: {e}"));
    runner::run(
        Arc::new(script),
        RunOptions {
            print: false,
            ..Default::default()
        },
    )
    .await
}

pub fn counter(report: &Report, name: &str) -> u64 {
    report.aggregate.counter(name)
}
