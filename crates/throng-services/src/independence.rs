//! What the crates' dependencies cannot state: a service names no other
//! service (each reaches the others' events only through the event log).
//! Checked over the source text. (That no service reaches a database driver
//! or the bench's comparison designs, Cargo states: this crate depends on
//! neither.)

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

/// Code lines only: `//` comments may name anything.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or("")))
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
