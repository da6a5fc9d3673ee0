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
    pub fn load(
        spec: &PayloadSpec,
        dir: &Path,
        key: &str,
        warnings: &mut Vec<String>,
    ) -> Result<Self, String> {
        let path = dir.join(&spec.path);
        let text = std::fs::read(&path).map_err(|e| {
            format!(
                "{key}.path: cannot read {:?} (resolved to {}): {e}",
                spec.path,
                path.display()
            )
        })?;
        let csv = CsvOptions::read(spec, key, warnings)?;
        let mut builder = csv::ReaderBuilder::new();
        builder
            .has_headers(false)
            .delimiter(csv.delimiter)
            .quote(csv.quote)
            .flexible(true);
        if let Some(escape) = csv.escape {
            builder.escape(Some(escape)).double_quote(false);
        }
        let mut reader = builder.from_reader(text.as_slice());
        let cast = spec.cast.unwrap_or(true);
        let skip_empty = csv.skip_empty_lines;
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

/// How the CSV is read: the payload's own keys, then Artillery's `options` (csv-parse's:
/// `delimiter`, `quote`, `escape`, `skip_empty_lines`); other options are warned about.
struct CsvOptions {
    delimiter: u8,
    quote: u8,
    escape: Option<u8>,
    skip_empty_lines: bool,
}

fn one_byte(v: &str, what: &str) -> Result<u8, String> {
    match v {
        "\\t" | "\t" => Ok(b'\t'),
        d if d.len() == 1 => Ok(d.as_bytes()[0]),
        d => Err(format!("{what}: must be one character, got {d:?}")),
    }
}

impl CsvOptions {
    fn read(spec: &PayloadSpec, key: &str, warnings: &mut Vec<String>) -> Result<Self, String> {
        let mut o = Self {
            delimiter: b',',
            quote: b'"',
            escape: None,
            skip_empty_lines: spec.skip_empty_lines.unwrap_or(true),
        };
        if let Some(options) = &spec.options {
            let Some(map) = options.as_object() else {
                return Err(format!(
                    "{key}.options: a map of CSV options, got {options}"
                ));
            };
            for (k, v) in map {
                let text = || {
                    v.as_str()
                        .ok_or_else(|| format!("{key}.options.{k}: a string, got {v}"))
                };
                match k.as_str() {
                    "delimiter" => {
                        o.delimiter = one_byte(text()?, &format!("{key}.options.delimiter"))?
                    }
                    "quote" => o.quote = one_byte(text()?, &format!("{key}.options.quote"))?,
                    "escape" => {
                        o.escape = Some(one_byte(text()?, &format!("{key}.options.escape"))?)
                    }
                    "skip_empty_lines" | "skipEmptyLines" => {
                        o.skip_empty_lines = v.as_bool().unwrap_or(true)
                    }
                    // Rows of any length are read already.
                    "relax_column_count" | "relaxColumnCount" => {}
                    other => {
                        warnings.push(format!("{key}.options.{other}: not supported; ignored"))
                    }
                }
            }
        }
        if let Some(d) = spec.delimiter.as_deref() {
            o.delimiter = one_byte(d, &format!("{key}.delimiter"))?;
        }
        Ok(o)
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
