//! `{{ var }}` templates as Artillery renders them: variables (with `a.b[0]` paths),
//! `$randomNumber(a, b)`, `$randomString(n)`, `$uuid`, `$timestamp`, `$env.NAME`
//! (`$processEnvironment.NAME`), and loop variables.
//!
//! A string that is exactly one template keeps the variable's type, so `{{ id }}` in a JSON
//! body stays a number when the CSV cast made it one. Unknown variables render empty, as in
//! Artillery.

use rand::{distributions::Alphanumeric, Rng};
use serde_json::{Map, Value};

pub type Vars = Map<String, Value>;

/// Renders every `{{ ... }}` (and Handlebars' unescaped `{{{ ... }}}`, which Artillery
/// renders the same) in `text` as a string.
pub fn render_str(text: &str, vars: &Vars) -> String {
    if !text.contains("{{") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let triple = rest[open + 2..].starts_with('{');
        let (start, end) = if triple { (3, "}}}") } else { (2, "}}") };
        let Some(close) = rest[open + start..].find(end) else {
            break;
        };
        out.push_str(&rest[..open]);
        let expr = &rest[open + start..open + start + close];
        out.push_str(&to_text(&eval(expr.trim(), vars)));
        rest = &rest[open + start + close + end.len()..];
    }
    out.push_str(rest);
    out
}

/// Renders a JSON value recursively; a string that is a single template keeps its type.
pub fn render_value(value: &Value, vars: &Vars) -> Value {
    match value {
        Value::String(s) => match whole_template(s) {
            Some(expr) => eval(expr, vars),
            None => Value::String(render_str(s, vars)),
        },
        Value::Array(items) => Value::Array(items.iter().map(|v| render_value(v, vars)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (render_str(k, vars), render_value(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `Some(expr)` when `s` is exactly `{{ expr }}` (or `{{{ expr }}}`).
pub fn whole_template(s: &str) -> Option<&str> {
    let t = s.trim();
    let inner = match t.strip_prefix("{{{").and_then(|i| i.strip_suffix("}}}")) {
        Some(i) => i,
        None => t.strip_prefix("{{")?.strip_suffix("}}")?,
    };
    (!inner.contains("{{") && !inner.contains("}}")).then(|| inner.trim())
}

/// A value as it appears inside a string.
pub fn to_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn eval(expr: &str, vars: &Vars) -> Value {
    if let Some(args) = call(expr, "$randomNumber") {
        let nums: Vec<i64> = args.iter().filter_map(|a| a.trim().parse().ok()).collect();
        let (lo, hi) = match nums.as_slice() {
            [a, b] => (*a.min(b), *a.max(b)),
            _ => (0, 100),
        };
        return Value::from(rand::thread_rng().gen_range(lo..=hi));
    }
    if let Some(args) = call(expr, "$randomString") {
        let len = args
            .first()
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or(10usize)
            .min(4096);
        let s: String = rand::thread_rng()
            .sample_iter(&Alphanumeric)
            .take(len)
            .map(char::from)
            .collect();
        return Value::String(s);
    }
    match expr {
        "$uuid" | "$uuid()" => return Value::String(uuid::Uuid::new_v4().to_string()),
        "$timestamp" | "$timestamp()" => return Value::from(crate::report::now_ms()),
        _ => {}
    }
    for prefix in ["$env.", "$processEnvironment."] {
        if let Some(name) = expr.strip_prefix(prefix) {
            return std::env::var(name)
                .map(Value::String)
                .unwrap_or(Value::Null);
        }
    }
    lookup(expr, vars).cloned().unwrap_or(Value::Null)
}

/// `Some(args)` when `expr` is `name(args...)` (or just `name`).
fn call<'a>(expr: &'a str, name: &str) -> Option<Vec<&'a str>> {
    let rest = expr.strip_prefix(name)?.trim();
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
    Some(if inner.trim().is_empty() {
        Vec::new()
    } else {
        inner.split(',').collect()
    })
}

/// Looks up `a.b[0].c` in the variables.
pub fn lookup<'a>(path: &str, vars: &'a Vars) -> Option<&'a Value> {
    let mut parts = path.split('.').flat_map(split_index);
    let first = parts.next()?;
    let mut cur = vars.get(first.as_key()?)?;
    for part in parts {
        cur = match part {
            Part::Key(k) => cur.get(k)?,
            Part::Index(i) => cur.get(i)?,
        };
    }
    Some(cur)
}

enum Part<'a> {
    Key(&'a str),
    Index(usize),
}

impl<'a> Part<'a> {
    fn as_key(&self) -> Option<&'a str> {
        match self {
            Part::Key(k) => Some(k),
            Part::Index(_) => None,
        }
    }
}

/// `items[0][1]` -> `items`, `0`, `1`.
fn split_index(seg: &str) -> Vec<Part<'_>> {
    let mut out = Vec::new();
    let (head, mut rest) = seg.split_at(seg.find('[').unwrap_or(seg.len()));
    if !head.is_empty() {
        out.push(Part::Key(head));
    }
    while let Some(stripped) = rest.strip_prefix('[') {
        let Some(end) = stripped.find(']') else { break };
        let inner = stripped[..end].trim_matches(|c| c == '\'' || c == '"');
        out.push(match inner.parse() {
            Ok(i) => Part::Index(i),
            Err(_) => Part::Key(inner),
        });
        rest = &stripped[end + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars() -> Vars {
        json!({"id": 7, "name": "ann", "user": {"tags": ["a", "b"]}})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn renders_strings_and_keeps_types() {
        let v = vars();
        assert_eq!(
            render_str("/u/{{id}}?n={{ name }}&t={{ user.tags[1] }}", &v),
            "/u/7?n=ann&t=b"
        );
        assert_eq!(render_str("x{{ missing }}y", &v), "xy");
        assert_eq!(render_str("/u/{{{ id }}}/{{{name}}}", &v), "/u/7/ann");
        assert_eq!(render_value(&json!("{{{ id }}}"), &v), json!(7));
        let body = render_value(
            &json!({"id": "{{ id }}", "label": "n-{{id}}", "list": ["{{name}}"]}),
            &v,
        );
        assert_eq!(body, json!({"id": 7, "label": "n-7", "list": ["ann"]}));
    }

    #[test]
    fn functions() {
        let v = vars();
        let n: i64 = render_str("{{ $randomNumber(5, 9) }}", &v).parse().unwrap();
        assert!((5..=9).contains(&n));
        assert_eq!(render_str("{{$randomString(12)}}", &v).len(), 12);
        assert_eq!(render_str("{{ $uuid }}", &v).len(), 36);
    }
}
