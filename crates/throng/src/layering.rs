//! Keeps the dependency direction: binary -> app -> services -> platform ->
//! store, with `base` (clock, metrics) below all of them. A module may name
//! only modules below it; a service names no other service. Checked over the
//! source text, so an arrow back up fails the test suite.

use std::path::{Path, PathBuf};

/// (folder under src/, paths it must never name)
const RULES: &[(&str, &[&str])] = &[
    (
        "base",
        &[
            "crate::store",
            "crate::platform",
            "crate::services",
            "crate::app",
            "crate::bench",
            "crate::cli",
        ],
    ),
    (
        "store",
        &[
            "crate::platform",
            "crate::services",
            "crate::app",
            "crate::bench",
            "crate::cli",
        ],
    ),
    (
        "platform",
        &[
            "crate::services",
            "crate::app",
            "crate::bench",
            "crate::cli",
        ],
    ),
    ("services", &["crate::app", "crate::bench", "crate::cli"]),
];

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

/// Code lines only: `//` comments may name anything.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or("")))
}

#[test]
fn imports_point_down() {
    let mut offences = Vec::new();
    for (folder, banned) in RULES {
        let mut files = Vec::new();
        rust_files(&src().join(folder), &mut files);
        assert!(!files.is_empty(), "src/{folder} has no Rust files");
        for file in files {
            let text = std::fs::read_to_string(&file).expect("readable source");
            for (n, line) in code_lines(&text) {
                for b in *banned {
                    if line.contains(b) {
                        offences.push(format!("{}:{n} names {b}", file.display()));
                    }
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "imports that point up:\n{}",
        offences.join("\n")
    );
}

#[test]
fn a_service_names_no_other_service() {
    let services = src().join("services");
    let names: Vec<String> = std::fs::read_dir(&services)
        .expect("services folder")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() >= 2, "found services {names:?}");
    let mut offences = Vec::new();
    for name in &names {
        let mut files = Vec::new();
        rust_files(&services.join(name), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).expect("readable source");
            for (n, line) in code_lines(&text) {
                for other in names.iter().filter(|o| *o != name) {
                    // `super::...::other` reaches a sibling service too.
                    if line.contains(&format!("services::{other}"))
                        || line.contains(&format!("super::{other}"))
                    {
                        offences.push(format!("{}:{n} names the {other} service", file.display()));
                    }
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "services that know each other:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_app_cli_and_bench_name_no_service() {
    let services: Vec<String> = std::fs::read_dir(src().join("services"))
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
