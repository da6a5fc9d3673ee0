//! CSV payloads: rows loaded once at start, handed to virtual users in random or sequence
//! order, with Artillery's `cast` (numbers become numbers), `skipHeader`, `delimiter` and
//! `loadAll`.

use std::{
    path::Path,
    sync::atomic::{AtomicUsize, Ordering},
};

use rand::Rng;
use serde_json::Value;

use super::model::{Payload as PayloadSpec, PayloadOrder};

/// Refuse payload files larger than this many rows; they would not fit a small machine.
pub const PAYLOAD_ROWS_MAX: usize = 5_000_000;

#[derive(Debug)]
pub struct Payload {
    pub fields: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    pub order: PayloadOrder,
    /// `loadAll: true` with `name`: all rows as a list of objects in this variable.
    pub load_all_name: Option<String>,
    cursor: AtomicUsize,
}

impl Payload {
    /// Loads `spec.path` relative to `dir`; `key` names the config key in errors.
    pub fn load(spec: &PayloadSpec, dir: &Path, key: &str) -> Result<Self, String> {
        let path = dir.join(&spec.path);
        let text = std::fs::read(&path).map_err(|e| {
            format!(
                "{key}.path: cannot read {:?} (resolved to {}): {e}",
                spec.path,
                path.display()
            )
        })?;
        let delimiter = match spec.delimiter.as_deref() {
            None => b',',
            Some(d) if d.len() == 1 => d.as_bytes()[0],
            Some("\\t") => b'\t',
            Some(d) => return Err(format!("{key}.delimiter: must be one character, got {d:?}")),
        };
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .delimiter(delimiter)
            .flexible(true)
            .from_reader(text.as_slice());
        let cast = spec.cast.unwrap_or(true);
        let skip_empty = spec.skip_empty_lines.unwrap_or(true);
        let mut header: Option<Vec<String>> = None;
        let mut rows = Vec::new();
        for (i, record) in reader.records().enumerate() {
            let record = record.map_err(|e| format!("{key}: {}: {e}", path.display()))?;
            if skip_empty && record.iter().all(|f| f.trim().is_empty()) {
                continue;
            }
            if spec.skip_header && header.is_none() {
                header = Some(record.iter().map(|s| s.trim().to_string()).collect());
                continue;
            }
            if rows.len() >= PAYLOAD_ROWS_MAX {
                return Err(format!(
                    "{key}: {} has more than {PAYLOAD_ROWS_MAX} rows (line {})",
                    path.display(),
                    i + 1
                ));
            }
            rows.push(record.iter().map(|f| cell(f, cast)).collect());
        }
        let fields = if !spec.fields.is_empty() {
            spec.fields.clone()
        } else if let Some(h) = header {
            h
        } else if spec.load_all {
            Vec::new()
        } else {
            return Err(format!("{key}.fields: list the column names (or set skipHeader: true to use the header row)"));
        };
        if rows.is_empty() && !spec.load_all {
            return Err(format!("{key}: {} has no data rows", path.display()));
        }
        if spec.load_all && spec.name.is_none() {
            return Err(format!("{key}.name: loadAll needs a variable name"));
        }
        Ok(Self {
            fields,
            rows,
            order: spec.order.unwrap_or_default(),
            load_all_name: spec.load_all.then(|| spec.name.clone()).flatten(),
            cursor: AtomicUsize::new(0),
        })
    }

    /// The row for the next virtual user.
    pub fn pick(&self) -> &[Value] {
        let i = match self.order {
            PayloadOrder::Sequence => self.cursor.fetch_add(1, Ordering::Relaxed) % self.rows.len(),
            PayloadOrder::Random => rand::thread_rng().gen_range(0..self.rows.len()),
        };
        &self.rows[i]
    }

    /// Adds this payload's variables for one virtual user.
    pub fn bind(&self, vars: &mut serde_json::Map<String, Value>) {
        if let Some(name) = &self.load_all_name {
            let all = self
                .rows
                .iter()
                .map(|r| Value::Object(self.object(r)))
                .collect();
            vars.insert(name.clone(), Value::Array(all));
            return;
        }
        let row = self.pick();
        for (field, value) in self.fields.iter().zip(row) {
            vars.insert(field.clone(), value.clone());
        }
    }

    fn object(&self, row: &[Value]) -> serde_json::Map<String, Value> {
        self.fields
            .iter()
            .cloned()
            .zip(row.iter().cloned())
            .collect()
    }
}

/// Artillery (csv-parse with `cast: true`) turns numeric cells into numbers.
fn cell(text: &str, cast: bool) -> Value {
    if cast {
        let t = text.trim();
        if let Ok(i) = t.parse::<i64>() {
            return Value::from(i);
        }
        if t.chars().any(|c| c.is_ascii_digit()) && !t.contains(|c: char| c.is_alphabetic()) {
            if let Ok(f) = t.parse::<f64>() {
                if let Some(n) = serde_json::Number::from_f64(f) {
                    return Value::Number(n);
                }
            }
        }
    }
    Value::String(text.to_string())
}
