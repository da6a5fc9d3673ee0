//! Warnings printed once per distinct key (e.g. per missing JavaScript function), as Artillery
//! does, with a cap so a script full of hooks cannot flood the terminal.

use std::{collections::BTreeSet, sync::Mutex};

const DISTINCT_MAX: usize = 100;

#[derive(Default)]
pub struct Warnings {
    seen: Mutex<BTreeSet<String>>,
}

impl Warnings {
    /// Prints `message` to stderr the first time `key` is seen.
    pub fn once(&self, key: &str, message: impl FnOnce() -> String) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= DISTINCT_MAX || !seen.insert(key.to_string()) {
            return;
        }
        eprintln!("warning: {}", message());
    }
}
