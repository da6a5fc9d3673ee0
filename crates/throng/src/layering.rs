//! What the crates' dependencies cannot state: the app, the CLI, the bench
//! harness and the index page name no service (they reach services through
//! `services::all()` and the service seam only). Checked over the source
//! text. (That a service names no other service is checked beside the
//! services; that no layer imports one above it, by Cargo.)

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The services' folder, in their own crate.
fn services_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../throng-services/src/services")
}

/// Code lines only: `//` comments may name anything.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or("")))
}

#[test]
fn the_app_cli_and_bench_name_no_service() {
    let services: Vec<String> = std::fs::read_dir(services_src())
        .expect("services folder")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut files = vec![
        src().join("app.rs"),
        src().join("cli.rs"),
        src().join("index.html"),
    ];
    rust_files(&src().join("bench"), &mut files);
    let mut offences = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (n, line) in code_lines(&text) {
            for s in &services {
                if line.contains(&format!("services::{s}")) || line.contains(&format!("/{s}/")) {
                    offences.push(format!("{}:{n} names the {s} service", file.display()));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "the app knows a service:\n{}",
        offences.join("\n")
    );
}
