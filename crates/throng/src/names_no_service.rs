//! What the crates' dependencies cannot state: the app, the CLI, the bench
//! harness and the index page name no service (they reach services through
//! `services::all()` and the service seam only). Checked over the source
//! text. (That a service names no other service is checked beside the
//! services; that no layer imports one above it, by Cargo. The bench's
//! experiments for a service, in a module named after it, name theirs.)

use std::path::{Path, PathBuf};

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
    // The bench's files outside its per-service experiment modules (and
    // their folders): the harness and the platform's own experiments.
    let bench = Path::new(env!("CARGO_MANIFEST_DIR")).join("../throng-bench/src");
    let bench_files: Vec<PathBuf> = std::fs::read_dir(&bench)
        .expect("the bench's source folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter(|p| {
            let stem = p.file_stem().unwrap_or_default().to_string_lossy();
            !services.iter().any(|s| *s == stem)
        })
        .collect();
    assert!(bench_files.len() >= 5, "found {bench_files:?}");
    files.extend(bench_files);
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
